/*
 * augment_ops.c - the primitive ops of the augmentations: torchvision 0.14's
 * functional ops on a uint8 tensor (functional_tensor.py), pixel for pixel.
 *
 * torchvision computes these in float32 tensors: a Python float meeting a
 * uint8 tensor becomes a float32 scalar, every elementwise step rounds to
 * float32, and .to(uint8) truncates toward zero. The code below takes the
 * same steps in the same order with float variables (x86-64 evaluates float
 * in float, and nothing here is compiled with FMA), so that the integer ops
 * give identical bytes and the blends differ only where torch's own
 * reductions (a mean, a convolution) sum in another order.
 * The affine ops are in augment_geom.c.
 */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "augment.h"
#include "convert.h" /* rf__split_planes */
#include "ringfeed.h"

#include "augment_simd.h" /* last: its pragma applies to this file */

static const char *const op_names[RF__OP_COUNT] = {
    [RF__OP_IDENTITY] = "Identity",         [RF__OP_SHEARX] = "ShearX",
    [RF__OP_SHEARY] = "ShearY",             [RF__OP_TRANSLATEX] = "TranslateX",
    [RF__OP_TRANSLATEY] = "TranslateY",     [RF__OP_ROTATE] = "Rotate",
    [RF__OP_BRIGHTNESS] = "Brightness",     [RF__OP_COLOR] = "Color",
    [RF__OP_CONTRAST] = "Contrast",         [RF__OP_SHARPNESS] = "Sharpness",
    [RF__OP_POSTERIZE] = "Posterize",       [RF__OP_SOLARIZE] = "Solarize",
    [RF__OP_AUTOCONTRAST] = "AutoContrast", [RF__OP_EQUALIZE] = "Equalize",
    [RF__OP_INVERT] = "Invert",             [RF__OP_HUE] = "Hue",
    [RF__OP_SATURATION] = "Saturation",     [RF__OP_GRAYSCALE] = "Grayscale",
    [RF__OP_ERASE] = "Erase",
};

const char *rf__op_name(int k)
{
    return k >= 0 && k < RF__OP_COUNT ? op_names[k] : NULL;
}

int rf__op_kind(const char *s)
{
    for (int k = 0; s && k < RF__OP_COUNT; k++)
        if (!strcasecmp(s, op_names[k]))
            return k;
    return -1;
}

void rf__aug_scratch_free(rf_aug_scratch *s)
{
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

static uint8_t *scratch(rf_aug_scratch *s, size_t need)
{
    if (s->cap < need) {
        free(s->buf);
        s->cap = 0;
        s->buf = malloc(need);
        if (!s->buf)
            return NULL;
        s->cap = need;
    }
    return s->buf;
}

/* float -> uint8 as torch's .to(torch.uint8) on values already in [0, 255]. */
static inline uint8_t trunc_u8(float v)
{
    return (uint8_t)(int)v;
}

static inline float clamp255(float v)
{
    return v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
}

#define ROW(px, y, stride) ((px) + (ptrdiff_t)(y) * (stride))

/* Most ops are a function of each byte alone (per channel): a 256-entry
 * table per channel, computed with torchvision's float32 steps, then one
 * lookup per byte. */
typedef uint8_t lut3[3][256];

static void apply_lut(uint8_t *px, int w, int h, ptrdiff_t stride, const lut3 t)
{
    for (int y = 0; y < h; y++) {
        uint8_t *p = ROW(px, y, stride);
        for (int x = 0; x < w; x++, p += 3) {
            p[0] = t[0][p[0]];
            p[1] = t[1][p[1]];
            p[2] = t[2][p[2]];
        }
    }
}

/* The products of rgb_to_grayscale, 0.2989 * v, 0.587 * v, 0.114 * v, each
 * rounded to float32 as the tensor ops round them. */
typedef struct gray_tabs {
    float r[256], g[256], b[256];
} gray_tabs;

static gray_tabs gray_t;
static pthread_once_t gray_once = PTHREAD_ONCE_INIT;

static void gray_init(void)
{
    for (int v = 0; v < 256; v++) {
        gray_t.r[v] = 0.2989f * (float)v;
        gray_t.g[v] = 0.587f * (float)v;
        gray_t.b[v] = 0.114f * (float)v;
    }
}

/* Built once; pthread_once orders the writes before every reader. */
static const gray_tabs *gray_tables(void)
{
    pthread_once(&gray_once, gray_init);
    return &gray_t;
}

/* rgb_to_grayscale on uint8: (0.2989 * r + 0.587 * g + 0.114 * b).to(uint8),
 * summed left to right in float32. */
static inline uint8_t gray_u8(const gray_tabs *t, const uint8_t *p)
{
    float v = t->r[p[0]] + t->g[p[1]];
    v = v + t->b[p[2]];
    return trunc_u8(v);
}

/* rgb_to_grayscale of a row of w pixels into gray[0..w): the row split into
 * planes (in planes, 3 * w bytes), then the same float32 products and sums
 * as gray_u8, in a loop the compiler vectorises. */
RF_CLONES static void gray_row(const uint8_t *row, int w, uint8_t *planes, uint8_t *gray)
{
    uint8_t *r = planes, *g = planes + w, *b = planes + 2 * (size_t)w;
    rf__split_planes(row, r, g, b, w);
    for (int x = 0; x < w; x++) {
        float v = 0.2989f * (float)r[x] + 0.587f * (float)g[x];
        v = v + 0.114f * (float)b[x];
        gray[x] = (uint8_t)(int)v;
    }
}

/* _blend(img1, img2, ratio) for uint8 img1: (ratio * img1 + (1.0 - ratio) *
 * img2).clamp(0, 255).to(uint8); Python computes 1.0 - ratio in double, torch
 * rounds both scalars to float32 (r1, r2 below), and each product and the sum
 * round to float32. */

/* ratio * x + c per byte, clamped and truncated (brightness: c = (1 - ratio) *
 * 0 = 0; contrast: c = (1 - ratio) * mean): float arithmetic the compiler
 * vectorises, the same float32 steps as a table would take. */
RF_CLONES static void scale_add(uint8_t *px, int w, int h, ptrdiff_t stride, float r1, float c)
{
    for (int y = 0; y < h; y++) {
        uint8_t *p = ROW(px, y, stride);
        for (int i = 0; i < w * 3; i++) {
            float v = r1 * (float)p[i] + c;
            v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
            p[i] = (uint8_t)(int)v;
        }
    }
}

static void brightness(uint8_t *px, int w, int h, ptrdiff_t stride, double f)
{
    scale_add(px, w, h, stride, (float)f, 0.0f); /* img2 = zeros: (1 - r) * 0 = 0 */
}

/* _blend of a row of bytes m with q = (1 - ratio) * img2, in float arithmetic
 * the compiler vectorises. */
RF_CLONES static void blend_row(uint8_t *out, const uint8_t *m, const float *q, size_t n,
                                float r1)
{
    for (size_t i = 0; i < n; i++) {
        float v = r1 * (float)m[i] + q[i];
        v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
        out[i] = (uint8_t)(int)v;
    }
}

/* adjust_saturation (the auto-augment ops' Color): blend with the grayscale,
 * a row at a time: (1 - ratio) * gray per byte, then the vectorised blend. */
static int saturation(uint8_t *px, int w, int h, ptrdiff_t stride, double f, rf_aug_scratch *scr)
{
    size_t rowb = (size_t)w * 3;
    uint8_t *buf = scratch(scr, rowb * sizeof(float) + rowb + (size_t)w);
    if (!buf)
        return RF_E_NOMEM;
    float *g3 = (float *)buf;
    uint8_t *planes = buf + rowb * sizeof(float), *gray = planes + rowb;
    float r1 = (float)f, r2 = (float)(1.0 - f);
    for (int y = 0; y < h; y++) {
        uint8_t *p = ROW(px, y, stride);
        gray_row(p, w, planes, gray);
        for (int x = 0; x < w; x++) {
            float g = r2 * (float)gray[x];
            g3[3 * x] = g3[3 * x + 1] = g3[3 * x + 2] = g;
        }
        blend_row(p, p, g3, rowb, r1);
    }
    return RF_OK;
}

/* adjust_contrast: blend with the mean of the (truncated) grayscale, taken in
 * float32: torch.mean's sum is exact while it stays below 2^24, which a
 * picture of up to 65793 pixels guarantees; past that torch's pairwise sum and
 * this exact one may round differently (by a few float32 ulps of the mean). */
static int contrast(uint8_t *px, int w, int h, ptrdiff_t stride, double f, rf_aug_scratch *scr)
{
    uint8_t *planes = scratch(scr, (size_t)w * 4), *gray = planes + (size_t)w * 3;
    if (!planes)
        return RF_E_NOMEM;
    double sum = 0.0;
    for (int y = 0; y < h; y++) {
        gray_row(ROW(px, y, stride), w, planes, gray);
        int64_t row = 0;
        for (int x = 0; x < w; x++)
            row += gray[x];
        sum += (double)row;
    }
    float mean = (float)sum / (float)((double)w * (double)h);
    float r1 = (float)f, r2 = (float)(1.0 - f);
    scale_add(px, w, h, stride, r1, r2 * mean); /* (1.0 - ratio) * mean: a float32 op */
    return RF_OK;
}

/* adjust_sharpness: blend with _blurred_degenerate_image, the 3x3 kernel
 * [1 1 1; 1 5 1; 1 1 1] / 13 over the interior, rounded half to even, the
 * border rows and columns kept. torch sums nine float32 products; the exact
 * value S / 13 (S the integer weighted sum) is never a tie (2S = 13 (2k + 1)
 * has no solution) and lies at least 1/26 from one, far beyond float32's
 * error, so round(S / 13) = (2S + 13) / 26 in integers is the same byte.
 * Pictures of 2 pixels or fewer on a side are returned as they are. */
static int sharpness(uint8_t *px, int w, int h, ptrdiff_t stride, double f, rf_aug_scratch *scr)
{
    if (w <= 2 || h <= 2)
        return RF_OK;
    size_t rowb = (size_t)w * 3;
    /* the original of the rows above and at the one being written (the kernel
     * reads them after they changed; the row below is still original), and a
     * row of (1 - ratio) * blurred */
    uint8_t *buf = scratch(scr, rowb * 2 + rowb * sizeof(float));
    if (!buf)
        return RF_E_NOMEM;
    float *q = (float *)buf; /* first: malloc's alignment */
    uint8_t *above = buf + rowb * sizeof(float), *here = above + rowb;
    float r1 = (float)f, r2 = (float)(1.0 - f);
    memcpy(above, ROW(px, 0, stride), rowb);
    for (int y = 0; y < h; y++) {
        uint8_t *row = ROW(px, y, stride);
        if (y == 0 || y == h - 1) { /* the blurred picture keeps the border: blend(x, x) */
            for (size_t i = 0; i < rowb; i++)
                q[i] = r2 * (float)row[i];
            blend_row(row, row, q, rowb, r1);
            continue;
        }
        memcpy(here, row, rowb);
        const uint8_t *a = above, *m = here, *c = ROW(px, y + 1, stride);
        for (size_t i = 0; i < 3; i++) {
            q[i] = r2 * (float)m[i];
            q[rowb - 1 - i] = r2 * (float)m[rowb - 1 - i];
        }
        for (size_t i = 3; i < rowb - 3; i++) {
            int sum = a[i - 3] + a[i] + a[i + 3] + m[i - 3] + 5 * m[i] + m[i + 3] + c[i - 3] +
                      c[i] + c[i + 3];
            q[i] = r2 * (float)((2 * sum + 13) / 26);
        }
        blend_row(row, m, q, rowb, r1);
        uint8_t *t = above;
        above = here;
        here = t;
    }
    return RF_OK;
}

static void posterize(uint8_t *px, int w, int h, ptrdiff_t stride, int bits)
{
    uint8_t mask = (uint8_t)(-(1 << (8 - bits)) & 0xff); /* -int(2 ** (8 - bits)) */
    for (int y = 0; y < h; y++) {
        uint8_t *p = ROW(px, y, stride);
        for (int i = 0; i < w * 3; i++)
            p[i] &= mask;
    }
}

/* solarize: where(img >= threshold, 255 - img, img), compared in float32. */
static void solarize(uint8_t *px, int w, int h, ptrdiff_t stride, double threshold)
{
    /* x >= t in float32 is x >= ceil(t) in integers (x is an integer) */
    float th = (float)threshold;
    int ti = (int)ceilf(th);
    uint8_t t8 = (uint8_t)(ti > 255 ? 255 : ti);
    int none = ti > 255;
    for (int y = 0; y < h && !none; y++) {
        uint8_t *p = ROW(px, y, stride);
        for (int i = 0; i < w * 3; i++)
            p[i] = p[i] >= t8 ? (uint8_t)(255 - p[i]) : p[i];
    }
}

static void invert(uint8_t *px, int w, int h, ptrdiff_t stride)
{
    for (int y = 0; y < h; y++) {
        uint8_t *p = ROW(px, y, stride);
        for (int i = 0; i < w * 3; i++)
            p[i] = (uint8_t)(255 - p[i]);
    }
}

/* autocontrast: per channel ((img - min) * (255 / (max - min))).clamp.to(uint8)
 * in float32 (255 / t being t.reciprocal() * 255 in torch); a flat channel
 * (max == min) is kept (scale 1, min 0). */
static void autocontrast(uint8_t *px, int w, int h, ptrdiff_t stride)
{
    /* 48 bytes are 16 whole pixels: byte k of every block is channel k % 3,
     * so the block-wise minimum and maximum vectorise */
    uint8_t mn[48], mx[48];
    memset(mn, 255, sizeof mn);
    memset(mx, 0, sizeof mx);
    size_t rowb = (size_t)w * 3, whole = rowb / 48 * 48;
    for (int y = 0; y < h; y++) {
        const uint8_t *p = ROW(px, y, stride);
        for (size_t i = 0; i < whole; i += 48)
            for (int k = 0; k < 48; k++) {
                mn[k] = p[i + k] < mn[k] ? p[i + k] : mn[k];
                mx[k] = p[i + k] > mx[k] ? p[i + k] : mx[k];
            }
        for (size_t i = whole; i < rowb; i++) {
            int k = (int)(i % 3);
            mn[k] = p[i] < mn[k] ? p[i] : mn[k];
            mx[k] = p[i] > mx[k] ? p[i] : mx[k];
        }
    }
    int lo[3] = {255, 255, 255}, hi[3] = {0, 0, 0};
    for (int k = 0; k < 48; k++) {
        lo[k % 3] = mn[k] < lo[k % 3] ? mn[k] : lo[k % 3];
        hi[k % 3] = mx[k] > hi[k % 3] ? mx[k] : hi[k % 3];
    }
    lut3 t;
    for (int c = 0; c < 3; c++) {
        float mn = 0.0f, sc = 1.0f;
        if (hi[c] != lo[c]) {
            mn = (float)lo[c];
            /* bound / (max - min): Tensor.__rtruediv__ is reciprocal() * bound */
            sc = (1.0f / ((float)hi[c] - (float)lo[c])) * 255.0f;
        }
        for (int v = 0; v < 256; v++)
            t[c][v] = trunc_u8(clamp255(((float)v - mn) * sc));
    }
    apply_lut(px, w, h, stride, (const uint8_t(*)[256])t);
}

/* equalize: torchvision's _scale_channel per channel, in integers: step =
 * (sum of the histogram's non-zero bins but the last) // 255; nothing when 0;
 * else lut[v] = (cumsum[v - 1] + step // 2) // step, lut[0] = 0, clamped. */
static void equalize(uint8_t *px, int w, int h, ptrdiff_t stride)
{
    int64_t hist[3][256];
    memset(hist, 0, sizeof hist);
    for (int y = 0; y < h; y++) {
        const uint8_t *p = ROW(px, y, stride);
        for (int x = 0; x < w; x++, p += 3) {
            hist[0][p[0]]++;
            hist[1][p[1]]++;
            hist[2][p[2]]++;
        }
    }
    lut3 lut;
    for (int c = 0; c < 3; c++) {
        int last = -1;
        int64_t total = 0;
        for (int v = 0; v < 256; v++)
            if (hist[c][v]) {
                total += hist[c][v];
                last = v;
            }
        int64_t step = last < 0 ? 0 : (total - hist[c][last]) / 255;
        int64_t cum = 0;
        for (int v = 0; v < 256; v++) {
            int64_t l = step == 0 ? v : v == 0 ? 0 : (cum + step / 2) / step;
            lut[c][v] = (uint8_t)(l > 255 ? 255 : l);
            cum += hist[c][v];
        }
    }
    apply_lut(px, w, h, stride, (const uint8_t(*)[256])lut);
}

static void grayscale(uint8_t *px, int w, int h, ptrdiff_t stride)
{
    const gray_tabs *gt = gray_tables();
    for (int y = 0; y < h; y++) {
        uint8_t *p = ROW(px, y, stride);
        for (int x = 0; x < w; x++, p += 3)
            p[0] = p[1] = p[2] = gray_u8(gt, p);
    }
}

/* torch's remainder(a, 1.0) on float32: the sign of the divisor. */
static inline float rem1(float a)
{
    float m = fmodf(a, 1.0f);
    if (m != 0.0f && m < 0.0f)
        m += 1.0f;
    return m;
}

/* adjust_hue: x / 255 in float32, _rgb2hsv, h = (h + factor) % 1.0,
 * _hsv2rgb, * 255, truncated; every step as torchvision writes it. */
static void hue(uint8_t *px, int w, int h, ptrdiff_t stride, double factor)
{
    float hf = (float)factor;
    for (int y = 0; y < h; y++) {
        uint8_t *p = ROW(px, y, stride);
        for (int x = 0; x < w; x++, p += 3) {
            float r = (float)p[0] / 255.0f, g = (float)p[1] / 255.0f, b = (float)p[2] / 255.0f;
            float maxc = fmaxf(r, fmaxf(g, b)), minc = fminf(r, fminf(g, b));
            int eqc = maxc == minc;
            float cr = maxc - minc;
            float s = cr / (eqc ? 1.0f : maxc);
            float crd = eqc ? 1.0f : cr;
            float rc = (maxc - r) / crd, gc = (maxc - g) / crd, bc = (maxc - b) / crd;
            float hr = (maxc == r) ? bc - gc : 0.0f;
            float hg = (maxc == g && maxc != r) ? (2.0f + rc) - bc : 0.0f;
            float hb = (maxc != g && maxc != r) ? (4.0f + gc) - rc : 0.0f;
            float hh = (hr + hg) + hb;
            hh = fmodf(hh / 6.0f + 1.0f, 1.0f);
            hh = rem1(hh + hf);
            /* _hsv2rgb */
            float v = maxc;
            float i6 = floorf(hh * 6.0f);
            float fr = hh * 6.0f - i6;
            int i = ((int)i6 % 6 + 6) % 6;
            float pp = fminf(fmaxf(v * (1.0f - s), 0.0f), 1.0f);
            float q = fminf(fmaxf(v * (1.0f - s * fr), 0.0f), 1.0f);
            float t = fminf(fmaxf(v * (1.0f - s * (1.0f - fr)), 0.0f), 1.0f);
            float o[3];
            switch (i) {
            case 0: o[0] = v, o[1] = t, o[2] = pp; break;
            case 1: o[0] = q, o[1] = v, o[2] = pp; break;
            case 2: o[0] = pp, o[1] = v, o[2] = t; break;
            case 3: o[0] = pp, o[1] = q, o[2] = v; break;
            case 4: o[0] = t, o[1] = pp, o[2] = v; break;
            default: o[0] = v, o[1] = pp, o[2] = q; break;
            }
            for (int c = 0; c < 3; c++)
                p[c] = trunc_u8(o[c] * 255.0f);
        }
    }
}

/* A float stored into a uint8 tensor (F.erase's value): truncated toward
 * zero, then the low byte, as torch's conversion does on x86-64. */
static inline uint8_t store_u8(double v)
{
    if (!(v > -2147483648.0 && v < 2147483648.0))
        return 0;
    return (uint8_t)((int64_t)v & 0xff);
}

static int erase(const rf_op *op, uint8_t *px, int w, int h, ptrdiff_t stride,
                 rf_aug_scratch *scr)
{
    int y0 = op->top, x0 = op->left, eh = op->height, ew = op->width;
    assert(y0 >= 0 && x0 >= 0 && y0 + eh <= h && x0 + ew <= w);
    (void)w, (void)h;
    if (op->value_random) {
        /* torch fills a [3, eh, ew] float tensor: channel-major draws. */
        size_t n = (size_t)eh * (size_t)ew;
        float *v = (float *)scratch(scr, 3 * n * sizeof(float) + 1);
        if (!v)
            return RF_E_NOMEM;
        rf__aug_normals(op->erase_key, v, 3 * n);
        for (int y = 0; y < eh; y++) {
            uint8_t *p = ROW(px, y0 + y, stride) + (size_t)x0 * 3;
            for (int x = 0; x < ew; x++, p += 3)
                for (int c = 0; c < 3; c++)
                    p[c] = store_u8(v[(size_t)c * n + (size_t)y * (size_t)ew + (size_t)x]);
        }
        return RF_OK;
    }
    uint8_t val[3] = {store_u8(op->value[0]), store_u8(op->value[1]), store_u8(op->value[2])};
    for (int y = 0; y < eh; y++) {
        uint8_t *p = ROW(px, y0 + y, stride) + (size_t)x0 * 3;
        for (int x = 0; x < ew; x++, p += 3)
            memcpy(p, val, 3);
    }
    return RF_OK;
}

/* The checks torchvision's functional ops make on their argument. */
static int check_arg(const rf_op *op, int w, int h, char *err, size_t errcap)
{
    const char *name = rf__op_name(op->kind);
    double a = op->arg;
    if (!isfinite(a)) {
        snprintf(err, errcap, "augment: %s: the argument is not a finite number", name);
        return RF_E_INVALID;
    }
    switch (op->kind) {
    case RF__OP_BRIGHTNESS: case RF__OP_COLOR: case RF__OP_CONTRAST:
    case RF__OP_SHARPNESS: case RF__OP_SATURATION:
        if (a < 0) {
            snprintf(err, errcap, "augment: %s: factor %g is negative", name, a);
            return RF_E_INVALID;
        }
        break;
    case RF__OP_HUE:
        if (!(a >= -0.5 && a <= 0.5)) {
            snprintf(err, errcap, "augment: Hue: factor %g is not in [-0.5, 0.5]", a);
            return RF_E_INVALID;
        }
        break;
    case RF__OP_POSTERIZE:
        if (a != floor(a) || a < 0 || a > 8) {
            snprintf(err, errcap, "augment: Posterize: bits %g is not an integer in [0, 8]", a);
            return RF_E_INVALID;
        }
        break;
    case RF__OP_SOLARIZE:
        if (a < 0 || a > 255) {
            snprintf(err, errcap, "augment: Solarize: threshold %g is not in [0, 255]", a);
            return RF_E_INVALID;
        }
        break;
    case RF__OP_SHEARX: case RF__OP_SHEARY: case RF__OP_TRANSLATEX: case RF__OP_TRANSLATEY:
    case RF__OP_ROTATE:
        if (fabs(a) > 1e9) {
            snprintf(err, errcap, "augment: %s: %g is out of range", name, a);
            return RF_E_INVALID;
        }
        for (int c = 0; c < 3; c++)
            if (!(op->fill[c] >= 0 && op->fill[c] <= 255)) {
                snprintf(err, errcap, "augment: %s: fill %g is not in [0, 255]", name,
                         op->fill[c]);
                return RF_E_INVALID;
            }
        break;
    case RF__OP_ERASE:
        if (op->top < 0 || op->left < 0 || op->height < 0 || op->width < 0 ||
            op->top > h - op->height || op->left > w - op->width) {
            snprintf(err, errcap,
                     "augment: Erase: box (top %d, left %d, height %d, width %d) is not inside "
                     "the %dx%d picture",
                     op->top, op->left, op->height, op->width, w, h);
            return RF_E_INVALID;
        }
        break;
    default:
        break;
    }
    return RF_OK;
}

int rf__op_run(const rf_op *op, uint8_t *px, int w, int h, ptrdiff_t stride,
               rf_aug_scratch *scr, char *err, size_t errcap)
{
    if (op->kind < 0 || op->kind >= RF__OP_COUNT) {
        snprintf(err, errcap, "augment: unknown op %d", op->kind);
        return RF_E_INVALID;
    }
    int rc = check_arg(op, w, h, err, errcap);
    if (rc != RF_OK || w <= 0 || h <= 0)
        return rc;
    switch (op->kind) {
    case RF__OP_IDENTITY: break;
    case RF__OP_SHEARX: case RF__OP_SHEARY: case RF__OP_TRANSLATEX: case RF__OP_TRANSLATEY:
    case RF__OP_ROTATE: {
        if (op->kind == RF__OP_TRANSLATEX || op->kind == RF__OP_TRANSLATEY) {
            rf__op_translate(op, px, w, h, stride);
            break;
        }
        size_t rowb = (size_t)w * 3;
        if ((int64_t)h * stride >= INT32_MAX || w > 1 << 24) { /* augment_geom.c's offsets */
            snprintf(err, errcap, "augment: %s: a %dx%d picture is too large", rf__op_name(op->kind),
                     w, h);
            return RF_E_INVALID;
        }
        uint8_t *out = scratch(scr, rowb * (size_t)h);
        if (!out) {
            snprintf(err, errcap, "augment: out of memory for a %dx%d picture", w, h);
            return RF_E_NOMEM;
        }
        rf__op_affine(op, px, w, h, stride, out);
        for (int y = 0; y < h; y++)
            memcpy(ROW(px, y, stride), out + (size_t)y * rowb, rowb);
        break;
    }
    case RF__OP_BRIGHTNESS: brightness(px, w, h, stride, op->arg); break;
    case RF__OP_COLOR: case RF__OP_SATURATION: rc = saturation(px, w, h, stride, op->arg, scr); break;
    case RF__OP_CONTRAST: rc = contrast(px, w, h, stride, op->arg, scr); break;
    case RF__OP_SHARPNESS: rc = sharpness(px, w, h, stride, op->arg, scr); break;
    case RF__OP_POSTERIZE: posterize(px, w, h, stride, (int)op->arg); break;
    case RF__OP_SOLARIZE: solarize(px, w, h, stride, op->arg); break;
    case RF__OP_AUTOCONTRAST: autocontrast(px, w, h, stride); break;
    case RF__OP_EQUALIZE: equalize(px, w, h, stride); break;
    case RF__OP_INVERT: invert(px, w, h, stride); break;
    case RF__OP_HUE: hue(px, w, h, stride, op->arg); break;
    case RF__OP_GRAYSCALE: grayscale(px, w, h, stride); break;
    case RF__OP_ERASE: rc = erase(op, px, w, h, stride, scr); break;
    default: break;
    }
    if (rc == RF_E_NOMEM)
        snprintf(err, errcap, "augment: out of memory for a %dx%d picture", w, h);
    return rc;
}
