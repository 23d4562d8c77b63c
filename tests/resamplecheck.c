/*
 * resamplecheck.c - what the resampler's tests share (resamplecheck.h).
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

/* The golden picture: high-frequency, wrapping content so that every rounding
 * step of the fixed-point filter matters. Same formula in golden.py
 * (resamplecheck.h). */
uint8_t *rc_formula_pic(int w, int h)
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
uint8_t *rc_random_pic(int w, int h, uint32_t seed)
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

uint32_t rc_fnv32(const uint8_t *b, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

size_t rc_out_bytes(const rf_geom *g)
{
    return (size_t)g->crop_w * g->crop_h * 3;
}

/* Resamples the whole w x h picture with g; returns a malloc'd buffer. */
uint8_t *rc_run(rf_resampler *r, const rf_geom *g, const uint8_t *pic, int w, int h, int layout)
{
    uint8_t *dst = malloc(rc_out_bytes(g));
    assert_non_null(dst);
    memset(dst, 0xA5, rc_out_bytes(g)); /* so unwritten bytes show */
    assert_int_equal(rf__resample(r, g, w, h, pic, (size_t)w * 3, 0, 0, w, h, dst, layout), 0);
    return dst;
}

/* The window of g cut from a whole resampled picture (NHWC), zero-padded,
 * mirrored when g says so. */
uint8_t *rc_cut(const rf_geom *g, const uint8_t *full)
{
    uint8_t *d = calloc(rc_out_bytes(g), 1);
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

const rc_golden rc_goldens[RC_NGOLDEN] = {
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

const rf_geom rc_golden_geoms[RC_NGOLDEN_PIC] = {
    {0, 0, RC_GOLDEN_W, RC_GOLDEN_H, 16, 11, 0, 0, 16, 11, 0},
    {0, 0, RC_GOLDEN_W, RC_GOLDEN_H, 50, 30, 0, 0, 50, 30, 0},
    {5, 3, 30, 20, 13, 9, 0, 0, 13, 9, 0},
    {10, 4, 22, 12, 31, 29, 0, 0, 31, 29, 0},
    {2.5, 1.5, 33.5, 21.5, 11, 7, 0, 0, 11, 7, 0},
    {1.25, 0.75, 36.125, 22.5, 9, 6, 0, 0, 9, 6, 0},
    {0, 0, RC_GOLDEN_W, RC_GOLDEN_H, 20, 23, 0, 0, 20, 23, 0},
    {0, 0, RC_GOLDEN_W, RC_GOLDEN_H, 37, 10, 0, 0, 37, 10, 0},
};

void rc_check_golden(const rc_golden *gd, const uint8_t *d, size_t n)
{
    assert_int_equal(n, (size_t)gd->w * gd->h * 3);
    for (int i = 0; i < 6; i++) {
        if (d[gd->idx[i]] != gd->val[i])
            print_error("%s: byte %d is %d, Pillow %d\n", gd->name, gd->idx[i], d[gd->idx[i]],
                        gd->val[i]);
        assert_int_equal(d[gd->idx[i]], gd->val[i]);
    }
    if (rc_fnv32(d, n) != gd->fnv)
        print_error("%s: checksum 0x%08x, Pillow 0x%08x\n", gd->name, rc_fnv32(d, n), gd->fnv);
    assert_int_equal(rc_fnv32(d, n), gd->fnv);
}
