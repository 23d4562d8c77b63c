/*
 * sampler.h - the epoch's order, split across distributed ranks.
 *
 * Batch k of an epoch is a pure function of (seed, epoch, rank, world_size, k):
 * the epoch's global order is a Fisher-Yates shuffle driven by the
 * counter-based RNG keyed on (seed, epoch), or with shuffle_block K > 0 a
 * seeded permutation of the shards cut into blocks of K shards, each block's
 * samples shuffled together. It is then split as torch's DistributedSampler
 * splits it (pad by wrapping to a multiple of world_size, or with
 * sampler_drop_last trim the tail down to one, then rank r takes
 * order[r::world]).
 *
 * A resume on another number of ranks splits the rest of an epoch: the
 * global order without its first `start` entries (those all ranks of the
 * earlier run consumed), padded or trimmed and split the same way. start 0 is
 * the whole epoch. The shard of this rank's k-th sample of the epoch is the
 * source's shard of order[k] (what a shard prefetcher needs to look ahead).
 *
 * A mixture of sources hands the sampler its own global order instead of
 * the permutation (rf__sampler_set_fill, sampler_mix.h): n is then the
 * epoch's entries, not the index's samples, and everything above applies
 * to that order unchanged.
 */
#ifndef RF_SAMPLER_H
#define RF_SAMPLER_H

#include <stdint.h>

#define RF__SAMPLER_BUCKETS 256 /* aspect-ratio buckets at most (= RF__BUCKETS_MAX) */

/* The order with aspect-ratio buckets (sampler_bucket.c); NULL without. */
typedef struct rf_bucket_order rf_bucket_order;
#include "rng.h"

typedef struct rf_sampler {
    int64_t n; /* samples in the dataset */
    int64_t batch_size;
    int64_t rank, world_size;
    int shuffle, drop_last;
    int sampler_drop_last; /* trim the order to a multiple of world_size, not pad */
    uint64_t seed;
    int64_t epoch;         /* epoch whose order is in `order`, -1 before the first */
    int64_t start;         /* the split covers perm[start..n): 0 but in a resumed epoch */
    int64_t num_samples;   /* this rank's samples in the current split: ceil(rest / world_size),
                           * floor(rest / world_size) with sampler_drop_last, rest = n - start */
    int64_t num_batches;   /* this rank's batches in the current split */
    int64_t epoch_batches; /* ... in a whole epoch (start 0); fixed at init */
    int64_t *order;        /* num_samples global indices of this rank, this epoch */
    uint32_t *perm;        /* the epoch's global order, n entries */
    /* shard-aware shuffle (rf__sampler_set_shards); block 0: global shuffle */
    int64_t block; /* shards per block */
    int64_t nshards;
    uint32_t *members;    /* n sample indices grouped by shard, ascending within one */
    int64_t *shard_first; /* nshards + 1: shard s's samples are members[shard_first[s]..[s+1]) */
    uint32_t *shard_perm; /* scratch: the epoch's shard order */
    rf_bucket_order *bo;  /* aspect-ratio buckets (rf__sampler_set_buckets), or NULL */
    /* a global order made elsewhere (a mixture: sampler_mix.h), n entries
     * into perm per epoch; NULL: the permutation above */
    void (*fill)(void *ctx, uint64_t seed, int64_t epoch, int shuffle, uint32_t *perm);
    void *fill_ctx;
} rf_sampler;

/* 0, or RF_E_INVALID / RF_E_NOMEM. */
int rf__sampler_init(rf_sampler *s, int64_t n, int64_t batch_size, int shuffle, int drop_last,
                     int sampler_drop_last, uint64_t seed, int64_t rank, int64_t world_size);
void rf__sampler_free(rf_sampler *s);

/* Shard-aware shuffle: sample i lies in shard shard_of(ctx, i) < nshards
 * (called twice per sample, here only); the order visits the shards in a
 * seeded permutation, `block` at a time, and shuffles each block's samples
 * together (without shuffle: the shards' own order). Before the first
 * rf__sampler_set_epoch. 0, RF_E_INVALID (block or nshards < 1, a shard out
 * of range) or RF_E_NOMEM. */
int rf__sampler_set_shards(rf_sampler *s, int64_t block, int64_t nshards,
                           uint32_t (*shard_of)(const void *ctx, int64_t i), const void *ctx);

/* The epoch's global order comes from fill(ctx, seed, epoch, shuffle, perm),
 * which writes n global indexes (a mixture's order, sampler_mix.h; they may
 * repeat and need not cover every sample), instead of a permutation. Before
 * the first rf__sampler_set_epoch. */
void rf__sampler_set_fill(rf_sampler *s,
                          void (*fill)(void *ctx, uint64_t seed, int64_t epoch, int shuffle,
                                       uint32_t *perm),
                          void *ctx);

/* Fisher-Yates over a[0..n) with rng (sampler_mix.c shuffles with it too). */
void rf__shuffle_u32(uint32_t *a, int64_t n, rf_rng *rng);

/* Groups samples 0..n-1 by shard_of (< nshards), a counting sort: shard
 * s's samples, ascending, are members[shard_first[s] .. shard_first[s+1]).
 * members holds n entries, shard_first nshards + 1, cursor nshards
 * (scratch). 0 or RF_E_INVALID (a shard out of range). */
int rf__shards_group(int64_t n, int64_t nshards, uint32_t (*shard_of)(const void *ctx, int64_t i),
                     const void *ctx, uint32_t *members, int64_t *shard_first, uint32_t *cursor);

/* The shard-block order of grouped samples into out: the shards in an
 * order keyed on (seed, epoch, shards_tag) (their own without shuffle), cut
 * into blocks of `block` shards, block b's samples shuffled with the stream
 * (seed, epoch, block_tag + b). shard_perm: nshards entries of scratch.
 * Returns the entries written (every member). */
int64_t rf__shards_blocks(uint32_t *out, const uint32_t *members, const int64_t *shard_first,
                          int64_t nshards, int64_t block, uint32_t *shard_perm, int shuffle,
                          uint64_t seed, int64_t epoch, uint64_t shards_tag, uint64_t block_tag);

/* Computes this rank's order for `epoch` (no-op when already current). */
void rf__sampler_set_epoch(rf_sampler *s, int64_t epoch);

/* As rf__sampler_set_epoch, splitting only the epoch's order from position
 * start (0 <= start <= n) on: the rest of an epoch resumed on this many ranks. */
void rf__sampler_set_rest(rf_sampler *s, int64_t epoch, int64_t start);

/* This rank's samples and batches in the split of the order from `start` on. */
void rf__sampler_rest_counts(const rf_sampler *s, int64_t start, int64_t *num_samples,
                             int64_t *num_batches);

/* Entries of the current epoch's global order that all ranks consumed when
 * each stands at batch `batch` of its current split (lockstep): the split's
 * start + world_size * batch * batch_size, or n once the split's batches are
 * all taken (its padding, trimmed tail and dropped short batches included). */
int64_t rf__sampler_consumed(const rf_sampler *s, int64_t batch);

/* The samples of batch k of the current epoch: returns their count and points
 * *idx at them (inside s->order). 0 when k is out of range. */
int64_t rf__sampler_batch(const rf_sampler *s, int64_t k, const int64_t **idx);

/* The epoch's global order into s->perm (a seeded permutation, or the
 * identity without shuffle): no shard blocks. */
void rf__sampler_global_order(rf_sampler *s, int64_t epoch);

/* ---- aspect-ratio buckets (sampler_bucket.c) ---------------------------------
 * Every batch holds samples of one bucket: the epoch's sequence and its
 * split are described there. */

/* Orders by bucket from now on: of[i] is sample i's bucket (< nb, kept,
 * not copied), counts[b] the samples of bucket b; shared: all ranks of a
 * step take batches of one bucket. Sets epoch_batches. Before the first
 * rf__sampler_set_epoch, without shard blocks. 0 or RF_E_NOMEM. */
int rf__sampler_set_buckets(rf_sampler *s, const uint16_t *of, const int64_t *counts, int nb,
                            int shared);
void rf__bucket_order_free(rf_bucket_order *b);

/* The unit (samples per run of the sequence) the next split uses: that of
 * the run whose position is resumed; 0: this loader's own (batch_size x
 * world_size when shared, else batch_size). */
void rf__sampler_want_unit(rf_sampler *s, int64_t unit);
/* The current split's unit (0 without buckets). */
int64_t rf__sampler_unit(const rf_sampler *s);

/* rf__sampler_set_rest with buckets: 0 or RF_E_NOMEM (the split is then
 * not made; nothing else changes). */
int rf__bucket_set_rest(rf_sampler *s, int64_t epoch, int64_t start);
/* Batch k: its samples (count returned, *idx) and its bucket. */
int64_t rf__bucket_batch(const rf_sampler *s, int64_t k, const int64_t **idx, int *bucket);
int64_t rf__bucket_consumed(const rf_sampler *s, int64_t batch);

#endif
