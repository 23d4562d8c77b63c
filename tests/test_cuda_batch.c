/*
 * test_cuda_batch.c - what happens per batch on a CUDA loader, as the
 * README's GPU section says it, counted by the stand-in runtime:
 *   - rf_loader_next_device: two host-to-device copies (images, labels) from
 *     the slot's page-locked block into the slot's device buffer on the
 *     loader's device (labels after the images), no allocation, no host
 *     wait; rf_batch_copy_to of that batch: two device-to-device copies;
 *     of a host batch: two host-to-device copies;
 *   - with pin_memory=0 (pageable) every copy makes the host wait: the
 *     runtime stages pageable memory, after the copy stream's earlier work,
 *     which waits for the consumer's release of the buffer;
 * and the batches are the CPU loader's either way.
 *
 * CTest: test_cuda_batch_fake; skipped on a real runtime (the counters).
 */
#define _GNU_SOURCE
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
typedef struct counts {
    long long h2d, d2d, allocs, syncs, pageable;
} counts;

static counts now(void)
{
    return (counts){SI.get("h2d", 0), SI.get("d2d", 0), SI.get("thread_allocs", 0),
                    SI.get("thread_syncs", 0), SI.get("pageable", 0)};
}

static void test_per_batch_two_copies_no_allocation_no_wait(void **state)
{
    (void)state;
    si_dst dst;
    si_dst_open(&dst, 1);
    (void)si_fetch_hash(dst.img, dst.lab, 0, dst.s);
    rf_loader *l = si_loader(0, 1, 2);
    for (int k = 0; k < SI_NB; k++) {
        rf_batch *b;
        counts a = now();
        assert_int_equal(rf_loader_next_device(l, dst.s, &b), RF_OK);
        counts z = now();
        assert_int_equal(z.h2d - a.h2d, 2);
        assert_int_equal(z.allocs - a.allocs, 0);
        assert_int_equal(z.syncs - a.syncs, 0);
        /* Host: the slot's page-locked block. Device: the slot's buffer on
         * the loader's device, labels after the images. */
        struct cudaPointerAttributes at;
        assert_int_equal(SI.PointerGetAttributes(&at, rf_batch_data(b)), cudaSuccess);
        assert_int_equal(at.type, cudaMemoryTypeHost);
        const uint8_t *d = rf_batch_device_data(b);
        const int64_t *dl = rf_batch_device_labels(b);
        assert_int_equal(SI.PointerGetAttributes(&at, d), cudaSuccess);
        assert_int_equal(at.type, cudaMemoryTypeDevice);
        assert_int_equal(at.device, 0);
        assert_int_equal((const uint8_t *)dl - d, (SI_BATCH_BYTES + 255) & ~(size_t)255);
        a = now();
        assert_int_equal(rf_batch_copy_to(b, dst.img, dst.lab, dst.s), RF_OK);
        z = now();
        assert_int_equal(z.d2d - a.d2d, 2);
        assert_int_equal(z.h2d - a.h2d, 0);
        assert_int_equal(z.syncs - a.syncs, 0);
        assert_int_equal(rf_batch_release(b), RF_OK);
        if (si_fetch_hash(dst.img, dst.lab, si_ref_count(0, k), dst.s) != si_ref_hash(0, k))
            fail_msg("batch %d differs from the CPU loader's", k);
    }
    rf_batch *b;
    assert_int_equal(rf_loader_next_device(l, dst.s, &b), RF_END_OF_EPOCH);
    assert_int_equal(rf_loader_set_epoch(l, 1), RF_OK);
    for (int k = 0; k < SI_NB; k++) {
        assert_int_equal(rf_loader_next(l, &b), RF_OK);
        counts a = now();
        assert_int_equal(rf_batch_copy_to(b, dst.img, dst.lab, dst.s), RF_OK);
        counts z = now();
        assert_int_equal(z.h2d - a.h2d, 2);
        assert_int_equal(z.allocs - a.allocs, 0);
        assert_int_equal(z.syncs - a.syncs, 0);
        assert_int_equal(rf_batch_release(b), RF_OK);
        if (si_fetch_hash(dst.img, dst.lab, si_ref_count(1, k), dst.s) != si_ref_hash(1, k))
            fail_msg("epoch 1 batch %d differs from the CPU loader's", k);
    }
    rf_loader_destroy(l);
    si_dst_close(&dst);
}

/* Pinned: the host never waits, however busy the consumer's stream.
 * Pageable: every copy does. */
static void run_busy(int pin, counts *delta)
{
    const rf_cudart *rt = SI.rt;
    cudaStream_t s;
    void *scratch;
    assert_int_equal(rt->StreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(rt->Malloc(&scratch, 1 << 16), cudaSuccess);
    rf_loader *l = si_loader(0, pin, 2);
    counts a = now();
    for (int e = 0; e < SI_EPOCHS; e++) {
        assert_int_equal(rf_loader_set_epoch(l, e), RF_OK);
        for (int k = 0; k < SI_NB; k++) {
            rf_batch *b;
            assert_int_equal(rf_loader_next_device(l, s, &b), RF_OK);
            assert_int_equal(SI.MemsetAsync(scratch, k, 1 << 16, s), cudaSuccess); /* a step */
            assert_int_equal(rf_batch_release(b), RF_OK);
        }
    }
    counts z = now();
    *delta = (counts){z.h2d - a.h2d, z.d2d - a.d2d, z.allocs - a.allocs, z.syncs - a.syncs,
                      z.pageable - a.pageable};
    char js[8192];
    assert_true(rf_loader_stats_json(l, js, sizeof js) > 0);
    assert_non_null(strstr(js, pin ? "\"mode\": \"pinned\"" : "\"mode\": \"pageable\""));
    rf_loader_destroy(l);
    assert_int_equal(rt->StreamSynchronize(s), cudaSuccess);
    rt->Free(scratch);
    rt->StreamDestroy(s);
}

static void test_pinned_never_waits_pageable_does(void **state)
{
    (void)state;
    counts pinned, pageable;
    run_busy(1, &pinned);
    run_busy(0, &pageable);
    print_message("pinned: %lld host waits, %lld pageable copies; pageable: %lld, %lld\n",
                  pinned.syncs, pinned.pageable, pageable.syncs, pageable.pageable);
    assert_int_equal(pinned.h2d, 2 * SI_EPOCHS * SI_NB);
    assert_int_equal(pageable.h2d, 2 * SI_EPOCHS * SI_NB);
    assert_int_equal(pinned.syncs, 0);
    assert_int_equal(pinned.pageable, 0);
    assert_int_equal(pageable.pageable, 2 * SI_EPOCHS * SI_NB);
    assert_true(pageable.syncs >= 2 * SI_EPOCHS * SI_NB);
}
#endif

int main(void)
{
#ifndef RF_HAVE_CUDA
    printf("test_cuda_batch: SKIPPED - built without CUDA\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_per_batch_two_copies_no_allocation_no_wait, si_reset),
        cmocka_unit_test_setup(test_pinned_never_waits_pageable_does, si_reset),
    };
    return si_run("test_cuda_batch", 1, tests, sizeof tests / sizeof tests[0], si_setup,
                  si_teardown);
#endif
}
