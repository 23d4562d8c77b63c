/*
 * test_sampler.c - the epoch order and its distributed split (lib/core/sampler.c).
 *
 * The split is checked against torch.utils.data.DistributedSampler with
 * drop_last=False, written out here as its arithmetic: the permutation is
 * padded by wrapping to total = ceil(n / W) * W entries (padded[p] =
 * perm[p % n]), and rank r takes padded[r::W]. The permutation itself is
 * checked to be one (every index once), to depend on (seed, epoch) alone and
 * to be statistically unremarkable. With sampler_drop_last the split is
 * checked against DistributedSampler(drop_last=True), also written out as
 * its arithmetic: the permutation is cut to total = num * W entries, num =
 * ceil((n - W) / W) when W does not divide n, and rank r takes perm[r:total:W].
 *
 * Self-contained: links lib/ and cmocka only; no files are touched.
 */
#include <math.h>
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

static void init_ok(rf_sampler *s, int64_t n, int64_t bs, int shuffle, int drop_last,
                    uint64_t seed, int64_t rank, int64_t world)
{
    int rc = rf__sampler_init(s, n, bs, shuffle, drop_last, 0, seed, rank, world);
    assert_int_equal(rc, 0);
}

/* As init_ok, with sampler_drop_last = 1 (the trimmed split). */
static void init_trim(rf_sampler *s, int64_t n, int64_t bs, int shuffle, int drop_last,
                      uint64_t seed, int64_t rank, int64_t world)
{
    int rc = rf__sampler_init(s, n, bs, shuffle, drop_last, 1, seed, rank, world);
    assert_int_equal(rc, 0);
}

/* The whole permutation for (seed, epoch), as a world_size 1 sampler sees it. */
static int64_t *full_order(int64_t n, int shuffle, uint64_t seed, int64_t epoch)
{
    rf_sampler s;
    init_ok(&s, n, 1, shuffle, 0, seed, 0, 1);
    rf__sampler_set_epoch(&s, epoch);
    assert_int_equal(s.num_samples, n);
    int64_t *o = malloc((size_t)n * sizeof *o);
    assert_non_null(o);
    memcpy(o, s.order, (size_t)n * sizeof *o);
    rf__sampler_free(&s);
    return o;
}

static int same_order(const int64_t *a, const int64_t *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* A batch is a pure function of (seed, epoch, rank, world, k): a, set to
 * epoch 6 at once, and b, which visits epochs 0 and 9 on its way to 6, give
 * the same batches. a and b were made with the same arguments. */
static void check_epoch_detour(rf_sampler *a, rf_sampler *b)
{
    rf__sampler_set_epoch(a, 6);
    rf__sampler_set_epoch(b, 0);
    rf__sampler_set_epoch(b, 9);
    rf__sampler_set_epoch(b, 6);
    assert_int_equal(a->num_batches, b->num_batches);
    for (int64_t k = 0; k < a->num_batches; k++) {
        const int64_t *ia, *ib;
        int64_t ca = rf__sampler_batch(a, k, &ia), cb = rf__sampler_batch(b, k, &ib);
        assert_int_equal(ca, cb);
        assert_memory_equal(ia, ib, (size_t)ca * sizeof *ia);
    }
}

/* ------------------------------------------------------------------- tests */

static void test_identity_without_shuffle(void **state)
{
    (void)state;
    static const int64_t ns[] = {1, 2, 7, 10, 1000};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        int64_t n = ns[t];
        for (int64_t epoch = 0; epoch < 3; epoch++) {
            int64_t *o = full_order(n, 0, 1234 + (uint64_t)epoch, epoch);
            for (int64_t i = 0; i < n; i++)
                assert_int_equal(o[i], i);
            free(o);
        }
    }
}

static void test_shuffle_is_permutation(void **state)
{
    (void)state;
    static const int64_t ns[] = {1, 2, 3, 7, 10, 1000, 100003};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        int64_t n = ns[t];
        for (int64_t epoch = 0; epoch < 4; epoch++) {
            int64_t *o = full_order(n, 1, 42, epoch);
            tu_assert_permutation(o, n);
            if (n >= 10) {
                /* Not the identity, and not merely a rotation of it. */
                int64_t fixed = 0;
                for (int64_t i = 0; i < n; i++)
                    fixed += o[i] == i;
                assert_true(fixed < n / 2);
                int64_t steps = 0;
                for (int64_t i = 1; i < n; i++)
                    steps += o[i] == (o[i - 1] + 1) % n;
                assert_true(steps < n / 2);
            }
            free(o);
        }
    }
}

static void test_order_is_function_of_seed_and_epoch(void **state)
{
    (void)state;
    const int64_t n = 1000;
    int64_t *a = full_order(n, 1, 7, 3);
    int64_t *b = full_order(n, 1, 7, 3);
    assert_true(same_order(a, b, n));

    int64_t *other_epoch = full_order(n, 1, 7, 4);
    assert_false(same_order(a, other_epoch, n));
    int64_t *other_seed = full_order(n, 1, 8, 3);
    assert_false(same_order(a, other_seed, n));
    int64_t *big_seed = full_order(n, 1, UINT64_MAX, 3);
    tu_assert_permutation(big_seed, n);
    assert_false(same_order(a, big_seed, n));

    /* One sampler moved through epochs 3, 4, 3 gives back the first order:
     * nothing carries over from one epoch to the next. */
    rf_sampler s;
    init_ok(&s, n, 16, 1, 0, 7, 0, 1);
    rf__sampler_set_epoch(&s, 3);
    assert_true(same_order(s.order, a, n));
    rf__sampler_set_epoch(&s, 4);
    assert_true(same_order(s.order, other_epoch, n));
    rf__sampler_set_epoch(&s, 3);
    assert_true(same_order(s.order, a, n));
    rf__sampler_set_epoch(&s, 3); /* already current: unchanged */
    assert_true(same_order(s.order, a, n));
    rf__sampler_free(&s);

    /* The batch size does not change the order, only how it is cut. */
    init_ok(&s, n, 1, 1, 1, 7, 0, 1);
    rf__sampler_set_epoch(&s, 3);
    assert_true(same_order(s.order, a, n));
    rf__sampler_free(&s);

    /* Many epochs: all distinct from each other. */
    int64_t *prev[16];
    for (int e = 0; e < 16; e++) {
        prev[e] = full_order(n, 1, 99, e);
        for (int f = 0; f < e; f++)
            assert_false(same_order(prev[e], prev[f], n));
    }
    for (int e = 0; e < 16; e++)
        free(prev[e]);

    free(a);
    free(b);
    free(other_epoch);
    free(other_seed);
    free(big_seed);
}

/* DistributedSampler(drop_last=False): padded[p] = perm[p % n], rank r takes
 * padded[r::W], num_samples = ceil(n / W). */
static void check_split(int64_t n, int64_t world, int shuffle, uint64_t seed, int64_t epoch)
{
    int64_t *perm = full_order(n, shuffle, seed, epoch);
    int64_t num = (n + world - 1) / world, total = num * world;
    int64_t *hits = calloc((size_t)n, sizeof *hits);
    assert_non_null(hits);
    for (int64_t r = 0; r < world; r++) {
        rf_sampler s;
        init_ok(&s, n, 3, shuffle, 0, seed, r, world);
        assert_int_equal(s.num_samples, num);
        rf__sampler_set_epoch(&s, epoch);
        for (int64_t k = 0; k < num; k++) {
            int64_t want = perm[(r + k * world) % n];
            if (s.order[k] != want)
                fail_msg("n=%lld W=%lld r=%lld k=%lld: got %lld, want %lld", (long long)n,
                         (long long)world, (long long)r, (long long)k, (long long)s.order[k],
                         (long long)want);
            hits[s.order[k]]++;
        }
        rf__sampler_free(&s);
    }
    /* Every index is covered; the surplus is exactly the padding, which is
     * the head of the permutation repeated (wrapping as often as needed). */
    int64_t surplus = 0;
    for (int64_t j = 0; j < n; j++) {
        assert_true(hits[perm[j]] >= 1);
        int64_t want = 0;
        for (int64_t p = 0; p < total; p++)
            want += p % n == j;
        assert_int_equal(hits[perm[j]], want);
        surplus += hits[perm[j]] - 1;
    }
    assert_int_equal(surplus, total - n);
    free(hits);
    free(perm);
}

static void test_distributed_split(void **state)
{
    (void)state;
    static const int64_t ns[] = {1, 7, 10, 1000};
    static const int64_t ws[] = {1, 2, 3, 8};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 4; j++) {
            check_split(ns[i], ws[j], 1, 5, 0);
            check_split(ns[i], ws[j], 1, 5, 11);
            check_split(ns[i], ws[j], 0, 5, 0);
        }
    /* World larger than the dataset: padding wraps more than once. */
    check_split(3, 8, 1, 1, 2);
    check_split(2, 7, 0, 1, 0);
}

static void test_distributed_known_values(void **state)
{
    (void)state;
    /* Without shuffle the split is plain arithmetic: n=10, W=3 gives
     * [0,3,6,9], [1,4,7,0], [2,5,8,1] (torch pads with indices 0 and 1). */
    static const int64_t want[3][4] = {{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
    for (int64_t r = 0; r < 3; r++) {
        rf_sampler s;
        init_ok(&s, 10, 4, 0, 0, 0, r, 3);
        rf__sampler_set_epoch(&s, 0);
        assert_int_equal(s.num_samples, 4);
        for (int k = 0; k < 4; k++)
            assert_int_equal(s.order[k], want[r][k]);
        rf__sampler_free(&s);
    }
    /* n=1, W=8: every rank gets the one sample. */
    for (int64_t r = 0; r < 8; r++) {
        rf_sampler s;
        init_ok(&s, 1, 4, 1, 0, 3, r, 8);
        rf__sampler_set_epoch(&s, 5);
        assert_int_equal(s.num_samples, 1);
        assert_int_equal(s.order[0], 0);
        rf__sampler_free(&s);
    }
}

static int64_t batches(int64_t n, int64_t bs, int drop_last, int64_t world)
{
    rf_sampler s;
    init_ok(&s, n, bs, 1, drop_last, 0, 0, world);
    int64_t nb = s.num_batches;
    rf__sampler_free(&s);
    return nb;
}

static void test_batch_counts(void **state)
{
    (void)state;
    assert_int_equal(batches(10, 4, 0, 1), 3);
    assert_int_equal(batches(10, 4, 1, 1), 2);
    assert_int_equal(batches(8, 4, 0, 1), 2);
    assert_int_equal(batches(8, 4, 1, 1), 2);
    assert_int_equal(batches(3, 4, 0, 1), 1);
    assert_int_equal(batches(3, 4, 1, 1), 0); /* everything dropped */
    /* world 3: ceil(10/3) = 4 samples per rank */
    assert_int_equal(batches(10, 4, 0, 3), 1);
    assert_int_equal(batches(10, 4, 1, 3), 1);
    assert_int_equal(batches(10, 3, 0, 3), 2);
    assert_int_equal(batches(10, 3, 1, 3), 1);
    assert_int_equal(batches(10, 1, 0, 3), 4);
    assert_int_equal(batches(1000, 32, 0, 8), 4); /* 125 per rank */
    assert_int_equal(batches(1000, 32, 1, 8), 3);

    /* Every rank gets the same count, as DDP needs. */
    for (int64_t r = 0; r < 3; r++) {
        rf_sampler s;
        init_ok(&s, 10, 3, 1, 0, 0, r, 3);
        assert_int_equal(s.num_samples, 4);
        assert_int_equal(s.num_batches, 2);
        rf__sampler_free(&s);
    }
}

static void check_batches(int64_t n, int64_t bs, int drop_last, int64_t rank, int64_t world)
{
    rf_sampler s;
    init_ok(&s, n, bs, 1, drop_last, 77, rank, world);
    rf__sampler_set_epoch(&s, 2);
    int64_t covered = 0;
    for (int64_t k = 0; k < s.num_batches; k++) {
        const int64_t *idx = NULL;
        int64_t c = rf__sampler_batch(&s, k, &idx);
        int64_t want = s.num_samples - k * bs < bs ? s.num_samples - k * bs : bs;
        assert_int_equal(c, want);
        assert_ptr_equal(idx, s.order + k * bs);
        if (drop_last)
            assert_int_equal(c, bs);
        covered += c;
    }
    if (drop_last)
        assert_int_equal(covered, (s.num_samples / bs) * bs);
    else
        assert_int_equal(covered, s.num_samples);

    const int64_t *idx = (const int64_t *)&s; /* must stay untouched */
    assert_int_equal(rf__sampler_batch(&s, s.num_batches, &idx), 0);
    assert_int_equal(rf__sampler_batch(&s, s.num_batches + 1000, &idx), 0);
    assert_int_equal(rf__sampler_batch(&s, -1, &idx), 0);
    assert_ptr_equal(idx, (const int64_t *)&s);
    rf__sampler_free(&s);
}

static void test_batch_slices(void **state)
{
    (void)state;
    check_batches(10, 4, 0, 0, 1);
    check_batches(10, 4, 1, 0, 1);
    check_batches(10, 3, 0, 2, 3);
    check_batches(10, 3, 1, 1, 3);
    check_batches(1000, 7, 0, 5, 8);
    check_batches(1000, 7, 1, 7, 8);
    check_batches(1, 1, 0, 0, 1);

    /* Concrete values: n=10 without shuffle, batch 4: [0..3], [4..7], [8,9]. */
    rf_sampler s;
    init_ok(&s, 10, 4, 0, 0, 0, 0, 1);
    rf__sampler_set_epoch(&s, 0);
    const int64_t *idx;
    assert_int_equal(rf__sampler_batch(&s, 0, &idx), 4);
    assert_int_equal(idx[0], 0);
    assert_int_equal(idx[3], 3);
    assert_int_equal(rf__sampler_batch(&s, 1, &idx), 4);
    assert_int_equal(idx[0], 4);
    assert_int_equal(rf__sampler_batch(&s, 2, &idx), 2);
    assert_int_equal(idx[0], 8);
    assert_int_equal(idx[1], 9);
    assert_int_equal(rf__sampler_batch(&s, 3, &idx), 0);
    rf__sampler_free(&s);

    /* A batch is a pure function of (seed, epoch, rank, world, k): two
     * samplers, one of which visited other epochs first, agree. */
    rf_sampler a, b;
    init_ok(&a, 1000, 16, 1, 0, 31, 1, 3);
    init_ok(&b, 1000, 16, 1, 0, 31, 1, 3);
    check_epoch_detour(&a, &b);
    rf__sampler_free(&a);
    rf__sampler_free(&b);
}

/* ------------------------------------------------- sampler_drop_last = 1 */

/* DistributedSampler(drop_last=True)'s indices for rank r, from the global
 * permutation perm (n entries), written as torch writes it: num_samples =
 * ceil((n - W) / W) when W does not divide n, else n / W; total = num * W;
 * indices = perm[:total]; rank r takes indices[r:total:W]. Returns the list
 * (malloc'd) and its length in *len. */
static int64_t *trim_reference(const int64_t *perm, int64_t n, int64_t world, int64_t r,
                               int64_t *len)
{
    int64_t num;
    if (n % world != 0)
        num = (int64_t)ceil((double)(n - world) / (double)world);
    else
        num = n / world;
    int64_t total = num * world;
    int64_t *out = malloc((size_t)(num ? num : 1) * sizeof *out);
    assert_non_null(out);
    int64_t k = 0;
    for (int64_t p = r; p < total; p += world)
        out[k++] = perm[p];
    assert_int_equal(k, num);
    *len = num;
    return out;
}

/* One combination: every rank's order and batches against the reference,
 * the ranks disjoint, their union floor(n / W) * W distinct samples, and the
 * batch count a DataLoader(batch_size, drop_last) over the sampler has. */
static void check_trim(int64_t n, int64_t world, int64_t bs, int drop_last, int shuffle,
                       uint64_t seed, int64_t epoch)
{
    int64_t *perm = full_order(n, shuffle, seed, epoch);
    char *seen = calloc((size_t)n, 1);
    assert_non_null(seen);
    int64_t distinct = 0;
    for (int64_t r = 0; r < world; r++) {
        int64_t num;
        int64_t *want = trim_reference(perm, n, world, r, &num);
        rf_sampler s;
        init_trim(&s, n, bs, shuffle, drop_last, seed, r, world);
        assert_int_equal(s.num_samples, n / world);
        assert_int_equal(s.num_samples, num);
        assert_int_equal(s.num_batches, drop_last ? num / bs : (num + bs - 1) / bs);
        rf__sampler_set_epoch(&s, epoch);
        /* The batches, concatenated, are the reference list (cut to whole
         * batches under drop_last). */
        int64_t k = 0;
        for (int64_t b = 0; b < s.num_batches; b++) {
            const int64_t *idx = NULL;
            int64_t c = rf__sampler_batch(&s, b, &idx);
            assert_int_equal(c, num - b * bs < bs ? num - b * bs : bs);
            for (int64_t i = 0; i < c; i++, k++) {
                if (idx[i] != want[k])
                    fail_msg("n=%lld W=%lld bs=%lld drop=%d shuffle=%d seed=%llu r=%lld "
                             "k=%lld: got %lld, want %lld",
                             (long long)n, (long long)world, (long long)bs, drop_last, shuffle,
                             (unsigned long long)seed, (long long)r, (long long)k,
                             (long long)idx[i], (long long)want[k]);
                assert_int_equal(seen[idx[i]], 0); /* no sample twice across ranks */
                seen[idx[i]] = 1;
                distinct++;
            }
        }
        assert_int_equal(k, drop_last ? num / bs * bs : num);
        const int64_t *idx = NULL;
        assert_int_equal(rf__sampler_batch(&s, s.num_batches, &idx), 0);
        /* The order itself, whole, whatever drop_last cut from the batches. */
        for (int64_t i = 0; i < num; i++)
            assert_int_equal(s.order[i], want[i]);
        rf__sampler_free(&s);
        free(want);
    }
    if (!drop_last)
        assert_int_equal(distinct, n / world * world);
    free(seen);
    free(perm);
}

static void test_trimmed_split(void **state)
{
    (void)state;
    static const int64_t ns[] = {1, 2, 3, 5, 7, 10, 16, 23, 97, 1000};
    static const int64_t ws[] = {1, 2, 3, 4, 8, 13};
    static const int64_t bss[] = {1, 3, 4, 32};
    static const uint64_t seeds[] = {0, 5, 0xfeedfacecafebeefULL};
    int combos = 0;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++)
            for (size_t b = 0; b < sizeof bss / sizeof bss[0]; b++)
                for (int drop = 0; drop <= 1; drop++)
                    for (int shuffle = 0; shuffle <= 1; shuffle++)
                        for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++) {
                            check_trim(ns[i], ws[j], bss[b], drop, shuffle, seeds[k], 0);
                            check_trim(ns[i], ws[j], bss[b], drop, shuffle, seeds[k], 7);
                            combos += 2;
                        }
    printf("  %d (n, W, batch, drop_last, shuffle, seed, epoch) combinations\n", combos);
}

static void test_trimmed_known_values(void **state)
{
    (void)state;
    /* n=10, W=3 without shuffle: [0,3,6], [1,4,7], [2,5,8]; sample 9 is cut
     * (the padded split gives rank 0 [0,3,6,9] and pads ranks 1, 2). */
    static const int64_t want[3][3] = {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
    for (int64_t r = 0; r < 3; r++) {
        rf_sampler s;
        init_trim(&s, 10, 2, 0, 0, 0, r, 3);
        rf__sampler_set_epoch(&s, 0);
        assert_int_equal(s.num_samples, 3);
        assert_int_equal(s.num_batches, 2);
        for (int k = 0; k < 3; k++)
            assert_int_equal(s.order[k], want[r][k]);
        rf__sampler_free(&s);
    }
    /* Fewer samples than ranks: every rank gets nothing, no batch at all. */
    for (int64_t r = 0; r < 8; r++) {
        rf_sampler s;
        init_trim(&s, 3, 4, 1, 0, 3, r, 8);
        assert_int_equal(s.num_samples, 0);
        assert_int_equal(s.num_batches, 0);
        rf__sampler_set_epoch(&s, 5);
        const int64_t *idx = NULL;
        assert_int_equal(rf__sampler_batch(&s, 0, &idx), 0);
        assert_null(idx);
        rf__sampler_free(&s);
    }
}

/* The trimmed order is the padded one minus its tail: equal when W divides
 * n (nothing to pad or cut), a prefix of each rank's padded list otherwise;
 * and, like the padded one, a pure function of (seed, epoch, rank, W). */
static void test_trimmed_against_padded(void **state)
{
    (void)state;
    static const int64_t ns[] = {6, 7, 24, 25, 1001};
    static const int64_t ws[] = {1, 2, 3, 6, 8};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++)
            for (int64_t r = 0; r < ws[j]; r++) {
                rf_sampler pad, trim;
                init_ok(&pad, ns[i], 4, 1, 0, 42, r, ws[j]);
                init_trim(&trim, ns[i], 4, 1, 0, 42, r, ws[j]);
                rf__sampler_set_epoch(&pad, 3);
                rf__sampler_set_epoch(&trim, 3);
                if (ns[i] % ws[j] == 0) {
                    assert_int_equal(trim.num_samples, pad.num_samples);
                    assert_int_equal(trim.num_batches, pad.num_batches);
                } else {
                    assert_int_equal(trim.num_samples, pad.num_samples - 1);
                }
                assert_memory_equal(trim.order, pad.order,
                                    (size_t)trim.num_samples * sizeof *trim.order);
                rf__sampler_free(&pad);
                rf__sampler_free(&trim);
            }

    rf_sampler a, b;
    init_trim(&a, 1000, 16, 1, 1, 31, 2, 3);
    init_trim(&b, 1000, 16, 1, 1, 31, 2, 3);
    check_epoch_detour(&a, &b);
    assert_int_equal(a.num_batches, 333 / 16);
    rf__sampler_free(&a);
    rf__sampler_free(&b);
}

static void test_invalid_arguments(void **state)
{
    (void)state;
    rf_sampler s;
    /* n, batch_size, shuffle, drop_last, sampler_drop_last, seed, rank, world */
    assert_int_equal(rf__sampler_init(&s, 0, 4, 1, 0, 0, 0, 0, 1), RF_E_INVALID);
    assert_null(s.order);
    assert_int_equal(rf__sampler_init(&s, -5, 4, 1, 0, 0, 0, 0, 1), RF_E_INVALID);
    assert_int_equal(rf__sampler_init(&s, 10, 0, 1, 0, 0, 0, 0, 1), RF_E_INVALID);
    assert_int_equal(rf__sampler_init(&s, 10, -1, 1, 0, 0, 0, 0, 1), RF_E_INVALID);
    assert_int_equal(rf__sampler_init(&s, 10, 4, 1, 0, 0, 0, 1, 1), RF_E_INVALID);
    assert_int_equal(rf__sampler_init(&s, 10, 4, 1, 0, 0, 0, 3, 3), RF_E_INVALID);
    assert_int_equal(rf__sampler_init(&s, 10, 4, 1, 0, 0, 0, 9, 3), RF_E_INVALID);
    assert_int_equal(rf__sampler_init(&s, 10, 4, 1, 0, 0, 0, -1, 3), RF_E_INVALID);
    assert_int_equal(rf__sampler_init(&s, 10, 4, 1, 0, 0, 0, 0, 0), RF_E_INVALID);
    assert_int_equal(rf__sampler_init(&s, 10, 4, 1, 0, 0, 0, 0, -2), RF_E_INVALID);
    /* More samples than the 32-bit permutation scratch can index. */
    assert_int_equal(rf__sampler_init(&s, (int64_t)UINT32_MAX + 1, 4, 1, 0, 0, 0, 0, 1),
                     RF_E_INVALID);
    rf__sampler_free(&s); /* harmless after a refused init */
    rf__sampler_free(&s);

    /* The boundaries themselves are accepted. */
    init_ok(&s, 1, 1, 0, 0, 0, 0, 1);
    rf__sampler_free(&s);
    init_ok(&s, 10, 4, 1, 1, 0, 2, 3);
    rf__sampler_free(&s);
    /* The trimmed split checks the same arguments. */
    assert_int_equal(rf__sampler_init(&s, 10, 4, 1, 0, 1, 0, 3, 3), RF_E_INVALID);
    assert_int_equal(rf__sampler_init(&s, 0, 4, 1, 0, 1, 0, 0, 1), RF_E_INVALID);
    init_trim(&s, 1, 1, 0, 0, 0, 0, 1);
    rf__sampler_free(&s);
}

/* Over many epochs each position sees each value about equally often, and
 * for n = 3 the six orders come up about equally often: the shuffle is
 * neither biased nor stuck. */
static void test_permutation_statistics(void **state)
{
    (void)state;
    enum { N = 5, EPOCHS = 2000 };
    int64_t count[N][N] = {{0}};
    rf_sampler s;
    init_ok(&s, N, 1, 1, 0, 2024, 0, 1);
    for (int64_t e = 0; e < EPOCHS; e++) {
        rf__sampler_set_epoch(&s, e);
        for (int p = 0; p < N; p++)
            count[p][s.order[p]]++;
    }
    rf__sampler_free(&s);
    /* Expected 400 per cell, standard deviation ~18: allow 5 sigma. */
    double chi2 = 0;
    for (int p = 0; p < N; p++)
        for (int v = 0; v < N; v++) {
            double d = (double)count[p][v] - EPOCHS / N;
            chi2 += d * d / (EPOCHS / N);
            if (count[p][v] < 310 || count[p][v] > 490)
                fail_msg("position %d took value %d %lld times in %d epochs", p, v,
                         (long long)count[p][v], EPOCHS);
        }
    /* Each cell varies as Binomial(EPOCHS, 1/5), so the sum has mean
     * 25 * 4/5 = 20 (measured 19.3 over 200 seeds); above 50 is far out. */
    printf("  n=5 x %d epochs: chi2 = %.1f (expected about 20)\n", EPOCHS, chi2);
    assert_true(chi2 < 50);

    /* n = 3: all 3! orders, about 1000 times each in 6000 epochs. */
    int64_t orders[27] = {0};
    init_ok(&s, 3, 1, 1, 0, 9, 0, 1);
    for (int64_t e = 0; e < 6000; e++) {
        rf__sampler_set_epoch(&s, e);
        orders[s.order[0] * 9 + s.order[1] * 3 + s.order[2]]++;
    }
    rf__sampler_free(&s);
    int kinds = 0;
    for (int i = 0; i < 27; i++)
        if (orders[i]) {
            kinds++;
            assert_true(orders[i] > 850 && orders[i] < 1150);
        }
    assert_int_equal(kinds, 6);

    /* Consecutive epochs are not correlated: position 0's value in epoch e
     * and e+1 agree about 1/N of the time. */
    init_ok(&s, N, 1, 1, 0, 2024, 0, 1);
    int64_t last = -1, same = 0;
    for (int64_t e = 0; e < EPOCHS; e++) {
        rf__sampler_set_epoch(&s, e);
        same += s.order[0] == last;
        last = s.order[0];
    }
    rf__sampler_free(&s);
    assert_true(same > 310 && same < 490);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity_without_shuffle),
        cmocka_unit_test(test_shuffle_is_permutation),
        cmocka_unit_test(test_order_is_function_of_seed_and_epoch),
        cmocka_unit_test(test_distributed_split),
        cmocka_unit_test(test_distributed_known_values),
        cmocka_unit_test(test_batch_counts),
        cmocka_unit_test(test_batch_slices),
        cmocka_unit_test(test_trimmed_split),
        cmocka_unit_test(test_trimmed_known_values),
        cmocka_unit_test(test_trimmed_against_padded),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_permutation_statistics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
