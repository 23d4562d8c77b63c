/*
 * source_mix.h - the index of a mixture of sources: each source indexed on
 * its own (any kind: folder, list, local or remote tar shards, records), one
 * after the other in the global index space.
 *
 * Source c's samples are the global indexes [first[c], first[c + 1]); the
 * index accessors of source.h take a global index and ask the source that
 * holds it with its own (rf__source_at), so the reader, the decode workers
 * and the messages see each sample exactly as that source alone would give
 * it. Labels gain the source's label_offset (labels below 0, unlabeled
 * shards' -1, stay). Each remote source keeps its own fetcher and cache
 * lease (rf__source_remote_at lists them). Records and images cannot be
 * mixed: a mixture is all record files or none.
 *
 * The order the mixture is read in is not here: sampler_mix.h.
 */
#ifndef RF_SOURCE_MIX_H
#define RF_SOURCE_MIX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "source.h"

struct rf_remote;

typedef struct rf_source_mix {
    int n;                   /* sources */
    rf_source *parts;        /* n indexes */
    int64_t *first;          /* n + 1: source c's samples are [first[c], first[c + 1]) */
    int64_t *label_offset;   /* n: added to each label >= 0 of source c */
    _Atomic int64_t *errors; /* n: bad samples met by the decode workers (relaxed) */
} rf_source_mix;

/* Indexes the n sources specs[c] with the options o (each as
 * rf__source_open_ex would), into s, of kind RF_SOURCE_MIX. On error
 * returns a negative RF_E_* with the reason in err ("mixture: source c
 * (spec): ..."); s is then empty. */
int rf__source_open_mix(rf_source *s, int n, const char *const *specs, const int64_t *label_offset,
                        const rf_source_opts *o, char *err, size_t errcap);
void rf__source_mix_close(rf_source *s);

/* The source of a mixture holding global sample i (0 <= i < s->n). */
int rf__source_mix_of(const rf_source *s, int64_t i);

/* Label of global sample i: its source's, plus the source's offset. */
int64_t rf__source_mix_label(const rf_source *s, int64_t i);

/* The k-th remote fetcher of s (0, 1, ...): s->remote for a source of
 * remote shards, the remote sources' in order for a mixture; NULL past the
 * last. */
struct rf_remote *rf__source_remote_at(const rf_source *s, int k);

/* A decode worker met a bad sample i: counted for its source (any thread;
 * nothing for a source that is not a mixture). */
void rf__source_count_error(const rf_source *s, int64_t i);

/* Of tar shards (local or remote; a mixture's summed over its sources):
 * what 0, the shards; 1, those indexed from a manifest.json; 2, those a
 * manifest named but did not describe (rf_source's nfiles,
 * nfiles_manifest, nfiles_mismatched). */
int64_t rf__source_tar_counts(const rf_source *s, int what);

/* Hash of a mixture's index: each source's fingerprint, size and label
 * offset, in order. */
uint64_t rf__source_mix_fingerprint(const rf_source *s);

/* Bytes held by the sources' indexes. */
size_t rf__source_mix_bytes(const rf_source *s);

#endif
