/*
 * dispatch.h - the dispatcher: the thread that claims a ring slot for each
 * upcoming batch, hands the batch's samples to the reader in order, and
 * queues every completed read as a job for the decode pool.
 *
 * It also owns the position the consumer reads from (generation, epoch,
 * next and scheduled batch) and the measurements of the producer side
 * (read latency, time blocked on a full ring), all under the loader's mutex,
 * and grows the ring when the tuner asks for more prefetch.
 *
 * Generations: a seek bumps gen. Work of an older generation is never
 * delivered: reads in flight complete and are dropped, queued jobs are
 * skipped by the workers, slots being filled become FREE when their last
 * submitted sample is accounted for (ring.c).
 */
#ifndef RF_DISPATCH_H
#define RF_DISPATCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "copier.h"
#include "pool.h"
#include "reader.h"
#include "ring.h"
#include "sampler.h"
#include "source.h"

/* One sample on its way: read, then decoded into its place in a slot. */
typedef struct rf_job {
    rf_read rd;       /* first: the reader hands back rf_read pointers */
    rf_pool_job link; /* the pool's hold on the job */
    rf_slot *slot;
    int64_t pos;      /* place within the batch */
    int64_t gen;
    int64_t epoch;
} rf_job;

static inline rf_job *rf__job_of(rf_pool_job *pj)
{
    return (rf_job *)(void *)((char *)pj - offsetof(rf_job, link));
}

typedef struct rf_dispatch {
    /* Wiring, set by rf__dispatch_init and constant afterwards. */
    const rf_source *src;
    rf_sampler *sampler;
    rf_ring *ring;
    rf_reader *reader;
    rf_pool *pool;
    rf_copier *copier;       /* NULL without a device: the thread binds its device */
    struct rf_maps *maps;    /* local shards read in place when resident (mapped.h); NULL:
                              * every sample goes to the reader */
    uint64_t max_bytes;      /* a longer member goes to the reader, which refuses it */
    const struct rf_buckets *buckets; /* aspect-ratio buckets: each batch's shape (NULL: none) */
    size_t elem_bytes;       /* bytes of one element of the images (buckets' sample bytes) */
    pthread_mutex_t *mu;     /* the loader's mutex: protects the fields marked (mu) */
    pthread_cond_t *cv_cons; /* the consumer's condition: a slot became READY */
    pthread_cond_t cv_disp;  /* wakes the dispatcher; waited on with *mu */
    rf_job *jobs;
    int njobs;
    pthread_t thread;
    int running; /* the thread was started and not joined */
    int inited;

    _Atomic int64_t gen;  /* written under mu; read anywhere */
    _Atomic int stopped;  /* set under mu with a broadcast of cv_disp */

    /* (mu) */
    int64_t epoch, next_batch, sched_batch;
    rf_slot **fill; /* slots whose samples are still being handed to the reader */
    int nfill;
    int target_k;   /* ring slots the tuner asked for: the dispatcher grows to it */
    int remote_wait; /* (mu, written by the dispatcher) the next sample's remote shard is
                      * not pinned yet: its wait is for the fetch thread's wake */
    int64_t blocked_since; /* producers idle on a full ring since (0: they are not) */
    int64_t blocked_ns;    /* idle time on a full ring since start, closed spans */
    int64_t read_ns;       /* reader latency summed over samples since start */
    int traced_read;       /* the first read was traced (trace.h) */
    int warm;              /* a batch was complete (rf__remote_warm was called) */
    _Atomic int traced_done; /* the first job's end was traced (any worker; relaxed load,
                              * then exchange, only while tracing: trace.h) */
} rf_dispatch;

/* Wires the dispatcher and makes njobs jobs, all handed to the pool's free
 * stack. Position: batch 0 of epoch 0, generation 1. 0 or RF_E_NOMEM. */
int rf__dispatch_init(rf_dispatch *d, const rf_source *src, rf_sampler *sampler, rf_ring *ring,
                      rf_reader *reader, rf_pool *pool, int njobs, pthread_mutex_t *mu,
                      pthread_cond_t *cv_cons);

/* Starts the thread. 0 or RF_E_SYSTEM (errno-style code in *err). */
int rf__dispatch_start(rf_dispatch *d, int *err);

/* Under mu: the thread is to exit; wakes it. */
void rf__dispatch_stop(rf_dispatch *d);

/* Joins the thread (after rf__dispatch_stop; without mu). */
void rf__dispatch_join(rf_dispatch *d);

/* Frees the jobs (their read buffers) and the fill list. forked: memory only
 * (the condition may be in use by a thread of the parent). */
void rf__dispatch_free(rf_dispatch *d, int forked);

/* Under mu: something the dispatcher waits for happened (a slot was freed,
 * the prefetch window moved). */
void rf__dispatch_wake(rf_dispatch *d);

/* Under mu: moves the position to batch `batch` of `epoch`, in the split of
 * its order from `start` on (0: the whole epoch; sampler.h) (new generation). */
void rf__dispatch_seek(rf_dispatch *d, int64_t epoch, int64_t start, int64_t batch);

/* Under mu: the tuner wants k ring slots; the dispatcher grows the ring to
 * that many (never shrinks it), allocating outside the lock. */
void rf__dispatch_set_prefetch(rf_dispatch *d, int k);

/* Under mu: the producers' time blocked on a full ring and the read latency,
 * totals since start (an open blocked span is closed at now and reopened). */
void rf__dispatch_times(rf_dispatch *d, int64_t now, int64_t *blocked_ns, int64_t *read_ns);

/* The pool's done function (ctx: the rf_dispatch): a sample of a slot is
 * accounted for; the job goes back to the pool. Any thread, no lock unless
 * it was the slot's last sample or the dispatcher must be woken. */
void rf__dispatch_job_done(void *ctx, rf_pool_job *job);

#endif
