/*
 * convert.c - a sample's picture into its place in the slot: layout and
 * element type, normalised through per-channel tables (see convert.h).
 */
#include "convert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"

int rf__dtype_is_float(int dtype)
{
    return dtype == RF_DTYPE_FLOAT32 || dtype == RF_DTYPE_FLOAT16 || dtype == RF_DTYPE_BFLOAT16;
}

int rf__convert_defers(int dtype, int normalized)
{
    return rf__dtype_is_float(dtype) || normalized;
}

size_t rf__convert_elem_size(int dtype)
{
    return dtype == RF_DTYPE_FLOAT32 ? 4 : rf__dtype_is_float(dtype) ? 2 : 1;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

uint16_t rf__f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* a quiet NaN stays a NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

uint16_t rf__f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return sign | 0x7e00u; /* NaN */
    if (a >= 0x477ff000u)   /* rounds to 65536 or more (or is infinite): infinity */
        return sign | 0x7c00u;
    if (a < 0x38800000u) { /* below 2^-14: a subnormal half (or zero) */
        if (a < 0x33000000u) /* below 2^-25: rounds to zero */
            return sign;
        int e = (int)(a >> 23);
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - e; /* 14..24: m * 2^(e-150) in units of 2^-24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return sign | (uint16_t)q;
    }
    /* normal: rebias the exponent, round the 13 dropped bits to even */
    uint32_t r = a - 0x38000000u; /* exponent 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return sign | (uint16_t)(r >> 13);
}

int rf__convert_check(const double mean[3], const double std[3], char *err, size_t errcap)
{
    for (int c = 0; c < 3; c++) {
        if (!isfinite(mean[c]) || !isfinite(std[c]) || fabs(mean[c]) > 1e30 ||
            fabs(std[c]) > 1e30) {
            snprintf(err, errcap, "options: normalize: mean and std must be finite numbers");
            return RF_E_INVALID;
        }
        if ((float)std[c] == 0.0f) {
            snprintf(err, errcap,
                     "options: normalize: std[%d] = %g is zero in float32 (division by zero)", c,
                     std[c]);
            return RF_E_INVALID;
        }
    }
    return RF_OK;
}

void rf__convert_init(rf_convert *cv, int dtype, int layout, const double mean[3],
                      const double std[3], int normalized)
{
    memset(cv, 0, sizeof *cv);
    cv->dtype = dtype;
    cv->normalized = normalized;
    cv->layout = layout;
    for (int c = 0; c < 3; c++) {
        cv->mean[c] = (float)mean[c];
        cv->std[c] = (float)std[c];
        for (int x = 0; x < 256; x++) {
            /* ConvertImageDtype: x.to(float32) / 255; Normalize: sub_(mean).div_(std) */
            float v = (float)x / 255.0f;
            v = (v - cv->mean[c]) / cv->std[c];
            cv->f32[c][x] = v;
            cv->u16[c][x] = dtype == RF_DTYPE_BFLOAT16 ? rf__f32_to_bf16(v) : rf__f32_to_f16(v);
        }
    }
}

/* Element (y, x, c) of a w x h output in the layout. */
static inline size_t at(const rf_convert *cv, int w, int h, int y, int x, int c)
{
    if (cv->layout == RF_LAYOUT_NCHW)
        return ((size_t)c * (size_t)h + (size_t)y) * (size_t)w + (size_t)x;
    return ((size_t)y * (size_t)w + (size_t)x) * 3 + (size_t)c;
}

static void store(const rf_convert *cv, void *dst, size_t i, int c, float v)
{
    if (cv->dtype == RF_DTYPE_UINT8) {
        double x = nearbyint(((double)v * cv->std[c] + cv->mean[c]) * 255.0);
        ((uint8_t *)dst)[i] = (uint8_t)(x < 0 ? 0 : x > 255 ? 255 : x);
    } else if (cv->dtype == RF_DTYPE_FLOAT32)
        ((float *)dst)[i] = v;
    else
        ((uint16_t *)dst)[i] = cv->dtype == RF_DTYPE_BFLOAT16 ? rf__f32_to_bf16(v)
                                                              : rf__f32_to_f16(v);
}

/* A deferred Erase in the output's space. */
static int erase_out(const rf_convert *cv, const rf_op *o, int w, int h, void *dst,
                     rf_aug_scratch *scr)
{
    size_t n = (size_t)o->height * (size_t)o->width;
    float *rnd = NULL;
    if (o->value_random) {
        if (scr->cap < 3 * n * sizeof(float) + 1) {
            rf__aug_scratch_free(scr);
            scr->buf = malloc(3 * n * sizeof(float) + 1);
            if (!scr->buf)
                return RF_E_NOMEM;
            scr->cap = 3 * n * sizeof(float) + 1;
        }
        rnd = (float *)scr->buf;
        rf__aug_normals(o->erase_key, rnd, 3 * n);
    }
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < o->height; y++)
            for (int x = 0; x < o->width; x++) {
                float v = rnd ? rnd[(size_t)c * n + (size_t)y * (size_t)o->width + (size_t)x]
                              : (float)o->value[c];
                store(cv, dst, at(cv, w, h, o->top + y, o->left + x, c), c, v);
            }
    return RF_OK;
}

int rf__convert_run(const rf_convert *cv, const uint8_t *src, int w, int h, ptrdiff_t stride,
                    void *dst, const rf_aug_plan *plan, rf_aug_scratch *scr)
{
    size_t plane = (size_t)w * (size_t)h;
    for (int y = 0; y < h; y++) {
        const uint8_t *s = src + (ptrdiff_t)y * stride;
        size_t row = (size_t)y * (size_t)w;
        if (cv->dtype == RF_DTYPE_UINT8) {
            uint8_t *d = dst;
            if (cv->layout == RF_LAYOUT_NHWC)
                memcpy(d + row * 3, s, (size_t)w * 3);
            else
                for (int x = 0; x < w; x++)
                    for (int c = 0; c < 3; c++)
                        d[(size_t)c * plane + row + (size_t)x] = s[x * 3 + c];
        } else if (cv->dtype == RF_DTYPE_FLOAT32) {
            float *d = dst;
            if (cv->layout == RF_LAYOUT_NHWC)
                for (int x = 0; x < w; x++)
                    for (int c = 0; c < 3; c++)
                        d[(row + (size_t)x) * 3 + (size_t)c] = cv->f32[c][s[x * 3 + c]];
            else
                for (int c = 0; c < 3; c++)
                    for (int x = 0; x < w; x++)
                        d[(size_t)c * plane + row + (size_t)x] = cv->f32[c][s[x * 3 + c]];
        } else {
            uint16_t *d = dst;
            if (cv->layout == RF_LAYOUT_NHWC)
                for (int x = 0; x < w; x++)
                    for (int c = 0; c < 3; c++)
                        d[(row + (size_t)x) * 3 + (size_t)c] = cv->u16[c][s[x * 3 + c]];
            else
                for (int c = 0; c < 3; c++)
                    for (int x = 0; x < w; x++)
                        d[(size_t)c * plane + row + (size_t)x] = cv->u16[c][s[x * 3 + c]];
        }
    }
    for (int i = 0; plan && i < plan->n; i++)
        if (plan->op[i].deferred && erase_out(cv, &plan->op[i], w, h, dst, scr) != RF_OK)
            return RF_E_NOMEM;
    return RF_OK;
}
