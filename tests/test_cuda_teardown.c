/*
 * test_cuda_teardown.c - leases and teardown of a CUDA loader, through the
 * public API, against the stand-in runtime (whose cudaFree does not wait for
 * the streams, and which aborts when queued work runs on freed memory):
 *   - destroy with device batches still lent waits for the work the consumer
 *     queued on them before (their release is recorded at destroy);
 *   - destroy's waits have a deadline: on a stream that never ends it leaks
 *     the memory (with a message) instead of hanging;
 *   - rf_batch_copy_to marks the slot in the same critical section as its
 *     lease check: a release by another thread meanwhile cannot get the slot
 *     refilled under the copy;
 *   - nothing waits for the device while holding the loader's mutex, even when
 *     a call fails (a release whose event cannot be recorded, a failed
 *     context found by the dispatcher's query);
 *   - a forked child's destroy makes no CUDA call (no cudaFreeHost of the
 *     parent's page-locked slots, grown ones included).
 *
 * CTest: test_cuda_teardown_fake; skipped on a real runtime (the knobs: a
 * paused device, failures on demand, hooks).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "loader.h"
#include "ringfeed.h"
#include "standin.h"
#include "testcheck.h"

#ifdef RF_HAVE_CUDA
/* The drain's deadline (lib/cuda/copier.c); weak: absent from libraries before it. */
extern int rf__copier_drain_ms __attribute__((weak));

static void *scratch; /* device memory a "training step" keeps busy */
#define SCRATCH_BYTES ((size_t)1 << 20)

static void busy(cudaStream_t s, int steps)
{
    for (int i = 0; i < steps; i++)
        assert_int_equal(SI.MemsetAsync(scratch, i, SCRATCH_BYTES, s), cudaSuccess);
}

static int setup(void **state)
{
    if (si_setup(state) != 0)
        return -1;
    return SI.rt->Malloc(&scratch, SCRATCH_BYTES) == cudaSuccess ? 0 : -1;
}

static int teardown(void **state)
{
    SI.rt->Free(scratch);
    return si_teardown(state);
}

/* The consumer queues a slow step, then a read of the device batch, and the
 * loader is destroyed before any of it ran, the batch still lent (or just
 * released). The read must see the batch (the stand-in aborts on a read of
 * freed memory). */
static void test_destroy_with_device_batches_still_lent(void **state)
{
    (void)state;
    const rf_cudart *rt = SI.rt;
    cudaStream_t s;
    assert_int_equal(rt->StreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    uint8_t *out;
    int64_t *lab;
    assert_int_equal(rt->HostAlloc((void **)&out, SI_BATCH_BYTES, cudaHostAllocDefault), 0);
    assert_int_equal(rt->HostAlloc((void **)&lab, SI_BATCH * 8, cudaHostAllocDefault), 0);
    for (int i = 0; i < 4; i++) {
        rf_loader *l = si_loader(0, i % 2, 2);
        rf_batch *b;
        assert_int_equal(rf_loader_next_device(l, s, &b), RF_OK);
        int64_t n = rf_batch_count(b);
        busy(s, 3);
        assert_int_equal(rt->MemcpyAsync(out, rf_batch_device_data(b), (size_t)n * SI_SAMPLE_BYTES,
                                         cudaMemcpyDefault, s),
                         cudaSuccess);
        assert_int_equal(
            rt->MemcpyAsync(lab, rf_batch_device_labels(b), (size_t)n * 8, cudaMemcpyDefault, s),
            cudaSuccess);
        if (i >= 2)
            rf_batch_release(b);
        rf_loader_destroy(l);
        assert_int_equal(rt->StreamSynchronize(s), cudaSuccess);
        if (si_hash(out, lab, n) != si_ref_hash(0, 0))
            fail_msg("loader %d: the consumer read something else than its batch", i);
    }
    rt->FreeHost(out);
    rt->FreeHost(lab);
    rt->StreamDestroy(s);
}

static void *destroyer(void *arg)
{
    rf_loader_destroy(arg);
    return NULL;
}

/* A stream that never ends (the stand-in's device paused): destroy returns
 * after the deadline and leaves the memory to the stream. */
static void test_destroy_deadline_on_a_stream_that_never_ends(void **state)
{
    (void)state;
    if (!&rf__copier_drain_ms)
        fail_msg("the library has no deadline for destroy's waits (rf__copier_drain_ms)");
    cudaStream_t s;
    assert_int_equal(SI.rt->StreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    rf_loader *l = si_loader(0, 1, 2);
    rf_batch *b;
    assert_int_equal(rf_loader_next_device(l, s, &b), RF_OK);
    SI.set("pause", 1);
    busy(s, 1);
    int saved = rf__copier_drain_ms;
    rf__copier_drain_ms = 300;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, destroyer, l), 0);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    int rc = pthread_timedjoin_np(t, NULL, &until);
    SI.set("pause", 0);
    if (rc != 0)
        pthread_join(t, NULL);
    rf__copier_drain_ms = saved;
    if (rc != 0)
        fail_msg("rf_loader_destroy did not return within 10 s on a stream that never ends");
    assert_int_equal(SI.rt->StreamSynchronize(s), cudaSuccess); /* what was queued runs */
    SI.rt->StreamDestroy(s);
}

/* Inside rf_batch_copy_to (its first cudaMemcpyAsync), another thread's
 * release of the batch: the slot must not be refilled before the copy ran. */
typedef struct race {
    rf_loader *l;
    rf_batch *b;
    int slot;
    int refilled; /* the slot was claimed again while the copy was queued */
} race;

static void in_copy(void *arg)
{
    race *r = arg;
    SI.hook("cudaMemcpyAsync", NULL, NULL); /* once */
    SI.set("pause", 1);                     /* the copy stays queued */
    assert_int_equal(rf_batch_release(r->b), RF_OK);
    for (int i = 0; i < 100 && !r->refilled; i++) {
        usleep(2000);
        pthread_mutex_lock(&r->l->mu);
        r->refilled = r->l->ring.slots[r->slot].state != RF_SLOT_FREE;
        pthread_mutex_unlock(&r->l->mu);
    }
}

static void test_copy_to_keeps_its_slot_from_a_release(void **state)
{
    (void)state;
    si_dst dst;
    si_dst_open(&dst, 0);
    rf_loader *l = si_loader(0, 1, 2);
    static race r; /* the hook outlives a failed test */
    r = (race){l, NULL, 0, 0};
    assert_int_equal(rf_loader_next(l, &r.b), RF_OK);
    r.slot = r.b->slot->id;
    SI.hook("cudaMemcpyAsync", in_copy, &r);
    int rc = rf_batch_copy_to(r.b, dst.img, dst.lab, NULL);
    SI.set("pause", 0);
    assert_int_equal(rc, RF_OK);
    assert_int_equal(r.refilled, 0);
    if (si_fetch_hash(dst.img, dst.lab, si_ref_count(0, 0), NULL) != si_ref_hash(0, 0))
        fail_msg("the copy read a refilled slot");
    rf_batch *b;
    for (int k = 1; k < SI_NB; k++) { /* and the loader goes on */
        assert_int_equal(rf_loader_next(l, &b), RF_OK);
        assert_int_equal(rf_batch_release(b), RF_OK);
    }
    rf_loader_destroy(l);
    si_dst_close(&dst);
}

/* Every host wait: is the loader's mutex held by the waiting thread? */
typedef struct waits {
    rf_loader *l;
    int under_mutex;
    int total;
} waits;

static void on_sync(void *arg)
{
    waits *w = arg;
    __atomic_add_fetch(&w->total, 1, __ATOMIC_RELAXED);
#ifdef __GLIBC__
    if (w->l && w->l->mu.__data.__owner == gettid())
        __atomic_add_fetch(&w->under_mutex, 1, __ATOMIC_RELAXED);
#endif
}

static void test_no_wait_under_the_loaders_mutex(void **state)
{
    (void)state;
#ifndef __GLIBC__
    skip();
#endif
    static waits w; /* the hook outlives a failed test */
    memset(&w, 0, sizeof w);
    SI.hook("sync", on_sync, &w);
    /* A release whose event cannot be recorded. */
    rf_loader *l = si_loader(0, 1, 2);
    w.l = l;
    for (int e = 0; e < SI_EPOCHS; e++) {
        assert_int_equal(rf_loader_set_epoch(l, e), RF_OK);
        for (int k = 0; k < SI_NB; k++) {
            rf_batch *b;
            assert_int_equal(rf_loader_next_device(l, NULL, &b), RF_OK);
            if (si_fetch_hash(rf_batch_device_data(b), rf_batch_device_labels(b), rf_batch_count(b),
                              NULL) != si_ref_hash(e, k))
                fail_msg("epoch %d batch %d differs", e, k);
            if (k == 1)
                SI.fail_call("cudaEventRecord", 0, cudaErrorLaunchFailure);
            assert_int_equal(rf_batch_release(b), RF_OK);
        }
    }
    assert_int_equal(w.under_mutex, 0);
    rf_loader_destroy(l);
    /* A failed context, found by the dispatcher's query of a pending copy. */
    l = si_loader(0, 1, 2);
    w.l = l;
    rf_batch *b;
    assert_int_equal(rf_loader_next_device(l, NULL, &b), RF_OK);
    assert_int_equal(rf_batch_release(b), RF_OK);
    SI.set("sticky", cudaErrorIllegalAddress);
    for (int i = 0; i < 50; i++)
        usleep(2000); /* the dispatcher polls the pending copy */
    int rc = rf_loader_next_device(l, NULL, &b);
    if (rc == RF_OK)
        rf_batch_release(b);
    rf_loader_destroy(l);
    SI.set("sticky", 0);
    SI.hook("sync", NULL, NULL);
    print_message("host waits: %d, under the loader's mutex: %d\n", w.total, w.under_mutex);
    assert_int_equal(w.under_mutex, 0);
}

/* A child forked while the loader's slots are page-locked (grown ones only:
 * the first ones could not be pinned) destroys its copy without a CUDA call. */
static void test_forked_child_makes_no_cuda_call(void **state)
{
    (void)state;
    SI.set("pinned_memory", SI.get("pin_used", 0) + 1); /* the first slots: pageable */
    rf_loader *l = si_loader(0, 1, 2);
    SI.set("pinned_memory", 0);
    pthread_mutex_lock(&l->mu);
    rf__dispatch_set_prefetch(&l->disp, 4); /* grown slots: page-locked */
    pthread_mutex_unlock(&l->mu);
    char js[8192];
    for (int i = 0; i < 2000; i++) {
        assert_true(rf_loader_stats_json(l, js, sizeof js) > 0);
        if (tu_stats_int(js, "prefetch") == 4)
            break;
        usleep(1000);
    }
    assert_int_equal(tu_stats_int(js, "prefetch"), 4);
    rf_batch *b;
    assert_int_equal(rf_loader_next_device(l, NULL, &b), RF_OK);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(20);
        rf_loader_destroy(l);
        long long calls = SI.get("after_fork", 0);
        if (calls)
            fprintf(stderr, "child: %lld CUDA calls in the forked child\n", calls);
        _exit(calls ? 3 : 0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(rf_batch_release(b), RF_OK);
    rf_loader_destroy(l);
}
#endif

int main(void)
{
#ifndef RF_HAVE_CUDA
    printf("test_cuda_teardown: SKIPPED - built without CUDA\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_destroy_with_device_batches_still_lent, si_reset),
        cmocka_unit_test_setup(test_destroy_deadline_on_a_stream_that_never_ends, si_reset),
        cmocka_unit_test_setup(test_copy_to_keeps_its_slot_from_a_release, si_reset),
        cmocka_unit_test_setup(test_no_wait_under_the_loaders_mutex, si_reset),
        cmocka_unit_test_setup(test_forked_child_makes_no_cuda_call, si_reset),
    };
    return si_run("test_cuda_teardown", 1, tests, sizeof tests / sizeof tests[0], setup, teardown);
#endif
}
