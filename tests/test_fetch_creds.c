/*
 * test_fetch_creds.c - S3 credentials (lib/remote/fetch_creds.c): where they are
 * read from, and their renewal when S3 says they expired.
 *
 * The shared credentials file: profiles, comments, spaces, CRLF line ends,
 * indented lines passed over, AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE or
 * $HOME/.aws/credentials, the environment's keys first; a missing file or
 * profile is no error and the reason says which. Against a server on
 * 127.0.0.1 (testhttp.h) that answers ExpiredToken (400, or 403 as some
 * S3 servers do) to any session token but the one it expects: credentials
 * changed in the file or the environment after the fetcher was made are
 * read again and the request succeeds in a second try (not counted against
 * `retries`); unchanged ones fail with a message that says so; a session
 * token of 6000 bytes travels whole. Not run without libcurl.
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fetch.h"
#include "ringfeed.h"
#include "testhttp.h"
#include "testutil.h"

static char *g_dir;
static char g_file[512];

static void clean_env(void)
{
    th_aws_env(g_file, NULL);
}

static void write_text(const char *path, const char *text)
{
    assert_int_equal(tu_write_file(path, text, strlen(text)), 0);
}

static void expect(const rf_fetch_creds *c, const char *key, const char *secret, const char *token)
{
    if (!key) {
        assert_null(c->key_id);
        assert_null(c->secret);
        assert_null(c->token);
        return;
    }
    assert_non_null(c->key_id);
    assert_string_equal(c->key_id, key);
    assert_string_equal(c->secret, secret);
    if (token) {
        assert_non_null(c->token);
        assert_string_equal(c->token, token);
    } else {
        assert_null(c->token);
    }
}

static void test_credentials_file(void **state)
{
    (void)state;
    clean_env();
    write_text(g_file, "# made by the test\r\n"
                       "[default]\r\n"
                       "aws_access_key_id = AKIADEFAULT0001\r\n"
                       "aws_secret_access_key=default/secret+1\r\n"
                       "\r\n"
                       "[ other ]\n"
                       "; another comment\n"
                       "AWS_ACCESS_KEY_ID   =   AKIAOTHER0002   \n"
                       "aws_secret_access_key = other secret 2\n"
                       "s3 =\n"
                       "    aws_session_token = not-this-one\n"
                       "aws_session_token = tok=en/3==\n"
                       "[third]\n"
                       "aws_access_key_id = AKIATHIRD\n");
    rf_fetch_creds c;
    assert_int_equal(rf__fetch_creds_read(&c), 0);
    expect(&c, "AKIADEFAULT0001", "default/secret+1", NULL);
    char want[600];
    snprintf(want, sizeof want, "%s [default]", g_file);
    assert_string_equal(c.from, want);
    char key[16];
    rf__fetch_creds_key_shown(&c, key, sizeof key);
    assert_string_equal(key, "****0001");
    rf__fetch_creds_free(&c);

    setenv("AWS_PROFILE", "other", 1);
    assert_int_equal(rf__fetch_creds_read(&c), 0);
    expect(&c, "AKIAOTHER0002", "other secret 2", "tok=en/3==");
    rf__fetch_creds_free(&c);

    /* a profile without a secret, and one that is not there: none, said why */
    setenv("AWS_PROFILE", "third", 1);
    assert_int_equal(rf__fetch_creds_read(&c), 0);
    expect(&c, NULL, NULL, NULL);
    assert_non_null(strstr(c.from, "no aws_access_key_id and aws_secret_access_key in"));
    setenv("AWS_PROFILE", "absent", 1);
    assert_int_equal(rf__fetch_creds_read(&c), 0);
    expect(&c, NULL, NULL, NULL);
    assert_non_null(strstr(c.from, "no profile [absent]"));

    /* the environment's keys win */
    setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
    setenv("AWS_SESSION_TOKEN", "envtoken", 1);
    assert_int_equal(rf__fetch_creds_read(&c), 0);
    expect(&c, "AKIAENV", "envsecret", "envtoken");
    assert_string_equal(c.from, "the environment");
    rf__fetch_creds_key_shown(&c, key, sizeof key);
    assert_string_equal(key, "****"); /* too short to show a part */
    rf__fetch_creds_free(&c);

    /* without AWS_SHARED_CREDENTIALS_FILE: $HOME/.aws/credentials */
    clean_env();
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
    char home[600], aws[700], path[800];
    snprintf(home, sizeof home, "%s/home", g_dir);
    snprintf(aws, sizeof aws, "%s/.aws", home);
    assert_int_equal(tu_mkdir_p(aws), 0);
    snprintf(path, sizeof path, "%s/credentials", aws);
    write_text(path, "[default]\naws_access_key_id = AKIAHOME\naws_secret_access_key = h\n");
    char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("HOME", home, 1);
    assert_int_equal(rf__fetch_creds_read(&c), 0);
    expect(&c, "AKIAHOME", "h", NULL);
    rf__fetch_creds_free(&c);
    /* a folder where the file should be: none (never a blocking read) */
    setenv("AWS_SHARED_CREDENTIALS_FILE", aws, 1);
    assert_int_equal(rf__fetch_creds_read(&c), 0);
    expect(&c, NULL, NULL, NULL);
    assert_non_null(strstr(c.from, "not a regular file"));
    if (old_home)
        setenv("HOME", old_home, 1);
    free(old_home);
    clean_env();
}

static void test_credential_errors(void **state)
{
    (void)state;
    assert_true(rf__fetch_creds_error("ExpiredToken"));
    assert_true(rf__fetch_creds_error("InvalidToken"));
    assert_true(rf__fetch_creds_error("TokenRefreshRequired"));
    assert_true(rf__fetch_creds_error("InvalidAccessKeyId"));
    assert_false(rf__fetch_creds_error("AccessDenied"));
    assert_false(rf__fetch_creds_error("NoSuchKey"));
    assert_false(rf__fetch_creds_error(""));
}

/* ---- renewal, against a server ----------------------------------------------------- */

typedef struct expiring {
    char *good;          /* the one session token the server takes */
    int status;          /* what it answers to any other: 400 or 403 */
    _Atomic int asked;   /* requests */
    _Atomic int longest; /* the longest token it was sent */
} expiring;

static void answer(th_req *q, void *ctx)
{
    expiring *x = ctx;
    atomic_fetch_add(&x->asked, 1);
    char tok[16384] = "";
    th_header(q, "x-amz-security-token", tok, sizeof tok);
    if ((int)strlen(tok) > atomic_load(&x->longest))
        atomic_store(&x->longest, (int)strlen(tok));
    if (!strcmp(tok, x->good)) {
        th_sendf(q->fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
        return;
    }
    /* as AWS does, the body names the token it refused */
    char body[20000];
    snprintf(body, sizeof body,
             "<Error><Code>ExpiredToken</Code><Message>The provided token has expired."
             "</Message><Token-0>%s</Token-0></Error>",
             tok);
    int head = !strcmp(q->method, "HEAD"); /* as S3 answers a HEAD: no body, no code */
    th_sendf(q->fd, "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n\r\n", x->status,
             x->status == 400 ? "Bad Request" : "Forbidden", head ? 0 : strlen(body));
    if (!head)
        tu_send_all(q->fd, body, strlen(body));
}

static rf_fetch *fetcher(const th_server *s)
{
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", s->port);
    setenv("AWS_ENDPOINT_URL", ep, 1);
    rf_fetch *f;
    char err[512];
    rf_fetch_opts o = {.retries = 0, .timeout_ms = 5000, .parallel = 2};
    if (rf__fetch_create(&f, &o, err, sizeof err) != 0)
        fail_msg("rf__fetch_create: %s", err);
    return f;
}

static void get(rf_fetch *f, rf_fetch_req *q)
{
    int fd = memfd_create("test_fetch_creds", MFD_CLOEXEC);
    assert_true(fd >= 0);
    *q = (rf_fetch_req){.op = RF__FETCH_GET, .url = "s3://bucket/shard.tar", .fd = fd};
    rf__fetch_submit(f, q);
    rf__fetch_wait(f, q);
    close(fd);
}

static void creds_file(const char *token)
{
    char *text = malloc(strlen(token) + 200);
    assert_non_null(text);
    sprintf(text,
            "[default]\naws_access_key_id = AKIAROTATED01\naws_secret_access_key = s\n"
            "aws_session_token = %s\n",
            token);
    write_text(g_file, text);
    free(text);
}

/* The fetcher read "old"; the file now holds a new token of 6000 bytes. */
static void test_expired_token_read_again_from_the_file(void **state)
{
    (void)state;
    for (int status = 400; status <= 403; status += 3) {
        clean_env();
        char *fresh = malloc(6001);
        assert_non_null(fresh);
        memset(fresh, 'T', 6000);
        fresh[6000] = '\0';
        expiring x = {.good = fresh, .status = status};
        th_server s;
        assert_int_equal(th_start(&s, answer, &x), 0);
        creds_file("old-token");
        rf_fetch *f = fetcher(&s);
        creds_file(fresh);
        rf_fetch_req q;
        get(f, &q);
        if (q.rc != 0)
            fail_msg("%d: %s", status, q.err);
        assert_int_equal(q.tries, 2); /* with retries = 0 */
        assert_int_equal(q.size, 5);
        assert_int_equal(atomic_load(&x.asked), 2);
        assert_int_equal(atomic_load(&x.longest), 6000);
        rf_fetch_totals t;
        rf__fetch_totals(f, &t);
        assert_int_equal(t.retries, 1);
        /* a HEAD, whose error has no code, the same way: the HEAD, a GET of
         * its first byte that learns the code, the HEAD again */
        creds_file("old-token");
        rf__fetch_destroy(f, 0);
        f = fetcher(&s);
        creds_file(fresh);
        atomic_store(&x.asked, 0);
        q = (rf_fetch_req){.op = RF__FETCH_HEAD, .url = "s3://bucket/shard.tar"};
        rf__fetch_submit(f, &q);
        rf__fetch_wait(f, &q);
        if (q.rc != 0)
            fail_msg("HEAD %d: %s", status, q.err);
        assert_int_equal(q.tries, 2);
        assert_int_equal(q.size, 5);
        assert_int_equal(atomic_load(&x.asked), 3);
        rf__fetch_destroy(f, 0);
        th_stop(&s);
        free(fresh);
    }
}

static void test_expired_token_read_again_from_the_environment(void **state)
{
    (void)state;
    clean_env();
    expiring x = {.good = "renewed", .status = 400};
    th_server s;
    assert_int_equal(th_start(&s, answer, &x), 0);
    setenv("AWS_ACCESS_KEY_ID", "AKIAENVKEY000042", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
    setenv("AWS_SESSION_TOKEN", "expired", 1);
    rf_fetch *f = fetcher(&s);
    setenv("AWS_SESSION_TOKEN", "renewed", 1);
    rf_fetch_req q;
    get(f, &q);
    if (q.rc != 0)
        fail_msg("%s", q.err);
    assert_int_equal(q.tries, 2);

    /* expired again, and nothing new to read: one try, and the message says
     * so (and never shows the token the body named) */
    x.good = "renewed-later";
    get(f, &q);
    assert_int_equal(q.rc, RF_E_SOURCE);
    assert_int_equal(q.tries, 1);
    if (!strstr(q.err, "ExpiredToken: The provided token has expired.") ||
        !strstr(q.err, "signed with access key ****0042 from the environment; read again: "
                       "unchanged") ||
        strstr(q.err, "renewed"))
        fail_msg("%s", q.err);
    rf__fetch_destroy(f, 0);
    th_stop(&s);
    clean_env();
}

static int setup(void **state)
{
    (void)state;
    g_dir = tu_tempdir("fetch-creds");
    if (!g_dir)
        return -1;
    snprintf(g_file, sizeof g_file, "%s/credentials", g_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_tempdir_remove(&g_dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest plain[] = {
        cmocka_unit_test(test_credentials_file),
        cmocka_unit_test(test_credential_errors),
    };
    int rc = cmocka_run_group_tests_name("creds", plain, setup, teardown);
#ifndef RF_HAVE_CURL
    print_message("[  SKIPPED ] test_fetch_creds: the renewals, built without libcurl\n");
    return rc;
#else
    const struct CMUnitTest renew[] = {
        cmocka_unit_test(test_expired_token_read_again_from_the_file),
        cmocka_unit_test(test_expired_token_read_again_from_the_environment),
    };
    return rc | cmocka_run_group_tests_name("renew", renew, setup, teardown);
#endif
}
