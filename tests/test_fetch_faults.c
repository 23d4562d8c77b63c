/*
 * test_fetch_faults.c - the fetch layer (lib/remote/fetch.h) against servers that
 * misbehave, on 127.0.0.1 (testhttp.h): what a try's timeout means, where a
 * request may go, and what its messages say and never say.
 *
 * Checked: a server that trickles 2 bytes a second, one that stalls after
 * some bytes and one that never answers each end the try as a timeout
 * within fetch_timeout_ms (and a sixteenth), retried as one, the whole
 * request within its documented window; a signed S3 request follows no
 * redirect (its session token never reaches the other host), an unsigned
 * one follows to http(s) only, and an endpoint that is not http(s) is
 * refused at create; a 403 gives S3's code and message and whether and
 * with what the request was signed; a later try's message holds no earlier
 * try's S3 code; bytes from the server (reason phrase, code, message) are
 * escaped; a URL's user:password and query are never in a message; curl's
 * own detail (the port it could not reach) is. Not run without libcurl.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fetch.h"
#include "ringfeed.h"
#include "testhttp.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- the servers ------------------------------------------------------------ */

typedef struct site {
    char location[256];     /* where /redirect sends */
    _Atomic int slowdowns;  /* /slowdown answers so far */
    _Atomic int token_seen; /* a request came with x-amz-security-token */
    _Atomic int auth_seen;  /* ... with Authorization */
} site;

static th_server g_srv, g_other;
static site g_site, g_other_site;

static void answer(th_req *q, void *ctx)
{
    site *s = ctx;
    char v[8192];
    if (th_header(q, "x-amz-security-token", v, sizeof v))
        atomic_store(&s->token_seen, 1);
    if (th_header(q, "authorization", v, sizeof v))
        atomic_store(&s->auth_seen, 1);
    const char *p = q->path;
    if (strstr(p, "/trickle")) { /* 2 bytes a second, for 8 s at most */
        th_sendf(q->fd, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
        for (int i = 0; i < 16 && tu_send_all(q->fd, "x", 1) == 0 && th_sleep(q, 500) == 0; i++)
            ;
    } else if (strstr(p, "/stall")) { /* 200000 bytes at once, then nothing */
        th_sendf(q->fd, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n");
        static char chunk[200000];
        memset(chunk, 'y', sizeof chunk);
        if (tu_send_all(q->fd, chunk, sizeof chunk) == 0)
            th_sleep(q, 8000);
    } else if (strstr(p, "/silent")) {
        th_sleep(q, 8000);
    } else if (strstr(p, "/redirect")) {
        th_sendf(q->fd,
                 "HTTP/1.1 307 Temporary Redirect\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n",
                 s->location);
    } else if (strstr(p, "/forbidden")) {
        const char *body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied"
                           "</Code><Message>Access Denied by the bucket policy</Message>"
                           "<RequestId>R1</RequestId></Error>";
        if (!strcmp(q->method, "HEAD")) /* as S3 answers a HEAD: no body, no code */
            th_sendf(q->fd, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
        else
            th_sendf(q->fd, "HTTP/1.1 403 Forbidden\r\nContent-Length: %zu\r\n\r\n%s", strlen(body),
                     body);
    } else if (strstr(p, "/slowdown")) { /* a code, then none */
        const char *body = atomic_fetch_add(&s->slowdowns, 1) == 0
                               ? "<Error><Code>SlowDown</Code><Message>Reduce</Message></Error>"
                               : "";
        th_sendf(q->fd, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: %zu\r\n\r\n%s",
                 strlen(body), body);
    } else if (strstr(p, "/escape")) {
        const char *body = "<Error><Code>Bad\aCode</Code><Message>m\x1b]0;title\a \xff"
                           "</Message></Error>";
        th_sendf(q->fd, "HTTP/1.1 403 Forb\x1b[2Jidden\xc3\r\nContent-Length: %zu\r\n\r\n%s",
                 strlen(body), body);
    } else if (strstr(p, "/ok")) {
        th_sendf(q->fd, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789");
    } else {
        th_sendf(q->fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope");
    }
}

static int setup(void **state)
{
    (void)state;
    if (th_start(&g_srv, answer, &g_site) != 0 || th_start(&g_other, answer, &g_other_site) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    th_stop(&g_srv);
    th_stop(&g_other);
    return 0;
}

/* No credentials and no endpoint from the machine running the tests but
 * g_srv. */
static void clean_env(void)
{
    th_aws_env("/nonexistent/ringfeed-test-credentials", &g_srv);
}

static void signed_env(void)
{
    setenv("AWS_ACCESS_KEY_ID", "AKIATESTKEY12345678", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret", 1);
    setenv("AWS_SESSION_TOKEN", "session-token-that-must-stay-home", 1);
}

static rf_fetch *fetcher(int retries, int64_t timeout_ms)
{
    rf_fetch *f;
    char err[512];
    rf_fetch_opts o = {.retries = retries, .timeout_ms = timeout_ms, .parallel = 2};
    if (rf__fetch_create(&f, &o, err, sizeof err) != 0)
        fail_msg("rf__fetch_create: %s", err);
    return f;
}

/* One GET of url into a memory file; *secs: how long it took. */
static void get(rf_fetch *f, rf_fetch_req *q, const char *url, double *secs)
{
    int fd = memfd_create("test_fetch_faults", MFD_CLOEXEC);
    assert_true(fd >= 0);
    *q = (rf_fetch_req){.op = RF__FETCH_GET, .url = url, .fd = fd};
    double t0 = now_s();
    rf__fetch_submit(f, q);
    rf__fetch_wait(f, q);
    if (secs)
        *secs = now_s() - t0;
    close(fd);
}

/* A GET of g_srv's path by a new fetcher (retries, timeout_ms), without
 * credentials; *secs: how long it took. */
static void timed_get(const char *path, int retries, int64_t timeout_ms, rf_fetch_req *q,
                      double *secs)
{
    clean_env();
    rf_fetch *f = fetcher(retries, timeout_ms);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/%s", g_srv.port, path);
    get(f, q, url, secs);
    q->url = NULL; /* url was ours */
    rf__fetch_destroy(f, 0);
    print_message("%s: %d %s in %.2f s\n", path, q->tries, q->tries == 1 ? "try" : "tries", *secs);
}

static void has(const char *msg, const char *want)
{
    if (!strstr(msg, want))
        fail_msg("message lacks \"%s\": %s", want, msg);
}

static void lacks(const char *msg, const char *unwanted)
{
    if (strstr(msg, unwanted))
        fail_msg("message holds \"%s\": %s", unwanted, msg);
}

/* ---- timeouts ------------------------------------------------------------------- */

/* 2 bytes a second: under the floor, each try ends at its first check. */
static void test_trickle_times_out(void **state)
{
    (void)state;
    rf_fetch_req q;
    double secs;
    timed_get("trickle", 1, 1000, &q, &secs);
    assert_int_equal(q.rc, RF_E_SOURCE);
    assert_int_equal(q.tries, 2); /* retried like any timeout */
    has(q.err, "Timeout was reached: ");
    has(q.err, " bytes in the last 1000 ms, under the floor of 1024 bytes/s");
    /* two tries of 1 s and a sixteenth, a backoff of 0.15 s at most */
    if (secs > 3.0)
        fail_msg("took %.2f s: %s", secs, q.err);
}

/* A stall after 200000 bytes: each try ends within timeout_ms and a
 * sixteenth of it after the last byte, never before timeout_ms. */
static void test_stall_ends_each_try_on_time(void **state)
{
    (void)state;
    rf_fetch_req q;
    double secs;
    timed_get("stall", 2, 1000, &q, &secs);
    assert_int_equal(q.rc, RF_E_SOURCE);
    assert_int_equal(q.tries, 3);
    has(q.err, "0 bytes in the last 1000 ms");
    /* documented window: 3 x 17/16 s + backoffs (at most 0.15 + 0.3 s) */
    if (secs < 3.0 || secs > 3 * 1.0625 + 0.45 + 0.5)
        fail_msg("3 tries took %.2f s: %s", secs, q.err);
}

/* A server that accepts and never answers: the try ends at timeout_ms. */
static void test_silent_server_times_out_at_the_timeout(void **state)
{
    (void)state;
    rf_fetch_req q;
    double secs;
    timed_get("silent", 0, 1000, &q, &secs);
    assert_int_equal(q.rc, RF_E_SOURCE);
    has(q.err, "no answer in 1000 ms (fetch_timeout_ms)");
    if (secs < 0.99 || secs > 1.5)
        fail_msg("took %.2f s: %s", secs, q.err);
}

/* ---- where a request may go ------------------------------------------------------- */

static void test_signed_request_follows_no_redirect(void **state)
{
    (void)state;
    clean_env();
    signed_env();
    snprintf(g_site.location, sizeof g_site.location, "http://127.0.0.1:%d/stolen", g_other.port);
    atomic_store(&g_other_site.token_seen, 0);
    int before = atomic_load(&g_other.requests);
    rf_fetch *f = fetcher(0, 5000);
    rf_fetch_req q;
    get(f, &q, "s3://bucket/redirect.tar", NULL);
    assert_int_equal(q.rc, RF_E_SOURCE);
    assert_int_equal(q.http, 307);
    has(q.err, "a signed request follows no redirect");
    assert_int_equal(atomic_load(&g_other.requests), before); /* never sent on */
    assert_int_equal(atomic_load(&g_other_site.token_seen), 0);
    lacks(q.err, "session-token-that-must-stay-home");
    rf__fetch_destroy(f, 0);

    /* unsigned (an http URL): followed, to http */
    clean_env();
    snprintf(g_site.location, sizeof g_site.location, "http://127.0.0.1:%d/ok", g_other.port);
    f = fetcher(0, 5000);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/redirect", g_srv.port);
    get(f, &q, url, NULL);
    if (q.rc != 0)
        fail_msg("%s", q.err);
    assert_int_equal(q.size, 10);
    /* ... but to nothing but http(s) */
    snprintf(g_site.location, sizeof g_site.location, "ftp://127.0.0.1:%d/x", g_other.port);
    before = atomic_load(&g_other.requests);
    get(f, &q, url, NULL);
    assert_int_equal(q.rc, RF_E_SOURCE);
    assert_int_equal(atomic_load(&g_other.requests), before);
    rf__fetch_destroy(f, 0);
}

static void test_endpoint_must_be_http(void **state)
{
    (void)state;
    const char *bad[] = {"ftp://user:hunter2@127.0.0.1:21", "file:///etc", "127.0.0.1:9000"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        clean_env();
        setenv("AWS_ENDPOINT_URL", bad[i], 1);
        rf_fetch *f = NULL;
        char err[512] = "";
        rf_fetch_opts o = {.retries = 0, .timeout_ms = 1000, .parallel = 1};
        assert_int_equal(rf__fetch_create(&f, &o, err, sizeof err), RF_E_SOURCE);
        assert_null(f);
        has(err, "is not an http:// or https:// URL");
        lacks(err, "hunter2");
    }
    clean_env();
}

/* ---- what a failure says ------------------------------------------------------------ */

static void test_403_says_code_message_and_signing(void **state)
{
    (void)state;
    clean_env();
    signed_env();
    rf_fetch *f = fetcher(0, 5000);
    rf_fetch_req q;
    get(f, &q, "s3://bucket/forbidden.tar", NULL);
    assert_int_equal(q.http, 403);
    has(q.err, "HTTP status 403 Forbidden: AccessDenied: Access Denied by the bucket policy");
    has(q.err, "signed with access key ****5678 from the environment");
    lacks(q.err, "AKIATESTKEY12345678");
    /* a HEAD's 403 has no body: a GET of the first byte learns the code */
    q = (rf_fetch_req){.op = RF__FETCH_HEAD, .url = "s3://bucket/forbidden.tar"};
    rf__fetch_submit(f, &q);
    rf__fetch_wait(f, &q);
    assert_int_equal(q.http, 403);
    assert_int_equal(q.tries, 1);
    has(q.err, "HEAD s3://bucket/forbidden.tar: HTTP status 403 Forbidden: AccessDenied: Access "
               "Denied by the bucket policy (signed");
    rf_fetch_totals t;
    rf__fetch_totals(f, &t);
    assert_int_equal(t.retries, 0);
    rf__fetch_destroy(f, 0);

    clean_env(); /* no credentials anywhere */
    f = fetcher(0, 5000);
    get(f, &q, "s3://bucket/forbidden.tar", NULL);
    assert_int_equal(q.http, 403);
    has(q.err, "AccessDenied: Access Denied by the bucket policy (not signed: no credentials");
    has(q.err, "/nonexistent/ringfeed-test-credentials");
    rf__fetch_destroy(f, 0);
}

static void test_later_try_has_no_earlier_code(void **state)
{
    (void)state;
    clean_env();
    atomic_store(&g_site.slowdowns, 0);
    rf_fetch *f = fetcher(1, 5000);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/slowdown", g_srv.port);
    rf_fetch_req q;
    get(f, &q, url, NULL);
    assert_int_equal(q.tries, 2);
    has(q.err, "HTTP status 503 Service Unavailable (2 tries)");
    lacks(q.err, "SlowDown");
    rf__fetch_destroy(f, 0);
}

static void test_server_bytes_are_escaped(void **state)
{
    (void)state;
    clean_env();
    rf_fetch *f = fetcher(0, 5000);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/escape", g_srv.port);
    rf_fetch_req q;
    get(f, &q, url, NULL);
    assert_int_equal(q.http, 403);
    has(q.err, "Forb\\x1b[2Jidden\\xc3");
    has(q.err, "Bad\\x07Code: m\\x1b]0;title\\x07 \\xff");
    for (const unsigned char *p = (const unsigned char *)q.err; *p; p++)
        if (*p < 0x20 || *p == 0x7f || *p >= 0x80)
            fail_msg("raw byte 0x%02x in: %s", *p, q.err);
    rf__fetch_destroy(f, 0);
}

static void test_url_secrets_never_in_messages(void **state)
{
    (void)state;
    clean_env();
    rf_fetch *f = fetcher(0, 5000);
    char url[256], want[256];
    snprintf(url, sizeof url, "http://reader:hunter2@127.0.0.1:%d/missing.tar?token=SECRET42#frag",
             g_srv.port);
    rf_fetch_req q;
    get(f, &q, url, NULL);
    assert_int_equal(q.http, 404);
    snprintf(want, sizeof want, "GET http://***@127.0.0.1:%d/missing.tar?***: HTTP status 404",
             g_srv.port);
    has(q.err, want);
    lacks(q.err, "hunter2");
    lacks(q.err, "reader");
    lacks(q.err, "SECRET42");
    rf__fetch_destroy(f, 0);
}

/* curl's own detail: a refused connection names the port. */
static void test_curl_detail_in_message(void **state)
{
    (void)state;
    clean_env();
    th_server closed;
    assert_int_equal(th_start(&closed, answer, &g_site), 0);
    int port = closed.port;
    th_stop(&closed); /* nothing listens there now */
    rf_fetch *f = fetcher(0, 5000);
    char url[128], want[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x.tar", port);
    rf_fetch_req q;
    get(f, &q, url, NULL);
    assert_int_equal(q.rc, RF_E_SOURCE);
    snprintf(want, sizeof want, "port %d", port);
    has(q.err, want);
    rf__fetch_destroy(f, 0);
}

int main(void)
{
#ifndef RF_HAVE_CURL
    print_message("[  SKIPPED ] test_fetch_faults: built without libcurl (RF_WITH_CURL)\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trickle_times_out),
        cmocka_unit_test(test_stall_ends_each_try_on_time),
        cmocka_unit_test(test_silent_server_times_out_at_the_timeout),
        cmocka_unit_test(test_signed_request_follows_no_redirect),
        cmocka_unit_test(test_endpoint_must_be_http),
        cmocka_unit_test(test_403_says_code_message_and_signing),
        cmocka_unit_test(test_later_try_has_no_earlier_code),
        cmocka_unit_test(test_server_bytes_are_escaped),
        cmocka_unit_test(test_url_secrets_never_in_messages),
        cmocka_unit_test(test_curl_detail_in_message),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
#endif
}
