/*
 * avx2.c - the resampler's AVX2 level: the same passes as
 * kernels.c with 32-byte registers and pmaddwd, same bytes.
 *
 * A file of its own because its code must differ, not just be compiled
 * differently: SSE2's mac() works around the lack of a 16 x 16 -> 32-bit
 * multiply-add, which AVX2 has (madd32), and AVX2's unpacks work within
 * 128-bit halves, so its transpose does two 16 x 16 tiles at once. Every
 * function carries the avx2 target attribute; kernels.c hands them
 * out only when the machine has AVX2 (rf__resampler_simd).
 */
#include "kernels.h"

#if RF_AVX2
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The AVX2 kernel, 32 lanes (madd32) or 16 (madd16), same result as mac()
 * (kernels.c).
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

/* kernels.c's transpose_sse2 in one: the lanes of AVX2's unpacks are 128-bit, so with
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

RF_TARGET_AVX2 void rf__transpose_avx2(const uint8_t *const in[32], uint8_t *out, size_t ooff,
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

/* kernels.c's tile_cols with madd32 and madd16 (weights split by
 * MADD_BITS): the same loop, which must call the other kernels. */
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

RF_TARGET_AVX2 void rf__hcols_avx2(const uint8_t *tile, int nx, const int32_t *first, int K,
                                   const uint16_t *kl, const uint16_t *kh, uint8_t *tout)
{
#define RF_STEP(k) tile_cols_madd(tile, nx, first, k, kl, kh, tout)
    RF_WITH_TAPS(K, RF_STEP)
#undef RF_STEP
}

/* kernels.c's vrun with madd32: blocks of 32, the rest as one more
 * block ending at len; rows of 16 to 31 bytes in two blocks of 16 (madd16),
 * overlapping. Its own loop, since the block is twice as wide. */
RF_TARGET_AVX2 static RF_ALWAYS_INLINE void vrun_madd(const uint8_t *base, size_t stride, int K,
                                                      const uint16_t *kl, const uint16_t *kh,
                                                      size_t len, uint8_t *restrict out)
{
    if (len < 16) {
        rf__vrun_bytes(base, stride, K, kl, kh, MADD_BITS, len, out);
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

RF_TARGET_AVX2 void rf__vrun_avx2(const uint8_t *base, size_t stride, int K, const uint16_t *kl,
                                  const uint16_t *kh, size_t len, uint8_t *restrict out)
{
#define RF_STEP(k) vrun_madd(base, stride, k, kl, kh, len, out)
    RF_WITH_TAPS(K, RF_STEP)
#undef RF_STEP
}
#else
/* Without AVX2 this file is empty; ISO C wants a declaration in it. */
typedef int rf_resample_avx2_unused;
#endif
