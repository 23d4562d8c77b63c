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
} rf_work_counters;

typedef struct rf_worker_state {
    rf_decoder *dec;
    rf_read sub; /* buffer for substitute samples (on_error = skip) */
    rf_work_counters c;
} rf_worker_state;

typedef struct rf_work {
    const rf_config *cfg;
    const rf_source *src;
    const _Atomic int64_t *gen; /* the dispatcher's generation */
    rf_decode_opts tmpl;        /* decode options but epoch, sample, check_tail */
    size_t sample_bytes;        /* slot stride */
    /* RF_VERIFY_ONCE: one bit per sample, set once the sample's file was
     * decoded to its end marker without fault; nverified counts them. */
    _Atomic uint64_t *verified; /* NULL for other modes and record sources */
    size_t verified_bytes;
    _Atomic int64_t nverified;
    _Atomic int64_t errors_seen; /* bad samples met by workers: the max_errors cap */
    rf_worker_state *w;
    int nworkers;
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
