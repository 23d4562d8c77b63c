/*
 * webp.c - WebP (lossy VP8, lossless VP8L, with or without alpha;
 * animated: the first frame) with libwebp, giving PIL's pixels.
 *
 * Pillow (9.x, built with libwebpdemux) opens every WebP, still or animated,
 * through libwebp's WebPAnimDecoder: the demuxer takes frame 1, WebPDecode
 * decodes it with the default options (fancy upsampling, no dithering, alpha
 * not premultiplied) into a canvas cleared to transparent black, and
 * convert("RGB") keeps R, G, B and drops A without compositing. Here the
 * demuxer takes the same frame and WebPDecode writes it, with the same
 * options, as RGB into the worker's canvas: libwebp computes R, G, B the same
 * way for its RGB and RGBA outputs, so the bytes are PIL's. The first frame
 * of an animation is a key frame (nothing blended into it), so it alone is
 * what PIL shows for the file.
 *
 * The picture is always decoded whole (the region is the full canvas, no
 * scaling): libwebp's cropping restarts its upsampler at the crop's edges,
 * which would change pixels there. The header (WebPGetFeatures) gives the
 * canvas size without allocating anything, so decode.c checks max_pixels
 * before any pixel memory exists. Errors carry libwebp's status name.
 *
 * Built without libwebp (RF_HAVE_WEBP unset), WebP files are still sniffed
 * and refused with a reason that says so.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "ringfeed.h"

#ifdef RF_HAVE_WEBP
#include <webp/decode.h>
#include <webp/demux.h>
#endif

static int webp_sniff(const uint8_t *data, size_t len)
{
    return len >= 12 && !memcmp(data, "RIFF", 4) && !memcmp(data + 8, "WEBP", 4);
}

#ifdef RF_HAVE_WEBP

/* The state of one worker: the picture whose header was read, and the
 * canvas it is decoded into (grown, never shrunk). */
typedef struct rf_webp {
    const uint8_t *data; /* borrowed from header() until region() or abandon() */
    size_t len;
    int width, height; /* the canvas */
    uint8_t *rgb;
    size_t rgb_cap;
} rf_webp;

static void *webp_create(void)
{
    return calloc(1, sizeof(rf_webp));
}

static void webp_destroy(void *state)
{
    rf_webp *w = state;
    if (!w)
        return;
    free(w->rgb);
    free(w);
}

static void webp_abandon(void *state)
{
    rf_webp *w = state;
    w->data = NULL;
    w->len = 0;
}

/* libwebp's name for a status, and what it means for a file. */
static const char *status_name(VP8StatusCode s)
{
    switch (s) {
    case VP8_STATUS_OK:
        return "VP8_STATUS_OK";
    case VP8_STATUS_OUT_OF_MEMORY:
        return "VP8_STATUS_OUT_OF_MEMORY (out of memory)";
    case VP8_STATUS_INVALID_PARAM:
        return "VP8_STATUS_INVALID_PARAM (invalid parameter)";
    case VP8_STATUS_BITSTREAM_ERROR:
        return "VP8_STATUS_BITSTREAM_ERROR (corrupt data)";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
        return "VP8_STATUS_UNSUPPORTED_FEATURE (unsupported feature)";
    case VP8_STATUS_SUSPENDED:
        return "VP8_STATUS_SUSPENDED";
    case VP8_STATUS_USER_ABORT:
        return "VP8_STATUS_USER_ABORT";
    case VP8_STATUS_NOT_ENOUGH_DATA:
        return "VP8_STATUS_NOT_ENOUGH_DATA (truncated)";
    }
    return "unknown VP8 status";
}

static int webp_header(void *state, const uint8_t *data, size_t len, int max_scans, int *width,
                       int *height, char *err, size_t errcap)
{
    rf_webp *w = state;
    WebPBitstreamFeatures f;
    /* Reads the RIFF, VP8X and frame headers only; allocates nothing. */
    VP8StatusCode s = WebPGetFeatures(data, len, &f);
    if (s != VP8_STATUS_OK) {
        snprintf(err, errcap, "WebP header: %s", status_name(s));
        return s == VP8_STATUS_OUT_OF_MEMORY ? RF_E_NOMEM : RF_E_DECODE;
    }
    if (f.width <= 0 || f.height <= 0) {
        snprintf(err, errcap, "WebP header: picture of %dx%d pixels", f.width, f.height);
        return RF_E_DECODE;
    }
    w->data = data;
    w->len = len;
    w->width = *width = f.width;
    w->height = *height = f.height;
    return 0;
}

/* Why the demuxer refused data that WebPGetFeatures accepted: the RIFF
 * chunk's size against the bytes present tells a cut file from a bad one. */
static void demux_error(const uint8_t *p, size_t len, char *err, size_t errcap)
{
    uint32_t riff =
        (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
    if ((uint64_t)riff + 8 > len)
        snprintf(err, errcap,
                 "WebP container truncated: the RIFF header announces %llu bytes, "
                 "the file has %zu",
                 (unsigned long long)riff + 8, len);
    else
        snprintf(err, errcap, "WebP container: invalid chunk layout");
}

/* Scratch for the canvas; the old contents are not needed, so it is
 * replaced rather than realloc'ed. */
static int rgb_reserve(rf_webp *w, size_t need)
{
    if (w->rgb_cap >= need)
        return 0;
    free(w->rgb);
    w->rgb_cap = 0;
    w->rgb = malloc(need);
    if (!w->rgb)
        return -1;
    w->rgb_cap = need;
    return 0;
}

static int webp_region(void *state, rf_geom *g, int max_denom, int check_tail, rf_region *r,
                       char *err, size_t errcap)
{
    rf_webp *w = state;
    memset(r, 0, sizeof *r);
    r->denom = 1;
    WebPData in = {w->data, w->len};
    w->data = NULL;
    WebPDemuxer *dmx = WebPDemux(&in);
    if (!dmx) {
        demux_error(in.bytes, in.size, err, errcap);
        return RF_E_DECODE;
    }
    int rc = 0;
    WebPIterator it;
    memset(&it, 0, sizeof it);
    int cw = (int)WebPDemuxGetI(dmx, WEBP_FF_CANVAS_WIDTH);
    int ch = (int)WebPDemuxGetI(dmx, WEBP_FF_CANVAS_HEIGHT);
    size_t stride = (size_t)w->width * 3;
    if (cw != w->width || ch != w->height) {
        snprintf(err, errcap, "WebP container: canvas %dx%d differs from the header's %dx%d", cw,
                 ch, w->width, w->height);
        rc = RF_E_DECODE;
    } else if (!WebPDemuxGetFrame(dmx, 1, &it)) {
        snprintf(err, errcap, "WebP container without a frame");
        rc = RF_E_DECODE;
    } else if (it.x_offset < 0 || it.y_offset < 0 || it.width <= 0 || it.height <= 0 ||
               it.x_offset + it.width > cw || it.y_offset + it.height > ch) {
        snprintf(err, errcap, "WebP frame %dx%d at (%d, %d) outside the %dx%d canvas", it.width,
                 it.height, it.x_offset, it.y_offset, cw, ch);
        rc = RF_E_DECODE;
    } else if (rgb_reserve(w, stride * (size_t)ch) != 0) {
        snprintf(err, errcap, "out of memory for a %dx%d WebP canvas", cw, ch);
        rc = RF_E_NOMEM;
    }
    if (rc == 0) {
        /* A frame smaller than the canvas leaves transparent black around it,
         * as PIL's canvas (RGB 0, 0, 0 once the alpha is dropped). */
        if (it.width != cw || it.height != ch)
            memset(w->rgb, 0, stride * (size_t)ch);
        WebPDecoderConfig cfg;
        if (!WebPInitDecoderConfig(&cfg)) {
            snprintf(err, errcap, "libwebp: decoder version mismatch");
            rc = RF_E_DECODE;
        } else {
            cfg.output.colorspace = MODE_RGB;
            cfg.output.is_external_memory = 1;
            cfg.output.u.RGBA.rgba =
                w->rgb + (size_t)it.y_offset * stride + (size_t)it.x_offset * 3;
            cfg.output.u.RGBA.stride = (int)stride;
            cfg.output.u.RGBA.size = stride * (size_t)(it.height - 1) + (size_t)it.width * 3;
            VP8StatusCode s = WebPDecode(it.fragment.bytes, it.fragment.size, &cfg);
            WebPFreeDecBuffer(&cfg.output); /* external memory: frees nothing of ours */
            if (s != VP8_STATUS_OK) {
                snprintf(err, errcap, "WebP decode: %s", status_name(s));
                rc = s == VP8_STATUS_OUT_OF_MEMORY ? RF_E_NOMEM : RF_E_DECODE;
            }
        }
    }
    WebPDemuxReleaseIterator(&it);
    WebPDemuxDelete(dmx);
    if (rc != 0)
        return rc;
    r->rows = w->rgb;
    r->stride = stride;
    r->full_w = r->w = cw;
    r->full_h = r->h = ch;
    r->x0 = r->y0 = 0;
    r->whole = 1;
    return 0;
}

#else /* !RF_HAVE_WEBP */

#define NO_WEBP                                                                                    \
    "unsupported format: WebP (this build has no libwebp: its features lack \"webp\"; install "   \
    "libwebp-dev and rebuild)"

/* Any non-NULL state: decode.c treats NULL as out of memory. */
static void *webp_create(void)
{
    static char none;
    return &none;
}

static void webp_destroy(void *state)
{
}

static void webp_abandon(void *state)
{
}

static int webp_header(void *state, const uint8_t *data, size_t len, int max_scans, int *width,
                       int *height, char *err, size_t errcap)
{
    snprintf(err, errcap, NO_WEBP);
    return RF_E_DECODE;
}

static int webp_region(void *state, rf_geom *g, int max_denom, int check_tail, rf_region *r,
                       char *err, size_t errcap)
{
    snprintf(err, errcap, NO_WEBP);
    return RF_E_DECODE;
}

#endif /* RF_HAVE_WEBP */

const rf_format rf__format_webp = {
    webp_sniff, webp_create, webp_destroy, webp_header, webp_region, webp_abandon,
};
