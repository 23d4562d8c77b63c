/*
 * pack_json.h - the small JSON reader `ringfeed-pack merge` reads the parts'
 * manifests with (pack_json.c): values are found as spans of the text,
 * checked as they are skipped (strings, numbers, literals, nesting up to
 * PJ_MAX_DEPTH), so that a span copied into the merged manifest is JSON;
 * integers and strings are decoded on request. Nothing is allocated.
 */
#ifndef RF_PACK_JSON_H
#define RF_PACK_JSON_H

#include <stddef.h>
#include <stdint.h>

#define PJ_MAX_DEPTH 64

/* A value's text: [p, end). */
typedef struct pj_span {
    const char *p, *end;
} pj_span;

/* The value at the start of text (after blanks): its span, with nothing but
 * blanks after it. 0, or -1 when malformed. */
int pj_value(pj_span text, pj_span *v);
/* Member key of object o: 1 (its value in *v), 0 (no such member), -1 (o
 * is no object, or a key appears twice). */
int pj_member(pj_span o, const char *key, pj_span *v);
/* Element after *it of array a (it->p NULL: the first): 1 (in *it), 0 (no
 * more), -1 (a is no array). */
int pj_next(pj_span a, pj_span *it);
/* An integer value >= 0 (0), or -1. */
int pj_int(pj_span v, int64_t *out);
/* A string value decoded into out (cap bytes, NUL-terminated; NULs and
 * strings too long refused). 0 or -1. */
int pj_str(pj_span v, char *out, size_t cap);
/* 1 when the spans hold the same bytes. */
int pj_same(pj_span a, pj_span b);

#endif
