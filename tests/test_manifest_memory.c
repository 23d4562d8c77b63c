/*
 * test_manifest_memory.c - what a manifest.json costs in memory
 * (lib/source/manifest.c): at most twice its size plus a constant, from
 * reading the file to the last sample read back, where flat arrays of its
 * samples and members once took some 4.7 times its size.
 *
 * Counted, not estimated: this executable is linked with
 * --wrap=malloc,realloc,calloc,free (tests/CMakeLists.txt), so every call
 * the library's objects make goes through the counters below, which add
 * and take away malloc_usable_size while counting is on; a realloc counts
 * its new block before the old one goes (the moment both exist). The
 * manifest is ringfeed-pack's shape: 40 shards of 1,000 samples, each a
 * .jpg and a .cls member, about 2.5 MB.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "manifest.h"
#include "testutil.h"

/* ---- the counting allocator -------------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

static int g_on; /* counting; the test's one thread only */
static size_t g_live, g_peak;

static void add(void *p)
{
    if (g_on && p) {
        g_live += malloc_usable_size(p);
        if (g_live > g_peak)
            g_peak = g_live;
    }
}

static void sub(size_t n)
{
    g_live -= n < g_live ? n : g_live;
}

void *__wrap_malloc(size_t n)
{
    void *p = __real_malloc(n);
    add(p);
    return p;
}

void *__wrap_calloc(size_t k, size_t n)
{
    void *p = __real_calloc(k, n);
    add(p);
    return p;
}

void *__wrap_realloc(void *p, size_t n)
{
    size_t old = g_on && p ? malloc_usable_size(p) : 0;
    void *q = __real_realloc(p, n);
    if (g_on && q) {
        g_live += malloc_usable_size(q); /* both, for the copy */
        if (g_live > g_peak)
            g_peak = g_live;
        sub(old);
    }
    return q;
}

void __wrap_free(void *p)
{
    if (g_on && p)
        sub(malloc_usable_size(p));
    __real_free(p);
}

/* ---- the test -------------------------------------------------------------- */

enum { NSHARDS = 40, PER = 1000 };

/* The manifest's text, as ringfeed-pack lays it out. */
static char *manifest_text(size_t *n)
{
    char *t = NULL;
    FILE *f = open_memstream(&t, n);
    fprintf(f, "{\n  \"format\": \"ringfeed-pack 1\",\n  \"samples\": %d,\n  \"shards\": [\n",
            NSHARDS * PER);
    for (int k = 0; k < NSHARDS; k++) {
        uint64_t at = 0;
        fprintf(f,
                "    {\"name\": \"shard-%06d.tar\", \"samples\": %d, \"bytes\": %d, "
                "\"sha256\": \"%064d\", \"index\": [",
                k, PER, 3 * 1024 * PER + 1024, k);
        for (int i = 0; i < PER; i++) {
            fprintf(f, "%s\n      [\"%06d\", %d, \"jpg\", %llu, %d, \"cls\", %llu, 1]",
                    i ? "," : "", k * PER + i, i % 10, (unsigned long long)at + 512, 1000 + i % 24,
                    (unsigned long long)at + 2048 + 512);
            at += 3 * 1024;
        }
        fprintf(f, "\n    ]}%s\n", k + 1 < NSHARDS ? "," : "");
    }
    fprintf(f, "  ],\n  \"skipped_samples\": []\n}\n");
    fclose(f);
    return t;
}

static void test_read_and_iterate_within_twice_the_size(void **state)
{
    (void)state;
    size_t n;
    char *text = manifest_text(&n);
    char path[4096], err[256];
    char *tmp = tu_tempdir("manifest_memory");
    assert_non_null(tmp);
    snprintf(path, sizeof path, "%s/manifest.json", tmp);
    assert_int_equal(tu_write_file(path, text, n), 0);
    free(text);

    rf_manifest m;
    g_live = g_peak = 0;
    g_on = 1;
    int rc = rf__manifest_read(path, &m, err, sizeof err);
    size_t after_read = g_peak;
    int64_t samples = 0, labels = 0;
    for (size_t s = 0; rc == 0 && s < m.nshards; s++) {
        assert_true(m.shards[s].indexed);
        rf_manifest_iter it;
        rf__manifest_iter(&it, &m, &m.shards[s]);
        while (rf__manifest_sample(&it) == 1) {
            samples++;
            labels += it.label;
        }
        rf__manifest_iter_free(&it);
    }
    rf__manifest_free(&m);
    g_on = 0;
    tu_tempdir_remove(&tmp);
    assert_int_equal(rc, 0);
    assert_int_equal(samples, NSHARDS * PER);
    assert_int_equal(labels, NSHARDS * (PER / 10) * 45);
    print_message("manifest of %zu bytes: peak %zu bytes (%.2fx) reading it, %zu (%.2fx) in all\n",
                  n, after_read, (double)after_read / (double)n, g_peak,
                  (double)g_peak / (double)n);
    assert_true(g_peak <= 2 * n + (64 << 10));
    assert_int_equal(g_live, 0); /* and all of it given back */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_and_iterate_within_twice_the_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
