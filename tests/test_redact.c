/*
 * test_redact.c - what of a URL and of outside text is shown
 * (lib/util/redact.h), and that it is all that is shown, end to end.
 *
 * The helpers: a URL's userinfo and an http(s) query or fragment become
 * "***"; s3:// keeps its '?' (a key's character, or a glob's); free text
 * has every URL in it so treated, a "?***" already shown kept, control
 * bytes, DEL, invalid UTF-8, C1 controls and bidirectional overrides
 * escaped, and a cut never splits a character or an escape.
 *
 * End to end, over a shard on a server on 127.0.0.1 (testhttp.h) named by
 * a URL with user:password and a query (accepted in the spec, not taken as
 * a glob): sample paths and names, the stats JSON (where a member name with
 * an ESC and an invalid byte is escaped), RINGFEED_TRACE's lines and the
 * error of a missing shard hold neither the password nor the query.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "redact.h"
#include "ringfeed.h"
#include "tarwrite.h"
#include "testhttp.h"
#include "testutil.h"

static void url_is(const char *url, const char *want)
{
    char out[RF__URL_SHOWN];
    rf__redact_url(url, out, sizeof out);
    if (strcmp(out, want))
        fail_msg("%s: shown as %s, not %s", url, out, want);
}

static void text_is(const char *text, const char *want)
{
    char out[1024];
    rf__redact_text(text, out, sizeof out);
    if (strcmp(out, want))
        fail_msg("%s: shown as %s, not %s", text, out, want);
}

static void test_urls(void **state)
{
    (void)state;
    url_is("https://user:pa%40ss@host.example:8443/a/b.tar?X-Amz-Signature=abc&x=1#f",
           "https://***@host.example:8443/a/b.tar?***");
    url_is("http://u@h/x.tar", "http://***@h/x.tar");
    url_is("HTTP://h/x.tar#frag", "HTTP://h/x.tar#***");
    url_is("http://a:b@c@h/x", "http://***@h/x"); /* the last '@' of the authority */
    url_is("https://h/path/with@at.tar", "https://h/path/with@at.tar");
    url_is("s3://bucket/train-??.tar", "s3://bucket/train-??.tar");
    url_is("/local/path?.tar", "/local/path?.tar");
    url_is("https://h/plain.tar", "https://h/plain.tar");
    assert_true(rf__url_has_secret("https://h/x?t=1"));
    assert_true(rf__url_has_secret("https://u:p@h/x"));
    assert_false(rf__url_has_secret("https://h/x"));
    assert_false(rf__url_has_secret("s3://b/k?x"));
    /* cut to fit, never inside a character */
    char small[14];
    rf__redact_url("https://h/\xc3\xa9\xc3\xa9\xc3\xa9", small, sizeof small);
    assert_string_equal(small, "https://h/\xc3\xa9");
}

static void test_text(void **state)
{
    (void)state;
    text_is("fetch: GET https://u:p@h/x.tar?sig=1&t=2: HTTP status 403",
            "fetch: GET https://***@h/x.tar?*** HTTP status 403");
    /* shown already: kept as it is (a second pass changes nothing) */
    text_is("GET https://***@h/x.tar?***: HTTP status 403 (1 try)",
            "GET https://***@h/x.tar?***: HTTP status 403 (1 try)");
    text_is("cache: a.tar (http://h/y.tar?k=v) \"s3://b/k?z\" ftp://me:pw@f/x?q",
            "cache: a.tar (http://h/y.tar?*** \"s3://b/k?z\" ftp://***@f/x?q");
    text_is("bell\a esc\x1b[31m del\x7f bad\xff\xc3 ok\xc3\xa9 c1\xc2\x9b rlo\xe2\x80\xae nul",
            "bell\\x07 esc\\x1b[31m del\\x7f bad\\xff\\xc3 ok\xc3\xa9 c1\\u009b rlo\\u202e nul");
    /* overlong, surrogate, past U+10FFFF: each byte on its own */
    text_is("\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80",
            "\\xc0\\xaf \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80");
    /* a cut keeps escapes whole */
    char small[8];
    rf__redact_text("ab\x1b\x1b\x1b", small, sizeof small);
    assert_string_equal(small, "ab\\x1b");
}

/* ---- end to end ----------------------------------------------------------------- */

static char *g_dir, *g_shard;
static size_t g_shard_len;
static th_server g_srv;

/* HEAD and GET of any path holding "/s/train-0.tar" give the shard,
 * whatever the query and the credentials; anything else is 404. */
static void answer(th_req *q, void *ctx)
{
    (void)ctx;
    if (!strstr(q->path, "/s/train-0.tar")) {
        th_sendf(q->fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        return;
    }
    th_sendf(q->fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nETag: \"v1\"\r\n\r\n", g_shard_len);
    if (strcmp(q->method, "HEAD") != 0)
        tu_send_all(q->fd, g_shard, g_shard_len);
}

static void make_shard(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/train-0.tar", g_dir);
    tw t;
    assert_int_equal(tw_open(&t, path, TW_USTAR), 0);
    for (int i = 0; i < 4; i++) {
        tu_jpeg_opts o = {.width = 24, .height = 20, .quality = 90, .seed = (uint32_t)i};
        uint8_t *jpg;
        size_t len;
        assert_int_equal(tu_make_jpeg(&o, &jpg, &len), 0);
        char name[64], cls[64];
        /* sample 3: a corrupt picture whose name holds an ESC and a byte
         * that is no UTF-8 */
        snprintf(name, sizeof name, i == 3 ? "k\x1b[2J\xff%d.jpg" : "k%d.jpg", i);
        snprintf(cls, sizeof cls, i == 3 ? "k\x1b[2J\xff%d.cls" : "k%d.cls", i);
        assert_int_equal(tw_file(&t, name, jpg, i == 3 ? len / 3 : len), 0);
        assert_int_equal(tw_file(&t, cls, "1", 1), 0);
        free(jpg);
    }
    assert_int_equal(tw_close(&t), 0);
    g_shard = (char *)tu_read_file(path, &g_shard_len);
    assert_non_null(g_shard);
}

static void secret_free(const char *what, const char *s)
{
    if (!s)
        fail_msg("%s: none", what);
    if (strstr(s, "hunter2") || strstr(s, "SECRET") || strstr(s, "reader"))
        fail_msg("%s shows a secret: %s", what, s);
}

static void test_nothing_shown_holds_a_secret(void **state)
{
    (void)state;
    g_dir = tu_tempdir("redact");
    assert_non_null(g_dir);
    make_shard();
    assert_int_equal(th_start(&g_srv, answer, NULL), 0);
    char cache[600], url[256], shown[256], trace[600];
    snprintf(cache, sizeof cache, "%s/cache", g_dir);
    snprintf(trace, sizeof trace, "%s/trace.txt", g_dir);
    snprintf(url, sizeof url, "http://reader:hunter2@127.0.0.1:%d/s/train-0.tar?token=SECRET1",
             g_srv.port);
    snprintf(shown, sizeof shown, "http://***@127.0.0.1:%d/s/train-0.tar?***", g_srv.port);

    /* the trace, to a file for the while */
    setenv("RINGFEED_TRACE", "1", 1);
    fflush(stderr);
    int saved = dup(2), tf = open(trace, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(saved >= 0 && tf >= 0);
    dup2(tf, 2);

    rf_loader *l = rf_loader_create(url);
    assert_non_null(l);
    assert_int_equal(rf_loader_set_cache_dir(l, cache), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_BATCH_SIZE, 4), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_IMAGE_SIZE, 16), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_NUM_WORKERS, 1), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_ON_ERROR, RF_ON_ERROR_SKIP), 0);
    int rc = rf_loader_start(l);
    rf_batch *b = NULL;
    int next = rc == 0 ? rf_loader_next(l, &b) : rc;
    if (b)
        rf_batch_release(b);

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(tf);
    if (rc != 0 || next != 0)
        fail_msg("start %d, next %d: %s", rc, next, rf_loader_errmsg(l));

    char name[512];
    assert_true(rf_loader_sample_name(l, 0, name, sizeof name) > 0);
    char want[600];
    snprintf(want, sizeof want, "%s:k0", shown);
    assert_string_equal(name, want);
    assert_string_equal(rf_loader_sample_path(l, 0), shown);
    int64_t need = rf_loader_stats_json(l, NULL, 0);
    char *js = malloc((size_t)need + 1);
    assert_non_null(js);
    rf_loader_stats_json(l, js, (size_t)need + 1);
    secret_free("stats", js);
    snprintf(want, sizeof want, "\"path\": \"%s:k\\\\x1b[2J\\\\xff3.jpg\"", shown);
    if (!strstr(js, want))
        fail_msg("stats lack %s: %s", want, js);
    for (const char *p = js; *p; p++)
        assert_true((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f);
    free(js);
    rf_loader_destroy(l);

    size_t tlen;
    char *t = (char *)tu_read_file(trace, &tlen);
    assert_non_null(t);
    t = realloc(t, tlen + 1);
    t[tlen] = '\0';
    secret_free("trace", t);
    snprintf(want, sizeof want, "GET submitted: %s", shown);
    if (!strstr(t, want))
        fail_msg("trace lacks %s: %s", want, t);
    free(t);
    unsetenv("RINGFEED_TRACE");

    /* the error of a missing shard */
    snprintf(url, sizeof url, "http://reader:hunter2@127.0.0.1:%d/s/absent.tar?token=SECRET2",
             g_srv.port);
    l = rf_loader_create(url);
    assert_int_equal(rf_loader_set_cache_dir(l, cache), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_FETCH_RETRIES, 0), 0);
    assert_int_equal(rf_loader_start(l), RF_E_SOURCE);
    secret_free("error", rf_loader_errmsg(l));
    snprintf(want, sizeof want, "HEAD http://***@127.0.0.1:%d/s/absent.tar?***: HTTP status 404",
             g_srv.port);
    if (!strstr(rf_loader_errmsg(l), want))
        fail_msg("error lacks %s: %s", want, rf_loader_errmsg(l));
    rf_loader_destroy(l);

    th_stop(&g_srv);
    free(g_shard);
    tu_tempdir_remove(&g_dir);
}

int main(void)
{
    unsetenv("AWS_ENDPOINT_URL");
    const struct CMUnitTest plain[] = {
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_text),
    };
    int rc = cmocka_run_group_tests_name("redact", plain, NULL, NULL);
#ifndef RF_HAVE_CURL
    print_message("[  SKIPPED ] test_redact: end to end, built without libcurl\n");
    return rc;
#else
    const struct CMUnitTest e2e[] = {
        cmocka_unit_test(test_nothing_shown_holds_a_secret),
    };
    return rc | cmocka_run_group_tests_name("end to end", e2e, NULL, NULL);
#endif
}
