/*
 * source_remote.c - the remote shard kind: WebDataset tar shards behind
 * s3:// or http(s):// URLs, indexed from copies in the local cache.
 *
 * At start: one HEAD per shard (size and validator: the ETag, or the
 * Last-Modified date where a server sends no ETag), then per shard, in
 * order, its index: the one kept in the cache beside the shard (BASE.idx,
 * written when the shard was first walked, for the same URL, size,
 * validator and member options; none is kept or read for a shard whose
 * server gives no validator, as new bytes of the same size could not be
 * told from the old); or its entry in the ringfeed-pack
 * manifest.json of its folder, the shard not fetched (remote_manifest.c:
 * fetched only when some shard has no kept index; the shard's headers are
 * checked when it lands in the cache; such an index is not kept); or else
 * the shard itself, fetched into the cache (remote.c; as many ahead as the
 * cache limit holds) and walked by the tar kind's code
 * (rf__source_tar_shard_fd, through the pin) exactly as a local shard is,
 * its index then kept for the next run. The samples' offsets are those of the
 * shard, so once the shard is back in the cache the reader reads it as a
 * local one: same bytes, same decode, same order.
 *
 * Globs over s3:// list the bucket: source_listing.c. A shard's URL is
 * shown (sample names and paths, messages) without its userinfo and query
 * (redact.h): s->shown_off.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetch.h"
#include "kinds.h"
#include "redact.h"
#include "remote.h"
#include "remote_manifest.h"
#include "ringfeed.h"
#include "sha256.h"
#include "source_remote.h"
#include "trace.h"

/* ---- the kept index --------------------------------------------------------- */

/* BASE.idx: the magic, the SHA-256 of the shard's URL (never the URL: it
 * may hold a secret, user:password@ or a signed query; the file's name is
 * a hash of it already), the size, the validator and the member options
 * the index was taken for, then the samples. Version 2: 1 held the URL. */
#define IDX_MAGIC "ringfeed-index 2\n"

/* What the index depends on besides the shard: the member options. */
static void options_key(const rf_source_opts *o, char *out, size_t cap)
{
    int n = snprintf(out, cap, "label=%s;extras=",
                     o->unlabeled ? "" : o->label ? o->label : "cls");
    for (int e = 0; e < o->nextras && n > 0 && (size_t)n < cap; e++)
        n += snprintf(out + n, cap - (size_t)n, "%s,", o->extras[e]);
}

typedef struct blob {
    char *p;
    size_t len, cap;
    int oom;
} blob;

static void put(blob *b, const void *p, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + n)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void put_str(blob *b, const char *s)
{
    put(b, s, strlen(s) + 1);
}

/* The header both the writer and the reader make: magic, the URL's digest,
 * size, validator, options. */
static void header(blob *b, const char *url, uint64_t size, const char *etag, const char *okey)
{
    uint8_t d[32];
    rf__sha256(url, strlen(url), d);
    put(b, IDX_MAGIC, strlen(IDX_MAGIC));
    put(b, d, sizeof d);
    put(b, &size, sizeof size);
    put_str(b, etag);
    put_str(b, okey);
}

void *rf__source_kept_make(const rf_source *s, int64_t from, const char *url, uint64_t size,
                           const char *etag, const char *okey, size_t *len)
{
    blob b = {0};
    header(&b, url, size, etag, okey);
    uint64_t n = (uint64_t)(s->n - from);
    put(&b, &n, sizeof n);
    for (int64_t i = from; i < s->n; i++) {
        const char *name = s->arena + s->path_off[i];
        put_str(&b, name);
        put(&b, &s->labels[i], sizeof s->labels[i]);
        put(&b, &s->data_off[i], sizeof s->data_off[i]);
        put(&b, &s->data_len[i], sizeof s->data_len[i]);
        if (s->nextras > 0) {
            put(&b, &s->span_off[i], sizeof s->span_off[i]);
            put(&b, &s->span_len[i], sizeof s->span_len[i]);
            size_t at = (size_t)i * (size_t)s->nextras;
            put(&b, &s->ext_rel[at], (size_t)s->nextras * sizeof *s->ext_rel);
            put(&b, &s->ext_len[at], (size_t)s->nextras * sizeof *s->ext_len);
        }
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

/* Samples [from, s->n) of shard k, kept beside it; nothing without a
 * validator (the next start could not tell new bytes from these). */
static void keep_index(rf_remote *r, uint32_t k, const rf_source *s, int64_t from,
                       const char *url, uint64_t size, const char *etag, const char *okey)
{
    if (!etag[0])
        return;
    size_t len;
    void *p = rf__source_kept_make(s, from, url, size, etag, okey, &len);
    char base[RF__CACHE_PATH];
    rf__remote_base(r, k, base);
    if (p)
        rf__cache_put_index(rf__remote_cache(r), base, p, len); /* best effort */
    free(p);
}

/* Reads n bytes at *at of p[0..len); 0, or -1 past the end. */
static int take(const char *p, size_t len, size_t *at, void *out, size_t n)
{
    if (n > len - *at)
        return -1;
    memcpy(out, p + *at, n);
    *at += n;
    return 0;
}

/* 1 when sample j, as a kept index gave it, lies inside its shard (size
 * bytes) the way a walk places it: its image within the shard (no wrap),
 * and with extras its span within the shard, the image within the span and
 * each extra within the span (one absent: length RF_SOURCE_ABSENT, place
 * 0); its label one a walk gives. The index is a file anyone could have
 * written: nothing it says may make a read leave the shard or a slice
 * leave the bytes of its read, nor a label overflow the class count. */
static int sample_sane(const rf_source *s, int64_t j, uint64_t size)
{
    uint64_t off = s->data_off[j], len = s->data_len[j];
    if (off > size || len > size - off || s->labels[j] < -1 || s->labels[j] > RF_SOURCE_MAX_LABEL)
        return 0;
    if (s->nextras == 0)
        return 1;
    uint64_t so = s->span_off[j], sl = s->span_len[j];
    if (so > size || sl > size - so || off < so || off - so > sl || len > sl - (off - so))
        return 0;
    for (int e = 0; e < s->nextras; e++) {
        size_t at = (size_t)j * (size_t)s->nextras + (size_t)e;
        uint64_t rel = s->ext_rel[at], el = s->ext_len[at];
        if (el == RF_SOURCE_ABSENT ? rel != 0 : rel > sl || el > sl - rel)
            return 0;
    }
    return 1;
}

/* The file is checked as untrusted input (sample_sane, a count its bytes
 * can hold, no byte left over). */
int rf__source_kept_load(rf_source *s, uint32_t k, const void *vp, size_t len, const char *url,
                         uint64_t size, const char *etag, const char *okey, int64_t *maxlabel)
{
    const char *p = vp;
    blob want = {0};
    header(&want, url, size, etag, okey);
    size_t at = want.len;
    uint64_t n;
    int ok = !want.oom && len >= at && !memcmp(p, want.p, at) &&
             take(p, len, &at, &n, sizeof n) == 0;
    free(want.p);
    /* a sample takes this many bytes at least: a count the file cannot
     * hold is damage, found before any room is reserved for it */
    size_t least = 1 + sizeof *s->labels + sizeof *s->data_off + sizeof *s->data_len;
    if (s->nextras > 0)
        least += sizeof *s->span_off + sizeof *s->span_len +
                 (size_t)s->nextras * (sizeof *s->ext_rel + sizeof *s->ext_len);
    ok = ok && n <= (len - at) / least;
    int64_t before = s->n, maxl = *maxlabel; /* the labels count once the whole file does */
    int rc = 0;
    for (uint64_t i = 0; ok && rc == 0 && i < n; i++) {
        const char *name = p + at;
        size_t nl = strnlen(name, len - at);
        if (nl == len - at || (rc = rf__source_reserve(s, 1)) != 0)
            break;
        at += nl + 1;
        int64_t j = s->n;
        uint64_t noff;
        ok = take(p, len, &at, &s->labels[j], sizeof s->labels[j]) == 0 &&
             take(p, len, &at, &s->data_off[j], sizeof s->data_off[j]) == 0 &&
             take(p, len, &at, &s->data_len[j], sizeof s->data_len[j]) == 0;
        if (ok && s->nextras > 0) {
            size_t at2 = (size_t)j * (size_t)s->nextras, ne = (size_t)s->nextras;
            ok = take(p, len, &at, &s->span_off[j], sizeof s->span_off[j]) == 0 &&
                 take(p, len, &at, &s->span_len[j], sizeof s->span_len[j]) == 0 &&
                 take(p, len, &at, &s->ext_rel[at2], ne * sizeof *s->ext_rel) == 0 &&
                 take(p, len, &at, &s->ext_len[at2], ne * sizeof *s->ext_len) == 0;
        }
        if (!ok || !sample_sane(s, j, size))
            break;
        if ((rc = rf__source_put(s, name, nl, &noff)) != 0)
            break;
        s->path_off[j] = noff;
        s->shard[j] = k;
        if (s->labels[j] > maxl)
            maxl = s->labels[j];
        s->n++;
    }
    if (rc != 0)
        return rc;
    if (!ok || s->n - before != (int64_t)n || at != len) {
        s->n = before; /* damaged: walk the shard instead */
        return 0;
    }
    *maxlabel = maxl;
    return 1;
}

/* Appends shard k's samples from its kept index: 1 done, 0 no usable index
 * (absent, no validator, another version or options, damaged: the shard is
 * walked), or RF_E_NOMEM. */
static int load_index(rf_remote *r, uint32_t k, rf_source *s, const char *url, uint64_t size,
                      const char *etag, const char *okey, int64_t *maxlabel)
{
    char base[RF__CACHE_PATH];
    rf__remote_base(r, k, base);
    void *vp;
    size_t len;
    if (!etag[0] || rf__cache_get_index(base, &vp, &len) != 1)
        return 0;
    int rc = rf__source_kept_load(s, k, vp, len, url, size, etag, okey, maxlabel);
    free(vp);
    return rc;
}

/* 1 when shard k's kept index is for this version and these options (never
 * without a validator: see keep_index). */
static int index_matches(const char *base, const char *url, uint64_t size, const char *etag,
                         const char *okey)
{
    void *vp;
    size_t len;
    if (!etag[0] || rf__cache_get_index(base, &vp, &len) != 1)
        return 0;
    blob want = {0};
    header(&want, url, size, etag, okey);
    int ok = !want.oom && len >= want.len && !memcmp(vp, want.p, want.len);
    free(want.p);
    free(vp);
    return ok;
}

/* ---- indexing ------------------------------------------------------------------ */

/* The shards the indexer walks (neither a kept index nor a manifest entry
 * indexes them), wanted in order a window ahead of the walk: while one is
 * walked the next ones are fetched, fetch_parallel at once, within the
 * cache's room and the descriptors (rf__remote_walk_window) - not all at
 * once, which would pin (or fetch) every shard in the cache together. */
typedef struct walk_ahead {
    rf_remote *r;
    const rf_source *s;
    const uint8_t *kept;
    const rf_rman *man;
    int64_t window;
    uint32_t next;  /* the next shard to look at */
    int64_t wanted; /* shards in [the walk's, next) wanted and not released */
} walk_ahead;

static int walked(const walk_ahead *w, uint32_t k)
{
    return !w->kept[k] && !rf__rman_covers(w->man, k);
}

static void want_ahead(walk_ahead *w)
{
    for (; w->next < w->s->nfiles && w->wanted < w->window; w->next++)
        if (walked(w, w->next)) {
            rf__remote_acquire(w->r, w->next);
            w->wanted++;
        }
}

/* Shard k must be walked after all (a damaged kept index, a manifest entry
 * that did not do): the shards wanted ahead are let go first (fetched ones
 * stay in the cache, unpinned, and are pinned again in their turn), so
 * that a cache with room for the window alone has room for k. */
static void want_alone(walk_ahead *w, uint32_t k)
{
    for (uint32_t j = k + 1; j < w->next; j++)
        if (walked(w, j))
            rf__remote_release(w->r, j);
    w->next = k + 1;
    w->wanted = 0;
    rf__remote_acquire(w->r, k);
}

/* HEAD of every shard, in parallel: sizes and validators. The fetch
 * thread runs at most fetch_parallel + 16 of them at once (fetch.c); the
 * others wait in its queue, holding no descriptor. */
static int head_all(rf_remote *r, const rf_source *s, char *err, size_t errcap)
{
    rf_fetch *f = rf__remote_fetcher(r);
    rf_fetch_req *q = calloc(s->nfiles, sizeof *q);
    if (!q)
        return RF_E_NOMEM;
    for (uint32_t k = 0; k < s->nfiles; k++) {
        q[k].op = RF__FETCH_HEAD;
        q[k].url = s->arena + s->file_off[k];
        rf__fetch_submit(f, &q[k]);
    }
    int rc = 0;
    for (uint32_t k = 0; k < s->nfiles; k++) {
        if (rf__fetch_wait(f, &q[k]) != 0) { /* cancelled: every wait ends now */
            if (rc == 0)
                rf__remote_cancelled(r, err, errcap);
            rc = RF_E_STOPPED;
        } else if (rc == 0 && q[k].rc != 0) {
            snprintf(err, errcap, "source: %s", q[k].err);
            rc = q[k].rc;
        } else if (rc == 0 && q[k].size == 0) {
            char shown[RF__URL_SHOWN];
            snprintf(err, errcap, "source: HEAD %s: no Content-Length (or an empty shard)",
                     rf__redact_url(q[k].url, shown, sizeof shown));
            rc = RF_E_SOURCE;
        }
        if (rc == 0)
            rc = rf__remote_add(r, q[k].url, q[k].size, q[k].etag);
    }
    free(q);
    RF_TRACE("HEADs done: %u", s->nfiles);
    return rc;
}

int rf__source_index_remote(rf_source *s, const rf_strlist *paths, const rf_source_opts *o,
                            char *err, size_t errcap)
{
    rf_remote *r = s->remote;
    s->kind = RF_SOURCE_TAR;
    s->nextras = o->nextras;
    int rc = rf__source_put_files(s, paths);
    if (rc == 0) {
        s->local_off = calloc(s->nfiles, sizeof *s->local_off);
        s->shown_off = calloc(s->nfiles, sizeof *s->shown_off);
    }
    if (rc == 0 && (!s->local_off || !s->shown_off))
        rc = RF_E_NOMEM;
    /* the URLs as shown: the same string unless it holds a secret */
    for (uint32_t k = 0; rc == 0 && k < s->nfiles; k++) {
        const char *url = s->arena + s->file_off[k];
        char shown[RF__URL_SHOWN];
        s->shown_off[k] = s->file_off[k];
        if (rf__url_has_secret(url)) {
            rf__redact_url(url, shown, sizeof shown);
            rc = rf__source_put(s, shown, strlen(shown), &s->shown_off[k]);
        }
    }
    /* the packer's manifest.json beside the shards indexes those it
     * describes without a fetch (remote_manifest.c). With no kept index in
     * the cache folder no shard has one, so every folder's manifest is
     * wanted: its GET runs beside the HEADs (a round trip less before the
     * first shard's transfer can start, on a cold start) */
    rf_rman *man = NULL;
    int cls = o->unlabeled || !o->label || !strcmp(o->label, "cls"); /* the labels it holds */
    if (rc == 0 && cls && !rf__cache_has_index(rf__remote_cache(r)))
        rc = rf__rman_start(&man, r, s, NULL);
    if (rc == 0)
        rc = head_all(r, s, err, errcap);
    if (rc == 0)
        rc = rf__remote_plan_room(r, err, errcap);
    uint8_t *kept = rc == 0 ? calloc(s->nfiles, 1) : NULL;
    if (rc == 0 && !kept)
        rc = RF_E_NOMEM;
    if (rc != 0) {
        rf__rman_free(man);
        return rc;
    }
    char okey[RF_SOURCE_MAX_EXTRAS * (RF_SOURCE_MAX_EXT + 1) + 100];
    options_key(o, okey, sizeof okey);
    /* the local paths, and which shards have a kept index */
    for (uint32_t k = 0; rc == 0 && k < s->nfiles; k++) {
        char base[RF__CACHE_PATH], local[RF__CACHE_PATH + 8];
        rf__remote_base(r, k, base);
        snprintf(local, sizeof local, "%s.tar", base);
        rc = rf__source_put(s, local, strlen(local), &s->local_off[k]);
        const char *etag;
        uint64_t size = rf__remote_shard(r, k, &etag);
        kept[k] = index_matches(base, s->arena + s->file_off[k], size, etag, okey);
    }
    /* (otherwise only the folders of shards without a kept index want it,
     * known now); the shards neither indexes are all asked for now, in
     * order, fetched as the cache limit allows */
    if (rc == 0 && cls && !man)
        rc = rf__rman_start(&man, r, s, kept);
    if (rc == 0 && man) {
        rf__rman_match(man, r, s, kept);
        rf__remote_set_manifest(r, man);
    } else {
        rf__rman_free(man);
        man = NULL;
    }
    walk_ahead w = {.r = r, .s = s, .kept = kept, .man = man,
                    .window = rf__remote_walk_window(r)};
    int64_t maxlabel = -1;
    for (uint32_t k = 0; rc == 0 && k < s->nfiles; k++) {
        const char *etag;
        uint64_t size = rf__remote_shard(r, k, &etag);
        const char *url = s->arena + s->file_off[k];
        want_ahead(&w);
        if (kept[k]) {
            rc = load_index(r, k, s, url, size, etag, okey, &maxlabel);
            if (rc == 1) {
                rc = 0;
                continue;
            }
            if (rc < 0)
                break;
            want_alone(&w, k); /* damaged: walk the shard */
        } else if (rf__rman_covers(man, k)) {
            if (rf__rman_index(man, s, k, o, &maxlabel) == 0)
                continue;
            want_alone(&w, k); /* the entry did not do: walk the shard */
        } else {
            w.wanted--; /* wanted by want_ahead; released below */
        }
        if ((rc = rf__remote_wait(r, k, err, errcap)) != 0)
            break;
        int64_t from = s->n;
        /* the arena may move while the walk adds names: copy the URL and the
         * name shown for it */
        char name[RF__CACHE_PATH + 8], shown[RF__URL_SHOWN];
        snprintf(name, sizeof name, "%s", url);
        snprintf(shown, sizeof shown, "%s", s->arena + s->shown_off[k]);
        /* through the pin, never the name again (cache.h) */
        rc = rf__source_tar_shard_fd(s, k, rf__remote_shard_fd(r, k), shown, o, NULL, &maxlabel,
                                     err, errcap);
        if (rc == 0)
            keep_index(r, k, s, from, name, size, etag, okey);
        rf__remote_release(r, k);
    }
    if (rc == 0 && s->n > UINT32_MAX) {
        snprintf(err, errcap, "source: more than %u samples", UINT32_MAX);
        rc = RF_E_SOURCE;
    }
    rf__rman_trim(man);
    s->nclasses = maxlabel + 1;
    free(kept);
    return rc;
}

/* ---- the kind as source.c calls it (source/kinds.h) ------------------------- */

static int remote_open(rf_source *s, const rf_source_opts *o, char *err, size_t errcap)
{
    rf_remote_opts ro = {.cache_dir = o->cache_dir,
                         .cache_limit = o->cache_limit,
                         .retries = o->fetch_retries,
                         .timeout_ms = o->fetch_timeout_ms,
                         .parallel = o->fetch_parallel,
                         .cancel = o->cancel};
    return rf__remote_create(&s->remote, &ro, err, errcap);
}

const rf_source_remote rf__source_remote = {
    .is_url = rf__fetch_is_url,
    .open = remote_open,
    .close = rf__remote_destroy,
    .glob = rf__source_glob_remote,
    .index = rf__source_index_remote,
};
