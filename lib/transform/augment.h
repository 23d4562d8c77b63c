/*
 * augment.h - torchvision's augmentations on a decoded uint8 picture, the seam
 * between the decode worker and the augmentation kinds.
 *
 * Three rooms behind this one header:
 *   augment.c         the list (rf_aug_list: parsed from the spec string that
 *                     rf_loader_set_augment documents), drawing a sample's plan
 *                     and running it, the plan as JSON (explain).
 *   augment_policy.c  what each transform draws, in torchvision's order, from
 *                     the sample's own stream: RandAugment, TrivialAugmentWide,
 *                     AutoAugment, ColorJitter, RandomGrayscale, RandomErasing.
 *   augment_ops.c, augment_geom.c   the primitive ops (torchvision's functional
 *                     ops on uint8 tensors, their float32 arithmetic step by
 *                     step): colour and histogram ops, and the NEAREST affine
 *                     ones (shear, translate, rotate).
 *
 * A transform is drawn into a plan first (every random choice made, nothing
 * touched), then the plan runs on the pixels: explain() and the draws entry
 * point use the first half alone, so what they report is what ran.
 * Pictures are RGB, HWC, rows `stride` bytes apart. Nothing here allocates
 * but rf__aug_scratch (a worker's buffer, grown once).
 */
#ifndef RF_AUGMENT_H
#define RF_AUGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "rng.h"

/* The transforms of a list. Values are internal. */
enum rf_aug_kind {
    RF__AUG_RANDAUGMENT = 1,
    RF__AUG_TRIVIALAUGMENTWIDE = 2,
    RF__AUG_AUTOAUGMENT = 3,
    RF__AUG_COLORJITTER = 4,
    RF__AUG_RANDOMGRAYSCALE = 5,
    RF__AUG_RANDOMERASING = 6,
};

/* AutoAugment's policies (torchvision's AutoAugmentPolicy). */
enum { RF__POLICY_IMAGENET = 0, RF__POLICY_CIFAR10 = 1, RF__POLICY_SVHN = 2 };

#define RF__AUG_MAX 16       /* transforms in a list */
#define RF__AUG_MAX_OPS 16   /* RandAugment's num_ops at most */
#define RF__AUG_MAX_BINS 256 /* num_magnitude_bins at most */
#define RF__AUG_MAX_STEPS (RF__AUG_MAX * RF__AUG_MAX_OPS)

/* One transform with its arguments (torchvision's names). */
typedef struct rf_aug {
    int kind; /* enum rf_aug_kind */
    int num_ops, magnitude, num_bins; /* RandAugment; num_bins also TrivialAugmentWide */
    int policy;                       /* AutoAugment */
    double fill[3];                   /* the affine ops' fill (RandAugment, TA, AutoAugment) */
    /* ColorJitter: factor ranges [lo, hi], on[k] = 0 when torchvision's
     * _check_input made it None (brightness, contrast, saturation, hue) */
    double jitter[4][2];
    int jitter_on[4];
    double p;                     /* RandomGrayscale, RandomErasing */
    double scale[2], ratio[2];    /* RandomErasing */
    int value_random;             /* RandomErasing(value="random") */
    double value[3];              /* RandomErasing's value per channel */
} rf_aug;

typedef struct rf_aug_list {
    int n;
    rf_aug a[RF__AUG_MAX];
} rf_aug_list;

/* Parses a spec ("RandAugment(2, 9); RandomErasing(p=0.25)": the grammar is
 * rf_loader_set_augment's, include/ringfeed.h) into out. NULL or "" is the
 * empty list. RF_OK, or RF_E_INVALID with the reason in err ("augment: ..."),
 * naming the transform and the argument. */
int rf__aug_parse(const char *spec, rf_aug_list *out, char *err, size_t errcap);

/* ---- primitive ops ---------------------------------------------------------- */

/* The primitive ops, named as torchvision's _apply_op names them (Color is
 * adjust_saturation, as there), plus ColorJitter's Hue and Saturation,
 * Grayscale and Erase. Values are internal. */
enum rf_op_kind {
    RF__OP_IDENTITY = 0,
    RF__OP_SHEARX,
    RF__OP_SHEARY,
    RF__OP_TRANSLATEX,
    RF__OP_TRANSLATEY,
    RF__OP_ROTATE,
    RF__OP_BRIGHTNESS,
    RF__OP_COLOR,
    RF__OP_CONTRAST,
    RF__OP_SHARPNESS,
    RF__OP_POSTERIZE,
    RF__OP_SOLARIZE,
    RF__OP_AUTOCONTRAST,
    RF__OP_EQUALIZE,
    RF__OP_INVERT,
    RF__OP_HUE,
    RF__OP_SATURATION,
    RF__OP_GRAYSCALE,
    RF__OP_ERASE,
    RF__OP_COUNT
};

/* One op with its arguments: arg is the functional op's one parameter (the
 * shear magnitude m of _apply_op, i.e. shear = degrees(atan(m)); the pixels
 * of a translation, truncated as int(); the angle of Rotate in degrees,
 * counter-clockwise; the factor of Brightness, Color, Contrast, Sharpness,
 * Saturation and Hue; the bits of Posterize; the threshold of Solarize).
 * Erase: the box (top, left, height, width) and value[] (or, with
 * value_random, N(0, 1) values from the stream keyed by erase_key). */
typedef struct rf_op {
    int kind; /* enum rf_op_kind */
    double arg;
    double fill[3];
    int top, left, height, width;
    double value[3];
    int value_random;
    uint64_t erase_key;
    /* explain: which transform made it and how */
    int from;         /* index in the list */
    double magnitude; /* the signed magnitude drawn (auto-augment ops), else arg */
    int bin;          /* the magnitude bin, or -1 */
    int deferred;     /* Erase left for the float conversion (rf__aug_plan_defer) */
} rf_op;

/* The name of op kind k ("Rotate"), or NULL; and the kind named s (any
 * case), or -1. */
const char *rf__op_name(int k);
int rf__op_kind(const char *s);

/* Scratch of one worker, for the ops that need a second picture. Grown to
 * what the largest picture needed, reused. */
typedef struct rf_aug_scratch {
    uint8_t *buf;
    size_t cap;
} rf_aug_scratch;

void rf__aug_scratch_free(rf_aug_scratch *s);

/* Runs op on the w x h RGB picture at px (rows stride bytes apart). RF_OK, or
 * RF_E_NOMEM (scratch). RF_E_INVALID for an argument outside what the
 * functional op accepts (a negative factor, bits outside 0..8, ...), with
 * the reason in err. */
int rf__op_run(const rf_op *op, uint8_t *px, int w, int h, ptrdiff_t stride,
               rf_aug_scratch *scr, char *err, size_t errcap);

/* augment_geom.c: the NEAREST affine ops (ShearX/Y, TranslateX/Y, Rotate), as
 * torchvision's F.affine / F.rotate on a uint8 tensor: the inverse matrix in
 * double, then the float32 grid of _gen_affine_grid and grid_sample's
 * unnormalisation and rounding, fill where the source is outside. out gets
 * the result (w x h x 3, rows w * 3 bytes). */
void rf__op_affine(const rf_op *op, const uint8_t *px, int w, int h, ptrdiff_t stride,
                   uint8_t *out);

/* TranslateX/Y in place: the same bytes as rf__op_affine gives for them (a
 * shift by int(arg) pixels, the fill where the source is outside). */
void rf__op_translate(const rf_op *op, uint8_t *px, int w, int h, ptrdiff_t stride);

/* ---- drawing and running ---------------------------------------------------- */

/* A sample's plan: every op its transforms chose, in order. */
typedef struct rf_aug_plan {
    int n;
    rf_op op[RF__AUG_MAX_STEPS];
} rf_aug_plan;

/* What a transform drew, as numbers, for the distribution tests
 * (rf_augment_draws: the layout per transform is documented there). */
typedef struct rf_aug_draws {
    int n;
    double v[RF__AUG_MAX_OPS * 3 + 8];
} rf_aug_draws;

/* augment_policy.c: draws transform a for an h x w picture from rng,
 * appending its ops to plan (index `from` in the list) and its raw draws to
 * d (may be NULL). */
void rf__aug_draw_one(const rf_aug *a, int from, int w, int h, rf_rng *rng, rf_aug_plan *plan,
                      rf_aug_draws *d);

/* The stream a sample's augmentations draw from: keyed on (seed, epoch,
 * sample) apart from the crop's stream, so that adding augmentations never
 * changes the crops. */
rf_rng rf__aug_stream(uint64_t seed, int64_t epoch, int64_t sample);

/* The seed a per-sample callback gets (rf_sample_fn): the first value of
 * its own stream of (seed, epoch, sample). */
uint64_t rf__sample_fn_seed(uint64_t seed, int64_t epoch, int64_t sample);

/* Draws the whole list for an h x w picture into plan. */
void rf__aug_draw(const rf_aug_list *l, int w, int h, rf_rng *rng, rf_aug_plan *plan);

/* Marks the trailing Erase ops of plan (those after the last op of any other
 * kind) as deferred: with a float output they are applied after the
 * normalisation, in its space, as torchvision's recipes do (RandomErasing
 * after Normalize). Returns how many. */
int rf__aug_plan_defer(rf_aug_plan *plan);

/* Runs the ops of plan that are not deferred. RF_OK or an error as
 * rf__op_run. */
int rf__aug_run(const rf_aug_plan *plan, uint8_t *px, int w, int h, ptrdiff_t stride,
                rf_aug_scratch *scr, char *err, size_t errcap);

/* The plan as a JSON array of {"op": ..., ...} objects (explain). Appends to
 * an rf_json (json.h). */
struct rf_json;
void rf__aug_plan_json(const rf_aug_plan *plan, const rf_aug_list *l, struct rf_json *j);

/* The name torchvision gives transform kind k ("RandAugment"). */
const char *rf__aug_name(int kind);

/* N(0, 1) values of an Erase with value "random", as torch's normal_() fills a
 * [C, h, w] tensor: channel-major, from the stream keyed by key. */
void rf__aug_normals(uint64_t key, float *out, size_t n);

#endif /* RF_AUGMENT_H */
