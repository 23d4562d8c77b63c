/*
 * sampler_mix.c - a mixture's shares of an epoch and its global order (see
 * sampler_mix.h).
 *
 * The order is made once per epoch, O(size + samples) time. Memory: the
 * sampler's perm (4 bytes per entry, where the merge writes the sources'
 * numbers first, then replaces each by the next entry of that source's
 * stream), one pass buffer per source (4 bytes per sample: the pass being
 * merged, regenerated when it runs out), the shard grouping of blocked
 * sources, and a bitmap of the largest source for the partial pass.
 *
 * Keys: every random stream is keyed on (seed, epoch) and a tag naming its
 * use, the source and the pass (rng.h); the shortfall of proportions on the
 * seed alone, so that a source's share is the same in every epoch.
 */
#include "sampler_mix.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"
#include "rng.h"
#include "sampler.h"

#define TAG_PASS 0x4d58505353ULL    /* "MXPSS": a pass's permutation */
#define TAG_PICK 0x4d585049434bULL  /* "MXPICK": the partial pass's subset */
#define TAG_SHARDS 0x4d585348ULL    /* "MXSH": a blocked pass's shard order */
#define TAG_BLOCK 0x4d58424cULL     /* "MXBL": ... and its blocks' shuffles */
#define TAG_MERGE 0x4d584d47ULL     /* "MXMG": the interleaving */
#define TAG_SHORT 0x4d5853484f52ULL /* "MXSHOR": the proportions' shortfall */

static const char *size_name(int size)
{
    return size == RF__MIX_PROPORTION ? "proportion"
           : size == RF__MIX_REPEAT   ? "repeat"
           : size == RF__MIX_CHOOSE   ? "choose"
                                      : "none";
}

/* floor(x) for a share computed in floating point: a value a rounding
 * error below an integer (100000 * 0.3) is taken as that integer. Past the
 * largest epoch it is one more than that (refused after). */
static int64_t share_floor(double x)
{
    double f = floor(x + x * 1e-12);
    return f > (double)RF_MIX_MAX_EPOCH ? RF_MIX_MAX_EPOCH + 1 : (int64_t)f;
}

int rf__mix_check(int c, int size, double a, char *err, size_t errcap)
{
    int bad = 0;
    if (size == RF__MIX_PROPORTION || size == RF__MIX_REPEAT)
        bad = !isfinite(a) || a <= 0 || a > (double)RF_MIX_MAX_EPOCH;
    else if (size == RF__MIX_CHOOSE)
        bad = !(a >= 0 && a <= (double)RF_MIX_MAX_EPOCH) || a != floor(a);
    else if (size != RF__MIX_WHOLE)
        bad = 1;
    if (!bad)
        return 0;
    if (size < RF__MIX_WHOLE || size > RF__MIX_CHOOSE)
        snprintf(err, errcap,
                 "mixture: source %d: size %d is not one of proportion (1), repeat (2), choose "
                 "(3) or whole (0)",
                 c, size);
    else
        snprintf(err, errcap,
                 "mixture: source %d: %s=%g is not valid (proportion and repeat: a number > 0; "
                 "choose: a whole number >= 0; at most %lld)",
                 c, size_name(size), a, (long long)RF_MIX_MAX_EPOCH);
    return RF_E_INVALID;
}

/* Relative shares: floor(total * w_c / sum w), the shortfall one each to
 * distinct sources drawn from the seed (MosaicML streaming's rule). */
static int relative(int n, const double *w, int64_t total, uint64_t seed, int64_t *take)
{
    double sum = 0;
    for (int c = 0; c < n; c++)
        sum += w[c];
    memset(take, 0, (size_t)n * sizeof *take);
    if (!(sum > 0))
        return 0; /* no weight (empty sources): an empty epoch, refused after */
    int64_t got = 0;
    for (int c = 0; c < n; c++) {
        take[c] = share_floor((double)total * (w[c] / sum));
        if (take[c] > total)
            take[c] = total;
        got += take[c];
    }
    int64_t shortfall = total - got; /* < n: each floor loses less than 1 */
    if (shortfall <= 0)
        return 0;
    int *ids = malloc((size_t)n * sizeof *ids);
    if (!ids)
        return RF_E_NOMEM;
    for (int c = 0; c < n; c++)
        ids[c] = c;
    rf_rng rng = rf__rng_make(seed, 0, TAG_SHORT);
    for (int64_t k = 0; k < shortfall && k < n; k++) { /* a partial Fisher-Yates */
        int64_t j = k + (int64_t)rf__rng_below(&rng, (uint64_t)(n - k));
        int t = ids[k];
        ids[k] = ids[j];
        ids[j] = t;
        take[ids[k]]++;
    }
    free(ids);
    return 0;
}

int rf__mix_plan(int n, const int *size, const double *amount, const int64_t *samples,
                 int64_t epoch_size, uint64_t seed, int64_t *take, char *err, size_t errcap)
{
    if (n < 1 || n > RF_MIX_MAX_SOURCES) {
        snprintf(err, errcap, "mixture: %d sources (1 to %d)", n, RF_MIX_MAX_SOURCES);
        return RF_E_INVALID;
    }
    int rc = 0;
    for (int c = 0; c < n && rc == 0; c++)
        rc = rf__mix_check(c, size[c], amount[c], err, errcap);
    if (rc < 0)
        return rc;
    if (epoch_size < 0 || epoch_size > RF_MIX_MAX_EPOCH) {
        snprintf(err, errcap, "mixture: epoch_size=%lld (0: the default, at most %lld)",
                 (long long)epoch_size, (long long)RF_MIX_MAX_EPOCH);
        return RF_E_INVALID;
    }
    int nprop = 0, nsized = 0, first_prop = -1, first_abs = -1;
    int64_t all = 0;
    for (int c = 0; c < n; c++) {
        nprop += size[c] == RF__MIX_PROPORTION;
        nsized += size[c] != RF__MIX_WHOLE;
        if (size[c] == RF__MIX_PROPORTION && first_prop < 0)
            first_prop = c;
        if (size[c] != RF__MIX_PROPORTION && first_abs < 0)
            first_abs = c;
        all += samples[c];
    }
    if (nprop > 0 && nprop < n) {
        snprintf(err, errcap,
                 "mixture: source %d has a proportion but source %d has %s: proportions "
                 "(relative) and repeat, choose or none (absolute) cannot be mixed; give every "
                 "source a proportion, or none",
                 first_prop, first_abs, size_name(size[first_abs]));
        return RF_E_INVALID;
    }
    if (nprop == n || (nsized == 0 && epoch_size > 0)) {
        double *w = malloc((size_t)n * sizeof *w);
        if (!w)
            return RF_E_NOMEM;
        for (int c = 0; c < n; c++)
            w[c] = nprop ? amount[c] : (double)samples[c];
        rc = relative(n, w, epoch_size ? epoch_size : all, seed, take);
        free(w);
        if (rc < 0)
            return rc;
    } else {
        if (epoch_size > 0) {
            snprintf(err, errcap,
                     "mixture: epoch_size=%lld sets the epoch's total when the sources have "
                     "proportions; with repeat or choose, the epoch is the sum of the sources' "
                     "shares: leave epoch_size at 0",
                     (long long)epoch_size);
            return RF_E_INVALID;
        }
        for (int c = 0; c < n; c++)
            take[c] = size[c] == RF__MIX_REPEAT   ? share_floor(amount[c] * (double)samples[c])
                      : size[c] == RF__MIX_CHOOSE ? (int64_t)amount[c]
                                                  : samples[c];
    }
    int64_t total = 0;
    for (int c = 0; c < n; c++) {
        if (take[c] > 0 && samples[c] == 0) {
            snprintf(err, errcap, "mixture: source %d has no samples but is to give %lld", c,
                     (long long)take[c]);
            return RF_E_INVALID;
        }
        total += take[c];
        if (total > RF_MIX_MAX_EPOCH) {
            snprintf(err, errcap, "mixture: an epoch of more than %lld samples",
                     (long long)RF_MIX_MAX_EPOCH);
            return RF_E_INVALID;
        }
    }
    if (total == 0) {
        snprintf(err, errcap, "mixture: the epoch is empty (every source's share is 0)");
        return RF_E_INVALID;
    }
    return 0;
}

void rf__mix_order_free(rf_mix_order *o)
{
    for (int c = 0; o->p && c < o->nparts; c++) {
        free(o->p[c].members);
        free(o->p[c].shard_first);
        free(o->p[c].pass);
    }
    free(o->p);
    free(o->shard_perm);
    free(o->chosen);
    free(o->heap);
    memset(o, 0, sizeof *o);
}

int rf__mix_order_init(rf_mix_order *o, const rf_mix_stream *s, int n)
{
    memset(o, 0, sizeof *o);
    if (n < 1 || n > RF_MIX_MAX_SOURCES)
        return RF_E_INVALID;
    o->p = calloc((size_t)n, sizeof *o->p);
    o->heap = malloc((size_t)n * sizeof *o->heap);
    if (!o->p || !o->heap) {
        rf__mix_order_free(o);
        return RF_E_NOMEM;
    }
    o->nparts = n;
    int64_t maxn = 1, maxshards = 1;
    int rc = 0;
    for (int c = 0; c < n && rc == 0; c++) {
        rf_mix_part *p = &o->p[c];
        p->first = s[c].first;
        p->n = s[c].n;
        p->take = s[c].take;
        p->block = s[c].block > 0 && s[c].nshards > 0 ? s[c].block : 0;
        o->size += p->take;
        if (p->n < 0 || p->take < 0 || (p->take > 0 && p->n == 0) || o->size > RF_MIX_MAX_EPOCH ||
            p->n > UINT32_MAX) {
            rc = RF_E_INVALID;
            break;
        }
        maxn = p->n > maxn ? p->n : maxn;
        p->pass = malloc((size_t)(p->n ? p->n : 1) * sizeof *p->pass);
        if (!p->pass) {
            rc = RF_E_NOMEM;
            break;
        }
        if (p->block == 0)
            continue;
        p->nshards = s[c].nshards;
        maxshards = p->nshards > maxshards ? p->nshards : maxshards;
        p->members = malloc((size_t)(p->n ? p->n : 1) * sizeof *p->members);
        p->shard_first = malloc(((size_t)p->nshards + 1) * sizeof *p->shard_first);
        uint32_t *cursor = malloc((size_t)p->nshards * sizeof *cursor);
        if (!p->members || !p->shard_first || !cursor)
            rc = RF_E_NOMEM;
        else
            rc = rf__shards_group(p->n, p->nshards, s[c].shard_of, s[c].ctx, p->members,
                                  p->shard_first, cursor);
        free(cursor);
    }
    if (rc == 0 && o->size == 0)
        rc = RF_E_INVALID;
    if (rc == 0) {
        o->shard_perm = malloc((size_t)maxshards * sizeof *o->shard_perm);
        o->chosen = calloc((size_t)maxn / 64 + 1, sizeof *o->chosen);
        if (!o->shard_perm || !o->chosen)
            rc = RF_E_NOMEM;
    }
    if (rc < 0)
        rf__mix_order_free(o);
    return rc;
}

/* A key naming (tag, source c), to which a pass number is added. */
static uint64_t source_key(uint64_t tag, int c)
{
    return rf__mix64(tag ^ (uint64_t)c << 40);
}

/* Pass `passno` of source c into p->pass: a full permutation of its n
 * samples; the pass after the last full one holds the take % n samples of
 * a subset drawn without replacement, in that permutation's order. */
static void make_pass(rf_mix_order *o, int c, uint64_t seed, int64_t epoch, int shuffle,
                      int64_t passno)
{
    rf_mix_part *p = &o->p[c];
    int64_t n = p->n, r = passno == p->take / n ? p->take % n : 0;
    uint32_t *a = p->pass;
    if (r > 0) {
        /* the subset: the first r of a partial Fisher-Yates, as a bitmap */
        for (int64_t i = 0; i < n; i++)
            a[i] = (uint32_t)i;
        rf_rng rng = rf__rng_make(seed, (uint64_t)epoch, source_key(TAG_PICK, c));
        memset(o->chosen, 0, ((size_t)n / 64 + 1) * sizeof *o->chosen);
        for (int64_t i = 0; i < r; i++) {
            int64_t j = i + (int64_t)rf__rng_below(&rng, (uint64_t)(n - i));
            uint32_t t = a[i];
            a[i] = a[j];
            a[j] = t;
            o->chosen[a[i] >> 6] |= UINT64_C(1) << (a[i] & 63);
        }
    }
    uint64_t pass_key = source_key(TAG_PASS, c) + (uint64_t)passno;
    if (p->block > 0) {
        rf__shards_blocks(a, p->members, p->shard_first, p->nshards, p->block, o->shard_perm,
                          shuffle, seed, epoch, source_key(TAG_SHARDS, c) + (uint64_t)passno,
                          rf__mix64(source_key(TAG_BLOCK, c) + (uint64_t)passno) << 20);
    } else {
        for (int64_t i = 0; i < n; i++)
            a[i] = (uint32_t)i;
        if (shuffle) {
            rf_rng rng = rf__rng_make(seed, (uint64_t)epoch, pass_key);
            rf__shuffle_u32(a, n, &rng);
        }
    }
    p->len = n;
    if (r > 0) { /* keep the subset, in the pass's order */
        int64_t k = 0;
        for (int64_t i = 0; i < n; i++)
            if (o->chosen[a[i] >> 6] >> (a[i] & 63) & 1)
                a[k++] = a[i];
        assert(k == r);
        p->len = r;
    }
    p->at = 0;
    p->passno = passno;
}

/* 1 when source a's next entry comes before source b's in the smooth
 * interleaving: its ideal place (2k + 1) / (2 take) is earlier, or the
 * same and a < b. k is p->at, used as the count placed so far. */
static int before(const rf_mix_order *o, int64_t a, int64_t b)
{
    const rf_mix_part *x = &o->p[a], *y = &o->p[b];
    unsigned __int128 l = (unsigned __int128)(2 * x->at + 1) * (uint64_t)y->take;
    unsigned __int128 r = (unsigned __int128)(2 * y->at + 1) * (uint64_t)x->take;
    return l < r || (l == r && a < b);
}

static void sift_down(rf_mix_order *o, int64_t *h, int64_t len, int64_t i)
{
    for (;;) {
        int64_t m = i, l = 2 * i + 1, r = l + 1;
        if (l < len && before(o, h[l], h[m]))
            m = l;
        if (r < len && before(o, h[r], h[m]))
            m = r;
        if (m == i)
            return;
        int64_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Without shuffle: each position takes the source whose next entry's ideal
 * place is earliest (a heap over the sources). */
static void smooth_merge(rf_mix_order *o, uint32_t *perm)
{
    int64_t *h = o->heap, len = 0;
    for (int c = 0; c < o->nparts; c++) {
        o->p[c].at = 0;
        if (o->p[c].take > 0)
            h[len++] = c;
    }
    for (int64_t i = len / 2 - 1; i >= 0; i--)
        sift_down(o, h, len, i);
    for (int64_t pos = 0; pos < o->size; pos++) {
        assert(len > 0);
        int64_t c = h[0];
        perm[pos] = (uint32_t)c;
        if (++o->p[c].at == o->p[c].take)
            h[0] = h[--len];
        sift_down(o, h, len, 0);
    }
}

void rf__mix_order_fill(void *ctx, uint64_t seed, int64_t epoch, int shuffle, uint32_t *perm)
{
    rf_mix_order *o = ctx;
    /* which source each position takes */
    if (shuffle) {
        int64_t pos = 0;
        for (int c = 0; c < o->nparts; c++)
            for (int64_t k = 0; k < o->p[c].take; k++)
                perm[pos++] = (uint32_t)c;
        rf_rng rng = rf__rng_make(seed, (uint64_t)epoch, TAG_MERGE);
        rf__shuffle_u32(perm, o->size, &rng);
    } else {
        smooth_merge(o, perm);
    }
    /* then the entry: the source's stream, pass after pass */
    for (int c = 0; c < o->nparts; c++)
        if (o->p[c].take > 0)
            make_pass(o, c, seed, epoch, shuffle, 0);
    for (int64_t pos = 0; pos < o->size; pos++) {
        int c = (int)perm[pos];
        rf_mix_part *p = &o->p[c];
        if (p->at == p->len)
            make_pass(o, c, seed, epoch, shuffle, p->passno + 1);
        perm[pos] = (uint32_t)(p->first + p->pass[p->at++]);
    }
}

uint64_t rf__mix_order_hash(const rf_mix_order *o)
{
    uint64_t h = rf__mix64((uint64_t)o->nparts ^ 0x4d49585455524553ULL); /* "MIXTURES" */
    for (int c = 0; c < o->nparts; c++) {
        const rf_mix_part *p = &o->p[c];
        h = rf__mix64(h ^ (uint64_t)p->first);
        h = rf__mix64(h ^ (uint64_t)p->n);
        h = rf__mix64(h ^ (uint64_t)p->take);
        h = rf__mix64(h ^ (uint64_t)p->block);
    }
    return h;
}
