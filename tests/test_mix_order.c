/*
 * test_mix_order.c - a mixture's shares and epoch order (lib/sampler_mix.c),
 * on index sizes alone: no file is made or read, so epochs of 100,000
 * entries cost milliseconds.
 *
 * Checked: MosaicML streaming's sizing (proportions 0.5 / 0.3 / 0.2 of an
 * epoch of 100,000, and repeat=2.5, choose=1000 and a whole source summing
 * to 100,000), each source's count in an epoch's order within 1 of the
 * expected (here: equal); each sample taken floor or ceil of its share over
 * the source's size, the extra ones exactly the remainder; within a source
 * no sample again before every sample of it came (a full pass), with and
 * without shuffle and with shuffle blocks (whose passes keep blocks of K
 * shards together); the order a pure function of (seed, epoch); the
 * refusals (proportions beside repeat, epoch_size with absolute shares, a
 * non-integral choose, an empty epoch); and the sampler over the order:
 * an epoch's first k batches on 4 ranks and its rest on 2 or 3 give every
 * entry of the order the number of times it holds it.
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
#include "sampler_mix.h"

#define MAXP 4

typedef struct mix {
    int n;
    int size[MAXP];
    double amount[MAXP];
    int64_t samples[MAXP];
    int64_t epoch_size;
    int64_t block[MAXP]; /* > 0: shards of SHARD samples, blocks of this many */
    int64_t take[MAXP];
    rf_mix_order o;
} mix;

enum { SHARD = 10 };

static uint32_t shard_of(const void *ctx, int64_t i)
{
    (void)ctx;
    return (uint32_t)(i / SHARD);
}

static void plan(mix *m, uint64_t seed)
{
    char err[300] = "";
    int rc = rf__mix_plan(m->n, m->size, m->amount, m->samples, m->epoch_size, seed, m->take, err,
                          sizeof err);
    if (rc != 0)
        fail_msg("rf__mix_plan: %d %s", rc, err);
}

static void order_init(mix *m)
{
    rf_mix_stream st[MAXP];
    int64_t first = 0;
    for (int c = 0; c < m->n; c++) {
        st[c] = (rf_mix_stream){.first = first,
                                .n = m->samples[c],
                                .take = m->take[c],
                                .block = m->block[c],
                                .nshards = m->block[c] ? (m->samples[c] + SHARD - 1) / SHARD : 0,
                                .shard_of = shard_of};
        first += m->samples[c];
    }
    assert_int_equal(rf__mix_order_init(&m->o, st, m->n), 0);
}

static int source_of(const mix *m, int64_t g, int64_t *local)
{
    for (int c = 0; c < m->n; c++) {
        if (g < m->samples[c]) {
            *local = g;
            return c;
        }
        g -= m->samples[c];
    }
    fail_msg("global index past the sources");
    return -1;
}

/* One epoch's order, checked: counts per source equal the shares; each
 * sample floor or ceil of share / size times, the ceil ones exactly the
 * remainder; no repeat within a source before a full pass; blocked passes
 * made of blocks of `block` shards. */
static void check_epoch(mix *m, uint64_t seed, int64_t epoch, int shuffle)
{
    int64_t size = m->o.size;
    uint32_t *perm = malloc((size_t)size * sizeof *perm);
    assert_non_null(perm);
    rf__mix_order_fill(&m->o, seed, epoch, shuffle, perm);
    int64_t total = 0;
    for (int c = 0; c < m->n; c++)
        total += m->samples[c];
    uint32_t *hits = calloc((size_t)total, sizeof *hits);
    int64_t got[MAXP] = {0}, in_pass[MAXP] = {0};
    uint8_t *seen = calloc((size_t)total, 1);                          /* this pass */
    int64_t *pass_shards = calloc((size_t)total, sizeof *pass_shards); /* blocked: shard order */
    int64_t npass_shards[MAXP] = {0};
    int64_t offset[MAXP];
    for (int c = 0, f = 0; c < m->n; f += (int)m->samples[c], c++)
        offset[c] = f;
    assert_non_null(hits);
    assert_non_null(seen);
    for (int64_t p = 0; p < size; p++) {
        int64_t g = perm[p], local;
        assert_true(g < total);
        int c = source_of(m, g, &local);
        got[c]++;
        hits[g]++;
        if (in_pass[c] == m->samples[c]) { /* a full pass ended: a new one begins */
            memset(seen + offset[c], 0, (size_t)m->samples[c]);
            in_pass[c] = 0;
        }
        if (seen[g])
            fail_msg("epoch %lld: source %d sample %lld again after %lld of its %lld samples",
                     (long long)epoch, c, (long long)local, (long long)in_pass[c],
                     (long long)m->samples[c]);
        seen[g] = 1;
        in_pass[c]++;
        if (m->block[c] && got[c] <= m->samples[c]) /* the first pass: its shards in order */
            pass_shards[offset[c] + npass_shards[c]++] = local / SHARD;
    }
    for (int c = 0; c < m->n; c++) {
        assert_int_equal(got[c], m->take[c]);
        int64_t q = m->take[c] / m->samples[c], r = m->take[c] % m->samples[c], extra = 0;
        for (int64_t i = 0; i < m->samples[c]; i++) {
            uint32_t h = hits[offset[c] + i];
            assert_true(h == q || h == q + 1);
            extra += h == q + 1;
        }
        assert_int_equal(extra, r);
        if (m->block[c] && m->take[c] >= m->samples[c] && shuffle) {
            /* each block: block * SHARD consecutive entries from `block` shards */
            int64_t per = m->block[c] * SHARD;
            for (int64_t b0 = 0; b0 < m->samples[c]; b0 += per) {
                int64_t distinct = 0;
                int64_t end = b0 + per < m->samples[c] ? b0 + per : m->samples[c];
                for (int64_t i = b0; i < end; i++) {
                    int64_t s = pass_shards[offset[c] + i], dup = 0;
                    for (int64_t k = b0; k < i; k++)
                        dup |= pass_shards[offset[c] + k] == s;
                    distinct += !dup;
                }
                assert_true(distinct <= m->block[c]);
            }
        }
    }
    free(pass_shards);
    free(seen);
    free(hits);
    free(perm);
}

static void run(mix *m, uint64_t seed)
{
    plan(m, seed);
    order_init(m);
    for (int shuffle = 0; shuffle <= 1; shuffle++)
        for (int64_t e = 0; e < 3; e++)
            check_epoch(m, seed, e, shuffle);
    rf__mix_order_free(&m->o);
}

static void test_proportions_of_100000(void **state)
{
    (void)state;
    mix m = {.n = 3,
             .size = {RF__MIX_PROPORTION, RF__MIX_PROPORTION, RF__MIX_PROPORTION},
             .amount = {0.5, 0.3, 0.2},
             .samples = {37000, 41000, 9000},
             .epoch_size = 100000};
    plan(&m, 7);
    int64_t want[3] = {50000, 30000, 20000};
    for (int c = 0; c < 3; c++)
        assert_true(llabs(m.take[c] - want[c]) <= 1);
    assert_int_equal(m.take[0] + m.take[1] + m.take[2], 100000);
    run(&m, 7);
    /* weights need not sum to 1; the shortfall of an uneven split goes to
     * distinct sources, one each */
    mix w = {.n = 3,
             .size = {RF__MIX_PROPORTION, RF__MIX_PROPORTION, RF__MIX_PROPORTION},
             .amount = {1, 1, 1},
             .samples = {10, 20, 30},
             .epoch_size = 100000};
    plan(&w, 3);
    for (int c = 0; c < 3; c++)
        assert_true(w.take[c] == 33333 || w.take[c] == 33334);
    assert_int_equal(w.take[0] + w.take[1] + w.take[2], 100000);
    run(&w, 3);
    /* no epoch_size: the sources' sizes summed */
    mix d = {.n = 2,
             .size = {RF__MIX_PROPORTION, RF__MIX_PROPORTION},
             .amount = {3, 1},
             .samples = {100, 300}};
    plan(&d, 1);
    assert_int_equal(d.take[0], 300);
    assert_int_equal(d.take[1], 100);
}

/* The samples of source 1 (first = samples[0]) that an epoch's order
 * takes, as a bitmap. */
static void taken(mix *m, int64_t epoch, uint8_t *bits)
{
    uint32_t *perm = malloc((size_t)m->o.size * sizeof *perm);
    assert_non_null(perm);
    rf__mix_order_fill(&m->o, 11, epoch, 1, perm);
    memset(bits, 0, (size_t)m->samples[1]);
    for (int64_t p = 0; p < m->o.size; p++)
        if (perm[p] >= m->samples[0] && perm[p] < m->samples[0] + m->samples[1])
            bits[perm[p] - m->samples[0]] = 1;
    free(perm);
}

static void test_repeat_choose_whole(void **state)
{
    (void)state;
    mix m = {.n = 3,
             .size = {RF__MIX_REPEAT, RF__MIX_CHOOSE, RF__MIX_WHOLE},
             .amount = {2.5, 1000, 0},
             .samples = {30000, 5000, 24000}};
    plan(&m, 11);
    int64_t want[3] = {75000, 1000, 24000};
    for (int c = 0; c < 3; c++)
        assert_true(llabs(m.take[c] - want[c]) <= 1);
    assert_int_equal(m.take[0] + m.take[1] + m.take[2], 100000);
    run(&m, 11);
    /* a down-sampled source takes another subset in every epoch */
    order_init(&m);
    uint8_t *e0 = malloc(5000), *e1 = malloc(5000);
    taken(&m, 0, e0);
    taken(&m, 1, e1);
    int64_t same = 0;
    for (int i = 0; i < 5000; i++)
        same += e0[i] && e1[i];
    assert_true(same < 500); /* 1000 of 5000 twice: about 200 in common */
    free(e0);
    free(e1);
    rf__mix_order_free(&m.o);
    /* choose beyond the source: full passes, then a subset */
    mix up = {.n = 2,
              .size = {RF__MIX_CHOOSE, RF__MIX_REPEAT},
              .amount = {2345, 0.25},
              .samples = {1000, 1000}};
    run(&up, 5);
    assert_int_equal(up.take[0], 2345);
    assert_int_equal(up.take[1], 250);
    /* no source sized, with epoch_size: in proportion to their sizes */
    mix none = {
        .n = 2, .size = {RF__MIX_WHOLE, RF__MIX_WHOLE}, .samples = {100, 300}, .epoch_size = 1000};
    plan(&none, 1);
    assert_int_equal(none.take[0], 250);
    assert_int_equal(none.take[1], 750);
}

static void test_blocks_keep_shards_together(void **state)
{
    (void)state;
    /* source 0: 40 shards of 10 in blocks of 4, read 1.5 times; source 1
     * shuffled whole */
    mix m = {.n = 2,
             .size = {RF__MIX_REPEAT, RF__MIX_WHOLE},
             .amount = {1.5, 0},
             .samples = {400, 250},
             .block = {4, 0}};
    run(&m, 9);
}

static void test_pure_function_of_seed_and_epoch(void **state)
{
    (void)state;
    mix m = {.n = 3,
             .size = {RF__MIX_PROPORTION, RF__MIX_PROPORTION, RF__MIX_PROPORTION},
             .amount = {0.5, 0.3, 0.2},
             .samples = {500, 200, 100},
             .epoch_size = 2000,
             .block = {0, 0, 0}};
    plan(&m, 4);
    order_init(&m);
    uint32_t a[2000], b[2000], c[2000];
    rf__mix_order_fill(&m.o, 4, 1, 1, a);
    rf__mix_order_fill(&m.o, 4, 2, 1, c); /* between the two: nothing carries over */
    rf__mix_order_fill(&m.o, 4, 1, 1, b);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    rf__mix_order_fill(&m.o, 5, 1, 1, c);
    assert_memory_not_equal(a, c, sizeof a);
    rf__mix_order_free(&m.o);
}

static void plan_fails(mix *m, const char *words)
{
    char err[400] = "";
    int rc = rf__mix_plan(m->n, m->size, m->amount, m->samples, m->epoch_size, 0, m->take, err,
                          sizeof err);
    assert_int_equal(rc, RF_E_INVALID);
    printf("refused: %s\n", err);
    if (!strstr(err, words))
        fail_msg("message '%s' lacks '%s'", err, words);
}

static void test_refusals(void **state)
{
    (void)state;
    mix a = {.n = 2,
             .size = {RF__MIX_PROPORTION, RF__MIX_REPEAT},
             .amount = {0.5, 2},
             .samples = {10, 10}};
    plan_fails(&a, "cannot be mixed");
    mix b = {.n = 2,
             .size = {RF__MIX_REPEAT, RF__MIX_CHOOSE},
             .amount = {1, 5},
             .samples = {10, 10},
             .epoch_size = 100};
    plan_fails(&b, "epoch_size");
    mix c = {.n = 1, .size = {RF__MIX_CHOOSE}, .amount = {2.5}, .samples = {10}};
    plan_fails(&c, "choose=2.5");
    mix d = {.n = 1, .size = {RF__MIX_PROPORTION}, .amount = {-1}, .samples = {10}};
    plan_fails(&d, "proportion=-1");
    mix e = {
        .n = 2, .size = {RF__MIX_CHOOSE, RF__MIX_CHOOSE}, .amount = {0, 0}, .samples = {10, 10}};
    plan_fails(&e, "empty");
    mix f = {.n = 2, .size = {RF__MIX_CHOOSE, RF__MIX_WHOLE}, .amount = {5, 0}, .samples = {0, 10}};
    plan_fails(&f, "no samples");
    mix g = {.n = 1, .size = {RF__MIX_REPEAT}, .amount = {1e6}, .samples = {10000}};
    plan_fails(&g, "more than");
    mix h = {.n = 1, .size = {RF__MIX_REPEAT}, .amount = {4e9}, .samples = {4000000000}};
    plan_fails(&h, "more than"); /* past int64 as a double product: no overflow */
    mix i = {.n = 2, .size = {RF__MIX_WHOLE, RF__MIX_WHOLE}, .samples = {0, 0}, .epoch_size = 100};
    plan_fails(&i, "empty"); /* no weight to share 100 by */
}

/* The sampler over a mixture's order: batches [0, k) of an epoch on
 * `from` ranks, the rest split over `to` ranks (rf__sampler_set_rest), every
 * entry of the order taken as many times as the order holds it. */
static void resume_counts(mix *m, int64_t bs, int from, int to, int64_t k)
{
    int64_t size = m->o.size, total = 0;
    for (int c = 0; c < m->n; c++)
        total += m->samples[c];
    uint32_t *order = malloc((size_t)size * sizeof *order);
    int64_t *want = calloc((size_t)total, sizeof *want), *got = calloc((size_t)total, sizeof *got);
    assert_non_null(order);
    rf__mix_order_fill(&m->o, 3, 2, 1, order);
    for (int64_t p = 0; p < size; p++)
        want[order[p]]++;
    int64_t consumed = -1;
    for (int r = 0; r < from; r++) {
        rf_sampler s;
        assert_int_equal(rf__sampler_init(&s, size, bs, 1, 0, 0, 3, r, from), 0);
        rf__sampler_set_fill(&s, rf__mix_order_fill, &m->o);
        rf__sampler_set_epoch(&s, 2);
        for (int64_t b = 0; b < k; b++) {
            const int64_t *idx;
            int64_t n = rf__sampler_batch(&s, b, &idx);
            for (int64_t i = 0; i < n; i++)
                got[idx[i]]++;
        }
        int64_t c = rf__sampler_consumed(&s, k);
        assert_true(consumed < 0 || consumed == c);
        consumed = c;
        rf__sampler_free(&s);
    }
    for (int r = 0; r < to; r++) {
        rf_sampler s;
        assert_int_equal(rf__sampler_init(&s, size, bs, 1, 0, 0, 3, r, to), 0);
        rf__sampler_set_fill(&s, rf__mix_order_fill, &m->o);
        rf__sampler_set_rest(&s, 2, consumed);
        for (int64_t b = 0; b < s.num_batches; b++) {
            const int64_t *idx;
            int64_t n = rf__sampler_batch(&s, b, &idx);
            for (int64_t i = 0; i < n; i++)
                got[idx[i]]++;
        }
        rf__sampler_free(&s);
    }
    assert_memory_equal(got, want, (size_t)total * sizeof *got);
    free(order);
    free(want);
    free(got);
}

static void test_resume_on_other_world_sizes(void **state)
{
    (void)state;
    /* 1200 entries: 4 ranks x 3 batches of 10 leave 1080, a multiple of 2
     * and 3 (no padding) */
    mix m = {.n = 3,
             .size = {RF__MIX_PROPORTION, RF__MIX_PROPORTION, RF__MIX_PROPORTION},
             .amount = {0.5, 0.3, 0.2},
             .samples = {400, 333, 50},
             .epoch_size = 1200,
             .block = {0, 5, 0}};
    plan(&m, 3);
    order_init(&m);
    resume_counts(&m, 10, 4, 2, 3);
    resume_counts(&m, 10, 4, 3, 3);
    resume_counts(&m, 10, 4, 4, 3);
    rf__mix_order_free(&m.o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proportions_of_100000),
        cmocka_unit_test(test_repeat_choose_whole),
        cmocka_unit_test(test_blocks_keep_shards_together),
        cmocka_unit_test(test_pure_function_of_seed_and_epoch),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_resume_on_other_world_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
