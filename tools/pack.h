/*
 * pack.h - shared between the parts of ringfeed-pack: tools/pack.c (options,
 * the write loop, resume), tools/pack_image.c (one sample's bytes to what is
 * stored), tools/pack_tar.c (tar members written and read back) and
 * tools/pack_manifest.c (OUT/manifest.json with the shard index).
 */
#ifndef RF_PACK_H
#define RF_PACK_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "source.h"

#define PACK_ERRCAP 512

/* One worker's decoders, resampler and encoder: never shared between threads. */
typedef struct pack_coder pack_coder;

typedef struct pack_image_opts {
    int max_side;      /* 0: keep the size */
    int quality;       /* libjpeg quality, 1..100 */
    int keep_original; /* 1: a picture needing no shrink may be stored as it came */
} pack_image_opts;

pack_coder *pack_coder_create(void);
void pack_coder_destroy(pack_coder *c);

/* Decodes data[0..len) (any format the loader reads: JPEG, PNG, WebP, BMP,
 * PNM, told by its bytes) at full resolution, shrinks it so that its longer
 * side is at most o->max_side (never enlarges) with the library's
 * antialiased resampler, and encodes it as a JPEG (4:2:0, optimized Huffman
 * tables) into *out (malloc'ed, *out_len bytes; the caller frees it); *ext
 * is then "jpg". With o->keep_original, a picture needing no shrink is
 * stored as it came, *ext naming its format ("jpg", "png", "webp", "bmp",
 * "ppm", "pgm"): a JPEG always (a re-encode only loses), another format
 * when its bytes are fewer than the JPEG's. The whole stream is decoded in
 * every case, so damage is found here. 0, or a negative RF_E_* with the
 * reason in err. */
int pack_image(pack_coder *c, const uint8_t *data, size_t len, const pack_image_opts *o,
               uint8_t **out, size_t *out_len, const char **ext, char *err, size_t errcap);

/* ---- the run's options and results (pack.c) ---- */

typedef struct pack_opts {
    const char *src, *out, *prefix;
    pack_image_opts img;
    int64_t shard_count; /* positions per shard (--shard-count) */
    uint64_t shard_size; /* > 0: close a shard once it holds this many bytes (--shard-size) */
    int workers;
    int shuffle;
    uint64_t seed;
    int skip_errors;        /* --on-error skip */
    int stop_after;         /* test only: exit after writing this many shards (0: never) */
    const char *extras_arg; /* --extras as given: NULL (all), "none" or a list */
    int nextras;            /* tar sources: the extra members passed through */
    const char *extras[RF_SOURCE_MAX_EXTRAS];
} pack_opts;

typedef struct pack_shard {
    int64_t samples;
    uint64_t bytes;
} pack_shard;

typedef struct pack_bad {
    int64_t pos;
    char reason[PACK_ERRCAP];
} pack_bad;

/* ---- tar (pack_tar.c) ---- */

/* Writes one member with fixed owner, mode and time, so shards are
 * reproducible; name must be shorter than 100 bytes. 0 or -1. */
int pack_tar_member(FILE *f, const char *name, const void *data, size_t len);

/* Calls fn for each regular member of the tar at path, in order: its name
 * (GNU long names and pax paths honoured), the offset of its data and its
 * size; f is the open shard, positioned anywhere (fn may read from it).
 * Stops at the end-of-archive block, a bad header, or fn's nonzero return
 * (which it returns). 0, or -1 when the file cannot be read or is not a tar. */
typedef int pack_tar_fn(void *ctx, FILE *f, const char *name, uint64_t off, uint64_t size);
int pack_tar_walk(const char *path, pack_tar_fn *fn, void *ctx);

/* The extensions of the tar source spec's members other than pictures and
 * the label ("cls"): what --extras passes through by default, sorted, at
 * most RF_SOURCE_MAX_EXTRAS (lowercase, into o->extras / o->nextras, the
 * strings in buf). 0, or -1 with the reason in err. */
int pack_tar_exts(const char *spec, rf_source_opts *o, char *buf, size_t cap, char *err,
                  size_t errcap);

/* ---- manifest (pack_manifest.c) ---- */

/* Writes OUT/manifest.json (through a temporary name): counts, classes,
 * options, per shard its name, samples, bytes, sha256 (of its bytes, hex)
 * and index (read back from the shard itself; source/manifest.h has the
 * layout), the skipped samples.
 * 0 or -1. */
int pack_write_manifest(const pack_opts *o, const rf_source *s, const int64_t *order,
                        const pack_shard *si, int64_t nshards, const pack_bad *bads, int64_t nbad);

#endif
