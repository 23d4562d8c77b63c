/*
 * test_sampler_rest.c - resuming an epoch on another number of ranks
 * (rf__sampler_consumed, rf__sampler_set_rest in lib/core/sampler.c).
 *
 * For small datasets, every pair of world sizes N, M in 1..5, batch sizes,
 * drop_last and sampler_drop_last, with the global shuffle and with shard
 * blocks, and every stopping batch b: N ranks each take b batches, then M
 * ranks take the rest of the epoch. Checked: the N ranks' samples are
 * exactly the first `consumed` entries of the epoch's global order (a world
 * size 1 sampler's order); each of the M ranks' share is DistributedSampler's
 * split of the order's rest, written out here as its arithmetic (pad by
 * wrapping the rest to a multiple of M, or trim it, then take rest[m::M]);
 * and over both runs every sample of the epoch is taken exactly once but for
 * the padding (fewer than M repeats) and what sampler_drop_last and
 * drop_last leave out by design. Also: the chain N -> M -> K, and that a
 * rest split on the same N continues the uninterrupted run.
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

enum { MAXN = 64, MAXW = 5 };

typedef struct cfg {
    int64_t n, bs;
    int drop_last, trim; /* trim: sampler_drop_last */
    int64_t block;       /* 0: global shuffle; else shards of 3 samples, dealt round-robin */
    uint64_t seed;
    int64_t epoch;
} cfg;

static uint32_t shard_of(const void *ctx, int64_t i)
{
    const cfg *c = ctx;
    return (uint32_t)(i % ((c->n + 2) / 3)); /* ceil(n / 3) shards, interleaved */
}

static void make(rf_sampler *s, const cfg *c, int64_t rank, int64_t world, int64_t bs)
{
    assert_int_equal(rf__sampler_init(s, c->n, bs, 1, c->drop_last, c->trim, c->seed, rank, world),
                     0);
    if (c->block)
        assert_int_equal(rf__sampler_set_shards(s, c->block, (c->n + 2) / 3, shard_of, c), 0);
}

/* The epoch's global order: a world size 1 sampler without trimming. */
static void global_order(const cfg *c, int64_t *g)
{
    cfg one = *c;
    one.trim = 0;
    one.drop_last = 0;
    rf_sampler s;
    make(&s, &one, 0, 1, 1);
    rf__sampler_set_epoch(&s, c->epoch);
    memcpy(g, s.order, (size_t)c->n * sizeof *g);
    rf__sampler_free(&s);
}

/* W ranks each take batches [from, to) of their split from `start` (to < 0:
 * to the end), adding each sample to hits. Returns what rf__sampler_consumed
 * says of the position reached, checked equal on every rank. The samples
 * taken are checked against the split's arithmetic over g. */
static int64_t take(const cfg *c, const int64_t *g, int64_t world, int64_t bs, int64_t start,
                    int64_t from, int64_t to, int64_t *hits)
{
    int64_t consumed = -1, rest = c->n - start;
    int64_t per = c->trim ? rest / world : (rest + world - 1) / world;
    int64_t nb = c->drop_last ? per / bs : (per + bs - 1) / bs;
    for (int64_t r = 0; r < world; r++) {
        rf_sampler s;
        make(&s, c, r, world, bs);
        rf__sampler_set_rest(&s, c->epoch, start);
        assert_int_equal(s.num_samples, per);
        assert_int_equal(s.num_batches, nb);
        int64_t end = to < 0 || to > nb ? nb : to;
        for (int64_t k = from; k < end; k++) {
            const int64_t *idx;
            int64_t cnt = rf__sampler_batch(&s, k, &idx);
            assert_int_equal(cnt, k * bs + bs <= per ? bs : per - k * bs);
            for (int64_t j = 0; j < cnt; j++) {
                int64_t q = r + (k * bs + j) * world; /* position in the padded rest */
                assert_int_equal(idx[j], g[start + q % rest]);
                hits[idx[j]]++;
            }
        }
        int64_t cons = rf__sampler_consumed(&s, end);
        assert_true(consumed < 0 || consumed == cons);
        consumed = cons;
        rf__sampler_free(&s);
    }
    return consumed;
}

/* Over both runs: every sample once, but for the padding's repeats (fewer
 * than `world` of the last run, or of the first when it ended its epoch) and
 * the samples that trimming and drop_last leave out. */
static void check_once(const cfg *c, const int64_t *hits, int64_t n_world, int64_t m_world,
                       int64_t bs)
{
    int64_t extra = 0, missing = 0;
    for (int64_t i = 0; i < c->n; i++) {
        extra += hits[i] > 1 ? hits[i] - 1 : 0;
        missing += hits[i] == 0;
    }
    int64_t wmax = n_world > m_world ? n_world : m_world;
    if (c->trim)
        assert_int_equal(extra, 0);
    else
        assert_true(extra < wmax);
    int64_t may_miss = (c->trim ? wmax - 1 : 0) + (c->drop_last ? wmax * (bs - 1) : 0);
    if (missing > may_miss)
        fail_msg("n=%lld N=%lld M=%lld bs=%lld drop_last=%d trim=%d block=%lld: %lld missing",
                 (long long)c->n, (long long)n_world, (long long)m_world, (long long)bs,
                 c->drop_last, c->trim, (long long)c->block, (long long)missing);
}

static void resume_case(const cfg *c, int64_t nw, int64_t mw)
{
    int64_t g[MAXN];
    global_order(c, g);
    int64_t per = c->trim ? c->n / nw : (c->n + nw - 1) / nw;
    int64_t nb = c->drop_last ? per / c->bs : (per + c->bs - 1) / c->bs;
    for (int64_t b = 0; b <= nb; b++) {
        int64_t hits[MAXN] = {0};
        int64_t consumed = take(c, g, nw, c->bs, 0, 0, b, hits);
        if (b < nb) {
            /* exactly the first `consumed` entries of the global order */
            assert_int_equal(consumed, nw * b * c->bs);
            for (int64_t p = 0; p < c->n; p++)
                assert_int_equal(hits[g[p]], p < consumed ? 1 : 0);
        } else {
            assert_int_equal(consumed, c->n); /* the epoch is over */
        }
        take(c, g, mw, c->bs, consumed, 0, -1, hits);
        check_once(c, hits, nw, mw, c->bs);
        if (b < nb && c->bs > 1) {
            /* another batch size after the resume: the position is in samples */
            int64_t again[MAXN] = {0};
            take(c, g, nw, c->bs, 0, 0, b, again);
            take(c, g, mw, c->bs - 1, consumed, 0, -1, again);
            check_once(c, again, nw, mw, c->bs);
        }
    }
}

static void test_resume_exhaustive(void **state)
{
    (void)state;
    static const int64_t ns[] = {1, 2, 3, 4, 5, 7, 8, 10, 12, 13, 17, 23};
    int64_t cases = 0;
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++)
        for (int64_t bs = 1; bs <= 3; bs++)
            for (int flags = 0; flags < 4; flags++)
                for (int64_t block = 0; block <= 2; block += 2)
                    for (int64_t nw = 1; nw <= MAXW; nw++)
                        for (int64_t mw = 1; mw <= MAXW; mw++) {
                            cfg c = {.n = ns[t],
                                     .bs = bs,
                                     .drop_last = flags & 1,
                                     .trim = flags >> 1,
                                     .block = block,
                                     .seed = 77 + (uint64_t)ns[t],
                                     .epoch = 3};
                            resume_case(&c, nw, mw);
                            cases++;
                        }
    printf("  %lld (n, batch size, drop_last, sampler_drop_last, block, N, M) cases\n",
           (long long)cases);
}

/* N -> M -> K: the second run stops too, and a third takes what is left. */
static void test_resume_twice(void **state)
{
    (void)state;
    for (int64_t nw = 1; nw <= MAXW; nw++)
        for (int64_t mw = 1; mw <= MAXW; mw++)
            for (int64_t kw = 1; kw <= MAXW; kw++)
                for (int trim = 0; trim < 2; trim++) {
                    cfg c = {.n = 23, .bs = 2, .trim = trim, .seed = 5, .epoch = 1};
                    int64_t g[MAXN], hits[MAXN] = {0};
                    global_order(&c, g);
                    int64_t c1 = take(&c, g, nw, 2, 0, 0, 1, hits);
                    int64_t c2 = take(&c, g, mw, 2, c1, 0, 1, hits);
                    if (c1 < c.n) {
                        int64_t rest = c.n - c1;
                        int64_t per = trim ? rest / mw : (rest + mw - 1) / mw;
                        assert_int_equal(c2, per > 2 ? c1 + mw * 2 : c.n);
                    }
                    take(&c, g, kw, 2, c2, 0, -1, hits);
                    int64_t extra = 0, missing = 0;
                    for (int64_t i = 0; i < c.n; i++) {
                        extra += hits[i] > 1 ? hits[i] - 1 : 0;
                        missing += hits[i] == 0;
                    }
                    /* each run that ended its split may have padded */
                    assert_true(trim ? extra == 0 : extra < 3 * MAXW);
                    assert_true(trim ? missing < 3 * MAXW : missing == 0);
                }
}

/* On the same number of ranks, the rest's split continues the run: batch
 * k of the split from consumed(b) is batch b + k of the whole epoch, but
 * for the padding's samples (the rest wraps onto its own start). */
static void test_same_world_continues(void **state)
{
    (void)state;
    for (int64_t w = 1; w <= MAXW; w++)
        for (int64_t b = 0; b < 3; b++) {
            cfg c = {.n = 23, .bs = 2, .seed = 9, .epoch = 2};
            for (int64_t r = 0; r < w; r++) {
                rf_sampler whole, rest;
                make(&whole, &c, r, w, 2);
                make(&rest, &c, r, w, 2);
                rf__sampler_set_epoch(&whole, c.epoch);
                if (b >= whole.num_batches) {
                    rf__sampler_free(&whole);
                    rf__sampler_free(&rest);
                    continue;
                }
                int64_t consumed = rf__sampler_consumed(&whole, b);
                rf__sampler_set_rest(&rest, c.epoch, consumed);
                assert_int_equal(rest.num_batches, whole.num_batches - b);
                for (int64_t j = 0; j < rest.num_samples; j++) {
                    int64_t p = consumed + r + j * w; /* position in the whole order */
                    if (p < c.n)
                        assert_int_equal(rest.order[j], whole.order[b * 2 + j]);
                }
                /* back to the whole epoch: the first split again */
                rf__sampler_set_rest(&rest, c.epoch, 0);
                assert_memory_equal(rest.order, whole.order,
                                    (size_t)whole.num_samples * sizeof *whole.order);
                rf__sampler_free(&whole);
                rf__sampler_free(&rest);
            }
        }
}

/* The edges: a rest of nothing, and of fewer samples than ranks. */
static void test_rest_edges(void **state)
{
    (void)state;
    cfg c = {.n = 10, .bs = 4, .seed = 1, .epoch = 0};
    rf_sampler s;
    make(&s, &c, 2, 3, 4);
    rf__sampler_set_rest(&s, 0, 10);
    assert_int_equal(s.num_samples, 0);
    assert_int_equal(s.num_batches, 0);
    assert_int_equal(rf__sampler_consumed(&s, 0), 10);
    const int64_t *idx;
    assert_int_equal(rf__sampler_batch(&s, 0, &idx), 0);
    rf__sampler_set_rest(&s, 0, 9); /* one sample left, three ranks: all take it */
    assert_int_equal(s.num_samples, 1);
    int64_t g[MAXN];
    global_order(&c, g);
    assert_int_equal(s.order[0], g[9]);
    int64_t ns, nb;
    rf__sampler_rest_counts(&s, 4, &ns, &nb);
    assert_int_equal(ns, 2);
    assert_int_equal(nb, 1);
    rf__sampler_free(&s);
    c.trim = 1; /* trimmed: a rest shorter than the ranks gives nothing */
    make(&s, &c, 0, 3, 4);
    rf__sampler_set_rest(&s, 0, 8);
    assert_int_equal(s.num_samples, 0);
    assert_int_equal(rf__sampler_consumed(&s, 0), 10);
    rf__sampler_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_exhaustive),
        cmocka_unit_test(test_resume_twice),
        cmocka_unit_test(test_same_world_continues),
        cmocka_unit_test(test_rest_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
