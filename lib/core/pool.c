/*
 * pool.c - the decode pool's workers, job queue and free stack (see pool.h).
 *
 * The per-job path takes no lock:
 *   - the producer (single) publishes a job in `queue` with a seq_cst store
 *     of qtail; workers claim jobs by compare-exchange on qhead, reading the
 *     entry before claiming it (an entry is not overwritten while qhead has
 *     not passed it: rf__pool_push);
 *   - finished jobs go back on the free stack, a lock-free LIFO: workers push
 *     one job at a time (CAS), the producer takes the whole stack with one
 *     exchange and keeps it in free_local, so no ABA can occur (nobody pops a
 *     single entry from the shared stack).
 *
 * Lock rules:
 *   - p->mu protects nothing but the sleeps: a worker holds it only around
 *     its wait on cv_work (empty queue) or cv_park (parked by the tuner); a
 *     waker takes it only to signal. Nobody holds it across a job, and it is
 *     never held while another lock is taken (it is the innermost lock: the
 *     loader may hold its own mutex when it calls rf__pool_set_active).
 *   - the producer's own sleep is on its owner's lock and condition
 *     (dispatch.c); the pool only keeps the flag that says it sleeps.
 *
 * Atomic pairs (each a Dekker pair: both sides seq_cst, store then load, so
 * at least one side sees the other and no wakeup is lost):
 *   - qtail store in rf__pool_push, then its load of work_sleepers
 *       <-> a worker's work_sleepers increment, then its load of qtail
 *           (queue_len) under p->mu before waiting;
 *   - free_stack CAS in rf__pool_put, then the load of producer_waiting in
 *     rf__pool_producer_wanted
 *       <-> the producer's store of producer_waiting, then its load of
 *           free_stack (rf__pool_has_free) before sleeping.
 *   - active: stored under p->mu with a broadcast of cv_park and cv_work, so
 *     a parked worker rechecking it under p->mu sees the change.
 *   - stopped: stored under p->mu with the same broadcasts.
 *
 * The producer is woken by a returned job only when it sleeps and the queue
 * is down to half the jobs: it then finds many free jobs and submits their
 * reads at once. Waking it for each job costs a context switch per sample,
 * each one preempting a worker on a machine with no spare core. The queue
 * only shrinks while the producer sleeps, so a later return sees it short.
 */
#define _GNU_SOURCE
#include "pool.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ringfeed.h"

/* Single writer: a relaxed load and store, no locked instruction. */
static void counter_add(_Atomic int64_t *c, int64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                          memory_order_relaxed);
}

static uint64_t queue_len(rf_pool *p)
{
    return atomic_load(&p->qtail) - atomic_load(&p->qhead);
}

uint64_t rf__pool_queued(rf_pool *p)
{
    return queue_len(p);
}

void rf__pool_put(rf_pool *p, rf_pool_job *j)
{
    rf_pool_job *head = atomic_load_explicit(&p->free_stack, memory_order_relaxed);
    do
        j->next_free = head;
    /* seq_cst, not just release: the push and the caller's later load of
     * producer_waiting form a Dekker pair with the producer's store of
     * producer_waiting and its load of free_stack (no store-load reordering). */
    while (!atomic_compare_exchange_weak_explicit(&p->free_stack, &head, j, memory_order_seq_cst,
                                                  memory_order_relaxed));
}

int rf__pool_producer_wanted(rf_pool *p)
{
    return atomic_load(&p->producer_waiting) && queue_len(p) <= (uint64_t)p->njobs / 2;
}

rf_pool_job *rf__pool_take(rf_pool *p)
{
    /* acquire: pairs with the release half of the workers' CAS in put, so the
     * job's contents written before it was returned are visible. */
    if (!p->free_local)
        p->free_local = atomic_exchange_explicit(&p->free_stack, NULL, memory_order_acquire);
    rf_pool_job *j = p->free_local;
    if (j)
        p->free_local = j->next_free;
    return j;
}

void rf__pool_unget(rf_pool *p, rf_pool_job *j)
{
    j->next_free = p->free_local;
    p->free_local = j;
}

int rf__pool_has_free(rf_pool *p)
{
    return p->free_local || atomic_load(&p->free_stack); /* seq_cst: see the pairs above */
}

void rf__pool_producer_sleeps(rf_pool *p, int sleeping)
{
    atomic_store(&p->producer_waiting, sleeping); /* seq_cst: the Dekker pair with put */
}

void rf__pool_push(rf_pool *p, rf_pool_job *j)
{
    uint64_t t = atomic_load_explicit(&p->qtail, memory_order_relaxed);
    /* Entry t % njobs is free: at most njobs jobs exist and the one at
     * t - njobs was claimed before its job could be freed and pushed again. */
    atomic_store_explicit(&p->queue[t % (uint64_t)p->njobs], j, memory_order_relaxed);
    atomic_store(&p->qtail, t + 1); /* seq_cst: pairs with the worker's sleeper check */
    if (atomic_load(&p->work_sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_signal(&p->cv_work);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Workers: claims the next job, or waits; NULL when stopping. */
static rf_pool_job *queue_pop(rf_pool *p, int id)
{
    for (;;) {
        if (atomic_load(&p->stopped))
            return NULL;
        if (id < atomic_load(&p->active)) {
            uint64_t h = atomic_load(&p->qhead);
            while (h < atomic_load(&p->qtail)) {
                /* Read before claiming: entry h cannot be overwritten while
                 * qhead <= h (see rf__pool_push). The qtail load above
                 * (seq_cst) orders this read after the producer's store. */
                rf_pool_job *j = atomic_load_explicit(&p->queue[h % (uint64_t)p->njobs],
                                                      memory_order_relaxed);
                if (atomic_compare_exchange_weak(&p->qhead, &h, h + 1))
                    return j;
            }
        }
        pthread_mutex_lock(&p->mu);
        if (id >= atomic_load(&p->active)) {
            /* parked by the tuner */
            while (!atomic_load(&p->stopped) && id >= atomic_load(&p->active))
                pthread_cond_wait(&p->cv_park, &p->mu);
        } else {
            atomic_fetch_add(&p->work_sleepers, 1); /* seq_cst: pairs with rf__pool_push */
            while (!atomic_load(&p->stopped) && queue_len(p) == 0 &&
                   id < atomic_load(&p->active))
                pthread_cond_wait(&p->cv_work, &p->mu);
            atomic_fetch_sub(&p->work_sleepers, 1);
        }
        pthread_mutex_unlock(&p->mu);
    }
}

static void *worker_main(void *arg)
{
    rf_pool_worker *w = arg;
    rf_pool *p = w->pool;
    rf_pool_job *j;
    while ((j = queue_pop(p, w->id)) != NULL) {
        int64_t busy0 = rf__now_ns(), cpu0 = rf__thread_cpu_ns();
        p->work(p->work_ctx, w->id, j);
        counter_add(&w->cpu_ns, rf__thread_cpu_ns() - cpu0);
        counter_add(&w->busy_ns, rf__now_ns() - busy0);
        p->done(p->done_ctx, j); /* gives j back: not touched after this */
    }
    return NULL;
}

int rf__pool_init(rf_pool *p, int nworkers, int njobs, rf_pool_work_fn work, void *work_ctx,
                  rf_pool_done_fn done, void *done_ctx)
{
    assert(nworkers >= 1 && njobs >= 1);
    memset(p, 0, sizeof *p);
    p->queue = calloc((size_t)njobs, sizeof *p->queue);
    p->workers = calloc((size_t)nworkers, sizeof *p->workers);
    if (!p->queue || !p->workers) {
        free(p->queue);
        free(p->workers);
        p->queue = NULL;
        p->workers = NULL;
        return RF_E_NOMEM;
    }
    p->njobs = njobs;
    p->nworkers = nworkers;
    p->work = work;
    p->work_ctx = work_ctx;
    p->done = done;
    p->done_ctx = done_ctx;
    for (int i = 0; i < nworkers; i++) {
        p->workers[i].pool = p;
        p->workers[i].id = i;
    }
    atomic_store(&p->active, nworkers);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_park, NULL);
    p->inited = 1;
    return 0;
}

int rf__pool_start(rf_pool *p)
{
    for (int i = 0; i < p->nworkers; i++) {
        int e = pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]);
        if (e != 0) {
            p->start_err = e;
            return RF_E_SYSTEM;
        }
        p->nthreads = i + 1;
    }
    return 0;
}

void rf__pool_stop(rf_pool *p)
{
    if (!p->inited)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stopped, 1);
    pthread_cond_broadcast(&p->cv_work);
    pthread_cond_broadcast(&p->cv_park);
    pthread_mutex_unlock(&p->mu);
}

void rf__pool_join(rf_pool *p)
{
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->workers[i].thread, NULL);
    p->nthreads = 0;
}

void rf__pool_destroy(rf_pool *p, int forked)
{
    if (!p->inited)
        return;
    assert(forked || p->nthreads == 0);
    if (!forked) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv_work);
        pthread_cond_destroy(&p->cv_park);
    }
    free(p->queue);
    free(p->workers);
    memset(p, 0, sizeof *p);
}

void rf__pool_set_active(rf_pool *p, int n)
{
    assert(n >= 1 && n <= p->nworkers);
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->active, n);
    pthread_cond_broadcast(&p->cv_park); /* unpark */
    pthread_cond_broadcast(&p->cv_work); /* or let the extra ones park */
    pthread_mutex_unlock(&p->mu);
}

int rf__pool_active(const rf_pool *p)
{
    return p->inited ? atomic_load(&((rf_pool *)p)->active) : 0;
}

void rf__pool_times(const rf_pool *p, int64_t *cpu_ns, int64_t *busy_ns)
{
    int64_t cpu = 0, busy = 0;
    for (int i = 0; p->workers && i < p->nworkers; i++) {
        cpu += atomic_load_explicit(&p->workers[i].cpu_ns, memory_order_relaxed);
        busy += atomic_load_explicit(&p->workers[i].busy_ns, memory_order_relaxed);
    }
    if (cpu_ns)
        *cpu_ns = cpu;
    if (busy_ns)
        *busy_ns = busy;
}
