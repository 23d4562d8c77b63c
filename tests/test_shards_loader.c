/*
 * test_shards_loader.c - tar shards through the loader. The main promise: a
 * tar copy of an image folder gives byte-identical batches (images, labels)
 * to the folder itself; a bad member is an error naming shard and member;
 * DistributedSampler's split over shards; an exact resume over tar shards
 * and record files.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "shardset.h"
#include "source.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testutil.h"

/* ------------------------------------------------------------ loader */

#define CLASSES 3
#define PER_CLASS 10
#define N (CLASSES * PER_CLASS)

static char *g_folder;        /* image folder made by tu_make_folder */
static char *g_shard_pattern; /* the same images as 4 tar shards */

/* Copies the image folder into 4 shards, in order, 8 samples per shard, keys
 * "class%02d/img%04d" (members key.jpg and key.cls), as a WebDataset writer
 * would. */
static void make_tar_copy(void)
{
    char *dir = tu_tmp_path("folder-shards");
    assert_int_equal(tu_mkdir_p(dir), 0);
    tu_folder_opts f = {CLASSES, PER_CLASS, 120, 90, 90, 5, TU_MIX_CYCLE};
    tw t = {0};
    int shard = -1;
    for (int i = 0; i < N; i++) {
        if (i / 8 != shard) {
            if (shard >= 0)
                assert_int_equal(tw_close(&t), 0);
            shard = i / 8;
            char *p = tu_tmp_path("folder-shards/part-%02d.tar", shard);
            assert_int_equal(tw_open(&t, p, shard % 3), 0);
            free(p);
        }
        char path[4096];
        assert_int_equal(tu_folder_path(path, sizeof path, g_folder, &f, i), 0);
        size_t len;
        uint8_t *jpg = tu_read_file(path, &len);
        assert_non_null(jpg);
        const char *rel = path + strlen(g_folder) + 1;
        char key[512], member[600], cls[16];
        snprintf(key, sizeof key, "%.*s", (int)(strrchr(rel, '.') - rel), rel);
        snprintf(member, sizeof member, "%s.jpg", key);
        assert_int_equal(tw_file(&t, member, jpg, len), 0);
        snprintf(member, sizeof member, "%s.cls", key);
        snprintf(cls, sizeof cls, "%d", i / PER_CLASS);
        assert_int_equal(tw_file(&t, member, cls, strlen(cls)), 0);
        free(jpg);
    }
    assert_int_equal(tw_close(&t), 0);
    assert_true(asprintf(&g_shard_pattern, "%s/part-{00..03}.tar", dir) > 0);
    free(dir);
}

static rf_loader *make(const char *src, int workers, int batch, int transform)
{
    return TU_LOADER(src, {RF_P_BATCH_SIZE, batch}, {RF_P_IMAGE_SIZE, 40},
                     {RF_P_NUM_WORKERS, workers}, {RF_P_TRANSFORM, transform}, {RF_P_FLIP, 1},
                     {RF_P_SEED, 77});
}

static void test_tar_copy_matches_folder(void **state)
{
    (void)state;
    const int transforms[] = {RF_TRANSFORM_CENTER, RF_TRANSFORM_RANDOM_RESIZED_CROP};
    for (int ti = 0; ti < 2; ti++) {
        rf_loader *ref = make(g_folder, 2, 7, transforms[ti]);
        tu_start(ref);
        uint64_t want[16], got[16];
        int64_t nb = ss_batch_hashes(ref, 1, 0, want, 16);
        assert_int_equal(nb, (N + 6) / 7);
        for (int backend = RF_IO_URING; backend <= RF_IO_PREAD; backend++) {
            rf_loader *l = make(g_shard_pattern, 3, 7, transforms[ti]);
            assert_int_equal(rf_loader_set_param(l, RF_P_IO_BACKEND, backend), 0);
            tu_start(l);
            assert_int_equal(rf_loader_num_samples(l), N);
            for (int64_t i = 0; i < N; i++)
                assert_int_equal(rf_loader_sample_label(l, i), rf_loader_sample_label(ref, i));
            assert_int_equal(ss_batch_hashes(l, 1, 0, got, 16), nb);
            for (int64_t k = 0; k < nb; k++)
                if (got[k] != want[k])
                    fail_msg("transform %d backend %d: batch %lld differs from the folder's",
                             transforms[ti], backend, (long long)k);
            char stats[8192];
            rf_loader_stats_json(l, stats, sizeof stats);
            assert_non_null(strstr(stats, "\"index_bytes\""));
            rf_loader_destroy(l);
        }
        rf_loader_destroy(ref);
    }
}

/* A valid tar with a corrupt JPEG: the error names shard.tar:key.jpg. */
static void test_tar_bad_member_named(void **state)
{
    (void)state;
    char *p = tu_tmp_path("badjpeg.tar");
    tu_jpeg_opts o = {64, 48, 90, TU_420, 0, 0, 0, 5, 0, 0};
    uint8_t *jpg;
    size_t len;
    assert_int_equal(tu_make_jpeg(&o, &jpg, &len), 0);
    tw t;
    assert_int_equal(tw_open(&t, p, TW_USTAR), 0);
    for (int k = 0; k < 4; k++) {
        char m[64];
        snprintf(m, sizeof m, "s%d.jpg", k);
        assert_int_equal(tw_file(&t, m, jpg, k == 2 ? len / 2 : len), 0); /* s2 truncated */
        snprintf(m, sizeof m, "s%d.cls", k);
        assert_int_equal(tw_file(&t, m, "1", 1), 0);
    }
    assert_int_equal(tw_close(&t), 0);
    free(jpg);
    rf_loader *l = make(p, 2, 4, RF_TRANSFORM_CENTER);
    assert_int_equal(rf_loader_set_param(l, RF_P_SHUFFLE, 0), 0);
    tu_start(l);
    tu_next_fails(l, RF_E_DECODE, "%s:s2.jpg", p);
    rf_loader_destroy(l);

    /* on_error = skip: recorded in the stats with the same name */
    l = make(p, 2, 4, RF_TRANSFORM_CENTER);
    assert_int_equal(rf_loader_set_param(l, RF_P_ON_ERROR, RF_ON_ERROR_SKIP), 0);
    tu_start(l);
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    rf_batch_release(b);
    char stats[16384];
    rf_loader_stats_json(l, stats, sizeof stats);
    if (!strstr(stats, "s2.jpg"))
        fail_msg("stats lack the bad member: %s", stats);
    rf_loader_destroy(l);
    free(p);
}

/* DistributedSampler's split over a tar source: for world sizes 1, 2, 3, 8
 * the ranks' samples are disjoint but for the padding, cover the dataset,
 * and the batch counts are DistributedSampler's. */
static void test_distributed_tar(void **state)
{
    (void)state;
    const int sizes[] = {1, 2, 3, 8};
    const int64_t bs = 4;
    int64_t perm[N]; /* the global order of world_size 1 */
    for (int si = 0; si < 4; si++) {
        int ws = sizes[si];
        int64_t per_rank = (N + ws - 1) / ws;
        int64_t *padded = calloc((size_t)(per_rank * ws), sizeof *padded);
        assert_non_null(padded);
        for (int r = 0; r < ws; r++) {
            for (int drop = 0; drop <= 1; drop++) {
                rf_loader *l = make(g_shard_pattern, 2, (int)bs, RF_TRANSFORM_CENTER);
                assert_int_equal(rf_loader_set_param(l, RF_P_RANK, r), 0);
                assert_int_equal(rf_loader_set_param(l, RF_P_WORLD_SIZE, ws), 0);
                assert_int_equal(rf_loader_set_param(l, RF_P_DROP_LAST, drop), 0);
                assert_int_equal(rf_loader_set_param(l, RF_P_IMAGE_SIZE, 16), 0);
                tu_start(l);
                int64_t want_nb = drop ? per_rank / bs : (per_rank + bs - 1) / bs;
                assert_int_equal(rf_loader_num_batches(l), want_nb);
                if (drop) {
                    rf_loader_destroy(l);
                    continue;
                }
                assert_int_equal(rf_loader_set_epoch(l, 3), 0);
                rf_batch *b;
                int64_t k = 0;
                while (rf_loader_next(l, &b) == RF_OK) {
                    for (int64_t i = 0; i < rf_batch_count(b); i++, k++) {
                        assert_true(k < per_rank);
                        padded[k * ws + r] = rf_batch_samples(b)[i];
                        assert_int_equal(rf_batch_labels(b)[i],
                                         rf_loader_sample_label(l, rf_batch_samples(b)[i]));
                    }
                    rf_batch_release(b);
                }
                assert_int_equal(k, per_rank);
                rf_loader_destroy(l);
            }
        }
        /* The first N entries of the padded global order are a permutation;
         * the padding repeats its head, as DistributedSampler wraps. */
        int seen[N] = {0};
        for (int64_t i = 0; i < N; i++) {
            assert_true(padded[i] >= 0 && padded[i] < N);
            seen[padded[i]]++;
        }
        for (int i = 0; i < N; i++)
            assert_int_equal(seen[i], 1);
        for (int64_t i = N; i < per_rank * ws; i++)
            assert_int_equal(padded[i], padded[i - N]);
        /* Every rank draws the same global permutation (no per-rank seed):
         * interleaved, the ranks' orders give world_size 1's order. */
        if (ws == 1)
            memcpy(perm, padded, sizeof perm);
        assert_memory_equal(padded, perm, sizeof perm);
        free(padded);
    }
}

/* Exact resume on shards and records: stop after k batches, seek a fresh
 * loader with another worker count, the rest is byte-identical. */
static void test_resume_tar_and_records(void **state)
{
    (void)state;
    uint64_t want[16], got[16];
    rf_loader *a = make(g_shard_pattern, 1, 4, RF_TRANSFORM_RANDOM_RESIZED_CROP);
    tu_start(a);
    int64_t nb = ss_batch_hashes(a, 2, 0, want, 16);
    rf_loader_destroy(a);
    for (int64_t k = 1; k < nb; k += 3) {
        rf_loader *b = make(g_shard_pattern, 4, 4, RF_TRANSFORM_RANDOM_RESIZED_CROP);
        tu_start(b);
        assert_int_equal(ss_batch_hashes(b, 2, k, got, 16), nb - k);
        assert_memory_equal(got, want + k, (size_t)(nb - k) * sizeof *got);
        int64_t e, bi;
        assert_int_equal(rf_loader_tell(b, &e, &bi), 0);
        assert_int_equal(e, 2);
        assert_int_equal(bi, nb);
        rf_loader_destroy(b);
    }
    char *r = tu_tmp_path("resume.bin");
    ss_write_records(r, 0, 32, 50, 3, 9);
    a = ss_records_loader(r, 32, 0, RF_DTYPE_INT32, 1, 6);
    tu_start(a);
    nb = ss_batch_hashes(a, 4, 0, want, 16);
    rf_loader_destroy(a);
    rf_loader *b = ss_records_loader(r, 32, 0, RF_DTYPE_INT32, 3, 6);
    tu_start(b);
    assert_int_equal(ss_batch_hashes(b, 4, 5, got, 16), nb - 5);
    assert_memory_equal(got, want + 5, (size_t)(nb - 5) * sizeof *got);
    rf_loader_destroy(b);
    free(r);
}

/* ------------------------------------------------------------------- main */

static int setup(void **state)
{
    if (tu_tmp_setup(state) != 0)
        return -1;
    g_folder = tu_tmp_path("folder");
    if (tu_make_folder(g_folder, CLASSES, PER_CLASS, 120, 90, 5) != 0)
        return -1;
    make_tar_copy();
    return 0;
}

static int teardown(void **state)
{
    free(g_folder);
    free(g_shard_pattern);
    return tu_tmp_teardown(state);
}

int main(void)
{
    alarm(240); /* a hang fails the run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tar_copy_matches_folder),
        cmocka_unit_test(test_tar_bad_member_named),
        cmocka_unit_test(test_distributed_tar),
        cmocka_unit_test(test_resume_tar_and_records),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
