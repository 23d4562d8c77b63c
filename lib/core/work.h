/*
 * work.h - what a decode worker does with one sample: decode its bytes into
 * its place in the slot (or copy a record), replace a bad sample under
 * on_error = skip, record why a sample failed, and keep the RF_VERIFY_ONCE
 * bitmap of files already decoded to their end.
 *
 * rf__work_sample is the decode pool's work function; everything it reads is
 * fixed at rf_loader_start (the typed config, the index, the decode options'
 * template) except the generation, which says whether the job's position was
 * abandoned.
 */
#ifndef RF_WORK_H
#define RF_WORK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "augment.h"
#include "convert.h"
#include "decode.h"
#include "options.h"
#include "pool.h"
#include "reader.h"
#include "source.h"
#include "stats.h"

/* Per-worker counters: written by their worker only (relaxed load + store,
 * no read-modify-write), read by whoever renders stats. Totals since start. */
typedef struct rf_work_counters {
    _Atomic int64_t decoded, header_ns, decode_ns, resize_ns, dct_scaled;
    _Atomic int64_t augment_ns, sample_fn_ns, convert_ns; /* the stages after the geometry */
    /* the worker thread's CPU time in the decode (header, decode, resize) and
     * in the stages after it: what contention on a busy machine does not inflate */
    _Atomic int64_t decode_cpu_ns, augment_cpu_ns, sample_fn_cpu_ns, convert_cpu_ns;
} rf_work_counters;

typedef struct rf_worker_state {
    rf_decoder *dec;
    rf_read sub; /* buffer for substitute samples (on_error = skip) */
    rf_work_counters c;
    /* cfg->post: the picture before augmentations and conversion (S x S x 3,
     * NHWC), the ops' scratch and the sample's plan */
    uint8_t *img;
    rf_aug_scratch scr;
    rf_aug_plan *plan;
} rf_worker_state;

typedef struct rf_work {
    const rf_config *cfg;
    const rf_source *src;
    const _Atomic int64_t *gen; /* the dispatcher's generation */
    rf_decode_opts tmpl;        /* decode options but epoch, sample, check_tail */
    rf_convert cv;              /* cfg->post: the output's layout and type */
    int in_place;               /* cfg->post with a uint8 NHWC output: augmented in the slot */
    int planar;                 /* a float NCHW output alone: the worker's picture is planar */
    size_t sample_bytes;        /* slot stride */
    /* RF_VERIFY_ONCE: one bit per sample, set once the sample's file was
     * decoded to its end marker without fault; nverified counts them. */
    _Atomic uint64_t *verified; /* NULL for other modes and record sources */
    size_t verified_bytes;
    _Atomic int64_t nverified;
    _Atomic int64_t errors_seen; /* bad samples met by workers: the max_errors cap */
    rf_worker_state *w;
    int nworkers;
    const struct rf_buckets *buckets; /* aspect-ratio buckets (substitutes of their bucket);
                                       * NULL without; set after rf__work_init */
} rf_work;

/* Builds the decode template, the verify bitmap and one decoder per worker.
 * 0, or RF_E_NOMEM with the reason in err. */
int rf__work_init(rf_work *k, const rf_config *cfg, const rf_source *src,
                  const _Atomic int64_t *gen, int nworkers, char *err, size_t errcap);
void rf__work_free(rf_work *k);

/* The pool's work function (ctx: the rf_work; job: an rf_job's link). */
void rf__work_sample(void *ctx, int worker, rf_pool_job *job);

/* Workers' totals into st (samples_decoded, stage times, dct_scaled, verified). */
void rf__work_totals(rf_work *k, rf_stats *st);

#endif
