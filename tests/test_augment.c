/*
 * test_augment.c - the augmentations in C: the spec parser's grammar and
 * checks, the integer ops on known pictures, the float16 / bfloat16
 * rounding, the conversion tables, the plan (a pure function of the
 * stream; trailing erasures deferred), rf_augment_apply / rf_augment_draws
 * bounds, and the loader end to end: float output sizes, a callback's
 * nonzero return as a sample error (raise and skip), explain's JSON, and
 * the options refused (after start, records with a float type).
 *
 * The faithfulness to torchvision is tested from Python, against
 * torchvision itself (bindings/python/tests/test_augment_*.py).
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

#include "augment.h"
#include "convert.h"
#include "ringfeed.h"
#include "testutil.h"

static int parses(const char *spec, rf_aug_list *l, char *err, size_t cap)
{
    err[0] = '\0';
    return rf__aug_parse(spec, l, err, cap);
}

static void test_parse_grammar(void **state)
{
    (void)state;
    rf_aug_list l;
    char err[400];
    assert_int_equal(parses("RandAugment(2, 9); RandomErasing(p=0.25)", &l, err, sizeof err),
                     RF_OK);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.a[0].kind, RF__AUG_RANDAUGMENT);
    assert_int_equal(l.a[0].num_ops, 2);
    assert_int_equal(l.a[0].magnitude, 9);
    assert_int_equal(l.a[0].num_bins, 31);
    assert_int_equal(l.a[1].kind, RF__AUG_RANDOMERASING);
    assert_true(l.a[1].p == 0.25 && l.a[1].scale[0] == 0.02 && l.a[1].ratio[1] == 3.3);
    assert_int_equal(parses("  trivialaugmentwide ; autoaugment(policy='cifar10', fill=[1,2,3]);"
                            "ColorJitter(0.4, (0.5, 1.5), 0, hue=0.1);RandomGrayscale();"
                            "RandomErasing(value=random, scale=[0.1, 0.2])",
                            &l, err, sizeof err),
                     RF_OK);
    assert_int_equal(l.n, 5);
    assert_int_equal(l.a[1].policy, RF__POLICY_CIFAR10);
    assert_true(l.a[1].fill[2] == 3.0);
    assert_true(l.a[2].jitter[0][0] == 0.6 && l.a[2].jitter[0][1] == 1.4);
    assert_true(l.a[2].jitter[1][0] == 0.5 && l.a[2].jitter_on[1]);
    assert_false(l.a[2].jitter_on[2]); /* saturation 0: off, as torchvision's None */
    assert_true(l.a[2].jitter[3][0] == -0.1 && l.a[2].jitter_on[3]);
    assert_true(l.a[3].p == 0.1);
    assert_true(l.a[4].value_random && l.a[4].scale[1] == 0.2);
    assert_int_equal(parses("", &l, err, sizeof err), RF_OK);
    assert_int_equal(l.n, 0);
    assert_int_equal(parses(NULL, &l, err, sizeof err), RF_OK);
}

static void test_parse_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *needle;
    } bad[] = {
        {"RandAugment(2, 31)", "magnitude 31 must be below"},
        {"RandAugment(num_ops=17)", "num_ops"},
        {"RandAugment(2, 9, 1)", "num_magnitude_bins"},
        {"RandAugment(2.5)", "num_ops"},
        {"RandAugment(fill=300)", "fill"},
        {"RandAugment(2, num_ops=3)", "given twice"},
        {"RandAugment(num_ops=2, 9)", "positional argument after a named"},
        {"RandAugment(1, 2, 3, 0, 5)", "too many"},
        {"RandAugment(interpolation=bilinear)", "NEAREST"},
        {"AutoAugment(policy=coco)", "imagenet, cifar10 or svhn"},
        {"ColorJitter(hue=0.6)", "hue"},
        {"ColorJitter(brightness=-1)", "non-negative"},
        {"ColorJitter(contrast=(1.5, 0.5))", "min <= max"},
        {"RandomGrayscale(1.5)", "p must be"},
        {"RandomErasing(scale=(0.5, 0.1))", "scale"},
        {"RandomErasing(ratio=(0, 2))", "ratio"},
        {"RandomErasing(value=fuzzy)", "value"},
        {"RandomBlur(3)", "unknown transform"},
        {"RandAugment(2 9)", "expected"},
        {"RandAugment(2, 9) RandomErasing()", "';' expected"},
        {"RandAugment(zoom=2)", "unknown argument \"zoom\""},
        {"RandAugment(2, (9, 9, 9, 9))", "at most 3"},
        {"RandAugment(2, 'nine", "unterminated"},
        {"RandomGrayscale(1e999)", "a number expected"},
        {"RandAugment(inf)", "num_ops must be an integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rf_aug_list l;
        char err[400];
        int rc = parses(bad[i].spec, &l, err, sizeof err);
        if (rc != RF_E_INVALID || !strstr(err, bad[i].needle))
            fail_msg("spec \"%s\": rc %d, message \"%s\" (wanted \"%s\")", bad[i].spec, rc, err,
                     bad[i].needle);
        assert_non_null(strstr(err, "augment: "));
    }
    /* 17 transforms */
    char many[2048] = "";
    for (int i = 0; i < 17; i++)
        strcat(many, "RandomGrayscale(0.1);");
    rf_aug_list l;
    char err[400];
    assert_int_equal(parses(many, &l, err, sizeof err), RF_E_INVALID);
    assert_non_null(strstr(err, "more than 16"));
}

static void test_integer_ops(void **state)
{
    (void)state;
    /* a 4 x 2 picture with known values */
    uint8_t px[2][4][3] = {{{0, 10, 255}, {100, 128, 127}, {200, 1, 64}, {50, 50, 50}},
                           {{255, 0, 3}, {129, 130, 131}, {7, 8, 9}, {250, 251, 252}}};
    uint8_t p[2][4][3];
    char err[200];
    double bits = 3;
    memcpy(p, px, sizeof p);
    assert_int_equal(rf_augment_apply(&p[0][0][0], 2, 4, 12, "posterize", &bits, 1, err,
                                      sizeof err),
                     RF_OK);
    for (int i = 0; i < 24; i++)
        assert_int_equal((&p[0][0][0])[i], (&px[0][0][0])[i] & 0xe0);
    double thr = 128;
    memcpy(p, px, sizeof p);
    assert_int_equal(rf_augment_apply(&p[0][0][0], 2, 4, 12, "Solarize", &thr, 1, err, sizeof err),
                     RF_OK);
    for (int i = 0; i < 24; i++) {
        int v = (&px[0][0][0])[i];
        assert_int_equal((&p[0][0][0])[i], v >= 128 ? 255 - v : v);
    }
    memcpy(p, px, sizeof p);
    assert_int_equal(rf_augment_apply(&p[0][0][0], 2, 4, 12, "Invert", NULL, 0, err, sizeof err),
                     RF_OK);
    assert_int_equal(p[1][3][2], 3);
    /* Equalize on a channel of 8 distinct values: step = (8 - 1) // 255 = 0, unchanged */
    memcpy(p, px, sizeof p);
    assert_int_equal(rf_augment_apply(&p[0][0][0], 2, 4, 12, "Equalize", NULL, 0, err, sizeof err),
                     RF_OK);
    assert_memory_equal(p, px, sizeof p);
    /* Grayscale: (0.2989 r + 0.587 g + 0.114 b) in float32, truncated */
    memcpy(p, px, sizeof p);
    assert_int_equal(rf_augment_apply(&p[0][0][0], 2, 4, 12, "grayscale", NULL, 0, err, sizeof err),
                     RF_OK);
    assert_int_equal(p[0][0][0], 34); /* 0 + 5.87 + 29.07 = 34.94 */
    assert_int_equal(p[0][0][1], 34);
    /* Erase with a value; a stride wider than the row is honoured */
    uint8_t wide[2][20];
    memset(wide, 9, sizeof wide);
    double box[5] = {1, 2, 1, 2, 77};
    assert_int_equal(rf_augment_apply(&wide[0][0], 2, 4, 20, "Erase", box, 5, err, sizeof err),
                     RF_OK);
    for (int x = 0; x < 20; x++)
        assert_int_equal(wide[1][x], x >= 6 && x < 12 ? 77 : 9);
    for (int x = 0; x < 20; x++)
        assert_int_equal(wide[0][x], 9);
}

static void test_apply_refusals(void **state)
{
    (void)state;
    uint8_t p[4 * 4 * 3] = {0};
    char err[200];
    double a[7] = {1, 2, 3, 4, 5, 6, 7};
    assert_int_equal(rf_augment_apply(p, 4, 4, 12, "Blur", a, 1, err, sizeof err), RF_E_INVALID);
    assert_non_null(strstr(err, "unknown op"));
    assert_int_equal(rf_augment_apply(p, 4, 4, 12, "Rotate", a, 0, err, sizeof err), RF_E_INVALID);
    assert_int_equal(rf_augment_apply(p, 4, 4, 12, "Rotate", a, 3, err, sizeof err), RF_E_INVALID);
    assert_int_equal(rf_augment_apply(p, 4, 4, 11, "Invert", a, 0, err, sizeof err), RF_E_INVALID);
    assert_int_equal(rf_augment_apply(NULL, 4, 4, 12, "Invert", a, 0, err, sizeof err),
                     RF_E_INVALID);
    assert_int_equal(rf_augment_apply(p, 4, 4, 12, "Erase", a, 6, err, sizeof err), RF_E_INVALID);
    assert_int_equal(rf_augment_apply(p, 4, 4, 12, "Erase", a, 5, err, sizeof err), RF_E_INVALID);
    assert_non_null(strstr(err, "not inside"));
    double neg = -0.5, nan_ = NAN, nine = 9, half = 0.51;
    assert_int_equal(rf_augment_apply(p, 4, 4, 12, "Contrast", &neg, 1, err, sizeof err),
                     RF_E_INVALID);
    assert_int_equal(rf_augment_apply(p, 4, 4, 12, "Sharpness", &nan_, 1, err, sizeof err),
                     RF_E_INVALID);
    assert_int_equal(rf_augment_apply(p, 4, 4, 12, "Posterize", &nine, 1, err, sizeof err),
                     RF_E_INVALID);
    assert_int_equal(rf_augment_apply(p, 4, 4, 12, "Hue", &half, 1, err, sizeof err),
                     RF_E_INVALID);
    /* errcap 0: no message, still the status */
    assert_int_equal(rf_augment_apply(p, 4, 4, 12, "Hue", &half, 1, NULL, 0), RF_E_INVALID);
}

/* Every op on pictures from 1 x 1 up, rows with a gap between them: nothing
 * outside the picture's bytes changes (under the sanitizers and valgrind,
 * nothing is read outside either). */
static void test_every_op_stays_in_its_picture(void **state)
{
    (void)state;
    static const int sizes[][2] = {{1, 1}, {2, 3}, {3, 2}, {17, 13}, {64, 48}};
    static const struct {
        const char *op;
        double a[7];
        int n;
    } ops[] = {
        {"Identity", {0}, 0},          {"ShearX", {0.99, 1, 2, 3}, 4},
        {"ShearY", {-0.3}, 1},         {"TranslateX", {-1e6}, 1},
        {"TranslateX", {5, 9}, 2},     {"TranslateY", {7}, 1},
        {"TranslateY", {-300}, 1},     {"Rotate", {135, 4, 5, 6}, 4},
        {"Brightness", {1.9}, 1},      {"Color", {0.1}, 1},
        {"Contrast", {3}, 1},          {"Sharpness", {1.9}, 1},
        {"Sharpness", {0.0}, 1},       {"Posterize", {0}, 1},
        {"Solarize", {0}, 1},          {"AutoContrast", {0}, 0},
        {"Equalize", {0}, 0},          {"Invert", {0}, 0},
        {"Hue", {-0.5}, 1},            {"Saturation", {2.5}, 1},
        {"Grayscale", {0}, 0},         {"Erase", {0, 0, 1, 1, 300}, 5},
    };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int w = sizes[s][0], h = sizes[s][1];
        ptrdiff_t stride = (ptrdiff_t)w * 3 + 7;
        size_t n = (size_t)stride * h + 16;
        uint8_t *buf = malloc(n), *ref = malloc(n);
        assert_non_null(buf);
        assert_non_null(ref);
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            for (size_t i = 0; i < n; i++)
                buf[i] = (uint8_t)(i * 131 + s * 7 + k);
            memcpy(ref, buf, n);
            char err[200];
            int rc = rf_augment_apply(buf + 8, h, w, stride, ops[k].op, ops[k].a, ops[k].n, err,
                                      sizeof err);
            if (rc != RF_OK)
                fail_msg("%s on %dx%d: %s", ops[k].op, w, h, err);
            for (size_t i = 0; i < n; i++) {
                ptrdiff_t at = (ptrdiff_t)i - 8;
                int inside = at >= 0 && at / stride < h && at % stride < (ptrdiff_t)w * 3;
                if (!inside && buf[i] != ref[i])
                    fail_msg("%s on %dx%d changed byte %zu outside the picture", ops[k].op, w, h,
                             i);
            }
        }
        free(buf);
        free(ref);
    }
}

static void test_half_and_bfloat16_rounding(void **state)
{
    (void)state;
    assert_int_equal(rf__f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(rf__f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(rf__f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(rf__f32_to_f16(65519.0f), 0x7bff);
    assert_int_equal(rf__f32_to_f16(65520.0f), 0x7c00); /* rounds up to infinity */
    assert_int_equal(rf__f32_to_f16(0.0f), 0);
    assert_int_equal(rf__f32_to_f16(ldexpf(1.0f, -24)), 1);      /* smallest subnormal */
    assert_int_equal(rf__f32_to_f16(ldexpf(1.0f, -25)), 0);      /* tie to even: 0 */
    assert_int_equal(rf__f32_to_f16(ldexpf(3.0f, -25)), 2);      /* 1.5 ulp: tie to even 2 */
    assert_int_equal(rf__f32_to_f16(ldexpf(1.0f, -14)), 0x0400); /* smallest normal */
    assert_int_equal(rf__f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00); /* tie: even */
    assert_int_equal(rf__f32_to_f16(1.0f + ldexpf(3.0f, -11)), 0x3c02); /* tie: up to even */
    assert_int_equal(rf__f32_to_f16(NAN) & 0x7e00, 0x7e00);
    assert_int_equal(rf__f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(rf__f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80); /* tie: even */
    assert_int_equal(rf__f32_to_bf16(1.0f + ldexpf(3.0f, -8)), 0x3f82);
    assert_int_equal(rf__f32_to_bf16(-3.0f), 0xc040);
    assert_true((rf__f32_to_bf16(NAN) & 0x7f80) == 0x7f80 && (rf__f32_to_bf16(NAN) & 0x7f));
    /* every float16 value converts back to itself */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        int e = (int)(h >> 10), m = (int)(h & 0x3ff);
        float f = e ? ldexpf((float)(1024 + m), e - 25) : ldexpf((float)m, -24);
        assert_int_equal(rf__f32_to_f16(f), h);
        assert_int_equal(rf__f32_to_f16(-f), h | 0x8000);
    }
}

/* The output element (y, x, c) of a w x h picture, as convert.h defines it. */
static float norm_ref(uint8_t v, int c, const double *mean, const double *std)
{
    float f = (float)v / 255.0f;
    return (f - (float)mean[c]) / (float)std[c];
}

static void test_convert_tables_and_layouts(void **state)
{
    (void)state;
    double mean[3] = {0.485, 0.456, 0.406}, std[3] = {0.229, 0.224, 0.225};
    char err[200];
    assert_int_equal(rf__convert_check(mean, std, err, sizeof err), RF_OK);
    double zero_std[3] = {1, 1e-50, 1};
    assert_int_equal(rf__convert_check(mean, zero_std, err, sizeof err), RF_E_INVALID);
    rf_convert *cv = malloc(sizeof *cv);
    assert_non_null(cv);
    rf_aug_scratch scr = {0};
    /* widths below, at and past the vector paths' 8, 16 and 24 elements, every
     * byte value; ImageNet's mean and std, and 0.5 for both (there bfloat16
     * cannot take the division-free form: convert.c checks it and divides) */
    static const int widths[] = {1, 3, 8, 16, 17, 67, 224};
    for (int set = 0; set < 2; set++)
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        if (set == 1)
            for (int c = 0; c < 3; c++)
                mean[c] = std[c] = 0.5;
        int w = widths[wi], h = 3;
        ptrdiff_t stride = (ptrdiff_t)w * 3 + 5; /* rows with a gap */
        uint8_t *src = malloc((size_t)stride * h);
        void *out = malloc((size_t)w * h * 3 * 4);
        assert_non_null(src);
        assert_non_null(out);
        for (ptrdiff_t i = 0; i < stride * h; i++)
            src[i] = (uint8_t)(i * 37 + 11);
        static const int types[] = {RF_DTYPE_UINT8, RF_DTYPE_FLOAT32, RF_DTYPE_FLOAT16,
                                    RF_DTYPE_BFLOAT16};
        for (int t = 0; t < 4; t++)
            for (int layout = 0; layout < 2; layout++) {
                rf__convert_init(cv, types[t], layout, mean, std, t > 0);
                assert_int_equal(rf__convert_run(cv, src, w, h, stride, out, NULL, &scr), RF_OK);
                if (t > 0 && layout == RF_LAYOUT_NCHW) {
                    /* a planar source (stride 0) gives the same output */
                    uint8_t *pl = malloc((size_t)w * h * 3);
                    void *out2 = malloc((size_t)w * h * 3 * 4);
                    assert_non_null(pl);
                    assert_non_null(out2);
                    for (int y = 0; y < h; y++)
                        for (int x = 0; x < w; x++)
                            for (int c = 0; c < 3; c++)
                                pl[((size_t)c * h + y) * w + x] = src[y * stride + x * 3 + c];
                    assert_int_equal(rf__convert_run(cv, pl, w, h, 0, out2, NULL, &scr), RF_OK);
                    assert_memory_equal(out, out2, (size_t)w * h * 3 * rf__convert_elem_size(types[t]));
                    free(pl);
                    free(out2);
                }
                for (int y = 0; y < h; y++)
                    for (int x = 0; x < w; x++)
                        for (int c = 0; c < 3; c++) {
                            uint8_t v = src[y * stride + x * 3 + c];
                            size_t i = layout == RF_LAYOUT_NCHW
                                           ? ((size_t)c * h + y) * w + x
                                           : ((size_t)y * w + x) * 3 + c;
                            float f = norm_ref(v, c, mean, std);
                            switch (types[t]) {
                            case RF_DTYPE_UINT8: assert_int_equal(((uint8_t *)out)[i], v); break;
                            case RF_DTYPE_FLOAT32: assert_true(((float *)out)[i] == f); break;
                            case RF_DTYPE_FLOAT16:
                                assert_int_equal(((uint16_t *)out)[i], rf__f32_to_f16(f));
                                break;
                            default:
                                assert_int_equal(((uint16_t *)out)[i], rf__f32_to_bf16(f));
                            }
                        }
            }
        free(src);
        free(out);
    }
    rf__aug_scratch_free(&scr);
    free(cv);
}

static void test_plan_is_a_function_of_the_stream(void **state)
{
    (void)state;
    rf_aug_list l;
    char err[400];
    assert_int_equal(rf__aug_parse("RandAugment(4, 12); ColorJitter(0.3, 0.3, 0.3, 0.2);"
                                   "RandomErasing(1.0); RandomErasing(1.0, value=random)",
                                   &l, err, sizeof err),
                     RF_OK);
    rf_aug_plan *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    int differ = 0;
    for (int s = 0; s < 50; s++) {
        rf_rng r1 = rf__aug_stream(7, 2, s), r2 = rf__aug_stream(7, 2, s);
        rf__aug_draw(&l, 64, 48, &r1, a);
        rf__aug_draw(&l, 64, 48, &r2, b);
        assert_int_equal(a->n, b->n);
        assert_memory_equal(a->op, b->op, (size_t)a->n * sizeof a->op[0]);
        rf_rng r3 = rf__aug_stream(7, 3, s);
        rf__aug_draw(&l, 64, 48, &r3, b);
        differ += b->n != a->n || memcmp(a->op, b->op, (size_t)a->n * sizeof a->op[0]) != 0;
        /* the trailing erasures, and only they, are deferred */
        int n = rf__aug_plan_defer(a);
        for (int i = 0; i < a->n; i++)
            assert_int_equal(a->op[i].deferred, i >= a->n - n);
        for (int i = a->n - n; i < a->n; i++)
            assert_int_equal(a->op[i].kind, RF__OP_ERASE);
        assert_true(a->n - n >= 4 && a->op[a->n - n - 1].kind != RF__OP_ERASE);
    }
    assert_true(differ >= 45);
    free(a);
    free(b);
}

static void test_draws_bounds(void **state)
{
    (void)state;
    double out[8];
    char err[300];
    assert_int_equal(rf_augment_draws("RandAugment()", 10, 10, 1, 0, 1, out, 8, err, sizeof err),
                     1);
    assert_true(out[0] >= 0 && out[0] < 14 && isnan(out[4]));
    assert_int_equal(rf_augment_draws("RandAugment()", 10, 10, 1, 0, -1, out, 8, err, sizeof err),
                     RF_E_INVALID);
    assert_int_equal(rf_augment_draws("RandAugment()", 0, 10, 1, 0, 1, out, 8, err, sizeof err),
                     RF_E_INVALID);
    assert_int_equal(rf_augment_draws("RandAugment()", 10, 10, 1, 0, 1, out, 0, err, sizeof err),
                     RF_E_INVALID);
    assert_int_equal(rf_augment_draws("Blur()", 10, 10, 1, 0, 1, out, 8, err, sizeof err),
                     RF_E_INVALID);
    assert_non_null(strstr(err, "unknown transform"));
    /* a record longer than per_sample is cut, never overflows */
    double two[2 + 6];
    for (int i = 0; i < 8; i++)
        two[i] = -99;
    assert_int_equal(rf_augment_draws("RandAugment(3)", 10, 10, 1, 0, 1, two, 2, err, sizeof err),
                     1);
    for (int i = 2; i < 8; i++)
        assert_true(two[i] == -99);
}

/* ---- the loader ----------------------------------------------------------- */

static char *tmp, *folder;

static int setup(void **state)
{
    (void)state;
    tmp = tu_tempdir("augment");
    if (!tmp)
        return -1;
    folder = malloc(strlen(tmp) + 16);
    sprintf(folder, "%s/train", tmp);
    return tu_make_folder(folder, 2, 6, 72, 56, 21);
}

static int teardown(void **state)
{
    (void)state;
    free(folder);
    tu_tempdir_remove(&tmp);
    return 0;
}

static rf_loader *open_loader(const char *spec, int dtype, rf_sample_fn fn, void *user, int skip)
{
    rf_loader *l = rf_loader_create(folder);
    assert_non_null(l);
    assert_int_equal(rf_loader_set_param(l, RF_P_BATCH_SIZE, 4), RF_OK);
    assert_int_equal(rf_loader_set_param(l, RF_P_IMAGE_SIZE, 32), RF_OK);
    assert_int_equal(rf_loader_set_param(l, RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP),
                     RF_OK);
    assert_int_equal(rf_loader_set_param(l, RF_P_NUM_WORKERS, 2), RF_OK);
    assert_int_equal(rf_loader_set_param(l, RF_P_DTYPE, dtype), RF_OK);
    assert_int_equal(rf_loader_set_param(l, RF_P_ON_ERROR, skip), RF_OK);
    assert_int_equal(rf_loader_set_augment(l, spec), RF_OK);
    assert_int_equal(rf_loader_set_sample_fn(l, fn, user), RF_OK);
    double mean[3] = {0.5, 0.5, 0.5}, std[3] = {0.25, 0.25, 0.25};
    if (dtype != RF_DTYPE_UINT8)
        assert_int_equal(rf_loader_set_normalize(l, mean, std), RF_OK);
    return l;
}

static void test_float_outputs_have_their_size(void **state)
{
    (void)state;
    static const int types[] = {RF_DTYPE_UINT8, RF_DTYPE_FLOAT32, RF_DTYPE_FLOAT16,
                                RF_DTYPE_BFLOAT16};
    static const size_t sizes[] = {1, 4, 2, 2};
    for (int t = 0; t < 4; t++) {
        rf_loader *l = open_loader("RandAugment(2, 9); RandomErasing(0.5)", types[t], NULL,
                                   NULL, 0);
        assert_int_equal(rf_loader_start(l), RF_OK);
        rf_batch *b;
        assert_int_equal(rf_loader_next(l, &b), RF_OK);
        assert_int_equal(rf_batch_nbytes(b), (size_t)rf_batch_count(b) * 32 * 32 * 3 * sizes[t]);
        if (types[t] == RF_DTYPE_FLOAT32) {
            const float *f = rf_batch_data(b);
            for (size_t i = 0; i < 4 * 32 * 32 * 3; i++) /* (x / 255 - 0.5) / 0.25 */
                assert_true(f[i] >= -2.0f && f[i] <= 2.0f);
        }
        assert_int_equal(rf_batch_release(b), RF_OK);
        char js[4096];
        int64_t n = rf_loader_stats_json(l, js, sizeof js);
        assert_true(n > 0 && strstr(js, "\"augment\": "));
        rf_loader_destroy(l);
    }
}

/* Fails sample 3; counts its calls (atomically: it runs on several workers). */
static int fail_three(void *user, uint8_t *px, int h, int w, int c, ptrdiff_t stride,
                      uint64_t seed, const rf_sample_info *info)
{
    (void)seed;
    __atomic_fetch_add((int *)user, 1, __ATOMIC_RELAXED);
    if (h != 32 || w != 32 || c != 3 || stride != 96 || info->label < 0)
        return 99;
    px[0] = 1;
    return info->sample == 3 ? 42 : 0;
}

static void test_callback_failure_is_a_sample_error(void **state)
{
    (void)state;
    int calls = 0;
    rf_loader *l = open_loader("", RF_DTYPE_UINT8, fail_three, &calls, RF_ON_ERROR_RAISE);
    assert_int_equal(rf_loader_set_param(l, RF_P_SHUFFLE, 0), RF_OK);
    assert_int_equal(rf_loader_start(l), RF_OK);
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_E_CALLBACK);
    assert_non_null(strstr(rf_loader_errmsg(l), "sample_fn returned 42"));
    assert_non_null(strstr(rf_loader_errmsg(l), "(sample 3)"));
    /* the loader goes on */
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    assert_int_equal(((uint8_t *)rf_batch_data(b))[0], 1);
    assert_int_equal(rf_batch_release(b), RF_OK);
    rf_loader_destroy(l);
    assert_true(calls >= 8);

    l = open_loader("", RF_DTYPE_UINT8, fail_three, &calls, RF_ON_ERROR_SKIP);
    assert_int_equal(rf_loader_set_param(l, RF_P_SHUFFLE, 0), RF_OK);
    assert_int_equal(rf_loader_start(l), RF_OK);
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    assert_true(rf_batch_samples(b)[3] != 3); /* replaced by a substitute */
    assert_int_equal(rf_batch_release(b), RF_OK);
    char js[8192];
    rf_loader_stats_json(l, js, sizeof js);
    assert_non_null(strstr(js, "sample_fn returned 42"));
    rf_loader_destroy(l);
}

static void test_explain_json(void **state)
{
    (void)state;
    rf_loader *l = open_loader("RandAugment(2, 9); RandomErasing(1.0, value=random)",
                               RF_DTYPE_FLOAT16, NULL, NULL, 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_FLIP, 1), RF_OK);
    char js[8192];
    assert_int_equal(rf_loader_explain(l, -1, 0, js, sizeof js), RF_E_NOT_STARTED);
    assert_int_equal(rf_loader_start(l), RF_OK);
    int64_t n = rf_loader_explain(l, -1, 5, js, sizeof js);
    assert_true(n > 0 && n < (int64_t)sizeof js);
    static const char *const keys[] = {"\"sample\": 5", "\"epoch\": 0", "\"crop\": {\"top\": ",
                                       "\"flip\": ", "\"augment\": [{\"op\": ",
                                       "\"transform\": \"RandAugment\"", "\"dtype\": \"float16\"",
                                       "\"sample_fn_seed\": ", "\"path\": "};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strstr(js, keys[i]))
            fail_msg("explain lacks %s: %s", keys[i], js);
    /* a short buffer: the length is still the whole text's, the text cut and terminated */
    char small[16];
    assert_int_equal(rf_loader_explain(l, 0, 5, small, sizeof small), n);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_int_equal(rf_loader_explain(l, 0, 5, NULL, 0), n);
    assert_int_equal(rf_loader_explain(l, 0, 12, js, sizeof js), RF_E_INVALID);
    assert_int_equal(rf_loader_explain(l, -2, 1, js, sizeof js), RF_E_INVALID);
    /* fixed after start */
    assert_int_equal(rf_loader_set_augment(l, "RandAugment()"), RF_E_STATE);
    assert_int_equal(rf_loader_set_sample_fn(l, NULL, NULL), RF_E_STATE);
    assert_int_equal(rf_loader_set_normalize(l, NULL, NULL), RF_E_STATE);
    rf_loader_destroy(l);
}

static void test_options_refused(void **state)
{
    (void)state;
    rf_loader *l = rf_loader_create(folder);
    assert_int_equal(rf_loader_set_augment(l, "RandAugment(2, 99)"), RF_E_INVALID);
    assert_non_null(strstr(rf_loader_errmsg(l), "RandAugment: magnitude 99"));
    double m[3] = {0, 0, 0}, s[3] = {1, 0, 1};
    assert_int_equal(rf_loader_set_normalize(l, m, s), RF_E_INVALID);
    assert_int_equal(rf_loader_set_normalize(l, m, NULL), RF_E_INVALID);
    assert_int_equal(rf_loader_set_param(l, RF_P_DTYPE, 7), RF_E_INVALID);
    assert_int_equal(rf_loader_set_param(l, RF_P_DTYPE, RF_DTYPE_INT32), RF_OK);
    assert_int_equal(rf_loader_start(l), RF_E_INVALID); /* pictures are not int32 */
    assert_non_null(strstr(rf_loader_errmsg(l), "dtype int32"));
    rf_loader_destroy(l);
    /* records: no float type, no augmentations */
    char rec[600];
    snprintf(rec, sizeof rec, "%s/r.bin", tmp);
    uint8_t bytes[64] = {0};
    assert_int_equal(tu_write_file(rec, bytes, sizeof bytes), 0);
    l = rf_loader_create(rec);
    rf_loader_set_param(l, RF_P_RECORD_SIZE, 16);
    rf_loader_set_param(l, RF_P_TRANSFORM, RF_TRANSFORM_NONE);
    rf_loader_set_param(l, RF_P_DTYPE, RF_DTYPE_FLOAT32);
    assert_int_equal(rf_loader_start(l), RF_E_INVALID);
    rf_loader_set_param(l, RF_P_DTYPE, RF_DTYPE_UINT8);
    rf_loader_set_augment(l, "RandomGrayscale(1)");
    assert_int_equal(rf_loader_start(l), RF_E_INVALID);
    assert_non_null(strstr(rf_loader_errmsg(l), "records are passed through"));
    rf_loader_destroy(l);
    assert_int_equal(rf_loader_set_augment(NULL, ""), RF_E_INVALID);
    assert_int_equal(rf_loader_explain(NULL, 0, 0, NULL, 0), RF_E_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_grammar),
        cmocka_unit_test(test_parse_refusals),
        cmocka_unit_test(test_integer_ops),
        cmocka_unit_test(test_apply_refusals),
        cmocka_unit_test(test_every_op_stays_in_its_picture),
        cmocka_unit_test(test_half_and_bfloat16_rounding),
        cmocka_unit_test(test_convert_tables_and_layouts),
        cmocka_unit_test(test_plan_is_a_function_of_the_stream),
        cmocka_unit_test(test_draws_bounds),
        cmocka_unit_test(test_float_outputs_have_their_size),
        cmocka_unit_test(test_callback_failure_is_a_sample_error),
        cmocka_unit_test(test_explain_json),
        cmocka_unit_test(test_options_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
