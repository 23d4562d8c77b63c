/*
 * test_cuda_grow.c - the ring grown by the dispatcher on a CUDA loader (the
 * tuner asks for more prefetch; lib/core/dispatch.c allocates each new slot on
 * its own thread): the grown slots' page-locked memory belongs to the
 * loader's device, not to device 0 (the dispatcher's thread binds the
 * loader's device before it allocates); a grown slot that cannot be pinned
 * becomes pageable memory, said in stats' memory.note; the batches are the
 * CPU loader's either way.
 *
 * Growth is asked for directly, as tuner_window does (lib/core/consume.c): the
 * test includes the internal loader.h. Which device page-locked memory
 * belongs to is read back with cudaPointerGetAttributes from the runtime the
 * library loaded (as test_cuda.c does). Under CTest's test_cuda_grow_fake
 * the runtime is tests/fake_cudart.c with two devices (FAKE_CUDART_DEVICES=2),
 * and the unpinnable slots are made by its "pinned_memory" limit, set to
 * what the first ring holds; on a real runtime the first test needs two GPUs
 * and the second the stand-in's knobs, else each skips.
 *
 * Exits 77 (CTest: skipped) without a CUDA device.
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
#include "testutil.h"

#ifdef RF_HAVE_CUDA
#include "cudart.h"
#include "loader.h"
#include "standin.h"
#include "testcheck.h"

/* The stand-in's knobs (tests/fake_cudart.c); NULL on a real runtime. */

#define CLASSES 2
#define PER_CLASS 20
#define BATCH 2
#define SIZE 32
#define NB (CLASSES * PER_CLASS / BATCH)
#define EPOCHS 2
#define PREFETCH 2
#define GROWN (PREFETCH + RF_RING_MAX_GROW)
#define HOLD 12 /* batches held lent at once: more slots than the first ring */
#define SLOT_BYTES ((size_t)BATCH * SIZE * SIZE * 3)

static char *root;
static uint64_t ref[EPOCHS][NB]; /* the CPU loader's batches */

static rf_loader *make(int device)
{
    return TU_LOADER(root, {RF_P_BATCH_SIZE, BATCH}, {RF_P_IMAGE_SIZE, SIZE},
                     {RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP}, {RF_P_FLIP, 1},
                     {RF_P_SEED, 5}, {RF_P_NUM_WORKERS, 2}, {RF_P_PREFETCH, PREFETCH},
                     {RF_P_DEVICE, device}, {RF_P_PIN_MEMORY, 1});
}

static int setup(void **state)
{
    (void)state;
    root = tu_tempdir("cuda_grow");
    if (!root || tu_make_folder(root, CLASSES, PER_CLASS, 70, 50, 3) != 0)
        return -1;
    rf_loader *l = make(-1);
    if (rf_loader_start(l) != RF_OK)
        return -1;
    for (int e = 0; e < EPOCHS; e++) {
        rf_loader_set_epoch(l, e);
        for (int k = 0; k < NB; k++) {
            rf_batch *b;
            if (rf_loader_next(l, &b) != RF_OK)
                return -1;
            ref[e][k] = tu_batch_hash(TU_FNV_INIT, b);
            rf_batch_release(b);
        }
    }
    rf_loader_destroy(l);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    free(root);
    return 0;
}

/* The stats of a running loader (their length changes from call to call:
 * one call into a buffer large enough). */
static void stats(rf_loader *l, char *js, size_t cap)
{
    int64_t n = rf_loader_stats_json(l, js, cap);
    assert_true(n > 0 && (size_t)n < cap);
}

/* Asks the dispatcher for the largest ring and waits until it is there. */
static void grow_ring(rf_loader *l)
{
    pthread_mutex_lock(&l->mu);
    rf__dispatch_set_prefetch(&l->disp, GROWN);
    pthread_mutex_unlock(&l->mu);
    int64_t k = 0;
    char js[16384];
    for (int i = 0; i < 5000; i++) {
        stats(l, js, sizeof js);
        k = tu_stats_int(js, "prefetch");
        if (k == GROWN)
            break;
        usleep(1000);
    }
    assert_int_equal(k, GROWN);
}

typedef struct seen {
    const void *p[GROWN + 1];
    int n;
    int host;         /* batches whose host memory is page-locked */
    int unregistered; /* batches in pageable memory */
} seen;

/* Checks one batch against the reference and where its memory lives. */
static void check_batch(rf_batch *b, int epoch, int device, seen *sn)
{
    int64_t k = rf_batch_index(b);
    assert_true(k >= 0 && k < NB);
    if (tu_batch_hash(TU_FNV_INIT, b) != ref[epoch][k])
        fail_msg("epoch %d batch %lld differs from the CPU loader's", epoch, (long long)k);
    const void *p = rf_batch_data(b);
    int i;
    for (i = 0; i < sn->n && sn->p[i] != p; i++)
        ;
    if (i == sn->n) {
        assert_true(sn->n <= GROWN);
        sn->p[sn->n++] = p;
    }
    struct cudaPointerAttributes at;
    assert_int_equal(SI.PointerGetAttributes(&at, p), cudaSuccess);
    if (at.type == cudaMemoryTypeHost) {
        sn->host++;
        if (at.device != device)
            fail_msg("epoch %d batch %lld: its page-locked slot belongs to device %d, the "
                     "loader's device is %d",
                     epoch, (long long)k, at.device, device);
    } else {
        assert_int_equal(at.type, cudaMemoryTypeUnregistered);
        sn->unregistered++;
    }
    const void *d = rf_batch_device_data(b);
    if (d) {
        assert_int_equal(SI.PointerGetAttributes(&at, d), cudaSuccess);
        assert_int_equal(at.type, cudaMemoryTypeDevice);
        assert_int_equal(at.device, device);
    }
}

/* Grows the ring of a loader on `device` after its first batch, then reads
 * both epochs holding up to HOLD batches lent (so that grown slots are lent),
 * every other one through rf_loader_next_device. */
static void run_grown(int device, seen *sn, int limit_pins)
{
    rf_loader *l = make(device);
    tu_start(l);
    rf_batch *held[HOLD];
    int nheld = 0;
    for (int e = 0; e < EPOCHS; e++) {
        assert_int_equal(rf_loader_set_epoch(l, e), RF_OK);
        for (int k = 0; k < NB; k++) {
            if (nheld == HOLD) {
                assert_int_equal(rf_batch_release(held[0]), RF_OK);
                memmove(held, held + 1, (HOLD - 1) * sizeof *held);
                nheld--;
            }
            rf_batch *b = NULL;
            int rc = k % 2 ? rf_loader_next_device(l, NULL, &b) : rf_loader_next(l, &b);
            if (rc != RF_OK)
                fail_msg("epoch %d batch %d: %d %s", e, k, rc, rf_loader_errmsg(l));
            int cur = -1;
            assert_int_equal(SI.rt->GetDevice(&cur), cudaSuccess);
            assert_int_equal(cur, 0); /* the caller's device is left alone */
            check_batch(b, e, device, sn);
            held[nheld++] = b;
            if (e == 0 && k == 0) {
                if (limit_pins) /* no page-locked memory beyond the first ring's */
                    SI.set("pinned_memory", SI.get("pin_used", 0));
                grow_ring(l);
                if (limit_pins)
                    SI.set("pinned_memory", 0);
            }
        }
        while (nheld > 0)
            assert_int_equal(rf_batch_release(held[--nheld]), RF_OK);
        rf_batch *b;
        assert_int_equal(rf_loader_next(l, &b), RF_END_OF_EPOCH);
    }
    char js[16384];
    stats(l, js, sizeof js);
    const char *mem = strstr(js, "\"memory\"");
    assert_non_null(mem);
    print_message("%.300s\n", mem);
    assert_int_equal(tu_stats_int(js, "prefetch"), GROWN);
    assert_non_null(strstr(js, "\"mode\": \"pinned\""));
    if (sn->unregistered == 0)
        assert_non_null(strstr(js, "\"note\": \"\"")); /* every slot pinned: nothing to say */
    else if (!strstr(js, "pageable: cudaHostAlloc") || !strstr(js, "out of memory"))
        fail_msg("the memory note does not say a grown slot could not be pinned: %.300s", mem);
    rf_loader_destroy(l);
    assert_true(sn->n > HOLD); /* grown slots were lent */
}

/* On device 1, the slots the dispatcher adds are page-locked for device 1. */
static void test_grown_slots_on_loader_device(void **state)
{
    (void)state;
    if (rf_cuda_device_count() < 2) {
        print_message("needs two CUDA devices\n");
        skip();
    }
    seen sn = {0};
    run_grown(1, &sn, 0);
    assert_int_equal(sn.unregistered, 0);
    assert_int_equal(sn.host, EPOCHS * NB);
}

/* A grown slot that cannot be pinned is pageable, and the note says so. */
static void test_grown_slot_not_pinned(void **state)
{
    (void)state;
    int device = rf_cuda_device_count() - 1;
    if (!SI.get || !SI.set) {
        print_message("needs the stand-in runtime's pinned_memory limit\n");
        skip();
    }
    seen sn = {0};
    run_grown(device, &sn, 1);
    assert_true(sn.unregistered > 0);
    assert_true(sn.host > 0); /* the first ring's slots stay page-locked */
}
#endif /* RF_HAVE_CUDA */

int main(void)
{
#ifndef RF_HAVE_CUDA
    printf("test_cuda_grow: SKIPPED - built without CUDA\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grown_slots_on_loader_device),
        cmocka_unit_test(test_grown_slot_not_pinned),
    };
    return si_run("test_cuda_grow", 0, tests, sizeof tests / sizeof tests[0], setup, teardown);
#endif
}
