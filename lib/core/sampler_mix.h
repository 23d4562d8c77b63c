/*
 * sampler_mix.h - the epoch's global order of a mixture of sources.
 *
 * A mixture's sources are indexed one after the other (source c's samples
 * are the global indexes [first_c, first_c + n_c): source_mix.c), and each
 * takes take_c entries of an epoch (rf__mix_plan: MosaicML streaming's
 * proportion / repeat / choose). The epoch's order is built from them alone,
 * as a pure function of (seed, epoch), and handed to the sampler as its
 * global order (rf__sampler_set_fill), which splits it across ranks, cuts
 * it into batches and resumes it on another number of ranks exactly as it
 * does a single source's permutation. So batch k of an epoch stays a pure
 * function of (seed, epoch, rank, world_size, k), byte-identical for any
 * worker count, and the rest-of-epoch resume (rf_loader_seek_rest) holds
 * for mixtures unchanged.
 *
 * Source c's stream: take_c = q * n_c + r entries are q full passes over its
 * samples, then r distinct samples drawn without replacement (a subset
 * keyed on (seed, epoch, c)): no sample repeats before a full pass. Each
 * pass is a permutation keyed on (seed, epoch, c, pass): a Fisher-Yates
 * shuffle, or with shuffle blocks K the source's shards in a seeded order,
 * K at a time, each block's samples shuffled together (the last, partial
 * pass keeps that order, restricted to its subset); without shuffle, index
 * order. The streams are then merged: with shuffle, a uniformly random
 * interleaving (a Fisher-Yates shuffle of take_c copies of each source's
 * number, keyed on (seed, epoch)), which keeps each stream's own order, so
 * that a merge of shuffled streams is a uniform shuffle of the epoch's
 * multiset while a blocked stream keeps its locality; without shuffle, the
 * smooth interleaving that places source c's k-th entry nearest (k + 1/2)
 * * size / take_c.
 */
#ifndef RF_SAMPLER_MIX_H
#define RF_SAMPLER_MIX_H

#include <stddef.h>
#include <stdint.h>

/* How a source's share of an epoch is sized (enum rf_mix_size's values). */
enum { RF__MIX_WHOLE = 0, RF__MIX_PROPORTION = 1, RF__MIX_REPEAT = 2, RF__MIX_CHOOSE = 3 };

/* The most sources in one mixture, and the most entries of an epoch (the
 * sampler's order holds 32-bit indexes). */
#define RF_MIX_MAX_SOURCES 4096
#define RF_MIX_MAX_EPOCH INT64_C(4294967295)

/* 0 when amount is a valid value of a source's size kind (an RF__MIX_*):
 * proportion and repeat a number > 0, choose a whole number >= 0, whole
 * anything; else RF_E_INVALID with the reason (naming source c) in err. */
int rf__mix_check(int c, int size, double amount, char *err, size_t errcap);

/* Entries per epoch of each of n sources, MosaicML streaming's rules:
 * either every source has a proportion (relative; normalised, of
 * epoch_size, or of the sum of the sources' sizes when epoch_size is 0;
 * floor(epoch_size * p_c) each, the shortfall given one each to distinct
 * sources drawn from the seed), or none has (absolute: floor(repeat * n_c),
 * choose, or the whole source once; epoch_size must be 0, except when no
 * source is sized at all, which then takes epoch_size in proportion to the
 * sources' sizes). size[c] is an RF__MIX_* kind and amount[c] its value.
 * take[c] gets the counts. 0, or RF_E_INVALID with the reason in err. */
int rf__mix_plan(int n, const int *size, const double *amount, const int64_t *samples,
                 int64_t epoch_size, uint64_t seed, int64_t *take, char *err, size_t errcap);

/* One source of the order, as rf__mix_order_init wants it. */
typedef struct rf_mix_stream {
    int64_t first, n, take; /* its global indexes [first, first + n); entries per epoch */
    int64_t block;          /* > 0: shuffle blocks of this many shards */
    /* with block > 0: the shard of local sample i (i < n), and how many */
    int64_t nshards;
    uint32_t (*shard_of)(const void *ctx, int64_t i);
    const void *ctx;
} rf_mix_stream;

typedef struct rf_mix_part {
    int64_t first, n, take, block, nshards;
    uint32_t *members;    /* block > 0: local samples grouped by shard */
    int64_t *shard_first; /* nshards + 1 */
    uint32_t *pass;       /* n: the pass being merged (local indexes) */
    int64_t len;          /* its entries (n, or the partial pass's) */
    int64_t at, passno;   /* the next entry of it, and which pass it is */
} rf_mix_part;

typedef struct rf_mix_order {
    int nparts;
    rf_mix_part *p;
    int64_t size;         /* entries per epoch: the sum of take */
    uint32_t *shard_perm; /* scratch: the largest nshards */
    uint64_t *chosen;     /* scratch: a bitmap of the largest n */
    int64_t *heap;        /* scratch: nparts, the unshuffled merge */
} rf_mix_order;

/* Builds the order's memory (4 bytes per index entry, 4 more per sample of
 * a blocked source, a bit per sample of the largest source). 0,
 * RF_E_INVALID (an empty epoch, more than RF_MIX_MAX_EPOCH entries, a
 * source that takes entries but has no samples, a shard out of range) or
 * RF_E_NOMEM; the order is then empty. */
int rf__mix_order_init(rf_mix_order *o, const rf_mix_stream *s, int n);
void rf__mix_order_free(rf_mix_order *o);

/* The epoch's global order, o->size global indexes into perm. The
 * sampler's fill function (ctx: the rf_mix_order). */
void rf__mix_order_fill(void *ctx, uint64_t seed, int64_t epoch, int shuffle, uint32_t *perm);

/* A hash of what the order depends on besides (seed, epoch): each source's
 * first, n, take and block. */
uint64_t rf__mix_order_hash(const rf_mix_order *o);

#endif
