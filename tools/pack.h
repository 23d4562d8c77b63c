/*
 * pack.h - shared between the parts of ringfeed-pack:
 *   pack.c           options, then a pack or a merge
 *   pack_run.c       the write loop: order, parts, resume, workers, progress, summary
 *   pack_input.c     what is packed: the library's index (folder, list, tar
 *                    shards) or tables (Parquet, Arrow) read by pack_table.c
 *   pack_table.c     the Python process (ringfeed/_pack_tables.py, pyarrow) that
 *                    serves table rows over a pipe (pack_table.h)
 *   pack_keys.c      each sample's key (its position, or its source's own) and back
 *   pack_image.c     one sample's bytes to what is stored (JPEG, .npy, the original)
 *   pack_tar.c       tar members written and read back
 *   pack_manifest.c  OUT/manifest.json (or a part's manifest) with the shard index
 *   pack_merge.c     `ringfeed-pack merge OUT`: the parts' manifests into one
 *   pack_json.c      the small JSON reader the merge reads manifests with
 */
#ifndef RF_PACK_H
#define RF_PACK_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "source.h"

#define PACK_ERRCAP 512
#define PACK_PATHCAP 4096

/* One worker's decoders, resampler and encoder: never shared between threads. */
typedef struct pack_coder pack_coder;

/* How a picture is stored (--store). */
enum { PACK_STORE_JPEG = 0, PACK_STORE_RAW = 1, PACK_STORE_AUTO = 2 };

typedef struct pack_image_opts {
    int max_side;         /* 0: keep the size */
    int quality;          /* libjpeg quality, 1..100 */
    int keep_original;    /* 1: a picture needing no shrink may be stored as it came */
    int store;            /* PACK_STORE_* (--store) */
    double raw_max_ratio; /* auto: raw where its bytes are at most this times the JPEG's */
} pack_image_opts;

pack_coder *pack_coder_create(void);
void pack_coder_destroy(pack_coder *c);

/* Decodes data[0..len) (any format the loader reads: JPEG, PNG, WebP, BMP,
 * PNM, .npy, told by its bytes) at full resolution and shrinks it so that
 * its longer side is at most o->max_side (never enlarges) with the library's
 * antialiased resampler, then stores it as store says (PACK_STORE_JPEG,
 * _RAW or _AUTO; the caller passes o->store, or its own choice under
 * --raw-fraction):
 *   JPEG  encoded (4:2:0, optimized Huffman tables), *ext "jpg"; with
 *         o->keep_original a picture needing no shrink is stored as it came,
 *         *ext naming its format ("jpg", "png", "webp", "bmp", "ppm", "pgm"):
 *         a JPEG always (a re-encode only loses), another format when its
 *         bytes are fewer than the JPEG's;
 *   RAW   uint8 pixels, shape (H, W, 3), in NumPy's .npy format as np.save
 *         writes it, *ext "npy";
 *   AUTO  RAW where its bytes are at most o->raw_max_ratio times what JPEG
 *         stores, else that.
 * Into *out (malloc'ed, *out_len bytes; the caller frees it). The whole
 * stream is decoded in every case, so damage is found here. 0, or a
 * negative RF_E_* with the reason in err. */
int pack_image(pack_coder *c, const uint8_t *data, size_t len, const pack_image_opts *o, int store,
               uint8_t **out, size_t *out_len, const char **ext, char *err, size_t errcap);

/* The bytes RAW would store for data[0..len) (its size after o->max_side,
 * from the header alone: data may be the picture's first bytes), for
 * --raw-fraction. 0, or a negative RF_E_* with the reason in err. */
int pack_image_raw_bytes(pack_coder *c, const uint8_t *data, size_t len, const pack_image_opts *o,
                         uint64_t *bytes, char *err, size_t errcap);

/* The .npy header (magic, version 1.0, dict, padding) of an h x w x 3 uint8
 * array, as np.save writes it: into buf (at least 128 bytes), its length. */
size_t pack_npy_header(int h, int w, uint8_t *buf);

/* ---- what is packed (pack_input.c) ---- */

struct pack_table;

typedef struct pack_input {
    rf_source s;              /* folder, list, tar shards (s.kind > 0) */
    struct pack_table *table; /* or tables read by Python (pack_table.c) */
    int64_t n;                /* samples */
    int64_t nclasses;
    int64_t nnames;   /* class names (folder; tables with class labels) */
    const char *kind; /* "folder", "list", "tar", "table" */
    const char *root; /* folder, list: the folder the sources' paths are given relative to */
    int root_owned;   /* root is malloc'ed */
    int nextras;      /* extra members per sample (tar: --extras; tables: "json") */
    const char *extras[RF_SOURCE_MAX_EXTRAS];
} pack_input;

/* One sample's input: its bytes (the picture member, and the extras after
 * it), its label; or the reason it has none. */
typedef struct pack_item {
    uint8_t *data; /* malloc'ed */
    size_t len;
    size_t img_off, img_len;             /* the picture in data */
    uint32_t xoff[RF_SOURCE_MAX_EXTRAS]; /* extra e in data */
    uint32_t xlen[RF_SOURCE_MAX_EXTRAS]; /* RF_SOURCE_ABSENT: the sample has none */
    int64_t label;
    int rc; /* nonzero: no bytes, err says why */
    char err[PACK_ERRCAP];
} pack_item;

struct pack_opts;
/* Opens what o names: o->src, entries separated by '\n'. Tables when every
 * entry is a .parquet or .arrow file or a folder that datasets'
 * save_to_disk wrote; else the library's index. 0, or nonzero with the
 * message printed (2: a usage error). */
int pack_input_open(pack_input *in, struct pack_opts *o);
void pack_input_close(pack_input *in);
/* Class name c (c < in->nnames), borrowed. */
const char *pack_input_class(const pack_input *in, int64_t c);
/* Sample i's source as the manifest records it, as snprintf: a folder's
 * path relative to it, a list's path, "shard.tar:key", "file.parquet:row". */
int pack_input_source(const pack_input *in, int64_t i, char *buf, size_t cap);
/* Sample i's name in messages, as snprintf: a file's path as the source
 * gives it, "shard.tar:key.ext", "file.parquet:row". */
int pack_input_name(const pack_input *in, int64_t i, char *buf, size_t cap);
/* Sample i's own key for --keep-keys ("" when it has none), as snprintf. */
int pack_input_key(const pack_input *in, int64_t i, char *buf, size_t cap);
/* Reads sample i into *it, whole or (prefix > 0) its picture's first prefix
 * bytes at most. Any thread, for the library's index; NULL-free it after. */
int pack_input_read(const pack_input *in, int64_t i, size_t prefix, pack_item *it);
/* Whether items come from pack_input_fetch (tables) rather than
 * pack_input_read (the workers). */
int pack_input_fetched(const pack_input *in);
/* Tables: asks for samples idx[0..n) (pack_input_fetch receives them);
 * then receives them into items[0..n). Main thread; 0, or -1 with the
 * message printed (the reader process failed: the run stops). */
int pack_input_ask(pack_input *in, const int64_t *idx, int64_t n);
int pack_input_fetch(pack_input *in, const int64_t *idx, int64_t n, pack_item *items);
void pack_item_free(pack_item *it);

/* ---- the run's options and results ---- */

typedef struct pack_opts {
    const char *src, *out, *prefix;
    pack_image_opts img;
    double raw_fraction; /* --raw-fraction F (>= 0), or -1 */
    int64_t shard_count; /* positions per shard (--shard-count) */
    uint64_t shard_size; /* > 0: close a shard once it holds this many bytes (--shard-size) */
    int workers;
    int shuffle;
    uint64_t seed;
    int skip_errors;        /* --on-error skip */
    int stop_after;         /* test only: exit after writing this many shards (0: never) */
    const char *extras_arg; /* --extras as given: NULL (all), "none" or a list */
    int keep_keys;          /* --keep-keys */
    int64_t part, parts;    /* --part K/N; parts 0: the whole source */
    /* tables (--image-column, --label-column, --extras-columns; NULL: found) */
    const char *image_column, *label_column, *extras_columns;
} pack_opts;

typedef struct pack_shard {
    int64_t samples;
    uint64_t bytes;
} pack_shard;

typedef struct pack_bad {
    int64_t pos;
    char reason[PACK_ERRCAP];
} pack_bad;

/* Packs in (pack_run.c): 0, 1 on an error (printed), 3 when stopped by
 * --stop-after-shards. */
int pack_run(const pack_opts *o, pack_input *in);

/* Shard k's file name (no folder), and of the part's manifest
 * ("manifest.json" without parts). */
void pack_shard_name(const pack_opts *o, int64_t k, char *buf, size_t cap);
void pack_manifest_name(const pack_opts *o, char *buf, size_t cap);
/* Positions [*a, *b) of o's part (all of them without parts). */
void pack_part_range(const pack_opts *o, int64_t n, int64_t *a, int64_t *b);
/* Creates (or truncates) the file at path in OUT for writing, as fopen "wb"
 * does, but never through a link: a link of that name is an error (ELOOP). */
FILE *pack_create(const char *path);

/* ---- keys (pack_keys.c) ---- */

typedef struct pack_keys pack_keys;
/* The key of each position of order[0..n): its position, zero-padded to
 * the width of the largest; with keep, the source's own key where it is
 * unique and tar-safe (pack_key_safe), the position's elsewhere. NULL with
 * the message printed. */
pack_keys *pack_keys_make(const pack_input *in, const int64_t *order, int64_t n, int keep);
void pack_keys_free(pack_keys *k);
/* Position pos's key, as snprintf. */
int pack_key(const pack_keys *k, int64_t pos, char *buf, size_t cap);
/* The position whose key is key[0..len), or -1. */
int64_t pack_key_pos(const pack_keys *k, const char *key, size_t len);
/* How many positions keep their source's key. */
int64_t pack_keys_kept(const pack_keys *k);
/* 1 when key can name a tar sample as webdataset splits names: printable
 * ASCII without '\\', a relative path without empty, "." or ".." parts, no
 * '.' in its last part, not starting "__" (webdataset's own names), and
 * "<key>.<ext>" with an extension of maxext bytes fits a ustar header
 * (pack_tar_member). */
int pack_key_safe(const char *key, size_t len, size_t maxext);

/* ---- tar (pack_tar.c) ---- */

/* Writes one member with fixed owner, mode and time, so shards are
 * reproducible; a name longer than 99 bytes is split into ustar's prefix
 * and name at a '/'. 0, or -1 (also for a name that cannot be split so). */
int pack_tar_member(FILE *f, const char *name, const void *data, size_t len);
/* 1 when pack_tar_member can write the name. */
int pack_tar_name_fits(const char *name, size_t len);

/* Calls fn for each regular member of the tar at path, in order: its name
 * (GNU long names and pax paths honoured), the offset of its data and its
 * size; f is the open shard, positioned anywhere (fn may read from it).
 * Stops at the end-of-archive block, a bad header, or fn's nonzero return
 * (which it returns). 0, or -1 when the file cannot be read or is not a tar. */
typedef int pack_tar_fn(void *ctx, FILE *f, const char *name, uint64_t off, uint64_t size);
int pack_tar_walk(const char *path, pack_tar_fn *fn, void *ctx);

/* The extensions of the tar source spec's members other than pictures,
 * .npy and the label ("cls"): what --extras passes through by default,
 * sorted, at most RF_SOURCE_MAX_EXTRAS (lowercase, into o->extras /
 * o->nextras, the strings in buf). 0, or -1 with the reason in err. */
int pack_tar_exts(const char *spec, rf_source_opts *o, char *buf, size_t cap, char *err,
                  size_t errcap);

/* ---- manifest (pack_manifest.c) ---- */

/* What the run packed, for its manifest and summary. */
typedef struct pack_done {
    const int64_t *order;
    const pack_keys *keys;
    const pack_shard *si;
    int64_t nshards;
    const pack_bad *bads;
    int64_t nbad;
    int64_t first, end; /* positions of the part */
} pack_done;

/* Counts of the picture members written, by kind: */
typedef struct pack_kinds {
    int64_t raw, jpeg, other; /* .npy, .jpg, an original kept (.png, ...) */
    uint64_t bytes;           /* of the shards */
} pack_kinds;

/* Writes OUT/manifest.json, or the part's (pack_manifest_name), through a
 * temporary name: counts, classes, options, the part, per shard its name,
 * samples, bytes, sha256 (of its bytes, hex), the kinds of its pictures,
 * its index (read back from the shard itself; source_manifest.h has the
 * layout) and each sample's source, the skipped samples. The kinds counted
 * go to *kinds. 0 or -1. */
int pack_write_manifest(const pack_opts *o, const pack_input *in, const pack_done *d,
                        pack_kinds *kinds);

/* JSON string of s[0..n) (quotes, escapes). */
void pack_json_str(FILE *f, const char *s, size_t n);

/* ---- merge (pack_merge.c) ---- */

/* ringfeed-pack merge [--without-shards] OUT: 0, or 1 with the message
 * printed. shards_here 0: the shards are not checked (not in OUT). */
int pack_merge(const char *out, int shards_here);

#endif
