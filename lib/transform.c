/*
 * transform.c - crop geometry (torchvision 0.14) and PIL's antialiased
 * bilinear resampler, computing only the pixels that are kept.
 *
 * Geometry: the rf__geom_* functions repeat torchvision's arithmetic step by
 * step (Python's round-half-even, int() truncation, the order of random draws)
 * so that the same picture gives the same box and sizes as Resize+CenterCrop or
 * RandomResizedCrop would.
 *
 * Resampling follows Pillow's ImagingResample for 8-bit RGB: per axis, each
 * output pixel has a run of source taps with triangle weights widened by the
 * scale (antialiasing), normalised, then turned into 22-bit fixed point; the
 * horizontal pass runs first into a uint8 intermediate, then the vertical one.
 * Any output pixel depends only on its own coordinate, so we build taps for the
 * kept window alone, run the horizontal pass only over the source rows those
 * output rows read, and get exactly the bytes of "resize all, then crop".
 *
 * The filter is clamped to the box rounded outward to whole pixels (the "clamp
 * region" below). For an integer box that is torchvision's crop-then-resize;
 * for the whole picture it is a plain resize; for the fractional boxes left by
 * DCT scaling it reads the partly covered edge pixels and nothing beyond.
 *
 * Speed: both passes are multiply-accumulates of whole 16-byte blocks
 * (mac), each output byte the weighted sum of K bytes K rows apart, with
 * 16-bit arithmetic that is exact (see mac) and plain C that gcc -O2
 * vectorises; with AVX2, of 32- and 16-byte blocks with pmaddwd (madd32).
 * The vertical pass is that already: output row = sum of K intermediate
 * rows. The horizontal pass is made so by transposing tiles of 16 source
 * rows (tile_in), so that the taps of a column are whole tile rows, and
 * transposing the results back (tile_out), which also mirrors them for flip
 * and splits the channels for NCHW: the vertical pass then writes the final
 * layout in place. Only the kept window is computed, every column of
 * an axis gets the same tap count (zero weights pad the short ones) so that
 * loops have no data-dependent trip counts, and the common counts get
 * unrolled code. Scratch lives in rf_resampler and only grows.
 *
 * Instruction sets: the transposes, which no compiler vectorises, use SSE2
 * intrinsics where the target has SSE2 (all of x86-64); on x86-64 with GCC or
 * Clang the transposes, twice as wide, and the passes' kernel (madd32, AVX2
 * intrinsics) also exist for AVX2, picked at run time (rf__resampler_simd).
 * Every level, and the portable C without either, gives the same bytes.
 */
#include "transform.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__) && !defined(RF_TRANSFORM_NO_SIMD)
#define RF_SSE2 1
#include <emmintrin.h>
#else
#define RF_SSE2 0
#endif
#if RF_SSE2 && defined(__x86_64__) && defined(__GNUC__)
#define RF_AVX2 1
#define RF_TARGET_AVX2 __attribute__((target("avx2")))
#include <immintrin.h>
#else
#define RF_AVX2 0
#endif

/* Pillow's fixed point: 8 bits of result, 2 bits of headroom for filters with
 * negative lobes, the rest for the fraction. */
#define PRECISION_BITS (32 - 8 - 2)
#define HALF_UNIT (1 << (PRECISION_BITS - 1))

/* ---------------------------------------------------------------- geometry */

/* Python's round() on a double: nearest, ties to even. Independent of the
 * floating-point rounding mode on purpose. */
static double round_half_even(double x)
{
    double f = floor(x);
    double d = x - f;
    if (d > 0.5 || (d == 0.5 && fmod(f, 2.0) != 0.0))
        f += 1.0;
    return f;
}

/* torchvision CenterCrop's offset on one axis of length n for a crop of size:
 * int(round((n - size) / 2.0)), or, when the crop is larger, minus the padding
 * put before the picture ((size - n) // 2). */
static int center_offset(int n, int size)
{
    if (size > n)
        return -((size - n) / 2);
    return (int)round_half_even((double)(n - size) / 2.0);
}

void rf__geom_center(int w, int h, int size, rf_geom *g)
{
    assert(w > 0 && h > 0 && size > 0 && g);
    /* Resize(R): the short side becomes R, the long side int(R * long / short)
     * (a correctly rounded double division, then truncation, as in Python). */
    int r = (int)round_half_even((double)size / 0.875);
    int out_w, out_h;
    if (w <= h) {
        out_w = r;
        out_h = (int)((double)r * (double)h / (double)w);
    } else {
        out_h = r;
        out_w = (int)((double)r * (double)w / (double)h);
    }
    memset(g, 0, sizeof *g);
    g->x0 = 0.0;
    g->y0 = 0.0;
    g->x1 = (double)w;
    g->y1 = (double)h;
    g->out_w = out_w;
    g->out_h = out_h;
    g->crop_x = center_offset(out_w, size);
    g->crop_y = center_offset(out_h, size);
    g->crop_w = size;
    g->crop_h = size;
    g->flip = 0;
}

void rf__geom_rrc(int w, int h, int size, rf_rng *rng, rf_geom *g)
{
    assert(w > 0 && h > 0 && size > 0 && rng && g);
    const double scale_lo = 0.08, scale_hi = 1.0;
    const double ratio_lo = 3.0 / 4.0, ratio_hi = 4.0 / 3.0;
    const double log_lo = log(ratio_lo), log_hi = log(ratio_hi);
    double area = (double)w * (double)h;
    int cw = 0, ch = 0, top = 0, left = 0, found = 0;

    for (int attempt = 0; attempt < 10 && !found; attempt++) {
        double target_area = area * rf__rng_range(rng, scale_lo, scale_hi);
        double aspect = exp(rf__rng_range(rng, log_lo, log_hi));
        int tw = (int)round_half_even(sqrt(target_area * aspect));
        int th = (int)round_half_even(sqrt(target_area / aspect));
        if (0 < tw && tw <= w && 0 < th && th <= h) {
            /* torchvision draws the top (i) before the left (j). */
            top = (int)rf__rng_below(rng, (uint64_t)(h - th + 1));
            left = (int)rf__rng_below(rng, (uint64_t)(w - tw + 1));
            cw = tw;
            ch = th;
            found = 1;
        }
    }
    if (!found) {
        /* Centre fallback: the largest centred crop within the ratio range. */
        double in_ratio = (double)w / (double)h;
        if (in_ratio < ratio_lo) {
            cw = w;
            ch = (int)round_half_even((double)w / ratio_lo);
        } else if (in_ratio > ratio_hi) {
            ch = h;
            cw = (int)round_half_even((double)h * ratio_hi);
        } else {
            cw = w;
            ch = h;
        }
        top = (h - ch) / 2;
        left = (w - cw) / 2;
    }
    assert(cw > 0 && ch > 0 && left >= 0 && top >= 0 && left + cw <= w && top + ch <= h);

    memset(g, 0, sizeof *g);
    g->x0 = (double)left;
    g->y0 = (double)top;
    g->x1 = (double)(left + cw);
    g->y1 = (double)(top + ch);
    g->out_w = size;
    g->out_h = size;
    g->crop_x = 0;
    g->crop_y = 0;
    g->crop_w = size;
    g->crop_h = size;
    g->flip = 0;
}

void rf__geom_none(int w, int h, int size, rf_geom *g)
{
    assert(w > 0 && h > 0 && size > 0 && g);
    memset(g, 0, sizeof *g);
    g->x1 = (double)w;
    g->y1 = (double)h;
    g->out_w = size;
    g->out_h = size;
    g->crop_w = size;
    g->crop_h = size;
}

int rf__geom_dct_denom(const rf_geom *g)
{
    assert(g && g->out_w > 0 && g->out_h > 0);
    double bw = g->x1 - g->x0, bh = g->y1 - g->y0;
    int d = 8;
    while (d > 1 && (bw < (double)g->out_w * d || bh < (double)g->out_h * d))
        d /= 2;
    return d;
}

void rf__geom_scale(rf_geom *g, int denom)
{
    assert(g && (denom == 1 || denom == 2 || denom == 4 || denom == 8));
    /* Exact: dividing by a power of two only changes the exponent. */
    double s = 1.0 / (double)denom;
    g->x0 *= s;
    g->y0 *= s;
    g->x1 *= s;
    g->y1 *= s;
}

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
    int l = ax->n, h = 0;
    for (int xx = ax->a; xx < ax->b; xx++) {
        double c;
        int f, k;
        axis_taps(ax, xx, &c, &f, &k);
        if (f < l)
            l = f;
        if (f + k > h)
            h = f + k;
    }
    *lo = ax->c0 + l;
    *hi = ax->c0 + h;
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

/* --------------------------------------------------------------- geometry */

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

#if defined(__GNUC__)
#define RF_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define RF_ALWAYS_INLINE inline
#endif
/* Unrolls the tap loop, so that the weights' broadcasts leave the row loop
 * of the vertical pass (gcc -O2 does not unroll it by itself). */
#if defined(__GNUC__) && !defined(__clang__)
#define RF_UNROLL_TAPS _Pragma("GCC unroll 8")
#else
#define RF_UNROLL_TAPS
#endif

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

static inline uint8_t clip8(int32_t v)
{
    /* Pillow's lookup table clamps (v >> PRECISION_BITS) to 0..255; testing
     * the sign first avoids shifting a negative number. */
    v = v < 0 ? 0 : v;
    v >>= PRECISION_BITS;
    return (uint8_t)(v > 255 ? 255 : v);
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

/* The kernel of both passes (AVX2 has its own, madd32 below): 16 output
 * bytes, out[q] = the sum over the K taps of rows[t][q] * k[t] (rows at
 * p + t * stride), plus HALF_UNIT, >> 22, clipped: Pillow's arithmetic,
 * exactly. The lanes are independent, so whether they hold neighbouring
 * pixels' channels (the vertical pass) or one pixel of 16 rows (the
 * transposed horizontal pass) does not matter.
 *
 * SSE2 multiplies 16-bit numbers only (pmullw, pmulhuw; 32-bit lanes would
 * also halve the width), so the 30-bit sum V = HALF_UNIT + sum of p * k is
 * carried in two 16-bit accumulators: with k = kh * 2^16 + kl,
 *   p * k = 2^16 (p * kh + ph) + pl,  ph, pl the halves of the product p * kl,
 * lo sums the pl modulo 2^16 and hi the rest, plus one for each wrap of lo
 * (lo + pl < pl after the add). Then V = 2^16 hi + lo with lo < 2^16, so V
 * >> 22 = hi >> 6. HALF_UNIT = 2^21 starts hi at 32. The carry is counted
 * as "hi -= no carry" on a start K higher: a compare and an add.
 *
 * hi stays below 2^15, so the clip can be a signed 16-bit min (pminsw): the
 * pixels are <= 255 and one output's K weights are >= 0 and add up to 2^22
 * plus at most half a unit each (rounding), so V <= 2^21 + 255 (2^22 + K/2):
 * below 2^30, with hi >> 6 <= 255 and the clip idle, for K < 16448 taps
 * (after DCT scaling a 65535-pixel picture has at most 16385), and below
 * 2^31 for K up to 8 million. hi is computed modulo 2^16 (its start may
 * wrap for huge K), which is exact since the result is below 2^15.
 *
 * Trip counts known at compile time (16 lanes and, in the callers, K) and
 * restrict: gcc's -O2 vectoriser takes only such loops. The accumulators
 * stay in registers across the taps (4 for 16 lanes with SSE2). */
static RF_ALWAYS_INLINE void mac(const uint8_t *p, size_t stride, int K, const uint16_t *kl,
                                 const uint16_t *kh, uint8_t *restrict out)
{
    uint16_t hi[16], lo[16];
    for (int q = 0; q < 16; q++) {
        hi[q] = (uint16_t)((HALF_UNIT >> 16) + K);
        lo[q] = 0;
    }
    RF_UNROLL_TAPS
    for (int t = 0; t < K; t++) {
        const uint8_t *restrict r = p + (size_t)t * stride;
        const uint16_t l = kl[t], h = kh[t];
        for (int q = 0; q < 16; q++) {
            uint16_t pl = (uint16_t)(r[q] * l);
            uint16_t ph = (uint16_t)(((uint32_t)r[q] * l) >> 16);
            uint16_t sum = (uint16_t)(lo[q] + pl);
            hi[q] = (uint16_t)(hi[q] + r[q] * h + ph - (sum >= pl));
            lo[q] = sum;
        }
    }
    for (int q = 0; q < 16; q++) {
        int16_t v = (int16_t)((int16_t)hi[q] >> (PRECISION_BITS - 16));
        out[q] = (uint8_t)(v > 255 ? 255 : v);
    }
}

#if RF_AVX2
enum { MADD_BITS = 11 }; /* where madd32's weights are split */

/* The AVX2 kernel, 32 lanes (madd32) or 16 (madd16), same result as mac().
 * AVX2 has pmaddwd: two products of signed 16-bit numbers, added into one
 * 32-bit lane. So the pixels of two taps t, t + 1 are interleaved as 16-bit
 * pairs (an odd K pairs its last tap with zeros) and each lane gets
 * p_t k_t + p_t+1 k_t+1 in two pmaddwd, with the weights split at bit 11
 * (taps_split): k = kh * 2^11 + kl, kl < 2^11 and kh <= 2^11, so that both
 * fit in int16, and the pairs (kl[t], kl[t + 1]) and (kh[t], kh[t + 1]) are
 * 32-bit loads from kl and kh (the one past an odd K meets the zeros).
 * lo sums HALF_UNIT and the p * kl, hi the p * kh, and V = 2^11 hi + lo.
 *
 * Range: kl <= k and 2^11 kh <= k, so lo and 2^11 hi are each at most the
 * bound of V, 2^21 + 255 (2^22 + K/2) (see mac), and no 32-bit sum wraps
 * for K up to 8 million. A pmaddwd is at most 2 * 255 * 2^11, far from its
 * one overflow (both products -2^15 * -2^15). V >> 22 is at most 2^9, and
 * the saturating packs to 16 (signed) and 8 bits (unsigned) clip it to 255
 * as clip8.
 *
 * Lane order: the unpacks work within 128-bit halves, so for 32 lanes the
 * four 8-lane sums hold lanes [0-3 | 16-19], [4-7 | 20-23], [8-11 | 24-27]
 * and [12-15 | 28-31], which the two packs, also per half, put back in
 * order. */
RF_TARGET_AVX2 static RF_ALWAYS_INLINE __m256i kpair(const uint16_t *k)
{
    int32_t v;
    memcpy(&v, k, sizeof v);
    return _mm256_set1_epi32(v);
}

/* V >> 22 of the lanes, V = 2^MADD_BITS hi + lo. */
RF_TARGET_AVX2 static RF_ALWAYS_INLINE __m256i madd_v(__m256i hi, __m256i lo)
{
    return _mm256_srli_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, MADD_BITS), lo),
                             PRECISION_BITS);
}

RF_TARGET_AVX2 static RF_ALWAYS_INLINE void
madd32(const uint8_t *p, size_t stride, int K, const uint16_t *kl, const uint16_t *kh, uint8_t *out)
{
    const __m256i zero = _mm256_setzero_si256();
    __m256i lo0 = _mm256_set1_epi32(HALF_UNIT), lo1 = lo0, lo2 = lo0, lo3 = lo0;
    __m256i hi0 = zero, hi1 = zero, hi2 = zero, hi3 = zero;
    RF_UNROLL_TAPS
    for (int t = 0; t < K; t += 2) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(p + (size_t)t * stride));
        __m256i b =
            t + 1 < K
                ? _mm256_loadu_si256((const __m256i *)(const void *)(p + (size_t)(t + 1) * stride))
                : zero;
        __m256i ab0 = _mm256_unpacklo_epi8(a, b), ab1 = _mm256_unpackhi_epi8(a, b);
        __m256i w0 = _mm256_unpacklo_epi8(ab0, zero), w1 = _mm256_unpackhi_epi8(ab0, zero);
        __m256i w2 = _mm256_unpacklo_epi8(ab1, zero), w3 = _mm256_unpackhi_epi8(ab1, zero);
        __m256i l = kpair(kl + t), h = kpair(kh + t);
        lo0 = _mm256_add_epi32(lo0, _mm256_madd_epi16(w0, l));
        lo1 = _mm256_add_epi32(lo1, _mm256_madd_epi16(w1, l));
        lo2 = _mm256_add_epi32(lo2, _mm256_madd_epi16(w2, l));
        lo3 = _mm256_add_epi32(lo3, _mm256_madd_epi16(w3, l));
        hi0 = _mm256_add_epi32(hi0, _mm256_madd_epi16(w0, h));
        hi1 = _mm256_add_epi32(hi1, _mm256_madd_epi16(w1, h));
        hi2 = _mm256_add_epi32(hi2, _mm256_madd_epi16(w2, h));
        hi3 = _mm256_add_epi32(hi3, _mm256_madd_epi16(w3, h));
    }
    lo0 = madd_v(hi0, lo0);
    lo1 = madd_v(hi1, lo1);
    lo2 = madd_v(hi2, lo2);
    lo3 = madd_v(hi3, lo3);
    _mm256_storeu_si256((__m256i *)(void *)out, _mm256_packus_epi16(_mm256_packs_epi32(lo0, lo1),
                                                                    _mm256_packs_epi32(lo2, lo3)));
}

/* madd32 on 16 lanes: the pairs of lanes 0-7 and 8-15 are zero-extended
 * whole (vpmovzxbw), so the sums are in order and one permute undoes the
 * per-half pack. */
RF_TARGET_AVX2 static RF_ALWAYS_INLINE void
madd16(const uint8_t *p, size_t stride, int K, const uint16_t *kl, const uint16_t *kh, uint8_t *out)
{
    const __m128i zero = _mm_setzero_si128();
    __m256i lo0 = _mm256_set1_epi32(HALF_UNIT), lo1 = lo0;
    __m256i hi0 = _mm256_setzero_si256(), hi1 = hi0;
    RF_UNROLL_TAPS
    for (int t = 0; t < K; t += 2) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(p + (size_t)t * stride));
        __m128i b =
            t + 1 < K
                ? _mm_loadu_si128((const __m128i *)(const void *)(p + (size_t)(t + 1) * stride))
                : zero;
        __m256i w0 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b));
        __m256i w1 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(a, b));
        __m256i l = kpair(kl + t), h = kpair(kh + t);
        lo0 = _mm256_add_epi32(lo0, _mm256_madd_epi16(w0, l));
        lo1 = _mm256_add_epi32(lo1, _mm256_madd_epi16(w1, l));
        hi0 = _mm256_add_epi32(hi0, _mm256_madd_epi16(w0, h));
        hi1 = _mm256_add_epi32(hi1, _mm256_madd_epi16(w1, h));
    }
    lo0 = madd_v(hi0, lo0);
    lo1 = madd_v(hi1, lo1);
    __m256i v = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo0, lo1), 0xd8);
    _mm_storeu_si128((__m128i *)(void *)out,
                     _mm_packus_epi16(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}
#endif

/* ------------------------------------------------------ horizontal pass
 *
 * Done directly, the horizontal pass reads each output pixel's taps from a
 * row of 3-byte pixels: a gather, which SSE2 does not have. So it runs on
 * tiles of 16 source rows transposed: byte b of the tile's rows (channel
 * b % 3 of pixel b / 3) becomes the 16-byte tile row b, one lane per source
 * row. Channel c of output column i is then the weighted sum of the tile
 * rows 3 (first[i] + t) + c, t < K: 16 lanes, and the three channels are 48
 * contiguous bytes, the taps 48 bytes apart, which mac() does in blocks of
 * 16 lanes (AVX2: madd32 and madd16, 32 and 16). The results (tout, same
 * shape: 3 rows of 16 lanes per output column) are transposed back into
 * the intermediate rows; picking which tout row goes to which byte there is
 * how flip and the planar (NCHW) split are done, so that the vertical pass
 * writes the final layout directly.
 *
 * Both transposes go 16 x 16 bytes at a time, two at a time (transpose_fn):
 * SSE2 or AVX2 unpacks where there are, else byte by byte. */

enum { TROWS = 16, TLANES = 3 * TROWS };

/* Two 16 x 16 byte transposes: out row j (at out + j * ostride, j < n0)
 * byte k = in[k][j], and out row j at out + ooff + j * ostride (j < n1)
 * byte k = in[16 + k][j]. */
typedef void (*transpose_fn)(const uint8_t *const in[32], uint8_t *out, size_t ooff, size_t ostride,
                             int n0, int n1);

static void transpose_c(const uint8_t *const in[32], uint8_t *out, size_t ooff, size_t ostride,
                        int n0, int n1)
{
    for (int j = 0; j < n0; j++)
        for (int k = 0; k < 16; k++)
            out[(size_t)j * ostride + k] = in[k][j];
    for (int j = 0; j < n1; j++)
        for (int k = 0; k < 16; k++)
            out[ooff + (size_t)j * ostride + k] = in[16 + k][j];
}

#if RF_SSE2
/* Four rounds of interleaving rows i and i + 8 (bytewise; the results are
 * rows 2i and 2i + 1) transpose a 16 x 16 matrix: a round moves the top bit
 * of the row index to the bottom of the column index and the top bit of the
 * column index to the bottom of the row index, so after four the two
 * indices have traded places. Written out: gcc -O2 would unroll none of
 * these loops and would keep the rows in memory. */
#define RF_TR_ROUND(d, s, lo, hi)                                                                  \
    do {                                                                                           \
        d##0 = lo(s##0, s##8);                                                                     \
        d##1 = hi(s##0, s##8);                                                                     \
        d##2 = lo(s##1, s##9);                                                                     \
        d##3 = hi(s##1, s##9);                                                                     \
        d##4 = lo(s##2, s##10);                                                                    \
        d##5 = hi(s##2, s##10);                                                                    \
        d##6 = lo(s##3, s##11);                                                                    \
        d##7 = hi(s##3, s##11);                                                                    \
        d##8 = lo(s##4, s##12);                                                                    \
        d##9 = hi(s##4, s##12);                                                                    \
        d##10 = lo(s##5, s##13);                                                                   \
        d##11 = hi(s##5, s##13);                                                                   \
        d##12 = lo(s##6, s##14);                                                                   \
        d##13 = hi(s##6, s##14);                                                                   \
        d##14 = lo(s##7, s##15);                                                                   \
        d##15 = hi(s##7, s##15);                                                                   \
    } while (0)

/* A whole 16 x 16 transpose: the 16 rows in, four rounds, the 16 rows out,
 * with the level's RF_TR_LOAD, RF_TR_STORE, RF_TR_LO and RF_TR_HI. */
#define RF_TR_BODY                                                                                 \
    do {                                                                                           \
        RF_TR_LOAD(0);                                                                             \
        RF_TR_LOAD(1);                                                                             \
        RF_TR_LOAD(2);                                                                             \
        RF_TR_LOAD(3);                                                                             \
        RF_TR_LOAD(4);                                                                             \
        RF_TR_LOAD(5);                                                                             \
        RF_TR_LOAD(6);                                                                             \
        RF_TR_LOAD(7);                                                                             \
        RF_TR_LOAD(8);                                                                             \
        RF_TR_LOAD(9);                                                                             \
        RF_TR_LOAD(10);                                                                            \
        RF_TR_LOAD(11);                                                                            \
        RF_TR_LOAD(12);                                                                            \
        RF_TR_LOAD(13);                                                                            \
        RF_TR_LOAD(14);                                                                            \
        RF_TR_LOAD(15);                                                                            \
        RF_TR_ROUND(b, a, RF_TR_LO, RF_TR_HI);                                                     \
        RF_TR_ROUND(a, b, RF_TR_LO, RF_TR_HI);                                                     \
        RF_TR_ROUND(b, a, RF_TR_LO, RF_TR_HI);                                                     \
        RF_TR_ROUND(a, b, RF_TR_LO, RF_TR_HI);                                                     \
        RF_TR_STORE(0);                                                                            \
        RF_TR_STORE(1);                                                                            \
        RF_TR_STORE(2);                                                                            \
        RF_TR_STORE(3);                                                                            \
        RF_TR_STORE(4);                                                                            \
        RF_TR_STORE(5);                                                                            \
        RF_TR_STORE(6);                                                                            \
        RF_TR_STORE(7);                                                                            \
        RF_TR_STORE(8);                                                                            \
        RF_TR_STORE(9);                                                                            \
        RF_TR_STORE(10);                                                                           \
        RF_TR_STORE(11);                                                                           \
        RF_TR_STORE(12);                                                                           \
        RF_TR_STORE(13);                                                                           \
        RF_TR_STORE(14);                                                                           \
        RF_TR_STORE(15);                                                                           \
    } while (0)
#define RF_TR_LO _mm_unpacklo_epi8
#define RF_TR_HI _mm_unpackhi_epi8
#define RF_TR_LOAD(k) a##k = _mm_loadu_si128((const __m128i *)(const void *)in[k])
#define RF_TR_STORE(k)                                                                             \
    if (k < nout)                                                                                  \
    _mm_storeu_si128((__m128i *)(void *)(out + (size_t)k * ostride), a##k)

static void transpose16_sse2(const uint8_t *const in[16], uint8_t *out, size_t ostride, int nout)
{
    __m128i a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15;
    __m128i b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15;
    RF_TR_BODY;
}
#undef RF_TR_LO
#undef RF_TR_HI
#undef RF_TR_LOAD
#undef RF_TR_STORE

static void transpose_sse2(const uint8_t *const in[32], uint8_t *out, size_t ooff, size_t ostride,
                           int n0, int n1)
{
    transpose16_sse2(in, out, ostride, n0);
    if (n1 > 0)
        transpose16_sse2(in + 16, out + ooff, ostride, n1);
}
#endif

#if RF_AVX2
/* transpose_sse2 in one: the lanes of AVX2's unpacks are 128-bit, so with
 * the two matrices in the low and high halves the same four rounds
 * transpose both. */
#define RF_TR_LO _mm256_unpacklo_epi8
#define RF_TR_HI _mm256_unpackhi_epi8
#define RF_TR_LOAD(k)                                                                              \
    a##k = _mm256_inserti128_si256(                                                                \
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)in[k])),             \
        _mm_loadu_si128((const __m128i *)(const void *)in[16 + k]), 1)
#define RF_TR_STORE(k)                                                                             \
    do {                                                                                           \
        if (ooff == 16 && k < n0 && k < n1) {                                                      \
            _mm256_storeu_si256((__m256i *)(void *)(out + (size_t)k * ostride), a##k);             \
            break;                                                                                 \
        }                                                                                          \
        if (k < n0)                                                                                \
            _mm_storeu_si128((__m128i *)(void *)(out + (size_t)k * ostride),                       \
                             _mm256_castsi256_si128(a##k));                                        \
        if (k < n1)                                                                                \
            _mm_storeu_si128((__m128i *)(void *)(out + ooff + (size_t)k * ostride),                \
                             _mm256_extracti128_si256(a##k, 1));                                   \
    } while (0)

RF_TARGET_AVX2 static void transpose_avx2(const uint8_t *const in[32], uint8_t *out, size_t ooff,
                                          size_t ostride, int n0, int n1)
{
    __m256i a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15;
    __m256i b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15;
    RF_TR_BODY;
}
#undef RF_TR_LO
#undef RF_TR_HI
#undef RF_TR_LOAD
#undef RF_TR_STORE
#endif
#undef RF_TR_ROUND
#undef RF_TR_BODY

/* The 16-byte blocks of a run of w >= 16 bytes, two at a time (block
 * pair p: start of the first in *x0, of the second in *x1): the last block
 * ends at w, overlapping the one before when w is not a multiple of 16 (it
 * rewrites some bytes with the same values and reads nothing past w); an
 * odd last block is paired with itself (*x1 == *x0). Returns the count. */
static size_t block_pairs(size_t w)
{
    return ((w + 15) / 16 + 1) / 2;
}

static void block_pair(size_t w, size_t p, size_t *x0, size_t *x1)
{
    size_t last = w - 16, a = 32 * p, b = a + 16;
    *x0 = a < last ? a : last;
    *x1 = b < last ? b : last;
}

/* Tile of n <= TROWS source rows of w bytes (row r at src + r * stride):
 * tile[b * 16 + r] = row r byte b. Lanes of missing rows read zeros, so
 * that every lane mac() computes is defined. */
static void tile_in(const uint8_t *src, size_t stride, int n, size_t w, uint8_t *restrict tile,
                    transpose_fn transpose)
{
    static const uint8_t zeros[16];
    const uint8_t *in[32];
    if (w < 16) {
        for (size_t b = 0; b < w; b++)
            for (int r = 0; r < TROWS; r++)
                tile[b * 16 + (size_t)r] = r < n ? src[(size_t)r * stride + b] : 0;
        return;
    }
    for (size_t p = 0; p < block_pairs(w); p++) {
        size_t b0, b1;
        block_pair(w, p, &b0, &b1);
        for (int r = 0; r < TROWS; r++) {
            in[r] = r < n ? src + (size_t)r * stride + b0 : zeros;
            in[16 + r] = r < n ? src + (size_t)r * stride + b1 : zeros;
        }
        transpose(in, tile + b0 * 16, (b1 - b0) * 16, 16, 16, b1 > b0 ? 16 : 0);
    }
}

/* Calls STEP(k) with k a compile-time constant for the common tap counts,
 * so that the kernels get unrolled code for them (bilinear taps: 2-3 when
 * enlarging, about 2 * scale + 1 when shrinking), else with K itself. */
#define RF_WITH_TAPS(K, STEP)                                                                      \
    switch (K) {                                                                                   \
    case 2:                                                                                        \
        STEP(2);                                                                                   \
        break;                                                                                     \
    case 3:                                                                                        \
        STEP(3);                                                                                   \
        break;                                                                                     \
    case 4:                                                                                        \
        STEP(4);                                                                                   \
        break;                                                                                     \
    case 5:                                                                                        \
        STEP(5);                                                                                   \
        break;                                                                                     \
    case 6:                                                                                        \
        STEP(6);                                                                                   \
        break;                                                                                     \
    case 7:                                                                                        \
        STEP(7);                                                                                   \
        break;                                                                                     \
    default:                                                                                       \
        STEP(K);                                                                                   \
        break;                                                                                     \
    }

/* Output columns 0..nx-1 of one tile: column i sums the 48-byte tile rows
 * first[i] .. first[i] + K - 1 (pixels of the span) into tout[i * TLANES],
 * in three blocks of 16. */
static RF_ALWAYS_INLINE void tile_cols(const uint8_t *tile, int nx, const int32_t *first, int K,
                                       const uint16_t *kl, const uint16_t *kh, uint8_t *tout)
{
    for (int i = 0; i < nx; i++) {
        const uint8_t *p = tile + (size_t)first[i] * TLANES;
        const uint16_t *l = kl + (size_t)i * K, *h = kh + (size_t)i * K;
        uint8_t *o = tout + (size_t)i * TLANES;
        mac(p, TLANES, K, l, h, o);
        mac(p + 16, TLANES, K, l, h, o + 16);
        mac(p + 32, TLANES, K, l, h, o + 32);
    }
}

/* tile_cols with K a constant for the common tap counts. */
static RF_ALWAYS_INLINE void tile_cols_k(const uint8_t *tile, int nx, const int32_t *first, int K,
                                         const uint16_t *kl, const uint16_t *kh, uint8_t *tout)
{
#define RF_STEP(k) tile_cols(tile, nx, first, k, kl, kh, tout)
    RF_WITH_TAPS(K, RF_STEP)
#undef RF_STEP
}

typedef void (*hcols_fn)(const uint8_t *tile, int nx, const int32_t *first, int K,
                         const uint16_t *kl, const uint16_t *kh, uint8_t *tout);

static void hcols16(const uint8_t *tile, int nx, const int32_t *first, int K, const uint16_t *kl,
                    const uint16_t *kh, uint8_t *tout)
{
    tile_cols_k(tile, nx, first, K, kl, kh, tout);
}

#if RF_AVX2
/* tile_cols with madd32 and madd16 (weights split by MADD_BITS). */
RF_TARGET_AVX2 static RF_ALWAYS_INLINE void tile_cols_madd(const uint8_t *tile, int nx,
                                                           const int32_t *first, int K,
                                                           const uint16_t *kl, const uint16_t *kh,
                                                           uint8_t *tout)
{
    for (int i = 0; i < nx; i++) {
        const uint8_t *p = tile + (size_t)first[i] * TLANES;
        const uint16_t *l = kl + (size_t)i * K, *h = kh + (size_t)i * K;
        uint8_t *o = tout + (size_t)i * TLANES;
        madd32(p, TLANES, K, l, h, o);
        madd16(p + 32, TLANES, K, l, h, o + 32);
    }
}

RF_TARGET_AVX2 static void hcols_avx2(const uint8_t *tile, int nx, const int32_t *first, int K,
                                      const uint16_t *kl, const uint16_t *kh, uint8_t *tout)
{
#define RF_STEP(k) tile_cols_madd(tile, nx, first, k, kl, kh, tout)
    RF_WITH_TAPS(K, RF_STEP)
#undef RF_STEP
}
#endif

/* Intermediate row layout: packed RGB (NHWC) or three runs of nx bytes, seg
 * apart (NCHW); output column i is stored at nx - 1 - i when flipping. */
typedef struct ilayout {
    int nx;
    int planar, flip;
    size_t seg;    /* planar: bytes between the R, G and B runs of one row */
    size_t stride; /* bytes between rows */
} ilayout;

/* Writes the first n <= TROWS lanes of a tile's results to the
 * intermediate rows at dst, run by run (one packed run of 3 nx bytes, or
 * three planar ones of nx, seg apart): byte j of run c is tout row
 * map[c * w + j], 16 bytes of each row at a time (as in tile_in). */
static void tile_out(const uint8_t *tout, int n, const ilayout *il, const uint32_t *map,
                     uint8_t *dst, transpose_fn transpose)
{
    const uint8_t *in[32];
    size_t w = il->planar ? (size_t)il->nx : (size_t)il->nx * 3;
    for (int c = 0; c < (il->planar ? 3 : 1); c++) {
        uint8_t *d = dst + (size_t)c * il->seg;
        const uint32_t *m = map + (size_t)c * w;
        if (w < 16) {
            for (size_t j = 0; j < w; j++)
                for (int r = 0; r < n; r++)
                    d[(size_t)r * il->stride + j] = tout[(size_t)m[j] * 16 + (size_t)r];
            continue;
        }
        for (size_t p = 0; p < block_pairs(w); p++) {
            size_t j0, j1;
            block_pair(w, p, &j0, &j1);
            for (int k = 0; k < 16; k++) {
                in[k] = tout + (size_t)m[j0 + (size_t)k] * 16;
                in[16 + k] = tout + (size_t)m[j1 + (size_t)k] * 16;
            }
            transpose(in, d + j0, j1 - j0, il->stride, n, j1 > j0 ? n : 0);
        }
    }
}

/* The tout row of each intermediate byte (see tile_out): flip mirrors the
 * pixels, planar takes every third row. */
static void tout_map(const ilayout *il, uint32_t *map)
{
    uint32_t nx = (uint32_t)il->nx;
    if (!il->planar) {
        for (uint32_t j = 0; j < 3 * nx; j++)
            map[j] = il->flip ? 3 * (nx - 1 - j / 3) + j % 3 : j;
        return;
    }
    for (uint32_t c = 0; c < 3; c++)
        for (uint32_t j = 0; j < nx; j++)
            map[c * nx + j] = 3 * (il->flip ? nx - 1 - j : j) + c;
}

/* -------------------------------------------------------- vertical pass */

/* Output bytes of rows shorter than a block, one at a time, with the
 * weights split at bit `bits` (taps_split). */
static void vrun_bytes(const uint8_t *base, size_t stride, int K, const uint16_t *kl,
                       const uint16_t *kh, int bits, size_t len, uint8_t *restrict out)
{
    for (size_t j = 0; j < len; j++) {
        int32_t acc = HALF_UNIT;
        for (int t = 0; t < K; t++)
            acc += base[(size_t)t * stride + j] * (int32_t)(((uint32_t)kh[t] << bits) + kl[t]);
        out[j] = clip8(acc);
    }
}

/* len output bytes from K rows at base + t * stride: blocks of 16, the
 * rest as one more block ending at len (it recomputes some bytes to the
 * same values and reads nothing past len); shorter rows byte by byte. */
static RF_ALWAYS_INLINE void vrun(const uint8_t *base, size_t stride, int K, const uint16_t *kl,
                                  const uint16_t *kh, size_t len, uint8_t *restrict out)
{
    if (len < 16) {
        vrun_bytes(base, stride, K, kl, kh, 16, len, out);
        return;
    }
    size_t j = 0;
    for (; j + 16 <= len; j += 16)
        mac(base + j, stride, K, kl, kh, out + j);
    if (j < len)
        mac(base + len - 16, stride, K, kl, kh, out + len - 16);
}

/* vrun with K a constant for the common tap counts. */
static RF_ALWAYS_INLINE void vrun_k(const uint8_t *base, size_t stride, int K, const uint16_t *kl,
                                    const uint16_t *kh, size_t len, uint8_t *restrict out)
{
#define RF_STEP(k) vrun(base, stride, k, kl, kh, len, out)
    RF_WITH_TAPS(K, RF_STEP)
#undef RF_STEP
}

typedef void (*vrun_fn)(const uint8_t *base, size_t stride, int K, const uint16_t *kl,
                        const uint16_t *kh, size_t len, uint8_t *restrict out);

static void vrun16(const uint8_t *base, size_t stride, int K, const uint16_t *kl,
                   const uint16_t *kh, size_t len, uint8_t *restrict out)
{
    vrun_k(base, stride, K, kl, kh, len, out);
}

#if RF_AVX2
/* vrun with madd32: blocks of 32, the rest as one more block ending at len;
 * rows of 16 to 31 bytes in two blocks of 16 (madd16), overlapping. */
RF_TARGET_AVX2 static RF_ALWAYS_INLINE void vrun_madd(const uint8_t *base, size_t stride, int K,
                                                      const uint16_t *kl, const uint16_t *kh,
                                                      size_t len, uint8_t *restrict out)
{
    if (len < 16) {
        vrun_bytes(base, stride, K, kl, kh, MADD_BITS, len, out);
        return;
    }
    if (len < 32) {
        madd16(base, stride, K, kl, kh, out);
        madd16(base + len - 16, stride, K, kl, kh, out + len - 16);
        return;
    }
    size_t j = 0;
    for (; j + 32 <= len; j += 32)
        madd32(base + j, stride, K, kl, kh, out + j);
    if (j < len)
        madd32(base + len - 32, stride, K, kl, kh, out + len - 32);
}

RF_TARGET_AVX2 static void vrun_avx2(const uint8_t *base, size_t stride, int K, const uint16_t *kl,
                                     const uint16_t *kh, size_t len, uint8_t *restrict out)
{
#define RF_STEP(k) vrun_madd(base, stride, k, kl, kh, len, out)
    RF_WITH_TAPS(K, RF_STEP)
#undef RF_STEP
}
#endif

/* The code of one RF__SIMD_* level. */
typedef struct kernels {
    transpose_fn transpose;
    hcols_fn hcols;
    vrun_fn vrun;
    int split; /* bits of the weights' low half (taps_split) */
} kernels;

static kernels kernels_for(int level)
{
    kernels k = {transpose_c, hcols16, vrun16, 16};
#if RF_SSE2
    if (level >= RF__SIMD_SSE2)
        k.transpose = transpose_sse2;
#endif
#if RF_AVX2
    if (level >= RF__SIMD_AVX2) {
        k.transpose = transpose_avx2;
        k.hcols = hcols_avx2;
        k.vrun = vrun_avx2;
        k.split = MADD_BITS;
    }
#endif
    (void)level;
    return k;
}

/* Horizontal pass of rows source rows (the first at src, pixel 0 of the
 * span the kept columns read, w pixels wide) into the intermediate. */
static void hpass(const kernels *kn, const uint8_t *src, size_t src_stride, int rows, int w,
                  const int32_t *first, int K, const uint16_t *kl, const uint16_t *kh,
                  uint8_t *tile, uint8_t *tout, const ilayout *il, const uint32_t *map,
                  uint8_t *dst)
{
    for (int y = 0; y < rows; y += TROWS) {
        int n = rows - y < TROWS ? rows - y : TROWS;
        tile_in(src + (size_t)y * src_stride, src_stride, n, (size_t)w * 3, tile, kn->transpose);
        kn->hcols(tile, il->nx, first, K, kl, kh, tout);
        tile_out(tout, n, il, map, dst + (size_t)y * il->stride, kn->transpose);
    }
}

/* Writes n packed RGB pixels, the window columns [wx0, wx0 + n) of window row
 * wy, into dst, mirroring columns when flipping. Only for the paths without
 * a horizontal pass, which would have done this. */
static void store_row(const uint8_t *row, int n, const rf_geom *g, int layout, int wy, int wx0,
                      uint8_t *dst)
{
    size_t cw = (size_t)g->crop_w;
    if (layout == RF__LAYOUT_NHWC) {
        uint8_t *d = dst + (size_t)wy * cw * 3;
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
        size_t plane = cw * (size_t)g->crop_h;
        uint8_t *r = dst + (size_t)wy * cw, *gr = r + plane, *b = gr + plane;
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
    assert(r && g && src && dst);
    assert(layout == RF__LAYOUT_NHWC || layout == RF__LAYOUT_NCHW);
    assert(g->crop_w > 0 && g->crop_h > 0);
    assert(reg_x0 >= 0 && reg_y0 >= 0 && reg_w >= 0 && reg_h >= 0);
    assert(reg_x0 + reg_w <= src_w && reg_y0 + reg_h <= src_h);
    assert(src_stride >= (size_t)reg_w * 3);
    (void)reg_w; /* the region's extent is only checked, in assertions */
    (void)reg_h;

    axis ax, ay;
    axis_init(&ax, g->x0, g->x1, g->out_w, g->crop_x, g->crop_w, src_w);
    axis_init(&ay, g->y0, g->y1, g->out_h, g->crop_y, g->crop_h, src_h);
    int nx = ax.b - ax.a, ny = ay.b - ay.a;

    /* Padding (window outside the resampled picture) is zero. */
    if (nx < g->crop_w || ny < g->crop_h)
        memset(dst, 0, (size_t)g->crop_w * (size_t)g->crop_h * 3);
    if (nx == 0 || ny == 0)
        return 0;

    int bx0, bx1, by0, by1;
    axis_span(&ax, &bx0, &bx1);
    axis_span(&ay, &by0, &by1);
    assert(bx0 >= reg_x0 && bx1 <= reg_x0 + reg_w);
    assert(by0 >= reg_y0 && by1 <= reg_y0 + reg_h);

    kernels kn = kernels_for(r->simd);
    int planar = layout == RF__LAYOUT_NCHW;
    size_t cw = (size_t)g->crop_w, plane = cw * (size_t)g->crop_h;
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
            uint8_t *out = direct ? dst + ((size_t)wy * cw + dx0) * 3 : row;
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
                store_row(in, nx, g, layout, wy, wx0, dst);
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
    ilayout il;
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
    tout_map(&il, map);
    hpass(&kn, src + (size_t)(by0 - reg_y0) * src_stride + (size_t)(bx0 - reg_x0) * 3, src_stride,
          (int)rows, span, xfirst, KX, xkl, xkh, tile, tout, &il, map, tmp);

    /* Vertical pass (or copy) straight into dst. */
    for (int i = 0; i < ny; i++) {
        int wy = ay.a + i - g->crop_y;
        size_t y = ay.skip ? (size_t)(ay.c0 + ay.a + i - by0) : (size_t)yfirst[i];
        const uint8_t *in = tmp + y * il.stride;
        const uint16_t *kl = ay.skip ? NULL : ykl + (size_t)i * KY;
        const uint16_t *kh = ay.skip ? NULL : ykh + (size_t)i * KY;
        for (int c = 0; c < (planar ? 3 : 1); c++) {
            uint8_t *out = planar ? dst + (size_t)c * plane + (size_t)wy * cw + dx0
                                  : dst + ((size_t)wy * cw + dx0) * 3;
            size_t n = planar ? (size_t)nx : len;
            if (ay.skip)
                memcpy(out, in + (size_t)c * il.seg, n);
            else
                kn.vrun(in + (size_t)c * il.seg, il.stride, KY, kl, kh, n, out);
        }
    }
    return 0;
}
