/*
 * jpeg.c - JPEG with libjpeg-turbo, decoding only what is needed.
 *
 * After the header (decode.c checks the size limit and draws the geometry
 * in between), jpg_region picks the largest DCT scaling (1/2, 1/4, 1/8)
 * that keeps the source box at least as large as the output (none when
 * max_denom is 1: RF_P_EXACT), and decodes only the rows and the iMCU
 * columns the resampler reads (jpeg_skip_scanlines, jpeg_crop_scanline),
 * which gives the same pixels as a full decode; CMYK / YCCK pictures are
 * turned into RGB as PIL does. Unless told otherwise the rows below the
 * region are still entropy-decoded, so that damage there is found.
 *
 * libjpeg reports errors through longjmp; warnings (corrupt or truncated
 * data, which libjpeg would otherwise paper over with gray) are promoted to
 * errors, and a progress monitor caps the number of progressive scans.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "formats.h"
#include "ringfeed.h"

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

/* The state of one worker: a decompressor, reused picture after picture. */
typedef struct rf_jpeg {
    struct jpeg_decompress_struct cinfo;
    rf_jerr jerr;
    struct jpeg_progress_mgr progress;
    int used;      /* cinfo has read a picture since it was created */
    int cmyk;      /* the picture is CMYK or YCCK (decoded as CMYK) */
    uint8_t *rows; /* decoded region, RGB (or CMYK while converting) */
    size_t rows_cap;
} rf_jpeg;

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

static void *jpg_create(void)
{
    rf_jpeg *volatile j = calloc(1, sizeof *j); /* volatile: survives longjmp */
    if (!j)
        return NULL;
    j->cinfo.err = jpeg_std_error(&j->jerr.pub);
    j->jerr.pub.error_exit = on_error_exit;
    j->jerr.pub.emit_message = on_emit_message;
    if (setjmp(j->jerr.jump)) {
        free(j);
        return NULL;
    }
    jpeg_create_decompress(&j->cinfo);
    j->progress.progress_monitor = on_progress;
    j->cinfo.progress = &j->progress;
    return j;
}

static void jpg_destroy(void *state)
{
    rf_jpeg *j = state;
    if (!j)
        return;
    jpeg_destroy_decompress(&j->cinfo);
    free(j->rows);
    free(j);
}

static int jpg_sniff(const uint8_t *data, size_t len)
{
    return len >= 4 && data[0] == 0xFF && data[1] == 0xD8;
}

static void jpg_abandon(void *state)
{
    rf_jpeg *j = state;
    jpeg_abort_decompress(&j->cinfo);
}

/* Where libjpeg's longjmp lands: the picture is abandoned, the reason kept. */
static int jpg_failed(rf_jpeg *j, char *err, size_t errcap)
{
    jpeg_abort_decompress(&j->cinfo);
    snprintf(err, errcap, "%s", j->jerr.msg[0] ? j->jerr.msg : "JPEG decode failed");
    return j->jerr.limit ? RF_E_LIMIT : RF_E_DECODE;
}

/* A decompressor keeps the quantization and Huffman tables of the pictures
 * it has read (libjpeg's support for abbreviated streams), so a picture
 * without its own tables would borrow those of whatever this worker decoded
 * before: its pixels, or whether it fails, would depend on the order of
 * work, and differ from PIL, which reads every file with a new one. So
 * every picture gets a new decompressor (a few small allocations). Called
 * under jpg_header's setjmp: if creating fails, cinfo.mem stays NULL, which
 * jpeg_abort and jpeg_destroy accept. */
static void renew(rf_jpeg *j)
{
    if (j->used) {
        jpeg_destroy_decompress(&j->cinfo); /* keeps cinfo.err */
        jpeg_create_decompress(&j->cinfo);
        j->cinfo.progress = &j->progress;
    }
    j->used = 1;
}

static int jpg_header(void *state, const uint8_t *data, size_t len, int max_scans, int *width,
                      int *height, char *err, size_t errcap)
{
    rf_jpeg *j = state;
    struct jpeg_decompress_struct *c = &j->cinfo;
    j->jerr.max_scans = max_scans;
    j->jerr.limit = 0;
    j->jerr.msg[0] = '\0';
    if (setjmp(j->jerr.jump))
        return jpg_failed(j, err, errcap);
    renew(j);
    jpeg_mem_src(c, (unsigned char *)data, (unsigned long)len);
    jpeg_read_header(c, TRUE);
    *width = (int)c->image_width;
    *height = (int)c->image_height;
    j->cmyk = c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK;
    c->out_color_space = j->cmyk ? JCS_CMYK : JCS_RGB;
    return 0;
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

/* Scratch for the decoded region; its old contents are not needed, so it
 * is replaced rather than realloc'ed (nothing copied). */
static int rows_reserve(rf_jpeg *j, size_t need)
{
    if (j->rows_cap >= need)
        return 0;
    free(j->rows);
    j->rows_cap = 0;
    j->rows = malloc(need);
    if (!j->rows)
        return -1;
    j->rows_cap = need;
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

/* Rows below the region are not needed. Unless told otherwise their
 * entropy-coded data is still checked: a corrupt tail otherwise passes
 * unnoticed, and libjpeg reports some damage (a desynchronised Huffman
 * stream) only when it reaches the end marker. A skip that reaches the last
 * row decodes nothing, so skip all but one row (whole iMCU rows cost the
 * entropy decoding alone) and read that one; the Huffman decoder warns when
 * it runs into a marker early, which fails the sample. The arithmetic
 * decoder fills zeros silently instead, and a skip of rows without context
 * rows may not decode at all, so its rows are read one by one with the
 * marker checked after each (arithmetic coding is rare); so are those of
 * whole_only pictures. */
static int finish_tail(j_decompress_ptr c, int check_tail, int whole_only, JSAMPROW spare,
                       int *whole, char *err, size_t errcap)
{
    if (c->output_scanline < c->output_height && !check_tail) {
        jpeg_abort_decompress(c);
        return 0;
    }
    if (c->output_scanline + 1 < c->output_height && !c->arith_code && !whole_only)
        jpeg_skip_scanlines(c, c->output_height - c->output_scanline - 1);
    while (c->output_scanline < c->output_height) {
        if (read_row(c, spare, err, errcap) != 0)
            return RF_E_DECODE;
        if (premature_marker(c))
            return premature_error(c, err, errcap);
    }
    jpeg_finish_decompress(c);
    *whole = 1;
    return 0;
}

static int jpg_region(void *state, rf_geom *g, int max_denom, int check_tail, rf_region *r,
                      char *err, size_t errcap)
{
    rf_jpeg *j = state;
    struct jpeg_decompress_struct *c = &j->cinfo;
    memset(r, 0, sizeof *r);
    if (setjmp(j->jerr.jump))
        return jpg_failed(j, err, errcap);
    int denom = rf__geom_dct_denom(g);
    while (denom > max_denom && denom > 1) /* both powers of two */
        denom /= 2;
    c->scale_num = 1;
    c->scale_denom = (unsigned)denom;
    jpeg_calc_output_dimensions(c);
    if (denom > 1)
        rf__geom_scale(g, denom);
    r->denom = denom;
    int full_w = (int)c->output_width, full_h = (int)c->output_height;
    int bx0, by0, bx1, by1;
    rf__geom_bounds(g, full_w, full_h, &bx0, &by0, &bx1, &by1);
    bx0 = bx0 > RF_REGION_MARGIN_X ? bx0 - RF_REGION_MARGIN_X : 0;
    bx1 = bx1 + RF_REGION_MARGIN_X < full_w ? bx1 + RF_REGION_MARGIN_X : full_w;

    jpeg_start_decompress(c);
    int whole_only = c->max_v_samp_factor > 2 || c->max_h_samp_factor * c->max_v_samp_factor > 4;
    JDIMENSION xoff = (JDIMENSION)bx0, cw = (JDIMENSION)(bx1 - bx0);
    if ((bx0 > 0 || bx1 < full_w) && !whole_only)
        jpeg_crop_scanline(c, &xoff, &cw); /* widens to iMCU boundaries */
    else {
        xoff = 0;
        cw = c->output_width;
    }
    int comps = j->cmyk ? 4 : 3;
    size_t stride = (size_t)cw * (size_t)comps;
    int rows = by1 - by0;
    if (rows_reserve(j, stride * ((size_t)rows + 1)) != 0) { /* + a spare row */
        jpeg_abort_decompress(c);
        snprintf(err, errcap, "out of memory for a %ux%d region", cw, rows);
        return RF_E_NOMEM;
    }
    JSAMPROW spare = j->rows + (size_t)rows * cw * (size_t)comps; /* after the region */
    if (by0 > 0 && !whole_only)
        jpeg_skip_scanlines(c, (JDIMENSION)by0);
    while ((int)c->output_scanline < by0) /* whole_only: read and drop */
        if (read_row(c, spare, err, errcap) != 0)
            return RF_E_DECODE;
    for (int y = 0; y < rows;) {
        JSAMPROW rp[4];
        int n = 0;
        for (; n < 4 && y + n < rows; n++)
            rp[n] = j->rows + (size_t)(y + n) * stride;
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
    if (j->cmyk) {
        int inverted = c->saw_Adobe_marker;
        for (int y = 0; y < rows; y++)
            cmyk_to_rgb(j->rows + (size_t)y * stride, cw, inverted);
        stride = (size_t)cw * 3;
        /* Rows were converted in place, so they now sit at the CMYK stride. */
        for (int y = 1; y < rows; y++)
            memmove(j->rows + (size_t)y * stride, j->rows + (size_t)y * cw * 4, stride);
    }
    int rc = finish_tail(c, check_tail, whole_only, spare, &r->whole, err, errcap);
    if (rc != 0)
        return rc;
    r->rows = j->rows;
    r->stride = stride;
    r->full_w = full_w;
    r->full_h = full_h;
    r->x0 = (int)xoff;
    r->y0 = by0;
    r->w = (int)cw;
    r->h = rows;
    return 0;
}

const rf_format rf__format_jpeg = {
    jpg_sniff, jpg_create, jpg_destroy, jpg_header, jpg_region, jpg_abandon,
};
