/*
 * source.c - the sample index: open (the one place that tells the kinds
 * apart by the spec), close, and the per-sample accessors.
 *
 * rf__source_open_ex looks at the spec once: a folder is an image folder
 * (source_folder.c), another regular file a list file (source_list.c), and
 * anything else (a .tar, a pattern, '\n'-separated entries) names files,
 * expanded by source_pattern.c, that are WebDataset shards (source_tar.c) or,
 * with record_size set, record files (source_records.c). The chosen kind's
 * indexer fills the rf_source through the arena helpers (source_arena.c);
 * the accessors below read it whatever the kind. The seam is
 * source_kinds.h.
 */
#define _GNU_SOURCE
#include "source.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "ringfeed.h"
#include "source_kinds.h"

void rf__source_close(rf_source *s)
{
    if (!s)
        return;
    free(s->arena);
    free(s->path_off);
    free(s->labels);
    free(s->class_off);
    free(s->file_off);
    free(s->shard);
    free(s->data_off);
    free(s->data_len);
    free(s->first);
    memset(s, 0, sizeof *s);
}

uint32_t rf__source_record_file(const rf_source *s, int64_t i)
{
    assert(s->kind == RF_SOURCE_RECORDS && i >= 0 && i < s->n);
    /* largest f with first[f] <= i; first[nfiles] = n > i, so it holds records */
    uint32_t lo = 0, hi = s->nfiles;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->first[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

void rf__source_extent(const rf_source *s, int64_t i, int *ranged, uint64_t *offset,
                       uint64_t *length)
{
    if (s->kind == RF_SOURCE_TAR) {
        *ranged = 1;
        *offset = s->data_off[i];
        *length = s->data_len[i];
    } else if (s->kind == RF_SOURCE_RECORDS) {
        uint32_t f = rf__source_record_file(s, i);
        *ranged = 1;
        *offset = s->header_size + (uint64_t)(i - s->first[f]) * s->record_size;
        *length = s->record_size;
    } else {
        *ranged = 0;
        *offset = 0;
        *length = 0;
    }
}

int rf__source_name(const rf_source *s, int64_t i, char *buf, size_t cap)
{
    if (i < 0 || i >= s->n)
        return snprintf(buf, cap, "(no sample %lld)", (long long)i);
    if (s->kind == RF_SOURCE_TAR)
        return snprintf(buf, cap, "%s:%s", rf__source_path(s, i), s->arena + s->path_off[i]);
    if (s->kind == RF_SOURCE_RECORDS) {
        int ranged;
        uint64_t off, len;
        rf__source_extent(s, i, &ranged, &off, &len);
        return snprintf(buf, cap, "%s at offset %llu", rf__source_path(s, i),
                        (unsigned long long)off);
    }
    return snprintf(buf, cap, "%s", rf__source_path(s, i));
}

size_t rf__source_bytes(const rf_source *s)
{
    size_t per = 0;
    if (s->path_off)
        per += sizeof *s->path_off;
    if (s->labels)
        per += sizeof *s->labels;
    if (s->shard)
        per += sizeof *s->shard + sizeof *s->data_off + sizeof *s->data_len;
    size_t b = s->arena_cap + (size_t)s->cap * per;
    b += (size_t)s->nfiles * sizeof(uint64_t) + (s->first ? ((size_t)s->nfiles + 1) * 8 : 0);
    b += (size_t)(s->class_off ? s->nclasses : 0) * sizeof(uint64_t);
    return b;
}

static int has_tar_ext(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && !strcasecmp(path + n - 4, ".tar");
}

int rf__source_open_ex(rf_source *s, const char *spec, const rf_source_opts *opts, char *err,
                       size_t errcap)
{
    memset(s, 0, sizeof *s);
    rf_source_opts none = {0, 0};
    const rf_source_opts *o = opts ? opts : &none;
    int records = o->record_size > 0;
    int several = strchr(spec, '\n') != NULL;
    struct stat st;
    int exists = !several && stat(spec, &st) == 0;
    int stat_errno = errno;
    int rc;
    rf_strlist paths = {0};
    rf_source_index_fn *index = NULL;
    if (exists && S_ISDIR(st.st_mode) && !records) {
        index = rf__source_index_folder;
        rc = rf__strlist_add(&paths, spec, NULL);
    } else if (exists && S_ISREG(st.st_mode) && !records && !has_tar_ext(spec)) {
        index = rf__source_index_list;
        rc = rf__strlist_add(&paths, spec, NULL);
    } else if (exists && !S_ISREG(st.st_mode)) {
        snprintf(err, errcap, "source: %s: %s", spec,
                 S_ISDIR(st.st_mode) ? "a folder, but record_size is set (record files expected)"
                                     : "not a folder or a regular file");
        rc = RF_E_SOURCE;
    } else if (!exists && !several && !strpbrk(spec, "{*?[")) {
        snprintf(err, errcap, "source: %s: %s", spec, strerror(stat_errno));
        rc = RF_E_SOURCE;
    } else {
        /* files: a tar shard or a record file, a pattern, or several entries */
        index = records ? rf__source_index_records : rf__source_index_tar;
        rc = rf__source_files(spec, &paths, err, errcap);
        for (size_t f = 0; rc == 0 && !records && f < paths.n; f++) {
            const char *p = rf__strlist_at(&paths, f);
            if (!has_tar_ext(p)) {
                snprintf(err, errcap,
                         "source: %s: a pattern or a list of sources must name .tar "
                         "shards (or record files, with record_size set)",
                         p);
                rc = RF_E_SOURCE;
            }
        }
    }
    if (rc == 0 && index)
        rc = index(s, &paths, o, err, errcap);
    rf__strlist_free(&paths);
    if (rc == RF_E_NOMEM)
        snprintf(err, errcap, "source: %s: out of memory while indexing", spec);
    if (rc < 0)
        rf__source_close(s);
    return rc;
}

int rf__source_open(rf_source *s, const char *spec, char *err, size_t errcap)
{
    return rf__source_open_ex(s, spec, NULL, err, errcap);
}
