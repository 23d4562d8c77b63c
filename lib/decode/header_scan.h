/*
 * header_scan.h - a picture's width and height from the first bytes of its
 * file, without a decoder: JPEG (the SOFn segment, reached by skipping the
 * segments before it, however long: EXIF, ICC), PNG (IHDR), WebP (VP8,
 * VP8L, VP8X), BMP (its info header), PNM P1..P6 (the header tokens, as
 * PIL reads them) and raw .npy arrays (the shape in the header).
 *
 * The caller reads a few hundred bytes, calls rf__header_dims, and reads
 * again where it says when that was not enough (a JPEG whose SOF lies past
 * a large EXIF segment: only the next segment's start is read, not the
 * segment). Every offset and length comes from hostile bytes: each is
 * checked against the bytes at hand and the picture's size.
 */
#ifndef RF_HEADER_SCAN_H
#define RF_HEADER_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* The bytes a first read should take. */
#define RF__HEADER_FIRST 1024
/* Rounds of reads before a picture counts as unreadable. */
#define RF__HEADER_ROUNDS 32
/* The most bytes a header that must be read whole (PNM, .npy) may take. */
#define RF__HEADER_MAX 65536

/* p[0..n) holds the picture's bytes [base, base + n) of total (its size).
 * Returns 1 with *w, *h; 0 when more bytes are needed: those from *next
 * on (*next == base + n: the caller appends to what it has, keeping base;
 * else it reads anew from *next, a JPEG marker, and passes base = *next);
 * -1 when the bytes are no picture of a format known here, or a header is
 * malformed or truncated (why: a static string). */
int rf__header_dims(const uint8_t *p, size_t n, uint64_t base, uint64_t total, uint32_t *w,
                    uint32_t *h, uint64_t *next, const char **why);

/* The size of the picture at [off, off + len) of the open file fd, read
 * with pread as rf__header_dims asks (RF__HEADER_FIRST bytes at a time, at
 * most RF__HEADER_ROUNDS reads). 1 with *w, *h; -1 when not (why: a static
 * string). */
int rf__header_dims_fd(int fd, uint64_t off, uint64_t len, uint32_t *w, uint32_t *h,
                       const char **why);

#endif
