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
 * A GET's bytes are pushed towards the disk while it runs (writeback started
 * every WRITEBACK_BYTES with sync_file_range), so that the sync before the
 * rename (cache.c) waits for little more than the last part.
 *
 * Where a URL is asked for and how an S3 request is signed: fetch_s3.c.
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

#ifndef RF_HAVE_CURL

int rf__fetch_create(rf_fetch **out, const rf_fetch_opts *o, char *err, size_t errcap)
{
    *out = NULL;
    snprintf(err, errcap,
             "fetch: remote shards (s3://, http://) need libcurl, and this build of ringfeed has "
             "none (install libcurl4-openssl-dev and rebuild)");
    return RF_E_SOURCE;
}
void rf__fetch_destroy(rf_fetch *f, int forked) {}
void rf__fetch_set_tick(rf_fetch *f, rf_fetch_tick_fn *fn, void *ctx, int ms) {}
void rf__fetch_submit(rf_fetch *f, rf_fetch_req *req) {}
void rf__fetch_wait(rf_fetch *f, rf_fetch_req *req) {}
void rf__fetch_wake(rf_fetch *f) {}
void rf__fetch_totals(rf_fetch *f, rf_fetch_totals *t)
{
    memset(t, 0, sizeof *t);
}

#else

#include <curl/curl.h>

struct rf_fetch {
    rf_fetch_opts o;
    CURLM *multi;
    pthread_t thread;
    int running; /* (mu) the thread was started (by the first submit) */
    pid_t pid;
    rf_fetch_s3 s3; /* where and how S3 requests go (fetch_s3.c); read-only after create */
    /* set once at create by rf__fetch_set_tick, before any submit starts the
     * thread (pthread_create orders them before its reads); then read-only */
    rf_fetch_tick_fn *tick;
    void *tick_ctx;
    int tick_ms;

    pthread_mutex_t mu; /* protects queue, stop, running, tick_asked and every request's
                         * `finished` */
    pthread_cond_t cv;  /* a request finished (rf__fetch_wait) */
    rf_fetch_req *queue, *queue_tail;
    int stop;
    int tick_asked; /* rf__fetch_wake since the last tick (with curl_multi_wakeup) */

    /* the fetch thread's alone */
    rf_fetch_req *waiting; /* retries not yet due */
    rf_fetch_req **run;    /* the `active` requests with a transfer in curl */
    int active, active_get; /* of which GETs */
    uint64_t rng;

    /* totals: written by the fetch thread, read anywhere (relaxed) */
    _Atomic int64_t requests, retries, bytes;
};

static const char *op_name(int op)
{
    return op == RF__FETCH_HEAD ? "HEAD" : "GET";
}

/* small requests (HEAD, MEM) that may run beside `parallel` transfers */
#define SMALL_MAX 16
/* a GET's bytes between two starts of writeback (see above) */
#define WRITEBACK_BYTES ((uint64_t)2 << 20)

/* ---- curl callbacks (fetch thread) ---------------------------------------- */

/* Draws from r's budget what writing its file up to byte upto needs beyond
 * what its tries drew already: 1, or 0 when too few bytes are left. */
static int draw(rf_fetch_req *r, uint64_t upto)
{
    if (!r->budget || upto <= r->drawn)
        return 1;
    uint64_t need = upto - r->drawn;
    /* relaxed: the budget is a count shared with the other GETs' draws (and
     * the owner's returns); it orders no other memory */
    uint64_t left = atomic_load_explicit(r->budget, memory_order_relaxed);
    do {
        if (need > left)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(r->budget, &left, left - need,
                                                    memory_order_relaxed, memory_order_relaxed));
    r->drawn = upto;
    return 1;
}

/* The cap that writing r's file up to byte upto would pass (drawing from
 * its budget otherwise): RF__FETCH_OVER_MAX, RF__FETCH_OVER_BUDGET, or 0. */
static int cap_passed(rf_fetch_req *r, uint64_t upto)
{
    if (r->max_size && upto > r->max_size)
        return RF__FETCH_OVER_MAX;
    return draw(r, upto) ? 0 : RF__FETCH_OVER_BUDGET;
}

static void trim(char *v)
{
    size_t n = strlen(v);
    while (n > 0 && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
        v[--n] = '\0';
}

static size_t on_header(char *p, size_t sz, size_t nmemb, void *ud)
{
    rf_fetch_req *r = ud;
    size_t n = sz * nmemb;
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line - 1 ? n : sizeof line - 1), p);
    trim(line);
    if (!strncmp(line, "HTTP/", 5)) { /* a new response (after 100 Continue, say) */
        const char *sp = strchr(line, ' ');
        r->http = sp ? strtol(sp + 1, NULL, 10) : 0;
        const char *rs = sp ? strchr(sp + 1, ' ') : NULL;
        snprintf(r->reason, sizeof r->reason, "%s", rs ? rs + 1 : "");
        r->have_size = 0;
        r->etag[0] = '\0';
    } else if (!strncasecmp(line, "content-length:", 15)) {
        r->hdr_size = strtoull(line + 15, NULL, 10);
        r->have_size = 1;
    } else if (!strncasecmp(line, "etag:", 5)) {
        const char *v = line + 5;
        while (*v == ' ')
            v++;
        snprintf(r->etag, sizeof r->etag, "%.150s", v);
    } else if (!strncasecmp(line, "last-modified:", 14) && !r->etag[0]) {
        const char *v = line + 14;
        while (*v == ' ')
            v++;
        snprintf(r->etag, sizeof r->etag, "lm:%.150s", v);
    } else if (line[0] == '\0' && r->op == RF__FETCH_GET && r->http / 100 == 2) {
        /* the headers are complete: is this still the object the index knows? */
        /* without a Content-Length (a chunked body) the size is checked at
         * the end, by the bytes written (try_ended) */
        int size_differs = r->want_size && r->have_size && r->hdr_size != r->want_size;
        int etag_differs = r->want_etag && r->want_etag[0] && strcmp(r->etag, r->want_etag);
        if (size_differs || etag_differs) {
            r->changed = 1;
            return 0; /* abort: CURLE_WRITE_ERROR */
        }
        /* a capped GET: no byte of a body that cannot fit (see fetch.h) */
        if (r->have_size && (r->over = cap_passed(r, r->hdr_size)) != 0)
            return 0;
    }
    return n;
}

static size_t on_body(char *p, size_t sz, size_t nmemb, void *ud)
{
    rf_fetch_req *r = ud;
    size_t n = sz * nmemb;
    if (r->http / 100 != 2) { /* an error's body: keep its start for the message */
        size_t k = n < sizeof r->errbody - 1 - r->errlen ? n : sizeof r->errbody - 1 - r->errlen;
        memcpy(r->errbody + r->errlen, p, k);
        r->errlen += k;
        r->errbody[r->errlen] = '\0';
        return n;
    }
    if (r->op == RF__FETCH_MEM) {
        if (r->body_len + n + 1 > r->body_cap) {
            size_t cap = r->body_cap ? r->body_cap * 2 : 65536;
            while (cap < r->body_len + n + 1)
                cap *= 2;
            char *nb = cap <= RF__FETCH_MEM_MAX ? realloc(r->body, cap) : NULL;
            if (!nb)
                return 0;
            r->body = nb;
            r->body_cap = cap;
        }
        memcpy(r->body + r->body_len, p, n);
        r->body_len += n;
        r->body[r->body_len] = '\0';
        return n;
    }
    if (r->size == 0)
        RF_TRACE("GET first bytes: %s", r->url);
    if (r->want_size && r->size + n > r->want_size) {
        r->changed = 1; /* longer than its Content-Length said: never from a sane server */
        return 0;
    }
    if ((r->over = cap_passed(r, r->size + n)) != 0)
        return 0;
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(r->fd, p + done, n - done, (off_t)(r->size + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(r->err, sizeof r->err, "write to the cache: %s", strerror(errno));
            return 0;
        }
        done += (size_t)w;
    }
    r->size += n;
#ifdef SYNC_FILE_RANGE_WRITE
    if (r->size - r->kicked >= WRITEBACK_BYTES) { /* see above; an error shows at the sync */
        sync_file_range(r->fd, (off_t)r->kicked, (off_t)(r->size - r->kicked),
                        SYNC_FILE_RANGE_WRITE);
        r->kicked = r->size;
    }
#endif
    return n;
}

/* ---- one try ---------------------------------------------------------------- */

static int start_try(rf_fetch *f, rf_fetch_req *r)
{
    char url[8192];
    CURL *e = curl_easy_init();
    if (!e || rf__fetch_http_url(&f->s3, r->url, r->query, url, sizeof url) != 0) {
        if (e)
            curl_easy_cleanup(e);
        snprintf(r->err, sizeof r->err, "fetch: %s: %s", r->url,
                 e ? "URL too long or without a bucket" : "cannot make a curl handle");
        return e ? RF_E_SOURCE : RF_E_NOMEM;
    }
    r->http = 0;
    r->reason[0] = r->etag[0] = '\0';
    r->have_size = r->changed = r->over = 0;
    r->hdr_size = r->size = r->kicked = 0;
    r->errlen = 0;
    r->body_len = 0;
    r->err[0] = '\0';
    curl_easy_setopt(e, CURLOPT_URL, url);
    /* a key's dot segments ("a/../b") are part of its name, not a path to
     * simplify */
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_NOBODY, r->op == RF__FETCH_HEAD ? 1L : 0L);
    if (r->op == RF__FETCH_GET) /* fewer, larger writes into the cache */
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L * 1024);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)f->o.timeout_ms);
    /* no byte for timeout_ms (whole seconds: libcurl's granularity) */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)((f->o.timeout_ms + 999) / 1000));
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
    struct curl_slist *h = rf__fetch_s3_sign(&f->s3, r->url, e);
    if (h)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    r->easy = e;
    r->hdrs = h;
    if (curl_multi_add_handle(f->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        curl_slist_free_all(h);
        r->easy = r->hdrs = NULL;
        snprintf(r->err, sizeof r->err, "fetch: %s: curl_multi_add_handle failed", r->url);
        return RF_E_SYSTEM;
    }
    f->run[f->active++] = r;
    f->active_get += r->op == RF__FETCH_GET;
    atomic_fetch_add_explicit(&f->requests, 1, memory_order_relaxed);
    return 0;
}

static void end_try(rf_fetch *f, rf_fetch_req *r)
{
    if (r->easy) {
        curl_multi_remove_handle(f->multi, r->easy);
        curl_easy_cleanup(r->easy);
        for (int i = 0; i < f->active; i++)
            if (f->run[i] == r) {
                f->run[i] = f->run[--f->active];
                f->active_get -= r->op == RF__FETCH_GET;
                break;
            }
    }
    curl_slist_free_all(r->hdrs);
    r->easy = r->hdrs = NULL;
}

static void finish(rf_fetch *f, rf_fetch_req *r)
{
    if (r->done)
        r->done(r, r->ctx);
    pthread_mutex_lock(&f->mu);
    r->finished = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* S3's <Code>...</Code> of an error body, or "". */
static void s3_code(const rf_fetch_req *r, char *out, size_t cap)
{
    const char *a = strstr(r->errbody, "<Code>"), *b = a ? strstr(a, "</Code>") : NULL;
    if (a && b)
        snprintf(out, cap, " %.*s", (int)(b - a - 6), a + 6);
    else
        out[0] = '\0';
}

static int64_t backoff_ns(rf_fetch *f, int tries)
{
    int64_t base = (int64_t)100000000 << (tries < 6 ? tries - 1 : 5); /* 0.1 s doubling, 3.2 s */
    f->rng ^= f->rng << 13;
    f->rng ^= f->rng >> 7;
    f->rng ^= f->rng << 17;
    return base / 2 + (int64_t)(f->rng % (uint64_t)base); /* jitter: [0.5, 1.5) x base */
}

/* A try ended with curl's result res: success, a retry later, or failure. */
static void try_ended(rf_fetch *f, rf_fetch_req *r, CURLcode res)
{
    end_try(f, r);
    r->tries++;
    char why[400];
    int retry = 0;
    if (res == CURLE_OK && r->http / 100 == 2) {
        if (r->op != RF__FETCH_GET || !r->want_size || r->size == r->want_size) {
            if (r->op == RF__FETCH_HEAD)
                r->size = r->have_size ? r->hdr_size : 0;
            if (r->op == RF__FETCH_GET) {
                atomic_fetch_add_explicit(&f->bytes, (int64_t)r->size, memory_order_relaxed);
                RF_TRACE("GET done: %s", r->url);
            }
            r->rc = 0;
            finish(f, r);
            return;
        }
        snprintf(why, sizeof why, "short body (%llu of %llu bytes)", (unsigned long long)r->size,
                 (unsigned long long)r->want_size);
        retry = 1;
    } else if (r->over) {
        char got[80] = "more arrived";
        if (r->have_size)
            snprintf(got, sizeof got, "Content-Length %llu", (unsigned long long)r->hdr_size);
        if (r->over == RF__FETCH_OVER_MAX)
            snprintf(r->err, sizeof r->err, "fetch: %s %s: over the limit of %llu bytes (%s)",
                     op_name(r->op), r->url, (unsigned long long)r->max_size, got);
        else
            snprintf(r->err, sizeof r->err,
                     "fetch: %s %s: over the bytes left of a limit shared with other requests "
                     "(%s; %llu drawn by this one)",
                     op_name(r->op), r->url, got, (unsigned long long)r->drawn);
        r->rc = RF_E_SOURCE;
        finish(f, r);
        return;
    } else if (r->changed) {
        snprintf(r->err, sizeof r->err,
                 "fetch: %s %s: the object changed since it was indexed (size %llu, validator "
                 "%s; now size %llu, validator %s)",
                 op_name(r->op), r->url, (unsigned long long)r->want_size,
                 r->want_etag && r->want_etag[0] ? r->want_etag : "none",
                 (unsigned long long)r->hdr_size, r->etag[0] ? r->etag : "none");
        r->rc = RF_E_SOURCE;
        finish(f, r);
        return;
    } else if (res == CURLE_OK) {
        char code[80];
        s3_code(r, code, sizeof code);
        snprintf(why, sizeof why, "HTTP status %ld%s%s%s", r->http, r->reason[0] ? " " : "",
                 r->reason, code);
        retry = r->http >= 500 || r->http == 408 || r->http == 429;
    } else {
        snprintf(why, sizeof why, "%.150s%s%.200s", curl_easy_strerror(res), r->err[0] ? ": " : "",
                 r->err);
        retry = res == CURLE_COULDNT_CONNECT || res == CURLE_OPERATION_TIMEDOUT ||
                res == CURLE_RECV_ERROR || res == CURLE_SEND_ERROR ||
                res == CURLE_PARTIAL_FILE || res == CURLE_GOT_NOTHING ||
                res == CURLE_COULDNT_RESOLVE_HOST || res == CURLE_SSL_CONNECT_ERROR ||
                res == CURLE_HTTP2 || res == CURLE_HTTP2_STREAM;
    }
    if (retry && r->tries <= f->o.retries) {
        atomic_fetch_add_explicit(&f->retries, 1, memory_order_relaxed);
        r->due_ns = rf__now_ns() + backoff_ns(f, r->tries);
        r->next = f->waiting;
        f->waiting = r;
        return;
    }
    snprintf(r->err, sizeof r->err, "fetch: %s %s: %s (%d %s)", op_name(r->op), r->url, why,
             r->tries, r->tries == 1 ? "try" : "tries");
    r->rc = RF_E_SOURCE;
    finish(f, r);
}

/* Starts a try of r; 1 when it could not start (r is finished then, and
 * may be gone). */
static int begin(rf_fetch *f, rf_fetch_req *r)
{
    int rc = start_try(f, r);
    if (rc != 0) {
        end_try(f, r);
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

static void *fetch_main(void *arg)
{
    rf_fetch *f = arg;
    int64_t next_tick = 0; /* the periodic tick's time */
    int ended = 0;         /* a request ended since the last tick */
    for (;;) {
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
        int64_t until = next_tick < next_due ? next_tick : next_due;
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
    rf__fetch_s3_env(&f->s3);
    f->multi = curl_multi_init();
    if (!f->multi) {
        free(f->run);
        free(f);
        snprintf(err, errcap, "fetch: cannot make a curl multi handle");
        return RF_E_NOMEM;
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
    req->drawn = 0;
    req->finished = 0;
    req->next = NULL;
    req->easy = req->hdrs = NULL;
    pthread_mutex_lock(&f->mu);
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

void rf__fetch_wait(rf_fetch *f, rf_fetch_req *req)
{
    pthread_mutex_lock(&f->mu);
    while (!req->finished)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
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
            end_try(f, f->run[f->active - 1]);
        curl_multi_cleanup(f->multi);
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->cv);
    }
    free(f->run);
    free(f);
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
