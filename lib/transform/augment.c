/*
 * augment.c - the augmentation list: parsing its spec string, a sample's
 * stream, drawing the list into a plan and running the plan, and the plan as
 * JSON for explain (see augment.h).
 *
 * The spec is the text rf_loader_set_augment documents: transforms separated
 * by ';', each torchvision's class name and its arguments in parentheses,
 * positional in torchvision's order or by name ("RandAugment(2, 9)",
 * "RandomErasing(p=0.25, value='random')"). Every argument is checked here,
 * once, as torchvision's constructors check them (and a little more: a range
 * with min > max is refused, not warned about), so that drawing and running
 * never meet a bad value.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "augment.h"
#include "ringfeed.h"
#include "json.h"

/* ---- names and arguments ---------------------------------------------------- */

typedef struct aug_def {
    int kind;
    const char *name;
    const char *args[5]; /* positional order, as torchvision's signature */
} aug_def;

static const aug_def defs[] = {
    {RF__AUG_RANDAUGMENT, "RandAugment", {"num_ops", "magnitude", "num_magnitude_bins", "fill"}},
    {RF__AUG_TRIVIALAUGMENTWIDE, "TrivialAugmentWide", {"num_magnitude_bins", "fill"}},
    {RF__AUG_AUTOAUGMENT, "AutoAugment", {"policy", "fill"}},
    {RF__AUG_COLORJITTER, "ColorJitter", {"brightness", "contrast", "saturation", "hue"}},
    {RF__AUG_RANDOMGRAYSCALE, "RandomGrayscale", {"p"}},
    {RF__AUG_RANDOMERASING, "RandomErasing", {"p", "scale", "ratio", "value"}},
};
enum { NDEFS = sizeof defs / sizeof defs[0] };

const char *rf__aug_name(int kind)
{
    for (int i = 0; i < NDEFS; i++)
        if (defs[i].kind == kind)
            return defs[i].name;
    return "?";
}

/* One parsed value: numbers (1 to 3) or a word. */
typedef struct value {
    int n; /* numbers; 0 for a word */
    double x[3];
    char word[32];
    int tuple; /* written in parentheses or brackets */
} value;

typedef struct cursor {
    const char *p;
    char *err;
    size_t errcap;
    const char *what; /* the transform being parsed, for messages */
} cursor;

static void skip_ws(cursor *c)
{
    while (isspace((unsigned char)*c->p))
        c->p++;
}

static int fail(cursor *c, const char *fmt, const char *a)
{
    char msg[200];
    snprintf(msg, sizeof msg, fmt, a);
    snprintf(c->err, c->errcap, "augment: %s%s%s", c->what ? c->what : "",
             c->what ? ": " : "", msg);
    return RF_E_INVALID;
}

static int is_word_char(int ch)
{
    return isalnum(ch) || ch == '_' || ch == '.';
}

static int parse_number(cursor *c, double *out)
{
    char *end;
    double v = strtod(c->p, &end);
    if (end == c->p || !isfinite(v))
        return fail(c, "a number expected at \"%.20s\"", c->p);
    c->p = end;
    *out = v;
    return RF_OK;
}

static int parse_value(cursor *c, value *v)
{
    memset(v, 0, sizeof *v);
    skip_ws(c);
    char open = *c->p;
    if (open == '(' || open == '[') {
        char close = open == '(' ? ')' : ']';
        c->p++;
        v->tuple = 1;
        for (;;) {
            skip_ws(c);
            if (*c->p == close && v->n > 0)
                break;
            if (v->n == 3)
                return fail(c, "at most 3 numbers in a tuple, at \"%.20s\"", c->p);
            if (parse_number(c, &v->x[v->n]) != RF_OK)
                return RF_E_INVALID;
            v->n++;
            skip_ws(c);
            if (*c->p == ',')
                c->p++;
            else if (*c->p != close)
                return fail(c, "',' or the tuple's end expected at \"%.20s\"", c->p);
        }
        c->p++;
        return RF_OK;
    }
    if (open == '\'' || open == '"') {
        const char *q = strchr(c->p + 1, open);
        if (!q || q - c->p - 1 >= (ptrdiff_t)sizeof v->word)
            return fail(c, "an unterminated or long string at \"%.20s\"", c->p);
        memcpy(v->word, c->p + 1, (size_t)(q - c->p - 1));
        c->p = q + 1;
        return RF_OK;
    }
    if (isalpha((unsigned char)open)) {
        size_t n = 0;
        while (is_word_char((unsigned char)c->p[n]))
            n++;
        if (n >= sizeof v->word)
            return fail(c, "a word too long at \"%.20s\"", c->p);
        memcpy(v->word, c->p, n);
        c->p += n;
        return RF_OK;
    }
    v->n = 1;
    return parse_number(c, &v->x[0]);
}

/* ---- checks, argument by argument ------------------------------------------- */

static int want_int(cursor *c, const char *key, const value *v, int lo, int hi, int *out)
{
    char what[120];
    if (v->n != 1 || v->tuple || v->x[0] != floor(v->x[0]) || v->x[0] < lo || v->x[0] > hi) {
        snprintf(what, sizeof what, "%s must be an integer in [%d, %d]", key, lo, hi);
        return fail(c, "%s", what);
    }
    *out = (int)v->x[0];
    return RF_OK;
}

static int want_unit(cursor *c, const char *key, const value *v, double *out)
{
    if (v->n != 1 || v->tuple || !(v->x[0] >= 0.0 && v->x[0] <= 1.0))
        return fail(c, "%s must be a number in [0, 1]", key);
    *out = v->x[0];
    return RF_OK;
}

/* fill: None, a number or one per channel, each in [0, 255]. */
static int want_fill(cursor *c, const value *v, double fill[3])
{
    if (v->n == 0 && !strcmp(v->word, "None")) {
        fill[0] = fill[1] = fill[2] = 0.0;
        return RF_OK;
    }
    if (v->n != 1 && v->n != 3)
        return fail(c, "%s must be None, a number or 3 numbers", "fill");
    for (int k = 0; k < 3; k++) {
        double x = v->x[v->n == 1 ? 0 : k];
        if (!(x >= 0.0 && x <= 255.0))
            return fail(c, "%s values must be in [0, 255]", "fill");
        fill[k] = x;
    }
    return RF_OK;
}

/* ColorJitter's _check_input: a number v gives [center - v, center + v] (the
 * low end clipped at 0 but for hue), a pair must lie within the bounds; a
 * range equal to [center, center] turns the jitter off. */
static int want_jitter(cursor *c, const char *key, const value *v, int k, rf_aug *a)
{
    int is_hue = k == 3;
    double center = is_hue ? 0.0 : 1.0, lo, hi;
    double blo = is_hue ? -0.5 : 0.0, bhi = is_hue ? 0.5 : INFINITY;
    if (v->n == 1 && !v->tuple) {
        if (v->x[0] < 0)
            return fail(c, "%s must be non-negative", key);
        lo = center - v->x[0];
        hi = center + v->x[0];
        if (!is_hue && lo < 0)
            lo = 0;
        if (is_hue && !(hi <= 0.5))
            return fail(c, "%s must be in [0, 0.5]", key);
    } else if (v->n == 2) {
        lo = v->x[0];
        hi = v->x[1];
    } else {
        return fail(c, "%s must be a number or a pair (min, max)", key);
    }
    if (!(blo <= lo && lo <= hi && hi <= bhi))
        return fail(c, is_hue ? "%s values must satisfy -0.5 <= min <= max <= 0.5"
                              : "%s values must satisfy 0 <= min <= max",
                    key);
    a->jitter[k][0] = lo;
    a->jitter[k][1] = hi;
    a->jitter_on[k] = !(lo == center && hi == center);
    return RF_OK;
}

static int want_pair(cursor *c, const char *key, const value *v, double lo, double hi,
                     double out[2])
{
    if (v->n != 2 || !(v->x[0] >= lo && v->x[1] <= hi && v->x[0] <= v->x[1]) ||
        (lo == 0.0 && key[0] == 'r' && !(v->x[0] > 0.0)))
        return fail(c, "%s must be a pair (min, max) with min <= max, within its range "
                       "(scale in [0, 1], ratio > 0)",
                    key);
    out[0] = v->x[0];
    out[1] = v->x[1];
    return RF_OK;
}

static int set_arg(cursor *c, rf_aug *a, const char *key, const value *v)
{
    switch (a->kind) {
    case RF__AUG_RANDAUGMENT:
    case RF__AUG_TRIVIALAUGMENTWIDE:
    case RF__AUG_AUTOAUGMENT:
        if (!strcmp(key, "num_ops") && a->kind == RF__AUG_RANDAUGMENT)
            return want_int(c, key, v, 0, RF__AUG_MAX_OPS, &a->num_ops);
        if (!strcmp(key, "magnitude") && a->kind == RF__AUG_RANDAUGMENT)
            return want_int(c, key, v, 0, RF__AUG_MAX_BINS - 1, &a->magnitude);
        if (!strcmp(key, "num_magnitude_bins") && a->kind != RF__AUG_AUTOAUGMENT)
            return want_int(c, key, v, 2, RF__AUG_MAX_BINS, &a->num_bins);
        if (!strcmp(key, "fill"))
            return want_fill(c, v, a->fill);
        if (!strcmp(key, "interpolation")) { /* NEAREST is the one mode offered */
            if (v->n || (strcasecmp(v->word, "nearest") &&
                         strcasecmp(v->word, "InterpolationMode.NEAREST")))
                return fail(c, "%s: only NEAREST is supported", key);
            return RF_OK;
        }
        if (!strcmp(key, "policy") && a->kind == RF__AUG_AUTOAUGMENT) {
            const char *w = v->word;
            if (!strncasecmp(w, "AutoAugmentPolicy.", 18))
                w += 18;
            if (v->n == 0 && !strcasecmp(w, "imagenet"))
                a->policy = RF__POLICY_IMAGENET;
            else if (v->n == 0 && !strcasecmp(w, "cifar10"))
                a->policy = RF__POLICY_CIFAR10;
            else if (v->n == 0 && !strcasecmp(w, "svhn"))
                a->policy = RF__POLICY_SVHN;
            else
                return fail(c, "%s must be imagenet, cifar10 or svhn", key);
            return RF_OK;
        }
        break;
    case RF__AUG_COLORJITTER:
        for (int k = 0; k < 4; k++)
            if (!strcmp(key, defs[3].args[k]))
                return want_jitter(c, key, v, k, a);
        break;
    case RF__AUG_RANDOMGRAYSCALE:
        if (!strcmp(key, "p"))
            return want_unit(c, key, v, &a->p);
        break;
    case RF__AUG_RANDOMERASING:
        if (!strcmp(key, "p"))
            return want_unit(c, key, v, &a->p);
        if (!strcmp(key, "scale"))
            return want_pair(c, key, v, 0.0, 1.0, a->scale);
        if (!strcmp(key, "ratio"))
            return want_pair(c, key, v, 0.0, 1e6, a->ratio);
        if (!strcmp(key, "value")) {
            if (v->n == 0 && !strcmp(v->word, "random")) {
                a->value_random = 1;
                return RF_OK;
            }
            if (v->n != 1 && v->n != 3)
                return fail(c, "%s must be a number, 3 numbers or \"random\"", key);
            for (int k = 0; k < 3; k++)
                a->value[k] = v->x[v->n == 1 ? 0 : k];
            a->value_random = 0;
            return RF_OK;
        }
        break;
    default:
        break;
    }
    return fail(c, "unknown argument \"%s\"", key);
}

static void defaults(rf_aug *a, int kind)
{
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->num_ops = 2;
    a->magnitude = 9;
    a->num_bins = 31;
    a->policy = RF__POLICY_IMAGENET;
    a->p = kind == RF__AUG_RANDOMGRAYSCALE ? 0.1 : 0.5;
    a->scale[0] = 0.02;
    a->scale[1] = 0.33;
    a->ratio[0] = 0.3;
    a->ratio[1] = 3.3;
}

/* name [ '(' args ')' ] */
static int parse_transform(cursor *c, rf_aug *a)
{
    skip_ws(c);
    size_t n = 0;
    while (is_word_char((unsigned char)c->p[n]))
        n++;
    const aug_def *def = NULL;
    for (int i = 0; i < NDEFS && n; i++)
        if (strlen(defs[i].name) == n && !strncasecmp(c->p, defs[i].name, n))
            def = &defs[i];
    if (!def) {
        char name[48];
        snprintf(name, sizeof name, "%.*s", (int)(n < 40 ? n : 40), c->p);
        return fail(c, "unknown transform \"%s\" (RandAugment, TrivialAugmentWide, AutoAugment, "
                       "ColorJitter, RandomGrayscale, RandomErasing)",
                    n ? name : c->p);
    }
    c->p += n;
    c->what = def->name;
    defaults(a, def->kind);
    skip_ws(c);
    if (*c->p != '(')
        goto check;
    c->p++;
    int pos = 0, named = 0, seen = 0;
    for (;;) {
        skip_ws(c);
        if (*c->p == ')')
            break;
        char key[40] = "";
        const char *q = c->p;
        size_t k = 0;
        while (isalnum((unsigned char)q[k]) || q[k] == '_')
            k++;
        const char *eq = q + k;
        while (isspace((unsigned char)*eq))
            eq++;
        if (k > 0 && k < sizeof key && *eq == '=') {
            memcpy(key, q, k);
            key[k] = '\0';
            c->p = eq + 1;
            named = 1;
        } else {
            if (named)
                return fail(c, "a positional argument after a named one, at \"%.20s\"", c->p);
            if (pos >= 5 || !def->args[pos])
                return fail(c, "too many arguments, at \"%.20s\"", c->p);
            snprintf(key, sizeof key, "%s", def->args[pos++]);
        }
        int idx = -1;
        for (int i = 0; i < 5 && def->args[i]; i++)
            if (!strcmp(def->args[i], key))
                idx = i;
        if (idx >= 0) {
            if (seen & (1 << idx))
                return fail(c, "argument \"%s\" given twice", key);
            seen |= 1 << idx;
        }
        value v;
        if (parse_value(c, &v) != RF_OK || set_arg(c, a, key, &v) != RF_OK)
            return RF_E_INVALID;
        skip_ws(c);
        if (*c->p == ',')
            c->p++;
        else if (*c->p != ')')
            return fail(c, "',' or ')' expected at \"%.20s\"", c->p);
    }
    c->p++;
check:
    if (a->kind == RF__AUG_RANDAUGMENT && a->magnitude >= a->num_bins) {
        char m[100];
        snprintf(m, sizeof m, "magnitude %d must be below num_magnitude_bins %d", a->magnitude,
                 a->num_bins);
        return fail(c, "%s", m);
    }
    c->what = NULL;
    return RF_OK;
}

int rf__aug_parse(const char *spec, rf_aug_list *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (!spec)
        return RF_OK;
    if (strlen(spec) > 4096) {
        snprintf(err, errcap, "augment: the spec is longer than 4096 bytes");
        return RF_E_INVALID;
    }
    cursor c = {spec, err, errcap, NULL};
    rf_aug_list l = {0};
    for (;;) {
        skip_ws(&c);
        if (!*c.p)
            break;
        if (l.n == RF__AUG_MAX) {
            snprintf(err, errcap, "augment: more than %d transforms", RF__AUG_MAX);
            return RF_E_INVALID;
        }
        if (parse_transform(&c, &l.a[l.n]) != RF_OK)
            return RF_E_INVALID;
        l.n++;
        skip_ws(&c);
        if (*c.p == ';')
            c.p++;
        else if (*c.p)
            return fail(&c, "';' expected between transforms, at \"%.20s\"", c.p);
    }
    *out = l;
    return RF_OK;
}

/* ---- drawing and running ----------------------------------------------------- */

rf_rng rf__aug_stream(uint64_t seed, int64_t epoch, int64_t sample)
{
    return rf__rng_make(seed, (uint64_t)epoch, (uint64_t)sample ^ 0x4155474d454e54ULL /* "AUGMENT" */);
}

uint64_t rf__sample_fn_seed(uint64_t seed, int64_t epoch, int64_t sample)
{
    rf_rng r = rf__rng_make(seed, (uint64_t)epoch, (uint64_t)sample ^ 0x53414d504c45ULL /* "SAMPLE" */);
    return rf__rng_u64(&r);
}

void rf__aug_draw(const rf_aug_list *l, int w, int h, rf_rng *rng, rf_aug_plan *plan)
{
    plan->n = 0;
    for (int i = 0; i < l->n; i++)
        rf__aug_draw_one(&l->a[i], i, w, h, rng, plan, NULL);
}

int rf__aug_plan_defer(rf_aug_plan *plan)
{
    int n = 0;
    for (int i = plan->n - 1; i >= 0 && plan->op[i].kind == RF__OP_ERASE; i--, n++)
        plan->op[i].deferred = 1;
    return n;
}

int rf__aug_run(const rf_aug_plan *plan, uint8_t *px, int w, int h, ptrdiff_t stride,
                rf_aug_scratch *scr, char *err, size_t errcap)
{
    for (int i = 0; i < plan->n; i++) {
        if (plan->op[i].deferred)
            continue;
        int rc = rf__op_run(&plan->op[i], px, w, h, stride, scr, err, errcap);
        if (rc != RF_OK)
            return rc;
    }
    return RF_OK;
}

void rf__aug_normals(uint64_t key, float *out, size_t n)
{
    rf_rng rng = rf__rng_make(key, 0x4e4f524d414cULL /* "NORMAL" */, 0);
    for (size_t i = 0; i < n; i += 2) {
        /* Box-Muller; 1 - u keeps the logarithm's argument in (0, 1]. */
        double u1 = 1.0 - rf__rng_uniform(&rng), u2 = rf__rng_uniform(&rng);
        double r = sqrt(-2.0 * log(u1)), t = 2.0 * 3.14159265358979323846 * u2;
        out[i] = (float)(r * cos(t));
        if (i + 1 < n)
            out[i + 1] = (float)(r * sin(t));
    }
}

/* The functional argument's name per op, for explain. */
static const char *arg_name(int kind)
{
    switch (kind) {
    case RF__OP_SHEARX: case RF__OP_SHEARY: return "shear";
    case RF__OP_TRANSLATEX: case RF__OP_TRANSLATEY: return "pixels";
    case RF__OP_ROTATE: return "angle";
    case RF__OP_POSTERIZE: return "bits";
    case RF__OP_SOLARIZE: return "threshold";
    case RF__OP_BRIGHTNESS: case RF__OP_COLOR: case RF__OP_CONTRAST: case RF__OP_SHARPNESS:
    case RF__OP_HUE: case RF__OP_SATURATION: return "factor";
    default: return NULL;
    }
}

void rf__aug_plan_json(const rf_aug_plan *plan, const rf_aug_list *l, struct rf_json *j)
{
    rf__json_raw(j, "[");
    for (int i = 0; i < plan->n; i++) {
        const rf_op *o = &plan->op[i];
        const rf_aug *a = &l->a[o->from];
        rf__json_fmt(j, "%s{\"op\": \"%s\", \"transform\": \"%s\", \"index\": %d", i ? ", " : "",
                     rf__op_name(o->kind), rf__aug_name(a->kind), o->from);
        const char *an = arg_name(o->kind);
        if (a->kind == RF__AUG_RANDAUGMENT || a->kind == RF__AUG_TRIVIALAUGMENTWIDE ||
            a->kind == RF__AUG_AUTOAUGMENT)
            rf__json_fmt(j, ", \"magnitude\": %.17g, \"bin\": %d", o->magnitude, o->bin);
        if (o->kind == RF__OP_SHEARX || o->kind == RF__OP_SHEARY)
            rf__json_fmt(j, ", \"%s\": %.17g", an, atan(o->arg) * (180.0 / 3.14159265358979323846));
        else if (an)
            rf__json_fmt(j, ", \"%s\": %.17g", an, o->arg);
        if (o->kind >= RF__OP_SHEARX && o->kind <= RF__OP_ROTATE)
            rf__json_fmt(j, ", \"fill\": [%.17g, %.17g, %.17g]", o->fill[0], o->fill[1],
                         o->fill[2]);
        if (o->kind == RF__OP_ERASE) {
            rf__json_fmt(j, ", \"top\": %d, \"left\": %d, \"height\": %d, \"width\": %d", o->top,
                         o->left, o->height, o->width);
            if (o->value_random)
                rf__json_raw(j, ", \"value\": \"random\"");
            else
                rf__json_fmt(j, ", \"value\": [%.17g, %.17g, %.17g]", o->value[0], o->value[1],
                             o->value[2]);
            rf__json_fmt(j, ", \"deferred\": %s", o->deferred ? "true" : "false");
        }
        rf__json_raw(j, "}");
    }
    rf__json_raw(j, "]");
}
