/*
 * test_listing_pages.c - S3 listings (source_listing.c) from a server on
 * 127.0.0.1 (testhttp.h) that answers ListObjectsV2 as a broken or hostile
 * server would: a listing truncated forever with the same token, tokens
 * that go round in a circle, new tokens forever (the page cap), more
 * matching keys than a pattern may expand to (the key cap), a page larger
 * than a page may be, and a page of 200,000 entries without a <Key> (a
 * start that fails at once, not after seconds of a quadratic parse). Each
 * listing ends with an error that names what ended it. Through
 * rf_loader_start where the defaults do; through rf__source_list_s3 with
 * small caps where the defaults would take long. Not run without libcurl.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fetch.h"
#include "ringfeed.h"
#include "source_listing.h"
#include "testhttp.h"
#include "testutil.h"

enum { SAME_TOKEN, CIRCLE, FOREVER, BIG_PAGE, NO_KEYS };

typedef struct lister {
    int mode;
    int matching; /* FOREVER: keys per page that match the tests' pattern */
} lister;

static th_server g_srv;
static lister g_how;
static char *g_cache;

/* A page: `keys` keys named ds/k-PAGE-I.tar (.txt when they must not
 * match), truncated with token `token` unless it is NULL. */
static void page(th_req *q, int keys, int matching, const char *token)
{
    size_t cap = 4096 + (size_t)keys * 80;
    char *body = malloc(cap);
    if (!body)
        return;
    size_t n = (size_t)snprintf(body, cap, "<ListBucketResult><IsTruncated>%s</IsTruncated>",
                                token ? "true" : "false");
    for (int i = 0; i < keys; i++)
        n += (size_t)snprintf(body + n, cap - n, "<Contents><Key>ds/k-%d-%d.%s</Key></Contents>",
                              q->n, i, i < matching ? "tar" : "txt");
    if (token)
        n += (size_t)snprintf(body + n, cap - n,
                              "<NextContinuationToken>%s</NextContinuationToken>", token);
    n += (size_t)snprintf(body + n, cap - n, "</ListBucketResult>");
    th_sendf(q->fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", n);
    tu_send_all(q->fd, body, n);
    free(body);
}

static void answer(th_req *q, void *ctx)
{
    lister *x = ctx;
    char token[64];
    if (q->n >= 300) { /* a client that never stops: this server does */
        th_sendf(q->fd, "HTTP/1.1 500 Enough\r\nContent-Length: 0\r\n\r\n");
        return;
    }
    switch (x->mode) {
    case SAME_TOKEN:
        page(q, 1, 1, "the-same-token");
        break;
    case CIRCLE: /* A, B, A, ... */
        page(q, 1, 1, q->n % 2 ? "token-B" : "token-A");
        break;
    case FOREVER:
        snprintf(token, sizeof token, "token-%d", q->n);
        page(q, x->matching + 1, x->matching, token);
        break;
    case BIG_PAGE: { /* 65 MiB of entries */
        size_t total = (size_t)65 << 20;
        th_sendf(q->fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n<ListBucketResult>", total);
        static char chunk[1 << 16];
        const char *e = "<Contents><Key>ds/x.txt</Key></Contents>";
        for (size_t i = 0; i + strlen(e) <= sizeof chunk; i += strlen(e))
            memcpy(chunk + i, e, strlen(e));
        for (size_t sent = 18; sent < total;) {
            size_t k = total - sent < sizeof chunk ? total - sent : sizeof chunk;
            if (tu_send_all(q->fd, chunk, k) != 0)
                break;
            sent += k;
        }
        break;
    }
    case NO_KEYS: { /* 200,000 entries without a <Key> */
        const char *e = "<Contents><Size>1</Size><ETag>x</ETag></Contents>";
        size_t n = 200000, total = 18 + n * strlen(e) + 19;
        th_sendf(q->fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n<ListBucketResult>", total);
        char *body = malloc(n * strlen(e));
        if (!body)
            return;
        for (size_t i = 0; i < n; i++)
            memcpy(body + i * strlen(e), e, strlen(e));
        tu_send_all(q->fd, body, n * strlen(e));
        th_sendf(q->fd, "</ListBucketResult>");
        free(body);
        break;
    }
    }
}

static void serve(int mode, int matching)
{
    g_how.mode = mode;
    g_how.matching = matching;
    assert_int_equal(th_start(&g_srv, answer, &g_how), 0);
    th_aws_env("/nonexistent/ringfeed-test-credentials", &g_srv);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* rf_loader_start of a glob over the server's bucket must fail with want
 * in its message; the server is stopped then. The seconds it took, and
 * the requests the server had (*requests, unless NULL). */
static double start_fails(const char *want, int *requests)
{
    rf_loader *l = rf_loader_create("s3://bucket/ds/*.tar");
    assert_non_null(l);
    assert_int_equal(rf_loader_set_cache_dir(l, g_cache), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_FETCH_RETRIES, 0), 0);
    double t0 = now_s();
    int rc = rf_loader_start(l);
    double secs = now_s() - t0;
    char msg[1024];
    rf_loader_errmsg_copy(l, msg, sizeof msg);
    rf_loader_destroy(l);
    if (requests)
        *requests = atomic_load(&g_srv.requests);
    th_stop(&g_srv);
    if (rc != RF_E_SOURCE || !strstr(msg, want))
        fail_msg("start: %d, \"%s\" (wanted \"%s\")", rc, msg, want);
    return secs;
}

static void test_same_token_forever(void **state)
{
    (void)state;
    serve(SAME_TOKEN, 1);
    int requests;
    start_fails("page 2 sent a continuation token sent before (the listing would go round",
                &requests);
    assert_int_equal(requests, 2);
}

static void test_page_too_large_names_the_cap(void **state)
{
    (void)state;
    serve(BIG_PAGE, 0);
    start_fails("bytes, the most a listing page may have", NULL);
}

/* Timings of instrumented code say little (TSan checks every byte read). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOWER 10
#else
#define SLOWER 1
#endif

/* 200,000 entries without a key: the start fails in well under a second
 * (a parse that searched the rest of the page for each entry's key took
 * about 10 s here). */
static void test_entries_without_keys_fail_fast(void **state)
{
    (void)state;
    serve(NO_KEYS, 0);
    double secs = start_fails("pattern s3://bucket/ds/*.tar matches no objects", NULL);
    print_message("200,000 entries without a key: %.2f s\n", secs);
    if (secs > 4.0 * SLOWER)
        fail_msg("the listing took %.2f s", secs);
}

/* rf__source_list_s3 with caps; its error must hold want. The server is
 * stopped then; *requests (unless NULL): the requests it had. */
static void list_fails(uint64_t pages, uint64_t keys, const char *want, int *requests)
{
    rf_fetch *f;
    char err[1024] = "";
    rf_fetch_opts o = {.retries = 0, .timeout_ms = 5000, .parallel = 1};
    if (rf__fetch_create(&f, &o, err, sizeof err) != 0)
        fail_msg("rf__fetch_create: %s", err);
    rf_list_caps caps = {pages, keys};
    rf_strlist out = {0};
    int rc = rf__source_list_s3(f, "s3://bucket/ds/*.tar", &caps, &out, err, sizeof err);
    rf__strlist_free(&out);
    rf__fetch_destroy(f, 0);
    if (requests)
        *requests = atomic_load(&g_srv.requests);
    th_stop(&g_srv);
    if (rc != RF_E_SOURCE || !strstr(err, want))
        fail_msg("listing: %d, \"%s\" (wanted \"%s\")", rc, err, want);
}

static void test_tokens_in_a_circle(void **state)
{
    (void)state;
    serve(CIRCLE, 1);
    list_fails(1000, 1000, "page 3 sent a continuation token sent before", NULL);
}

static void test_page_cap(void **state)
{
    (void)state;
    serve(FOREVER, 0);
    int requests;
    list_fails(5, 1000, "more than 5 pages, the most a listing may have", &requests);
    assert_int_equal(requests, 5);
}

static void test_key_cap(void **state)
{
    (void)state;
    serve(FOREVER, 30);
    int requests;
    list_fails(1000, 50, "more than 50 keys match, the most a pattern may expand to", &requests);
    assert_int_equal(requests, 2);
}

static int setup(void **state)
{
    (void)state;
    g_cache = tu_tempdir("listing-pages");
    return g_cache ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tu_tempdir_remove(&g_cache);
    return 0;
}

int main(void)
{
#ifndef RF_HAVE_CURL
    print_message("[  SKIPPED ] test_listing_pages: built without libcurl (RF_WITH_CURL)\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_token_forever),
        cmocka_unit_test(test_page_too_large_names_the_cap),
        cmocka_unit_test(test_entries_without_keys_fail_fast),
        cmocka_unit_test(test_tokens_in_a_circle),
        cmocka_unit_test(test_page_cap),
        cmocka_unit_test(test_key_cap),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
#endif
}
