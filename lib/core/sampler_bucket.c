/*
 * sampler_bucket.c - the epoch's order with aspect-ratio buckets: every
 * batch holds samples of one bucket (sampler.h, bucket.h).
 *
 * The epoch's sequence. The global order (the seeded permutation of all
 * samples, sampler.c) is split by bucket, each bucket's samples keeping
 * their order; each bucket's list is cut into runs of `unit` samples (its
 * last run shorter); the runs follow each other in a seeded order (a
 * Fisher-Yates shuffle of the runs keyed on (seed, epoch)), or without
 * shuffle in the order of their first samples. The sequence is the runs
 * one after the other: every sample once.
 *
 * The split across world_size = M ranks, batch_size = B, from position
 * `start` of the sequence on (0: the whole epoch; a resumed rest of one):
 * the runs are cut at start, then
 *   - bucket_shared (all ranks of a step share a bucket): each run piece
 *     is cut into steps of M B samples; a step of n' samples is padded by
 *     wrapping to a multiple of M (or trimmed to one under
 *     sampler_drop_last), and rank r takes its positions r, r + M, ...
 *     (DistributedSampler's split, within the step): one batch per rank;
 *   - otherwise: each run piece is cut into batches of B; the list of
 *     batches is padded by wrapping whole batches to a multiple of M (or
 *     trimmed), and step s gives rank r batch s M + r.
 * drop_last drops the batches (steps) whose rank batch would be short, on
 * every rank alike, so the ranks always have as many batches. unit is B M
 * (shared) or B for a whole epoch: then every run is one step, or one
 * batch.
 *
 * Resuming. After k steps the ranks together took a prefix of the
 * sequence: everything up to the end of step k - 1 (dropped and trimmed
 * samples before it included), its "consumed" position. A resume on M'
 * ranks splits the sequence's rest from that position; it needs the
 * sequence, which depends on the unit of the run that made it (the
 * world size M under bucket_shared): that unit travels with the position
 * (rf_loader_seek_rest_unit), and the runs of that unit are cut for the
 * new ranks as above. Batch k of a split is a pure function of (seed,
 * epoch, the buckets, unit, start, rank, world_size, batch_size).
 *
 * Memory: the sequence (4 bytes per sample), the runs (16 bytes each) and
 * this rank's order and batches, rebuilt per epoch in O(samples).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"
#include "rng.h"
#include "sampler.h"

#define TAG_RUNS 0x424b5453ULL /* "BKTS": the runs' order */

/* Without bucket_shared: the pieces cut into batches of B, the list of all
 * ranks' batches: where each starts in seq, its length and bucket. Kept
 * from split to split (its room only grows). */
typedef struct blist {
    int64_t *a, *len, n, cap;
    uint16_t *bucket;
} blist;

struct rf_bucket_order {
    const uint16_t *of; /* the bucket of each sample (bucket.h) */
    int nb;
    int shared;
    int64_t own_unit; /* B M (shared) or B: a whole epoch's runs */
    /* the sequence of (seq_epoch, seq_unit) */
    int64_t seq_epoch, seq_unit;
    uint32_t *seq;   /* n samples, run after run */
    uint32_t *tmp;   /* n: the global order grouped by bucket */
    int64_t *run_a;  /* nruns: where each run starts in seq */
    uint16_t *run_b; /* nruns: its bucket */
    int64_t nruns;
    int64_t *run_src; /* scratch: where each run starts in tmp, in bucket-major order */
    int64_t cap_runs;
    /* the current split */
    int64_t unit, start;
    int64_t nbatches, cap_batches;
    int64_t *bstart;   /* nbatches + 1: batch k is order[bstart[k] .. bstart[k + 1]) */
    uint16_t *bbucket; /* nbatches */
    int64_t *bend;     /* nbatches: the consumed position once batch k was taken */
    int64_t *order;
    int64_t norder, cap_order;
    int64_t want_unit;  /* the unit the next rf__sampler_set_rest splits (0: own) */
    struct blist *list; /* scratch of the split without bucket_shared */
};

/* Grows *p (of *cap items of size sz) to hold want. 0 or RF_E_NOMEM. */
static int grow(void **p, int64_t *cap, int64_t want, size_t sz)
{
    if (want <= *cap)
        return 0;
    int64_t c = *cap ? *cap : 256;
    while (c < want)
        c *= 2;
    void *np = realloc(*p, (size_t)c * sz);
    if (!np)
        return RF_E_NOMEM;
    *p = np;
    *cap = c;
    return 0;
}

void rf__bucket_order_free(rf_bucket_order *b)
{
    if (!b)
        return;
    free(b->seq);
    free(b->tmp);
    free(b->run_a);
    free(b->run_b);
    free(b->run_src);
    free(b->bstart);
    free(b->bbucket);
    free(b->bend);
    free(b->order);
    if (b->list) {
        free(b->list->a);
        free(b->list->len);
        free(b->list->bucket);
        free(b->list);
    }
    free(b);
}

/* The number of runs of each bucket's list cut into unit: counts[b] samples. */
static int64_t runs_of(const int64_t *counts, int nb, int64_t unit)
{
    int64_t r = 0;
    for (int b = 0; b < nb; b++)
        r += (counts[b] + unit - 1) / unit;
    return r;
}

/* This rank's batches of a step of n' samples (shared): how many it takes,
 * 0 when the step is trimmed away or dropped. */
static int64_t step_take(const rf_sampler *s, int64_t np)
{
    int64_t m = s->world_size;
    int64_t kept = s->sampler_drop_last ? np / m * m : (np + m - 1) / m * m;
    int64_t per = kept / m;
    if (per == 0 || (s->drop_last && per < s->batch_size))
        return 0;
    return per;
}

int rf__sampler_set_buckets(rf_sampler *s, const uint16_t *of, const int64_t *counts, int nb,
                            int shared)
{
    assert(!s->bo && !s->members && nb >= 1);
    rf_bucket_order *b = calloc(1, sizeof *b);
    if (!b)
        return RF_E_NOMEM;
    b->of = of;
    b->nb = nb;
    b->shared = shared;
    b->own_unit = s->batch_size * (shared ? s->world_size : 1);
    b->seq_epoch = -1;
    b->unit = -1;
    b->seq = malloc((size_t)s->n * sizeof *b->seq);
    b->tmp = malloc((size_t)s->n * sizeof *b->tmp);
    if (!b->seq || !b->tmp) {
        rf__bucket_order_free(b);
        return RF_E_NOMEM;
    }
    s->bo = b;
    /* a whole epoch's batches: each run one step (shared) or one batch */
    int64_t m = s->world_size, bs = s->batch_size, nbatch = 0;
    if (shared) {
        for (int k = 0; k < nb; k++) {
            int64_t full = counts[k] / b->own_unit, rem = counts[k] % b->own_unit;
            nbatch += full * (step_take(s, b->own_unit) > 0) + (rem > 0 && step_take(s, rem) > 0);
        }
    } else {
        int64_t l = 0;
        for (int k = 0; k < nb; k++)
            l += counts[k] / bs + (counts[k] % bs > 0 && !s->drop_last);
        nbatch = s->sampler_drop_last ? l / m : (l + m - 1) / m;
    }
    s->epoch_batches = s->num_batches = nbatch;
    s->epoch = -1;
    return 0;
}

void rf__sampler_want_unit(rf_sampler *s, int64_t unit)
{
    if (s->bo)
        s->bo->want_unit = unit;
}

int64_t rf__sampler_unit(const rf_sampler *s)
{
    return s->bo ? (s->bo->unit > 0 ? s->bo->unit : s->bo->own_unit) : 0;
}

/* The epoch's sequence for runs of `unit` samples (s->perm holds the
 * epoch's global order). */
static void make_sequence(rf_sampler *s, int64_t epoch, int64_t unit)
{
    rf_bucket_order *b = s->bo;
    int64_t counts[RF__SAMPLER_BUCKETS + 1] = {0}, at[RF__SAMPLER_BUCKETS] = {0};
    for (int64_t i = 0; i < s->n; i++)
        counts[b->of[s->perm[i]]]++;
    int64_t pos = 0;
    for (int k = 0; k < b->nb; k++) {
        at[k] = pos;
        pos += counts[k];
    }
    /* tmp: the global order grouped by bucket, each bucket's in order */
    int64_t off[RF__SAMPLER_BUCKETS];
    memcpy(off, at, sizeof off);
    for (int64_t i = 0; i < s->n; i++)
        b->tmp[off[b->of[s->perm[i]]]++] = s->perm[i];
    /* the runs, in their order: run_src[j] is where run j starts in tmp */
    int64_t nruns = runs_of(counts, b->nb, unit), j = 0;
    if (s->shuffle) {
        for (int k = 0; k < b->nb; k++)
            for (int64_t r = 0; r < counts[k]; r += unit)
                b->run_src[j++] = at[k] + r;
        rf_rng rng = rf__rng_make(s->seed, (uint64_t)epoch, TAG_RUNS);
        for (int64_t i = nruns - 1; i > 0; i--) {
            int64_t x = (int64_t)rf__rng_below(&rng, (uint64_t)i + 1), t = b->run_src[i];
            b->run_src[i] = b->run_src[x];
            b->run_src[x] = t;
        }
    } else {
        /* in the order of their first samples: the k-th sample of bucket b
         * met in the global order is tmp[at[b] + k] */
        int64_t seen[RF__SAMPLER_BUCKETS] = {0};
        for (int64_t i = 0; i < s->n; i++) {
            int k = b->of[s->perm[i]];
            if (seen[k]++ % unit == 0)
                b->run_src[j++] = at[k] + seen[k] - 1;
        }
    }
    assert(nruns == 0 || j == nruns);
    /* the sequence: the runs one after the other */
    pos = 0;
    for (int64_t r = 0; r < nruns; r++) {
        int64_t a = b->run_src[r];
        int k = b->of[b->tmp[a]];
        int64_t len = at[k] + counts[k] - a;
        len = len < unit ? len : unit;
        memcpy(b->seq + pos, b->tmp + a, (size_t)len * sizeof *b->seq);
        b->run_a[r] = pos;
        b->run_b[r] = (uint16_t)k;
        pos += len;
    }
    assert(pos == s->n);
    b->nruns = nruns;
    b->seq_epoch = epoch;
    b->seq_unit = unit;
}

/* Room for one more batch of count samples. 0 or RF_E_NOMEM. */
static int reserve(rf_bucket_order *b, int64_t count)
{
    if (grow((void **)&b->order, &b->cap_order, b->norder + count, sizeof *b->order))
        return RF_E_NOMEM;
    if (b->nbatches + 1 < b->cap_batches)
        return 0;
    int64_t cap = b->cap_batches ? 2 * b->cap_batches : 256;
    uint16_t *bb = realloc(b->bbucket, (size_t)cap * sizeof *bb);
    if (bb)
        b->bbucket = bb;
    int64_t *be = realloc(b->bend, (size_t)cap * sizeof *be);
    if (be)
        b->bend = be;
    int64_t *bs = realloc(b->bstart, (size_t)(cap + 1) * sizeof *bs);
    if (bs)
        b->bstart = bs;
    if (!bb || !be || !bs)
        return RF_E_NOMEM;
    b->cap_batches = cap;
    return 0;
}

/* Appends a batch of this rank: the samples seq[a + (p % np)] for p =
 * first, first + stride, ... (count of them), from a step of np samples;
 * end: the consumed position once it was taken. */
static int add_batch(rf_bucket_order *b, int64_t a, int64_t np, int64_t first, int64_t stride,
                     int64_t count, int bucket, int64_t end)
{
    if (reserve(b, count))
        return RF_E_NOMEM;
    b->bstart[b->nbatches] = b->norder;
    for (int64_t k = 0; k < count; k++)
        b->order[b->norder++] = b->seq[a + (first + k * stride) % np];
    b->bbucket[b->nbatches] = (uint16_t)bucket;
    b->bend[b->nbatches] = end;
    b->nbatches++;
    b->bstart[b->nbatches] = b->norder;
    return 0;
}

/* The run pieces of the rest from start: calls fn(piece start, length,
 * bucket) for each. */
typedef int (*piece_fn)(rf_sampler *s, int64_t a, int64_t len, int bucket, void *ctx);

static int each_piece(rf_sampler *s, int64_t start, piece_fn fn, void *ctx)
{
    rf_bucket_order *b = s->bo;
    for (int64_t r = 0; r < b->nruns; r++) {
        int64_t a = b->run_a[r], e = r + 1 < b->nruns ? b->run_a[r + 1] : s->n;
        if (e <= start)
            continue;
        if (a < start)
            a = start;
        int rc = fn(s, a, e - a, b->run_b[r], ctx);
        if (rc)
            return rc;
    }
    return 0;
}

/* bucket_shared: a piece cut into steps of M B samples. */
static int shared_piece(rf_sampler *s, int64_t a, int64_t len, int bucket, void *ctx)
{
    (void)ctx;
    int64_t step = s->world_size * s->batch_size;
    for (int64_t x = a; x < a + len; x += step) {
        int64_t np = a + len - x < step ? a + len - x : step;
        int64_t take = step_take(s, np);
        if (take > 0 && add_batch(s->bo, x, np, s->rank, s->world_size, take, bucket, x + np))
            return RF_E_NOMEM;
    }
    return 0;
}

static int list_piece(rf_sampler *s, int64_t a, int64_t len, int bucket, void *ctx)
{
    blist *l = ctx;
    for (int64_t x = a; x < a + len; x += s->batch_size) {
        int64_t n = a + len - x < s->batch_size ? a + len - x : s->batch_size;
        if (s->drop_last && n < s->batch_size)
            continue;
        if (l->n == l->cap) {
            int64_t cap = l->cap ? 2 * l->cap : 256;
            int64_t *na = realloc(l->a, (size_t)cap * sizeof *na);
            if (na)
                l->a = na;
            int64_t *nl = realloc(l->len, (size_t)cap * sizeof *nl);
            if (nl)
                l->len = nl;
            uint16_t *nb = realloc(l->bucket, (size_t)cap * sizeof *nb);
            if (nb)
                l->bucket = nb;
            if (!na || !nl || !nb)
                return RF_E_NOMEM;
            l->cap = cap;
        }
        l->a[l->n] = x;
        l->len[l->n] = n;
        l->bucket[l->n] = (uint16_t)bucket;
        l->n++;
    }
    return 0;
}

static int split(rf_sampler *s, int64_t start)
{
    rf_bucket_order *b = s->bo;
    b->nbatches = 0;
    b->norder = 0;
    if (b->shared)
        return each_piece(s, start, shared_piece, NULL);
    if (!b->list && !(b->list = calloc(1, sizeof *b->list)))
        return RF_E_NOMEM;
    blist *l = b->list;
    l->n = 0;
    int rc = each_piece(s, start, list_piece, l);
    int64_t m = s->world_size, steps = s->sampler_drop_last ? l->n / m : (l->n + m - 1) / m;
    for (int64_t st = 0; rc == 0 && st < steps; st++) {
        int64_t g = st * m + s->rank, last = st * m + m - 1;
        int64_t k = g % l->n; /* past the list: wrapped, as DistributedSampler pads */
        int64_t end = last >= l->n - 1 ? s->n : l->a[last] + l->len[last];
        rc = add_batch(b, l->a[k], l->len[k], 0, 1, l->len[k], l->bucket[k], end);
    }
    return rc;
}

int rf__bucket_set_rest(rf_sampler *s, int64_t epoch, int64_t start)
{
    rf_bucket_order *b = s->bo;
    int64_t unit = b->want_unit > 0 ? b->want_unit : b->own_unit;
    if (s->epoch == epoch && b->start == start && b->unit == unit)
        return 0;
    if (b->seq_epoch != epoch || b->seq_unit != unit) {
        rf__sampler_global_order(s, epoch);
        int64_t counts[RF__SAMPLER_BUCKETS] = {0};
        for (int64_t i = 0; i < s->n; i++)
            counts[b->of[i]]++;
        int64_t nruns = runs_of(counts, b->nb, unit);
        if (nruns > b->cap_runs) { /* only grows: a split made once can be made again */
            size_t want = (size_t)nruns;
            int64_t *ra = realloc(b->run_a, want * sizeof *ra);
            if (ra)
                b->run_a = ra;
            uint16_t *rb = realloc(b->run_b, want * sizeof *rb);
            if (rb)
                b->run_b = rb;
            int64_t *rs = realloc(b->run_src, want * sizeof *rs);
            if (rs)
                b->run_src = rs;
            if (!ra || !rb || !rs)
                return RF_E_NOMEM;
            b->cap_runs = nruns;
        }
        make_sequence(s, epoch, unit);
    }
    if (split(s, start) != 0) {
        b->unit = -1; /* nothing cached: the next call builds it again */
        return RF_E_NOMEM;
    }
    b->unit = unit;
    b->start = start;
    s->start = start;
    s->epoch = epoch;
    s->num_batches = b->nbatches;
    s->num_samples = b->norder;
    return 0;
}

int64_t rf__bucket_batch(const rf_sampler *s, int64_t k, const int64_t **idx, int *bucket)
{
    const rf_bucket_order *b = s->bo;
    if (k < 0 || k >= b->nbatches)
        return 0;
    *idx = b->order + b->bstart[k];
    if (bucket)
        *bucket = b->bbucket[k];
    return b->bstart[k + 1] - b->bstart[k];
}

int64_t rf__bucket_consumed(const rf_sampler *s, int64_t batch)
{
    const rf_bucket_order *b = s->bo;
    if (batch >= b->nbatches)
        return s->n;
    return batch <= 0 ? b->start : b->bend[batch - 1];
}
