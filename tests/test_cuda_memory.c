/*
 * test_cuda_memory.c - where a CUDA loader's memory comes from and where its
 * copies may go, through the public API:
 *   - nothing is allocated in the training loop: each slot's device buffer
 *     and page-locked label staging are made when the slot is (start, or the
 *     dispatcher's growth), never at a batch, on the consumer's thread;
 *   - device out of memory: the slots have no device buffer, the stats say
 *     so, rf_loader_next_device lends the batch on the host and
 *     rf_batch_copy_to copies it straight into the caller's memory;
 *   - page-locked memory runs out after the first slot: that slot stays
 *     page-locked, the others are pageable, and the stats say how many;
 *   - rf_batch_copy_to into page-locked host and managed memory (the header
 *     allows them: the copies are cudaMemcpyDefault).
 * Batches are the CPU loader's throughout.
 *
 * Against the stand-in runtime (CTest: test_cuda_memory_fake), whose counters
 * and limits these need; skipped on a real runtime.
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

#include "loader.h"
#include "ringfeed.h"
#include "standin.h"
#include "testcheck.h"

#ifdef RF_HAVE_CUDA
/* One epoch on stream s: next_device (odd batches: next) and copy_to into
 * dst (device memory), checked against the reference; released at once. */
static void epoch(rf_loader *l, int e, cudaStream_t s, void *dimg, int64_t *dlab)
{
    assert_int_equal(rf_loader_set_epoch(l, e), RF_OK);
    for (int k = 0; k < SI_NB; k++) {
        rf_batch *b = NULL;
        int rc = k % 2 ? rf_loader_next(l, &b) : rf_loader_next_device(l, s, &b);
        if (rc != RF_OK)
            fail_msg("epoch %d batch %d: %d %s", e, k, rc, rf_loader_errmsg(l));
        rc = rf_batch_copy_to(b, dimg, dlab, s);
        if (rc != RF_OK)
            fail_msg("copy_to: %d %s", rc, rf_loader_errmsg(l));
        assert_int_equal(rf_batch_release(b), RF_OK);
        if (si_fetch_hash(dimg, dlab, si_ref_count(e, k), s) != si_ref_hash(e, k))
            fail_msg("epoch %d batch %d differs from the CPU loader's", e, k);
    }
}

static void test_nothing_allocated_in_the_loop(void **state)
{
    (void)state;
    si_dst dst;
    si_dst_open(&dst, 1);
    (void)si_fetch_hash(dst.img, dst.lab, 0, dst.s); /* its buffers, made once */
    rf_loader *l = si_loader(0, 1, 2);
    long long mine = SI.get("thread_allocs", 0);
    long long all = SI.get("allocs", 0);
    epoch(l, 0, dst.s, dst.img, dst.lab);
    /* The ring grows on the dispatcher (as the tuner asks it to). */
    pthread_mutex_lock(&l->mu);
    rf__dispatch_set_prefetch(&l->disp, 4);
    pthread_mutex_unlock(&l->mu);
    epoch(l, 1, dst.s, dst.img, dst.lab);
    char js[8192];
    assert_true(rf_loader_stats_json(l, js, sizeof js) > 0);
    int64_t k = tu_stats_int(js, "prefetch");
    assert_int_equal(SI.get("thread_allocs", 0) - mine, 0);
    /* The slots the dispatcher added: a page-locked block and a device buffer each. */
    assert_int_equal(SI.get("allocs", 0) - all, 2 * (k - 2));
    assert_non_null(strstr(js, "\"buffer_note\": \"\""));
    rf_loader_destroy(l);
    si_dst_close(&dst);
}

/* The device has no room for the ring's buffers: the loader still runs,
 * says why, and its batches go straight into the caller's memory. */
static void test_device_out_of_memory_copies_straight_to_the_caller(void **state)
{
    (void)state;
    si_dst dst;
    si_dst_open(&dst, 0);
    SI.set("device_memory", SI.get("dev_used", 0) + 1024); /* full */
    rf_loader *l = si_loader(0, 1, 2);
    for (int e = 0; e < SI_EPOCHS; e++) {
        assert_int_equal(rf_loader_set_epoch(l, e), RF_OK);
        for (int k = 0; k < SI_NB; k++) {
            rf_batch *b = NULL;
            int rc = rf_loader_next_device(l, NULL, &b);
            if (rc != RF_OK)
                fail_msg("next_device: %d %s", rc, rf_loader_errmsg(l));
            assert_null(rf_batch_device_data(b)); /* on the host */
            assert_null(rf_batch_device_labels(b));
            assert_int_equal(rf_batch_copy_to(b, dst.img, dst.lab, NULL), RF_OK);
            assert_int_equal(rf_batch_release(b), RF_OK);
            if (si_fetch_hash(dst.img, dst.lab, si_ref_count(e, k), NULL) != si_ref_hash(e, k))
                fail_msg("epoch %d batch %d differs from the CPU loader's", e, k);
        }
    }
    char js[8192];
    assert_true(rf_loader_stats_json(l, js, sizeof js) > 0);
    print_message("%.400s\n", strstr(js, "\"cuda\""));
    assert_non_null(strstr(js, "has no device buffer (cudaMalloc("));
    assert_non_null(strstr(js, "out of memory"));
    assert_int_equal(tu_stats_int(js, "direct_copies"), SI_EPOCHS * SI_NB);
    assert_int_equal(tu_stats_int(js, "errors"), 0);
    rf_loader_destroy(l);
    SI.set("device_memory", 0);
    si_dst_close(&dst);
}

/* Page-locked memory for one slot only: the ring is not all pageable. */
static void test_one_failed_pin_leaves_the_other_slots_pinned(void **state)
{
    (void)state;
    size_t block = ((SI_BATCH_BYTES + 255) & ~(size_t)255) + SI_BATCH * 8;
    SI.set("pinned_memory", SI.get("pin_used", 0) + block + block / 2);
    rf_loader *l = si_loader(0, 1, 3);
    SI.set("pinned_memory", 0);
    int host = 0, pageable = 0;
    for (int k = 0; k < SI_NB; k++) {
        rf_batch *b;
        assert_int_equal(rf_loader_next_device(l, NULL, &b), RF_OK);
        struct cudaPointerAttributes at;
        assert_int_equal(SI.PointerGetAttributes(&at, rf_batch_data(b)), cudaSuccess);
        host += at.type == cudaMemoryTypeHost;
        pageable += at.type == cudaMemoryTypeUnregistered;
        assert_int_equal(rf_batch_release(b), RF_OK);
    }
    assert_true(host > 0 && pageable > 0);
    char js[8192];
    assert_true(rf_loader_stats_json(l, js, sizeof js) > 0);
    print_message("%.200s\n", strstr(js, "\"memory\""));
    assert_non_null(strstr(js, "\"mode\": \"pinned\""));
    assert_non_null(strstr(js, "2 of 3 slots pageable"));
    rf_loader_destroy(l);
}

/* rf_batch_copy_to into page-locked host memory and into managed memory, of
 * host batches and of device batches. */
static void test_copy_to_page_locked_and_managed_memory(void **state)
{
    (void)state;
    const rf_cudart *rt = SI.rt;
    void *img[2];
    int64_t *lab[2];
    assert_int_equal(rt->HostAlloc(&img[0], SI_BATCH_BYTES, cudaHostAllocDefault), cudaSuccess);
    assert_int_equal(rt->HostAlloc((void **)&lab[0], SI_BATCH * 8, cudaHostAllocDefault),
                     cudaSuccess);
    assert_int_equal(SI.MallocManaged(&img[1], SI_BATCH_BYTES, cudaMemAttachGlobal), cudaSuccess);
    assert_int_equal(SI.MallocManaged((void **)&lab[1], SI_BATCH * 8, cudaMemAttachGlobal),
                     cudaSuccess);
    rf_loader *l = si_loader(0, 1, 2);
    for (int k = 0; k < SI_NB; k++) {
        rf_batch *b;
        int rc = k % 2 ? rf_loader_next(l, &b) : rf_loader_next_device(l, NULL, &b);
        assert_int_equal(rc, RF_OK);
        for (int m = 0; m < 2; m++) {
            memset(img[m], 0, SI_BATCH_BYTES);
            rc = rf_batch_copy_to(b, img[m], lab[m], NULL);
            if (rc != RF_OK)
                fail_msg("copy_to into %s memory: %d %s", m ? "managed" : "page-locked", rc,
                         rf_loader_errmsg(l));
            assert_int_equal(rt->StreamSynchronize(NULL), cudaSuccess);
            if (si_hash(img[m], lab[m], si_ref_count(0, k)) != si_ref_hash(0, k))
                fail_msg("batch %d in %s memory differs", k, m ? "managed" : "page-locked");
        }
        assert_int_equal(rf_batch_release(b), RF_OK);
    }
    rf_loader_destroy(l);
    rt->FreeHost(img[0]);
    rt->FreeHost(lab[0]);
    rt->Free(img[1]);
    rt->Free(lab[1]);
}
#endif

int main(void)
{
#ifndef RF_HAVE_CUDA
    printf("test_cuda_memory: SKIPPED - built without CUDA\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_nothing_allocated_in_the_loop, si_reset),
        cmocka_unit_test_setup(test_device_out_of_memory_copies_straight_to_the_caller, si_reset),
        cmocka_unit_test_setup(test_one_failed_pin_leaves_the_other_slots_pinned, si_reset),
        cmocka_unit_test_setup(test_copy_to_page_locked_and_managed_memory, si_reset),
    };
    return si_run("test_cuda_memory", 1, tests, sizeof tests / sizeof tests[0], si_setup,
                  si_teardown);
#endif
}
