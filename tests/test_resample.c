/*
 * test_resample.c - the resampler (lib/transform/resample.c, kernels.c,
 * avx2.c) by its own identities and against Pillow.
 *
 * No scaling is a copy, a constant stays constant, window == full + crop,
 * flip and NCHW are rearrangements, the bounds it computes suffice and are
 * tight, reused scratch memory changes nothing; and byte for byte against
 * Pillow 9.4 on small pictures defined by a formula that both sides can
 * compute (resamplecheck.h), at every instruction-set level the machine
 * has. The plain transcription of Pillow's algorithm it is also checked
 * against is test_resample_ref.c's.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "resamplecheck.h"
#include "transform.h"

/* ----------------------------------------------------------------- helpers */

/* g with the window widened to the whole resampled picture. */
static rf_geom whole(const rf_geom *g)
{
    rf_geom f = *g;
    f.crop_x = 0;
    f.crop_y = 0;
    f.crop_w = g->out_w;
    f.crop_h = g->out_h;
    f.flip = 0;
    return f;
}

/* Geometries that exercise every path: centre crops, random crops, the DCT
 * fractional boxes, upscaling, one-axis-only and identity passes. Returns how
 * many were written to gs (at most cap); pictures are w x h. */
static int some_geoms(int w, int h, rf_geom *gs, int cap)
{
    int n = 0;
    const int sizes[] = {5, 16, 24, 33};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && n + 6 <= cap; i++) {
        int S = sizes[i];
        rf__geom_center(w, h, S, &gs[n++]);
        rf_rng rng = rf__rng_make(7, 1, (uint64_t)S);
        rf__geom_rrc(w, h, S, &rng, &gs[n++]);
        rf__geom_rrc(w, h, S, &rng, &gs[n++]);
        /* The same crops as if decoded at 1/2 scale (fractional boxes). */
        rf_geom half = gs[n - 1];
        rf__geom_scale(&half, 2);
        gs[n++] = half;
        half = gs[n - 4];
        rf__geom_scale(&half, 2);
        gs[n++] = half;
        rf__geom_none(w, h, S, &gs[n++]);
    }
    /* one axis only; identity; integer-shifted identity */
    rf_geom g = {0, 0, w, h, w, h / 2 + 1, 0, 0, w, h / 2 + 1, 0};
    if (n < cap)
        gs[n++] = g;
    rf_geom g2 = {0, 0, w, h, w / 3 + 1, h, 1, 0, w / 3, h, 1};
    if (n < cap)
        gs[n++] = g2;
    rf_geom g3 = {0, 0, w, h, w, h, 0, 0, w, h, 0};
    if (n < cap)
        gs[n++] = g3;
    rf_geom g4 = {3, 2, w - 1, h - 3, w - 4, h - 5, 0, 0, w - 4, h - 5, 0};
    if (n < cap)
        gs[n++] = g4;
    return n;
}

/* -------------------------------------------------------------- resampler */

static void test_identity_and_integer_crop_exact(void **state)
{
    (void)state;
    const int w = 31, h = 17;
    uint8_t *pic = rc_random_pic(w, h, 1);
    rf_resampler *r = rf__resampler_create();
    assert_non_null(r);

    rf_geom g = {0, 0, w, h, w, h, 0, 0, w, h, 0};
    uint8_t *d = rc_run(r, &g, pic, w, h, RF__LAYOUT_NHWC);
    assert_memory_equal(d, pic, (size_t)w * h * 3);
    free(d);

    /* An integer box of the output's size is a plain crop (RRC with w == S). */
    rf_geom c = {5, 3, 5 + 16, 3 + 12, 16, 12, 0, 0, 16, 12, 0};
    d = rc_run(r, &c, pic, w, h, RF__LAYOUT_NHWC);
    for (int y = 0; y < 12; y++)
        assert_memory_equal(d + (size_t)y * 16 * 3, pic + ((size_t)(y + 3) * w + 5) * 3, 16 * 3);
    free(d);

    /* Same, read from a region holding just the crop. */
    uint8_t *reg = malloc(16 * 12 * 3), dst[16 * 12 * 3];
    assert_non_null(reg);
    for (int y = 0; y < 12; y++)
        memcpy(reg + (size_t)y * 16 * 3, pic + ((size_t)(y + 3) * w + 5) * 3, 16 * 3);
    assert_int_equal(rf__resample(r, &c, w, h, reg, 16 * 3, 5, 3, 16, 12, dst, RF__LAYOUT_NHWC), 0);
    assert_memory_equal(dst, reg, sizeof dst);
    free(reg);

    /* Rows farther apart than w * 3 bytes (a stride with slack). */
    rf_geom cg;
    rf__geom_center(w, h, 12, &cg);
    uint8_t *tight = rc_run(r, &cg, pic, w, h, RF__LAYOUT_NHWC);
    size_t stride = (size_t)w * 3 + 7;
    uint8_t *wide = calloc(stride * h, 1), *d2 = malloc(rc_out_bytes(&cg));
    assert_non_null(wide);
    assert_non_null(d2);
    for (int y = 0; y < h; y++)
        memcpy(wide + y * stride, pic + (size_t)y * w * 3, (size_t)w * 3);
    assert_int_equal(rf__resample(r, &cg, w, h, wide, stride, 0, 0, w, h, d2, RF__LAYOUT_NHWC), 0);
    assert_memory_equal(d2, tight, rc_out_bytes(&cg));
    free(tight);
    free(wide);
    free(d2);

    rf__resampler_destroy(r);
    free(pic);
}

static void test_constant_picture_stays_constant(void **state)
{
    (void)state;
    const int w = 53, h = 41;
    uint8_t *pic = malloc((size_t)w * h * 3);
    assert_non_null(pic);
    for (size_t i = 0; i < (size_t)w * h; i++) {
        pic[i * 3 + 0] = 77;
        pic[i * 3 + 1] = 150;
        pic[i * 3 + 2] = 255;
    }
    rf_resampler *r = rf__resampler_create();
    assert_non_null(r);
    rf_geom gs[40];
    int n = some_geoms(w, h, gs, 40);
    rf_geom up = {0, 0, w, h, 200, 7, 0, 0, 200, 7, 0}; /* stretched both ways */
    gs[n++] = up;
    for (int i = 0; i < n; i++) {
        uint8_t *d = rc_run(r, &gs[i], pic, w, h, RF__LAYOUT_NHWC);
        for (size_t p = 0; p < (size_t)gs[i].crop_w * gs[i].crop_h; p++) {
            assert_int_equal(d[p * 3 + 0], 77);
            assert_int_equal(d[p * 3 + 1], 150);
            assert_int_equal(d[p * 3 + 2], 255);
        }
        free(d);
    }
    rf__resampler_destroy(r);
    free(pic);
}

/* Window-only resample == whole resample + crop, and bounds suffice: a tight
 * copy of the bounds region (nothing around it, so ASan sees any overread)
 * gives the same bytes as the whole picture. */
static void test_window_and_bounds(void **state)
{
    (void)state;
    static const int sizes[][2] = {{97, 61}, {61, 97}, {40, 40}, {13, 9}, {200, 11}};
    rf_resampler *r = rf__resampler_create();
    assert_non_null(r);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int w = sizes[s][0], h = sizes[s][1];
        uint8_t *pic = rc_random_pic(w, h, (uint32_t)s + 10);
        rf_geom gs[40];
        int n = some_geoms(w, h, gs, 40);
        for (int i = 0; i < n; i++) {
            const rf_geom *g = &gs[i];
            /* The boxes scaled by 1/2 are simply read from this picture:
             * any picture containing the box will do. */
            const int pw = w, ph = h;
            const uint8_t *p = pic;
            rf_geom f = whole(g);
            uint8_t *full = rc_run(r, &f, p, pw, ph, RF__LAYOUT_NHWC);
            uint8_t *want = rc_cut(g, full);
            uint8_t *got = rc_run(r, g, p, pw, ph, RF__LAYOUT_NHWC);
            assert_memory_equal(got, want, rc_out_bytes(g));

            int bx0, by0, bx1, by1;
            rf__geom_bounds(g, pw, ph, &bx0, &by0, &bx1, &by1);
            assert_true(0 <= bx0 && bx0 < bx1 && bx1 <= pw);
            assert_true(0 <= by0 && by0 < by1 && by1 <= ph);
            int rw = bx1 - bx0, rh = by1 - by0;
            uint8_t *reg = malloc((size_t)rw * rh * 3);
            uint8_t *dst = malloc(rc_out_bytes(g));
            assert_non_null(reg);
            assert_non_null(dst);
            for (int y = 0; y < rh; y++)
                memcpy(reg + (size_t)y * rw * 3, p + ((size_t)(by0 + y) * pw + bx0) * 3,
                       (size_t)rw * 3);
            assert_int_equal(
                rf__resample(r, g, pw, ph, reg, (size_t)rw * 3, bx0, by0, rw, rh, dst, 0), 0);
            assert_memory_equal(dst, want, rc_out_bytes(g));
            free(reg);
            free(dst);
            free(got);
            free(want);
            free(full);
        }
        free(pic);
    }
    rf__resampler_destroy(r);
}

/* The centre crop reads only the rows and columns near the window. */
static void test_bounds_tight(void **state)
{
    (void)state;
    rf_geom g;
    rf__geom_center(500, 375, 224, &g); /* 341 x 256, window x 58..282, y 16..240 */
    int x0, y0, x1, y1;
    rf__geom_bounds(&g, 500, 375, &x0, &y0, &x1, &y1);
    /* scale 500/341: window columns 58..282 -> source ~85..413, +-1.5 taps */
    assert_in_range(x0, 82, 86);
    assert_in_range(x1, 413, 417);
    assert_in_range(y0, 21, 24);
    assert_in_range(y1, 351, 354);
}

static void test_flip_and_nchw(void **state)
{
    (void)state;
    const int w = 45, h = 38;
    uint8_t *pic = rc_random_pic(w, h, 5);
    rf_resampler *r = rf__resampler_create();
    assert_non_null(r);
    rf_geom gs[40];
    int n = some_geoms(w, h, gs, 40);
    for (int i = 0; i < n; i++) {
        rf_geom g = gs[i];
        g.flip = 0;
        uint8_t *ref = rc_run(r, &g, pic, w, h, RF__LAYOUT_NHWC);
        int cw = g.crop_w, ch = g.crop_h;
        size_t plane = (size_t)cw * ch;
        for (int flip = 0; flip < 2; flip++) {
            g.flip = flip;
            uint8_t *a = rc_run(r, &g, pic, w, h, RF__LAYOUT_NHWC);
            uint8_t *b = rc_run(r, &g, pic, w, h, RF__LAYOUT_NCHW);
            for (int y = 0; y < ch; y++)
                for (int x = 0; x < cw; x++) {
                    int sx = flip ? cw - 1 - x : x;
                    for (int c = 0; c < 3; c++) {
                        uint8_t v = ref[((size_t)y * cw + sx) * 3 + c];
                        assert_int_equal(a[((size_t)y * cw + x) * 3 + c], v);
                        assert_int_equal(b[(size_t)c * plane + (size_t)y * cw + x], v);
                    }
                }
            free(a);
            free(b);
        }
        free(ref);
    }
    rf__resampler_destroy(r);
    free(pic);
}

/* Scratch grows and is reused: results do not depend on what ran before. */
static void test_scratch_reuse_does_not_change_results(void **state)
{
    (void)state;
    uint8_t *big = rc_random_pic(300, 200, 8), *small = rc_random_pic(20, 15, 9);
    rf_geom gb, gsm;
    rf__geom_center(300, 200, 64, &gb);
    rf__geom_center(20, 15, 24, &gsm);
    rf_resampler *fresh = rf__resampler_create(), *used = rf__resampler_create();
    assert_non_null(fresh);
    assert_non_null(used);
    uint8_t *want_small = rc_run(fresh, &gsm, small, 20, 15, 0);
    rf__resampler_destroy(fresh);
    fresh = rf__resampler_create();
    uint8_t *want_big = rc_run(fresh, &gb, big, 300, 200, 0);
    for (int i = 0; i < 3; i++) {
        uint8_t *a = rc_run(used, &gb, big, 300, 200, 0);
        uint8_t *b = rc_run(used, &gsm, small, 20, 15, 0);
        assert_memory_equal(a, want_big, rc_out_bytes(&gb));
        assert_memory_equal(b, want_small, rc_out_bytes(&gsm));
        free(a);
        free(b);
    }
    rf__resampler_destroy(fresh);
    rf__resampler_destroy(used);
    rf__resampler_destroy(NULL);
    free(want_small);
    free(want_big);
    free(big);
    free(small);
}

/* ------------------------------------------------------- against Pillow */

/* The goldens (resamplecheck.h) at the default level. */
static void test_golden_pillow(void **state)
{
    (void)state;
    const int w = RC_GOLDEN_W, h = RC_GOLDEN_H;
    uint8_t *p = rc_formula_pic(w, h), *q = rc_formula_pic(60, 45);
    rf_resampler *r = rf__resampler_create();
    assert_non_null(r);
    const rf_geom *gs = rc_golden_geoms;
    for (int i = 0; i < RC_NGOLDEN_PIC; i++) {
        assert_string_not_equal(rc_goldens[i].name, "center");
        uint8_t *d = rc_run(r, &gs[i], p, w, h, RF__LAYOUT_NHWC);
        rc_check_golden(&rc_goldens[i], d, rc_out_bytes(&gs[i]));
        free(d);
    }
    rf_geom c;
    rf__geom_center(60, 45, 28, &c);
    assert_int_equal(c.out_w, 42);
    assert_int_equal(c.out_h, 32);
    assert_int_equal(c.crop_x, 7);
    assert_int_equal(c.crop_y, 2);
    uint8_t *d = rc_run(r, &c, q, 60, 45, RF__LAYOUT_NHWC);
    rc_check_golden(&rc_goldens[8], d, rc_out_bytes(&c));
    free(d);
    rf__resampler_destroy(r);
    free(p);
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity_and_integer_crop_exact),
        cmocka_unit_test(test_constant_picture_stays_constant),
        cmocka_unit_test(test_window_and_bounds),
        cmocka_unit_test(test_bounds_tight),
        cmocka_unit_test(test_flip_and_nchw),
        cmocka_unit_test(test_scratch_reuse_does_not_change_results),
        cmocka_unit_test(test_golden_pillow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
