/*
 * transform.h - geometry of the augmentations: torchvision's transforms as
 * the source box, resampled size and kept window of a resample (rf_geom,
 * resample.h).
 *
 * Resize + CenterCrop: box = whole picture, out = resized size, window = the
 * centre crop. RandomResizedCrop: box = the integer crop, out = window =
 * S x S. A new transform is a new rf__geom_* function here, and a line where
 * decode.c draws the geometry.
 *
 * The rf__geom_* functions leave flip at 0: the caller draws the flip after
 * the crop's draws, as RandomHorizontalFlip follows RandomResizedCrop.
 */
#ifndef RF_TRANSFORM_H
#define RF_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "resample.h"
#include "rng.h"

/* What "center" resizes to before its crop, torchvision's Resize argument:
 * the shorter side to `side` (an int), or exactly h x w (a pair, side 0). */
typedef struct rf_resize_to {
    int side;
    int h, w;
} rf_resize_to;

/* torchvision Resize(to) + CenterCrop((out_h, out_w)) on a w x h picture:
 * an int Resize makes the short side to->side and the long side
 * int(side * long / short); crop offsets int(round((out - crop) / 2.0)),
 * padded as CenterCrop pads where the crop is larger (zeros,
 * (crop - out) // 2 before: crop_x/crop_y are then negative). */
void rf__geom_center_to(int w, int h, int out_h, int out_w, const rf_resize_to *to, rf_geom *g);

/* The default of "center"'s Resize for an out_h x out_w output:
 * round(max(out_h, out_w) / 0.875) (Python's round), the short side. */
rf_resize_to rf__resize_default(int out_h, int out_w);

/* torchvision Resize(round(size / 0.875)) + CenterCrop(size) on a w x h
 * picture: short side to R = round(size/0.875), long side int(R * long / short),
 * crop offsets int(round((out - size) / 2.0)) with Python's round-half-even
 * (500 x 375 at size 224: out 341 x 256, crop_x 58, crop_y 16).
 * With size > out on a side, the window is padded as CenterCrop pads (zeros,
 * (size - out) // 2 before): crop_x/crop_y are then negative. Since R >= size
 * this cannot happen here (a tiny picture is enlarged), but the resampler
 * handles such windows for any geometry. */
void rf__geom_center(int w, int h, int size, rf_geom *g);

/* RandomResizedCrop's ranges, torchvision's `scale` and `ratio` arguments:
 * the crop's area as a fraction of the picture's, and its width / height.
 * lo <= hi and every bound > 0 (options.c refuses anything else). */
typedef struct rf_rrc_range {
    double scale_lo, scale_hi, ratio_lo, ratio_hi;
} rf_rrc_range;

/* torchvision's defaults: scale (0.08, 1.0), ratio (3/4, 4/3). */
extern const rf_rrc_range rf__rrc_default;

/* torchvision RandomResizedCrop(size, scale, ratio) on a w x h picture,
 * drawing from rng in torchvision's order: per try uniform(scale),
 * exp(uniform(log ratio)), then randint for top and left; after 10 failed
 * tries the centre fallback (the largest centred crop whose ratio is within
 * range). */
void rf__geom_rrc_range(int w, int h, int size, const rf_rrc_range *rr, rf_rng *rng, rf_geom *g);

/* RandomResizedCrop((out_h, out_w), scale, ratio): as rf__geom_rrc_range,
 * the box resized to out_w x out_h (the same draws: the size plays no part
 * in them). */
void rf__geom_rrc_to(int w, int h, int out_h, int out_w, const rf_rrc_range *rr, rf_rng *rng,
                     rf_geom *g);

/* rf__geom_rrc_range with torchvision's default ranges. */
void rf__geom_rrc(int w, int h, int size, rf_rng *rng, rf_geom *g);

/* Decode-only: the picture must be size x size; identity geometry (both
 * resampling passes are skipped). A picture of any other size would be
 * stretched to size x size, so the output size always holds. */
void rf__geom_none(int w, int h, int size, rf_geom *g);

/* Python's round() on a double: nearest, ties to even. */
double rf__round_half_even(double x);

/* Largest DCT scaling denominator d in {1, 2, 4, 8} (libjpeg-turbo scales by
 * 1/d) such that the box shrunk by d still has at least out_w x out_h pixels,
 * i.e. the resampler never upsamples because of the DCT scaling. A format
 * also caps it at the region call's max_denom (1 under RF_P_EXACT). */
int rf__geom_dct_denom(const rf_geom *g);

/* Rewrites g for a picture decoded at 1/denom scale (box divided by denom). */
void rf__geom_scale(rf_geom *g, int denom);

#endif /* RF_TRANSFORM_H */
