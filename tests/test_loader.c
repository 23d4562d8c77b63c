/*
 * test_loader.c - the loader end to end on generated image folders: every
 * sample once per epoch with its label, byte-identical output for any worker
 * count, io backend and prefetch depth, exact seek/resume, errors carrying
 * the path, on_error=skip, and the lifecycle (next_wait's RF_AGAIN, lending
 * every slot, many loaders created and destroyed; stopping a waiting
 * consumer is in test_lifecycle.c).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

#define CLASSES 3
#define PER_CLASS 14
#define N (CLASSES * PER_CLASS)

static char *root;

static int setup(void **state)
{
    (void)state;
    root = tu_tempdir("loader");
    return root && tu_make_folder(root, CLASSES, PER_CLASS, 120, 90, 5) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    free(root);
    return 0;
}

static rf_loader *make(const char *src, int workers, int batch, int transform)
{
    return TU_LOADER(src, {RF_P_BATCH_SIZE, batch}, {RF_P_IMAGE_SIZE, 48},
                     {RF_P_NUM_WORKERS, workers}, {RF_P_TRANSFORM, transform}, {RF_P_FLIP, 1},
                     {RF_P_SEED, 1234});
}

static void test_every_sample_once_with_label(void **state)
{
    (void)state;
    rf_loader *l = make(root, 2, 8, RF_TRANSFORM_CENTER);
    tu_start(l);
    assert_int_equal(rf_loader_num_samples(l), N);
    assert_int_equal(rf_loader_num_batches(l), (N + 7) / 8);
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        int seen[N] = {0};
        int64_t count = 0, batches = 0;
        assert_int_equal(rf_loader_set_epoch(l, epoch), 0);
        rf_batch *b;
        while (rf_loader_next(l, &b) == RF_OK) {
            assert_int_equal(rf_batch_index(b), batches);
            assert_int_equal(rf_batch_epoch(b), epoch);
            for (int64_t i = 0; i < rf_batch_count(b); i++) {
                int64_t s = rf_batch_samples(b)[i];
                assert_true(s >= 0 && s < N);
                seen[s]++;
                /* Folder order: class%02d/img%04d: label = the class folder's rank. */
                const char *path = rf_loader_sample_path(l, s);
                char cls[16];
                snprintf(cls, sizeof cls, "class%02d/", (int)rf_batch_labels(b)[i]);
                if (!strstr(path, cls))
                    fail_msg("sample %lld %s has label %lld", (long long)s, path,
                             (long long)rf_batch_labels(b)[i]);
            }
            count += rf_batch_count(b);
            batches++;
            rf_batch_release(b);
        }
        assert_int_equal(count, N);
        for (int i = 0; i < N; i++)
            assert_int_equal(seen[i], 1);
    }
    char stats[65536];
    int64_t len = rf_loader_stats_json(l, stats, sizeof stats);
    assert_true(len > 0 && len < (int64_t)sizeof stats);
    assert_non_null(strstr(stats, "\"images\": 84"));
    assert_non_null(strstr(stats, "\"io_backend\""));
    rf_loader_destroy(l);
}

static void test_deterministic_any_workers_backend_prefetch(void **state)
{
    (void)state;
    const int transforms[] = {RF_TRANSFORM_CENTER, RF_TRANSFORM_RANDOM_RESIZED_CROP};
    for (int t = 0; t < 2; t++) {
        uint64_t ref0 = 0, ref1 = 0;
        const int workers[] = {1, 2, 4};
        for (int wi = 0; wi < 3; wi++)
            for (int pread = 0; pread <= 1; pread++) {
                rf_loader *l = make(root, workers[wi], 5, transforms[t]);
                rf_loader_set_param(l, RF_P_IO_BACKEND, pread ? RF_IO_PREAD : RF_IO_AUTO);
                rf_loader_set_param(l, RF_P_PREFETCH, 2 + wi);
                tu_start(l);
                uint64_t h0 = tu_epoch_hash(l, 0, 0), h1 = tu_epoch_hash(l, 1, 0);
                if (wi == 0 && pread == 0) {
                    ref0 = h0;
                    ref1 = h1;
                    assert_int_not_equal(h0, h1); /* epochs differ */
                } else {
                    assert_int_equal(h0, ref0);
                    assert_int_equal(h1, ref1);
                }
                rf_loader_destroy(l);
            }
    }
}

static void test_seek_resume_identical(void **state)
{
    (void)state;
    rf_loader *a = make(root, 1, 4, RF_TRANSFORM_RANDOM_RESIZED_CROP);
    tu_start(a);
    uint64_t tail = tu_epoch_hash(a, 3, 5);
    rf_loader_destroy(a);
    /* Resume in another loader with another worker count, after breaking out
     * of an epoch mid-way. */
    rf_loader *b = make(root, 3, 4, RF_TRANSFORM_RANDOM_RESIZED_CROP);
    tu_start(b);
    rf_batch *x;
    assert_int_equal(rf_loader_set_epoch(b, 1), 0);
    assert_int_equal(rf_loader_next(b, &x), RF_OK);
    rf_batch_release(x);
    assert_int_equal(rf_loader_next(b, &x), RF_OK);
    rf_batch_release(x);
    int64_t e, k;
    assert_int_equal(rf_loader_tell(b, &e, &k), 0);
    assert_int_equal(e, 1);
    assert_int_equal(k, 2);
    assert_int_equal(tu_epoch_hash(b, 3, 5), tail);
    rf_loader_destroy(b);
}

static void test_list_source_matches_folder(void **state)
{
    (void)state;
    /* A list of the folder's samples, relative to the list's own folder. */
    char list[4096];
    snprintf(list, sizeof list, "%s/train.txt", root);
    rf_loader *a = make(root, 2, 6, RF_TRANSFORM_CENTER);
    tu_start(a);
    FILE *f = fopen(list, "w");
    assert_non_null(f);
    fprintf(f, "# comment line\n\n");
    for (int64_t s = 0; s < rf_loader_num_samples(a); s++)
        fprintf(f, "%s\t%lld\n", rf_loader_sample_path(a, s) + strlen(root) + 1,
                (long long)rf_loader_sample_label(a, s));
    fclose(f);
    rf_loader *b = make(list, 2, 6, RF_TRANSFORM_CENTER);
    tu_start(b);
    assert_int_equal(rf_loader_num_samples(a), rf_loader_num_samples(b));
    assert_int_equal(tu_epoch_hash(a, 0, 0), tu_epoch_hash(b, 0, 0));
    rf_loader_destroy(a);
    rf_loader_destroy(b);
    unlink(list);
}

static void test_nchw_is_transposed_nhwc(void **state)
{
    (void)state;
    rf_loader *a = make(root, 2, 7, RF_TRANSFORM_RANDOM_RESIZED_CROP);
    rf_loader *b = make(root, 2, 7, RF_TRANSFORM_RANDOM_RESIZED_CROP);
    rf_loader_set_param(b, RF_P_LAYOUT, RF_LAYOUT_NCHW);
    tu_start(a);
    tu_start(b);
    rf_batch *x, *y;
    assert_int_equal(rf_loader_next(a, &x), RF_OK);
    assert_int_equal(rf_loader_next(b, &y), RF_OK);
    const uint8_t *p = rf_batch_data(x), *q = rf_batch_data(y);
    const int S = 48;
    for (int64_t i = 0; i < rf_batch_count(x); i++)
        for (int c = 0; c < 3; c++)
            for (int yy = 0; yy < S; yy++)
                for (int xx = 0; xx < S; xx++)
                    assert_int_equal(p[((i * S + yy) * S + xx) * 3 + c],
                                     q[((i * 3 + c) * S + yy) * S + xx]);
    rf_batch_release(x);
    rf_batch_release(y);
    rf_loader_destroy(a);
    rf_loader_destroy(b);
}

static void test_bad_file_raise_then_continue(void **state)
{
    (void)state;
    char *dir = tu_tempdir("bad");
    assert_int_equal(tu_make_folder(dir, 2, 6, 80, 60, 9), 0);
    /* Truncate one file and make another empty. */
    rf_loader *probe = make(dir, 1, 4, RF_TRANSFORM_CENTER);
    tu_start(probe);
    char bad1[4096], bad2[4096];
    snprintf(bad1, sizeof bad1, "%s", rf_loader_sample_path(probe, 3));
    snprintf(bad2, sizeof bad2, "%s", rf_loader_sample_path(probe, 8));
    rf_loader_destroy(probe);
    size_t len;
    uint8_t *data = tu_read_file(bad1, &len);
    assert_int_equal(tu_write_file(bad1, data, len / 2), 0);
    free(data);
    assert_int_equal(tu_write_file(bad2, "", 0), 0);

    rf_loader *l = make(dir, 2, 4, RF_TRANSFORM_CENTER);
    rf_loader_set_param(l, RF_P_SHUFFLE, 0);
    tu_start(l);
    rf_batch *b;
    int errors = 0, ok = 0, rc;
    while ((rc = rf_loader_next(l, &b)) != RF_END_OF_EPOCH) {
        if (rc == RF_OK) {
            ok++;
            rf_batch_release(b);
            continue;
        }
        errors++;
        assert_true(rc == RF_E_DECODE);
        const char *msg = rf_loader_errmsg(l);
        if (!strstr(msg, bad1) && !strstr(msg, bad2))
            fail_msg("error does not name the bad file: %s", msg);
    }
    assert_int_equal(errors, 2); /* samples 3 and 8 are in batches 0 and 2 */
    assert_int_equal(ok, 1);
    /* The loader stays usable: next epoch starts again. */
    assert_int_equal(rf_loader_set_epoch(l, 1), 0);
    assert_int_not_equal(rf_loader_next(l, &b), RF_END_OF_EPOCH);
    rf_loader_destroy(l);

    /* on_error = skip: full batches, errors recorded, deterministic. */
    uint64_t h[2];
    for (int w = 0; w < 2; w++) {
        l = make(dir, w + 1, 4, RF_TRANSFORM_CENTER);
        rf_loader_set_param(l, RF_P_ON_ERROR, RF_ON_ERROR_SKIP);
        tu_start(l);
        h[w] = tu_epoch_hash(l, 0, 0);
        char stats[65536];
        rf_loader_stats_json(l, stats, sizeof stats);
        if (!strstr(stats, "\"errors_count\": 2"))
            fail_msg("%s", stats);
        assert_non_null(strstr(stats, "empty file"));
        rf_loader_destroy(l);
    }
    assert_int_equal(h[0], h[1]);
    /* max_errors caps skipping. */
    l = make(dir, 1, 4, RF_TRANSFORM_CENTER);
    rf_loader_set_param(l, RF_P_ON_ERROR, RF_ON_ERROR_SKIP);
    rf_loader_set_param(l, RF_P_MAX_ERRORS, 1);
    rf_loader_set_param(l, RF_P_SHUFFLE, 0);
    tu_start(l);
    int failed = 0;
    while ((rc = rf_loader_next(l, &b)) != RF_END_OF_EPOCH) {
        if (rc == RF_OK)
            rf_batch_release(b);
        else
            failed++;
    }
    assert_int_equal(failed, 1);
    rf_loader_destroy(l);
    tu_rmtree(dir);
    free(dir);
}

static void test_missing_file_names_path(void **state)
{
    (void)state;
    char *dir = tu_tempdir("missing");
    char list[4096];
    snprintf(list, sizeof list, "%s/list.txt", dir);
    FILE *f = fopen(list, "w");
    fprintf(f, "nope/does-not-exist.jpg\t0\n");
    fclose(f);
    rf_loader *l = make(list, 1, 1, RF_TRANSFORM_CENTER);
    tu_start(l);
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_E_IO);
    const char *msg = rf_loader_errmsg(l);
    assert_non_null(strstr(msg, "does-not-exist.jpg"));
    assert_non_null(strstr(msg, "ENOENT"));
    rf_loader_destroy(l);
    tu_rmtree(dir);
    free(dir);
}

static void test_lend_all_slots_is_an_error(void **state)
{
    (void)state;
    rf_loader *l = make(root, 2, 2, RF_TRANSFORM_CENTER);
    rf_loader_set_param(l, RF_P_PREFETCH, 2);
    tu_start(l);
    rf_batch *a, *b, *c;
    assert_int_equal(rf_loader_next(l, &a), RF_OK);
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    assert_int_equal(rf_loader_next(l, &c), RF_E_RING_FULL);
    assert_non_null(strstr(rf_loader_errmsg(l), "lent"));
    rf_batch_release(a);
    assert_int_equal(rf_loader_next(l, &c), RF_OK);
    rf_batch_release(b);
    rf_batch_release(c);
    rf_batch_release(c); /* a second release is ignored */
    rf_loader_destroy(l);
}

/* rf_loader_next_wait gives RF_AGAIN while the batch is not ready, without
 * moving the position, then the batch itself. Right after a seek, batch 0
 * (40 pictures, one worker) is still being made; a machine too loaded to
 * call next_wait before it is ready gets another epoch, up to 50. */
static void test_next_wait_again_keeps_position(void **state)
{
    (void)state;
    rf_loader *l = make(root, 1, 40, RF_TRANSFORM_RANDOM_RESIZED_CROP);
    tu_start(l);
    int again = 0;
    for (int64_t epoch = 1; epoch <= 50 && !again; epoch++) {
        assert_int_equal(rf_loader_seek(l, epoch, 0), 0);
        rf_batch *b;
        int rc;
        while ((rc = rf_loader_next_wait(l, &b, 0)) == RF_AGAIN) {
            again++;
            int64_t e, k;
            assert_int_equal(rf_loader_tell(l, &e, &k), 0);
            assert_int_equal(e, epoch);
            assert_int_equal(k, 0);
        }
        assert_int_equal(rc, RF_OK);
        assert_int_equal(rf_batch_epoch(b), epoch);
        assert_int_equal(rf_batch_index(b), 0);
        rf_batch_release(b);
    }
    if (!again)
        fail_msg("rf_loader_next_wait(timeout 0) never returned RF_AGAIN right after a seek");
    /* A timeout long enough gives the next batch. */
    rf_batch *b;
    assert_int_equal(rf_loader_next_wait(l, &b, 60000), RF_OK);
    assert_int_equal(rf_batch_index(b), 1);
    rf_batch_release(b);
    rf_loader_destroy(l);
}

static void test_200_loaders_destroyed_busy(void **state)
{
    (void)state;
    for (int i = 0; i < 200; i++) {
        rf_loader *l = make(root, 1 + i % 3, 4, RF_TRANSFORM_CENTER);
        tu_start(l);
        if (i % 2) {
            rf_batch *b;
            assert_int_equal(rf_loader_next(l, &b), RF_OK);
            /* destroy with the batch lent and reads in flight */
        }
        rf_loader_destroy(l);
    }
    rf_loader_destroy(NULL);
}

static void test_bad_options_and_sources_rejected(void **state)
{
    (void)state;
    int64_t lo, hi, v;
    assert_int_equal(rf_param_bounds(RF_P_BATCH_SIZE, &lo, &hi), 0);
    assert_true(lo == 1 && hi > 1000);
    assert_int_equal(rf_param_bounds(9999, &lo, &hi), RF_E_INVALID);
    rf_loader *l = rf_loader_create(root);
    assert_int_equal(rf_loader_set_param(l, RF_P_BATCH_SIZE, 0), RF_E_INVALID);
    assert_int_equal(rf_loader_set_param(l, 9999, 1), RF_E_INVALID);
    assert_int_equal(rf_loader_get_param(l, RF_P_IMAGE_SIZE, &v), 0);
    assert_int_equal(v, 224);
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_E_NOT_STARTED);
    rf_loader_set_param(l, RF_P_RANK, 2);
    rf_loader_set_param(l, RF_P_WORLD_SIZE, 2);
    assert_int_equal(rf_loader_start(l), RF_E_INVALID);
    rf_loader_destroy(l);
    l = rf_loader_create("/nonexistent/folder");
    assert_int_equal(rf_loader_start(l), RF_E_SOURCE);
    assert_non_null(strstr(rf_loader_errmsg(l), "/nonexistent/folder"));
    rf_loader_destroy(l);
    assert_null(rf_loader_create(NULL));
    assert_string_equal(rf_strerror(RF_E_DECODE), "decode error");
    assert_int_equal(rf_version(), RF_VERSION_NUMBER);
}

/* A start that fails part-way (here: a ring far too large to allocate) can
 * be retried on the same loader once the options are fixed. */
static void test_failed_start_can_be_retried(void **state)
{
    (void)state;
    rf_loader *l = make(root, 2, 1 << 20, RF_TRANSFORM_CENTER);
    assert_int_equal(rf_loader_set_param(l, RF_P_IMAGE_SIZE, 16384), 0);
    assert_int_equal(rf_loader_start(l), RF_E_NOMEM);
    assert_non_null(strstr(rf_loader_errmsg(l), "ring"));
    assert_int_equal(rf_loader_set_param(l, RF_P_IMAGE_SIZE, 48), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_BATCH_SIZE, 4), 0);
    tu_start(l);
    rf_loader *ref = make(root, 2, 4, RF_TRANSFORM_CENTER);
    tu_start(ref);
    assert_int_equal(tu_epoch_hash(l, 0, 0), tu_epoch_hash(ref, 0, 0));
    rf_loader_destroy(ref);
    rf_loader_destroy(l);
}

/* A forked child that touches its parent's loader gets an error and can
 * destroy it without hanging; the parent's loader goes on untouched. */
static void test_forked_child_gets_error(void **state)
{
    (void)state;
    rf_loader *l = make(root, 2, 4, RF_TRANSFORM_CENTER);
    tu_start(l);
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_OK); /* threads busy prefetching */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(10); /* a hang fails the test instead of blocking it */
        rf_batch *c;
        int rc = rf_loader_next(l, &c);
        int ok = rc == RF_E_FORKED && strstr(rf_loader_errmsg(l), "forked") != NULL;
        rf_loader_destroy(l);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    rf_batch_release(b);
    int n = 1, rc;
    while ((rc = rf_loader_next(l, &b)) == RF_OK) {
        n++;
        rf_batch_release(b);
    }
    assert_int_equal(rc, RF_END_OF_EPOCH);
    assert_int_equal(n, rf_loader_num_batches(l));
    rf_loader_destroy(l);
}

static void test_distributed_ranks_cover(void **state)
{
    (void)state;
    const int worlds[] = {2, 3, 8};
    for (int wi = 0; wi < 3; wi++) {
        int W = worlds[wi];
        int seen[N] = {0};
        int64_t total = 0;
        for (int r = 0; r < W; r++) {
            rf_loader *l = make(root, 1, 4, RF_TRANSFORM_CENTER);
            rf_loader_set_param(l, RF_P_RANK, r);
            rf_loader_set_param(l, RF_P_WORLD_SIZE, W);
            tu_start(l);
            int64_t per = (N + W - 1) / W;
            assert_int_equal(rf_loader_num_batches(l), (per + 3) / 4);
            rf_batch *b;
            while (rf_loader_next(l, &b) == RF_OK) {
                for (int64_t i = 0; i < rf_batch_count(b); i++)
                    seen[rf_batch_samples(b)[i]]++;
                total += rf_batch_count(b);
                rf_batch_release(b);
            }
            rf_loader_destroy(l);
        }
        int64_t padded = (int64_t)((N + W - 1) / W) * W;
        assert_int_equal(total, padded);
        int extra = 0;
        for (int i = 0; i < N; i++) {
            assert_true(seen[i] >= 1);
            extra += seen[i] - 1;
        }
        assert_int_equal(extra, padded - N);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_options_and_sources_rejected),
        cmocka_unit_test(test_every_sample_once_with_label),
        cmocka_unit_test(test_deterministic_any_workers_backend_prefetch),
        cmocka_unit_test(test_seek_resume_identical),
        cmocka_unit_test(test_list_source_matches_folder),
        cmocka_unit_test(test_nchw_is_transposed_nhwc),
        cmocka_unit_test(test_bad_file_raise_then_continue),
        cmocka_unit_test(test_missing_file_names_path),
        cmocka_unit_test(test_lend_all_slots_is_an_error),
        cmocka_unit_test(test_next_wait_again_keeps_position),
        cmocka_unit_test(test_200_loaders_destroyed_busy),
        cmocka_unit_test(test_distributed_ranks_cover),
        cmocka_unit_test(test_failed_start_can_be_retried),
        cmocka_unit_test(test_forked_child_gets_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
