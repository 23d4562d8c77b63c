/*
 * test_ring.c - batch slot memory and the slot state machine (lib/core/ring.c).
 *
 * FREE -> FILLING (claim) -> READY (last sample done) -> LENT (lend) -> FREE
 * (release), plus the generation rules used when the loader seeks or changes
 * epoch: slots of an older generation are dropped, but a FILLING slot waits
 * for the samples already handed to the reader before it is free again.
 * Also: growing the ring by a slot, and a slot whose memory a device copy is
 * still reading (copy_pending) staying unclaimable until the copy is done.
 *
 * Self-contained: links lib/ and cmocka; no files, no threads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ring.h"
#include "ringfeed.h"

/* ----------------------------------------------------------------- helpers */

static void init_ok(rf_ring *r, int k, int64_t batch, size_t sample_bytes)
{
    assert_int_equal(rf__ring_init(r, k, batch, sample_bytes, 0), 0);
}

static void assert_counts(const rf_ring *r, int nfree, int filling, int ready, int lent)
{
    assert_int_equal(rf__ring_count(r, RF_SLOT_FREE), nfree);
    assert_int_equal(rf__ring_count(r, RF_SLOT_FILLING), filling);
    assert_int_equal(rf__ring_count(r, RF_SLOT_READY), ready);
    assert_int_equal(rf__ring_count(r, RF_SLOT_LENT), lent);
}

/* Claims, finishes every sample and returns the READY slot. */
static rf_slot *fill(rf_ring *r, int64_t gen, int64_t batch, int64_t count)
{
    rf_slot *s = rf__ring_claim(r, gen, batch, count);
    assert_non_null(s);
    s->submitted = count;
    for (int64_t i = 0; i < count; i++)
        assert_int_equal(rf__ring_sample_done(s, gen), i == count - 1);
    assert_int_equal(s->state, RF_SLOT_READY);
    return s;
}

/* ------------------------------------------------------------------- tests */

static void test_slots_own_disjoint_aligned_memory(void **state)
{
    (void)state;
    static const struct {
        int k;
        int64_t batch;
        size_t sample;
    } cases[] = {{1, 1, 1}, {4, 3, 100}, {3, 32, 224 * 224 * 3}, {7, 5, 1}, {2, 2, 4097}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        rf_ring r;
        int k = cases[t].k;
        int64_t b = cases[t].batch;
        size_t sb = cases[t].sample, per = (size_t)b * sb;
        init_ok(&r, k, b, sb);
        assert_int_equal(r.k, k);
        assert_int_equal(r.batch_size, b);
        assert_int_equal(r.sample_bytes, sb);
        assert_int_equal(r.mem_bytes, (size_t)k * per);
        assert_int_equal(r.pinned, 0);
        assert_int_equal(r.npinned, 0);
        assert_non_null(r.mem);
        assert_counts(&r, k, 0, 0, 0);
        for (int i = 0; i < k; i++) {
            rf_slot *s = &r.slots[i];
            assert_int_equal(s->id, i);
            assert_int_equal(s->state, RF_SLOT_FREE);
            assert_ptr_equal(s->view.slot, s);
            /* Slot i owns its block mem[i] (disjoint: checked below),
             * aligned for vector stores. */
            assert_ptr_equal(s->view.data, r.mem[i]);
            assert_int_equal((uintptr_t)r.mem[i] % 64, 0);
            assert_int_equal(r.mem_pinned[i], 0);
            assert_ptr_equal(s->view.labels, r.labels + (size_t)i * (size_t)b);
            assert_ptr_equal(s->view.samples, r.samples + (size_t)i * (size_t)b);
            /* Every byte is writable (ASan checks the bounds). */
            memset(s->view.data, 0x10 + i, per);
            for (int64_t j = 0; j < b; j++) {
                s->view.labels[j] = i * 1000 + j;
                s->view.samples[j] = -(i * 1000 + j);
            }
        }
        /* No slot's writes landed in another's. */
        for (int i = 0; i < k; i++) {
            const uint8_t *d = r.slots[i].view.data;
            for (size_t j = 0; j < per; j++)
                if (d[j] != (uint8_t)(0x10 + i))
                    fail_msg("slot %d byte %zu overwritten", i, j);
            for (int64_t j = 0; j < b; j++) {
                assert_int_equal(r.slots[i].view.labels[j], i * 1000 + j);
                assert_int_equal(r.slots[i].view.samples[j], -(i * 1000 + j));
            }
        }
        rf__ring_free(&r);
        assert_null(r.mem);
        assert_null(r.slots);
        rf__ring_free(&r); /* twice is harmless */
    }
}

static void test_pin_without_cuda(void **state)
{
    (void)state;
    rf_ring r;
    assert_int_equal(rf__ring_init(&r, 2, 4, 16, 1), 0);
#ifndef RF_HAVE_CUDA
    /* Pinning asked for but impossible: pageable memory, and a note says why. */
    assert_int_equal(r.pinned, 0);
    assert_true(strlen(r.note) > 0);
#endif
    for (int i = 0; i < r.k; i++)
        memset(r.slots[i].view.data, 0xff, (size_t)r.batch_size * r.sample_bytes);
    rf__ring_free(&r);
}

static void test_claim_in_order(void **state)
{
    (void)state;
    rf_ring r;
    init_ok(&r, 3, 4, 8);
    rf_slot *a = rf__ring_claim(&r, 7, 0, 4);
    rf_slot *b = rf__ring_claim(&r, 7, 1, 4);
    rf_slot *c = rf__ring_claim(&r, 7, 2, 2); /* short last batch */
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_int_equal(a->id, 0);
    assert_int_equal(b->id, 1);
    assert_int_equal(c->id, 2);
    assert_null(rf__ring_claim(&r, 7, 3, 4)); /* none free */
    assert_counts(&r, 0, 3, 0, 0);

    assert_int_equal(a->state, RF_SLOT_FILLING);
    assert_int_equal(a->gen, 7);
    assert_int_equal(a->batch, 0);
    assert_int_equal(a->count, 4);
    assert_int_equal(a->pending, 4);
    assert_int_equal(a->submitted, 0);
    assert_int_equal(a->errcode, 0);
    assert_int_equal(a->view.count, 4);
    assert_int_equal(a->view.index, 0);
    assert_int_equal(a->view.nbytes, 4 * 8);
    assert_int_equal(c->count, 2);
    assert_int_equal(c->pending, 2);
    assert_int_equal(c->view.count, 2);
    assert_int_equal(c->view.index, 2);
    assert_int_equal(c->view.nbytes, 2 * 8);

    /* A freed slot is taken again by the next claim, whichever it is. */
    b->submitted = 4;
    for (int i = 0; i < 4; i++)
        rf__ring_sample_done(b, 7);
    rf__ring_lend(b);
    assert_int_equal(rf__ring_release(rf__ring_lease(b)), 0);
    assert_counts(&r, 1, 2, 0, 0);
    rf_slot *d = rf__ring_claim(&r, 7, 3, 1);
    assert_ptr_equal(d, b);
    assert_int_equal(d->batch, 3);
    assert_int_equal(d->count, 1);
    assert_int_equal(d->view.nbytes, 8);
    assert_null(rf__ring_claim(&r, 7, 4, 1));
    rf__ring_free(&r);
}

static void test_ready_only_on_last_sample(void **state)
{
    (void)state;
    rf_ring r;
    init_ok(&r, 2, 5, 4);
    rf_slot *s = rf__ring_claim(&r, 1, 0, 5);
    assert_non_null(s);
    s->submitted = 5;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rf__ring_sample_done(s, 1), 0);
        assert_int_equal(s->state, RF_SLOT_FILLING);
        assert_int_equal(s->pending, 4 - i);
    }
    assert_int_equal(rf__ring_sample_done(s, 1), 1);
    assert_int_equal(s->state, RF_SLOT_READY);
    assert_int_equal(s->pending, 0);
    assert_counts(&r, 1, 0, 1, 0);

    /* A one-sample batch is ready at once. */
    rf_slot *t = rf__ring_claim(&r, 1, 1, 1);
    t->submitted = 1;
    assert_int_equal(rf__ring_sample_done(t, 1), 1);
    assert_int_equal(t->state, RF_SLOT_READY);

    /* The generation moved on while the slot filled: its last sample frees it. */
    rf__ring_lend(s);
    rf__ring_release(rf__ring_lease(s));
    rf_slot *u = rf__ring_claim(&r, 1, 2, 2);
    u->submitted = 2;
    assert_int_equal(rf__ring_sample_done(u, 2), 0);
    assert_int_equal(rf__ring_sample_done(u, 2), 1);
    assert_int_equal(u->state, RF_SLOT_FREE);
    rf__ring_free(&r);
}

static void test_release_only_of_lent_slots(void **state)
{
    (void)state;
    rf_ring r;
    init_ok(&r, 3, 2, 4);
    rf_slot *s = fill(&r, 0, 0, 2);
    rf_slot *filling = rf__ring_claim(&r, 0, 1, 2);
    assert_non_null(filling);

    /* Release through a handle of a slot that is not lent (the slot's own
     * view, never handed out): RF_E_RELEASED, state unchanged. */
    assert_int_equal(rf__ring_release(&s->view), RF_E_RELEASED); /* READY */
    assert_int_equal(s->state, RF_SLOT_READY);
    assert_int_equal(rf__ring_release(&filling->view), RF_E_RELEASED); /* FILLING */
    assert_int_equal(filling->state, RF_SLOT_FILLING);
    assert_int_equal(rf__ring_release(&r.slots[2].view), RF_E_RELEASED); /* FREE */
    assert_int_equal(r.slots[2].state, RF_SLOT_FREE);
    assert_null(rf__ring_lease(s));

    rf_batch *h = rf__ring_lend(s);
    assert_int_equal(s->state, RF_SLOT_LENT);
    assert_ptr_equal(rf__ring_lease(s), h);
    assert_true(rf__ring_lease_live(h));
    assert_counts(&r, 1, 1, 0, 1);
    assert_int_equal(rf__ring_release(h), 0);
    assert_int_equal(s->state, RF_SLOT_FREE);
    assert_false(rf__ring_lease_live(h));
    assert_int_equal(rf__ring_release(h), RF_E_RELEASED); /* double release */
    assert_int_equal(s->state, RF_SLOT_FREE);
    assert_counts(&r, 2, 1, 0, 0);

    /* The error of a previous batch does not follow the slot. */
    rf_slot *e = fill(&r, 0, 2, 1);
    e->errcode = RF_E_DECODE;
    snprintf(e->errmsg, sizeof e->errmsg, "decode: x.jpg: corrupt");
    rf__ring_lend(e);
    assert_int_equal(rf__ring_release(rf__ring_lease(e)), 0);
    rf_slot *again = rf__ring_claim(&r, 0, 3, 1);
    assert_ptr_equal(again, e);
    assert_int_equal(again->errcode, 0);
    assert_string_equal(again->errmsg, "");
    rf__ring_free(&r);
}

/* Each lend is a lease with a handle of its own: a handle whose lease ended
 * is refused (release, liveness) without disturbing the lease out now, for
 * as long as the slot was lent fewer than RF_SLOT_HANDLES times since. */
static void test_lease_identity(void **state)
{
    (void)state;
    rf_ring r;
    init_ok(&r, 1, 2, 4);
    rf_slot *s = fill(&r, 0, 0, 2);
    rf_batch *first = rf__ring_lend(s);
    assert_int_equal(first->lease, 1);
    assert_ptr_equal(first->slot, s);
    assert_int_equal(first->count, 2);
    assert_int_equal(rf__ring_release(first), 0);
    rf_batch *h[RF_SLOT_HANDLES];
    for (int i = 0; i < RF_SLOT_HANDLES - 1; i++) {
        assert_ptr_equal(fill(&r, 0, 1 + i, 2), s);
        h[i] = rf__ring_lend(s);
        assert_ptr_not_equal(h[i], first);
        for (int j = 0; j < i; j++)
            assert_ptr_not_equal(h[i], h[j]);
        /* the stale handles: refused, the current lease untouched */
        assert_false(rf__ring_lease_live(first));
        assert_int_equal(rf__ring_release(first), RF_E_RELEASED);
        for (int j = 0; j < i; j++)
            assert_int_equal(rf__ring_release(h[j]), RF_E_RELEASED);
        assert_int_equal(s->state, RF_SLOT_LENT);
        assert_true(rf__ring_lease_live(h[i]));
        assert_int_equal(h[i]->index, 1 + i);
        assert_int_equal(rf__ring_release(h[i]), 0);
        assert_int_equal(s->state, RF_SLOT_FREE);
    }
    /* The bound: lease RF_SLOT_HANDLES + 1 reuses the first lease's handle. */
    fill(&r, 0, 99, 1);
    assert_ptr_equal(rf__ring_lend(s), first);
    assert_int_equal(first->lease, RF_SLOT_HANDLES + 1);
    assert_int_equal(first->count, 1);
    rf__ring_free(&r);
}

static void test_find_by_generation_and_batch_skips_lent(void **state)
{
    (void)state;
    rf_ring r;
    init_ok(&r, 4, 2, 4);
    rf_slot *ready = fill(&r, 3, 10, 2);
    rf_slot *filling = rf__ring_claim(&r, 3, 11, 2);
    rf_slot *lent = fill(&r, 3, 12, 2);
    rf__ring_lend(lent);

    assert_ptr_equal(rf__ring_find(&r, 3, 10), ready);
    assert_ptr_equal(rf__ring_find(&r, 3, 11), filling);
    assert_null(rf__ring_find(&r, 3, 12)); /* lent: the consumer has it */
    assert_null(rf__ring_find(&r, 3, 13)); /* never claimed */
    assert_null(rf__ring_find(&r, 2, 10)); /* other generation */
    assert_null(rf__ring_find(&r, 4, 11));

    /* Same batch index in two generations: each finds its own. */
    rf_slot *newer = rf__ring_claim(&r, 4, 10, 1);
    assert_non_null(newer);
    assert_ptr_equal(rf__ring_find(&r, 4, 10), newer);
    assert_ptr_equal(rf__ring_find(&r, 3, 10), ready);

    /* A released slot is no longer found. */
    rf__ring_lend(ready);
    rf__ring_release(rf__ring_lease(ready));
    assert_null(rf__ring_find(&r, 3, 10));
    rf__ring_free(&r);
}

static void test_invalidate_frees_old_generation_keeps_lent_and_current(void **state)
{
    (void)state;
    rf_ring r;
    init_ok(&r, 7, 4, 4);
    const int64_t old = 1, cur = 2;
    rf_slot *ready = fill(&r, old, 0, 4);
    rf_slot *lent = fill(&r, old, 1, 4);
    rf__ring_lend(lent);
    /* FILLING, nothing handed to the reader yet. */
    rf_slot *unsub = rf__ring_claim(&r, old, 2, 4);
    /* FILLING, 3 of 4 submitted, 1 of them finished. */
    rf_slot *part = rf__ring_claim(&r, old, 3, 4);
    part->submitted = 3;
    assert_int_equal(rf__ring_sample_done(part, old), 0);
    /* FILLING, 2 of 4 submitted, both finished. */
    rf_slot *drained = rf__ring_claim(&r, old, 4, 4);
    drained->submitted = 2;
    rf__ring_sample_done(drained, old);
    rf__ring_sample_done(drained, old);
    /* Already of the current generation: untouched. */
    rf_slot *cur_ready = fill(&r, cur, 0, 2);
    rf_slot *cur_fill = rf__ring_claim(&r, cur, 1, 4);
    cur_fill->submitted = 1;
    assert_counts(&r, 0, 4, 2, 1);

    rf__ring_invalidate(&r, cur);

    assert_int_equal(ready->state, RF_SLOT_FREE);
    assert_int_equal(lent->state, RF_SLOT_LENT); /* the consumer still holds it */
    assert_int_equal(unsub->state, RF_SLOT_FREE);
    assert_int_equal(drained->state, RF_SLOT_FREE);
    assert_int_equal(part->state, RF_SLOT_FILLING);
    assert_int_equal(part->pending, 2);
    assert_int_equal(part->count, 3);
    assert_int_equal(cur_ready->state, RF_SLOT_READY);
    assert_int_equal(cur_fill->state, RF_SLOT_FILLING);
    assert_int_equal(cur_fill->pending, 4);
    assert_int_equal(cur_fill->count, 4);
    assert_counts(&r, 3, 2, 1, 1);

    /* Old slots are not found for the current generation. */
    assert_null(rf__ring_find(&r, cur, 3));
    assert_ptr_equal(rf__ring_find(&r, cur, 0), cur_ready);

    /* The submitted samples come back: the slot becomes FREE, not READY. */
    assert_int_equal(rf__ring_sample_done(part, cur), 0);
    assert_int_equal(part->state, RF_SLOT_FILLING);
    assert_int_equal(rf__ring_sample_done(part, cur), 1);
    assert_int_equal(part->state, RF_SLOT_FREE);

    /* Invalidating again changes nothing. */
    rf__ring_invalidate(&r, cur);
    assert_counts(&r, 4, 1, 1, 1);

    /* The lent slot of the old generation is released normally. */
    assert_int_equal(rf__ring_release(rf__ring_lease(lent)), 0);
    assert_counts(&r, 5, 1, 1, 0);

    /* Freed slots are claimable for the new generation. */
    int got = 0;
    while (rf__ring_claim(&r, cur, 100 + got, 1))
        got++;
    assert_int_equal(got, 5);
    rf__ring_free(&r);
}

static void test_counts_follow_slot_states(void **state)
{
    (void)state;
    rf_ring r;
    init_ok(&r, 5, 1, 1);
    assert_counts(&r, 5, 0, 0, 0);
    rf_slot *a = rf__ring_claim(&r, 0, 0, 1);
    assert_counts(&r, 4, 1, 0, 0);
    a->submitted = 1;
    rf__ring_sample_done(a, 0);
    assert_counts(&r, 4, 0, 1, 0);
    rf__ring_lend(a);
    assert_counts(&r, 4, 0, 0, 1);
    fill(&r, 0, 1, 1);
    rf__ring_claim(&r, 0, 2, 1);
    assert_counts(&r, 2, 1, 1, 1);
    assert_int_equal(rf__ring_count(&r, 99), 0); /* no such state */
    rf__ring_release(rf__ring_lease(a));
    assert_counts(&r, 3, 1, 1, 0);
    rf__ring_free(&r);
}

static void test_grow_adds_slots_without_moving_any(void **state)
{
    (void)state;
    rf_ring r;
    init_ok(&r, 2, 3, 10);
    rf_slot *first = &r.slots[0];
    rf_slot *busy = fill(&r, 0, 0, 3);
    size_t per = 3 * 10;
    int grown = 0;
    while (rf__ring_grow(&r) == 0) {
        grown++;
        rf_slot *s = &r.slots[r.k - 1];
        assert_int_equal(s->id, r.k - 1);
        assert_int_equal(s->state, RF_SLOT_FREE);
        assert_ptr_equal(s->view.slot, s);
        assert_int_equal(r.mem_bytes, (size_t)r.k * per);
        memset(s->view.data, 0x80 + grown, per); /* writable, in bounds (ASan) */
        for (int j = 0; j < 3; j++)
            s->view.labels[j] = s->view.samples[j] = 1000 * r.k + j;
        assert_true(grown <= RF_RING_MAX_GROW);
    }
    assert_int_equal(rf__ring_grow(&r), RF_E_LIMIT);
    assert_int_equal(grown, RF_RING_MAX_GROW);
    assert_int_equal(r.k, 2 + RF_RING_MAX_GROW);
    /* Slots do not move (the loader holds pointers to them), the existing
     * ones keep their state, and no slot's memory overlaps another's. */
    assert_ptr_equal(&r.slots[0], first);
    assert_int_equal(busy->state, RF_SLOT_READY);
    for (int i = 0; i < r.k; i++)
        for (int j = i + 1; j < r.k; j++) {
            const uint8_t *a = r.slots[i].view.data, *b = r.slots[j].view.data;
            assert_true(a + per <= b || b + per <= a);
            assert_true(r.slots[i].view.labels + 3 <= r.slots[j].view.labels ||
                        r.slots[j].view.labels + 3 <= r.slots[i].view.labels);
        }
    for (int i = 2; i < r.k; i++) {
        const uint8_t *d = r.slots[i].view.data;
        for (size_t b = 0; b < per; b++)
            assert_int_equal(d[b], (uint8_t)(0x80 + i - 1));
        assert_int_equal(r.slots[i].view.labels[2], 1000 * (i + 1) + 2);
    }
    /* The new slots are claimed like the others. */
    assert_counts(&r, r.k - 1, 0, 1, 0);
    int claimed = 0;
    while (rf__ring_claim(&r, 0, 1 + claimed, 3))
        claimed++;
    assert_int_equal(claimed, r.k - 1);
    rf__ring_free(&r);
}

/* A fake copier: slot i's copy is done when done[i] is set. */
static int fake_done[8];
static int fake_calls;

static int fake_copy_done(void *ctx, int slot)
{
    assert_ptr_equal(ctx, fake_done);
    fake_calls++;
    return fake_done[slot];
}

static void test_slot_reused_only_after_its_copy(void **state)
{
    (void)state;
    rf_ring r;
    init_ok(&r, 2, 1, 4);
    memset(fake_done, 0, sizeof fake_done);
    r.copy_done = fake_copy_done;
    r.copy_ctx = fake_done;

    rf_slot *a = fill(&r, 0, 0, 1);
    rf_slot *b = fill(&r, 0, 1, 1);
    rf__ring_lend(a);
    rf__ring_mark_copy(a); /* a copy out of a's memory is in flight */
    assert_int_equal(a->copy_pending, 1);
    assert_int_equal(rf__ring_release(rf__ring_lease(a)), 0);
    assert_int_equal(a->state, RF_SLOT_FREE);
    assert_int_equal(rf__ring_reap_copies(&r), 1);

    /* FREE but still being read by the copy: not claimable. */
    assert_null(rf__ring_claim(&r, 0, 2, 1));
    rf__ring_lend(b);
    assert_int_equal(rf__ring_release(rf__ring_lease(b)), 0); /* no copy: free at once */
    rf_slot *c = rf__ring_claim(&r, 0, 2, 1);
    assert_ptr_equal(c, b);
    assert_null(rf__ring_claim(&r, 0, 3, 1));

    /* The copy completes: reap clears it and the slot is claimable again; it
     * counts it (the dispatcher, whose claim came before, must look again). */
    fake_done[a->id] = 1;
    fake_calls = 0;
    assert_int_equal(rf__ring_reap_copies(&r), 1);
    assert_true(fake_calls >= 1);
    assert_int_equal(a->copy_pending, 0);
    fake_calls = 0;
    assert_int_equal(rf__ring_reap_copies(&r), 0);
    assert_int_equal(fake_calls, 0); /* nothing pending: the copier is not asked */
    assert_ptr_equal(rf__ring_claim(&r, 0, 3, 1), a);

    /* Claim itself notices a completed copy without a reap in between. */
    c->submitted = 1;
    rf__ring_sample_done(c, 0);
    rf__ring_lend(c);
    rf__ring_mark_copy(c);
    rf__ring_release(rf__ring_lease(c));
    fake_done[c->id] = 0;
    assert_null(rf__ring_claim(&r, 0, 4, 1));
    fake_done[c->id] = 1;
    assert_ptr_equal(rf__ring_claim(&r, 0, 4, 1), c);
    assert_int_equal(c->copy_pending, 0);
    rf__ring_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots_own_disjoint_aligned_memory),
        cmocka_unit_test(test_pin_without_cuda),
        cmocka_unit_test(test_claim_in_order),
        cmocka_unit_test(test_ready_only_on_last_sample),
        cmocka_unit_test(test_release_only_of_lent_slots),
        cmocka_unit_test(test_lease_identity),
        cmocka_unit_test(test_find_by_generation_and_batch_skips_lent),
        cmocka_unit_test(test_invalidate_frees_old_generation_keeps_lent_and_current),
        cmocka_unit_test(test_counts_follow_slot_states),
        cmocka_unit_test(test_grow_adds_slots_without_moving_any),
        cmocka_unit_test(test_slot_reused_only_after_its_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
