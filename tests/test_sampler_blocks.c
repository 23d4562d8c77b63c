/*
 * test_sampler_blocks.c - the shard-aware shuffle (RF_P_SHUFFLE_BLOCK,
 * rf__sampler_set_shards in lib/core/sampler.c).
 *
 * The epoch's global order (a world_size 1 sampler's order) is checked for
 * its block structure: walking it, a new shard may only start once the
 * block's K shards are all complete, so the order is a sequence of blocks of
 * K whole shards (the last one shorter), each shard in exactly one. The
 * split across ranks is checked to be DistributedSampler's over that order,
 * unchanged. K = 1 reads the shards one after the other; K >= the number of
 * shards gives one block, the same order for every such K, with each shard's
 * samples spread over the whole epoch. Without shuffle the order is the
 * shards' own order. Samples are dealt to shards both contiguously (as tar
 * shards index) and interleaved (the sampler must not rely on contiguity).
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
#include "testcheck.h"

/* ----------------------------------------------------------------- helpers */

typedef struct shards {
    int64_t n, nshards;
    uint32_t of[4096]; /* shard of sample i */
    int64_t count[64]; /* samples per shard */
} shards;

static uint32_t shard_of(const void *ctx, int64_t i)
{
    return ((const shards *)ctx)->of[i];
}

/* counts[0..nshards) samples per shard; interleaved: dealt round-robin over
 * the shards that still take samples, else each shard's samples in a run. */
static void make_shards(shards *sh, const int64_t *counts, int64_t nshards, int interleaved)
{
    memset(sh, 0, sizeof *sh);
    sh->nshards = nshards;
    int64_t left[64];
    for (int64_t s = 0; s < nshards; s++) {
        sh->count[s] = left[s] = counts[s];
        sh->n += counts[s];
    }
    assert_true(sh->n <= 4096);
    int64_t i = 0;
    if (!interleaved) {
        for (int64_t s = 0; s < nshards; s++)
            for (int64_t k = 0; k < counts[s]; k++)
                sh->of[i++] = (uint32_t)s;
        return;
    }
    while (i < sh->n)
        for (int64_t s = 0; s < nshards; s++)
            if (left[s] > 0) {
                left[s]--;
                sh->of[i++] = (uint32_t)s;
            }
}

static void init_blocks(rf_sampler *s, const shards *sh, int64_t block, int64_t bs, int shuffle,
                        int sampler_drop_last, uint64_t seed, int64_t rank, int64_t world)
{
    assert_int_equal(
        rf__sampler_init(s, sh->n, bs, shuffle, 0, sampler_drop_last, seed, rank, world), 0);
    assert_int_equal(rf__sampler_set_shards(s, block, sh->nshards, shard_of, sh), 0);
}

/* The epoch's global order under shard blocks: a world_size 1 sampler's. */
static int64_t *block_order(const shards *sh, int64_t block, int shuffle, uint64_t seed,
                            int64_t epoch)
{
    rf_sampler s;
    init_blocks(&s, sh, block, 1, shuffle, 0, seed, 0, 1);
    rf__sampler_set_epoch(&s, epoch);
    assert_int_equal(s.num_samples, sh->n);
    int64_t *o = malloc((size_t)sh->n * sizeof *o);
    assert_non_null(o);
    memcpy(o, s.order, (size_t)sh->n * sizeof *o);
    rf__sampler_free(&s);
    return o;
}

/* Walks the order: a sample of a shard outside the current block opens a
 * new block, allowed only once the current one holds `block` shards, all
 * complete. Returns the number of blocks. Shards must not be empty. */
static int64_t check_blocks(const shards *sh, const int64_t *o, int64_t block)
{
    int64_t seen[64] = {0}, in_block[64], nin = 0, nblocks = 1;
    int done[64] = {0};
    for (int64_t p = 0; p < sh->n; p++) {
        uint32_t s = sh->of[o[p]];
        int member = 0;
        for (int64_t j = 0; j < nin; j++)
            member |= in_block[j] == s;
        if (!member) {
            assert_int_equal(done[s], 0); /* each shard in one block only */
            if (nin == block) {           /* the block is full: it must be complete */
                for (int64_t j = 0; j < nin; j++) {
                    assert_int_equal(seen[in_block[j]], sh->count[in_block[j]]);
                    done[in_block[j]] = 1;
                }
                nin = 0;
                nblocks++;
            }
            in_block[nin++] = s;
        }
        seen[s]++;
    }
    for (int64_t s = 0; s < sh->nshards; s++)
        assert_int_equal(seen[s], sh->count[s]);
    return nblocks;
}

static const int64_t counts7[] = {5, 9, 1, 12, 7, 3, 8}; /* 45 samples, uneven shards */

/* ------------------------------------------------------------------- tests */

static void test_blocks_of_whole_shards(void **state)
{
    (void)state;
    for (int il = 0; il < 2; il++) {
        shards sh;
        make_shards(&sh, counts7, 7, il);
        for (int64_t k = 1; k <= 8; k++)
            for (int64_t epoch = 0; epoch < 5; epoch++) {
                int64_t *o = block_order(&sh, k, 1, 11, epoch);
                tu_assert_permutation(o, sh.n);
                int64_t nb = check_blocks(&sh, o, k);
                assert_int_equal(nb, (7 + k - 1) / k);
                free(o);
            }
    }
}

/* Every sample once per epoch across ranks (the padding aside), and each
 * rank's share is DistributedSampler's over the block order: rank r takes
 * positions r, r + W, ... of it, wrapped (or trimmed). */
static void test_split_over_ranks(void **state)
{
    (void)state;
    shards sh;
    make_shards(&sh, counts7, 7, 1);
    for (int trim = 0; trim < 2; trim++)
        for (int64_t k = 1; k <= 7; k += 2)
            for (int64_t w = 1; w <= 6; w++) {
                int64_t *g = block_order(&sh, k, 1, 5, 3);
                int64_t per = trim ? sh.n / w : (sh.n + w - 1) / w;
                int64_t hits[4096] = {0};
                for (int64_t r = 0; r < w; r++) {
                    rf_sampler s;
                    init_blocks(&s, &sh, k, 4, 1, trim, 5, r, w);
                    rf__sampler_set_epoch(&s, 3);
                    assert_int_equal(s.num_samples, per);
                    for (int64_t j = 0; j < per; j++) {
                        assert_int_equal(s.order[j], g[(r + j * w) % sh.n]);
                        hits[s.order[j]]++;
                    }
                    rf__sampler_free(&s);
                }
                int64_t extra = 0, missing = 0;
                for (int64_t i = 0; i < sh.n; i++) {
                    extra += hits[i] > 1 ? hits[i] - 1 : 0;
                    missing += hits[i] == 0;
                }
                assert_int_equal(extra, trim ? 0 : per * w - sh.n);
                assert_int_equal(missing, trim ? sh.n - per * w : 0);
                free(g);
            }
}

static void test_function_of_seed_and_epoch(void **state)
{
    (void)state;
    shards sh;
    make_shards(&sh, counts7, 7, 0);
    int64_t *a = block_order(&sh, 2, 1, 7, 3);
    int64_t *b = block_order(&sh, 2, 1, 7, 3);
    assert_memory_equal(a, b, (size_t)sh.n * sizeof *a);
    /* Many epochs: all distinct (shard order or block shuffles differ). */
    int64_t *e[12];
    for (int i = 0; i < 12; i++) {
        e[i] = block_order(&sh, 2, 1, 7, i);
        for (int j = 0; j < i; j++)
            assert_memory_not_equal(e[i], e[j], (size_t)sh.n * sizeof *a);
    }
    int64_t *other_seed = block_order(&sh, 2, 1, 8, 3);
    assert_memory_not_equal(a, other_seed, (size_t)sh.n * sizeof *a);

    /* One sampler moved through epochs 3, 4, 3 gives back the first order. */
    rf_sampler s;
    init_blocks(&s, &sh, 2, 3, 1, 0, 7, 0, 1);
    rf__sampler_set_epoch(&s, 3);
    assert_memory_equal(s.order, a, (size_t)sh.n * sizeof *a);
    rf__sampler_set_epoch(&s, 4);
    assert_memory_equal(s.order, e[4], (size_t)sh.n * sizeof *a);
    rf__sampler_set_epoch(&s, 3);
    assert_memory_equal(s.order, a, (size_t)sh.n * sizeof *a);
    rf__sampler_free(&s);
    for (int i = 0; i < 12; i++)
        free(e[i]);
    free(a);
    free(b);
    free(other_seed);
}

/* K = 1: one shard after the other, each shard's samples in a run (in a
 * shuffled order within it), the shards in an order that changes by epoch. */
static void test_one_shard_at_a_time(void **state)
{
    (void)state;
    shards sh;
    make_shards(&sh, counts7, 7, 1);
    int first_shards = 0;
    uint32_t first_seen[64] = {0};
    int within_shuffled = 0;
    for (int64_t epoch = 0; epoch < 40; epoch++) {
        int64_t *o = block_order(&sh, 1, 1, 3, epoch);
        assert_int_equal(check_blocks(&sh, o, 1), 7);
        for (int64_t p = 1; p < sh.n; p++)
            if (sh.of[o[p]] == sh.of[o[p - 1]] && o[p] < o[p - 1])
                within_shuffled = 1;
        if (!first_seen[sh.of[o[0]]]++)
            first_shards++;
        free(o);
    }
    assert_true(within_shuffled);
    assert_true(first_shards >= 5); /* 7 shards, 40 epochs: nearly all lead once */
}

/* K >= nshards: one block, all samples shuffled together; the same order
 * for any such K, and each shard's samples spread across the epoch. */
static void test_one_block_for_all_shards(void **state)
{
    (void)state;
    shards sh;
    make_shards(&sh, counts7, 7, 0);
    int64_t *a = block_order(&sh, 7, 1, 21, 2);
    int64_t *b = block_order(&sh, 8, 1, 21, 2);
    int64_t *c = block_order(&sh, UINT32_MAX, 1, 21, 2);
    assert_memory_equal(a, b, (size_t)sh.n * sizeof *a);
    assert_memory_equal(a, c, (size_t)sh.n * sizeof *a);
    assert_int_equal(check_blocks(&sh, a, 7), 1);
    /* The big shards (12, 9, 8 samples) have samples in both halves, and
     * runs of one shard are short. */
    for (uint32_t s = 0; s < 7; s++) {
        if (sh.count[s] < 8)
            continue;
        int halves = 0;
        for (int64_t p = 0; p < sh.n; p++)
            if (sh.of[a[p]] == s)
                halves |= p < sh.n / 2 ? 1 : 2;
        assert_int_equal(halves, 3);
    }
    int64_t longest = 1, run = 1;
    for (int64_t p = 1; p < sh.n; p++) {
        run = sh.of[a[p]] == sh.of[a[p - 1]] ? run + 1 : 1;
        longest = run > longest ? run : longest;
    }
    assert_true(longest < 6);
    free(a);
    free(b);
    free(c);
}

/* Without shuffle: the shards' own order, each shard's samples ascending
 * (the index order when shards are contiguous), for any K. */
static void test_unshuffled_is_shard_order(void **state)
{
    (void)state;
    for (int il = 0; il < 2; il++) {
        shards sh;
        make_shards(&sh, counts7, 7, il);
        for (int64_t k = 1; k <= 8; k++) {
            int64_t *o = block_order(&sh, k, 0, 99, 4);
            for (int64_t p = 1; p < sh.n; p++) {
                uint32_t a = sh.of[o[p - 1]], b = sh.of[o[p]];
                assert_true(a < b || (a == b && o[p - 1] < o[p]));
            }
            if (!il)
                for (int64_t p = 0; p < sh.n; p++)
                    assert_int_equal(o[p], p);
            free(o);
        }
    }
}

/* Empty shards take no place; a single shard is one block. */
static void test_empty_and_single_shards(void **state)
{
    (void)state;
    static const int64_t with_empty[] = {3, 0, 4, 0, 0, 2};
    shards sh;
    make_shards(&sh, with_empty, 6, 0);
    for (int64_t k = 1; k <= 6; k++) {
        int64_t *o = block_order(&sh, k, 1, 1, 0);
        tu_assert_permutation(o, sh.n);
        free(o);
    }
    static const int64_t single[] = {10};
    make_shards(&sh, single, 1, 0);
    int64_t *o = block_order(&sh, 3, 1, 1, 0);
    tu_assert_permutation(o, sh.n);
    free(o);
}

/* The shard that leads the epoch is uniform over the shards (the shard
 * permutation is not biased), and within a K = 1 block the first sample is
 * uniform over the shard's samples. */
static void test_shard_order_statistics(void **state)
{
    (void)state;
    static const int64_t even[] = {4, 4, 4, 4, 4};
    shards sh;
    make_shards(&sh, even, 5, 0);
    rf_sampler s;
    init_blocks(&s, &sh, 1, 1, 1, 0, 2024, 0, 1);
    int64_t lead[5] = {0}, first[20] = {0};
    enum { EPOCHS = 2000 };
    for (int64_t e = 0; e < EPOCHS; e++) {
        rf__sampler_set_epoch(&s, e);
        lead[sh.of[s.order[0]]]++;
        first[s.order[0]]++;
    }
    rf__sampler_free(&s);
    /* 400 expected per shard (sd ~18), 100 per sample (sd ~9.7): 5 sigma. */
    for (int i = 0; i < 5; i++)
        assert_true(lead[i] > 310 && lead[i] < 490);
    for (int i = 0; i < 20; i++)
        assert_true(first[i] > 50 && first[i] < 150);
}

static void test_invalid_shards(void **state)
{
    (void)state;
    shards sh;
    make_shards(&sh, counts7, 7, 0);
    rf_sampler s;
    assert_int_equal(rf__sampler_init(&s, sh.n, 4, 1, 0, 0, 1, 0, 1), 0);
    assert_int_equal(rf__sampler_set_shards(&s, 0, 7, shard_of, &sh), RF_E_INVALID);
    assert_int_equal(rf__sampler_set_shards(&s, 2, 0, shard_of, &sh), RF_E_INVALID);
    rf__sampler_free(&s);
    /* a shard id past nshards */
    assert_int_equal(rf__sampler_init(&s, sh.n, 4, 1, 0, 0, 1, 0, 1), 0);
    assert_int_equal(rf__sampler_set_shards(&s, 2, 6, shard_of, &sh), RF_E_INVALID);
    rf__sampler_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_of_whole_shards),
        cmocka_unit_test(test_split_over_ranks),
        cmocka_unit_test(test_function_of_seed_and_epoch),
        cmocka_unit_test(test_one_shard_at_a_time),
        cmocka_unit_test(test_one_block_for_all_shards),
        cmocka_unit_test(test_unshuffled_is_shard_order),
        cmocka_unit_test(test_empty_and_single_shards),
        cmocka_unit_test(test_shard_order_statistics),
        cmocka_unit_test(test_invalid_shards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
