/*
 * pack.h - shared between the parts of ringfeed-pack (tools/pack.c: options,
 * shards, manifest; tools/pack_image.c: one sample's bytes to a JPEG).
 */
#ifndef RF_PACK_H
#define RF_PACK_H
#include <stddef.h>
#include <stdint.h>

/* One worker's decoder, resampler and encoder: never shared between threads. */
typedef struct pack_coder pack_coder;

typedef struct pack_image_opts {
    int max_side;      /* 0: keep the size */
    int quality;       /* libjpeg quality, 1..100 */
    int keep_original; /* 1: a JPEG already within max_side is copied unchanged */
} pack_image_opts;

pack_coder *pack_coder_create(void);
void pack_coder_destroy(pack_coder *c);

/* Decodes data[0..len) at full resolution, shrinks it so that its longer
 * side is at most o->max_side (never enlarges) with the library's
 * antialiased resampler, and encodes it as a JPEG (4:2:0, optimized Huffman
 * tables) into *out (malloc'ed, *out_len bytes; the caller frees it). With
 * o->keep_original a JPEG needing no shrink is checked by decoding it whole
 * and then copied byte for byte. 0, or a negative RF_E_* with the reason in
 * err. */
int pack_image(pack_coder *c, const uint8_t *data, size_t len, const pack_image_opts *o,
               uint8_t **out, size_t *out_len, char *err, size_t errcap);

#endif
