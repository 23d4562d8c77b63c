/*
 * augment_policy.c - what each transform draws, as torchvision 0.14 draws it
 * (autoaugment.py, transforms.py): the op lists in their order, the magnitude
 * tables (float32 linspace, Posterize's rounded bits), the sign rules, the
 * probabilities, ColorJitter's random order and RandomErasing's ten tries.
 *
 * torch's generator is not reproduced (no loader could: its state is per
 * process); each draw comes instead from the sample's counter-based stream,
 * one draw where torchvision makes one, in the same order and with the same
 * distribution (a uniform integer where it calls randint, a float32 uniform
 * where it calls rand / uniform_). tests/test_augment.c and the Python
 * chi-square test hold the distributions against torchvision's.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "augment.h"

/* Python's round(): nearest, ties to even. */
static double round_half_even(double x)
{
    double f = floor(x), d = x - f;
    if (d > 0.5 || (d == 0.5 && fmod(f, 2.0) != 0.0))
        f += 1.0;
    return f;
}

/* torch.linspace(start, end, n)[i] in float32: the step (end - start) / (n - 1)
 * from the start for the first half, from the end for the second. */
static double linspace_at(double start, double end, int n, int i)
{
    float s = (float)start, e = (float)end;
    if (n == 1)
        return s;
    float step = (e - s) / (float)(n - 1);
    if (i < n / 2)
        return (double)(s + step * (float)i);
    return (double)(e - step * (float)(n - i - 1));
}

/* The magnitude ops of the policies and their tables: max (linspace(0, max))
 * or the special tables; signed as torchvision's _augmentation_space says. */
enum table { T_NONE, T_LIN, T_POSTERIZE, T_SOLARIZE, T_TRANSLATE_W, T_TRANSLATE_H };

typedef struct space_op {
    int kind;  /* enum rf_op_kind */
    int table; /* enum table */
    double max; /* T_LIN: linspace(0, max); T_POSTERIZE: the divisor's 4 or 6 */
    int sign;
} space_op;

/* RandAugment._augmentation_space (and AutoAugment's, without Identity, with
 * Invert). */
static const space_op randaugment_space[] = {
    {RF__OP_IDENTITY, T_NONE, 0, 0},       {RF__OP_SHEARX, T_LIN, 0.3, 1},
    {RF__OP_SHEARY, T_LIN, 0.3, 1},        {RF__OP_TRANSLATEX, T_TRANSLATE_W, 0, 1},
    {RF__OP_TRANSLATEY, T_TRANSLATE_H, 0, 1}, {RF__OP_ROTATE, T_LIN, 30.0, 1},
    {RF__OP_BRIGHTNESS, T_LIN, 0.9, 1},    {RF__OP_COLOR, T_LIN, 0.9, 1},
    {RF__OP_CONTRAST, T_LIN, 0.9, 1},      {RF__OP_SHARPNESS, T_LIN, 0.9, 1},
    {RF__OP_POSTERIZE, T_POSTERIZE, 4, 0}, {RF__OP_SOLARIZE, T_SOLARIZE, 0, 0},
    {RF__OP_AUTOCONTRAST, T_NONE, 0, 0},   {RF__OP_EQUALIZE, T_NONE, 0, 0},
    {RF__OP_INVERT, T_NONE, 0, 0}, /* AutoAugment only */
};
enum { RANDAUGMENT_OPS = 14 };

static const space_op trivial_space[] = {
    {RF__OP_IDENTITY, T_NONE, 0, 0},       {RF__OP_SHEARX, T_LIN, 0.99, 1},
    {RF__OP_SHEARY, T_LIN, 0.99, 1},       {RF__OP_TRANSLATEX, T_LIN, 32.0, 1},
    {RF__OP_TRANSLATEY, T_LIN, 32.0, 1},   {RF__OP_ROTATE, T_LIN, 135.0, 1},
    {RF__OP_BRIGHTNESS, T_LIN, 0.99, 1},   {RF__OP_COLOR, T_LIN, 0.99, 1},
    {RF__OP_CONTRAST, T_LIN, 0.99, 1},     {RF__OP_SHARPNESS, T_LIN, 0.99, 1},
    {RF__OP_POSTERIZE, T_POSTERIZE, 6, 0}, {RF__OP_SOLARIZE, T_SOLARIZE, 0, 0},
    {RF__OP_AUTOCONTRAST, T_NONE, 0, 0},   {RF__OP_EQUALIZE, T_NONE, 0, 0},
};
enum { TRIVIAL_OPS = 14 };

/* magnitudes[bin] of op's table with nbins bins, for a w x h picture. */
static double table_at(const space_op *s, int nbins, int bin, int w, int h)
{
    switch (s->table) {
    case T_LIN: return linspace_at(0.0, s->max, nbins, bin);
    case T_TRANSLATE_W: return linspace_at(0.0, 150.0 / 331.0 * w, nbins, bin);
    case T_TRANSLATE_H: return linspace_at(0.0, 150.0 / 331.0 * h, nbins, bin);
    case T_SOLARIZE: return linspace_at(255.0, 0.0, nbins, bin);
    case T_POSTERIZE: {
        /* 8 - (arange(n) / ((n - 1) / d)).round().int(): a float32 division */
        float q = (float)bin / (float)((nbins - 1) / s->max);
        return 8.0 - round_half_even((double)q);
    }
    default: return 0.0;
    }
}

/* _apply_op's argument of the functional op for magnitude m. */
static double op_arg(int kind, double m)
{
    switch (kind) {
    case RF__OP_BRIGHTNESS: case RF__OP_COLOR: case RF__OP_CONTRAST: case RF__OP_SHARPNESS:
        return 1.0 + m;
    case RF__OP_TRANSLATEX: case RF__OP_TRANSLATEY: case RF__OP_POSTERIZE:
        return (double)(int64_t)m; /* int(magnitude) */
    default:
        return m;
    }
}

static void push(rf_aug_plan *plan, const rf_aug *a, int from, int kind, double m, int bin)
{
    if (plan->n >= RF__AUG_MAX_STEPS)
        return; /* bounded by the parser: RF__AUG_MAX transforms of RF__AUG_MAX_OPS */
    rf_op *o = &plan->op[plan->n++];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->magnitude = m;
    o->arg = op_arg(kind, m);
    o->bin = bin;
    o->from = from;
    memcpy(o->fill, a->fill, sizeof o->fill);
}

static void rec(rf_aug_draws *d, double v)
{
    if (d && d->n < (int)(sizeof d->v / sizeof d->v[0]))
        d->v[d->n++] = v;
}

/* torch.rand / uniform_(lo, hi) on a float32 tensor: 24 random bits. */
static float uniform_f(rf_rng *rng, double lo, double hi)
{
    float u = (float)(rf__rng_u64(rng) >> 40) * (1.0f / 16777216.0f);
    float v = (float)((float)hi - (float)lo) * u + (float)lo;
    return v < (float)hi ? v : (float)lo; /* [lo, hi) even where rounding reaches hi */
}

static void draw_randaugment(const rf_aug *a, int from, int w, int h, rf_rng *rng,
                             rf_aug_plan *plan, rf_aug_draws *d)
{
    for (int k = 0; k < a->num_ops; k++) {
        int i = (int)rf__rng_below(rng, RANDAUGMENT_OPS);
        const space_op *s = &randaugment_space[i];
        double m = s->table == T_NONE ? 0.0 : table_at(s, a->num_bins, a->magnitude, w, h);
        int neg = s->sign ? (int)rf__rng_below(rng, 2) : 0;
        if (neg)
            m = -m;
        rec(d, i);
        rec(d, s->sign ? (neg ? -1 : 1) : 0);
        push(plan, a, from, s->kind, m, s->table == T_NONE ? -1 : a->magnitude);
    }
}

static void draw_trivial(const rf_aug *a, int from, int w, int h, rf_rng *rng, rf_aug_plan *plan,
                         rf_aug_draws *d)
{
    int i = (int)rf__rng_below(rng, TRIVIAL_OPS);
    const space_op *s = &trivial_space[i];
    int bin = -1;
    double m = 0.0;
    if (s->table != T_NONE) {
        bin = (int)rf__rng_below(rng, (uint64_t)a->num_bins);
        m = table_at(s, a->num_bins, bin, w, h);
    }
    int neg = s->sign ? (int)rf__rng_below(rng, 2) : 0;
    if (neg)
        m = -m;
    rec(d, i);
    rec(d, bin);
    rec(d, s->sign ? (neg ? -1 : 1) : 0);
    push(plan, a, from, s->kind, m, bin);
}

/* AutoAugment's policies: (op, p, magnitude bin or -1) pairs. */
typedef struct sub_op {
    int kind;
    double p;
    int bin;
} sub_op;

#define I(k) RF__OP_##k
static const sub_op imagenet_policy[25][2] = {
    {{I(POSTERIZE), 0.4, 8}, {I(ROTATE), 0.6, 9}},    {{I(SOLARIZE), 0.6, 5}, {I(AUTOCONTRAST), 0.6, -1}},
    {{I(EQUALIZE), 0.8, -1}, {I(EQUALIZE), 0.6, -1}}, {{I(POSTERIZE), 0.6, 7}, {I(POSTERIZE), 0.6, 6}},
    {{I(EQUALIZE), 0.4, -1}, {I(SOLARIZE), 0.2, 4}},  {{I(EQUALIZE), 0.4, -1}, {I(ROTATE), 0.8, 8}},
    {{I(SOLARIZE), 0.6, 3}, {I(EQUALIZE), 0.6, -1}},  {{I(POSTERIZE), 0.8, 5}, {I(EQUALIZE), 1.0, -1}},
    {{I(ROTATE), 0.2, 3}, {I(SOLARIZE), 0.6, 8}},     {{I(EQUALIZE), 0.6, -1}, {I(POSTERIZE), 0.4, 6}},
    {{I(ROTATE), 0.8, 8}, {I(COLOR), 0.4, 0}},        {{I(ROTATE), 0.4, 9}, {I(EQUALIZE), 0.6, -1}},
    {{I(EQUALIZE), 0.0, -1}, {I(EQUALIZE), 0.8, -1}}, {{I(INVERT), 0.6, -1}, {I(EQUALIZE), 1.0, -1}},
    {{I(COLOR), 0.6, 4}, {I(CONTRAST), 1.0, 8}},      {{I(ROTATE), 0.8, 8}, {I(COLOR), 1.0, 2}},
    {{I(COLOR), 0.8, 8}, {I(SOLARIZE), 0.8, 7}},      {{I(SHARPNESS), 0.4, 7}, {I(INVERT), 0.6, -1}},
    {{I(SHEARX), 0.6, 5}, {I(EQUALIZE), 1.0, -1}},    {{I(COLOR), 0.4, 0}, {I(EQUALIZE), 0.6, -1}},
    {{I(EQUALIZE), 0.4, -1}, {I(SOLARIZE), 0.2, 4}},  {{I(SOLARIZE), 0.6, 5}, {I(AUTOCONTRAST), 0.6, -1}},
    {{I(INVERT), 0.6, -1}, {I(EQUALIZE), 1.0, -1}},   {{I(COLOR), 0.6, 4}, {I(CONTRAST), 1.0, 8}},
    {{I(EQUALIZE), 0.8, -1}, {I(EQUALIZE), 0.6, -1}},
};
static const sub_op cifar10_policy[25][2] = {
    {{I(INVERT), 0.1, -1}, {I(CONTRAST), 0.2, 6}},         {{I(ROTATE), 0.7, 2}, {I(TRANSLATEX), 0.3, 9}},
    {{I(SHARPNESS), 0.8, 1}, {I(SHARPNESS), 0.9, 3}},      {{I(SHEARY), 0.5, 8}, {I(TRANSLATEY), 0.7, 9}},
    {{I(AUTOCONTRAST), 0.5, -1}, {I(EQUALIZE), 0.9, -1}},  {{I(SHEARY), 0.2, 7}, {I(POSTERIZE), 0.3, 7}},
    {{I(COLOR), 0.4, 3}, {I(BRIGHTNESS), 0.6, 7}},         {{I(SHARPNESS), 0.3, 9}, {I(BRIGHTNESS), 0.7, 9}},
    {{I(EQUALIZE), 0.6, -1}, {I(EQUALIZE), 0.5, -1}},      {{I(CONTRAST), 0.6, 7}, {I(SHARPNESS), 0.6, 5}},
    {{I(COLOR), 0.7, 7}, {I(TRANSLATEX), 0.5, 8}},         {{I(EQUALIZE), 0.3, -1}, {I(AUTOCONTRAST), 0.4, -1}},
    {{I(TRANSLATEY), 0.4, 3}, {I(SHARPNESS), 0.2, 6}},     {{I(BRIGHTNESS), 0.9, 6}, {I(COLOR), 0.2, 8}},
    {{I(SOLARIZE), 0.5, 2}, {I(INVERT), 0.0, -1}},         {{I(EQUALIZE), 0.2, -1}, {I(AUTOCONTRAST), 0.6, -1}},
    {{I(EQUALIZE), 0.2, -1}, {I(EQUALIZE), 0.6, -1}},      {{I(COLOR), 0.9, 9}, {I(EQUALIZE), 0.6, -1}},
    {{I(AUTOCONTRAST), 0.8, -1}, {I(SOLARIZE), 0.2, 8}},   {{I(BRIGHTNESS), 0.1, 3}, {I(COLOR), 0.7, 0}},
    {{I(SOLARIZE), 0.4, 5}, {I(AUTOCONTRAST), 0.9, -1}},   {{I(TRANSLATEY), 0.9, 9}, {I(TRANSLATEY), 0.7, 9}},
    {{I(AUTOCONTRAST), 0.9, -1}, {I(SOLARIZE), 0.8, 3}},   {{I(EQUALIZE), 0.8, -1}, {I(INVERT), 0.1, -1}},
    {{I(TRANSLATEY), 0.7, 9}, {I(AUTOCONTRAST), 0.9, -1}},
};
static const sub_op svhn_policy[25][2] = {
    {{I(SHEARX), 0.9, 4}, {I(INVERT), 0.2, -1}},        {{I(SHEARY), 0.9, 8}, {I(INVERT), 0.7, -1}},
    {{I(EQUALIZE), 0.6, -1}, {I(SOLARIZE), 0.6, 6}},    {{I(INVERT), 0.9, -1}, {I(EQUALIZE), 0.6, -1}},
    {{I(EQUALIZE), 0.6, -1}, {I(ROTATE), 0.9, 3}},      {{I(SHEARX), 0.9, 4}, {I(AUTOCONTRAST), 0.8, -1}},
    {{I(SHEARY), 0.9, 8}, {I(INVERT), 0.4, -1}},        {{I(SHEARY), 0.9, 5}, {I(SOLARIZE), 0.2, 6}},
    {{I(INVERT), 0.9, -1}, {I(AUTOCONTRAST), 0.8, -1}}, {{I(EQUALIZE), 0.6, -1}, {I(ROTATE), 0.9, 3}},
    {{I(SHEARX), 0.9, 4}, {I(SOLARIZE), 0.3, 3}},       {{I(SHEARY), 0.8, 8}, {I(INVERT), 0.7, -1}},
    {{I(EQUALIZE), 0.9, -1}, {I(TRANSLATEY), 0.6, 6}},  {{I(INVERT), 0.9, -1}, {I(EQUALIZE), 0.6, -1}},
    {{I(CONTRAST), 0.3, 3}, {I(ROTATE), 0.8, 4}},       {{I(INVERT), 0.8, -1}, {I(TRANSLATEY), 0.0, 2}},
    {{I(SHEARY), 0.7, 6}, {I(SOLARIZE), 0.4, 8}},       {{I(INVERT), 0.6, -1}, {I(ROTATE), 0.8, 4}},
    {{I(SHEARY), 0.3, 7}, {I(TRANSLATEX), 0.9, 3}},     {{I(SHEARX), 0.1, 6}, {I(INVERT), 0.6, -1}},
    {{I(SOLARIZE), 0.7, 2}, {I(TRANSLATEY), 0.6, 7}},   {{I(SHEARY), 0.8, 4}, {I(INVERT), 0.8, -1}},
    {{I(SHEARX), 0.7, 9}, {I(TRANSLATEY), 0.8, 3}},     {{I(SHEARY), 0.8, 5}, {I(AUTOCONTRAST), 0.7, -1}},
    {{I(SHEARX), 0.7, 2}, {I(INVERT), 0.1, -1}},
};
#undef I

static const space_op *auto_space(int kind)
{
    for (size_t i = 0; i < sizeof randaugment_space / sizeof randaugment_space[0]; i++)
        if (randaugment_space[i].kind == kind)
            return &randaugment_space[i];
    return &randaugment_space[0];
}

static void draw_autoaugment(const rf_aug *a, int from, int w, int h, rf_rng *rng,
                             rf_aug_plan *plan, rf_aug_draws *d)
{
    const sub_op(*pol)[2] = a->policy == RF__POLICY_CIFAR10 ? cifar10_policy
                            : a->policy == RF__POLICY_SVHN  ? svhn_policy
                                                            : imagenet_policy;
    /* get_params: randint(25), rand(2), randint(2, (2,)) */
    int id = (int)rf__rng_below(rng, 25);
    float probs[2] = {uniform_f(rng, 0.0, 1.0), uniform_f(rng, 0.0, 1.0)};
    int signs[2] = {(int)rf__rng_below(rng, 2), (int)rf__rng_below(rng, 2)};
    rec(d, id);
    for (int i = 0; i < 2; i++)
        rec(d, probs[i] <= (float)pol[id][i].p);
    rec(d, signs[0]);
    rec(d, signs[1]);
    for (int i = 0; i < 2; i++) {
        const sub_op *o = &pol[id][i];
        if (!(probs[i] <= (float)o->p)) /* a float32 tensor against p: in float32 */
            continue;
        const space_op *s = auto_space(o->kind);
        double m = o->bin >= 0 ? table_at(s, 10, o->bin, w, h) : 0.0;
        if (s->sign && signs[i] == 0)
            m = -m;
        push(plan, a, from, o->kind, m, o->bin);
    }
}

static void draw_colorjitter(const rf_aug *a, int from, rf_rng *rng, rf_aug_plan *plan,
                             rf_aug_draws *d)
{
    int perm[4] = {0, 1, 2, 3};
    for (int i = 3; i > 0; i--) { /* randperm(4): uniform over the 24 orders */
        int j = (int)rf__rng_below(rng, (uint64_t)i + 1);
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    double f[4];
    for (int k = 0; k < 4; k++)
        f[k] = a->jitter_on[k] ? (double)uniform_f(rng, a->jitter[k][0], a->jitter[k][1]) : NAN;
    for (int k = 0; k < 4; k++)
        rec(d, perm[k]);
    for (int k = 0; k < 4; k++)
        rec(d, f[k]);
    static const int kinds[4] = {RF__OP_BRIGHTNESS, RF__OP_CONTRAST, RF__OP_SATURATION,
                                 RF__OP_HUE};
    for (int k = 0; k < 4; k++) {
        int fn = perm[k];
        if (!a->jitter_on[fn])
            continue;
        push(plan, a, from, kinds[fn], f[fn], -1);
        plan->op[plan->n - 1].arg = f[fn]; /* the factor itself */
    }
}

static void draw_erasing(const rf_aug *a, int from, int w, int h, rf_rng *rng, rf_aug_plan *plan,
                         rf_aug_draws *d)
{
    int applied = uniform_f(rng, 0.0, 1.0) < (float)a->p;
    int top = -1, left = -1, eh = -1, ew = -1;
    uint64_t key = 0;
    if (applied) {
        double area = (double)h * (double)w;
        float lr0 = logf((float)a->ratio[0]), lr1 = logf((float)a->ratio[1]);
        for (int t = 0; t < 10; t++) {
            double ea = area * (double)uniform_f(rng, a->scale[0], a->scale[1]);
            double ar = (double)expf(uniform_f(rng, lr0, lr1));
            int hh = (int)round_half_even(sqrt(ea * ar));
            int ww = (int)round_half_even(sqrt(ea / ar));
            if (!(hh < h && ww < w))
                continue;
            if (a->value_random)
                key = rf__rng_u64(rng); /* the normal_() values' own stream */
            top = (int)rf__rng_below(rng, (uint64_t)(h - hh + 1));
            left = (int)rf__rng_below(rng, (uint64_t)(w - ww + 1));
            eh = hh;
            ew = ww;
            break;
        }
    }
    rec(d, applied);
    rec(d, top);
    rec(d, left);
    rec(d, eh);
    rec(d, ew);
    if (eh < 0)
        return; /* not applied, or no box fitted in ten tries: the picture is kept */
    push(plan, a, from, RF__OP_ERASE, 0.0, -1);
    rf_op *o = &plan->op[plan->n - 1];
    o->top = top;
    o->left = left;
    o->height = eh;
    o->width = ew;
    o->value_random = a->value_random;
    o->erase_key = key;
    memcpy(o->value, a->value, sizeof o->value);
}

void rf__aug_draw_one(const rf_aug *a, int from, int w, int h, rf_rng *rng, rf_aug_plan *plan,
                      rf_aug_draws *d)
{
    switch (a->kind) {
    case RF__AUG_RANDAUGMENT: draw_randaugment(a, from, w, h, rng, plan, d); break;
    case RF__AUG_TRIVIALAUGMENTWIDE: draw_trivial(a, from, w, h, rng, plan, d); break;
    case RF__AUG_AUTOAUGMENT: draw_autoaugment(a, from, w, h, rng, plan, d); break;
    case RF__AUG_COLORJITTER: draw_colorjitter(a, from, rng, plan, d); break;
    case RF__AUG_RANDOMGRAYSCALE: {
        int g = uniform_f(rng, 0.0, 1.0) < (float)a->p;
        rec(d, g);
        if (g)
            push(plan, a, from, RF__OP_GRAYSCALE, 0.0, -1);
        break;
    }
    case RF__AUG_RANDOMERASING: draw_erasing(a, from, w, h, rng, plan, d); break;
    default: break;
    }
}
