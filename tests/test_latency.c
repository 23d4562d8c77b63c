/*
 * test_latency.c - the consumer's wait per batch in the stats
 * (lib/latency.c, rf_loader_next_wait): the histogram, then a loader whose
 * every wait the test times with its own clock.
 *
 * The histogram: each value lies in its bucket's range, buckets are at most
 * 1/32 of their values wide, and a quantile is within 1/64 of the
 * nearest-rank value of the values recorded (the maximum exact).
 *
 * The loader: one worker, pictures large enough that a batch takes
 * milliseconds, the consumer polling rf_loader_next_wait with a 2 ms
 * timeout (as the Python binding does, with 100 ms), so that a batch's wait
 * spans many RF_AGAIN returns; once it sleeps long enough for the ring to
 * fill. The stats' p50, p90, p99, max and mean waits must match the waits
 * the test measured around the calls: never above them by more than the
 * histogram's precision (the library's clock runs inside the calls), never
 * below by more than what the calls cost outside it (3 ms + 10 %: a loaded
 * machine may preempt a call between its clock and its return; under
 * valgrind, RINGFEED_TEST_SCALE < 1, which runs one thread at a time, 50 ms
 * + 50 %, and the sleep is longer); the first batch found the ring empty,
 * the one after the sleep did not; the time to first batch lies within the
 * test's measure from before rf_loader_start.
 */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "latency.h"
#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest rank: the smallest value with at least ceil(q n) values <= it. */
static int64_t nearest_rank(int64_t *v, int64_t n, double q)
{
    qsort(v, (size_t)n, sizeof *v, cmp64);
    int64_t rank = (int64_t)ceil(q * (double)n);
    return v[(rank < 1 ? 1 : rank) - 1];
}

static void test_histogram(void **state)
{
    (void)state;
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < 200000; i++) { /* values over 1 ns .. 2^62 ns */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int64_t v = (int64_t)(x >> (2 + x % 62));
        int b = rf__latency_bucket(v);
        int64_t lo, hi;
        rf__latency_range(b, &lo, &hi);
        assert_true(lo <= v && v <= hi);
        assert_true(hi - lo <= v / 32);
    }
    static rf_latency h; /* 7.6 kB: not on the stack */
    memset(&h, 0, sizeof h);
    assert_int_equal(rf__latency_quantile(&h, 0.5), 0);
    enum { N = 5000 };
    static int64_t v[N];
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* mostly ~1-10 ms, a tail to 2 s */
        v[i] = (int64_t)(x % 9000000) + 1000000 + (i % 97 == 0 ? (int64_t)(x % 2000000000) : 0);
        rf__latency_add(&h, v[i]);
    }
    assert_int_equal(h.n, N);
    const double qs[] = {0.01, 0.5, 0.9, 0.99, 0.999};
    for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
        int64_t want = nearest_rank(v, N, qs[k]), got = rf__latency_quantile(&h, qs[k]);
        assert_true(llabs(got - want) <= want / 64 + 1);
    }
    assert_int_equal(rf__latency_quantile(&h, 1.0), nearest_rank(v, N, 1.0));
    rf_latency one = {0};
    rf__latency_add(&one, 12345);
    assert_int_equal(rf__latency_quantile(&one, 0.5), 12345); /* within [min, max] */
    rf__latency_add(&one, -5);                                /* counts as 0 */
    assert_int_equal(one.min_ns, 0);
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* RINGFEED_TEST_SCALE: below 1 under slow tools (valgrind). */
static double test_scale(void)
{
    const char *e = getenv("RINGFEED_TEST_SCALE");
    double v = e ? atof(e) : 1.0;
    return v > 0 && v <= 1 ? v : 1.0;
}

/* lib (ms, from the stats) against own (ns, the test's clock): never more
 * than the histogram's precision above, never more than the calls' cost
 * outside the library's clock below. Under valgrind (RINGFEED_TEST_SCALE <
 * 1), which runs one thread at a time, a call that wakes the dispatcher can
 * lose the processor for hundreds of milliseconds after its clock stopped:
 * there only the upper bound holds (the lower one is checked by the plain
 * run). */
static void near(const char *what, double lib_ms, int64_t own_ns)
{
    double own = (double)own_ns / 1e6;
    int slow = test_scale() < 1;
    printf("%-5s library %8.3f ms, test's clock %8.3f ms\n", what, lib_ms, own);
    if (lib_ms > own * (1 + 1.0 / 64) + 0.01 || (!slow && lib_ms < own * 0.9 - 3.0))
        fail_msg("%s: the stats say %.3f ms, the test measured %.3f ms", what, lib_ms, own);
}

static void test_waits_match_the_tests_clock(void **state)
{
    (void)state;
    char *dir = tu_tempdir("latency");
    assert_non_null(dir);
    char root[4200];
    snprintf(root, sizeof root, "%s/f", dir);
    assert_int_equal(tu_make_folder(root, 2, 24, 480, 360, 3), 0);
    enum { BS = 4, NB = 12, SLEEP_AFTER = 5 };
    rf_loader *l = TU_LOADER(root, {RF_P_BATCH_SIZE, BS}, {RF_P_IMAGE_SIZE, 64},
                             {RF_P_TRANSFORM, RF_TRANSFORM_CENTER}, {RF_P_NUM_WORKERS, 1},
                             {RF_P_PREFETCH, 2}, {RF_P_EXACT, 1}, {RF_P_VERIFY, RF_VERIFY_ALWAYS});
    int64_t t_start = now_ns();
    tu_start(l);
    int64_t waits[NB], first_batch = 0;
    int most_agains = 0;
    for (int k = 0; k < NB; k++) {
        if (k == SLEEP_AFTER)
            usleep((useconds_t)(600000 / test_scale())); /* the ring fills meanwhile */
        /* the batch's wait on the test's clock: each call's time summed,
         * as the library counts it (the time between calls, which a loaded
         * machine may stretch, is the caller's, not a wait) */
        rf_batch *b;
        int rc, agains = -1;
        waits[k] = 0;
        do {
            int64_t t0 = now_ns();
            rc = rf_loader_next_wait(l, &b, 2);
            waits[k] += now_ns() - t0;
            agains++;
        } while (rc == RF_AGAIN);
        assert_int_equal(rc, RF_OK);
        most_agains = agains > most_agains ? agains : most_agains;
        if (k == 0)
            first_batch = now_ns() - t_start;
        rf_batch_release(b);
    }
    char *js = tu_stats(l);
    const char *lat = strstr(js, "\"latency\": {");
    assert_non_null(lat);
    printf("%.*s\n", (int)(strchr(lat, '}') - lat + 1), lat);
    assert_int_equal(tu_stats_int(lat, "batches"), NB);
    int64_t empty = tu_stats_int(lat, "ring_empty");
    assert_true(empty >= 1 && empty <= NB - 1); /* the first was; the one after the sleep not */
    int64_t sum = 0;
    for (int k = 0; k < NB; k++)
        sum += waits[k];
    int64_t sorted[NB];
    memcpy(sorted, waits, sizeof sorted);
    near("p50", tu_stats_double(lat, "wait_p50_ms"), nearest_rank(sorted, NB, 0.5));
    near("p90", tu_stats_double(lat, "wait_p90_ms"), nearest_rank(sorted, NB, 0.9));
    near("p99", tu_stats_double(lat, "wait_p99_ms"), nearest_rank(sorted, NB, 0.99));
    near("max", tu_stats_double(lat, "wait_max_ms"), nearest_rank(sorted, NB, 1.0));
    near("mean", tu_stats_double(lat, "wait_mean_ms"), sum / NB);
    /* a batch waited over several RF_AGAIN returns (the first, at least:
     * the reads and decodes of 4 pictures): a library that kept only the
     * last call's share of a batch's wait would fail the max above */
    assert_true(most_agains >= 3);
    near("first", tu_stats_double(lat, "first_batch_seconds") * 1e3, first_batch);
    free(js);
    rf_loader_destroy(l);
    tu_tempdir_remove(&dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_waits_match_the_tests_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
