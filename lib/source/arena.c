/*
 * arena.c - the storage every source kind writes its samples into.
 *
 * An rf_source keeps all its strings (paths, class and member names) back to
 * back in one arena addressed by 64-bit offsets, and its per-sample facts in
 * flat arrays that double when full: no allocation per sample, so a million
 * samples cost a few tens of MB and a few dozen reallocs. rf_strlist is the
 * same idea for the temporary lists the indexers build (folder walks, the
 * files a pattern expands to).
 */
#define _GNU_SOURCE
#include "kinds.h"

#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"

/* Grows *buf (cap bytes, len used) to hold need more bytes, from at least
 * first, doubling. 0 or RF_E_NOMEM. */
static int reserve_bytes(char **buf, size_t *cap, size_t len, size_t need, size_t first)
{
    if (len + need <= *cap)
        return 0;
    size_t c = *cap ? *cap : first;
    while (c < len + need)
        c *= 2;
    char *p = realloc(*buf, c);
    if (!p)
        return RF_E_NOMEM;
    *buf = p;
    *cap = c;
    return 0;
}

int rf__strlist_add(rf_strlist *l, const char *a, const char *b)
{
    size_t la = strlen(a), lb = b ? strlen(b) : 0;
    size_t need = la + (b ? 1 + lb : 0) + 1;
    if (reserve_bytes(&l->buf, &l->cap, l->len, need, 4096) != 0)
        return RF_E_NOMEM;
    if (l->n == l->ncap) {
        size_t ncap = l->ncap ? l->ncap * 2 : 256;
        size_t *no = realloc(l->off, ncap * sizeof *no);
        if (!no)
            return RF_E_NOMEM;
        l->off = no;
        l->ncap = ncap;
    }
    char *p = l->buf + l->len;
    memcpy(p, a, la);
    if (b) {
        p[la] = '/';
        memcpy(p + la + 1, b, lb);
    }
    p[need - 1] = '\0';
    l->off[l->n++] = l->len;
    l->len += need;
    return 0;
}

void rf__strlist_free(rf_strlist *l)
{
    free(l->buf);
    free(l->off);
    memset(l, 0, sizeof *l);
}

/* qsort_r (glibc): the strings' base travels as the context, never in a
 * global, so that loaders may index on several threads at once. */
static int cmp_off(const void *a, const void *b, void *base)
{
    const char *s = base;
    return strcmp(s + *(const size_t *)a, s + *(const size_t *)b);
}

void rf__strlist_sort(rf_strlist *l)
{
    if (l->n > 1)
        qsort_r(l->off, l->n, sizeof *l->off, cmp_off, l->buf);
}

int rf__source_put(rf_source *s, const char *str, size_t len, uint64_t *off)
{
    if (reserve_bytes(&s->arena, &s->arena_cap, s->arena_len, len + 1, 1 << 16) != 0)
        return RF_E_NOMEM;
    memcpy(s->arena + s->arena_len, str, len);
    s->arena[s->arena_len + len] = '\0';
    *off = s->arena_len;
    s->arena_len += len + 1;
    return 0;
}

/* realloc of one per-sample array to cap entries; clears ok on failure
 * (the array then keeps its old size, which s->cap still describes). */
#define RF_GROW(arr, cap, ok)                                                                      \
    do {                                                                                           \
        void *np_ = realloc((arr), (size_t)(cap) * sizeof *(arr));                                 \
        if (np_)                                                                                   \
            (arr) = np_;                                                                           \
        else                                                                                       \
            (ok) = 0;                                                                              \
    } while (0)

int rf__source_reserve(rf_source *s, int ranged)
{
    if (s->n < s->cap)
        return 0;
    int64_t cap = s->cap ? s->cap * 2 : 1024;
    int ok = 1;
    RF_GROW(s->path_off, cap, ok);
    RF_GROW(s->labels, cap, ok);
    if (ranged) {
        RF_GROW(s->shard, cap, ok);
        RF_GROW(s->data_off, cap, ok);
        RF_GROW(s->data_len, cap, ok);
    }
    if (ranged && s->nextras > 0) {
        RF_GROW(s->span_off, cap, ok);
        RF_GROW(s->span_len, cap, ok);
        RF_GROW(s->ext_rel, cap * s->nextras, ok);
        RF_GROW(s->ext_len, cap * s->nextras, ok);
    }
    if (s->dims) {
        RF_GROW(s->dims, cap * 2, ok);
        if (ok) /* the samples still to come state no size until said */
            memset(s->dims + 2 * s->cap, 0, (size_t)(cap - s->cap) * 2 * sizeof *s->dims);
    }
    if (!ok)
        return RF_E_NOMEM;
    s->cap = cap;
    return 0;
}
#undef RF_GROW

int rf__source_add(rf_source *s, const char *path, size_t path_len, int64_t label)
{
    uint64_t off;
    if (rf__source_reserve(s, 0) < 0 || rf__source_put(s, path, path_len, &off) < 0)
        return RF_E_NOMEM;
    s->path_off[s->n] = off;
    s->labels[s->n] = label;
    s->n++;
    return 0;
}

int rf__source_put_files(rf_source *s, const rf_strlist *files)
{
    s->nfiles = (uint32_t)files->n;
    s->file_off = calloc(s->nfiles, sizeof *s->file_off);
    if (!s->file_off)
        return RF_E_NOMEM;
    for (uint32_t f = 0; f < s->nfiles; f++) {
        const char *p = rf__strlist_at(files, f);
        if (rf__source_put(s, p, strlen(p), &s->file_off[f]) < 0)
            return RF_E_NOMEM;
    }
    return 0;
}
