/*
 * consume.c - the consumer's side of the loader: rf_loader_next lends the
 * next batch in order, rf_batch_release takes it back, the rf_batch_*
 * accessors read a lease, and the CUDA entry points copy a lent batch to the
 * device. rf_loader_next also closes the tuner's measurement windows.
 *
 * A batch handle is a lease (ring.h): each lend makes a new one, with its
 * own handle and number, so a stale or double release is recognised and
 * refused instead of returning a batch lent to someone else. Lock rules:
 * loader.h.
 */
#define _GNU_SOURCE
#include "loader.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "trace.h"

/* Closes the measurement window: feeds it to the tuner and applies the
 * decision: unparks/parks workers now, and asks the dispatcher to grow the
 * ring (it allocates on its own thread, never on the consumer's). Called with
 * l->mu held. */
static void tuner_window(rf_loader *l, int64_t now)
{
    int64_t cpu_total, busy_total, blocked_total, read_total;
    rf__pool_times(&l->pool, &cpu_total, &busy_total);
    rf__dispatch_times(&l->disp, now, &blocked_total, &read_total);
    int active = rf__pool_active(&l->pool);
    rf_tuner_window w = {
        .batches = l->win_batches,
        .samples = l->win_samples,
        .wall_s = (double)(now - l->win_t0) / 1e9,
        .stall_s = (double)l->win_stall_ns / 1e9,
        .step_s = (double)l->win_step_ns / 1e9,
        .worker_cpu_s = (double)(cpu_total - l->win_cpu_base) / 1e9,
        .worker_busy_s = (double)(busy_total - l->win_busy_base) / 1e9,
        .blocked_s = (double)(blocked_total - l->win_blocked_base) / 1e9,
        .read_s = (double)(read_total - l->win_read_base) / 1e9,
        .workers = active,
        .prefetch = l->ring.k,
    };
    l->win_cpu_base = cpu_total;
    l->win_busy_base = busy_total;
    l->win_blocked_base = blocked_total;
    l->win_read_base = read_total;
    rf_tuner_decision d;
    rf__tuner_step(&l->tuner, &w, &d);
    if (d.workers >= 1 && d.workers <= l->nworkers && d.workers != active) {
        rf__pool_set_active(&l->pool, d.workers);
        active = d.workers;
    }
    if (d.prefetch > l->ring.k)
        rf__dispatch_set_prefetch(&l->disp, d.prefetch);
    if (d.changed)
        rf__stats_add_decision(&l->stats, l->stats.batches, active, d.reason);
    l->win_t0 = now;
    l->win_batches = l->win_samples = 0;
    l->win_stall_ns = l->win_step_ns = 0;
}

/* Under mu: the slot of a batch that failed is consumed; its error becomes
 * the loader's. */
static int deliver_error(rf_loader *l, rf_slot *s)
{
    int rc = s->errcode;
    rf__loader_err(l, "%s", s->errmsg);
    rf__ring_drop(s);
    return rc;
}

int rf_loader_next_wait(rf_loader *l, rf_batch **out, int64_t timeout_ms)
{
    if (!out)
        return RF_E_INVALID;
    *out = NULL;
    int rc = rf__loader_usable(l);
    if (rc)
        return rc;
    int64_t t0 = rf__now_ns();
    struct timespec deadline = {0};
    if (timeout_ms >= 0)
        deadline = rf__deadline_in(timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000);
    rf_dispatch *d = &l->disp;
    pthread_mutex_lock(&l->mu);
    if (!l->stats.t_first_ns)
        l->stats.t_first_ns = t0;
    if (!l->win_t0)
        l->win_t0 = t0;
    if (l->last_return_ns) {
        l->win_step_ns += t0 - l->last_return_ns; /* the consumer's step since its last batch */
        l->last_return_ns = 0;
    }
    rf_slot *s = NULL;
    for (;;) {
        if (atomic_load(&l->stopped)) {
            rf__loader_err(l, "loader: stopped");
            rc = RF_E_STOPPED;
            break;
        }
        if (d->next_batch >= l->sampler.num_batches) {
            rc = RF_END_OF_EPOCH;
            break;
        }
        s = rf__ring_find(&l->ring, atomic_load(&d->gen), d->next_batch);
        if (s && s->state == RF_SLOT_READY)
            break;
        if (!s && rf__ring_count(&l->ring, RF_SLOT_LENT) == l->ring.k) {
            rf__loader_err(l, "ring: all %d slots are lent; release batches before asking for more",
                           l->ring.k);
            rc = RF_E_RING_FULL;
            break;
        }
        l->wait_open = 1; /* the batch was not ready when asked for: the ring was empty */
        int w;
        if (timeout_ms >= 0) {
            w = pthread_cond_timedwait(&l->cv_cons, &l->mu, &deadline);
        } else {
            w = pthread_cond_wait(&l->cv_cons, &l->mu);
        }
        if (w == ETIMEDOUT) {
            rc = RF_AGAIN;
            break;
        }
    }
    int64_t t1 = rf__now_ns();
    l->stats.stall_ns += t1 - t0;
    l->win_stall_ns += t1 - t0;
    l->wait_ns += t1 - t0; /* this batch's wait, over the calls that asked for it */
    if (rc != RF_OK) {
        if (rc == RF_END_OF_EPOCH)
            l->wait_ns = l->wait_open = 0;
        pthread_mutex_unlock(&l->mu);
        return rc;
    }
    d->next_batch++;
    rf__dispatch_wake(d); /* the prefetch window moved */
    int nbad = atomic_load(&s->nbad);
    for (int i = 0; i < nbad && i < RF_SLOT_MAX_BAD; i++) {
        char name[512]; /* the path, or "shard.tar:key.jpg", or "file at offset N" */
        rf__source_name(&l->src, s->bad[i].sample, name, sizeof name);
        rf__stats_add_error(&l->stats, s->bad[i].sample, d->epoch, name, s->bad[i].reason);
    }
    l->stats.errors_total += s->bad_dropped;
    if (!s->errcode)
        l->stats.skipped += atomic_load(&s->nskipped);
    if (s->errcode) {
        l->wait_ns = l->wait_open = 0; /* consumed: the next batch's wait starts */
        rc = deliver_error(l, s);
        pthread_mutex_unlock(&l->mu);
        return rc;
    }
    if (l->stats.batches == 0)
        RF_TRACE("first batch ready");
    rf__latency_add(&l->stats.wait, l->wait_ns);
    l->stats.ring_empty += l->wait_open;
    l->wait_ns = l->wait_open = 0;
    if (!l->stats.t_first_batch_ns)
        l->stats.t_first_batch_ns = t1;
    if (l->mix)
        rf__loader_mix_lend(l, s);
    rf_batch *b = rf__ring_lend(s);
    b->loader = l;
    l->stats.images += s->count;
    l->stats.batches++;
    l->stats.t_last_ns = t1;
    l->last_return_ns = t1;
    l->win_batches++;
    l->win_samples += s->count;
    if (l->tuning && rf__tuner_window_ready(l->win_batches, (double)(t1 - l->win_t0) / 1e9))
        tuner_window(l, t1);
    pthread_mutex_unlock(&l->mu);
    *out = b;
    return RF_OK;
}

int rf_loader_next(rf_loader *l, rf_batch **out)
{
    return rf_loader_next_wait(l, out, -1);
}

int rf_batch_release(rf_batch *b)
{
    if (!b)
        return RF_OK;
    /* Read before mu, which it names: within the stale-handle bound
     * (ringfeed.h) the handle's memory is not lent again, so nothing writes
     * it (and every lease it serves has the same loader). What the error
     * message needs is read under mu, where a lend of a newer lease through
     * the same handle memory writes it. */
    rf_loader *l = b->loader;
    if (!l)
        return RF_E_INVALID;
    if (getpid() != l->pid) {
        rf__loader_err_any(l, "loader: rf_batch_release in a forked child process; the batch "
                              "belongs to the parent's loader");
        return RF_E_FORKED;
    }
    pthread_mutex_lock(&l->mu);
    rf_slot *s = b->slot;
    if (!rf__ring_lease_live(b) || s->state != RF_SLOT_LENT) {
        long long index = b->index, epoch = b->epoch;
        unsigned long long lease = b->lease;
        pthread_mutex_unlock(&l->mu);
        rf__loader_err_any(l,
                           "loader: rf_batch_release: batch %lld of epoch %lld (lease %llu) was "
                           "already released",
                           index, epoch, lease);
        return RF_E_RELEASED;
    }
    if (b->dev_data && l->copier) {
        /* Records the release on the consumer's stream (copier.h), before the
         * slot can be lent again and its device buffer refilled. */
        rf__copier_release(l->copier, s->id);
    }
    b->dev_data = NULL;
    b->dev_labels = NULL;
    if (rf__ring_release(b) == 0)
        rf__dispatch_wake(&l->disp); /* a slot is free */
    pthread_mutex_unlock(&l->mu);
    return RF_OK;
}

/* The accessors answer a handle whose lease ended with nothing. */
static int live(const rf_batch *b)
{
    return b && rf__ring_lease_live(b);
}

void *rf_batch_data(const rf_batch *b)
{
    return live(b) ? b->data : NULL;
}

const int64_t *rf_batch_labels(const rf_batch *b)
{
    return live(b) ? b->labels : NULL;
}

const void *rf_batch_field(const rf_batch *b, int64_t i, const char *ext, size_t *len)
{
    if (len)
        *len = 0;
    if (!live(b) || !b->extras || !ext || i < 0 || i >= b->count)
        return NULL;
    const rf_loader *l = b->loader;
    int e = rf__member_extra_index(&l->cfg.names, ext);
    if (e < 0)
        return NULL;
    int n = l->ring.nextras;
    const uint32_t *lens = b->extras_len + (size_t)i * (size_t)n;
    if (lens[e] == RF_SOURCE_ABSENT)
        return NULL;
    size_t off = 0; /* the sample's extras lie back to back, in the order asked */
    for (int f = 0; f < e; f++)
        off += lens[f] == RF_SOURCE_ABSENT ? 0 : lens[f];
    if (len)
        *len = lens[e];
    return b->extras + (size_t)i * l->ring.extras_bytes + off;
}

int64_t rf_batch_count(const rf_batch *b)
{
    return live(b) ? b->count : 0;
}

int64_t rf_batch_index(const rf_batch *b)
{
    return live(b) ? b->index : -1;
}

int64_t rf_batch_epoch(const rf_batch *b)
{
    return live(b) ? b->epoch : -1;
}

const int64_t *rf_batch_samples(const rf_batch *b)
{
    return live(b) ? b->samples : NULL;
}

size_t rf_batch_nbytes(const rf_batch *b)
{
    return live(b) ? b->nbytes : 0;
}

void *rf_batch_device_data(const rf_batch *b)
{
    return live(b) ? b->dev_data : NULL;
}

const int64_t *rf_batch_device_labels(const rf_batch *b)
{
    return live(b) ? b->dev_labels : NULL;
}

/* ---- CUDA (the copier does the work: copier.c) ---------------------------- */

int rf_cuda_device_count(void)
{
    char note[1100];
    return rf__cuda_devices(note, sizeof note);
}

#define NO_DEVICE_FMT "copier: this loader has no CUDA device: %s"

static int no_device(rf_loader *l)
{
    rf__loader_err(l, NO_DEVICE_FMT, l->cuda_note);
    return RF_E_NO_DEVICE;
}

int rf_loader_next_device_wait(rf_loader *l, void *stream, rf_batch **out, int64_t timeout_ms)
{
    if (!out)
        return RF_E_INVALID;
    *out = NULL;
    int rc = rf__loader_usable(l);
    if (rc)
        return rc;
    if (!l->copier)
        return no_device(l);
    rf_batch *b;
    rc = rf_loader_next_wait(l, &b, timeout_ms);
    if (rc != RF_OK)
        return rc;
    void *dev = NULL;
    int64_t *dev_labels = NULL;
    char err[300];
    pthread_mutex_lock(&l->mu);
    rc = rf__ring_copy_begin(b); /* the lease is ours: not handed out yet */
    pthread_mutex_unlock(&l->mu);
    assert(rc == 0);
    rc = rf__copier_to_device(l->copier, b->slot->id, b->data, b->nbytes, b->labels, b->count,
                              stream, &dev, &dev_labels, err, sizeof err);
    pthread_mutex_lock(&l->mu);
    rf__ring_copy_end(b->slot); /* copy_pending stays: something may have been enqueued */
    pthread_mutex_unlock(&l->mu);
    if (rc < 0) {
        rf__loader_err(l, "%s", err);
        rf_batch_release(b);
        return rc;
    }
    b->dev_data = dev;
    b->dev_labels = dev_labels;
    *out = b;
    return RF_OK;
}

int rf_loader_next_device(rf_loader *l, void *stream, rf_batch **out)
{
    return rf_loader_next_device_wait(l, stream, out, -1);
}

int rf_batch_copy_to(rf_batch *b, void *dst_images, void *dst_labels, void *stream)
{
    if (!b || !b->loader || !b->slot)
        return RF_E_INVALID;
    rf_loader *l = b->loader; /* before mu: see rf_batch_release */
    if (getpid() != l->pid) {
        /* The parent's CUDA context and copy stream are not the child's. */
        rf__loader_err_any(l, "copier: rf_batch_copy_to in a forked child process; the batch "
                              "belongs to the parent's loader");
        return RF_E_FORKED;
    }
    /* The lease check and the mark that keeps the slot from being claimed
     * go together: a release from another thread after the check cannot let
     * the slot be refilled under the copy about to be enqueued. */
    pthread_mutex_lock(&l->mu);
    int rc = l->copier ? rf__ring_copy_begin(b)
             : rf__ring_lease_live(b) && b->slot->state == RF_SLOT_LENT ? 0
                                                                         : RF_E_RELEASED;
    pthread_mutex_unlock(&l->mu);
    if (rc < 0) {
        rf__loader_err_any(l, "copier: rf_batch_copy_to: the batch was released");
        return RF_E_RELEASED;
    }
    if (!l->copier) {
        rf__loader_err_any(l, NO_DEVICE_FMT, l->cuda_note);
        return RF_E_NO_DEVICE;
    }
    char err[300];
    rc = rf__copier_copy_to(l->copier, b->slot->id, b->data, b->nbytes, b->labels, b->count,
                            dst_images, dst_labels, stream, err, sizeof err);
    if (rc < 0)
        rf__loader_err_any(l, "%s", err);
    pthread_mutex_lock(&l->mu);
    rf__ring_copy_end(b->slot);
    pthread_mutex_unlock(&l->mu);
    return rc;
}
