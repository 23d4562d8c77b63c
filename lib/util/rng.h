/*
 * rng.h - counter-based random numbers.
 *
 * Every random decision (epoch order, crop, flip) is a pure function of a key
 * (seed, epoch, sample index) and a counter, so output never depends on which
 * thread did the work or in what order. The mixer is SplitMix64's finaliser
 * (Stafford's Mix13), applied to key + counter * golden ratio.
 */
#ifndef RF_RNG_H
#define RF_RNG_H

#include <stdint.h>

typedef struct rf_rng {
    uint64_t key;
    uint64_t counter;
} rf_rng;

static inline uint64_t rf__mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Stream keyed on (seed, a, b): a distinct, reproducible stream per tuple. */
static inline rf_rng rf__rng_make(uint64_t seed, uint64_t a, uint64_t b)
{
    rf_rng r;
    r.key = rf__mix64(rf__mix64(rf__mix64(seed ^ 0x52494e4746454544ULL) ^ a) + b);
    r.counter = 0;
    return r;
}

static inline uint64_t rf__rng_u64(rf_rng *r)
{
    r->counter++;
    return rf__mix64(r->key + r->counter * 0x9e3779b97f4a7c15ULL);
}

/* Uniform double in [0, 1), 53 random bits. */
static inline double rf__rng_uniform(rf_rng *r)
{
    return (double)(rf__rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform double in [lo, hi). */
static inline double rf__rng_range(rf_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * rf__rng_uniform(r);
}

/* Uniform integer in [0, n), n > 0, without modulo bias (Lemire). */
static inline uint64_t rf__rng_below(rf_rng *r, uint64_t n)
{
    unsigned __int128 m = (unsigned __int128)rf__rng_u64(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t t = (0 - n) % n;
        while (lo < t) {
            m = (unsigned __int128)rf__rng_u64(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

#endif /* RF_RNG_H */
