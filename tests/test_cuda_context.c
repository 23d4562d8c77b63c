/*
 * test_cuda_context.c - contexts: a loader on device 1 used from a thread
 * that never chose a device makes no context on device 0 (since CUDA 12,
 * cudaSetDevice(0) to "put back" such a thread's device would create one,
 * ~0.5 GiB of a real GPU per process), leaves that thread without a current
 * context, and a thread with a device of its own gets it back after every
 * call. Its batches are the CPU loader's.
 *
 * Against the stand-in runtime (CTest: test_cuda_context_fake, two devices),
 * which counts the primary contexts it creates and tells a thread's current
 * context; skipped on a real runtime (whose contexts cannot be counted this
 * way) and without two devices.
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

#include <cmocka.h>

#include "ringfeed.h"
#include "standin.h"
#include "testcheck.h"

#ifdef RF_HAVE_CUDA
/* Device 1 memory for the copies, made by the main thread. */
static void *dst_img[SI_EPOCHS][SI_NB];
static int64_t *dst_lab[SI_EPOCHS][SI_NB];

typedef struct run {
    int calls;       /* library calls made */
    int bad_context; /* calls after which the thread had a current context */
    int errors;
    char msg[400];
} run;

/* After each call: the thread still has no current context. */
static void no_context(run *r, const char *what, int rc, rf_loader *l)
{
    r->calls++;
    if (SI.get("current_device", 0) != -1)
        r->bad_context++;
    if (rc < 0 && !r->errors++)
        snprintf(r->msg, sizeof r->msg, "%s: %d %s", what, rc, l ? rf_loader_errmsg(l) : "");
}

/* The consumer: a thread that never chose a device, on a loader on device 1,
 * through every entry point that touches CUDA (start, next_device, copy_to of
 * device and host batches, release, destroy), on the legacy stream. */
static void *consumer(void *arg)
{
    run *r = arg;
    rf_loader *l = si_loader(1, 1, 2);
    no_context(r, "start", 0, l);
    for (int e = 0; e < SI_EPOCHS; e++) {
        rf_loader_set_epoch(l, e);
        for (int k = 0; k < SI_NB; k++) {
            rf_batch *b = NULL;
            int rc = k % 2 ? rf_loader_next(l, &b) : rf_loader_next_device(l, NULL, &b);
            no_context(r, "next", rc, l);
            if (rc != RF_OK)
                return NULL;
            rc = rf_batch_copy_to(b, dst_img[e][k], dst_lab[e][k], NULL);
            no_context(r, "copy_to", rc, l);
            rc = rf_batch_release(b);
            no_context(r, "release", rc, l);
        }
    }
    rf_loader_destroy(l);
    no_context(r, "destroy", 0, NULL);
    return NULL;
}

static void test_no_context_on_device_0_from_a_loader_on_device_1(void **state)
{
    (void)state;
    const rf_cudart *rt = SI.rt;
    assert_int_equal(SI.get("contexts", 0), 0);
    /* The main thread works on device 1 only. */
    assert_int_equal(rt->SetDevice(1), cudaSuccess);
    for (int e = 0; e < SI_EPOCHS; e++)
        for (int k = 0; k < SI_NB; k++) {
            assert_int_equal(rt->Malloc(&dst_img[e][k], SI_BATCH_BYTES), cudaSuccess);
            assert_int_equal(rt->Malloc((void **)&dst_lab[e][k], SI_BATCH * 8), cudaSuccess);
        }
    run r = {0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, consumer, &r), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    if (r.errors)
        fail_msg("%s", r.msg);
    assert_true(r.calls >= 1 + 3 * SI_EPOCHS * SI_NB + 1);
    assert_int_equal(r.bad_context, 0);
    assert_int_equal(SI.get("contexts", 0), 0); /* the point */
    assert_int_equal(SI.get("contexts", 1), 1);
    assert_int_equal(SI.get("retains", 1), 0); /* the loader let its context go */
    for (int e = 0; e < SI_EPOCHS; e++)
        for (int k = 0; k < SI_NB; k++) {
            int64_t n = si_ref_count(e, k);
            if (si_fetch_hash(dst_img[e][k], dst_lab[e][k], n, NULL) != si_ref_hash(e, k))
                fail_msg("epoch %d batch %d differs from the CPU loader's", e, k);
            rt->Free(dst_img[e][k]);
            rt->Free(dst_lab[e][k]);
        }
    assert_int_equal(SI.get("contexts", 0), 0);
}

/* A thread on device 0 (its framework's) keeps it across every call on a
 * loader of device 1, and its legacy stream is device 0's again after. */
static void test_thread_keeps_its_own_device(void **state)
{
    (void)state;
    const rf_cudart *rt = SI.rt;
    assert_int_equal(rt->SetDevice(0), cudaSuccess);
    rf_loader *l = si_loader(1, 1, 2);
    int cur = -1;
    assert_int_equal(rt->GetDevice(&cur), cudaSuccess);
    assert_int_equal(cur, 0);
    for (int k = 0; k < SI_NB; k++) {
        rf_batch *b;
        assert_int_equal(rf_loader_next_device(l, NULL, &b), RF_OK); /* device 1's legacy stream */
        assert_int_equal(SI.get("current_device", 0), 0);
        assert_int_equal(rf_batch_release(b), RF_OK);
        assert_int_equal(SI.get("current_device", 0), 0);
    }
    rf_loader_destroy(l);
    assert_int_equal(rt->GetDevice(&cur), cudaSuccess);
    assert_int_equal(cur, 0);
    assert_int_equal(SI.get("current_device", 0), 0);
}
#endif

int main(void)
{
#ifndef RF_HAVE_CUDA
    printf("test_cuda_context: SKIPPED - built without CUDA\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_no_context_on_device_0_from_a_loader_on_device_1, si_reset),
        cmocka_unit_test_setup(test_thread_keeps_its_own_device, si_reset),
    };
    return si_run("test_cuda_context", 1, tests, sizeof tests / sizeof tests[0], si_setup,
                  si_teardown);
#endif
}
