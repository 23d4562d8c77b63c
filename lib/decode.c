/*
 * decode.c - JPEG bytes to resampled pixels, decoding only what is needed.
 *
 * For each sample: read the header (limits are checked before any pixel
 * memory is allocated), draw the transform's geometry from the sample's own
 * RNG stream, pick the largest DCT scaling (1/2, 1/4, 1/8) that keeps the
 * source box at least as large as the output, decode only the rows and the
 * iMCU columns the resampler reads (jpeg_skip_scanlines, jpeg_crop_scanline),
 * then resample straight into the slot.
 *
 * libjpeg reports errors through longjmp; warnings (corrupt or truncated
 * data, which libjpeg would otherwise paper over with gray) are promoted to
 * errors, and a progress monitor caps the number of progressive scans.
 */
#define _GNU_SOURCE
#include "decode.h"

#include <assert.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "clock.h"
#include "ringfeed.h"
#include "rng.h"
#include "transform.h"

/* Extra decoded columns beside the region the resampler reads: libjpeg's
 * fancy upsampling treats the edges of a cropped region as picture edges, so
 * the outermost column on each side differs from a full decode; two columns
 * keep it out of the filter's reach. Rows need none: jpeg_skip_scanlines
 * skips whole iMCU rows only up to the one before the target row's (its
 * count is (lines - 1) / rows per iMCU row when the upsampler needs context
 * rows) and decodes that one, so the first row kept has its context, and
 * the first skip starts at row 0. Samplings beyond 2x2 (h2v4, h4v2, ...)
 * are decoded whole (whole_only): libjpeg-turbo 2.1's cropping is not exact
 * for them and its skipping can loop forever on some of them. */
#define RF_REGION_MARGIN_X 2

typedef struct rf_jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX + 64];
    int max_scans;
    int limit; /* 1 when the failure is a configured limit */
} rf_jerr;

struct rf_decoder {
    struct jpeg_decompress_struct cinfo;
    rf_jerr jerr;
    struct jpeg_progress_mgr progress;
    rf_resampler *rs;
    uint8_t *rows;     /* decoded region, RGB (or CMYK while converting) */
    size_t rows_cap;
};

static void on_error_exit(j_common_ptr c)
{
    rf_jerr *e = (rf_jerr *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jump, 1);
}

static void on_emit_message(j_common_ptr c, int level)
{
    if (level >= 0)
        return; /* trace messages */
    /* A warning means corrupt or truncated data: fail rather than deliver gray. */
    rf_jerr *e = (rf_jerr *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jump, 1);
}

static void on_progress(j_common_ptr c)
{
    if (!c->is_decompressor)
        return;
    j_decompress_ptr d = (j_decompress_ptr)c;
    rf_jerr *e = (rf_jerr *)c->err;
    if (d->inputctl && d->input_scan_number > e->max_scans) {
        snprintf(e->msg, sizeof e->msg, "progressive JPEG with more than %d scans", e->max_scans);
        e->limit = 1;
        longjmp(e->jump, 1);
    }
}

rf_decoder *rf__decoder_create(void)
{
    rf_decoder *volatile d = calloc(1, sizeof *d); /* volatile: survives longjmp */
    if (!d)
        return NULL;
    d->cinfo.err = jpeg_std_error(&d->jerr.pub);
    d->jerr.pub.error_exit = on_error_exit;
    d->jerr.pub.emit_message = on_emit_message;
    if (setjmp(d->jerr.jump)) {
        free(d);
        return NULL;
    }
    jpeg_create_decompress(&d->cinfo);
    d->progress.progress_monitor = on_progress;
    d->cinfo.progress = &d->progress;
    d->rs = rf__resampler_create();
    if (!d->rs) {
        jpeg_destroy_decompress(&d->cinfo);
        free(d);
        return NULL;
    }
    return d;
}

void rf__decoder_destroy(rf_decoder *d)
{
    if (!d)
        return;
    jpeg_destroy_decompress(&d->cinfo);
    rf__resampler_destroy(d->rs);
    free(d->rows);
    free(d);
}

static int describe_not_jpeg(const uint8_t *p, size_t len, char *err, size_t errcap)
{
    if (len == 0)
        snprintf(err, errcap, "empty file (0 bytes)");
    else if (len >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8))
        snprintf(err, errcap, "not a JPEG: PNG data");
    else if (len >= 6 && (!memcmp(p, "GIF87a", 6) || !memcmp(p, "GIF89a", 6)))
        snprintf(err, errcap, "not a JPEG: GIF data");
    else if (len >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4))
        snprintf(err, errcap, "not a JPEG: WebP data");
    else if (len >= 2 && p[0] == 'B' && p[1] == 'M')
        snprintf(err, errcap, "not a JPEG: BMP data");
    else
        snprintf(err, errcap, "not a JPEG (starts with %02x %02x, %zu bytes)", p[0],
                 len > 1 ? p[1] : 0, len);
    return RF_E_DECODE;
}

/* A sequential JPEG whose entropy-coded data runs into a marker other than
 * a restart marker well before its last row is cut short. The Huffman
 * decoder warns about it, the arithmetic decoder silently fills zeros, so
 * look at the marker the decoder stumbled on. Near the end the decoder
 * legitimately reads ahead into EOI (the output lags the entropy decoding by
 * up to two iMCU rows and a row group), hence three iMCU rows of slack. */
static int premature_marker(j_decompress_ptr c)
{
    int m = c->unread_marker;
    if (!m || (m >= 0xD0 && m <= 0xD7) || c->progressive_mode)
        return 0;
    JDIMENSION imcu = (JDIMENSION)(c->max_v_samp_factor * c->min_DCT_scaled_size);
    return c->output_height - c->output_scanline > 3 * imcu;
}

static int premature_error(j_decompress_ptr c, char *err, size_t errcap)
{
    snprintf(err, errcap, "entropy-coded data ends early (marker 0x%02x at row %u of %u)",
             c->unread_marker, c->output_scanline, c->output_height);
    jpeg_abort_decompress(c);
    return RF_E_DECODE;
}

static int grow_rows(rf_decoder *d, size_t need)
{
    if (d->rows_cap >= need)
        return 0;
    uint8_t *p = realloc(d->rows, need);
    if (!p)
        return -1;
    d->rows = p;
    d->rows_cap = need;
    return 0;
}

/* Adobe CMYK JPEGs store inverted ink values; RGB = inverted ink x inverted
 * black / 255, which is what PIL's CMYK to RGB conversion gives. */
static void cmyk_to_rgb(uint8_t *row, size_t width, int inverted)
{
    for (size_t x = 0; x < width; x++) {
        unsigned c = row[4 * x], m = row[4 * x + 1], y = row[4 * x + 2], k = row[4 * x + 3];
        if (!inverted) {
            c = 255 - c;
            m = 255 - m;
            y = 255 - y;
            k = 255 - k;
        }
        row[3 * x] = (uint8_t)((c * k + 127) / 255);
        row[3 * x + 1] = (uint8_t)((m * k + 127) / 255);
        row[3 * x + 2] = (uint8_t)((y * k + 127) / 255);
    }
}

/* Reads the next output row into row (a row's worth of scratch). */
static int read_row(j_decompress_ptr c, JSAMPROW row, char *err, size_t errcap)
{
    if (jpeg_read_scanlines(c, &row, 1) == 1)
        return 0;
    snprintf(err, errcap, "decoder returned no row at row %u", c->output_scanline);
    jpeg_abort_decompress(c);
    return -1;
}

int rf__decode_sample(rf_decoder *d, const uint8_t *data, size_t len, const rf_decode_opts *o,
                      uint8_t *dst, char *err, size_t errcap, rf_decode_times *t)
{
    struct jpeg_decompress_struct *c = &d->cinfo;
    memset(t, 0, sizeof *t);
    if (len < 4 || data[0] != 0xFF || data[1] != 0xD8)
        return describe_not_jpeg(data, len, err, errcap);

    int64_t t0 = rf__now_ns();
    d->jerr.max_scans = o->max_scans;
    d->jerr.limit = 0;
    d->jerr.msg[0] = '\0';
    if (setjmp(d->jerr.jump)) {
        jpeg_abort_decompress(c);
        snprintf(err, errcap, "%s", d->jerr.msg[0] ? d->jerr.msg : "JPEG decode failed");
        return d->jerr.limit ? RF_E_LIMIT : RF_E_DECODE;
    }
    jpeg_mem_src(c, (unsigned char *)data, (unsigned long)len);
    jpeg_read_header(c, TRUE);
    t->width = (int)c->image_width;
    t->height = (int)c->image_height;
    if ((int64_t)c->image_width * c->image_height > o->max_pixels) {
        jpeg_abort_decompress(c);
        snprintf(err, errcap, "picture of %ux%u pixels exceeds the limit of %lld pixels",
                 c->image_width, c->image_height, (long long)o->max_pixels);
        return RF_E_LIMIT;
    }
    int cmyk = c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK;
    c->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;

    /* Geometry, from the sample's own stream: same pixels for any worker. */
    rf_rng rng = rf__rng_make(o->seed, (uint64_t)o->epoch, (uint64_t)o->sample);
    rf_geom g;
    if (o->transform == RF_TRANSFORM_RANDOM_RESIZED_CROP)
        rf__geom_rrc(t->width, t->height, o->size, &rng, &g);
    else if (o->transform == RF_TRANSFORM_CENTER)
        rf__geom_center(t->width, t->height, o->size, &g);
    else {
        if (t->width != o->size || t->height != o->size) {
            jpeg_abort_decompress(c);
            snprintf(err, errcap, "picture is %dx%d but transform \"none\" needs %dx%d", t->width,
                     t->height, o->size, o->size);
            return RF_E_DECODE;
        }
        rf__geom_none(t->width, t->height, o->size, &g);
    }
    g.flip = o->flip ? rf__rng_uniform(&rng) < 0.5 : 0;

    int denom = rf__geom_dct_denom(&g);
    c->scale_num = 1;
    c->scale_denom = (unsigned)denom;
    jpeg_calc_output_dimensions(c);
    if (denom > 1)
        rf__geom_scale(&g, denom);
    t->denom = denom;
    int full_w = (int)c->output_width, full_h = (int)c->output_height;
    int bx0, by0, bx1, by1;
    rf__geom_bounds(&g, full_w, full_h, &bx0, &by0, &bx1, &by1);
    bx0 = bx0 > RF_REGION_MARGIN_X ? bx0 - RF_REGION_MARGIN_X : 0;
    bx1 = bx1 + RF_REGION_MARGIN_X < full_w ? bx1 + RF_REGION_MARGIN_X : full_w;
    int64_t t1 = rf__now_ns();
    t->header_ns = t1 - t0;

    jpeg_start_decompress(c);
    int whole_only = c->max_v_samp_factor > 2 || c->max_h_samp_factor * c->max_v_samp_factor > 4;
    JDIMENSION xoff = (JDIMENSION)bx0, cw = (JDIMENSION)(bx1 - bx0);
    if ((bx0 > 0 || bx1 < full_w) && !whole_only)
        jpeg_crop_scanline(c, &xoff, &cw); /* widens to iMCU boundaries */
    else {
        xoff = 0;
        cw = c->output_width;
    }
    int comps = cmyk ? 4 : 3;
    size_t stride = (size_t)cw * (size_t)comps;
    int rows = by1 - by0;
    if (grow_rows(d, stride * ((size_t)rows + 1)) != 0) { /* + a spare row */
        jpeg_abort_decompress(c);
        snprintf(err, errcap, "out of memory for a %ux%d region", cw, rows);
        return RF_E_NOMEM;
    }
    JSAMPROW spare = d->rows + (size_t)rows * cw * (size_t)comps; /* after the region */
    if (by0 > 0 && !whole_only)
        jpeg_skip_scanlines(c, (JDIMENSION)by0);
    while ((int)c->output_scanline < by0) /* whole_only: read and drop */
        if (read_row(c, spare, err, errcap) != 0)
            return RF_E_DECODE;
    for (int y = 0; y < rows;) {
        JSAMPROW rp[4];
        int n = 0;
        for (; n < 4 && y + n < rows; n++)
            rp[n] = d->rows + (size_t)(y + n) * stride;
        JDIMENSION got = jpeg_read_scanlines(c, rp, (JDIMENSION)n);
        if (got == 0) {
            jpeg_abort_decompress(c);
            snprintf(err, errcap, "decoder returned no rows at row %d", by0 + y);
            return RF_E_DECODE;
        }
        y += (int)got;
        if (premature_marker(c))
            return premature_error(c, err, errcap);
    }
    if (cmyk) {
        int inverted = c->saw_Adobe_marker;
        for (int y = 0; y < rows; y++)
            cmyk_to_rgb(d->rows + (size_t)y * stride, cw, inverted);
        stride = (size_t)cw * 3;
        /* Rows were converted in place, so they now sit at the CMYK stride. */
        for (int y = 1; y < rows; y++)
            memmove(d->rows + (size_t)y * stride, d->rows + (size_t)y * cw * 4, stride);
    }
    /* Rows below the region are not needed. Unless told otherwise their
     * entropy-coded data is still checked: a corrupt tail otherwise passes
     * unnoticed, and libjpeg reports some damage (a desynchronised Huffman
     * stream) only when it reaches the end marker. A skip that reaches the
     * last row decodes nothing, so skip all but one row (whole iMCU rows
     * cost the entropy decoding alone) and read that one; the Huffman
     * decoder warns when it runs into a marker early, which fails the
     * sample. The arithmetic decoder fills zeros silently instead, and a
     * skip of rows without context rows may not decode at all, so its rows
     * are read one by one with the marker checked after each (arithmetic
     * coding is rare); so are those of whole_only pictures. */
    if (c->output_scanline < c->output_height && !o->check_tail) {
        jpeg_abort_decompress(c);
    } else {
        if (c->output_scanline + 1 < c->output_height && !c->arith_code && !whole_only)
            jpeg_skip_scanlines(c, c->output_height - c->output_scanline - 1);
        while (c->output_scanline < c->output_height) {
            if (read_row(c, spare, err, errcap) != 0)
                return RF_E_DECODE;
            if (premature_marker(c))
                return premature_error(c, err, errcap);
        }
        jpeg_finish_decompress(c);
        t->whole = 1;
    }
    int64_t t2 = rf__now_ns();
    t->decode_ns = t2 - t1;

    int layout = o->layout == RF_LAYOUT_NCHW ? RF__LAYOUT_NCHW : RF__LAYOUT_NHWC;
    if (rf__resample(d->rs, &g, full_w, full_h, d->rows, stride, (int)xoff, by0, (int)cw, rows,
                     dst, layout) != 0) {
        snprintf(err, errcap, "out of memory while resizing");
        return RF_E_NOMEM;
    }
    t->resize_ns = rf__now_ns() - t2;
    return 0;
}
