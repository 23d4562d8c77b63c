/*
 * gpufake.h - a recording GPU backend (rf_gpu_ops) for the copier's tests
 * (test_copier.c: the ordering rules; test_copier_fail.c: failures and
 * teardown), and their fixture: a ring whose slots come from a copier on
 * this backend.
 *
 * What it models of CUDA: streams are FIFO queues that the test runs by hand
 * (gf_run, gf_run_all), an event completes when its stream has run past the
 * point where it was recorded, a wait is a snapshot of the event's last
 * record (as cudaStreamWaitEvent), a copy happens when its op runs. Every
 * API call and every op that runs is logged ("memcpy s0 48", "record e3 s1",
 * "wait s0 e2", "s1 kernel 7"...), so a test checks both the order of the
 * calls and what the "device" saw. A host wait (stream_sync) runs every
 * stream as far as it can, as the device would meanwhile; so does an event
 * query while GF.query_runs is set (the copier's drain polls queries). The
 * backend's "current device" (GF.cur) is what enter/leave switch.
 *
 * Linked into every tests/test_*.c executable with ringfeed_testcheck.
 */
#ifndef RF_GPUFAKE_H
#define RF_GPUFAKE_H

#include <stddef.h>
#include <stdint.h>

#include "copier.h"
#include "ring.h"

enum { GF_WAIT = 1, GF_COPY = 2, GF_RECORD = 3, GF_KERNEL = 4 };
#define GF_MAXQ 256
#define GF_MAXOBJ 80
#define GF_MAXLOG 512

typedef struct gf_stream gf_stream;

typedef struct gf_event {
    int id, alive;
    gf_stream *s; /* stream of the last record (NULL: never recorded = complete) */
    int seq;      /* complete when s->done >= seq */
} gf_event;

typedef struct gf_op {
    int kind;
    gf_stream *ws; /* GF_WAIT: stream and sequence number waited for */
    int wseq;
    void *dst;
    const void *src;
    size_t n;
    int tag; /* GF_KERNEL: the test's label */
} gf_op;

struct gf_stream {
    int id, alive;
    int stuck; /* runs nothing (a stream that never ends) */
    gf_op q[GF_MAXQ];
    int enq;  /* ops enqueued */
    int done; /* ops run */
};

typedef struct gf_state {
    gf_stream streams[GF_MAXOBJ];
    int nstreams;
    gf_event events[GF_MAXOBJ];
    int nevents;
    int dev_allocs, host_allocs, syncs, opens;
    int cur;           /* the "current device" (enter / leave), -1: none */
    int query_runs;    /* event_query runs the streams first */
    int dev_oom;       /* dev_alloc answers RF__GPU_OOM */
    int host_oom_from; /* host_alloc answers RF__GPU_OOM from this call on (1-based; 0: never) */
    int host_calls;
    const char *fail_name; /* fail the fail_call-th call of fail_name (1-based) */
    int fail_call;
    int calls_of_name;
    int query_error;
    char calls[GF_MAXLOG][64]; /* API calls, in order */
    int ncalls;
    char runs[GF_MAXLOG][64]; /* ops as they ran on the device */
    int nruns;
} gf_state;

extern gf_state GF;
extern const rf_gpu_ops gf_ops;

/* Resets the state (a cmocka setup: returns 0). */
int gf_reset(void **state);
/* A consumer's stream, made by the test (not the copier). */
gf_stream *gf_stream_new(void);
/* A "kernel" on stream s that reads n bytes at src into snap when it runs. */
void gf_kernel(gf_stream *s, int tag, void *snap, const void *src, size_t n);
/* Runs up to max ops of stream s; stops at a wait that is not satisfied.
 * Returns the ops run. */
int gf_run(gf_stream *s, int max);
/* Runs every stream until nothing moves. */
void gf_run_all(void);
/* Index of the first call at or after `from` that starts with prefix, or -1. */
int gf_find_call(const char *prefix, int from);
int gf_count_runs(const char *prefix);
/* 1 when n bytes at p are all v. */
int gf_all_bytes(const void *p, int v, size_t n);

/* ---- the fixture: a ring of BATCH x SAMPLE-byte slots on a copier ------- */

#define GF_BATCH 4
#define GF_SAMPLE 16 /* bytes per sample */
#define GF_SLOT_BYTES (GF_BATCH * GF_SAMPLE)

typedef struct gf_fixture {
    rf_ring ring;
    rf_copier *c;
    gf_stream *copy; /* the copier's stream: the first one made */
    int64_t gen;
    gf_stream *A; /* the consumer's stream (gf_fx_open): s1 */
    void *dev;    /* where gf_fx_send put the last batch */
    int64_t *lab;
} gf_fixture;

/* k slots, page-locked with pin (as the loader does it: rf__ring_init_hooks
 * with the copier's hooks). */
void gf_fx_init(gf_fixture *fx, int k, int pin);
/* gf_fx_init with page-locked slots, then the consumer's stream fx->A. */
void gf_fx_open(gf_fixture *fx, int k);
/* gf_fx_open, then batch 0 (bytes fillb) on the device for fx->A (gf_fx_on_device). */
rf_slot *gf_fx_open_on_device(gf_fixture *fx, int k, int fillb);
/* Drains (the streams run), frees the ring, destroys the copier; checks that
 * everything the copier made is gone. */
void gf_fx_free(gf_fixture *fx);
/* Claims the slot for `batch`, fills it with bytes `fillb` and labels
 * batch*10+i, makes it READY and lends it. NULL when no slot can be claimed. */
rf_slot *gf_fx_lend(gf_fixture *fx, int64_t batch, int fillb);
/* rf__copier_to_device of the lent slot s for `consumer` (as
 * rf_loader_next_device: between rf__ring_copy_begin and _end). */
int gf_fx_to_device(gf_fixture *fx, rf_slot *s, gf_stream *consumer, void **dev, int64_t **lab);
/* gf_fx_lend, then gf_fx_to_device for `consumer` (asserted to succeed). */
rf_slot *gf_fx_on_device(gf_fixture *fx, int64_t batch, int fillb, gf_stream *consumer, void **dev,
                         int64_t **lab);
/* rf__copier_copy_to of the lent slot s (as rf_batch_copy_to). */
int gf_fx_copy_to(gf_fixture *fx, rf_slot *s, void *dst, void *dlab, gf_stream *stream, char *err,
                  size_t errcap);
/* gf_fx_to_device of s for fx->A, into fx->dev and fx->lab. */
int gf_fx_send(gf_fixture *fx, rf_slot *s);
/* rf_batch_release's work: the copier's release, then the ring's. */
void gf_fx_release(gf_fixture *fx, rf_slot *s);
/* The end of a test: releases s, runs every stream, gf_fx_free. */
void gf_fx_close(gf_fixture *fx, rf_slot *s);

#endif
