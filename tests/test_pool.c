/*
 * test_pool.c - the decode pool on its own (lib/core/pool.c): every queued job
 * runs once and comes back through done; jobs are reused from the free
 * stack; workers parked by rf__pool_set_active run nothing and resume when
 * unparked; the producer's wake hint; stop with jobs queued; busy and CPU
 * counters move. Threads, no files.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pool.h"
#include "ringfeed.h"

#define NJOBS 8
#define NWORKERS 3

typedef struct job {
    rf_pool_job link;
    int64_t value;
} job;

typedef struct fixture {
    rf_pool pool;
    job jobs[NJOBS];
    _Atomic int64_t sum, runs, done;
    _Atomic int by_worker[NWORKERS];
} fixture;

static void work(void *ctx, int worker, rf_pool_job *pj)
{
    fixture *f = ctx;
    job *j = (job *)(void *)((char *)pj - offsetof(job, link));
    atomic_fetch_add(&f->sum, j->value);
    atomic_fetch_add(&f->runs, 1);
    atomic_fetch_add(&f->by_worker[worker], 1);
    volatile double x = 0; /* a little CPU for the counters */
    for (int i = 0; i < 2000; i++)
        x += i;
    (void)x;
}

static void done(void *ctx, rf_pool_job *pj)
{
    fixture *f = ctx;
    atomic_fetch_add(&f->done, 1);
    rf__pool_put(&f->pool, pj);
}

static void setup_pool(fixture *f)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(rf__pool_init(&f->pool, NWORKERS, NJOBS, work, f, done, f), 0);
    for (int i = 0; i < NJOBS; i++)
        rf__pool_put(&f->pool, &f->jobs[i].link);
    assert_int_equal(rf__pool_start(&f->pool), 0);
}

static void finish_pool(fixture *f)
{
    rf__pool_stop(&f->pool);
    rf__pool_join(&f->pool);
    rf__pool_destroy(&f->pool, 0);
}

/* The producer: pushes n jobs with values 1..n, taking free ones. */
static void produce(fixture *f, int64_t n)
{
    for (int64_t v = 1; v <= n; v++) {
        rf_pool_job *pj;
        while ((pj = rf__pool_take(&f->pool)) == NULL)
            usleep(100);
        ((job *)(void *)((char *)pj - offsetof(job, link)))->value = v;
        rf__pool_push(&f->pool, pj);
    }
}

static void wait_done(fixture *f, int64_t n)
{
    for (int i = 0; i < 10000 && atomic_load(&f->done) < n; i++)
        usleep(1000);
    assert_int_equal(atomic_load(&f->done), n);
}

static void test_every_job_runs_once(void **state)
{
    (void)state;
    fixture *f = malloc(sizeof *f);
    setup_pool(f);
    const int64_t n = 5000;
    produce(f, n);
    wait_done(f, n);
    assert_int_equal(atomic_load(&f->runs), n);
    assert_int_equal(atomic_load(&f->sum), n * (n + 1) / 2);
    assert_int_equal(rf__pool_queued(&f->pool), 0);
    /* every job is free again */
    int free_jobs = 0;
    while (rf__pool_take(&f->pool))
        free_jobs++;
    assert_int_equal(free_jobs, NJOBS);
    int64_t cpu = 0, busy = 0;
    rf__pool_times(&f->pool, &cpu, &busy);
    assert_true(cpu > 0 && busy > 0);
    finish_pool(f);
    free(f);
}

static void test_parked_workers_run_nothing(void **state)
{
    (void)state;
    fixture *f = malloc(sizeof *f);
    setup_pool(f);
    assert_int_equal(rf__pool_active(&f->pool), NWORKERS);
    rf__pool_set_active(&f->pool, 1);
    assert_int_equal(rf__pool_active(&f->pool), 1);
    int before1 = atomic_load(&f->by_worker[1]), before2 = atomic_load(&f->by_worker[2]);
    produce(f, 500);
    wait_done(f, 500);
    /* A worker may have claimed one job before it saw the change, no more. */
    assert_true(atomic_load(&f->by_worker[1]) - before1 <= 1);
    assert_true(atomic_load(&f->by_worker[2]) - before2 <= 1);
    rf__pool_set_active(&f->pool, NWORKERS);
    produce(f, 500);
    wait_done(f, 1000);
    finish_pool(f);
    free(f);
}

/* The producer's wake hint: only while it says it sleeps, and only with the
 * queue down to half the jobs. */
static void test_producer_hint(void **state)
{
    (void)state;
    fixture *f = malloc(sizeof *f);
    memset(f, 0, sizeof *f);
    assert_int_equal(rf__pool_init(&f->pool, 1, NJOBS, work, f, done, f), 0);
    for (int i = 0; i < NJOBS; i++)
        rf__pool_put(&f->pool, &f->jobs[i].link);
    assert_true(rf__pool_has_free(&f->pool));
    assert_false(rf__pool_producer_wanted(&f->pool));
    rf__pool_producer_sleeps(&f->pool, 1);
    assert_true(rf__pool_producer_wanted(&f->pool)); /* empty queue */
    for (int i = 0; i < NJOBS / 2 + 1; i++)
        rf__pool_push(&f->pool, rf__pool_take(&f->pool)); /* no worker runs: not started */
    assert_int_equal(rf__pool_queued(&f->pool), NJOBS / 2 + 1);
    assert_false(rf__pool_producer_wanted(&f->pool));
    rf__pool_producer_sleeps(&f->pool, 0);
    /* unget puts a job back for the producer itself */
    rf_pool_job *pj = rf__pool_take(&f->pool);
    assert_non_null(pj);
    rf__pool_unget(&f->pool, pj);
    assert_ptr_equal(rf__pool_take(&f->pool), pj);
    /* stop with jobs queued: the workers exit (having run some or none) */
    assert_int_equal(rf__pool_start(&f->pool), 0);
    rf__pool_stop(&f->pool);
    rf__pool_join(&f->pool);
    rf__pool_destroy(&f->pool, 0);
    rf__pool_destroy(&f->pool, 0); /* zeroed: a no-op */
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_job_runs_once),
        cmocka_unit_test(test_parked_workers_run_nothing),
        cmocka_unit_test(test_producer_hint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
