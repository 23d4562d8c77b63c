/*
 * decode.c - one picture's bytes to its place in a batch slot, whatever the
 * format.
 *
 * For each sample: sniff the format from the first bytes, read the header
 * with that format's decoder (formats.h), check the size limit before
 * any pixel memory is allocated, draw the transform's geometry from the
 * sample's own RNG stream, let the format decode just the region the
 * geometry reads (jpeg.c: at a DCT scale where it can, unless
 * RF_P_EXACT asks for full resolution), then resample that region straight
 * into the slot. Bytes of no supported format are an error that says what
 * they look like.
 */
#define _GNU_SOURCE
#include "decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "formats.h"
#include "letterbox.h"
#include "ringfeed.h"
#include "rng.h"
#include "transform.h"

/* The supported formats, in the order they are sniffed. */
static const rf_format *const formats[] = {
    &rf__format_jpeg,
    &rf__format_webp,
    &rf__format_png,
    &rf__format_bmp,
    &rf__format_pnm,
    &rf__format_npy,
};
enum { NFORMATS = sizeof formats / sizeof formats[0] };

struct rf_decoder {
    void *state[NFORMATS]; /* each format's decoder state, for this worker alone */
    rf_resampler *rs;
};

rf_decoder *rf__decoder_create(void)
{
    rf_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    int ok = (d->rs = rf__resampler_create()) != NULL;
    for (int f = 0; ok && f < NFORMATS; f++)
        ok = (d->state[f] = formats[f]->create()) != NULL;
    if (!ok) {
        rf__decoder_destroy(d);
        return NULL;
    }
    return d;
}

void rf__decoder_destroy(rf_decoder *d)
{
    if (!d)
        return;
    for (int f = 0; f < NFORMATS; f++)
        if (d->state[f])
            formats[f]->destroy(d->state[f]);
    rf__resampler_destroy(d->rs);
    free(d);
}

/* Index in formats of the format data is in, or -1. */
static int sniff(const uint8_t *data, size_t len)
{
    for (int f = 0; f < NFORMATS; f++)
        if (formats[f]->sniff(data, len))
            return f;
    return -1;
}

int rf__format_count(void)
{
    return NFORMATS;
}

const rf_format *rf__format_at(int i)
{
    return i >= 0 && i < NFORMATS ? formats[i] : NULL;
}

int rf__format_sniff(const uint8_t *data, size_t len)
{
    return sniff(data, len);
}

/* The reason for bytes no decoder takes: what they look like. */
static int describe_unsupported(const uint8_t *p, size_t len, char *err, size_t errcap)
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

/* The transform's geometry for a width x height picture, from the sample's
 * own stream: the same pixels for any worker. fit: where a fitted picture
 * lies in its frame (letterbox, native sizes). */
static int draw_geometry(const rf_decode_opts *o, int width, int height, rf_geom *g, rf_frame *fr,
                         rf_fit *fit, char *err, size_t errcap)
{
    *fr = (rf_frame){0, 0, 0, 0};
    rf_rng rng = rf__rng_make(o->seed, (uint64_t)o->epoch, (uint64_t)o->sample);
    int oh = o->out_h > 0 ? o->out_h : o->size, ow = o->out_w > 0 ? o->out_w : o->size;
    fit->h = oh;
    fit->w = ow;
    fit->scale = 1.0f;
    if (o->transform == RF_TRANSFORM_RANDOM_RESIZED_CROP) {
        const rf_rrc_range *def = &rf__rrc_default;
        rf_rrc_range rr = {o->scale_min > 0 ? o->scale_min : def->scale_lo,
                           o->scale_max > 0 ? o->scale_max : def->scale_hi,
                           o->ratio_min > 0 ? o->ratio_min : def->ratio_lo,
                           o->ratio_max > 0 ? o->ratio_max : def->ratio_hi};
        if (o->ratio_relative) { /* a bucket's crops keep its shape on average */
            rr.ratio_lo *= (double)ow / (double)oh;
            rr.ratio_hi *= (double)ow / (double)oh;
        }
        rf__geom_rrc_to(width, height, oh, ow, &rr, &rng, g);
    } else if (o->transform == RF_TRANSFORM_CENTER && o->cover) {
        rf__geom_cover(width, height, oh, ow, g);
    } else if (o->transform == RF_TRANSFORM_CENTER) {
        rf_resize_to to = {o->resize_side, o->resize_h, o->resize_w};
        if (!to.side && !to.h)
            to = rf__resize_default(oh, ow);
        rf__geom_center_to(width, height, oh, ow, &to, g);
    } else if (o->transform == RF_TRANSFORM_RESIZE) {
        rf__geom_resize(width, height, oh, ow, g);
    } else if (o->transform == RF_TRANSFORM_LETTERBOX) {
        rf__geom_letterbox(width, height, oh, ow, o->top_left, g, fr, fit);
    } else if (o->max_side > 0) {
        rf__geom_native(width, height, o->max_side, g, fr, fit);
    } else {
        if (width != ow || height != oh) {
            snprintf(err, errcap, "picture is %dx%d but transform \"none\" needs %dx%d", width,
                     height, ow, oh);
            return RF_E_DECODE;
        }
        rf__geom_none(width, height, ow, g);
        g->out_h = g->crop_h = oh;
    }
    g->flip = o->flip ? rf__rng_uniform(&rng) < 0.5 : 0;
    return 0;
}

int rf__decode_geometry(rf_decoder *d, const uint8_t *data, size_t len, const rf_decode_opts *o,
                        rf_geom *g, rf_frame *frame, int *width, int *height, char *err,
                        size_t errcap)
{
    int f = sniff(data, len);
    if (f < 0)
        return describe_unsupported(data, len, err, errcap);
    int rc = formats[f]->header(d->state[f], data, len, o->max_scans, width, height, err, errcap);
    if (rc != 0)
        return rc;
    rf_fit fit;
    rf_frame fr;
    rc = draw_geometry(o, *width, *height, g, &fr, &fit, err, errcap);
    if (frame)
        *frame = fr;
    formats[f]->abandon(d->state[f]);
    return rc;
}

int rf__decode_sample(rf_decoder *d, const uint8_t *data, size_t len, const rf_decode_opts *o,
                      uint8_t *dst, char *err, size_t errcap, rf_decode_times *t)
{
    memset(t, 0, sizeof *t);
    int f = sniff(data, len);
    if (f < 0)
        return describe_unsupported(data, len, err, errcap);
    const rf_format *fmt = formats[f];
    void *st = d->state[f];

    int64_t t0 = rf__now_ns();
    int rc = fmt->header(st, data, len, o->max_scans, &t->width, &t->height, err, errcap);
    if (rc != 0)
        return rc;
    /* Before any pixel memory: the header is all that was read. */
    if ((int64_t)t->width * t->height > o->max_pixels) {
        fmt->abandon(st);
        snprintf(err, errcap, "picture of %ux%u pixels exceeds the limit of %lld pixels",
                 (unsigned)t->width, (unsigned)t->height, (long long)o->max_pixels);
        return RF_E_LIMIT;
    }
    rf_geom g;
    rf_frame fr;
    rf_fit fit;
    if ((rc = draw_geometry(o, t->width, t->height, &g, &fr, &fit, err, errcap)) != 0) {
        fmt->abandon(st);
        return rc;
    }
    int64_t t1 = rf__now_ns();
    t->header_ns = t1 - t0;

    rf_region r;
    /* RF_P_EXACT: full resolution, so the pixels are those PIL decodes. */
    int max_denom = o->exact ? 1 : 8;
    rc = fmt->region(st, &g, max_denom, o->check_tail, &r, err, errcap);
    t->denom = r.denom;
    if (rc != 0)
        return rc;
    t->whole = r.whole;
    int64_t t2 = rf__now_ns();
    t->decode_ns = t2 - t1;

    int layout = o->layout == RF_LAYOUT_NCHW ? RF__LAYOUT_NCHW : RF__LAYOUT_NHWC;
    if (rf__resample_into(d->rs, &g, &fr, r.full_w, r.full_h, r.rows, r.stride, r.x0, r.y0, r.w,
                          r.h, dst, layout) != 0) {
        snprintf(err, errcap, "out of memory while resizing");
        return RF_E_NOMEM;
    }
    rf__frame_fill(dst, o->layout, &g, &fr, o->fill);
    t->fit_h = fit.h;
    t->fit_w = fit.w;
    t->scale = fit.scale;
    t->resize_ns = rf__now_ns() - t2;
    return 0;
}
