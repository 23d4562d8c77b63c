/*
 * stats.h - what the pipeline measured: per-stage time, consumer stall,
 * throughput, errors with the paths and reasons of bad samples, the tuner's
 * decisions. Updated under the loader's mutex; rendered as JSON.
 */
#ifndef RF_STATS_H
#define RF_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "latency.h"

#define RF_STATS_MAX_ERRORS 1000 /* entries kept; the count goes on */
#define RF_STATS_MAX_DECISIONS 256

typedef struct rf_error_entry {
    int64_t sample;
    int64_t epoch;
    char *path;
    char *reason;
} rf_error_entry;

typedef struct rf_decision {
    int64_t batch;
    int workers;
    char reason[160];
} rf_decision;

typedef struct rf_stats {
    int64_t images, batches;        /* lent to the consumer */
    int64_t samples_decoded;
    int64_t stall_ns;               /* consumer waiting in next */
    int64_t t_first_ns, t_last_ns;  /* first next() call, last lend */
    /* The consumer's wait for each batch lent (over the calls that asked for
     * it: rf_loader_next_wait may return RF_AGAIN first), how many of those
     * batches were not ready when first asked for (the ring had not made
     * them yet), and when rf_loader_start was called and the first batch
     * lent (time to first batch: index, set-up, the first reads). */
    rf_latency wait;
    int64_t ring_empty;
    int64_t t_start_ns, t_first_batch_ns;
    int64_t read_ns, header_ns, decode_ns, resize_ns; /* summed over samples */
    int64_t augment_ns, sample_fn_ns, convert_ns;     /* the stages after the geometry */
    /* the workers' CPU time (not wall time) in the same stages */
    int64_t decode_cpu_ns, augment_cpu_ns, sample_fn_cpu_ns, convert_cpu_ns;
    int64_t dct_scaled;             /* samples decoded with DCT scaling */
    int64_t verified;               /* files decoded to their end without fault (RF_VERIFY_ONCE) */
    int64_t errors_total;
    int64_t skipped;                /* samples replaced under on_error = skip */
    rf_error_entry errors[RF_STATS_MAX_ERRORS];
    int nerrors;
    rf_decision decisions[RF_STATS_MAX_DECISIONS];
    int ndecisions;
} rf_stats;

void rf__stats_free(rf_stats *s);
void rf__stats_add_error(rf_stats *s, int64_t sample, int64_t epoch, const char *path,
                         const char *reason);
void rf__stats_add_decision(rf_stats *s, int64_t batch, int workers, const char *reason);

/* Appends the stats fields (no braces) to j. */
void rf__stats_json(const rf_stats *s, int64_t now_ns, rf_json *j);

/* A stage's own object in the stats ("remote": {...}), which the stage
 * renders: stats.c writes the name and the braces and calls render(ctx, j)
 * for the fields. The loader lists the stages it has; stats.c knows none of
 * them, so no stage's header is included here. */
typedef struct rf_stats_section {
    const char *name;
    void (*render)(void *ctx, rf_json *j);
    void *ctx;
} rf_stats_section;

#define RF_STATS_MAX_SECTIONS 4

/* Everything rf_loader_stats_json reports, gathered by the loader under its
 * mutex (the strings and `stats` are borrowed: rendered before it unlocks). */
typedef struct rf_stats_snapshot {
    const rf_stats *stats;
    int64_t now_ns;
    int active_workers, worker_threads, auto_workers;
    int64_t epoch, num_samples, num_batches, batch_size;
    int64_t shards, shards_from_manifest; /* tar sources, local or remote: shards, and
                                           * those indexed from a manifest.json (no
                                           * header walk; remote: no fetch to index) */
    /* local tar shards a manifest.json named but did not describe (rewritten
     * since): walked instead */
    int64_t shards_mismatched;
    const char *io_backend; /* "none", "io_uring", "pread" */
    const char *io_note;
    const struct rf_maps *maps; /* members read in place (mapped.h); NULL: none */
    int pinned;
    size_t ring_bytes, index_bytes;
    int prefetch;
    int started;
    const char *ring_note; /* why the ring is not pinned although asked ("" if it is) */
    int has_copier;        /* a CUDA device serves the loader */
    const char *cuda_note; /* why not, when it does not */
    int cuda_built;
    int64_t device;        /* RF_P_DEVICE */
    int64_t copies, copy_bytes, d2d_copies, device_buffer_bytes, cuda_errors;
    int64_t direct_copies;   /* next_device batches of a slot without a device buffer */
    const char *buffer_note; /* why a slot has no device buffer ("" if each has one) */
    const char *cuda_last_error;
    const char *worker_budget;
    rf_stats_section sections[RF_STATS_MAX_SECTIONS]; /* rendered last, in order */
    int nsections;
    /* more fields (no braces) written at the end, or NULL (a mixture's epoch
     * size and sources) */
    void (*more)(void *ctx, rf_json *j);
    void *more_ctx;
} rf_stats_snapshot;

/* The whole stats object ({...}) into j. */
void rf__stats_render(const rf_stats_snapshot *v, rf_json *j);

#endif
