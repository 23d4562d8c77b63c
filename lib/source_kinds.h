/*
 * source_kinds.h - the seam between the index (source.c) and the source
 * kinds (source_folder.c, source_list.c, source_tar.c, source_records.c).
 *
 * source.c looks at the spec once, decides the kind and the paths it names,
 * and calls that kind's indexer; each indexer fills an empty rf_source
 * through the arena helpers below (source_arena.c) and nothing else. A new
 * kind (remote shards, say) is one more file with one more indexer of the
 * same shape, and one more branch where source.c picks.
 *
 * Calls run one way: source.c -> the kinds and the pattern expansion
 * (source_pattern.c) -> the arena helpers and the name rules
 * (source_names.c: picture extensions, compressed tars). No kind calls
 * another, or back into source.c, except that remote shards
 * (source_remote.c), once in the local cache, are walked by the tar kind's
 * rf__source_tar_shard.
 */
#ifndef RF_SOURCE_KINDS_H
#define RF_SOURCE_KINDS_H

#include <stddef.h>
#include <stdint.h>

#include "source.h"

/* ---- arena helpers (source_arena.c) -------------------------------------- */

/* A growable list of strings in a private arena (paths while walking or
 * expanding; freed once the index is built). */
typedef struct rf_strlist {
    char *buf;
    size_t len, cap;
    size_t *off; /* n offsets into buf */
    size_t n, ncap;
} rf_strlist;

/* Appends a, or "a/b" when b is not NULL. 0 or RF_E_NOMEM. */
int rf__strlist_add(rf_strlist *l, const char *a, const char *b);
/* String i of l. */
static inline const char *rf__strlist_at(const rf_strlist *l, size_t i)
{
    return l->buf + l->off[i];
}
/* Sorts by byte value (strcmp), whatever the locale. */
void rf__strlist_sort(rf_strlist *l);
void rf__strlist_free(rf_strlist *l);

/* Code point c as UTF-8 into out (4 bytes of room): its length, or 0 when
 * c is no character a name can hold (NUL, a surrogate, past U+10FFFF).
 * For the decoders of escaped names (manifest.json, S3 listings). */
static inline size_t rf__utf8(unsigned long c, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (c == 0 || (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF)
        return 0;
    if (c < 0x80) {
        o[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (unsigned char)(0xC0 | c >> 6);
        o[1] = (unsigned char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | c >> 12);
        o[1] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | c >> 18);
    o[1] = (unsigned char)(0x80 | (c >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

/* Copies str[0..len) and a NUL into s's arena; its offset in *off.
 * 0 or RF_E_NOMEM. */
int rf__source_put(rf_source *s, const char *str, size_t len, uint64_t *off);

/* Makes room for one more sample in the per-sample arrays: path_off and
 * labels, and with ranged also shard, data_off and data_len (tar), and the
 * span and extras arrays when s->nextras > 0. 0 or RF_E_NOMEM. */
int rf__source_reserve(rf_source *s, int ranged);

/* Puts the paths of files into the arena as s's files (nfiles, file_off). */
int rf__source_put_files(rf_source *s, const rf_strlist *files);

/* ---- what names mean (source_names.c) ------------------------------------ */

/* 1 when ext (the text after a '.', any case) is one of the picture formats
 * torchvision's ImageFolder indexes (IMG_EXTENSIONS: jpg jpeg png ppm bmp
 * pgm tif tiff webp): a folder's file whose name ends in ".<ext>" is a
 * sample, and so is a tar member "<key>.<ext>". Whether the bytes decode is
 * the decoders' business: a name never drops a file. */
int rf__image_ext(const char *ext);
/* The same list, for messages: ".jpg .jpeg ...". */
extern const char rf__image_exts_text[];

/* The compression of a shard named path (".tar.gz", ".tgz", ".tar.zst", ...),
 * or of bytes that open a file (gzip, zstd, bzip2 or xz magic): "gzip",
 * "zstd", "bzip2", "xz", or NULL. */
const char *rf__compressed_name(const char *path);
const char *rf__compressed_magic(const uint8_t *b, size_t n);
/* RF_E_SOURCE, with err saying that path is compressed (how) and how to
 * make a plain .tar of it. */
int rf__compressed_error(const char *path, const char *how, char *err, size_t errcap);

/* ---- patterns (source_pattern.c) ---------------------------------------- */

/* Every file a spec names: '\n'-separated entries, each an existing path or
 * a pattern expanded by rf__source_expand, appended to files in order.
 * RF_E_SOURCE with the reason in err when the spec names no files. */
int rf__source_files(const char *spec, rf_strlist *files, char *err, size_t errcap);

/* What expands a brace-free word holding glob characters: calls emit(path,
 * ectx) for each match, in order; 0 or the first nonzero emit returned, or
 * a negative RF_E_* with the reason in err. */
typedef int rf_source_glob_fn(void *gctx, const char *word, int (*emit)(const char *, void *),
                              void *ectx, char *err, size_t errcap);

/* rf__source_files with another glob (remote listings): entries are never
 * looked for on the local disk. */
int rf__source_files_with(const char *spec, rf_strlist *files, rf_source_glob_fn *glob,
                          void *gctx, char *err, size_t errcap);

/* ---- the kinds ---------------------------------------------------------- */

/* An indexer fills s (all zero on entry) with the samples of paths (what
 * the spec named: one folder, one list file, or the shard / record files in
 * spec order) and sets s->kind. It returns 0, or a negative RF_E_* with the
 * reason in err; source.c then frees whatever s holds. o is never NULL. */
typedef int rf_source_index_fn(rf_source *s, const rf_strlist *paths, const rf_source_opts *o,
                               char *err, size_t errcap);

rf_source_index_fn rf__source_index_folder;  /* source_folder.c: paths[0] is the root */
rf_source_index_fn rf__source_index_list;    /* source_list.c: paths[0] is the list file */
rf_source_index_fn rf__source_index_tar;     /* source_tar.c: WebDataset shards */
rf_source_index_fn rf__source_index_records; /* source_records.c: o->record_size > 0 */
/* source_remote.c: paths are s3:// or http(s):// URLs of tar shards; it
 * makes s->remote (the fetcher and the cache, from o) */
rf_source_index_fn rf__source_index_remote;
/* source_remote.c: globs over s3:// (a listing); gctx is the rf_remote */
rf_source_glob_fn rf__source_glob_remote;
/* source_remote.c: the text of the first <tag>...</tag> in [p, end) into out
 * (cap bytes, NUL-terminated, cut short if need be), XML's five named
 * entities and its numeric character references (&#13;, &#x1F;, as UTF-8)
 * decoded; the position after it, or NULL when there is none. */
const char *rf__source_xml_text(const char *p, const char *end, const char *tag, char *out,
                                size_t cap);
/* source_remote.c: the index kept beside a remote shard in the cache
 * (BASE.idx): samples [from, s->n) of one shard, for that URL, size,
 * validator etag and options key okey, as bytes (malloc'd, *len of them;
 * NULL without memory). */
void *rf__source_kept_make(const rf_source *s, int64_t from, const char *url, uint64_t size,
                           const char *etag, const char *okey, size_t *len);
/* source_remote.c: the samples of such bytes p[0..len) (borrowed, from a
 * file anyone could have written) appended to s as shard k's, *maxlabel
 * grown to their largest label: 1; 0 when they are not an index for that
 * URL, size (every sample inside the shard), etag and okey, or damaged (s
 * as before: the shard is walked instead); RF_E_NOMEM. */
int rf__source_kept_load(rf_source *s, uint32_t k, const void *p, size_t len, const char *url,
                         uint64_t size, const char *etag, const char *okey, int64_t *maxlabel);
/* source_remote.c: one page of an S3 ListObjectsV2 answer, body[0..len)
 * (NUL-terminated at len; the listing of glob word): each <Contents>' <Key>
 * (URL-decoded when the page says <EncodingType>url) that keypat matches
 * (fnmatch, '/' only by '/') appended to keys as "burl/key"; the page's
 * NextContinuationToken into token (tokcap bytes), "" when it is the last.
 * 0; RF_E_SOURCE with the reason in err (a key not URL-encoded right, a
 * truncated page without a token); RF_E_NOMEM. */
int rf__source_list_page(const char *body, size_t len, const char *word, const char *keypat,
                         const char *burl, rf_strlist *keys, char *token, size_t tokcap, char *err,
                         size_t errcap);

/* source_tar.c: indexes the shard at path (named shard in messages) as
 * shard number shard_id, appending its samples to s: from man's entry for
 * shard's base name when man (ringfeed-pack's manifest, or NULL) has one that
 * fits the file, else by walking its headers; *maxlabel grows to the largest
 * label. */
struct rf_manifest;
int rf__source_tar_shard(rf_source *s, uint32_t shard_id, const char *path, const char *shard,
                         const rf_source_opts *o, const struct rf_manifest *man,
                         int64_t *maxlabel, char *err, size_t errcap);

/* source_tar.c: the same from man's entry ms alone, the shard not read (a
 * remote shard not fetched yet): its samples appended, s->nfiles_manifest
 * counted. 0; nonzero (no sample, a member the entry cannot say enough
 * about, no memory): s is as before, and the shard must be walked. The
 * shard's first and last member headers are then unchecked: the caller
 * checks them (rf__tar_ends_ok) before any of its bytes are used. */
struct rf_manifest_shard;
int rf__source_tar_from_manifest(rf_source *s, uint32_t shard_id, const char *shard,
                                 const rf_source_opts *o, const struct rf_manifest *man,
                                 const struct rf_manifest_shard *ms, int64_t *maxlabel,
                                 char *err, size_t errcap);

/* The first (0) and last (1) member a manifest entry describes: name
 * key.ext, data offset and length, as the shard's headers must say. The
 * strings are borrowed. */
typedef struct rf_tar_ends {
    const char *key[2], *ext[2];
    uint64_t off[2], len[2];
} rf_tar_ends;
/* source_tar.c: ms's ends (pointing into man). */
void rf__tar_manifest_ends(const struct rf_manifest *man, const struct rf_manifest_shard *ms,
                           rf_tar_ends *e);
/* source_tar.c: 1 when the shard open in fd (fsize bytes) has, in the block
 * before each end's data, a valid header of a regular member so named and
 * sized; else 0 with the failing end in *bad (when bad is not NULL). */
int rf__tar_ends_ok(int fd, uint64_t fsize, const rf_tar_ends *e, int *bad);

#endif
