/*
 * bucket.c - aspect-ratio buckets (see bucket.h): the automatic shapes
 * from the quantiles of the samples' log aspect ratios, the assignment of
 * each sample to its nearest bucket, and draws of a bucket's samples.
 *
 * Costs: the assignment is O(samples x buckets) comparisons of doubles and
 * 6 bytes per sample (the bucket and the grouped list); the automatic
 * shapes sort the known ratios once (8 bytes per sample, freed at once).
 */
#include "bucket.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"

_Static_assert(RF__BUCKETS_MAX <= UINT16_MAX, "a sample's bucket is a uint16_t");

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* v rounded down to a multiple of m, within [m, the largest multiple of m
 * that is at most 16384]. */
static int32_t side_of(double v, int m)
{
    int64_t top = (16384 / m) * m;
    int64_t s = v >= (double)top ? top : (int64_t)(v / m) * m;
    if (s < m)
        s = m;
    return (int32_t)s;
}

int rf__buckets_auto(const uint32_t *dims, int64_t nsamples, int n, int budget_h, int budget_w,
                     int m, int32_t (*hw)[2])
{
    assert(n >= 1 && n <= RF__BUCKETS_MAX && budget_h > 0 && budget_w > 0 && m >= 1);
    double area = (double)budget_h * (double)budget_w;
    int64_t known = 0;
    double *lr = malloc((size_t)(nsamples > 0 ? nsamples : 1) * sizeof *lr);
    for (int64_t i = 0; lr && i < nsamples; i++)
        if (dims[2 * i] > 0 && dims[2 * i + 1] > 0)
            lr[known++] = log((double)dims[2 * i] / (double)dims[2 * i + 1]);
    if (!lr || known == 0) { /* nothing to go by (or no memory for it): one bucket */
        free(lr);
        hw[0][0] = budget_h;
        hw[0][1] = budget_w;
        return 1;
    }
    qsort(lr, (size_t)known, sizeof *lr, cmp_double);
    int made = 0;
    for (int k = 0; k < n; k++) {
        int64_t at = (int64_t)((double)(2 * k + 1) / (2.0 * n) * (double)known);
        if (at >= known)
            at = known - 1;
        double r = exp(lr[at]); /* width / height */
        int32_t h = side_of(sqrt(area / r), m), w = side_of(sqrt(area * r), m);
        /* the quantiles ascend, so a repeated shape is the previous one */
        if (made > 0 && hw[made - 1][0] == h && hw[made - 1][1] == w)
            continue;
        hw[made][0] = h;
        hw[made][1] = w;
        made++;
    }
    free(lr);
    return made;
}

int rf__bucket_nearest(const rf_buckets *b, uint32_t w, uint32_t h)
{
    double r = log((double)w / (double)h), best = INFINITY;
    int at = 0;
    for (int k = 0; k < b->n; k++) {
        double d = fabs(r - log((double)b->hw[k][1] / (double)b->hw[k][0]));
        if (d < best) {
            best = d;
            at = k;
        }
    }
    return at;
}

int rf__buckets_assign(rf_buckets *b, const uint32_t *dims, int64_t nsamples,
                       const int32_t (*hw)[2], int n)
{
    assert(n >= 1 && n <= RF__BUCKETS_MAX && nsamples >= 0);
    memset(b, 0, sizeof *b);
    b->n = n;
    memcpy(b->hw, hw, (size_t)n * sizeof *b->hw);
    b->nsamples = nsamples;
    size_t cnt = (size_t)(nsamples > 0 ? nsamples : 1);
    b->of = malloc(cnt * sizeof *b->of);
    b->members = malloc(cnt * sizeof *b->members);
    if (!b->of || !b->members) {
        rf__buckets_free(b);
        return RF_E_NOMEM;
    }
    int square = rf__bucket_nearest(b, 1, 1);
    for (int64_t i = 0; i < nsamples; i++) {
        uint32_t w = dims ? dims[2 * i] : 0, h = dims ? dims[2 * i + 1] : 0;
        int k = w > 0 && h > 0 ? rf__bucket_nearest(b, w, h) : square;
        b->unknown += !(w > 0 && h > 0);
        b->of[i] = (uint16_t)k;
        b->first[k + 1]++;
    }
    for (int k = 0; k < n; k++)
        b->first[k + 1] += b->first[k];
    int64_t cur[RF__BUCKETS_MAX];
    memcpy(cur, b->first, sizeof cur);
    for (int64_t i = 0; i < nsamples; i++)
        b->members[cur[b->of[i]]++] = (uint32_t)i;
    return 0;
}

void rf__buckets_free(rf_buckets *b)
{
    free(b->of);
    free(b->members);
    b->of = NULL;
    b->members = NULL;
}

int64_t rf__bucket_draw(const rf_buckets *b, int bucket, rf_rng *rng)
{
    if (bucket < 0 || bucket >= b->n || b->first[bucket + 1] == b->first[bucket])
        return (int64_t)rf__rng_below(rng, (uint64_t)b->nsamples);
    int64_t count = b->first[bucket + 1] - b->first[bucket];
    return b->members[b->first[bucket] + (int64_t)rf__rng_below(rng, (uint64_t)count)];
}

int64_t rf__bucket_draw_in(const rf_buckets *b, int bucket, int64_t lo, int64_t hi, rf_rng *rng)
{
    int64_t count = 0;
    for (int64_t i = lo; i < hi; i++)
        count += b->of[i] == bucket;
    if (count == 0)
        return -1;
    int64_t k = (int64_t)rf__rng_below(rng, (uint64_t)count);
    for (int64_t i = lo; i < hi; i++)
        if (b->of[i] == bucket && k-- == 0)
            return i;
    return -1; /* not reached */
}
