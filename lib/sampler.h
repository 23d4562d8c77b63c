/*
 * sampler.h - the epoch's order, split across distributed ranks.
 *
 * Batch k of an epoch is a pure function of (seed, epoch, rank, world_size, k):
 * the permutation is a Fisher-Yates shuffle driven by the counter-based RNG
 * keyed on (seed, epoch), then split as torch's DistributedSampler splits it
 * (pad by wrapping to a multiple of world_size, or with sampler_drop_last
 * trim the tail down to one, then rank r takes perm[r::world]).
 */
#ifndef RF_SAMPLER_H
#define RF_SAMPLER_H

#include <stdint.h>

typedef struct rf_sampler {
    int64_t n;            /* samples in the dataset */
    int64_t batch_size;
    int64_t rank, world_size;
    int shuffle, drop_last;
    int sampler_drop_last; /* trim the order to a multiple of world_size, not pad */
    uint64_t seed;
    int64_t epoch;        /* epoch whose order is in `order`, -1 before the first */
    int64_t num_samples;  /* this rank's samples per epoch: ceil(n / world_size),
                           * floor(n / world_size) with sampler_drop_last */
    int64_t num_batches;  /* batches per epoch for this rank */
    int64_t *order;       /* num_samples global indices of this rank, this epoch */
    uint32_t *perm;       /* scratch: the whole permutation, n entries */
} rf_sampler;

/* 0, or RF_E_INVALID / RF_E_NOMEM. */
int rf__sampler_init(rf_sampler *s, int64_t n, int64_t batch_size, int shuffle, int drop_last,
                     int sampler_drop_last, uint64_t seed, int64_t rank, int64_t world_size);
void rf__sampler_free(rf_sampler *s);

/* Computes this rank's order for `epoch` (no-op when already current). */
void rf__sampler_set_epoch(rf_sampler *s, int64_t epoch);

/* The samples of batch k of the current epoch: returns their count and points
 * *idx at them (inside s->order). 0 when k is out of range. */
int64_t rf__sampler_batch(const rf_sampler *s, int64_t k, const int64_t **idx);

#endif
