/*
 * testutil_http.c - the remote tests' file server (testutil_http.h): a
 * forked process accepting on a loopback port, one thread per connection.
 */
#define _GNU_SOURCE
#include "testutil_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct server {
    const char *root;
    int delay_ms, flags;
    tu_http_counts *counts;
} server;

typedef struct conn {
    const server *sv;
    int fd;
} conn;

int tu_send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

static int is_tar(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && !strcmp(path + n - 4, ".tar");
}

/* The request's method and path (the head read up to its blank line). */
static int read_request(int fd, char *method, size_t mcap, char *path, size_t pcap)
{
    char head[8192];
    size_t n = 0;
    while (n < sizeof head - 1) {
        ssize_t r = recv(fd, head + n, sizeof head - 1 - n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        n += (size_t)r;
        head[n] = '\0';
        if (strstr(head, "\r\n\r\n"))
            break;
    }
    char fmt[32];
    snprintf(fmt, sizeof fmt, "%%%zus %%%zus", mcap - 1, pcap - 1);
    return sscanf(head, fmt, method, path) == 2 ? 0 : -1;
}

static void answer(const server *sv, int fd)
{
    char method[16], path[1024];
    if (read_request(fd, method, sizeof method, path, sizeof path) != 0)
        return;
    atomic_fetch_add(&sv->counts->requests, 1);
    int get = !strcmp(method, "GET"), tar = is_tar(path);
    if ((sv->flags & TU_HTTP_STALL) || ((sv->flags & TU_HTTP_STALL_TAR) && get && tar)) {
        for (;;)
            pause(); /* the test kills the server */
    }
    char file[8192];
    struct stat st;
    int f = -1;
    if (path[0] == '/' && !strstr(path, "..") &&
        snprintf(file, sizeof file, "%.4000s%s", sv->root, path) < (int)sizeof file)
        f = open(file, O_RDONLY | O_CLOEXEC);
    if (f < 0 || fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
        static const char nf[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
                                 "Connection: close\r\n\r\n";
        (void)tu_send_all(fd, nf, sizeof nf - 1);
        if (f >= 0)
            close(f);
        return;
    }
    if (get && tar) {
        int now = atomic_fetch_add(&sv->counts->tar_gets_now, 1) + 1;
        for (int m = atomic_load(&sv->counts->tar_gets_max); now > m &&
             !atomic_compare_exchange_weak(&sv->counts->tar_gets_max, &m, now);)
            ;
        if (sv->delay_ms > 0)
            sleep_ms(sv->delay_ms);
    }
    char hdr[256];
    int hl = snprintf(hdr, sizeof hdr,
                      "HTTP/1.1 200 OK\r\nContent-Length: %lld\r\nETag: \"%llx-%llx\"\r\n"
                      "Connection: close\r\n\r\n",
                      (long long)st.st_size, (unsigned long long)st.st_size,
                      (unsigned long long)st.st_mtime);
    (void)tu_send_all(fd, hdr, (size_t)hl);
    if (get) {
        char buf[65536];
        ssize_t r;
        while ((r = read(f, buf, sizeof buf)) > 0)
            (void)tu_send_all(fd, buf, (size_t)r);
    }
    if (get && tar)
        atomic_fetch_sub(&sv->counts->tar_gets_now, 1);
    close(f);
}

static void *conn_main(void *arg)
{
    conn *c = arg;
    answer(c->sv, c->fd);
    shutdown(c->fd, SHUT_WR);
    close(c->fd);
    free(c);
    return NULL;
}

static void serve(int lfd, const server *sv)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
                continue;
            _exit(1);
        }
        conn *c = malloc(sizeof *c);
        pthread_t t;
        if (!c) {
            close(fd);
            continue;
        }
        c->sv = sv;
        c->fd = fd;
        if (pthread_create(&t, NULL, conn_main, c) != 0) {
            close(fd);
            free(c);
            continue;
        }
        pthread_detach(t);
    }
}

int tu_http_start(tu_http *h, const char *root, int delay_ms, int flags)
{
    memset(h, 0, sizeof *h);
    h->pid = -1;
    h->counts = mmap(NULL, sizeof *h->counts, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                     -1, 0);
    if (h->counts == MAP_FAILED) {
        h->counts = NULL;
        return -1;
    }
    memset(h->counts, 0, sizeof *h->counts);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 256) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &len) != 0) {
        if (lfd >= 0)
            close(lfd);
        tu_http_stop(h);
        return -1;
    }
    h->port = ntohs(a.sin_port);
    int ready[2]; /* the server says it runs (its socket listens already) */
    if (pipe2(ready, O_CLOEXEC) != 0) {
        close(lfd);
        tu_http_stop(h);
        return -1;
    }
    pid_t parent = getpid();
    h->pid = fork();
    if (h->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the test */
        if (getppid() != parent || write(ready[1], "", 1) != 1)
            _exit(1);
        close(ready[0]);
        close(ready[1]);
        server sv = {root, delay_ms, flags, h->counts};
        serve(lfd, &sv);
        _exit(0);
    }
    close(lfd); /* the server's now; the port stays bound */
    close(ready[1]);
    char c;
    ssize_t n = h->pid > 0 ? read(ready[0], &c, 1) : -1;
    close(ready[0]);
    if (n != 1) {
        tu_http_stop(h);
        return -1;
    }
    return 0;
}

void tu_http_stop(tu_http *h)
{
    if (h->pid > 0) {
        kill(h->pid, SIGKILL);
        waitpid(h->pid, NULL, 0);
    }
    h->pid = -1;
    if (h->counts)
        munmap(h->counts, sizeof *h->counts);
    h->counts = NULL;
}
