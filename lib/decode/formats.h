/*
 * formats.h - the seam between decode.c and the image formats
 * (jpeg.c; PNG, WebP, ... beside it later).
 *
 * decode.c sniffs the format from the first bytes (asking each format in
 * turn) and drives that format's decoder in two steps around the geometry, which only it draws: the header
 * (the picture's size, nothing decoded yet), then the region, where the
 * format decodes the rows and columns the resampler will read (at a reduced
 * scale where it can, rewriting the geometry for it) and hands them back as
 * RGB rows. decode.c resamples them into the slot. A format keeps its own
 * state, one per decode worker, inside rf_decoder. A new format is one more
 * file defining one more rf_format, and one more line in decode.c's list.
 */
#ifndef RF_DECODE_FORMATS_H
#define RF_DECODE_FORMATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "transform.h"

/* Decoded pixels handed back by a format: RGB rows of the region
 * [x0, x0 + w) x [y0, y0 + h) of the picture as decoded (full_w x full_h,
 * after any scaling), row stride `stride` bytes. Valid until the format's
 * next call. */
typedef struct rf_region {
    const uint8_t *rows;
    size_t stride;
    int full_w, full_h;
    int x0, y0, w, h;
    int denom; /* scaling used: the picture was decoded at 1/denom (1, 2, 4, 8) */
    int whole; /* 1: the stream was decoded to its end */
} rf_region;

/* One image format: its decoder's entry points, all taking the state that
 * create made (one per decode worker, never shared between threads). */
typedef struct rf_format {
    /* 1 when data starts as this format's files do. */
    int (*sniff)(const uint8_t *data, size_t len);
    void *(*create)(void); /* NULL when out of memory */
    void (*destroy)(void *state);
    /* Reads the header of data[0..len) (borrowed until the region is decoded
     * or the picture abandoned) and gives the picture's size; what is
     * decoded later obeys max_scans (RF_E_LIMIT past it; formats without
     * scans ignore it). 0, or RF_E_DECODE / RF_E_LIMIT with the reason in
     * err, with nothing left to abandon. */
    int (*header)(void *state, const uint8_t *data, size_t len, int max_scans, int *width,
                  int *height, char *err, size_t errcap);
    /* After header: decodes what the kept window of g reads into *r, at a
     * reduced scale 1/denom where the format can, the output size allows
     * and denom <= max_denom (g is then rewritten for that scale). max_denom
     * is 1 under RF_P_EXACT: full resolution, the pixels PIL decodes; a
     * format that never scales ignores it. With check_tail, data past the
     * region is decoded too, to find damage there. 0, or RF_E_DECODE /
     * RF_E_LIMIT / RF_E_NOMEM with the reason in err. */
    int (*region)(void *state, rf_geom *g, int max_denom, int check_tail, rf_region *r, char *err,
                  size_t errcap);
    /* Abandons the picture whose header was read (decode.c refused it). */
    void (*abandon)(void *state);
} rf_format;

/* The formats (sniffed in this order by decode.c). */
extern const rf_format rf__format_jpeg; /* jpeg.c: libjpeg-turbo */
extern const rf_format rf__format_webp; /* webp.c: libwebp (refuses WebP without it) */
extern const rf_format rf__format_png;  /* png.c: libspng (or "unsupported" without) */
extern const rf_format rf__format_bmp;  /* bmp.c: BMP, as PIL reads it */
extern const rf_format rf__format_pnm;  /* pnm.c: PBM/PGM/PPM P1..P6, as PIL reads them */
extern const rf_format rf__format_npy;  /* npy.c: raw uint8 pixels in NumPy's .npy */

/* (decode.c) The formats in the order they are sniffed: rf__format_count()
 * of them; rf__format_sniff gives the index of the one data[0..len) is in,
 * or -1. For other users of the seam (ringfeed-pack). */
int rf__format_count(void);
const rf_format *rf__format_at(int i);
int rf__format_sniff(const uint8_t *data, size_t len);

/* A per-worker buffer *buf of *cap bytes, replaced (contents not kept) by one
 * of at least need bytes when smaller. 0, or -1 when out of memory (then
 * *buf is NULL and *cap 0). The formats' scratch rows and tables. */
static inline int rf__buf_reserve(uint8_t **buf, size_t *cap, size_t need)
{
    if (*cap >= need)
        return 0;
    free(*buf);
    *cap = 0;
    *buf = malloc(need ? need : 1);
    if (!*buf)
        return -1;
    *cap = need;
    return 0;
}

#endif
