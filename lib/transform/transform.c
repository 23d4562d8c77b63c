/*
 * transform.c - crop geometry of torchvision 0.14's transforms.
 *
 * The rf__geom_* functions repeat torchvision's arithmetic step by step
 * (Python's round-half-even, int() truncation, the order of random draws)
 * so that the same picture gives the same box and sizes as Resize+CenterCrop
 * or RandomResizedCrop would; the resampler (resample.c) then computes the
 * kept window. rf__geom_dct_denom and rf__geom_scale fit a geometry to a
 * picture decoded at a reduced scale.
 */
#include "transform.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Python's round() on a double: nearest, ties to even. Independent of the
 * floating-point rounding mode on purpose. */
double rf__round_half_even(double x)
{
    double f = floor(x);
    double d = x - f;
    if (d > 0.5 || (d == 0.5 && fmod(f, 2.0) != 0.0))
        f += 1.0;
    return f;
}

/* torchvision CenterCrop's offset on one axis of length n for a crop of size:
 * int(round((n - size) / 2.0)), or, when the crop is larger, minus the padding
 * put before the picture ((size - n) // 2). */
static int center_offset(int n, int size)
{
    if (size > n)
        return -((size - n) / 2);
    return (int)rf__round_half_even((double)(n - size) / 2.0);
}

rf_resize_to rf__resize_default(int out_h, int out_w)
{
    int m = out_h > out_w ? out_h : out_w;
    rf_resize_to to = {(int)rf__round_half_even((double)m / 0.875), 0, 0};
    return to;
}

void rf__geom_center_to(int w, int h, int out_h, int out_w, const rf_resize_to *to, rf_geom *g)
{
    assert(w > 0 && h > 0 && out_h > 0 && out_w > 0 && to && g);
    int rw, rh;
    if (to->side > 0) {
        /* Resize(R): the short side becomes R, the long side int(R * long /
         * short) (a correctly rounded double division, then truncation, as
         * in Python). */
        int r = to->side;
        if (w <= h) {
            rw = r;
            rh = (int)((double)r * (double)h / (double)w);
        } else {
            rh = r;
            rw = (int)((double)r * (double)w / (double)h);
        }
    } else {
        assert(to->h > 0 && to->w > 0);
        rh = to->h;
        rw = to->w;
    }
    memset(g, 0, sizeof *g);
    g->x0 = 0.0;
    g->y0 = 0.0;
    g->x1 = (double)w;
    g->y1 = (double)h;
    g->out_w = rw > 0 ? rw : 1;
    g->out_h = rh > 0 ? rh : 1;
    g->crop_x = center_offset(g->out_w, out_w);
    g->crop_y = center_offset(g->out_h, out_h);
    g->crop_w = out_w;
    g->crop_h = out_h;
    g->flip = 0;
}

void rf__geom_center(int w, int h, int size, rf_geom *g)
{
    rf_resize_to to = rf__resize_default(size, size);
    rf__geom_center_to(w, h, size, size, &to, g);
}

/* The literals torchvision's signature has, so that the defaults draw the
 * same doubles as before the ranges became options. */
const rf_rrc_range rf__rrc_default = {0.08, 1.0, 3.0 / 4.0, 4.0 / 3.0};

void rf__geom_rrc(int w, int h, int size, rf_rng *rng, rf_geom *g)
{
    rf__geom_rrc_range(w, h, size, &rf__rrc_default, rng, g);
}

void rf__geom_rrc_range(int w, int h, int size, const rf_rrc_range *rr, rf_rng *rng, rf_geom *g)
{
    rf__geom_rrc_to(w, h, size, size, rr, rng, g);
}

void rf__geom_rrc_to(int w, int h, int out_h, int out_w, const rf_rrc_range *rr, rf_rng *rng,
                     rf_geom *g)
{
    assert(w > 0 && h > 0 && out_h > 0 && out_w > 0 && rr && rng && g);
    assert(rr->scale_lo > 0 && rr->scale_lo <= rr->scale_hi);
    assert(rr->ratio_lo > 0 && rr->ratio_lo <= rr->ratio_hi);
    const double scale_lo = rr->scale_lo, scale_hi = rr->scale_hi;
    const double ratio_lo = rr->ratio_lo, ratio_hi = rr->ratio_hi;
    const double log_lo = log(ratio_lo), log_hi = log(ratio_hi);
    double area = (double)w * (double)h;
    int cw = 0, ch = 0, top = 0, left = 0, found = 0;

    for (int attempt = 0; attempt < 10 && !found; attempt++) {
        double target_area = area * rf__rng_range(rng, scale_lo, scale_hi);
        double aspect = exp(rf__rng_range(rng, log_lo, log_hi));
        int tw = (int)rf__round_half_even(sqrt(target_area * aspect));
        int th = (int)rf__round_half_even(sqrt(target_area / aspect));
        if (0 < tw && tw <= w && 0 < th && th <= h) {
            /* torchvision draws the top (i) before the left (j). */
            top = (int)rf__rng_below(rng, (uint64_t)(h - th + 1));
            left = (int)rf__rng_below(rng, (uint64_t)(w - tw + 1));
            cw = tw;
            ch = th;
            found = 1;
        }
    }
    if (!found) {
        /* Centre fallback: the largest centred crop within the ratio range. */
        double in_ratio = (double)w / (double)h;
        if (in_ratio < ratio_lo) {
            cw = w;
            ch = (int)rf__round_half_even((double)w / ratio_lo);
        } else if (in_ratio > ratio_hi) {
            ch = h;
            cw = (int)rf__round_half_even((double)h * ratio_hi);
        } else {
            cw = w;
            ch = h;
        }
        top = (h - ch) / 2;
        left = (w - cw) / 2;
    }
    assert(cw > 0 && ch > 0 && left >= 0 && top >= 0 && left + cw <= w && top + ch <= h);

    memset(g, 0, sizeof *g);
    g->x0 = (double)left;
    g->y0 = (double)top;
    g->x1 = (double)(left + cw);
    g->y1 = (double)(top + ch);
    g->out_w = out_w;
    g->out_h = out_h;
    g->crop_x = 0;
    g->crop_y = 0;
    g->crop_w = out_w;
    g->crop_h = out_h;
    g->flip = 0;
}

void rf__geom_none(int w, int h, int size, rf_geom *g)
{
    assert(w > 0 && h > 0 && size > 0 && g);
    memset(g, 0, sizeof *g);
    g->x1 = (double)w;
    g->y1 = (double)h;
    g->out_w = size;
    g->out_h = size;
    g->crop_w = size;
    g->crop_h = size;
}

int rf__geom_dct_denom(const rf_geom *g)
{
    assert(g && g->out_w > 0 && g->out_h > 0);
    double bw = g->x1 - g->x0, bh = g->y1 - g->y0;
    int d = 8;
    while (d > 1 && (bw < (double)g->out_w * d || bh < (double)g->out_h * d))
        d /= 2;
    return d;
}

void rf__geom_scale(rf_geom *g, int denom)
{
    assert(g && (denom == 1 || denom == 2 || denom == 4 || denom == 8));
    /* Exact: dividing by a power of two only changes the exponent. */
    double s = 1.0 / (double)denom;
    g->x0 *= s;
    g->y0 *= s;
    g->x1 *= s;
    g->y1 *= s;
}
