/*
 * test_mix_loader.c - mixtures of sources end to end (rf_loader_create_mix
 * and the calls after it): an image folder, local tar shards and record
 * files made here, read through the whole pipeline.
 *
 * Checked: a folder and tar shards (with a label offset and shuffle
 * blocks on the shards) give the same batches, bytes, labels, samples and
 * sources, for 1 and 3 workers, and each source's count per epoch is its
 * share; rf_batch_sources and rf_loader_sample_source agree, labels carry
 * the offset; epoch 2 stopped at batch 3 on 4 ranks and resumed on 2 and on
 * 3 ranks (rf_loader_tell_rest, rf_loader_seek_rest) delivers every sample
 * as many times as an uninterrupted epoch does, each source its share;
 * stats count samples and bad samples per source (a truncated JPEG under
 * on_error = skip, replaced from its own source); record files mix, each
 * record read from its own file; the fingerprint changes with the shares;
 * and the refusals: records beside images, shuffle blocks on a folder, a
 * missing source named by its number, mixture calls on a loader of one
 * source or after start.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

enum { NSHARDS = 4, PER_SHARD = 6, FOLDER_N = 24, BATCH = 5 };

static char *g_dir;
static char g_folder[4200], g_shards[4200], g_bad[4200], g_rec[2][4200];

static void write_shards(void)
{
    for (int s = 0; s < NSHARDS; s++) {
        char path[4300], prefix[16];
        snprintf(path, sizeof path, "%s/t-%02d.tar", g_dir, s);
        snprintf(prefix, sizeof prefix, "k%02d", s);
        tu_shard_opts o = {prefix, PER_SHARD, 36, 30, (uint32_t)(s * 100 + 7), s, 4};
        assert_int_equal(tu_write_jpeg_shard(path, &o, NULL), 0);
    }
    snprintf(g_shards, sizeof g_shards, "%s/t-{00..%02d}.tar", g_dir, NSHARDS - 1);
}

/* Records: file f's record j is 8 bytes holding 1000 * f + j. */
static void write_records(void)
{
    for (int f = 0; f < 2; f++) {
        snprintf(g_rec[f], sizeof g_rec[f], "%s/r%d.bin", g_dir, f);
        uint64_t v[16];
        for (int j = 0; j < 16; j++)
            v[j] = (uint64_t)(1000 * f + j);
        assert_int_equal(tu_write_file(g_rec[f], v, sizeof v), 0);
    }
}

static int setup(void **state)
{
    (void)state;
    g_dir = tu_tempdir("mix");
    return g_dir ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tu_tempdir_remove(&g_dir);
    return 0;
}

static void make_data(void)
{
    if (g_folder[0])
        return;
    snprintf(g_folder, sizeof g_folder, "%s/folder", g_dir);
    assert_int_equal(tu_make_folder(g_folder, 3, FOLDER_N / 3, 40, 32, 5), 0);
    write_shards();
    write_records();
    /* a folder of 8 with one truncated picture */
    snprintf(g_bad, sizeof g_bad, "%s/bad", g_dir);
    assert_int_equal(tu_make_folder(g_bad, 2, 4, 40, 32, 9), 0);
    char victim[4400];
    snprintf(victim, sizeof victim, "%s/class01/img0002.jpg", g_bad);
    size_t len;
    uint8_t *jpg = tu_read_file(victim, &len);
    assert_non_null(jpg);
    assert_int_equal(tu_write_file(victim, jpg, len / 3), 0);
    free(jpg);
}

/* A mixture loader with the common options; not started. */
static rf_loader *mix_loader(int64_t epoch_size, int workers)
{
    rf_loader *l = rf_loader_create_mix(epoch_size);
    assert_non_null(l);
    const tu_param p[] = {{RF_P_BATCH_SIZE, BATCH},
                          {RF_P_IMAGE_SIZE, 16},
                          {RF_P_TRANSFORM, RF_TRANSFORM_CENTER},
                          {RF_P_SEED, 3},
                          {RF_P_NUM_WORKERS, workers},
                          {RF_P_PREFETCH, 3}};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        assert_int_equal(rf_loader_set_param(l, p[i].param, p[i].value), 0);
    return l;
}

/* Folder (proportion 0.5) and tar shards (0.5, labels + 100, blocks of 2
 * shards), epoch_size 120. */
static rf_loader *folder_and_tar(int workers, int rank, int world)
{
    rf_loader *l = mix_loader(120, workers);
    assert_int_equal(rf_loader_add_source(l, g_folder, RF_MIX_PROPORTION, 0.5), 0);
    assert_int_equal(rf_loader_add_source(l, g_shards, RF_MIX_PROPORTION, 0.5), 1);
    assert_int_equal(rf_loader_set_source_param(l, 1, RF_SP_LABEL_OFFSET, 100), 0);
    assert_int_equal(rf_loader_set_source_param(l, 1, RF_SP_SHUFFLE_BLOCK, 2), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_RANK, rank), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_WORLD_SIZE, world), 0);
    tu_start(l);
    return l;
}

/* Checks one batch's sources and labels against the loader's answers;
 * counts its samples into hits (may be NULL) and per_source. */
static void check_batch(rf_loader *l, rf_batch *b, int64_t *hits, int64_t *per_source)
{
    const int32_t *src = rf_batch_sources(b);
    const int64_t *smp = rf_batch_samples(b), *lab = rf_batch_labels(b);
    assert_non_null(src);
    for (int64_t i = 0; i < rf_batch_count(b); i++) {
        assert_int_equal(src[i], rf_loader_sample_source(l, smp[i]));
        assert_int_equal(lab[i], rf_loader_sample_label(l, smp[i]));
        if (src[i] == 1)
            assert_true(lab[i] >= 100 && lab[i] < 104); /* the shards' labels 0..3, offset */
        else
            assert_true(lab[i] >= 0 && lab[i] < 3);
        if (hits)
            hits[smp[i]]++;
        per_source[src[i]]++;
    }
}

/* Epochs 0 and 1 hashed batch by batch (data, labels, samples, sources). */
static void epochs_hash(int workers, uint64_t *out)
{
    rf_loader *l = folder_and_tar(workers, 0, 1);
    assert_int_equal(rf_loader_epoch_size(l), 120);
    int64_t n0, e0, n1, e1;
    assert_int_equal(rf_loader_source_counts(l, 0, &n0, &e0), 0);
    assert_int_equal(rf_loader_source_counts(l, 1, &n1, &e1), 0);
    assert_int_equal(n0, FOLDER_N);
    assert_int_equal(n1, NSHARDS * PER_SHARD);
    assert_int_equal(e0, 60);
    assert_int_equal(e1, 60);
    int k = 0;
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        assert_int_equal(rf_loader_set_epoch(l, epoch), 0);
        uint64_t h = TU_FNV_INIT;
        int64_t per[2] = {0, 0};
        rf_batch *b;
        int rc;
        while ((rc = rf_loader_next(l, &b)) == RF_OK) {
            check_batch(l, b, NULL, per);
            h = tu_batch_hash(h, b);
            h = tu_fnv1a(h, rf_batch_sources(b), (size_t)rf_batch_count(b) * sizeof(int32_t));
            assert_int_equal(rf_batch_release(b), 0);
        }
        assert_int_equal(rc, RF_END_OF_EPOCH);
        assert_int_equal(per[0], 60);
        assert_int_equal(per[1], 60);
        out[k++] = h;
    }
    char *js = tu_stats(l);
    const char *s1 = strstr(js, "\"source\": 1,");
    assert_non_null(s1);
    assert_int_equal(tu_stats_int(strstr(js, "\"source\": 0,"), "delivered"), 120);
    assert_int_equal(tu_stats_int(s1, "delivered"), 120);
    assert_int_equal(tu_stats_int(s1, "epoch_samples"), 60);
    assert_int_equal(tu_stats_int(s1, "shuffle_block"), 2);
    assert_int_equal(tu_stats_int(js, "epoch_size"), 120);
    free(js);
    rf_loader_destroy(l);
}

static void test_folder_and_tar_same_for_1_and_3_workers(void **state)
{
    (void)state;
    make_data();
    uint64_t one[2], three[2];
    epochs_hash(1, one);
    epochs_hash(3, three);
    assert_memory_equal(one, three, sizeof one);
    assert_true(one[0] != one[1]); /* epochs differ */
}

/* Every sample of epoch 2, counted: world 1 in one go; or `from` ranks
 * taking `k` batches each, then `to` ranks the rest. */
static void epoch2_counts(int from, int to, int64_t k, int64_t *hits, int64_t *per_source)
{
    int64_t consumed = -1;
    for (int r = 0; r < from; r++) {
        rf_loader *l = folder_and_tar(1, r, from);
        assert_int_equal(rf_loader_set_epoch(l, 2), 0);
        for (int64_t i = 0; i < (to ? k : INT64_MAX); i++) {
            rf_batch *b;
            int rc = rf_loader_next(l, &b);
            if (rc == RF_END_OF_EPOCH)
                break;
            assert_int_equal(rc, RF_OK);
            check_batch(l, b, hits, per_source);
            rf_batch_release(b);
        }
        int64_t start, c;
        assert_int_equal(rf_loader_tell_rest(l, &start, &c), 0);
        assert_true(consumed < 0 || consumed == c); /* lockstep */
        consumed = c;
        rf_loader_destroy(l);
    }
    for (int r = 0; r < to; r++) {
        rf_loader *l = folder_and_tar(1, r, to);
        assert_int_equal(rf_loader_seek_rest(l, 2, consumed, 0), 0);
        rf_batch *b;
        int rc;
        while ((rc = rf_loader_next(l, &b)) == RF_OK) {
            check_batch(l, b, hits, per_source);
            rf_batch_release(b);
        }
        assert_int_equal(rc, RF_END_OF_EPOCH);
        rf_loader_destroy(l);
    }
}

static void test_resume_4_ranks_on_2_and_3(void **state)
{
    (void)state;
    make_data();
    enum { N = FOLDER_N + NSHARDS * PER_SHARD };
    int64_t want[N] = {0}, per_want[2] = {0};
    epoch2_counts(1, 0, 0, want, per_want);
    assert_int_equal(per_want[0], 60);
    assert_int_equal(per_want[1], 60);
    /* each sample its share: 60 of 24 is 2 or 3 times, 12 of them 3 */
    for (int s = 0; s < 2; s++) {
        int64_t threes = 0;
        for (int i = 0; i < 24; i++) {
            int64_t h = want[s * 24 + i];
            assert_true(h == 2 || h == 3);
            threes += h == 3;
        }
        assert_int_equal(threes, 12);
    }
    /* 4 ranks x 3 batches of 5 leave 60 entries: 2 and 3 ranks split them
     * without padding */
    for (int to = 2; to <= 3; to++) {
        int64_t got[N] = {0}, per[2] = {0};
        epoch2_counts(4, to, 3, got, per);
        assert_memory_equal(got, want, sizeof got);
        assert_int_equal(per[0], 60);
        assert_int_equal(per[1], 60);
    }
}

static void test_errors_per_source(void **state)
{
    (void)state;
    make_data();
    rf_loader *l = mix_loader(0, 2);
    assert_int_equal(rf_loader_set_param(l, RF_P_ON_ERROR, RF_ON_ERROR_SKIP), 0);
    assert_int_equal(rf_loader_add_source(l, g_folder, RF_MIX_WHOLE, 0), 0);
    assert_int_equal(rf_loader_add_source(l, g_bad, RF_MIX_REPEAT, 1.0), 1);
    tu_start(l);
    int64_t per[2] = {0, 0}, nbad = 0;
    rf_batch *b;
    while (rf_loader_next(l, &b) == RF_OK) {
        const int32_t *src = rf_batch_sources(b);
        const int64_t *smp = rf_batch_samples(b);
        for (int64_t i = 0; i < rf_batch_count(b); i++) {
            per[src[i]]++;
            /* the substitute of the bad picture is of its own source */
            assert_int_equal(src[i], smp[i] >= FOLDER_N);
        }
        rf_batch_release(b);
    }
    char *js = tu_stats(l);
    nbad = tu_stats_int(js, "errors_count");
    assert_int_equal(nbad, 1);
    assert_int_equal(tu_stats_int(strstr(js, "\"source\": 0,"), "errors"), 0);
    assert_int_equal(tu_stats_int(strstr(js, "\"source\": 1,"), "errors"), 1);
    assert_int_equal(tu_stats_int(strstr(js, "\"source\": 1,"), "delivered"), 8);
    assert_int_equal(per[0], FOLDER_N);
    assert_int_equal(per[1], 8);
    free(js);
    rf_loader_destroy(l);
}

static void test_records_mix(void **state)
{
    (void)state;
    make_data();
    rf_loader *l = rf_loader_create_mix(0);
    assert_non_null(l);
    assert_int_equal(rf_loader_set_param(l, RF_P_RECORD_SIZE, 8), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_TRANSFORM, RF_TRANSFORM_NONE), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_BATCH_SIZE, 4), 0);
    assert_int_equal(rf_loader_add_source(l, g_rec[0], RF_MIX_CHOOSE, 10), 0);
    assert_int_equal(rf_loader_add_source(l, g_rec[1], RF_MIX_REPEAT, 1.5), 1);
    tu_start(l);
    assert_int_equal(rf_loader_epoch_size(l), 34);
    int64_t per[2] = {0, 0};
    rf_batch *b;
    while (rf_loader_next(l, &b) == RF_OK) {
        const uint64_t *v = rf_batch_data(b);
        const int32_t *src = rf_batch_sources(b);
        const int64_t *smp = rf_batch_samples(b);
        for (int64_t i = 0; i < rf_batch_count(b); i++) {
            /* global sample g is record g % 16 of file g / 16 */
            assert_int_equal(v[i], 1000 * (uint64_t)(smp[i] / 16) + (uint64_t)(smp[i] % 16));
            assert_int_equal(src[i], smp[i] / 16);
            per[src[i]]++;
        }
        rf_batch_release(b);
    }
    assert_int_equal(per[0], 10);
    assert_int_equal(per[1], 24);
    rf_loader_destroy(l);
}

static uint64_t fingerprint_of(double a, double b)
{
    rf_loader *l = mix_loader(0, 1);
    rf_loader_add_source(l, g_folder, RF_MIX_REPEAT, a);
    rf_loader_add_source(l, g_shards, RF_MIX_REPEAT, b);
    tu_start(l);
    uint64_t f = rf_loader_fingerprint(l);
    rf_loader_destroy(l);
    return f;
}

static void test_fingerprint_covers_the_shares(void **state)
{
    (void)state;
    make_data();
    uint64_t a = fingerprint_of(1, 2), b = fingerprint_of(1, 2), c = fingerprint_of(2, 1);
    assert_true(a == b);
    assert_true(a != c);
}

/* rf_loader_start fails with rc, its message holding `words`. */
static void start_fails(rf_loader *l, int rc, const char *words)
{
    assert_int_equal(rf_loader_start(l), rc);
    const char *m = rf_loader_errmsg(l);
    printf("refused: %s\n", m);
    if (!strstr(m, words))
        fail_msg("message '%s' lacks '%s'", m, words);
    rf_loader_destroy(l);
}

static void test_refusals(void **state)
{
    (void)state;
    make_data();
    rf_loader *l = mix_loader(0, 1);
    assert_int_equal(rf_loader_set_param(l, RF_P_RECORD_SIZE, 8), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_TRANSFORM, RF_TRANSFORM_NONE), 0);
    rf_loader_add_source(l, g_rec[0], RF_MIX_WHOLE, 0);
    rf_loader_add_source(l, g_folder, RF_MIX_WHOLE, 0);
    start_fails(l, RF_E_SOURCE, "records and images");

    l = mix_loader(0, 1);
    rf_loader_add_source(l, g_shards, RF_MIX_WHOLE, 0);
    rf_loader_add_source(l, g_folder, RF_MIX_WHOLE, 0);
    rf_loader_set_source_param(l, 1, RF_SP_SHUFFLE_BLOCK, 2);
    start_fails(l, RF_E_INVALID, "source 1");

    char missing[4300];
    snprintf(missing, sizeof missing, "%s/nothing-here", g_dir);
    l = mix_loader(0, 1);
    rf_loader_add_source(l, g_folder, RF_MIX_PROPORTION, 1);
    rf_loader_add_source(l, missing, RF_MIX_PROPORTION, 1);
    start_fails(l, RF_E_SOURCE, "mixture: source 1");

    l = mix_loader(0, 1);
    rf_loader_add_source(l, g_folder, RF_MIX_PROPORTION, 1);
    rf_loader_add_source(l, g_shards, RF_MIX_CHOOSE, 3);
    start_fails(l, RF_E_INVALID, "cannot be mixed");

    l = mix_loader(0, 1);
    start_fails(l, RF_E_INVALID, "no sources");

    /* a loader of one source takes no sources; a started mixture no more */
    l = rf_loader_create(g_folder);
    assert_int_equal(rf_loader_add_source(l, g_shards, RF_MIX_WHOLE, 0), RF_E_INVALID);
    assert_non_null(strstr(rf_loader_errmsg(l), "rf_loader_create_mix"));
    assert_int_equal(rf_loader_num_sources(l), 1);
    tu_start(l);
    assert_int_equal(rf_loader_sample_source(l, 3), 0);
    assert_int_equal(rf_loader_epoch_size(l), FOLDER_N);
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    assert_null(rf_batch_sources(b));
    rf_batch_release(b);
    rf_loader_destroy(l);
    l = mix_loader(0, 1);
    assert_int_equal(rf_loader_add_source(l, g_folder, 9, 1), RF_E_INVALID);
    assert_int_equal(rf_loader_add_source(l, g_folder, RF_MIX_REPEAT, -2), RF_E_INVALID);
    assert_int_equal(rf_loader_add_source(l, "", RF_MIX_WHOLE, 0), RF_E_INVALID);
    assert_int_equal(rf_loader_add_source(l, g_folder, RF_MIX_WHOLE, 0), 0);
    assert_int_equal(rf_loader_set_source_param(l, 1, RF_SP_LABEL_OFFSET, 1), RF_E_INVALID);
    assert_int_equal(rf_loader_set_source_param(l, 0, RF_SP_LABEL_OFFSET, -1), RF_E_INVALID);
    assert_int_equal(rf_loader_set_source_param(l, 0, 77, 1), RF_E_INVALID);
    tu_start(l);
    assert_int_equal(rf_loader_add_source(l, g_folder, RF_MIX_WHOLE, 0), RF_E_STATE);
    assert_int_equal(rf_loader_set_source_param(l, 0, RF_SP_LABEL_OFFSET, 1), RF_E_STATE);
    assert_int_equal(rf_loader_sample_source(l, FOLDER_N), -1);
    rf_loader_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_folder_and_tar_same_for_1_and_3_workers),
        cmocka_unit_test(test_resume_4_ranks_on_2_and_3),
        cmocka_unit_test(test_errors_per_source),
        cmocka_unit_test(test_records_mix),
        cmocka_unit_test(test_fingerprint_covers_the_shares),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
