/*
 * augment_geom.c - the affine ops of the auto-augment policies (ShearX/Y,
 * TranslateX/Y, Rotate) with NEAREST sampling, as torchvision 0.14 runs them
 * on a uint8 tensor.
 *
 * torchvision builds the inverse matrix in double (_get_inverse_affine_matrix),
 * rounds it to a float32 theta, makes the output grid in float32
 * (_gen_affine_grid: pixel centres -w/2 + 0.5 ... times theta^T / (w/2, h/2)),
 * and grid_sample(mode="nearest", align_corners=False) maps each grid value
 * back to a source index as (g + 1) * (size / 2) - 0.5, rounded half to
 * even; a source outside the picture gives the fill. The same float32 steps
 * here pick the same source pixel but where torch's matrix product rounds
 * differently (a few pixels per picture, on a rounding boundary).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "augment.h"

/* Columns whose source offsets one pass computes (a stack buffer). */
#define RF__AUG_MAX_SIDE 512

#include "augment_simd.h" /* last: its pragma applies to this file */

/* Python's math.radians / math.degrees. */
static const double deg_to_rad = 3.14159265358979323846 / 180.0;
static const double rad_to_deg = 180.0 / 3.14159265358979323846;

/* torchvision's _get_inverse_affine_matrix(center, angle, translate, 1.0,
 * shear), inverted = True, in Python's order of operations. */
static void inverse_affine(const double center[2], double angle, const double translate[2],
                           const double shear[2], double m[6])
{
    double rot = angle * deg_to_rad;
    double sx = shear[0] * deg_to_rad, sy = shear[1] * deg_to_rad;
    double cx = center[0], cy = center[1], tx = translate[0], ty = translate[1];
    double a = cos(rot - sy) / cos(sy);
    double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    double c = sin(rot - sy) / cos(sy);
    double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
    m[0] = d / 1.0;
    m[1] = -b / 1.0;
    m[2] = 0.0 / 1.0;
    m[3] = -c / 1.0;
    m[4] = a / 1.0;
    m[5] = 0.0 / 1.0;
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
}

/* The matrix _apply_op's call of F.affine / F.rotate makes for op on a w x h
 * picture. */
static void op_matrix(const rf_op *op, int w, int h, double m[6])
{
    double zero[2] = {0.0, 0.0};
    /* ShearX/Y pass center=[0, 0]: F.affine turns it into [-w/2, -h/2]. */
    double corner[2] = {1.0 * (0 - w * 0.5), 1.0 * (0 - h * 0.5)};
    double shear[2] = {0.0, 0.0}, tr[2] = {0.0, 0.0};
    switch (op->kind) {
    case RF__OP_SHEARX:
        shear[0] = atan(op->arg) * rad_to_deg;
        inverse_affine(corner, 0.0, zero, shear, m);
        break;
    case RF__OP_SHEARY:
        shear[1] = atan(op->arg) * rad_to_deg;
        inverse_affine(corner, 0.0, zero, shear, m);
        break;
    case RF__OP_TRANSLATEX:
        tr[0] = 1.0 * (double)(int64_t)op->arg; /* translate=[int(magnitude), 0] */
        inverse_affine(zero, 0.0, tr, shear, m);
        break;
    case RF__OP_TRANSLATEY:
        tr[1] = 1.0 * (double)(int64_t)op->arg;
        inverse_affine(zero, 0.0, tr, shear, m);
        break;
    default: /* RF__OP_ROTATE: F.rotate passes -angle to the same helper */
        inverse_affine(zero, -op->arg, zero, shear, m);
        break;
    }
}

/* The fill as bytes: _cast_squeeze_out rounds before the cast. */
static void fill_bytes(const rf_op *op, uint8_t fill[3])
{
    for (int c = 0; c < 3; c++) {
        double f = nearbyint(op->fill[c]);
        fill[c] = (uint8_t)(f < 0 ? 0 : f > 255 ? 255 : f);
    }
}

/* Round half to even, as grid_sample's nearest mode: adding and removing
 * 1.5 * 2^23 leaves the float rounded to an integer in the current (nearest
 * even) mode; exact for |v| < 2^22, far beyond any coordinate here. */
static inline float rint_even(float v)
{
    const float magic = 12582912.0f;
    return (v + magic) - magic;
}

/* TranslateX/Y by t pixels: the grid below maps output pixel x to
 * round((x - w/2 + 0.5) * (1 / (w/2)) - t / (w/2) + 1) * w/2 - 0.5), which is
 * x - t up to float32 rounding errors of about 1e-7 * w, far below the 0.5
 * that would move the rounding: a shift, done in place (rows moved in the
 * order that reads each before it is overwritten). */
void rf__op_translate(const rf_op *op, uint8_t *px, int w, int h, ptrdiff_t stride)
{
    uint8_t fill[3];
    fill_bytes(op, fill);
    int64_t t = (int64_t)op->arg;
    size_t rowb = (size_t)w * 3;
    if (op->kind == RF__OP_TRANSLATEX) {
        int64_t x0 = t > 0 ? t : 0, x1 = t < 0 ? w + t : w; /* kept columns: [x0, x1) */
        if (x0 > w)
            x0 = w;
        if (x1 < x0)
            x1 = x0;
        for (int y = 0; y < h; y++) {
            uint8_t *row = px + (ptrdiff_t)y * stride;
            if (x1 > x0)
                memmove(row + x0 * 3, row + (x0 - t) * 3, (size_t)(x1 - x0) * 3);
            for (int64_t x = 0; x < x0; x++)
                memcpy(row + x * 3, fill, 3);
            for (int64_t x = x1; x < w; x++)
                memcpy(row + x * 3, fill, 3);
        }
        return;
    }
    /* TranslateY: output row y is source row y - t */
    for (int k = 0; k < h; k++) {
        int y = t > 0 ? h - 1 - k : k;
        int64_t sy = y - t;
        uint8_t *row = px + (ptrdiff_t)y * stride;
        if (sy >= 0 && sy < h) {
            memmove(row, px + (ptrdiff_t)sy * stride, rowb);
        } else {
            for (int x = 0; x < w; x++)
                memcpy(row + (size_t)x * 3, fill, 3);
        }
    }
}

/* The constants of one picture's grid (see rf__op_affine). */
typedef struct grid {
    float r00, r01, r20, r21, sw, sh, fw, fh;
    int32_t rs;
} grid;

/* Source offsets of n output pixels of a row, from column bx0 on: the output
 * grid base_grid.bmm(rescaled_theta), summed in order, then grid_sample's
 * unnormalisation and rounding; -1 outside the picture. Without branches: the
 * compiler vectorises it. */
RF_CLONES static void grid_run(const grid *g, float bx0, float gx0, float gy0, int n,
                               int32_t *idx)
{
    for (int k = 0; k < n; k++) {
        float bx = bx0 + (float)k;
        float gx = bx * g->r00 + gx0;
        float gy = bx * g->r01 + gy0;
        float fx = rint_even((gx + g->r20 + 1.0f) * g->sw - 0.5f);
        float fy = rint_even((gy + g->r21 + 1.0f) * g->sh - 0.5f);
        int in = (fx >= 0.0f) & (fx < g->fw) & (fy >= 0.0f) & (fy < g->fh);
        float cx = fx > 0.0f ? (fx < g->fw ? fx : 0.0f) : 0.0f;
        float cy = fy > 0.0f ? (fy < g->fh ? fy : 0.0f) : 0.0f;
        int32_t off = (int32_t)cy * g->rs + (int32_t)cx * 3;
        idx[k] = in ? off : -1;
    }
}

void rf__op_affine(const rf_op *op, const uint8_t *px, int w, int h, ptrdiff_t stride,
                   uint8_t *out)
{
    double m[6];
    op_matrix(op, w, h, m);
    float t[6];
    for (int i = 0; i < 6; i++)
        t[i] = (float)m[i];
    /* rescaled_theta = theta^T / [0.5 w, 0.5 h] */
    float hw = (float)(0.5 * w), hh = (float)(0.5 * h);
    float r00 = t[0] / hw, r10 = t[1] / hw, r20 = t[2] / hw;
    float r01 = t[3] / hh, r11 = t[4] / hh, r21 = t[5] / hh;
    float sw = (float)w / 2.0f, sh = (float)h / 2.0f;
    uint8_t fill[3];
    fill_bytes(op, fill);
    int32_t idx[RF__AUG_MAX_SIDE]; /* a row's source offsets, -1 for the fill */
    /* rf__op_run keeps h * stride below 2^31 */
    const grid gr = {r00, r01, r20, r21, sw, sh, (float)w, (float)h, (int32_t)stride};
    for (int y = 0; y < h; y++) {
        float by = (float)(-h * 0.5 + 0.5) + (float)y; /* linspace of half-integers: exact */
        float gx0 = by * r10, gy0 = by * r11;
        float bx0 = (float)(-w * 0.5 + 0.5);
        uint8_t *o = out + (size_t)y * (size_t)w * 3;
        for (int x0 = 0; x0 < w; x0 += RF__AUG_MAX_SIDE) {
            int n = w - x0 < RF__AUG_MAX_SIDE ? w - x0 : RF__AUG_MAX_SIDE;
            grid_run(&gr, bx0 + (float)x0, gx0, gy0, n, idx);
            for (int k = 0; k < n; k++, o += 3) {
                const uint8_t *s = idx[k] >= 0 ? px + idx[k] : fill;
                o[0] = s[0];
                o[1] = s[1];
                o[2] = s[2];
            }
        }
    }
}
