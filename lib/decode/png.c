/*
 * png.c - PNG, pixels as PIL's Image.open(p).convert("RGB") gives
 * them: libdeflate and png_unfilter.c for the image data of non-interlaced
 * pictures, libspng for everything else.
 *
 * Rows come out in the file's own format (16-bit samples big-endian, as
 * stored); this file turns them into RGB by PIL's rules, which are not
 * libspng's conversions:
 *   gray 1/2/4-bit   v * 255 / (2^depth - 1)  (PIL's "1", "L;2", "L;4")
 *   gray 16-bit      min(v, 255): PIL opens it as mode "I", whose RGB
 *                    conversion clips (it does not shift)
 *   gray+alpha 16    the high byte of gray; RGB(A) 16: the high byte of each
 *   palette          PLTE entry, and for an index past the PLTE's entries the
 *                    gray (i, i, i) of PIL's default palette
 *   alpha, tRNS      dropped, not composited; gAMA, sBIT, iCCP: ignored
 * Only the crop's rows are converted, and only its columns.
 *
 * Who does what. libspng reads IHDR (the header step) and every chunk
 * before the image data (PLTE, tRNS, text, ... with its limits and CRC
 * policy: the same checks as before there was a fast path). Then, for a
 * non-interlaced picture, the image data is decoded here in one go: the
 * IDAT chunks' payloads concatenated (their CRCs checked with check_tail),
 * inflated by libdeflate into one buffer of all the filtered rows (on
 * photographs zlib's streaming inflate, which libspng drives, takes almost
 * three times as long), and the rows unfiltered in place down to the crop's
 * last row (png_unfilter.c, SSE2; libspng's own unfiltering is byte by byte
 * and was half of its decode time). Rows below the crop stay filtered: with check_tail only their
 * filter bytes are checked, the stream itself (Adler-32 included) having
 * been inflated to its end. RGB 8-bit rows are then handed to the
 * resampler where they lie, with no copy.
 *
 * The fast path is only ever a shortcut to the answer libspng would give.
 * Whatever it is not sure of (a stream that is damaged, cut, longer or
 * shorter than the picture, a bad CRC, a bad filter byte, IDAT chunks that
 * do not fit the buffer, no memory for the whole picture) it hands back,
 * untouched, to libspng, which decodes row by row as before: down to the
 * crop's last row only, unless check_tail asks for the rest (so a file cut
 * below the crop still decodes when its tail is not checked), with the same
 * errors and messages as before. libdeflate has no way to stop inflating
 * at a given row (its output is unspecified when the buffer is short), so
 * the fast path inflates the whole stream even when the crop ends sooner;
 * the rows past the crop cost little next to what zlib cost.
 *
 * Adam7 pictures need every pass, so libspng decodes them whole, the rows
 * outside the crop into a scratch row. No scaling (denom 1). libspng 0.7
 * has no way to reset a context for a new picture, so a context is made per
 * picture (a few KB and a zlib stream; the worker's buffers are reused).
 * Without libdeflate (RF_HAVE_DEFLATE unset) libspng decodes everything.
 * Without libspng (RF_HAVE_SPNG unset) PNG files are still recognised, and
 * refused as an unsupported format.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "ringfeed.h"

static int png_sniff(const uint8_t *data, size_t len)
{
    return len >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8);
}

#ifdef RF_HAVE_SPNG
#include <spng.h>
#ifdef RF_HAVE_DEFLATE
#include <libdeflate.h>

#include "png_unfilter.h"
#endif

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
    const uint8_t *data; /* the file, borrowed from the header to the region */
    size_t len;
    uint8_t lut[256][3];             /* gray or palette index -> RGB */
    uint8_t *native, *rgb, *scratch; /* crop rows as decoded, as RGB; a spare row */
    size_t native_cap, rgb_cap, scratch_cap;
#ifdef RF_HAVE_DEFLATE
    struct libdeflate_decompressor *inflater;
    int simd;                     /* RF__SIMD_* level of the unfiltering */
    uint8_t *image, *idat, *zero; /* filtered rows; IDAT payloads joined; a row of 0 */
    size_t image_cap, idat_cap, zero_cap;
#endif
} rf_png;

static void png_abandon(void *state)
{
    rf_png *p = state;
    spng_ctx_free(p->ctx); /* NULL is a no-op */
    p->ctx = NULL;
    p->data = NULL;
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
#ifdef RF_HAVE_DEFLATE
    libdeflate_free_decompressor(p->inflater); /* NULL is a no-op */
    free(p->image);
    free(p->idat);
    free(p->zero);
#endif
    free(p);
}

static void *png_create(void)
{
    rf_png *p = calloc(1, sizeof(rf_png));
#ifdef RF_HAVE_DEFLATE
    if (p && !(p->inflater = libdeflate_alloc_decompressor())) {
        png_destroy(p);
        return NULL;
    }
    if (p)
        p->simd = rf__png_unfilter_best();
#endif
    return p;
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
    p->data = data;
    p->len = len;
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

/* Columns [x0, x1) of one row as stored in the file (16-bit samples
 * big-endian: SPNG_FMT_RAW, or the fast path's unfiltered rows) as RGB. */
static void row_to_rgb(const rf_png *p, const uint8_t *in, int x0, int x1, uint8_t *out)
{
    const struct spng_ihdr *h = &p->ihdr;
    int depth = h->bit_depth;
    switch (h->color_type) {
    case SPNG_COLOR_TYPE_GRAYSCALE:
        if (depth == 16) {
            for (int x = x0; x < x1; x++, out += 3) {
                unsigned v = (unsigned)in[2 * x] << 8 | in[2 * x + 1];
                out[0] = out[1] = out[2] = v > 255 ? 255 : (uint8_t)v;
            }
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
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: { /* the high byte when 16-bit */
        int step = depth == 16 ? 4 : 2;
        for (int x = x0; x < x1; x++, out += 3)
            out[0] = out[1] = out[2] = in[step * x];
        return;
    }
    default: { /* truecolor, with or without alpha; the high bytes when 16-bit */
        int ch = h->color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ? 4 : 3;
        int step = depth == 16 ? 2 * ch : ch, sample = depth == 16 ? 2 : 1;
        for (int x = x0; x < x1; x++, out += 3)
            for (int c = 0; c < 3; c++)
                out[c] = in[step * x + sample * c];
        return;
    }
    }
}

#ifdef RF_HAVE_DEFLATE
static uint32_t be32(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* The zlib stream: the payloads of the first run of IDAT chunks, in place
 * when there is one chunk, else joined in p->idat. With check, each of
 * their CRCs. 0, or -1 for libspng to judge: no IDAT, a bad CRC, no memory.
 * The chunks before were read by libspng already; the walk stops at the
 * first chunk that does not fit the buffer. */
static int png_stream(rf_png *p, int check, const uint8_t **in, size_t *in_len)
{
    const uint8_t *d = p->data;
    size_t n = p->len, off = 8, first = 0, total = 0;
    int chunks = 0;
    while (off <= n && n - off >= 12) {
        uint32_t len = be32(d + off);
        if (len > 0x7fffffffu || len > n - off - 12)
            break;
        if (memcmp(d + off + 4, "IDAT", 4) != 0) {
            if (chunks)
                break;
        } else {
            if (check &&
                libdeflate_crc32(0, d + off + 4, (size_t)len + 4) != be32(d + off + 8 + len))
                return -1;
            if (!chunks++)
                first = off;
            total += len;
        }
        off += 12 + (size_t)len;
    }
    if (chunks == 0)
        return -1;
    if (chunks == 1) {
        *in = d + first + 8;
        *in_len = total;
        return 0;
    }
    if (rf__buf_reserve(&p->idat, &p->idat_cap, total) != 0)
        return -1;
    size_t at = 0;
    for (off = first; at < total; off += 12 + (size_t)be32(d + off)) {
        uint32_t len = be32(d + off);
        memcpy(p->idat + at, d + off + 8, len);
        at += len;
    }
    *in = p->idat;
    *in_len = total;
    return 0;
}

/* The whole stream inflated into p->image (height rows of a filter byte
 * and row_bytes), rows [0, rows) unfiltered. 1, or 0 when libspng is to
 * decode the picture instead (see the top). */
static int png_fast(rf_png *p, size_t row_bytes, int rows, int check_tail)
{
    const struct spng_ihdr *h = &p->ihdr;
    int channels = h->color_type == SPNG_COLOR_TYPE_TRUECOLOR         ? 3
                   : h->color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ? 4
                   : h->color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ? 2
                                                                      : 1;
    unsigned bpp = (unsigned)(channels * h->bit_depth + 7) / 8;
    size_t stride = row_bytes + 1, height = h->height;
    if (height > SIZE_MAX / stride)
        return 0;
    const uint8_t *in;
    size_t in_len;
    if (png_stream(p, check_tail, &in, &in_len) != 0 ||
        rf__buf_reserve(&p->image, &p->image_cap, stride * height) != 0 ||
        rf__buf_reserve(&p->zero, &p->zero_cap, row_bytes) != 0)
        return 0;
    /* exactly the picture's bytes: a stream longer or shorter is libspng's */
    if (libdeflate_zlib_decompress(p->inflater, in, in_len, p->image, stride * height, NULL) !=
        LIBDEFLATE_SUCCESS)
        return 0;
    /* Filter bytes: every row's when checked, else those libspng reads
     * (down to the row after the crop's last). */
    size_t last = check_tail || (size_t)rows >= height ? height : (size_t)rows + 1;
    for (size_t y = 0; y < last; y++)
        if (p->image[y * stride] > RF__PNG_FILTER_PAETH)
            return 0;
    memset(p->zero, 0, row_bytes);
    const uint8_t *prev = p->zero;
    for (int y = 0; y < rows; y++) {
        uint8_t *row = p->image + (size_t)y * stride;
        rf__png_unfilter_row(p->simd, row[0], row + 1, prev, row_bytes, bpp);
        prev = row + 1;
    }
    return 1;
}
#endif /* RF_HAVE_DEFLATE */

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
    r->full_w = full_w;
    r->full_h = full_h;
    r->x0 = bx0;
    r->y0 = by0;
    r->w = cols;
    r->h = rows;

    /* Unchecked (verified before, or verify "none"): no CRC or Adler-32 is
     * computed by libspng, about 5% of its decode; PIL ignores the image
     * data's CRCs too. Checked: every chunk's CRC and the stream's checksum
     * count. */
    int ret = check_tail ? 0 : spng_set_crc_action(p->ctx, SPNG_CRC_USE, SPNG_CRC_USE);
    if (ret)
        return png_failed(p, ret, "chunks", err, errcap);
    /* Reads the chunks before the image data (PLTE, tRNS, ...) too. */
    ret = spng_decode_image(p->ctx, NULL, 0, SPNG_FMT_RAW, SPNG_DECODE_PROGRESSIVE);
    if (ret)
        return png_failed(p, ret, "chunks", err, errcap);
    size_t image_size, row_bytes;
    if ((ret = spng_decoded_image_size(p->ctx, SPNG_FMT_RAW, &image_size)) != 0)
        return png_failed(p, ret, "chunks", err, errcap);
    row_bytes = image_size / h->height;
    int rc = make_lut(p, err, errcap);
    if (rc)
        return rc;
    int interlaced = h->interlace_method != SPNG_INTERLACE_NONE;
    int rgb8 = h->color_type == SPNG_COLOR_TYPE_TRUECOLOR && h->bit_depth == 8;
    size_t rgb_stride = (size_t)cols * 3;

#ifdef RF_HAVE_DEFLATE
    if (!interlaced && png_fast(p, row_bytes, by1, check_tail)) {
        png_abandon(p); /* data is no longer read */
        size_t stride = row_bytes + 1;
        const uint8_t *top = p->image + (size_t)by0 * stride + 1;
        /* RGB 8-bit as it lies; the rest converted into p->rgb */
        r->whole = check_tail || by1 == full_h; /* as libspng says (below) */
        if (rgb8) {
            r->rows = top + (size_t)bx0 * 3;
            r->stride = stride;
            return 0;
        }
        if (rf__buf_reserve(&p->rgb, &p->rgb_cap, rgb_stride * (size_t)rows) != 0) {
            snprintf(err, errcap, "out of memory for a %dx%d region", cols, rows);
            return RF_E_NOMEM;
        }
        for (int y = 0; y < rows; y++)
            row_to_rgb(p, top + (size_t)y * stride, bx0, bx1, p->rgb + (size_t)y * rgb_stride);
        r->rows = p->rgb;
        r->stride = rgb_stride;
        return 0;
    }
#endif

    /* libspng, row by row. 8-bit RGB is decoded straight into the RGB
     * rows, whole rows. */
    int direct = rgb8;
    if (direct) {
        bx0 = 0;
        cols = full_w;
        rgb_stride = (size_t)cols * 3;
    }
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
    r->x0 = bx0;
    r->w = cols;
    return 0;
}

#else /* !RF_HAVE_SPNG */

#define NO_PNG                                                                                     \
    "unsupported format: PNG (this build has no libspng: its features lack \"png\"; install "     \
    "libspng-dev and rebuild)"

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
    snprintf(err, errcap, NO_PNG);
    return RF_E_DECODE;
}

static int png_region(void *state, rf_geom *g, int max_denom, int check_tail, rf_region *r,
                      char *err, size_t errcap)
{
    (void)max_denom; /* no reduced-scale decoding */
    snprintf(err, errcap, NO_PNG);
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
