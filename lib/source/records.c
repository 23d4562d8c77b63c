/*
 * records.c - the record-file source kind: fixed-size binary records
 * (token shards and the like), passed through without decoding.
 *
 * Sample i is record i of the files concatenated in spec order: bytes
 * [header + j * record_size, + record_size) of its file, a trailing partial
 * record ignored. Nothing is stored per record: the files are stat'ed once
 * for their sizes, first[f] holds the index of file f's first record, and
 * source.c finds a record's file by binary search over it.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kinds.h"
#include "ringfeed.h"

int rf__source_index_records(rf_source *s, const rf_strlist *paths, const rf_source_opts *o,
                             char *err, size_t errcap)
{
    assert(o->record_size > 0);
    s->kind = RF_SOURCE_RECORDS;
    s->record_size = o->record_size;
    s->header_size = o->header_size;
    int rc = rf__source_put_files(s, paths);
    if (rc == 0 && !(s->first = calloc((size_t)s->nfiles + 1, sizeof *s->first)))
        rc = RF_E_NOMEM;
    int64_t n = 0;
    for (uint32_t f = 0; rc == 0 && f < s->nfiles; f++) {
        const char *path = s->arena + s->file_off[f];
        struct stat st;
        if (stat(path, &st) != 0) {
            snprintf(err, errcap, "source: %s: %s", path, strerror(errno));
            rc = RF_E_SOURCE;
            break;
        }
        if (!S_ISREG(st.st_mode)) {
            snprintf(err, errcap, "source: %s: not a regular file (record files expected)", path);
            rc = RF_E_SOURCE;
            break;
        }
        uint64_t size = (uint64_t)st.st_size;
        s->first[f] = n;
        if (size > s->header_size)
            n += (int64_t)((size - s->header_size) / s->record_size);
    }
    if (rc == 0) {
        s->first[s->nfiles] = n;
        s->n = n;
    }
    if (rc == 0 && n == 0) {
        snprintf(err, errcap,
                 "source: %s%s: no complete record of %llu bytes after a header of "
                 "%llu bytes",
                 s->arena + s->file_off[0], s->nfiles > 1 ? " ..." : "",
                 (unsigned long long)s->record_size, (unsigned long long)s->header_size);
        rc = RF_E_SOURCE;
    }
    if (rc == 0 && n > UINT32_MAX) {
        snprintf(err, errcap, "source: %lld records: more than %u", (long long)n, UINT32_MAX);
        rc = RF_E_SOURCE;
    }
    return rc;
}
