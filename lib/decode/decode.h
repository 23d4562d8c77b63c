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
    int size;           /* output side S, when out_h and out_w are 0 */
    int out_h, out_w;   /* the output (a crop's size, or the frame a picture is fitted into) */
    int resize_side, resize_h, resize_w; /* center's Resize (transform.h: rf_resize_to); all 0:
                                            the default for the output */
    int cover;          /* center into an aspect-ratio bucket: resized to cover it */
    int ratio_relative; /* random_resized_crop into a bucket: the ratio range times the
                           bucket's width / height */
    int top_left;       /* letterbox: at the frame's top-left corner, not centred */
    int max_side;       /* none: > 0 native sizes (letterbox.h) */
    uint8_t fill[3];    /* the frame's padding (letterbox, native sizes) */
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
    int fit_h, fit_w;   /* letterbox, native sizes: the picture's size in its frame */
    float scale;        /* ... and the factor it was resized by */
} rf_decode_times;

rf_decoder *rf__decoder_create(void);
void rf__decoder_destroy(rf_decoder *d);

/* Decodes data[0..len) and writes the H x W x 3 uint8 result (a frame of
 * them: letterbox, native sizes) to dst in the requested layout. Returns 0, or RF_E_DECODE / RF_E_LIMIT / RF_E_NOMEM with
 * the reason in err (without the path: the caller adds it). Never longer than
 * the limits allow, never exits: corrupt data is an error. */
int rf__decode_sample(rf_decoder *d, const uint8_t *data, size_t len, const rf_decode_opts *o,
                      uint8_t *dst, char *err, size_t errcap, rf_decode_times *times);

/* The picture's size (*width, *height) and the geometry rf__decode_sample
 * draws for it (and its frame: letterbox, native sizes), from its header
 * alone (nothing decoded): what explain reports. 0, or RF_E_DECODE / RF_E_LIMIT with the reason in err. */
struct rf_geom;
struct rf_frame;
int rf__decode_geometry(rf_decoder *d, const uint8_t *data, size_t len, const rf_decode_opts *o,
                        struct rf_geom *g, struct rf_frame *fr, int *width, int *height, char *err,
                        size_t errcap);

#endif
