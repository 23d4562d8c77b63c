/*
 * kernels.c - the resampler's inner loops, portable C and SSE2.
 *
 * Both passes are multiply-accumulates of whole 16-byte blocks (mac), each
 * output byte the weighted sum of K bytes K rows apart, with 16-bit
 * arithmetic that is exact (see mac) and plain C that gcc -O2 vectorises.
 * The vertical pass is that already: output row = sum of K intermediate
 * rows. The horizontal pass is made so by transposing tiles of 16 source
 * rows (tile_in), so that the taps of a column are whole tile rows, and
 * transposing the results back (tile_out), which also mirrors them for flip
 * and splits the channels for NCHW: the vertical pass then writes the final
 * layout in place. Every column of an axis has the same tap count (the
 * driver pads with zero weights) so that loops have no data-dependent trip
 * counts, and the common counts get unrolled code (RF_WITH_TAPS).
 *
 * The transposes, which no compiler vectorises, use SSE2 intrinsics where
 * the target has SSE2; the AVX2 level (avx2.c) replaces the
 * transposes and both passes' kernels with its own.
 */
#include "kernels.h"

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "simd.h"

static inline uint8_t clip8(int32_t v)
{
    /* Pillow's lookup table clamps (v >> PRECISION_BITS) to 0..255; testing
     * the sign first avoids shifting a negative number. */
    v = v < 0 ? 0 : v;
    v >>= PRECISION_BITS;
    return (uint8_t)(v > 255 ? 255 : v);
}

/* The kernel of both passes (AVX2 has its own, madd32 in avx2.c):
 * 16 output bytes, out[q] = the sum over the K taps of rows[t][q] * k[t]
 * (rows at p + t * stride), plus HALF_UNIT, >> 22, clipped: Pillow's
 * arithmetic, exactly. The lanes are independent, so whether they hold neighbouring
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
 * Both transposes go 16 x 16 bytes at a time, two at a time (rf_transpose_fn):
 * SSE2 or AVX2 unpacks where there are, else byte by byte. */

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
/* RF_TR_BODY (kernels.h) with SSE2's unpacks, one 16 x 16 tile. */
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
                    rf_transpose_fn transpose)
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

/* tile_cols with K a constant for the common tap counts (AVX2 has its own,
 * rf__hcols_avx2, with its own kernels). */
static void hcols16(const uint8_t *tile, int nx, const int32_t *first, int K, const uint16_t *kl,
                    const uint16_t *kh, uint8_t *tout)
{
#define RF_STEP(k) tile_cols(tile, nx, first, k, kl, kh, tout)
    RF_WITH_TAPS(K, RF_STEP)
#undef RF_STEP
}

/* Writes the first n <= TROWS lanes of a tile's results to the
 * intermediate rows at dst, run by run (one packed run of 3 nx bytes, or
 * three planar ones of nx, seg apart): byte j of run c is tout row
 * map[c * w + j], 16 bytes of each row at a time (as in tile_in). */
static void tile_out(const uint8_t *tout, int n, const rf_ilayout *il, const uint32_t *map,
                     uint8_t *dst, rf_transpose_fn transpose)
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

void rf__resample_tout_map(const rf_ilayout *il, uint32_t *map)
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

void rf__vrun_bytes(const uint8_t *base, size_t stride, int K, const uint16_t *kl,
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
        rf__vrun_bytes(base, stride, K, kl, kh, 16, len, out);
        return;
    }
    size_t j = 0;
    for (; j + 16 <= len; j += 16)
        mac(base + j, stride, K, kl, kh, out + j);
    if (j < len)
        mac(base + len - 16, stride, K, kl, kh, out + len - 16);
}

/* vrun with K a constant for the common tap counts (AVX2: rf__vrun_avx2). */
static void vrun16(const uint8_t *base, size_t stride, int K, const uint16_t *kl,
                   const uint16_t *kh, size_t len, uint8_t *restrict out)
{
#define RF_STEP(k) vrun(base, stride, k, kl, kh, len, out)
    RF_WITH_TAPS(K, RF_STEP)
#undef RF_STEP
}

rf_kernels rf__resample_kernels(int level)
{
    rf_kernels k = {transpose_c, hcols16, vrun16, 16};
#if RF_SSE2
    if (level >= RF__SIMD_SSE2)
        k.transpose = transpose_sse2;
#endif
#if RF_AVX2
    if (level >= RF__SIMD_AVX2) {
        k.transpose = rf__transpose_avx2;
        k.hcols = rf__hcols_avx2;
        k.vrun = rf__vrun_avx2;
        k.split = MADD_BITS;
    }
#endif
    (void)level;
    return k;
}

void rf__resample_hpass(const rf_kernels *kn, const uint8_t *src, size_t src_stride, int rows,
                        int w, const int32_t *first, int K, const uint16_t *kl, const uint16_t *kh,
                        uint8_t *tile, uint8_t *tout, const rf_ilayout *il, const uint32_t *map,
                        uint8_t *dst)
{
    for (int y = 0; y < rows; y += TROWS) {
        int n = rows - y < TROWS ? rows - y : TROWS;
        tile_in(src + (size_t)y * src_stride, src_stride, n, (size_t)w * 3, tile, kn->transpose);
        kn->hcols(tile, il->nx, first, K, kl, kh, tout);
        tile_out(tout, n, il, map, dst + (size_t)y * il->stride, kn->transpose);
    }
}
