/*
 * resample.c - Pillow's antialiased bilinear resampler for 8-bit RGB: the
 * taps, the scratch, and the driver of the two passes.
 *
 * Resampling follows Pillow's ImagingResample: per axis, each output pixel
 * has a run of source taps with triangle weights widened by the scale
 * (antialiasing), normalised, then turned into 22-bit fixed point; the
 * horizontal pass runs first into a uint8 intermediate, then the vertical
 * one. Any output pixel depends only on its own coordinate, so we build taps
 * for the kept window alone, run the horizontal pass only over the source
 * rows those output rows read, and get exactly the bytes of "resize all, then
 * crop".
 *
 * The filter is clamped to the box rounded outward to whole pixels (the
 * "clamp region" below). For an integer box that is torchvision's
 * crop-then-resize; for the whole picture it is a plain resize; for the
 * fractional boxes left by DCT scaling it reads the partly covered edge
 * pixels and nothing beyond.
 *
 * The passes' inner loops are in kernels.c (portable C, SSE2) and
 * avx2.c, one set per instruction-set level, picked per call
 * (rf__resampler_simd); every level gives the same bytes. Scratch lives in
 * rf_resampler and only grows.
 */
#include "resample.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* ------------------------------------------------------------ one axis */

/* Everything about one axis of a resample. Tap positions are first computed
 * relative to the clamp region, as Pillow computes them in the cropped
 * picture, then shifted to picture coordinates. */
typedef struct axis {
    int c0, n;          /* clamp region [c0, c0 + n), picture pixels */
    float in0, in1;     /* box relative to c0, as Pillow's float box */
    double scale;       /* source pixels per output pixel */
    double filterscale; /* max(scale, 1): how much the filter is widened */
    double support;     /* filter half-width in source pixels */
    int ksize;          /* most taps of one output pixel */
    int out;            /* whole resampled length */
    int a, b;           /* kept outputs [a, b) */
    int skip;           /* 1: pass is the identity, output i is source c0 + i */
} axis;

static void axis_init(axis *ax, double x0, double x1, int out, int crop, int crop_n, int src_n)
{
    assert(out > 0 && crop_n > 0 && src_n > 0);
    assert(x0 >= 0.0 && x1 > x0 && x1 <= (double)src_n);
    /* The clamps only matter if a caller broke the assertion above: they keep
     * every read inside the picture even then. */
    int c0 = x0 > 0.0 ? (int)floor(x0) : 0;
    int c1 = x1 < (double)src_n ? (int)ceil(x1) : src_n;
    assert(c1 > c0);
    ax->c0 = c0;
    ax->n = c1 - c0;
    ax->in0 = (float)(x0 - c0);
    ax->in1 = (float)(x1 - c0);
    /* Pillow subtracts in float, then divides in double. */
    ax->scale = (double)(ax->in1 - ax->in0) / out;
    ax->filterscale = ax->scale < 1.0 ? 1.0 : ax->scale;
    ax->support = 1.0 * ax->filterscale; /* the triangle's support is 1 */
    ax->ksize = (int)ceil(ax->support) * 2 + 1;
    ax->out = out;
    ax->a = crop > 0 ? crop : 0;
    ax->b = crop + crop_n < out ? crop + crop_n : out;
    if (ax->b < ax->a)
        ax->b = ax->a;
    /* Pillow skips a pass when the box is the whole (clamped) axis and the size
     * does not change: output i is then source c0 + i. */
    ax->skip = ax->in0 == 0.0f && ax->in1 == (float)out && ax->n == out;
}

/* Taps of output xx: source pixels [*first, *first + *count) relative to c0.
 * Pillow's rule: the support rounded to whole pixels, clamped to the region. */
static void axis_taps(const axis *ax, int xx, double *center, int *first, int *count)
{
    double c = ax->in0 + (xx + 0.5) * ax->scale;
    int xmin = (int)(c - ax->support + 0.5);
    if (xmin < 0)
        xmin = 0;
    int xmax = (int)(c + ax->support + 0.5);
    if (xmax > ax->n)
        xmax = ax->n;
    assert(xmax > xmin && xmax - xmin <= ax->ksize);
    *center = c;
    *first = xmin;
    *count = xmax - xmin;
}

/* Source pixels [*lo, *hi) (picture coordinates) read by the kept outputs. */
static void axis_span(const axis *ax, int *lo, int *hi)
{
    if (ax->a >= ax->b) {
        *lo = *hi = ax->c0;
        return;
    }
    if (ax->skip) {
        *lo = ax->c0 + ax->a;
        *hi = ax->c0 + ax->b;
        return;
    }
    /* A run's ends only move right with the output (its centre does, and
     * truncation and the clamps keep the order): the first output's first
     * tap and the last one's end bound them all. */
    double c;
    int f, k, fl, kl;
    axis_taps(ax, ax->a, &c, &f, &k);
    axis_taps(ax, ax->b - 1, &c, &fl, &kl);
    assert(fl >= f && fl + kl >= f + k);
    *lo = ax->c0 + f;
    *hi = ax->c0 + fl + kl;
}

/* Fixed-point weights of the kept outputs: first[i] (first tap, in picture
 * pixels minus origin), count[i] and k[i * ksize + t] for output a + i. Same
 * double arithmetic in the same order as Pillow's precompute_coeffs and
 * normalize_coeffs_8bpc, so the integers are identical. */
static void axis_coeffs(const axis *ax, int origin, double *w, int32_t *first, int32_t *count,
                        int32_t *k)
{
    double ss = 1.0 / ax->filterscale;
    for (int xx = ax->a; xx < ax->b; xx++) {
        int i = xx - ax->a;
        double center, ww = 0.0;
        int xmin, n;
        axis_taps(ax, xx, &center, &xmin, &n);
        for (int t = 0; t < n; t++) {
            double x = (t + xmin - center + 0.5) * ss;
            if (x < 0.0)
                x = -x;
            w[t] = x < 1.0 ? 1.0 - x : 0.0;
            ww += w[t];
        }
        int32_t *kk = k + (size_t)i * ax->ksize;
        for (int t = 0; t < n; t++) {
            double v = ww != 0.0 ? w[t] / ww : w[t];
            kk[t] = v < 0 ? (int32_t)(-0.5 + v * (1 << PRECISION_BITS))
                          : (int32_t)(0.5 + v * (1 << PRECISION_BITS));
        }
        assert(ax->c0 + xmin >= origin);
        first[i] = ax->c0 + xmin - origin;
        count[i] = n;
    }
}

/* ------------------------------------------------------- bounds of a geometry */

void rf__geom_bounds(const rf_geom *g, int src_w, int src_h, int *x0, int *y0, int *x1, int *y1)
{
    assert(g && x0 && y0 && x1 && y1);
    axis ax, ay;
    axis_init(&ax, g->x0, g->x1, g->out_w, g->crop_x, g->crop_w, src_w);
    axis_init(&ay, g->y0, g->y1, g->out_h, g->crop_y, g->crop_h, src_h);
    axis_span(&ax, x0, x1);
    axis_span(&ay, y0, y1);
    assert(*x0 >= 0 && *x1 <= src_w && *y0 >= 0 && *y1 <= src_h);
}

/* ------------------------------------------------------------- resampler */

typedef struct buf {
    void *p;
    size_t cap;
} buf;

struct rf_resampler {
    buf w;                  /* double weights of one output pixel */
    buf xfirst, xcount, xk; /* horizontal taps of the kept columns */
    buf xkl, xkh;           /* their weights split in two (taps_split) */
    buf yfirst, ycount, yk; /* vertical taps of the kept rows */
    buf ykl, ykh;           /* their weights split in two (taps_split) */
    buf tile;               /* one tile of source rows, transposed */
    buf tout;               /* horizontal results of one tile, transposed */
    buf map;                /* tout row of each intermediate byte */
    buf tmp;                /* horizontal pass output, uint8 */
    buf row;                /* one output row before flip / NCHW split */
    int simd;               /* RF__SIMD_* level in use */
};

/* Grows b to at least n items of size sz (contents not kept). */
static void *buf_get(buf *b, size_t n, size_t sz)
{
    if (n == 0)
        n = 1;
    if (n > SIZE_MAX / sz)
        return NULL;
    size_t need = n * sz;
    if (need > b->cap) {
        size_t cap = b->cap + b->cap / 2;
        if (cap < need)
            cap = need;
        void *p = malloc(cap);
        if (!p) {
            p = malloc(need);
            cap = need;
        }
        if (!p)
            return NULL;
        free(b->p);
        b->p = p;
        b->cap = cap;
    }
    return b->p;
}

/* Best level this build and machine allow. __builtin_cpu_supports reads
 * what libgcc's constructor found (and it checks that the OS saves the AVX
 * registers); resamplers are not made before constructors run. */
static int simd_best(void)
{
#if RF_AVX2
    if (__builtin_cpu_supports("avx2"))
        return RF__SIMD_AVX2;
#endif
    return RF_SSE2 ? RF__SIMD_SSE2 : RF__SIMD_NONE;
}

rf_resampler *rf__resampler_create(void)
{
    rf_resampler *r = calloc(1, sizeof(rf_resampler));
    if (r)
        r->simd = simd_best();
    return r;
}

void rf__resampler_destroy(rf_resampler *r)
{
    if (!r)
        return;
    buf *all[] = {&r->w,      &r->xfirst, &r->xcount, &r->xk,  &r->xkl, &r->xkh,
                  &r->yfirst, &r->ycount, &r->yk,     &r->ykl, &r->ykh, &r->tile,
                  &r->tout,   &r->map,    &r->tmp,    &r->row};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]->p);
    free(r);
}

int rf__resampler_simd(rf_resampler *r, int level)
{
    assert(r);
    int best = simd_best();
    r->simd = level < RF__SIMD_NONE ? RF__SIMD_NONE : level < best ? level : best;
    return r->simd;
}

/* Gives every kept column the same number of taps K (the most any has), so
 * that the horizontal loop has no data-dependent trip count: a run that would
 * pass hi (end of the span the columns read) is moved left and the weights
 * with it; the added taps weigh 0 and change no sum. The span [lo, hi) is at
 * least K wide, since it contains the widest run, so nothing is read outside
 * it.
 * Rewrites k from stride ksize to stride K and returns K. */
static int taps_uniform(int n, int ksize, int lo, int hi, int32_t *first, const int32_t *count,
                        int32_t *k)
{
    int K = 1;
    for (int i = 0; i < n; i++)
        K = count[i] > K ? count[i] : K;
    assert(K <= ksize);
    assert(hi - lo >= K);
    (void)lo; /* only checked */
    for (int i = 0; i < n; i++) {
        int shift = first[i] + K > hi ? first[i] + K - hi : 0;
        assert(first[i] - shift >= lo && count[i] + shift <= K);
        int32_t *src = k + (size_t)i * ksize, *dst = k + (size_t)i * K;
        /* dst <= src and the rows go in order, so memmove never clobbers a
         * row not yet moved. */
        memmove(dst + shift, src, (size_t)count[i] * sizeof *src);
        for (int t = 0; t < shift; t++)
            dst[t] = 0;
        for (int t = shift + count[i]; t < K; t++)
            dst[t] = 0;
        first[i] -= shift;
    }
    return K;
}

/* Splits the weights in two, k = kh * 2^bits + kl with kl < 2^bits, as the
 * kernels of a level want them: bits = 16 for mac(), 11 for madd32() (both
 * halves then fit in int16). Bilinear weights are >= 0 and at most 1.0 =
 * 2^22. */
static void taps_split(size_t n, const int32_t *k, int bits, uint16_t *kl, uint16_t *kh)
{
    for (size_t i = 0; i < n; i++) {
        assert(k[i] >= 0 && k[i] <= (1 << PRECISION_BITS));
        kl[i] = (uint16_t)(k[i] & ((1 << bits) - 1));
        kh[i] = (uint16_t)(k[i] >> bits);
    }
}

/* Where the window lies in dst: row stride (pixels) and plane size of the
 * frame, and the offset of the window's first pixel (rf_frame). */
typedef struct frame {
    size_t stride, plane, at;
} frame;

static frame frame_of(const rf_geom *g, const rf_frame *fr, int planar)
{
    frame f;
    int framed = fr && fr->w > 0;
    f.stride = (size_t)(framed ? fr->w : g->crop_w);
    f.plane = f.stride * (size_t)(framed ? fr->h : g->crop_h);
    size_t off = framed ? (size_t)fr->y * f.stride + (size_t)fr->x : 0;
    f.at = planar ? off : off * 3;
    return f;
}

/* Writes n packed RGB pixels, the window columns [wx0, wx0 + n) of window row
 * wy, into dst (the window's first pixel; rows and planes as fr says),
 * mirroring columns when flipping. Only for the paths without a horizontal
 * pass, which would have done this. */
static void store_row(const uint8_t *row, int n, const rf_geom *g, const frame *fr, int layout,
                      int wy, int wx0, uint8_t *dst)
{
    size_t cw = (size_t)g->crop_w;
    if (layout == RF__LAYOUT_NHWC) {
        uint8_t *d = dst + (size_t)wy * fr->stride * 3;
        if (!g->flip) {
            memcpy(d + (size_t)wx0 * 3, row, (size_t)n * 3);
        } else {
            uint8_t *e = d + (cw - 1 - (size_t)wx0) * 3;
            for (int j = 0; j < n; j++) {
                e[-3 * j + 0] = row[3 * j + 0];
                e[-3 * j + 1] = row[3 * j + 1];
                e[-3 * j + 2] = row[3 * j + 2];
            }
        }
    } else {
        size_t plane = fr->plane;
        uint8_t *r = dst + (size_t)wy * fr->stride, *gr = r + plane, *b = gr + plane;
        if (!g->flip) {
            r += wx0;
            gr += wx0;
            b += wx0;
            for (int j = 0; j < n; j++) {
                r[j] = row[3 * j + 0];
                gr[j] = row[3 * j + 1];
                b[j] = row[3 * j + 2];
            }
        } else {
            size_t last = cw - 1 - (size_t)wx0;
            for (int j = 0; j < n; j++) {
                r[last - j] = row[3 * j + 0];
                gr[last - j] = row[3 * j + 1];
                b[last - j] = row[3 * j + 2];
            }
        }
    }
}

/* Zeroes the window (CenterCrop's padding), row by row within the frame. */
static void zero_window(const rf_geom *g, const frame *fr, int planar, uint8_t *dst)
{
    size_t cw = (size_t)g->crop_w;
    if (!planar && fr->stride == cw) {
        memset(dst, 0, cw * (size_t)g->crop_h * 3);
        return;
    }
    for (int c = 0; c < (planar ? 3 : 1); c++)
        for (int y = 0; y < g->crop_h; y++) {
            if (planar)
                memset(dst + (size_t)c * fr->plane + (size_t)y * fr->stride, 0, cw);
            else
                memset(dst + (size_t)y * fr->stride * 3, 0, cw * 3);
        }
}

/* Taps of one axis's kept outputs, relative to origin: first tap in *first,
 * a uniform count (returned; 0 when memory cannot be had) over the span [0,
 * span) of the origin, weights split at bit `split` in *kl, *kh. These have
 * one more weight, 0, after the last: madd32 loads weights in pairs, and
 * with an odd K the last pair of the last output ends there. */
static int taps_build(const axis *ax, int origin, int span, int split, double *w, buf *bfirst,
                      buf *bcount, buf *bk, buf *bkl, buf *bkh, int32_t **first, uint16_t **kl,
                      uint16_t **kh)
{
    size_t n = (size_t)(ax->b - ax->a), nk = n * (size_t)ax->ksize;
    *first = buf_get(bfirst, n, sizeof(int32_t));
    int32_t *count = buf_get(bcount, n, sizeof(int32_t));
    int32_t *k = buf_get(bk, nk, sizeof(int32_t));
    *kl = buf_get(bkl, nk + 1, sizeof(uint16_t));
    *kh = buf_get(bkh, nk + 1, sizeof(uint16_t));
    if (!*first || !count || !k || !*kl || !*kh)
        return 0;
    axis_coeffs(ax, origin, w, *first, count, k);
    int K = taps_uniform((int)n, ax->ksize, 0, span, *first, count, k);
    size_t nw = n * (size_t)K;
    taps_split(nw, k, split, *kl, *kh);
    (*kl)[nw] = (*kh)[nw] = 0;
    return K;
}

int rf__resample(rf_resampler *r, const rf_geom *g, int src_w, int src_h, const uint8_t *src,
                 size_t src_stride, int reg_x0, int reg_y0, int reg_w, int reg_h, uint8_t *dst,
                 int layout)
{
    return rf__resample_into(r, g, NULL, src_w, src_h, src, src_stride, reg_x0, reg_y0, reg_w,
                             reg_h, dst, layout);
}

int rf__resample_into(rf_resampler *r, const rf_geom *g, const rf_frame *frm, int src_w, int src_h,
                      const uint8_t *src, size_t src_stride, int reg_x0, int reg_y0, int reg_w,
                      int reg_h, uint8_t *dst, int layout)
{
    assert(r && g && src && dst);
    assert(layout == RF__LAYOUT_NHWC || layout == RF__LAYOUT_NCHW);
    assert(g->crop_w > 0 && g->crop_h > 0);
    assert(reg_x0 >= 0 && reg_y0 >= 0 && reg_w >= 0 && reg_h >= 0);
    assert(reg_x0 + reg_w <= src_w && reg_y0 + reg_h <= src_h);
    assert(src_stride >= (size_t)reg_w * 3);
    (void)reg_w; /* the region's extent is only checked, in assertions */
    (void)reg_h;

    assert(!frm || frm->w == 0 ||
           (frm->x >= 0 && frm->y >= 0 && frm->x + g->crop_w <= frm->w &&
            frm->y + g->crop_h <= frm->h));

    axis ax, ay;
    axis_init(&ax, g->x0, g->x1, g->out_w, g->crop_x, g->crop_w, src_w);
    axis_init(&ay, g->y0, g->y1, g->out_h, g->crop_y, g->crop_h, src_h);
    int nx = ax.b - ax.a, ny = ay.b - ay.a;
    int planar = layout == RF__LAYOUT_NCHW;
    const frame fr = frame_of(g, frm, planar);
    dst += fr.at; /* from here on dst is the window's first pixel */

    /* Padding (window outside the resampled picture) is zero. */
    if (nx < g->crop_w || ny < g->crop_h)
        zero_window(g, &fr, planar, dst);
    if (nx == 0 || ny == 0)
        return 0;

    int bx0, bx1, by0, by1;
    axis_span(&ax, &bx0, &bx1);
    axis_span(&ay, &by0, &by1);
    assert(bx0 >= reg_x0 && bx1 <= reg_x0 + reg_w);
    assert(by0 >= reg_y0 && by1 <= reg_y0 + reg_h);

    rf_kernels kn = rf__resample_kernels(r->simd);
    size_t cw = (size_t)g->crop_w, stride = fr.stride, plane = fr.plane;
    size_t len = (size_t)nx * 3; /* bytes of one kept row */
    int wx0 = ax.a - g->crop_x;  /* first kept column within the window */
    /* First destination column of the kept run (mirrored when flipping). */
    size_t dx0 = g->flip ? cw - (size_t)wx0 - (size_t)nx : (size_t)wx0;

    /* Double weights of one pixel, shared by both axes' coefficient builds. */
    int kmax = ax.ksize > ay.ksize ? ax.ksize : ay.ksize;
    double *w = buf_get(&r->w, (size_t)kmax, sizeof(double));
    if (!w)
        return -1;

    int32_t *yfirst = NULL;
    uint16_t *ykl = NULL, *ykh = NULL;
    int KY = 0;
    if (!ay.skip) {
        KY = taps_build(&ay, by0, by1 - by0, kn.split, w, &r->yfirst, &r->ycount, &r->yk, &r->ykl,
                        &r->ykh, &yfirst, &ykl, &ykh);
        if (!KY)
            return -1;
    }

    if (ax.skip) {
        /* The source rows at the kept columns are the intermediate: packed
         * and unflipped, so store_row does flip and layout, except for plain
         * NHWC, which the vertical pass writes in place. */
        const uint8_t *ibase =
            src + (size_t)(by0 - reg_y0) * src_stride + (size_t)(ax.c0 + ax.a - reg_x0) * 3;
        int direct = !planar && !g->flip;
        uint8_t *row = direct ? NULL : buf_get(&r->row, len, 1);
        if (!direct && !row)
            return -1;
        for (int i = 0; i < ny; i++) {
            int wy = ay.a + i - g->crop_y;
            uint8_t *out = direct ? dst + ((size_t)wy * stride + dx0) * 3 : row;
            const uint8_t *in = out;
            if (ay.skip) {
                in = ibase + (size_t)(ay.c0 + ay.a + i - by0) * src_stride;
                if (direct)
                    memcpy(out, in, len);
            } else {
                kn.vrun(ibase + (size_t)yfirst[i] * src_stride, src_stride, KY,
                        ykl + (size_t)i * KY, ykh + (size_t)i * KY, len, out);
            }
            if (!direct)
                store_row(in, nx, g, &fr, layout, wy, wx0, dst);
        }
        return 0;
    }

    /* Horizontal pass into the intermediate, which has the final layout. */
    int span = bx1 - bx0;
    int32_t *xfirst;
    uint16_t *xkl, *xkh;
    int KX = taps_build(&ax, bx0, span, kn.split, w, &r->xfirst, &r->xcount, &r->xk, &r->xkl,
                        &r->xkh, &xfirst, &xkl, &xkh);
    if (!KX)
        return -1;
    rf_ilayout il;
    il.nx = nx;
    il.planar = planar;
    il.flip = g->flip;
    if (planar) {
        il.seg = ((size_t)nx + 15) & ~(size_t)15;
        il.stride = 3 * il.seg;
    } else {
        il.seg = 0;
        il.stride = (len + 15) & ~(size_t)15;
    }
    size_t rows = (size_t)(by1 - by0);
    if (rows > SIZE_MAX / il.stride)
        return -1;
    uint8_t *tile = buf_get(&r->tile, (size_t)span, TLANES);
    uint8_t *tout = buf_get(&r->tout, (size_t)nx, TLANES);
    uint8_t *tmp = buf_get(&r->tmp, rows * il.stride, 1);
    uint32_t *map = buf_get(&r->map, len, sizeof(uint32_t));
    if (!tile || !tout || !tmp || !map)
        return -1;
    rf__resample_tout_map(&il, map);
    rf__resample_hpass(&kn, src + (size_t)(by0 - reg_y0) * src_stride + (size_t)(bx0 - reg_x0) * 3,
                       src_stride, (int)rows, span, xfirst, KX, xkl, xkh, tile, tout, &il, map,
                       tmp);

    /* Vertical pass (or copy) straight into dst. */
    for (int i = 0; i < ny; i++) {
        int wy = ay.a + i - g->crop_y;
        size_t y = ay.skip ? (size_t)(ay.c0 + ay.a + i - by0) : (size_t)yfirst[i];
        const uint8_t *in = tmp + y * il.stride;
        const uint16_t *kl = ay.skip ? NULL : ykl + (size_t)i * KY;
        const uint16_t *kh = ay.skip ? NULL : ykh + (size_t)i * KY;
        for (int c = 0; c < (planar ? 3 : 1); c++) {
            uint8_t *out = planar ? dst + (size_t)c * plane + (size_t)wy * stride + dx0
                                  : dst + ((size_t)wy * stride + dx0) * 3;
            size_t n = planar ? (size_t)nx : len;
            if (ay.skip)
                memcpy(out, in + (size_t)c * il.seg, n);
            else
                kn.vrun(in + (size_t)c * il.seg, il.stride, KY, kl, kh, n, out);
        }
    }
    return 0;
}
