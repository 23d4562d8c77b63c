/*
 * testhttp.h - a small HTTP/1.1 server on 127.0.0.1 for the tests of the
 * fetch layer and S3 listings: a free port, each connection on a thread of
 * its own, one request per connection (read up to the end of its head),
 * answered by the test's handler, then closed. The handler writes the whole
 * response itself (th_sendf, tu_send_all), so that it can answer anything a
 * misbehaving server would: a trickle, a stall, a redirect, bytes no sane
 * server sends.
 *
 * th_stop waits (at most 15 s) for the handlers still running; a handler
 * that waits or trickles polls th_stopping (th_sleep does) and returns once
 * the server stops or the client went away. Header-only (static functions),
 * as tarwrite.h is: a test includes it once.
 */
#ifndef RF_TESTHTTP_H
#define RF_TESTHTTP_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "testutil_http.h" /* tu_send_all */

typedef struct th_server th_server;

typedef struct th_req {
    th_server *srv;
    int fd; /* the connection: write the response here */
    int n;  /* this request's number, from 0, in order of arrival */
    char method[16];
    char path[4096];  /* with its query */
    char head[16384]; /* the request head, NUL-terminated */
} th_req;

typedef void th_handler(th_req *q, void *ctx);

struct th_server {
    int listen_fd, stop_pipe[2], port;
    pthread_t thread;
    th_handler *fn;
    void *ctx;
    _Atomic int requests; /* requests read so far */
    _Atomic int running;  /* handlers running */
    _Atomic int stopping;
};

static inline int th_stopping(const th_server *s)
{
    return atomic_load(&s->stopping);
}

static inline int th_sendf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int th_sendf(int fd, const char *fmt, ...)
{
    char buf[16384];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return tu_send_all(fd, buf, n < (int)sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* Sleeps ms, or less when the server stops or the client closed: 0, or -1
 * in those cases. */
static inline int th_sleep(th_req *q, int ms)
{
    struct pollfd p[2] = {{q->srv->stop_pipe[0], POLLIN, 0}, {q->fd, POLLIN | POLLRDHUP, 0}};
    int64_t end;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    end = (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000 + ms;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        int64_t left = end - ((int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000);
        if (left <= 0)
            return 0;
        int r = poll(p, 2, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r > 0 && (p[0].revents || (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))))
            return -1;
        if (r > 0 && (p[1].revents & POLLIN)) {
            char c;
            if (recv(q->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
                return -1; /* the client closed its end */
            p[1].events = POLLRDHUP;
        }
    }
}

/* The value of header `name` in the request (NUL-terminated in out, cut at
 * cap), or NULL. */
static inline const char *th_header(const th_req *q, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    for (const char *l = strstr(q->head, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n")) {
        const char *h = l + 2;
        if (!strncasecmp(h, name, n) && h[n] == ':') {
            const char *v = h + n + 1, *e = strstr(v, "\r\n");
            while (*v == ' ')
                v++;
            size_t len = e ? (size_t)(e - v) : strlen(v);
            snprintf(out, cap, "%.*s", (int)len, v);
            return out;
        }
    }
    return NULL;
}

typedef struct th_conn {
    th_server *srv;
    int fd;
} th_conn;

static void *th_conn_main(void *arg)
{
    th_conn *c = arg;
    th_req *q = calloc(1, sizeof *q);
    size_t n = 0;
    if (q) {
        q->srv = c->srv;
        q->fd = c->fd;
        while (n < sizeof q->head - 1 && !strstr(q->head, "\r\n\r\n")) {
            struct pollfd p = {c->fd, POLLIN, 0};
            if (poll(&p, 1, 5000) <= 0)
                break;
            ssize_t r = recv(c->fd, q->head + n, sizeof q->head - 1 - n, 0);
            if (r <= 0)
                break;
            n += (size_t)r;
            q->head[n] = '\0';
        }
        if (strstr(q->head, "\r\n\r\n")) {
            sscanf(q->head, "%15s %4095s", q->method, q->path);
            q->n = atomic_fetch_add(&c->srv->requests, 1);
            c->srv->fn(q, c->srv->ctx);
        }
    }
    free(q);
    close(c->fd);
    atomic_fetch_sub(&c->srv->running, 1);
    free(c);
    return NULL;
}

static void *th_accept_main(void *arg)
{
    th_server *s = arg;
    for (;;) {
        struct pollfd p[2] = {{s->listen_fd, POLLIN, 0}, {s->stop_pipe[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno == EINTR)
            continue;
        if (p[1].revents)
            return NULL;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        th_conn *c = fd >= 0 ? malloc(sizeof *c) : NULL;
        if (!c) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        c->srv = s;
        c->fd = fd;
        atomic_fetch_add(&s->running, 1);
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &at, th_conn_main, c) != 0)
            th_conn_main(c);
        pthread_attr_destroy(&at);
    }
}

/* Starts s with handler fn: 0, or -1. */
static inline int th_start(th_server *s, th_handler *fn, void *ctx)
{
    memset(s, 0, sizeof *s);
    s->fn = fn;
    s->ctx = ctx;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0 || bind(s->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s->listen_fd, (struct sockaddr *)&a, &len) != 0 ||
        listen(s->listen_fd, 128) != 0 || pipe2(s->stop_pipe, O_CLOEXEC) != 0)
        return -1;
    s->port = ntohs(a.sin_port);
    return pthread_create(&s->thread, NULL, th_accept_main, s) == 0 ? 0 : -1;
}

/* The environment a test of S3 requests starts from: no credentials, CA
 * bundle or endpoint of the machine that runs it; the credentials file is
 * creds_file (one that need not exist), the region us-east-1, and the
 * endpoint s (NULL: none). */
static inline void th_aws_env(const char *creds_file, const th_server *s)
{
    static const char *const unset[] = {
        "AWS_ACCESS_KEY_ID",   "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
        "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL",      "AWS_CA_BUNDLE",     "CURL_CA_BUNDLE",
        "SSL_CERT_FILE",       "SSL_CERT_DIR"};
    for (size_t i = 0; i < sizeof unset / sizeof unset[0]; i++)
        unsetenv(unset[i]);
    setenv("AWS_SHARED_CREDENTIALS_FILE", creds_file, 1);
    setenv("AWS_REGION", "us-east-1", 1);
    if (s) {
        char ep[64];
        snprintf(ep, sizeof ep, "http://127.0.0.1:%d", s->port);
        setenv("AWS_ENDPOINT_URL", ep, 1);
    }
}

/* Stops s: no more connections; the running handlers are told and waited
 * for (at most 15 s). */
static inline void th_stop(th_server *s)
{
    atomic_store(&s->stopping, 1);
    if (write(s->stop_pipe[1], "x", 1) == 1)
        pthread_join(s->thread, NULL);
    for (int i = 0; i < 1500 && atomic_load(&s->running) > 0; i++)
        usleep(10000);
    close(s->listen_fd);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
}

#endif
