/*
 * manifest.c - reads the shard index in a ringfeed-pack manifest
 * (manifest.h has its layout) from bytes in memory.
 *
 * A small JSON reader of its own: the manifest may come from anywhere (a
 * copied folder, the network), so every byte is bounds-checked, the
 * nesting of skipped values is limited, and any doubt makes the whole parse
 * fail: the caller then walks the shards' headers as for any tar, so a bad
 * manifest costs time, never a wrong index. Only what the index needs is
 * kept: "format", and per shard "name", "bytes" and where its "index" and
 * "sizes" lie; other keys (counts, classes, options, digests, skipped samples) are
 * skipped.
 *
 * Memory: the parse reads every sample (syntax, consistency, first and last
 * member) but keeps none; the iterator reads a shard's samples from the
 * same bytes again when the shard is indexed, decoding one key and one
 * extension at a time into a small buffer. A manifest held in memory costs
 * its bytes plus a few hundred bytes per shard (test_manifest_memory.c
 * counts it: under 1.1 times its size), where flat arrays of all samples
 * and members cost some 2 to 3 times the text again while they grew.
 */
#define _GNU_SOURCE
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kinds.h"
#include "ringfeed.h"
#include "source.h"

#define MAN_FORMAT "ringfeed-pack 1"
#define MAN_MAX_DEPTH 64                 /* nesting of skipped values */
#define MAN_MAX_FILE (UINT64_C(1) << 30) /* rf__manifest_read */

typedef struct jp {
    const char *p, *end;
} jp;

/* Grows the array *a of *cap elements of size sz so that it holds want. */
static int grow(void **a, size_t *cap, size_t want, size_t sz)
{
    if (want <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < want)
        c = c > SIZE_MAX / 2 ? want : c * 2;
    if (c > SIZE_MAX / sz)
        return RF_E_NOMEM;
    void *p = realloc(*a, c * sz);
    if (!p)
        return RF_E_NOMEM;
    *a = p;
    *cap = c;
    return 0;
}

/* Appends src[0..n) to the growable string *b (*len used, *cap allocated). */
static int append(char **b, size_t *len, size_t *cap, const char *src, size_t n)
{
    if (grow((void **)b, cap, *len + n, 1) != 0)
        return RF_E_NOMEM;
    memcpy(*b + *len, src, n);
    *len += n;
    return 0;
}

static void ws(jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

/* Consumes c (after blanks); 1 when it was there. */
static int eat(jp *j, char c)
{
    ws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return 1;
    }
    return 0;
}

static int hex4(const char *p, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        *v = *v * 16 + (unsigned)d;
    }
    return 0;
}

/* One escape after its backslash, decoded into out (4 bytes of room): its
 * length, or 0 when malformed (a NUL or a surrogate: not in a name we
 * wrote). */
static size_t escape(jp *j, char *out)
{
    if (j->p >= j->end)
        return 0;
    char e = *j->p++;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *at = e ? strchr(from, e) : NULL;
    if (at) {
        out[0] = to[at - from];
        return 1;
    }
    unsigned u;
    if (e != 'u' || j->end - j->p < 4 || hex4(j->p, &u) != 0)
        return 0;
    j->p += 4;
    return rf__utf8(u, out);
}

/* A string; with b, decoded and NUL-terminated onto the end of the
 * growable string *b. -1 when malformed (or holding a NUL), or RF_E_NOMEM. */
static int str(jp *j, char **b, size_t *len, size_t *cap)
{
    if (!eat(j, '"'))
        return -1;
    for (;;) {
        const char *s = j->p; /* a run of plain bytes, copied at once */
        while (j->p < j->end && *j->p != '"' && *j->p != '\\' && (unsigned char)*j->p >= 0x20)
            j->p++;
        if (b && j->p > s && append(b, len, cap, s, (size_t)(j->p - s)) != 0)
            return RF_E_NOMEM;
        if (j->p >= j->end || (unsigned char)*j->p < 0x20)
            return -1;
        if (*j->p++ == '"')
            break;
        char u[4];
        size_t n = escape(j, u);
        if (n == 0)
            return -1;
        if (b && append(b, len, cap, u, n) != 0)
            return RF_E_NOMEM;
    }
    return b ? append(b, len, cap, "", 1) : 0;
}

/* An integer in [lo, INT64_MAX]. -1 when malformed or out of range. */
static int integer(jp *j, int64_t lo, int64_t *v)
{
    ws(j);
    int neg = j->p < j->end && *j->p == '-';
    if (neg)
        j->p++;
    const char *d = j->p;
    uint64_t x = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (x > (UINT64_MAX - 9) / 10)
            return -1;
        x = x * 10 + (uint64_t)(*j->p++ - '0');
    }
    if (j->p == d || x > (uint64_t)INT64_MAX ||
        (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E')))
        return -1;
    *v = neg ? -(int64_t)x : (int64_t)x;
    return *v < lo ? -1 : 0;
}

/* Any value, not kept. */
static int skip(jp *j, int depth)
{
    ws(j);
    if (j->p >= j->end || depth > MAN_MAX_DEPTH)
        return -1;
    char c = *j->p;
    if (c == '"')
        return str(j, NULL, NULL, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->p++;
        if (eat(j, close))
            return 0;
        do {
            if (c == '{' && (str(j, NULL, NULL, NULL) != 0 || !eat(j, ':')))
                return -1;
            if (skip(j, depth + 1) != 0)
                return -1;
        } while (eat(j, ','));
        return eat(j, close) ? 0 : -1;
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++) {
        size_t n = strlen(words[w]);
        if ((size_t)(j->end - j->p) >= n && !memcmp(j->p, words[w], n)) {
            j->p += n;
            return 0;
        }
    }
    /* a number: -?digits(.digits)?([eE][+-]?digits)? */
    const char *s = j->p;
    if (j->p < j->end && *j->p == '-')
        j->p++;
    size_t digits = 0;
    for (; j->p < j->end; j->p++) {
        char d = *j->p;
        if (d >= '0' && d <= '9')
            digits++;
        else if (!(d == '.' || d == 'e' || d == 'E' ||
                   ((d == '+' || d == '-') && j->p > s && (j->p[-1] == 'e' || j->p[-1] == 'E'))))
            break;
    }
    return digits ? 0 : -1;
}

/* ---- one shard's samples, read from the bytes ------------------------------ */

enum { IT_BEFORE, IT_BETWEEN, IT_SAMPLE, IT_AFTER, IT_BROKEN };

void rf__manifest_iter(rf_manifest_iter *it, const rf_manifest *m, const rf_manifest_shard *ms)
{
    memset(it, 0, sizeof *it);
    it->p = m->text + ms->at;
    it->end = m->text + ms->stop;
}

/* An iterator at the "index" array that starts at p (the parse's own). */
static void iter_at(rf_manifest_iter *it, const char *p, const char *end)
{
    memset(it, 0, sizeof *it);
    it->p = p;
    it->end = end;
}

static int broken(rf_manifest_iter *it, int rc)
{
    it->state = IT_BROKEN;
    return rc;
}

int rf__manifest_sample(rf_manifest_iter *it)
{
    int rc;
    while (it->state == IT_SAMPLE) /* the rest of the sample before */
        if ((rc = rf__manifest_member(it)) < 0)
            return rc;
    jp j = {it->p, it->end};
    if (it->state == IT_AFTER)
        return 0;
    if (it->state == IT_BROKEN || (it->state == IT_BEFORE && !eat(&j, '[')))
        return broken(it, -1);
    if (eat(&j, ']')) {
        it->state = IT_AFTER;
        it->p = j.p;
        return 0;
    }
    if ((it->state == IT_BETWEEN && !eat(&j, ',')) || !eat(&j, '['))
        return broken(it, -1);
    size_t len = 0;
    if ((rc = str(&j, &it->buf, &len, &it->cap)) != 0)
        return broken(it, rc);
    it->key_len = len - 1;
    if (!eat(&j, ',') || integer(&j, -1, &it->label) != 0)
        return broken(it, -1);
    it->key = it->buf;
    it->ext = NULL;
    it->state = IT_SAMPLE;
    it->p = j.p;
    return 1;
}

int rf__manifest_member(rf_manifest_iter *it)
{
    if (it->state == IT_BROKEN)
        return -1;
    if (it->state != IT_SAMPLE)
        return 0;
    jp j = {it->p, it->end};
    if (eat(&j, ']')) {
        it->state = IT_BETWEEN;
        it->p = j.p;
        return 0;
    }
    if (!eat(&j, ','))
        return broken(it, -1);
    size_t len = it->key_len + 1; /* after the key and its NUL */
    int rc = str(&j, &it->buf, &len, &it->cap);
    if (rc != 0)
        return broken(it, rc);
    int64_t off, n;
    if (!eat(&j, ',') || integer(&j, 0, &off) != 0 || !eat(&j, ',') || integer(&j, 0, &n) != 0)
        return broken(it, -1);
    it->key = it->buf; /* the buffer may have moved */
    it->ext = it->buf + it->key_len + 1;
    it->off = (uint64_t)off;
    it->len = (uint64_t)n;
    it->p = j.p;
    return 1;
}

void rf__manifest_iter_free(rf_manifest_iter *it)
{
    free(it->buf);
    it->buf = NULL;
    it->cap = 0;
}

/* ---- the parse ----------------------------------------------------------- */

/* The member the iterator is at, as an end of the shard (its strings into
 * the arena). */
static int keep_end(rf_manifest *m, const rf_manifest_iter *it, rf_manifest_end *e)
{
    e->key = m->arena_len;
    if (append(&m->arena, &m->arena_len, &m->arena_cap, it->key, strlen(it->key) + 1) != 0)
        return RF_E_NOMEM;
    e->ext = m->arena_len;
    if (append(&m->arena, &m->arena_len, &m->arena_cap, it->ext, strlen(it->ext) + 1) != 0)
        return RF_E_NOMEM;
    e->off = it->off;
    e->len = it->len;
    return 0;
}

/* The shard's "index" array at j: read through (j moves past it), where it
 * lies and its ends kept, and whether it is consistent: samples with a key
 * and members, labels a tar walk can give (-1 .. RF_SOURCE_MAX_LABEL), each
 * member after the previous one's data and a header, with an extension a
 * member name can end with. *last: where the last member's data ends (the
 * shard's size is checked against it once known). */
static int index_read(jp *j, rf_manifest *m, rf_manifest_shard *sh, uint64_t *last)
{
    ws(j);
    sh->at = (size_t)(j->p - m->text);
    rf_manifest_iter it;
    iter_at(&it, j->p, j->end);
    int ok = 1, rc;
    uint64_t end = 0; /* where the previous member's data ended */
    size_t samples = 0, members = 0;
    while ((rc = rf__manifest_sample(&it)) == 1) {
        samples++;
        size_t before = members;
        if (!it.key[0] || it.label > RF_SOURCE_MAX_LABEL)
            ok = 0;
        while ((rc = rf__manifest_member(&it)) == 1) {
            size_t el = strlen(it.ext);
            if (el == 0 || el > RF_SOURCE_MAX_EXT || strchr(it.ext, '/') || it.off < end ||
                it.off - end < 512)
                ok = 0;
            if (members++ == 0 && (rc = keep_end(m, &it, &sh->ends[0])) != 0)
                break;
            end = it.off + it.len; /* both at most INT64_MAX: no wrap */
        }
        if (rc < 0)
            break;
        if (members == before)
            ok = 0;
    }
    /* after the loop the iterator still holds the last sample's key and its
     * last member */
    if (rc == 0 && ok && members > 0)
        rc = keep_end(m, &it, &sh->ends[1]);
    rf__manifest_iter_free(&it);
    j->p = it.p;
    sh->stop = (size_t)(j->p - m->text);
    sh->indexed = rc == 0 && ok && members > 0;
    sh->samples = samples;
    *last = end;
    return rc;
}

/* The shard's "sizes" array at j: read through; where it lies when it is
 * integers from 0 to 2^31 - 1 (their count is checked against the index's
 * samples once both are read). 0, or -1 when it is not JSON. */
static int sizes_read(jp *j, rf_manifest *m, rf_manifest_shard *sh, size_t *count)
{
    ws(j);
    const char *at = j->p;
    int ok = 1;
    *count = 0;
    if (!eat(j, '['))
        return skip(j, 1);
    if (!eat(j, ']')) {
        do {
            int64_t v;
            ws(j);
            if (j->p < j->end && (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))) {
                if (integer(j, INT64_MIN, &v) != 0)
                    return -1;
                ok &= v >= 0 && v <= INT32_MAX;
                (*count)++;
            } else if (skip(j, 2) == 0) {
                ok = 0; /* JSON, not a size: unusable */
            } else {
                return -1;
            }
        } while (eat(j, ','));
        if (!eat(j, ']'))
            return -1;
    }
    if (ok) {
        sh->sizes_at = (size_t)(at - m->text);
        sh->sizes_stop = (size_t)(j->p - m->text);
    }
    return 0;
}

int rf__manifest_sizes(const rf_manifest *m, const rf_manifest_shard *ms, uint32_t *dims,
                       size_t n)
{
    if (ms->sizes_stop == 0 || ms->samples != n)
        return -1;
    jp j = {m->text + ms->sizes_at, m->text + ms->sizes_stop};
    if (!eat(&j, '['))
        return -1;
    for (size_t i = 0; i < 2 * n; i++) {
        int64_t v;
        if ((i > 0 && !eat(&j, ',')) || integer(&j, 0, &v) != 0 || v > INT32_MAX)
            return -1;
        dims[i] = (uint32_t)v;
    }
    return eat(&j, ']') ? 0 : -1;
}

/* One shard object. */
static int shard(jp *j, rf_manifest *m, char **key, size_t *kcap)
{
    if (grow((void **)&m->shards, &m->shards_cap, m->nshards + 1, sizeof *m->shards) != 0)
        return RF_E_NOMEM;
    rf_manifest_shard *sh = &m->shards[m->nshards];
    memset(sh, 0, sizeof *sh);
    int have_name = 0, have_bytes = 0, have_index = 0, have_sizes = 0, rc = 0;
    uint64_t last = 0;
    size_t nsizes = 0;
    if (!eat(j, '{') || eat(j, '}'))
        return -1;
    do {
        size_t klen = 0;
        if ((rc = str(j, key, &klen, kcap)) != 0 || !eat(j, ':'))
            return rc ? rc : -1;
        int64_t v;
        if (!strcmp(*key, "name")) {
            have_name = 1;
            sh->name = m->arena_len;
            rc = str(j, &m->arena, &m->arena_len, &m->arena_cap);
        } else if (!strcmp(*key, "bytes")) {
            have_bytes = 1;
            rc = integer(j, 0, &v);
            sh->bytes = (uint64_t)v;
        } else if (!strcmp(*key, "index")) {
            if (have_index)
                return -1;
            have_index = 1;
            rc = index_read(j, m, sh, &last);
        } else if (!strcmp(*key, "sizes")) {
            if (have_sizes)
                return -1;
            have_sizes = 1;
            rc = sizes_read(j, m, sh, &nsizes);
        } else {
            rc = skip(j, 1);
        }
        if (rc != 0)
            return rc;
    } while (eat(j, ','));
    if (!eat(j, '}') || !have_name || !have_bytes)
        return -1;
    const char *name = m->arena + sh->name;
    if (!*name || strchr(name, '/') || last > sh->bytes)
        sh->indexed = 0;
    if (!sh->indexed || nsizes != 2 * sh->samples) /* sizes for every sample, or none */
        sh->sizes_at = sh->sizes_stop = 0;
    m->nshards++;
    return 0;
}

/* qsort_r: the arena travels as the context (no global state). */
static int cmp_name(const void *a, const void *b, void *ctx)
{
    const rf_manifest *m = ctx;
    return strcmp(m->arena + m->shards[*(const size_t *)a].name,
                  m->arena + m->shards[*(const size_t *)b].name);
}

/* The top-level object's members: 0, -1 (malformed) or RF_E_NOMEM. */
static int top(jp *j, rf_manifest *m, int *format_ok)
{
    char *key = NULL;
    size_t kcap = 0;
    int rc = 0;
    if (!eat(j, '{'))
        return -1;
    if (!eat(j, '}')) {
        do {
            size_t klen = 0;
            if ((rc = str(j, &key, &klen, &kcap)) != 0 || !eat(j, ':')) {
                rc = rc ? rc : -1;
                break;
            }
            if (!strcmp(key, "format")) {
                klen = 0;
                if ((rc = str(j, &key, &klen, &kcap)) == 0)
                    *format_ok = !strcmp(key, MAN_FORMAT);
            } else if (!strcmp(key, "shards")) {
                if (!eat(j, '['))
                    rc = -1;
                else if (!eat(j, ']')) {
                    do
                        rc = shard(j, m, &key, &kcap);
                    while (rc == 0 && eat(j, ','));
                    if (rc == 0 && !eat(j, ']'))
                        rc = -1;
                }
            } else {
                rc = skip(j, 1);
            }
        } while (rc == 0 && eat(j, ','));
        if (rc == 0 && !eat(j, '}'))
            rc = -1;
    }
    free(key);
    return rc;
}

int rf__manifest_parse(const char *bytes, size_t n, rf_manifest *m, char *err, size_t errcap)
{
    memset(m, 0, sizeof *m);
    m->text = bytes;
    m->text_len = n;
    jp j = {bytes, bytes + n};
    int format_ok = 0, rc = top(&j, m, &format_ok);
    ws(&j);
    if (rc == 0 && j.p != j.end)
        rc = -1; /* bytes after the object */
    if (rc == 0 && !format_ok) {
        snprintf(err, errcap, "manifest: not a ringfeed-pack manifest (\"format\": \"%s\")",
                 MAN_FORMAT);
        return RF_E_SOURCE;
    }
    if (rc == RF_E_NOMEM) {
        snprintf(err, errcap, "manifest: out of memory");
        return rc;
    }
    if (rc != 0) {
        snprintf(err, errcap, "manifest: malformed JSON near byte %zu", (size_t)(j.p - bytes));
        return RF_E_SOURCE;
    }
    if (m->nshards && !(m->by_name = malloc(m->nshards * sizeof *m->by_name))) {
        snprintf(err, errcap, "manifest: out of memory");
        return RF_E_NOMEM;
    }
    for (size_t s = 0; s < m->nshards; s++)
        m->by_name[s] = s;
    if (m->nshards > 1)
        qsort_r(m->by_name, m->nshards, sizeof *m->by_name, cmp_name, m);
    /* a name listed twice says nothing certain about either */
    for (size_t s = 1; s < m->nshards; s++)
        if (cmp_name(&m->by_name[s - 1], &m->by_name[s], m) == 0)
            m->shards[m->by_name[s - 1]].indexed = m->shards[m->by_name[s]].indexed = 0;
    return 0;
}

int rf__manifest_read(const char *path, rf_manifest *m, char *err, size_t errcap)
{
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size > MAN_MAX_FILE) {
        snprintf(err, errcap, "manifest: %s: %s", path,
                 fd < 0 ? strerror(errno) : "not a regular file of at most 1 GiB");
        if (fd >= 0)
            close(fd);
        return RF_E_SOURCE;
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *buf = malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        snprintf(err, errcap, "manifest: out of memory");
        return RF_E_NOMEM;
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        free(buf);
        snprintf(err, errcap, "manifest: %s: short read", path);
        return RF_E_SOURCE;
    }
    int rc = rf__manifest_parse(buf, n, m, err, errcap);
    m->owned = buf; /* the manifest reads its samples from it: freed with it */
    return rc;
}

void rf__manifest_free(rf_manifest *m)
{
    if (!m)
        return;
    free(m->owned);
    free(m->arena);
    free(m->shards);
    free(m->by_name);
    memset(m, 0, sizeof *m);
}

const rf_manifest_shard *rf__manifest_named(const rf_manifest *m, const char *name)
{
    size_t lo = 0, hi = m->nshards;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const rf_manifest_shard *sh = &m->shards[m->by_name[mid]];
        int c = strcmp(m->arena + sh->name, name);
        if (c == 0)
            return sh;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const rf_manifest_shard *rf__manifest_find(const rf_manifest *m, const char *name, uint64_t bytes)
{
    const rf_manifest_shard *sh = rf__manifest_named(m, name);
    return sh && sh->indexed && sh->bytes == bytes ? sh : NULL;
}
