/*
 * letterbox.h - the geometries that keep a picture whole: Resize((H, W))
 * (the aspect ratio not kept), the letterbox (fit inside H x W keeping the
 * aspect ratio, the rest of the frame filled), the native size (shrunk to a
 * largest side, in an M x M frame) and the cover used by aspect-ratio
 * buckets (resized so that it covers H x W, then centre-cropped).
 *
 * Like transform.h's, each fills an rf_geom for the resampler; the
 * letterbox and the native size also place the window in a frame
 * (rf_frame, resample.h) and say where the picture lies in it (rf_fit), which
 * the batch reports (rf_batch_sizes, rf_batch_scales). The frame outside
 * the window is the caller's to fill (rf__frame_fill), before or after the
 * resample: the two never touch the same bytes.
 */
#ifndef RF_LETTERBOX_H
#define RF_LETTERBOX_H

#include <stdint.h>

#include "decode.h"
#include "resample.h"

/* Where a picture lies in its frame: its valid height and width, from the
 * frame's top-left corner or centred (rf__fit_offset), and the factor it
 * was resized by (the same on both axes but for rounding). */
typedef struct rf_fit {
    int h, w;
    float scale;
} rf_fit;

/* torchvision Resize((out_h, out_w)) of the whole w x h picture. */
void rf__geom_resize(int w, int h, int out_h, int out_w, rf_geom *g);

/* Resize((rh, rw)) + CenterCrop((out_h, out_w)) where (rh, rw) is the
 * smallest size of the picture's aspect ratio covering out_h x out_w: the
 * side that limits is out_h or out_w, the other round(side * ratio)
 * (Python's round), at least out. For aspect-ratio buckets' "center". */
void rf__geom_cover(int w, int h, int out_h, int out_w, rf_geom *g);

/* Letterbox into out_h x out_w: r = min(out_h / h, out_w / w); the picture
 * becomes round(w r) x round(h r) (Python's round; the limiting side
 * exactly out), placed in the out_h x out_w frame fr at the top-left
 * corner (top_left) or centred (offsets (out - size) / 2, rounded down).
 * fit gets its size and r. */
void rf__geom_letterbox(int w, int h, int out_h, int out_w, int top_left, rf_geom *g, rf_frame *fr,
                        rf_fit *fit);

/* Native size: a picture whose larger side exceeds max_side is shrunk so
 * that it becomes max_side (the other side round(side * max_side / larger),
 * at least 1); a smaller one is kept as it is (no resampling). Placed at
 * the top-left corner of a max_side x max_side frame. */
void rf__geom_native(int w, int h, int max_side, rf_geom *g, rf_frame *fr, rf_fit *fit);

/* The offset (*y, *x) of a fitted picture in an out_h x out_w frame. */
void rf__fit_offset(const rf_fit *fit, int out_h, int out_w, int top_left, int *y, int *x);

/* A fitted picture's place in its frame. */
typedef struct rf_region_box {
    int y, x, h, w;
} rf_region_box;

/* The place of the picture a decode fitted (t's fit_h, fit_w) into an
 * fh x fw frame, at its top-left corner or centred. */
void rf__fit_box(const rf_decode_times *t, int fh, int fw, int top_left, rf_region_box *r);

/* Writes fill[c] into every byte of channel c of the frame fr outside g's
 * window: NHWC rows of fr->w * 3 bytes, or NCHW planes (layout: enum
 * rf_layout). Nothing for fr->w = 0 (no frame). */
void rf__frame_fill(uint8_t *dst, int layout, const rf_geom *g, const rf_frame *fr,
                    const uint8_t fill[3]);

#endif
