/*
 * tar.h - what the tar source (tar.c) shares with the file
 * reading its header fields (tar_fields.c).
 */
#ifndef RF_SOURCE_TAR_H
#define RF_SOURCE_TAR_H

#include <stddef.h>
#include <stdint.h>

#define TAR_BLOCK 512
#define TAR_MAX_CLS 256 /* bytes of a label member's text, at most */

/* Octal field (leading spaces/NULs, digits, then NUL or space), or GNU
 * base-256 (high bit of the first byte). 0, or -1 when malformed. */
int rf__tar_number(const uint8_t *f, size_t n, uint64_t *out);
/* 1 when the 512-byte header h has a valid checksum (unsigned or, as old
 * tars wrote it, signed sum). */
int rf__tar_checksum_ok(const uint8_t *h);
int rf__tar_all_zero(const uint8_t *b, size_t n);
/* Copies src[0..n) and a NUL into the growable string *dst (*dcap bytes
 * allocated, *dlen set to n). 0 or RF_E_NOMEM. */
int rf__tar_set_str(char **dst, size_t *dcap, size_t *dlen, const char *src, size_t n);
/* Parses pax records "LEN key=value\n" for path and size. 0, -1 when
 * malformed, or RF_E_NOMEM. */
int rf__tar_pax_parse(const char *p, size_t n, char **path, size_t *path_cap, size_t *path_len,
                      int *have_path, uint64_t *size, int *have_size);
/* The member name a ustar header gives (prefix '/' name; no long names),
 * NUL-terminated into name, its length in *len. */
void rf__tar_ustar_name(const uint8_t *h, char name[TAR_BLOCK + 2], size_t *len);
/* The text of a label member: an integer >= 0 of at most 18 digits
 * (RF_SOURCE_MAX_LABEL), blanks around it allowed. 0, or -1. */
int rf__tar_parse_label(const char *t, size_t n, int64_t *out);

/* Label members read through a window (tar_check.c): the shard
 * open in fd, fsize bytes; zero the rest; rf__tar_window_free after. */
typedef struct rf_tar_window {
    int fd;
    uint64_t fsize;
    uint8_t *buf;
    size_t cap, len;
    uint64_t at;   /* buf holds the shard's bytes [at, at + len) */
    uint64_t last; /* the offset asked for last: how far apart labels lie */
} rf_tar_window;
/* 1 when the shard has, in the block before data offset off, a valid
 * header of a regular member named key.ext of len bytes, and len bytes of
 * label text there that say label; else 0 (also when they cannot be
 * read). */
int rf__tar_label_ok(rf_tar_window *w, const char *key, const char *ext, uint64_t off, uint64_t len,
                     int64_t label);
void rf__tar_window_free(rf_tar_window *w);

#endif
