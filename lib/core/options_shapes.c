/*
 * options_shapes.c - the output's shape in the options: rectangles,
 * center's Resize, the letterbox's placement and fill, native sizes and
 * aspect-ratio buckets, checked against each other and against the
 * transform once, at rf_loader_start (options.h).
 */
#include <stdio.h>
#include <string.h>

#include "options.h"

static const char *transform_name(int t)
{
    static const char *const n[] = {"none", "center", "random_resized_crop", "resize", "letterbox"};
    return t >= 0 && t <= RF_TRANSFORM_LETTERBOX ? n[t] : "?";
}

size_t rf__shape_pixels(const rf_config *c)
{
    if (c->max_side > 0)
        return (size_t)c->max_side * (size_t)c->max_side;
    size_t most = (size_t)c->out_h * (size_t)c->out_w;
    for (int b = 0; b < c->buckets.n; b++) {
        size_t px = (size_t)c->buckets.hw[b][0] * (size_t)c->buckets.hw[b][1];
        most = b == 0 || px > most ? px : most;
    }
    return most;
}

/* center's Resize: RF_P_RESIZE_SIZE, or RF_P_RESIZE_HEIGHT with _WIDTH, or
 * the default from the output's size. */
static int resolve_resize(const int64_t *p, rf_config *c, char *err, size_t errcap)
{
    int64_t side = p[RF_P_RESIZE_SIZE], rh = p[RF_P_RESIZE_HEIGHT], rw = p[RF_P_RESIZE_WIDTH];
    if (!side && !rh && !rw) {
        c->resize = rf__resize_default(c->out_h, c->out_w);
        return RF_OK;
    }
    if (c->transform != RF_TRANSFORM_CENTER || c->bucketed) {
        snprintf(err, errcap,
                 "options: resize_size applies to transform center without buckets "
                 "(with buckets each picture is resized to cover its bucket)");
        return RF_E_INVALID;
    }
    if (side && (rh || rw)) {
        snprintf(err, errcap,
                 "options: resize_size is either a shorter side or a (height, "
                 "width) pair, not both");
        return RF_E_INVALID;
    }
    if (!side && (!rh || !rw)) {
        snprintf(err, errcap, "options: resize_size (height, width) needs both sides");
        return RF_E_INVALID;
    }
    c->resize = (rf_resize_to){(int)side, (int)rh, (int)rw};
    return RF_OK;
}

static int resolve_buckets(const int64_t *p, const rf_config *c, char *err, size_t errcap)
{
    if (!c->bucketed)
        return RF_OK;
    if (c->buckets.n > 0 && c->nbuckets_auto > 0) {
        snprintf(err, errcap,
                 "options: buckets are either a list (rf_loader_set_buckets) or a "
                 "count (RF_P_BUCKETS), not both");
        return RF_E_INVALID;
    }
    if (c->is_records || c->transform == RF_TRANSFORM_NONE) {
        snprintf(err, errcap,
                 "options: buckets resize pictures into them: transform center, "
                 "random_resized_crop, resize or letterbox, not %s%s",
                 transform_name(c->transform), c->is_records ? " (records)" : "");
        return RF_E_INVALID;
    }
    if (p[RF_P_SHUFFLE_BLOCK] > 0) {
        snprintf(err, errcap,
                 "options: buckets order batches across the whole dataset; "
                 "shuffle_block does not combine with them");
        return RF_E_INVALID;
    }
    return RF_OK;
}

int rf__options_resolve_shapes(const rf_options *o, rf_config *c, char *err, size_t errcap)
{
    const int64_t *p = o->v;
    int rc = resolve_resize(p, c, err, errcap);
    if (rc == RF_OK)
        rc = resolve_buckets(p, c, err, errcap);
    if (rc != RF_OK)
        return rc;
    if (p[RF_P_ALIGN] != RF_ALIGN_CENTER && c->transform != RF_TRANSFORM_LETTERBOX) {
        snprintf(err, errcap, "options: align applies to transform letterbox, not %s",
                 transform_name(c->transform));
        return RF_E_INVALID;
    }
    if (c->max_side > 0 && (c->transform != RF_TRANSFORM_NONE || c->is_records)) {
        snprintf(err, errcap,
                 "options: max_side (native sizes) applies to pictures with "
                 "transform none, not %s%s",
                 transform_name(c->transform), c->is_records ? " (records)" : "");
        return RF_E_INVALID;
    }
    c->framed = c->transform == RF_TRANSFORM_LETTERBOX || c->max_side > 0;
    if (p[RF_P_FILL] != 0 && !c->framed) {
        snprintf(err, errcap,
                 "options: fill pads the frame of transform letterbox or of native "
                 "sizes (max_side), not %s",
                 transform_name(c->transform));
        return RF_E_INVALID;
    }
    return RF_OK;
}

int rf__option_set_buckets(rf_options *o, const int32_t *hw, int n, char *err, size_t errcap)
{
    if (!hw || n == 0) {
        o->buckets.n = 0;
        return RF_OK;
    }
    if (n < 0 || n > RF__MAX_BUCKETS) {
        snprintf(err, errcap, "options: buckets: 1 to %d buckets, not %d", RF__MAX_BUCKETS, n);
        return RF_E_INVALID;
    }
    for (int b = 0; b < n; b++) {
        int32_t h = hw[2 * b], w = hw[2 * b + 1];
        if (h < 1 || w < 1 || h > (1 << 14) || w > (1 << 14)) {
            snprintf(err, errcap, "options: buckets: bucket %d is %d x %d; sides are 1 to %d", b,
                     (int)h, (int)w, 1 << 14);
            return RF_E_INVALID;
        }
        for (int e = 0; e < b; e++)
            if (hw[2 * e] == h && hw[2 * e + 1] == w) {
                snprintf(err, errcap, "options: buckets: %d x %d is given twice", (int)h, (int)w);
                return RF_E_INVALID;
            }
    }
    o->buckets.n = n;
    for (int b = 0; b < n; b++) {
        o->buckets.hw[b][0] = hw[2 * b];
        o->buckets.hw[b][1] = hw[2 * b + 1];
    }
    return RF_OK;
}
