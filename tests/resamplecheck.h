/*
 * resamplecheck.h - what the resampler's tests share (test_transform.c,
 * test_resample.c, test_resample_ref.c): the pictures they resample, one
 * rf__resample call on a whole picture, a window cut from a whole result,
 * and the bytes Pillow 9.4 gives for nine geometries (the goldens).
 */
#ifndef RF_RESAMPLECHECK_H
#define RF_RESAMPLECHECK_H

#include <stddef.h>
#include <stdint.h>

#include "transform.h"

/* The golden picture (a formula both sides compute) and seeded smooth
 * gradients plus noise; w * h * 3 bytes, malloc'd. */
uint8_t *rc_formula_pic(int w, int h);
uint8_t *rc_random_pic(int w, int h, uint32_t seed);

/* FNV-1a, 32 bits (what the goldens were checksummed with). */
uint32_t rc_fnv32(const uint8_t *b, size_t n);

/* Bytes of g's output window. */
size_t rc_out_bytes(const rf_geom *g);

/* Resamples the whole w x h picture with g; returns a malloc'd buffer. */
uint8_t *rc_run(rf_resampler *r, const rf_geom *g, const uint8_t *pic, int w, int h, int layout);

/* The window of g cut from a whole resampled picture (NHWC), zero-padded,
 * mirrored when g says so. */
uint8_t *rc_cut(const rf_geom *g, const uint8_t *full);

/* Made with /usr/bin/python3, Pillow 9.4.0 (golden.py):
 *
 *   from PIL import Image
 *   def pic(w, h):
 *       im = Image.new("RGB", (w, h))
 *       im.putdata([tuple((x*x*3 + y*y*2 + x*y*5 + x*11 + y*7 + c*85) & 255
 *                         for c in range(3)) for y in range(h) for x in range(w)])
 *       return im
 *   def fnv(b):
 *       hsh = 2166136261
 *       for v in b:
 *           hsh = ((hsh ^ v) * 16777619) & 0xffffffff
 *       return hsh
 *   B = Image.BILINEAR
 *   p, q = pic(37, 23), pic(60, 45)
 *   cases = [
 *       ("down",      p.resize((16, 11), B)),
 *       ("up",        p.resize((50, 30), B)),
 *       ("crop_down", p.crop((5, 3, 30, 20)).resize((13, 9), B)),
 *       ("crop_up",   p.crop((10, 4, 22, 12)).resize((31, 29), B)),
 *       ("frac_box",  p.crop((2, 1, 34, 22)).resize((11, 7), B, box=(0.5, 0.5, 31.5, 20.5))),
 *       ("quarter",   p.crop((1, 0, 37, 23)).resize((9, 6), B, box=(0.25, 0.75, 35.125, 22.5))),
 *       ("h_only",    p.resize((20, 23), B)),
 *       ("v_only",    p.resize((37, 10), B)),
 *       ("center",    q.resize((42, 32), B).crop((7, 2, 35, 30))),
 *   ]
 *   for name, im in cases:
 *       b = im.tobytes()
 *       n = len(b)
 *       idx = [0, n // 7, n // 3, n // 2, (2 * n) // 3, n - 1]
 *       print('{"%s", %d, %d, 0x%08xu, {%s}, {%s}},' % (name, im.size[0], im.size[1],
 *             fnv(b), ", ".join(str(i) for i in idx), ", ".join(str(b[i]) for i in idx)))
 *
 * "crop then resize" is torchvision's resized_crop; the fractional boxes are
 * what a crop looks like after DCT scaling, resampled within the whole pixels
 * they touch. "center" is Resize(32) + CenterCrop(28) on a 60 x 45 picture. */
#define RC_NGOLDEN 9

typedef struct rc_golden {
    const char *name;
    int w, h;
    uint32_t fnv;
    int idx[6];
    int val[6];
} rc_golden;

extern const rc_golden rc_goldens[RC_NGOLDEN];

/* The geometries of the first RC_NGOLDEN_PIC goldens, on the formula
 * picture of RC_GOLDEN_W x RC_GOLDEN_H; the last golden is a center crop of
 * a 60 x 45 one. */
#define RC_GOLDEN_W 37
#define RC_GOLDEN_H 23
#define RC_NGOLDEN_PIC 8
extern const rf_geom rc_golden_geoms[RC_NGOLDEN_PIC];

/* d (n bytes) is Pillow's result gd: its checksum and six sampled bytes. */
void rc_check_golden(const rc_golden *gd, const uint8_t *d, size_t n);

#endif
