/*
 * fetch_int.h - the fetch layer's own state, shared by its two files with
 * libcurl: fetch.c (the fetch thread: queue, room, retries, the loop) and
 * fetch_try.c (one try of a request: the easy handle, its callbacks, its
 * byte-rate check, and how it ended, with the message). Nothing else
 * includes it; fetch.h says how the whole works.
 */
#ifndef RF_FETCH_INT_H
#define RF_FETCH_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include <curl/curl.h>

#include "fetch.h"

struct rf_fetch {
    rf_fetch_opts o;
    CURLM *multi;
    pthread_t thread;
    int running; /* (mu) the thread was started (by the first submit) */
    pid_t pid;
    /* where and how S3 requests go (fetch_s3.c): filled at create, then the
     * fetch thread's alone (its credentials are read again there, and
     * creds_gen counts the times they changed) */
    rf_fetch_s3 s3;
    uint64_t creds_gen;
    /* the CA bundle and folder (fetch.h), and the variables that named
     * them; read-only after create */
    char *ca_file, *ca_dir;
    const char *ca_file_var;
    /* set once at create by rf__fetch_set_tick, before any submit starts the
     * thread (pthread_create orders them before its reads); then read-only */
    rf_fetch_tick_fn *tick;
    void *tick_ctx;
    int tick_ms;

    pthread_mutex_t mu; /* protects queue, stop, halted, running, tick_asked and every request's
                         * `finished` */
    pthread_cond_t cv;  /* a request finished, or the thread halted (rf__fetch_wait) */
    rf_fetch_req *queue, *queue_tail;
    int stop;
    int halted;     /* the thread left for o.cancel: no request ends any more */
    int tick_asked; /* rf__fetch_wake since the last tick (with curl_multi_wakeup) */

    /* the fetch thread's alone */
    rf_fetch_req *waiting;  /* retries not yet due */
    rf_fetch_req **run;     /* the `active` requests with a transfer in curl */
    int active, active_get; /* of which GETs */
    uint64_t rng;

    /* totals: written by the fetch thread, read anywhere (relaxed) */
    _Atomic int64_t requests, retries, bytes;
};

/* What became of a try (rf__fetch_try_ended). */
enum { RF__TRY_DONE = 0, RF__TRY_RETRY = 1, RF__TRY_AGAIN_NOW = 2, RF__TRY_PROBE = 3 };

/* Starts a try of r: a new easy handle in f->multi, r in f->run. 0, or a
 * negative RF_E_* with r->err set (rf__fetch_end_try then cleans up). */
int rf__fetch_start_try(rf_fetch *f, rf_fetch_req *r);
/* Takes r's easy handle out of curl and f->run, frees it and its headers. */
void rf__fetch_end_try(rf_fetch *f, rf_fetch_req *r);
/* r's try ended with curl's result res (CURLE_OPERATION_TIMEDOUT with
 * r->stalled when the rate check ended it): ends the try, counts it, and
 * says what comes next. RF__TRY_DONE: r->rc (and r->err) are final;
 * RF__TRY_RETRY: after a backoff, `retries` allowing; RF__TRY_AGAIN_NOW:
 * at once, with credentials read again; RF__TRY_PROBE: at once, the GET
 * that learns a failed HEAD's S3 code (fetch.h), no retry. */
int rf__fetch_try_ended(rf_fetch *f, rf_fetch_req *r, CURLcode res);
/* The rate check of a running try at now (ns): 1 when it must end as timed
 * out (r->stalled and r->err then say why); else 0, with *next lowered to
 * the time of its next check. */
int rf__fetch_try_stalled(const rf_fetch *f, rf_fetch_req *r, int64_t now, int64_t *next);

#endif
