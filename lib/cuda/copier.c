/*
 * copier.c - the CUDA copier (see copier.h for what it holds per slot and
 * for the ordering rules; gpu_cuda.c is its backend over the CUDA runtime).
 *
 * The copier owns one non-blocking copy stream on the loader's device and,
 * per slot of the ring, three events (copy done, consumer released the
 * device buffer, a caller's stream read the device buffer), the slot's host
 * block (images, then a staging area for the labels: the ring's labels are
 * pageable, and a copy from pageable memory makes the host wait), and a
 * device buffer of the same layout. The stream and events are made at open,
 * a slot's memory when the ring makes the slot: nothing is allocated while
 * batches flow. It never waits on the host on the hot path: every wait is an
 * event on a stream; the host waits only in rf__copier_drain (polling, with
 * a deadline) and, after a failed call, for the copy stream.
 *
 * Lock rules: c->mu serialises everything that enqueues work on the copy
 * stream or touches a slot's device state or memory (slot_alloc, slot_free,
 * to_device, copy_to, release, drain) and the stats. rf__copier_slot_done
 * reads only events made at open and `broken` (atomic), and takes c->mu only
 * to count a failure. rf__copier_release and rf__copier_slot_done run under
 * the loader's mutex (lock order: the loader's mutex, then c->mu) and never
 * wait; c->mu is never held while taking the loader's mutex.
 */
#define _GNU_SOURCE
#include "copier.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cudart.h"
#include "ringfeed.h"

int rf__copier_drain_ms = 10000;

typedef struct rf_copier_slot {
    void *ev_copy;    /* after the last copy out of the host block (copy stream) */
    void *ev_release; /* consumer released the device buffer (consumer's stream) */
    void *ev_read;    /* a caller's stream finished reading the device buffer */
    uint8_t *host;    /* the host block (the ring's slot memory), NULL: not made */
    int host_pinned;
    int64_t *stage;      /* in the host block: the labels, source of their copy */
    uint8_t *dev;        /* device buffer: images, then labels at c->dev_label_off; NULL: none */
    void *consumer;      /* stream given to rf__copier_to_device */
    void *unordered;     /* a consumer's stream whose release could not be recorded */
    int on_device;       /* dev holds the slot's batch, lent to the consumer */
    int release_pending; /* ev_release recorded, not yet waited on by the copy stream */
} rf_copier_slot;

struct rf_copier {
    const rf_gpu_ops *ops;
    void *ctx;
    int device;
    void *dctx; /* the device's context (ops->open) */
    int nslots;
    size_t slot_bytes;    /* image bytes of one slot */
    int64_t batch_size;   /* labels of one slot */
    size_t stage_off;     /* labels' offset in a host block (256-aligned) */
    size_t dev_label_off; /* labels' offset in a device buffer (256-aligned) */
    void *stream;         /* the copy stream */
    void *ev_order;       /* copy_to: the caller's stream up to the call */
    void *ev_drain;       /* drain: the copy stream's end */
    rf_copier_step step;
    void *step_arg;
    rf_copier_slot *slots;
    _Atomic int broken; /* a query failed: the context is gone, nothing runs any more */
    int used;           /* (mu) work was enqueued (else the drain has nothing to wait for) */
    int drained, leaked;
    struct rf_copier *next_leaked;
    pthread_mutex_t mu; /* see the lock rules at the top */
    rf_copier_stats st; /* (mu) */
};

/* Copiers whose drain gave up, kept reachable on purpose (their memory may
 * still be in use by a stream that never ended). */
static rf_copier *leaked_copiers;
static pthread_mutex_t leaked_mu = PTHREAD_MUTEX_INITIALIZER;

/* Formats "copier: <call> (device N): <error>" into err and the stats (mu). */
static int fail(rf_copier *c, const char *call, int code, char *err, size_t errcap)
{
    const char *why = c->ops->error_string ? c->ops->error_string(c->ctx, code) : "error";
    c->st.errors++;
    snprintf(c->st.last_error, sizeof c->st.last_error, "copier: %s (device %d): %s (%d)", call,
             c->device, why ? why : "?", code);
    if (err && errcap)
        snprintf(err, errcap, "%s", c->st.last_error);
    return RF_E_CUDA;
}

#define TRY(call, expr)                                                                            \
    do {                                                                                           \
        int e_ = (expr);                                                                           \
        if (e_ != 0) {                                                                             \
            rc = fail(c, call, e_, err, errcap);                                                   \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

static int enter(rf_copier *c, rf_gpu_saved *sv)
{
    return c->ops->enter(c->ctx, c->device, c->dctx, sv);
}

static void leave(rf_copier *c, const rf_gpu_saved *sv)
{
    c->ops->leave(c->ctx, sv);
}

int rf__copier_create(rf_copier **out, const rf_gpu_ops *ops, void *ctx, int device, int nslots,
                      size_t slot_bytes, int64_t batch_size, char *err, size_t errcap)
{
    *out = NULL;
    assert(ops && nslots >= 1 && batch_size >= 1);
    rf_copier *c = calloc(1, sizeof *c);
    if (!c)
        return RF_E_NOMEM;
    c->slots = calloc((size_t)nslots, sizeof *c->slots);
    if (!c->slots) {
        free(c);
        return RF_E_NOMEM;
    }
    c->ops = ops;
    c->ctx = ctx;
    c->device = device;
    c->nslots = nslots;
    c->slot_bytes = slot_bytes;
    c->batch_size = batch_size;
    c->stage_off = (slot_bytes + 255) & ~(size_t)255;
    c->dev_label_off = c->stage_off;
    pthread_mutex_init(&c->mu, NULL);
    int rc = 0, entered = 0;
    rf_gpu_saved sv;
    TRY("cuDevicePrimaryCtxRetain", ops->open(ctx, device, &c->dctx));
    TRY("cuCtxSetCurrent", enter(c, &sv));
    entered = 1;
    TRY("cudaStreamCreateWithFlags", ops->stream_create(ctx, &c->stream));
    TRY("cudaEventCreateWithFlags", ops->event_create(ctx, &c->ev_order));
    TRY("cudaEventCreateWithFlags", ops->event_create(ctx, &c->ev_drain));
    for (int i = 0; i < nslots; i++) {
        rf_copier_slot *s = &c->slots[i];
        TRY("cudaEventCreateWithFlags", ops->event_create(ctx, &s->ev_copy));
        TRY("cudaEventCreateWithFlags", ops->event_create(ctx, &s->ev_release));
        TRY("cudaEventCreateWithFlags", ops->event_create(ctx, &s->ev_read));
    }
out:
    if (entered)
        leave(c, &sv);
    if (rc < 0) {
        rf__copier_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

int rf__copier_open(rf_copier **out, int device, int nslots, size_t slot_bytes, int64_t batch_size,
                    char *note, size_t notecap, char *err, size_t errcap)
{
    *out = NULL;
    if (device < 0) {
        snprintf(note, notecap, "device=cpu: batches stay on the host");
        return 0;
    }
    char why[1100] = "";
    int n = rf__cuda_devices(why, sizeof why);
    if (n == 0) {
        snprintf(note, notecap, "device=cuda:%d asked for, running on the CPU: %s", device, why);
        return 0;
    }
    if (device >= n) {
        snprintf(err, errcap, "copier: device cuda:%d does not exist (%d CUDA device%s)", device, n,
                 n == 1 ? "" : "s");
        return RF_E_INVALID;
    }
#ifdef RF_HAVE_CUDA
    const rf_cudart *rt = rf__cudart(NULL, 0); /* loaded: n > 0 */
    int rc = rf__copier_create(out, rf__cuda_ops(), (void *)rt, device, nslots, slot_bytes,
                               batch_size, err, errcap);
    if (rc == 0)
        snprintf(note, notecap, "cuda:%d (%d device%s; %s; contexts: %s)", device, n,
                 n == 1 ? "" : "s", rt->desc, rt->contexts);
    return rc;
#else
    return RF_E_CUDA; /* unreachable: no devices without CUDA */
#endif
}

void rf__copier_bind_thread(rf_copier *c)
{
    if (c) {
        rf_gpu_saved sv; /* nothing to put back: the thread is ours */
        (void)enter(c, &sv);
    }
}

void rf__copier_set_step(rf_copier *c, rf_copier_step step, void *arg)
{
    pthread_mutex_lock(&c->mu);
    c->step = step;
    c->step_arg = arg;
    pthread_mutex_unlock(&c->mu);
}

/* ---- slot memory ------------------------------------------------------------ */

uint8_t *rf__copier_slot_alloc(void *copier, int slot, size_t bytes, int pin, int *pinned,
                               char *note, size_t notecap)
{
    rf_copier *c = copier;
    assert(slot >= 0 && slot < c->nslots && bytes <= c->slot_bytes);
    rf_copier_slot *s = &c->slots[slot];
    size_t host_n = c->stage_off + (size_t)c->batch_size * sizeof(int64_t);
    size_t dev_n = c->dev_label_off + (size_t)c->batch_size * sizeof(int64_t);
    *pinned = 0;
    note[0] = '\0';
    pthread_mutex_lock(&c->mu);
    assert(!s->host);
    rf_gpu_saved sv;
    void *mem = NULL, *dev = NULL;
    int e = enter(c, &sv), entered = e == 0;
    if (!entered) {
        fail(c, "cuCtxSetCurrent", e, NULL, 0);
        if (pin)
            snprintf(note, notecap, "%s", c->st.last_error);
    }
    if (entered && pin) {
        e = c->ops->host_alloc(c->ctx, &mem, host_n);
        if (e == 0)
            *pinned = 1;
        else
            snprintf(note, notecap, "cudaHostAlloc(%zu bytes) failed: %s", host_n,
                     c->ops->error_string(c->ctx, e));
    }
    if (entered && (e = c->ops->dev_alloc(c->ctx, &dev, dev_n)) != 0) {
        /* Its batches go from the host block into the caller's memory. */
        dev = NULL;
        if (!c->st.buffer_note[0])
            snprintf(c->st.buffer_note, sizeof c->st.buffer_note,
                     "slot %d has no device buffer (cudaMalloc(%zu bytes): %s): its batches go "
                     "straight into the caller's memory",
                     slot, dev_n, c->ops->error_string(c->ctx, e));
        if (e != RF__GPU_OOM)
            fail(c, "cudaMalloc", e, NULL, 0);
    }
    if (!mem && posix_memalign(&mem, 4096, host_n) != 0)
        mem = NULL;
    if (mem) {
        s->host = mem;
        s->host_pinned = *pinned;
        s->stage = (int64_t *)((uint8_t *)mem + c->stage_off);
        memset(s->stage, 0, (size_t)c->batch_size * sizeof(int64_t)); /* stage_labels compares */
        s->dev = dev;
        if (dev) {
            c->st.buffers++;
            c->st.dev_bytes += (int64_t)dev_n;
        }
    } else if (dev) {
        c->ops->dev_free(c->ctx, dev);
    }
    if (entered)
        leave(c, &sv);
    pthread_mutex_unlock(&c->mu);
    return mem;
}

/* Frees slot s's memory (mu held, the device current); leaks the page-locked
 * block and the device buffer when the drain gave up. */
static void free_slot(rf_copier *c, rf_copier_slot *s)
{
    if (s->dev && !c->leaked) {
        c->ops->dev_free(c->ctx, s->dev);
        c->st.buffers--;
        c->st.dev_bytes -= (int64_t)(c->dev_label_off + (size_t)c->batch_size * 8);
    }
    if (s->host_pinned && !c->leaked)
        c->ops->host_free(c->ctx, s->host);
    else if (!s->host_pinned)
        free(s->host); /* pageable copies were staged when enqueued: nothing reads it */
    s->host = NULL;
    s->dev = NULL;
    s->stage = NULL;
}

void rf__copier_slot_free(void *copier, int slot, uint8_t *mem, int pinned)
{
    rf_copier *c = copier;
    assert(slot >= 0 && slot < c->nslots);
    rf_copier_slot *s = &c->slots[slot];
    pthread_mutex_lock(&c->mu);
    assert(s->host == mem && s->host_pinned == pinned);
    (void)mem;
    (void)pinned;
    rf_gpu_saved sv;
    int entered = enter(c, &sv) == 0;
    free_slot(c, s);
    if (entered)
        leave(c, &sv);
    pthread_mutex_unlock(&c->mu);
}

/* ---- teardown ------------------------------------------------------------------ */

/* 1 when ev is done, or can never be (an error: the context failed). */
static int event_done(rf_copier *c, void *ev)
{
    int e = c->ops->event_query(c->ctx, ev);
    return e != RF__GPU_NOT_READY;
}

int rf__copier_drain(rf_copier *c)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    if (c->drained) {
        pthread_mutex_unlock(&c->mu);
        return c->leaked ? -1 : 0;
    }
    c->drained = 1;
    if (!c->used) {
        pthread_mutex_unlock(&c->mu);
        return 0;
    }
    rf_gpu_saved sv;
    int entered = enter(c, &sv) == 0;
    int broken = !entered || atomic_load(&c->broken);
    /* A device batch still lent: its consumer's work so far may read it. */
    for (int i = 0; i < c->nslots && !broken; i++) {
        rf_copier_slot *s = &c->slots[i];
        if (s->on_device && c->ops->event_record(c->ctx, s->ev_release, s->consumer) == 0)
            s->release_pending = 1;
        s->on_device = 0;
    }
    int have_end =
        !broken && c->stream && c->ops->event_record(c->ctx, c->ev_drain, c->stream) == 0;
    int64_t deadline = rf__now_ns() + (int64_t)rf__copier_drain_ms * 1000000;
    long nap_us = 100;
    for (int done = broken; !done;) {
        done = !have_end || event_done(c, c->ev_drain);
        for (int i = 0; i < c->nslots && done; i++)
            done = !c->slots[i].release_pending || event_done(c, c->slots[i].ev_release);
        if (done)
            break;
        if (rf__now_ns() >= deadline) {
            c->leaked = 1;
            break;
        }
        struct timespec t = {0, nap_us * 1000};
        nanosleep(&t, NULL);
        nap_us = nap_us < 10000 ? nap_us * 2 : nap_us;
    }
    for (int i = 0; i < c->nslots; i++)
        c->slots[i].release_pending = 0;
    if (c->leaked) {
        int64_t pinned = 0;
        for (int i = 0; i < c->nslots; i++)
            pinned +=
                c->slots[i].host_pinned ? (int64_t)(c->stage_off + (size_t)c->batch_size * 8) : 0;
        fprintf(stderr,
                "ringfeed: copier: cuda:%d: a copy or a consumer's stream did not finish within "
                "%d ms of the loader's destroy; leaving %lld bytes of device memory and %lld "
                "bytes of page-locked memory allocated rather than free memory still in use\n",
                c->device, rf__copier_drain_ms, (long long)c->st.dev_bytes, (long long)pinned);
    }
    if (entered)
        leave(c, &sv);
    pthread_mutex_unlock(&c->mu);
    return c->leaked ? -1 : 0;
}

void rf__copier_destroy(rf_copier *c)
{
    if (!c)
        return;
    const rf_gpu_ops *o = c->ops;
    if (c->stream)
        rf__copier_drain(c);
    if (c->leaked) {
        pthread_mutex_lock(&leaked_mu);
        c->next_leaked = leaked_copiers;
        leaked_copiers = c;
        pthread_mutex_unlock(&leaked_mu);
        return;
    }
    rf_gpu_saved sv;
    int entered = o->enter(c->ctx, c->device, c->dctx, &sv) == 0;
    for (int i = 0; i < c->nslots; i++) {
        rf_copier_slot *s = &c->slots[i];
        if (s->host)
            free_slot(c, s);
        if (s->ev_copy)
            o->event_destroy(c->ctx, s->ev_copy);
        if (s->ev_release)
            o->event_destroy(c->ctx, s->ev_release);
        if (s->ev_read)
            o->event_destroy(c->ctx, s->ev_read);
    }
    if (c->ev_order)
        o->event_destroy(c->ctx, c->ev_order);
    if (c->ev_drain)
        o->event_destroy(c->ctx, c->ev_drain);
    if (c->stream)
        o->stream_destroy(c->ctx, c->stream); /* returns at once; its work is done (drain) */
    if (entered)
        o->leave(c->ctx, &sv);
    if (c->dctx)
        o->close(c->ctx, c->device, c->dctx);
    pthread_mutex_destroy(&c->mu);
    free(c->slots);
    free(c);
}

void rf__copier_abandon(rf_copier *c)
{
    if (!c)
        return;
    free(c->slots); /* its blocks and buffers are the parent's context's */
    free(c);
}

/* ---- copies --------------------------------------------------------------------- */

/* Labels into the slot's page-locked staging. A second copy of the same lent
 * batch finds them there already (and must not rewrite bytes a copy may be
 * reading). */
static void stage_labels(rf_copier_slot *s, const int64_t *labels, int64_t count)
{
    size_t n = (size_t)count * sizeof *labels;
    if (memcmp(s->stage, labels, n) != 0)
        memcpy(s->stage, labels, n);
}

int rf__copier_to_device(rf_copier *c, int slot, const void *img, size_t img_n,
                         const int64_t *labels, int64_t count, void *stream, void **dev_img,
                         int64_t **dev_labels, char *err, size_t errcap)
{
    assert(slot >= 0 && slot < c->nslots);
    assert(img_n <= c->slot_bytes && count >= 0 && count <= c->batch_size);
    const rf_gpu_ops *o = c->ops;
    rf_copier_slot *s = &c->slots[slot];
    assert(s->host && img == s->host);
    *dev_img = NULL;
    *dev_labels = NULL;
    int rc = 0, enqueued = 0, entered = 0;
    rf_gpu_saved sv;
    pthread_mutex_lock(&c->mu);
    assert(!s->on_device);
    if (!s->dev) {
        c->st.direct++; /* the batch stays on the host: rf_batch_copy_to */
        goto out;
    }
    TRY("cuCtxSetCurrent", enter(c, &sv));
    entered = 1;
    c->used = 1;
    if (s->unordered) {
        /* The previous consumer's release was not recorded: wait for its
         * stream before the buffer is written (not under the loader's mutex). */
        TRY("cudaStreamSynchronize", o->stream_sync(c->ctx, s->unordered));
        s->unordered = NULL;
    }
    if (s->release_pending) {
        /* The buffer's previous batch: the consumer's work before its release. */
        TRY("cudaStreamWaitEvent", o->stream_wait(c->ctx, c->stream, s->ev_release));
        s->release_pending = 0;
    }
    stage_labels(s, labels, count);
    enqueued = 1;
    TRY("cudaMemcpyAsync", o->memcpy_async(c->ctx, s->dev, img, img_n, c->stream));
    TRY("cudaMemcpyAsync",
        o->memcpy_async(c->ctx, s->dev + c->dev_label_off, s->stage, (size_t)count * 8, c->stream));
    if (c->step)
        TRY("post-copy step", c->step(c->step_arg, slot, c->stream, s->dev, img_n, count));
    TRY("cudaEventRecord", o->event_record(c->ctx, s->ev_copy, c->stream));
    TRY("cudaStreamWaitEvent", o->stream_wait(c->ctx, stream, s->ev_copy));
    c->st.copies++;
    c->st.bytes += (int64_t)(img_n + (size_t)count * 8);
    s->on_device = 1;
    s->consumer = stream;
    *dev_img = s->dev;
    *dev_labels = (int64_t *)(s->dev + c->dev_label_off);
out:
    if (rc < 0 && enqueued)
        o->stream_sync(c->ctx, c->stream); /* ev_copy may not cover what was enqueued */
    if (entered)
        leave(c, &sv);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int rf__copier_copy_to(rf_copier *c, int slot, const void *img, size_t img_n, const int64_t *labels,
                       int64_t count, void *dst_img, void *dst_labels, void *stream, char *err,
                       size_t errcap)
{
    assert(slot >= 0 && slot < c->nslots);
    assert(img_n <= c->slot_bytes && count >= 0 && count <= c->batch_size);
    if (!dst_img && !dst_labels) {
        snprintf(err, errcap, "copier: rf_batch_copy_to: no destination");
        return RF_E_INVALID;
    }
    const rf_gpu_ops *o = c->ops;
    rf_copier_slot *s = &c->slots[slot];
    size_t lab_n = (size_t)count * 8;
    int rc = 0, enqueued = 0, entered = 0;
    rf_gpu_saved sv;
    pthread_mutex_lock(&c->mu);
    TRY("cuCtxSetCurrent", enter(c, &sv));
    entered = 1;
    c->used = 1;
    if (s->on_device) {
        /* From the device buffer, on the caller's stream, after the slot's copy. */
        TRY("cudaStreamWaitEvent", o->stream_wait(c->ctx, stream, s->ev_copy));
        if (dst_img && img_n)
            TRY("cudaMemcpyAsync", o->memcpy_async(c->ctx, dst_img, s->dev, img_n, stream));
        if (dst_labels && lab_n)
            TRY("cudaMemcpyAsync",
                o->memcpy_async(c->ctx, dst_labels, s->dev + c->dev_label_off, lab_n, stream));
        if (stream != s->consumer) {
            /* The release is recorded on the consumer's stream: make that
             * stream wait for this read, or the buffer could be refilled
             * under it. */
            TRY("cudaEventRecord", o->event_record(c->ctx, s->ev_read, stream));
            TRY("cudaStreamWaitEvent", o->stream_wait(c->ctx, s->consumer, s->ev_read));
        }
        c->st.d2d++;
        goto out;
    }
    assert(s->host && img == s->host);
    /* The destination is free to write only for work ordered after this call
     * on `stream` (a stream-ordered allocator may have just recycled it). */
    TRY("cudaEventRecord", o->event_record(c->ctx, c->ev_order, stream));
    TRY("cudaStreamWaitEvent", o->stream_wait(c->ctx, c->stream, c->ev_order));
    enqueued = 1;
    if (dst_img && img_n)
        TRY("cudaMemcpyAsync", o->memcpy_async(c->ctx, dst_img, img, img_n, c->stream));
    if (dst_labels && lab_n) {
        stage_labels(s, labels, count);
        TRY("cudaMemcpyAsync", o->memcpy_async(c->ctx, dst_labels, s->stage, lab_n, c->stream));
    }
    TRY("cudaEventRecord", o->event_record(c->ctx, s->ev_copy, c->stream));
    TRY("cudaStreamWaitEvent", o->stream_wait(c->ctx, stream, s->ev_copy));
    c->st.copies++;
    c->st.bytes += (int64_t)((dst_img ? img_n : 0) + (dst_labels ? lab_n : 0));
out:
    if (rc < 0 && enqueued)
        o->stream_sync(c->ctx, c->stream);
    if (entered)
        leave(c, &sv);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void rf__copier_release(rf_copier *c, int slot)
{
    assert(slot >= 0 && slot < c->nslots);
    rf_copier_slot *s = &c->slots[slot];
    pthread_mutex_lock(&c->mu);
    if (s->on_device) {
        rf_gpu_saved sv;
        int e = enter(c, &sv);
        int entered = e == 0;
        if (e == 0)
            e = c->ops->event_record(c->ctx, s->ev_release, s->consumer);
        if (e == 0) {
            s->release_pending = 1;
        } else {
            /* Without the event the buffer's reuse cannot be ordered on the
             * device; not waited for here (the loader's mutex is held): the
             * next copy into the buffer waits for the stream. */
            fail(c, "cudaEventRecord", e, NULL, 0);
            s->unordered = s->consumer;
        }
        s->on_device = 0;
        s->consumer = NULL;
        if (entered)
            leave(c, &sv);
    }
    pthread_mutex_unlock(&c->mu);
}

int rf__copier_slot_done(void *copier, int slot)
{
    rf_copier *c = copier;
    assert(slot >= 0 && slot < c->nslots);
    if (atomic_load(&c->broken))
        return 1;
    rf_gpu_saved sv;
    int e = enter(c, &sv);
    if (e == 0) {
        e = c->ops->event_query(c->ctx, c->slots[slot].ev_copy);
        leave(c, &sv);
    }
    if (e == RF__GPU_NOT_READY)
        return 0;
    if (e != 0) {
        /* The context failed: nothing it queued runs any more, so nothing
         * reads the slot. Not waited for: the loader's mutex is held. */
        pthread_mutex_lock(&c->mu);
        fail(c, "cudaEventQuery", e, NULL, 0);
        pthread_mutex_unlock(&c->mu);
        atomic_store(&c->broken, 1);
    }
    return 1;
}

void rf__copier_stats(rf_copier *c, rf_copier_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}
