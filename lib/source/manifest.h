/*
 * manifest.h - the shard index that ringfeed-pack writes into
 * OUT/manifest.json, read back by the tar source (tar.c) so that it
 * need not walk the headers of shards the manifest describes.
 *
 * In the manifest each shard is {"name": N, "samples": S, "bytes": B,
 * "sha256": D, "index": [SAMPLE, ...], "sizes": [W, H, ...]} ("sizes":
 * each sample's picture width and height, from ringfeed-pack 0.5 on) and
 * each SAMPLE an array
 *     [key, label, ext, offset, size, ext, offset, size, ...]
 * with the sample's members in tar order: the extension, the offset of the
 * member's data in the shard and its size (its header is the 512 bytes
 * before the data); label is the integer in the .cls member, or -1 when the
 * sample has none. Everything else in the manifest is skipped (the digest
 * too: it is there for copies to be checked by anyone, not read here).
 *
 * rf__manifest_parse reads that from bytes in memory (a file read whole, or
 * a manifest fetched over the network) in one pass that checks all of it
 * and keeps per shard only its name, size, where its index lies in the
 * bytes and its first and last member; a shard's samples are read from the
 * bytes again, one at a time, when that shard is indexed (the iterator
 * below). So a manifest costs its bytes and a few hundred bytes per shard,
 * never a copy of its samples (a million samples are some 100 MB of text).
 * tar.c decides whether a shard on disk is the one described (same name
 * and byte size, its first and last member headers and its label members
 * as stated: tar_check.c) before it uses the index.
 */
#ifndef RF_SOURCE_MANIFEST_H
#define RF_SOURCE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

/* A member named by the manifest: key and extension (arena offsets), data
 * offset and length. */
typedef struct rf_manifest_end {
    uint64_t key, ext, off, len;
} rf_manifest_end;

typedef struct rf_manifest_shard {
    uint64_t name;           /* arena offset of the shard's file name (no folder) */
    uint64_t bytes;          /* the shard's size when it was written */
    size_t at, stop;         /* its "index" array: text[at .. stop) */
    int indexed;             /* 1: "index" present and consistent (samples with
                              * members, offsets inside the shard, in order, not
                              * overlapping; labels in the tar walk's range) */
    rf_manifest_end ends[2]; /* indexed: its first (0) and last (1) member */
    size_t samples;          /* the "index" array's samples */
    size_t sizes_at, sizes_stop; /* its "sizes" array, text[at .. stop); 0, 0: none or not
                                  * one integer pair per sample (sizes.h) */
} rf_manifest_shard;

typedef struct rf_manifest {
    const char *text; /* the bytes parsed (see rf__manifest_parse) */
    size_t text_len;
    char *owned; /* text, when rf__manifest_read read it; else NULL */
    char *arena; /* NUL-terminated strings back to back: names and ends */
    size_t arena_len, arena_cap;
    rf_manifest_shard *shards;
    size_t nshards, shards_cap;
    size_t *by_name; /* nshards indices into shards, sorted by name */
} rf_manifest;

/* Parses the manifest in bytes[0..n) (need not end with a NUL) into *m,
 * which the caller frees with rf__manifest_free, also on failure. The bytes
 * are kept, not copied: they must stay as they are until then. 0;
 * RF_E_SOURCE with the reason in err when the bytes are not a ringfeed-pack
 * manifest ("format": "ringfeed-pack 1") or not JSON; RF_E_NOMEM. A shard
 * whose index is inconsistent is kept with indexed = 0. */
int rf__manifest_parse(const char *bytes, size_t n, rf_manifest *m, char *err, size_t errcap);

/* rf__manifest_parse of the file at path (at most 1 GiB), read whole into
 * memory that m owns. */
int rf__manifest_read(const char *path, rf_manifest *m, char *err, size_t errcap);

void rf__manifest_free(rf_manifest *m);

/* The indexed shard named name (a file name, no folder) of bytes bytes, or
 * NULL (no such shard, another size, or no index for it). */
const rf_manifest_shard *rf__manifest_find(const rf_manifest *m, const char *name, uint64_t bytes);
/* The shard named name, indexed or not, of any size; NULL when the
 * manifest names no such shard (or names it twice). */
const rf_manifest_shard *rf__manifest_named(const rf_manifest *m, const char *name);

/* The pictures' sizes the packer states for an indexed shard's samples
 * ("sizes": [w0, h0, w1, h1, ...], in index order; 0, 0 for one it could
 * not read) into dims (2 per sample, n samples). 0, or -1 when the entry
 * has none for n samples. */
int rf__manifest_sizes(const rf_manifest *m, const rf_manifest_shard *ms, uint32_t *dims,
                       size_t n);

/* (dims.c) Keeps in s->dims the sizes ms states for the samples
 * [first, s->n) that were just indexed from it (source.h), when it states
 * one per sample; otherwise they stay unknown. Never fails the index. */
struct rf_source;
void rf__source_manifest_dims(struct rf_source *s, int64_t first, const rf_manifest *m,
                              const rf_manifest_shard *ms);

/* Reading an indexed shard's samples, in order:
 *     rf_manifest_iter it;
 *     rf__manifest_iter(&it, m, ms);
 *     while ((rc = rf__manifest_sample(&it)) == 1)      // it.key, it.label
 *         while ((rc = rf__manifest_member(&it)) == 1)  // it.ext, it.off, it.len
 *             ...
 *     rf__manifest_iter_free(&it);
 * Each call returns 1 (one more), 0 (no more: the shard's or the sample's
 * end), -1 (malformed: not after a parse that marked the shard indexed) or
 * RF_E_NOMEM. key and ext are NUL-terminated, valid until the next call;
 * the consistency the parse checked holds for them. */
typedef struct rf_manifest_iter {
    const char *p, *end; /* the bytes not read yet */
    char *buf;           /* the key, a NUL, the member's extension, a NUL */
    size_t cap, key_len;
    int state; /* where p is: before the array, between samples, in one, after */
    const char *key;
    int64_t label;
    const char *ext;
    uint64_t off, len;
} rf_manifest_iter;

void rf__manifest_iter(rf_manifest_iter *it, const rf_manifest *m, const rf_manifest_shard *ms);
int rf__manifest_sample(rf_manifest_iter *it);
int rf__manifest_member(rf_manifest_iter *it);
void rf__manifest_iter_free(rf_manifest_iter *it);

#endif
