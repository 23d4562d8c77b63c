/*
 * formatcheck.h - what test_formats.c and test_formats_bmp.c share: a test
 * file with the RGB picture PIL makes of it, and the checks run on it
 * through rf__decode_sample (transform "none" gives the picture itself,
 * center and rrc what the resampler makes of the whole picture; broken files
 * fail with a status and a reason). Static functions: each test includes it
 * once.
 */
#ifndef RF_FORMATCHECK_H
#define RF_FORMATCHECK_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decode.h"
#include "resample.h"
#include "ringfeed.h"
#include "transform.h"

/* A test file and the RGB picture PIL makes of it. */
typedef struct pic {
    uint8_t *file, *rgb;
    size_t len;
    int w, h;
} pic;

static void pic_free(pic *p)
{
    free(p->file);
    free(p->rgb);
    memset(p, 0, sizeof *p);
}

static uint32_t rnd(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static rf_decode_opts opts(int transform, int size)
{
    rf_decode_opts o = {.transform = transform,
                        .size = size,
                        .layout = RF_LAYOUT_NHWC,
                        .max_pixels = 178956970,
                        .max_scans = 1000,
                        .seed = 11,
                        .check_tail = 1};
    return o;
}

static int decode(rf_decoder *d, const pic *p, const rf_decode_opts *o, uint8_t *out, char *err,
                  size_t errcap, rf_decode_times *t)
{
    return rf__decode_sample(d, p->file, p->len, o, out, err, errcap, t);
}

/* Transform "none" gives the picture itself; center and rrc give what the
 * resampler makes of the whole expected picture (the region each decoder
 * picks must not change a byte). */
static void check_pic(rf_decoder *d, const pic *p, const char *what)
{
    char err[256] = "";
    rf_decode_times t;
    if (p->w == p->h) {
        rf_decode_opts o = opts(RF_TRANSFORM_NONE, p->w);
        uint8_t *out = malloc((size_t)p->w * p->h * 3);
        int rc = decode(d, p, &o, out, err, sizeof err, &t);
        if (rc != 0)
            fail_msg("%s: %d %s", what, rc, err);
        if (memcmp(out, p->rgb, (size_t)p->w * p->h * 3) != 0)
            fail_msg("%s: pixels differ from PIL's", what);
        free(out);
    }
    rf_resampler *rs = rf__resampler_create();
    for (int k = 0; k < 6; k++) {
        int transform = k < 2 ? RF_TRANSFORM_CENTER : RF_TRANSFORM_RANDOM_RESIZED_CROP;
        int size = k % 2 ? 24 : 56;
        rf_decode_opts o = opts(transform, size);
        o.sample = k;
        o.flip = k >= 4;
        o.check_tail = k % 3 != 0;
        o.layout = k == 5 ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC;
        rf_rng rng = rf__rng_make(o.seed, 0, (uint64_t)o.sample);
        rf_geom g;
        if (transform == RF_TRANSFORM_CENTER)
            rf__geom_center(p->w, p->h, size, &g);
        else
            rf__geom_rrc(p->w, p->h, size, &rng, &g);
        g.flip = o.flip ? rf__rng_uniform(&rng) < 0.5 : 0;
        size_t n = (size_t)size * size * 3;
        uint8_t *ref = malloc(n), *out = malloc(n);
        assert_int_equal(rf__resample(rs, &g, p->w, p->h, p->rgb, (size_t)p->w * 3, 0, 0, p->w,
                                      p->h, ref, k == 5 ? RF__LAYOUT_NCHW : RF__LAYOUT_NHWC),
                         0);
        int rc = decode(d, p, &o, out, err, sizeof err, &t);
        if (rc != 0)
            fail_msg("%s (transform %d, size %d): %d %s", what, transform, size, rc, err);
        assert_int_equal(t.denom, 1);
        assert_int_equal(t.width, p->w);
        if (memcmp(out, ref, n) != 0)
            fail_msg("%s (transform %d, size %d): region decode differs", what, transform, size);
        free(ref);
        free(out);
    }
    rf__resampler_destroy(rs);
}

static void expect_error(rf_decoder *d, const uint8_t *file, size_t len, int check_tail,
                         int want_rc, const char *want, const char *what)
{
    rf_decode_opts o = opts(RF_TRANSFORM_CENTER, 32);
    o.check_tail = check_tail;
    o.max_pixels = 4000000;
    uint8_t out[32 * 32 * 3];
    char err[256] = "";
    rf_decode_times t;
    int rc = rf__decode_sample(d, file, len, &o, out, err, sizeof err, &t);
    if (rc != want_rc || !strstr(err, want))
        fail_msg("%s: got %d \"%s\", want %d with \"%s\"", what, rc, err, want_rc, want);
}

#endif
