/*
 * test_patterns.c - the files a source spec names (lib/source/pattern.c):
 * brace patterns with zero-padded ranges and lists, globs (sorted matches),
 * the cap on how many names one pattern may give.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "shardset.h"
#include "source.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testutil.h"

/* ------------------------------------------------------------ patterns */

typedef struct {
    char items[64][256];
    int n;
} collected;

static int collect_cb(const char *path, void *ctx)
{
    collected *c = ctx;
    if (c->n >= 64)
        return -100;
    snprintf(c->items[c->n++], sizeof c->items[0], "%s", path);
    return 0;
}

static void expect_expansion(const char *pattern, const char *const *want, int nwant)
{
    collected c = {.n = 0};
    char err[512] = "";
    int rc = rf__source_expand(pattern, collect_cb, &c, err, sizeof err);
    if (rc != 0)
        fail_msg("expand(%s) = %d: %s", pattern, rc, err);
    if (c.n != nwant)
        fail_msg("expand(%s): %d paths, want %d", pattern, c.n, nwant);
    for (int i = 0; i < nwant; i++)
        if (strcmp(c.items[i], want[i]) != 0)
            fail_msg("expand(%s)[%d] = %s, want %s", pattern, i, c.items[i], want[i]);
}

#define EXPECT(pattern, ...)                                                                       \
    do {                                                                                           \
        const char *const w_[] = {__VA_ARGS__};                                                    \
        expect_expansion(pattern, w_, (int)(sizeof w_ / sizeof w_[0]));                            \
    } while (0)

static void test_pattern_braces(void **state)
{
    (void)state;
    EXPECT("s/train-{0000..0003}.tar", "s/train-0000.tar", "s/train-0001.tar", "s/train-0002.tar",
           "s/train-0003.tar");
    EXPECT("x{1..3}", "x1", "x2", "x3");
    EXPECT("x{3..1}", "x3", "x2", "x1");
    EXPECT("x{08..11}", "x08", "x09", "x10", "x11");
    EXPECT("x{8..011}", "x008", "x009", "x010", "x011");
    EXPECT("x{0..10..5}", "x0", "x5", "x10");
    EXPECT("{a,b}-{1..2}", "a-1", "a-2", "b-1", "b-2");
    EXPECT("{x,y{1,2},}z", "xz", "y1z", "y2z", "z");
    EXPECT("a{b}c", "a{b}c"); /* one alternative: literal, as bash */
    EXPECT("a{b", "a{b");     /* unbalanced: literal */
    EXPECT("a{1..x}{2,3}", "a{1..x}2", "a{1..x}3");
    EXPECT("plain.tar", "plain.tar");
    /* The callback's refusal stops the expansion and is returned. */
    collected c = {.n = 0};
    char err[512] = "";
    assert_int_equal(rf__source_expand("{0..99999999}", collect_cb, &c, err, sizeof err), -100);
    assert_int_equal(c.n, 64);
}

static int count_cb(const char *path, void *ctx)
{
    (void)path;
    (*(int64_t *)ctx)++;
    return 0;
}

static void test_pattern_limit_and_glob(void **state)
{
    (void)state;
    int64_t n = 0;
    char err[512] = "";
    int rc = rf__source_expand("{0..9999999}", count_cb, &n, err, sizeof err);
    assert_int_equal(rc, RF_E_SOURCE);
    assert_non_null(strstr(err, "more than"));
    printf("  %s\n", err);

    char *dir = tu_tmp_path("globs");
    assert_int_equal(tu_mkdir_p(dir), 0);
    const char *names[] = {"b.tar", "a.tar", "B.tar", "c.txt", "a10.tar", "a9.tar"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *p = tu_tmp_path("globs/%s", names[i]);
        assert_int_equal(tu_write_file(p, "", 0), 0);
        free(p);
    }
    char pat[4096], w[6][4096];
    snprintf(pat, sizeof pat, "%s/*.tar", dir);
    const char *order[] = {"B.tar", "a.tar", "a10.tar", "a9.tar", "b.tar"}; /* byte order */
    for (int i = 0; i < 5; i++)
        snprintf(w[i], sizeof w[i], "%s/%s", dir, order[i]);
    const char *const want[] = {w[0], w[1], w[2], w[3], w[4]};
    expect_expansion(pat, want, 5);
    snprintf(pat, sizeof pat, "%s/{a,b}*.tar", dir);
    snprintf(w[0], sizeof w[0], "%s/a.tar", dir);
    snprintf(w[1], sizeof w[1], "%s/a10.tar", dir);
    snprintf(w[2], sizeof w[2], "%s/a9.tar", dir);
    snprintf(w[3], sizeof w[3], "%s/b.tar", dir);
    const char *const want2[] = {w[0], w[1], w[2], w[3]};
    expect_expansion(pat, want2, 4);

    collected c = {.n = 0};
    snprintf(pat, sizeof pat, "%s/*.nothing", dir);
    rc = rf__source_expand(pat, collect_cb, &c, err, sizeof err);
    assert_int_equal(rc, RF_E_SOURCE);
    assert_non_null(strstr(err, "matches no files"));
    free(dir);
}

int main(void)
{
    alarm(240); /* a hang fails the run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern_braces),
        cmocka_unit_test(test_pattern_limit_and_glob),
    };
    return cmocka_run_group_tests(tests, tu_tmp_setup, tu_tmp_teardown);
}
