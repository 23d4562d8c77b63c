/*
 * test_transform.c - crop geometry and the resampler (lib/transform/transform.c).
 *
 * Geometry is checked against torchvision 0.14's arithmetic (tables computed
 * in Python with the same formulas), RandomResizedCrop by its invariants over
 * many seeds. The resampler is checked by its own identities (no scaling is a
 * copy, a constant stays constant, window == full + crop, flip and NCHW are
 * rearrangements, bounds suffice), byte for byte against Pillow 9.4 on small
 * pictures defined by a formula that both sides can compute, and against a
 * plain transcription of Pillow's algorithm (itself checked against those
 * Pillow results) on a few thousand random geometries, at every
 * instruction-set level the machine has (rf__resampler_simd).
 *
 * Self-contained: links lib/transform/transform.c, cmocka and libm only.
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

#include "transform.h"

/* ----------------------------------------------------------------- helpers */

/* The golden picture: high-frequency, wrapping content so that every rounding
 * step of the fixed-point filter matters. Same formula in golden.py below. */
static uint8_t *formula_pic(int w, int h)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    assert_non_null(p);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                p[((size_t)y * w + x) * 3 + c] =
                    (uint8_t)((x * x * 3 + y * y * 2 + x * y * 5 + x * 11 + y * 7 + c * 85) & 255);
    return p;
}

/* Smooth gradients plus noise, seeded. */
static uint8_t *random_pic(int w, int h, uint32_t seed)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    assert_non_null(p);
    uint32_t s = seed * 2654435761u + 12345u;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                int v = (x * 255 / w + y * 128 / h + c * 60) + (int)(s % 41) - 20;
                p[((size_t)y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return p;
}

static uint32_t fnv1a(const uint8_t *b, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

static size_t out_bytes(const rf_geom *g)
{
    return (size_t)g->crop_w * g->crop_h * 3;
}

/* Resamples the whole w x h picture with g; returns a malloc'd buffer. */
static uint8_t *run(rf_resampler *r, const rf_geom *g, const uint8_t *pic, int w, int h, int layout)
{
    uint8_t *dst = malloc(out_bytes(g));
    assert_non_null(dst);
    memset(dst, 0xA5, out_bytes(g)); /* so unwritten bytes show */
    assert_int_equal(rf__resample(r, g, w, h, pic, (size_t)w * 3, 0, 0, w, h, dst, layout), 0);
    return dst;
}

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

/* The window of g cut from a whole resampled picture (NHWC), zero-padded,
 * mirrored when g says so. */
static uint8_t *cut(const rf_geom *g, const uint8_t *full)
{
    uint8_t *d = calloc(out_bytes(g), 1);
    assert_non_null(d);
    for (int wy = 0; wy < g->crop_h; wy++)
        for (int wx = 0; wx < g->crop_w; wx++) {
            int x = g->crop_x + wx, y = g->crop_y + wy;
            if (x < 0 || y < 0 || x >= g->out_w || y >= g->out_h)
                continue;
            int dx = g->flip ? g->crop_w - 1 - wx : wx;
            memcpy(d + ((size_t)wy * g->crop_w + dx) * 3, full + ((size_t)y * g->out_w + x) * 3, 3);
        }
    return d;
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

/* --------------------------------------------------------------- geometry */

static void test_center_geometry(void **state)
{
    (void)state;
    /* w, h, S -> out_w, out_h, crop_x, crop_y; from torchvision's formulas in
     * Python:
     *   R = round(S / 0.875); short, long = sorted((w, h))
     *   new_long = int(R * long / short)
     *   off(n) = -((S - n) // 2) if S > n else int(round((n - S) / 2.0))
     * Rows with an odd n - S check round-half-even (117 -> 58, 119 -> 60,
     * 33 -> 16, 35 -> 18). */
    static const int t[][7] = {
        {500, 375, 224, 341, 256, 58, 16},
        {375, 500, 224, 256, 341, 16, 58},
        {640, 480, 224, 341, 256, 58, 16},
        {333, 500, 224, 256, 384, 16, 80},
        {343, 256, 224, 343, 256, 60, 16},
        {257, 256, 224, 257, 256, 16, 16},
        {259, 256, 224, 259, 256, 18, 16},
        {500, 375, 229, 349, 262, 60, 16},
        {1, 1, 224, 256, 256, 16, 16},
        {3, 2, 224, 384, 256, 80, 16},
        {2000, 10, 224, 51200, 256, 25488, 16},
        {10, 2000, 224, 256, 51200, 16, 25488},
        {4000, 3000, 224, 341, 256, 58, 16},
        {77, 91, 7, 8, 9, 0, 1},
        {5, 5, 1, 1, 1, 0, 0},
        {1000, 999, 100, 114, 114, 7, 7},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        rf_geom g;
        rf__geom_center(t[i][0], t[i][1], t[i][2], &g);
        assert_true(g.x0 == 0.0 && g.y0 == 0.0);
        assert_true(g.x1 == t[i][0] && g.y1 == t[i][1]);
        assert_int_equal(g.out_w, t[i][3]);
        assert_int_equal(g.out_h, t[i][4]);
        assert_int_equal(g.crop_x, t[i][5]);
        assert_int_equal(g.crop_y, t[i][6]);
        assert_int_equal(g.crop_w, t[i][2]);
        assert_int_equal(g.crop_h, t[i][2]);
        assert_int_equal(g.flip, 0);
    }
}

/* R = round(S / 0.875) >= S, so Resize + CenterCrop never pads, even for a
 * 1x1 picture (it is upscaled). Padding still exists in the resampler, as
 * torchvision's CenterCrop pads: (S - n) // 2 zeros before, the rest after. */
static void test_padding_as_torchvision_center_crop(void **state)
{
    (void)state;
    const int w = 10, h = 7;
    uint8_t *pic = random_pic(w, h, 3);
    rf_resampler *r = rf__resampler_create();
    assert_non_null(r);
    /* torchvision: pad left (16-10)//2 = 3, top (12-7)//2 = 2. */
    rf_geom g = {0, 0, w, h, w, h, -3, -2, 16, 12, 0};
    for (int layout = 0; layout < 2; layout++)
        for (int flip = 0; flip < 2; flip++) {
            g.flip = flip;
            uint8_t *d = run(r, &g, pic, w, h, layout);
            for (int wy = 0; wy < 12; wy++)
                for (int wx = 0; wx < 16; wx++)
                    for (int c = 0; c < 3; c++) {
                        int sx = (flip ? 15 - wx : wx) - 3, sy = wy - 2;
                        int inside = sx >= 0 && sx < w && sy >= 0 && sy < h;
                        uint8_t want = inside ? pic[((size_t)sy * w + sx) * 3 + c] : 0;
                        size_t at = layout == RF__LAYOUT_NHWC
                                        ? ((size_t)wy * 16 + wx) * 3 + c
                                        : (size_t)c * 16 * 12 + (size_t)wy * 16 + wx;
                        assert_int_equal(d[at], want);
                    }
            free(d);
        }
    rf__resampler_destroy(r);
    free(pic);
}

static void check_rrc(int w, int h, int S, const rf_geom *g)
{
    /* an integer box inside the picture, resampled to S x S, all kept */
    assert_true(g->x0 >= 0 && g->y0 >= 0 && g->x1 <= w && g->y1 <= h);
    assert_true(g->x0 == (int)g->x0 && g->y0 == (int)g->y0);
    assert_true(g->x1 == (int)g->x1 && g->y1 == (int)g->y1);
    assert_true(g->x1 > g->x0 && g->y1 > g->y0);
    assert_int_equal(g->out_w, S);
    assert_int_equal(g->out_h, S);
    assert_int_equal(g->crop_x, 0);
    assert_int_equal(g->crop_y, 0);
    assert_int_equal(g->crop_w, S);
    assert_int_equal(g->crop_h, S);
}

static void test_rrc_properties(void **state)
{
    (void)state;
    static const int sizes[][2] = {{500, 375}, {375, 500}, {64, 64}, {1, 1}, {3, 1000}, {37, 23}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int w = sizes[s][0], h = sizes[s][1];
        double area = (double)w * h, frac_sum = 0;
        int drawn = 0, distinct = 0;
        rf_geom prev = {0}, fallback;
        /* Ten failed tries, whatever they drew: only the fallback remains. */
        rf_rng none = rf__rng_make(0, 0, 0);
        rf__geom_rrc(w, h, 224, &none, &fallback);
        if (none.counter != 20)
            memset(&fallback, 0xff, sizeof fallback); /* this key never fell back */
        for (uint64_t seed = 0; seed < 4000; seed++) {
            rf_rng rng = rf__rng_make(seed, 3, 11);
            rf_geom g;
            rf__geom_rrc(w, h, 224, &rng, &g);
            check_rrc(w, h, 224, &g);
            /* same key, same crop */
            rf_rng again = rf__rng_make(seed, 3, 11);
            rf_geom g2;
            rf__geom_rrc(w, h, 224, &again, &g2);
            assert_memory_equal(&g, &g2, sizeof g);
            assert_true(again.counter == rng.counter);
            distinct += memcmp(&g, &prev, sizeof g) != 0;
            prev = g;

            double cw = g.x1 - g.x0, ch = g.y1 - g.y0;
            if (rng.counter != 20 || memcmp(&g, &fallback, sizeof g) != 0) {
                /* A draw that succeeded: area and ratio within range, up to
                 * the rounding of w and h to whole pixels. */
                drawn++;
                assert_true((cw + 0.5) * (ch + 0.5) >= 0.08 * area);
                assert_true((cw - 0.5) * (ch - 0.5) <= area);
                assert_true((cw + 0.5) / (ch - 0.5) >= 0.75 - 1e-9);
                assert_true((cw - 0.5) / (ch + 0.5) <= 4.0 / 3.0 + 1e-9);
                frac_sum += cw * ch / area;
            }
        }
        if (w >= 37 && h >= 23) {
            /* most draws succeed on ordinary pictures; crops vary */
            assert_true(drawn > 3000);
            assert_true(distinct > 1000);
            double mean = frac_sum / drawn;
            assert_true(mean > 0.35 && mean < 0.65);
        }
    }
}

static void test_rrc_fallback(void **state)
{
    (void)state;
    /* No draw can fit: h >= sqrt(0.08 * 20000 * 3/4) = 34.6 > 10. torchvision
     * falls back to h = 10, w = round(10 * 4/3) = 13, centred. */
    for (uint64_t seed = 0; seed < 200; seed++) {
        rf_rng rng = rf__rng_make(seed, 0, 0);
        rf_geom g;
        rf__geom_rrc(2000, 10, 224, &rng, &g);
        check_rrc(2000, 10, 224, &g);
        assert_true(g.x0 == 993 && g.x1 == 1006 && g.y0 == 0 && g.y1 == 10);
        assert_true(rng.counter == 20); /* 10 tries, two draws each */

        rng = rf__rng_make(seed, 0, 0);
        rf__geom_rrc(10, 2000, 224, &rng, &g);
        /* w = 10, h = round(10 / 0.75) = 13, top = (2000 - 13) // 2 */
        assert_true(g.x0 == 0 && g.x1 == 10 && g.y0 == 993 && g.y1 == 1006);
    }
}

static void test_geom_none_is_whole_picture(void **state)
{
    (void)state;
    rf_geom g;
    rf__geom_none(32, 32, 32, &g);
    assert_true(g.x0 == 0 && g.y0 == 0 && g.x1 == 32 && g.y1 == 32);
    assert_int_equal(g.out_w, 32);
    assert_int_equal(g.out_h, 32);
    assert_int_equal(g.crop_x, 0);
    assert_int_equal(g.crop_y, 0);
    assert_int_equal(g.crop_w, 32);
    assert_int_equal(g.crop_h, 32);
    assert_int_equal(g.flip, 0);
    assert_int_equal(rf__geom_dct_denom(&g), 1);
}

static void test_dct_denom_and_scale(void **state)
{
    (void)state;
    rf_geom g;
    rf__geom_center(500, 375, 224, &g); /* 341 x 256 from 500 x 375 */
    assert_int_equal(rf__geom_dct_denom(&g), 1);
    rf__geom_center(1000, 750, 224, &g); /* 500 x 375 at 1/2, 250 x 187 at 1/4 */
    assert_int_equal(rf__geom_dct_denom(&g), 2);
    rf__geom_center(4000, 3000, 224, &g); /* 500 x 375 at 1/8 */
    assert_int_equal(rf__geom_dct_denom(&g), 8);
    rf__geom_center(2047, 2047, 224, &g); /* 255.9 < 256 at 1/8 */
    assert_int_equal(rf__geom_dct_denom(&g), 4);
    rf__geom_center(2048, 2048, 224, &g);
    assert_int_equal(rf__geom_dct_denom(&g), 8);

    rf_geom s = g;
    rf__geom_scale(&s, 8);
    assert_true(s.x0 == 0 && s.y0 == 0 && s.x1 == 256 && s.y1 == 256);
    assert_memory_equal(&s.out_w, &g.out_w, sizeof g - offsetof(rf_geom, out_w));

    /* A random crop: 448 x 300 box to 224 -> 1/1 (300/2 = 150 < 224)... */
    rf_geom c = {10, 20, 458, 320, 224, 224, 0, 0, 224, 224, 0};
    assert_int_equal(rf__geom_dct_denom(&c), 1);
    /* ... and 900 x 1000 -> 1/4 (225 x 250), fractional box after scaling. */
    rf_geom d = {3, 5, 903, 1005, 224, 224, 0, 0, 224, 224, 0};
    assert_int_equal(rf__geom_dct_denom(&d), 4);
    rf__geom_scale(&d, 4);
    assert_true(d.x0 == 0.75 && d.y0 == 1.25 && d.x1 == 225.75 && d.y1 == 251.25);
}

/* -------------------------------------------------------------- resampler */

static void test_identity_and_integer_crop_exact(void **state)
{
    (void)state;
    const int w = 31, h = 17;
    uint8_t *pic = random_pic(w, h, 1);
    rf_resampler *r = rf__resampler_create();
    assert_non_null(r);

    rf_geom g = {0, 0, w, h, w, h, 0, 0, w, h, 0};
    uint8_t *d = run(r, &g, pic, w, h, RF__LAYOUT_NHWC);
    assert_memory_equal(d, pic, (size_t)w * h * 3);
    free(d);

    /* An integer box of the output's size is a plain crop (RRC with w == S). */
    rf_geom c = {5, 3, 5 + 16, 3 + 12, 16, 12, 0, 0, 16, 12, 0};
    d = run(r, &c, pic, w, h, RF__LAYOUT_NHWC);
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
    uint8_t *tight = run(r, &cg, pic, w, h, RF__LAYOUT_NHWC);
    size_t stride = (size_t)w * 3 + 7;
    uint8_t *wide = calloc(stride * h, 1), *d2 = malloc(out_bytes(&cg));
    assert_non_null(wide);
    assert_non_null(d2);
    for (int y = 0; y < h; y++)
        memcpy(wide + y * stride, pic + (size_t)y * w * 3, (size_t)w * 3);
    assert_int_equal(rf__resample(r, &cg, w, h, wide, stride, 0, 0, w, h, d2, RF__LAYOUT_NHWC), 0);
    assert_memory_equal(d2, tight, out_bytes(&cg));
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
        uint8_t *d = run(r, &gs[i], pic, w, h, RF__LAYOUT_NHWC);
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
        uint8_t *pic = random_pic(w, h, (uint32_t)s + 10);
        rf_geom gs[40];
        int n = some_geoms(w, h, gs, 40);
        for (int i = 0; i < n; i++) {
            const rf_geom *g = &gs[i];
            /* The boxes scaled by 1/2 are simply read from this picture:
             * any picture containing the box will do. */
            const int pw = w, ph = h;
            const uint8_t *p = pic;
            rf_geom f = whole(g);
            uint8_t *full = run(r, &f, p, pw, ph, RF__LAYOUT_NHWC);
            uint8_t *want = cut(g, full);
            uint8_t *got = run(r, g, p, pw, ph, RF__LAYOUT_NHWC);
            assert_memory_equal(got, want, out_bytes(g));

            int bx0, by0, bx1, by1;
            rf__geom_bounds(g, pw, ph, &bx0, &by0, &bx1, &by1);
            assert_true(0 <= bx0 && bx0 < bx1 && bx1 <= pw);
            assert_true(0 <= by0 && by0 < by1 && by1 <= ph);
            int rw = bx1 - bx0, rh = by1 - by0;
            uint8_t *reg = malloc((size_t)rw * rh * 3);
            uint8_t *dst = malloc(out_bytes(g));
            assert_non_null(reg);
            assert_non_null(dst);
            for (int y = 0; y < rh; y++)
                memcpy(reg + (size_t)y * rw * 3, p + ((size_t)(by0 + y) * pw + bx0) * 3,
                       (size_t)rw * 3);
            assert_int_equal(
                rf__resample(r, g, pw, ph, reg, (size_t)rw * 3, bx0, by0, rw, rh, dst, 0), 0);
            assert_memory_equal(dst, want, out_bytes(g));
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
    uint8_t *pic = random_pic(w, h, 5);
    rf_resampler *r = rf__resampler_create();
    assert_non_null(r);
    rf_geom gs[40];
    int n = some_geoms(w, h, gs, 40);
    for (int i = 0; i < n; i++) {
        rf_geom g = gs[i];
        g.flip = 0;
        uint8_t *ref = run(r, &g, pic, w, h, RF__LAYOUT_NHWC);
        int cw = g.crop_w, ch = g.crop_h;
        size_t plane = (size_t)cw * ch;
        for (int flip = 0; flip < 2; flip++) {
            g.flip = flip;
            uint8_t *a = run(r, &g, pic, w, h, RF__LAYOUT_NHWC);
            uint8_t *b = run(r, &g, pic, w, h, RF__LAYOUT_NCHW);
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
    uint8_t *big = random_pic(300, 200, 8), *small = random_pic(20, 15, 9);
    rf_geom gb, gsm;
    rf__geom_center(300, 200, 64, &gb);
    rf__geom_center(20, 15, 24, &gsm);
    rf_resampler *fresh = rf__resampler_create(), *used = rf__resampler_create();
    assert_non_null(fresh);
    assert_non_null(used);
    uint8_t *want_small = run(fresh, &gsm, small, 20, 15, 0);
    rf__resampler_destroy(fresh);
    fresh = rf__resampler_create();
    uint8_t *want_big = run(fresh, &gb, big, 300, 200, 0);
    for (int i = 0; i < 3; i++) {
        uint8_t *a = run(used, &gb, big, 300, 200, 0);
        uint8_t *b = run(used, &gsm, small, 20, 15, 0);
        assert_memory_equal(a, want_big, out_bytes(&gb));
        assert_memory_equal(b, want_small, out_bytes(&gsm));
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

/* Made with /usr/bin/python3, Pillow 9.4.0 (golden.py):
 *
 *   from PIL import Image
 *   def pic(w, h):
 *       im = Image.new("RGB", (w, h))
 *       im.putdata([tuple((x*x*3 + y*y*2 + x*y*5 + x*11 + y*7 + c*85) & 255
 *                         for c in range(3)) for y in range(h) for x in range(w)])
 *       return im
 *   def fnv(b):
 *       hsh = 2166136261
 *       for v in b:
 *           hsh = ((hsh ^ v) * 16777619) & 0xffffffff
 *       return hsh
 *   B = Image.BILINEAR
 *   p, q = pic(37, 23), pic(60, 45)
 *   cases = [
 *       ("down",      p.resize((16, 11), B)),
 *       ("up",        p.resize((50, 30), B)),
 *       ("crop_down", p.crop((5, 3, 30, 20)).resize((13, 9), B)),
 *       ("crop_up",   p.crop((10, 4, 22, 12)).resize((31, 29), B)),
 *       ("frac_box",  p.crop((2, 1, 34, 22)).resize((11, 7), B, box=(0.5, 0.5, 31.5, 20.5))),
 *       ("quarter",   p.crop((1, 0, 37, 23)).resize((9, 6), B, box=(0.25, 0.75, 35.125, 22.5))),
 *       ("h_only",    p.resize((20, 23), B)),
 *       ("v_only",    p.resize((37, 10), B)),
 *       ("center",    q.resize((42, 32), B).crop((7, 2, 35, 30))),
 *   ]
 *   for name, im in cases:
 *       b = im.tobytes()
 *       n = len(b)
 *       idx = [0, n // 7, n // 3, n // 2, (2 * n) // 3, n - 1]
 *       print('{"%s", %d, %d, 0x%08xu, {%s}, {%s}},' % (name, im.size[0], im.size[1],
 *             fnv(b), ", ".join(str(i) for i in idx), ", ".join(str(b[i]) for i in idx)))
 *
 * "crop then resize" is torchvision's resized_crop; the fractional boxes are
 * what a crop looks like after DCT scaling, resampled within the whole pixels
 * they touch. "center" is Resize(32) + CenterCrop(28) on a 60 x 45 picture. */
typedef struct golden {
    const char *name;
    int w, h;
    uint32_t fnv;
    int idx[6];
    int val[6];
} golden;

static const golden goldens[] = {
    {"down", 16, 11, 0x32cf5198u, {0, 75, 176, 264, 352, 527}, {24, 135, 134, 128, 125, 154}},
    {"up", 50, 30, 0x621378e5u, {0, 642, 1500, 2250, 3000, 4499}, {0, 104, 167, 83, 58, 64}},
    {"crop_down", 13, 9, 0xf13418ecu, {0, 50, 117, 175, 234, 350}, {114, 146, 125, 123, 123, 203}},
    {"crop_up",
     31,
     29,
     0x60d86823u,
     {0, 385, 899, 1348, 1798, 2696},
     {158, 119, 121, 124, 86, 126}},
    {"frac_box", 11, 7, 0x5df86430u, {0, 33, 77, 115, 154, 230}, {140, 127, 146, 120, 120, 98}},
    {"quarter", 9, 6, 0x0a1c15e1u, {0, 23, 54, 81, 108, 161}, {112, 131, 129, 130, 135, 128}},
    {"h_only", 20, 23, 0x01df1e87u, {0, 197, 460, 690, 920, 1379}, {9, 79, 191, 101, 165, 150}},
    {"v_only", 37, 10, 0xd242fdaau, {0, 158, 370, 555, 740, 1109}, {8, 176, 113, 127, 163, 50}},
    {"center", 28, 28, 0x1efd8660u, {0, 336, 784, 1176, 1568, 2351}, {112, 137, 72, 130, 157, 106}},
};

static void check_golden(const golden *gd, const uint8_t *d, size_t n)
{
    assert_int_equal(n, (size_t)gd->w * gd->h * 3);
    for (int i = 0; i < 6; i++) {
        if (d[gd->idx[i]] != gd->val[i])
            print_error("%s: byte %d is %d, Pillow %d\n", gd->name, gd->idx[i], d[gd->idx[i]],
                        gd->val[i]);
        assert_int_equal(d[gd->idx[i]], gd->val[i]);
    }
    if (fnv1a(d, n) != gd->fnv)
        print_error("%s: checksum 0x%08x, Pillow 0x%08x\n", gd->name, fnv1a(d, n), gd->fnv);
    assert_int_equal(fnv1a(d, n), gd->fnv);
}

static void test_golden_pillow(void **state)
{
    (void)state;
    const int w = 37, h = 23;
    uint8_t *p = formula_pic(w, h), *q = formula_pic(60, 45);
    rf_resampler *r = rf__resampler_create();
    assert_non_null(r);
    const rf_geom gs[] = {
        {0, 0, w, h, 16, 11, 0, 0, 16, 11, 0},
        {0, 0, w, h, 50, 30, 0, 0, 50, 30, 0},
        {5, 3, 30, 20, 13, 9, 0, 0, 13, 9, 0},
        {10, 4, 22, 12, 31, 29, 0, 0, 31, 29, 0},
        {2.5, 1.5, 33.5, 21.5, 11, 7, 0, 0, 11, 7, 0},
        {1.25, 0.75, 36.125, 22.5, 9, 6, 0, 0, 9, 6, 0},
        {0, 0, w, h, 20, 23, 0, 0, 20, 23, 0},
        {0, 0, w, h, 37, 10, 0, 0, 37, 10, 0},
    };
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) {
        assert_string_not_equal(goldens[i].name, "center");
        uint8_t *d = run(r, &gs[i], p, w, h, RF__LAYOUT_NHWC);
        check_golden(&goldens[i], d, out_bytes(&gs[i]));
        free(d);
    }
    rf_geom c;
    rf__geom_center(60, 45, 28, &c);
    assert_int_equal(c.out_w, 42);
    assert_int_equal(c.out_h, 32);
    assert_int_equal(c.crop_x, 7);
    assert_int_equal(c.crop_y, 2);
    uint8_t *d = run(r, &c, q, 60, 45, RF__LAYOUT_NHWC);
    check_golden(&goldens[8], d, out_bytes(&c));
    free(d);
    rf__resampler_destroy(r);
    free(p);
    free(q);
}

/* ------------------------------------------------ against a plain reference */

/* Pillow 9.4's ImagingResample for 8-bit RGB, transcribed plainly
 * (precompute_coeffs, normalize_coeffs_8bpc, ResampleHorizontal_8bpc,
 * ResampleVertical_8bpc, with their skip rules), on the picture cropped to
 * the clamp region [floor(x0), ceil(x1)) x [floor(y0), ceil(y1)) with the
 * box relative to it as floats: what transform.h promises, with none of
 * transform.c's shortcuts (window only, uniform tap counts, 16-bit halves,
 * transposed tiles, vector code). Returns the whole out_w x out_h picture,
 * NHWC. */
typedef struct ref_axis {
    int ksize;
    int *first, *count;
    int32_t *k;
} ref_axis;

static void ref_coeffs(int in_size, float in0, float in1, int out_size, ref_axis *a)
{
    double scale = (double)(in1 - in0) / out_size;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale, ss = 1.0 / filterscale;
    a->ksize = (int)ceil(support) * 2 + 1;
    a->first = malloc((size_t)out_size * sizeof(int));
    a->count = malloc((size_t)out_size * sizeof(int));
    a->k = calloc((size_t)out_size * a->ksize, sizeof(int32_t));
    double *w = malloc((size_t)a->ksize * sizeof(double));
    assert_true(a->first && a->count && a->k && w);
    for (int xx = 0; xx < out_size; xx++) {
        double center = in0 + (xx + 0.5) * scale, ww = 0.0;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        for (int x = 0; x < xmax; x++) {
            double t = fabs((x + xmin - center + 0.5) * ss);
            w[x] = t < 1.0 ? 1.0 - t : 0.0; /* bilinear_filter */
            ww += w[x];
        }
        for (int x = 0; x < xmax; x++) {
            double v = ww != 0.0 ? w[x] / ww : w[x];
            a->k[(size_t)xx * a->ksize + x] =
                v < 0 ? (int32_t)(-0.5 + v * (1 << 22)) : (int32_t)(0.5 + v * (1 << 22));
        }
        a->first[xx] = xmin;
        a->count[xx] = xmax;
    }
    free(w);
}

static void ref_free(ref_axis *a)
{
    free(a->first);
    free(a->count);
    free(a->k);
}

static uint8_t ref_clip8(int32_t v)
{
    v = v < 0 ? -1 : v >> 22;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static uint8_t *ref_resample(const uint8_t *pic, int w, int h, const rf_geom *g)
{
    int cx = g->x0 > 0 ? (int)floor(g->x0) : 0, cy = g->y0 > 0 ? (int)floor(g->y0) : 0;
    int cw = (g->x1 < w ? (int)ceil(g->x1) : w) - cx, ch = (g->y1 < h ? (int)ceil(g->y1) : h) - cy;
    float bx0 = (float)(g->x0 - cx), bx1 = (float)(g->x1 - cx);
    float by0 = (float)(g->y0 - cy), by1 = (float)(g->y1 - cy);
    int ow = g->out_w, oh = g->out_h;
    int need_h = ow != cw || bx0 != 0.0f || bx1 != (float)ow;
    int need_v = oh != ch || by0 != 0.0f || by1 != (float)oh;
    ref_axis ax, ay;
    ref_coeffs(cw, bx0, bx1, ow, &ax);
    ref_coeffs(ch, by0, by1, oh, &ay);
    /* Rows [y_first, y_last) of the clamp region, resampled horizontally (or
     * copied) into mid, mid_w pixels wide. */
    int y_first = need_v ? ay.first[0] : 0;
    int y_last = need_v ? ay.first[oh - 1] + ay.count[oh - 1] : ch;
    int mid_w = need_h ? ow : cw;
    uint8_t *mid = malloc((size_t)(y_last - y_first) * mid_w * 3);
    assert_non_null(mid);
    for (int y = y_first; y < y_last; y++) {
        const uint8_t *srow = pic + ((size_t)(cy + y) * w + cx) * 3;
        uint8_t *mrow = mid + (size_t)(y - y_first) * mid_w * 3;
        for (int xx = 0; xx < mid_w; xx++)
            for (int c = 0; c < 3; c++) {
                if (!need_h) {
                    mrow[xx * 3 + c] = srow[xx * 3 + c];
                    continue;
                }
                int32_t ss = 1 << 21;
                for (int x = 0; x < ax.count[xx]; x++)
                    ss += srow[(ax.first[xx] + x) * 3 + c] * ax.k[(size_t)xx * ax.ksize + x];
                mrow[xx * 3 + c] = ref_clip8(ss);
            }
    }
    assert_int_equal(need_v ? oh : y_last - y_first, oh);
    uint8_t *out = malloc((size_t)ow * oh * 3);
    assert_non_null(out);
    for (int yy = 0; yy < oh; yy++)
        for (int xx = 0; xx < ow; xx++)
            for (int c = 0; c < 3; c++) {
                if (!need_v) {
                    out[((size_t)yy * ow + xx) * 3 + c] = mid[((size_t)yy * mid_w + xx) * 3 + c];
                    continue;
                }
                int32_t ss = 1 << 21;
                for (int y = 0; y < ay.count[yy]; y++)
                    ss += mid[((size_t)(ay.first[yy] + y - y_first) * mid_w + xx) * 3 + c] *
                          ay.k[(size_t)yy * ay.ksize + y];
                out[((size_t)yy * ow + xx) * 3 + c] = ref_clip8(ss);
            }
    free(mid);
    ref_free(&ax);
    ref_free(&ay);
    return out;
}

/* The window of g in layout, from the whole resampled picture. */
static uint8_t *ref_window(const rf_geom *g, const uint8_t *full, int layout)
{
    uint8_t *d = cut(g, full);
    if (layout == RF__LAYOUT_NHWC)
        return d;
    size_t plane = (size_t)g->crop_w * g->crop_h;
    uint8_t *p = malloc(plane * 3);
    assert_non_null(p);
    for (size_t i = 0; i < plane; i++)
        for (int c = 0; c < 3; c++)
            p[(size_t)c * plane + i] = d[i * 3 + c];
    free(d);
    return p;
}

/* The reference gives Pillow's bytes. */
static void test_reference_is_pillow(void **state)
{
    (void)state;
    const int w = 37, h = 23;
    uint8_t *p = formula_pic(w, h), *q = formula_pic(60, 45);
    const rf_geom gs[] = {
        {0, 0, w, h, 16, 11, 0, 0, 16, 11, 0},
        {0, 0, w, h, 50, 30, 0, 0, 50, 30, 0},
        {5, 3, 30, 20, 13, 9, 0, 0, 13, 9, 0},
        {10, 4, 22, 12, 31, 29, 0, 0, 31, 29, 0},
        {2.5, 1.5, 33.5, 21.5, 11, 7, 0, 0, 11, 7, 0},
        {1.25, 0.75, 36.125, 22.5, 9, 6, 0, 0, 9, 6, 0},
        {0, 0, w, h, 20, 23, 0, 0, 20, 23, 0},
        {0, 0, w, h, 37, 10, 0, 0, 37, 10, 0},
    };
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) {
        uint8_t *d = ref_resample(p, w, h, &gs[i]);
        check_golden(&goldens[i], d, out_bytes(&gs[i]));
        free(d);
    }
    rf_geom c;
    rf__geom_center(60, 45, 28, &c);
    uint8_t *full = ref_resample(q, 60, 45, &c);
    uint8_t *d = ref_window(&c, full, RF__LAYOUT_NHWC);
    check_golden(&goldens[8], d, out_bytes(&c));
    free(d);
    free(full);
    free(p);
    free(q);
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Uniform in [lo, hi]. */
static int draw(uint64_t *s, int lo, int hi)
{
    return lo + (int)(xorshift(s) % (uint64_t)(hi - lo + 1));
}

/* A geometry for a w x h picture (shrunk in *w, *h when it is a box scaled
 * as by the DCT): centre crops, random crops, their DCT-scaled boxes, and
 * arbitrary boxes (fractional or not, up- or downscaled up to ~40 times, one
 * axis or both unchanged) with windows that may need padding. */
static rf_geom make_geom(uint64_t *s, int *w, int *h)
{
    rf_geom g;
    int kind = draw(s, 0, 5);
    if (kind <= 2) {
        int size = draw(s, 1, *w + *h);
        if (kind == 0) {
            rf__geom_center(*w, *h, size, &g);
        } else {
            rf_rng rng = rf__rng_make(xorshift(s), 1, 2);
            rf__geom_rrc(*w, *h, size, &rng, &g);
        }
        int d = rf__geom_dct_denom(&g);
        if (kind == 2 && d > 1) {
            rf__geom_scale(&g, d);
            *w = (*w + d - 1) / d;
            *h = (*h + d - 1) / d;
        }
    } else {
        memset(&g, 0, sizeof g);
        double u[4];
        for (int i = 0; i < 4; i++)
            u[i] = (double)(xorshift(s) >> 11) / 9007199254740992.0;
        g.x0 = u[0] * (*w - 1);
        g.x1 = g.x0 + 0.5 + u[1] * (*w - g.x0 - 0.5);
        g.y0 = u[2] * (*h - 1);
        g.y1 = g.y0 + 0.5 + u[3] * (*h - g.y0 - 0.5);
        if (kind == 3) { /* whole pixels */
            g.x0 = floor(g.x0);
            g.y0 = floor(g.y0);
            g.x1 = ceil(g.x1);
            g.y1 = ceil(g.y1);
        }
        int bw = (int)ceil(g.x1 - g.x0), bh = (int)ceil(g.y1 - g.y0);
        g.out_w = draw(s, 0, 3) == 0 ? bw : draw(s, 1 + bw / 40, 3 * bw + 2);
        g.out_h = draw(s, 0, 3) == 0 ? bh : draw(s, 1 + bh / 40, 3 * bh + 2);
        if (kind == 5) { /* the whole picture, maybe unchanged on one axis */
            g.x0 = g.y0 = 0;
            g.x1 = *w;
            g.y1 = *h;
            if (draw(s, 0, 1))
                g.out_w = *w;
            else
                g.out_h = *h;
        }
        g.crop_w = draw(s, 1, g.out_w + 6);
        g.crop_h = draw(s, 1, g.out_h + 6);
        g.crop_x = draw(s, -6, g.out_w - 1);
        g.crop_y = draw(s, -6, g.out_h - 1);
    }
    g.flip = draw(s, 0, 1);
    return g;
}

/* rf__resample at every level == the reference, on random pictures and
 * geometries, read from a region cut to the bounds (ASan sees overreads)
 * with a stride that may have slack. */
static void test_matches_reference(void **state)
{
    (void)state;
    rf_resampler *r = rf__resampler_create();
    assert_non_null(r);
    int best = rf__resampler_simd(r, RF__SIMD_AVX2);
    assert_true(best >= RF__SIMD_NONE && best <= RF__SIMD_AVX2);
#if defined(__SSE2__) && !defined(RF_TRANSFORM_NO_SIMD)
    assert_true(best >= RF__SIMD_SSE2);
#endif
    assert_int_equal(rf__resampler_simd(r, -1), RF__SIMD_NONE);
    assert_int_equal(rf__resampler_simd(r, 99), best);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int it = 0; it < 1500; it++) {
        int big = it % 10 == 0;
        int w = big ? draw(&s, 60, 260) : draw(&s, 1, 48);
        int h = big ? draw(&s, 40, 200) : draw(&s, 1, 48);
        rf_geom g = make_geom(&s, &w, &h);
        uint8_t *pic = random_pic(w, h, (uint32_t)it);
        if (it % 7 == 3) /* extremes: carries and clipping */
            for (size_t i = 0; i < (size_t)w * h * 3; i++)
                pic[i] = pic[i] & 1 ? 255 : pic[i] & 2 ? 0 : pic[i];
        int layout = draw(&s, 0, 1);
        uint8_t *full = ref_resample(pic, w, h, &g);
        uint8_t *want = ref_window(&g, full, layout);

        int x0, y0, x1, y1;
        rf__geom_bounds(&g, w, h, &x0, &y0, &x1, &y1);
        int rw = x1 - x0, rh = y1 - y0;
        size_t stride = (size_t)rw * 3 + (size_t)draw(&s, 0, 1) * (size_t)draw(&s, 1, 40);
        size_t n = rh > 0 ? stride * (size_t)(rh - 1) + (size_t)rw * 3 : 1;
        uint8_t *reg = malloc(n), *got = malloc(out_bytes(&g));
        assert_non_null(reg);
        assert_non_null(got);
        for (int y = 0; y < rh; y++)
            memcpy(reg + (size_t)y * stride, pic + ((size_t)(y0 + y) * w + x0) * 3, (size_t)rw * 3);
        for (int level = RF__SIMD_NONE; level <= best; level++) {
            assert_int_equal(rf__resampler_simd(r, level), level);
            memset(got, 0xA5, out_bytes(&g));
            assert_int_equal(rf__resample(r, &g, w, h, reg, stride, x0, y0, rw, rh, got, layout),
                             0);
            if (memcmp(got, want, out_bytes(&g)) != 0)
                print_error("level %d: picture %dx%d, box %.4f,%.4f-%.4f,%.4f, out %dx%d, window "
                            "%d,%d %dx%d, flip %d, layout %d\n",
                            level, w, h, g.x0, g.y0, g.x1, g.y1, g.out_w, g.out_h, g.crop_x,
                            g.crop_y, g.crop_w, g.crop_h, g.flip, layout);
            assert_memory_equal(got, want, out_bytes(&g));
        }
        free(reg);
        free(got);
        free(want);
        free(full);
        free(pic);
    }
    rf__resampler_destroy(r);
}

/* Strong shrinking: hundreds to thousands of taps (the kernels' loops with
 * a run-time tap count, odd and even, and their largest sums), on pictures
 * with runs of 255 and 0, against the reference at every level. */
static void test_many_taps(void **state)
{
    (void)state;
    static const struct {
        int w, h, out_w, out_h;
    } cases[] = {
        {3001, 5, 1, 5},   {4000, 2, 3, 2},   {5, 2999, 5, 1},  {2, 4000, 2, 3},
        {1500, 40, 7, 40}, {40, 1499, 40, 9}, {700, 650, 3, 2}, {651, 703, 17, 1},
    };
    rf_resampler *r = rf__resampler_create();
    assert_non_null(r);
    int best = rf__resampler_simd(r, RF__SIMD_AVX2);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int w = cases[i].w, h = cases[i].h;
        uint8_t *pic = random_pic(w, h, (uint32_t)i);
        for (size_t j = 0; j < (size_t)w * h * 3; j++)
            pic[j] = (j / 97) % 3 == 0 ? 255 : (j / 89) % 5 == 0 ? 0 : pic[j];
        rf_geom g;
        memset(&g, 0, sizeof g);
        g.x1 = w;
        g.y1 = h;
        g.out_w = g.crop_w = cases[i].out_w;
        g.out_h = g.crop_h = cases[i].out_h;
        g.flip = (int)(i % 2);
        uint8_t *full = ref_resample(pic, w, h, &g);
        for (int layout = 0; layout < 2; layout++) {
            uint8_t *want = ref_window(&g, full, layout);
            for (int level = RF__SIMD_NONE; level <= best; level++) {
                assert_int_equal(rf__resampler_simd(r, level), level);
                uint8_t *got = run(r, &g, pic, w, h, layout);
                assert_memory_equal(got, want, out_bytes(&g));
                free(got);
            }
            free(want);
        }
        free(full);
        free(pic);
    }
    rf__resampler_destroy(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_center_geometry),
        cmocka_unit_test(test_padding_as_torchvision_center_crop),
        cmocka_unit_test(test_rrc_properties),
        cmocka_unit_test(test_rrc_fallback),
        cmocka_unit_test(test_geom_none_is_whole_picture),
        cmocka_unit_test(test_dct_denom_and_scale),
        cmocka_unit_test(test_identity_and_integer_crop_exact),
        cmocka_unit_test(test_constant_picture_stays_constant),
        cmocka_unit_test(test_window_and_bounds),
        cmocka_unit_test(test_bounds_tight),
        cmocka_unit_test(test_flip_and_nchw),
        cmocka_unit_test(test_scratch_reuse_does_not_change_results),
        cmocka_unit_test(test_golden_pillow),
        cmocka_unit_test(test_reference_is_pillow),
        cmocka_unit_test(test_matches_reference),
        cmocka_unit_test(test_many_taps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
