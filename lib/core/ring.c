/*
 * ring.c - slot memory and the slot state machine (see ring.h).
 *
 * Each slot's images live in a block of their own (from the copier's hooks
 * with CUDA: page-locked, each on its own, so one failed pin makes one slot
 * pageable, not the ring), so the ring costs exactly K x batch bytes plus
 * labels, whatever the dataset. Every change of a slot's state is made here
 * (leases and their handles: ring.h).
 */
#include "ring.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copier.h"

static void slot_setup(rf_ring *r, int i, uint8_t *data)
{
    rf_slot *s = &r->slots[i];
    s->id = i;
    s->state = RF_SLOT_FREE;
    s->view.slot = s;
    s->view.data = data;
    s->view.labels = r->labels + (size_t)i * (size_t)r->batch_size;
    s->view.samples = r->samples + (size_t)i * (size_t)r->batch_size;
    s->view.sizes = r->sizes + (size_t)i * (size_t)r->batch_size * 2;
    s->view.scales = r->scales + (size_t)i * (size_t)r->batch_size;
}

/* Slot i's extras: its block, and its part of the lengths. */
static void slot_extras(rf_ring *r, int i, uint8_t *extras)
{
    rf_slot *s = &r->slots[i];
    s->view.extras = extras;
    s->view.extras_len = r->extras_len + (size_t)i * (size_t)r->batch_size * (size_t)r->nextras;
}

int rf__ring_init_extras(rf_ring *r, int nextras, size_t extras_bytes)
{
    assert(nextras > 0 && extras_bytes > 0 && !r->extras_mem);
    size_t per_slot = (size_t)r->batch_size * extras_bytes;
    r->nextras = nextras;
    r->extras_bytes = extras_bytes;
    r->extras_len =
        calloc((size_t)r->cap * (size_t)r->batch_size * (size_t)nextras, sizeof *r->extras_len);
    r->extras_mem = malloc((size_t)r->k * per_slot);
    if (!r->extras_len || !r->extras_mem) {
        rf__ring_free(r);
        return RF_E_NOMEM;
    }
    for (int i = 0; i < r->k; i++)
        slot_extras(r, i, r->extras_mem + (size_t)i * per_slot);
    return 0;
}

/* Slot i's block, from the hooks or rf__host_alloc. */
static uint8_t *slot_mem(const rf_ring *r, int i, int *pinned, char *note, size_t notecap)
{
    size_t bytes = (size_t)r->batch_size * r->sample_bytes;
    note[0] = '\0';
    *pinned = 0;
    if (r->slot_alloc)
        return r->slot_alloc(r->copy_ctx, i, bytes, r->pin, pinned, note, notecap);
    return rf__host_alloc(bytes, r->pin, pinned, note, notecap);
}

static void slot_mem_free(const rf_ring *r, int i)
{
    if (!r->mem[i])
        return;
    if (r->slot_free)
        r->slot_free(r->copy_ctx, i, r->mem[i], r->mem_pinned[i]);
    else
        rf__host_free(r->mem[i], r->mem_pinned[i]);
}

/* Slot i's block is mem. */
static void slot_take(rf_ring *r, int i, uint8_t *mem, int pinned)
{
    r->mem[i] = mem;
    r->mem_pinned[i] = (unsigned char)pinned;
    r->npinned += pinned;
    r->pinned = r->npinned > 0;
}

int rf__ring_init_hooks(rf_ring *r, int k, int64_t batch_size, size_t sample_bytes, int pin,
                        const rf_ring_hooks *hooks)
{
    memset(r, 0, sizeof *r);
    assert(k >= 1 && batch_size >= 1);
    r->k = k;
    r->cap = k + RF_RING_MAX_GROW;
    r->batch_size = batch_size;
    r->sample_bytes = sample_bytes;
    r->pin = pin;
    if (hooks) {
        r->copy_ctx = hooks->ctx;
        r->copy_done = hooks->copy_done;
        r->slot_alloc = hooks->slot_alloc;
        r->slot_free = hooks->slot_free;
    }
    r->mem_bytes = (size_t)k * (size_t)batch_size * sample_bytes;
    r->slots = calloc((size_t)r->cap, sizeof *r->slots);
    r->mem = calloc((size_t)r->cap, sizeof *r->mem);
    r->mem_pinned = calloc((size_t)r->cap, sizeof *r->mem_pinned);
    r->labels = calloc((size_t)r->cap * (size_t)batch_size, sizeof *r->labels);
    r->samples = calloc((size_t)r->cap * (size_t)batch_size, sizeof *r->samples);
    r->sizes = calloc((size_t)r->cap * (size_t)batch_size * 2, sizeof *r->sizes);
    r->scales = calloc((size_t)r->cap * (size_t)batch_size, sizeof *r->scales);
    r->shape0 = (rf_slot_shape){0, 0, sample_bytes, -1};
    if (!r->slots || !r->mem || !r->mem_pinned || !r->labels || !r->samples || !r->sizes ||
        !r->scales) {
        rf__ring_free(r);
        return RF_E_NOMEM;
    }
    int first = -1; /* the first slot that could not be pinned, and why */
    char why[160] = "";
    for (int i = 0; i < k; i++) {
        int pinned;
        char note[160];
        uint8_t *m = slot_mem(r, i, &pinned, note, sizeof note);
        if (!m) {
            rf__ring_free(r);
            return RF_E_NOMEM;
        }
        slot_take(r, i, m, pinned);
        slot_setup(r, i, m);
        if (pin && !pinned && first < 0) {
            first = i;
            snprintf(why, sizeof why, "%s", note);
        }
    }
    if (first >= 0 && r->pinned)
        snprintf(r->note, sizeof r->note, "%d of %d slots pageable, slot %d: %s", k - r->npinned,
                 k, first, why);
    else if (first >= 0)
        snprintf(r->note, sizeof r->note, "%s", why);
    return 0;
}

int rf__ring_init(rf_ring *r, int k, int64_t batch_size, size_t sample_bytes, int pin)
{
    return rf__ring_init_hooks(r, k, batch_size, sample_bytes, pin, NULL);
}

uint8_t *rf__ring_grow_alloc(const rf_ring *r, int *pinned, char *note, size_t notecap,
                             uint8_t **extras)
{
    *extras = NULL;
    assert(r->k < r->cap);
    uint8_t *mem = slot_mem(r, r->k, pinned, note, notecap);
    if (mem && r->nextras > 0 && !(*extras = malloc((size_t)r->batch_size * r->extras_bytes))) {
        if (r->slot_free)
            r->slot_free(r->copy_ctx, r->k, mem, *pinned);
        else
            rf__host_free(mem, *pinned);
        return NULL;
    }
    return mem;
}

void rf__ring_grow_commit(rf_ring *r, uint8_t *mem, int pinned, const char *note, uint8_t *extras)
{
    assert(r->k < r->cap && r->ngrown < RF_RING_MAX_GROW);
    assert((extras != NULL) == (r->nextras > 0));
    if (r->pin && r->pinned && !pinned && !r->note[0])
        snprintf(r->note, sizeof r->note, "slot %d pageable: %s", r->k, note);
    slot_take(r, r->k, mem, pinned);
    r->extras_grown[r->ngrown++] = extras;
    slot_setup(r, r->k, mem);
    if (extras)
        slot_extras(r, r->k, extras);
    r->k++;
    r->mem_bytes += (size_t)r->batch_size * r->sample_bytes;
}

int rf__ring_grow(rf_ring *r)
{
    if (r->k >= r->cap)
        return RF_E_LIMIT;
    int pinned;
    char note[160];
    uint8_t *extras;
    uint8_t *p = rf__ring_grow_alloc(r, &pinned, note, sizeof note, &extras);
    if (!p)
        return RF_E_NOMEM;
    rf__ring_grow_commit(r, p, pinned, note, extras);
    return 0;
}

static void free_plain(rf_ring *r)
{
    for (int i = 0; i < r->ngrown; i++)
        free(r->extras_grown[i]);
    free(r->extras_mem);
    free(r->extras_len);
    free(r->slots);
    free(r->mem);
    free(r->mem_pinned);
    free(r->labels);
    free(r->samples);
    free(r->sizes);
    free(r->scales);
    memset(r, 0, sizeof *r);
}

void rf__ring_free(rf_ring *r)
{
    for (int i = 0; r->mem && i < r->cap; i++)
        slot_mem_free(r, i);
    free_plain(r);
}

void rf__ring_abandon(rf_ring *r)
{
    for (int i = 0; r->mem && i < r->cap; i++)
        if (r->mem[i] && !r->mem_pinned[i])
            free(r->mem[i]); /* pageable blocks are plain memory (either allocator) */
    free_plain(r);
}

rf_slot *rf__ring_claim(rf_ring *r, int64_t gen, int64_t batch, int64_t count)
{
    assert(count >= 1 && count <= r->batch_size);
    for (int i = 0; i < r->k; i++) {
        rf_slot *s = &r->slots[i];
        if (s->state != RF_SLOT_FREE || s->copying > 0)
            continue;
        if (s->copy_pending) {
            /* The copier may still be reading this memory (DMA). */
            if (r->copy_done && !r->copy_done(r->copy_ctx, s->id))
                continue;
            s->copy_pending = 0;
        }
        s->state = RF_SLOT_FILLING;
        s->gen = gen;
        s->batch = batch;
        s->count = count;
        s->submitted = 0;
        atomic_store(&s->pending, count);
        atomic_store(&s->errcode, 0);
        s->errmsg[0] = '\0';
        atomic_store(&s->nbad, 0);
        atomic_store(&s->bad_dropped, 0);
        atomic_store(&s->nskipped, 0);
        s->view.count = count;
        s->view.index = batch;
        rf__ring_shape(s, r->shape0.h, r->shape0.w, r->shape0.sample_bytes, -1);
        return s;
    }
    return NULL;
}

void rf__ring_set_shape(rf_ring *r, int h, int w, size_t sample_bytes)
{
    assert(sample_bytes <= r->sample_bytes);
    r->shape0 = (rf_slot_shape){h, w, sample_bytes, -1};
}

void rf__ring_shape(rf_slot *s, int h, int w, size_t sample_bytes, int bucket)
{
    s->shape = (rf_slot_shape){h, w, sample_bytes, bucket};
    s->view.h = h;
    s->view.w = w;
    s->view.nbytes = (size_t)s->count * sample_bytes;
}

rf_slot *rf__ring_claim_batch(rf_ring *r, int64_t gen, int64_t epoch, int64_t batch,
                              const int64_t *samples, int64_t count)
{
    rf_slot *s = rf__ring_claim(r, gen, batch, count);
    if (s) {
        memcpy(s->view.samples, samples, (size_t)count * sizeof *samples);
        s->view.epoch = epoch;
    }
    return s;
}

rf_slot *rf__ring_find(rf_ring *r, int64_t gen, int64_t batch)
{
    for (int i = 0; i < r->k; i++) {
        rf_slot *s = &r->slots[i];
        if ((s->state == RF_SLOT_FILLING || s->state == RF_SLOT_READY) && s->gen == gen &&
            s->batch == batch)
            return s;
    }
    return NULL;
}

int rf__ring_sample_release(rf_slot *s)
{
    int64_t before = atomic_fetch_sub_explicit(&s->pending, 1, memory_order_acq_rel);
    assert(before > 0);
    return before == 1;
}

int rf__ring_complete(rf_slot *s, int64_t gen)
{
    assert(s->state == RF_SLOT_FILLING && atomic_load(&s->pending) == 0);
    s->state = s->gen == gen ? RF_SLOT_READY : RF_SLOT_FREE;
    return s->state == RF_SLOT_READY;
}

int rf__ring_sample_done(rf_slot *s, int64_t gen)
{
    assert(s->state == RF_SLOT_FILLING);
    if (!rf__ring_sample_release(s))
        return 0;
    rf__ring_complete(s, gen);
    return 1;
}

void rf__ring_invalidate(rf_ring *r, int64_t gen)
{
    for (int i = 0; i < r->k; i++) {
        rf_slot *s = &r->slots[i];
        if (s->gen == gen)
            continue;
        if (s->state == RF_SLOT_READY) {
            s->state = RF_SLOT_FREE;
        } else if (s->state == RF_SLOT_FILLING) {
            /* Samples never handed to the reader will not come back. */
            int64_t drop = s->count - s->submitted;
            s->count = s->submitted;
            /* Only one decrement can reach 0: a worker finishing the last
             * submitted sample, or this one (then no worker holds a sample). */
            int64_t before = atomic_fetch_sub_explicit(&s->pending, drop, memory_order_acq_rel);
            assert(before >= drop);
            if (drop > 0 && before == drop)
                s->state = RF_SLOT_FREE;
        }
    }
}

rf_batch *rf__ring_lend(rf_slot *s)
{
    assert(s->state == RF_SLOT_READY);
    s->state = RF_SLOT_LENT;
    uint64_t n = ++s->leases;
    rf_batch *h = &s->handles[n % RF_SLOT_HANDLES];
    *h = s->view;
    h->lease = n;
    h->dev_data = NULL;
    h->dev_labels = NULL;
    /* relaxed: readers only compare it with their handle's number, which
     * reached them through the consumer's own hand-over of the handle. */
    atomic_store_explicit(&s->lent_lease, n, memory_order_relaxed);
    return h;
}

rf_batch *rf__ring_lease(rf_slot *s)
{
    return s->state == RF_SLOT_LENT ? &s->handles[s->leases % RF_SLOT_HANDLES] : NULL;
}

void rf__ring_drop(rf_slot *s)
{
    assert(s->state == RF_SLOT_READY);
    s->state = RF_SLOT_FREE;
}

int rf__ring_lease_live(const rf_batch *h)
{
    return h->lease != 0 &&
           atomic_load_explicit(&h->slot->lent_lease, memory_order_relaxed) == h->lease;
}

int rf__ring_release(const rf_batch *h)
{
    if (!h)
        return RF_E_RELEASED;
    rf_slot *s = h->slot;
    if (s->state != RF_SLOT_LENT || !rf__ring_lease_live(h))
        return RF_E_RELEASED;
    s->state = RF_SLOT_FREE;
    atomic_store_explicit(&s->lent_lease, 0, memory_order_relaxed);
    return 0;
}

void rf__ring_mark_copy(rf_slot *s)
{
    s->copy_pending = 1;
}

int rf__ring_copy_begin(const rf_batch *h)
{
    rf_slot *s = h->slot;
    if (s->state != RF_SLOT_LENT || !rf__ring_lease_live(h))
        return RF_E_RELEASED;
    s->copying++;
    s->copy_pending = 1;
    return 0;
}

void rf__ring_copy_end(rf_slot *s)
{
    assert(s->copying > 0);
    s->copying--;
}

int rf__ring_reap_copies(rf_ring *r)
{
    int n = 0;
    for (int i = 0; i < r->k; i++) {
        rf_slot *s = &r->slots[i];
        if (s->state != RF_SLOT_FREE || !s->copy_pending)
            continue;
        /* Still waiting, or done just now: either way the dispatcher must
         * look again (its claim ran before this reap, and nobody signals). */
        if (s->copying == 0 && (!r->copy_done || r->copy_done(r->copy_ctx, s->id)))
            s->copy_pending = 0;
        n++;
    }
    return n;
}

int rf__ring_count(const rf_ring *r, int state)
{
    int n = 0;
    for (int i = 0; i < r->k; i++)
        n += r->slots[i].state == state;
    return n;
}
