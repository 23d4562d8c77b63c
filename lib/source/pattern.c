/*
 * pattern.c - the files a spec names: '\n'-separated entries, each an
 * existing path or a shard pattern.
 *
 * Patterns expand as bash does, left to right: "{0000..0099}" (zero-padded
 * when an end is, optional "..STEP"), "{a,b}" (nested braces allowed; "{a}"
 * and unbalanced braces stay literal); then each result holding '*', '?' or
 * '[' (before an http(s) URL's query, which is no pattern) is globbed, its
 * matches sorted by byte value whatever the locale. One
 * pattern may name at most RF_MAX_EXPANSION paths, so that a typo such as
 * "{0..999999999}" fails instead of filling memory.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <ctype.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kinds.h"
#include "redact.h"
#include "ringfeed.h"

#define RF_MAX_EXPANSION (1 << 20) /* paths one pattern may expand to */

typedef struct expand_ctx {
    int (*fn)(const char *path, void *ctx);
    void *ctx;
    rf_source_glob_fn *glob; /* NULL: the local file system's */
    void *gctx;
    const char *pattern;
    int64_t count;
    char *err;
    size_t errcap;
} expand_ctx;

/* An http(s) URL's query ("?X-Amz-Signature=...", "?token=") is part of
 * the object's name, never a pattern: only what comes before it is looked
 * at. */
static int has_glob_chars(const char *p)
{
    size_t n = rf__url_name_len(p);
    return strcspn(p, "*?[") < n;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int emit(expand_ctx *x, const char *path)
{
    if (++x->count > RF_MAX_EXPANSION) {
        snprintf(x->err, x->errcap, "source: pattern %s expands to more than %d paths", x->pattern,
                 RF_MAX_EXPANSION);
        return RF_E_SOURCE;
    }
    return x->fn(path, x->ctx);
}

/* A brace-free word: itself, or its glob matches in byte order. */
static int emit_cb(const char *path, void *ctx)
{
    return emit(ctx, path);
}

static int expand_glob(expand_ctx *x, const char *word)
{
    if (!has_glob_chars(word))
        return emit(x, word);
    if (x->glob)
        return x->glob(x->gctx, word, emit_cb, x, x->err, x->errcap);
    glob_t g;
    memset(&g, 0, sizeof g);
    int grc = glob(word, GLOB_NOSORT | GLOB_ERR, NULL, &g);
    if (grc == GLOB_NOMATCH) {
        globfree(&g);
        snprintf(x->err, x->errcap, "source: pattern %s matches no files", word);
        return RF_E_SOURCE;
    }
    if (grc != 0) {
        globfree(&g);
        snprintf(x->err, x->errcap, "source: pattern %s: %s", word,
                 grc == GLOB_NOSPACE ? "out of memory" : "read error");
        return grc == GLOB_NOSPACE ? RF_E_NOMEM : RF_E_SOURCE;
    }
    /* glob sorts with strcoll; the order must not depend on the locale. */
    qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, cmp_str);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
        rc = emit(x, g.gl_pathv[i]);
    globfree(&g);
    return rc;
}

/* One integer of a range at *pp (optional sign, 1..18 digits). */
static int parse_int(const char **pp, const char *e, long long *v, int *len, int *zero_padded)
{
    const char *p = *pp, *q = p;
    if (q < e && (*q == '-' || *q == '+'))
        q++;
    const char *digits = q;
    while (q < e && isdigit((unsigned char)*q))
        q++;
    if (q == digits || q - digits > 18)
        return 0;
    char num[24];
    memcpy(num, p, (size_t)(q - p));
    num[q - p] = '\0';
    *v = strtoll(num, NULL, 10);
    *len = (int)(q - p);
    *zero_padded = q - digits > 1 && digits[0] == '0';
    *pp = q;
    return 1;
}

static int parse_dots(const char **pp, const char *e)
{
    if (e - *pp < 2 || (*pp)[0] != '.' || (*pp)[1] != '.')
        return 0;
    *pp += 2;
    return 1;
}

/* Parses the brace body [b, e) as "A..B" or "A..B..STEP" (integers). As
 * bash, the numbers are zero-padded to the wider end when an end is. */
static int parse_range(const char *b, const char *e, long long *lo, long long *hi, long long *step,
                       int *width)
{
    const char *p = b;
    int l1, l2, l3, z1, z2, z3;
    *step = 1;
    if (!parse_int(&p, e, lo, &l1, &z1) || !parse_dots(&p, e) || !parse_int(&p, e, hi, &l2, &z2))
        return 0;
    if (p < e && (!parse_dots(&p, e) || !parse_int(&p, e, step, &l3, &z3)))
        return 0;
    if (p != e)
        return 0;
    if (*step < 0)
        *step = -*step;
    if (*step == 0)
        *step = 1;
    *width = z1 || z2 ? (l1 > l2 ? l1 : l2) : 0;
    return 1;
}

/* Expands the first valid brace group at or after `from` in word (bash
 * semantics: "{a}" and unbalanced braces stay literal), recursively. */
static int expand_braces(expand_ctx *x, const char *word, size_t from)
{
    size_t len = strlen(word);
    for (size_t i = from; i < len; i++) {
        if (word[i] != '{')
            continue;
        int depth = 0, commas = 0;
        size_t j;
        for (j = i; j < len; j++) {
            if (word[j] == '{')
                depth++;
            else if (word[j] == '}' && --depth == 0)
                break;
            else if (word[j] == ',' && depth == 1)
                commas++;
        }
        if (j == len)
            break; /* unbalanced: the rest is literal */
        const char *body = word + i + 1, *body_end = word + j;
        long long lo, hi, step;
        int width;
        int is_range = !commas && parse_range(body, body_end, &lo, &hi, &step, &width);
        if (!commas && !is_range)
            continue; /* "{x}": literal */
        size_t cap = len + 64;
        char *buf = malloc(cap);
        if (!buf)
            return RF_E_NOMEM;
        memcpy(buf, word, i);
        int rc = 0;
        if (is_range) {
            long long dir = lo <= hi ? 1 : -1;
            for (long long v = lo; rc == 0 && (dir > 0 ? v <= hi : v >= hi); v += dir * step) {
                /* cap: the number (at most 20 characters, padded to at most the body's
                 * width) replaces a body at least as long as its width */
                int nl = snprintf(buf + i, cap - i, "%0*lld", width, v);
                assert(nl > 0 && i + (size_t)nl + strlen(word + j + 1) < cap);
                strcpy(buf + i + nl, word + j + 1);
                /* the suffix may hold more groups; the number holds none */
                rc = expand_braces(x, buf, i + (size_t)nl);
            }
        } else {
            const char *alt = body;
            depth = 0;
            for (const char *p = body; rc == 0 && p <= body_end; p++) {
                if (p < body_end && *p == '{')
                    depth++;
                else if (p < body_end && *p == '}')
                    depth--;
                if (p < body_end && (*p != ',' || depth != 0))
                    continue;
                size_t alen = (size_t)(p - alt);
                memcpy(buf + i, alt, alen);
                strcpy(buf + i + alen, word + j + 1);
                rc = expand_braces(x, buf, i); /* the alternative may hold groups */
                alt = p + 1;
            }
        }
        free(buf);
        return rc;
    }
    return expand_glob(x, word);
}

int rf__source_expand(const char *pattern, int (*fn)(const char *path, void *ctx), void *ctx,
                      char *err, size_t errcap)
{
    expand_ctx x = {fn, ctx, NULL, NULL, pattern, 0, err, errcap};
    return expand_braces(&x, pattern, 0);
}

/* ---- the files of a spec ------------------------------------------------- */

static int collect(const char *path, void *ctx)
{
    return rf__strlist_add(ctx, path, NULL);
}

int rf__source_files(const char *spec, rf_strlist *files, char *err, size_t errcap)
{
    return rf__source_files_with(spec, files, NULL, NULL, err, errcap);
}

int rf__source_files_with(const char *spec, rf_strlist *files, rf_source_glob_fn *glob,
                          void *gctx, char *err, size_t errcap)
{
    const char *p = spec;
    char *entry = NULL;
    int rc = 0;
    while (rc == 0 && *p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (n > 0) {
            char *e = realloc(entry, n + 1);
            if (!e) {
                rc = RF_E_NOMEM;
                break;
            }
            entry = e;
            memcpy(entry, p, n);
            entry[n] = '\0';
            struct stat st;
            /* an existing path is itself, even when it holds pattern characters */
            if (!glob && stat(entry, &st) == 0) {
                rc = rf__strlist_add(files, entry, NULL);
            } else {
                expand_ctx x = {collect, files, glob, gctx, entry, 0, err, errcap};
                rc = expand_braces(&x, entry, 0);
            }
        }
        p += nl ? (size_t)(nl - p) + 1 : strlen(p);
    }
    free(entry);
    if (rc == 0 && files->n == 0) {
        snprintf(err, errcap, "source: \"%s\" names no files", spec);
        rc = RF_E_SOURCE;
    }
    if (rc == 0 && files->n > UINT32_MAX / 2) {
        snprintf(err, errcap, "source: too many files (%zu)", files->n);
        rc = RF_E_SOURCE;
    }
    return rc;
}
