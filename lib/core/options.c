/*
 * options.c - option bounds and defaults, rf_param_bounds, and the one-time
 * resolution of the raw values into rf_config (see options.h).
 */
#include "options.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "convert.h"   /* rf__dtype_is_float, rf__convert_elem_size */
#include "transform.h" /* rf__rrc_default */

typedef struct param_def {
    int64_t lo, hi, def;
} param_def;

/* Indexed by enum rf_param; its size follows the highest entry. An id
 * without an entry (0, a retired one) has lo == hi == 0: unknown. */
static const param_def params_table[] = {
    [RF_P_BATCH_SIZE] = {1, 1 << 20, 256},
    [RF_P_IMAGE_SIZE] = {1, 1 << 14, 224},
    [RF_P_TRANSFORM] = {0, RF_TRANSFORM_LETTERBOX, RF_TRANSFORM_CENTER},
    [RF_P_FLIP] = {0, 1, 0},
    [RF_P_LAYOUT] = {0, 1, RF_LAYOUT_NHWC},
    [RF_P_SHUFFLE] = {0, 1, 1},
    [RF_P_SEED] = {INT64_MIN, INT64_MAX, 0},
    [RF_P_DROP_LAST] = {0, 1, 0},
    [RF_P_NUM_WORKERS] = {0, 1024, 0},
    [RF_P_PREFETCH] = {2, 1024, 4},
    [RF_P_ON_ERROR] = {0, 1, RF_ON_ERROR_RAISE},
    [RF_P_RANK] = {0, 1 << 24, 0},
    [RF_P_WORLD_SIZE] = {1, 1 << 24, 1},
    [RF_P_LOCAL_WORLD_SIZE] = {1, 1 << 16, 1},
    [RF_P_IO_BACKEND] = {0, 2, RF_IO_AUTO},
    [RF_P_PIN_MEMORY] = {0, 1, 1},
    [RF_P_DEVICE] = {-1, 1024, -1},
    [RF_P_MAX_PIXELS] = {1, INT64_C(1) << 40, 178956970},
    [RF_P_MAX_SCANS] = {1, 1 << 20, 1000},
    [RF_P_READ_DEPTH] = {0, 4096, 0},
    [RF_P_READ_TIMEOUT_MS] = {0, INT64_C(1) << 40, 0},
    [RF_P_MAX_ERRORS] = {-1, INT64_MAX, -1},
    [RF_P_RECORD_SIZE] = {0, 1 << 30, 0},
    [RF_P_HEADER_SIZE] = {0, INT64_C(1) << 50, 0},
    [RF_P_DTYPE] = {0, RF_DTYPE_BFLOAT16, RF_DTYPE_UINT8},
    [RF_P_VERIFY] = {0, 2, RF_VERIFY_ONCE},
    [RF_P_MAX_FILE_BYTES] = {1, INT64_C(1) << 40, INT64_C(512) << 20},
    [RF_P_EXACT] = {0, 1, 0},
    /* In millionths; 0: torchvision's default (ppm_range). */
    [RF_P_SCALE_MIN] = {0, 1000000, 0},
    [RF_P_SCALE_MAX] = {0, 1000000, 0},
    [RF_P_RATIO_MIN] = {0, 1000000000, 0},
    [RF_P_RATIO_MAX] = {0, 1000000000, 0},
    [RF_P_SAMPLER_DROP_LAST] = {0, 1, 0},
    [RF_P_EXTRAS_BYTES] = {1, INT64_C(1) << 30, 65536},
    [RF_P_SHUFFLE_BLOCK] = {0, UINT32_MAX, 0},
    [RF_P_CACHE_LIMIT] = {0, INT64_MAX, 0},
    [RF_P_FETCH_RETRIES] = {0, 100, 5},
    [RF_P_FETCH_TIMEOUT_MS] = {1, INT64_C(1) << 40, 30000},
    [RF_P_FETCH_PARALLEL] = {1, 64, 4},
    [RF_P_IMAGE_HEIGHT] = {1, 1 << 14, 224},
    [RF_P_IMAGE_WIDTH] = {1, 1 << 14, 224},
    [RF_P_RESIZE_SIZE] = {0, 1 << 15, 0},
    [RF_P_RESIZE_HEIGHT] = {0, 1 << 15, 0},
    [RF_P_RESIZE_WIDTH] = {0, 1 << 15, 0},
    [RF_P_ALIGN] = {0, 1, RF_ALIGN_CENTER},
    [RF_P_FILL] = {0, 0xffffff, 0},
    [RF_P_MAX_SIDE] = {0, 1 << 14, 0},
    [RF_P_BUCKETS] = {0, RF__MAX_BUCKETS, 0},
    [RF_P_BUCKET_SHARED] = {0, 1, 1},
    [RF_P_BUCKET_MULTIPLE] = {1, 1 << 10, 8},
    [RF_P_MAP_SHARDS] = {0, 1, 1},
};

_Static_assert(sizeof params_table / sizeof params_table[0] == RF__NPARAMS,
               "options: RF__PARAM_LAST (options.h) must name the last entry of params_table");

int rf__option_known(int p)
{
    return p > 0 && p < RF__NPARAMS && params_table[p].hi > params_table[p].lo;
}

void rf__options_defaults(rf_options *o)
{
    memset(o, 0, sizeof *o);
    for (int p = 1; p < RF__NPARAMS; p++)
        o->v[p] = params_table[p].def;
    strcpy(o->names.label, "cls");
    o->recipe.std[0] = o->recipe.std[1] = o->recipe.std[2] = 1.0;
}

int rf_param_bounds(int param, int64_t *lo, int64_t *hi)
{
    if (!rf__option_known(param))
        return RF_E_INVALID;
    if (lo)
        *lo = params_table[param].lo;
    if (hi)
        *hi = params_table[param].hi;
    return RF_OK;
}

int rf__option_check(int param, int64_t value, char *err, size_t errcap)
{
    if (!rf__option_known(param)) {
        snprintf(err, errcap, "options: unknown option %d", param);
        return RF_E_INVALID;
    }
    if (value < params_table[param].lo || value > params_table[param].hi) {
        snprintf(err, errcap, "options: option %d = %lld is outside [%lld, %lld]", param,
                 (long long)value, (long long)params_table[param].lo,
                 (long long)params_table[param].hi);
        return RF_E_INVALID;
    }
    return RF_OK;
}

/* A RandomResizedCrop bound given in millionths: 0, or the default rounded
 * to millionths, is the default double itself (0.08 or 4/3 have no exact
 * millionths form), so that spelling the defaults out changes nothing. */
static double ppm_range(int64_t v, double def)
{
    if (v == 0 || v == (int64_t)(def * 1e6 + 0.5))
        return def;
    return (double)v / 1e6;
}

/* The scale / ratio cross-checks: min <= max (torchvision only warns, and
 * then draws from the reversed range), and set only for the transform that
 * reads them. */
static int check_rrc_ranges(const int64_t *p, const rf_config *c, char *err, size_t errcap)
{
    if (c->transform != RF_TRANSFORM_RANDOM_RESIZED_CROP &&
        (p[RF_P_SCALE_MIN] || p[RF_P_SCALE_MAX] || p[RF_P_RATIO_MIN] || p[RF_P_RATIO_MAX])) {
        snprintf(err, errcap,
                 "options: scale and ratio apply to transform random_resized_crop only");
        return RF_E_INVALID;
    }
    if (c->scale_min > c->scale_max) {
        snprintf(err, errcap, "options: scale (%g, %g) has min > max", c->scale_min, c->scale_max);
        return RF_E_INVALID;
    }
    if (c->ratio_min > c->ratio_max) {
        snprintf(err, errcap, "options: ratio (%g, %g) has min > max", c->ratio_min, c->ratio_max);
        return RF_E_INVALID;
    }
    return RF_OK;
}

/* The element types each kind of source takes, and what only pictures have. */
static int check_recipe(const rf_config *c, char *err, size_t errcap)
{
    static const char *const names[] = {"uint8", "uint16", "int32", "int64",
                                        "float32", "float16", "bfloat16"};
    if (c->is_records) {
        if (rf__dtype_is_float(c->dtype)) {
            snprintf(err, errcap, "options: dtype %s is a picture output; records are uint8, "
                                  "uint16, int32 or int64", names[c->dtype]);
            return RF_E_INVALID;
        }
        if (c->recipe.aug.n > 0 || c->recipe.sample_fn) {
            snprintf(err, errcap, "options: augmentations and sample_fn apply to pictures; "
                                  "records are passed through");
            return RF_E_INVALID;
        }
        return RF_OK;
    }
    if (c->dtype != RF_DTYPE_UINT8 && !rf__dtype_is_float(c->dtype)) {
        snprintf(err, errcap, "options: dtype %s is for records; pictures are uint8, float32, "
                              "float16 or bfloat16", names[c->dtype]);
        return RF_E_INVALID;
    }
    return RF_OK;
}

int rf__options_resolve(const rf_options *o, rf_config *c, char *err, size_t errcap)
{
    const int64_t *p = o->v;
    memset(c, 0, sizeof *c);
    /* Every value passed rf__option_check: the narrowing casts below fit. */
    c->batch_size = p[RF_P_BATCH_SIZE];
    c->out_h = (int)p[RF_P_IMAGE_HEIGHT];
    c->out_w = (int)p[RF_P_IMAGE_WIDTH];
    c->transform = (int)p[RF_P_TRANSFORM];
    c->flip = (int)p[RF_P_FLIP];
    c->layout = (int)p[RF_P_LAYOUT];
    c->shuffle = (int)p[RF_P_SHUFFLE];
    c->seed = (uint64_t)p[RF_P_SEED];
    c->drop_last = (int)p[RF_P_DROP_LAST];
    c->num_workers = (int)p[RF_P_NUM_WORKERS];
    c->prefetch = (int)p[RF_P_PREFETCH];
    c->on_error = (int)p[RF_P_ON_ERROR];
    c->rank = p[RF_P_RANK];
    c->world_size = p[RF_P_WORLD_SIZE];
    c->local_world_size = (int)p[RF_P_LOCAL_WORLD_SIZE];
    c->io_backend = (int)p[RF_P_IO_BACKEND];
    c->pin_memory = (int)p[RF_P_PIN_MEMORY];
    c->device = (int)p[RF_P_DEVICE];
    c->max_pixels = p[RF_P_MAX_PIXELS];
    c->max_scans = (int)p[RF_P_MAX_SCANS];
    c->read_depth = (unsigned)p[RF_P_READ_DEPTH];
    c->map_shards = (int)p[RF_P_MAP_SHARDS];
    c->read_timeout_ms = p[RF_P_READ_TIMEOUT_MS];
    c->max_errors = p[RF_P_MAX_ERRORS];
    c->record_size = (uint64_t)p[RF_P_RECORD_SIZE];
    c->header_size = (uint64_t)p[RF_P_HEADER_SIZE];
    c->dtype = (int)p[RF_P_DTYPE];
    c->verify = (int)p[RF_P_VERIFY];
    c->max_file_bytes = (uint64_t)p[RF_P_MAX_FILE_BYTES];
    c->exact = (int)p[RF_P_EXACT];
    c->scale_min = ppm_range(p[RF_P_SCALE_MIN], rf__rrc_default.scale_lo);
    c->scale_max = ppm_range(p[RF_P_SCALE_MAX], rf__rrc_default.scale_hi);
    c->ratio_min = ppm_range(p[RF_P_RATIO_MIN], rf__rrc_default.ratio_lo);
    c->ratio_max = ppm_range(p[RF_P_RATIO_MAX], rf__rrc_default.ratio_hi);
    c->sampler_drop_last = (int)p[RF_P_SAMPLER_DROP_LAST];
    c->extras_bytes = (uint64_t)p[RF_P_EXTRAS_BYTES];
    c->shuffle_block = p[RF_P_SHUFFLE_BLOCK];
    c->cache_limit = (uint64_t)p[RF_P_CACHE_LIMIT];
    c->fetch_retries = (int)p[RF_P_FETCH_RETRIES];
    c->fetch_timeout_ms = p[RF_P_FETCH_TIMEOUT_MS];
    c->fetch_parallel = (int)p[RF_P_FETCH_PARALLEL];
    c->names = o->names;
    c->recipe = o->recipe;
    c->top_left = p[RF_P_ALIGN] == RF_ALIGN_TOP_LEFT;
    c->fill[0] = (uint8_t)(p[RF_P_FILL] >> 16);
    c->fill[1] = (uint8_t)(p[RF_P_FILL] >> 8);
    c->fill[2] = (uint8_t)p[RF_P_FILL];
    c->max_side = (int)p[RF_P_MAX_SIDE];
    c->buckets = o->buckets;
    c->nbuckets_auto = (int)p[RF_P_BUCKETS];
    c->bucketed = c->buckets.n > 0 || c->nbuckets_auto > 0;
    c->bucket_shared = (int)p[RF_P_BUCKET_SHARED];
    c->bucket_multiple = (int)p[RF_P_BUCKET_MULTIPLE];

    if (c->rank >= c->world_size) {
        snprintf(err, errcap, "options: rank %lld is not below world_size %lld",
                 (long long)c->rank, (long long)c->world_size);
        return RF_E_INVALID;
    }
    int rc = check_rrc_ranges(p, c, err, errcap);
    if (rc != RF_OK)
        return rc;
    c->is_records = c->record_size > 0;
    if ((rc = rf__options_resolve_shapes(o, c, err, errcap)) != RF_OK)
        return rc;
    if ((rc = check_recipe(c, err, errcap)) != RF_OK)
        return rc;
    if (c->is_records) {
        static const uint64_t itemsize[] = {1, 2, 4, 8}; /* enum rf_dtype */
        if (c->transform != RF_TRANSFORM_NONE) {
            snprintf(err, errcap, "options: record files need transform none (their bytes are "
                                  "passed through, not decoded)");
            return RF_E_INVALID;
        }
        if (c->names.unlabeled || c->names.nextras > 0 || strcmp(c->names.label, "cls")) {
            snprintf(err, errcap, "options: label and extras name members of WebDataset tar "
                                  "shards; record files have neither");
            return RF_E_INVALID;
        }
        if (c->record_size % itemsize[c->dtype] != 0) {
            snprintf(err, errcap,
                     "options: record_size %lld is not a multiple of the dtype's size %lld",
                     (long long)c->record_size, (long long)itemsize[c->dtype]);
            return RF_E_INVALID;
        }
        if (c->record_size > c->max_file_bytes) {
            snprintf(err, errcap,
                     "options: record_size %llu is more than max_file_bytes %llu (every "
                     "record would be refused)",
                     (unsigned long long)c->record_size, (unsigned long long)c->max_file_bytes);
            return RF_E_INVALID;
        }
        c->sample_bytes = (size_t)c->record_size;
    } else {
        c->sample_bytes = rf__shape_pixels(c) * 3 * rf__convert_elem_size(c->dtype);
        c->post = c->recipe.aug.n > 0 || c->recipe.sample_fn || c->dtype != RF_DTYPE_UINT8;
    }
    return RF_OK;
}

/* ---- tar member names (rf_loader_set_label, rf_loader_set_extras) -------- */

/* One extension from t[0..n): blanks around it and a leading '.' dropped,
 * lowercased into out. RF_OK or RF_E_INVALID with the reason in err. */
static int parse_ext(const char *what, const char *t, size_t n, char out[RF__MAX_EXT + 1],
                     char *err, size_t errcap)
{
    while (n > 0 && isspace((unsigned char)t[0]))
        t++, n--;
    while (n > 0 && isspace((unsigned char)t[n - 1]))
        n--;
    if (n > 0 && t[0] == '.')
        t++, n--;
    if (n == 0 || n > RF__MAX_EXT) {
        snprintf(err, errcap, "options: %s: an extension of 1 to %d bytes expected, not \"%.*s\"",
                 what, RF__MAX_EXT, (int)(n > 80 ? 80 : n), t);
        return RF_E_INVALID;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)t[i];
        if (ch == '/' || ch == ',' || ch < 0x20 || ch == 0x7f) {
            snprintf(err, errcap, "options: %s: \"%.*s\" is not a member extension (no '/', ',' "
                                  "or control characters)",
                     what, (int)(n > 80 ? 80 : n), t);
            return RF_E_INVALID;
        }
        out[i] = (char)tolower(ch);
    }
    out[n] = '\0';
    return RF_OK;
}

int rf__option_set_label(rf_options *o, const char *ext, char *err, size_t errcap)
{
    if (!ext || !*ext) {
        o->names.unlabeled = 1;
        strcpy(o->names.label, "cls");
        return RF_OK;
    }
    char label[RF__MAX_EXT + 1];
    int rc = parse_ext("label", ext, strlen(ext), label, err, errcap);
    if (rc != RF_OK)
        return rc;
    o->names.unlabeled = 0;
    memcpy(o->names.label, label, sizeof label);
    return RF_OK;
}

int rf__option_set_extras(rf_options *o, const char *exts, char *err, size_t errcap)
{
    rf_member_names n = o->names;
    n.nextras = 0;
    for (const char *p = exts; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (n.nextras == RF__MAX_EXTRAS) {
            snprintf(err, errcap, "options: extras: more than %d members", RF__MAX_EXTRAS);
            return RF_E_INVALID;
        }
        int rc = parse_ext("extras", p, len, n.extras[n.nextras], err, errcap);
        if (rc != RF_OK)
            return rc;
        for (int e = 0; e < n.nextras; e++)
            if (!strcmp(n.extras[e], n.extras[n.nextras])) {
                snprintf(err, errcap, "options: extras: \"%s\" is named twice", n.extras[e]);
                return RF_E_INVALID;
            }
        n.nextras++;
        p += len + (comma ? 1 : 0);
        if (comma && !*p) {
            snprintf(err, errcap, "options: extras: \"%s\" ends with ','", exts);
            return RF_E_INVALID;
        }
    }
    o->names = n;
    return RF_OK;
}

int rf__member_extra_index(const rf_member_names *n, const char *ext)
{
    if (ext[0] == '.')
        ext++;
    for (int e = 0; e < n->nextras; e++)
        if (!strcasecmp(n->extras[e], ext))
            return e;
    return -1;
}
