/*
 * test_copier.c - the CUDA copier's ordering rules, without a GPU
 * (lib/cuda/copier.c, lib/core/ring.c), on the recording backend of tests/gpufake.c:
 *   - a slot's memory (host block, device buffer) is made with the slot, and
 *     nothing is allocated while batches flow;
 *   - a host slot is not reclaimed while a copy out of it is pending;
 *   - a device buffer is not overwritten before the consumer's release event;
 *   - the consumer's stream waits for the copy (no host sync: the copier never
 *     runs a stream itself, but on errors and at destroy);
 *   - copies into caller memory wait for the caller's stream first;
 *   - a post-copy step runs on the copy stream between the copy and its event.
 * Failures and teardown: test_copier_fail.c. The public API without a device
 * and the runtime's table: test_copier_api.c. Against the stand-in runtime
 * (tests/fake_cudart.c) through the public API: test_cuda*.c.
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

/* Each slot gets a host block and a device buffer when it is made (start,
 * growth), and the loop of lends, copies and releases allocates nothing. */
static void test_slot_memory_made_with_the_slot(void **state)
{
    (void)state;
    gf_fixture fx;
    gf_fx_init(&fx, 2, 1);
    /* One copy stream; an order and a drain event, three per possible slot. */
    assert_int_equal(GF.nstreams, 1);
    assert_int_equal(GF.nevents, 2 + 3 * fx.ring.cap);
    assert_int_equal(GF.dev_allocs, 2);
    assert_int_equal(GF.host_allocs, 2);
    assert_int_equal(fx.ring.npinned, 2);
    assert_int_equal(rf__ring_grow(&fx.ring), 0); /* the dispatcher's growth */
    assert_int_equal(GF.dev_allocs, 3);
    assert_int_equal(GF.host_allocs, 3);
    rf_copier_stats st;
    rf__copier_stats(fx.c, &st);
    assert_int_equal(st.buffers, 3);
    assert_string_equal(st.buffer_note, "");
    /* The labels' staging is in the slot's page-locked block, after the images. */
    int first = GF.ncalls;
    gf_stream *A = gf_stream_new();
    uint8_t dst[GF_SLOT_BYTES];
    for (int b = 0; b < 9; b++) {
        rf_slot *s = gf_fx_lend(&fx, b, b);
        assert_non_null(s);
        void *dev;
        int64_t *lab;
        if (b % 2) {
            assert_int_equal(gf_fx_to_device(&fx, s, A, &dev, &lab), 0);
            assert_non_null(dev);
        } else {
            char err[100];
            assert_int_equal(gf_fx_copy_to(&fx, s, dst, NULL, A, err, sizeof err), 0);
        }
        gf_fx_release(&fx, s);
        gf_run_all();
    }
    assert_int_equal(gf_find_call("dev_alloc", first), -1);
    assert_int_equal(gf_find_call("host_alloc", first), -1);
    gf_fx_free(&fx);
}

/* next_device: the copy is on the copy stream, then an event, then the
 * consumer's stream waits on it; work after that sees the batch. */
static void test_to_device_orders_consumer(void **state)
{
    (void)state;
    gf_fixture fx;
    gf_fx_open(&fx, 2);
    rf_slot *s = gf_fx_lend(&fx, 0, 0xA0);
    int first = GF.ncalls;
    assert_int_equal(gf_fx_send(&fx, s), 0);
    assert_non_null(fx.dev);
    assert_non_null(fx.lab);
    assert_int_equal((uintptr_t)fx.lab % 256, 0);
    /* The calls, in order; the device buffer was made with the slot. */
    int m1 = gf_find_call("memcpy s0", first);
    int m2 = gf_find_call("memcpy s0", m1 + 1);
    int r = gf_find_call("record", first);
    int w = gf_find_call("wait s1", first);
    assert_true(m1 >= 0 && m2 > m1 && r > m2 && w > r);
    assert_int_equal(gf_find_call("dev_alloc", first), -1);
    assert_int_equal(gf_find_call("stream_sync", first), -1); /* no host sync */
    /* The consumer's kernel cannot run before the copy. */
    uint8_t snap[GF_SLOT_BYTES];
    int64_t snaplab[GF_BATCH];
    memset(snap, 0, sizeof snap);
    gf_kernel(fx.A, 1, snap, fx.dev, GF_SLOT_BYTES);
    gf_run(fx.A, GF_MAXQ);
    assert_int_equal(gf_count_runs("s1 kernel 1"), 0);
    gf_run(fx.copy, GF_MAXQ);
    gf_run(fx.A, GF_MAXQ);
    assert_int_equal(gf_count_runs("s1 kernel 1"), 1);
    assert_true(gf_all_bytes(snap, 0xA0, GF_SLOT_BYTES));
    memcpy(snaplab, fx.lab, sizeof snaplab);
    for (int i = 0; i < GF_BATCH; i++)
        assert_int_equal(snaplab[i], i);
    gf_fx_close(&fx, s);
}

/* A released host slot is not claimed again while a copy out of it runs,
 * and its bytes are not touched; once the copy completed it is. */
static void test_host_slot_not_reclaimed_while_copy_pending(void **state)
{
    (void)state;
    gf_fixture fx;
    rf_slot *s0 = gf_fx_open_on_device(&fx, 2, 0x11);
    gf_fx_release(&fx, s0); /* at once, as Python does after its copy */
    assert_int_equal(s0->state, RF_SLOT_FREE);
    assert_int_equal(s0->copy_pending, 1);
    /* The next batch goes to the other slot, the one after finds none. */
    rf_slot *s1 = gf_fx_lend(&fx, 1, 0x22);
    assert_non_null(s1);
    assert_int_not_equal(s1->id, s0->id);
    assert_null(rf__ring_claim(&fx.ring, fx.gen, 2, GF_BATCH));
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 1);
    assert_int_equal(rf__ring_count(&fx.ring, RF_SLOT_FREE), 1);
    assert_true(gf_all_bytes(s0->view.data, 0x11, GF_SLOT_BYTES)); /* untouched */
    /* The consumer's stream running does not complete the copy... */
    gf_run(fx.A, GF_MAXQ);
    assert_null(rf__ring_claim(&fx.ring, fx.gen, 2, GF_BATCH));
    /* ... the copy stream does. */
    gf_run(fx.copy, GF_MAXQ);
    assert_true(gf_all_bytes(fx.dev, 0x11, GF_SLOT_BYTES));
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 1); /* freed now: look again */
    assert_int_equal(s0->copy_pending, 0);
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 0);
    rf_slot *again = gf_fx_lend(&fx, 2, 0x33);
    assert_ptr_equal(again, s0);
    gf_fx_release(&fx, s1);
    gf_fx_close(&fx, again);
}

/* The claim itself asks the copier (no reap before it). */
static void test_claim_queries_copy(void **state)
{
    (void)state;
    gf_fixture fx;
    rf_slot *s = gf_fx_open_on_device(&fx, 1, 1);
    gf_fx_release(&fx, s);
    assert_null(rf__ring_claim(&fx.ring, fx.gen, 1, GF_BATCH));
    gf_run_all();
    assert_ptr_equal(rf__ring_claim(&fx.ring, fx.gen, 1, GF_BATCH), s);
    assert_int_equal(s->copy_pending, 0);
    gf_fx_free(&fx);
}

/* A device buffer is overwritten only after the consumer's release event:
 * a kernel queued on the consumer's stream before the release still sees
 * the old batch, even when the copy stream is run first. */
static void test_device_buffer_waits_for_release(void **state)
{
    (void)state;
    gf_fixture fx;
    gf_fx_open(&fx, 1); /* one slot: batch 1 must reuse batch 0's device buffer */
    rf_slot *s = gf_fx_lend(&fx, 0, 0x5A);
    void *dev0, *dev1;
    int64_t *lab0, *lab1;
    assert_int_equal(gf_fx_to_device(&fx, s, fx.A, &dev0, &lab0), 0);
    gf_run(fx.copy, GF_MAXQ);
    uint8_t snap[GF_SLOT_BYTES];
    int64_t snaplab[GF_BATCH];
    gf_kernel(fx.A, 7, snap, dev0, GF_SLOT_BYTES); /* the training step, not run yet */
    gf_kernel(fx.A, 8, snaplab, lab0, sizeof snaplab);
    gf_fx_release(&fx, s); /* records the release on the consumer's stream, after the kernels */
    int rel = gf_find_call("record", 0);
    while (gf_find_call("record", rel + 1) >= 0)
        rel = gf_find_call("record", rel + 1); /* the last record: the release */
    assert_non_null(strstr(GF.calls[rel], " s1"));
    /* The copy of batch 0 completed: the host slot is free again. */
    rf_slot *s1 = gf_fx_lend(&fx, 1, 0xC3);
    assert_ptr_equal(s1, s);
    int first = GF.ncalls;
    assert_int_equal(gf_fx_to_device(&fx, s1, fx.A, &dev1, &lab1), 0);
    assert_ptr_equal(dev1, dev0);
    /* The copy stream waits for the release before its copy. */
    int w = gf_find_call("wait s0", first);
    int m = gf_find_call("memcpy s0", first);
    assert_true(w >= 0 && m > w);
    /* Run the copy stream first: it stops at the wait, the buffer is intact. */
    int copies = gf_count_runs("s0 copy");
    gf_run(fx.copy, GF_MAXQ);
    assert_int_equal(gf_count_runs("s0 copy"), copies);
    assert_true(gf_all_bytes(dev0, 0x5A, GF_SLOT_BYTES));
    /* The consumer's kernels run, then the copy may go. */
    gf_run(fx.A, GF_MAXQ); /* stops at its wait for the new copy */
    assert_true(gf_all_bytes(snap, 0x5A, GF_SLOT_BYTES));
    for (int i = 0; i < GF_BATCH; i++)
        assert_int_equal(snaplab[i], i);
    gf_run(fx.copy, GF_MAXQ);
    assert_int_equal(gf_count_runs("s0 copy"), copies + 2);
    assert_true(gf_all_bytes(dev1, 0xC3, GF_SLOT_BYTES));
    assert_int_equal(lab1[0], 10);
    gf_fx_close(&fx, s1);
}

/* rf_batch_copy_to of a host batch: the copy stream waits for the caller's
 * stream (the destination may still be in use there), copies, records, and
 * the caller's stream waits for the copy. */
static void test_copy_to_waits_for_caller_stream(void **state)
{
    (void)state;
    gf_fixture fx;
    gf_fx_init(&fx, 2, 1);
    gf_stream *B = gf_stream_new();
    uint8_t dst[GF_SLOT_BYTES];
    int64_t dlab[GF_BATCH];
    uint8_t old[GF_SLOT_BYTES];
    memset(dst, 0xEE, sizeof dst);
    gf_kernel(B, 3, old, dst, GF_SLOT_BYTES); /* the memory's previous user */
    rf_slot *s = gf_fx_lend(&fx, 5, 0x77);
    char err[200];
    int first = GF.ncalls;
    assert_int_equal(gf_fx_copy_to(&fx, s, dst, dlab, B, err, sizeof err), 0);
    int r0 = gf_find_call("record", first);
    int w0 = gf_find_call("wait s0", first);
    int m = gf_find_call("memcpy s0", first);
    int r1 = gf_find_call("record", m);
    int w1 = gf_find_call("wait s1", first);
    assert_true(r0 >= 0 && strstr(GF.calls[r0], " s1") && w0 > r0 && m > w0 && r1 > m && w1 > r1);
    assert_int_equal(gf_find_call("dev_alloc", first), -1); /* no device buffer needed */
    /* Released at once: the host slot waits for the copy. */
    assert_int_equal(rf__ring_release(rf__ring_lease(s)), 0);
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 1);
    gf_run(fx.copy, GF_MAXQ);
    assert_true(gf_all_bytes(dst, 0xEE, GF_SLOT_BYTES)); /* B's kernel has not run */
    gf_run(B, 1);
    assert_true(gf_all_bytes(old, 0xEE, GF_SLOT_BYTES));
    gf_run_all();
    assert_true(gf_all_bytes(dst, 0x77, GF_SLOT_BYTES));
    for (int i = 0; i < GF_BATCH; i++)
        assert_int_equal(dlab[i], 50 + i);
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 1); /* freed now */
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 0);
    gf_fx_free(&fx);
}

/* rf_batch_copy_to of a device batch from another stream: device to device on
 * that stream, and the consumer's stream (where the release is recorded)
 * waits for the read. */
static void test_copy_to_from_device_other_stream(void **state)
{
    (void)state;
    gf_fixture fx;
    gf_fx_open(&fx, 1);
    gf_stream *B = gf_stream_new();
    rf_slot *s = gf_fx_on_device(&fx, 0, 0x42, fx.A, &fx.dev, &fx.lab);
    uint8_t dst[GF_SLOT_BYTES];
    int64_t dlab[GF_BATCH];
    char err[200];
    int first = GF.ncalls;
    assert_int_equal(gf_fx_copy_to(&fx, s, dst, dlab, B, err, sizeof err), 0);
    int w = gf_find_call("wait s2", first);
    int m = gf_find_call("memcpy s2", first);
    int r = gf_find_call("record", m);
    int wa = gf_find_call("wait s1", r);
    assert_true(w >= 0 && m > w && r > m && wa > r);
    assert_int_equal(gf_find_call("memcpy h2d", first), -1);
    gf_fx_release(&fx, s);
    /* Batch 1 into the same buffer must wait for B's read too. */
    gf_run(fx.copy, GF_MAXQ);
    rf_slot *s1 = gf_fx_lend(&fx, 1, 0x99);
    assert_ptr_equal(s1, s);
    assert_int_equal(gf_fx_send(&fx, s1), 0);
    gf_run(fx.copy, GF_MAXQ);
    gf_run(fx.A, GF_MAXQ);
    assert_true(gf_all_bytes(fx.dev, 0x42, GF_SLOT_BYTES)); /* B has not read yet */
    gf_run(B, GF_MAXQ);
    assert_true(gf_all_bytes(dst, 0x42, GF_SLOT_BYTES));
    gf_run_all();
    assert_true(gf_all_bytes(fx.dev, 0x99, GF_SLOT_BYTES));
    gf_fx_release(&fx, s1);
    gf_fx_free(&fx);
}

/* The same stream: no extra event. Partial destinations. */
static void test_copy_to_same_stream_and_partial(void **state)
{
    (void)state;
    gf_fixture fx;
    rf_slot *s = gf_fx_open_on_device(&fx, 2, 0x10);
    uint8_t dst[GF_SLOT_BYTES];
    char err[200] = "";
    int first = GF.ncalls;
    assert_int_equal(gf_fx_copy_to(&fx, s, dst, NULL, fx.A, err, sizeof err), 0);
    assert_int_equal(gf_find_call("record", first), -1);
    assert_int_not_equal(gf_find_call("memcpy s1", first), -1);
    assert_int_equal(gf_find_call("memcpy s1", gf_find_call("memcpy s1", first) + 1), -1);
    assert_int_equal(gf_fx_copy_to(&fx, s, NULL, NULL, fx.A, err, sizeof err), RF_E_INVALID);
    assert_non_null(strstr(err, "no destination"));
    gf_fx_release(&fx, s);
    gf_run_all();
    assert_true(gf_all_bytes(dst, 0x10, GF_SLOT_BYTES));
    gf_fx_free(&fx);
}

/* A short last batch copies only its samples and labels. */
static void test_short_batch_copies_only_its_samples(void **state)
{
    (void)state;
    gf_fixture fx;
    gf_fx_open(&fx, 2);
    rf_slot *s = rf__ring_claim(&fx.ring, fx.gen, 0, 3);
    memset(s->view.data, 0x61, 3 * GF_SAMPLE);
    for (int i = 0; i < 3; i++)
        s->view.labels[i] = 100 + i;
    s->submitted = 3;
    for (int i = 0; i < 3; i++)
        rf__ring_sample_done(s, fx.gen);
    rf__ring_lend(s);
    int first = GF.ncalls;
    assert_int_equal(gf_fx_send(&fx, s), 0);
    assert_int_not_equal(gf_find_call("memcpy s0 48", first), -1);
    assert_int_not_equal(gf_find_call("memcpy s0 24", first), -1);
    gf_run_all();
    assert_int_equal(fx.lab[2], 102);
    rf_copier_stats st;
    rf__copier_stats(fx.c, &st);
    assert_int_equal(st.copies, 1);
    assert_int_equal(st.bytes, 48 + 24);
    gf_fx_release(&fx, s);
    gf_fx_free(&fx);
}

/* Without a copier the ring never waits. */
static void test_ring_without_copier(void **state)
{
    (void)state;
    rf_ring r;
    assert_int_equal(rf__ring_init(&r, 1, 2, 8, 0), 0);
    rf_slot *s = rf__ring_claim(&r, 1, 0, 2);
    s->submitted = 2;
    rf__ring_sample_done(s, 1);
    rf__ring_sample_done(s, 1);
    rf__ring_lend(s);
    rf__ring_mark_copy(s);
    assert_int_equal(rf__ring_release(rf__ring_lease(s)), 0);
    assert_int_equal(rf__ring_reap_copies(&r), 1); /* nothing to wait for: free now */
    assert_int_equal(rf__ring_reap_copies(&r), 0);
    assert_ptr_equal(rf__ring_claim(&r, 1, 1, 2), s);
    rf__ring_free(&r);
}

/* The extension point for work on the device after the copy (a normalising
 * kernel): enqueued on the copy stream after both copies, before the copy's
 * event, so the consumer's stream waits for it too. */
static int step_calls;
static int step(void *arg, int slot, void *stream, void *dev, size_t img_n, int64_t count)
{
    gf_stream *s = stream;
    assert_ptr_equal(arg, &step_calls);
    assert_int_equal(s->id, 0); /* the copy stream */
    assert_int_equal(img_n, GF_SLOT_BYTES);
    assert_int_equal(count, GF_BATCH);
    assert_true(slot >= 0);
    gf_kernel(s, 42, NULL, dev, 0);
    step_calls++;
    return 0;
}

static void test_post_copy_step_before_the_event(void **state)
{
    (void)state;
    gf_fixture fx;
    gf_fx_open(&fx, 2);
    rf__copier_set_step(fx.c, step, &step_calls);
    step_calls = 0;
    rf_slot *s = gf_fx_lend(&fx, 0, 7);
    int first = GF.ncalls;
    assert_int_equal(gf_fx_send(&fx, s), 0);
    assert_int_equal(step_calls, 1);
    int m2 = gf_find_call("memcpy s0", gf_find_call("memcpy s0", first) + 1);
    int k = gf_find_call("kernel 42 s0", first);
    int r = gf_find_call("record", first);
    int w = gf_find_call("wait s1", first);
    assert_true(m2 > 0 && k > m2 && r > k && w > r);
    gf_fx_close(&fx, s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_slot_memory_made_with_the_slot, gf_reset),
        cmocka_unit_test_setup(test_to_device_orders_consumer, gf_reset),
        cmocka_unit_test_setup(test_host_slot_not_reclaimed_while_copy_pending, gf_reset),
        cmocka_unit_test_setup(test_claim_queries_copy, gf_reset),
        cmocka_unit_test_setup(test_device_buffer_waits_for_release, gf_reset),
        cmocka_unit_test_setup(test_copy_to_waits_for_caller_stream, gf_reset),
        cmocka_unit_test_setup(test_copy_to_from_device_other_stream, gf_reset),
        cmocka_unit_test_setup(test_copy_to_same_stream_and_partial, gf_reset),
        cmocka_unit_test_setup(test_short_batch_copies_only_its_samples, gf_reset),
        cmocka_unit_test_setup(test_post_copy_step_before_the_event, gf_reset),
        cmocka_unit_test_setup(test_ring_without_copier, gf_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
