/*
 * work.c - one sample on a decode worker (see work.h).
 *
 * Nothing here takes a lock. The slot's fields a worker writes (pixels, the
 * substitute's sample and label, bad-sample records, errcode/errmsg) are
 * published to the consumer by the pending decrement in
 * rf__dispatch_job_done (acq_rel) and the lock its last sample takes.
 */
#define _GNU_SOURCE
#include "work.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bucket.h"
#include "clock.h"
#include "dispatch.h"
#include "letterbox.h"
#include "remote.h"
#include "ring.h"
#include "rng.h"
#include "mix.h"

int rf__work_init(rf_work *k, const rf_config *cfg, const rf_source *src,
                  const _Atomic int64_t *gen, int nworkers, char *err, size_t errcap)
{
    memset(k, 0, sizeof *k);
    k->cfg = cfg;
    k->src = src;
    k->gen = gen;
    k->sample_bytes = cfg->sample_bytes;
    /* Built once: per sample only epoch, sample and check_tail change. */
    k->tmpl = (rf_decode_opts){.transform = cfg->transform,
                               .size = cfg->out_w,
                               .out_h = cfg->out_h,
                               .out_w = cfg->out_w,
                               .resize_side = cfg->resize.side,
                               .resize_h = cfg->resize.h,
                               .resize_w = cfg->resize.w,
                               .cover = cfg->bucketed && cfg->transform == RF_TRANSFORM_CENTER,
                               .ratio_relative = cfg->bucketed,
                               .top_left = cfg->top_left,
                               .max_side = cfg->max_side,
                               .fill = {cfg->fill[0], cfg->fill[1], cfg->fill[2]},
                               .flip = cfg->flip,
                               .layout = cfg->layout,
                               .max_pixels = cfg->max_pixels,
                               .max_scans = cfg->max_scans,
                               .seed = cfg->seed,
                               .exact = cfg->exact,
                               .scale_min = cfg->scale_min,
                               .scale_max = cfg->scale_max,
                               .ratio_min = cfg->ratio_min,
                               .ratio_max = cfg->ratio_max};
    if (cfg->verify == RF_VERIFY_ONCE && !rf__source_records(src)) {
        k->verified_bytes = ((size_t)src->n / 64 + 1) * sizeof *k->verified;
        k->verified = calloc(1, k->verified_bytes);
        if (!k->verified) {
            snprintf(err, errcap, "loader: out of memory for %lld samples", (long long)src->n);
            rf__work_free(k);
            return RF_E_NOMEM;
        }
    }
    k->w = calloc((size_t)nworkers, sizeof *k->w);
    if (!k->w) {
        snprintf(err, errcap, "loader: out of memory");
        rf__work_free(k);
        return RF_E_NOMEM;
    }
    k->nworkers = nworkers;
    if (cfg->post)
        rf__convert_init(&k->cv, cfg->dtype, cfg->layout, cfg->recipe.mean, cfg->recipe.std,
                         cfg->recipe.normalized);
    k->in_place = cfg->dtype == RF_DTYPE_UINT8 && cfg->layout == RF_LAYOUT_NHWC;
    /* a float NCHW output with nothing that needs pixels together: decoded
     * in planes, converted plane by plane */
    k->planar = rf__dtype_is_float(cfg->dtype) && cfg->layout == RF_LAYOUT_NCHW &&
                cfg->recipe.aug.n == 0 && !cfg->recipe.sample_fn;
    size_t img_bytes = rf__shape_pixels(cfg) * 3; /* the largest picture (or frame) */
    for (int i = 0; i < nworkers; i++) {
        k->w[i].dec = rf__decoder_create();
        if (!k->w[i].dec) {
            snprintf(err, errcap, "decode: cannot create a JPEG decompressor");
            rf__work_free(k);
            return RF_E_NOMEM;
        }
        if (cfg->post && (!(k->w[i].img = malloc(img_bytes)) ||
                          !(k->w[i].plan = malloc(sizeof *k->w[i].plan)))) {
            snprintf(err, errcap, "loader: out of memory for the workers' pictures");
            rf__work_free(k);
            return RF_E_NOMEM;
        }
    }
    return 0;
}

void rf__work_free(rf_work *k)
{
    for (int i = 0; k->w && i < k->nworkers; i++) {
        rf__decoder_destroy(k->w[i].dec);
        free(k->w[i].sub.buf);
        free(k->w[i].img);
        free(k->w[i].plan);
        rf__aug_scratch_free(&k->w[i].scr);
    }
    free(k->w);
    free((void *)k->verified);
    memset(k, 0, sizeof *k);
}

static void read_reason(const rf_read *rd, char *out, size_t cap)
{
    const char *name = strerrorname_np(rd->err);
    snprintf(out, cap, "%s: %s (%s)", rd->what, strerror(rd->err), name ? name : "?");
}

/* The substitute for a bad sample, drawn from (seed, epoch, sample): any
 * sample (of a mixture, of the same source); of a remote shard, a sample of
 * the same shard, the one shard sure to be in the cache (its job's pin
 * lasts until the job ends: rf__dispatch_job_done). A tar source's shards
 * are indexed one after the other, so a shard's samples are one run of
 * indexes. With aspect-ratio buckets, a sample of the batch's bucket (of
 * the shard, when it has one; bucket.h): its picture fits the batch's shape
 * as the bad one's would. */
static int64_t draw_substitute(const rf_work *k, int64_t sample, int bucket, rf_rng *rng)
{
    int64_t i = sample;
    const rf_source *src = rf__source_at(k->src, &i);
    int64_t base = sample - i; /* a mixture's source's first global index */
    if (!src->remote)
        return k->buckets ? rf__bucket_draw(k->buckets, bucket, rng)
                          : base + (int64_t)rf__rng_below(rng, (uint64_t)src->n);
    int64_t lo = i, hi = i + 1;
    while (lo > 0 && src->shard[lo - 1] == src->shard[i])
        lo--;
    while (hi < src->n && src->shard[hi] == src->shard[i])
        hi++;
    if (k->buckets) {
        int64_t in = rf__bucket_draw_in(k->buckets, bucket, base + lo, base + hi, rng);
        if (in >= 0)
            return in;
    }
    return base + lo + (int64_t)rf__rng_below(rng, (uint64_t)(hi - lo));
}

/* Reads a substitute sample synchronously (rare path: on_error = skip). */
static int read_sample_sync(const rf_work *k, int64_t sample, rf_read *rd)
{
    rd->path = rf__source_read_path(k->src, sample);
    /* a remote substitute is of the job's own shard: read through its pin */
    int64_t i = sample;
    const rf_source *src = rf__source_at(k->src, &i);
    rd->use_fd = src->remote != NULL;
    rd->fd = rd->use_fd ? rf__remote_pin_fd(src->remote, src, i) : -1;
    rf__source_extent(k->src, sample, &rd->ranged, &rd->offset, &rd->length);
    rd->sample = sample;
    return rf__read_sync(rd, k->cfg->max_file_bytes);
}

static int is_verified(const rf_work *k, int64_t sample)
{
    uint64_t word = atomic_load_explicit(&k->verified[sample >> 6], memory_order_relaxed);
    return (int)(word >> (sample & 63) & 1);
}

/* A sample decoded to its end marker without fault: trusted from now on. */
static void mark_verified(rf_work *k, int64_t sample)
{
    uint64_t bit = UINT64_C(1) << (sample & 63);
    if (!(atomic_fetch_or_explicit(&k->verified[sample >> 6], bit, memory_order_relaxed) & bit))
        atomic_fetch_add_explicit(&k->nverified, 1, memory_order_relaxed);
}

/* Tar extras: copies sample's extra members out of its span (rd) into the
 * slot's extras for its position (xdst, xlen); RF_E_LIMIT when they need
 * more than extras_bytes. */
static int copy_extras(const rf_work *k, const rf_read *rd, int64_t sample, uint8_t *xdst,
                       uint32_t *xlen, char *reason, size_t cap)
{
    const rf_source *src = k->src;
    uint64_t used = 0;
    for (int e = 0; e < src->nextras; e++) {
        uint64_t rel;
        uint32_t len;
        if (!rf__source_extra_in_span(src, sample, e, &rel, &len)) {
            xlen[e] = RF_SOURCE_ABSENT;
            continue;
        }
        if (len > k->cfg->extras_bytes - used) {
            char key[160]; /* a longer key is cut: the message also names the picture */
            rf__source_key(src, sample, key, sizeof key);
            snprintf(reason, cap,
                     "extras: member %s.%s is %u bytes, more than the %llu left of "
                     "extras_bytes=%llu for this sample's extras",
                     key, k->cfg->names.extras[e], len,
                     (unsigned long long)(k->cfg->extras_bytes - used),
                     (unsigned long long)k->cfg->extras_bytes);
            return RF_E_LIMIT;
        }
        if (rel + len > rd->len) { /* the reader delivered the whole span: never */
            snprintf(reason, cap, "extras: short read (%zu bytes)", rd->len);
            return RF_E_IO;
        }
        memcpy(xdst + used, rf__read_bytes(rd) + rel, len);
        xlen[e] = len;
        used += len;
    }
    return 0;
}

/* Single writer: a relaxed load and store, no locked instruction. */
static void counter_add(_Atomic int64_t *c, int64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                          memory_order_relaxed);
}

/* After the geometry (cfg->post): the augmentations on the worker's picture,
 * the callback, then the conversion into dst. The picture is fh x fw
 * (rows fw * 3 bytes); the augmentations and the callback see only its
 * region r (a fitted picture's place in its frame, else all of it), so that
 * a frame's padding stays the fill; the conversion takes it all. */
static int post_sample(rf_work *k, rf_worker_state *w, int worker, int64_t epoch, int64_t sample,
                       uint8_t *pic, uint8_t *dst, int fh, int fw, const rf_region_box *rg,
                       char *reason, size_t cap)
{
    const rf_config *cfg = k->cfg;
    const rf_recipe *r = &cfg->recipe;
    int fl = rf__convert_defers(cfg->dtype, r->normalized);
    ptrdiff_t stride = (ptrdiff_t)fw * 3;
    uint8_t *px = pic + (ptrdiff_t)rg->y * stride + (ptrdiff_t)rg->x * 3;
    int64_t t0 = rf__now_ns(), c0 = rf__thread_cpu_ns();
    w->plan->n = 0;
    if (r->aug.n > 0) {
        rf_rng rng = rf__aug_stream(cfg->seed, epoch, sample);
        rf__aug_draw(&r->aug, rg->w, rg->h, &rng, w->plan);
        if (fl && rf__aug_plan_defer(w->plan) > 0)
            for (int i = 0; i < w->plan->n; i++)
                if (w->plan->op[i].deferred) { /* erased in the frame's coordinates */
                    w->plan->op[i].top += rg->y;
                    w->plan->op[i].left += rg->x;
                }
        int rc = rf__aug_run(w->plan, px, rg->w, rg->h, stride, &w->scr, reason, cap);
        if (rc != 0)
            return rc;
    }
    int64_t t1 = rf__now_ns(), c1 = rf__thread_cpu_ns();
    counter_add(&w->c.augment_ns, t1 - t0);
    counter_add(&w->c.augment_cpu_ns, c1 - c0);
    if (r->sample_fn) {
        rf_sample_info info = {.sample = sample, .epoch = epoch,
                               .label = rf__source_label(k->src, sample), .worker = worker};
        int rc = r->sample_fn(r->sample_user, px, rg->h, rg->w, 3, stride,
                              rf__sample_fn_seed(cfg->seed, epoch, sample), &info);
        int64_t t2 = rf__now_ns(), c2 = rf__thread_cpu_ns();
        counter_add(&w->c.sample_fn_ns, t2 - t1);
        counter_add(&w->c.sample_fn_cpu_ns, c2 - c1);
        t1 = t2;
        c1 = c2;
        if (rc != 0) {
            snprintf(reason, cap, "sample_fn returned %d", rc);
            return RF_E_CALLBACK;
        }
    }
    int rc = rf__convert_run(&k->cv, pic, fw, fh, k->planar ? 0 : stride, dst, fl ? w->plan : NULL,
                             &w->scr);
    counter_add(&w->c.convert_ns, rf__now_ns() - t1);
    counter_add(&w->c.convert_cpu_ns, rf__thread_cpu_ns() - c1);
    if (rc != 0)
        snprintf(reason, cap, "out of memory converting the picture");
    return rc;
}

/* Reads (if needed) and decodes one sample into dst (and its extras into
 * xdst, xlen when asked for); reason set on failure. */
static int process_sample(rf_work *k, rf_worker_state *w, int worker, const rf_read *rd,
                          int64_t epoch, int64_t sample, const rf_slot_shape *sh, uint8_t *dst,
                          uint8_t *xdst, uint32_t *xlen, char *reason, size_t cap,
                          rf_decode_times *t)
{
    const rf_config *cfg = k->cfg;
    memset(t, 0, sizeof *t);
    if (rd->err == ETIMEDOUT) {
        snprintf(reason, cap, "%s timed out after %lld ms (read_timeout_ms)", rd->what,
                 (long long)cfg->read_timeout_ms);
        return RF_E_TIMEOUT;
    }
    if (rd->err == EFBIG && !strcmp(rd->what, "size")) {
        snprintf(reason, cap, "%s is %llu bytes, more than max_file_bytes=%llu",
                 rf__source_records(k->src) ? "record"
                 : k->src->nextras > 0      ? "the span of its picture and extras"
                 : rd->ranged               ? "member"
                                            : "file",
                 (unsigned long long)rd->size, (unsigned long long)cfg->max_file_bytes);
        return RF_E_LIMIT;
    }
    if (rd->err) {
        read_reason(rd, reason, cap);
        return RF_E_IO;
    }
    if (rf__source_records(k->src)) {
        /* records: the bytes themselves, no decode (the reader failed short reads) */
        if (rd->len != cfg->sample_bytes) {
            snprintf(reason, cap, "short read: %zu of %zu bytes", rd->len, cfg->sample_bytes);
            return RF_E_IO;
        }
        memcpy(dst, rf__read_bytes(rd), rd->len);
        return 0;
    }
    const uint8_t *img = rf__read_bytes(rd);
    size_t img_len = rd->len;
    if (k->src->nextras > 0) {
        /* the read fetched the span of the sample's members: the picture is
         * part of it, the extras go to the slot */
        uint64_t rel, len;
        rf__source_image_in_span(k->src, sample, &rel, &len);
        if (rel + len > rd->len) {
            snprintf(reason, cap, "short read: %zu of %llu bytes", rd->len,
                     (unsigned long long)(rel + len));
            return RF_E_IO;
        }
        img += rel;
        img_len = (size_t)len;
        int rc = copy_extras(k, rd, sample, xdst, xlen, reason, cap);
        if (rc != 0)
            return rc;
    }
    rf_decode_opts o = k->tmpl;
    o.epoch = epoch;
    o.sample = sample;
    o.out_h = sh->h; /* the batch's (a bucket's, a native frame's) */
    o.out_w = sh->w;
    o.check_tail = cfg->verify == RF_VERIFY_ALWAYS ||
                   (cfg->verify == RF_VERIFY_ONCE && !is_verified(k, sample));
    /* After the geometry come the augmentations (cfg->post): on the picture in
     * its place when the output is uint8 NHWC, else on the worker's picture,
     * which convert.c then lays out in the slot. */
    uint8_t *pic = cfg->post && !k->in_place ? w->img : dst;
    if (cfg->post && !k->planar)
        o.layout = RF_LAYOUT_NHWC;
    int64_t c0 = rf__thread_cpu_ns();
    int rc = rf__decode_sample(w->dec, img, img_len, &o, pic, reason, cap, t);
    counter_add(&w->c.decode_cpu_ns, rf__thread_cpu_ns() - c0);
    if (rc == 0 && t->whole && cfg->verify == RF_VERIFY_ONCE)
        mark_verified(k, sample);
    if (rc == 0 && cfg->post) {
        rf_region_box rg = {0, 0, sh->h, sh->w};
        if (cfg->framed) /* the fitted picture's place (letterbox.h) */
            rf__fit_box(t, sh->h, sh->w, cfg->top_left || cfg->max_side > 0, &rg);
        rc = post_sample(k, w, worker, epoch, sample, pic, dst, sh->h, sh->w, &rg, reason, cap);
    }
    return rc;
}

void rf__work_sample(void *ctx, int worker, rf_pool_job *pj)
{
    rf_work *k = ctx;
    rf_worker_state *w = &k->w[worker];
    const rf_config *cfg = k->cfg;
    rf_job *j = rf__job_of(pj);
    char reason[400], msg[900];
    int stale = j->gen != atomic_load(k->gen);
    rf_slot *s = j->slot;
    const rf_slot_shape sh = s->shape;
    uint8_t *dst = s->view.data + (size_t)j->pos * sh.sample_bytes;
    uint8_t *xdst = NULL;
    uint32_t *xlen = NULL;
    if (s->view.extras) {
        xdst = s->view.extras + (size_t)j->pos * (size_t)cfg->extras_bytes;
        xlen = s->view.extras_len + (size_t)j->pos * (size_t)k->src->nextras;
    }
    rf_decode_times t = {0};
    int rc = 0;
    int64_t sample = j->rd.sample, used = sample, subs = 0;
    char first_reason[sizeof reason];
    msg[0] = '\0';
    if (!stale)
        rc = process_sample(k, w, worker, &j->rd, j->epoch, sample, &sh, dst, xdst, xlen, reason,
                            sizeof reason, &t);
    int skip = cfg->on_error == RF_ON_ERROR_SKIP;
    if (rc != 0) {
        char name[440]; /* the path, "shard.tar:key.jpg" or "file.bin at offset N" */
        rf__source_name(k->src, sample, name, sizeof name);
        snprintf(msg, sizeof msg, "%s: %s (sample %lld): %s",
                 rc == RF_E_IO || j->rd.err ? "reader"
                 : rc == RF_E_CALLBACK      ? "sample_fn"
                                            : "decode",
                 name,
                 (long long)sample, reason);
        snprintf(first_reason, sizeof first_reason, "%s", reason);
        int64_t cap = cfg->max_errors;
        int over = cap >= 0 && atomic_fetch_add(&k->errors_seen, 1) + 1 > cap;
        if (skip && over) {
            snprintf(msg + strlen(msg), sizeof msg - strlen(msg),
                     " [more than max_errors=%lld bad samples]", (long long)cap);
            skip = 0;
        }
        /* Deterministic substitute: drawn from (seed, epoch, sample). */
        rf_rng rng = rf__rng_make(cfg->seed, (uint64_t)j->epoch,
                                  (uint64_t)sample ^ 0x5355425354ULL /* "SUBST" */);
        while (skip && rc != 0 && subs < 16) {
            subs++;
            used = draw_substitute(k, sample, sh.bucket, &rng);
            if (read_sample_sync(k, used, &w->sub) != 0) {
                rc = RF_E_IO;
                continue;
            }
            rc = process_sample(k, w, worker, &w->sub, j->epoch, used, &sh, dst, xdst, xlen, reason,
                                sizeof reason, &t);
        }
        if (skip && rc == 0) {
            s->view.samples[j->pos] = used;
            s->view.labels[j->pos] = rf__source_label(k->src, used);
        } else if (skip) {
            snprintf(msg + strlen(msg), sizeof msg - strlen(msg),
                     " [no readable substitute in %lld tries]", (long long)subs);
        }
    }
    /* Work for an abandoned position is not counted. */
    if (j->gen != atomic_load(k->gen))
        return;
    if (cfg->framed) { /* where the picture lies in its frame (rf_batch_sizes) */
        s->view.sizes[2 * j->pos] = rc == 0 ? t.fit_h : 0;
        s->view.sizes[2 * j->pos + 1] = rc == 0 ? t.fit_w : 0;
        s->view.scales[j->pos] = rc == 0 ? t.scale : 0.0f;
    }
    if (msg[0]) {
        rf__source_count_error(k->src, sample);
        int i = atomic_fetch_add(&s->nbad, 1);
        if (i < RF_SLOT_MAX_BAD) {
            s->bad[i].sample = sample;
            snprintf(s->bad[i].reason, sizeof s->bad[0].reason, "%s", first_reason);
        } else {
            atomic_fetch_add(&s->bad_dropped, 1);
        }
    }
    counter_add(&w->c.decoded, 1);
    counter_add(&w->c.header_ns, t.header_ns);
    counter_add(&w->c.decode_ns, t.decode_ns);
    counter_add(&w->c.resize_ns, t.resize_ns);
    counter_add(&w->c.dct_scaled, t.denom > 1);
    if (subs > 0 && rc == 0)
        atomic_fetch_add(&s->nskipped, 1); /* counted if the batch is delivered */
    int zero = 0;
    if (rc != 0 && atomic_compare_exchange_strong(&s->errcode, &zero, rc))
        snprintf(s->errmsg, sizeof s->errmsg, "%s", msg);
}

void rf__work_totals(rf_work *k, rf_stats *st)
{
    st->samples_decoded = st->header_ns = st->decode_ns = st->resize_ns = 0;
    st->dct_scaled = st->augment_ns = st->sample_fn_ns = st->convert_ns = 0;
    st->decode_cpu_ns = st->augment_cpu_ns = st->sample_fn_cpu_ns = st->convert_cpu_ns = 0;
    for (int i = 0; k->w && i < k->nworkers; i++) {
        rf_work_counters *c = &k->w[i].c;
        st->samples_decoded += atomic_load_explicit(&c->decoded, memory_order_relaxed);
        st->header_ns += atomic_load_explicit(&c->header_ns, memory_order_relaxed);
        st->decode_ns += atomic_load_explicit(&c->decode_ns, memory_order_relaxed);
        st->resize_ns += atomic_load_explicit(&c->resize_ns, memory_order_relaxed);
        st->dct_scaled += atomic_load_explicit(&c->dct_scaled, memory_order_relaxed);
        st->augment_ns += atomic_load_explicit(&c->augment_ns, memory_order_relaxed);
        st->sample_fn_ns += atomic_load_explicit(&c->sample_fn_ns, memory_order_relaxed);
        st->convert_ns += atomic_load_explicit(&c->convert_ns, memory_order_relaxed);
        st->decode_cpu_ns += atomic_load_explicit(&c->decode_cpu_ns, memory_order_relaxed);
        st->augment_cpu_ns += atomic_load_explicit(&c->augment_cpu_ns, memory_order_relaxed);
        st->sample_fn_cpu_ns += atomic_load_explicit(&c->sample_fn_cpu_ns, memory_order_relaxed);
        st->convert_cpu_ns += atomic_load_explicit(&c->convert_cpu_ns, memory_order_relaxed);
    }
    st->verified = atomic_load_explicit(&k->nverified, memory_order_relaxed);
}
