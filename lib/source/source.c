/*
 * source.c - the sample index: open (the one place that tells the kinds
 * apart by the spec), close, and the per-sample accessors.
 *
 * rf__source_open_ex looks at the spec once: s3:// and http(s):// name remote
 * tar shards (the remote room's kind, called through opts->remote: kinds.h
 * rf_source_remote, with the fetcher made first, for listings); a
 * folder is an image folder
 * (folder.c), another regular file a list file (list.c), and
 * anything else (a .tar, a pattern, '\n'-separated entries) names files,
 * expanded by pattern.c, that are WebDataset shards (tar.c) or,
 * with record_size set, record files (records.c). A compressed tar
 * is refused here by its name (and by tar.c by its first bytes). The
 * chosen kind's indexer fills the rf_source through the arena helpers
 * (arena.c); the accessors below read it whatever the kind. The seam
 * is kinds.h.
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

#include "kinds.h"
#include "redact.h"
#include "ringfeed.h"
#include "mix.h"

void rf__source_close(rf_source *s)
{
    if (!s)
        return;
    rf__source_mix_close(s);
    free(s->arena);
    free(s->path_off);
    free(s->labels);
    free(s->class_off);
    free(s->file_off);
    free(s->shard);
    free(s->data_off);
    free(s->data_len);
    free(s->span_off);
    free(s->span_len);
    free(s->ext_rel);
    free(s->ext_len);
    free(s->first);
    free(s->local_off);
    free(s->shown_off);
    free(s->dims);
    if (s->remote_kind)
        s->remote_kind->close(s->remote);
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
    s = rf__source_at(s, &i);
    if (s->kind == RF_SOURCE_TAR && s->nextras > 0) {
        *ranged = 1; /* the image and the extras in one read */
        *offset = s->span_off[i];
        *length = s->span_len[i];
    } else if (s->kind == RF_SOURCE_TAR) {
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
    s = rf__source_at(s, &i);
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

int rf__source_key(const rf_source *s, int64_t i, char *buf, size_t cap)
{
    if (s->kind == RF_SOURCE_MIX && i >= 0 && i < s->n)
        s = rf__source_at(s, &i);
    if (s->kind != RF_SOURCE_TAR || i < 0 || i >= s->n)
        return snprintf(buf, cap, "%s", "");
    /* the image member's name up to the first '.' of its base name */
    const char *name = s->arena + s->path_off[i];
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strchr(base, '.');
    int klen = (int)(dot ? (size_t)(dot - name) : strlen(name));
    return snprintf(buf, cap, "%.*s", klen, name);
}

int rf__source_sample_name(const rf_source *s, int64_t i, char *buf, size_t cap)
{
    if (i < 0 || i >= s->n)
        return snprintf(buf, cap, "(no sample %lld)", (long long)i);
    s = rf__source_at(s, &i);
    if (s->kind == RF_SOURCE_TAR) {
        int n = snprintf(buf, cap, "%s:", rf__source_path(s, i));
        size_t at = n >= 0 && (size_t)n < cap ? (size_t)n : cap;
        return n + rf__source_key(s, i, buf ? buf + at : NULL, cap - at);
    }
    if (s->kind == RF_SOURCE_RECORDS) {
        int ranged;
        uint64_t off, len;
        rf__source_extent(s, i, &ranged, &off, &len);
        return snprintf(buf, cap, "%s@%llu", rf__source_path(s, i), (unsigned long long)off);
    }
    return snprintf(buf, cap, "%s", rf__source_path(s, i));
}

/* FNV-1a, 64 bits: small and stable; the fingerprint guards against a
 * changed dataset, not against an adversary. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t k = 0; k < n; k++)
        h = (h ^ b[k]) * 0x100000001b3ULL;
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
    unsigned char b[8]; /* little-endian whatever the host, so the hash travels */
    for (int k = 0; k < 8; k++)
        b[k] = (unsigned char)(v >> (8 * k));
    return fnv(h, b, sizeof b);
}

uint64_t rf__source_fingerprint(const rf_source *s)
{
    if (s->kind == RF_SOURCE_MIX)
        return rf__source_mix_fingerprint(s);
    uint64_t h = fnv_u64(0xcbf29ce484222325ULL, (uint64_t)s->n);
    for (int64_t i = 0; i < s->n; i++) {
        const char *path = rf__source_path(s, i), *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        h = fnv(h, base, strlen(base) + 1); /* the NUL separates it from what follows */
        if (s->kind == RF_SOURCE_TAR) {
            const char *member = s->arena + s->path_off[i];
            h = fnv(h, member, strlen(member) + 1);
            h = fnv_u64(h, s->data_len[i]);
        } else if (s->kind == RF_SOURCE_RECORDS) {
            int ranged;
            uint64_t off, len;
            rf__source_extent(s, i, &ranged, &off, &len);
            h = fnv_u64(fnv_u64(h, off), len);
        }
        h = fnv_u64(h, (uint64_t)rf__source_label(s, i));
    }
    return h;
}

size_t rf__source_bytes(const rf_source *s)
{
    if (s->kind == RF_SOURCE_MIX)
        return rf__source_mix_bytes(s);
    size_t per = 0;
    if (s->path_off)
        per += sizeof *s->path_off;
    if (s->labels)
        per += sizeof *s->labels;
    if (s->shard)
        per += sizeof *s->shard + sizeof *s->data_off + sizeof *s->data_len;
    if (s->span_off)
        per += sizeof *s->span_off + sizeof *s->span_len +
               (size_t)s->nextras * (sizeof *s->ext_rel + sizeof *s->ext_len);
    size_t b = s->arena_cap + (size_t)s->cap * per;
    b += (size_t)s->nfiles * sizeof(uint64_t) + (s->first ? ((size_t)s->nfiles + 1) * 8 : 0);
    b += (size_t)(s->class_off ? s->nclasses : 0) * sizeof(uint64_t);
    b += s->local_off ? (size_t)s->nfiles * sizeof(uint64_t) : 0;
    b += s->shown_off ? (size_t)s->nfiles * sizeof(uint64_t) : 0;
    return b;
}

static int has_tar_ext(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && !strcasecmp(path + n - 4, ".tar");
}

/* Labels other than "cls", label-less sources and extras are tar shards'
 * alone: any other kind refuses them (what = the kind, for the message). */
static int tar_options_only(const rf_source_opts *o, const char *spec, const char *what, char *err,
                            size_t errcap)
{
    if (!o->unlabeled && o->nextras == 0 && (!o->label || !strcmp(o->label, "cls")))
        return 0;
    snprintf(err, errcap,
             "source: %s: label and extras name members of WebDataset tar shards; %s %s", spec,
             what, o->nextras ? "has no extra members" : "has labels of its own");
    return RF_E_INVALID;
}

int rf__source_open_ex(rf_source *s, const char *spec, const rf_source_opts *opts, char *err,
                       size_t errcap)
{
    memset(s, 0, sizeof *s);
    rf_source_opts none = {0};
    const rf_source_opts *o = opts ? opts : &none;
    int records = o->record_size > 0;
    int several = strchr(spec, '\n') != NULL;
    struct stat st;
    int exists = !several && stat(spec, &st) == 0;
    int stat_errno = errno;
    int rc;
    rf_strlist paths = {0};
    rf_source_index_fn *index = NULL;
    const char *how = exists && S_ISREG(st.st_mode) && !records ? rf__compressed_name(spec) : NULL;
    const rf_source_remote *rk = o->remote;
    if (rk && rk->is_url(spec)) {
        /* remote shards: the fetcher first, for listings */
        index = rk->index;
        rc = 0;
        if (records) {
            snprintf(err, errcap, "source: %s: record files cannot be remote (tar shards can)",
                     spec);
            rc = RF_E_SOURCE;
        }
        if (rc == 0) {
            s->remote_kind = rk;
            rc = rk->open(s, o, err, errcap);
        }
        if (rc == 0)
            rc = rf__source_files_with(spec, &paths, rk->glob, s->remote, err, errcap);
        for (size_t f = 0; rc == 0 && f < paths.n; f++) {
            /* an http(s) URL's query (a presigned URL's signature, a
             * token) is no part of the file's name */
            const char *p = rf__strlist_at(&paths, f);
            char file[4096];
            snprintf(file, sizeof file, "%.*s", (int)rf__url_name_len(p), p);
            if ((how = rf__compressed_name(file)) != NULL) {
                rc = rf__compressed_error(file, how, err, errcap);
            } else if (!rk->is_url(p) || !has_tar_ext(file)) {
                snprintf(err, errcap,
                         "source: %s: a remote source must name .tar shards, all remote "
                         "(s3://, http://, https://)",
                         file);
                rc = RF_E_SOURCE;
            }
        }
    } else if (how) {
        rc = rf__compressed_error(spec, how, err, errcap); /* not a list file */
    } else if (exists && S_ISDIR(st.st_mode) && !records) {
        index = rf__source_index_folder;
        rc = tar_options_only(o, spec, "an image folder", err, errcap);
        if (rc == 0)
            rc = rf__strlist_add(&paths, spec, NULL);
    } else if (exists && S_ISREG(st.st_mode) && !records && !has_tar_ext(spec)) {
        index = rf__source_index_list;
        rc = tar_options_only(o, spec, "a list file", err, errcap);
        if (rc == 0)
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
        rc = records ? tar_options_only(o, spec, "a record source", err, errcap) : 0;
        if (rc == 0)
            rc = rf__source_files(spec, &paths, err, errcap);
        for (size_t f = 0; rc == 0 && !records && f < paths.n; f++) {
            const char *p = rf__strlist_at(&paths, f);
            if ((how = rf__compressed_name(p)) != NULL) {
                rc = rf__compressed_error(p, how, err, errcap);
            } else if (!has_tar_ext(p)) {
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
