/*
 * sizes.h - every sample's picture size, learned once at start for the
 * aspect-ratio buckets (bucket.h), without decoding anything.
 *
 * In order of preference: the sizes ringfeed-pack's manifest.json states
 * for the shards indexed from it (src->dims); the sizes kept in the cache
 * folder by an earlier start on the same data (one file, BASE.idx of a
 * pseudo-version named by a SHA-256 of the data's identity: the source,
 * its index's fingerprint, and its containers' sizes and times, or for
 * remote shards their URLs, sizes and validators); else a header scan:
 * the first few hundred bytes of each picture (header_scan.h), read
 * through a reader of its own, many in flight, as the pipeline reads
 * (remote shards: each fetched into the cache and read through its pin).
 * What a scan learns is kept for the next start.
 *
 * A sample whose size cannot be learned (unreadable, no picture, a
 * malformed header) gets 0 x 0: it is not an error here; its decode will
 * fail (or replace it, on_error = skip) with its path and reason.
 */
#ifndef RF_SIZES_H
#define RF_SIZES_H

#include <stddef.h>
#include <stdint.h>

#include "source.h"

typedef struct rf_sizes_opts {
    const char *spec;      /* the loader's source (the kept file's key) */
    const char *cache_dir; /* local sources: the folder of the kept file; NULL: the default */
    int backend;           /* the reader's (reader.h: 0, RF__IO_URING, RF__IO_PREAD) */
    unsigned depth;        /* reads in flight; 0: 64 */
    int keep;              /* 0: no kept file is read or written */
} rf_sizes_opts;

typedef struct rf_sizes_stats {
    int64_t from_manifest, from_kept, scanned, unknown;
    int64_t scan_ns;       /* the whole of rf__sizes_learn */
    uint64_t bytes_read;   /* by the scan */
    int kept_written;      /* the scan's sizes were kept for the next start */
    char kept[300];        /* the kept file's path, or why there is none */
    char first_error[400]; /* the first picture whose size could not be read, and why */
} rf_sizes_stats;

/* Fills dims (2 per sample: width, height; 0 where unknown) for src's n
 * samples. 0, or RF_E_NOMEM / RF_E_SYSTEM (the reader) / RF_E_SOURCE (a
 * remote shard could not be fetched) with the reason in err. */
int rf__sizes_learn(const rf_source *src, const rf_sizes_opts *o, uint32_t *dims,
                    rf_sizes_stats *st, char *err, size_t errcap);

#endif
