/*
 * source.h - the index of samples: where each sample's bytes are and its label.
 *
 * Four kinds. Image folder and list file: one file per sample, paths in one
 * string arena addressed by offsets. WebDataset tar shards: per sample the
 * shard id, the image member's data offset and length in flat arrays, the
 * shard paths once in the arena (and the member names, for messages); with
 * extras, also the span of the sample's members that one read fetches and
 * where each extra member lies in it. Record files: nothing per sample at
 * all; sample i is found from the files' record counts.
 *
 * No per-sample heap allocation: a million-sample index is a few tens of MB
 * and builds in about a second. Indexing never opens or stats the sample
 * files themselves (folder, list); tar shards are opened once for the header
 * walk (or, described by a ringfeed-pack manifest.json beside them, for the
 * reads that check its first and last headers and its label members),
 * record files are stat'ed for their sizes.
 *
 * source.c picks the kind and holds the accessors; each kind indexes in a
 * file of its own (folder.c, list.c, tar.c, records.c) behind kinds.h;
 * pattern.c expands shard patterns, arena.c holds the storage the kinds
 * write into. A mixture of sources (mix.c) holds one index per source; the
 * accessors take its global sample indexes and ask the source that holds
 * the sample (rf__source_at).
 */
#ifndef RF_SOURCE_H
#define RF_SOURCE_H

#include <stddef.h>
#include <stdint.h>

enum rf_source_kind {
    RF_SOURCE_FOLDER = 1,
    RF_SOURCE_LIST = 2,
    RF_SOURCE_TAR = 3,
    RF_SOURCE_RECORDS = 4,
    RF_SOURCE_MIX = 5, /* a mixture: several sources of the kinds above (source_mix.h) */
};

#define RF_SOURCE_MAX_EXTRAS 16 /* extra members a tar source may return per sample */
#define RF_SOURCE_MAX_EXT 63    /* bytes of a member extension (label, extras) */
/* The largest label a tar shard's label member may hold (18 digits: the walk
 * reads no more, tar_fields.c), and so the largest a manifest.json
 * or a kept index may state: nclasses = max label + 1 never overflows. */
#define RF_SOURCE_MAX_LABEL INT64_C(999999999999999999)

/* What rf__source_open_ex needs beyond the spec. Zero: no records, tar
 * labels from the .cls member, no extras. */
typedef struct rf_source_opts {
    uint64_t record_size; /* > 0: the spec names record files of this record size */
    uint64_t header_size; /* records: bytes skipped at the start of each file */
    /* tar shards only (any other kind refuses them, unless label is "cls") */
    const char *label;    /* extension of the label member, lowercase; NULL: "cls" */
    int unlabeled;        /* 1: no label member; every label is -1 */
    int nextras;          /* extra members returned per sample, at most RF_SOURCE_MAX_EXTRAS */
    const char *extras[RF_SOURCE_MAX_EXTRAS]; /* their extensions, lowercase, distinct */
    /* remote shards (s3://, http(s)://): the cache and the transfers */
    const char *cache_dir;     /* NULL: the default (cache.h) */
    uint64_t cache_limit;      /* 0: auto (cache.h) */
    int fetch_retries;         /* tries after the first */
    int64_t fetch_timeout_ms;  /* 0: 30 s */
    int fetch_parallel;        /* 0: 4 */
    const _Atomic int *cancel; /* set by any thread: the remote waits end (remote.h); NULL */
    /* the remote room's kind (kinds.h: rf_source_remote); NULL: a URL is
     * taken for a local path */
    const struct rf_source_remote *remote;
} rf_source_opts;

struct rf_remote;
struct rf_source_mix;

typedef struct rf_source {
    int kind;
    int64_t n;            /* samples */
    int64_t nclasses;     /* folder: class folders; list, tar: max label + 1; records and
                           * unlabeled tar: 0 */
    char *arena;          /* NUL-terminated strings, back to back */
    size_t arena_len, arena_cap;
    uint64_t *path_off;   /* folder, list: n paths; tar: n member names (into arena) */
    int64_t *labels;      /* folder, list, tar: n labels (unlabeled tar: -1); records: NULL
                           * (labels are 0) */
    int64_t cap;          /* allocated entries of the per-sample arrays */
    uint64_t *class_off;  /* folder: nclasses offsets of class names into arena */
    /* tar, records: the files, in spec order */
    uint32_t nfiles;
    uint64_t *file_off;   /* nfiles offsets of the file paths into arena */
    uint32_t nfiles_manifest; /* tar: shards indexed from a ringfeed-pack manifest.json
                               * instead of a header walk (manifest.h) */
    uint32_t nfiles_mismatched; /* tar: shards the manifest.json beside them named but
                                 * did not describe (rewritten since: another size,
                                 * headers or labels), walked instead */
    /* tar: per sample */
    uint32_t *shard;      /* index into file_off */
    uint64_t *data_off;   /* offset of the member's data in its shard */
    uint32_t *data_len;   /* bytes of the member */
    /* tar with extras (nextras > 0): per sample the span [span_off, + span_len)
     * of its members that one read fetches (image and extras), and for each
     * extra e its place in that span: ext_rel[i * nextras + e], ext_len[...]
     * (RF_SOURCE_ABSENT: the sample has no such member) */
    int nextras;
    uint64_t *span_off;
    uint32_t *span_len;
    uint32_t *ext_rel, *ext_len;
    /* records */
    uint64_t record_size, header_size;
    int64_t *first;       /* nfiles + 1: index of the first record of each file; first[nfiles] = n */
    /* remote tar shards: file_off holds their URLs, local_off the paths of
     * their copies in the cache (read only while pinned: remote.h) */
    uint64_t *local_off;
    /* remote tar shards: the URLs as they may be shown (redact.h: no
     * userinfo, no query), which rf__source_path gives */
    uint64_t *shown_off;
    struct rf_remote *remote; /* owned: the fetcher, the cache, the pins */
    const struct rf_source_remote *remote_kind; /* what made remote, and frees it */
    /* tar shards indexed from a ringfeed-pack manifest.json that states the
     * pictures' sizes: 2 per sample (width, height), 0 where not stated;
     * NULL when no shard's manifest did (sizes.h) */
    uint32_t *dims;
    /* a mixture (RF_SOURCE_MIX): n, nclasses, nextras and, of records,
     * record_size are the mixture's; its sources hold the rest (owned) */
    struct rf_source_mix *mix;
} rf_source;

/* Indexes `spec`:
 *   - several specs separated by '\n' (each may be a pattern, below);
 *   - a brace pattern (zero-padded ranges "{0000..0099}", lists "{a,b}") or a
 *     glob ("*", "?", "[...]"; matches sorted), expanded to files;
 *   - a directory: image folder; a regular file named *.tar: a tar shard;
 *     any other regular file: a list file;
 *   - s3://BUCKET/KEY or http(s)://HOST/PATH entries (all of them then):
 *     remote tar shards (brace patterns; globs over s3:// by listing),
 *     fetched whole into the local cache, when opts->remote hands the
 *     remote room's kind (lib/remote/source_remote.c).
 * With opts->record_size > 0 every file is a record file instead. Several
 * files must all be tar shards (or record files). A compressed tar (by its
 * name: .tar.gz, .tgz, .tar.zst, .tar.bz2, .tar.xz, ...; or by the magic
 * bytes that open a shard) is refused with a message saying how to make a
 * plain one. Labels other than "cls", label-less and extras are refused
 * (RF_E_INVALID) for any kind but tar shards. On error returns a negative
 * RF_E_* and writes the reason into err; *s is then empty. */
int rf__source_open_ex(rf_source *s, const char *spec, const rf_source_opts *opts, char *err,
                       size_t errcap);
/* rf__source_open_ex without records. */
int rf__source_open(rf_source *s, const char *spec, char *err, size_t errcap);
void rf__source_close(rf_source *s);

/* Bytes held by the index (for the stats). */
size_t rf__source_bytes(const rf_source *s);

/* File index of record i (binary search over first[]). */
uint32_t rf__source_record_file(const rf_source *s, int64_t i);

/* The index holding global sample *i of a mixture, *i made that source's
 * own index (source_mix.c). */
const rf_source *rf__source_mix_part(const rf_source *s, int64_t *i);

/* The index that holds sample *i: s itself, or for a mixture the source
 * holding it, *i then made its own index. Every per-sample accessor asks
 * it first. */
static inline const rf_source *rf__source_at(const rf_source *s, int64_t *i)
{
    return s->kind == RF_SOURCE_MIX ? rf__source_mix_part(s, i) : s;
}

/* 1 when samples are fixed-size records (bytes passed through): a record
 * source, or a mixture of them. */
static inline int rf__source_records(const rf_source *s)
{
    return s->kind == RF_SOURCE_RECORDS || (s->kind == RF_SOURCE_MIX && s->record_size > 0);
}

/* Shards: the files that hold many samples each (tar shards, record
 * files), nfiles of them; 0 for an image folder or a list file, whose
 * samples are files of their own. The shard-aware shuffle groups by them. */
static inline int64_t rf__source_nshards(const rf_source *s)
{
    return s->kind == RF_SOURCE_TAR || s->kind == RF_SOURCE_RECORDS ? (int64_t)s->nfiles : 0;
}

/* The shard (index into the files) holding sample i, for a source with
 * shards (rf__source_nshards > 0). */
static inline uint32_t rf__source_shard(const rf_source *s, int64_t i)
{
    return s->kind == RF_SOURCE_TAR ? s->shard[i] : rf__source_record_file(s, i);
}

/* The file holding sample i's bytes: its own path (folder, list) or its
 * shard / record file (a remote shard's URL as it may be shown). Valid
 * while the source lives. */
static inline const char *rf__source_path(const rf_source *s, int64_t i)
{
    s = rf__source_at(s, &i);
    if (s->shown_off)
        return s->arena + s->shown_off[s->shard[i]];
    if (rf__source_nshards(s) > 0)
        return s->arena + s->file_off[rf__source_shard(s, i)];
    return s->arena + s->path_off[i];
}

/* The local file the reader reads for sample i: rf__source_path, or for
 * remote shards the shard's copy in the cache (its name in messages: the
 * reader reads a remote shard through its pin, rf__remote_pin_fd). */
static inline const char *rf__source_read_path(const rf_source *s, int64_t i)
{
    s = rf__source_at(s, &i);
    if (s->local_off)
        return s->arena + s->local_off[s->shard[i]];
    return rf__source_path(s, i);
}

/* Where sample i's bytes are in that file: *ranged = 0 for the whole file
 * (folder, list), else [*offset, *offset + *length): a record, a tar image
 * member, or with extras the span of the sample's members. */
void rf__source_extent(const rf_source *s, int64_t i, int *ranged, uint64_t *offset,
                       uint64_t *length);

#define RF_SOURCE_ABSENT UINT32_MAX /* ext_len of a member the sample lacks */

/* Tar with extras: where sample i's image lies in the bytes of its extent. */
static inline void rf__source_image_in_span(const rf_source *s, int64_t i, uint64_t *rel,
                                            uint64_t *len)
{
    s = rf__source_at(s, &i);
    *rel = s->data_off[i] - s->span_off[i];
    *len = s->data_len[i];
}

/* Tar with extras: where extra e of sample i lies in the bytes of its
 * extent; 0 when the sample has no such member. */
static inline int rf__source_extra_in_span(const rf_source *s, int64_t i, int e, uint64_t *rel,
                                           uint32_t *len)
{
    s = rf__source_at(s, &i);
    size_t at = (size_t)i * (size_t)s->nextras + (size_t)e;
    if (s->ext_len[at] == RF_SOURCE_ABSENT)
        return 0;
    *rel = s->ext_rel[at];
    *len = s->ext_len[at];
    return 1;
}

/* Label of a mixture's sample i: its source's plus its label offset
 * (source_mix.c). */
int64_t rf__source_mix_label(const rf_source *s, int64_t i);

/* Label of sample i (0 for records, -1 for unlabeled tar shards). */
static inline int64_t rf__source_label(const rf_source *s, int64_t i)
{
    if (s->kind == RF_SOURCE_MIX)
        return rf__source_mix_label(s, i);
    return s->labels ? s->labels[i] : 0;
}

/* Hash of the index (rf_loader_fingerprint): the count, and per sample its
 * file's base name, tar member name or record offset, byte length where the
 * index holds one, and label. */
uint64_t rf__source_fingerprint(const rf_source *s);

/* Name of sample i for messages, as snprintf: the path (folder, list),
 * "shard.tar:key.jpg" (tar: the image member) or "file.bin at offset N"
 * (records). */
int rf__source_name(const rf_source *s, int64_t i, char *buf, size_t cap);

/* Name of sample i as users identify it, as snprintf: the path (folder,
 * list), "shard.tar:key" (tar: webdataset's __url__ and __key__) or
 * "file.bin@offset" (records). */
int rf__source_sample_name(const rf_source *s, int64_t i, char *buf, size_t cap);

/* Tar: the key of sample i (its image member's name up to the first '.' of
 * the base name), as snprintf; "" for other kinds. */
int rf__source_key(const rf_source *s, int64_t i, char *buf, size_t cap);

/* Appends one sample of a folder / list index (used by the indexers and by
 * tests; arena.c). 0 or RF_E_NOMEM. */
int rf__source_add(rf_source *s, const char *path, size_t path_len, int64_t label);

/* (pattern.c) Expands a brace / glob pattern into files (sorted glob matches, brace
 * alternatives in order). Calls fn(path, ctx) for each; stops at the first
 * nonzero return and returns it. A pattern without braces or glob
 * characters yields itself. Returns RF_E_SOURCE with the reason in err for a
 * malformed pattern, a glob matching nothing, or more than 1<<20 paths. */
int rf__source_expand(const char *pattern, int (*fn)(const char *path, void *ctx), void *ctx,
                      char *err, size_t errcap);

#endif
