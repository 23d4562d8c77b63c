/*
 * ring.h - the K batch slots between the producers and the consumer.
 *
 * A slot is FREE, FILLING (claimed for one batch of one generation, samples
 * being decoded into it), READY (complete), or LENT (borrowed by the
 * consumer). Slots are claimed in batch order but any free slot can take the
 * next batch, so a consumer that keeps a batch only shrinks the prefetch.
 * Memory is K x batch bytes, one block per slot: made at start, or when the
 * tuner adds a slot (rf__ring_grow_alloc / rf__ring_grow_commit, on the
 * dispatcher). With a copier the blocks come from it (rf_ring_hooks): each
 * page-locked on its own (one failed pin leaves the others pinned), with the
 * slot's device buffer made beside it. With tar extras each slot also holds
 * batch_size x extras_bytes of raw member bytes and their lengths
 * (rf__ring_init_extras).
 *
 * Only this file changes a slot's state. The ring does no locking of its
 * own: every transition happens under the loader's mutex (loader.h), except
 * the lock-free sample countdown (rf__ring_sample_release).
 *
 * Leases: each lend of a slot is a new lease, numbered per slot (1, 2, ...),
 * and hands out its own handle, one of RF_SLOT_HANDLES handles kept per slot
 * and used in turn. A handle remembers its lease number; the slot's
 * lent_lease holds the number of the lease out now (0: none). A release or
 * an accessor through a handle whose number is not lent_lease is stale and
 * refused. Bound: a stale handle is recognised as long as its slot was lent
 * fewer than RF_SLOT_HANDLES times since; after that its handle memory serves
 * a newer lease (never freed while the loader lives).
 */
#ifndef RF_RING_H
#define RF_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ringfeed.h"

#define RF_SLOT_MAX_BAD 16
#define RF_SLOT_HANDLES 16 /* lease handles per slot: the stale-handle bound above */

enum rf_slot_state { RF_SLOT_FREE = 0, RF_SLOT_FILLING = 1, RF_SLOT_READY = 2, RF_SLOT_LENT = 3 };

typedef struct rf_slot rf_slot;

/* The public batch handle: a copy of its slot's view taken when lent, with
 * the lease number. The slot's own `view` is never handed out. */
struct rf_batch {
    rf_loader *loader;
    rf_slot *slot;
    uint64_t lease;      /* the lease this handle was made for (0: the slot's view) */
    uint8_t *data;
    int64_t *labels;
    int64_t *samples;
    int64_t count, index, epoch;
    size_t nbytes;
    void *dev_data;      /* lent by rf_loader_next_device: the batch on the device, else NULL */
    int64_t *dev_labels;
    /* tar extras (NULL without): sample i's extras lie back to back from
     * extras + i * extras_bytes, their lengths at extras_len[i * nextras + e]
     * (RF_SOURCE_ABSENT: no such member) */
    uint8_t *extras;
    uint32_t *extras_len;
    /* the images' height and width (a bucket's, a native frame's); with
     * frames (letterbox, native sizes) each sample's picture size in its
     * frame (height, width pairs) and the factor it was resized by */
    int h, w;
    int32_t *sizes;
    float *scales;
};

/* The shape of a slot's batch: its images' height and width, the bytes of
 * one sample (the stride of the slot's images) and its aspect-ratio bucket
 * (-1: none). Set when the slot is claimed. */
typedef struct rf_slot_shape {
    int h, w;
    size_t sample_bytes;
    int bucket;
} rf_slot_shape;

struct rf_slot {
    int state;           /* enum rf_slot_state */
    int id;
    int64_t gen;         /* loader generation the contents belong to */
    int64_t batch;       /* batch index within the epoch */
    int64_t count;       /* samples in the batch */
    int64_t submitted;   /* samples handed to the reader so far */
    /* Samples not yet finished (decoded, failed or dropped). Workers
     * decrement it without the lock (acq_rel: their pixel writes happen before
     * the last decrement); only the last one takes the lock to change state. */
    _Atomic int64_t pending;
    _Atomic int errcode; /* first error that fails the batch (0: none); its
                          * winner (compare-exchange from 0) writes errmsg */
    /* A copy out of the slot's memory was enqueued while it was lent: once
     * FREE, the slot is claimed only after the ring's copy_done says that
     * copy completed (copier.h). copying: copies being enqueued now
     * (rf__ring_copy_begin .. rf__ring_copy_end); the slot is not claimed
     * while one is, whatever copy_done says. */
    int copy_pending;
    int copying;
    char errmsg[512];
    /* Bad samples met while filling (raised or skipped), moved to the stats
     * when the batch is delivered, so abandoned work is never counted. */
    _Atomic int nbad, bad_dropped; /* nbad may pass RF_SLOT_MAX_BAD: clamp */
    _Atomic int nskipped;          /* bad samples replaced (on_error = skip) */
    struct {
        int64_t sample;
        char reason[400];
    } bad[RF_SLOT_MAX_BAD];
    rf_batch view;       /* data, labels, samples, count, index, epoch, nbytes of the batch */
    rf_slot_shape shape; /* of the batch being filled or lent (rf__ring_shape) */
    uint64_t leases;     /* leases so far (under the loader's mutex) */
    /* The lease out now, 0 when not LENT. Written under the loader's mutex by
     * lend and release; read without it (relaxed) by the accessors of a
     * handle, which only compare it with their own number. */
    _Atomic uint64_t lent_lease;
    rf_batch handles[RF_SLOT_HANDLES]; /* lease n uses handles[n % RF_SLOT_HANDLES] */
};

#define RF_RING_MAX_GROW 16 /* slots the tuner may add to the initial k */

/* Where slot memory comes from (NULL hooks: rf__host_alloc). */
typedef struct rf_ring_hooks {
    void *ctx;
    /* 1 when the last copy out of slot `slot` completed, 0 while it runs. */
    int (*copy_done)(void *ctx, int slot);
    /* bytes of memory for slot `slot` (page-locked with pin when it can be:
     * *pinned; note says why not), or NULL; and its release. */
    uint8_t *(*slot_alloc)(void *ctx, int slot, size_t bytes, int pin, int *pinned, char *note,
                           size_t notecap);
    void (*slot_free)(void *ctx, int slot, uint8_t *mem, int pinned);
} rf_ring_hooks;

typedef struct rf_ring {
    int k;               /* slots in use */
    int cap;             /* slot structs allocated: k + RF_RING_MAX_GROW */
    int64_t batch_size;
    size_t sample_bytes;  /* the largest sample's bytes: a slot's room */
    rf_slot_shape shape0; /* the shape a claimed slot starts with (rf__ring_set_shape) */
    rf_slot *slots;
    uint8_t **mem;       /* cap: slot i's images block (NULL: not made) */
    unsigned char *mem_pinned; /* cap: 1 when mem[i] is page-locked */
    int64_t *labels;     /* cap * batch_size */
    int64_t *samples;    /* cap * batch_size */
    int32_t *sizes;      /* cap * batch_size * 2 (rf_batch's sizes) */
    float *scales;       /* cap * batch_size */
    size_t mem_bytes;    /* image bytes of all slots in use */
    /* tar extras (rf__ring_init_extras; 0 / NULL without) */
    int nextras;
    size_t extras_bytes;  /* per sample */
    uint8_t *extras_mem;  /* the initial k slots' extras */
    uint8_t *extras_grown[RF_RING_MAX_GROW];
    int ngrown;
    uint32_t *extras_len; /* cap * batch_size * nextras */
    int pin;             /* page-locked memory was asked for */
    int pinned;          /* 1: slot memory is page-locked (every slot, or note says which not) */
    int npinned;         /* slots whose memory is page-locked */
    char note[160];      /* why memory is not pinned, when it was asked for */
    /* With a copier: 1 when the last copy out of slot `slot` completed, 0
     * while it runs (rf__copier_slot_done; a fake in tests). NULL: no copies.
     * copy_ctx is also the ctx of slot_alloc / slot_free (rf_ring_hooks). */
    int (*copy_done)(void *ctx, int slot);
    void *copy_ctx;
    uint8_t *(*slot_alloc)(void *ctx, int slot, size_t bytes, int pin, int *pinned, char *note,
                           size_t notecap);
    void (*slot_free)(void *ctx, int slot, uint8_t *mem, int pinned);
} rf_ring;

/* Allocates k slots of batch_size samples of sample_bytes each, each slot's
 * block on its own. pin asks for page-locked memory (used when CUDA is
 * available). 0 or RF_E_NOMEM. */
int rf__ring_init(rf_ring *r, int k, int64_t batch_size, size_t sample_bytes, int pin);
/* As rf__ring_init, the slots' memory from hooks (NULL: rf__host_alloc). */
int rf__ring_init_hooks(rf_ring *r, int k, int64_t batch_size, size_t sample_bytes, int pin,
                        const rf_ring_hooks *hooks);
void rf__ring_free(rf_ring *r);
/* In a forked child: frees the plain memory only; page-locked blocks belong
 * to the parent's CUDA context (no CUDA call is made). Then as freed. */
void rf__ring_abandon(rf_ring *r);

/* Right after rf__ring_init, before any slot is used: room in every slot
 * (and in slots grown later) for nextras tar extras of extras_bytes per
 * sample. 0 or RF_E_NOMEM (the ring is then freed). */
int rf__ring_init_extras(rf_ring *r, int nextras, size_t extras_bytes);

/* Adds one FREE slot (prefetch grows). 0, RF_E_LIMIT at the cap, RF_E_NOMEM.
 * The two halves: rf__ring_grow_alloc reads only what rf__ring_init fixed
 * (no lock needed: the slow, possibly page-locking allocation runs outside
 * the loader's mutex) and returns the images' block (note: why it is not
 * page-locked, if it was asked to be), with *extras the extras' block (NULL
 * without extras); rf__ring_grow_commit adds the slot (under the mutex). One
 * thread grows a ring (the dispatcher), so nothing commits in between. */
int rf__ring_grow(rf_ring *r);
uint8_t *rf__ring_grow_alloc(const rf_ring *r, int *pinned, char *note, size_t notecap,
                             uint8_t **extras);
void rf__ring_grow_commit(rf_ring *r, uint8_t *mem, int pinned, const char *note,
                          uint8_t *extras);

/* FREE -> FILLING for batch `batch` of generation gen with count samples.
 * Returns the slot, or NULL when no slot is free. A FREE slot whose copy is
 * still pending (copy_done says 0) is not free yet. */
rf_slot *rf__ring_claim(rf_ring *r, int64_t gen, int64_t batch, int64_t count);

/* The shape every claimed slot starts with: images of h x w, sample_bytes
 * each (at most the ring's), no bucket. rf__ring_init sets h = w = 0 (a
 * record source has no shape). */
void rf__ring_set_shape(rf_ring *r, int h, int w, size_t sample_bytes);

/* A claimed slot's batch has another shape (an aspect-ratio bucket's):
 * images of h x w, sample_bytes each (at most the ring's sample_bytes). */
void rf__ring_shape(rf_slot *s, int h, int w, size_t sample_bytes, int bucket);

/* rf__ring_claim for batch `batch` of `epoch`, with its count sample indices
 * copied into the slot (the labels are the caller's to fill). */
rf_slot *rf__ring_claim_batch(rf_ring *r, int64_t gen, int64_t epoch, int64_t batch,
                              const int64_t *samples, int64_t count);

/* The slot holding batch `batch` of generation gen (FILLING or READY), or NULL. */
rf_slot *rf__ring_find(rf_ring *r, int64_t gen, int64_t batch);

/* One sample of the slot finished. Returns 1 when it was the last: the slot
 * becomes READY if it still belongs to gen, FREE otherwise. */
int rf__ring_sample_done(rf_slot *s, int64_t gen);

/* The two halves of rf__ring_sample_done, for callers that finish samples
 * without the loader's lock: the decrement (lock-free; 1 when it was the
 * last), then, under the lock, the state change of the last one. */
int rf__ring_sample_release(rf_slot *s);
/* Returns 1 when the slot became READY. */
int rf__ring_complete(rf_slot *s, int64_t gen);

/* Drops what belongs to an older generation than gen: READY slots become
 * FREE; FILLING slots forget their unsubmitted samples (they become FREE once
 * the submitted ones are finished). */
void rf__ring_invalidate(rf_ring *r, int64_t gen);

/* READY -> LENT: a new lease. Returns its handle (a copy of the slot's view
 * with the lease number; `loader` is the caller's to set). */
rf_batch *rf__ring_lend(rf_slot *s);

/* The handle of the lease out now on s, or NULL when s is not LENT. */
rf_batch *rf__ring_lease(rf_slot *s);

/* READY -> FREE without lending: a failed batch, consumed. */
void rf__ring_drop(rf_slot *s);

/* 1 when h is the handle of the lease out now. Any thread, no lock (a
 * holder of the batch asks about its own lease). */
int rf__ring_lease_live(const rf_batch *h);

/* LENT -> FREE through the handle of the lease out now. Returns 0, or
 * RF_E_RELEASED for any other handle (released, stale): nothing changes. */
int rf__ring_release(const rf_batch *h);

/* A copy out of the slot's memory was enqueued (sets copy_pending: the slot
 * is claimed again only once copy_done says it completed). */
void rf__ring_mark_copy(rf_slot *s);

/* Before a copy out of a lent batch is enqueued, in the same critical
 * section as the check that h is the lease out now: RF_E_RELEASED when it is
 * not (nothing changes), else 0, and the slot is not claimed again until
 * rf__ring_copy_end and the copy's completion (copy_pending), even if it is
 * released meanwhile. */
int rf__ring_copy_begin(const rf_batch *h);
void rf__ring_copy_end(rf_slot *s);

/* Asks copy_done about every FREE slot whose copy is pending, clears the
 * finished ones, and returns how many slots the dispatcher must look at again:
 * those still waiting (with a copy being enqueued too) and those that became
 * claimable now (after its claim ran). Nobody signals when a copy ends: the
 * dispatcher polls while this is not 0. */
int rf__ring_reap_copies(rf_ring *r);

int rf__ring_count(const rf_ring *r, int state);

#endif
