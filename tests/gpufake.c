/*
 * gpufake.c - the recording GPU backend and the copier fixture (gpufake.h).
 */
#define _GNU_SOURCE
#include "gpufake.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ringfeed.h"

gf_state GF;

static gf_stream *S(void *p)
{
    return (gf_stream *)p;
}

static gf_event *E(void *p)
{
    return (gf_event *)p;
}

static void logc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logc(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    assert_true(GF.ncalls < GF_MAXLOG);
    vsnprintf(GF.calls[GF.ncalls++], sizeof GF.calls[0], fmt, ap);
    va_end(ap);
}

static void logr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logr(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    assert_true(GF.nruns < GF_MAXLOG);
    vsnprintf(GF.runs[GF.nruns++], sizeof GF.runs[0], fmt, ap);
    va_end(ap);
}

/* Injected failure: a fake error code (700 + n) on the chosen call. */
static int inject(const char *name)
{
    if (GF.fail_name && strcmp(GF.fail_name, name) == 0 && ++GF.calls_of_name == GF.fail_call)
        return 700 + GF.fail_call;
    return 0;
}

static gf_op *push(gf_stream *s)
{
    assert_true(s->alive);
    assert_true(s->enq - s->done < GF_MAXQ);
    gf_op *o = &s->q[s->enq % GF_MAXQ];
    memset(o, 0, sizeof *o);
    s->enq++;
    return o;
}

int gf_run(gf_stream *s, int max)
{
    int n = 0;
    while (n < max && s->done < s->enq && !s->stuck) {
        gf_op *o = &s->q[s->done % GF_MAXQ];
        if (o->kind == GF_WAIT && o->ws && o->ws->done < o->wseq)
            break;
        switch (o->kind) {
        case GF_WAIT:
            logr("s%d wait", s->id);
            break;
        case GF_RECORD:
            logr("s%d record", s->id);
            break;
        case GF_COPY:
            memcpy(o->dst, o->src, o->n);
            logr("s%d copy %zu", s->id, o->n);
            break;
        case GF_KERNEL:
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

void gf_run_all(void)
{
    int moved;
    do {
        moved = 0;
        for (int i = 0; i < GF.nstreams; i++)
            moved += gf_run(&GF.streams[i], GF_MAXQ);
    } while (moved);
}

static int f_open(void *ctx, int device, void **dctx)
{
    (void)ctx;
    int e = inject("open");
    if (e)
        return e;
    GF.opens++;
    *dctx = &GF;
    logc("open d%d", device);
    return 0;
}

static void f_close(void *ctx, int device, void *dctx)
{
    (void)ctx;
    assert_ptr_equal(dctx, &GF);
    GF.opens--;
    logc("close d%d", device);
}

static int f_enter(void *ctx, int device, void *dctx, rf_gpu_saved *sv)
{
    (void)ctx;
    assert_ptr_equal(dctx, &GF);
    sv->device = GF.cur;
    sv->changed = GF.cur != device;
    GF.cur = device;
    return 0;
}

static void f_leave(void *ctx, const rf_gpu_saved *sv)
{
    (void)ctx;
    if (sv->changed)
        GF.cur = sv->device;
}

static int f_stream_create(void *ctx, void **s)
{
    (void)ctx;
    int e = inject("stream_create");
    if (e)
        return e;
    assert_true(GF.nstreams < GF_MAXOBJ);
    gf_stream *st = &GF.streams[GF.nstreams];
    memset(st, 0, sizeof *st);
    st->id = GF.nstreams++;
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

static int f_stream_sync(void *ctx, void *s)
{
    (void)ctx;
    GF.syncs++;
    logc("stream_sync s%d", S(s)->id);
    gf_run_all(); /* the host waits: the device makes all the progress it can */
    return 0;
}

static int f_event_create(void *ctx, void **ev)
{
    (void)ctx;
    int e = inject("event_create");
    if (e)
        return e;
    assert_true(GF.nevents < GF_MAXOBJ);
    gf_event *x = &GF.events[GF.nevents];
    memset(x, 0, sizeof *x);
    x->id = GF.nevents++;
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
    gf_op *o = push(S(s));
    o->kind = GF_RECORD;
    E(ev)->s = S(s);
    E(ev)->seq = S(s)->enq;
    logc("record e%d s%d", E(ev)->id, S(s)->id);
    return 0;
}

static int f_event_query(void *ctx, void *ev)
{
    (void)ctx;
    if (GF.query_error)
        return GF.query_error;
    if (GF.query_runs)
        gf_run_all();
    const gf_event *e = E(ev);
    return !e->s || e->s->done >= e->seq ? 0 : RF__GPU_NOT_READY;
}

static int f_stream_wait(void *ctx, void *s, void *ev)
{
    (void)ctx;
    int e = inject("stream_wait");
    if (e)
        return e;
    gf_op *o = push(S(s));
    o->kind = GF_WAIT;
    o->ws = E(ev)->s; /* a snapshot of the last record, as CUDA does */
    o->wseq = E(ev)->seq;
    logc("wait s%d e%d", S(s)->id, E(ev)->id);
    return 0;
}

static int f_memcpy_async(void *ctx, void *dst, const void *src, size_t n, void *s)
{
    (void)ctx;
    int e = inject("memcpy");
    if (e)
        return e;
    gf_op *o = push(S(s));
    o->kind = GF_COPY;
    o->dst = dst;
    o->src = src;
    o->n = n;
    logc("memcpy s%d %zu", S(s)->id, n);
    return 0;
}

/* Blocks handed out (device and page-locked), to catch a free of memory
 * that an op still queued on a stream names. */
static struct {
    void *p;
    size_t n;
} blocks[256];

static void block_add(void *p, size_t n)
{
    for (int i = 0; i < 256; i++)
        if (!blocks[i].p) {
            blocks[i].p = p;
            blocks[i].n = n;
            return;
        }
    fail_msg("gpufake: too many blocks");
}

static void block_free(void *p)
{
    for (int i = 0; i < 256; i++)
        if (blocks[i].p == p) {
            const uint8_t *b = p, *e = b + blocks[i].n;
            for (int k = 0; k < GF.nstreams && !GF.query_error; k++) {
                const gf_stream *s = &GF.streams[k];
                for (int q = s->done; q < s->enq; q++) {
                    const gf_op *o = &s->q[q % GF_MAXQ];
                    const uint8_t *d = o->dst, *src = o->src;
                    if ((d >= b && d < e) || (src >= b && src < e))
                        fail_msg("gpufake: %p freed while s%d still has an op on it", p, s->id);
                }
            }
            blocks[i].p = NULL;
            return;
        }
    fail_msg("gpufake: free of %p, not handed out", p);
}

static int f_dev_alloc(void *ctx, void **p, size_t n)
{
    (void)ctx;
    int e = inject("dev_alloc");
    if (e)
        return e;
    if (GF.dev_oom)
        return RF__GPU_OOM;
    size_t r = (n + 255) & ~(size_t)255; /* cudaMalloc aligns to 256 bytes */
    *p = aligned_alloc(256, r);
    memset(*p, 0, r);
    block_add(*p, n);
    GF.dev_allocs++;
    logc("dev_alloc %zu", n);
    return 0;
}

static int f_dev_free(void *ctx, void *p)
{
    (void)ctx;
    block_free(p);
    free(p);
    GF.dev_allocs--;
    return 0;
}

static int f_host_alloc(void *ctx, void **p, size_t n)
{
    (void)ctx;
    GF.host_calls++;
    if (GF.host_oom_from && GF.host_calls >= GF.host_oom_from)
        return RF__GPU_OOM;
    *p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
    memset(*p, 0, n);
    block_add(*p, n);
    GF.host_allocs++;
    logc("host_alloc %zu", n);
    return 0;
}

static int f_host_free(void *ctx, void *p)
{
    (void)ctx;
    block_free(p);
    free(p);
    GF.host_allocs--;
    return 0;
}

static const char *f_error_string(void *ctx, int code)
{
    (void)ctx;
    static char buf[64];
    if (code == RF__GPU_OOM)
        return "fake out of memory";
    snprintf(buf, sizeof buf, "fake error %d", code);
    return buf;
}

const rf_gpu_ops gf_ops = {
    .name = "fake",
    .open = f_open,
    .close = f_close,
    .enter = f_enter,
    .leave = f_leave,
    .stream_create = f_stream_create,
    .stream_destroy = f_stream_destroy,
    .stream_sync = f_stream_sync,
    .event_create = f_event_create,
    .event_destroy = f_event_destroy,
    .event_record = f_event_record,
    .event_query = f_event_query,
    .stream_wait = f_stream_wait,
    .memcpy_async = f_memcpy_async,
    .dev_alloc = f_dev_alloc,
    .dev_free = f_dev_free,
    .host_alloc = f_host_alloc,
    .host_free = f_host_free,
    .error_string = f_error_string,
};

int gf_reset(void **state)
{
    (void)state;
    memset(&GF, 0, sizeof GF);
    memset(blocks, 0, sizeof blocks);
    GF.cur = -1;
    return 0;
}

gf_stream *gf_stream_new(void)
{
    void *s;
    assert_int_equal(f_stream_create(NULL, &s), 0);
    return S(s);
}

void gf_kernel(gf_stream *s, int tag, void *snap, const void *src, size_t n)
{
    gf_op *o = push(s);
    o->kind = GF_KERNEL;
    o->tag = tag;
    o->dst = snap;
    o->src = src;
    o->n = n;
    logc("kernel %d s%d", tag, s->id);
}

int gf_find_call(const char *prefix, int from)
{
    for (int i = from; i < GF.ncalls; i++)
        if (strncmp(GF.calls[i], prefix, strlen(prefix)) == 0)
            return i;
    return -1;
}

int gf_count_runs(const char *prefix)
{
    int n = 0;
    for (int i = 0; i < GF.nruns; i++)
        n += strncmp(GF.runs[i], prefix, strlen(prefix)) == 0;
    return n;
}

int gf_all_bytes(const void *p, int v, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != (uint8_t)v)
            return 0;
    return 1;
}

/* ---- the fixture ----------------------------------------------------------- */

void gf_fx_init(gf_fixture *fx, int k, int pin)
{
    char err[256] = "";
    memset(fx, 0, sizeof *fx);
    assert_int_equal(rf__copier_create(&fx->c, &gf_ops, NULL, 0, k + RF_RING_MAX_GROW,
                                       GF_SLOT_BYTES, GF_BATCH, err, sizeof err),
                     0);
    fx->copy = &GF.streams[0];
    rf_ring_hooks hooks = {fx->c, rf__copier_slot_done, rf__copier_slot_alloc,
                           rf__copier_slot_free};
    assert_int_equal(rf__ring_init_hooks(&fx->ring, k, GF_BATCH, GF_SAMPLE, pin, &hooks), 0);
    fx->gen = 1;
}

void gf_fx_open(gf_fixture *fx, int k)
{
    gf_fx_init(fx, k, 1);
    fx->A = gf_stream_new();
}

rf_slot *gf_fx_open_on_device(gf_fixture *fx, int k, int fillb)
{
    gf_fx_open(fx, k);
    return gf_fx_on_device(fx, 0, fillb, fx->A, &fx->dev, &fx->lab);
}

void gf_fx_free(gf_fixture *fx)
{
    GF.query_runs = 1; /* the device goes on while the host polls */
    rf__copier_drain(fx->c);
    rf__ring_free(&fx->ring);
    rf__copier_destroy(fx->c);
    GF.query_runs = 0;
    /* Everything the copier made is gone; only the test's streams live. */
    for (int i = 0; i < GF.nevents; i++)
        assert_false(GF.events[i].alive);
    assert_false(GF.streams[0].alive);
    assert_int_equal(GF.dev_allocs, 0);
    assert_int_equal(GF.host_allocs, 0);
    assert_int_equal(GF.opens, 0);
    assert_int_equal(GF.cur, -1); /* the "thread" has its own device back */
}

rf_slot *gf_fx_lend(gf_fixture *fx, int64_t batch, int fillb)
{
    rf_slot *s = rf__ring_claim(&fx->ring, fx->gen, batch, GF_BATCH);
    if (!s)
        return NULL;
    memset(s->view.data, fillb, GF_SLOT_BYTES);
    for (int i = 0; i < GF_BATCH; i++)
        s->view.labels[i] = batch * 10 + i;
    s->submitted = GF_BATCH;
    for (int i = 0; i < GF_BATCH; i++)
        rf__ring_sample_done(s, fx->gen);
    assert_int_equal(s->state, RF_SLOT_READY);
    rf__ring_lend(s);
    return s;
}

int gf_fx_to_device(gf_fixture *fx, rf_slot *s, gf_stream *consumer, void **dev, int64_t **lab)
{
    char err[256] = "";
    assert_int_equal(rf__ring_copy_begin(rf__ring_lease(s)), 0);
    int rc = rf__copier_to_device(fx->c, s->id, s->view.data, s->view.nbytes, s->view.labels,
                                  s->view.count, consumer, dev, lab, err, sizeof err);
    rf__ring_copy_end(s);
    return rc;
}

int gf_fx_send(gf_fixture *fx, rf_slot *s)
{
    return gf_fx_to_device(fx, s, fx->A, &fx->dev, &fx->lab);
}

rf_slot *gf_fx_on_device(gf_fixture *fx, int64_t batch, int fillb, gf_stream *consumer, void **dev,
                         int64_t **lab)
{
    rf_slot *s = gf_fx_lend(fx, batch, fillb);
    assert_non_null(s);
    assert_int_equal(gf_fx_to_device(fx, s, consumer, dev, lab), 0);
    return s;
}

int gf_fx_copy_to(gf_fixture *fx, rf_slot *s, void *dst, void *dlab, gf_stream *stream, char *err,
                  size_t errcap)
{
    assert_int_equal(rf__ring_copy_begin(rf__ring_lease(s)), 0);
    int rc = rf__copier_copy_to(fx->c, s->id, s->view.data, s->view.nbytes, s->view.labels,
                                s->view.count, dst, dlab, stream, err, errcap);
    rf__ring_copy_end(s);
    return rc;
}

void gf_fx_release(gf_fixture *fx, rf_slot *s)
{
    rf__copier_release(fx->c, s->id);
    assert_int_equal(rf__ring_release(rf__ring_lease(s)), 0);
}

void gf_fx_close(gf_fixture *fx, rf_slot *s)
{
    gf_fx_release(fx, s);
    gf_run_all();
    gf_fx_free(fx);
}
