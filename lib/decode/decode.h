/*
 * decode.h - one picture's bytes to its place in a batch slot.
 *
 * A decoder owns one decoder state per image format (for JPEG a libjpeg
 * decompressor; formats.h) and the scratch memory of one worker
 * thread: never shared between threads.
 */
#ifndef RF_DECODE_H
#define RF_DECODE_H

#include <stddef.h>
#include <stdint.h>

typedef struct rf_decoder rf_decoder;

typedef struct rf_decode_opts {
    int transform;      /* enum rf_transform */
    int size;           /* output side S */
    int flip;           /* random horizontal flip, p = 0.5 */
    int layout;         /* enum rf_layout */
    int64_t max_pixels; /* largest width * height accepted */
    int max_scans;      /* most progressive scans accepted */
    uint64_t seed;      /* per-sample randomness: (seed, epoch, sample) */
    int64_t epoch;
    int64_t sample;
    int check_tail;     /* 1: entropy-decode the rows below the crop too (finds damage
                           there); 0: stop after the crop's last row */
    int exact;          /* 1 (RF_P_EXACT): decode at full resolution, no reduced-scale
                           decoding, so the pixels are PIL's; 0: a format may scale */
    /* RandomResizedCrop's ranges (RF_P_SCALE_* / RF_P_RATIO_*); a bound left 0
     * (a zeroed rf_decode_opts) is torchvision's default for it. */
    double scale_min, scale_max, ratio_min, ratio_max;
} rf_decode_opts;

typedef struct rf_decode_times {
    int64_t header_ns, decode_ns, resize_ns;
    int denom;          /* DCT scaling used (1, 2, 4, 8) */
    int width, height;  /* of the JPEG */
    int whole;          /* 1: the stream was decoded to its end marker */
} rf_decode_times;

rf_decoder *rf__decoder_create(void);
void rf__decoder_destroy(rf_decoder *d);

/* Decodes data[0..len) and writes the S x S x 3 uint8 result to dst in the
 * requested layout. Returns 0, or RF_E_DECODE / RF_E_LIMIT / RF_E_NOMEM with
 * the reason in err (without the path: the caller adds it). Never longer than
 * the limits allow, never exits: corrupt data is an error. */
int rf__decode_sample(rf_decoder *d, const uint8_t *data, size_t len, const rf_decode_opts *o,
                      uint8_t *dst, char *err, size_t errcap, rf_decode_times *times);

/* The picture's size (*width, *height) and the geometry rf__decode_sample
 * draws for it, from its header alone (nothing decoded): what explain
 * reports. 0, or RF_E_DECODE / RF_E_LIMIT with the reason in err. */
struct rf_geom;
int rf__decode_geometry(rf_decoder *d, const uint8_t *data, size_t len, const rf_decode_opts *o,
                        struct rf_geom *g, int *width, int *height, char *err, size_t errcap);

#endif
