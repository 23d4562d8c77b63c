/*
 * webpgen.h - WebP files made at test time with libwebp's encoder: lossy
 * and lossless, RGB and RGBA (photo-like colour, an alpha ramp with fully
 * transparent and fully opaque parts), a two-frame animation assembled by
 * hand (its first frame smaller than the canvas, at an offset), and the
 * offsets of the fields the tests damage.
 *
 * Header-only (static inline): used by tests/test_webp.c and
 * tests/fuzz_webp.c. Needs libwebp (RF_HAVE_WEBP) and testutil.h.
 */
#ifndef RF_WEBPGEN_H
#define RF_WEBPGEN_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <webp/encode.h>

#include "testutil.h"

enum wg_kind {
    WG_LOSSY_RGB = 0,
    WG_LOSSY_RGBA = 1,
    WG_LOSSLESS_RGB = 2,
    WG_LOSSLESS_RGBA = 3,
};

/* The RGBA picture the RGBA kinds encode: tu_make_rgb's colours, alpha a
 * diagonal ramp from 0 to 255 with a transparent band (w*h*4, malloc'd). */
static inline uint8_t *wg_rgba(int w, int h, uint32_t seed)
{
    uint8_t *rgb = tu_make_rgb(w, h, seed);
    uint8_t *p = malloc((size_t)w * h * 4);
    if (!rgb || !p) {
        free(rgb);
        free(p);
        return NULL;
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            size_t i = (size_t)y * w + x;
            memcpy(p + 4 * i, rgb + 3 * i, 3);
            int a = (x + y) * 255 / (w + h > 2 ? w + h - 2 : 1);
            p[4 * i + 3] = (uint8_t)((x > w / 3 && x < w / 2) ? 0 : a);
        }
    free(rgb);
    return p;
}

/* A WebP file of kind k (malloc'd, *len its size; NULL on failure). */
static inline uint8_t *wg_encode(int k, int w, int h, uint32_t seed, int quality, size_t *len)
{
    uint8_t *out = NULL, *px;
    size_t n = 0;
    if (k == WG_LOSSY_RGB || k == WG_LOSSLESS_RGB) {
        px = tu_make_rgb(w, h, seed);
        if (px)
            n = k == WG_LOSSY_RGB ? WebPEncodeRGB(px, w, h, w * 3, (float)quality, &out)
                                  : WebPEncodeLosslessRGB(px, w, h, w * 3, &out);
    } else {
        px = wg_rgba(w, h, seed);
        if (px)
            n = k == WG_LOSSY_RGBA ? WebPEncodeRGBA(px, w, h, w * 4, (float)quality, &out)
                                   : WebPEncodeLosslessRGBA(px, w, h, w * 4, &out);
    }
    free(px);
    if (n == 0) {
        WebPFree(out);
        return NULL;
    }
    /* A copy in malloc'd memory: the callers free() it. */
    uint8_t *f = malloc(n);
    if (f)
        memcpy(f, out, n);
    WebPFree(out);
    *len = n;
    return f;
}

static inline void wg_le24(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
}

static inline void wg_le32(uint8_t *p, uint32_t v)
{
    wg_le24(p, v);
    p[3] = (uint8_t)(v >> 24);
}

/* The image chunks of a simple (lossy RGB or lossless) WebP file: what
 * follows the 12-byte RIFF header. */
static inline const uint8_t *wg_payload(const uint8_t *f, size_t len, size_t *n)
{
    *n = len - 12;
    return f + 12;
}

/* An animated WebP of a cw x ch canvas: frame 1 is a (lossless when k1 is
 * lossless, else lossy) fw x fh picture at (x, y) (even), frame 2 a lossy
 * picture covering the canvas. Assembled by hand (VP8X, ANIM, two ANMF) as
 * the WebP container specification lays them out. NULL on failure. */
static inline uint8_t *wg_animation(int cw, int ch, int fw, int fh, int x, int y, int k1,
                                    uint32_t seed, size_t *len)
{
    size_t l1, l2, n1, n2;
    uint8_t *f1 =
        wg_encode(k1 == WG_LOSSLESS_RGB ? WG_LOSSLESS_RGB : WG_LOSSY_RGB, fw, fh, seed, 85, &l1);
    uint8_t *f2 = wg_encode(WG_LOSSY_RGB, cw, ch, seed + 1, 70, &l2);
    if (!f1 || !f2) {
        free(f1);
        free(f2);
        return NULL;
    }
    const uint8_t *p1 = wg_payload(f1, l1, &n1), *p2 = wg_payload(f2, l2, &n2);
    /* payloads of simple files are already padded to an even size */
    size_t total = 12 + (8 + 10) + (8 + 6) + (8 + 16 + n1) + (8 + 16 + n2);
    uint8_t *o = calloc(1, total);
    if (!o) {
        free(f1);
        free(f2);
        return NULL;
    }
    uint8_t *p = o;
    memcpy(p, "RIFF", 4);
    wg_le32(p + 4, (uint32_t)(total - 8));
    memcpy(p + 8, "WEBP", 4);
    p += 12;
    memcpy(p, "VP8X", 4);
    wg_le32(p + 4, 10);
    p[8] = 0x02 | 0x10; /* animation, alpha */
    wg_le24(p + 12, (uint32_t)cw - 1);
    wg_le24(p + 15, (uint32_t)ch - 1);
    p += 18;
    memcpy(p, "ANIM", 4);
    wg_le32(p + 4, 6);
    wg_le32(p + 8, 0xff336699u); /* background (ignored by decoders, as PIL does) */
    p += 14;
    for (int fr = 0; fr < 2; fr++) {
        size_t n = fr ? n2 : n1;
        memcpy(p, "ANMF", 4);
        wg_le32(p + 4, (uint32_t)(16 + n));
        wg_le24(p + 8, fr ? 0 : (uint32_t)x / 2);
        wg_le24(p + 11, fr ? 0 : (uint32_t)y / 2);
        wg_le24(p + 14, (uint32_t)(fr ? cw : fw) - 1);
        wg_le24(p + 17, (uint32_t)(fr ? ch : fh) - 1);
        wg_le24(p + 20, 100); /* duration, ms */
        p[23] = 0x02;         /* no blending */
        memcpy(p + 24, fr ? p2 : p1, n);
        p += 24 + n;
    }
    free(f1);
    free(f2);
    *len = total;
    return o;
}

/* Offset of the first chunk with the given FourCC, 0 when there is none. */
static inline size_t wg_chunk(const uint8_t *f, size_t len, const char *fourcc)
{
    size_t i = 12;
    while (i + 8 <= len) {
        if (!memcmp(f + i, fourcc, 4))
            return i;
        uint32_t n = (uint32_t)f[i + 4] | (uint32_t)f[i + 5] << 8 | (uint32_t)f[i + 6] << 16 |
                     (uint32_t)f[i + 7] << 24;
        i += 8 + (size_t)n + (n & 1);
    }
    return 0;
}

/* Rewrites the picture size in a lossy ("VP8 ") or lossless ("VP8L")
 * file's frame header to w x h (at most 16383 / 16384): the header then
 * lies about a picture whose data is far too short. 0, or -1 when the file
 * has neither chunk. */
static inline int wg_set_size(uint8_t *f, size_t len, int w, int h)
{
    size_t c = wg_chunk(f, len, "VP8 ");
    if (c && c + 8 + 10 <= len) {
        uint8_t *p = f + c + 8 + 6; /* after the frame tag and the start code */
        p[0] = (uint8_t)w;
        p[1] = (uint8_t)((w >> 8) & 0x3f);
        p[2] = (uint8_t)h;
        p[3] = (uint8_t)((h >> 8) & 0x3f);
        return 0;
    }
    c = wg_chunk(f, len, "VP8L");
    if (c && c + 8 + 5 <= len) {
        uint8_t *p = f + c + 8 + 1; /* after the signature byte 0x2f */
        uint32_t bits =
            (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        bits = (bits & ~0x0fffffffu) | ((uint32_t)(w - 1) & 0x3fff) |
               (((uint32_t)(h - 1) & 0x3fff) << 14);
        wg_le32(p, bits);
        return 0;
    }
    return -1;
}

#endif
