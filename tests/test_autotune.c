/*
 * test_autotune.c - the tuner inside a running loader (num_workers = 0):
 * with a consumer that sleeps per batch the worker count stays within the
 * budget and every decision is recorded with a reason; local_world_size
 * splits the cores; a fixed worker count is never touched. Where the tuner
 * settles and how long the consumer waits are timings, measured by
 * rf-tuner-bench (bench/tuner_bench.c), not asserted here.
 */
#define _GNU_SOURCE
#include <sched.h>
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

#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"
#include "tuner.h"

static char *root;

static int setup(void **state)
{
    (void)state;
    root = tu_tempdir("autotune");
    return root && tu_make_folder(root, 4, 40, 96, 72, 3) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    free(root);
    return 0;
}

static rf_loader *auto_loader(int local_world_size)
{
    rf_loader *l = TU_LOADER(root, {RF_P_BATCH_SIZE, 8}, {RF_P_IMAGE_SIZE, 32},
                             {RF_P_NUM_WORKERS, 0}, {RF_P_LOCAL_WORLD_SIZE, local_world_size});
    tu_start(l);
    return l;
}

/* A consumer that needs far less than one worker can make: the tuner keeps
 * the worker count within the budget at every batch, logs its decisions
 * from batch 0 on (the first by Little's law), and reports where it settled
 * and the consumer's stall (printed only: both depend on the machine's load). */
static void test_auto_workers_within_budget_and_logged(void **state)
{
    (void)state;
    int budget = rf__worker_budget(1, NULL, 0);
    rf_loader *l = auto_loader(1);
    struct timespec step = {0, 20 * 1000000}; /* 20 ms per batch of 8 tiny pictures */
    int64_t batches = 0;
    double stall_after = 0, wall_after = 0;
    for (int64_t epoch = 0; epoch < 3; epoch++) {
        rf_loader_set_epoch(l, epoch);
        rf_batch *b;
        int rc;
        while ((rc = rf_loader_next(l, &b)) == RF_OK) {
            nanosleep(&step, NULL);
            rf_batch_release(b);
            int64_t set = -1;
            rf_loader_get_param(l, RF_P_NUM_WORKERS, &set);
            assert_int_equal(set, 0); /* reads back what was set: auto */
            int w = rf_loader_active_workers(l);
            assert_true(w >= 1 && w <= budget);
            if (++batches == 30) {
                char *js = tu_stats(l);
                stall_after = tu_stats_double(js, "stall_seconds");
                wall_after = tu_stats_double(js, "wall_seconds");
                free(js);
            }
        }
        assert_int_equal(rc, RF_END_OF_EPOCH);
    }
    char *js = tu_stats(l);
    int64_t workers = tu_stats_int(js, "num_workers");
    double stall = tu_stats_double(js, "stall_seconds") - stall_after;
    double wall = tu_stats_double(js, "wall_seconds") - wall_after;
    print_message("budget %d, settled on %lld workers, stall %.1f%% after warm-up\n", budget,
                  (long long)workers, wall > 0 ? 100 * stall / wall : 0.0);
    assert_true(workers >= 1 && workers <= budget);
    assert_non_null(strstr(js, "\"tuner\": [{\"batch\": 0"));
    /* The first window's decision (Little's law) is recorded with its reason. */
    assert_non_null(strstr(js, "little"));
    free(js);
    rf_loader_destroy(l);
}

/* Training processes on the node split the cores. */
static void test_local_world_size_splits_cores(void **state)
{
    (void)state;
    int cores = rf__usable_cores(NULL, 0);
    rf_loader *l = auto_loader(2);
    char js[65536];
    rf_loader_stats_json(l, js, sizeof js);
    int64_t threads = tu_stats_int(js, "worker_threads");
    int expect = cores / 2 > 0 ? cores / 2 : 1;
    assert_int_equal(threads, expect);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == RF_OK) {
        int w = rf_loader_active_workers(l);
        assert_true(w >= 1 && w <= expect);
        rf_batch_release(b);
    }
    assert_int_equal(rc, RF_END_OF_EPOCH);
    rf_loader_destroy(l);
    /* a huge node count still leaves one worker */
    l = auto_loader(4096);
    rf_loader_stats_json(l, js, sizeof js);
    assert_int_equal(tu_stats_int(js, "worker_threads"), 1);
    rf_loader_destroy(l);
}

/* Fixed worker counts are never touched by the tuner. */
static void test_fixed_workers_untouched(void **state)
{
    (void)state;
    rf_loader *l = rf_loader_create(root);
    rf_loader_set_param(l, RF_P_BATCH_SIZE, 8);
    rf_loader_set_param(l, RF_P_IMAGE_SIZE, 32);
    rf_loader_set_param(l, RF_P_NUM_WORKERS, 3);
    assert_int_equal(rf_loader_start(l), 0);
    struct timespec step = {0, 5 * 1000000};
    rf_batch *b;
    while (rf_loader_next(l, &b) == RF_OK) {
        nanosleep(&step, NULL);
        rf_batch_release(b);
    }
    char js[65536];
    rf_loader_stats_json(l, js, sizeof js);
    assert_int_equal(tu_stats_int(js, "num_workers"), 3);
    assert_non_null(strstr(js, "\"auto_workers\": false"));
    rf_loader_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_workers_within_budget_and_logged),
        cmocka_unit_test(test_local_world_size_splits_cores),
        cmocka_unit_test(test_fixed_workers_untouched),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
