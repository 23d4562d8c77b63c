/*
 * test_transform.c - crop geometry (lib/transform/transform.c).
 *
 * Geometry is checked against torchvision 0.14's arithmetic (tables computed
 * in Python with the same formulas), RandomResizedCrop by its invariants over
 * many seeds, the DCT scale a crop allows, and zero padding against
 * torchvision's CenterCrop. The resampler that the geometry drives is
 * test_resample.c's and test_resample_ref.c's.
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
    uint8_t *pic = rc_random_pic(w, h, 3);
    rf_resampler *r = rf__resampler_create();
    assert_non_null(r);
    /* torchvision: pad left (16-10)//2 = 3, top (12-7)//2 = 2. */
    rf_geom g = {0, 0, w, h, w, h, -3, -2, 16, 12, 0};
    for (int layout = 0; layout < 2; layout++)
        for (int flip = 0; flip < 2; flip++) {
            g.flip = flip;
            uint8_t *d = rc_run(r, &g, pic, w, h, layout);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_center_geometry),
        cmocka_unit_test(test_padding_as_torchvision_center_crop),
        cmocka_unit_test(test_rrc_properties),
        cmocka_unit_test(test_rrc_fallback),
        cmocka_unit_test(test_geom_none_is_whole_picture),
        cmocka_unit_test(test_dct_denom_and_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
