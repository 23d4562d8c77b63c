/*
 * resample.h - Pillow's antialiased bilinear resampler, computing only the
 * pixels that are kept.
 *
 * A resample is described in the coordinates of the decoded picture as a
 * source box (floats, like PIL's `box`) resampled to out_w x out_h, of which
 * the window [crop_x, crop_x + crop_w) x [crop_y, crop_y + crop_h) is kept
 * (rf_geom; transform.h makes them for torchvision's transforms). Because
 * each output pixel of PIL's separable resampler depends only on its own
 * coordinate, computing just the window gives exactly the pixels of "resize
 * everything, then crop".
 *
 * The filter is PIL's bilinear (triangle) filter, widened by the scale when
 * downscaling (antialiasing), with PIL's fixed-point rounding, horizontal
 * pass first into a uint8 intermediate, then vertical.
 *
 * The filter never reads outside the box rounded outward to whole pixels, C =
 * [floor(x0), ceil(x1)) x [floor(y0), ceil(y1)): the result is byte for byte
 * PIL's im.crop(C).resize((out_w, out_h), BILINEAR, box=box - C's corner).
 * For an integer box that is torchvision's resized_crop (crop, then resize;
 * PIL's resize(box=...) alone would also read pixels just outside the box);
 * for the whole picture it is a plain resize; for the fractional boxes that
 * DCT scaling leaves it reads the partly covered edge pixels and no more.
 */
#ifndef RF_RESAMPLE_H
#define RF_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "simd.h"

typedef struct rf_geom {
    double x0, y0, x1, y1; /* source box, in decoded-picture pixels */
    int out_w, out_h;      /* size of the whole resampled picture */
    int crop_x, crop_y;    /* kept window, in resampled-picture pixels */
    int crop_w, crop_h;
    int flip; /* 1: mirror the kept window horizontally */
} rf_geom;

/* The frame a window is written into: w x h pixels with the window's
 * top-left corner at (x, y) (letterbox, native sizes: letterbox.c). The
 * frame outside the window is not written (the caller fills it); a flip
 * mirrors the window within its place. w = 0: the frame is the window. */
typedef struct rf_frame {
    int w, h, x, y;
} rf_frame;

/* Source rectangle [*x0, *x1) x [*y0, *y1) that the kept window reads, for a
 * decoded picture of src_w x src_h pixels (clamped to it): the union of the
 * filter taps of the kept columns and rows, by the same rule as the
 * coefficients (or exactly the kept pixels where a pass is skipped). The box
 * must lie inside the picture, as it does for any geometry made above and
 * scaled by the denominator whose decoded size is ceil(w / denom). */
void rf__geom_bounds(const rf_geom *g, int src_w, int src_h, int *x0, int *y0, int *x1, int *y1);

enum { RF__LAYOUT_NHWC = 0, RF__LAYOUT_NCHW = 1 };

/* Scratch space of one worker (coefficient tables, intermediate rows); grows
 * as needed and is reused, so steady state allocates nothing. */
typedef struct rf_resampler rf_resampler;

rf_resampler *rf__resampler_create(void);
void rf__resampler_destroy(rf_resampler *r);

/* The instruction-set levels RF__SIMD_*: simd.h. */

/* Caps r at the RF__SIMD_* level `level` (lowered to the best available);
 * returns the level r now uses. For tests and benchmarks.
 * Thread-safety: as any use of r, one thread at a time. */
int rf__resampler_simd(rf_resampler *r, int level);

/* Resamples the kept window of g into dst (crop_w x crop_h x 3 uint8, NHWC
 * rows of crop_w*3 bytes, or NCHW planes of crop_w*crop_h bytes).
 * src holds RGB rows of the region [reg_x0, reg_x0 + reg_w) x
 * [reg_y0, reg_y0 + reg_h) of a src_w x src_h picture, row stride src_stride
 * bytes; the region must contain rf__geom_bounds(g, src_w, src_h) (checked
 * by assertions only). Window pixels outside the resampled picture
 * (CenterCrop padding) are 0. With g->flip the window is mirrored left-right.
 * Scratch grows to the largest request seen and is reused.
 * Returns 0, or -1 when scratch memory cannot be had. */
int rf__resample(rf_resampler *r, const rf_geom *g, int src_w, int src_h, const uint8_t *src,
                 size_t src_stride, int reg_x0, int reg_y0, int reg_w, int reg_h, uint8_t *dst,
                 int layout);

/* rf__resample into a frame (NULL: none): dst is the frame's, rows of
 * fr->w * 3 bytes or planes of fr->w * fr->h, the window at (fr->x,
 * fr->y), which must lie inside it. */
int rf__resample_into(rf_resampler *r, const rf_geom *g, const rf_frame *fr, int src_w, int src_h,
                      const uint8_t *src, size_t src_stride, int reg_x0, int reg_y0, int reg_w,
                      int reg_h, uint8_t *dst, int layout);

#endif /* RF_RESAMPLE_H */
