/*
 * fake_cudart_stream.c - the stand-in's streams, events and copies (see
 * fake_cudart.c), asynchronous as on a GPU: one "device" thread runs the
 * queued ops of every stream, each stream in order, honouring
 * cudaStreamWaitEvent, each op taking time (a copy moves ~16 GB/s and reads
 * its source at the end of that time, as DMA does), so the host really sees
 * copies in flight.
 *
 * As CUDA documents them:
 *   - each device has its own legacy default stream (NULL, cudaStreamLegacy:
 *     the current device's); streams and events belong to the device current
 *     when they were made, and a stream used while another device is current,
 *     or an event recorded on another device's stream, is
 *     cudaErrorInvalidResourceHandle (cudaStreamWaitEvent may wait for
 *     another device's event);
 *   - the legacy stream serialises with the device's blocking streams (work
 *     on it waits for theirs, theirs for it); cudaStreamNonBlocking streams
 *     are independent of it;
 *   - cudaStreamDestroy returns at once (queued work still runs);
 *   - a copy's kind must match its pointers (cudaMemcpyDefault infers it);
 *   - a copy from pageable host memory is staged at call time: the call
 *     waits for the stream's earlier work and copies the source (at ~4 GB/s)
 *     before it returns; a copy to pageable memory returns when it is done;
 *     both are host waits, counted ("syncs", and "pageable"). Copies between
 *     page-locked (or managed) and device memory do not block the host;
 *   - a failed context (fake_cudart_set "sticky") runs nothing more (an
 *     operation under way when it fails does not land), and every wait
 *     returns its error at once.
 */
#define _GNU_SOURCE
#include "fake_cudart.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { OP_COPY = 1, OP_SET, OP_RECORD, OP_WAIT };

typedef struct fstream fstream;

typedef struct fop {
    int kind;
    void *dst;
    const void *src;
    size_t n;
    int val;     /* OP_SET: the byte */
    int dst_reg; /* dst is registered memory: checked again when it runs */
    int src_reg; /* src is registered memory */
    void *owned; /* staging of a pageable source, freed when the op has run */
    fstream *ws; /* OP_WAIT: until ws->done >= wseq */
    long wseq;
    struct fop *next;
} fop;

struct fstream {
    unsigned magic;
    int alive; /* 0 once destroyed (its queued work still runs) */
    int device;
    int blocking; /* serialises with the device's legacy stream */
    int legacy;
    fop *head, *tail;
    long enq, done;
    fstream *next; /* every stream ever made, never freed (a use after destroy is caught) */
};

typedef struct fevent {
    unsigned magic;
    int alive;
    int device;
    fstream *s; /* last record; NULL: never recorded (complete) */
    long seq;
    struct fevent *next;
} fevent;

#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x4556544eu

/* Under fk_mu. */
static fstream legacy[FK_MAXDEV];
static fstream *streams; /* every stream, the legacy ones first */
static fevent *events;   /* every event (kept, for the use-after-destroy check) */
static fstream *cursor;  /* where the device thread looks first (round robin) */
static fop *inflight;    /* the op the device thread is running (outside fk_mu) */
static int quit;         /* the process is exiting: the device thread ends */
static pthread_t device_thread;
static int device_started;

static int runnable(const fstream *s)
{
    const fop *o = s->head;
    return o && (o->kind != OP_WAIT || o->ws->done >= o->wseq);
}

static fstream *pick(void)
{
    if (fk.paused || fk.sticky)
        return NULL;
    fstream *s = cursor ? cursor : streams;
    for (fstream *t = s; t; t = t->next)
        if (runnable(t))
            return cursor = t->next, t;
    for (fstream *t = streams; t != s; t = t->next)
        if (runnable(t))
            return cursor = t->next, t;
    return NULL;
}

static void check_live(const fop *o)
{
    if (o->dst_reg && !fk_mem_live(o->dst, o->n))
        fk_die("a %s ran into freed memory %p (%zu bytes)", o->kind == OP_SET ? "memset" : "copy",
               o->dst, o->n);
    if (o->src_reg && !fk_mem_live(o->src, o->n))
        fk_die("a copy ran from freed memory %p (%zu bytes)", o->src, o->n);
}

static void *device_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&fk_mu);
    while (!quit) {
        fstream *s = pick();
        if (!s) {
            pthread_cond_wait(&fk_cv, &fk_mu);
            continue;
        }
        fop *o = s->head;
        inflight = o;
        long us = 0;
        if (o->kind == OP_COPY) {
            check_live(o);
            us = 20 + (long)(o->n >> 14); /* ~16 GB/s */
        } else if (o->kind == OP_SET) {
            check_live(o);
            us = 1000; /* a "training step" */
        }
        if (us) {
            pthread_mutex_unlock(&fk_mu);
            fk_nap_us(us);
            pthread_mutex_lock(&fk_mu);
        }
        /* A context that failed during the transfer ran nothing more: the
         * library takes its slots back at once (it may not wait). */
        if (us && !fk.sticky) {
            check_live(o); /* read at the end, as DMA reads during the transfer */
            if (o->kind == OP_COPY)
                memcpy(o->dst, o->src, o->n);
            else
                memset(o->dst, o->val, o->n < (1u << 20) ? o->n : (1u << 20));
        }
        inflight = NULL;
        s->head = o->next;
        if (!s->head)
            s->tail = NULL;
        s->done++;
        free(o->owned);
        free(o);
        pthread_cond_broadcast(&fk_cv);
    }
    pthread_mutex_unlock(&fk_mu);
    return NULL;
}

/* At exit the device thread ends and is joined (its thread memory is then
 * not a leak to valgrind); not in a forked child, which has no such thread. */
__attribute__((destructor)) static void stop_device(void)
{
    if (!device_started || getpid() != fk.pid)
        return;
    pthread_mutex_lock(&fk_mu);
    quit = 1;
    pthread_cond_broadcast(&fk_cv);
    pthread_mutex_unlock(&fk_mu);
    pthread_join(device_thread, NULL);
}

void fk_streams_init(void)
{
    for (int d = FK_MAXDEV - 1; d >= 0; d--) {
        legacy[d] = (fstream){STREAM_MAGIC, 1, d, 1, 1, NULL, NULL, 0, 0, streams};
        streams = &legacy[d];
    }
    if (pthread_create(&device_thread, NULL, device_main, NULL) != 0)
        fk_die("cannot start the device thread");
    device_started = 1;
}

void fk_streams_discard(void)
{
    for (fstream *s = streams; s; s = s->next) {
        while (s->head && s->head != inflight) {
            fop *o = s->head;
            s->head = o->next;
            free(o->owned);
            free(o);
            s->done++;
        }
        if (!s->head)
            s->tail = NULL;
    }
    pthread_cond_broadcast(&fk_cv);
}

/* ---- queues ------------------------------------------------------------- */

static fop *op(int kind)
{
    fop *o = calloc(1, sizeof *o);
    if (!o)
        fk_die("out of memory");
    o->kind = kind;
    return o;
}

static void append(fstream *s, fop *o)
{
    o->next = NULL;
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    s->enq++;
}

static void wait_for(fstream *s, fstream *ws, long seq)
{
    fop *w = op(OP_WAIT);
    w->ws = ws;
    w->wseq = seq;
    append(s, w);
}

/* Queues o on s (fk_mu held), after what the legacy stream's rule orders
 * before it: the device's blocking streams' work for the legacy stream, the
 * legacy stream's work for a blocking stream. */
static void push(fstream *s, fop *o)
{
    if (s->legacy) {
        for (fstream *b = streams; b; b = b->next)
            if (!b->legacy && b->blocking && b->device == s->device && b->done < b->enq)
                wait_for(s, b, b->enq);
    } else if (s->blocking) {
        fstream *l = &legacy[s->device];
        if (l->done < l->enq)
            wait_for(s, l, l->enq);
    }
    append(s, o);
    pthread_cond_broadcast(&fk_cv);
}

/* The stream a handle names (fk_mu held, the thread has a context). */
static fstream *stream_of(cudaStream_t h)
{
    if (h == NULL || h == cudaStreamLegacy)
        return &legacy[fk_cur_device()];
    if (h == cudaStreamPerThread)
        fk_die("cudaStreamPerThread is not modelled by the stand-in");
    fstream *f = (fstream *)h;
    if (f->magic != STREAM_MAGIC)
        fk_die("use of a bogus stream %p", (void *)h);
    if (!f->alive)
        fk_die("use of a destroyed stream %p", (void *)h);
    return f;
}

static fevent *event_of(cudaEvent_t h)
{
    fevent *f = (fevent *)h;
    if (!f || f->magic != EVENT_MAGIC)
        fk_die("use of a bogus event %p", (void *)h);
    if (!f->alive)
        fk_die("use of a destroyed event %p", (void *)h);
    return f;
}

/* Work may be queued on s only while its device is current. */
static cudaError_t on_current(const fstream *s)
{
    return s->device == fk_cur_device() ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

/* A host wait until s has run its first `target` ops (fk_mu held): the
 * sticky error if the context failed. */
static cudaError_t host_wait(fstream *s, long target)
{
    fk_count_sync();
    while (s->done < target && !fk.sticky)
        pthread_cond_wait(&fk_cv, &fk_mu);
    return fk.sticky;
}

/* The start of a call that works under fk_mu: fk_gate, then fk_mu taken.
 * Non-zero: the gate's error (fk_err'd), fk_mu not taken. */
static cudaError_t enter(const char *api)
{
    cudaError_t e = fk_gate(api, 1);
    if (e != cudaSuccess)
        return fk_err(e);
    pthread_mutex_lock(&fk_mu);
    return cudaSuccess;
}

/* enter for a host wait: the "sync" hook runs before the gate (a wait asked
 * for is a wait, failed or not). */
static cudaError_t enter_wait(const char *api)
{
    fk_run_hook("sync");
    return enter(api);
}

/* The end of such a call: fk_mu released, e returned as the runtime does. */
static cudaError_t leave(cudaError_t e)
{
    pthread_mutex_unlock(&fk_mu);
    return fk_err(e);
}

/* With fk_mu held: a copy from or to pageable memory waits on the host for
 * the stream's work, counted; the "sync" hook runs outside fk_mu. */
static cudaError_t pageable_wait(fstream *st)
{
    fk.pageable++;
    fk.host_waits++;
    pthread_mutex_unlock(&fk_mu);
    fk_run_hook("sync");
    pthread_mutex_lock(&fk_mu);
    return host_wait(st, st->enq);
}

/* ---- streams --------------------------------------------------------------- */

static cudaError_t make_stream(const char *api, cudaStream_t *out, int blocking)
{
    cudaError_t e = fk_gate(api, 1);
    if (e)
        return fk_err(e);
    fstream *f = calloc(1, sizeof *f);
    if (!f)
        return fk_err(cudaErrorMemoryAllocation);
    pthread_mutex_lock(&fk_mu);
    *f = (fstream){STREAM_MAGIC, 1, fk_cur_device(), blocking, 0, NULL, NULL, 0, 0, NULL};
    fstream **tail = &streams;
    while (*tail)
        tail = &(*tail)->next;
    *tail = f;
    pthread_mutex_unlock(&fk_mu);
    *out = (cudaStream_t)f;
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    return make_stream("cudaStreamCreate", s, 1);
}

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    return make_stream("cudaStreamCreateWithFlags", s, !(flags & cudaStreamNonBlocking));
}

/* Returns at once; the queued work still runs. */
EXPORT cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    cudaError_t e = enter("cudaStreamDestroy");
    if (e)
        return e;
    fstream *f = stream_of(s);
    if (f->legacy)
        e = cudaErrorInvalidResourceHandle;
    else
        f->alive = 0;
    return leave(e);
}

EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    cudaError_t e = enter_wait("cudaStreamSynchronize");
    if (e)
        return e;
    fstream *f = stream_of(s);
    return leave(host_wait(f, f->enq));
}

EXPORT cudaError_t cudaStreamQuery(cudaStream_t s)
{
    cudaError_t e = enter("cudaStreamQuery");
    if (e)
        return e;
    fstream *f = stream_of(s);
    return leave(f->done >= f->enq ? cudaSuccess : cudaErrorNotReady);
}

EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    cudaError_t e = enter_wait("cudaDeviceSynchronize");
    if (e)
        return e;
    fk_count_sync();
    int d = fk_cur_device();
    for (fstream *s = streams; s && !fk.sticky; s = s->next)
        while (s->device == d && s->done < s->enq && !fk.sticky)
            pthread_cond_wait(&fk_cv, &fk_mu);
    return leave(fk.sticky);
}

/* ---- events ----------------------------------------------------------------- */

static cudaError_t make_event(const char *api, cudaEvent_t *out)
{
    cudaError_t e = fk_gate(api, 1);
    if (e)
        return fk_err(e);
    fevent *f = calloc(1, sizeof *f);
    if (!f)
        return fk_err(cudaErrorMemoryAllocation);
    pthread_mutex_lock(&fk_mu);
    *f = (fevent){EVENT_MAGIC, 1, fk_cur_device(), NULL, 0, events};
    events = f;
    pthread_mutex_unlock(&fk_mu);
    *out = (cudaEvent_t)f;
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return make_event("cudaEventCreate", e);
}

EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    (void)flags;
    return make_event("cudaEventCreateWithFlags", e);
}

EXPORT cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    cudaError_t e = enter("cudaEventDestroy");
    if (e)
        return e;
    event_of(ev)->alive = 0; /* kept: a later use is caught */
    return leave(cudaSuccess);
}

EXPORT cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
    cudaError_t e = enter("cudaEventRecord");
    if (e)
        return e;
    fevent *f = event_of(ev);
    fstream *st = stream_of(s);
    e = on_current(st);
    if (e == cudaSuccess && f->device != st->device)
        e = cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess) {
        push(st, op(OP_RECORD));
        f->s = st;
        f->seq = st->enq;
    }
    return leave(e);
}

EXPORT cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    cudaError_t e = enter("cudaEventQuery");
    if (e)
        return e;
    fevent *f = event_of(ev);
    return leave(!f->s || f->s->done >= f->seq ? cudaSuccess : cudaErrorNotReady);
}

EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    cudaError_t e = enter_wait("cudaEventSynchronize");
    if (e)
        return e;
    fevent *f = event_of(ev);
    return leave(f->s ? host_wait(f->s, f->seq) : (fk_count_sync(), cudaSuccess));
}

/* Another device's event may be waited for; a never-recorded one is no wait. */
EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
    (void)flags;
    cudaError_t e = enter("cudaStreamWaitEvent");
    if (e)
        return e;
    fevent *f = event_of(ev);
    fstream *st = stream_of(s);
    e = on_current(st);
    if (e == cudaSuccess && f->s) {
        fop *w = op(OP_WAIT);
        w->ws = f->s; /* the last record, as CUDA: a later record does not move it */
        w->wseq = f->seq;
        push(st, w);
    }
    return leave(e);
}

/* ---- copies ------------------------------------------------------------------ */

static int is_dev(int kind)
{
    return kind == FK_DEVICE || kind == FK_MANAGED;
}

static int is_host(int kind)
{
    return kind == FK_PAGEABLE || kind == FK_PINNED || kind == FK_MANAGED;
}

static int kind_ok(enum cudaMemcpyKind kind, int dk, int sk)
{
    switch (kind) {
    case cudaMemcpyHostToDevice:
        return is_dev(dk) && is_host(sk);
    case cudaMemcpyDeviceToHost:
        return is_host(dk) && is_dev(sk);
    case cudaMemcpyDeviceToDevice:
        return is_dev(dk) && is_dev(sk);
    case cudaMemcpyHostToHost:
        return is_host(dk) && is_host(sk);
    case cudaMemcpyDefault:
        return 1;
    default:
        return 0;
    }
}

EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                   cudaStream_t s)
{
    cudaError_t e = fk_gate("cudaMemcpyAsync", 1);
    if (e)
        return fk_err(e);
    if (n == 0)
        return cudaSuccess;
    pthread_mutex_lock(&fk_mu);
    int ddev, sdev;
    int dk = fk_mem_kind(dst, n, &ddev), sk = fk_mem_kind(src, n, &sdev);
    fstream *st = stream_of(s);
    e = on_current(st);
    if (e == cudaSuccess && (dk < 0 || sk < 0 || !kind_ok(kind, dk, sk)))
        e = cudaErrorInvalidValue;
    if (e != cudaSuccess) {
        pthread_mutex_unlock(&fk_mu);
        return fk_err(e);
    }
    fop *o = op(OP_COPY);
    o->dst = dst;
    o->src = src;
    o->n = n;
    o->dst_reg = dk != FK_PAGEABLE;
    o->src_reg = sk != FK_PAGEABLE;
    if (is_dev(dk) && !is_dev(sk))
        fk.h2d++;
    else if (!is_dev(dk) && is_dev(sk))
        fk.d2h++;
    else if (is_dev(dk))
        fk.d2d++;
    if (sk == FK_PAGEABLE) {
        /* Staged now: the stream's earlier work first, then the source is
         * copied to staging memory before the call returns. */
        e = pageable_wait(st);
        pthread_mutex_unlock(&fk_mu);
        if (e != cudaSuccess) {
            free(o);
            return fk_err(e);
        }
        o->owned = malloc(n);
        if (!o->owned)
            fk_die("out of memory");
        fk_nap_us((long)(n >> 12)); /* ~4 GB/s */
        memcpy(o->owned, src, n);
        o->src = o->owned;
        o->src_reg = 0;
        pthread_mutex_lock(&fk_mu);
        if (!st->alive)
            fk_die("the stream of a pageable copy was destroyed during the copy");
    }
    push(st, o);
    if (dk == FK_PAGEABLE) {
        /* Into pageable memory: done when the call returns. */
        e = pageable_wait(st);
    }
    pthread_mutex_unlock(&fk_mu);
    return fk_err(e);
}

EXPORT cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s)
{
    cudaError_t e = enter("cudaMemsetAsync");
    if (e)
        return e;
    int dev;
    int dk = fk_mem_kind(dst, n, &dev);
    fstream *st = stream_of(s);
    e = on_current(st);
    if (e == cudaSuccess && !is_dev(dk))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess) {
        fop *o = op(OP_SET);
        o->dst = dst;
        o->n = n;
        o->val = value;
        o->dst_reg = 1;
        push(st, o);
    }
    return leave(e);
}
