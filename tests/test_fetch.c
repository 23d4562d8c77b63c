/*
 * test_fetch.c - the fetch layer (lib/remote/fetch.h) driven directly.
 *
 * Caps on a GET of unknown size (what manifest.json's GETs use): a small
 * HTTP/1.1 server runs on a thread of the test, on 127.0.0.1 and a free
 * port, and answers GET /len/N with N bytes and their Content-Length,
 * GET /nolen/N with N bytes and no Content-Length (the end of the body is
 * the connection's), anything else with 404; every response closes its
 * connection. Checked: a body at max_size arrives whole, one byte over
 * fails at once (no retry, no byte written when the Content-Length says
 * so, never more than the cap written otherwise) with a message naming the
 * method, the URL and the limit; GETs sharing a budget fail, once it is
 * spent, each with `over` saying so, and never write more than it
 * together; a 404 is no cap's failure; a GET waiting for a transfer's room
 * holds no HEAD queued after it back (GET /hold/N is answered once the
 * test lets it go; each connection has its own thread). Not run without
 * libcurl.
 *
 * The http(s) URL an s3:// URL is asked at (rf__fetch_http_url): plain
 * string work, checked with and without libcurl: on AWS a bucket that is
 * one DNS label is its own host (virtual host), one with dots (or capitals,
 * '_') goes path style to https://s3.REGION.amazonaws.com/BUCKET/KEY; with
 * an endpoint, path style for every bucket.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fetch.h"
#include "ringfeed.h"
#include "testhttp.h"

/* ---- the server ----------------------------------------------------------- */

static th_server g_srv;
/* a byte written to g_hold[1] lets the answers to GET /hold/N go on */
static int g_hold[2] = {-1, -1};

/* Byte i of every body: what the test checks the file against. */
static char body_byte(size_t i)
{
    return (char)('a' + i % 26);
}

/* A send that fails is the client gone (a GET it aborted): nothing to do. */
static void answer(th_req *q, void *ctx)
{
    (void)ctx;
    int c = q->fd;
    const char *path = strcmp(q->method, "GET") ? "" : q->path;
    unsigned long len = 0;
    int with_len = sscanf(path, "/len/%lu", &len) == 1;
    if (!with_len && sscanf(path, "/hold/%lu", &len) == 1) {
        struct pollfd h = {g_hold[0], POLLIN, 0};
        poll(&h, 1, 10000); /* the byte stays: every held answer goes on */
        with_len = 1;
    }
    int without = !with_len && sscanf(path, "/nolen/%lu", &len) == 1;
    if (!with_len && !without) {
        th_sendf(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope");
        return;
    }
    if (with_len)
        th_sendf(c,
                 "HTTP/1.1 200 OK\r\nContent-Length: %lu\r\nETag: \"e%lu\"\r\n"
                 "Connection: close\r\n\r\n",
                 len, len);
    else
        th_sendf(c, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
    char chunk[4096];
    for (size_t at = 0; at < len;) {
        size_t k = len - at < sizeof chunk ? len - at : sizeof chunk;
        for (size_t i = 0; i < k; i++)
            chunk[i] = body_byte(at + i);
        if (tu_send_all(c, chunk, k) != 0)
            return;
        at += k;
    }
}

static int setup(void **state)
{
    (void)state;
    if (pipe(g_hold) != 0)
        return -1;
    return th_start(&g_srv, answer, NULL);
}

static int teardown(void **state)
{
    (void)state;
    if (write(g_hold[1], "x", 1) != 1) /* no answer stays held */
        return -1;
    th_stop(&g_srv); /* waits for the held answers, which have seen the byte */
    close(g_hold[0]);
    close(g_hold[1]);
    return 0;
}

/* ---- the client ---------------------------------------------------------------- */

static rf_fetch *fetcher(void)
{
    rf_fetch *f;
    char err[512];
    rf_fetch_opts o = {.retries = 2, .timeout_ms = 10000, .parallel = 4};
    if (rf__fetch_create(&f, &o, err, sizeof err) != 0)
        fail_msg("rf__fetch_create: %s", err);
    return f;
}

/* A GET of /PATH into a new memory file (closed by the caller). */
static void get_into(rf_fetch_req *q, char *url, size_t cap, const char *path, uint64_t max,
                     _Atomic uint64_t *budget)
{
    snprintf(url, cap, "http://127.0.0.1:%d/%s", g_srv.port, path);
    int fd = memfd_create("test_fetch", MFD_CLOEXEC);
    assert_true(fd >= 0);
    *q = (rf_fetch_req){
        .op = RF__FETCH_GET, .url = url, .fd = fd, .max_size = max, .budget = budget};
}

static uint64_t file_size(int fd)
{
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    return (uint64_t)st.st_size;
}

/* The GET succeeded with exactly n bytes, each as the server sends them. */
static void check_body(const rf_fetch_req *q, uint64_t n)
{
    if (q->rc != 0)
        fail_msg("%s: %s", q->url, q->err);
    assert_int_equal(q->size, n);
    assert_int_equal(q->over, 0);
    char *p = malloc(n);
    assert_non_null(p);
    assert_int_equal(pread(q->fd, p, n, 0), (ssize_t)n);
    for (uint64_t i = 0; i < n; i++)
        if (p[i] != body_byte(i))
            fail_msg("%s: byte %llu differs", q->url, (unsigned long long)i);
    free(p);
}

/* The GET failed on its cap, in one try, with a message naming the method,
 * the URL and the limit. */
static void check_over(const rf_fetch_req *q, int over, uint64_t limit)
{
    assert_int_equal(q->rc, RF_E_SOURCE);
    assert_int_equal(q->over, over);
    assert_int_equal(q->tries, 1);
    char want[300];
    snprintf(want, sizeof want, "GET %s: over the ", q->url);
    if (!strstr(q->err, want))
        fail_msg("message lacks \"%s\": %s", want, q->err);
    snprintf(want, sizeof want, "limit of %llu bytes", (unsigned long long)limit);
    if (over == RF__FETCH_OVER_MAX && !strstr(q->err, want))
        fail_msg("message lacks \"%s\": %s", want, q->err);
}

/* GETs of /A and /B (each capped at max) submitted, then waited for. */
static void get_two(rf_fetch *f, rf_fetch_req q[2], char u[2][200], const char *a, const char *b,
                    uint64_t max)
{
    get_into(&q[0], u[0], sizeof u[0], a, max, NULL);
    get_into(&q[1], u[1], sizeof u[1], b, max, NULL);
    for (int i = 0; i < 2; i++)
        rf__fetch_submit(f, &q[i]);
    for (int i = 0; i < 2; i++)
        rf__fetch_wait(f, &q[i]);
}

static void test_get_at_max_size_arrives_whole(void **state)
{
    (void)state;
    rf_fetch *f = fetcher();
    char u[2][200];
    rf_fetch_req q[2];
    get_two(f, q, u, "len/100000", "nolen/100000", 100000);
    for (int i = 0; i < 2; i++) {
        check_body(&q[i], 100000);
        close(q[i].fd);
    }
    assert_string_equal(q[0].etag, "\"e100000\""); /* the GET's own validator */
    rf__fetch_destroy(f, 0);
}

static void test_get_over_max_size_fails_at_once(void **state)
{
    (void)state;
    rf_fetch *f = fetcher();
    char u[2][200];
    rf_fetch_req q[2];
    get_two(f, q, u, "len/100001", "nolen/300000", 100000);
    check_over(&q[0], RF__FETCH_OVER_MAX, 100000);
    check_over(&q[1], RF__FETCH_OVER_MAX, 100000);
    if (!strstr(q[0].err, "Content-Length 100001"))
        fail_msg("message lacks the Content-Length: %s", q[0].err);
    assert_int_equal(file_size(q[0].fd), 0); /* refused before any byte */
    assert_true(file_size(q[1].fd) <= 100000);
    for (int i = 0; i < 2; i++)
        close(q[i].fd);
    rf_fetch_totals t;
    rf__fetch_totals(f, &t);
    assert_int_equal(t.requests, 2);
    assert_int_equal(t.retries, 0);
    rf__fetch_destroy(f, 0);
}

/* Three GETs of 40000 bytes on a budget of 100000: two fit, one fails;
 * without Content-Length the same, the budget drawn as bytes arrive. */
static void test_shared_budget_caps_the_total(void **state)
{
    (void)state;
    rf_fetch *f = fetcher();
    for (int nolen = 0; nolen < 2; nolen++) {
        _Atomic uint64_t budget = 100000;
        char u[3][200];
        rf_fetch_req q[3];
        for (int i = 0; i < 3; i++) {
            get_into(&q[i], u[i], sizeof u[i], nolen ? "nolen/40000" : "len/40000", 0, &budget);
            rf__fetch_submit(f, &q[i]);
        }
        int ok = 0;
        uint64_t written = 0, drawn = 0;
        for (int i = 0; i < 3; i++) {
            rf__fetch_wait(f, &q[i]);
            if (q[i].rc == 0) {
                check_body(&q[i], 40000);
                ok++;
            } else { /* its bytes dropped and given back to the others */
                check_over(&q[i], RF__FETCH_OVER_BUDGET, 0);
                assert_int_equal(q[i].drawn, 0);
                assert_int_equal(file_size(q[i].fd), 0);
            }
            written += file_size(q[i].fd);
            drawn += q[i].drawn;
            close(q[i].fd);
        }
        /* the budget holds two whole bodies: two succeed whichever way the
         * three interleave (without a length each draws as bytes arrive,
         * and the one that runs short gives its part back) */
        assert_int_equal(ok, 2);
        assert_int_equal(written, 80000);
        assert_int_equal(drawn + budget, 100000); /* every byte drawn is accounted for */
        assert_int_equal(drawn, 80000);
    }
    rf__fetch_destroy(f, 0);
}

static void test_missing_is_not_a_cap(void **state)
{
    (void)state;
    rf_fetch *f = fetcher();
    _Atomic uint64_t budget = 10;
    char u[200];
    rf_fetch_req q;
    get_into(&q, u, sizeof u, "missing", 10, &budget);
    rf__fetch_submit(f, &q);
    rf__fetch_wait(f, &q);
    assert_int_equal(q.rc, RF_E_SOURCE);
    assert_int_equal(q.http, 404);
    assert_int_equal(q.over, 0);
    assert_int_equal(budget, 10); /* an error's body is not the object's */
    if (!strstr(q.err, "HTTP status 404"))
        fail_msg("message lacks the status: %s", q.err);
    close(q.fd);
    rf__fetch_destroy(f, 0);
}

static void *release_later(void *arg)
{
    int64_t *at = arg;
    usleep(500000);
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    *at = (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
    if (write(g_hold[1], "x", 1) != 1)
        fail_msg("release: %s", strerror(errno));
    return NULL;
}

/* With room for one transfer, taken by a GET the server holds, a second
 * GET waits for room, and a HEAD queued after it runs at once (small
 * requests have their own room): it ends before the first GET is let go. */
static void test_waiting_get_holds_no_small_request_back(void **state)
{
    (void)state;
    rf_fetch *f;
    char err[512];
    rf_fetch_opts o = {.retries = 0, .timeout_ms = 10000, .parallel = 1};
    if (rf__fetch_create(&f, &o, err, sizeof err) != 0)
        fail_msg("rf__fetch_create: %s", err);
    char ua[200], ub[200], uc[200];
    rf_fetch_req a, b, c;
    get_into(&a, ua, sizeof ua, "hold/1000", 0, NULL);
    get_into(&b, ub, sizeof ub, "len/10", 0, NULL);
    snprintf(uc, sizeof uc, "http://127.0.0.1:%d/len/5", g_srv.port);
    c = (rf_fetch_req){.op = RF__FETCH_HEAD, .url = uc};
    rf__fetch_submit(f, &a);
    rf__fetch_submit(f, &b);
    rf__fetch_submit(f, &c);
    int64_t released = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, &released), 0);
    rf__fetch_wait(f, &c);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t c_done = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    pthread_join(t, NULL);
    assert_true(released > 0 && c_done < released);
    rf__fetch_wait(f, &a);
    rf__fetch_wait(f, &b);
    check_body(&a, 1000);
    check_body(&b, 10);
    close(a.fd);
    close(b.fd);
    rf__fetch_destroy(f, 0);
}

/* ---- the URL an s3:// URL is asked at -------------------------------------------- */

static void expect_url(const rf_fetch_s3 *c, const char *url, const char *query, const char *want)
{
    char out[1024];
    if (rf__fetch_http_url(c, url, query, out, sizeof out) != 0)
        fail_msg("%s: no URL", url);
    if (strcmp(out, want))
        fail_msg("%s: %s, not %s", url, out, want);
}

static void test_aws_urls(void **state)
{
    (void)state;
    rf_fetch_s3 c = {.region = "eu-west-1"};
    /* a bucket that is one DNS label: its own host name */
    expect_url(&c, "s3://my-bucket-2/a/b c+d.tar", NULL,
               "https://my-bucket-2.s3.eu-west-1.amazonaws.com/a/b%20c%2Bd.tar");
    expect_url(&c, "s3://my-bucket-2", "list-type=2&prefix=a%2F",
               "https://my-bucket-2.s3.eu-west-1.amazonaws.com/?list-type=2&prefix=a%2F");
    /* dots (which *.s3.eu-west-1.amazonaws.com's certificate would not
     * match), capitals or '_': path style on the regional host */
    expect_url(&c, "s3://my.data.bucket/train/x-0000.tar", NULL,
               "https://s3.eu-west-1.amazonaws.com/my.data.bucket/train/x-0000.tar");
    expect_url(&c, "s3://my.data.bucket", "encoding-type=url&list-type=2&prefix=",
               "https://s3.eu-west-1.amazonaws.com/my.data.bucket/"
               "?encoding-type=url&list-type=2&prefix=");
    expect_url(&c, "s3://Old_Bucket/k", NULL, "https://s3.eu-west-1.amazonaws.com/Old_Bucket/k");
}

static void test_endpoint_and_http_urls(void **state)
{
    (void)state;
    rf_fetch_s3 c = {.region = "us-east-1", .endpoint = "http://127.0.0.1:9000//"};
    /* an endpoint: path style for every bucket, as before */
    expect_url(&c, "s3://my.data.bucket/k/\r.tar", NULL,
               "http://127.0.0.1:9000/my.data.bucket/k/%0D.tar");
    expect_url(&c, "s3://data", "list-type=2", "http://127.0.0.1:9000/data/?list-type=2");
    expect_url(&c, "https://host.example/a b.tar", NULL, "https://host.example/a b.tar");
    expect_url(&c, "http://host/x", "q=1", "http://host/x?q=1");
    char out[64];
    assert_int_equal(rf__fetch_http_url(&c, "s3:///k", NULL, out, sizeof out), -1);
    assert_int_equal(rf__fetch_http_url(&c, "s3://data/a-key-too-long-for-a-buffer-of-64-bytes",
                                        NULL, out, sizeof out),
                     -1);
}

int main(void)
{
    const struct CMUnitTest urls[] = {
        cmocka_unit_test(test_aws_urls),
        cmocka_unit_test(test_endpoint_and_http_urls),
    };
    int rc = cmocka_run_group_tests_name("urls", urls, NULL, NULL);
#ifndef RF_HAVE_CURL
    print_message("[  SKIPPED ] test_fetch: the GETs, built without libcurl (RF_WITH_CURL)\n");
    return rc;
#else
    const struct CMUnitTest gets[] = {
        cmocka_unit_test(test_get_at_max_size_arrives_whole),
        cmocka_unit_test(test_get_over_max_size_fails_at_once),
        cmocka_unit_test(test_shared_budget_caps_the_total),
        cmocka_unit_test(test_missing_is_not_a_cap),
        cmocka_unit_test(test_waiting_get_holds_no_small_request_back),
    };
    return rc | cmocka_run_group_tests_name("gets", gets, setup, teardown);
#endif
}
