/*
 * latency.c - the duration histogram (see latency.h).
 *
 * A value v >= 64 ns with highest set bit e (6 <= e <= 62) falls in bucket
 * 64 + (e - 6) * 32 + the 5 bits below its highest: the bucket spans
 * 2^(e-5) ns starting at (32 + those bits) << (e - 5), so its width is at
 * most 1/32 of any value in it, and its midpoint within 1/64.
 */
#include "latency.h"

#include <assert.h>
#include <math.h>

int rf__latency_bucket(int64_t ns)
{
    if (ns < RF_LAT_LINEAR)
        return ns < 0 ? 0 : (int)ns;
    int e = 63 - __builtin_clzll((unsigned long long)ns);
    int sub = (int)(((uint64_t)ns >> (e - RF_LAT_SUB_BITS)) & ((1u << RF_LAT_SUB_BITS) - 1));
    int b = RF_LAT_LINEAR + (e - 6) * (1 << RF_LAT_SUB_BITS) + sub;
    assert(b < RF_LAT_BUCKETS);
    return b;
}

void rf__latency_range(int bucket, int64_t *lo, int64_t *hi)
{
    if (bucket < RF_LAT_LINEAR) {
        *lo = *hi = bucket;
        return;
    }
    int k = bucket - RF_LAT_LINEAR;
    int e = 6 + k / (1 << RF_LAT_SUB_BITS), sub = k % (1 << RF_LAT_SUB_BITS);
    int64_t width = INT64_C(1) << (e - RF_LAT_SUB_BITS);
    *lo = ((INT64_C(1) << RF_LAT_SUB_BITS) + sub) * width;
    *hi = *lo + (width - 1);
}

void rf__latency_add(rf_latency *h, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    if (h->n == 0 || ns < h->min_ns)
        h->min_ns = ns;
    if (ns > h->max_ns)
        h->max_ns = ns;
    h->n++;
    h->sum_ns += ns;
    h->count[rf__latency_bucket(ns)]++;
}

int64_t rf__latency_quantile(const rf_latency *h, double q)
{
    if (h->n == 0)
        return 0;
    if (q >= 1.0)
        return h->max_ns;
    double r = ceil(q * (double)h->n);
    int64_t rank = r < 1 ? 1 : (int64_t)r;
    if (rank >= h->n)
        return h->max_ns; /* the largest value: known exactly */
    if (rank == 1)
        return h->min_ns;
    int64_t seen = 0;
    for (int b = 0; b < RF_LAT_BUCKETS; b++) {
        seen += h->count[b];
        if (seen < rank)
            continue;
        int64_t lo, hi;
        rf__latency_range(b, &lo, &hi);
        int64_t mid = lo + (hi - lo) / 2;
        return mid < h->min_ns ? h->min_ns : mid > h->max_ns ? h->max_ns : mid;
    }
    return h->max_ns; /* not reached: the counts add up to n */
}
