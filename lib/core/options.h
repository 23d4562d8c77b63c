/*
 * options.h - the loader's options: the raw table behind rf_loader_set_param
 * and the typed configuration the pipeline runs on.
 *
 * Options live as int64 values (rf_options), checked one at a time against
 * their bounds when set. rf_loader_start resolves them once into rf_config
 * (the zstd CCtx_params model): the cross-checks between options run there,
 * each failure an "options: ..." message, and every stage reads the typed,
 * derived fields (sample_bytes, is_records) instead of the raw table.
 */
#ifndef RF_OPTIONS_H
#define RF_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "augment.h"
#include "ringfeed.h"
#include "transform.h"

/* The highest enum rf_param value: raise it when appending an option (the
 * table in options.c must then have an entry for it; a static assertion
 * there says so). */
#define RF__PARAM_LAST RF_P_MAP_SHARDS
#define RF__NPARAMS (RF__PARAM_LAST + 1)

#define RF__MAX_EXTRAS 16 /* = RF_SOURCE_MAX_EXTRAS */
#define RF__MAX_EXT 63    /* = RF_SOURCE_MAX_EXT */

/* The tar member names (rf_loader_set_label, rf_loader_set_extras), as
 * set: lowercase, without a leading '.'. */
typedef struct rf_member_names {
    char label[RF__MAX_EXT + 1]; /* "cls" by default */
    int unlabeled;               /* label NULL or "" */
    int nextras;
    char extras[RF__MAX_EXTRAS][RF__MAX_EXT + 1];
} rf_member_names;

/* What a sample goes through after its geometry (rf_loader_set_augment,
 * rf_loader_set_normalize, rf_loader_set_sample_fn), as set. */
typedef struct rf_recipe {
    rf_aug_list aug;
    double mean[3], std[3];
    int normalized;         /* rf_loader_set_normalize gave a mean and std */
    rf_sample_fn sample_fn; /* NULL: none */
    void *sample_user;
} rf_recipe;

/* Aspect-ratio buckets as rf_loader_set_buckets gave them: n (height,
 * width) pairs. */
#define RF__MAX_BUCKETS 256
typedef struct rf_bucket_list {
    int n;
    int32_t hw[RF__MAX_BUCKETS][2];
} rf_bucket_list;

typedef struct rf_options {
    int64_t v[RF__NPARAMS]; /* indexed by enum rf_param; v[0] unused */
    rf_member_names names;
    rf_recipe recipe;
    rf_bucket_list buckets;
} rf_options;

/* The typed form, resolved at rf_loader_start and read-only afterwards. */
typedef struct rf_config {
    int64_t batch_size;
    int out_h, out_w;    /* RF_P_IMAGE_HEIGHT, RF_P_IMAGE_WIDTH: the output (or frame) */
    int transform;       /* enum rf_transform */
    rf_resize_to resize; /* center: its Resize (RF_P_RESIZE_*, the default filled in) */
    int top_left;        /* letterbox: RF_ALIGN_TOP_LEFT */
    uint8_t fill[3];     /* RF_P_FILL: the frame's padding, R, G, B */
    int max_side;        /* > 0: native sizes (transform none), frames of max_side^2 */
    /* aspect-ratio buckets: the list given (rf_loader_set_buckets), or
     * nbuckets_auto > 0 of them made at start from the pictures' sizes
     * (bucket.h); bucketed when either */
    rf_bucket_list buckets;
    int nbuckets_auto;
    int bucketed;
    int bucket_shared;   /* RF_P_BUCKET_SHARED */
    int bucket_multiple; /* RF_P_BUCKET_MULTIPLE */
    int flip;
    int layout; /* enum rf_layout */
    int shuffle;
    uint64_t seed;
    int drop_last;
    int num_workers; /* 0: auto (the tuner picks) */
    int prefetch;
    int on_error; /* enum rf_on_error */
    int64_t rank, world_size;
    int local_world_size;
    int io_backend; /* enum rf_io_backend */
    int pin_memory;
    int device; /* -1: CPU */
    int64_t max_pixels;
    int max_scans;
    unsigned read_depth; /* 0: auto */
    int map_shards;      /* RF_P_MAP_SHARDS */
    int64_t read_timeout_ms;
    int64_t max_errors; /* -1: no cap */
    uint64_t record_size, header_size;
    int dtype; /* enum rf_dtype */
    int verify; /* enum rf_verify */
    uint64_t max_file_bytes; /* larger sample files are refused before allocation */
    int exact;               /* full-resolution decode (no DCT scaling) */
    /* RandomResizedCrop's scale and ratio ranges, defaults filled in */
    double scale_min, scale_max, ratio_min, ratio_max;
    int sampler_drop_last;   /* trim the global order to a multiple of world_size */
    uint64_t extras_bytes;   /* all extras of one sample (with nextras > 0) */
    int64_t shuffle_block;   /* > 0: shard-aware shuffle over blocks of this many shards */
    rf_member_names names;   /* tar: label member, extras */
    uint64_t cache_limit;    /* remote shards: 0 = auto */
    int fetch_retries, fetch_parallel;
    int64_t fetch_timeout_ms;
    rf_recipe recipe;        /* augmentations, normalisation, the per-sample callback */
    /* derived */
    int is_records;      /* record_size > 0: bytes passed through, no decode */
    int framed;          /* letterbox or native sizes: pictures fitted into frames, the
                          * batch reports their sizes and scales */
    size_t sample_bytes; /* bytes of one sample in a slot: its largest (buckets: the
                          * largest bucket's; set again once automatic buckets are made) */
    int post;            /* pictures: augmentations, a callback or a float output follow the
                          * geometry (the decode goes to a worker's buffer first) */
} rf_config;

/* Every option at its default. */
void rf__options_defaults(rf_options *o);

/* 1 when param names an option. */
int rf__option_known(int param);

/* RF_OK, or RF_E_INVALID with the reason in err ("options: ..."). */
int rf__option_check(int param, int64_t value, char *err, size_t errcap);

/* Resolves o into c, with the checks that involve several options. RF_OK, or
 * RF_E_INVALID with the reason in err ("options: ..."). */
int rf__options_resolve(const rf_options *o, rf_config *c, char *err, size_t errcap);

/* rf_loader_set_label / rf_loader_set_extras: parse ext / exts into o's
 * names (o unchanged on error). RF_OK, or RF_E_INVALID with the reason in
 * err ("options: ..."). */
int rf__option_set_label(rf_options *o, const char *ext, char *err, size_t errcap);
int rf__option_set_extras(rf_options *o, const char *exts, char *err, size_t errcap);

/* (options_shapes.c) The shape options' checks and derived fields
 * (resize, framed); RF_OK or RF_E_INVALID with the reason in err. */
int rf__options_resolve_shapes(const rf_options *o, rf_config *c, char *err, size_t errcap);
/* Pixels of the largest image a slot holds (buckets: of the list given,
 * or the budget of automatic ones). */
size_t rf__shape_pixels(const rf_config *c);
/* rf_loader_set_buckets: n (height, width) pairs into o (o unchanged on
 * error). RF_OK, or RF_E_INVALID with the reason in err. */
int rf__option_set_buckets(rf_options *o, const int32_t *hw, int n, char *err, size_t errcap);

/* Index of extension ext (any case, a leading '.' ignored) among n's
 * extras, or -1. */
int rf__member_extra_index(const rf_member_names *n, const char *ext);

#endif
