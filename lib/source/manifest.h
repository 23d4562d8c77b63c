/*
 * manifest.h - the shard index that ringfeed-pack writes into
 * OUT/manifest.json, read back by the tar source (tar.c) so that it
 * need not walk the headers of shards the manifest describes.
 *
 * In the manifest each shard is {"name": N, "samples": S, "bytes": B,
 * "index": [SAMPLE, ...]} and each SAMPLE an array
 *     [key, label, ext, offset, size, ext, offset, size, ...]
 * with the sample's members in tar order: the extension, the offset of the
 * member's data in the shard and its size (its header is the 512 bytes
 * before the data); label is the integer in the .cls member, or -1 when the
 * sample has none. Everything else in the manifest is skipped.
 *
 * rf__manifest_parse reads that from bytes in memory (a file read whole, or
 * later a manifest fetched over the network); tar.c decides whether a
 * shard on disk is the one described (same name and byte size, its first
 * and last member headers as stated) before it uses the index.
 */
#ifndef RF_SOURCE_MANIFEST_H
#define RF_SOURCE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

typedef struct rf_manifest_shard {
    uint64_t name;   /* arena offset of the shard's file name (no folder) */
    uint64_t bytes;  /* the shard's size when it was written */
    size_t first, n; /* its samples: samples[first .. first + n) */
    int indexed;     /* 1: "index" present and consistent (offsets inside the
                        * shard, in order, members not overlapping) */
} rf_manifest_shard;

typedef struct rf_manifest_sample {
    uint64_t key;    /* arena offset */
    int64_t label;   /* the .cls member's integer; -1: none */
    size_t first, n; /* its members: members[first .. first + n) */
} rf_manifest_sample;

typedef struct rf_manifest_member {
    uint64_t ext;      /* arena offset of the extension (the name after "key.") */
    uint64_t off, len; /* where the member's data lies in the shard */
} rf_manifest_member;

typedef struct rf_manifest {
    char *arena; /* NUL-terminated strings back to back */
    size_t arena_len, arena_cap;
    rf_manifest_shard *shards;
    size_t nshards, shards_cap;
    rf_manifest_sample *samples;
    size_t nsamples, samples_cap;
    rf_manifest_member *members;
    size_t nmembers, members_cap;
    size_t *by_name; /* nshards indices into shards, sorted by name */
} rf_manifest;

/* Parses the manifest in bytes[0..n) (borrowed for the call; need not end
 * with a NUL) into *m, which the caller frees with rf__manifest_free, also
 * on failure. 0; RF_E_SOURCE with the reason in err when the bytes are not
 * a ringfeed-pack manifest ("format": "ringfeed-pack 1") or not JSON;
 * RF_E_NOMEM. A shard whose index is inconsistent is kept with indexed = 0. */
int rf__manifest_parse(const char *bytes, size_t n, rf_manifest *m, char *err, size_t errcap);

/* rf__manifest_parse of the file at path (at most 1 GiB). */
int rf__manifest_read(const char *path, rf_manifest *m, char *err, size_t errcap);

void rf__manifest_free(rf_manifest *m);

/* The indexed shard named name (a file name, no folder) of bytes bytes, or
 * NULL (no such shard, another size, or no index for it). */
const rf_manifest_shard *rf__manifest_find(const rf_manifest *m, const char *name, uint64_t bytes);

#endif
