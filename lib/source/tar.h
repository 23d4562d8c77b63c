/*
 * tar.h - what the tar source (tar.c) shares with the file
 * reading its header fields (tar_fields.c).
 */
#ifndef RF_SOURCE_TAR_H
#define RF_SOURCE_TAR_H

#include <stddef.h>
#include <stdint.h>

#define TAR_BLOCK 512

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
/* The text of a label member: an integer >= 0, blanks around it allowed.
 * 0, or -1. */
int rf__tar_parse_label(const char *t, size_t n, int64_t *out);

#endif
