/*
 * position.c - where the loader stands: the epoch and the next batch (seek,
 * tell), and the rest of an epoch resumed on another number of ranks.
 *
 * A position is (epoch, start, batch): batch `batch` of this rank's part of
 * the epoch's global order from position `start` on (sampler.h; start is 0
 * but in an epoch resumed with rf_loader_seek_rest). Moving it bumps the
 * dispatcher's generation, so work in flight for the old position is
 * dropped; all of it happens under the loader's mutex (loader.h), which the
 * dispatcher holds while it reads the sampler.
 */
#include "loader.h"

int rf_loader_seek_rest(rf_loader *l, int64_t epoch, int64_t start, int64_t batch)
{
    int rc = rf__loader_usable(l);
    if (rc)
        return rc;
    if (l->buckets.n) /* aspect-ratio buckets: shapes_api.c */
        return rf__loader_seek_buckets(l, epoch, start, 0, batch);
    int64_t ns, nb = -1;
    if (start >= 0 && start <= l->sampler.n) /* the epoch's entries (a mixture's: its shares) */
        rf__sampler_rest_counts(&l->sampler, start, &ns, &nb);
    if (epoch < 0 || batch < 0 || batch > nb) {
        if (nb < 0)
            rf__loader_err(l,
                           "loader: cannot seek to position %lld of epoch %lld's order (%lld "
                           "entries)",
                           (long long)start, (long long)epoch, (long long)l->sampler.n);
        else
            rf__loader_err(l, "loader: cannot seek to epoch %lld batch %lld (%lld batches %s)",
                           (long long)epoch, (long long)batch, (long long)nb,
                           start ? "in this rest of the epoch" : "per epoch");
        return RF_E_INVALID;
    }
    pthread_mutex_lock(&l->mu);
    rf__dispatch_seek(&l->disp, epoch, start, batch);
    l->last_return_ns = 0;         /* time between epochs is not a training step */
    l->wait_ns = l->wait_open = 0; /* the wait of a batch no longer asked for */
    pthread_mutex_unlock(&l->mu);
    return RF_OK;
}

int rf_loader_seek(rf_loader *l, int64_t epoch, int64_t batch)
{
    return rf_loader_seek_rest(l, epoch, 0, batch);
}

int rf_loader_set_epoch(rf_loader *l, int64_t epoch)
{
    return rf_loader_seek(l, epoch, 0);
}

int rf_loader_tell(const rf_loader *l, int64_t *epoch, int64_t *batch)
{
    if (!l)
        return RF_E_INVALID;
    rf_loader *m = (rf_loader *)l;
    pthread_mutex_lock(&m->mu);
    if (epoch)
        *epoch = l->disp.epoch;
    if (batch)
        *batch = l->disp.next_batch;
    pthread_mutex_unlock(&m->mu);
    return RF_OK;
}

int rf_loader_tell_rest(const rf_loader *l, int64_t *start, int64_t *consumed)
{
    if (!l)
        return RF_E_INVALID;
    if (!l->started) {
        if (start)
            *start = 0;
        if (consumed)
            *consumed = 0;
        return RF_OK;
    }
    rf_loader *m = (rf_loader *)l;
    pthread_mutex_lock(&m->mu); /* the sampler's split moves under it (rf__dispatch_seek) */
    if (start)
        *start = l->sampler.start;
    if (consumed)
        *consumed = rf__sampler_consumed(&l->sampler, l->disp.next_batch);
    pthread_mutex_unlock(&m->mu);
    return RF_OK;
}

int64_t rf_loader_epoch_batches(const rf_loader *l)
{
    if (!l || !l->started)
        return 0;
    rf_loader *m = (rf_loader *)l;
    pthread_mutex_lock(&m->mu);
    int64_t nb = l->sampler.num_batches;
    pthread_mutex_unlock(&m->mu);
    return nb;
}
