/*
 * testcheck.c - the cmocka helpers of testcheck.h. Each failure goes through
 * cmocka (fail_msg, assert_*), which unwinds to the running test.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "testcheck.h"
#include "testutil.h"

char *tu_tmp;

int tu_tmp_setup(void **state)
{
    (void)state;
    tu_tmp = tu_tempdir(program_invocation_short_name);
    return tu_tmp ? 0 : -1;
}

int tu_tmp_teardown(void **state)
{
    (void)state;
    tu_tempdir_remove(&tu_tmp);
    return 0;
}

char *tu_tmp_path(const char *fmt, ...)
{
    char rel[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    char *p = NULL;
    assert_true(asprintf(&p, "%s/%s", tu_tmp, rel) > 0);
    return p;
}

rf_loader *tu_loader_with(const char *src, const tu_param *params, size_t n)
{
    rf_loader *l = rf_loader_create(src);
    assert_non_null(l);
    for (size_t i = 0; i < n; i++) {
        int rc = rf_loader_set_param(l, params[i].param, params[i].value);
        if (rc != 0)
            fail_msg("rf_loader_set_param(%d, %lld) = %d: %s", params[i].param,
                     (long long)params[i].value, rc, rf_loader_errmsg(l));
    }
    return l;
}

void tu_start(rf_loader *l)
{
    int rc = rf_loader_start(l);
    if (rc != 0)
        fail_msg("start: %d %s", rc, rf_loader_errmsg(l));
}

rf_decode_opts tu_decode_opts(int transform, int size, uint64_t seed)
{
    rf_decode_opts o = {.transform = transform,
                        .size = size,
                        .flip = 0,
                        .layout = RF_LAYOUT_NHWC,
                        .max_pixels = 178956970,
                        .max_scans = 1000,
                        .seed = seed,
                        .epoch = 0,
                        .sample = 0,
                        .check_tail = 1};
    return o;
}

uint64_t tu_epoch_hash(rf_loader *l, int64_t epoch, int64_t from_batch)
{
    assert_int_equal(rf_loader_seek(l, epoch, from_batch), 0);
    uint64_t h = TU_FNV_INIT;
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == RF_OK) {
        h = tu_batch_hash(h, b);
        rf_batch_release(b);
    }
    if (rc != RF_END_OF_EPOCH)
        fail_msg("next: %d %s", rc, rf_loader_errmsg(l));
    return h;
}

void tu_next_fails(rf_loader *l, int want_rc, const char *fmt, ...)
{
    char want[4200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    rf_batch *b;
    int rc = rf_loader_next(l, &b);
    if (rc == RF_OK)
        rf_batch_release(b);
    assert_int_equal(rc, want_rc);
    if (!strstr(rf_loader_errmsg(l), want))
        fail_msg("message \"%s\" lacks \"%s\"", rf_loader_errmsg(l), want);
    printf("  %s\n", rf_loader_errmsg(l));
}

uint64_t tu_batch_hash(uint64_t h, const rf_batch *b)
{
    h = tu_fnv1a(h, rf_batch_data(b), rf_batch_nbytes(b));
    h = tu_fnv1a(h, rf_batch_labels(b), (size_t)rf_batch_count(b) * sizeof(int64_t));
    return tu_fnv1a(h, rf_batch_samples(b), (size_t)rf_batch_count(b) * sizeof(int64_t));
}

/* A running loader's stats change between two calls (a number gains a
 * digit): ask again with room to spare until the text fits. */
char *tu_stats(rf_loader *l)
{
    for (;;) {
        int64_t need = rf_loader_stats_json(l, NULL, 0);
        assert_true(need > 0);
        size_t cap = (size_t)need + 256;
        char *s = malloc(cap);
        assert_non_null(s);
        int64_t got = rf_loader_stats_json(l, s, cap);
        assert_true(got > 0);
        if ((size_t)got < cap)
            return s;
        free(s);
    }
}

/* Where the number of "key": starts. */
static const char *stats_value(const char *js, const char *key)
{
    char k[128];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = strstr(js, k);
    if (!p)
        fail_msg("stats lack %s: %s", key, js);
    return p + strlen(k);
}

int64_t tu_stats_int(const char *js, const char *key)
{
    return strtoll(stats_value(js, key), NULL, 10);
}

double tu_stats_double(const char *js, const char *key)
{
    return strtod(stats_value(js, key), NULL);
}

void tu_source_open_ok(rf_source *s, const char *spec, const rf_source_opts *o)
{
    char err[1024] = "";
    int rc = rf__source_open_ex(s, spec, o, err, sizeof err);
    if (rc != 0)
        fail_msg("rf__source_open_ex(%s) = %d: %s", spec, rc, err);
}

void tu_source_open_fails(const char *spec, const rf_source_opts *o, ...)
{
    rf_source s;
    memset(&s, 0xA5, sizeof s); /* garbage: a refused open must clear what it leaves */
    char err[1024] = "";
    int rc = rf__source_open_ex(&s, spec, o, err, sizeof err);
    if (rc != RF_E_SOURCE) {
        long long n = (long long)s.n;
        if (rc == 0)
            rf__source_close(&s);
        fail_msg("rf__source_open_ex(%s) = %d (n=%lld), expected RF_E_SOURCE", spec, rc, n);
    }
    assert_int_equal(s.n, 0); /* nothing left behind */
    assert_null(s.arena);
    va_list ap;
    va_start(ap, o);
    const char *want;
    while ((want = va_arg(ap, const char *)) != NULL)
        if (!strstr(err, want))
            fail_msg("error message \"%s\" lacks \"%s\"", err, want);
    va_end(ap);
    printf("  %s\n", err);
}

rf_reader *tu_reader_open(int backend, unsigned depth)
{
    rf_reader *r = NULL;
    assert_int_equal(rf__reader_create(&r, backend, depth), 0);
    assert_non_null(r);
    if (backend == RF__IO_URING && rf__reader_backend(r) != RF__IO_URING) {
        printf("  io_uring unavailable here: %s\n", rf__reader_note(r));
        assert_int_equal(rf__reader_backend(r), RF__IO_PREAD);
        rf__reader_destroy(r);
        return NULL;
    }
    assert_int_equal(rf__reader_backend(r), backend);
    assert_int_equal(rf__reader_depth(r), depth ? depth : 64);
    assert_int_equal(rf__reader_inflight(r), 0);
    return r;
}

void tu_assert_permutation(const int64_t *o, int64_t n)
{
    char *seen = calloc((size_t)n, 1);
    assert_non_null(seen);
    for (int64_t i = 0; i < n; i++) {
        assert_true(o[i] >= 0 && o[i] < n);
        assert_int_equal(seen[o[i]], 0);
        seen[o[i]] = 1;
    }
    free(seen);
}
