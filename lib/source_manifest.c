/*
 * source_manifest.c - reads the shard index in a ringfeed-pack manifest
 * (source_manifest.h has its layout) from bytes in memory.
 *
 * A small JSON reader of its own: the manifest may come from anywhere (a
 * copied folder, later the network), so every byte is bounds-checked, the
 * nesting of skipped values is limited, and any doubt makes the whole parse
 * fail: the caller then walks the shards' headers as for any tar, so a bad
 * manifest costs time, never a wrong index. Only what the index needs is
 * kept: "format", and per shard "name", "bytes" and "index"; other keys
 * (counts, classes, options, skipped samples) are skipped. Strings go into
 * one arena and the records into flat arrays, as the source does.
 */
#define _GNU_SOURCE
#include "source_manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ringfeed.h"
#include "source_kinds.h"

#define MAN_FORMAT "ringfeed-pack 1"
#define MAN_MAX_DEPTH 64                 /* nesting of skipped values */
#define MAN_MAX_FILE (UINT64_C(1) << 30) /* rf__manifest_read */
#define MAN_MAX_EXT 63                   /* as RF_SOURCE_MAX_EXT */

typedef struct jp {
    const char *p, *end;
    rf_manifest *m;
} jp;

/* Grows the array *a of *cap elements of size sz so that it holds n + 1. */
static int grow(void **a, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 64;
    if (c > SIZE_MAX / sz)
        return RF_E_NOMEM;
    void *p = realloc(*a, c * sz);
    if (!p)
        return RF_E_NOMEM;
    *a = p;
    *cap = c;
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

/* Appends byte c to the arena. */
static int put(jp *j, char c)
{
    rf_manifest *m = j->m;
    if (grow((void **)&m->arena, &m->arena_cap, m->arena_len, 1) != 0)
        return RF_E_NOMEM;
    m->arena[m->arena_len++] = c;
    return 0;
}

/* Appends code point u (not NUL, not a surrogate) as UTF-8. */
static int put_utf8(jp *j, unsigned u)
{
    char b[4];
    size_t n = rf__utf8(u, b);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = put(j, b[i]);
    return rc;
}

/* A string; with off, decoded into the arena (NUL-terminated) at *off.
 * -1 when malformed (or, decoded, holding a NUL), or RF_E_NOMEM. */
static int str(jp *j, uint64_t *off)
{
    if (!eat(j, '"'))
        return -1;
    if (off)
        *off = j->m->arena_len;
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p++;
        unsigned u;
        if (c < 0x20)
            return -1;
        if (c == '\\') {
            if (j->p >= j->end)
                return -1;
            char e = *j->p++;
            switch (e) {
            case '"':
            case '\\':
            case '/':
                c = (unsigned char)e;
                break;
            case 'b':
                c = '\b';
                break;
            case 'f':
                c = '\f';
                break;
            case 'n':
                c = '\n';
                break;
            case 'r':
                c = '\r';
                break;
            case 't':
                c = '\t';
                break;
            case 'u':
                if (j->end - j->p < 4 || hex4(j->p, &u) != 0)
                    return -1;
                j->p += 4;
                if (u == 0 || (u >= 0xd800 && u < 0xe000))
                    return -1; /* a NUL or a surrogate: not in a name we wrote */
                if (off) {
                    int rc = put_utf8(j, u);
                    if (rc)
                        return rc;
                }
                continue;
            default:
                return -1;
            }
        }
        if (off && put(j, (char)c) != 0)
            return RF_E_NOMEM;
    }
    if (j->p >= j->end)
        return -1;
    j->p++;
    return off ? put(j, '\0') : 0;
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
        return str(j, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->p++;
        if (eat(j, close))
            return 0;
        do {
            if (c == '{' && (str(j, NULL) != 0 || !eat(j, ':')))
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

/* One SAMPLE array of the index: [key, label, (ext, offset, size)*]. */
static int sample(jp *j)
{
    rf_manifest *m = j->m;
    if (grow((void **)&m->samples, &m->samples_cap, m->nsamples, sizeof *m->samples) != 0)
        return RF_E_NOMEM;
    rf_manifest_sample *sm = &m->samples[m->nsamples];
    int rc;
    if (!eat(j, '['))
        return -1;
    if ((rc = str(j, &sm->key)) != 0)
        return rc;
    if (!eat(j, ',') || integer(j, -1, &sm->label) != 0)
        return -1;
    sm->first = m->nmembers;
    sm->n = 0;
    while (eat(j, ',')) {
        if (grow((void **)&m->members, &m->members_cap, m->nmembers, sizeof *m->members) != 0)
            return RF_E_NOMEM;
        rf_manifest_member *mm = &m->members[m->nmembers];
        int64_t off, len;
        if ((rc = str(j, &mm->ext)) != 0)
            return rc;
        if (!eat(j, ',') || integer(j, 0, &off) != 0 || !eat(j, ',') || integer(j, 0, &len) != 0)
            return -1;
        mm->off = (uint64_t)off;
        mm->len = (uint64_t)len;
        m->nmembers++;
        sm->n++;
    }
    if (!eat(j, ']'))
        return -1;
    m->nsamples++;
    return 0;
}

/* One shard object. */
static int shard(jp *j)
{
    rf_manifest *m = j->m;
    if (grow((void **)&m->shards, &m->shards_cap, m->nshards, sizeof *m->shards) != 0)
        return RF_E_NOMEM;
    rf_manifest_shard *sh = &m->shards[m->nshards];
    memset(sh, 0, sizeof *sh);
    int have_name = 0, have_bytes = 0, rc = 0;
    if (!eat(j, '{'))
        return -1;
    if (eat(j, '}'))
        return -1;
    do {
        uint64_t k;
        size_t mark = m->arena_len;
        if ((rc = str(j, &k)) != 0 || !eat(j, ':'))
            return rc ? rc : -1;
        const char *key = m->arena + k;
        int64_t v;
        if (!strcmp(key, "name")) {
            m->arena_len = mark; /* the key is not kept */
            have_name = 1;
            rc = str(j, &sh->name);
        } else if (!strcmp(key, "bytes")) {
            m->arena_len = mark;
            have_bytes = 1;
            rc = integer(j, 0, &v);
            sh->bytes = (uint64_t)v;
        } else if (!strcmp(key, "index")) {
            m->arena_len = mark;
            if (sh->indexed || !eat(j, '['))
                return -1;
            sh->first = m->nsamples;
            sh->indexed = 1;
            if (!eat(j, ']')) {
                do
                    rc = sample(j);
                while (rc == 0 && eat(j, ','));
                if (rc == 0 && !eat(j, ']'))
                    rc = -1;
            }
            sh->n = m->nsamples - sh->first;
        } else {
            m->arena_len = mark;
            rc = skip(j, 1);
        }
        if (rc != 0)
            return rc;
    } while (eat(j, ','));
    if (!eat(j, '}') || !have_name || !have_bytes)
        return -1;
    m->nshards++;
    return 0;
}

/* A shard's index is used only when it is consistent: each member after the
 * previous one's data and a header, inside the shard, with an extension a
 * member name can end with, each label one a walk can read. */
static int shard_consistent(const rf_manifest *m, const rf_manifest_shard *sh)
{
    const char *name = m->arena + sh->name;
    if (!*name || strchr(name, '/') || sh->n == 0)
        return 0;
    uint64_t end = 0; /* where the previous member's data ended */
    for (size_t i = sh->first; i < sh->first + sh->n; i++) {
        const rf_manifest_sample *sm = &m->samples[i];
        if (!m->arena[sm->key] || sm->n == 0 || sm->label > RF_SOURCE_MAX_LABEL)
            return 0;
        for (size_t k = sm->first; k < sm->first + sm->n; k++) {
            const rf_manifest_member *mm = &m->members[k];
            size_t el = strlen(m->arena + mm->ext);
            if (el == 0 || el > MAN_MAX_EXT || strchr(m->arena + mm->ext, '/'))
                return 0;
            if (mm->off < end + 512 || mm->off > sh->bytes || mm->len > sh->bytes - mm->off)
                return 0;
            end = mm->off + mm->len;
        }
    }
    return 1;
}

/* qsort_r: the arena travels as the context (no global state). */
static int cmp_name(const void *a, const void *b, void *ctx)
{
    const rf_manifest *m = ctx;
    return strcmp(m->arena + m->shards[*(const size_t *)a].name,
                  m->arena + m->shards[*(const size_t *)b].name);
}

int rf__manifest_parse(const char *bytes, size_t n, rf_manifest *m, char *err, size_t errcap)
{
    memset(m, 0, sizeof *m);
    jp j = {bytes, bytes + n, m};
    int rc = 0, format_ok = 0;
    if (!eat(&j, '{'))
        rc = -1;
    else if (!eat(&j, '}')) {
        do {
            uint64_t k;
            size_t mark = m->arena_len;
            if ((rc = str(&j, &k)) != 0 || !eat(&j, ':')) {
                rc = rc ? rc : -1;
                break;
            }
            int is_format = !strcmp(m->arena + k, "format");
            int is_shards = !strcmp(m->arena + k, "shards");
            m->arena_len = mark; /* keys are not kept */
            if (is_format) {
                uint64_t v;
                if ((rc = str(&j, &v)) == 0)
                    format_ok = !strcmp(m->arena + v, MAN_FORMAT);
                m->arena_len = mark;
            } else if (is_shards) {
                if (!eat(&j, '['))
                    rc = -1;
                else if (!eat(&j, ']')) {
                    do
                        rc = shard(&j);
                    while (rc == 0 && eat(&j, ','));
                    if (rc == 0 && !eat(&j, ']'))
                        rc = -1;
                }
            } else {
                rc = skip(&j, 1);
            }
        } while (rc == 0 && eat(&j, ','));
        if (rc == 0 && !eat(&j, '}'))
            rc = -1;
    }
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
    for (size_t s = 0; s < m->nshards; s++) {
        m->by_name[s] = s;
        if (m->shards[s].indexed && !shard_consistent(m, &m->shards[s]))
            m->shards[s].indexed = 0;
    }
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
    int rc = got == n ? rf__manifest_parse(buf, n, m, err, errcap) : RF_E_SOURCE;
    if (got != n)
        snprintf(err, errcap, "manifest: %s: short read", path);
    free(buf);
    return rc;
}

void rf__manifest_free(rf_manifest *m)
{
    if (!m)
        return;
    free(m->arena);
    free(m->shards);
    free(m->samples);
    free(m->members);
    free(m->by_name);
    memset(m, 0, sizeof *m);
}

const rf_manifest_shard *rf__manifest_find(const rf_manifest *m, const char *name, uint64_t bytes)
{
    size_t lo = 0, hi = m->nshards;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const rf_manifest_shard *sh = &m->shards[m->by_name[mid]];
        int c = strcmp(m->arena + sh->name, name);
        if (c == 0)
            return sh->indexed && sh->bytes == bytes ? sh : NULL;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
