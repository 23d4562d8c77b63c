/*
 * source_remote.c - the remote shard kind: WebDataset tar shards behind
 * s3:// or http(s):// URLs, indexed from copies in the local cache.
 *
 * At start: one HEAD per shard (size and validator: the ETag, or the
 * Last-Modified date where a server sends no ETag), then per shard, in
 * order, its index: the one kept in the cache beside the shard (BASE.idx,
 * written when the shard was first walked, for the same URL, size,
 * validator and member options); or its entry in the ringfeed-pack
 * manifest.json of its folder, the shard not fetched (remote_manifest.c:
 * fetched only when some shard has no kept index; the shard's headers are
 * checked when it lands in the cache; such an index is not kept); or else
 * the shard itself, fetched into the cache (remote.c; as many ahead as the
 * cache limit holds) and walked by the tar kind's code
 * (rf__source_tar_shard) exactly as a local shard is, its index then kept
 * for the next run. The samples' offsets are those of the
 * shard, so once the shard is back in the cache the reader reads it as a
 * local one: same bytes, same decode, same order.
 *
 * Globs over s3:// list the bucket (ListObjectsV2 from the prefix before
 * the first glob character, every page, keys asked URL-encoded so that any
 * byte comes through; XML's entities and numeric references are decoded
 * too, for a server that sends keys as XML text) and keep the keys fnmatch
 * accepts ('/' matched only by '/'), sorted; http(s):// cannot be listed, so
 * a glob there is an error that says to use a brace pattern.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetch.h"
#include "remote.h"
#include "remote_manifest.h"
#include "ringfeed.h"
#include "source_kinds.h"
#include "trace.h"

/* ---- the kept index --------------------------------------------------------- */

#define IDX_MAGIC "ringfeed-index 1\n"

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

/* The header both the writer and the reader make: magic, URL, size,
 * validator, options. */
static void header(blob *b, const char *url, uint64_t size, const char *etag, const char *okey)
{
    put(b, IDX_MAGIC, strlen(IDX_MAGIC));
    put_str(b, url);
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

/* Samples [from, s->n) of shard k, kept beside it. */
static void keep_index(rf_remote *r, uint32_t k, const rf_source *s, int64_t from,
                       const char *url, uint64_t size, const char *etag, const char *okey)
{
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
 * leave the bytes of its read. */
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
 * (absent, another version or options, damaged: the shard is walked), or
 * RF_E_NOMEM. */
static int load_index(rf_remote *r, uint32_t k, rf_source *s, const char *url, uint64_t size,
                      const char *etag, const char *okey, int64_t *maxlabel)
{
    char base[RF__CACHE_PATH];
    rf__remote_base(r, k, base);
    void *vp;
    size_t len;
    if (rf__cache_get_index(base, &vp, &len) != 1)
        return 0;
    int rc = rf__source_kept_load(s, k, vp, len, url, size, etag, okey, maxlabel);
    free(vp);
    return rc;
}

/* 1 when shard k's kept index is for this version and these options. */
static int index_matches(const char *base, const char *url, uint64_t size, const char *etag,
                         const char *okey)
{
    void *vp;
    size_t len;
    if (rf__cache_get_index(base, &vp, &len) != 1)
        return 0;
    blob want = {0};
    header(&want, url, size, etag, okey);
    int ok = !want.oom && len >= want.len && !memcmp(vp, want.p, want.len);
    free(want.p);
    free(vp);
    return ok;
}

/* ---- globs over s3:// ------------------------------------------------------------ */

/* The length of the numeric character reference at a ("&#13;", "&#x1F;")
 * with its code point put as UTF-8 at out + *n; 0 when a holds none. */
static size_t numeric_ref(const char *a, const char *b, char *out, size_t *n)
{
    if (b - a < 4 || a[0] != '&' || a[1] != '#')
        return 0;
    int hex = a[2] == 'x' || a[2] == 'X';
    const char *d = a + 2 + hex, *e = d;
    unsigned long c = 0;
    while (e < b && e - d < 8 && (hex ? isxdigit((unsigned char)*e) : isdigit((unsigned char)*e))) {
        c = c * (hex ? 16 : 10) + (unsigned long)(*e <= '9' ? *e - '0' : (*e | 0x20) - 'a' + 10);
        e++;
    }
    size_t k;
    if (e == d || e >= b || *e != ';' || (k = rf__utf8(c, out + *n)) == 0)
        return 0;
    *n += k;
    return (size_t)(e + 1 - a);
}

const char *rf__source_xml_text(const char *p, const char *end, const char *tag, char *out,
                                size_t cap)
{
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = strstr(p, open);
    if (!a || a >= end)
        return NULL;
    a += strlen(open);
    const char *b = strstr(a, close);
    if (!b || b > end)
        return NULL;
    static const char *const ent[][2] = {
        {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}};
    size_t n = 0;
    while (a < b && n + 4 < cap) { /* room for one UTF-8 character and the NUL */
        size_t e = 0, k;
        while (e < 5 && strncmp(a, ent[e][0], strlen(ent[e][0])))
            e++;
        if (e < 5) {
            out[n++] = ent[e][1][0];
            a += strlen(ent[e][0]);
        } else if ((k = numeric_ref(a, b, out, &n)) > 0) {
            a += k;
        } else {
            out[n++] = *a++;
        }
    }
    out[n] = '\0';
    return b + strlen(close);
}

/* A key of a listing asked with encoding-type=url (%XX, and '+' for a
 * space, as S3 writes them) decoded in place; 0, or -1 when malformed or
 * holding a NUL. */
static int url_decode(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (*s == '+') {
            *o++ = ' ';
        } else if (*s != '%') {
            *o++ = *s;
        } else {
            char hx[3] = {s[1], s[1] ? s[2] : 0, 0}, *e;
            unsigned long c = strtoul(hx, &e, 16);
            if (!isxdigit((unsigned char)hx[0]) || !isxdigit((unsigned char)hx[1]) || *e ||
                c == 0)
                return -1;
            *o++ = (char)c;
            s += 2;
        }
    }
    *o = '\0';
    return 0;
}

int rf__source_list_page(const char *body, size_t len, const char *word, const char *keypat,
                         const char *burl, rf_strlist *keys, char *token, size_t tokcap, char *err,
                         size_t errcap)
{
    /* key: room for a key of 1024 bytes (S3's most) with every byte as %XX */
    char key[4096], enc[16] = "", trunc[16] = "";
    const char *p = body, *end = body + len, *c;
    int rc = 0;
    rf__source_xml_text(p, end, "EncodingType", enc, sizeof enc);
    while (rc == 0 && (c = strstr(p, "<Contents>")) != NULL) {
        const char *ce = strstr(c, "</Contents>");
        if (!ce)
            break;
        if (!rf__source_xml_text(c, ce, "Key", key, sizeof key)) {
            p = ce;
            continue;
        }
        if (!strcmp(enc, "url") && url_decode(key) != 0) {
            snprintf(err, errcap, "source: listing %s: key %.300s is not URL-encoded right", word,
                     key);
            rc = RF_E_SOURCE;
        } else if (!fnmatch(keypat, key, FNM_PATHNAME)) {
            rc = rf__strlist_add(keys, burl, key);
        }
        p = ce;
    }
    rf__source_xml_text(body, end, "IsTruncated", trunc, sizeof trunc);
    token[0] = '\0';
    if (!strcmp(trunc, "true") && rc == 0 &&
        (!rf__source_xml_text(body, end, "NextContinuationToken", token, tokcap) || !token[0])) {
        snprintf(err, errcap,
                 "source: listing %s: a truncated page without a continuation token (the "
                 "listing cannot go on)",
                 word);
        rc = RF_E_SOURCE;
    }
    return rc;
}

int rf__source_glob_remote(void *gctx, const char *word, int (*emit)(const char *, void *),
                           void *ectx, char *err, size_t errcap)
{
    if (strncmp(word, "s3://", 5) != 0) {
        snprintf(err, errcap,
                 "source: %s: a glob needs a listing, which an http(s) server does not give; "
                 "name the shards with a brace pattern (train-{0000..0099}.tar) or a list",
                 word);
        return RF_E_SOURCE;
    }
    const char *bucket = word + 5, *slash = strchr(bucket, '/');
    if (!slash) {
        snprintf(err, errcap, "source: %s: no key after the bucket", word);
        return RF_E_SOURCE;
    }
    const char *keypat = slash + 1;
    size_t plen = strcspn(keypat, "*?[");
    char prefix[2048], eprefix[6200], token[2048], etoken[6200], query[12600];
    char burl[600];
    snprintf(prefix, sizeof prefix, "%.*s", (int)plen, keypat);
    snprintf(burl, sizeof burl, "s3://%.*s", (int)(slash - bucket), bucket);
    if (rf__fetch_uri_encode(eprefix, sizeof eprefix, prefix, 0) != 0) {
        snprintf(err, errcap, "source: %s: pattern too long", word);
        return RF_E_SOURCE;
    }
    rf_strlist keys = {0};
    rf_fetch *f = rf__remote_fetcher(gctx);
    token[0] = '\0';
    int rc = 0;
    do {
        rf__fetch_uri_encode(etoken, sizeof etoken, token, 0);
        /* the parameters in sorted order: the canonical query SigV4 signs.
         * encoding-type=url: keys come URL-encoded, so that any byte, even
         * one XML 1.0 cannot hold, comes through (a server that ignores it
         * says no <EncodingType>: its keys are taken as XML text) */
        snprintf(query, sizeof query, "%s%s%sencoding-type=url&list-type=2&prefix=%s",
                 token[0] ? "continuation-token=" : "", token[0] ? etoken : "",
                 token[0] ? "&" : "", eprefix);
        rf_fetch_req q = {.op = RF__FETCH_MEM, .url = burl, .query = query};
        rf__fetch_submit(f, &q);
        rf__fetch_wait(f, &q);
        if (q.rc != 0) {
            snprintf(err, errcap, "source: listing %s: %s", word, q.err);
            free(q.body);
            rc = q.rc;
            break;
        }
        rc = rf__source_list_page(q.body ? q.body : "", q.body_len, word, keypat, burl, &keys,
                                  token, sizeof token, err, errcap);
        free(q.body);
    } while (rc == 0 && token[0]);
    if (rc == 0 && keys.n == 0) {
        snprintf(err, errcap, "source: pattern %s matches no objects", word);
        rc = RF_E_SOURCE;
    }
    rf__strlist_sort(&keys);
    for (size_t i = 0; rc == 0 && i < keys.n; i++)
        rc = emit(rf__strlist_at(&keys, i), ectx);
    rf__strlist_free(&keys);
    return rc;
}

/* ---- indexing ------------------------------------------------------------------ */

/* HEAD of every shard, in parallel: sizes and validators. */
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
        rf__fetch_wait(f, &q[k]);
        if (rc == 0 && q[k].rc != 0) {
            snprintf(err, errcap, "source: %s", q[k].err);
            rc = q[k].rc;
        } else if (rc == 0 && q[k].size == 0) {
            snprintf(err, errcap, "source: HEAD %s: no Content-Length (or an empty shard)",
                     q[k].url);
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
    if (rc == 0)
        s->local_off = calloc(s->nfiles, sizeof *s->local_off);
    if (rc == 0 && !s->local_off)
        rc = RF_E_NOMEM;
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
    uint8_t *kept = rc == 0 ? calloc(s->nfiles, 1) : NULL;
    if (rc == 0 && !kept)
        rc = RF_E_NOMEM;
    if (rc != 0) {
        rf__rman_free(man);
        return rc;
    }
    rf__remote_plan_room(r);
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
    for (uint32_t k = 0; rc == 0 && k < s->nfiles; k++)
        if (!kept[k] && !rf__rman_covers(man, k))
            rf__remote_acquire(r, k);
    int64_t maxlabel = -1;
    for (uint32_t k = 0; rc == 0 && k < s->nfiles; k++) {
        const char *etag;
        uint64_t size = rf__remote_shard(r, k, &etag);
        const char *url = s->arena + s->file_off[k];
        if (kept[k]) {
            rc = load_index(r, k, s, url, size, etag, okey, &maxlabel);
            if (rc == 1) {
                rc = 0;
                continue;
            }
            if (rc < 0)
                break;
            rf__remote_acquire(r, k); /* damaged: walk the shard */
        } else if (rf__rman_covers(man, k)) {
            if (rf__rman_index(man, s, k, o, &maxlabel) == 0)
                continue;
            rf__remote_acquire(r, k); /* the entry did not do: walk the shard */
        }
        if ((rc = rf__remote_wait(r, k, err, errcap)) != 0)
            break;
        int64_t from = s->n;
        /* the arena may move while the walk adds names: copy the path */
        char local[RF__CACHE_PATH + 8];
        snprintf(local, sizeof local, "%s", s->arena + s->local_off[k]);
        char name[RF__CACHE_PATH + 8];
        snprintf(name, sizeof name, "%s", url);
        rc = rf__source_tar_shard(s, k, local, name, o, NULL, &maxlabel, err, errcap);
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
