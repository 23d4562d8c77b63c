/*
 * png_unfilter.c - undoes PNG's five row filters (None, Sub, Up, Average,
 * Paeth), in place, for png.c.
 *
 * The SSE2 loops repeat once per bpp on purpose: bpp a constant in each copy
 * is what keeps the left pixel in a register (see below).
 *
 * Sub, Average and Paeth predict each byte from the byte bpp places to its
 * left in the same row, already unfiltered: a chain from one pixel to the
 * next that no vector width shortens. So the SSE2 code works one pixel at a
 * time, the pixel's bpp bytes in the low lanes of a register, and keeps the
 * left pixel in a register from one step to the next instead of reloading
 * it from memory (a store-to-load round trip per pixel in the byte loops).
 * Paeth, the filter of most photographs, is computed in 16-bit lanes with
 * the parts that do not depend on the left pixel (|b - c|) taken off the
 * chain. Up has no chain: 16 bytes per step. Pixels are loaded and stored
 * as exactly bpp bytes, so no level reads or writes outside the row (a bpp
 * of 3 never touches the next row's filter byte).
 *
 * The scalar code is the specification's arithmetic, byte by byte; the
 * SSE2 code gives the same bytes (tests/test_png_unfilter.c checks every
 * filter and bpp at both levels against its own plain reference).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "png_unfilter.h"

/* SSE2: x86-64 (which always has it) with GCC or Clang, unless
 * RF_TRANSFORM_NO_SIMD asks for portable C only, as for the resampler. */
#if defined(__SSE2__) && defined(__x86_64__) && defined(__GNUC__) && !defined(RF_TRANSFORM_NO_SIMD)
#define RF_PNG_SSE2 1
#include <emmintrin.h>
#else
#define RF_PNG_SSE2 0
#endif

int rf__png_unfilter_best(void)
{
    return RF_PNG_SSE2 ? RF__SIMD_SSE2 : RF__SIMD_NONE;
}

/* ------------------------------------------------------------ scalar */

static uint8_t paeth_pred(int a, int b, int c)
{
    int pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c);
    return (uint8_t)(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

static void unfilter_c(int filter, uint8_t *row, const uint8_t *prev, size_t len, size_t bpp)
{
    size_t i;
    switch (filter) {
    case RF__PNG_FILTER_SUB:
        for (i = bpp; i < len; i++)
            row[i] = (uint8_t)(row[i] + row[i - bpp]);
        break;
    case RF__PNG_FILTER_UP:
        for (i = 0; i < len; i++)
            row[i] = (uint8_t)(row[i] + prev[i]);
        break;
    case RF__PNG_FILTER_AVG:
        for (i = 0; i < bpp && i < len; i++)
            row[i] = (uint8_t)(row[i] + (prev[i] >> 1));
        for (; i < len; i++)
            row[i] = (uint8_t)(row[i] + ((row[i - bpp] + prev[i]) >> 1));
        break;
    case RF__PNG_FILTER_PAETH:
        /* left and upper-left are 0 in the first pixel: the prediction is up */
        for (i = 0; i < bpp && i < len; i++)
            row[i] = (uint8_t)(row[i] + prev[i]);
        for (; i < len; i++)
            row[i] = (uint8_t)(row[i] + paeth_pred(row[i - bpp], prev[i], prev[i - bpp]));
        break;
    default: /* None */
        break;
    }
}

/* -------------------------------------------------------------- SSE2 */

#if RF_PNG_SSE2
/* Inlined into each bpp's loop, so that bpp is a constant there and the
 * memcpy's become one or two plain moves. */
#define RF_PNG_INLINE static inline __attribute__((always_inline))

/* A pixel's bpp bytes into the low lanes (the rest 0), and back. Whole
 * loads and stores of 1, 2, 4 or 8 bytes, combined in general registers:
 * a memcpy of 3 or 6 bytes through a stack slot would cost a failed
 * store-to-load forwarding per pixel. */
RF_PNG_INLINE __m128i px_load(const uint8_t *p, size_t bpp)
{
    uint64_t v;
    uint32_t v32;
    uint16_t v16;
    switch (bpp) {
    case 8:
        memcpy(&v, p, 8);
        break;
    case 6:
        memcpy(&v32, p, 4);
        memcpy(&v16, p + 4, 2);
        v = v32 | (uint64_t)v16 << 32;
        break;
    case 4:
        memcpy(&v32, p, 4);
        v = v32;
        break;
    case 3:
        memcpy(&v16, p, 2);
        v = v16 | (uint64_t)p[2] << 16;
        break;
    case 2:
        memcpy(&v16, p, 2);
        v = v16;
        break;
    default:
        v = p[0];
        break;
    }
    return _mm_cvtsi64_si128((long long)v);
}

RF_PNG_INLINE void px_store(uint8_t *p, __m128i x, size_t bpp)
{
    uint64_t v = (uint64_t)_mm_cvtsi128_si64(x);
    uint32_t v32 = (uint32_t)v;
    uint16_t v16 = (uint16_t)v;
    switch (bpp) {
    case 8:
        memcpy(p, &v, 8);
        break;
    case 6:
        v16 = (uint16_t)(v >> 32);
        memcpy(p, &v32, 4);
        memcpy(p + 4, &v16, 2);
        break;
    case 4:
        memcpy(p, &v32, 4);
        break;
    case 3:
        memcpy(p, &v16, 2);
        p[2] = (uint8_t)(v >> 16);
        break;
    case 2:
        memcpy(p, &v16, 2);
        break;
    default:
        p[0] = (uint8_t)v;
        break;
    }
}

RF_PNG_INLINE __m128i abs16(__m128i x)
{
    return _mm_max_epi16(x, _mm_sub_epi16(_mm_setzero_si128(), x));
}

/* Each loop covers the whole pixels of the row; unfilter_c finishes a row
 * whose length is not a multiple of bpp (never in a PNG; the API allows it). */

RF_PNG_INLINE size_t sub_sse2(uint8_t *row, size_t len, size_t bpp)
{
    __m128i a = _mm_setzero_si128();
    size_t i = 0;
    for (; i + bpp <= len; i += bpp) {
        a = _mm_add_epi8(px_load(row + i, bpp), a);
        px_store(row + i, a, bpp);
    }
    return i;
}

RF_PNG_INLINE size_t avg_sse2(uint8_t *row, const uint8_t *prev, size_t len, size_t bpp)
{
    /* (a + b) >> 1 in bytes: pavgb rounds up, so take the odd sums' 1 back */
    const __m128i one = _mm_set1_epi8(1);
    __m128i a = _mm_setzero_si128();
    size_t i = 0;
    for (; i + bpp <= len; i += bpp) {
        __m128i b = px_load(prev + i, bpp);
        __m128i avg = _mm_sub_epi8(_mm_avg_epu8(a, b), _mm_and_si128(_mm_xor_si128(a, b), one));
        a = _mm_add_epi8(px_load(row + i, bpp), avg);
        px_store(row + i, a, bpp);
    }
    return i;
}

RF_PNG_INLINE size_t paeth_sse2(uint8_t *row, const uint8_t *prev, size_t len, size_t bpp)
{
    const __m128i zero = _mm_setzero_si128(), low = _mm_set1_epi16(0xff);
    __m128i a = zero, c = zero; /* left and upper-left, 16-bit lanes */
    size_t i = 0;
    for (; i + bpp <= len; i += bpp) {
        __m128i b = _mm_unpacklo_epi8(px_load(prev + i, bpp), zero);
        __m128i x = _mm_unpacklo_epi8(px_load(row + i, bpp), zero);
        __m128i bc = _mm_sub_epi16(b, c);
        __m128i pa = abs16(bc); /* |p - a| = |b - c|: not on the chain */
        __m128i ac = _mm_sub_epi16(a, c);
        __m128i pb = abs16(ac);                    /* |p - b| = |a - c| */
        __m128i pc = abs16(_mm_add_epi16(ac, bc)); /* |p - c| */
        __m128i use_c = _mm_cmpgt_epi16(pb, pc);   /* not b: c */
        __m128i t = _mm_xor_si128(b, _mm_and_si128(_mm_xor_si128(b, c), use_c));
        __m128i not_a = _mm_or_si128(_mm_cmpgt_epi16(pa, pb), _mm_cmpgt_epi16(pa, pc));
        __m128i pred = _mm_xor_si128(a, _mm_and_si128(_mm_xor_si128(a, t), not_a));
        a = _mm_and_si128(_mm_add_epi16(x, pred), low);
        px_store(row + i, _mm_packus_epi16(a, a), bpp);
        c = b;
    }
    return i;
}

static size_t up_sse2(uint8_t *row, const uint8_t *prev, size_t len)
{
    size_t i = 0;
    for (; i + 16 <= len; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(row + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(prev + i));
        _mm_storeu_si128((__m128i *)(void *)(row + i), _mm_add_epi8(x, b));
    }
    for (; i < len; i++)
        row[i] = (uint8_t)(row[i] + prev[i]);
    return i;
}

/* Sub, Average or Paeth over the whole pixels of a row (inlined per bpp). */
RF_PNG_INLINE size_t chained_sse2(int filter, uint8_t *row, const uint8_t *prev, size_t len,
                                  size_t bpp)
{
    if (filter == RF__PNG_FILTER_SUB)
        return sub_sse2(row, len, bpp);
    if (filter == RF__PNG_FILTER_AVG)
        return avg_sse2(row, prev, len, bpp);
    return paeth_sse2(row, prev, len, bpp);
}

/* 1 when the row was unfiltered here; 0: left to unfilter_c (a bpp that
 * PNG does not have). filter is Sub, Up, Average or Paeth. */
static int unfilter_sse2(int filter, uint8_t *row, const uint8_t *prev, size_t len, size_t bpp)
{
    if (filter == RF__PNG_FILTER_UP) {
        up_sse2(row, prev, len);
        return 1;
    }
    size_t done; /* one copy of the loop per bpp, where bpp is a constant */
    switch (bpp) {
    case 1:
        done = chained_sse2(filter, row, prev, len, 1);
        break;
    case 2:
        done = chained_sse2(filter, row, prev, len, 2);
        break;
    case 3:
        done = chained_sse2(filter, row, prev, len, 3);
        break;
    case 4:
        done = chained_sse2(filter, row, prev, len, 4);
        break;
    case 6:
        done = chained_sse2(filter, row, prev, len, 6);
        break;
    case 8:
        done = chained_sse2(filter, row, prev, len, 8);
        break;
    default:
        return 0;
    }
    if (done < len) {
        /* bytes past the last whole pixel: their left neighbours are done */
        for (size_t i = done; i < len; i++) {
            int a = i >= bpp ? row[i - bpp] : 0, c = i >= bpp ? prev[i - bpp] : 0;
            int p = filter == RF__PNG_FILTER_SUB   ? a
                    : filter == RF__PNG_FILTER_AVG ? (a + prev[i]) >> 1
                                                   : paeth_pred(a, prev[i], c);
            row[i] = (uint8_t)(row[i] + p);
        }
    }
    return 1;
}
#endif /* RF_PNG_SSE2 */

int rf__png_unfilter_row(int level, int filter, uint8_t *row, const uint8_t *prev, size_t len,
                         unsigned bpp)
{
    if (filter < RF__PNG_FILTER_NONE || filter > RF__PNG_FILTER_PAETH)
        return -1;
    if (filter == RF__PNG_FILTER_NONE || len == 0)
        return 0;
#if RF_PNG_SSE2
    if (level >= RF__SIMD_SSE2 && unfilter_sse2(filter, row, prev, len, bpp))
        return 0;
#else
    (void)level;
#endif
    unfilter_c(filter, row, prev, len, bpp);
    return 0;
}
