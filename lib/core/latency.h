/*
 * latency.h - a histogram of durations: the consumer's wait for each batch,
 * reported as percentiles (a loader is chosen by its tail, not its mean).
 *
 * Fixed memory (no allocation, nothing grows with the run): log-linear
 * buckets, exact below 64 ns, then 32 buckets per power of two, so a
 * bucket's midpoint is within 1/64 (1.6 %) of every value it holds. The
 * count, sum, minimum and maximum are kept exactly. Not thread-safe: the
 * loader updates and reads it under its mutex (loader.h).
 */
#ifndef RF_LATENCY_H
#define RF_LATENCY_H

#include <stdint.h>

#define RF_LAT_SUB_BITS 5 /* 2^5 buckets per power of two */
#define RF_LAT_LINEAR 64  /* values below this many ns have a bucket each */
/* the linear part, then powers 2^6 .. 2^62, 32 buckets each */
#define RF_LAT_BUCKETS (RF_LAT_LINEAR + (63 - 6) * (1 << RF_LAT_SUB_BITS))

typedef struct rf_latency {
    int64_t n, sum_ns, min_ns, max_ns;
    uint32_t count[RF_LAT_BUCKETS];
} rf_latency;

/* Records one duration (negative ones count as 0). */
void rf__latency_add(rf_latency *h, int64_t ns);

/* The q-quantile (0 < q <= 1) by nearest rank: the smallest recorded value
 * v such that at least ceil(q * n) values are <= v, given to its bucket's
 * precision (the bucket's midpoint, kept within [min, max]); the first and
 * the last rank are the minimum and the maximum exactly. 0 when nothing was
 * recorded. */
int64_t rf__latency_quantile(const rf_latency *h, double q);

/* The bucket of a duration, and the range [lo, hi] of values it holds
 * (for the tests). */
int rf__latency_bucket(int64_t ns);
void rf__latency_range(int bucket, int64_t *lo, int64_t *hi);

#endif
