/*
 * bucket.h - aspect-ratio buckets: which bucket each sample goes to, from
 * its picture's size, and the buckets themselves when only their number is
 * given.
 *
 * A bucket is an output shape H x W. A sample goes to the bucket whose
 * log(W / H) is nearest its picture's log(w / h) (the lower bucket on a
 * tie); a sample whose size is unknown (its header could not be read: it
 * fails, or is replaced, when decoded) goes to the bucket nearest a square.
 * N automatic buckets take the ratios of N quantiles of the samples'
 * log ratios, each made about budget pixels with sides multiples of m.
 * The samples are also kept grouped by bucket (members), for drawing a
 * substitute of the same bucket (on_error = skip) and for the sampler.
 *
 * Everything is a pure function of the sizes and the options, so every
 * rank and every run with the same data makes the same buckets.
 */
#ifndef RF_BUCKET_H
#define RF_BUCKET_H

#include <stddef.h>
#include <stdint.h>

#include "rng.h"

#define RF__BUCKETS_MAX 256 /* = RF__MAX_BUCKETS (options.h) */

typedef struct rf_buckets {
    int n;
    int32_t hw[RF__BUCKETS_MAX][2]; /* each bucket's height and width */
    int64_t nsamples;
    uint16_t *of;      /* nsamples: the bucket of each sample */
    uint32_t *members; /* nsamples: the samples grouped by bucket, ascending within one */
    int64_t first[RF__BUCKETS_MAX + 1]; /* bucket b's are members[first[b] .. first[b + 1]) */
    int64_t unknown;                    /* samples without a size (put in the squarest bucket) */
} rf_buckets;

/* N automatic buckets for the sizes dims (2 per sample: width, height; 0
 * for an unknown one) into hw: returns how many (fewer when shapes repeat).
 * budget_h x budget_w pixels each at most where the ratio allows, sides
 * multiples of m (at least m, at most 16384). */
int rf__buckets_auto(const uint32_t *dims, int64_t nsamples, int n, int budget_h, int budget_w,
                     int m, int32_t (*hw)[2]);

/* Assigns every sample to its bucket among the n of hw. 0 or RF_E_NOMEM. */
int rf__buckets_assign(rf_buckets *b, const uint32_t *dims, int64_t nsamples,
                       const int32_t (*hw)[2], int n);
void rf__buckets_free(rf_buckets *b);

/* The bucket nearest the aspect ratio w / h among b's (w, h > 0). */
int rf__bucket_nearest(const rf_buckets *b, uint32_t w, uint32_t h);

/* A sample of bucket `bucket` drawn from rng (any sample when the bucket is
 * empty or -1). */
int64_t rf__bucket_draw(const rf_buckets *b, int bucket, rf_rng *rng);
/* A sample of bucket `bucket` in [lo, hi) drawn from rng, or -1 when that
 * range holds none. O(hi - lo). */
int64_t rf__bucket_draw_in(const rf_buckets *b, int bucket, int64_t lo, int64_t hi, rf_rng *rng);

#endif
