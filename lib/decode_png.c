/*
 * decode_png.c - PNG with libspng, pixels as PIL's Image.open(p).convert("RGB")
 * gives them.
 *
 * libspng decodes rows in the file's own format (SPNG_FMT_PNG: no scaling,
 * no gamma, no transparency applied, 16-bit samples in host order), one row
 * at a time; this file turns them into RGB by PIL's rules, which are not
 * libspng's conversions:
 *   gray 1/2/4-bit   v * 255 / (2^depth - 1)  (PIL's "1", "L;2", "L;4")
 *   gray 16-bit      min(v, 255): PIL opens it as mode "I", whose RGB
 *                    conversion clips (it does not shift)
 *   gray+alpha 16    the high byte of gray; RGB(A) 16: the high byte of each
 *   palette          PLTE entry, and for an index past the PLTE's entries the
 *                    gray (i, i, i) of PIL's default palette
 *   alpha, tRNS      dropped, not composited; gAMA, sBIT, iCCP: ignored
 * A non-interlaced picture is decoded only down to the last row the crop
 * reads (rows above it must be unfiltered anyway), and on to the end of the
 * image data when check_tail asks (CRC, zlib and filter errors below the
 * crop; without check_tail no checksum is computed at all). An Adam7
 * picture needs every pass, so it is always decoded whole, the rows outside
 * the crop into a scratch row. Only the crop's rows are kept, and only its
 * columns converted. No scaling (denom 1).
 *
 * libspng 0.7 has no way to reset a context for a new picture, so a context
 * is made per picture (a few KB and a zlib stream; the worker's row buffers
 * are reused). Without libspng (RF_HAVE_SPNG unset) PNG files are still
 * recognised, and refused as an unsupported format.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_formats.h"
#include "ringfeed.h"

static int png_sniff(const uint8_t *data, size_t len)
{
    return len >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8);
}

#ifdef RF_HAVE_SPNG
#include <spng.h>

/* Each side at most this many pixels: decode.c checks max_pixels right
 * after the header, this is libspng's own guard, set before it reads IHDR. */
#define RF_PNG_MAX_SIDE (1u << 24)
/* Ancillary chunks libspng keeps in memory (text, iCCP, eXIf, ...; their
 * inflated size for compressed ones): a decompression bomb in a text chunk
 * is an RF_E_LIMIT, not gigabytes. */
#define RF_PNG_CHUNK_MAX (16u << 20)
#define RF_PNG_CHUNK_CACHE (64u << 20)

/* The state of one worker. */
typedef struct rf_png {
    spng_ctx *ctx; /* this picture's, or NULL */
    struct spng_ihdr ihdr;
    uint8_t lut[256][3];             /* gray or palette index -> RGB */
    uint8_t *native, *rgb, *scratch; /* crop rows as decoded, as RGB; a spare row */
    size_t native_cap, rgb_cap, scratch_cap;
} rf_png;

static void *png_create(void)
{
    return calloc(1, sizeof(rf_png));
}

static void png_abandon(void *state)
{
    rf_png *p = state;
    spng_ctx_free(p->ctx); /* NULL is a no-op */
    p->ctx = NULL;
}

static void png_destroy(void *state)
{
    rf_png *p = state;
    if (!p)
        return;
    png_abandon(p);
    free(p->native);
    free(p->rgb);
    free(p->scratch);
    free(p);
}

/* The picture is abandoned; err gets libspng's reason. */
static int png_failed(rf_png *p, int ret, const char *when, char *err, size_t errcap)
{
    snprintf(err, errcap, "PNG %s: %s", when, spng_strerror(ret));
    png_abandon(p);
    if (ret == SPNG_EMEM)
        return RF_E_NOMEM;
    if (ret == SPNG_EUSER_WIDTH || ret == SPNG_EUSER_HEIGHT || ret == SPNG_ECHUNK_LIMITS)
        return RF_E_LIMIT;
    return RF_E_DECODE;
}

static int png_header(void *state, const uint8_t *data, size_t len, int max_scans, int *width,
                      int *height, char *err, size_t errcap)
{
    rf_png *p = state;
    png_abandon(p);
    p->ctx = spng_ctx_new(0);
    if (!p->ctx) {
        snprintf(err, errcap, "out of memory for a PNG decoder");
        return RF_E_NOMEM;
    }
    int ret = spng_set_image_limits(p->ctx, RF_PNG_MAX_SIDE, RF_PNG_MAX_SIDE);
    if (!ret)
        ret = spng_set_chunk_limits(p->ctx, RF_PNG_CHUNK_MAX, RF_PNG_CHUNK_CACHE);
    /* A bad CRC in an ancillary chunk fails the picture, as PIL's open does
     * (libspng would drop the chunk). */
    if (!ret)
        ret = spng_set_crc_action(p->ctx, SPNG_CRC_ERROR, SPNG_CRC_ERROR);
    if (!ret) /* borrowed until the region is decoded or the picture abandoned */
        ret = spng_set_png_buffer(p->ctx, (void *)data, len);
    if (!ret)
        ret = spng_get_ihdr(p->ctx, &p->ihdr);
    if (ret)
        return png_failed(p, ret, "header", err, errcap);
    *width = (int)p->ihdr.width;
    *height = (int)p->ihdr.height;
    return 0;
}

/* The gray or palette lookup table, by PIL's rules (see the top). */
static int make_lut(rf_png *p, char *err, size_t errcap)
{
    const struct spng_ihdr *h = &p->ihdr;
    if (h->color_type == SPNG_COLOR_TYPE_INDEXED) {
        struct spng_plte plte;
        int ret = spng_get_plte(p->ctx, &plte);
        if (ret)
            return png_failed(p, ret, "palette", err, errcap);
        for (unsigned i = 0; i < 256; i++) {
            const struct spng_plte_entry *e = &plte.entries[i];
            int in = i < plte.n_entries;
            p->lut[i][0] = in ? e->red : (uint8_t)i;
            p->lut[i][1] = in ? e->green : (uint8_t)i;
            p->lut[i][2] = in ? e->blue : (uint8_t)i;
        }
    } else if (h->color_type == SPNG_COLOR_TYPE_GRAYSCALE && h->bit_depth <= 8) {
        unsigned mul = 255u / ((1u << h->bit_depth) - 1u);
        for (unsigned i = 0; i < 256; i++)
            p->lut[i][0] = p->lut[i][1] = p->lut[i][2] = (uint8_t)(i * mul);
    }
    return 0;
}

/* Columns [x0, x1) of one decoded row (SPNG_FMT_PNG) as RGB. */
static void row_to_rgb(const rf_png *p, const uint8_t *in, int x0, int x1, uint8_t *out)
{
    const struct spng_ihdr *h = &p->ihdr;
    const uint16_t *in16 = (const uint16_t *)(const void *)in; /* host order */
    int depth = h->bit_depth;
    switch (h->color_type) {
    case SPNG_COLOR_TYPE_GRAYSCALE:
        if (depth == 16) {
            for (int x = x0; x < x1; x++, out += 3)
                out[0] = out[1] = out[2] = in16[x] > 255 ? 255 : (uint8_t)in16[x];
            return;
        }
        /* 1..8-bit gray goes through the lookup table, as indices do */
        /* fall through */
    case SPNG_COLOR_TYPE_INDEXED:
        if (depth == 8) {
            for (int x = x0; x < x1; x++, out += 3)
                memcpy(out, p->lut[in[x]], 3);
        } else {
            int per = 8 / depth;
            unsigned mask = (1u << depth) - 1u;
            for (int x = x0; x < x1; x++, out += 3) {
                int shift = 8 - depth - (x % per) * depth;
                memcpy(out, p->lut[(in[x / per] >> shift) & mask], 3);
            }
        }
        return;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA:
        for (int x = x0; x < x1; x++, out += 3)
            out[0] = out[1] = out[2] = depth == 16 ? (uint8_t)(in16[2 * x] >> 8) : in[2 * x];
        return;
    default: { /* truecolor, with or without alpha */
        int ch = h->color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ? 4 : 3;
        for (int x = x0; x < x1; x++, out += 3)
            for (int c = 0; c < 3; c++)
                out[c] = depth == 16 ? (uint8_t)(in16[ch * x + c] >> 8) : in[ch * x + c];
        return;
    }
    }
}

static int png_region(void *state, rf_geom *g, int max_denom, int check_tail, rf_region *r,
                      char *err, size_t errcap)
{
    (void)max_denom; /* no reduced-scale decoding */
    rf_png *p = state;
    memset(r, 0, sizeof *r);
    r->denom = 1;
    const struct spng_ihdr *h = &p->ihdr;
    int full_w = (int)h->width, full_h = (int)h->height;
    int bx0, by0, bx1, by1;
    rf__geom_bounds(g, full_w, full_h, &bx0, &by0, &bx1, &by1);
    int rows = by1 - by0, cols = bx1 - bx0;

    /* Unchecked (verified before, or verify "none"): no CRC or Adler-32 is
     * computed, about 5% of the decode; PIL ignores the image data's CRCs
     * too. Checked: every chunk's CRC and the stream's checksum count. */
    int ret = check_tail ? 0 : spng_set_crc_action(p->ctx, SPNG_CRC_USE, SPNG_CRC_USE);
    if (ret)
        return png_failed(p, ret, "chunks", err, errcap);
    /* Reads the chunks before the image data (PLTE, tRNS, ...) too. */
    ret = spng_decode_image(p->ctx, NULL, 0, SPNG_FMT_PNG, SPNG_DECODE_PROGRESSIVE);
    if (ret)
        return png_failed(p, ret, "chunks", err, errcap);
    size_t image_size, row_bytes;
    if ((ret = spng_decoded_image_size(p->ctx, SPNG_FMT_PNG, &image_size)) != 0)
        return png_failed(p, ret, "chunks", err, errcap);
    row_bytes = image_size / h->height;
    int rc = make_lut(p, err, errcap);
    if (rc)
        return rc;
    /* 8-bit RGB is decoded straight into the RGB rows, whole rows. */
    int direct = h->color_type == SPNG_COLOR_TYPE_TRUECOLOR && h->bit_depth == 8;
    if (direct) {
        bx0 = 0;
        cols = full_w;
    }
    size_t rgb_stride = (size_t)cols * 3;
    if (rf__buf_reserve(&p->scratch, &p->scratch_cap, row_bytes) != 0 ||
        (!direct && rf__buf_reserve(&p->native, &p->native_cap, row_bytes * (size_t)rows) != 0) ||
        rf__buf_reserve(&p->rgb, &p->rgb_cap, rgb_stride * (size_t)rows) != 0) {
        png_abandon(p);
        snprintf(err, errcap, "out of memory for a %dx%d region", cols, rows);
        return RF_E_NOMEM;
    }
    uint8_t *keep = direct ? p->rgb : p->native;
    size_t keep_stride = direct ? rgb_stride : row_bytes;
    /* Adam7 rows of depth < 8 are OR'ed together pass by pass. */
    int interlaced = h->interlace_method != SPNG_INTERLACE_NONE;
    if (interlaced && !direct)
        memset(keep, 0, keep_stride * (size_t)rows);

    /* Rows in decoding order: row by row, or pass by pass for Adam7. */
    for (;;) {
        struct spng_row_info ri;
        if ((ret = spng_get_row_info(p->ctx, &ri)) != 0)
            break; /* SPNG_EOI once the last row was decoded */
        int y = (int)ri.row_num;
        if (!interlaced && y >= by1 && !check_tail)
            break;
        uint8_t *dst = y >= by0 && y < by1 ? keep + (size_t)(y - by0) * keep_stride : p->scratch;
        ret = spng_decode_row(p->ctx, dst, row_bytes);
        if (ret)
            break;
    }
    if (ret != SPNG_EOI && !(ret == 0 && !interlaced))
        return png_failed(p, ret, "data", err, errcap);
    r->whole = ret == SPNG_EOI;
    png_abandon(p); /* data is no longer read */

    if (!direct)
        for (int y = 0; y < rows; y++)
            row_to_rgb(p, p->native + (size_t)y * row_bytes, bx0, bx1,
                       p->rgb + (size_t)y * rgb_stride);
    r->rows = p->rgb;
    r->stride = rgb_stride;
    r->full_w = full_w;
    r->full_h = full_h;
    r->x0 = bx0;
    r->y0 = by0;
    r->w = cols;
    r->h = rows;
    return 0;
}

#else /* !RF_HAVE_SPNG */

static void *png_create(void)
{
    static int dummy; /* no state: any non-NULL pointer */
    return &dummy;
}

static void png_destroy(void *state)
{
    (void)state;
}

static int png_header(void *state, const uint8_t *data, size_t len, int max_scans, int *width,
                      int *height, char *err, size_t errcap)
{
    snprintf(err, errcap, "unsupported format: PNG (this build has no libspng)");
    return RF_E_DECODE;
}

static int png_region(void *state, rf_geom *g, int max_denom, int check_tail, rf_region *r,
                      char *err, size_t errcap)
{
    (void)max_denom; /* no reduced-scale decoding */
    snprintf(err, errcap, "unsupported format: PNG (this build has no libspng)");
    return RF_E_DECODE;
}

static void png_abandon(void *state)
{
    (void)state;
}

#endif /* RF_HAVE_SPNG */

const rf_format rf__format_png = {
    png_sniff, png_create, png_destroy, png_header, png_region, png_abandon,
};
