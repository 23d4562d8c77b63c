/*
 * fake_cudart.c - a stand-in for the CUDA runtime (libcudart.so.<major>), so
 * that the library's CUDA path and test_cuda.c run on a machine without a GPU
 * (CTest: test_cuda_fake, where the library's dlopen finds it by its soname
 * through LD_LIBRARY_PATH; cuda_fake_env and cuda_fake_loaded, where it is
 * named by RINGFEED_CUDART or already loaded).
 *
 * One fake device, or $FAKE_CUDART_DEVICES of them (the current device is per
 * thread, 0 on a new thread, as in CUDA). "Device" memory is host memory that
 * is registered here, so that every copy's kind and bounds are checked when
 * it is enqueued and again when it runs (use after cudaFree is an abort, not
 * silent corruption). Every allocation remembers the device current on the
 * calling thread, which cudaPointerGetAttributes reports as CUDA does (a test
 * checks that page-locked memory belongs to the loader's device).
 * $FAKE_CUDART_HOSTALLOC_FAIL_SIZE=N makes cudaHostAlloc of exactly N bytes
 * fail with cudaErrorMemoryAllocation, as when page-locked memory runs out
 * (read at each call: a test sets it to the size of one ring slot).
 * Streams are asynchronous: one "device" thread runs the streams' ops in
 * order, honouring cudaStreamWaitEvent, with a small delay per op, so the
 * host really sees copies still in flight (a ring slot whose copy is pending,
 * a release event not yet reached). It implements only the calls libringfeed
 * and test_cuda.c make; a function missing here makes the library refuse
 * this runtime (the note names it), and test_cuda.c fail.
 *
 * Not part of the library; never installed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#define EXPORT __attribute__((visibility("default")))

enum { OP_COPY = 1, OP_SET, OP_RECORD, OP_WAIT };

typedef struct fstream fstream;

typedef struct fop {
    int kind;
    void *dst;
    const void *src;
    size_t n;
    int val;     /* OP_SET: the byte; OP_COPY: 1 when dst was registered memory */
    int src_dev; /* OP_COPY: src was device memory */
    fstream *ws; /* OP_WAIT: until ws->done >= wseq */
    long wseq;
    struct fop *next;
} fop;

struct fstream {
    unsigned magic;
    int alive;
    fop *head, *tail;
    long enq, done;
};

typedef struct fevent {
    unsigned magic;
    int alive;
    fstream *s; /* last record; NULL: never recorded (complete) */
    long seq;
} fevent;

typedef struct alloc {
    uint8_t *p;
    size_t n;
    int device; /* 1: cudaMalloc, 0: page-locked host */
    int owner;  /* the device current on the allocating thread */
} alloc;

#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x4556544eu
#define MAXALLOC 4096

/* mu protects every stream's queue and counters, every event, the allocation
 * table and `kept`; cv is broadcast whenever an op is queued or has run. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static fstream legacy = {STREAM_MAGIC, 1, NULL, NULL, 0, 0};
static fstream *streams[1024];
static int nstreams;
static alloc allocs[MAXALLOC];
static int nallocs;
static void **kept; /* every stream and event ever made: destroyed ones stay
                     * (marked dead) to catch a use after destroy, and stay
                     * reachable for LeakSanitizer */
static size_t nkept, capkept;
static __thread int cur_device;
static __thread cudaError_t last_error;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fake_cudart: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

static void keep(void *p) /* with mu held */
{
    if (nkept == capkept) {
        capkept = capkept ? 2 * capkept : 256;
        kept = realloc(kept, capkept * sizeof *kept);
        if (!kept)
            die("out of memory");
    }
    kept[nkept++] = p;
}

static cudaError_t err(cudaError_t e)
{
    if (e != cudaSuccess)
        last_error = e;
    return e;
}

static void nap_us(long us)
{
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

static const alloc *find(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (int i = 0; i < nallocs; i++)
        if (b >= allocs[i].p && b + n <= allocs[i].p + allocs[i].n && b < allocs[i].p + allocs[i].n)
            return &allocs[i];
    return NULL;
}

static fstream *S(cudaStream_t s)
{
    if (s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread)
        return &legacy;
    fstream *f = (fstream *)s;
    if (f->magic != STREAM_MAGIC || !f->alive)
        die("use of a destroyed or bogus stream %p", (void *)s);
    return f;
}

static fevent *E(cudaEvent_t e)
{
    fevent *f = (fevent *)e;
    if (!f || f->magic != EVENT_MAGIC || !f->alive)
        die("use of a destroyed or bogus event %p", (void *)e);
    return f;
}

/* ---- the device thread --------------------------------------------------- */

static int runnable(const fstream *s)
{
    const fop *o = s->head;
    return o && (o->kind != OP_WAIT || !o->ws || o->ws->done >= o->wseq);
}

static void *device_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        fstream *pick = NULL;
        if (runnable(&legacy))
            pick = &legacy;
        for (int i = 0; !pick && i < nstreams; i++)
            if (streams[i] && runnable(streams[i]))
                pick = streams[i];
        if (!pick) {
            pthread_cond_wait(&cv, &mu);
            continue;
        }
        fop *o = pick->head;
        long delay = 0;
        if (o->kind == OP_COPY) {
            /* Checked again when it runs: the memory must still exist. */
            if (o->val && !find(o->dst, o->n))
                die("a copy ran into freed memory %p (%zu bytes)", o->dst, o->n);
            if (o->src_dev && !find(o->src, o->n))
                die("a copy ran from freed memory %p (%zu bytes)", o->src, o->n);
            memcpy(o->dst, o->src, o->n);
            delay = 50 + (long)(o->n >> 14); /* ~16 GB/s, at least 50 us */
        } else if (o->kind == OP_SET) {
            if (!find(o->dst, o->n))
                die("a memset ran on freed memory %p", o->dst);
            memset(o->dst, o->val, o->n < (1u << 20) ? o->n : (1u << 20));
            delay = 1000; /* a "training step" */
        }
        pthread_mutex_unlock(&mu);
        if (delay)
            nap_us(delay);
        pthread_mutex_lock(&mu);
        pick->head = o->next;
        if (!pick->head)
            pick->tail = NULL;
        pick->done++;
        free(o);
        pthread_cond_broadcast(&cv);
    }
    return NULL;
}

static void start(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, device_main, NULL) != 0)
        die("cannot start the device thread");
    pthread_detach(t);
}

static void push(fstream *s, fop *o)
{
    o->next = NULL;
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    s->enq++;
    pthread_cond_broadcast(&cv);
}

static fop *op(int kind)
{
    pthread_once(&once, start);
    fop *o = calloc(1, sizeof *o);
    if (!o)
        die("out of memory");
    o->kind = kind;
    return o;
}

/* Waits until every stream is idle (cudaFree and cudaFreeHost synchronise). */
static void idle_all(void)
{
    for (;;) {
        int busy = legacy.done < legacy.enq;
        for (int i = 0; i < nstreams; i++)
            busy |= streams[i] && streams[i]->done < streams[i]->enq;
        if (!busy)
            return;
        pthread_cond_wait(&cv, &mu);
    }
}

/* ---- the API ------------------------------------------------------------- */

/* The version of the headers it was built with: lib/cudart.c checks the
 * major of the runtime it loads. */
EXPORT cudaError_t cudaRuntimeGetVersion(int *version)
{
    *version = CUDART_VERSION;
    return cudaSuccess;
}

/* $FAKE_CUDART_DEVICES (1 to 16), else 1. */
static int ndevices(void)
{
    const char *e = getenv("FAKE_CUDART_DEVICES");
    int n = e ? atoi(e) : 1;
    return n >= 1 && n <= 16 ? n : 1;
}

EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    *count = ndevices();
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDevice(int *device)
{
    *device = cur_device;
    return cudaSuccess;
}

EXPORT cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= ndevices())
        return err(cudaErrorInvalidDevice);
    cur_device = device;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    if (device < 0 || device >= ndevices())
        return err(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "fake_cudart device");
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

EXPORT const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "cudaSuccess";
    case cudaErrorInvalidValue:
        return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
        return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice:
        return "cudaErrorInvalidDevice";
    case cudaErrorNotReady:
        return "cudaErrorNotReady";
    default:
        return "cudaErrorUnknown";
    }
}

EXPORT const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    case cudaErrorNotReady:
        return "device not ready";
    default:
        return "unknown error (fake_cudart)";
    }
}

static cudaError_t do_alloc(void **p, size_t n, int device)
{
    void *m = NULL;
    if (posix_memalign(&m, 256, n ? n : 1) != 0)
        return err(cudaErrorMemoryAllocation);
    pthread_mutex_lock(&mu);
    int i;
    for (i = 0; i < nallocs && allocs[i].p; i++)
        ;
    if (i == MAXALLOC)
        die("too many allocations");
    allocs[i] = (alloc){m, n ? n : 1, device, cur_device};
    if (i == nallocs)
        nallocs++;
    pthread_mutex_unlock(&mu);
    *p = m;
    return cudaSuccess;
}

static cudaError_t do_free(void *p, int device)
{
    if (!p)
        return cudaSuccess;
    pthread_mutex_lock(&mu);
    idle_all();
    for (int i = 0; i < nallocs; i++) {
        if (allocs[i].p == p) {
            if (allocs[i].device != device)
                die("%s of %p, which %s", device ? "cudaFree" : "cudaFreeHost", p,
                    device ? "is host memory" : "is device memory");
            memset(p, 0xDD, allocs[i].n); /* a later read of it shows */
            allocs[i].p = NULL;
            pthread_mutex_unlock(&mu);
            free(p);
            return cudaSuccess;
        }
    }
    pthread_mutex_unlock(&mu);
    return err(cudaErrorInvalidValue);
}

EXPORT cudaError_t cudaMalloc(void **p, size_t n)
{
    return do_alloc(p, n, 1);
}

EXPORT cudaError_t cudaFree(void *p)
{
    return do_free(p, 1);
}

EXPORT cudaError_t cudaMallocHost(void **p, size_t n)
{
    return do_alloc(p, n, 0);
}

EXPORT cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags)
{
    (void)flags;
    const char *fail = getenv("FAKE_CUDART_HOSTALLOC_FAIL_SIZE");
    if (fail && strtoull(fail, NULL, 10) == n)
        return err(cudaErrorMemoryAllocation);
    return do_alloc(p, n, 0);
}

EXPORT cudaError_t cudaFreeHost(void *p)
{
    return do_free(p, 0);
}

EXPORT cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_lock(&mu);
    const alloc *x = find(p, 1);
    a->type = !x          ? cudaMemoryTypeUnregistered
              : x->device ? cudaMemoryTypeDevice
                          : cudaMemoryTypeHost;
    a->device = x ? x->owner : -1;
    a->devicePointer = x && x->device ? (void *)p : NULL;
    a->hostPointer = x && !x->device ? (void *)p : NULL;
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    (void)flags;
    fstream *f = calloc(1, sizeof *f);
    f->magic = STREAM_MAGIC;
    f->alive = 1;
    pthread_mutex_lock(&mu);
    if (nstreams == (int)(sizeof streams / sizeof streams[0]))
        die("too many streams");
    streams[nstreams++] = f;
    keep(f);
    pthread_mutex_unlock(&mu);
    *s = (cudaStream_t)f;
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    pthread_mutex_lock(&mu);
    fstream *f = S(s);
    while (f->done < f->enq) /* as CUDA: the work still completes */
        pthread_cond_wait(&cv, &mu);
    f->alive = 0; /* kept (never freed): a later use is caught by S() */
    for (int i = 0; i < nstreams; i++)
        if (streams[i] == f)
            streams[i] = NULL;
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    pthread_mutex_lock(&mu);
    fstream *f = S(s);
    long target = f->enq;
    while (f->done < target)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    (void)flags;
    fevent *f = calloc(1, sizeof *f);
    f->magic = EVENT_MAGIC;
    f->alive = 1;
    pthread_mutex_lock(&mu);
    keep(f);
    pthread_mutex_unlock(&mu);
    *e = (cudaEvent_t)f;
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    pthread_mutex_lock(&mu);
    E(e)->alive = 0; /* kept: a later use is caught by E() */
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    fop *o = op(OP_RECORD);
    pthread_mutex_lock(&mu);
    fevent *f = E(e);
    fstream *st = S(s);
    push(st, o);
    f->s = st;
    f->seq = st->enq;
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventQuery(cudaEvent_t e)
{
    pthread_mutex_lock(&mu);
    fevent *f = E(e);
    int done = !f->s || f->s->done >= f->seq;
    pthread_mutex_unlock(&mu);
    return done ? cudaSuccess : err(cudaErrorNotReady);
}

EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    pthread_mutex_lock(&mu);
    fevent *f = E(e);
    fstream *s = f->s;
    long seq = f->seq;
    while (s && s->done < seq)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    (void)flags;
    fop *o = op(OP_WAIT);
    pthread_mutex_lock(&mu);
    fevent *f = E(e);
    o->ws = f->s; /* the last record, as CUDA */
    o->wseq = f->seq;
    push(S(s), o);
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                   cudaStream_t s)
{
    if (n == 0)
        return cudaSuccess;
    pthread_mutex_lock(&mu);
    const alloc *d = find(dst, n), *sr = find(src, n);
    int ok;
    switch (kind) {
    case cudaMemcpyHostToDevice:
        ok = d && d->device && !(sr && sr->device);
        break;
    case cudaMemcpyDeviceToHost:
        ok = sr && sr->device && !(d && d->device);
        break;
    case cudaMemcpyDeviceToDevice:
        ok = d && d->device && sr && sr->device;
        break;
    default:
        ok = 0;
    }
    if (!ok) {
        pthread_mutex_unlock(&mu);
        fprintf(stderr, "fake_cudart: cudaMemcpyAsync(%p, %p, %zu, kind %d): bad pointers\n", dst,
                src, n, (int)kind);
        return err(cudaErrorInvalidValue);
    }
    int dst_registered = d != NULL, src_dev = sr && sr->device;
    pthread_mutex_unlock(&mu);
    fop *o = op(OP_COPY);
    o->dst = dst;
    o->src = src;
    o->n = n;
    o->val = dst_registered;
    o->src_dev = src_dev;
    pthread_mutex_lock(&mu);
    push(S(s), o);
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s)
{
    pthread_mutex_lock(&mu);
    const alloc *d = find(dst, n);
    pthread_mutex_unlock(&mu);
    if (!d || !d->device)
        return err(cudaErrorInvalidValue);
    fop *o = op(OP_SET);
    o->dst = dst;
    o->n = n;
    o->val = value;
    pthread_mutex_lock(&mu);
    push(S(s), o);
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}
