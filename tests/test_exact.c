/*
 * test_exact.c - RF_P_EXACT (full-resolution decode) and RandomResizedCrop's
 * scale / ratio options (RF_P_SCALE_*, RF_P_RATIO_*): how the options
 * resolve and are refused, the geometry they give, and what the decoder and
 * the loader do with them.
 */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decode.h"
#include "options.h"
#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"
#include "transform.h"

/* rf__options_resolve of the defaults with params[0..n) changed. */
static int resolve_with(const tu_param *params, size_t n, rf_config *c, char *err, size_t cap)
{
    rf_options o;
    rf__options_defaults(&o);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(rf__option_check(params[i].param, params[i].value, err, cap), RF_OK);
        o.v[params[i].param] = params[i].value;
    }
    err[0] = '\0';
    return rf__options_resolve(&o, c, err, cap);
}

#define RESOLVE(c, err, ...)                                                                       \
    resolve_with((const tu_param[]){__VA_ARGS__},                                                  \
                 sizeof((const tu_param[]){__VA_ARGS__}) / sizeof(tu_param), (c), (err),           \
                 sizeof(err))

static void test_options_defaults_and_bounds(void **state)
{
    (void)state;
    rf_config c;
    char err[256];
    /* 0 (the default) and the defaults rounded to millionths are torchvision's doubles. */
    assert_int_equal(RESOLVE(&c, err, {RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP}), RF_OK);
    assert_int_equal(c.exact, 0);
    assert_true(c.scale_min == 0.08 && c.scale_max == 1.0);
    assert_true(c.ratio_min == 3.0 / 4.0 && c.ratio_max == 4.0 / 3.0);
    assert_int_equal(RESOLVE(&c, err, {RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP},
                             {RF_P_SCALE_MIN, 80000}, {RF_P_SCALE_MAX, 1000000},
                             {RF_P_RATIO_MIN, 750000}, {RF_P_RATIO_MAX, 1333333}),
                     RF_OK);
    assert_true(c.scale_min == 0.08 && c.scale_max == 1.0);
    assert_true(c.ratio_min == 3.0 / 4.0 && c.ratio_max == 4.0 / 3.0);
    /* Other values are millionths. */
    assert_int_equal(RESOLVE(&c, err, {RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP},
                             {RF_P_SCALE_MIN, 500000}, {RF_P_SCALE_MAX, 500000},
                             {RF_P_RATIO_MIN, 1500000}, {RF_P_RATIO_MAX, 2000000}, {RF_P_EXACT, 1}),
                     RF_OK);
    assert_true(c.scale_min == 0.5 && c.scale_max == 0.5);
    assert_true(c.ratio_min == 1.5 && c.ratio_max == 2.0);
    assert_int_equal(c.exact, 1);

    /* Bounds: scale within (0, 1], ratio within (0, 1000], exact 0/1. */
    int64_t lo, hi;
    assert_int_equal(rf_param_bounds(RF_P_EXACT, &lo, &hi), RF_OK);
    assert_true(lo == 0 && hi == 1);
    assert_int_equal(rf_param_bounds(RF_P_SCALE_MAX, &lo, &hi), RF_OK);
    assert_true(lo == 0 && hi == 1000000);
    assert_int_equal(rf_param_bounds(RF_P_RATIO_MIN, &lo, &hi), RF_OK);
    assert_true(lo == 0 && hi == 1000000000);
    assert_int_equal(rf__option_check(RF_P_SCALE_MIN, 1000001, err, sizeof err), RF_E_INVALID);
    assert_int_equal(rf__option_check(RF_P_SCALE_MIN, -1, err, sizeof err), RF_E_INVALID);
    assert_int_equal(rf__option_check(RF_P_RATIO_MAX, -5, err, sizeof err), RF_E_INVALID);
    assert_int_equal(rf__option_check(RF_P_EXACT, 2, err, sizeof err), RF_E_INVALID);
}

static void test_options_cross_checks(void **state)
{
    (void)state;
    rf_config c;
    char err[256];
    assert_int_equal(RESOLVE(&c, err, {RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP},
                             {RF_P_SCALE_MIN, 600000}, {RF_P_SCALE_MAX, 500000}),
                     RF_E_INVALID);
    assert_non_null(strstr(err, "options: scale (0.6, 0.5) has min > max"));
    /* One bound against the other's default: 0.08 > 0.05. */
    assert_int_equal(RESOLVE(&c, err, {RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP},
                             {RF_P_SCALE_MAX, 50000}),
                     RF_E_INVALID);
    assert_non_null(strstr(err, "options: scale (0.08, 0.05) has min > max"));
    assert_int_equal(RESOLVE(&c, err, {RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP},
                             {RF_P_RATIO_MIN, 2000000}),
                     RF_E_INVALID);
    assert_non_null(strstr(err, "options: ratio (2, 1.33333) has min > max"));
    /* min == max is a fixed value, as in torchvision. */
    assert_int_equal(RESOLVE(&c, err, {RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP},
                             {RF_P_RATIO_MIN, 1000000}, {RF_P_RATIO_MAX, 1000000}),
                     RF_OK);
    /* The ranges belong to random_resized_crop; exact goes with any transform. */
    assert_int_equal(
        RESOLVE(&c, err, {RF_P_TRANSFORM, RF_TRANSFORM_CENTER}, {RF_P_SCALE_MIN, 500000}),
        RF_E_INVALID);
    assert_non_null(strstr(err, "options: scale and ratio apply to transform "
                                "random_resized_crop only"));
    assert_int_equal(RESOLVE(&c, err, {RF_P_TRANSFORM, RF_TRANSFORM_CENTER}, {RF_P_EXACT, 1}),
                     RF_OK);

    /* Through the public API: refused at start with the same message. */
    rf_loader *l = TU_LOADER("/nonexistent-folder", {RF_P_TRANSFORM, RF_TRANSFORM_CENTER},
                             {RF_P_RATIO_MAX, 2000000});
    assert_int_equal(rf_loader_start(l), RF_E_INVALID);
    assert_non_null(strstr(rf_loader_errmsg(l), "scale and ratio apply"));
    int64_t v = 0;
    assert_int_equal(rf_loader_get_param(l, RF_P_RATIO_MAX, &v), RF_OK);
    assert_int_equal(v, 2000000);
    rf_loader_destroy(l);
}

static void test_rrc_default_range_is_rrc(void **state)
{
    (void)state;
    static const int sizes[][2] = {{500, 375}, {375, 500}, {64, 64}, {2000, 10}, {37, 23}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (uint64_t seed = 0; seed < 500; seed++) {
            rf_rng a = rf__rng_make(seed, 1, s), b = rf__rng_make(seed, 1, s);
            rf_geom ga, gb;
            rf__geom_rrc(sizes[s][0], sizes[s][1], 224, &a, &ga);
            rf__geom_rrc_range(sizes[s][0], sizes[s][1], 224, &rf__rrc_default, &b, &gb);
            assert_memory_equal(&ga, &gb, sizeof ga);
            assert_true(a.counter == b.counter);
        }
}

static void test_rrc_fixed_ranges(void **state)
{
    (void)state;
    /* scale (1, 1), ratio (1, 1) on a non-square picture: a square of the
     * whole area never fits, so after 10 tries torchvision falls back to the
     * largest centred crop of ratio 1. */
    const rf_rrc_range square = {1.0, 1.0, 1.0, 1.0};
    for (uint64_t seed = 0; seed < 100; seed++) {
        rf_rng rng = rf__rng_make(seed, 0, 0);
        rf_geom g;
        rf__geom_rrc_range(500, 375, 64, &square, &rng, &g);
        assert_true(rng.counter == 20); /* 10 tries, two draws each */
        assert_true(g.x0 == 62 && g.x1 == 437 && g.y0 == 0 && g.y1 == 375); /* (500-375)//2 */
        assert_int_equal(g.out_w, 64);
        assert_int_equal(g.out_h, 64);
        rng = rf__rng_make(seed, 0, 0);
        rf__geom_rrc_range(301, 400, 64, &square, &rng, &g);
        assert_true(g.x0 == 0 && g.x1 == 301 && g.y0 == 49 && g.y1 == 350); /* (400-301)//2 */
    }
    /* scale (1, 1), ratio = w / h: the whole picture, from the first try. */
    const rf_rrc_range whole = {1.0, 1.0, 1.5, 1.5};
    for (uint64_t seed = 0; seed < 100; seed++) {
        rf_rng rng = rf__rng_make(seed, 0, 0);
        rf_geom g;
        rf__geom_rrc_range(300, 200, 64, &whole, &rng, &g);
        assert_true(g.x0 == 0 && g.x1 == 300 && g.y0 == 0 && g.y1 == 200);
        assert_true(rng.counter == 4); /* scale, ratio, top, left */
    }
    /* scale (0.5, 0.5), ratio (1, 1): every crop is round(sqrt(0.5 * area))
     * square, at a random place. */
    const rf_rrc_range half = {0.5, 0.5, 1.0, 1.0};
    int places = 0;
    double prev_x = -1;
    for (uint64_t seed = 0; seed < 300; seed++) {
        rf_rng rng = rf__rng_make(seed, 2, 9);
        rf_geom g;
        rf__geom_rrc_range(1000, 800, 224, &half, &rng, &g);
        assert_true(g.x1 - g.x0 == 632 && g.y1 - g.y0 == 632); /* round(sqrt(400000)) */
        assert_true(g.x0 >= 0 && g.x1 <= 1000 && g.y0 >= 0 && g.y1 <= 800);
        places += g.x0 != prev_x;
        prev_x = g.x0;
    }
    assert_true(places > 200);
    /* A range wider than the default: crops reach sizes the default never draws. */
    const rf_rrc_range tiny = {0.01, 0.02, 3.0 / 4.0, 4.0 / 3.0};
    for (uint64_t seed = 0; seed < 200; seed++) {
        rf_rng rng = rf__rng_make(seed, 0, 1);
        rf_geom g;
        rf__geom_rrc_range(1000, 1000, 224, &tiny, &rng, &g);
        double area = (g.x1 - g.x0) * (g.y1 - g.y0);
        assert_true(area >= 0.009 * 1e6 && area <= 0.021 * 1e6);
    }
}

/* exact: a picture large enough for DCT scaling is decoded at full size
 * instead, and equals the full decode resampled, byte for byte. */
static void test_exact_decodes_full_resolution(void **state)
{
    (void)state;
    tu_jpeg_opts jo = {.width = 1200, .height = 900, .quality = 90, .subsamp = TU_420, .seed = 5};
    uint8_t *jpg, *full;
    size_t len;
    int w, h;
    assert_int_equal(tu_make_jpeg(&jo, &jpg, &len), 0);
    assert_int_equal(tu_decode_jpeg(jpg, len, &full, &w, &h), 0);
    rf_decoder *d = rf__decoder_create();
    rf_resampler *rs = rf__resampler_create();
    const int S = 112;
    size_t n = (size_t)S * S * 3;
    uint8_t *out = malloc(n), *ref = malloc(n);
    assert_non_null(out);
    assert_non_null(ref);
    for (int tr = RF_TRANSFORM_CENTER; tr <= RF_TRANSFORM_RANDOM_RESIZED_CROP; tr++)
        for (int exact = 0; exact <= 1; exact++)
            for (int64_t sample = 0; sample < 4; sample++) {
                rf_decode_opts o = tu_decode_opts(tr, S, 3);
                o.flip = 1;
                o.sample = sample;
                o.check_tail = (int)(sample & 1);
                o.exact = exact;
                rf_rng rng = rf__rng_make(o.seed, 0, (uint64_t)sample);
                rf_geom g;
                if (tr == RF_TRANSFORM_CENTER)
                    rf__geom_center(w, h, S, &g);
                else
                    rf__geom_rrc(w, h, S, &rng, &g);
                g.flip = rf__rng_uniform(&rng) < 0.5;
                char err[256] = "";
                rf_decode_times t;
                assert_int_equal(rf__decode_sample(d, jpg, len, &o, out, err, sizeof err, &t), 0);
                assert_int_equal(rf__resample(rs, &g, w, h, full, (size_t)w * 3, 0, 0, w, h, ref,
                                              RF__LAYOUT_NHWC),
                                 0);
                if (exact) {
                    assert_int_equal(t.denom, 1);
                    assert_memory_equal(out, ref, n);
                } else if (tr == RF_TRANSFORM_CENTER) {
                    assert_true(t.denom >= 4); /* 1200x900 -> 170x128: 1/4 */
                    assert_true(memcmp(out, ref, n) != 0);
                }
            }
    free(out);
    free(ref);
    rf__resampler_destroy(rs);
    rf__decoder_destroy(d);
    free(full);
    free(jpg);
}

/* One epoch's hash and the stats' dct_scaled count of a loader over dir. */
static uint64_t epoch_hash(const char *dir, const tu_param *extra, size_t nextra,
                           int64_t *dct_scaled)
{
    tu_param ps[12] = {{RF_P_BATCH_SIZE, 4}, {RF_P_IMAGE_SIZE, 48}, {RF_P_NUM_WORKERS, 2},
                       {RF_P_SEED, 11},      {RF_P_SHUFFLE, 1},     {RF_P_FLIP, 1}};
    size_t n = 6;
    for (size_t i = 0; i < nextra && n < 12; i++)
        ps[n++] = extra[i];
    rf_loader *l = tu_loader_with(dir, ps, n);
    tu_start(l);
    uint64_t hsh = TU_FNV_INIT;
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == RF_OK) {
        hsh = tu_batch_hash(hsh, b);
        rf_batch_release(b);
    }
    assert_int_equal(rc, RF_END_OF_EPOCH);
    char *js = tu_stats(l);
    *dct_scaled = tu_stats_int(js, "dct_scaled");
    free(js);
    rf_loader_destroy(l);
    return hsh;
}

#define EPOCH_HASH(dir, scaled, ...)                                                               \
    epoch_hash((dir), (const tu_param[]){__VA_ARGS__},                                             \
               sizeof((const tu_param[]){__VA_ARGS__}) / sizeof(tu_param), (scaled))

static void test_loader_exact_and_ranges(void **state)
{
    (void)state;
    char *dir = tu_tempdir("exact");
    assert_int_equal(tu_make_folder(dir, 2, 6, 400, 300, 9), 0);
    int64_t scaled;
    const int RRC = RF_TRANSFORM_RANDOM_RESIZED_CROP;

    /* center at 48 from ~400x300: DCT-scaled unless exact. */
    uint64_t c0 = EPOCH_HASH(dir, &scaled, {RF_P_TRANSFORM, RF_TRANSFORM_CENTER});
    assert_true(scaled > 0);
    uint64_t c1 = EPOCH_HASH(dir, &scaled, {RF_P_TRANSFORM, RF_TRANSFORM_CENTER}, {RF_P_EXACT, 1});
    assert_int_equal(scaled, 0);
    assert_true(c0 != c1);
    assert_true(c1 ==
                EPOCH_HASH(dir, &scaled, {RF_P_TRANSFORM, RF_TRANSFORM_CENTER}, {RF_P_EXACT, 1}));

    /* The defaults spelled out in millionths are the defaults. */
    uint64_t r0 = EPOCH_HASH(dir, &scaled, {RF_P_TRANSFORM, RRC});
    uint64_t r1 =
        EPOCH_HASH(dir, &scaled, {RF_P_TRANSFORM, RRC}, {RF_P_SCALE_MIN, 80000},
                   {RF_P_SCALE_MAX, 1000000}, {RF_P_RATIO_MIN, 750000}, {RF_P_RATIO_MAX, 1333333});
    assert_true(r0 == r1);
    /* Another range: other crops, the same for the same seed. */
    uint64_t r2 = EPOCH_HASH(dir, &scaled, {RF_P_TRANSFORM, RRC}, {RF_P_SCALE_MIN, 500000},
                             {RF_P_SCALE_MAX, 500000});
    assert_true(r2 != r0);
    assert_true(r2 == EPOCH_HASH(dir, &scaled, {RF_P_TRANSFORM, RRC}, {RF_P_SCALE_MIN, 500000},
                                 {RF_P_SCALE_MAX, 500000}));
    assert_true(EPOCH_HASH(dir, &scaled, {RF_P_TRANSFORM, RRC}, {RF_P_RATIO_MIN, 1000000},
                           {RF_P_RATIO_MAX, 1000000}) != r0);
    tu_tempdir_remove(&dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_defaults_and_bounds),
        cmocka_unit_test(test_options_cross_checks),
        cmocka_unit_test(test_rrc_default_range_is_rrc),
        cmocka_unit_test(test_rrc_fixed_ranges),
        cmocka_unit_test(test_exact_decodes_full_resolution),
        cmocka_unit_test(test_loader_exact_and_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
