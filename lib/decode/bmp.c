/*
 * bmp.c - Windows/OS2 bitmaps, read as PIL 9's BmpImagePlugin reads
 * them, pixels as Image.open(p).convert("RGB") gives them.
 *
 * The header is parsed by PIL's rules, quirks included: header sizes 12
 * (OS/2 1.x), 40, 64, 108, 124; a negative height (top byte 0xFF) is a
 * top-down picture; depths 1, 4, 8 (palette), 16 (5-5-5), 24 and 32 (BGRX:
 * alpha dropped); BI_BITFIELDS only with the masks PIL lists; a data offset
 * that points at the palette skips 4 bytes per colour. A palette of exactly
 * black and white is read as 1-bit data whatever the depth (PIL's mode "1"),
 * a gray ramp 0..n-1 needs 8 bits (else PIL fails), and an index past the
 * palette is the gray (i, i, i). RLE8/RLE4 streams are expanded with PIL's
 * decoder's rules, its bugs included (a delta reads four bytes, absolute
 * runs are not clipped to the row, the word alignment is of the file
 * offset, an early end of bitmap fails). Uncompressed data is checked to be
 * all there first (PIL fails on a short file), then only the crop's rows and
 * columns are converted. Nothing to verify past that: whole = 1.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "ringfeed.h"

/* How a row's pixels become RGB. */
enum bmp_pix {
    PIX_INDEX = 0, /* 1/4/8-bit index through the palette */
    PIX_BW = 1,    /* 1-bit, 0 black 1 white, whatever the depth (PIL's mode "1") */
    PIX_555 = 2,
    PIX_565 = 3,
    PIX_BYTES = 4, /* 24/32-bit: R, G, B at byte offsets pos[] */
};

enum { BMP_RAW = 0, BMP_RLE8 = 1, BMP_RLE4 = 2, BMP_BITFIELDS = 3 };

typedef struct rf_bmp {
    const uint8_t *data; /* borrowed, from header to region */
    size_t len;
    int w, h, topdown, bits, pix, comp;
    int pos[3];    /* PIX_BYTES: byte offset of R, G, B in a pixel */
    size_t offset; /* of the pixel data */
    size_t stride; /* of an uncompressed row */
    uint8_t pal[256][3];
    uint8_t *rgb, *index; /* crop rows as RGB; RLE: the whole picture's indices */
    size_t rgb_cap, index_cap;
} rf_bmp;

static uint32_t u16le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int bmp_sniff(const uint8_t *data, size_t len)
{
    return len >= 2 && data[0] == 'B' && data[1] == 'M';
}

static void *bmp_create(void)
{
    return calloc(1, sizeof(rf_bmp));
}

static void bmp_destroy(void *state)
{
    rf_bmp *b = state;
    if (!b)
        return;
    free(b->rgb);
    free(b->index);
    free(b);
}

static void bmp_abandon(void *state)
{
    rf_bmp *b = state;
    b->data = NULL;
}

static int bmp_error(char *err, size_t errcap, const char *fmt, unsigned long long v)
{
    snprintf(err, errcap, fmt, v);
    return RF_E_DECODE;
}

/* The BI_BITFIELDS layouts PIL accepts: masks -> pixel kind and byte offsets. */
static int bitfields(rf_bmp *b, uint32_t rm, uint32_t gm, uint32_t bm, uint32_t am)
{
    static const struct {
        int bits;
        uint32_t m[4];
        int pix, r, g, b;
    } ok[] = {
        {32, {0xFF0000, 0xFF00, 0xFF, 0x0}, PIX_BYTES, 2, 1, 0},        /* BGRX */
        {32, {0xFF000000, 0xFF0000, 0xFF00, 0x0}, PIX_BYTES, 3, 2, 1},  /* XBGR */
        {32, {0xFF000000, 0xFF0000, 0xFF00, 0xFF}, PIX_BYTES, 3, 2, 1}, /* ABGR */
        {32, {0xFF, 0xFF00, 0xFF0000, 0xFF000000}, PIX_BYTES, 0, 1, 2}, /* RGBA */
        {32, {0xFF0000, 0xFF00, 0xFF, 0xFF000000}, PIX_BYTES, 2, 1, 0}, /* BGRA */
        {32, {0x0, 0x0, 0x0, 0x0}, PIX_BYTES, 2, 1, 0},                 /* BGRA */
        {24, {0xFF0000, 0xFF00, 0xFF, 0}, PIX_BYTES, 2, 1, 0},          /* BGR */
        {16, {0xF800, 0x7E0, 0x1F, 0}, PIX_565, 0, 0, 0},
        {16, {0x7C00, 0x3E0, 0x1F, 0}, PIX_555, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        /* 24 and 16 bits: PIL compares the RGB masks only */
        if (ok[i].bits != b->bits || ok[i].m[0] != rm || ok[i].m[1] != gm || ok[i].m[2] != bm ||
            (b->bits == 32 && ok[i].m[3] != am))
            continue;
        b->pix = ok[i].pix;
        b->pos[0] = ok[i].r;
        b->pos[1] = ok[i].g;
        b->pos[2] = ok[i].b;
        return 0;
    }
    return -1;
}

static int bmp_header(void *state, const uint8_t *d, size_t len, int max_scans, int *width,
                      int *height, char *err, size_t errcap)
{
    rf_bmp *b = state;
    b->data = NULL;
    if (len < 18)
        return bmp_error(err, errcap, "BMP header truncated (%llu bytes)", len);
    size_t offset = u32le(d + 10), hsize = u32le(d + 14);
    if (hsize != 12 && hsize != 40 && hsize != 64 && hsize != 108 && hsize != 124)
        return bmp_error(err, errcap, "unsupported BMP header size %llu", hsize);
    if (len < 14 + hsize)
        return bmp_error(err, errcap, "BMP header truncated (%llu bytes)", len);
    const uint8_t *hd = d + 18; /* the header after its size field */
    uint64_t w, h, colors = 0;
    size_t pal_entry, at = 14 + hsize; /* where PIL's file position is */
    uint32_t masks[4] = {0, 0, 0, 0};
    if (hsize == 12) {
        w = u16le(hd);
        h = u16le(hd + 2);
        b->bits = (int)u16le(hd + 6);
        b->comp = BMP_RAW;
        b->topdown = 0;
        pal_entry = 3;
    } else {
        b->topdown = hd[7] == 0xFF;
        w = u32le(hd);
        h = b->topdown ? (UINT64_C(1) << 32) - u32le(hd + 4) : u32le(hd + 4);
        b->bits = (int)u16le(hd + 10);
        uint32_t comp = u32le(hd + 12);
        colors = u32le(hd + 28);
        pal_entry = 4;
        if (comp > BMP_BITFIELDS)
            return bmp_error(err, errcap, "unsupported BMP compression %llu", comp);
        b->comp = (int)comp;
        if (comp == BMP_BITFIELDS) {
            /* a 40-byte header is followed by three masks, the others hold four */
            const uint8_t *m = hsize >= 56 ? hd + 36 : d + at;
            if (hsize < 56 && len < at + 12)
                return bmp_error(err, errcap, "BMP bit masks truncated (%llu bytes)", len);
            for (int i = 0; i < (hsize >= 56 ? 4 : 3); i++)
                masks[i] = u32le(m + 4 * i);
            if (hsize < 56)
                at += 12;
        }
    }
    int bits = b->bits;
    if (bits != 1 && bits != 4 && bits != 8 && bits != 16 && bits != 24 && bits != 32)
        return bmp_error(err, errcap, "unsupported BMP depth of %llu bits", (unsigned)bits);
    if (w == 0 || h == 0) {
        snprintf(err, errcap, "BMP of %llux%llu pixels (a side is 0)", (unsigned long long)w,
                 (unsigned long long)h);
        return RF_E_DECODE;
    }
    if (w > INT32_MAX || h > INT32_MAX) {
        snprintf(err, errcap, "BMP of %llux%llu pixels is too large", (unsigned long long)w,
                 (unsigned long long)h);
        return RF_E_LIMIT;
    }
    if (bits <= 8 && colors == 0)
        colors = UINT64_C(1) << bits;
    if (bits <= 8 && offset == 14 + hsize)
        offset += 4 * colors; /* PIL's: 4 even for 3-byte OS/2 entries */

    if (b->comp == BMP_BITFIELDS) {
        if (bitfields(b, masks[0], masks[1], masks[2], masks[3]) != 0)
            return bmp_error(err, errcap, "unsupported BMP bit field layout (%llu bits)",
                             (unsigned)bits);
    } else if (bits == 16) {
        b->pix = PIX_555;
    } else if (bits >= 24) {
        b->pix = PIX_BYTES;
        b->pos[0] = 2, b->pos[1] = 1, b->pos[2] = 0;
    } else {
        b->pix = PIX_INDEX;
    }
    if ((b->comp == BMP_RLE8 || b->comp == BMP_RLE4) && bits > 8)
        return bmp_error(err, errcap, "unsupported BMP: RLE data of %llu bits per pixel",
                         (unsigned)bits);

    if (bits <= 8) {
        if (colors > 256)
            return bmp_error(err, errcap, "unsupported BMP palette of %llu colours", colors);
        if (len < at + pal_entry * colors)
            return bmp_error(err, errcap, "BMP palette truncated (%llu bytes)", len);
        const uint8_t *p = d + at;
        /* PIL's gray test: black and white for 2 colours, else the ramp 0..n-1 */
        int bw = colors == 2, gray = colors != 2;
        for (unsigned i = 0; i < 256; i++) {
            const uint8_t *e = p + pal_entry * i;
            int in = i < colors;
            b->pal[i][0] = in ? e[2] : (uint8_t)i; /* entries are B, G, R(, 0) */
            b->pal[i][1] = in ? e[1] : (uint8_t)i;
            b->pal[i][2] = in ? e[0] : (uint8_t)i;
            if (in && (e[0] != i || e[1] != i || e[2] != i))
                gray = 0;
        }
        if (bw)
            bw = !memcmp(p, "\0\0\0", 3) && !memcmp(p + pal_entry, "\xff\xff\xff", 3);
        at += pal_entry * colors;
        if (bw) { /* PIL's mode "1": 1-bit raw data, whatever the depth */
            if (b->comp != BMP_RAW)
                return bmp_error(err, errcap,
                                 "unsupported BMP: RLE with a black and white "
                                 "palette (%llu colours)",
                                 colors);
            b->pix = PIX_BW;
        } else if (gray && bits != 8 && b->comp == BMP_RAW) {
            return bmp_error(err, errcap,
                             "unsupported BMP: %llu-bit data with a gray "
                             "ramp palette",
                             (unsigned)bits);
        }
    }
    b->offset = offset ? offset : at;
    b->stride = (size_t)((((uint64_t)w * (uint64_t)bits + 31) >> 3) & ~(uint64_t)3);
    b->w = (int)w;
    b->h = (int)h;
    b->data = d;
    b->len = len;
    *width = b->w;
    *height = b->h;
    return 0;
}

/* The RLE stream as PIL 9's BmpRleDecoder expands it, into b->index (w*h
 * indices in file row order, 0 where nothing is written). 0, or -1 when
 * PIL's decoder would leave the picture short. */
static int rle_expand(rf_bmp *b, char *err, size_t errcap)
{
    const uint8_t *d = b->data;
    size_t len = b->len, at = b->offset;
    size_t w = (size_t)b->w, total = w * (size_t)b->h, n = 0, x = 0;
    uint8_t *out = b->index;
    int rle4 = b->comp == BMP_RLE4;
    memset(out, 0, total);
#define RLE_PUT(v)                                                                                 \
    do {                                                                                           \
        if (n < total)                                                                             \
            out[n] = (uint8_t)(v);                                                                 \
        n++;                                                                                       \
    } while (0)
    while (n < total) {
        if (at + 2 > len)
            break;
        size_t count = d[at];
        uint8_t byte = d[at + 1];
        at += 2;
        if (count) { /* a run, clipped to the row */
            if (x + count > w)
                count = x < w ? w - x : 0;
            for (size_t i = 0; i < count; i++)
                RLE_PUT(rle4 ? (i % 2 ? byte & 15 : byte >> 4) : byte);
            x += count;
        } else if (byte == 0) { /* end of line: pad to a row boundary */
            size_t pad = n % w ? w - n % w : 0;
            n += pad;
            x = 0;
        } else if (byte == 1) { /* end of bitmap */
            break;
        } else if (byte == 2) { /* delta: PIL reads two bytes, then uses the next two */
            if (at + 2 > len)
                break;
            at += 2;
            if (at + 2 > len) {
                snprintf(err, errcap, "BMP RLE delta truncated at byte %zu", at);
                return -1;
            }
            n += d[at] + (size_t)d[at + 1] * w;
            at += 2;
            x = n % w;
        } else { /* absolute run of `byte` pixels, not clipped */
            size_t want = rle4 ? byte / 2 : byte, got = len - at < want ? len - at : want;
            for (size_t i = 0; i < got; i++) {
                if (rle4) {
                    RLE_PUT(d[at + i] >> 4);
                    RLE_PUT(d[at + i] & 15);
                } else {
                    RLE_PUT(d[at + i]);
                }
            }
            at += got;
            if (got < want)
                break;
            x += byte;
            if (at % 2)
                at++; /* PIL aligns the file offset, not the offset in the data */
        }
    }
#undef RLE_PUT
    if (n < total) {
        snprintf(err, errcap, "BMP RLE data ends after %zu of %zu pixels", n, total);
        return -1;
    }
    return 0;
}

/* Columns [x0, x1) of the uncompressed or expanded row `in` as RGB. */
static void row_to_rgb(const rf_bmp *b, const uint8_t *in, int expanded, int x0, int x1,
                       uint8_t *out)
{
    switch (b->pix) {
    case PIX_INDEX:
        for (int x = x0; x < x1; x++, out += 3) {
            unsigned i;
            if (expanded || b->bits == 8)
                i = in[x];
            else if (b->bits == 4)
                i = (in[x / 2] >> (x % 2 ? 0 : 4)) & 15;
            else
                i = (in[x / 8] >> (7 - x % 8)) & 1;
            memcpy(out, b->pal[i], 3);
        }
        return;
    case PIX_BW:
        for (int x = x0; x < x1; x++, out += 3)
            out[0] = out[1] = out[2] = (in[x / 8] >> (7 - x % 8)) & 1 ? 255 : 0;
        return;
    case PIX_555:
    case PIX_565:
        for (int x = x0; x < x1; x++, out += 3) {
            unsigned v = u16le(in + 2 * x);
            if (b->pix == PIX_555) {
                out[0] = (uint8_t)(((v >> 10) & 31) * 255 / 31);
                out[1] = (uint8_t)(((v >> 5) & 31) * 255 / 31);
            } else {
                out[0] = (uint8_t)(((v >> 11) & 31) * 255 / 31);
                out[1] = (uint8_t)(((v >> 5) & 63) * 255 / 63);
            }
            out[2] = (uint8_t)((v & 31) * 255 / 31);
        }
        return;
    default: {
        int bpp = b->bits / 8;
        for (int x = x0; x < x1; x++, out += 3) {
            const uint8_t *px = in + (size_t)bpp * x;
            out[0] = px[b->pos[0]];
            out[1] = px[b->pos[1]];
            out[2] = px[b->pos[2]];
        }
        return;
    }
    }
}

static int bmp_region(void *state, rf_geom *g, int max_denom, int check_tail, rf_region *r,
                      char *err, size_t errcap)
{
    (void)max_denom; /* no reduced-scale decoding */
    rf_bmp *b = state;
    memset(r, 0, sizeof *r);
    r->denom = 1;
    int bx0, by0, bx1, by1;
    rf__geom_bounds(g, b->w, b->h, &bx0, &by0, &bx1, &by1);
    int rows = by1 - by0, cols = bx1 - bx0;
    size_t stride = (size_t)cols * 3;
    int rle = b->comp == BMP_RLE8 || b->comp == BMP_RLE4;
    /* After decode.c's size limit, so that a huge header says so. */
    uint64_t need = (uint64_t)b->stride * (uint64_t)b->h;
    if (!rle && (b->offset > b->len || need > b->len - b->offset)) {
        snprintf(err, errcap, "BMP truncated: pixel data needs %llu bytes at %llu, file has %llu",
                 (unsigned long long)need, (unsigned long long)b->offset,
                 (unsigned long long)b->len);
        b->data = NULL;
        return RF_E_DECODE;
    }
    if (rf__buf_reserve(&b->rgb, &b->rgb_cap, stride * (size_t)rows) != 0 ||
        (rle && rf__buf_reserve(&b->index, &b->index_cap, (size_t)b->w * (size_t)b->h) != 0)) {
        b->data = NULL;
        snprintf(err, errcap, "out of memory for a %dx%d region", cols, rows);
        return RF_E_NOMEM;
    }
    if (rle && rle_expand(b, err, errcap) != 0) {
        b->data = NULL;
        return RF_E_DECODE;
    }
    for (int y = by0; y < by1; y++) {
        size_t file_row = b->topdown ? (size_t)y : (size_t)(b->h - 1 - y);
        const uint8_t *in =
            rle ? b->index + file_row * (size_t)b->w : b->data + b->offset + file_row * b->stride;
        row_to_rgb(b, in, rle, bx0, bx1, b->rgb + (size_t)(y - by0) * stride);
    }
    b->data = NULL;
    r->rows = b->rgb;
    r->stride = stride;
    r->full_w = b->w;
    r->full_h = b->h;
    r->x0 = bx0;
    r->y0 = by0;
    r->w = cols;
    r->h = rows;
    r->whole = 1; /* all the data was checked to be there; nothing else to verify */
    return 0;
}

const rf_format rf__format_bmp = {
    bmp_sniff, bmp_create, bmp_destroy, bmp_header, bmp_region, bmp_abandon,
};
