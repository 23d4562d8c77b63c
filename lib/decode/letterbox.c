/*
 * letterbox.c - geometries that keep the whole picture (see letterbox.h),
 * and the fill of a frame around its window.
 *
 * Sizes are computed from the integers where a ratio decides which side
 * limits (w * out_h against out_w * h: no rounding can pick the wrong
 * side), then the other side as Python's round of a double, so a script
 * can repeat them: letterbox 500 x 375 into 640 x 640 is 640 x 480 at
 * offset (80, 0), scale 1.28.
 */
#include "letterbox.h"

#include <assert.h>
#include <string.h>

#include "ringfeed.h"
#include "transform.h"

/* Side * num / den rounded as Python's round, within [1, cap]. */
static int scaled_side(int side, int num, int den, int cap)
{
    int v = (int)rf__round_half_even((double)side * (double)num / (double)den);
    return v < 1 ? 1 : v > cap ? cap : v;
}

/* The whole picture resampled to out_w x out_h, all of it kept. */
static void whole(int w, int h, int out_w, int out_h, rf_geom *g)
{
    memset(g, 0, sizeof *g);
    g->x1 = (double)w;
    g->y1 = (double)h;
    g->out_w = out_w;
    g->out_h = out_h;
    g->crop_w = out_w;
    g->crop_h = out_h;
}

void rf__geom_resize(int w, int h, int out_h, int out_w, rf_geom *g)
{
    assert(w > 0 && h > 0 && out_h > 0 && out_w > 0 && g);
    whole(w, h, out_w, out_h, g);
}

void rf__geom_cover(int w, int h, int out_h, int out_w, rf_geom *g)
{
    assert(w > 0 && h > 0 && out_h > 0 && out_w > 0 && g);
    int rw, rh;
    if ((int64_t)w * out_h >= (int64_t)out_w * h) { /* wider than the bucket: height limits */
        rh = out_h;
        rw = scaled_side(w, out_h, h, 1 << 30);
        if (rw < out_w)
            rw = out_w;
    } else {
        rw = out_w;
        rh = scaled_side(h, out_w, w, 1 << 30);
        if (rh < out_h)
            rh = out_h;
    }
    rf_resize_to to = {0, rh, rw};
    rf__geom_center_to(w, h, out_h, out_w, &to, g);
}

void rf__fit_offset(const rf_fit *fit, int out_h, int out_w, int top_left, int *y, int *x)
{
    *y = top_left ? 0 : (out_h - fit->h) / 2;
    *x = top_left ? 0 : (out_w - fit->w) / 2;
}

void rf__fit_box(const rf_decode_times *t, int fh, int fw, int top_left, rf_region_box *r)
{
    rf_fit fit = {t->fit_h, t->fit_w, t->scale};
    assert(fit.h >= 1 && fit.w >= 1 && fit.h <= fh && fit.w <= fw);
    r->h = fit.h;
    r->w = fit.w;
    rf__fit_offset(&fit, fh, fw, top_left, &r->y, &r->x);
}

void rf__geom_letterbox(int w, int h, int out_h, int out_w, int top_left, rf_geom *g, rf_frame *fr,
                        rf_fit *fit)
{
    assert(w > 0 && h > 0 && out_h > 0 && out_w > 0 && g && fr && fit);
    if ((int64_t)w * out_h <= (int64_t)out_w * h) { /* taller than the frame: height limits */
        fit->h = out_h;
        fit->w = scaled_side(w, out_h, h, out_w);
        fit->scale = (float)((double)out_h / (double)h);
    } else {
        fit->w = out_w;
        fit->h = scaled_side(h, out_w, w, out_h);
        fit->scale = (float)((double)out_w / (double)w);
    }
    whole(w, h, fit->w, fit->h, g);
    fr->w = out_w;
    fr->h = out_h;
    rf__fit_offset(fit, out_h, out_w, top_left, &fr->y, &fr->x);
}

void rf__geom_native(int w, int h, int max_side, rf_geom *g, rf_frame *fr, rf_fit *fit)
{
    assert(w > 0 && h > 0 && max_side > 0 && g && fr && fit);
    int m = w > h ? w : h;
    if (m <= max_side) {
        fit->w = w;
        fit->h = h;
        fit->scale = 1.0f;
    } else if (w >= h) {
        fit->w = max_side;
        fit->h = scaled_side(h, max_side, w, max_side);
        fit->scale = (float)((double)max_side / (double)w);
    } else {
        fit->h = max_side;
        fit->w = scaled_side(w, max_side, h, max_side);
        fit->scale = (float)((double)max_side / (double)h);
    }
    whole(w, h, fit->w, fit->h, g);
    *fr = (rf_frame){max_side, max_side, 0, 0};
}

/* n pixels of fill at d, interleaved (NHWC). */
static void fill_pixels(uint8_t *d, size_t n, const uint8_t fill[3])
{
    if (fill[0] == fill[1] && fill[1] == fill[2]) {
        memset(d, fill[0], n * 3);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        d[3 * i + 0] = fill[0];
        d[3 * i + 1] = fill[1];
        d[3 * i + 2] = fill[2];
    }
}

void rf__frame_fill(uint8_t *dst, int layout, const rf_geom *g, const rf_frame *fr,
                    const uint8_t fill[3])
{
    if (fr->w <= 0)
        return;
    size_t fw = (size_t)fr->w, fh = (size_t)fr->h;
    size_t x0 = (size_t)fr->x, x1 = x0 + (size_t)g->crop_w;
    size_t y0 = (size_t)fr->y, y1 = y0 + (size_t)g->crop_h;
    assert(x1 <= fw && y1 <= fh);
    for (size_t y = 0; y < fh; y++) {
        int inside = y >= y0 && y < y1;
        if (layout == RF_LAYOUT_NCHW) {
            for (int c = 0; c < 3; c++) {
                uint8_t *row = dst + (size_t)c * fw * fh + y * fw;
                if (!inside) {
                    memset(row, fill[c], fw);
                } else {
                    memset(row, fill[c], x0);
                    memset(row + x1, fill[c], fw - x1);
                }
            }
        } else {
            uint8_t *row = dst + y * fw * 3;
            if (!inside) {
                fill_pixels(row, fw, fill);
            } else {
                fill_pixels(row, x0, fill);
                fill_pixels(row + x1 * 3, fw - x1, fill);
            }
        }
    }
}
