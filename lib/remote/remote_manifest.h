/*
 * remote_manifest.h - ringfeed-pack's manifest.json for remote shards
 * (remote_manifest.c): fetched at start from each folder of the shard URLs,
 * it indexes the shards it describes without fetching them; each such
 * shard is checked when it lands in the cache, before any of its bytes are
 * read: its first and last member headers, then the digest of all its
 * headers and labels against its entry's (tar_check.c).
 *
 * Life: made by the indexer (source_remote.c), owned by the rf_remote from
 * rf__remote_set_manifest on (freed with it). Index-time calls run on the
 * indexing thread; rf__rman_check runs on the fetch thread only, for a
 * shard it pins, which the indexer no longer touches by then (a shard
 * indexed from the manifest is not acquired at index time); stats may be
 * read from any thread.
 */
#ifndef RF_REMOTE_MANIFEST_H
#define RF_REMOTE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "remote.h"
#include "source.h"

/* The most bytes a manifest.json may have: its GET fails as soon as the
 * Content-Length or the bytes that arrived pass it (a manifest of a
 * million samples is some 100 MB). */
#define RF__RMAN_MAX_BYTES ((uint64_t)256 << 20)
/* The most bytes of all folders' manifests together (they are fetched and
 * parsed at once; their GETs draw from one budget as bytes arrive): the
 * folder whose GET would go over goes without one (stats: over_total), its
 * shards indexed as without a manifest. */
#define RF__RMAN_TOTAL_BYTES ((uint64_t)256 << 20)

typedef struct rf_rman rf_rman;

/* Starts the GET of PREFIX/manifest.json for each folder PREFIX/ of the
 * shard URLs (s->file_off) that holds a shard not marked in skip (skip[k]:
 * shard k's index is kept in the cache; NULL: none), through r's fetcher
 * (same signing and retries), 4 at a time (each holds a memory file until
 * it is parsed; the next start as they end, in rf__rman_match). Needs the
 * URLs only, not
 * the shards' HEADs: it may run beside them. 0, or RF_E_NOMEM (*out NULL):
 * nothing here fails the source. */
int rf__rman_start(rf_rman **out, rf_remote *r, const rf_source *s, const uint8_t *skip);
/* Once the shards' HEADs are in (rf__remote_add): waits for the GETs and
 * parses each manifest as its GET ends (starting the other folders' GETs as
 * these end), then finds each shard's entry
 * (same file name, and byte size as its HEAD gave), for the shards not
 * marked in skip. A folder without one (404, 403), or whose manifest
 * cannot be fetched, is too large or does not parse, has none; stats say
 * which and why. */
void rf__rman_match(rf_rman *m, rf_remote *r, const rf_source *s, const uint8_t *skip);

/* 1 when shard k (not skipped) has an entry to be indexed from. */
int rf__rman_covers(const rf_rman *m, uint32_t k);

/* Appends shard k's samples from its entry (rf__source_tar_from_manifest).
 * 0 done; 1 not (the shard must be indexed otherwise; s is as before). */
int rf__rman_index(rf_rman *m, rf_source *s, uint32_t k, const rf_source_opts *o,
                   int64_t *maxlabel);

/* Indexing is over: frees the parsed manifests and unmaps their bytes (the
 * checks keep what they need). */
void rf__rman_trim(rf_rman *m);

/* Fetch thread: shard k (url, size bytes) is pinned, open in fd. 0 when it
 * was not indexed from a manifest, or its first and last member headers are
 * where and as its entry says and a walk of its headers gives the digest of
 * its entry (checked once per shard); else RF_E_SOURCE with msg naming the
 * URL and saying it does not match manifest.json. */
int rf__rman_check(rf_rman *m, uint32_t k, int fd, const char *url, uint64_t size, char *msg,
                   size_t cap);

/* Fetch thread: 1 when shard k failed its check already (its error in
 * msg, as rf__rman_check's): no copy of it is fetched or pinned again in
 * this loader. 0 otherwise. */
int rf__rman_refused(rf_rman *m, uint32_t k, const char *url, char *msg, size_t cap);

/* Stats: the remote object's "manifest" value (an object), JSON. */
struct rf_json;
void rf__rman_stats(const rf_rman *m, struct rf_json *j);

/* Waits for any GET still out (not once the fetch thread halted for a
 * cancel: they are abandoned), then frees. NULL: no-op. */
void rf__rman_free(rf_rman *m);

#endif
