/*
 * source.h - the index of samples: where each sample's bytes are and its label.
 *
 * Paths live in one string arena addressed by offsets: no per-sample heap
 * allocation, so a million-file index is a few tens of MB and builds in about
 * a second. Indexing never opens or stats the sample files themselves.
 */
#ifndef RF_SOURCE_H
#define RF_SOURCE_H

#include <stddef.h>
#include <stdint.h>

enum rf_source_kind { RF_SOURCE_FOLDER = 1, RF_SOURCE_LIST = 2 };

typedef struct rf_source {
    int kind;
    int64_t n;            /* samples */
    int64_t nclasses;     /* folder: number of class folders; list: max label + 1 */
    char *arena;          /* NUL-terminated paths, back to back */
    size_t arena_len, arena_cap;
    uint64_t *path_off;   /* n offsets into arena */
    int64_t *labels;      /* n labels */
    int64_t cap;          /* allocated entries of path_off / labels */
    uint64_t *class_off;  /* folder: nclasses offsets of class names into arena */
} rf_source;

/* Indexes `spec` (a directory: image folder; a regular file: list file).
 * On error returns a negative RF_E_* and writes the reason into err. */
int rf__source_open(rf_source *s, const char *spec, char *err, size_t errcap);
void rf__source_close(rf_source *s);

static inline const char *rf__source_path(const rf_source *s, int64_t i)
{
    return s->arena + s->path_off[i];
}

/* Appends one sample (used by the indexers and by tests). 0 or RF_E_NOMEM. */
int rf__source_add(rf_source *s, const char *path, size_t path_len, int64_t label);

#endif
