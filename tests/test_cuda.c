/*
 * test_cuda.c - the CUDA path on a real device, through the public API:
 * batches on the device equal the CPU loader's bytes and labels, device
 * buffers are not overwritten before their release (the consumer's stream is
 * kept busy so that the release events are still pending when the next copy
 * is enqueued), copies into caller memory, pinned and pageable rings, the
 * legacy default stream, errors, a copy refused in a forked child.
 *
 * The test does not link libcudart either: it calls the runtime the library
 * loaded (lib/cuda/cudart.h), so both use one runtime, found the library's way.
 * Under CTest's test_cuda_fake that is tests/fake_cudart.c, found by its
 * soname through LD_LIBRARY_PATH; RINGFEED_TEST_EXPECT_CUDART (a substring of
 * the path the runtime must have been loaded from) checks it was.
 *
 * Exits 77 (CTest: skipped) when the library has no CUDA device: built
 * without CUDA, no runtime, no driver, no GPU. The ordering rules themselves
 * are tested without a device in test_copier.c.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "testutil.h"

#ifdef RF_HAVE_CUDA
#include "copier.h"
#include "cudart.h"
#include "standin.h"

#define CLASSES 3
#define PER_CLASS 11
#define N (CLASSES * PER_CLASS)
#define BATCH 4
#define SIZE 48
#define NB ((N + BATCH - 1) / BATCH)
#define SAMPLE_BYTES (SIZE * SIZE * 3)
#define BATCH_BYTES ((size_t)BATCH * SAMPLE_BYTES)
#define EPOCHS 2

static char *root;
/* The CPU loader's output, the reference: [epoch][batch]. */
static uint8_t *ref_img[EPOCHS][NB];
static int64_t ref_lab[EPOCHS][NB][BATCH];
static int64_t ref_count[EPOCHS][NB];
static void *scratch; /* device memory the "training step" keeps busy */
#define SCRATCH_BYTES ((size_t)256 << 20)

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess)                                                                     \
            fail_msg("%s: %s", #x, SI.rt->GetErrorString(e_));                                     \
    } while (0)

static rf_loader *make(int device, int pin, int prefetch)
{
    rf_loader *l = rf_loader_create(root);
    assert_non_null(l);
    assert_int_equal(rf_loader_set_param(l, RF_P_BATCH_SIZE, BATCH), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_IMAGE_SIZE, SIZE), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_FLIP, 1), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_SEED, 11), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_NUM_WORKERS, 2), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_PREFETCH, prefetch), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_DEVICE, device), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_PIN_MEMORY, pin), 0);
    int rc = rf_loader_start(l);
    if (rc != 0)
        fail_msg("start: %s", rf_loader_errmsg(l));
    return l;
}

static int setup(void **state)
{
    (void)state;
    root = tu_tempdir("cuda");
    if (!root || tu_make_folder(root, CLASSES, PER_CLASS, 90, 70, 9) != 0)
        return -1;
    rf_loader *l = make(-1, 0, 4);
    for (int e = 0; e < EPOCHS; e++) {
        rf_loader_set_epoch(l, e);
        for (int k = 0; k < NB; k++) {
            rf_batch *b;
            if (rf_loader_next(l, &b) != RF_OK)
                return -1;
            ref_count[e][k] = rf_batch_count(b);
            ref_img[e][k] = malloc(BATCH_BYTES);
            memcpy(ref_img[e][k], rf_batch_data(b), rf_batch_nbytes(b));
            memcpy(ref_lab[e][k], rf_batch_labels(b), (size_t)rf_batch_count(b) * 8);
            rf_batch_release(b);
        }
    }
    rf_loader_destroy(l);
    return SI.rt->Malloc(&scratch, SCRATCH_BYTES) == cudaSuccess ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    for (int e = 0; e < EPOCHS; e++)
        for (int k = 0; k < NB; k++)
            free(ref_img[e][k]);
    SI.rt->Free(scratch);
    tu_rmtree(root);
    free(root);
    return 0;
}

/* A slow "training step" on stream s: long enough that what is enqueued
 * after it (the release event) is still pending when the next batch's copy
 * is enqueued. */
static void busy(cudaStream_t s)
{
    for (int i = 0; i < 4; i++)
        CK(SI.MemsetAsync(scratch, i, SCRATCH_BYTES, s));
}

typedef struct outbuf {
    uint8_t *img; /* pinned host */
    int64_t *lab;
} outbuf;

static void out_alloc(outbuf *o, int n)
{
    for (int i = 0; i < n; i++) {
        CK(SI.rt->HostAlloc((void **)&o[i].img, BATCH_BYTES, cudaHostAllocDefault));
        CK(SI.rt->HostAlloc((void **)&o[i].lab, BATCH * 8, cudaHostAllocDefault));
        memset(o[i].img, 0xCD, BATCH_BYTES);
    }
}

static void out_check_free(outbuf *o, int e)
{
    for (int k = 0; k < NB; k++) {
        size_t n = (size_t)ref_count[e][k] * SAMPLE_BYTES;
        if (memcmp(o[k].img, ref_img[e][k], n) != 0)
            fail_msg("epoch %d batch %d: device images differ from the CPU loader's", e, k);
        for (int i = 0; i < ref_count[e][k]; i++)
            assert_int_equal(o[k].lab[i], ref_lab[e][k][i]);
        SI.rt->FreeHost(o[k].img);
        SI.rt->FreeHost(o[k].lab);
    }
}

/* rf_loader_next_device: read each batch on the device after a busy step,
 * release it at once (before the stream ran), and compare at the end. */
static void run_next_device(int pin, int prefetch, int null_stream)
{
    rf_loader *l = make(0, pin, prefetch);
    cudaStream_t s = NULL;
    if (!null_stream)
        CK(SI.rt->StreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int e = 0; e < EPOCHS; e++) {
        outbuf o[NB];
        out_alloc(o, NB);
        assert_int_equal(rf_loader_set_epoch(l, e), 0);
        for (int k = 0; k < NB; k++) {
            rf_batch *b = NULL;
            int rc = rf_loader_next_device(l, s, &b);
            if (rc != RF_OK)
                fail_msg("next_device: %d %s", rc, rf_loader_errmsg(l));
            assert_int_equal(rf_batch_index(b), k);
            assert_int_equal(rf_batch_count(b), ref_count[e][k]);
            void *d = rf_batch_device_data(b);
            const int64_t *dl = rf_batch_device_labels(b);
            assert_non_null(d);
            assert_non_null(dl);
            struct cudaPointerAttributes at;
            CK(SI.PointerGetAttributes(&at, d));
            assert_int_equal(at.type, cudaMemoryTypeDevice);
            busy(s);
            CK(SI.rt->MemcpyAsync(o[k].img, d, rf_batch_nbytes(b), cudaMemcpyDeviceToHost, s));
            CK(SI.rt->MemcpyAsync(o[k].lab, dl, (size_t)rf_batch_count(b) * 8,
                                  cudaMemcpyDeviceToHost, s));
            rf_batch_release(b); /* the stream has not run yet */
        }
        rf_batch *b;
        assert_int_equal(rf_loader_next_device(l, s, &b), RF_END_OF_EPOCH);
        CK(SI.rt->StreamSynchronize(s));
        out_check_free(o, e);
    }
    char js[8192];
    assert_true(rf_loader_stats_json(l, js, sizeof js) > 0);
    print_message("%s\n", js);
    assert_non_null(strstr(js, pin ? "\"mode\": \"pinned\"" : "\"mode\": \"pageable\""));
    assert_non_null(strstr(js, "\"device\": \"cuda:0\""));
    assert_non_null(strstr(js, "\"available\": true"));
    assert_non_null(strstr(js, "\"errors\": 0"));
    if (!pin)
        assert_non_null(strstr(js, "pin_memory=0"));
    rf_loader_destroy(l);
    if (s)
        CK(SI.rt->StreamDestroy(s));
}

static void test_next_device_pinned(void **state)
{
    (void)state;
    run_next_device(1, 2, 0);
}

static void test_next_device_pageable(void **state)
{
    (void)state;
    run_next_device(0, 3, 0);
}

static void test_next_device_legacy_stream(void **state)
{
    (void)state;
    run_next_device(1, 2, 1);
}

/* rf_batch_copy_to into cudaMalloc'd memory, from host batches (next) and
 * from device batches (next_device on another stream); released at once. */
static void run_copy_to(int from_device)
{
    rf_loader *l = make(0, 1, 2);
    cudaStream_t s, s2;
    CK(SI.rt->StreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(SI.rt->StreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    uint8_t *dimg[NB];
    int64_t *dlab[NB];
    for (int k = 0; k < NB; k++) {
        CK(SI.rt->Malloc((void **)&dimg[k], BATCH_BYTES));
        CK(SI.rt->Malloc((void **)&dlab[k], BATCH * 8));
    }
    for (int e = 0; e < EPOCHS; e++) {
        assert_int_equal(rf_loader_set_epoch(l, e), 0);
        for (int k = 0; k < NB; k++) {
            rf_batch *b = NULL;
            int rc = from_device ? rf_loader_next_device(l, s2, &b) : rf_loader_next(l, &b);
            assert_int_equal(rc, RF_OK);
            busy(s);
            rc = rf_batch_copy_to(b, dimg[k], dlab[k], s);
            if (rc != RF_OK)
                fail_msg("copy_to: %d %s", rc, rf_loader_errmsg(l));
            rf_batch_release(b);
        }
        outbuf o[NB];
        out_alloc(o, NB);
        for (int k = 0; k < NB; k++) {
            CK(SI.rt->MemcpyAsync(o[k].img, dimg[k], (size_t)ref_count[e][k] * SAMPLE_BYTES,
                                  cudaMemcpyDeviceToHost, s));
            CK(SI.rt->MemcpyAsync(o[k].lab, dlab[k], (size_t)ref_count[e][k] * 8,
                                  cudaMemcpyDeviceToHost, s));
        }
        CK(SI.rt->StreamSynchronize(s));
        out_check_free(o, e);
    }
    for (int k = 0; k < NB; k++) {
        SI.rt->Free(dimg[k]);
        SI.rt->Free(dlab[k]);
    }
    rf_loader_destroy(l);
    CK(SI.rt->StreamDestroy(s));
    CK(SI.rt->StreamDestroy(s2));
}

static void test_copy_to_from_host(void **state)
{
    (void)state;
    run_copy_to(0);
}

static void test_copy_to_from_device(void **state)
{
    (void)state;
    run_copy_to(1);
}

static void test_missing_device_and_bad_copies_rejected(void **state)
{
    (void)state;
    /* A device that does not exist. */
    rf_loader *l = rf_loader_create(root);
    assert_int_equal(rf_loader_set_param(l, RF_P_DEVICE, rf_cuda_device_count()), 0);
    assert_int_equal(rf_loader_start(l), RF_E_INVALID);
    assert_non_null(strstr(rf_loader_errmsg(l), "does not exist"));
    rf_loader_destroy(l);
    /* A released batch cannot be copied; no destination is invalid. */
    l = make(0, 1, 2);
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    assert_int_equal(rf_batch_copy_to(b, NULL, NULL, NULL), RF_E_INVALID);
    rf_batch_release(b);
    void *d;
    CK(SI.rt->Malloc(&d, BATCH_BYTES));
    assert_int_equal(rf_batch_copy_to(b, d, NULL, NULL), RF_E_RELEASED);
    SI.rt->Free(d);
    rf_loader_destroy(l);
}

/* In a forked child the parent's CUDA context and copy stream are not to be
 * used: rf_batch_copy_to refuses (before, it enqueued a copy there). */
static void test_copy_to_in_forked_child(void **state)
{
    (void)state;
    rf_loader *l = make(0, 1, 2);
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    void *d;
    CK(SI.rt->Malloc(&d, BATCH_BYTES));
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(10);
        int rc = rf_batch_copy_to(b, d, NULL, NULL);
        if (rc != RF_E_FORKED)
            fprintf(stderr, "child: rf_batch_copy_to gave %d (%s)\n", rc, rf_loader_errmsg(l));
        rf_loader_destroy(l); /* the child's copy: plain memory only */
        _exit(rc == RF_E_FORKED ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(rf_batch_copy_to(b, d, NULL, NULL), RF_OK); /* the parent's, as before */
    CK(SI.rt->StreamSynchronize(NULL));
    assert_int_equal(rf_batch_release(b), RF_OK);
    SI.rt->Free(d);
    rf_loader_destroy(l);
}

/* Loaders with lent device batches destroyed, many times. */
static void test_destroy_with_device_batches_lent(void **state)
{
    (void)state;
    cudaStream_t s;
    CK(SI.rt->StreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i < 6; i++) {
        rf_loader *l = make(0, i % 2, 2);
        rf_batch *b;
        assert_int_equal(rf_loader_next_device(l, s, &b), RF_OK);
        busy(s);
        if (i % 3 == 0)
            rf_batch_release(b);
        rf_loader_destroy(l); /* waits for the copies and the release */
    }
    CK(SI.rt->StreamSynchronize(s));
    CK(SI.rt->StreamDestroy(s));
}
#endif /* RF_HAVE_CUDA */

int main(void)
{
#ifndef RF_HAVE_CUDA
    printf("test_cuda: SKIPPED - built without CUDA\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_next_device_pinned),
        cmocka_unit_test(test_next_device_pageable),
        cmocka_unit_test(test_next_device_legacy_stream),
        cmocka_unit_test(test_copy_to_from_host),
        cmocka_unit_test(test_copy_to_from_device),
        cmocka_unit_test(test_missing_device_and_bad_copies_rejected),
        cmocka_unit_test(test_copy_to_in_forked_child),
        cmocka_unit_test(test_destroy_with_device_batches_lent),
    };
    return si_run("test_cuda", 0, tests, sizeof tests / sizeof tests[0], setup, teardown);
#endif
}
