/*
 * fetch.c - the fetch thread: a libcurl multi handle, retries with backoff
 * (see fetch.h).
 *
 * Requests reach the thread through a queue under f->mu; the thread alone
 * owns the multi handle and the requests it holds (running, or waiting for
 * their retry time), so curl is touched by one thread only. Each try uses a
 * fresh easy handle; the multi handle keeps connections alive between them.
 * The loop: take queued requests in order, each as its class has room
 * (fewer than `parallel` transfers, GETs, run; a GET without room holds
 * no small request back), start the retries that are due, let curl work,
 * finish what ended, run the tick when it is due, then sleep in
 * curl_multi_poll until a socket, a wake (curl_multi_wakeup) or the next
 * deadline. HEADs and
 * listings are small: up to SMALL_MAX of them run beside the transfers, so
 * that a start's HEADs of every shard take about one round trip. The tick
 * runs after a wake (rf__fetch_wake: work arrived), after a request ended,
 * and every tick_ms, never merely because a socket had data: a transfer's
 * thousands of reads would otherwise each pay for a walk of the want list.
 *
 * Each running try's byte rate is checked at its checkpoints (fetch_try.c),
 * whose times bound the sleep too, so that a stalled try ends on time.
 *
 * One try (its handle, callbacks, rate check and end): fetch_try.c. Where
 * a URL is asked for and how an S3 request is signed: fetch_s3.c; the
 * credentials: fetch_creds.c; the functions of a build without libcurl:
 * fetch_none.c.
 */
#define _GNU_SOURCE
#include "fetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "ringfeed.h"
#include "trace.h"

#ifdef RF_HAVE_CURL /* without: fetch_none.c */

#include "fetch_int.h"
#include "redact.h"

/* small requests (HEAD, MEM) that may run beside `parallel` transfers */
#define SMALL_MAX 16

static void finish(rf_fetch *f, rf_fetch_req *r)
{
    if (r->done)
        r->done(r, r->ctx);
    pthread_mutex_lock(&f->mu);
    r->finished = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static int64_t backoff_ns(rf_fetch *f, int tries)
{
    int64_t base = (int64_t)100000000 << (tries < 6 ? tries - 1 : 5); /* 0.1 s doubling, 3.2 s */
    f->rng ^= f->rng << 13;
    f->rng ^= f->rng >> 7;
    f->rng ^= f->rng << 17;
    return base / 2 + (int64_t)(f->rng % (uint64_t)base); /* jitter: [0.5, 1.5) x base */
}

/* A try ended with curl's result res: success, a retry (now or later), or
 * failure. */
static void try_ended(rf_fetch *f, rf_fetch_req *r, CURLcode res)
{
    int next = rf__fetch_try_ended(f, r, res);
    if (next == RF__TRY_DONE) {
        finish(f, r);
        return;
    }
    if (next != RF__TRY_PROBE)
        atomic_fetch_add_explicit(&f->retries, 1, memory_order_relaxed);
    r->due_ns = rf__now_ns() + (next == RF__TRY_RETRY ? backoff_ns(f, r->tries) : 0);
    r->next = f->waiting;
    f->waiting = r;
}

/* Starts a try of r; 1 when it could not start (r is finished then, and
 * may be gone). */
static int begin(rf_fetch *f, rf_fetch_req *r)
{
    int rc = rf__fetch_start_try(f, r);
    if (rc != 0) {
        rf__fetch_end_try(f, r);
        r->rc = rc;
        finish(f, r);
    }
    return rc != 0;
}

/* ---- the thread --------------------------------------------------------------- */

/* Room to begin r now: GETs up to `parallel`, small requests beside them. */
static int has_room(const rf_fetch *f, const rf_fetch_req *r)
{
    if (r->op == RF__FETCH_GET)
        return f->active_get < f->o.parallel;
    return f->active < f->o.parallel + SMALL_MAX;
}

/* Under f->mu: the first queued request with room (*prev: the one before
 * it, NULL at the head), or NULL. Room depends on the class only (GET or
 * small), so the walk ends once both were found without room. */
static rf_fetch_req *startable(const rf_fetch *f, rf_fetch_req **prev)
{
    int get_full = 0, small_full = 0;
    *prev = NULL;
    for (rf_fetch_req *r = f->queue; r && !(get_full && small_full); *prev = r, r = r->next) {
        if (has_room(f, r))
            return r;
        if (r->op == RF__FETCH_GET)
            get_full = 1;
        else
            small_full = 1;
    }
    return NULL;
}

/* o.cancel was set: every request is abandoned (its done is not called:
 * the caller's waits end, rf__fetch_wait), and the thread leaves; nothing
 * it held is touched after halted is set. */
static void halt(rf_fetch *f)
{
    while (f->active > 0)
        rf__fetch_end_try(f, f->run[f->active - 1]);
    f->waiting = NULL;
    pthread_mutex_lock(&f->mu);
    f->queue = f->queue_tail = NULL;
    f->halted = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    RF_TRACE("fetch: halted (cancelled)");
}

static void *fetch_main(void *arg)
{
    rf_fetch *f = arg;
    int64_t next_tick = f->tick ? 0 : INT64_MAX; /* the periodic tick's time */
    int ended = 0;         /* a request ended since the last tick */
    for (;;) {
        /* seen within a poll: the poll's timeout is the tick period at most */
        if (f->o.cancel && atomic_load(f->o.cancel)) {
            halt(f);
            break;
        }
        pthread_mutex_lock(&f->mu);
        int stop = f->stop;
        /* in queue order, each that has room: a GET waiting for a transfer's
         * room does not hold back the small requests queued after it */
        rf_fetch_req *prev, *r;
        while (!stop && (r = startable(f, &prev)) != NULL) {
            if (prev)
                prev->next = r->next;
            else
                f->queue = r->next;
            if (f->queue_tail == r)
                f->queue_tail = prev;
            pthread_mutex_unlock(&f->mu);
            ended |= begin(f, r);
            pthread_mutex_lock(&f->mu);
        }
        pthread_mutex_unlock(&f->mu);
        if (stop)
            break;
        /* retries that are due, while there is room */
        int64_t now = rf__now_ns(), next_due = INT64_MAX;
        for (rf_fetch_req **pp = &f->waiting; *pp;) {
            rf_fetch_req *r = *pp;
            if (r->due_ns <= now && has_room(f, r)) {
                *pp = r->next;
                ended |= begin(f, r);
            } else {
                if (r->due_ns < next_due)
                    next_due = r->due_ns;
                pp = &r->next;
            }
        }
        int still;
        curl_multi_perform(f->multi, &still);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(f->multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE)
                continue;
            rf_fetch_req *r = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
            try_ended(f, r, m->data.result);
            ended = 1;
        }
        /* the rate check of the tries running (fetch_try.c), downwards: an
         * ended try's place in run is taken by the last, already checked */
        now = rf__now_ns();
        int64_t next_check = INT64_MAX;
        for (int i = f->active - 1; i >= 0; i--)
            if (rf__fetch_try_stalled(f, f->run[i], now, &next_check)) {
                try_ended(f, f->run[i], CURLE_OPERATION_TIMEDOUT);
                ended = 1;
            }
        pthread_mutex_lock(&f->mu);
        int asked = f->tick_asked;
        f->tick_asked = 0;
        pthread_mutex_unlock(&f->mu);
        now = rf__now_ns();
        if (f->tick && (asked || ended || now >= next_tick)) {
            f->tick(f->tick_ctx);
            ended = 0;
            now = rf__now_ns();
            next_tick = now + (int64_t)f->tick_ms * 1000000;
        }
        /* the retries queued meanwhile are due too */
        for (rf_fetch_req *r = f->waiting; r; r = r->next)
            if (r->due_ns < next_due)
                next_due = r->due_ns;
        int64_t until = next_tick < next_due ? next_tick : next_due;
        if (next_check < until)
            until = next_check;
        int64_t ms = (until - now + 999999) / 1000000;
        int wait_ms = ms < 0 ? 0 : ms > f->tick_ms ? f->tick_ms : (int)ms;
        pthread_mutex_lock(&f->mu);
        if (startable(f, &prev) || f->tick_asked)
            wait_ms = 0; /* room for a queued request now, or a wake came in the tick */
        pthread_mutex_unlock(&f->mu);
        curl_multi_poll(f->multi, NULL, 0, wait_ms, NULL);
    }
    return NULL;
}

/* The CA bundle and folder from the environment (fetch.h): 0, or
 * RF_E_SOURCE (err) when one named cannot be read, RF_E_NOMEM. */
static int ca_env(rf_fetch *f, char *err, size_t errcap)
{
    static const char *const files[] = {"AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"};
    const char *v;
    for (size_t i = 0; i < sizeof files / sizeof files[0] && !f->ca_file_var; i++)
        if ((v = getenv(files[i])) != NULL && *v) {
            f->ca_file_var = files[i];
            if (access(v, R_OK) != 0) {
                snprintf(err, errcap, "fetch: the CA bundle %s=%.300s cannot be read: %s",
                         files[i], v, strerror(errno));
                return RF_E_SOURCE;
            }
            if ((f->ca_file = strdup(v)) == NULL)
                return RF_E_NOMEM;
        }
    if ((v = getenv("SSL_CERT_DIR")) != NULL && *v) {
        if (access(v, R_OK | X_OK) != 0) {
            snprintf(err, errcap, "fetch: the CA folder SSL_CERT_DIR=%.300s cannot be read: %s", v,
                     strerror(errno));
            return RF_E_SOURCE;
        }
        if ((f->ca_dir = strdup(v)) == NULL)
            return RF_E_NOMEM;
    }
    return 0;
}

/* Frees what create read and allocated besides the thread's state. */
static void free_config(rf_fetch *f)
{
    rf__fetch_s3_free(&f->s3);
    free(f->ca_file);
    free(f->ca_dir);
    free(f->run);
    free(f);
}

/* curl_global_init is not thread-safe: once per process, before any handle. */
static void global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

int rf__fetch_create(rf_fetch **out, const rf_fetch_opts *o, char *err, size_t errcap)
{
    *out = NULL;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, global_init);
    rf_fetch *f = calloc(1, sizeof *f);
    if (!f)
        return RF_E_NOMEM;
    f->o = *o;
    if (f->o.parallel < 1)
        f->o.parallel = 1;
    f->run = calloc((size_t)f->o.parallel + SMALL_MAX, sizeof *f->run);
    if (!f->run) {
        free(f);
        return RF_E_NOMEM;
    }
    if (f->o.timeout_ms < 1)
        f->o.timeout_ms = 1;
    f->pid = getpid();
    f->tick_ms = 1000;
    f->rng = (uint64_t)rf__now_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)f;
    if (!f->rng)
        f->rng = 1;
    int rc = rf__fetch_s3_env(&f->s3, err, errcap);
    if (rc == 0)
        rc = ca_env(f, err, errcap);
    if (rc == RF_E_NOMEM)
        snprintf(err, errcap, "fetch: out of memory");
    if (rc == 0 && (f->multi = curl_multi_init()) == NULL) {
        snprintf(err, errcap, "fetch: cannot make a curl multi handle");
        rc = RF_E_NOMEM;
    }
    if (rc != 0) {
        free_config(f);
        return rc;
    }
    curl_multi_setopt(f->multi, CURLMOPT_MAXCONNECTS, (long)f->o.parallel * 2 + SMALL_MAX);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    *out = f;
    return 0;
}

/* Started by the first submit, so that the tick is set before it runs. */
static int ensure_thread(rf_fetch *f)
{
    if (f->running)
        return 0;
    if (pthread_create(&f->thread, NULL, fetch_main, f) != 0)
        return -1;
    f->running = 1;
    return 0;
}

void rf__fetch_set_tick(rf_fetch *f, rf_fetch_tick_fn *fn, void *ctx, int ms)
{
    f->tick = fn;
    f->tick_ctx = ctx;
    f->tick_ms = ms > 0 ? ms : 1000;
}

void rf__fetch_submit(rf_fetch *f, rf_fetch_req *req)
{
    req->rc = 0;
    req->tries = 0;
    req->over = 0;
    req->probe = req->refreshed = 0;
    req->drawn = 0;
    req->finished = 0;
    req->next = NULL;
    req->easy = req->hdrs = NULL;
    pthread_mutex_lock(&f->mu);
    if (f->halted) { /* cancelled: never queued, never ends (rf__fetch_wait says so) */
        pthread_mutex_unlock(&f->mu);
        return;
    }
    if (f->queue_tail)
        f->queue_tail->next = req;
    else
        f->queue = req;
    f->queue_tail = req;
    int started = ensure_thread(f) == 0;
    pthread_mutex_unlock(&f->mu);
    if (!started) {
        /* no thread: the request fails here (it is still queued; nobody takes it) */
        snprintf(req->err, sizeof req->err, "fetch: cannot start the fetch thread");
        req->rc = RF_E_SYSTEM;
        pthread_mutex_lock(&f->mu);
        f->queue = f->queue_tail = NULL;
        req->finished = 1;
        pthread_mutex_unlock(&f->mu);
        if (req->done)
            req->done(req, req->ctx);
        return;
    }
    curl_multi_wakeup(f->multi);
}

int rf__fetch_wait(rf_fetch *f, rf_fetch_req *req)
{
    pthread_mutex_lock(&f->mu);
    while (!req->finished && !f->halted)
        pthread_cond_wait(&f->cv, &f->mu);
    int rc = req->finished ? 0 : RF_E_STOPPED;
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int rf__fetch_halted(rf_fetch *f)
{
    pthread_mutex_lock(&f->mu);
    int h = f->halted;
    pthread_mutex_unlock(&f->mu);
    return h;
}

void rf__fetch_wake(rf_fetch *f)
{
    pthread_mutex_lock(&f->mu);
    int running = f->running;
    f->tick_asked = 1;
    pthread_mutex_unlock(&f->mu);
    if (running)
        curl_multi_wakeup(f->multi);
}

void rf__fetch_destroy(rf_fetch *f, int forked)
{
    if (!f)
        return;
    if (!forked) {
        pthread_mutex_lock(&f->mu);
        f->stop = 1;
        int running = f->running;
        pthread_mutex_unlock(&f->mu);
        if (running) {
            curl_multi_wakeup(f->multi);
            pthread_join(f->thread, NULL);
        }
        while (f->active > 0) /* abandoned transfers */
            rf__fetch_end_try(f, f->run[f->active - 1]);
        curl_multi_cleanup(f->multi);
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->cv);
    }
    free_config(f);
}

void rf__fetch_totals(rf_fetch *f, rf_fetch_totals *t)
{
    memset(t, 0, sizeof *t);
    if (!f)
        return;
    t->requests = atomic_load_explicit(&f->requests, memory_order_relaxed);
    t->retries = atomic_load_explicit(&f->retries, memory_order_relaxed);
    t->bytes = atomic_load_explicit(&f->bytes, memory_order_relaxed);
}

#endif
