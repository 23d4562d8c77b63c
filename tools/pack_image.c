/*
 * pack_image.c - one sample's bytes to what ringfeed-pack stores: a JPEG,
 * raw pixels in an .npy member, or the original.
 *
 * Decoding goes through the library's own format seam (decode/formats.h):
 * the bytes are sniffed as the loader sniffs them (JPEG, WebP, PNG, BMP,
 * PNM), each format's decoder made on first use, at full resolution (max_denom 1: the pixels PIL decodes), shrinking through
 * the library's Pillow-exact antialiased resampler with a whole-picture
 * geometry, so a packed picture is what torchvision's Resize would make of
 * the original. Encoding is libjpeg-turbo's compressor with fixed settings,
 * so the same input gives the same bytes on every run and for any worker
 * count (the resume and determinism guarantees rest on that).
 *
 * --keep-original-if-smaller: a picture that needs no shrink is stored as it
 * came, under the extension of its format, when that costs no more bytes
 * than the JPEG: a JPEG always (re-encoding one only loses), another format
 * when its bytes are fewer than the JPEG encoded from it.
 *
 * --store raw: the shrunk pixels as np.save writes a uint8 (H, W, 3) array
 * (header byte for byte, pixels in C order): webdataset's decoders and
 * np.load read the member as is, and the loader hands its rows to the
 * resampler with no decode (lib/decode_npy.c). --store auto: raw where its
 * bytes are at most --raw-max-ratio times what the JPEG path stores.
 */
#define _GNU_SOURCE
#include "pack.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "formats.h"
#include "resample.h"
#include "ringfeed.h"

/* The loader's defaults for the same limits (lib/core/options.c). */
enum { PACK_MAX_SCANS = 1000 };
#define PACK_MAX_PIXELS INT64_C(178956970)

typedef struct pack_jerr {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} pack_jerr;

enum { PACK_MAX_FORMATS = 16 };

struct pack_coder {
    void *state[PACK_MAX_FORMATS]; /* each format's decoder, made on first use */
    rf_resampler *rs;
    uint8_t *pix; /* the shrunk picture, RGB */
    size_t pix_cap;
};

pack_coder *pack_coder_create(void)
{
    pack_coder *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->rs = rf__resampler_create();
    if (!c->rs || rf__format_count() > PACK_MAX_FORMATS) {
        pack_coder_destroy(c);
        return NULL;
    }
    return c;
}

void pack_coder_destroy(pack_coder *c)
{
    if (!c)
        return;
    for (int f = 0; f < PACK_MAX_FORMATS; f++)
        if (c->state[f])
            rf__format_at(f)->destroy(c->state[f]);
    rf__resampler_destroy(c->rs);
    free(c->pix);
    free(c);
}

/* libjpeg reports fatal errors here; return to encode()'s setjmp. */
static void on_error(j_common_ptr cinfo)
{
    pack_jerr *e = (pack_jerr *)cinfo->err;
    cinfo->err->format_message(cinfo, e->msg);
    longjmp(e->jump, 1);
}

/* RGB rows (stride bytes apart) to a JPEG in *out. */
static int encode(const uint8_t *rows, size_t stride, int w, int h, int quality, uint8_t **out,
                  size_t *out_len, char *err, size_t errcap)
{
    struct jpeg_compress_struct ci;
    pack_jerr je;
    /* volatile: read after a longjmp back into this frame */
    unsigned char *volatile buf = NULL;
    unsigned long size = 0;
    ci.err = jpeg_std_error(&je.mgr);
    je.mgr.error_exit = on_error;
    if (setjmp(je.jump)) {
        jpeg_destroy_compress(&ci);
        free(buf);
        snprintf(err, errcap, "encoding failed: %s", je.msg);
        return RF_E_NOMEM;
    }
    jpeg_create_compress(&ci);
    unsigned char *b = NULL;
    jpeg_mem_dest(&ci, &b, &size);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = 3;
    ci.in_color_space = JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, quality, TRUE);
    /* 4:2:0 chroma, as jpeg_set_defaults gives for YCbCr, spelled out */
    ci.comp_info[0].h_samp_factor = 2;
    ci.comp_info[0].v_samp_factor = 2;
    ci.comp_info[1].h_samp_factor = ci.comp_info[1].v_samp_factor = 1;
    ci.comp_info[2].h_samp_factor = ci.comp_info[2].v_samp_factor = 1;
    ci.optimize_coding = TRUE;
    ci.write_JFIF_header = TRUE;
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)(rows + (size_t)ci.next_scanline * stride);
        jpeg_write_scanlines(&ci, &row, 1);
        buf = b; /* jpeg_mem_dest may have moved it */
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    *out = b;
    *out_len = size;
    return 0;
}

/* Size of a w x h picture shrunk so that its longer side is at most max_side. */
static void target_size(int w, int h, int max_side, int *ow, int *oh)
{
    *ow = w;
    *oh = h;
    if (max_side <= 0 || (w <= max_side && h <= max_side))
        return;
    if (w >= h) {
        *ow = max_side;
        *oh = (int)((double)h * max_side / w + 0.5);
    } else {
        *oh = max_side;
        *ow = (int)((double)w * max_side / h + 0.5);
    }
    if (*ow < 1)
        *ow = 1;
    if (*oh < 1)
        *oh = 1;
}

/* The member extension of an original kept as it came, or NULL when its
 * format has none the loader indexes (PBM). */
static const char *original_ext(const rf_format *fmt, const uint8_t *data, size_t len)
{
    if (fmt == &rf__format_jpeg)
        return "jpg";
    if (fmt == &rf__format_png)
        return "png";
    if (fmt == &rf__format_webp)
        return "webp";
    if (fmt == &rf__format_bmp)
        return "bmp";
    if (fmt == &rf__format_pnm && len > 1)
        return data[1] == '2' || data[1] == '5'   ? "pgm"
               : data[1] == '3' || data[1] == '6' ? "ppm"
                                                  : NULL;
    return NULL;
}

size_t pack_npy_header(int h, int w, uint8_t *buf)
{
    /* numpy/lib/format.py: the dict with keys sorted, room for the first
     * axis to grow to 21 digits, then spaces and a newline to a multiple of
     * 64 bytes counted from the file's start */
    char dict[128];
    int n = snprintf(dict, sizeof dict,
                     "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d, 3), }", h, w);
    int digits = snprintf(NULL, 0, "%d", h);
    size_t hl = (size_t)n + (size_t)(21 - digits) + 1;
    size_t total = (10 + hl + 63) / 64 * 64;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)((total - 10) & 0xff);
    buf[9] = (uint8_t)((total - 10) >> 8);
    memset(buf + 10, ' ', total - 10);
    memcpy(buf + 10, dict, (size_t)n);
    buf[total - 1] = '\n';
    return total;
}

/* The pixels (w x h RGB rows, packed) as an .npy member in *out. */
static int store_raw(const uint8_t *pix, int w, int h, uint8_t **out, size_t *out_len, char *err,
                     size_t errcap)
{
    uint8_t hdr[256];
    size_t hl = pack_npy_header(h, w, hdr), n = (size_t)w * (size_t)h * 3;
    if (!(*out = malloc(hl + n))) {
        snprintf(err, errcap, "out of memory");
        return RF_E_NOMEM;
    }
    memcpy(*out, hdr, hl);
    memcpy(*out + hl, pix, n);
    *out_len = hl + n;
    return 0;
}

/* A copy of data[0..len) in *out. */
static int copy_original(const uint8_t *data, size_t len, uint8_t **out, size_t *out_len, char *err,
                         size_t errcap)
{
    if (!(*out = malloc(len ? len : 1))) {
        snprintf(err, errcap, "out of memory");
        return RF_E_NOMEM;
    }
    memcpy(*out, data, len);
    *out_len = len;
    return 0;
}

/* Sniffs data, reads its header, checks the pixel limit: the format's
 * index and the picture's size, or a negative RF_E_* with the reason. */
static int open_picture(pack_coder *c, const uint8_t *data, size_t len, int *w, int *h, char *err,
                        size_t errcap)
{
    int fi = rf__format_sniff(data, len);
    if (fi < 0) {
        snprintf(err, errcap, "not a picture the loader reads (%zu bytes, starting %02x %02x)", len,
                 len ? data[0] : 0, len > 1 ? data[1] : 0);
        return RF_E_DECODE;
    }
    const rf_format *fmt = rf__format_at(fi);
    if (!c->state[fi] && !(c->state[fi] = fmt->create())) {
        snprintf(err, errcap, "out of memory");
        return RF_E_NOMEM;
    }
    int rc = fmt->header(c->state[fi], data, len, PACK_MAX_SCANS, w, h, err, errcap);
    if (rc != 0)
        return rc;
    if ((int64_t)*w * *h > PACK_MAX_PIXELS) {
        fmt->abandon(c->state[fi]);
        snprintf(err, errcap, "picture of %dx%d pixels exceeds the limit of %lld pixels", *w, *h,
                 (long long)PACK_MAX_PIXELS);
        return RF_E_LIMIT;
    }
    return fi;
}

int pack_image_raw_bytes(pack_coder *c, const uint8_t *data, size_t len, const pack_image_opts *o,
                         uint64_t *bytes, char *err, size_t errcap)
{
    int w, h, ow, oh;
    int fi = open_picture(c, data, len, &w, &h, err, errcap);
    if (fi < 0)
        return fi;
    rf__format_at(fi)->abandon(c->state[fi]);
    target_size(w, h, o->max_side, &ow, &oh);
    uint8_t hdr[256];
    *bytes = pack_npy_header(oh, ow, hdr) + (uint64_t)ow * (uint64_t)oh * 3;
    return 0;
}

int pack_image(pack_coder *c, const uint8_t *data, size_t len, const pack_image_opts *o, int store,
               uint8_t **out, size_t *out_len, const char **ext, char *err, size_t errcap)
{
    *out = NULL;
    *out_len = 0;
    *ext = "jpg";
    int w, h;
    int fi = open_picture(c, data, len, &w, &h, err, errcap);
    if (fi < 0)
        return fi;
    const rf_format *fmt = rf__format_at(fi);
    void *st = c->state[fi];
    int ow, oh;
    target_size(w, h, o->max_side, &ow, &oh);
    uint8_t hdr[256];
    uint64_t raw_bytes = pack_npy_header(oh, ow, hdr) + (uint64_t)ow * (uint64_t)oh * 3;
    rf_geom g = {0, 0, w, h, ow, oh, 0, 0, ow, oh, 0};
    rf_region r;
    /* check_tail: the whole stream is decoded, so damage anywhere is found
     * here and not by the loader that reads the shards */
    int rc = fmt->region(st, &g, 1, 1, &r, err, errcap);
    if (rc != 0)
        return rc;
    const char *orig = ow == w && oh == h && o->keep_original ? original_ext(fmt, data, len) : NULL;
    /* a JPEG kept as it came, unless auto would rather store its pixels */
    if (orig && fmt == &rf__format_jpeg &&
        (store == PACK_STORE_JPEG ||
         (store == PACK_STORE_AUTO && (double)raw_bytes > o->raw_max_ratio * (double)len))) {
        *ext = orig;
        return copy_original(data, len, out, out_len, err, errcap);
    }
    size_t need = (size_t)ow * (size_t)oh * 3;
    if (need > c->pix_cap) {
        uint8_t *p = realloc(c->pix, need);
        if (!p) {
            snprintf(err, errcap, "out of memory");
            return RF_E_NOMEM;
        }
        c->pix = p;
        c->pix_cap = need;
    }
    if (rf__resample(c->rs, &g, r.full_w, r.full_h, r.rows, r.stride, r.x0, r.y0, r.w, r.h, c->pix,
                     RF__LAYOUT_NHWC) != 0) {
        snprintf(err, errcap, "out of memory while resizing");
        return RF_E_NOMEM;
    }
    if (store == PACK_STORE_RAW) {
        *ext = "npy";
        return store_raw(c->pix, ow, oh, out, out_len, err, errcap);
    }
    if (orig && fmt == &rf__format_jpeg) { /* auto, raw chosen above */
        *ext = "npy";
        return store_raw(c->pix, ow, oh, out, out_len, err, errcap);
    }
    rc = encode(c->pix, (size_t)ow * 3, ow, oh, o->quality, out, out_len, err, errcap);
    if (rc == 0 && orig && len < *out_len) {
        free(*out);
        *ext = orig;
        rc = copy_original(data, len, out, out_len, err, errcap);
    }
    if (rc == 0 && store == PACK_STORE_AUTO &&
        (double)raw_bytes <= o->raw_max_ratio * (double)*out_len) {
        free(*out);
        *ext = "npy";
        return store_raw(c->pix, ow, oh, out, out_len, err, errcap);
    }
    return rc;
}
