/*
 * fetch.h - transfers of remote shards: one thread driving a libcurl multi
 * handle, for s3:// (SigV4-signed) and http(s):// URLs.
 *
 * A caller fills an rf_fetch_req (HEAD: size and validator; GET: the whole
 * object into a file descriptor, at offsets from 0; MEM: a small body into
 * memory, for S3 listings), submits it, and learns of its end through its
 * done callback (on the fetch thread) or rf__fetch_wait. The fetch thread
 * retries connection errors, timeouts (no byte for timeout_ms), HTTP 408,
 * 429 and 5xx with exponential backoff and jitter, up to `retries` more
 * tries; other HTTP errors end the request at once. Every failure leaves a
 * message naming the method, the URL and the HTTP status (and S3's error
 * code when the body has one).
 *
 * A GET that names the size and validator it expects (what the index was
 * built from) fails, without a retry, when the server's differ: the object
 * changed. A GET succeeds only with exactly the expected bytes written.
 *
 * A GET of an object of unknown size can be capped instead: max_size fails
 * it, without a retry, as soon as the Content-Length or the bytes written
 * pass it; a budget shared by several GETs (an atomic count of bytes) has
 * each draw what it writes - the whole Content-Length when the headers
 * arrive, else as bytes do; a retry draws only past what its earlier tries
 * wrote, since it rewrites the same offsets - and fails, without a retry,
 * the GET that finds too few left. Their files then never hold more than
 * the budget together. Both failures set `over` and name the URL and limit.
 *
 * Built without libcurl (RF_WITH_CURL=OFF or libcurl4-openssl-dev absent),
 * rf__fetch_create fails with a message saying so.
 *
 * Credentials and endpoint come from the environment at create:
 * AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (or
 * AWS_DEFAULT_REGION; default us-east-1), AWS_ENDPOINT_URL_S3 or
 * AWS_ENDPOINT_URL (path-style requests there; else virtual-host requests to
 * https://BUCKET.s3.REGION.amazonaws.com, or path-style ones to
 * https://s3.REGION.amazonaws.com/BUCKET for a bucket name with dots or
 * other characters a host name label cannot hold: fetch_s3.c).
 */
#ifndef RF_FETCH_H
#define RF_FETCH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rf_fetch rf_fetch;

typedef struct rf_fetch_opts {
    int retries;        /* tries after the first for a retryable failure */
    int64_t timeout_ms; /* connect timeout; a transfer with no byte for this long fails */
    int parallel;       /* transfers in flight at most */
} rf_fetch_opts;

enum { RF__FETCH_HEAD = 1, RF__FETCH_GET = 2, RF__FETCH_MEM = 3 };
/* rf_fetch_req.over: the cap a GET failed on */
enum { RF__FETCH_OVER_MAX = 1, RF__FETCH_OVER_BUDGET = 2 };

#define RF__FETCH_ETAG 160 /* bytes of a validator: the ETag, or "lm:" Last-Modified */
#define RF__FETCH_MEM_MAX ((size_t)64 << 20) /* bytes of a MEM body at most */

typedef struct rf_fetch_req rf_fetch_req;
struct rf_fetch_req {
    /* set by the caller */
    int op;                   /* RF__FETCH_* */
    const char *url;          /* s3://bucket/key, http://..., https://...; borrowed until done */
    const char *query;        /* MEM: query string appended (already encoded, keys sorted) */
    int fd;                   /* GET: written with pwrite from offset 0 */
    uint64_t want_size;       /* GET: the size the object must have (0: any) */
    const char *want_etag;    /* GET: its validator (NULL or "": any) */
    uint64_t max_size;        /* GET: the most bytes it may have (0: no cap; above) */
    _Atomic uint64_t *budget; /* GET: bytes left to the GETs that share it, drawn from as
                               * this one writes (NULL: none; above); outlives the request */
    void (*done)(rf_fetch_req *req, void *ctx); /* on the fetch thread; may be NULL */
    void *ctx;
    /* results, valid once done */
    int rc;                   /* 0, or a negative RF_E_* with err set */
    long http;                /* last HTTP status (0: none) */
    uint64_t size;            /* HEAD: Content-Length; GET: bytes written */
    char etag[RF__FETCH_ETAG];/* ETag, or "lm:" + Last-Modified, or "" */
    char *body;               /* MEM: the body (malloc, NUL-terminated; the caller frees) */
    size_t body_len;
    int tries;
    int over;                 /* GET: RF__FETCH_OVER_* when a cap failed it, else 0 */
    uint64_t drawn;           /* GET: bytes drawn from budget, all tries together */
    char err[1024];
    /* the fetch thread's */
    void *easy;
    void *hdrs;
    rf_fetch_req *next;
    int64_t due_ns;           /* retry not before */
    size_t body_cap;
    uint64_t hdr_size;
    uint64_t kicked;          /* GET: bytes whose writeback was started */
    int have_size, changed, finished;
    char reason[64];          /* status line's reason phrase */
    char errbody[512];        /* the start of an error response's body */
    size_t errlen;
};

/* The tick: called on the fetch thread after a wake (rf__fetch_wake), after
 * a request ended, and tick_ms after the last. */
typedef void rf_fetch_tick_fn(void *ctx);

/* Starts the fetch thread. 0, or RF_E_SOURCE (no libcurl, bad environment)
 * / RF_E_SYSTEM / RF_E_NOMEM with the reason in err. */
int rf__fetch_create(rf_fetch **out, const rf_fetch_opts *o, char *err, size_t errcap);
/* Stops the thread (requests in flight are abandoned: their done is not
 * called) and frees. forked: memory only (a forked child). NULL: no-op. */
void rf__fetch_destroy(rf_fetch *f, int forked);

/* Sets the tick (before any submit); ms: its period while idle. */
void rf__fetch_set_tick(rf_fetch *f, rf_fetch_tick_fn *fn, void *ctx, int ms);
/* Queues req (its results are reset). Any thread. */
void rf__fetch_submit(rf_fetch *f, rf_fetch_req *req);
/* Waits until req is done (after its done callback returned). Not on the
 * fetch thread. */
void rf__fetch_wait(rf_fetch *f, rf_fetch_req *req);
/* Runs the tick soon. Any thread. */
void rf__fetch_wake(rf_fetch *f);

/* Totals since create, for the stats (relaxed reads). */
typedef struct rf_fetch_totals {
    int64_t requests, retries, bytes;
} rf_fetch_totals;
void rf__fetch_totals(rf_fetch *f, rf_fetch_totals *t);

/* ---- addressing and signing (fetch_s3.c) ---------------------------------- */

/* AWS's URI encoding of s into dst: unreserved characters stay (and '/'
 * with keep_slash), the others become %XX. 0, or -1 when cap is short. */
int rf__fetch_uri_encode(char *dst, size_t cap, const char *s, int keep_slash);

/* 1 when the URL is remote (s3://, http://, https://). */
int rf__fetch_is_url(const char *s);

/* Where S3 requests go and their credentials (the environment's, above). */
typedef struct rf_fetch_s3 {
    char region[64], endpoint[512], key_id[256], secret[256], token[2048];
} rf_fetch_s3;

/* Fills c from the environment. */
void rf__fetch_s3_env(rf_fetch_s3 *c);
/* The http(s) URL that url (s3://, http://, https://) is asked at, with
 * query (already encoded; NULL or "": none) after a '?'. 0, or -1 when it
 * does not fit in cap or an s3:// URL has no bucket. */
int rf__fetch_http_url(const rf_fetch_s3 *c, const char *url, const char *query, char *out,
                       size_t cap);
/* With libcurl: sets SigV4 signing on the easy handle for an s3:// url
 * when c has credentials; returns the headers it needs (a curl_slist the
 * caller passes as CURLOPT_HTTPHEADER and frees), or NULL. */
void *rf__fetch_s3_sign(const rf_fetch_s3 *c, const char *url, void *easy);

#endif
