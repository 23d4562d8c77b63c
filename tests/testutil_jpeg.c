/*
 * testutil_jpeg.c - JPEG encoding and reference decoding for tests with
 * libjpeg-turbo's classic jpeglib.h API (declared in testutil.h): RGB and
 * gray JPEGs in every variant the decoder must handle (sampling factors,
 * progressive, restart markers, arithmetic coding), CMYK and YCCK ones, the
 * plain full-size decode the library's output is compared with, and the
 * marker offsets tests use to damage a file where they mean to.
 *
 * Every libjpeg call runs under an error manager that longjmps back, warnings
 * included: a damaged file fails here as it does in the library.
 */
#include "testutil.h"

#include <limits.h>
#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

/* Error manager that returns to the caller instead of exiting, and turns
 * warnings (corrupt or truncated data) into errors as the library does:
 * decoding a damaged test file must fail, not yield gray pixels. */
typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
} tu_jerr;

static void jerr_exit(j_common_ptr c)
{
    longjmp(((tu_jerr *)c->err)->jb, 1);
}

static void jerr_emit(j_common_ptr c, int level)
{
    if (level < 0)
        longjmp(((tu_jerr *)c->err)->jb, 1);
    /* Trace messages (level >= 0) are ignored. */
}

static void jerr_output(j_common_ptr c)
{
    (void)c; /* tests feed bad data on purpose; keep stderr quiet */
}

static void jerr_init(tu_jerr *e)
{
    jpeg_std_error(&e->pub);
    e->pub.error_exit = jerr_exit;
    e->pub.emit_message = jerr_emit;
    e->pub.output_message = jerr_output;
}

static int opts_ok(const tu_jpeg_opts *o)
{
    return o->width >= 1 && o->width <= JPEG_MAX_DIMENSION && o->height >= 1 &&
           o->height <= JPEG_MAX_DIMENSION && o->quality >= 1 && o->quality <= 100 &&
           o->subsamp >= TU_444 && o->subsamp <= TU_GRAY && o->restart_rows >= 0 &&
           o->restart_rows <= 65535 && o->hs >= 0 && o->hs <= 4 && o->vs >= 0 && o->vs <= 4 &&
           (o->hs > 0) == (o->vs > 0) && (o->hs == 0 || o->subsamp != TU_GRAY);
}

/* Encodes w x h pixels of comps bytes each, in_cs, into *out (malloc'd);
 * settings chooses the output after jpeg_set_defaults. 0, or -1 on any error
 * or warning (*out is then NULL). */
static int encode(const uint8_t *px, int w, int h, int comps, J_COLOR_SPACE in_cs,
                  void (*settings)(j_compress_ptr c, const void *arg), const void *arg,
                  uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;

    struct jpeg_compress_struct c;
    tu_jerr e;
    /* jpeg_mem_dest (re)allocates buf with malloc; it lives in memory whose
     * address libjpeg holds, so it survives the longjmp. */
    unsigned char *buf = NULL;
    unsigned long size = 0;

    memset(&c, 0, sizeof c);
    jerr_init(&e);
    c.err = &e.pub;
    if (setjmp(e.jb)) {
        jpeg_destroy_compress(&c);
        free(buf);
        return -1;
    }
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &buf, &size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = in_cs;
    jpeg_set_defaults(&c);
    settings(&c, arg);
    jpeg_start_compress(&c, TRUE);
    size_t stride = (size_t)w * (size_t)comps;
    while (c.next_scanline < c.image_height) {
        /* libjpeg never writes through the row pointer; the cast only drops const. */
        JSAMPROW row = (JSAMPROW)(uintptr_t)(px + c.next_scanline * stride);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *out = buf;
    *out_len = size;
    return 0;
}

static void rgb_settings(j_compress_ptr c, const void *arg)
{
    const tu_jpeg_opts *o = arg;
    if (o->subsamp == TU_GRAY) {
        /* libjpeg converts RGB to Y itself (the same BT.601 weights a
         * decoder's gray output implies). */
        jpeg_set_colorspace(c, JCS_GRAYSCALE);
    } else {
        /* Defaults are 2x2 luma sampling (4:2:0); chroma stays 1x1. */
        c->comp_info[0].h_samp_factor = o->hs ? o->hs : o->subsamp == TU_444 ? 1 : 2;
        c->comp_info[0].v_samp_factor = o->vs ? o->vs : o->subsamp == TU_420 ? 2 : 1;
    }
    jpeg_set_quality(c, o->quality, TRUE);
    if (o->progressive)
        jpeg_simple_progression(c);
    c->arith_code = o->arithmetic ? TRUE : FALSE;
    c->restart_in_rows = o->restart_rows;
}

int tu_encode_jpeg(const uint8_t *rgb, const tu_jpeg_opts *o, uint8_t **out, size_t *out_len)
{
    if (!rgb || !o || !out || !out_len || !opts_ok(o))
        return -1;
    return encode(rgb, o->width, o->height, 3, JCS_RGB, rgb_settings, o, out, out_len);
}

typedef struct {
    int ycck, quality;
} cmyk_opts;

static void cmyk_settings(j_compress_ptr c, const void *arg)
{
    const cmyk_opts *k = arg;
    jpeg_set_colorspace(c, k->ycck ? JCS_YCCK : JCS_CMYK);
    jpeg_set_quality(c, k->quality, TRUE);
}

/* A CMYK (Adobe-style inverted ink) or YCCK JPEG of the photo-like picture
 * for seed: tu_encode_jpeg encodes RGB and gray only. */
int tu_encode_cmyk(int w, int h, int ycck, uint32_t seed, int quality, uint8_t **out,
                   size_t *out_len)
{
    uint8_t *rgb = tu_make_rgb(w, h, seed);
    uint8_t *cmyk = malloc((size_t)w * h * 4);
    if (!rgb || !cmyk) {
        free(rgb);
        free(cmyk);
        return -1;
    }
    for (size_t i = 0; i < (size_t)w * h; i++) {
        /* inverted ink (Adobe): C' * K' / 255 ~ R */
        int r = rgb[3 * i], g = rgb[3 * i + 1], b = rgb[3 * i + 2];
        int k = r > g ? (r > b ? r : b) : (g > b ? g : b);
        if (k == 0)
            k = 1;
        cmyk[4 * i] = (uint8_t)(r * 255 / k);
        cmyk[4 * i + 1] = (uint8_t)(g * 255 / k);
        cmyk[4 * i + 2] = (uint8_t)(b * 255 / k);
        cmyk[4 * i + 3] = (uint8_t)k;
    }
    free(rgb);
    cmyk_opts k = {ycck, quality};
    int rc = encode(cmyk, w, h, 4, JCS_CMYK, cmyk_settings, &k, out, out_len);
    free(cmyk);
    return rc;
}

int tu_make_jpeg(const tu_jpeg_opts *o, uint8_t **out, size_t *out_len)
{
    if (!o || !opts_ok(o))
        return -1;
    uint8_t *rgb = tu_make_rgb(o->width, o->height, o->seed);
    if (!rgb)
        return -1;
    int rc = tu_encode_jpeg(rgb, o, out, out_len);
    free(rgb);
    return rc;
}

/* Refuse to allocate more than this for a decode (3 bytes a pixel): tests may
 * hand tu_decode_jpeg a header claiming 65500x65500. */
#define TU_DECODE_MAX_PIXELS ((size_t)1 << 26)

/* One row of libjpeg's CMYK output as RGB: inverted ink x inverted black /
 * 255, the ink inverted first unless the file is Adobe's (which stores it
 * inverted). */
static void cmyk_row_to_rgb(const uint8_t *row, uint8_t *rgb, size_t W, int inverted)
{
    for (size_t x = 0; x < W; x++) {
        unsigned c = row[4 * x], m = row[4 * x + 1], yy = row[4 * x + 2], k = row[4 * x + 3];
        if (!inverted) {
            c = 255 - c;
            m = 255 - m;
            yy = 255 - yy;
            k = 255 - k;
        }
        rgb[x * 3] = (uint8_t)((c * k + 127) / 255);
        rgb[x * 3 + 1] = (uint8_t)((m * k + 127) / 255);
        rgb[x * 3 + 2] = (uint8_t)((yy * k + 127) / 255);
    }
}

/* Decodes jpg as RGB; with cmyk, a CMYK or YCCK file only (anything else
 * fails), through libjpeg's CMYK output and cmyk_row_to_rgb. With out, the
 * whole picture into *out (malloc'd) and jpeg_finish_decompress, which reads
 * on to EOI; without (RGB only), row by row into one row's buffer, stopping
 * after the last row. 0, or -1 on any error or warning (*out is then NULL). */
static int decode(const uint8_t *jpg, size_t len, int cmyk, uint8_t **out, int *w, int *h)
{
    if (!jpg || len > ULONG_MAX || (cmyk && !out))
        return -1;
    if (out)
        *out = NULL;

    struct jpeg_decompress_struct d;
    tu_jerr e;
    uint8_t *volatile pix = NULL; /* assigned after setjmp, freed after longjmp */
    uint8_t *volatile row = NULL; /* CMYK only: libjpeg's row before conversion */

    memset(&d, 0, sizeof d);
    jerr_init(&e);
    d.err = &e.pub;
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&d);
        free(pix);
        free(row);
        return -1;
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, jpg, (unsigned long)len);
    jpeg_read_header(&d, TRUE);
    if (cmyk && d.jpeg_color_space != JCS_CMYK && d.jpeg_color_space != JCS_YCCK)
        longjmp(e.jb, 1);
    d.out_color_space = cmyk ? JCS_CMYK : JCS_RGB; /* gray is expanded to R = G = B */
    jpeg_start_decompress(&d);
    int inverted = d.saw_Adobe_marker;
    size_t ow = d.output_width, oh = d.output_height;
    if (d.output_components != (cmyk ? 4 : 3) || ow * oh > TU_DECODE_MAX_PIXELS)
        longjmp(e.jb, 1);
    pix = malloc(out ? ow * oh * 3 : ow * 3);
    if (cmyk)
        row = malloc(ow * 4);
    if (!pix || (cmyk && !row))
        longjmp(e.jb, 1);
    while (d.output_scanline < d.output_height) {
        uint8_t *dst = out ? pix + (size_t)d.output_scanline * ow * 3 : pix;
        JSAMPROW r = cmyk ? row : dst;
        jpeg_read_scanlines(&d, &r, 1);
        if (cmyk)
            cmyk_row_to_rgb(row, dst, ow, inverted);
    }
    free(row);
    row = NULL; /* a longjmp from here on must not free it again */
    if (!out) {
        jpeg_abort_decompress(&d); /* not on to EOI: see tu_jpeg_fails_in_rows */
        jpeg_destroy_decompress(&d);
        free(pix);
        return 0;
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    *out = pix;
    if (w)
        *w = (int)ow;
    if (h)
        *h = (int)oh;
    return 0;
}

int tu_decode_jpeg(const uint8_t *jpg, size_t len, uint8_t **out, int *w, int *h)
{
    return out ? decode(jpg, len, 0, out, w, h) : -1;
}

/* Reference RGB of a CMYK/YCCK JPEG: libjpeg's CMYK output, then the
 * documented conversion (cmyk_row_to_rgb). */
int tu_decode_cmyk(const uint8_t *jpg, size_t len, uint8_t **out, int *w, int *h)
{
    return out ? decode(jpg, len, 1, out, w, h) : -1;
}

int tu_jpeg_fails_in_rows(const uint8_t *jpg, size_t len)
{
    return decode(jpg, len, 0, NULL, NULL, NULL) != 0;
}

/* ------------------------------------------------------------------ markers */

/* Both walk the marker segments after SOI (each FF xx LEN_hi LEN_lo, LEN
 * counting itself) and stop at the first one they look for. */
size_t tu_jpeg_sof_offset(const uint8_t *p, size_t n)
{
    size_t i = 2;
    while (i + 4 <= n && p[i] == 0xFF) {
        uint8_t m = p[i + 1];
        /* SOF0..SOF15 but DHT (C4), JPG (C8) and DAC (CC) */
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC)
            return i + 4;
        i += 2 + (((size_t)p[i + 2] << 8) | p[i + 3]);
    }
    return 0;
}

size_t tu_jpeg_sos_offset(const uint8_t *p, size_t n)
{
    size_t i = 2;
    while (i + 4 <= n && p[i] == 0xFF) {
        if (p[i + 1] == 0xDA)
            return i;
        i += 2 + (((size_t)p[i + 2] << 8) | p[i + 3]);
    }
    return 0;
}
