/*
 * test_sampler_bucket.c - the epoch's order with aspect-ratio buckets
 * (lib/sampler_bucket.c).
 *
 * For a small dataset of three uneven buckets, every world size 1..4, batch
 * sizes, drop_last and sampler_drop_last, with bucket_shared on and off:
 * every batch holds one bucket (the one it reports; under bucket_shared the
 * same on every rank at each step), the ranks have as many batches as a
 * whole epoch's count says, and every sample is taken once per epoch (at
 * least once with padding, at most once when trimmed). Then resuming: N
 * ranks take b batches each, M ranks take the rest from the consumed
 * position in the unit of the first run, with another batch size too:
 * together every sample at least once (at most once when trimmed), for
 * every b; and the chain N -> M -> K.
 *
 * Self-contained: links lib/ and cmocka only; no files are touched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "sampler.h"

enum { N = 47, NB = 3, MAXW = 4 };

static uint16_t of[N];
static int64_t counts[NB];

static int setup(void **state)
{
    (void)state;
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < N; i++) {
        of[i] = (uint16_t)((i * 7) % 11 < 5 ? 0 : i % 3 == 0 ? 1 : 2);
        counts[of[i]]++;
    }
    return 0;
}

typedef struct cfg {
    int64_t bs;
    int shared, drop_last, trim, shuffle;
    uint64_t seed;
} cfg;

static void make(rf_sampler *s, const cfg *c, int64_t rank, int64_t world, int64_t bs)
{
    assert_int_equal(
        rf__sampler_init(s, N, bs, c->shuffle, c->drop_last, c->trim, c->seed, rank, world), 0);
    assert_int_equal(rf__sampler_set_buckets(s, of, counts, NB, c->shared), 0);
}

/* W ranks take batches [from, to) (to < 0: all) of their split of epoch e
 * from start in unit (0: own), counting each sample in hits; returns the
 * consumed position they reach (checked equal on every rank) and the split's
 * unit in *unit_out. */
static int64_t take(const cfg *c, int64_t world, int64_t bs, int64_t e, int64_t start, int64_t unit,
                    int64_t from, int64_t to, int *hits, int64_t *unit_out)
{
    rf_sampler s[MAXW];
    int64_t nb = -1, consumed = -1;
    for (int64_t r = 0; r < world; r++) {
        make(&s[r], c, r, world, bs);
        rf__sampler_want_unit(&s[r], unit);
        assert_int_equal(rf__bucket_set_rest(&s[r], e, start), 0);
        if (r == 0)
            nb = s[r].num_batches;
        assert_int_equal(s[r].num_batches, nb); /* lockstep: as many on every rank */
        if (start == 0 && unit == 0)
            assert_int_equal(s[r].epoch_batches, nb);
    }
    int64_t end = to < 0 || to > nb ? nb : to;
    for (int64_t k = from; k < end; k++) {
        int first_bucket = -1;
        for (int64_t r = 0; r < world; r++) {
            const int64_t *idx;
            int bucket;
            int64_t cnt = rf__bucket_batch(&s[r], k, &idx, &bucket);
            assert_true(cnt >= 1 && cnt <= bs);
            if (c->drop_last)
                assert_int_equal(cnt, bs);
            for (int64_t i = 0; i < cnt; i++) {
                assert_int_equal(of[idx[i]], bucket); /* one bucket per batch */
                hits[idx[i]]++;
            }
            if (r == 0)
                first_bucket = bucket;
            else if (c->shared)
                assert_int_equal(bucket, first_bucket); /* the step's bucket, on every rank */
        }
    }
    for (int64_t r = 0; r < world; r++) {
        int64_t got = rf__sampler_consumed(&s[r], end);
        if (r == 0)
            consumed = got;
        assert_int_equal(got, consumed);
        if (unit_out)
            *unit_out = rf__sampler_unit(&s[r]);
        rf__sampler_free(&s[r]);
    }
    return consumed;
}

static void check_cover(const cfg *c, const int *hits, const char *what)
{
    for (int i = 0; i < N; i++) {
        if (!c->trim && !c->drop_last && hits[i] < 1)
            fail_msg("%s: sample %d never taken (bs %lld shared %d)", what, i, (long long)c->bs,
                     c->shared);
        if (c->trim && hits[i] > 1)
            fail_msg("%s: sample %d taken %d times though trimmed", what, i, hits[i]);
    }
}

static void test_whole_epochs(void **state)
{
    (void)state;
    for (int shared = 0; shared < 2; shared++)
        for (int64_t bs = 1; bs <= 7; bs += 3)
            for (int dl = 0; dl < 2; dl++)
                for (int trim = 0; trim < 2; trim++)
                    for (int64_t w = 1; w <= MAXW; w++) {
                        cfg c = {bs, shared, dl, trim, 1, 5};
                        int hits[N] = {0};
                        int64_t consumed = take(&c, w, bs, 3, 0, 0, 0, -1, hits, NULL);
                        assert_int_equal(consumed, N); /* all taken: the whole order */
                        check_cover(&c, hits, "epoch");
                        if (w == 1 && !dl)
                            for (int i = 0; i < N; i++)
                                assert_int_equal(hits[i], 1);
                    }
}

static void test_order_is_seeded(void **state)
{
    (void)state;
    cfg c = {4, 1, 0, 0, 1, 9};
    rf_sampler a, b;
    make(&a, &c, 0, 1, 4);
    make(&b, &c, 0, 1, 4);
    rf__sampler_set_epoch(&a, 0);
    rf__sampler_set_epoch(&b, 1);
    int differ = 0;
    for (int64_t k = 0; k < a.num_batches; k++) {
        const int64_t *ia, *ib;
        int64_t na = rf__bucket_batch(&a, k, &ia, NULL), nb = rf__bucket_batch(&b, k, &ib, NULL);
        differ |= na != nb || memcmp(ia, ib, (size_t)na * sizeof *ia) != 0;
    }
    assert_true(differ); /* another epoch, another order */
    rf__sampler_set_epoch(&b, 0);
    for (int64_t k = 0; k < a.num_batches; k++) {
        const int64_t *ia, *ib;
        int64_t na = rf__bucket_batch(&a, k, &ia, NULL), nb = rf__bucket_batch(&b, k, &ib, NULL);
        assert_int_equal(na, nb);
        assert_memory_equal(ia, ib, (size_t)na * sizeof *ia);
    }
    rf__sampler_free(&a);
    rf__sampler_free(&b);
    /* without shuffle: each bucket in index order, runs by their first sample */
    c.shuffle = 0;
    make(&a, &c, 0, 1, 4);
    rf__sampler_set_epoch(&a, 7);
    int64_t prev_first = -1;
    for (int64_t k = 0; k < a.num_batches; k++) {
        const int64_t *ia;
        int64_t na = rf__bucket_batch(&a, k, &ia, NULL);
        assert_true(ia[0] > prev_first);
        for (int64_t i = 1; i < na; i++)
            assert_true(ia[i] > ia[i - 1]);
        prev_first = ia[0];
    }
    rf__sampler_free(&a);
}

/* N ranks stop after b batches; M ranks (batch size bs2) take the rest. */
static void test_resume_other_world(void **state)
{
    (void)state;
    for (int shared = 0; shared < 2; shared++)
        for (int trim = 0; trim < 2; trim++)
            for (int64_t nw = 1; nw <= 3; nw++)
                for (int64_t mw = 1; mw <= 3; mw++)
                    for (int64_t bs2 = 2; bs2 <= 5; bs2 += 3) {
                        cfg c = {3, shared, 0, trim, 1, 11};
                        int none[N] = {0};
                        int64_t nb = 0;
                        {
                            rf_sampler s;
                            make(&s, &c, 0, nw, c.bs);
                            nb = s.epoch_batches;
                            rf__sampler_free(&s);
                        }
                        for (int64_t b = 0; b <= nb; b++) {
                            int hits[N] = {0};
                            int64_t unit = 0;
                            int64_t consumed = take(&c, nw, c.bs, 2, 0, 0, 0, b, hits, &unit);
                            assert_true(consumed >= 0 && consumed <= N);
                            take(&c, mw, bs2, 2, consumed, unit, 0, -1, hits, NULL);
                            check_cover(&c, hits, "resumed");
                        }
                        (void)none;
                    }
}

static void test_resume_chain(void **state)
{
    (void)state;
    for (int shared = 0; shared < 2; shared++) {
        cfg c = {2, shared, 0, 0, 1, 4};
        int hits[N] = {0};
        int64_t u1, u2;
        int64_t c1 = take(&c, 3, 2, 1, 0, 0, 0, 2, hits, &u1);
        /* 2 ranks resume from c1 and stop after 3 batches: the consumed
         * position is one of the same sequence (the unit travels on) */
        int64_t c2 = take(&c, 2, 2, 1, c1, u1, 0, 3, hits, &u2);
        assert_int_equal(u2, u1);
        assert_true(c2 >= c1);
        take(&c, 4, 2, 1, c2, u2, 0, -1, hits, NULL);
        check_cover(&c, hits, "chain");
        /* the same split sought again gives the same batches from b on */
        rf_sampler a, b;
        make(&a, &c, 1, 2, 2);
        make(&b, &c, 1, 2, 2);
        rf__sampler_want_unit(&a, u1);
        rf__sampler_want_unit(&b, u1);
        assert_int_equal(rf__bucket_set_rest(&a, 1, c1), 0);
        assert_int_equal(rf__bucket_set_rest(&b, 1, c1), 0);
        for (int64_t k = 0; k < a.num_batches; k++) {
            const int64_t *ia, *ib;
            int ba, bb;
            int64_t na = rf__bucket_batch(&a, k, &ia, &ba), nb = rf__bucket_batch(&b, k, &ib, &bb);
            assert_int_equal(na, nb);
            assert_int_equal(ba, bb);
            assert_memory_equal(ia, ib, (size_t)na * sizeof *ia);
        }
        /* and a later whole epoch is the loader's own unit again */
        rf__sampler_want_unit(&a, 0);
        assert_int_equal(rf__bucket_set_rest(&a, 2, 0), 0);
        assert_int_equal(rf__sampler_unit(&a), shared ? 4 : 2);
        assert_int_equal(a.num_batches, a.epoch_batches);
        rf__sampler_free(&a);
        rf__sampler_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_epochs),
        cmocka_unit_test(test_order_is_seeded),
        cmocka_unit_test(test_resume_other_world),
        cmocka_unit_test(test_resume_chain),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
