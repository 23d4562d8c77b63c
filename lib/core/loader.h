/*
 * loader.h - the loader object, shared by loader.c (lifecycle, options,
 * position, stats) and consume.c (the consumer's side: lending and taking
 * back batches, the tuner's windows); loader_mix.c adds mixtures of
 * sources. Internal: the public face is include/ringfeed.h.
 *
 * Threads: the dispatcher (dispatch.c) claims slots and feeds the reader,
 * the decode pool (pool.c) runs work.c on each read sample, and the consumer
 * (the caller of rf_loader_next) borrows READY slots until rf_batch_release.
 *
 * Lock rules:
 *   - mu protects the ring's slot states, the dispatcher's position and fill
 *     list (rf_dispatch fields marked (mu)), the tuner window and the stats.
 *     Nobody holds it across a read, a decode, an allocation or a wait on
 *     io_uring. The consumer waits on cv_cons (a slot became READY, stop).
 *     Lock order: mu, then the pool's mu (rf__pool_set_active) or the
 *     copier's lock (copy_done, rf__copier_release); err_mu is a leaf.
 *   - err_mu protects errmsg and err_unread: rf_batch_release and
 *     rf_batch_copy_to may fail on any thread (rf__loader_err_any);
 *     rf_loader_errmsg hands the consumer a copy (errmsg_out), and
 *     rf_loader_errmsg_copy any thread one into its own buffer.
 *   - stop_mu serialises rf_loader_stop's joins.
 *   - cancel_mu orders rf_loader_cancel against the end of rf_loader_start:
 *     a start either sees the cancel and fails, or set `live` before it,
 *     and the cancel then stops the loader (a leaf).
 */
#ifndef RF_LOADER_H
#define RF_LOADER_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "bucket.h"
#include "copier.h"
#include "dispatch.h"
#include "loader_mix.h"
#include "options.h"
#include "pool.h"
#include "reader.h"
#include "ring.h"
#include "ringfeed.h"
#include "sampler.h"
#include "sizes.h"
#include "source.h"
#include "stats.h"
#include "tuner.h"
#include "work.h"

struct rf_loader {
    char *spec;
    char *cache_dir; /* rf_loader_set_cache_dir; NULL: the default */
    rf_options opts; /* as set; read back by rf_loader_get_param */
    rf_config cfg;   /* resolved by rf_loader_start; read-only afterwards */
    int started;
    pid_t pid;
    _Atomic int stopped; /* rf_loader_stop was called (after start) */
    /* rf_loader_cancel was called: set under cancel_mu, read anywhere (the
     * remote stage's waits and the fetch thread poll it) */
    _Atomic int cancelled;
    pthread_mutex_t cancel_mu;
    int live; /* (cancel_mu) rf_loader_start succeeded */

    pthread_mutex_t err_mu;
    char errmsg[1024];     /* (err_mu) */
    int err_unread;        /* (err_mu) errmsg is a consumer call's error that
                            * rf_loader_errmsg has not returned yet */
    char errmsg_out[1024]; /* the consumer's copy */

    rf_source src;
    rf_buckets buckets;   /* aspect-ratio buckets (n 0: none); read-only after start */
    rf_sizes_stats sizes; /* how the pictures' sizes were learned (buckets) */
    /* rf_loader_create_mix's sources, and what a start made of them
     * (loader_mix.c); NULL: one source, spec */
    rf_loader_mix *mix;
    rf_sampler sampler;
    rf_ring ring;
    rf_copier *copier; /* NULL: no CUDA device (cuda_note says why) */
    char cuda_note[1024];
    rf_reader *reader;
    struct rf_maps *maps; /* local shards read in place (mapped.h); NULL: RF_P_MAP_SHARDS = 0 */
    int nworkers; /* worker threads */
    char budget_why[200];
    rf_work work;
    rf_pool pool;
    rf_dispatch disp;

    pthread_mutex_t stop_mu; /* serialises rf_loader_stop's joins */
    int joined;

    pthread_mutex_t mu; /* see the lock rules above */
    pthread_cond_t cv_cons;
    /* Tuner (num_workers = 0): measurements of the current window (mu). */
    int tuning;
    rf_tuner tuner;
    int64_t win_t0, win_batches, win_samples, win_stall_ns, win_step_ns;
    int64_t last_return_ns; /* when next() last handed out a batch: the step starts */
    /* The consumer's wait for the next batch so far, over calls that
     * returned RF_AGAIN (rf_loader_next_wait); wait_open: a call waited for
     * it already (its ring-empty verdict is given). */
    int64_t wait_ns;
    int wait_open;
    /* producer totals when the window opened */
    int64_t win_cpu_base, win_busy_base, win_blocked_base, win_read_base;
    rf_stats stats; /* (mu) */
};

/* Records the error of a consumer-thread call: it replaces the message and
 * stays until rf_loader_errmsg returned it (include/ringfeed.h). */
void rf__loader_err(rf_loader *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records the error of a call that may run on any thread (rf_batch_release,
 * rf_batch_copy_to): it replaces the message unless that is a consumer
 * call's error not yet read, which it leaves alone. */
void rf__loader_err_any(rf_loader *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* RF_OK for a started loader of this process, else RF_E_INVALID (NULL),
 * RF_E_NOT_STARTED or RF_E_FORKED with the error recorded. */
int rf__loader_usable(rf_loader *l);

/* (shapes_api.c) At start, after the index: the pictures' sizes and the
 * aspect-ratio buckets (when asked for), which fix l->cfg's sample_bytes;
 * 0 or an error, recorded. */
int rf__loader_open_buckets(rf_loader *l);
/* After the sampler's init: its order by bucket, epoch 0 made. */
int rf__loader_order_buckets(rf_loader *l);
/* After the ring, the work and the dispatcher: the shapes they start with. */
void rf__loader_wire_shapes(rf_loader *l);
/* rf_loader_seek_rest of a loader with buckets (position.c). */
int rf__loader_seek_buckets(rf_loader *l, int64_t epoch, int64_t start, int64_t unit,
                            int64_t batch);
/* explain's fields of the shape: transform, output, bucket, fit. */
struct rf_geom;
struct rf_frame;
void rf__explain_shape(const rf_loader *l, int64_t sample, const struct rf_geom *g,
                       const struct rf_frame *fr, struct rf_json *j);
/* The stats' "shapes" object (an rf_stats_section: stats.h). */
void rf__loader_shapes_stats(void *l, struct rf_json *j);

#endif
