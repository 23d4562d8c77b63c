/*
 * test_copier_fail.c - the CUDA copier when things go wrong, and its
 * teardown, without a GPU (lib/cuda/copier.c, lib/core/ring.c) on the recording backend
 * of tests/gpufake.c:
 *   - a failing call is named, what it enqueued is drained, the next batch works;
 *   - under the loader's mutex (a release, a claim's query) nothing waits on
 *     the host, even when a call fails;
 *   - a copy being enqueued keeps its slot from being claimed, whatever the
 *     lease does meanwhile;
 *   - device out of memory: the slot has no device buffer and its batches go
 *     straight into the caller's memory; one failed pin leaves the other
 *     slots page-locked;
 *   - the drain before the memory is freed waits for the copies and for the
 *     consumer's work on a device batch still lent, and gives up (leaks, with
 *     a message) past its deadline on a stream that never ends.
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

#include "copier.h"
#include "gpufake.h"
#include "ring.h"
#include "ringfeed.h"

static void test_create_failure_frees_everything(void **state)
{
    (void)state;
    char err[256] = "";
    rf_copier *c = (rf_copier *)1;
    GF.fail_name = "event_create";
    GF.fail_call = 5;
    assert_int_equal(rf__copier_create(&c, &gf_ops, NULL, 0, 4, 64, 4, err, sizeof err), RF_E_CUDA);
    assert_null(c);
    assert_non_null(strstr(err, "cudaEventCreateWithFlags"));
    assert_non_null(strstr(err, "fake error 705"));
    for (int i = 0; i < GF.nevents; i++)
        assert_false(GF.events[i].alive);
    assert_false(GF.streams[0].alive);
    assert_int_equal(GF.opens, 0);
    assert_int_equal(GF.cur, -1);
}

/* A failing CUDA call: RF_E_CUDA, the message names the call and the error,
 * what was enqueued is drained, and the next batch works. */
static void test_failed_cuda_call_named_drained_then_recovers(void **state)
{
    (void)state;
    gf_fixture fx;
    gf_fx_open(&fx, 2);
    rf_slot *s = gf_fx_lend(&fx, 0, 0x01);
    GF.fail_name = "memcpy";
    GF.fail_call = 2; /* the labels' copy, after the images' */
    int syncs = GF.syncs;
    assert_int_equal(gf_fx_send(&fx, s), RF_E_CUDA);
    assert_int_equal(GF.syncs, syncs + 1);
    assert_null(fx.dev);
    rf__copier_release(fx.c, s->id); /* not on the device: nothing recorded */
    assert_int_equal(rf__ring_release(rf__ring_lease(s)), 0);
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 1); /* drained: free, look again */
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 0);
    rf_copier_stats st;
    rf__copier_stats(fx.c, &st);
    assert_int_equal(st.errors, 1);
    assert_non_null(strstr(st.last_error, "copier: cudaMemcpyAsync"));
    assert_non_null(strstr(st.last_error, "fake error 702"));
    GF.fail_name = NULL;
    rf_slot *s1 = gf_fx_lend(&fx, 1, 0x02);
    assert_int_equal(gf_fx_send(&fx, s1), 0);
    gf_fx_close(&fx, s1);
}

/* A failed context: the query's error counts as "done" (nothing will run),
 * and the claim, under the loader's mutex, does not wait for anything. */
static void test_failed_event_query_counts_as_done_without_a_wait(void **state)
{
    (void)state;
    gf_fixture fx;
    rf_slot *s = gf_fx_open_on_device(&fx, 1, 0x01);
    gf_fx_release(&fx, s);
    GF.query_error = 999;
    int syncs = GF.syncs;
    assert_ptr_equal(rf__ring_claim(&fx.ring, fx.gen, 1, GF_BATCH), s);
    assert_int_equal(GF.syncs, syncs);
    rf_copier_stats st;
    rf__copier_stats(fx.c, &st);
    assert_int_equal(st.errors, 1);
    assert_non_null(strstr(st.last_error, "cudaEventQuery"));
    gf_fx_free(&fx); /* a failed context: nothing to wait for */
    GF.query_error = 0;
}

/* A release whose event cannot be recorded does not wait there (it runs under
 * the loader's mutex): the next copy into that device buffer waits for the
 * consumer's stream first, on the host, outside it. */
static void test_failed_release_waits_at_the_next_copy(void **state)
{
    (void)state;
    gf_fixture fx;
    rf_slot *s = gf_fx_open_on_device(&fx, 1, 0x31);
    uint8_t snap[GF_SLOT_BYTES];
    gf_kernel(fx.A, 5, snap, fx.dev, GF_SLOT_BYTES); /* the training step, not run yet */
    GF.fail_name = "event_record";
    GF.fail_call = 1;
    int syncs = GF.syncs;
    gf_fx_release(&fx, s);
    assert_int_equal(GF.syncs, syncs);
    GF.fail_name = NULL;
    gf_run(fx.copy, GF_MAXQ);
    rf_slot *s1 = gf_fx_lend(&fx, 1, 0x32);
    assert_ptr_equal(s1, s);
    int first = GF.ncalls;
    assert_int_equal(gf_fx_send(&fx, s1), 0);
    int sync = gf_find_call("stream_sync s1", first);
    assert_true(sync >= 0 && gf_find_call("memcpy s0", first) > sync);
    assert_true(gf_all_bytes(snap, 0x31, GF_SLOT_BYTES)); /* the step saw its batch */
    gf_fx_close(&fx, s1);
}

/* A copy being enqueued (rf__ring_copy_begin, as rf_batch_copy_to does in the
 * critical section of its lease check) keeps the slot from being claimed even
 * if another thread releases the batch meanwhile and copy_done says done (its
 * event is not recorded yet); once enqueued, until the copy completed. */
static void test_copy_being_enqueued_keeps_the_slot(void **state)
{
    (void)state;
    gf_fixture fx;
    gf_fx_open(&fx, 1);
    rf_slot *s = gf_fx_lend(&fx, 0, 0x41);
    rf_batch *h = rf__ring_lease(s);
    assert_int_equal(rf__ring_copy_begin(h), 0);
    assert_int_equal(rf__ring_release(h), 0); /* another thread's release */
    assert_int_equal(rf__ring_copy_begin(h), RF_E_RELEASED);
    assert_null(rf__ring_claim(&fx.ring, fx.gen, 1, GF_BATCH));
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 1); /* the dispatcher keeps polling */
    uint8_t dst[GF_SLOT_BYTES];
    char err[100];
    assert_int_equal(rf__copier_copy_to(fx.c, s->id, s->view.data, s->view.nbytes, s->view.labels,
                                        s->view.count, dst, NULL, fx.A, err, sizeof err),
                     0);
    rf__ring_copy_end(s);
    assert_null(rf__ring_claim(&fx.ring, fx.gen, 1, GF_BATCH)); /* the copy runs */
    gf_run_all();
    assert_true(gf_all_bytes(dst, 0x41, GF_SLOT_BYTES));
    assert_ptr_equal(rf__ring_claim(&fx.ring, fx.gen, 1, GF_BATCH), s);
    gf_fx_free(&fx);
}

/* Device out of memory when slots are made: no device buffer, said in the
 * stats; rf__copier_to_device leaves the batch on the host (NULL), and
 * rf_batch_copy_to's copy from the host block into caller memory works. */
static void test_device_oom_slots_go_direct(void **state)
{
    (void)state;
    GF.dev_oom = 1;
    gf_fixture fx;
    gf_fx_open(&fx, 2);
    rf_copier_stats st;
    rf__copier_stats(fx.c, &st);
    assert_int_equal(st.buffers, 0);
    assert_int_equal(st.errors, 0); /* out of memory is not an error: a fallback */
    assert_non_null(strstr(st.buffer_note, "has no device buffer"));
    assert_non_null(strstr(st.buffer_note, "fake out of memory"));
    assert_int_equal(fx.ring.npinned, 2);
    rf_slot *s = gf_fx_lend(&fx, 0, 0x51);
    fx.dev = (void *)1;
    fx.lab = (int64_t *)1;
    int first = GF.ncalls;
    assert_int_equal(gf_fx_send(&fx, s), 0);
    assert_null(fx.dev);
    assert_null(fx.lab);
    assert_int_equal(gf_find_call("memcpy", first), -1);
    uint8_t dst[GF_SLOT_BYTES];
    int64_t dlab[GF_BATCH];
    char err[100];
    assert_int_equal(gf_fx_copy_to(&fx, s, dst, dlab, fx.A, err, sizeof err), 0);
    gf_fx_release(&fx, s);
    gf_run_all();
    assert_true(gf_all_bytes(dst, 0x51, GF_SLOT_BYTES));
    assert_int_equal(dlab[3], 3);
    rf__copier_stats(fx.c, &st);
    assert_int_equal(st.direct, 1);
    assert_int_equal(st.copies, 1);
    gf_fx_free(&fx);
}

/* Each slot is pinned on its own: when page-locked memory runs out at the
 * second slot, the first stays page-locked and the note says how many are not. */
static void test_one_failed_pin_leaves_the_others_pinned(void **state)
{
    (void)state;
    GF.host_oom_from = 2;
    gf_fixture fx;
    gf_fx_init(&fx, 3, 1);
    assert_int_equal(fx.ring.npinned, 1);
    assert_int_equal(fx.ring.pinned, 1);
    assert_non_null(strstr(fx.ring.note, "2 of 3 slots pageable, slot 1: cudaHostAlloc("));
    assert_non_null(strstr(fx.ring.note, "fake out of memory"));
    for (int b = 0; b < 3; b++) { /* every slot works, pinned or not */
        rf_slot *s = gf_fx_lend(&fx, b, 0x60 + b);
        void *dev;
        int64_t *lab;
        gf_stream *A = gf_stream_new();
        assert_int_equal(gf_fx_to_device(&fx, s, A, &dev, &lab), 0);
        gf_run_all();
        assert_true(gf_all_bytes(dev, 0x60 + b, GF_SLOT_BYTES));
        gf_fx_release(&fx, s);
    }
    gf_run_all();
    gf_fx_free(&fx);
}

/* Destroy with copies queued: the drain waits for them, then everything is
 * freed (gf_fx_free checks no op still names freed memory). */
static void test_drain_waits_for_queued_copies(void **state)
{
    (void)state;
    gf_fixture fx;
    rf_slot *s = gf_fx_open_on_device(&fx, 2, 0x01);
    gf_fx_release(&fx, s);
    int before = gf_count_runs("s0 copy");
    gf_fx_free(&fx);
    assert_int_equal(gf_count_runs("s0 copy"), before + 2);
}

/* A device batch still lent at destroy: the consumer's work queued before it
 * may read the buffer; the drain records the release on the consumer's
 * stream and waits for it before the buffer is freed. */
static void test_drain_waits_for_a_lent_device_batch(void **state)
{
    (void)state;
    gf_fixture fx;
    (void)gf_fx_open_on_device(&fx, 1, 0x77);
    uint8_t snap[GF_SLOT_BYTES];
    memset(snap, 0, sizeof snap);
    gf_kernel(fx.A, 9, snap, fx.dev, GF_SLOT_BYTES); /* not released: the loader goes first */
    int first = GF.ncalls;
    gf_fx_free(&fx); /* fails if the buffer is freed with the kernel queued */
    assert_true(gf_find_call("record", first) >= 0);
    assert_int_equal(gf_count_runs("s1 kernel 9"), 1);
    assert_true(gf_all_bytes(snap, 0x77, GF_SLOT_BYTES));
}

/* A stream that never ends: the drain gives up at its deadline, says so, and
 * leaves the memory allocated (the copier is kept, reachable, on purpose). */
static void test_drain_deadline_leaks_instead_of_hanging(void **state)
{
    (void)state;
    gf_fixture fx;
    rf_slot *s = gf_fx_open_on_device(&fx, 1, 0x21);
    gf_fx_release(&fx, s);
    fx.copy->stuck = 1;
    int saved = rf__copier_drain_ms;
    rf__copier_drain_ms = 50;
    GF.query_runs = 1;
    assert_int_equal(rf__copier_drain(fx.c), -1);
    assert_int_equal(rf__copier_drain(fx.c), -1); /* idempotent */
    rf__ring_free(&fx.ring);
    rf__copier_destroy(fx.c);
    rf__copier_drain_ms = saved;
    GF.query_runs = 0;
    assert_int_equal(GF.dev_allocs, 1); /* left allocated */
    assert_int_equal(GF.host_allocs, 1);
    assert_true(GF.streams[0].alive);
    assert_int_equal(GF.cur, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_create_failure_frees_everything, gf_reset),
        cmocka_unit_test_setup(test_failed_cuda_call_named_drained_then_recovers, gf_reset),
        cmocka_unit_test_setup(test_failed_event_query_counts_as_done_without_a_wait, gf_reset),
        cmocka_unit_test_setup(test_failed_release_waits_at_the_next_copy, gf_reset),
        cmocka_unit_test_setup(test_copy_being_enqueued_keeps_the_slot, gf_reset),
        cmocka_unit_test_setup(test_device_oom_slots_go_direct, gf_reset),
        cmocka_unit_test_setup(test_one_failed_pin_leaves_the_others_pinned, gf_reset),
        cmocka_unit_test_setup(test_drain_waits_for_queued_copies, gf_reset),
        cmocka_unit_test_setup(test_drain_waits_for_a_lent_device_batch, gf_reset),
        cmocka_unit_test_setup(test_drain_deadline_leaks_instead_of_hanging, gf_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
