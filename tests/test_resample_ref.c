/*
 * test_resample_ref.c - the resampler against a plain transcription of
 * Pillow 9.4's algorithm: the transcription first gives Pillow's own bytes
 * (the goldens of resamplecheck.h), then the resampler gives the
 * transcription's bytes on a few thousand random geometries and on strong
 * shrinking (thousands of taps), in both layouts, at every instruction-set
 * level the machine has (rf__resampler_simd).
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
    uint8_t *d = rc_cut(g, full);
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
    const int w = RC_GOLDEN_W, h = RC_GOLDEN_H;
    uint8_t *p = rc_formula_pic(w, h), *q = rc_formula_pic(60, 45);
    const rf_geom *gs = rc_golden_geoms;
    for (int i = 0; i < RC_NGOLDEN_PIC; i++) {
        uint8_t *d = ref_resample(p, w, h, &gs[i]);
        rc_check_golden(&rc_goldens[i], d, rc_out_bytes(&gs[i]));
        free(d);
    }
    rf_geom c;
    rf__geom_center(60, 45, 28, &c);
    uint8_t *full = ref_resample(q, 60, 45, &c);
    uint8_t *d = ref_window(&c, full, RF__LAYOUT_NHWC);
    rc_check_golden(&rc_goldens[8], d, rc_out_bytes(&c));
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
        uint8_t *pic = rc_random_pic(w, h, (uint32_t)it);
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
        uint8_t *reg = malloc(n), *got = malloc(rc_out_bytes(&g));
        assert_non_null(reg);
        assert_non_null(got);
        for (int y = 0; y < rh; y++)
            memcpy(reg + (size_t)y * stride, pic + ((size_t)(y0 + y) * w + x0) * 3, (size_t)rw * 3);
        for (int level = RF__SIMD_NONE; level <= best; level++) {
            assert_int_equal(rf__resampler_simd(r, level), level);
            memset(got, 0xA5, rc_out_bytes(&g));
            assert_int_equal(rf__resample(r, &g, w, h, reg, stride, x0, y0, rw, rh, got, layout),
                             0);
            if (memcmp(got, want, rc_out_bytes(&g)) != 0)
                print_error("level %d: picture %dx%d, box %.4f,%.4f-%.4f,%.4f, out %dx%d, window "
                            "%d,%d %dx%d, flip %d, layout %d\n",
                            level, w, h, g.x0, g.y0, g.x1, g.y1, g.out_w, g.out_h, g.crop_x,
                            g.crop_y, g.crop_w, g.crop_h, g.flip, layout);
            assert_memory_equal(got, want, rc_out_bytes(&g));
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
        uint8_t *pic = rc_random_pic(w, h, (uint32_t)i);
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
                uint8_t *got = rc_run(r, &g, pic, w, h, layout);
                assert_memory_equal(got, want, rc_out_bytes(&g));
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
        cmocka_unit_test(test_reference_is_pillow),
        cmocka_unit_test(test_matches_reference),
        cmocka_unit_test(test_many_taps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
