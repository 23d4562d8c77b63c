/*
 * convert.c - a sample's picture into its place in the slot: layout and
 * element type, normalised through per-channel tables (see convert.h).
 */
#include "convert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "ringfeed.h"

#include "augment_simd.h" /* last: its pragma applies to this file */

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
    for (int k = 0; k < 6; k++)
        for (int l = 0; l < 8; l++) {
            int c = k < 3 ? (8 * k + l) % 3 : k - 3;
            cv->mean8[k][l] = cv->mean[c];
            cv->std8[k][l] = cv->std[c];
        }
#if defined(__x86_64__) && defined(__GNUC__)
    /* F16C from CPUID (leaf 1, ECX bit 29): clang's __builtin_cpu_supports
     * knows no "f16c" */
    unsigned eax, ebx, ecx = 0, edx;
    int f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
    cv->vec = __builtin_cpu_supports("avx2") && f16c;
#endif
    /* The divisions cost most of the conversion. x * a + b rounds differently
     * from ((x / 255) - mean) / std by an ulp of float32 now and then, which
     * the 16-bit types mostly round away: with 256 bytes per channel, every
     * case can be checked here, and the fast form is used only when all 768
     * give the table's bits (the same float operations, one at a time, as the
     * vector loop). */
    float a[3], b[3];
    for (int c = 0; c < 3; c++) {
        a[c] = 1.0f / (255.0f * cv->std[c]);
        b[c] = -cv->mean[c] / cv->std[c];
    }
    cv->fast = dtype != RF_DTYPE_UINT8;
    for (int c = 0; c < 3 && cv->fast; c++)
        for (int x = 0; x < 256 && cv->fast; x++) {
            float v = (float)x * a[c];
            v = v + b[c];
            if (dtype == RF_DTYPE_FLOAT32)
                cv->fast = v == cv->f32[c][x] || (v != v && cv->f32[c][x] != cv->f32[c][x]);
            else
                cv->fast = (dtype == RF_DTYPE_BFLOAT16 ? rf__f32_to_bf16(v) : rf__f32_to_f16(v)) ==
                           cv->u16[c][x];
        }
    for (int k = 0; k < 6; k++)
        for (int l = 0; l < 8; l++) {
            int c = k < 3 ? (8 * k + l) % 3 : k - 3;
            cv->a8[k][l] = a[c];
            cv->b8[k][l] = b[c];
        }
}

/* RGB bytes to three planes, n pixels of one row. SSSE3's byte shuffle
 * splits 16 pixels (48 bytes) at a time where the machine has it; the bytes
 * are the same either way. */
static void split_c(const uint8_t *s, uint8_t *d0, uint8_t *d1, uint8_t *d2, int n)
{
    for (int x = 0; x < n; x++, s += 3) {
        d0[x] = s[0];
        d1[x] = s[1];
        d2[x] = s[2];
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* split_mask[ch][v][k]: byte k of plane ch is byte 3k + ch of the 48, which
 * lies in 16-byte vector (3k + ch) / 16; 0x80 zeroes it in the other two. */
static const uint8_t split_mask[3][3][16] = {
    {{0, 3, 6, 9, 12, 15, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80},
     {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 2, 5, 8, 11, 14, 0x80, 0x80, 0x80, 0x80, 0x80},
     {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 1, 4, 7, 10, 13}},
    {{1, 4, 7, 10, 13, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80},
     {0x80, 0x80, 0x80, 0x80, 0x80, 0, 3, 6, 9, 12, 15, 0x80, 0x80, 0x80, 0x80, 0x80},
     {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 2, 5, 8, 11, 14}},
    {{2, 5, 8, 11, 14, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80},
     {0x80, 0x80, 0x80, 0x80, 0x80, 1, 4, 7, 10, 13, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80},
     {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0, 3, 6, 9, 12, 15}}
};

__attribute__((target("ssse3"))) static void split_ssse3(const uint8_t *s, uint8_t *d0,
                                                          uint8_t *d1, uint8_t *d2, int n)
{
    uint8_t *d[3] = {d0, d1, d2};
    int x = 0;
    for (; x + 16 <= n; x += 16, s += 48) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        for (int ch = 0; ch < 3; ch++) {
            __m128i r = _mm_shuffle_epi8(a, _mm_loadu_si128((const __m128i *)split_mask[ch][0]));
            r = _mm_or_si128(r, _mm_shuffle_epi8(b, _mm_loadu_si128((const __m128i *)split_mask[ch][1])));
            r = _mm_or_si128(r, _mm_shuffle_epi8(c, _mm_loadu_si128((const __m128i *)split_mask[ch][2])));
            _mm_storeu_si128((__m128i *)(d[ch] + x), r);
        }
    }
    split_c(s, d0 + x, d1 + x, d2 + x, n - x);
}

void rf__split_planes(const uint8_t *s, uint8_t *d0, uint8_t *d1, uint8_t *d2, int n)
{
    if (__builtin_cpu_supports("ssse3"))
        split_ssse3(s, d0, d1, d2, n);
    else
        split_c(s, d0, d1, d2, n);
}
#else
void rf__split_planes(const uint8_t *s, uint8_t *d0, uint8_t *d1, uint8_t *d2, int n)
{
    split_c(s, d0, d1, d2, n);
}
#endif

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

/* n elements of bytes s whose channel is i % 3 (period 3: an interleaved
 * run starting at a pixel) or c0 (period 1: a plane), into d (the output
 * type) through the tables. */
static void conv_lut(const rf_convert *cv, const uint8_t *s, size_t n, int c0, int period,
                     void *d)
{
    for (size_t i = 0; i < n; i++) {
        int c = period == 3 ? (int)(i % 3) : c0;
        if (cv->dtype == RF_DTYPE_FLOAT32)
            ((float *)d)[i] = cv->f32[c][s[i]];
        else
            ((uint16_t *)d)[i] = cv->u16[c][s[i]];
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The same float32 steps eight at a time (AVX2; division is IEEE in both), and
 * F16C's conversion rounds to nearest even as rf__f32_to_f16 does; bfloat16
 * rounds with the same integer steps as rf__f32_to_bf16 (no NaN here). The
 * bytes equal the tables'. 24 elements are 8 whole pixels of period 3.
 * Returns the elements done (a multiple of 24). */
__attribute__((target("avx2,f16c"))) static size_t conv_avx2(const rf_convert *cv,
                                                              const uint8_t *s, size_t n, int c0,
                                                              int period, void *d)
{
    __m256 mean[3], std[3], fa[3], fb[3];
    for (int k = 0; k < 3; k++) {
        int pat = period == 3 ? k : 3 + c0;
        mean[k] = _mm256_loadu_ps(cv->mean8[pat]);
        std[k] = _mm256_loadu_ps(cv->std8[pat]);
        fa[k] = _mm256_loadu_ps(cv->a8[pat]);
        fb[k] = _mm256_loadu_ps(cv->b8[pat]);
    }
    const int fast = cv->fast;
    /* Streaming stores where the destination is aligned (whole planes of a
     * slot are): the slot is written once and read later, so its cache lines
     * need not be fetched first. */
    const int stream = ((uintptr_t)d & 31) == 0 && n >= 4096;
    const __m256 k255 = _mm256_set1_ps(255.0f);
    size_t i = 0;
    for (; i + 24 <= n; i += 24)
        for (int k = 0; k < 3; k++) {
            __m128i b = _mm_loadl_epi64((const __m128i *)(s + i + 8 * (size_t)k));
            __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
            if (fast) {
                v = _mm256_add_ps(_mm256_mul_ps(v, fa[k]), fb[k]);
            } else {
                v = _mm256_div_ps(v, k255);
                v = _mm256_div_ps(_mm256_sub_ps(v, mean[k]), std[k]);
            }
            size_t at = i + 8 * (size_t)k;
            if (cv->dtype == RF_DTYPE_FLOAT32) {
                if (stream)
                    _mm256_stream_ps((float *)d + at, v);
                else
                    _mm256_storeu_ps((float *)d + at, v);
            } else if (cv->dtype == RF_DTYPE_FLOAT16) {
                __m128i hv = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
                if (stream)
                    _mm_stream_si128((__m128i *)((uint16_t *)d + at), hv);
                else
                    _mm_storeu_si128((__m128i *)((uint16_t *)d + at), hv);
            } else {
                __m256i u = _mm256_castps_si256(v);
                __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
                u = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
                u = _mm256_srli_epi32(u, 16);
                __m128i lo = _mm256_castsi256_si128(u), hi = _mm256_extracti128_si256(u, 1);
                __m128i bv = _mm_packus_epi32(lo, hi);
                if (stream)
                    _mm_stream_si128((__m128i *)((uint16_t *)d + at), bv);
                else
                    _mm_storeu_si128((__m128i *)((uint16_t *)d + at), bv);
            }
        }
    if (stream)
        _mm_sfence(); /* the streamed stores are ordered before the slot is published */
    return i;
}
#endif

static void conv(const rf_convert *cv, const uint8_t *s, size_t n, int c0, int period, void *d)
{
    size_t done = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (cv->vec)
        done = conv_avx2(cv, s, n, c0, period, d);
#endif
    /* done is a multiple of 24, so the rest still starts at channel 0 */
    conv_lut(cv, s + done, n - done, c0, period,
             (uint8_t *)d + done * rf__convert_elem_size(cv->dtype));
}

/* One row of w pixels at s into row `row` of dst. */
static void convert_row(const rf_convert *cv, const uint8_t *s, int w, size_t row, size_t plane,
                        size_t el, uint8_t *planes, uint8_t *d)
{
    if (cv->dtype == RF_DTYPE_UINT8) {
        if (cv->layout == RF_LAYOUT_NCHW)
            rf__split_planes(s, d + row, d + plane + row, d + 2 * plane + row, w);
        else if (d + row * 3 != s) /* else augmented in place (work.c) */
            memcpy(d + row * 3, s, (size_t)w * 3);
    } else if (cv->layout == RF_LAYOUT_NHWC) {
        conv(cv, s, (size_t)w * 3, 0, 3, d + row * 3 * el);
    } else {
        rf__split_planes(s, planes, planes + w, planes + 2 * (size_t)w, w);
        for (int c = 0; c < 3; c++)
            conv(cv, planes + (size_t)c * (size_t)w, (size_t)w, c, 1,
                 d + ((size_t)c * plane + row) * el);
    }
}

int rf__convert_run(const rf_convert *cv, const uint8_t *src, int w, int h, ptrdiff_t stride,
                    void *dst, const rf_aug_plan *plan, rf_aug_scratch *scr)
{
    size_t plane = (size_t)w * (size_t)h, el = rf__convert_elem_size(cv->dtype);
    uint8_t *d = dst;
    int fl = cv->dtype != RF_DTYPE_UINT8;
    if (stride == 0) { /* planar source (float NCHW): one run per plane */
        for (int c = 0; c < 3; c++)
            conv(cv, src + (size_t)c * plane, plane, c, 1, d + (size_t)c * plane * el);
    } else if (fl && cv->layout == RF_LAYOUT_NHWC && stride == (ptrdiff_t)w * 3) {
        conv(cv, src, plane * 3, 0, 3, d); /* one run over the whole picture */
    } else {
        uint8_t *planes = NULL; /* a row split into its three planes (float NCHW) */
        if (fl && cv->layout == RF_LAYOUT_NCHW) {
            if (scr->cap < 3 * (size_t)w) {
                rf__aug_scratch_free(scr);
                if (!(scr->buf = malloc(3 * (size_t)w)))
                    return RF_E_NOMEM;
                scr->cap = 3 * (size_t)w;
            }
            planes = scr->buf;
        }
        for (int y = 0; y < h; y++)
            convert_row(cv, src + (ptrdiff_t)y * stride, w, (size_t)y * (size_t)w, plane, el,
                        planes, d);
    }
    for (int i = 0; plan && i < plan->n; i++)
        if (plan->op[i].deferred && erase_out(cv, &plan->op[i], w, h, dst, scr) != RF_OK)
            return RF_E_NOMEM;
    return RF_OK;
}
