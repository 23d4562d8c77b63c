/*
 * png_unfilter.h - PNG's row filters undone (png_unfilter.c), for
 * png.c's own decoding of non-interlaced pictures and for the tests.
 */
#ifndef RF_PNG_UNFILTER_H
#define RF_PNG_UNFILTER_H

#include <stddef.h>
#include <stdint.h>

#include "simd.h"

/* The filter types of the PNG specification (a row's first byte). */
enum {
    RF__PNG_FILTER_NONE = 0,
    RF__PNG_FILTER_SUB = 1,
    RF__PNG_FILTER_UP = 2,
    RF__PNG_FILTER_AVG = 3,
    RF__PNG_FILTER_PAETH = 4,
};

/* The best RF__SIMD_* level this build and machine have for unfiltering:
 * RF__SIMD_SSE2 on x86-64, RF__SIMD_NONE elsewhere (AVX2 gains nothing on
 * filters whose every pixel waits for the one before). */
int rf__png_unfilter_best(void);

/* Undoes filter `filter` on the len bytes of row (the filter byte not
 * included), in place, with prev the row above already unfiltered (all
 * zeros for a picture's first row; never NULL) and bpp the bytes per
 * complete pixel, rounded up to 1 (1..8). level: an RF__SIMD_* level,
 * lowered to what rf__png_unfilter_best gives; every level gives the same
 * bytes. Reads and writes only row[0..len) and prev[0..len). 0, or -1 when
 * filter is not one of the five (row untouched). Thread-safety: any thread,
 * on its own rows. */
int rf__png_unfilter_row(int level, int filter, uint8_t *row, const uint8_t *prev, size_t len,
                         unsigned bpp);

#endif
