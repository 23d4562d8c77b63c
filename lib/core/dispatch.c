/*
 * dispatch.c - the dispatcher thread (see dispatch.h).
 *
 * Its loop, under the loader's mutex except around the reader's reap and the
 * ring's growth: grow the ring to the tuner's target, claim free slots for
 * the batches ahead of the consumer (at most ring.k ahead), hand the filling
 * slots' samples to the reader while it has room and the pool has free jobs,
 * then either sleep (nothing in flight) or reap completed reads without the
 * lock and queue them for the decode pool.
 *
 * Lock rules: the loader's mutex (d->mu) protects the position, the fill
 * list, the ring's slot states and the measurements; it is never held across
 * a read, a reap, an allocation or a decode. The dispatcher sleeps on cv_disp
 * with it; whoever frees a slot, moves the position or stops signals cv_disp
 * under it. A worker returning a job wakes it only when it sleeps and the
 * pool's queue is down to half (pool.c: producer_waiting, a Dekker pair
 * with the free stack).
 */
#define _GNU_SOURCE
#include "dispatch.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bucket.h"
#include "clock.h"
#include "mapped.h"
#include "remote.h"
#include "mix.h"
#include "trace.h"

/* The fetch thread: a remote shard became ready or failed. */
static void remote_wake(void *ctx)
{
    rf_dispatch *d = ctx;
    pthread_mutex_lock(d->mu);
    pthread_cond_signal(&d->cv_disp);
    pthread_mutex_unlock(d->mu);
}

int rf__dispatch_init(rf_dispatch *d, const rf_source *src, rf_sampler *sampler, rf_ring *ring,
                      rf_reader *reader, rf_pool *pool, int njobs, pthread_mutex_t *mu,
                      pthread_cond_t *cv_cons)
{
    memset(d, 0, sizeof *d);
    d->src = src;
    d->sampler = sampler;
    d->ring = ring;
    d->reader = reader;
    d->pool = pool;
    d->mu = mu;
    d->cv_cons = cv_cons;
    d->njobs = njobs;
    d->jobs = calloc((size_t)njobs, sizeof *d->jobs);
    d->fill = calloc((size_t)ring->cap, sizeof *d->fill);
    if (!d->jobs || !d->fill) {
        free(d->jobs);
        free(d->fill);
        d->jobs = NULL;
        d->fill = NULL;
        return RF_E_NOMEM;
    }
    for (int i = 0; i < njobs; i++)
        rf__pool_put(pool, &d->jobs[i].link);
    pthread_cond_init(&d->cv_disp, NULL);
    rf_remote *rem;
    for (int k = 0; (rem = rf__source_remote_at(src, k)) != NULL; k++)
        rf__remote_set_wake(rem, remote_wake, d);
    d->target_k = ring->k;
    rf__sampler_set_epoch(sampler, 0);
    atomic_store(&d->gen, 1);
    d->inited = 1;
    return 0;
}

void rf__dispatch_free(rf_dispatch *d, int forked)
{
    if (!d->inited)
        return;
    assert(forked || !d->running);
    rf_remote *rem;
    for (int k = 0; !forked && (rem = rf__source_remote_at(d->src, k)) != NULL; k++)
        rf__remote_set_wake(rem, NULL, NULL); /* the fetch thread outlives us: no more wakes */
    for (int i = 0; i < d->njobs; i++)
        free(d->jobs[i].rd.buf);
    free(d->jobs);
    free(d->fill);
    if (!forked)
        pthread_cond_destroy(&d->cv_disp);
    memset(d, 0, sizeof *d);
}

void rf__dispatch_wake(rf_dispatch *d)
{
    if (d->inited)
        pthread_cond_signal(&d->cv_disp);
}

void rf__dispatch_stop(rf_dispatch *d)
{
    atomic_store(&d->stopped, 1);
    if (d->inited)
        pthread_cond_broadcast(&d->cv_disp);
}

void rf__dispatch_seek(rf_dispatch *d, int64_t epoch, int64_t start, int64_t batch)
{
    int64_t gen = atomic_load(&d->gen) + 1;
    atomic_store(&d->gen, gen);
    d->epoch = epoch;
    rf__sampler_set_rest(d->sampler, epoch, start);
    d->next_batch = d->sched_batch = batch;
    d->nfill = 0;
    rf_remote *rem;
    for (int k = 0; (rem = rf__source_remote_at(d->src, k)) != NULL; k++)
        rf__remote_seek(rem, batch);
    rf__ring_invalidate(d->ring, gen);
    pthread_cond_broadcast(&d->cv_disp);
}

void rf__dispatch_set_prefetch(rf_dispatch *d, int k)
{
    if (k > d->target_k) {
        d->target_k = k;
        pthread_cond_signal(&d->cv_disp);
    }
}

void rf__dispatch_times(rf_dispatch *d, int64_t now, int64_t *blocked_ns, int64_t *read_ns)
{
    if (d->blocked_since) {
        d->blocked_ns += now - d->blocked_since;
        d->blocked_since = now;
    }
    *blocked_ns = d->blocked_ns;
    *read_ns = d->read_ns;
}

void rf__dispatch_job_done(void *ctx, rf_pool_job *pj)
{
    rf_dispatch *d = ctx;
    rf_job *j = rf__job_of(pj);
    rf_slot *s = j->slot; /* read before the job can be reused */
    /* the exchange only while tracing and not traced yet: no write to a
     * line shared by every worker per job */
    if (rf__trace_on() && !atomic_load_explicit(&d->traced_done, memory_order_relaxed) &&
        !atomic_exchange_explicit(&d->traced_done, 1, memory_order_relaxed))
        rf__trace("first job done (decoded)");
    int64_t i = j->rd.sample;
    const rf_source *src = rf__source_at(d->src, &i); /* a mixture's source */
    if (src->remote) /* decoded (or dropped): its shard may be unpinned */
        rf__remote_done(src->remote, src, i);
    int last = rf__ring_sample_release(s);
    rf__pool_put(d->pool, pj);
    if (last) {
        pthread_mutex_lock(d->mu);
        if (rf__ring_complete(s, atomic_load(&d->gen))) {
            pthread_cond_broadcast(d->cv_cons);
            rf_remote *rem;
            for (int k = 0; !d->warm && (rem = rf__source_remote_at(d->src, k)) != NULL; k++)
                rf__remote_warm(rem); /* order: the loader's mutex, then r->mu */
            d->warm = 1;
        }
        pthread_cond_signal(&d->cv_disp);
        pthread_mutex_unlock(d->mu);
    } else if (rf__pool_producer_wanted(d->pool)) {
        pthread_mutex_lock(d->mu);
        pthread_cond_signal(&d->cv_disp);
        pthread_mutex_unlock(d->mu);
    }
}

/* Under mu: grows the ring to the tuner's target, one slot at a time, the
 * allocation (cudaHostAlloc can take milliseconds) without the lock. Slot
 * memory is read by nobody until the slot is committed; a failed allocation
 * ends the growth (the tuner learns the real prefetch from its next window). */
static void grow(rf_dispatch *d)
{
    while (d->ring->k < d->target_k && !atomic_load(&d->stopped)) {
        if (d->ring->k >= d->ring->cap) {
            d->target_k = d->ring->k;
            break;
        }
        pthread_mutex_unlock(d->mu);
        int pinned;
        char note[160];
        uint8_t *extras;
        uint8_t *mem = rf__ring_grow_alloc(d->ring, &pinned, note, sizeof note, &extras);
        pthread_mutex_lock(d->mu);
        if (!mem) {
            d->target_k = d->ring->k;
            break;
        }
        rf__ring_grow_commit(d->ring, mem, pinned, note, extras);
    }
}

/* Claims slots for the batches ahead of the consumer, in order. */
static void schedule(rf_dispatch *d)
{
    int64_t nb = d->sampler->num_batches;
    int64_t gen = atomic_load(&d->gen);
    while (d->sched_batch < nb && d->sched_batch < d->next_batch + d->ring->k) {
        const int64_t *idx;
        int bucket = -1;
        int64_t count = d->buckets ? rf__bucket_batch(d->sampler, d->sched_batch, &idx, &bucket)
                                   : rf__sampler_batch(d->sampler, d->sched_batch, &idx);
        rf_slot *s = rf__ring_claim_batch(d->ring, gen, d->epoch, d->sched_batch, idx, count);
        if (!s)
            break;
        if (bucket >= 0) { /* the batch's images have its bucket's shape */
            int h = d->buckets->hw[bucket][0], w = d->buckets->hw[bucket][1];
            rf__ring_shape(s, h, w, (size_t)h * (size_t)w * 3 * d->elem_bytes, bucket);
        }
        for (int64_t i = 0; i < count; i++)
            s->view.labels[i] = rf__source_label(d->src, idx[i]);
        d->fill[d->nfill++] = s;
        d->sched_batch++;
    }
    /* Producers are blocked on a full ring when batches remain to be made,
     * nothing is left to read or decode, and no slot can take the next one. */
    int blocked = d->sched_batch < nb && d->nfill == 0 && rf__pool_queued(d->pool) == 0 &&
                  rf__reader_inflight(d->reader) == 0;
    int64_t now = blocked || d->blocked_since ? rf__now_ns() : 0;
    if (blocked && !d->blocked_since)
        d->blocked_since = now;
    else if (!blocked && d->blocked_since) {
        d->blocked_ns += now - d->blocked_since;
        d->blocked_since = 0;
    }
}

/* Hands the filling slots' samples to the reader, in order, while it has
 * room and jobs are free. A sample of a remote shard waits until the shard
 * is pinned in the cache (d->remote_wait: the fetch thread wakes us); one
 * whose shard failed goes to the pool as a failed read. Of a mixture, the
 * remote calls get the sample's source and its index there. */
static void submit(rf_dispatch *d, unsigned depth)
{
    rf_pool_job *pj;
    d->remote_wait = 0;
    while (d->nfill > 0 && rf__reader_inflight(d->reader) < depth) {
        rf_slot *s = d->fill[0];
        int64_t sample = s->view.samples[s->submitted], i = sample;
        const rf_source *src = rf__source_at(d->src, &i);
        rf_remote *rem = src->remote;
        if ((pj = rf__pool_take(d->pool)) == NULL)
            break;
        /* a remote sample is taken (its shard's pin held for the read) in
         * the same step that finds the shard pinned, so no release comes
         * between the check and the read */
        const char *why = NULL;
        int ready = rem ? rf__remote_take(rem, src, i, &why) : 1;
        if (ready == 0) {
            rf__pool_unget(d->pool, pj);
            d->remote_wait = 1;
            break;
        }
        rf_job *j = rf__job_of(pj);
        j->slot = s;
        j->pos = s->submitted;
        j->gen = atomic_load(&d->gen);
        j->epoch = d->epoch;
        j->rd.path = rf__source_read_path(d->src, sample);
        /* a remote shard: through its pin, which lasts until the job is done */
        j->rd.use_fd = rem && ready > 0;
        j->rd.fd = j->rd.use_fd ? rf__remote_pin_fd(rem, src, i) : -1;
        rf__source_extent(d->src, sample, &j->rd.ranged, &j->rd.offset, &j->rd.length);
        j->rd.sample = sample;
        /* a member of a local shard already in memory: read in place */
        const uint8_t *in_place = NULL;
        if (!rem && d->maps && j->rd.ranged && j->rd.length <= d->max_bytes)
            in_place = rf__maps_resident(d->maps, j->rd.path, j->rd.offset, j->rd.length);
        if (in_place) {
            j->rd.map = in_place;
            j->rd.len = (size_t)j->rd.length;
            j->rd.size = j->rd.length;
            j->rd.err = 0;
            j->rd.what = "";
            j->rd.t_submit_ns = j->rd.t_done_ns = 0;
            rf__pool_push(d->pool, pj);
        } else if (ready < 0) {
            /* the shard could not be fetched: the sample fails as a read */
            j->rd.map = NULL;
            j->rd.err = EIO;
            j->rd.what = why;
            j->rd.len = 0;
            rf__pool_push(d->pool, pj);
        } else if (rf__reader_submit(d->reader, &j->rd) != 0) {
            if (rem)
                rf__remote_untake(rem, src, i);
            rf__pool_unget(d->pool, pj); /* file slots busy closing: later */
            break;
        }
        if (!d->traced_read) {
            d->traced_read = 1;
            RF_TRACE("first read submitted");
        }
        if (++s->submitted == s->count) {
            memmove(d->fill, d->fill + 1, (size_t)(d->nfill - 1) * sizeof *d->fill);
            d->nfill--;
        }
    }
}

/* The epoch's order for the remote lookahead (remote.h: rf_remote_batch_fn). */
static int64_t sampler_batch(const void *sampler, int64_t k, const int64_t **idx)
{
    return rf__sampler_batch(sampler, k, idx);
}

static void *dispatch_main(void *arg)
{
    rf_dispatch *d = arg;
    rf_read *done[64];
    unsigned depth = rf__reader_depth(d->reader);
    int64_t read_ns = 0;
    rf__copier_bind_thread(d->copier); /* page-locked growth on the loader's device */
    pthread_mutex_lock(d->mu);
    while (!atomic_load(&d->stopped)) {
        d->read_ns += read_ns;
        read_ns = 0;
        grow(d);
        schedule(d);
        rf_remote *rem;
        for (int k = 0; (rem = rf__source_remote_at(d->src, k)) != NULL; k++)
            rf__remote_lookahead(rem, d->src, d->sampler->num_batches, sampler_batch, d->sampler);
        submit(d, depth);
        if (rf__reader_inflight(d->reader) == 0) {
            /* Nothing in flight: wait for a freed slot, a freed job, a new
             * position or stop. Workers returning jobs wake us only while
             * producer_waiting is set (checked again after setting it). */
            rf__pool_producer_sleeps(d->pool, 1);
            if (d->nfill > 0 && rf__pool_has_free(d->pool) && !d->remote_wait) {
                rf__pool_producer_sleeps(d->pool, 0);
                continue;
            }
            if (rf__ring_reap_copies(d->ring) > 0) {
                /* A free slot waits for its copy to the GPU, whose end
                 * signals nobody: look again in 0.5 ms (ring.h). */
                struct timespec t = rf__deadline_in(0, 500000);
                pthread_cond_timedwait(&d->cv_disp, d->mu, &t);
            } else {
                pthread_cond_wait(&d->cv_disp, d->mu);
            }
            rf__pool_producer_sleeps(d->pool, 0);
            continue;
        }
        pthread_mutex_unlock(d->mu);
        int n = rf__reader_reap(d->reader, done, 64, 20);
        for (int i = 0; i < n; i++) {
            rf_job *dj = (rf_job *)done[i];
            read_ns += dj->rd.t_done_ns - dj->rd.t_submit_ns;
            if (dj->gen != atomic_load(&d->gen) || atomic_load(&d->stopped))
                rf__dispatch_job_done(d, &dj->link); /* abandoned position: drop */
            else
                rf__pool_push(d->pool, &dj->link);
        }
        pthread_mutex_lock(d->mu);
    }
    pthread_mutex_unlock(d->mu);
    return NULL;
}

int rf__dispatch_start(rf_dispatch *d, int *err)
{
    int e = pthread_create(&d->thread, NULL, dispatch_main, d);
    if (e != 0) {
        *err = e;
        return RF_E_SYSTEM;
    }
    d->running = 1;
    return 0;
}

void rf__dispatch_join(rf_dispatch *d)
{
    if (d->running)
        pthread_join(d->thread, NULL);
    d->running = 0;
}
