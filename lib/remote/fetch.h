/*
 * fetch.h - transfers of remote shards: one thread driving a libcurl multi
 * handle, for s3:// (SigV4-signed) and http(s):// URLs.
 *
 * A caller fills an rf_fetch_req (HEAD: size and validator; GET: the whole
 * object into a file descriptor, at offsets from 0; MEM: a small body into
 * memory, for S3 listings), submits it, and learns of its end through its
 * done callback (on the fetch thread) or rf__fetch_wait. The fetch thread
 * retries connection errors, timeouts, HTTP 408, 429 and 5xx with
 * exponential backoff and jitter, up to `retries` more tries; other HTTP
 * errors end the request at once. Every failure leaves a message naming
 * the method, the URL as it may be shown (redact.h), the HTTP status with
 * S3's error code and message when the body has them, whether an s3://
 * request was signed, and curl's own detail (a certificate's problem, say);
 * bytes from the server in it are escaped.
 *
 * A try times out when fewer than max(1, RF__FETCH_MIN_RATE x timeout_ms /
 * 1000) bytes (headers and body) arrived in the last timeout_ms: so a
 * server that never answers fails the try timeout_ms after it began
 * (connect included), one that stalls or trickles below the floor within
 * timeout_ms and a sixteenth of it (the window advances in sixteenths).
 * The whole of a request that keeps timing out lasts at most
 * (retries + 1) x 17/16 x timeout_ms plus the backoffs (0.1 s doubling to
 * 3.2 s at most, each x [0.5, 1.5)).
 *
 * Only http and https are spoken, redirects included. A request signed
 * for S3 follows no redirect (its signature and session token would go to
 * wherever the Location said); others follow up to 5, and libcurl sends a
 * URL's user:password to its own host only. A 400 or 403 of a signed
 * request whose S3 code says the credentials expired or are not known
 * (ExpiredToken, InvalidToken, TokenRefreshRequired, InvalidAccessKeyId,
 * SignatureDoesNotMatch, ...) reads them again (fetch_creds.c) and, when
 * they changed, tries once more at once with them (a try not counted
 * against `retries`). A HEAD's error has no body to hold S3's code: a HEAD
 * of s3:// failing with 400, 401 or 403 is followed by a GET of the
 * object's first byte, whose error says it (neither counts as a retry).
 *
 * TLS: the CA bundle is AWS_CA_BUNDLE, else CURL_CA_BUNDLE, else
 * SSL_CERT_FILE, and SSL_CERT_DIR a folder of hashed certificates (each
 * read at create; one that cannot be read fails it), else libcurl's
 * defaults.
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
 * Endpoint and region come from the environment at create: AWS_REGION (or
 * AWS_DEFAULT_REGION; default us-east-1), AWS_ENDPOINT_URL_S3 or
 * AWS_ENDPOINT_URL (an http:// or https:// URL, else create fails;
 * path-style requests there; else virtual-host requests to
 * https://BUCKET.s3.REGION.amazonaws.com, or path-style ones to
 * https://s3.REGION.amazonaws.com/BUCKET for a bucket name with dots or
 * other characters a host name label cannot hold: fetch_s3.c). Credentials
 * too, and again after a credential error (above): AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else the shared credentials
 * file (fetch_creds.c).
 */
#ifndef RF_FETCH_H
#define RF_FETCH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rf_fetch rf_fetch;

typedef struct rf_fetch_opts {
    int retries;        /* tries after the first for a retryable failure */
    int64_t timeout_ms; /* a try with too few bytes in this long times out (above) */
    int parallel;       /* transfers in flight at most */
    /* set (by any thread; NULL: never): the fetch thread halts within a tick
     * period, abandoning every request (their done is not called), and
     * every wait returns (rf__fetch_wait); outlives the fetcher */
    const _Atomic int *cancel;
} rf_fetch_opts;

/* The floor of a transfer's rate, in bytes per second, over each
 * timeout_ms (above). */
#define RF__FETCH_MIN_RATE 1024
/* Checkpoints of a try's byte count in one timeout_ms (above). */
#define RF__FETCH_CHECKS 16
/* Room for curl's own error detail (CURL_ERROR_SIZE). */
#define RF__FETCH_CURLERR 256

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
    int over;                 /* GET: RF__FETCH_OVER_* when a cap failed it (MEM: the size
                               * of a body in memory passed RF__FETCH_MEM_MAX), else 0 */
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
    char errbody[1024];       /* the start of an error response's body */
    size_t errlen;
    char curlerr[RF__FETCH_CURLERR]; /* curl's detail of this try's failure */
    int is_signed;            /* this try was signed for S3 */
    int refreshed;            /* a try was made again with credentials read again */
    uint64_t creds_gen;       /* the credentials' generation this try was signed with */
    int stalled;              /* this try timed out on its bytes (above): err says how */
    /* HEAD of s3://: a 400, 401 or 403 has no body, so no S3 code; a GET of
     * its first byte asks for it (1: this try is that GET, 2: it was made),
     * the HEAD's own status kept meanwhile */
    int probe;
    long head_http;
    char head_reason[64];
    /* this try's bytes (headers and body) and their count at checkpoints a
     * sixteenth of timeout_ms apart from its start (a ring: above) */
    int64_t try_ns, step_ns;
    uint64_t got, ncp;
    uint64_t cp[RF__FETCH_CHECKS + 1];
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
/* Waits until req is done (after its done callback returned): 0; or
 * RF_E_STOPPED once the fetch thread halted for opts.cancel, the request
 * then abandoned (the thread no longer touches it: the caller may free it).
 * Not on the fetch thread. */
int rf__fetch_wait(rf_fetch *f, rf_fetch_req *req);
/* 1 once the fetch thread halted for opts.cancel: no request ends any more. */
int rf__fetch_halted(rf_fetch *f);
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

/* S3 credentials (fetch_creds.c): any length; wiped before they are freed. */
typedef struct rf_fetch_creds {
    char *key_id, *secret, *token; /* malloc'd; NULL: none (no key: requests go unsigned) */
    char from[600];                /* where they were read, or why there are none (messages) */
} rf_fetch_creds;

/* Reads the credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with
 * AWS_SESSION_TOKEN) when both are set, else the profile AWS_PROFILE (else
 * "default") of the shared credentials file AWS_SHARED_CREDENTIALS_FILE
 * (else $HOME/.aws/credentials): aws_access_key_id, aws_secret_access_key,
 * aws_session_token. None found is no error. 0, or RF_E_NOMEM (c is then
 * empty). */
int rf__fetch_creds_read(rf_fetch_creds *c);
/* Wipes and frees what c holds (c may be all zero). */
void rf__fetch_creds_free(rf_fetch_creds *c);
/* 1 when a and b hold the same key, secret and token. */
int rf__fetch_creds_same(const rf_fetch_creds *a, const rf_fetch_creds *b);
/* "****" and the key's last four characters (all of it hidden when it is
 * shorter than 8), into out. */
void rf__fetch_creds_key_shown(const rf_fetch_creds *c, char *out, size_t cap);
/* 1 for an S3 error code that says the credentials have expired or are
 * not known (a reason to read them again). */
int rf__fetch_creds_error(const char *code);

/* Where S3 requests go and their credentials (above). */
typedef struct rf_fetch_s3 {
    char region[64], endpoint[512];
    rf_fetch_creds creds;
} rf_fetch_s3;

/* Fills c from the environment (and the credentials file). 0, RF_E_SOURCE
 * (err: an endpoint that is not http(s), shown redacted) or RF_E_NOMEM;
 * then c holds nothing to free. */
int rf__fetch_s3_env(rf_fetch_s3 *c, char *err, size_t errcap);
/* Wipes and frees c's credentials. */
void rf__fetch_s3_free(rf_fetch_s3 *c);
/* The http(s) URL that url (s3://, http://, https://) is asked at, with
 * query (already encoded; NULL or "": none) after a '?'. 0, or -1 when it
 * does not fit in cap or an s3:// URL has no bucket. */
int rf__fetch_http_url(const rf_fetch_s3 *c, const char *url, const char *query, char *out,
                       size_t cap);
/* With libcurl: sets SigV4 signing on the easy handle for an s3:// url
 * when c has credentials; returns the headers it needs (a curl_slist the
 * caller passes as CURLOPT_HTTPHEADER and frees with rf__fetch_headers_free),
 * or NULL (not signed). */
void *rf__fetch_s3_sign(const rf_fetch_s3 *c, const char *url, void *easy);
/* Wipes (the session token is one) and frees headers from rf__fetch_s3_sign. */
void rf__fetch_headers_free(void *headers);

#endif
