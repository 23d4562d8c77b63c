/*
 * shapes_api.c - the public face of the output's shapes (include/ringfeed.h,
 * "Shapes"): the bucket list, a batch's shape, its pictures' sizes and
 * scales in their frames, where a bucketed position is sought, and the
 * loader's start steps for buckets (the pictures' sizes, the buckets, the
 * order by bucket, the shapes the ring and the workers start with).
 */
#define _GNU_SOURCE
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "loader.h"
#include "resample.h"

int rf_loader_set_buckets(rf_loader *l, const int32_t *hw, int n)
{
    if (!l)
        return RF_E_INVALID;
    if (l->started) {
        rf__loader_err(l, "options: buckets cannot change after rf_loader_start");
        return RF_E_STATE;
    }
    char err[300];
    int rc = rf__option_set_buckets(&l->opts, hw, n, err, sizeof err);
    if (rc != RF_OK)
        rf__loader_err(l, "%s", err);
    return rc;
}

int rf_loader_buckets(const rf_loader *l, int32_t *hw, int cap)
{
    if (!l || !l->started || cap < 0 || (cap > 0 && !hw))
        return !l || cap < 0 || (cap > 0 && !hw) ? RF_E_INVALID : 0;
    for (int b = 0; b < l->buckets.n && b < cap; b++) {
        hw[2 * b] = l->buckets.hw[b][0];
        hw[2 * b + 1] = l->buckets.hw[b][1];
    }
    return l->buckets.n;
}

int rf_loader_sample_bucket(const rf_loader *l, int64_t sample)
{
    if (!l || !l->started || !l->buckets.n || sample < 0 || sample >= l->src.n)
        return -1;
    return l->buckets.of[sample];
}

int rf_batch_shape(const rf_batch *b, int *height, int *width)
{
    if (!b || !rf__ring_lease_live(b))
        return b ? RF_E_RELEASED : RF_E_INVALID;
    if (height)
        *height = b->h;
    if (width)
        *width = b->w;
    return RF_OK;
}

const int32_t *rf_batch_sizes(const rf_batch *b)
{
    return b && rf__ring_lease_live(b) && b->loader->cfg.framed ? b->sizes : NULL;
}

const float *rf_batch_scales(const rf_batch *b)
{
    return b && rf__ring_lease_live(b) && b->loader->cfg.framed ? b->scales : NULL;
}

int rf_batch_bucket(const rf_batch *b)
{
    return b && rf__ring_lease_live(b) ? b->slot->shape.bucket : -1;
}

int64_t rf_loader_rest_unit(const rf_loader *l)
{
    if (!l || !l->started || !l->buckets.n)
        return 0;
    rf_loader *m = (rf_loader *)l;
    pthread_mutex_lock(&m->mu);
    int64_t u = rf__sampler_unit(&l->sampler);
    pthread_mutex_unlock(&m->mu);
    return u;
}

int rf_loader_seek_rest_unit(rf_loader *l, int64_t epoch, int64_t start, int64_t unit,
                             int64_t batch)
{
    int rc = rf__loader_usable(l);
    if (rc)
        return rc;
    if (!l->buckets.n) {
        if (unit != 0) {
            rf__loader_err(l,
                           "loader: a unit (%lld) is for a loader with buckets; this one has "
                           "none (0 seeks as rf_loader_seek_rest)",
                           (long long)unit);
            return RF_E_INVALID;
        }
        return rf_loader_seek_rest(l, epoch, start, batch);
    }
    return rf__loader_seek_buckets(l, epoch, start, unit, batch);
}

int rf__loader_seek_buckets(rf_loader *l, int64_t epoch, int64_t start, int64_t unit, int64_t batch)
{
    if (epoch < 0 || batch < 0 || start < 0 || start > l->src.n || unit < 0) {
        rf__loader_err(l,
                       "loader: cannot seek to epoch %lld, position %lld, unit %lld, batch %lld "
                       "(%lld samples)",
                       (long long)epoch, (long long)start, (long long)unit, (long long)batch,
                       (long long)l->src.n);
        return RF_E_INVALID;
    }
    rf_sampler *s = &l->sampler;
    /* Under the mutex, which the dispatcher holds while it reads the
     * sampler: it never sees a split that is not the position's. A split
     * that cannot be sought puts the previous one back (its room is there:
     * the split's arrays only grow, sampler_bucket.c). */
    pthread_mutex_lock(&l->mu);
    int64_t e0 = s->epoch, s0 = s->start, u0 = rf__sampler_unit(s);
    rf__sampler_want_unit(s, unit);
    int rc = rf__bucket_set_rest(s, epoch, start);
    int64_t nb = s->num_batches;
    if (rc == 0 && batch > nb) {
        rf__loader_err(l, "loader: cannot seek to epoch %lld batch %lld (%lld batches %s)",
                       (long long)epoch, (long long)batch, (long long)nb,
                       start ? "in this rest of the epoch" : "per epoch");
        rc = RF_E_INVALID;
    } else if (rc != 0) {
        rf__loader_err(l, "sampler: out of memory ordering epoch %lld by bucket", (long long)epoch);
    }
    if (rc != 0) {
        rf__sampler_want_unit(s, u0);
        int back = rf__bucket_set_rest(s, e0, s0);
        (void)back;
        assert(back == 0);
    } else {
        rf__dispatch_seek(&l->disp, epoch, start, batch);
        l->last_return_ns = 0; /* time between epochs is not a training step */
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

/* ---- start ------------------------------------------------------------------ */

int rf__loader_open_buckets(rf_loader *l)
{
    rf_config *c = &l->cfg;
    if (!c->bucketed)
        return 0;
    if (l->mix) { /* the mixture's order is the sampler's fill, the buckets' another */
        rf__loader_err(l, "options: aspect-ratio buckets are not available with a mixture of "
                          "sources; bucket each source in a loader of its own");
        return RF_E_INVALID;
    }
    int64_t n = l->src.n;
    uint32_t *dims = malloc((size_t)(n > 0 ? n : 1) * 2 * sizeof *dims);
    if (!dims) {
        rf__loader_err(l, "loader: out of memory for %lld pictures' sizes", (long long)n);
        return RF_E_NOMEM;
    }
    const char *nokeep = getenv("RINGFEED_SIZES_KEEP");
    rf_sizes_opts so = {.spec = l->spec,
                        .cache_dir = l->cache_dir,
                        .backend = c->io_backend == RF_IO_URING   ? RF__IO_URING
                                   : c->io_backend == RF_IO_PREAD ? RF__IO_PREAD
                                                                  : 0,
                        .depth = c->read_depth > 0 ? c->read_depth : 64,
                        .keep = !(nokeep && !strcmp(nokeep, "0"))};
    char err[600];
    int rc = rf__sizes_learn(&l->src, &so, dims, &l->sizes, err, sizeof err);
    if (rc < 0) {
        free(dims);
        rf__loader_err(l, "%s", err);
        return rc;
    }
    int32_t hw[RF__MAX_BUCKETS][2];
    int nb = c->buckets.n;
    if (nb > 0)
        memcpy(hw, c->buckets.hw, (size_t)nb * sizeof hw[0]);
    else
        nb =
            rf__buckets_auto(dims, n, c->nbuckets_auto, c->out_h, c->out_w, c->bucket_multiple, hw);
    rc = rf__buckets_assign(&l->buckets, dims, n, (const int32_t(*)[2])hw, nb);
    free(dims);
    if (rc < 0) {
        rf__loader_err(l, "loader: out of memory for %lld samples' buckets", (long long)n);
        return rc;
    }
    /* the buckets made are the buckets: the slots hold the largest */
    c->buckets.n = nb;
    memcpy(c->buckets.hw, hw, (size_t)nb * sizeof hw[0]);
    c->sample_bytes = rf__shape_pixels(c) * 3 * rf__convert_elem_size(c->dtype);
    return 0;
}

int rf__loader_order_buckets(rf_loader *l)
{
    if (!l->buckets.n)
        return 0;
    int64_t counts[RF__BUCKETS_MAX];
    for (int b = 0; b < l->buckets.n; b++)
        counts[b] = l->buckets.first[b + 1] - l->buckets.first[b];
    int rc = rf__sampler_set_buckets(&l->sampler, l->buckets.of, counts, l->buckets.n,
                                     l->cfg.bucket_shared);
    if (rc == 0)
        rc = rf__bucket_set_rest(&l->sampler, 0, 0); /* made here, where it may fail */
    if (rc < 0)
        rf__loader_err(l, "sampler: out of memory ordering %lld samples by bucket",
                       (long long)l->src.n);
    return rc;
}

void rf__loader_wire_shapes(rf_loader *l)
{
    const rf_config *c = &l->cfg;
    if (c->is_records)
        return;
    int side = c->max_side;
    rf__ring_set_shape(&l->ring, side ? side : c->out_h, side ? side : c->out_w, c->sample_bytes);
    if (l->buckets.n) {
        l->work.buckets = &l->buckets;
        l->disp.buckets = &l->buckets;
        l->disp.elem_bytes = rf__convert_elem_size(c->dtype);
    }
}

void rf__loader_shapes_stats(void *ctx, rf_json *j)
{
    const rf_loader *l = ctx;
    const rf_config *c = &l->cfg;
    static const char *const tn[] = {"none", "center", "random_resized_crop", "resize",
                                     "letterbox"};
    rf__json_fmt(j, "\"transform\": \"%s\", \"height\": %d, \"width\": %d",
                 tn[c->transform], c->out_h, c->out_w);
    if (c->max_side > 0)
        rf__json_fmt(j, ", \"max_side\": %d", c->max_side);
    if (l->buckets.n) {
        rf__json_fmt(j, ", \"bucket_shared\": %s, \"buckets\": [",
                     c->bucket_shared ? "true" : "false");
        for (int b = 0; b < l->buckets.n; b++)
            rf__json_fmt(j, "%s{\"height\": %d, \"width\": %d, \"samples\": %lld}", b ? ", " : "",
                         l->buckets.hw[b][0], l->buckets.hw[b][1],
                         (long long)(l->buckets.first[b + 1] - l->buckets.first[b]));
        const rf_sizes_stats *z = &l->sizes;
        rf__json_fmt(j,
                     "], \"sizes\": {\"from_manifest\": %lld, \"from_kept\": %lld, \"scanned\": "
                     "%lld, \"unknown\": %lld, \"seconds\": %.6f, \"bytes_read\": %llu, "
                     "\"kept_written\": %s, \"kept\": ",
                     (long long)z->from_manifest, (long long)z->from_kept, (long long)z->scanned,
                     (long long)z->unknown, (double)z->scan_ns / 1e9,
                     (unsigned long long)z->bytes_read, z->kept_written ? "true" : "false");
        rf__json_str(j, z->kept);
        rf__json_raw(j, ", \"first_error\": ");
        rf__json_str(j, z->first_error);
        rf__json_raw(j, "}");
    }
}

void rf__explain_shape(const rf_loader *l, int64_t sample, const rf_geom *g, const rf_frame *fr,
                       rf_json *j)
{
    const rf_config *c = &l->cfg;
    static const char *const tn[] = {"none", "center", "random_resized_crop", "resize",
                                     "letterbox"};
    int oh = fr->w > 0 ? fr->h : g->crop_h, ow = fr->w > 0 ? fr->w : g->crop_w;
    rf__json_fmt(j, ", \"transform\": \"%s\", \"output\": [%d, %d]", tn[c->transform], oh, ow);
    if (l->buckets.n)
        rf__json_fmt(j, ", \"bucket\": %d", l->buckets.of[sample]);
    if (c->framed) {
        /* where the picture lies in its frame, and its scale as the batch
         * says it (letterbox.c's rule) */
        int pw = (int)(g->x1 - g->x0), ph = (int)(g->y1 - g->y0), m = pw > ph ? pw : ph;
        double scale = c->max_side > 0 ? (m <= c->max_side ? 1.0 : (double)c->max_side / m)
                       : (int64_t)pw * oh <= (int64_t)ow * ph ? (double)oh / ph
                                                              : (double)ow / pw;
        rf__json_fmt(j,
                     ", \"fit\": {\"top\": %d, \"left\": %d, \"height\": %d, \"width\": %d, "
                     "\"scale\": %.9g}",
                     fr->y, fr->x, g->crop_h, g->crop_w, (double)(float)scale);
    }
}
