/*
 * test_copier.c - the CUDA copier's state machine and ordering rules, without
 * a GPU (lib/copier.c, lib/ring.c), and the CUDA API's behaviour on a loader
 * that has no device.
 *
 * A fake backend (rf_gpu_ops) models what matters of CUDA: streams are FIFO
 * queues that the test runs by hand, an event completes when its stream has
 * run past the point where it was recorded, a wait is a snapshot of the
 * event's last record (as cudaStreamWaitEvent), and memcpy happens when the
 * copy op runs on its stream. Every API call and every op that runs is
 * logged, so the tests check both the order of the calls and what the
 * "device" saw:
 *   - a host slot is not reclaimed while a copy out of it is pending;
 *   - a device buffer is not overwritten before the consumer's release event;
 *   - the consumer's stream waits for the copy (no host sync: the copier never
 *     runs a stream itself, but on errors and at destroy);
 *   - copies into caller memory wait for the caller's stream first.
 * Real-device tests are in test_cuda.c; the search for the runtime itself
 * (lib/cudart.c) is tested end to end by CTest's cuda_hidden, cuda_fake_env
 * and cuda_fake_loaded (tests/cuda_probe.c).
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
#include "cudart.h"
#include "ring.h"
#include "ringfeed.h"
#include "testutil.h"

/* ----------------------------------------------------------- fake backend */

enum { OP_WAIT = 1, OP_COPY = 2, OP_RECORD = 3, OP_KERNEL = 4 };
#define MAXQ 256
#define MAXOBJ 64
#define MAXLOG 512

typedef struct fstream fstream;

typedef struct fevent {
    int id, alive;
    fstream *s; /* stream of the last record (NULL: never recorded = complete) */
    int seq;    /* complete when s->done >= seq */
} fevent;

typedef struct fop {
    int kind;
    fstream *ws; /* OP_WAIT: stream and sequence number waited for */
    int wseq;
    void *dst;
    const void *src;
    size_t n;
    int tag; /* OP_KERNEL: the test's label */
} fop;

struct fstream {
    int id, alive;
    fop q[MAXQ];
    int enq;  /* ops enqueued */
    int done; /* ops run */
};

typedef struct fake {
    fstream streams[MAXOBJ];
    int nstreams;
    fevent events[MAXOBJ];
    int nevents;
    int dev_allocs, host_allocs, syncs;
    int fail_call; /* fail the fail_call-th call of fail_name (1-based) */
    const char *fail_name;
    int calls_of_name;
    int query_error;
    char calls[MAXLOG][64]; /* API calls, in order */
    int ncalls;
    char runs[MAXLOG][64]; /* ops as they ran on the device */
    int nruns;
} fake;

static fake F;

static fstream *S(void *p)
{
    return (fstream *)p;
}

static fevent *E(void *p)
{
    return (fevent *)p;
}

static void logc(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    assert_true(F.ncalls < MAXLOG);
    vsnprintf(F.calls[F.ncalls++], sizeof F.calls[0], fmt, ap);
    va_end(ap);
}

static void logr(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    assert_true(F.nruns < MAXLOG);
    vsnprintf(F.runs[F.nruns++], sizeof F.runs[0], fmt, ap);
    va_end(ap);
}

/* Injected failure: returns a fake error code (700 + n) on the chosen call. */
static int inject(const char *name)
{
    if (F.fail_name && strcmp(F.fail_name, name) == 0 && ++F.calls_of_name == F.fail_call)
        return 700 + F.fail_call;
    return 0;
}

static fop *push(fstream *s)
{
    assert_true(s->enq - s->done < MAXQ);
    fop *o = &s->q[s->enq % MAXQ];
    memset(o, 0, sizeof *o);
    s->enq++;
    return o;
}

static int f_set_device(void *ctx, int d)
{
    (void)ctx;
    assert_int_equal(d, 0);
    return 0;
}

static int f_stream_create(void *ctx, void **s)
{
    (void)ctx;
    int e = inject("stream_create");
    if (e)
        return e;
    assert_true(F.nstreams < MAXOBJ);
    fstream *st = &F.streams[F.nstreams];
    memset(st, 0, sizeof *st);
    st->id = F.nstreams++;
    st->alive = 1;
    *s = st;
    logc("stream_create s%d", st->id);
    return 0;
}

static int f_stream_destroy(void *ctx, void *s)
{
    (void)ctx;
    assert_true(S(s)->alive);
    S(s)->alive = 0;
    logc("stream_destroy s%d", S(s)->id);
    return 0;
}

static int event_done(const fevent *e)
{
    return !e->s || e->s->done >= e->seq;
}

/* Runs up to max ops of stream s; stops at a wait that is not satisfied.
 * Returns the ops run. */
static int run(fstream *s, int max)
{
    int n = 0;
    while (n < max && s->done < s->enq) {
        fop *o = &s->q[s->done % MAXQ];
        if (o->kind == OP_WAIT && o->ws && o->ws->done < o->wseq)
            break;
        switch (o->kind) {
        case OP_WAIT:
            logr("s%d wait", s->id);
            break;
        case OP_RECORD:
            logr("s%d record", s->id);
            break;
        case OP_COPY:
            memcpy(o->dst, o->src, o->n);
            logr("s%d copy %zu", s->id, o->n);
            break;
        case OP_KERNEL:
            if (o->dst)
                memcpy(o->dst, o->src, o->n);
            logr("s%d kernel %d", s->id, o->tag);
            break;
        }
        s->done++;
        n++;
    }
    return n;
}

/* Runs every stream until nothing moves. */
static void run_all(void)
{
    int moved;
    do {
        moved = 0;
        for (int i = 0; i < F.nstreams; i++)
            moved += run(&F.streams[i], MAXQ);
    } while (moved);
}

static int f_stream_sync(void *ctx, void *s)
{
    (void)ctx;
    F.syncs++;
    logc("stream_sync s%d", S(s)->id);
    run_all(); /* the host waits: the device makes all the progress it can */
    return 0;
}

static int f_event_create(void *ctx, void **ev)
{
    (void)ctx;
    int e = inject("event_create");
    if (e)
        return e;
    assert_true(F.nevents < MAXOBJ);
    fevent *x = &F.events[F.nevents];
    memset(x, 0, sizeof *x);
    x->id = F.nevents++;
    x->alive = 1;
    *ev = x;
    return 0;
}

static int f_event_destroy(void *ctx, void *ev)
{
    (void)ctx;
    assert_true(E(ev)->alive);
    E(ev)->alive = 0;
    return 0;
}

static int f_event_record(void *ctx, void *ev, void *s)
{
    (void)ctx;
    int e = inject("event_record");
    if (e)
        return e;
    fop *o = push(S(s));
    o->kind = OP_RECORD;
    E(ev)->s = S(s);
    E(ev)->seq = S(s)->enq;
    logc("record e%d s%d", E(ev)->id, S(s)->id);
    return 0;
}

static int f_event_query(void *ctx, void *ev)
{
    (void)ctx;
    if (F.query_error)
        return F.query_error;
    return event_done(E(ev)) ? 0 : RF__GPU_NOT_READY;
}

static int f_event_sync(void *ctx, void *ev)
{
    (void)ctx;
    F.syncs++;
    logc("event_sync e%d", E(ev)->id);
    run_all();
    return 0;
}

static int f_stream_wait(void *ctx, void *s, void *ev)
{
    (void)ctx;
    int e = inject("stream_wait");
    if (e)
        return e;
    fop *o = push(S(s));
    o->kind = OP_WAIT;
    o->ws = E(ev)->s; /* a snapshot of the last record, as CUDA does */
    o->wseq = E(ev)->seq;
    logc("wait s%d e%d", S(s)->id, E(ev)->id);
    return 0;
}

static int f_memcpy_async(void *ctx, void *dst, const void *src, size_t n, int kind, void *s)
{
    (void)ctx;
    int e = inject("memcpy");
    if (e)
        return e;
    fop *o = push(S(s));
    o->kind = OP_COPY;
    o->dst = dst;
    o->src = src;
    o->n = n;
    logc("memcpy %s s%d %zu", kind == RF__GPU_H2D ? "h2d" : "d2d", S(s)->id, n);
    return 0;
}

static int f_dev_alloc(void *ctx, void **p, size_t n)
{
    (void)ctx;
    int e = inject("dev_alloc");
    if (e)
        return e;
    size_t r = (n + 255) & ~(size_t)255; /* cudaMalloc aligns to 256 bytes */
    *p = aligned_alloc(256, r);
    memset(*p, 0, r);
    F.dev_allocs++;
    logc("dev_alloc %zu", n);
    return 0;
}

static int f_dev_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
    F.dev_allocs--;
    return 0;
}

static int f_host_alloc(void *ctx, void **p, size_t n)
{
    (void)ctx;
    *p = calloc(1, n);
    F.host_allocs++;
    return 0;
}

static int f_host_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
    F.host_allocs--;
    return 0;
}

static const char *f_error_string(void *ctx, int code)
{
    (void)ctx;
    static char buf[64];
    snprintf(buf, sizeof buf, "fake error %d", code);
    return buf;
}

static const rf_gpu_ops fake_ops = {
    .name = "fake",
    .set_device = f_set_device,
    .stream_create = f_stream_create,
    .stream_destroy = f_stream_destroy,
    .stream_sync = f_stream_sync,
    .event_create = f_event_create,
    .event_destroy = f_event_destroy,
    .event_record = f_event_record,
    .event_query = f_event_query,
    .event_sync = f_event_sync,
    .stream_wait = f_stream_wait,
    .memcpy_async = f_memcpy_async,
    .dev_alloc = f_dev_alloc,
    .dev_free = f_dev_free,
    .host_alloc = f_host_alloc,
    .host_free = f_host_free,
    .error_string = f_error_string,
};

/* A consumer's stream, made by the test (not the copier). */
static fstream *consumer_stream(void)
{
    void *s;
    assert_int_equal(f_stream_create(NULL, &s), 0);
    return S(s);
}

/* A "kernel" on stream s that reads n bytes at src into snap when it runs. */
static void kernel(fstream *s, int tag, void *snap, const void *src, size_t n)
{
    fop *o = push(s);
    o->kind = OP_KERNEL;
    o->tag = tag;
    o->dst = snap;
    o->src = src;
    o->n = n;
    logc("kernel %d s%d", tag, s->id);
}

/* Index of the first call at or after `from` that starts with prefix, or -1. */
static int find_call(const char *prefix, int from)
{
    for (int i = from; i < F.ncalls; i++)
        if (strncmp(F.calls[i], prefix, strlen(prefix)) == 0)
            return i;
    return -1;
}

static int count_runs(const char *prefix)
{
    int n = 0;
    for (int i = 0; i < F.nruns; i++)
        n += strncmp(F.runs[i], prefix, strlen(prefix)) == 0;
    return n;
}

static int reset(void **state)
{
    (void)state;
    memset(&F, 0, sizeof F);
    return 0;
}

/* ------------------------------------------------------------ the fixture */

#define BATCH 4
#define SAMPLE 16 /* bytes per sample */
#define SLOT_BYTES (BATCH * SAMPLE)

typedef struct fixture {
    rf_ring ring;
    rf_copier *c;
    fstream *copy; /* the copier's stream: the first one made */
    int64_t gen;
} fixture;

static void fx_init(fixture *fx, int k)
{
    char err[256] = "";
    memset(fx, 0, sizeof *fx);
    assert_int_equal(rf__ring_init(&fx->ring, k, BATCH, SAMPLE, 0), 0);
    assert_int_equal(rf__copier_create(&fx->c, &fake_ops, NULL, 0, fx->ring.cap, SLOT_BYTES, BATCH,
                                       err, sizeof err),
                     0);
    fx->copy = &F.streams[0];
    fx->ring.copy_done = rf__copier_slot_done;
    fx->ring.copy_ctx = fx->c;
    fx->gen = 1;
}

static void fx_free(fixture *fx)
{
    rf__copier_destroy(fx->c);
    rf__ring_free(&fx->ring);
    /* Everything the copier made is gone; only the test's streams live. */
    for (int i = 0; i < F.nevents; i++)
        assert_false(F.events[i].alive);
    assert_false(F.streams[0].alive);
    assert_int_equal(F.dev_allocs, 0);
    assert_int_equal(F.host_allocs, 0);
}

/* Claims the slot for `batch`, fills it with bytes `fillb` and labels
 * batch*10+i, makes it READY and lends it. NULL when no slot can be claimed. */
static rf_slot *fx_lend(fixture *fx, int64_t batch, int fillb)
{
    rf_slot *s = rf__ring_claim(&fx->ring, fx->gen, batch, BATCH);
    if (!s)
        return NULL;
    memset(s->view.data, fillb, SLOT_BYTES);
    for (int i = 0; i < BATCH; i++)
        s->view.labels[i] = batch * 10 + i;
    s->submitted = BATCH;
    for (int i = 0; i < BATCH; i++)
        rf__ring_sample_done(s, fx->gen);
    assert_int_equal(s->state, RF_SLOT_READY);
    rf__ring_lend(s);
    return s;
}

static int fx_to_device(fixture *fx, rf_slot *s, fstream *consumer, void **dev, int64_t **lab)
{
    char err[256] = "";
    int rc = rf__copier_to_device(fx->c, s->id, s->view.data, s->view.nbytes, s->view.labels,
                                  s->view.count, consumer, dev, lab, err, sizeof err);
    rf__ring_mark_copy(s);
    return rc;
}

static void fx_release(fixture *fx, rf_slot *s)
{
    rf__copier_release(fx->c, s->id);
    assert_int_equal(rf__ring_release(rf__ring_lease(s)), 0);
}

static int all_bytes(const void *p, int v, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != (uint8_t)v)
            return 0;
    return 1;
}

/* ------------------------------------------------------------------ tests */

static void test_create_makes_stream_and_events_but_no_device_memory(void **state)
{
    (void)state;
    fixture fx;
    fx_init(&fx, 2);
    /* One copy stream, one order event and three events per possible slot. */
    assert_int_equal(F.nstreams, 1);
    assert_int_equal(F.nevents, 1 + 3 * fx.ring.cap);
    /* Nothing is allocated on the device before it is needed. */
    assert_int_equal(F.dev_allocs, 0);
    fx_free(&fx);
}

static void test_create_failure_frees_everything(void **state)
{
    (void)state;
    char err[256] = "";
    rf_copier *c = (rf_copier *)1;
    F.fail_name = "event_create";
    F.fail_call = 5;
    assert_int_equal(rf__copier_create(&c, &fake_ops, NULL, 0, 4, 64, 4, err, sizeof err),
                     RF_E_CUDA);
    assert_null(c);
    assert_non_null(strstr(err, "cudaEventCreateWithFlags"));
    assert_non_null(strstr(err, "fake error 705"));
    for (int i = 0; i < F.nevents; i++)
        assert_false(F.events[i].alive);
    assert_false(F.streams[0].alive);
}

/* next_device: the copy is on the copy stream, then an event, then the
 * consumer's stream waits on it; work after that sees the batch. */
static void test_to_device_orders_consumer(void **state)
{
    (void)state;
    fixture fx;
    fx_init(&fx, 2);
    fstream *A = consumer_stream();
    rf_slot *s = fx_lend(&fx, 0, 0xA0);
    void *dev = NULL;
    int64_t *lab = NULL;
    int first = F.ncalls;
    assert_int_equal(fx_to_device(&fx, s, A, &dev, &lab), 0);
    assert_non_null(dev);
    assert_non_null(lab);
    assert_int_equal((uintptr_t)lab % 256, 0);
    /* The calls, in order. */
    int a = find_call("dev_alloc", first);
    int m1 = find_call("memcpy h2d s0", first);
    int m2 = find_call("memcpy h2d s0", m1 + 1);
    int r = find_call("record", first);
    int w = find_call("wait s1", first);
    assert_true(a >= 0 && m1 > a && m2 > m1 && r > m2 && w > r);
    assert_int_equal(find_call("stream_sync", first), -1); /* no host sync */
    assert_int_equal(find_call("event_sync", first), -1);
    /* The consumer's kernel cannot run before the copy. */
    uint8_t snap[SLOT_BYTES];
    int64_t snaplab[BATCH];
    memset(snap, 0, sizeof snap);
    kernel(A, 1, snap, dev, SLOT_BYTES);
    run(A, MAXQ);
    assert_int_equal(count_runs("s1 kernel 1"), 0);
    run(fx.copy, MAXQ);
    run(A, MAXQ);
    assert_int_equal(count_runs("s1 kernel 1"), 1);
    assert_true(all_bytes(snap, 0xA0, SLOT_BYTES));
    memcpy(snaplab, lab, sizeof snaplab);
    for (int i = 0; i < BATCH; i++)
        assert_int_equal(snaplab[i], i);
    fx_release(&fx, s);
    run_all();
    fx_free(&fx);
}

/* A released host slot is not claimed again while a copy out of it runs,
 * and its bytes are not touched; once the copy completed it is. */
static void test_host_slot_not_reclaimed_while_copy_pending(void **state)
{
    (void)state;
    fixture fx;
    fx_init(&fx, 2);
    fstream *A = consumer_stream();
    rf_slot *s0 = fx_lend(&fx, 0, 0x11);
    void *dev;
    int64_t *lab;
    assert_int_equal(fx_to_device(&fx, s0, A, &dev, &lab), 0);
    fx_release(&fx, s0); /* at once, as Python does after its copy */
    assert_int_equal(s0->state, RF_SLOT_FREE);
    assert_int_equal(s0->copy_pending, 1);
    /* The next batch goes to the other slot, the one after finds none. */
    rf_slot *s1 = fx_lend(&fx, 1, 0x22);
    assert_non_null(s1);
    assert_int_not_equal(s1->id, s0->id);
    assert_null(rf__ring_claim(&fx.ring, fx.gen, 2, BATCH));
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 1);
    assert_int_equal(rf__ring_count(&fx.ring, RF_SLOT_FREE), 1);
    assert_true(all_bytes(s0->view.data, 0x11, SLOT_BYTES)); /* untouched */
    /* The consumer's stream running does not complete the copy... */
    run(A, MAXQ);
    assert_null(rf__ring_claim(&fx.ring, fx.gen, 2, BATCH));
    /* ... the copy stream does. */
    run(fx.copy, MAXQ);
    assert_true(all_bytes(dev, 0x11, SLOT_BYTES));
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 0);
    assert_int_equal(s0->copy_pending, 0);
    rf_slot *again = fx_lend(&fx, 2, 0x33);
    assert_ptr_equal(again, s0);
    fx_release(&fx, s1);
    fx_release(&fx, again);
    run_all();
    fx_free(&fx);
}

/* The claim itself asks the copier (no reap before it). */
static void test_claim_queries_copy(void **state)
{
    (void)state;
    fixture fx;
    fx_init(&fx, 1);
    fstream *A = consumer_stream();
    rf_slot *s = fx_lend(&fx, 0, 1);
    void *dev;
    int64_t *lab;
    assert_int_equal(fx_to_device(&fx, s, A, &dev, &lab), 0);
    fx_release(&fx, s);
    assert_null(rf__ring_claim(&fx.ring, fx.gen, 1, BATCH));
    run_all();
    assert_ptr_equal(rf__ring_claim(&fx.ring, fx.gen, 1, BATCH), s);
    assert_int_equal(s->copy_pending, 0);
    fx_free(&fx);
}

/* A device buffer is overwritten only after the consumer's release event:
 * a kernel queued on the consumer's stream before the release still sees
 * the old batch, even when the copy stream is run first. */
static void test_device_buffer_waits_for_release(void **state)
{
    (void)state;
    fixture fx;
    fx_init(&fx, 1); /* one slot: batch 1 must reuse batch 0's device buffer */
    fstream *A = consumer_stream();
    rf_slot *s = fx_lend(&fx, 0, 0x5A);
    void *dev0, *dev1;
    int64_t *lab0, *lab1;
    assert_int_equal(fx_to_device(&fx, s, A, &dev0, &lab0), 0);
    run(fx.copy, MAXQ);
    uint8_t snap[SLOT_BYTES];
    int64_t snaplab[BATCH];
    kernel(A, 7, snap, dev0, SLOT_BYTES); /* the training step, not run yet */
    kernel(A, 8, snaplab, lab0, sizeof snaplab);
    fx_release(&fx, s); /* records the release on A, after the kernels */
    int rel = find_call("record", 0);
    while (find_call("record", rel + 1) >= 0)
        rel = find_call("record", rel + 1); /* the last record: the release */
    assert_non_null(strstr(F.calls[rel], " s1"));
    /* The copy of batch 0 completed: the host slot is free again. */
    rf_slot *s1 = fx_lend(&fx, 1, 0xC3);
    assert_ptr_equal(s1, s);
    int first = F.ncalls;
    assert_int_equal(fx_to_device(&fx, s1, A, &dev1, &lab1), 0);
    assert_ptr_equal(dev1, dev0);
    /* The copy stream waits for the release before its copy. */
    int w = find_call("wait s0", first);
    int m = find_call("memcpy h2d s0", first);
    assert_true(w >= 0 && m > w);
    /* Run the copy stream first: it stops at the wait, the buffer is intact. */
    int copies = count_runs("s0 copy");
    run(fx.copy, MAXQ);
    assert_int_equal(count_runs("s0 copy"), copies);
    assert_true(all_bytes(dev0, 0x5A, SLOT_BYTES));
    /* The consumer's kernels run, then the copy may go. */
    run(A, MAXQ); /* stops at its wait for the new copy */
    assert_true(all_bytes(snap, 0x5A, SLOT_BYTES));
    for (int i = 0; i < BATCH; i++)
        assert_int_equal(snaplab[i], i);
    run(fx.copy, MAXQ);
    assert_int_equal(count_runs("s0 copy"), copies + 2);
    assert_true(all_bytes(dev1, 0xC3, SLOT_BYTES));
    assert_int_equal(lab1[0], 10);
    fx_release(&fx, s1);
    run_all();
    fx_free(&fx);
}

/* rf_batch_copy_to of a host batch: the copy stream waits for the caller's
 * stream (the destination may still be in use there), copies, records, and
 * the caller's stream waits for the copy. */
static void test_copy_to_waits_for_caller_stream(void **state)
{
    (void)state;
    fixture fx;
    fx_init(&fx, 2);
    fstream *B = consumer_stream();
    uint8_t dst[SLOT_BYTES];
    int64_t dlab[BATCH];
    uint8_t old[SLOT_BYTES];
    memset(dst, 0xEE, sizeof dst);
    kernel(B, 3, old, dst, SLOT_BYTES); /* the memory's previous user */
    rf_slot *s = fx_lend(&fx, 5, 0x77);
    char err[200];
    int first = F.ncalls;
    assert_int_equal(rf__copier_copy_to(fx.c, s->id, s->view.data, s->view.nbytes, s->view.labels,
                                        s->view.count, dst, dlab, B, err, sizeof err),
                     0);
    rf__ring_mark_copy(s);
    int r0 = find_call("record", first);
    int w0 = find_call("wait s0", first);
    int m = find_call("memcpy h2d s0", first);
    int r1 = find_call("record", m);
    int w1 = find_call("wait s1", first);
    assert_true(r0 >= 0 && strstr(F.calls[r0], " s1") && w0 > r0 && m > w0 && r1 > m && w1 > r1);
    assert_int_equal(find_call("dev_alloc", first), -1); /* no device buffer needed */
    /* Released at once: the host slot waits for the copy. */
    assert_int_equal(rf__ring_release(rf__ring_lease(s)), 0);
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 1);
    run(fx.copy, MAXQ);
    assert_true(all_bytes(dst, 0xEE, SLOT_BYTES)); /* B's kernel has not run */
    run(B, 1);
    assert_true(all_bytes(old, 0xEE, SLOT_BYTES));
    run_all();
    assert_true(all_bytes(dst, 0x77, SLOT_BYTES));
    for (int i = 0; i < BATCH; i++)
        assert_int_equal(dlab[i], 50 + i);
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 0);
    fx_free(&fx);
}

/* rf_batch_copy_to of a device batch from another stream: device to device on
 * that stream, and the consumer's stream (where the release is recorded)
 * waits for the read. */
static void test_copy_to_from_device_other_stream(void **state)
{
    (void)state;
    fixture fx;
    fx_init(&fx, 1);
    fstream *A = consumer_stream(), *B = consumer_stream();
    rf_slot *s = fx_lend(&fx, 0, 0x42);
    void *dev;
    int64_t *lab;
    assert_int_equal(fx_to_device(&fx, s, A, &dev, &lab), 0);
    uint8_t dst[SLOT_BYTES];
    int64_t dlab[BATCH];
    char err[200];
    int first = F.ncalls;
    assert_int_equal(rf__copier_copy_to(fx.c, s->id, s->view.data, s->view.nbytes, s->view.labels,
                                        s->view.count, dst, dlab, B, err, sizeof err),
                     0);
    int w = find_call("wait s2", first);
    int m = find_call("memcpy d2d s2", first);
    int r = find_call("record", m);
    int wa = find_call("wait s1", r);
    assert_true(w >= 0 && m > w && r > m && wa > r);
    assert_int_equal(find_call("memcpy h2d", first), -1);
    fx_release(&fx, s);
    /* Batch 1 into the same buffer must wait for B's read too. */
    run(fx.copy, MAXQ);
    rf_slot *s1 = fx_lend(&fx, 1, 0x99);
    assert_ptr_equal(s1, s);
    assert_int_equal(fx_to_device(&fx, s1, A, &dev, &lab), 0);
    run(fx.copy, MAXQ);
    run(A, MAXQ);
    assert_true(all_bytes(dev, 0x42, SLOT_BYTES)); /* B has not read yet */
    run(B, MAXQ);
    assert_true(all_bytes(dst, 0x42, SLOT_BYTES));
    run_all();
    assert_true(all_bytes(dev, 0x99, SLOT_BYTES));
    fx_release(&fx, s1);
    fx_free(&fx);
}

/* The same stream: no extra event. Partial destinations. */
static void test_copy_to_same_stream_and_partial(void **state)
{
    (void)state;
    fixture fx;
    fx_init(&fx, 2);
    fstream *A = consumer_stream();
    rf_slot *s = fx_lend(&fx, 0, 0x10);
    void *dev;
    int64_t *lab;
    assert_int_equal(fx_to_device(&fx, s, A, &dev, &lab), 0);
    uint8_t dst[SLOT_BYTES];
    char err[200] = "";
    int first = F.ncalls;
    assert_int_equal(rf__copier_copy_to(fx.c, s->id, s->view.data, s->view.nbytes, s->view.labels,
                                        s->view.count, dst, NULL, A, err, sizeof err),
                     0);
    assert_int_equal(find_call("record", first), -1);
    assert_int_not_equal(find_call("memcpy d2d s1", first), -1);
    assert_int_equal(find_call("memcpy d2d s1", find_call("memcpy d2d s1", first) + 1), -1);
    assert_int_equal(rf__copier_copy_to(fx.c, s->id, s->view.data, s->view.nbytes, s->view.labels,
                                        s->view.count, NULL, NULL, A, err, sizeof err),
                     RF_E_INVALID);
    assert_non_null(strstr(err, "no destination"));
    fx_release(&fx, s);
    run_all();
    assert_true(all_bytes(dst, 0x10, SLOT_BYTES));
    fx_free(&fx);
}

/* A short last batch copies only its samples and labels. */
static void test_short_batch_copies_only_its_samples(void **state)
{
    (void)state;
    fixture fx;
    fx_init(&fx, 2);
    fstream *A = consumer_stream();
    rf_slot *s = rf__ring_claim(&fx.ring, fx.gen, 0, 3);
    memset(s->view.data, 0x61, 3 * SAMPLE);
    for (int i = 0; i < 3; i++)
        s->view.labels[i] = 100 + i;
    s->submitted = 3;
    for (int i = 0; i < 3; i++)
        rf__ring_sample_done(s, fx.gen);
    rf__ring_lend(s);
    void *dev;
    int64_t *lab;
    int first = F.ncalls;
    assert_int_equal(fx_to_device(&fx, s, A, &dev, &lab), 0);
    assert_int_not_equal(find_call("memcpy h2d s0 48", first), -1);
    assert_int_not_equal(find_call("memcpy h2d s0 24", first), -1);
    run_all();
    assert_int_equal(lab[2], 102);
    rf_copier_stats st;
    rf__copier_stats(fx.c, &st);
    assert_int_equal(st.copies, 1);
    assert_int_equal(st.bytes, 48 + 24);
    fx_release(&fx, s);
    fx_free(&fx);
}

/* A failing CUDA call: RF_E_CUDA, the message names the call and the error,
 * what was enqueued is drained, and the next batch works. */
static void test_failed_cuda_call_named_drained_then_recovers(void **state)
{
    (void)state;
    fixture fx;
    fx_init(&fx, 2);
    fstream *A = consumer_stream();
    rf_slot *s = fx_lend(&fx, 0, 0x01);
    void *dev = NULL;
    int64_t *lab = NULL;
    char err[256] = "";
    F.fail_name = "memcpy";
    F.fail_call = 2; /* the labels' copy, after the images' */
    int syncs = F.syncs;
    int rc = rf__copier_to_device(fx.c, s->id, s->view.data, s->view.nbytes, s->view.labels,
                                  s->view.count, A, &dev, &lab, err, sizeof err);
    assert_int_equal(rc, RF_E_CUDA);
    assert_non_null(strstr(err, "copier: cudaMemcpyAsync"));
    assert_non_null(strstr(err, "fake error 702"));
    assert_int_equal(F.syncs, syncs + 1);
    assert_null(dev);
    rf__ring_mark_copy(s);
    rf__copier_release(fx.c, s->id); /* not on the device: nothing recorded */
    assert_int_equal(rf__ring_release(rf__ring_lease(s)), 0);
    assert_int_equal(rf__ring_reap_copies(&fx.ring), 0);
    rf_copier_stats st;
    rf__copier_stats(fx.c, &st);
    assert_int_equal(st.errors, 1);
    assert_non_null(strstr(st.last_error, "cudaMemcpyAsync"));
    F.fail_name = NULL;
    rf_slot *s1 = fx_lend(&fx, 1, 0x02);
    assert_int_equal(fx_to_device(&fx, s1, A, &dev, &lab), 0);
    fx_release(&fx, s1);
    run_all();
    fx_free(&fx);
}

/* A failed context: the query's error counts as "done" (nothing will run). */
static void test_failed_event_query_counts_as_done(void **state)
{
    (void)state;
    fixture fx;
    fx_init(&fx, 1);
    fstream *A = consumer_stream();
    rf_slot *s = fx_lend(&fx, 0, 0x01);
    void *dev;
    int64_t *lab;
    assert_int_equal(fx_to_device(&fx, s, A, &dev, &lab), 0);
    fx_release(&fx, s);
    F.query_error = 999;
    assert_ptr_equal(rf__ring_claim(&fx.ring, fx.gen, 1, BATCH), s);
    rf_copier_stats st;
    rf__copier_stats(fx.c, &st);
    assert_int_equal(st.errors, 1);
    assert_non_null(strstr(st.last_error, "cudaEventQuery"));
    F.query_error = 0;
    fx_free(&fx);
}

/* Destroy with a batch still on the device and copies queued: it waits for
 * them (the ring's memory is freed next), then frees everything. */
static void test_destroy_waits_for_queued_copies(void **state)
{
    (void)state;
    fixture fx;
    fx_init(&fx, 2);
    fstream *A = consumer_stream();
    rf_slot *s = fx_lend(&fx, 0, 0x01);
    void *dev;
    int64_t *lab;
    assert_int_equal(fx_to_device(&fx, s, A, &dev, &lab), 0);
    int before = count_runs("s0 copy");
    fx_free(&fx);
    assert_int_equal(count_runs("s0 copy"), before + 2);
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
    assert_int_equal(rf__ring_reap_copies(&r), 0);
    assert_ptr_equal(rf__ring_claim(&r, 1, 1, 2), s);
    rf__ring_free(&r);
}

/* -------------------------------------------- the public API, no device */

static char *root;

static void test_api_without_device(void **state)
{
    (void)state;
    int n = rf_cuda_device_count();
    if (n > 0)
        skip(); /* test_cuda.c covers the device */
    root = tu_tempdir("copier");
    assert_non_null(root);
    assert_int_equal(tu_make_folder(root, 2, 3, 64, 48, 1), 0);
    for (int pin = 0; pin <= 1; pin++) {
        rf_loader *l = rf_loader_create(root);
        assert_non_null(l);
        assert_int_equal(rf_loader_set_param(l, RF_P_BATCH_SIZE, 2), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_IMAGE_SIZE, 32), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_NUM_WORKERS, 1), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_DEVICE, 0), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_PIN_MEMORY, pin), 0);
        /* device 0 asked for, none here: the loader runs on the CPU. */
        assert_int_equal(rf_loader_start(l), 0);
        char js[8192];
        assert_true(rf_loader_stats_json(l, js, sizeof js) > 0);
        assert_non_null(strstr(js, "\"mode\": \"pageable\""));
        assert_non_null(strstr(js, "\"device\": \"cpu\""));
        assert_non_null(strstr(js, "\"available\": false"));
        assert_non_null(strstr(js, "\"requested_device\": 0"));
#ifdef RF_HAVE_CUDA
        assert_non_null(strstr(js, "\"built\": true"));
        const rf_cudart *rt = rf__cudart(NULL, 0);
        if (rt) {
            /* A runtime without a device: which runtime, and why no device. */
            assert_non_null(strstr(js, rt->desc));
            assert_non_null(strstr(js, "no CUDA device"));
        } else {
            assert_non_null(strstr(js, "no CUDA runtime: tried"));
        }
#else
        assert_non_null(strstr(js, "\"built\": false"));
        assert_non_null(strstr(js, "built without"));
#endif
        rf_batch *b = (rf_batch *)1;
        assert_int_equal(rf_loader_next_device(l, NULL, &b), RF_E_NO_DEVICE);
        assert_null(b);
        assert_non_null(strstr(rf_loader_errmsg(l), "no CUDA device"));
        assert_int_equal(rf_loader_next(l, &b), RF_OK);
        assert_null(rf_batch_device_data(b));
        assert_null(rf_batch_device_labels(b));
        uint8_t dst[16];
        assert_int_equal(rf_batch_copy_to(b, dst, NULL, NULL), RF_E_NO_DEVICE);
        rf_batch_release(b);
        rf_loader_destroy(l);
    }
    /* CPU loader: pageable, and the stats say why. */
    rf_loader *l = rf_loader_create(root);
    assert_int_equal(rf_loader_set_param(l, RF_P_NUM_WORKERS, 1), 0);
    assert_int_equal(rf_loader_start(l), 0);
    char js[8192];
    assert_true(rf_loader_stats_json(l, js, sizeof js) > 0);
    assert_non_null(strstr(js, "\"mode\": \"pageable\""));
    assert_non_null(strstr(js, "device=cpu"));
    rf_loader_destroy(l);
    /* NULL-safety of the CUDA entry points. */
    assert_int_equal(rf_loader_next_device(NULL, NULL, NULL), RF_E_INVALID);
    assert_int_equal(rf_batch_copy_to(NULL, NULL, NULL, NULL), RF_E_INVALID);
    assert_null(rf_batch_device_data(NULL));
    assert_null(rf_batch_device_labels(NULL));
    tu_rmtree(root);
    free(root);
}

/* The runtime table: loaded once, by the names the header binds to, and a
 * note that says what happened either way. */
static void test_cudart_table(void **state)
{
    (void)state;
    char note[1024] = "";
    const rf_cudart *rt = rf__cudart(note, sizeof note);
    assert_ptr_equal(rf__cudart(NULL, 0), rt); /* loaded once */
    int n = rf_cuda_device_count();
    char why[1024] = "";
    assert_int_equal(rf__cuda_devices(why, sizeof why), n);
#ifdef RF_HAVE_CUDA
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    assert_string_equal(RF_CUDART_SYM(cudaMemcpyAsync), "cudaMemcpyAsync_ptsz");
#else
    assert_string_equal(RF_CUDART_SYM(cudaMemcpyAsync), "cudaMemcpyAsync");
#endif
    if (!rt) {
        print_message("no runtime: %s\n", note);
        assert_non_null(strstr(note, "no CUDA runtime: tried "));
        assert_int_equal(n, 0);
        assert_string_equal(why, note);
        return;
    }
    print_message("%s\n", rt->desc);
    int major = rt->version / 1000;
    assert_true(major == CUDART_VERSION / 1000 || (major >= 11 && major <= 13));
    assert_non_null(rt->handle);
    assert_true(rt->path[0] == '/');
    assert_non_null(strstr(rt->desc, rt->path));
    int v = 0;
    assert_int_equal(rt->RuntimeGetVersion(&v), cudaSuccess);
    assert_int_equal(v, rt->version);
    if (n == 0)
        assert_non_null(strstr(why, "no CUDA device"));
#else
    assert_null(rt);
    assert_non_null(strstr(note, "built without"));
    assert_int_equal(n, 0);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_create_makes_stream_and_events_but_no_device_memory, reset),
        cmocka_unit_test_setup(test_create_failure_frees_everything, reset),
        cmocka_unit_test_setup(test_to_device_orders_consumer, reset),
        cmocka_unit_test_setup(test_host_slot_not_reclaimed_while_copy_pending, reset),
        cmocka_unit_test_setup(test_claim_queries_copy, reset),
        cmocka_unit_test_setup(test_device_buffer_waits_for_release, reset),
        cmocka_unit_test_setup(test_copy_to_waits_for_caller_stream, reset),
        cmocka_unit_test_setup(test_copy_to_from_device_other_stream, reset),
        cmocka_unit_test_setup(test_copy_to_same_stream_and_partial, reset),
        cmocka_unit_test_setup(test_short_batch_copies_only_its_samples, reset),
        cmocka_unit_test_setup(test_failed_cuda_call_named_drained_then_recovers, reset),
        cmocka_unit_test_setup(test_failed_event_query_counts_as_done, reset),
        cmocka_unit_test_setup(test_destroy_waits_for_queued_copies, reset),
        cmocka_unit_test_setup(test_ring_without_copier, reset),
        cmocka_unit_test_setup(test_api_without_device, reset),
        cmocka_unit_test(test_cudart_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
