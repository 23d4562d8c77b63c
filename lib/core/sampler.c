/*
 * sampler.c - seeded per-epoch order and DistributedSampler's split.
 *
 * The epoch's global order is recomputed once per epoch, O(n) time and 4
 * bytes per sample: a Fisher-Yates shuffle of all samples, or with a shard
 * block K a shuffle of the shards, then of each block of K consecutive shards'
 * samples (the shards' samples are grouped once, by a counting sort, when
 * the block is set). Rank r keeps order[r], order[r + W], ... after padding
 * by wrapping around to a multiple of W, exactly as DistributedSampler with
 * drop_last=False. With sampler_drop_last the tail is trimmed instead, as
 * DistributedSampler(drop_last=True) does: each rank keeps floor(n / W)
 * samples, so no sample is seen twice across ranks. Batching then cuts this
 * rank's list in order; drop_last drops a short final batch.
 *
 * A resumed epoch splits the order's rest from `start` the same way, as if
 * that rest were a whole epoch's order: start 0 is exactly the split above.
 */
#include "sampler.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"
#include "rng.h"

#define TAG_PERM 0x5045524dULL          /* "PERM": the global shuffle */
#define TAG_SHARDS 0x53485244ULL        /* "SHRD": the shards' order */
#define TAG_BLOCK (0x424c434bULL << 32) /* "BLCK" + block number: a block's shuffle */

void rf__sampler_rest_counts(const rf_sampler *s, int64_t start, int64_t *num_samples,
                             int64_t *num_batches)
{
    int64_t rest = s->n - start, w = s->world_size;
    /* torch writes the trimmed count as ceil((n - W) / W) when W does not
     * divide n: that is floor(n / W), 0 when n < W. */
    int64_t ns = s->sampler_drop_last ? rest / w : (rest + w - 1) / w;
    *num_samples = ns;
    *num_batches = s->drop_last ? ns / s->batch_size : (ns + s->batch_size - 1) / s->batch_size;
}

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
    rf__sampler_rest_counts(s, 0, &s->num_samples, &s->num_batches);
    s->epoch_batches = s->num_batches;
    /* At least one entry: num_samples is 0 when a trimmed split leaves this
     * rank nothing, and malloc(0) may return NULL. A rest's split is never
     * longer than the whole epoch's. */
    s->order = malloc((size_t)(s->num_samples ? s->num_samples : 1) * sizeof *s->order);
    s->perm = malloc((size_t)n * sizeof *s->perm);
    if (!s->order || !s->perm) {
        rf__sampler_free(s);
        return RF_E_NOMEM;
    }
    return 0;
}

void rf__sampler_set_fill(rf_sampler *s,
                          void (*fill)(void *ctx, uint64_t seed, int64_t epoch, int shuffle,
                                       uint32_t *perm),
                          void *ctx)
{
    s->fill = fill;
    s->fill_ctx = ctx;
    s->epoch = -1;
}

void rf__sampler_free(rf_sampler *s)
{
    free(s->order);
    free(s->perm);
    free(s->members);
    free(s->shard_first);
    free(s->shard_perm);
    rf__bucket_order_free(s->bo);
    s->bo = NULL;
    s->order = NULL;
    s->perm = NULL;
    s->members = NULL;
    s->shard_first = NULL;
    s->shard_perm = NULL;
}

int rf__shards_group(int64_t n, int64_t nshards, uint32_t (*shard_of)(const void *ctx, int64_t i),
                     const void *ctx, uint32_t *members, int64_t *shard_first, uint32_t *cursor)
{
    memset(shard_first, 0, ((size_t)nshards + 1) * sizeof *shard_first);
    for (int64_t i = 0; i < n; i++) {
        uint32_t sh = shard_of(ctx, i);
        if (sh >= nshards)
            return RF_E_INVALID;
        shard_first[sh + 1]++;
    }
    for (int64_t sh = 0; sh < nshards; sh++) {
        shard_first[sh + 1] += shard_first[sh];
        cursor[sh] = (uint32_t)shard_first[sh];
    }
    for (int64_t i = 0; i < n; i++)
        members[cursor[shard_of(ctx, i)]++] = (uint32_t)i;
    return 0;
}

int rf__sampler_set_shards(rf_sampler *s, int64_t block, int64_t nshards,
                           uint32_t (*shard_of)(const void *ctx, int64_t i), const void *ctx)
{
    if (block < 1 || nshards < 1 || nshards > UINT32_MAX || s->members)
        return RF_E_INVALID;
    s->members = malloc((size_t)s->n * sizeof *s->members);
    s->shard_first = calloc((size_t)nshards + 1, sizeof *s->shard_first);
    s->shard_perm = malloc((size_t)nshards * sizeof *s->shard_perm);
    if (!s->members || !s->shard_first || !s->shard_perm)
        return RF_E_NOMEM; /* rf__sampler_free frees what was allocated */
    int rc =
        rf__shards_group(s->n, nshards, shard_of, ctx, s->members, s->shard_first, s->shard_perm);
    if (rc < 0)
        return rc;
    s->block = block;
    s->nshards = nshards;
    s->epoch = -1;
    return 0;
}

void rf__shuffle_u32(uint32_t *a, int64_t n, rf_rng *rng)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rf__rng_below(rng, (uint64_t)i + 1);
        uint32_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

int64_t rf__shards_blocks(uint32_t *out, const uint32_t *members, const int64_t *shard_first,
                          int64_t nshards, int64_t block, uint32_t *shard_perm, int shuffle,
                          uint64_t seed, int64_t epoch, uint64_t shards_tag, uint64_t block_tag)
{
    uint32_t *sp = shard_perm;
    for (int64_t j = 0; j < nshards; j++)
        sp[j] = (uint32_t)j;
    if (shuffle) {
        rf_rng rng = rf__rng_make(seed, (uint64_t)epoch, shards_tag);
        rf__shuffle_u32(sp, nshards, &rng);
    }
    int64_t pos = 0;
    for (int64_t b0 = 0; b0 < nshards; b0 += block) {
        int64_t begin = pos;
        for (int64_t j = b0; j < nshards && j < b0 + block; j++) {
            int64_t first = shard_first[sp[j]], count = shard_first[sp[j] + 1] - first;
            memcpy(out + pos, members + first, (size_t)count * sizeof *out);
            pos += count;
        }
        if (shuffle) {
            rf_rng rng = rf__rng_make(seed, (uint64_t)epoch, block_tag + (uint64_t)(b0 / block));
            rf__shuffle_u32(out + begin, pos - begin, &rng);
        }
    }
    return pos;
}

/* The shards in a seeded order, block by block; each block's samples
 * shuffled with a stream of their own, keyed on (seed, epoch, block). */
static void block_order(rf_sampler *s, int64_t epoch)
{
    int64_t pos =
        rf__shards_blocks(s->perm, s->members, s->shard_first, s->nshards, s->block, s->shard_perm,
                          s->shuffle, s->seed, epoch, TAG_SHARDS, TAG_BLOCK);
    assert(pos == s->n);
    (void)pos;
}

void rf__sampler_global_order(rf_sampler *s, int64_t epoch)
{
    for (int64_t i = 0; i < s->n; i++)
        s->perm[i] = (uint32_t)i;
    if (s->shuffle) {
        rf_rng rng = rf__rng_make(s->seed, (uint64_t)epoch, TAG_PERM);
        rf__shuffle_u32(s->perm, s->n, &rng);
    }
}

void rf__sampler_set_rest(rf_sampler *s, int64_t epoch, int64_t start)
{
    assert(start >= 0 && start <= s->n);
    if (s->bo) {
        /* made beforehand where it can fail (the loader's start and seeks):
         * here it is found made */
        int rc = rf__bucket_set_rest(s, epoch, start);
        (void)rc;
        assert(rc == 0);
        return;
    }
    if (s->epoch == epoch && s->start == start)
        return;
    if (s->epoch != epoch) {
        if (s->fill)
            s->fill(s->fill_ctx, s->seed, epoch, s->shuffle, s->perm);
        else if (s->block > 0)
            block_order(s, epoch);
        else
            rf__sampler_global_order(s, epoch);
    }
    s->start = start;
    rf__sampler_rest_counts(s, start, &s->num_samples, &s->num_batches);
    /* Position p of the padded rest maps to perm[start + p % rest]: wrapping
     * as DistributedSampler pads. A trimmed split only has positions
     * p < floor(rest / W) * W <= rest, so the same loop takes rest[r::W] up
     * to the cut without wrapping. */
    int64_t rest = s->n - start;
    for (int64_t k = 0; k < s->num_samples; k++) {
        int64_t p = s->rank + k * s->world_size;
        s->order[k] = s->perm[start + p % rest];
    }
    s->epoch = epoch;
}

void rf__sampler_set_epoch(rf_sampler *s, int64_t epoch)
{
    rf__sampler_set_rest(s, epoch, 0);
}

int64_t rf__sampler_consumed(const rf_sampler *s, int64_t batch)
{
    if (s->bo)
        return rf__bucket_consumed(s, batch);
    if (batch >= s->num_batches)
        return s->n;
    /* Rank r took positions r + k W of the split for k < batch * batch_size:
     * together the first W * batch * batch_size, all before the padding. */
    int64_t c = s->start + s->world_size * batch * s->batch_size;
    assert(c <= s->n);
    return c;
}

int64_t rf__sampler_batch(const rf_sampler *s, int64_t k, const int64_t **idx)
{
    assert(s->epoch >= 0);
    if (s->bo)
        return rf__bucket_batch(s, k, idx, NULL);
    if (k < 0 || k >= s->num_batches)
        return 0;
    int64_t start = k * s->batch_size;
    int64_t count = s->num_samples - start;
    if (count > s->batch_size)
        count = s->batch_size;
    *idx = s->order + start;
    return count;
}
