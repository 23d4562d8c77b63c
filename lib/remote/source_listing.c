/*
 * source_listing.c - globs over s3://: ListObjectsV2 from the prefix before
 * the first glob character, every page, keys asked URL-encoded so that any
 * byte comes through (XML's entities and numeric references are decoded
 * too, for a server that sends keys as XML text), kept when fnmatch
 * accepts them ('/' matched only by '/'), sorted. http(s):// cannot be
 * listed: a glob there is an error that says to use a brace pattern.
 *
 * A page is server bytes: every search in it is bounded by the element it
 * is in (a <Contents> without a <Key> costs its own bytes, not the rest of
 * the page's), so that a page is parsed in time linear in its size; the
 * listing as a whole is bounded by the caps of source_listing.h.
 */
#define _GNU_SOURCE
#include "source_listing.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote.h"
#include "ringfeed.h"
#include "source_remote.h" /* rf__source_glob_remote, rf__source_xml_text */

/* ---- one page ------------------------------------------------------------------ */

/* The first needle in [p, end), or NULL; the bytes searched count in
 * *scanned. A plain loop (a needle is a few bytes, its first byte a '<'):
 * memmem's whole-range check under ASan would make the loop over a page's
 * entries quadratic there, and memchr at every '<' is slow under TSan,
 * which intercepts each call. */
static const char *find(const char *p, const char *end, const char *needle, uint64_t *scanned)
{
    if (!p || p >= end)
        return NULL;
    size_t n = strlen(needle);
    for (const char *at = p; (size_t)(end - at) >= n; at++) {
        if (*at != needle[0])
            continue;
        size_t i = 1;
        while (i < n && at[i] == needle[i])
            i++;
        if (i == n) {
            *scanned += (uint64_t)(at - p) + n;
            return at;
        }
    }
    *scanned += (uint64_t)(end - p);
    return NULL;
}

/* find for a search made once per page: memmem (whose check under ASan
 * covers the whole range, once), faster than find's stop at each '<'
 * (slow under TSan, where each memchr is intercepted). */
static const char *find_once(const char *p, const char *end, const char *needle, uint64_t *scanned)
{
    if (!p || p >= end)
        return NULL;
    size_t n = strlen(needle);
    const char *at = memmem(p, (size_t)(end - p), needle, n);
    *scanned += at ? (uint64_t)(at - p) + n : (uint64_t)(end - p);
    return at;
}

/* The text of the first <tag>...</tag> in [p, end): *a its start, the
 * return its end ("</tag>"), or NULL. once: a search made once per page
 * (find_once), else one of many over a small range (find). */
static const char *span(const char *p, const char *end, const char *tag, const char **a, int once,
                        uint64_t *scanned)
{
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *o = once ? find_once(p, end, open, scanned) : find(p, end, open, scanned);
    if (!o)
        return NULL;
    *a = o + strlen(open);
    return once ? find_once(*a, end, close, scanned) : find(*a, end, close, scanned);
}

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

/* The text [a, b) decoded into out (see rf__source_xml_text). */
static void xml_decode(const char *a, const char *b, char *out, size_t cap)
{
    static const char *const ent[][2] = {
        {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}};
    size_t n = 0;
    if (cap == 0)
        return;
    while (a < b && n + 4 < cap) { /* room for one UTF-8 character and the NUL */
        size_t e = 0, k;
        while (e < 5 &&
               ((size_t)(b - a) < strlen(ent[e][0]) || strncmp(a, ent[e][0], strlen(ent[e][0]))))
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
}

const char *rf__source_xml_text(const char *p, const char *end, const char *tag, char *out,
                                size_t cap)
{
    uint64_t scanned = 0;
    const char *a, *b = span(p, end, tag, &a, 1, &scanned);
    if (!b)
        return NULL;
    xml_decode(a, b, out, cap);
    return b + strlen(tag) + 3;
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
            if (!isxdigit((unsigned char)hx[0]) || !isxdigit((unsigned char)hx[1]) || *e || c == 0)
                return -1;
            *o++ = (char)c;
            s += 2;
        }
    }
    *o = '\0';
    return 0;
}

int rf__source_list_page(const char *body, size_t len, rf_list_page *pg,
                         int (*key)(const char *k, void *ctx), void *ctx, char *err, size_t errcap)
{
    const char *p = body, *end = body + len, *a, *b;
    /* key: room for a key of 1024 bytes (S3's most) with every byte as %XX */
    char enc[16] = "", trunc[16] = "", k[4096];
    pg->scanned = 0;
    if ((b = span(p, end, "EncodingType", &a, 1, &pg->scanned)) != NULL)
        xml_decode(a, b, enc, sizeof enc);
    pg->url_encoded = !strcmp(enc, "url");
    if ((b = span(p, end, "IsTruncated", &a, 1, &pg->scanned)) != NULL)
        xml_decode(a, b, trunc, sizeof trunc);
    pg->truncated = !strcmp(trunc, "true");
    pg->token[0] = '\0';
    pg->token_long = 0;
    if ((b = span(p, end, "NextContinuationToken", &a, 1, &pg->scanned)) != NULL) {
        pg->token_long = (size_t)(b - a) >= sizeof pg->token - 4;
        xml_decode(a, b, pg->token, sizeof pg->token);
    }
    int rc = 0;
    const char *c;
    while (rc == 0 && (c = find(p, end, "<Contents>", &pg->scanned)) != NULL) {
        const char *ce = find(c, end, "</Contents>", &pg->scanned);
        if (!ce)
            break;
        /* the key's search ends with its entry */
        if ((b = span(c, ce, "Key", &a, 0, &pg->scanned)) != NULL) {
            xml_decode(a, b, k, sizeof k);
            if (pg->url_encoded && url_decode(k) != 0) {
                snprintf(err, errcap, "key %.300s is not URL-encoded right", k);
                rc = RF_E_SOURCE;
            } else {
                rc = key(k, ctx);
            }
        }
        p = ce + strlen("</Contents>");
    }
    return rc;
}

/* ---- the listing ----------------------------------------------------------------- */

/* The tokens a listing was sent, as 64-bit hashes in an open-addressing
 * table (a repeat ends the listing: see source_listing.h). */
typedef struct token_set {
    uint64_t *h;
    size_t n, cap; /* cap: a power of two, at least twice n */
} token_set;

/* 1 when t was in the set (it is now), 0 when new, RF_E_NOMEM. FNV-1a: two
 * different tokens of a listing that collide (one chance in 2^64 a pair)
 * end it early, with the message saying a token repeated. */
static int token_seen(token_set *s, const char *t)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)t; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    h |= 1; /* 0 marks a free slot */
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        uint64_t *nh = calloc(cap, sizeof *nh);
        if (!nh)
            return RF_E_NOMEM;
        for (size_t i = 0; i < s->cap; i++)
            for (size_t j = s->h[i] & (cap - 1); s->h[i]; j = (j + 1) & (cap - 1))
                if (!nh[j]) {
                    nh[j] = s->h[i];
                    break;
                }
        free(s->h);
        s->h = nh;
        s->cap = cap;
    }
    size_t j = h & (s->cap - 1);
    for (; s->h[j]; j = (j + 1) & (s->cap - 1))
        if (s->h[j] == h)
            return 1;
    s->h[j] = h;
    s->n++;
    return 0;
}

typedef struct list_ctx {
    const char *pattern, *burl;
    rf_strlist *out;
    uint64_t kept, max_keys;
} list_ctx;

static int keep_key(const char *k, void *vctx)
{
    list_ctx *x = vctx;
    if (fnmatch(x->pattern, k, FNM_PATHNAME) != 0)
        return 0;
    if (++x->kept > x->max_keys)
        return 1; /* the caller names the cap */
    return rf__strlist_add(x->out, x->burl, k);
}

int rf__source_list_s3(rf_fetch *f, const char *word, const rf_list_caps *caps, rf_strlist *out,
                       char *err, size_t errcap)
{
    const rf_list_caps dflt = {RF__LIST_MAX_PAGES, RF__LIST_MAX_KEYS};
    if (!caps)
        caps = &dflt;
    const char *bucket = word + 5, *slash = strchr(bucket, '/');
    if (strncmp(word, "s3://", 5) != 0 || !slash) {
        snprintf(err, errcap, "source: %s: no key after the bucket", word);
        return RF_E_SOURCE;
    }
    const char *keypat = slash + 1;
    size_t plen = strcspn(keypat, "*?[");
    char prefix[2048], eprefix[6200], etoken[6200], query[12600], burl[600];
    snprintf(prefix, sizeof prefix, "%.*s", (int)plen, keypat);
    snprintf(burl, sizeof burl, "s3://%.*s", (int)(slash - bucket), bucket);
    if (plen >= sizeof prefix || (size_t)(slash - bucket) > 500 ||
        rf__fetch_uri_encode(eprefix, sizeof eprefix, prefix, 0) != 0) {
        snprintf(err, errcap, "source: %s: pattern too long", word);
        return RF_E_SOURCE;
    }
    list_ctx x = {keypat, burl, out, 0, caps->max_keys};
    token_set seen = {0};
    rf_list_page *pg = calloc(1, sizeof *pg); /* the token it holds is the next page's */
    if (!pg)
        return RF_E_NOMEM;
    int rc = 0;
    for (uint64_t page = 0; rc == 0; page++) {
        if (page >= caps->max_pages) {
            snprintf(err, errcap,
                     "source: listing %s: more than %llu pages, the most a listing may have "
                     "(narrow the prefix before the first glob character)",
                     word, (unsigned long long)caps->max_pages);
            rc = RF_E_SOURCE;
            break;
        }
        rf__fetch_uri_encode(etoken, sizeof etoken, pg->token, 0);
        /* the parameters in sorted order: the canonical query SigV4 signs.
         * encoding-type=url: keys come URL-encoded, so that any byte, even
         * one XML 1.0 cannot hold, comes through (a server that ignores it
         * says no <EncodingType>: its keys are taken as XML text) */
        snprintf(query, sizeof query, "%s%s%sencoding-type=url&list-type=2&prefix=%s",
                 pg->token[0] ? "continuation-token=" : "", pg->token[0] ? etoken : "",
                 pg->token[0] ? "&" : "", eprefix);
        rf_fetch_req q = {.op = RF__FETCH_MEM, .url = burl, .query = query};
        rf__fetch_submit(f, &q);
        if (rf__fetch_wait(f, &q) != 0) { /* cancelled: the fetch thread let q go */
            snprintf(err, errcap, "source: listing %s: stopped", word);
            free(q.body);
            rc = RF_E_STOPPED;
            break;
        }
        if (q.rc != 0) {
            snprintf(err, errcap, "source: listing %s: %s", word, q.err);
            free(q.body);
            rc = q.rc;
            break;
        }
        char why[400] = "";
        rc = rf__source_list_page(q.body ? q.body : "", q.body_len, pg, keep_key, &x, why,
                                  sizeof why);
        free(q.body);
        if (rc == 1) {
            snprintf(err, errcap,
                     "source: listing %s: more than %llu keys match, the most a pattern may "
                     "expand to",
                     word, (unsigned long long)caps->max_keys);
            rc = RF_E_SOURCE;
        } else if (rc == RF_E_SOURCE) {
            snprintf(err, errcap, "source: listing %s: %s", word, why);
        } else if (rc == 0 && pg->truncated && !pg->token[0]) {
            snprintf(err, errcap,
                     "source: listing %s: a truncated page without a continuation token (the "
                     "listing cannot go on)",
                     word);
            rc = RF_E_SOURCE;
        } else if (rc == 0 && pg->truncated && pg->token_long) {
            snprintf(err, errcap,
                     "source: listing %s: a continuation token of more than %d bytes, the most "
                     "one may have",
                     word, RF__LIST_TOKEN - 5);
            rc = RF_E_SOURCE;
        } else if (rc == 0 && pg->truncated && (rc = token_seen(&seen, pg->token)) == 1) {
            snprintf(err, errcap,
                     "source: listing %s: page %llu sent a continuation token sent before (the "
                     "listing would go round in a circle)",
                     word, (unsigned long long)page + 1);
            rc = RF_E_SOURCE;
        }
        if (!pg->truncated)
            break;
    }
    free(seen.h);
    free(pg);
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
    rf_strlist keys = {0};
    int rc = rf__source_list_s3(rf__remote_fetcher(gctx), word, NULL, &keys, err, errcap);
    if (rc == RF_E_STOPPED)
        rf__remote_cancelled(gctx, err, errcap); /* the loader's own words for it */
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
