/*
 * copier.c - host memory for the ring, and the CUDA copier (see copier.h for
 * the ordering rules).
 *
 * Built with RF_HAVE_CUDA, page-locked memory comes from cudaHostAlloc when
 * a device is present, and pinning failures fall back to pageable memory
 * with the reason recorded. The runtime is not linked: cudart.c loads it on
 * first need, and every CUDA call here goes through its table (rf_cudart).
 * Without CUDA, or without a runtime or a device, everything is pageable, no
 * copier is ever made, and the library runs on the CPU alone.
 *
 * The copier owns one non-blocking copy stream on the loader's device and,
 * per host slot of the ring, three events (copy done, consumer released the
 * device buffer, caller's stream read the device buffer), a device buffer
 * (images then labels; allocated on first use) and a small page-locked
 * staging area for the labels (the ring's labels are pageable, and a copy
 * from pageable memory may synchronise the host). It never waits on the host
 * on the hot path: every wait is an event on a stream.
 *
 * Lock rules: c->mu serialises everything that enqueues work on the copy
 * stream or touches a slot's device state (to_device, copy_to, release,
 * destroy). rf__copier_slot_done does not take it: the ring asks only about
 * FREE slots, whose events nobody records (a slot's events are recorded only
 * while the slot is lent, and the release that frees it happens under the
 * loader's mutex, which the ring's caller holds). Never held while taking the
 * loader's mutex.
 */
#define _GNU_SOURCE
#include "copier.h"

#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"

#include "cudart.h"

/* ---- host memory ---------------------------------------------------------- */

int rf__cuda_devices(char *note, size_t notecap)
{
#ifdef RF_HAVE_CUDA
    const rf_cudart *rt = rf__cudart(note, notecap); /* the note says why not */
    if (!rt)
        return 0;
    int n = 0;
    cudaError_t e = rt->GetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(note, notecap, "%s; no CUDA device: cudaGetDeviceCount: %s (%s)", rt->desc,
                 rt->GetErrorString(e), rt->GetErrorName(e));
        (void)rt->GetLastError(); /* clear the error state of this thread */
        return 0;
    }
    if (n == 0)
        snprintf(note, notecap, "%s; no CUDA device: cudaGetDeviceCount found none", rt->desc);
    return n;
#else
    snprintf(note, notecap, "no CUDA: built without the CUDA toolkit");
    return 0;
#endif
}

void *rf__host_alloc(size_t bytes, int pin, int *pinned, char *note, size_t notecap)
{
    *pinned = 0;
    if (bytes == 0)
        bytes = 1;
#ifdef RF_HAVE_CUDA
    if (pin && rf__cuda_devices(note, notecap) > 0) {
        const rf_cudart *rt = rf__cudart(NULL, 0); /* loaded: there is a device */
        void *p = NULL;
        cudaError_t e = rt->HostAlloc(&p, bytes, cudaHostAllocPortable);
        if (e == cudaSuccess) {
            *pinned = 1;
            return p;
        }
        snprintf(note, notecap, "cudaHostAlloc(%zu bytes) failed: %s; using pageable memory", bytes,
                 rt->GetErrorString(e));
        (void)rt->GetLastError();
    } else if (pin) {
        size_t n = strlen(note);
        snprintf(note + n, notecap - n, "; using pageable memory");
    }
#else
    if (pin)
        snprintf(note, notecap, "pageable memory: built without CUDA");
#endif
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes) != 0)
        return NULL;
    return p;
}

void rf__host_free(void *p, int pinned)
{
#ifdef RF_HAVE_CUDA
    if (pinned) {
        rf__cudart(NULL, 0)->FreeHost(p); /* pinned: the runtime was loaded */
        return;
    }
#endif
    (void)pinned;
    free(p);
}

/* ---- the CUDA runtime backend --------------------------------------------- */

#ifdef RF_HAVE_CUDA
/* The backend's ctx is the runtime's table (rf_cudart, from rf__cudart). */
#define RT ((const rf_cudart *)ctx)

/* A failed call also sets the calling thread's "last error", which the next
 * framework on this thread (torch checks cudaGetLastError after its kernel
 * launches) would take for its own: clear it, the code is returned. */
static int cu(const rf_cudart *rt, cudaError_t e)
{
    if (e != cudaSuccess)
        (void)rt->GetLastError();
    return (int)e;
}

static int cu_set_device(void *ctx, int d)
{
    int cur = -1;
    if (RT->GetDevice(&cur) == cudaSuccess && cur == d)
        return 0;
    return cu(RT, RT->SetDevice(d));
}

static int cu_stream_create(void *ctx, void **s)
{
    cudaStream_t st = NULL;
    int e = cu(RT, RT->StreamCreateWithFlags(&st, cudaStreamNonBlocking));
    if (e == 0)
        *s = st;
    return e;
}

static int cu_stream_destroy(void *ctx, void *s)
{
    return cu(RT, RT->StreamDestroy((cudaStream_t)s));
}

static int cu_stream_sync(void *ctx, void *s)
{
    return cu(RT, RT->StreamSynchronize((cudaStream_t)s));
}

static int cu_event_create(void *ctx, void **ev)
{
    cudaEvent_t e = NULL;
    int rc = cu(RT, RT->EventCreateWithFlags(&e, cudaEventDisableTiming));
    if (rc == 0)
        *ev = e;
    return rc;
}

static int cu_event_destroy(void *ctx, void *ev)
{
    return cu(RT, RT->EventDestroy((cudaEvent_t)ev));
}

static int cu_event_record(void *ctx, void *ev, void *s)
{
    return cu(RT, RT->EventRecord((cudaEvent_t)ev, (cudaStream_t)s));
}

static int cu_event_query(void *ctx, void *ev)
{
    cudaError_t e = RT->EventQuery((cudaEvent_t)ev);
    if (e == cudaErrorNotReady) {
        (void)RT->GetLastError();
        return RF__GPU_NOT_READY;
    }
    return cu(RT, e);
}

static int cu_event_sync(void *ctx, void *ev)
{
    return cu(RT, RT->EventSynchronize((cudaEvent_t)ev));
}

static int cu_stream_wait(void *ctx, void *s, void *ev)
{
    return cu(RT, RT->StreamWaitEvent((cudaStream_t)s, (cudaEvent_t)ev, 0));
}

static int cu_memcpy_async(void *ctx, void *dst, const void *src, size_t n, int kind, void *s)
{
    return cu(RT, RT->MemcpyAsync(dst, src, n, (enum cudaMemcpyKind)kind, (cudaStream_t)s));
}

static int cu_dev_alloc(void *ctx, void **p, size_t n)
{
    return cu(RT, RT->Malloc(p, n));
}

static int cu_dev_free(void *ctx, void *p)
{
    return cu(RT, RT->Free(p));
}

static int cu_host_alloc(void *ctx, void **p, size_t n)
{
    return cu(RT, RT->HostAlloc(p, n, cudaHostAllocPortable));
}

static int cu_host_free(void *ctx, void *p)
{
    return cu(RT, RT->FreeHost(p));
}

static const char *cu_error_string(void *ctx, int code)
{
    return RT->GetErrorString((cudaError_t)code);
}

static const rf_gpu_ops cuda_ops = {
    .name = "cuda",
    .set_device = cu_set_device,
    .stream_create = cu_stream_create,
    .stream_destroy = cu_stream_destroy,
    .stream_sync = cu_stream_sync,
    .event_create = cu_event_create,
    .event_destroy = cu_event_destroy,
    .event_record = cu_event_record,
    .event_query = cu_event_query,
    .event_sync = cu_event_sync,
    .stream_wait = cu_stream_wait,
    .memcpy_async = cu_memcpy_async,
    .dev_alloc = cu_dev_alloc,
    .dev_free = cu_dev_free,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .error_string = cu_error_string,
};

/* The device current on this thread, so that a call from the consumer's
 * thread can put back the device its framework had made current. */
static int cu_current_device(void *ctx)
{
    int d = -1;
    if (RT->GetDevice(&d) != cudaSuccess) {
        (void)RT->GetLastError();
        return -1;
    }
    return d;
}
#undef RT

const rf_gpu_ops *rf__cuda_ops(void)
{
    return &cuda_ops;
}
#else
const rf_gpu_ops *rf__cuda_ops(void)
{
    return NULL;
}
#endif

/* ---- the copier ----------------------------------------------------------- */

typedef struct rf_copier_slot {
    void *ev_copy;       /* after the last copy out of the host slot (copy stream) */
    void *ev_release;    /* consumer released the device buffer (consumer's stream) */
    void *ev_read;       /* a caller's stream finished reading the device buffer */
    uint8_t *dev;        /* device buffer: images, then labels at c->dev_label_off */
    int64_t *stage;      /* page-locked copy of the labels, source of their copy */
    void *consumer;      /* stream given to rf__copier_to_device */
    int on_device;       /* dev holds the slot's batch, lent to the consumer */
    int release_pending; /* ev_release recorded, not yet waited on by the copy stream */
} rf_copier_slot;

struct rf_copier {
    const rf_gpu_ops *ops;
    void *ctx;
    int device;
    int nslots;
    size_t slot_bytes;    /* image bytes of one slot */
    int64_t batch_size;   /* labels of one slot */
    size_t dev_label_off; /* labels' offset in a device buffer (256-aligned) */
    void *stream;         /* the copy stream */
    void *ev_order;       /* copy_to: the caller's stream up to the call */
    int prev_device;      /* current before rf__copier_create; put back by rf__copier_leave */
    rf_copier_slot *slots;
    pthread_mutex_t mu; /* see the lock rules at the top */
    rf_copier_stats st; /* under mu, but errors from rf__copier_slot_done (benign race) */
};

/* Formats "copier: <call>: <error string>" into err and the stats. */
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

/* Makes the loader's device current; returns what to put back (-1: nothing). */
static int dev_enter(rf_copier *c)
{
#ifdef RF_HAVE_CUDA
    if (c->ops == &cuda_ops) {
        int prev = cu_current_device(c->ctx);
        if (prev != c->device)
            c->ops->set_device(c->ctx, c->device);
        return prev != c->device ? prev : -1;
    }
#endif
    c->ops->set_device(c->ctx, c->device);
    return -1;
}

static void dev_leave(rf_copier *c, int prev)
{
    if (prev >= 0)
        c->ops->set_device(c->ctx, prev);
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
    c->dev_label_off = (slot_bytes + 255) & ~(size_t)255;
    pthread_mutex_init(&c->mu, NULL);
    int rc = 0;
    /* The device stays current on this thread until rf__copier_leave: the
     * ring's page-locked memory is allocated next, in the loader's device's
     * context. */
    c->prev_device = -1;
#ifdef RF_HAVE_CUDA
    if (ops == &cuda_ops)
        c->prev_device = cu_current_device(ctx);
#endif
    TRY("cudaSetDevice", ops->set_device(ctx, device));
    TRY("cudaStreamCreateWithFlags", ops->stream_create(ctx, &c->stream));
    TRY("cudaEventCreateWithFlags", ops->event_create(ctx, &c->ev_order));
    for (int i = 0; i < nslots; i++) {
        rf_copier_slot *s = &c->slots[i];
        TRY("cudaEventCreateWithFlags", ops->event_create(ctx, &s->ev_copy));
        TRY("cudaEventCreateWithFlags", ops->event_create(ctx, &s->ev_release));
        TRY("cudaEventCreateWithFlags", ops->event_create(ctx, &s->ev_read));
    }
out:
    if (rc < 0) {
        rf__copier_leave(c);
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
    char why[512] = "";
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
        snprintf(note, notecap, "cuda:%d (%d device%s; %s)", device, n, n == 1 ? "" : "s",
                 rt->desc);
    return rc;
#else
    return RF_E_CUDA; /* unreachable: no devices without CUDA */
#endif
}

void rf__copier_leave(rf_copier *c)
{
    if (c && c->prev_device >= 0 && c->prev_device != c->device)
        c->ops->set_device(c->ctx, c->prev_device);
}

void rf__copier_bind_thread(rf_copier *c)
{
    if (c)
        (void)dev_enter(c); /* nothing to put back: the thread is ours */
}

void rf__copier_destroy(rf_copier *c)
{
    if (!c)
        return;
    const rf_gpu_ops *o = c->ops;
    int prev = dev_enter(c);
    /* Nothing may still read or write what is freed below: the ring's host
     * memory (freed by the caller next), the device buffers, the staging. */
    if (c->stream)
        o->stream_sync(c->ctx, c->stream);
    for (int i = 0; i < c->nslots; i++) {
        rf_copier_slot *s = &c->slots[i];
        if (s->on_device && s->ev_read)
            o->event_sync(c->ctx, s->ev_read);
        if (s->release_pending && s->ev_release)
            o->event_sync(c->ctx, s->ev_release);
        if (s->dev)
            o->dev_free(c->ctx, s->dev);
        if (s->stage)
            o->host_free(c->ctx, s->stage);
        if (s->ev_copy)
            o->event_destroy(c->ctx, s->ev_copy);
        if (s->ev_release)
            o->event_destroy(c->ctx, s->ev_release);
        if (s->ev_read)
            o->event_destroy(c->ctx, s->ev_read);
    }
    if (c->ev_order)
        o->event_destroy(c->ctx, c->ev_order);
    if (c->stream)
        o->stream_destroy(c->ctx, c->stream);
    dev_leave(c, prev);
    pthread_mutex_destroy(&c->mu);
    free(c->slots);
    free(c);
}

/* Device buffer and label staging of a slot, allocated on first use. */
static int slot_buffers(rf_copier *c, rf_copier_slot *s, int need_dev, char *err, size_t errcap)
{
    int rc = 0;
    if (!s->stage) {
        void *p = NULL;
        TRY("cudaHostAlloc", c->ops->host_alloc(c->ctx, &p, (size_t)c->batch_size * 8));
        s->stage = p;
    }
    if (need_dev && !s->dev) {
        void *p = NULL;
        size_t n = c->dev_label_off + (size_t)c->batch_size * 8;
        TRY("cudaMalloc", c->ops->dev_alloc(c->ctx, &p, n));
        s->dev = p;
        c->st.dev_bytes += (int64_t)n;
    }
out:
    return rc;
}

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
    int rc = 0, enqueued = 0;
    pthread_mutex_lock(&c->mu);
    int prev = dev_enter(c);
    assert(!s->on_device);
    if ((rc = slot_buffers(c, s, 1, err, errcap)) < 0)
        goto out;
    if (s->release_pending) {
        /* The buffer's previous batch: the consumer's work before its release. */
        TRY("cudaStreamWaitEvent", o->stream_wait(c->ctx, c->stream, s->ev_release));
        s->release_pending = 0;
    }
    stage_labels(s, labels, count);
    enqueued = 1;
    TRY("cudaMemcpyAsync", o->memcpy_async(c->ctx, s->dev, img, img_n, RF__GPU_H2D, c->stream));
    TRY("cudaMemcpyAsync", o->memcpy_async(c->ctx, s->dev + c->dev_label_off, s->stage,
                                           (size_t)count * 8, RF__GPU_H2D, c->stream));
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
    dev_leave(c, prev);
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
    int rc = 0, enqueued = 0;
    pthread_mutex_lock(&c->mu);
    int prev = dev_enter(c);
    if (s->on_device) {
        /* Device to device on the caller's stream, after the slot's copy. */
        TRY("cudaStreamWaitEvent", o->stream_wait(c->ctx, stream, s->ev_copy));
        if (dst_img && img_n)
            TRY("cudaMemcpyAsync",
                o->memcpy_async(c->ctx, dst_img, s->dev, img_n, RF__GPU_D2D, stream));
        if (dst_labels && lab_n)
            TRY("cudaMemcpyAsync", o->memcpy_async(c->ctx, dst_labels, s->dev + c->dev_label_off,
                                                   lab_n, RF__GPU_D2D, stream));
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
    if ((rc = slot_buffers(c, s, 0, err, errcap)) < 0)
        goto out;
    /* The destination is free to write only for work ordered after this call
     * on `stream` (a stream-ordered allocator may have just recycled it). */
    TRY("cudaEventRecord", o->event_record(c->ctx, c->ev_order, stream));
    TRY("cudaStreamWaitEvent", o->stream_wait(c->ctx, c->stream, c->ev_order));
    enqueued = 1;
    if (dst_img && img_n)
        TRY("cudaMemcpyAsync",
            o->memcpy_async(c->ctx, dst_img, img, img_n, RF__GPU_H2D, c->stream));
    if (dst_labels && lab_n) {
        stage_labels(s, labels, count);
        TRY("cudaMemcpyAsync",
            o->memcpy_async(c->ctx, dst_labels, s->stage, lab_n, RF__GPU_H2D, c->stream));
    }
    TRY("cudaEventRecord", o->event_record(c->ctx, s->ev_copy, c->stream));
    TRY("cudaStreamWaitEvent", o->stream_wait(c->ctx, stream, s->ev_copy));
    c->st.copies++;
    c->st.bytes += (int64_t)((dst_img ? img_n : 0) + (dst_labels ? lab_n : 0));
out:
    if (rc < 0 && enqueued)
        o->stream_sync(c->ctx, c->stream);
    dev_leave(c, prev);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void rf__copier_release(rf_copier *c, int slot)
{
    assert(slot >= 0 && slot < c->nslots);
    rf_copier_slot *s = &c->slots[slot];
    pthread_mutex_lock(&c->mu);
    if (s->on_device) {
        int prev = dev_enter(c);
        int e = c->ops->event_record(c->ctx, s->ev_release, s->consumer);
        if (e == 0) {
            s->release_pending = 1;
        } else {
            /* Without the event the buffer's reuse cannot be ordered on the
             * device: wait here for the consumer's stream instead. */
            fail(c, "cudaEventRecord", e, NULL, 0);
            c->ops->stream_sync(c->ctx, s->consumer);
        }
        s->on_device = 0;
        s->consumer = NULL;
        dev_leave(c, prev);
    }
    pthread_mutex_unlock(&c->mu);
}

int rf__copier_slot_done(void *copier, int slot)
{
    rf_copier *c = copier;
    assert(slot >= 0 && slot < c->nslots);
    int prev = dev_enter(c);
    int e = c->ops->event_query(c->ctx, c->slots[slot].ev_copy);
    if (e != 0 && e != RF__GPU_NOT_READY) {
        /* The context failed: drain what can be drained, nothing more will run. */
        fail(c, "cudaEventQuery", e, NULL, 0);
        c->ops->stream_sync(c->ctx, c->stream);
    }
    dev_leave(c, prev);
    return e != RF__GPU_NOT_READY;
}

void rf__copier_stats(rf_copier *c, rf_copier_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}
