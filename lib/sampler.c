/*
 * sampler.c - seeded per-epoch permutation and DistributedSampler's split.
 *
 * The permutation is recomputed once per epoch, O(n) time and 4 bytes per
 * sample of scratch; rank r keeps perm[r], perm[r + W], ... after padding by
 * wrapping around to a multiple of W, exactly as DistributedSampler with
 * drop_last=False. With sampler_drop_last the tail is trimmed instead, as
 * DistributedSampler(drop_last=True) does: each rank keeps floor(n / W)
 * samples, so no sample is seen twice across ranks. Batching then cuts this
 * rank's list in order; drop_last drops a short final batch.
 */
#include "sampler.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"
#include "rng.h"

int rf__sampler_init(rf_sampler *s, int64_t n, int64_t batch_size, int shuffle, int drop_last,
                     int sampler_drop_last, uint64_t seed, int64_t rank, int64_t world_size)
{
    memset(s, 0, sizeof *s);
    if (n <= 0 || n > UINT32_MAX || batch_size <= 0 || world_size <= 0 || rank < 0 ||
        rank >= world_size)
        return RF_E_INVALID;
    s->n = n;
    s->batch_size = batch_size;
    s->shuffle = shuffle;
    s->drop_last = drop_last;
    s->sampler_drop_last = sampler_drop_last;
    s->seed = seed;
    s->rank = rank;
    s->world_size = world_size;
    s->epoch = -1;
    /* torch writes the trimmed count as ceil((n - W) / W) when W does not
     * divide n: that is floor(n / W), 0 when n < W. */
    s->num_samples = sampler_drop_last ? n / world_size : (n + world_size - 1) / world_size;
    s->num_batches = drop_last ? s->num_samples / batch_size
                               : (s->num_samples + batch_size - 1) / batch_size;
    /* At least one entry: num_samples is 0 when a trimmed split leaves this
     * rank nothing, and malloc(0) may return NULL. */
    s->order = malloc((size_t)(s->num_samples ? s->num_samples : 1) * sizeof *s->order);
    s->perm = malloc((size_t)n * sizeof *s->perm);
    if (!s->order || !s->perm) {
        rf__sampler_free(s);
        return RF_E_NOMEM;
    }
    return 0;
}

void rf__sampler_free(rf_sampler *s)
{
    free(s->order);
    free(s->perm);
    s->order = NULL;
    s->perm = NULL;
}

void rf__sampler_set_epoch(rf_sampler *s, int64_t epoch)
{
    if (s->epoch == epoch)
        return;
    for (int64_t i = 0; i < s->n; i++)
        s->perm[i] = (uint32_t)i;
    if (s->shuffle) {
        rf_rng rng = rf__rng_make(s->seed, (uint64_t)epoch, 0x5045524dULL /* "PERM" */);
        for (int64_t i = s->n - 1; i > 0; i--) {
            int64_t j = (int64_t)rf__rng_below(&rng, (uint64_t)i + 1);
            uint32_t t = s->perm[i];
            s->perm[i] = s->perm[j];
            s->perm[j] = t;
        }
    }
    /* Padded position p maps to perm[p % n]: wrapping as DistributedSampler pads.
     * A trimmed split only has positions p < floor(n / W) * W <= n, so the
     * same loop takes perm[r::W] up to the cut without wrapping. */
    for (int64_t k = 0; k < s->num_samples; k++) {
        int64_t p = s->rank + k * s->world_size;
        s->order[k] = s->perm[p % s->n];
    }
    s->epoch = epoch;
}

int64_t rf__sampler_batch(const rf_sampler *s, int64_t k, const int64_t **idx)
{
    assert(s->epoch >= 0);
    if (k < 0 || k >= s->num_batches)
        return 0;
    int64_t start = k * s->batch_size;
    int64_t count = s->num_samples - start;
    if (count > s->batch_size)
        count = s->batch_size;
    *idx = s->order + start;
    return count;
}
