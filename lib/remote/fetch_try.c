/*
 * fetch_try.c - one try of a request (see fetch.h; fetch.c runs the thread
 * that makes them): its easy handle, the callbacks that take its headers
 * and body, the check of its byte rate, and how it ended - done, tried
 * again, or failed with the message a user sees.
 *
 * The rate check (fetch.h): every byte a try receives is counted, the
 * headers' as libcurl hands them over (a line at a time: a status line
 * trickled byte by byte counts once it is whole); at checkpoints a
 * sixteenth of timeout_ms apart from the try's start, the count is kept in
 * a ring of 17; the bytes since the checkpoint 16 back are those of the
 * last timeout_ms (a little more: the window is never shorter), and a try
 * with fewer than the floor's share in them has stalled. The callbacks take the checkpoints due before they
 * count new bytes, so a checkpoint holds exactly the bytes that arrived
 * before its time; the fetch thread calls rf__fetch_try_stalled at each
 * checkpoint (its poll's timeout ends there).
 *
 * A GET's bytes are pushed towards the disk while it runs (writeback started
 * every WRITEBACK_BYTES with sync_file_range), so that the sync before the
 * rename (cache.c) waits for little more than the last part.
 *
 * Every byte of a message that comes from the server (reason phrase, S3's
 * code and message, a validator) is escaped, and the URL is shown without
 * its secrets (redact.h).
 */
#define _GNU_SOURCE
#include "fetch_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "redact.h"
#include "ringfeed.h"
#include "trace.h"

_Static_assert(RF__FETCH_CURLERR >= CURL_ERROR_SIZE, "room for curl's error detail");

/* a GET's bytes between two starts of writeback (see above) */
#define WRITEBACK_BYTES ((uint64_t)2 << 20)
#define RING (RF__FETCH_CHECKS + 1)

static const char *op_name(int op)
{
    return op == RF__FETCH_HEAD ? "HEAD" : "GET";
}

/* ---- the byte count ------------------------------------------------------------- */

/* Takes the checkpoints due by now (see above). */
static void checkpoints(rf_fetch_req *r, int64_t now)
{
    int64_t due = r->try_ns + (int64_t)r->ncp * r->step_ns;
    if (now < due)
        return;
    uint64_t k = (uint64_t)((now - due) / r->step_ns) + 1;
    if (k > RING) { /* a long gap: the older ones would be overwritten */
        r->ncp += k - RING;
        k = RING;
    }
    for (; k > 0; k--, r->ncp++)
        r->cp[r->ncp % RING] = r->got;
}

static void count(rf_fetch_req *r, size_t n)
{
    checkpoints(r, rf__now_ns());
    r->got += n;
}

int rf__fetch_try_stalled(const rf_fetch *f, rf_fetch_req *r, int64_t now, int64_t *next)
{
    checkpoints(r, now);
    if (r->ncp > RF__FETCH_CHECKS) {
        uint64_t in = r->got - r->cp[(r->ncp - 1 - RF__FETCH_CHECKS) % RING];
        uint64_t need = (uint64_t)RF__FETCH_MIN_RATE * (uint64_t)f->o.timeout_ms / 1000;
        if (in < (need ? need : 1)) {
            r->stalled = 1;
            if (r->got == 0)
                snprintf(r->err, sizeof r->err, "no answer in %lld ms (fetch_timeout_ms)",
                         (long long)f->o.timeout_ms);
            else
                snprintf(r->err, sizeof r->err,
                         "%llu bytes in the last %lld ms, under the floor of %d bytes/s "
                         "(fetch_timeout_ms)",
                         (unsigned long long)in, (long long)f->o.timeout_ms, RF__FETCH_MIN_RATE);
            return 1;
        }
    }
    uint64_t k = r->ncp > RF__FETCH_CHECKS ? r->ncp : RF__FETCH_CHECKS;
    int64_t at = r->try_ns + (int64_t)k * r->step_ns;
    if (at < *next)
        *next = at;
    return 0;
}

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
 * its budget otherwise): RF__FETCH_OVER_MAX, RF__FETCH_OVER_BUDGET, or 0.
 * Over the budget the request fails, and what it drew goes back at once,
 * its bytes dropped from its file first: GETs that share a budget and
 * draw as bytes arrive (no Content-Length) would otherwise each hold part
 * of it and all fail, where the budget has room for some of them whole. */
static int cap_passed(rf_fetch_req *r, uint64_t upto)
{
    if (r->max_size && upto > r->max_size)
        return RF__FETCH_OVER_MAX;
    if (draw(r, upto))
        return 0;
    if (r->drawn > 0 && ftruncate(r->fd, 0) == 0) {
        /* relaxed: a count (see draw) */
        atomic_fetch_add_explicit(r->budget, r->drawn, memory_order_relaxed);
        r->drawn = 0;
    }
    return RF__FETCH_OVER_BUDGET;
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
    count(r, n);
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
        r->errlen = 0; /* a redirect's body is not the error's */
        r->errbody[0] = '\0';
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
         * the end, by the bytes written (rf__fetch_try_ended) */
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

/* A MEM request's body grows by n bytes at p: n, or 0 (over its cap, or
 * out of memory: said in r). */
static size_t to_memory(rf_fetch_req *r, const char *p, size_t n)
{
    if (r->body_len + n + 1 > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap * 2 : 65536;
        while (cap < r->body_len + n + 1)
            cap *= 2;
        if (cap > RF__FETCH_MEM_MAX) {
            r->over = RF__FETCH_OVER_MAX;
            return 0;
        }
        char *nb = realloc(r->body, cap);
        if (!nb) {
            snprintf(r->err, sizeof r->err, "out of memory for a body of %zu bytes", cap);
            return 0;
        }
        r->body = nb;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, p, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
    return n;
}

static size_t on_body(char *p, size_t sz, size_t nmemb, void *ud)
{
    rf_fetch_req *r = ud;
    size_t n = sz * nmemb;
    count(r, n);
    if (r->http / 100 != 2) { /* an error's body: keep its start for the message */
        size_t k = n < sizeof r->errbody - 1 - r->errlen ? n : sizeof r->errbody - 1 - r->errlen;
        memcpy(r->errbody + r->errlen, p, k);
        r->errlen += k;
        r->errbody[r->errlen] = '\0';
        return n;
    }
    if (r->op == RF__FETCH_MEM)
        return to_memory(r, p, n);
    if (r->op == RF__FETCH_HEAD)
        return n; /* a probe's byte (fetch.h): not the object's business here */
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

/* Only http and https, for the request and any redirect (fetch.h). */
static void http_only(CURL *e)
{
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85.0: the _STR forms; the others are deprecated */
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
}

int rf__fetch_start_try(rf_fetch *f, rf_fetch_req *r)
{
    char url[8192], shown[RF__URL_SHOWN];
    CURL *e = curl_easy_init();
    if (!e || rf__fetch_http_url(&f->s3, r->url, r->query, url, sizeof url) != 0) {
        if (e)
            curl_easy_cleanup(e);
        snprintf(r->err, sizeof r->err, "fetch: %s: %s",
                 rf__redact_url(r->url, shown, sizeof shown),
                 e ? "URL too long or without a bucket" : "cannot make a curl handle");
        return e ? RF_E_SOURCE : RF_E_NOMEM;
    }
    r->http = 0;
    r->reason[0] = r->etag[0] = '\0';
    r->have_size = r->changed = r->over = r->stalled = 0;
    r->hdr_size = r->size = r->kicked = 0;
    r->errlen = 0;
    r->errbody[0] = '\0'; /* no earlier try's S3 code in this one's message */
    r->curlerr[0] = '\0';
    r->body_len = 0;
    r->err[0] = '\0';
    r->try_ns = rf__now_ns();
    r->step_ns = f->o.timeout_ms * 1000000 / RF__FETCH_CHECKS;
    if (r->step_ns < 1)
        r->step_ns = 1;
    r->got = r->ncp = 0;
    curl_easy_setopt(e, CURLOPT_URL, url);
    /* a key's dot segments ("a/../b") are part of its name, not a path to
     * simplify */
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->curlerr);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_NOBODY, r->op == RF__FETCH_HEAD && r->probe != 1 ? 1L : 0L);
    if (r->probe == 1)
        curl_easy_setopt(e, CURLOPT_RANGE, "0-0");
    if (r->op == RF__FETCH_GET) /* fewer, larger writes into the cache */
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L * 1024);
    /* the rate check (above) bounds the whole try; curl's connect timeout
     * says a refused handshake in its own words */
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)f->o.timeout_ms);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    http_only(e);
    if (f->ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, f->ca_file);
    if (f->ca_dir)
        curl_easy_setopt(e, CURLOPT_CAPATH, f->ca_dir);
    const rf_fetch_creds *k = &f->s3.creds;
    struct curl_slist *h = rf__fetch_s3_sign(&f->s3, r->url, e);
    if (!h && !strncmp(r->url, "s3://", 5) && k->key_id && k->secret) {
        curl_easy_cleanup(e); /* never an unsigned request that should be signed */
        snprintf(r->err, sizeof r->err, "fetch: %s: out of memory while signing",
                 rf__redact_url(r->url, shown, sizeof shown));
        return RF_E_NOMEM;
    }
    r->is_signed = h != NULL;
    r->creds_gen = f->creds_gen;
    if (h)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    /* a signed request goes nowhere but where it was signed for (fetch.h) */
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, r->is_signed ? 0L : 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
    r->easy = e;
    r->hdrs = h;
    if (curl_multi_add_handle(f->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        rf__fetch_headers_free(h);
        r->easy = r->hdrs = NULL;
        snprintf(r->err, sizeof r->err, "fetch: %s: curl_multi_add_handle failed",
                 rf__redact_url(r->url, shown, sizeof shown));
        return RF_E_SYSTEM;
    }
    f->run[f->active++] = r;
    f->active_get += r->op == RF__FETCH_GET;
    atomic_fetch_add_explicit(&f->requests, 1, memory_order_relaxed);
    return 0;
}

void rf__fetch_end_try(rf_fetch *f, rf_fetch_req *r)
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
    rf__fetch_headers_free(r->hdrs);
    r->easy = r->hdrs = NULL;
}

/* ---- how a try ended ------------------------------------------------------------ */

/* The raw text of S3's <tag>...</tag> in an error body, or "". */
static void s3_field(const rf_fetch_req *r, const char *tag, char *out, size_t cap)
{
    char open[32], close[32];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = strstr(r->errbody, open), *b = a ? strstr(a, close) : NULL;
    if (a && b)
        snprintf(out, cap, "%.*s", (int)(b - a - strlen(open)), a + strlen(open));
    else
        out[0] = '\0';
}

/* What an HTTP error says of S3 and its credentials: S3's code and message
 * (escaped), whether the request was signed and with what, and for a signed
 * one sent elsewhere what to set. */
static void http_detail(const rf_fetch *f, const rf_fetch_req *r, const char *code, int reread,
                        char *out, size_t cap)
{
    char msg[300], shown_code[200], shown_msg[RF__REDACT_ROOM(300)], key[16];
    s3_field(r, "Message", msg, sizeof msg);
    rf__redact_text(code, shown_code, sizeof shown_code);
    rf__redact_text(msg, shown_msg, sizeof shown_msg);
    int n = snprintf(out, cap, "%s%s%s%s", code[0] ? ": " : "", shown_code, msg[0] ? ": " : "",
                     shown_msg);
    if (strncmp(r->url, "s3://", 5) != 0 || n < 0 || (size_t)n >= cap)
        return;
    int auth = r->http == 400 || r->http == 401 || r->http == 403;
    const rf_fetch_creds *k = &f->s3.creds;
    if (r->is_signed && r->http / 100 == 3)
        n += snprintf(out + n, cap - (size_t)n,
                      " (a signed request follows no redirect: set AWS_REGION, or "
                      "AWS_ENDPOINT_URL, to where the bucket is)");
    else if (r->is_signed && auth) {
        rf__fetch_creds_key_shown(k, key, sizeof key);
        n += snprintf(out + n, cap - (size_t)n, " (signed with access key %s from %s%s)", key,
                      k->from, reread ? "; read again: unchanged" : "");
    } else if (auth)
        n += snprintf(out + n, cap - (size_t)n, " (not signed: %s)", k->from);
}

/* Reads the credentials again after a credential error (fetch.h): 1 when
 * r may be tried again at once with others than it was signed with. */
static int reread_creds(rf_fetch *f, rf_fetch_req *r)
{
    rf_fetch_creds c;
    if (rf__fetch_creds_read(&c) != 0)
        return 0;
    if (!rf__fetch_creds_same(&c, &f->s3.creds)) {
        rf__fetch_creds_free(&f->s3.creds);
        f->s3.creds = c;
        f->creds_gen++;
    } else {
        rf__fetch_creds_free(&c);
    }
    return f->creds_gen != r->creds_gen;
}

/* The end of a failed s3:// HEAD's probe (fetch.h): its S3 code and
 * message, if it got them, with the HEAD's own status; else the HEAD's
 * status alone. The probe is no try of the request. */
static void probe_ended(rf_fetch_req *r, CURLcode *res)
{
    r->probe = 2;
    if (*res != CURLE_OK || r->http / 100 == 2 || !strstr(r->errbody, "<Code>"))
        r->errbody[0] = '\0';
    r->http = r->head_http;
    snprintf(r->reason, sizeof r->reason, "%s", r->head_reason);
    r->curlerr[0] = '\0';
    *res = CURLE_OK;
}

int rf__fetch_try_ended(rf_fetch *f, rf_fetch_req *r, CURLcode res)
{
    rf__fetch_end_try(f, r);
    if (r->probe == 1)
        probe_ended(r, &res);
    else
        r->tries++;
    char shown[RF__URL_SHOWN], why[900];
    rf__redact_url(r->url, shown, sizeof shown);
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
            return RF__TRY_DONE;
        }
        snprintf(why, sizeof why, "short body (%llu of %llu bytes)", (unsigned long long)r->size,
                 (unsigned long long)r->want_size);
        retry = 1;
    } else if (r->over) {
        char got[80] = "more arrived";
        if (r->have_size)
            snprintf(got, sizeof got, "Content-Length %llu", (unsigned long long)r->hdr_size);
        if (r->op == RF__FETCH_MEM)
            snprintf(r->err, sizeof r->err,
                     "fetch: GET %.400s: a body over %zu bytes, the most a listing page may have "
                     "(%s)",
                     shown, RF__FETCH_MEM_MAX, got);
        else if (r->over == RF__FETCH_OVER_MAX)
            snprintf(r->err, sizeof r->err, "fetch: %s %.400s: over the limit of %llu bytes (%s)",
                     op_name(r->op), shown, (unsigned long long)r->max_size, got);
        else
            snprintf(r->err, sizeof r->err,
                     "fetch: %s %.400s: over the bytes left of a limit shared with other requests "
                     "(%s; its bytes given back to them)",
                     op_name(r->op), shown, got);
        r->rc = RF_E_SOURCE;
        return RF__TRY_DONE;
    } else if (r->changed) {
        char was[RF__REDACT_ROOM(RF__FETCH_ETAG)], now[RF__REDACT_ROOM(RF__FETCH_ETAG)];
        rf__redact_text(r->want_etag && r->want_etag[0] ? r->want_etag : "none", was, sizeof was);
        rf__redact_text(r->etag[0] ? r->etag : "none", now, sizeof now);
        snprintf(r->err, sizeof r->err,
                 "fetch: %s %.400s: the object changed since it was indexed (size %llu, validator "
                 "%.200s; now size %llu, validator %.200s)",
                 op_name(r->op), shown, (unsigned long long)r->want_size, was,
                 (unsigned long long)r->hdr_size, now);
        r->rc = RF_E_SOURCE;
        return RF__TRY_DONE;
    } else if (res == CURLE_OK) {
        char code[100], reason[RF__REDACT_ROOM(64)], detail[700];
        s3_field(r, "Code", code, sizeof code);
        if (r->op == RF__FETCH_HEAD && !r->probe && !code[0] && !strncmp(r->url, "s3://", 5) &&
            (r->http == 400 || r->http == 401 || r->http == 403)) {
            r->probe = 1;
            r->head_http = r->http;
            snprintf(r->head_reason, sizeof r->head_reason, "%s", r->reason);
            return RF__TRY_PROBE;
        }
        int reread = 0;
        if (r->is_signed && (r->http == 400 || r->http == 403) && rf__fetch_creds_error(code) &&
            !r->refreshed) {
            if (reread_creds(f, r)) {
                r->refreshed = 1;
                return RF__TRY_AGAIN_NOW;
            }
            reread = 1;
        }
        rf__redact_text(r->reason, reason, sizeof reason);
        http_detail(f, r, code, reread, detail, sizeof detail);
        snprintf(why, sizeof why, "HTTP status %ld%s%.100s%.600s", r->http, reason[0] ? " " : "",
                 reason, detail);
        retry = r->http >= 500 || r->http == 408 || r->http == 429;
    } else {
        /* curl's words, then its own detail (a certificate's problem, the
         * address it could not reach) or ours (a stall, a write) */
        char detail[RF__REDACT_ROOM(RF__FETCH_CURLERR)];
        rf__redact_text(r->curlerr, detail, sizeof detail);
        snprintf(why, sizeof why, "%.150s%s%.300s%s%.300s", curl_easy_strerror(res),
                 detail[0] ? ": " : "", detail, r->err[0] ? ": " : "", r->err);
        retry = res == CURLE_COULDNT_CONNECT || res == CURLE_OPERATION_TIMEDOUT ||
                res == CURLE_RECV_ERROR || res == CURLE_SEND_ERROR || res == CURLE_PARTIAL_FILE ||
                res == CURLE_GOT_NOTHING || res == CURLE_COULDNT_RESOLVE_HOST ||
                res == CURLE_SSL_CONNECT_ERROR || res == CURLE_HTTP2 || res == CURLE_HTTP2_STREAM;
    }
    if (retry && r->tries - r->refreshed <= f->o.retries)
        return RF__TRY_RETRY;
    snprintf(r->err, sizeof r->err, "fetch: %s %.400s: %.560s (%d %s)", op_name(r->op), shown, why,
             r->tries, r->tries == 1 ? "try" : "tries");
    r->rc = RF_E_SOURCE;
    return RF__TRY_DONE;
}
