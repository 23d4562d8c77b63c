/*
 * kernels.h - the seam between the resampler's driver (resample.c)
 * and its inner loops (kernels.c: portable C and SSE2;
 * avx2.c: AVX2).
 *
 * The driver builds the taps and the layout of one call; the kernels run the
 * two passes over the pixels. Each RF__SIMD_* level is a set of function
 * pointers (rf_kernels), picked once per call, so the loops inside a kernel
 * are compiled for one instruction set and inlined there. Every level gives
 * the same bytes. What both kernel files share (the fixed point, the 16 x 16
 * transpose rounds, the tap-count dispatch) is here.
 */
#ifndef RF_RESAMPLE_KERNELS_H
#define RF_RESAMPLE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Instruction sets this build can use. SSE2: the target has it (all of
 * x86-64) and RF_TRANSFORM_NO_SIMD is not defined. AVX2: x86-64 with GCC or
 * Clang, the functions compiled for it with a target attribute and called
 * only where the machine has it. */
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

/* The horizontal pass works on tiles of TROWS source rows, transposed: a
 * pixel's three channels of the tile's rows are TLANES bytes. */
enum { TROWS = 16, TLANES = 3 * TROWS };

/* Two 16 x 16 byte transposes: out row j (at out + j * ostride, j < n0)
 * byte k = in[k][j], and out row j at out + ooff + j * ostride (j < n1)
 * byte k = in[16 + k][j]. */
typedef void (*rf_transpose_fn)(const uint8_t *const in[32], uint8_t *out, size_t ooff,
                                size_t ostride, int n0, int n1);

/* Output columns 0..nx-1 of one tile: column i sums the tile rows first[i]
 * .. first[i] + K - 1 with the weights kl, kh (K per column) into
 * tout[i * TLANES]. */
typedef void (*rf_hcols_fn)(const uint8_t *tile, int nx, const int32_t *first, int K,
                            const uint16_t *kl, const uint16_t *kh, uint8_t *tout);

/* len output bytes, byte j the weighted sum of the K rows base[t * stride + j]. */
typedef void (*rf_vrun_fn)(const uint8_t *base, size_t stride, int K, const uint16_t *kl,
                           const uint16_t *kh, size_t len, uint8_t *restrict out);

/* The code of one RF__SIMD_* level. */
typedef struct rf_kernels {
    rf_transpose_fn transpose;
    rf_hcols_fn hcols;
    rf_vrun_fn vrun;
    int split; /* bits of the weights' low half (taps_split) */
} rf_kernels;

/* Intermediate row layout: packed RGB (NHWC) or three runs of nx bytes, seg
 * apart (NCHW); output column i is stored at nx - 1 - i when flipping. */
typedef struct rf_ilayout {
    int nx;
    int planar, flip;
    size_t seg;    /* planar: bytes between the R, G and B runs of one row */
    size_t stride; /* bytes between rows */
} rf_ilayout;

/* The kernels of RF__SIMD_* level `level` (the best this build has up to it). */
rf_kernels rf__resample_kernels(int level);

/* Horizontal pass of rows source rows (the first at src, pixel 0 of the
 * span the kept columns read, w pixels wide) into the intermediate rows at
 * dst (layout il, tout rows picked by map), through the scratch tile (w *
 * TLANES bytes) and tout (il->nx * TLANES). */
void rf__resample_hpass(const rf_kernels *kn, const uint8_t *src, size_t src_stride, int rows,
                        int w, const int32_t *first, int K, const uint16_t *kl, const uint16_t *kh,
                        uint8_t *tile, uint8_t *tout, const rf_ilayout *il, const uint32_t *map,
                        uint8_t *dst);

/* The tout row of each intermediate byte of layout il (3 * il->nx entries):
 * flip mirrors the pixels, planar takes every third row. */
void rf__resample_tout_map(const rf_ilayout *il, uint32_t *map);

/* Output bytes of rows shorter than a block, one at a time, with the
 * weights split at bit `bits` (any level's split). */
void rf__vrun_bytes(const uint8_t *base, size_t stride, int K, const uint16_t *kl,
                    const uint16_t *kh, int bits, size_t len, uint8_t *restrict out);

#if RF_AVX2
enum { MADD_BITS = 11 }; /* where the AVX2 kernels' weights are split */

/* avx2.c: the AVX2 level's kernels. */
void rf__transpose_avx2(const uint8_t *const in[32], uint8_t *out, size_t ooff, size_t ostride,
                        int n0, int n1);
void rf__hcols_avx2(const uint8_t *tile, int nx, const int32_t *first, int K, const uint16_t *kl,
                    const uint16_t *kh, uint8_t *tout);
void rf__vrun_avx2(const uint8_t *base, size_t stride, int K, const uint16_t *kl,
                   const uint16_t *kh, size_t len, uint8_t *restrict out);
#endif

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
#endif

#endif
