/*
 * sha256.h - SHA-256 (FIPS 180-4), for names and digests that must not
 * collide by accident or by design: the cache folder's file names, the
 * packer's per-shard digests, a kept index's check of the bytes it describes.
 *
 * Streaming: init, update any number of times, final. rf__sha256 does the
 * three at once; rf__sha256_hex writes the first n bytes of a digest as 2n
 * lowercase hex digits and a NUL.
 */
#ifndef RF_SHA256_H
#define RF_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct rf_sha256 {
    uint32_t h[8];
    uint64_t bytes;    /* message length so far */
    uint8_t buf[64];   /* a block not yet compressed */
    size_t fill;       /* bytes in buf, < 64 */
} rf_sha256;

void rf__sha256_init(rf_sha256 *s);
void rf__sha256_update(rf_sha256 *s, const void *p, size_t n);
/* Writes the 32-byte digest; s must be initialised again before reuse. */
void rf__sha256_final(rf_sha256 *s, uint8_t out[32]);
void rf__sha256(const void *p, size_t n, uint8_t out[32]);
/* hex must hold 2 * n + 1 bytes; n <= 32. */
void rf__sha256_hex(const uint8_t digest[32], size_t n, char *hex);

#endif
