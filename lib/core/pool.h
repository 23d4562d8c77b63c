/*
 * pool.h - the decode pool: N worker threads running jobs from a lock-free
 * queue that one producer (the dispatcher) fills.
 *
 * The pool knows nothing of decoding, slots or sources. Its owner embeds an
 * rf_pool_job in each of its job structs, hands every job to the pool once
 * (rf__pool_put: the free stack), and gives two functions with their
 * contexts: work(work_ctx, worker, job) runs on a worker, timed in the
 * worker's busy and CPU counters; done(done_ctx, job) follows it on the same
 * worker, untimed, and must give the job back with rf__pool_put. The producer takes free jobs (rf__pool_take)
 * and queues them (rf__pool_push); at most njobs jobs exist, which bounds the
 * queue.
 *
 * The tuner's choice of active workers parks the others (rf__pool_set_active).
 * Lock rules and atomic pairs: pool.c, at the top.
 */
#ifndef RF_POOL_H
#define RF_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct rf_pool_job {
    struct rf_pool_job *next_free; /* link in the free stack */
} rf_pool_job;

typedef void (*rf_pool_work_fn)(void *ctx, int worker, rf_pool_job *job);
typedef void (*rf_pool_done_fn)(void *ctx, rf_pool_job *job);

/* Per-worker counters: written by their worker only (relaxed load + store,
 * no read-modify-write), read by anyone (rf__pool_times). Totals since start. */
typedef struct rf_pool_worker {
    struct rf_pool *pool;
    int id;
    pthread_t thread;
    _Atomic int64_t cpu_ns, busy_ns;
} rf_pool_worker;

typedef struct rf_pool {
    int inited;
    int njobs;
    int nworkers;
    int nthreads;  /* workers started (joined by rf__pool_join) */
    int start_err; /* errno of the pthread_create that failed */
    rf_pool_work_fn work;
    void *work_ctx;
    rf_pool_done_fn done;
    void *done_ctx;
    rf_pool_worker *workers;

    _Atomic(rf_pool_job *) *queue;  /* njobs entries, indexed mod njobs */
    _Atomic uint64_t qhead, qtail;  /* claimed / published jobs */
    _Atomic(rf_pool_job *) free_stack;
    rf_pool_job *free_local;        /* the producer's own free jobs */
    _Atomic int work_sleepers;      /* workers waiting on cv_work */
    _Atomic int producer_waiting;   /* the producer sleeps until woken */
    _Atomic int active;             /* workers [0, active) run; the others park */
    _Atomic int stopped;

    pthread_mutex_t mu;             /* only for the waits on cv_work and cv_park */
    pthread_cond_t cv_work, cv_park;
} rf_pool;

/* Allocates the queue and the workers (not started). 0 or RF_E_NOMEM. */
int rf__pool_init(rf_pool *p, int nworkers, int njobs, rf_pool_work_fn work, void *work_ctx,
                  rf_pool_done_fn done, void *done_ctx);

/* Starts the worker threads. 0, or RF_E_SYSTEM with start_err set and
 * nthreads telling which worker could not be started. */
int rf__pool_start(rf_pool *p);

/* Wakes every worker to exit (any thread; idempotent). */
void rf__pool_stop(rf_pool *p);

/* Joins the started workers (after rf__pool_stop; one thread at a time). */
void rf__pool_join(rf_pool *p);

/* Frees what rf__pool_init allocated (after rf__pool_join). forked: in a
 * forked child, whose copy of the mutex may be held by a parent thread:
 * memory only. A pool never initialised (zeroed) is a no-op. */
void rf__pool_destroy(rf_pool *p, int forked);

/* Any thread: a job goes back on the free stack. */
void rf__pool_put(rf_pool *p, rf_pool_job *j);

/* After rf__pool_put, on the same thread: 1 when the producer sleeps
 * waiting for jobs and the queue is down to half of them (then wake it). */
int rf__pool_producer_wanted(rf_pool *p);

/* Producer only: a free job, or NULL. */
rf_pool_job *rf__pool_take(rf_pool *p);

/* Producer only: gives back a job it took and could not use. */
void rf__pool_unget(rf_pool *p, rf_pool_job *j);

/* Producer only: 1 when rf__pool_take would return a job. */
int rf__pool_has_free(rf_pool *p);

/* Producer only: queues a job for the workers and wakes one if any sleeps. */
void rf__pool_push(rf_pool *p, rf_pool_job *j);

/* Producer only: says it is about to sleep (1) or is awake (0). Before
 * sleeping it must look at rf__pool_has_free again (pool.c: Dekker pair). */
void rf__pool_producer_sleeps(rf_pool *p, int sleeping);

/* Jobs queued and not yet claimed by a worker. */
uint64_t rf__pool_queued(rf_pool *p);

/* Runs workers [0, n) and parks the others (n in [1, nworkers]). Any thread. */
void rf__pool_set_active(rf_pool *p, int n);
int rf__pool_active(const rf_pool *p);

/* Sums of the workers' CPU and busy time since start (either may be NULL). */
void rf__pool_times(const rf_pool *p, int64_t *cpu_ns, int64_t *busy_ns);

#endif
