/*
 * recipe.c - the public face of what a picture goes through after its
 * geometry: the augmentation list, the normalisation of float outputs, the
 * per-sample callback (set before rf_loader_start, kept in the options), and
 * the calls that show it: rf_loader_explain (a sample's crop, flip and drawn
 * ops, without decoding it), rf_augment_apply (one op on a caller's picture)
 * and rf_augment_draws (the raw draws, for distribution tests).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"
#include "convert.h"
#include "decode.h"
#include "loader.h"
#include "resample.h"

/* Setters: fixed before start, the message recorded on failure. */
static int settable(rf_loader *l, const char *what)
{
    if (!l)
        return RF_E_INVALID;
    if (l->started) {
        rf__loader_err(l, "options: %s cannot change after rf_loader_start", what);
        return RF_E_STATE;
    }
    return RF_OK;
}

int rf_loader_set_augment(rf_loader *l, const char *spec)
{
    int rc = settable(l, "augment");
    if (rc != RF_OK)
        return rc;
    char err[400];
    rf_aug_list list;
    if ((rc = rf__aug_parse(spec, &list, err, sizeof err)) != RF_OK) {
        rf__loader_err(l, "%s", err);
        return rc;
    }
    l->opts.recipe.aug = list;
    return RF_OK;
}

int rf_loader_set_normalize(rf_loader *l, const double mean[3], const double std[3])
{
    int rc = settable(l, "normalize");
    if (rc != RF_OK)
        return rc;
    static const double zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    if (!mean && !std) {
        mean = zero;
        std = one;
    } else if (!mean || !std) {
        rf__loader_err(l, "options: normalize: mean and std go together (or both NULL)");
        return RF_E_INVALID;
    }
    char err[200];
    if ((rc = rf__convert_check(mean, std, err, sizeof err)) != RF_OK) {
        rf__loader_err(l, "%s", err);
        return rc;
    }
    l->opts.recipe.normalized = mean != zero;
    memcpy(l->opts.recipe.mean, mean, sizeof l->opts.recipe.mean);
    memcpy(l->opts.recipe.std, std, sizeof l->opts.recipe.std);
    return RF_OK;
}

int rf_loader_set_sample_fn(rf_loader *l, rf_sample_fn fn, void *user)
{
    int rc = settable(l, "sample_fn");
    if (rc != RF_OK)
        return rc;
    l->opts.recipe.sample_fn = fn;
    l->opts.recipe.sample_user = fn ? user : NULL;
    return RF_OK;
}

/* ---- explain ------------------------------------------------------------------ */

static const char *dtype_name(int d)
{
    static const char *const n[] = {"uint8", "uint16", "int32", "int64",
                                    "float32", "float16", "bfloat16"};
    return d >= 0 && d <= RF_DTYPE_BFLOAT16 ? n[d] : "?";
}

/* Reads the picture of `sample` (as the workers would) and gives its size
 * and geometry. 0 or an RF_E_* with the reason in err. */
static int sample_geometry(rf_loader *l, int64_t epoch, int64_t sample, rf_geom *g, rf_frame *fr,
                           int *w, int *h, char *err, size_t errcap)
{
    const rf_config *c = &l->cfg;
    rf_read rd;
    memset(&rd, 0, sizeof rd);
    rd.path = rf__source_read_path(&l->src, sample);
    rf__source_extent(&l->src, sample, &rd.ranged, &rd.offset, &rd.length);
    rd.sample = sample;
    int rc = 0;
    if (rf__read_sync(&rd, c->max_file_bytes) != 0 || rd.err) {
        snprintf(err, errcap, "reader: %s: %s", rd.path ? rd.path : "?",
                 rd.err ? strerror(rd.err) : "cannot read");
        free(rd.buf);
        return RF_E_IO;
    }
    const uint8_t *img = rd.buf;
    size_t len = rd.len;
    if (l->src.nextras > 0) {
        uint64_t rel, n;
        rf__source_image_in_span(&l->src, sample, &rel, &n);
        if (rel + n > rd.len) {
            snprintf(err, errcap, "reader: %s: short read", rd.path);
            free(rd.buf);
            return RF_E_IO;
        }
        img += rel;
        len = (size_t)n;
    }
    rf_decoder *d = rf__decoder_create();
    if (!d) {
        free(rd.buf);
        snprintf(err, errcap, "explain: out of memory");
        return RF_E_NOMEM;
    }
    rf_decode_opts o = l->work.tmpl;
    o.epoch = epoch;
    o.sample = sample;
    if (l->buckets.n) { /* its bucket's shape (a batch of its bucket) */
        o.out_h = l->buckets.hw[l->buckets.of[sample]][0];
        o.out_w = l->buckets.hw[l->buckets.of[sample]][1];
    }
    char why[300];
    rc = rf__decode_geometry(d, img, len, &o, g, fr, w, h, why, sizeof why);
    if (rc != 0)
        snprintf(err, errcap, "decode: %s: %s", rd.path, why);
    rf__decoder_destroy(d);
    free(rd.buf);
    return rc;
}

int64_t rf_loader_explain(rf_loader *l, int64_t epoch, int64_t sample, char *buf, size_t cap)
{
    int rc = rf__loader_usable(l);
    if (rc != RF_OK)
        return rc;
    if (buf && cap > 0)
        buf[0] = '\0';
    if (sample < 0 || sample >= l->src.n || epoch < -1 || (!buf && cap > 0)) {
        rf__loader_err(l, "explain: no sample %lld (the index has %lld)", (long long)sample,
                       (long long)l->src.n);
        return RF_E_INVALID;
    }
    if (l->cfg.is_records) {
        rf__loader_err(l, "explain: records are passed through: nothing to explain");
        return RF_E_INVALID;
    }
    if (epoch < 0)
        rf_loader_tell(l, &epoch, NULL);
    const rf_config *c = &l->cfg;
    rf_geom g;
    rf_frame fr;
    int w = 0, h = 0;
    char err[700];
    if ((rc = sample_geometry(l, epoch, sample, &g, &fr, &w, &h, err, sizeof err)) != 0) {
        rf__loader_err(l, "explain: %s", err);
        return rc;
    }
    rf_aug_plan *plan = malloc(sizeof *plan);
    if (!plan)
        return RF_E_NOMEM;
    plan->n = 0;
    rf_rng rng = rf__aug_stream(c->seed, epoch, sample);
    /* the augmentations see the picture: a fitted one's own size (work.c) */
    rf__aug_draw(&c->recipe.aug, g.crop_w, g.crop_h, &rng, plan);
    if (rf__convert_defers(c->dtype, c->recipe.normalized))
        rf__aug_plan_defer(plan);

    rf_json j = {0};
    char name[1200];
    rf__source_sample_name(&l->src, sample, name, sizeof name);
    rf__json_fmt(&j, "{\"sample\": %lld, \"epoch\": %lld, \"name\": ", (long long)sample,
                 (long long)epoch);
    rf__json_str(&j, name);
    rf__json_raw(&j, ", \"path\": ");
    rf__json_str(&j, rf__source_path(&l->src, sample));
    rf__json_fmt(&j, ", \"label\": %lld, \"width\": %d, \"height\": %d",
                 (long long)rf__source_label(&l->src, sample), w, h);
    /* the box in the picture's pixels (integers for every transform) */
    rf__json_fmt(&j, ", \"crop\": {\"top\": %d, \"left\": %d, \"height\": %d, \"width\": %d}",
                 (int)g.y0, (int)g.x0, (int)(g.y1 - g.y0), (int)(g.x1 - g.x0));
    rf__json_fmt(&j, ", \"resize\": [%d, %d]", g.out_h, g.out_w);
    rf__explain_shape(l, sample, &g, &fr, &j);
    if (c->transform == RF_TRANSFORM_CENTER)
        rf__json_fmt(&j,
                     ", \"center_crop\": {\"top\": %d, \"left\": %d, \"height\": %d, "
                     "\"width\": %d}",
                     g.crop_y, g.crop_x, g.crop_h, g.crop_w);
    rf__json_fmt(&j, ", \"flip\": %s, \"augment\": ", g.flip ? "true" : "false");
    rf__aug_plan_json(plan, &c->recipe.aug, &j);
    rf__json_fmt(&j, ", \"dtype\": \"%s\", \"sample_fn\": %s", dtype_name(c->dtype),
                 c->recipe.sample_fn ? "true" : "false");
    rf__json_fmt(&j, ", \"sample_fn_seed\": %llu}",
                 (unsigned long long)rf__sample_fn_seed(c->seed, epoch, sample));
    free(plan);
    return rf__json_out(&j, buf, cap);
}

/* ---- one op, and the raw draws ---------------------------------------------------- */

static int say(char *err, size_t errcap, int rc, const char *msg)
{
    if (err && errcap)
        snprintf(err, errcap, "%s", msg);
    return rc;
}

int rf_augment_apply(uint8_t *pixels, int height, int width, ptrdiff_t stride, const char *op,
                     const double *args, int nargs, char *err, size_t errcap)
{
    char tmp[300];
    int kind = rf__op_kind(op);
    if (kind < 0) {
        snprintf(tmp, sizeof tmp, "augment: unknown op \"%.60s\"", op ? op : "(null)");
        return say(err, errcap, RF_E_INVALID, tmp);
    }
    if (!pixels || height < 1 || width < 1 || stride < (ptrdiff_t)width * 3 || nargs < 0 ||
        (nargs > 0 && !args) || (int64_t)height * width > (INT64_C(1) << 32))
        return say(err, errcap, RF_E_INVALID, "augment: bad picture or arguments");
    /* how many arguments each op takes: at least, at most */
    int lo = 0, hi = 0;
    switch (kind) {
    case RF__OP_SHEARX: case RF__OP_SHEARY: case RF__OP_TRANSLATEX: case RF__OP_TRANSLATEY:
    case RF__OP_ROTATE: lo = 1, hi = 4; break;
    case RF__OP_BRIGHTNESS: case RF__OP_COLOR: case RF__OP_CONTRAST: case RF__OP_SHARPNESS:
    case RF__OP_SATURATION: case RF__OP_HUE: case RF__OP_POSTERIZE: case RF__OP_SOLARIZE:
        lo = hi = 1;
        break;
    case RF__OP_ERASE: lo = 5, hi = 7; break;
    default: break;
    }
    if (nargs < lo || nargs > hi || (kind == RF__OP_ERASE && nargs == 6) ||
        (hi == 4 && nargs == 3)) {
        snprintf(tmp, sizeof tmp, "augment: %s takes %d to %d arguments, not %d",
                 rf__op_name(kind), lo, hi, nargs);
        return say(err, errcap, RF_E_INVALID, tmp);
    }
    rf_op o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    if (kind == RF__OP_ERASE) {
        for (int i = 0; i < 4; i++)
            if (!(args[i] >= 0 && args[i] <= 1e9) || args[i] != floor(args[i]))
                return say(err, errcap, RF_E_INVALID,
                           "augment: Erase: top, left, height and width must be integers >= 0");
        o.top = (int)args[0], o.left = (int)args[1], o.height = (int)args[2];
        o.width = (int)args[3];
        for (int ch = 0; ch < 3; ch++)
            o.value[ch] = args[nargs == 5 ? 4 : 4 + ch];
    } else if (nargs > 0) {
        o.arg = args[0];
        for (int ch = 0; ch < 3 && nargs > 1; ch++)
            o.fill[ch] = args[nargs == 2 ? 1 : 1 + ch];
    }
    rf_aug_scratch scr = {0};
    int rc = rf__op_run(&o, pixels, width, height, stride, &scr, tmp, sizeof tmp);
    rf__aug_scratch_free(&scr);
    if (rc != RF_OK)
        return say(err, errcap, rc, tmp);
    return RF_OK;
}

int64_t rf_augment_draws(const char *spec, int height, int width, uint64_t seed, int64_t first,
                         int64_t n, double *out, int64_t per_sample, char *err, size_t errcap)
{
    char tmp[400];
    if (n < 0 || per_sample < 1 || (n > 0 && !out) || height < 1 || width < 1 || first < 0)
        return say(err, errcap, RF_E_INVALID, "augment: bad arguments to rf_augment_draws");
    rf_aug_list l;
    if (rf__aug_parse(spec, &l, tmp, sizeof tmp) != RF_OK)
        return say(err, errcap, RF_E_INVALID, tmp);
    rf_aug_plan *plan = malloc(sizeof *plan);
    if (!plan)
        return say(err, errcap, RF_E_NOMEM, "augment: out of memory");
    for (int64_t k = 0; k < n; k++) {
        double *o = out + k * per_sample;
        for (int64_t i = 0; i < per_sample; i++)
            o[i] = NAN;
        rf_rng rng = rf__aug_stream(seed, 0, first + k);
        plan->n = 0;
        int64_t at = 0;
        for (int i = 0; i < l.n; i++) {
            rf_aug_draws d = {0};
            rf__aug_draw_one(&l.a[i], i, width, height, &rng, plan, &d);
            for (int v = 0; v < d.n && at < per_sample; v++)
                o[at++] = d.v[v];
        }
    }
    free(plan);
    return n;
}
