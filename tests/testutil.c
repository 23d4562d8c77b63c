/*
 * testutil.c - photo-like pictures made at test time, and image folders of
 * them (the JPEG encoding is in testutil_jpeg.c, files and list files in
 * testutil_files.c; all three are declared in testutil.h).
 *
 * Pictures are synthetic but built to compress, decode and resize like photos:
 * a sky/ground gradient under slow lighting changes, a few shaded shapes with
 * straight, curved and diagonal edges, fractal value-noise texture whose
 * strength differs by region (smooth sky, busy ground, some striped "fabric"),
 * and mild per-pixel sensor noise. At 500x375, quality 90, 4:2:0 that lands
 * around 60-120 KB, like ImageNet photos.
 *
 * Everything is integer arithmetic driven by a seeded hash, so a seed gives
 * the same pixels with any compiler or flags, and (with the same libjpeg-turbo)
 * the same JPEG bytes. No global state: every function is safe to call from
 * several threads at once (bench/gen_folder.c does).
 */
#include "testutil.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------- hashing */

/* A strong 32-bit integer mixer (Wellons' lowbias32): lattice values and
 * per-pixel noise must look independent, or the texture shows grid artefacts. */
static uint32_t mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

static uint32_t hash3(uint32_t seed, uint32_t a, uint32_t b)
{
    return mix32(seed ^ mix32(a + 0x9e3779b9U * mix32(b ^ 0x85ebca6bU)));
}

/* Cheaper hash of a lattice point or pixel: one mixing round is enough
 * once the coordinates are spread by odd constants. */
static uint32_t hash2(uint32_t seed, uint32_t x, uint32_t y)
{
    return mix32(seed + x * 0x9e3779b1U + y * 0x85ebca77U);
}

/* Sequential parameter stream for one picture (SplitMix64). */
typedef struct {
    uint64_t s;
} prng;

static uint32_t prng_next(prng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* Uniform integer in [lo, hi]; the modulo bias is irrelevant here. */
static int prng_range(prng *r, int lo, int hi)
{
    return lo + (int)(prng_next(r) % (uint32_t)(hi - lo + 1));
}

static int clamp255(int v)
{
    return v < 0 ? 0 : v > 255 ? 255 : v;
}

/* ------------------------------------------------------------ value noise */

/* Adds one octave of smooth value noise (lattice period p px, values
 * -256..255 scaled by amp/256) to field f. The lattice is filled once and the
 * smoothstep weights tabulated, so an octave costs a few integer operations
 * per pixel. Returns -1 on allocation failure. */
static int add_octave(int32_t *f, int w, int h, int p, int amp, uint32_t seed)
{
    int gw = w / p + 2, gh = h / p + 2;
    int16_t *lat = malloc((size_t)gw * (size_t)gh * sizeof *lat);
    int32_t *wt = malloc((size_t)p * sizeof *wt);
    if (!lat || !wt) {
        free(lat);
        free(wt);
        return -1;
    }
    for (int gy = 0; gy < gh; gy++)
        for (int gx = 0; gx < gw; gx++)
            lat[(size_t)gy * gw + gx] =
                (int16_t)((int)(hash2(seed, (uint32_t)gx, (uint32_t)gy) & 511) - 256);
    for (int t = 0; t < p; t++) {
        int32_t s = t * 256 / p;               /* 0..255 */
        wt[t] = s * s * (768 - 2 * s) / 65536; /* smoothstep, 0..256 */
    }
    for (int y = 0; y < h; y++) {
        const int16_t *r0 = lat + (size_t)(y / p) * gw, *r1 = r0 + gw;
        int64_t ty = wt[y % p];
        int32_t *row = f + (size_t)y * w;
        /* Walk lattice cell and offset together: no division per pixel. */
        for (int x = 0, gx = 0, t = 0; x < w; x++) {
            int32_t tx = wt[t];
            int32_t top = r0[gx] * 256 + (r0[gx + 1] - r0[gx]) * tx;
            int32_t bot = r1[gx] * 256 + (r1[gx + 1] - r1[gx]) * tx;
            int64_t v = (int64_t)top * 256 + (int64_t)(bot - top) * ty; /* value << 16 */
            row[x] += (int32_t)((v * amp) >> 24);
            if (++t == p) {
                t = 0;
                gx++;
            }
        }
    }
    free(lat);
    free(wt);
    return 0;
}

/* Periodic wave in -256..256 from a phase in 1/256 periods: two parabolas,
 * close enough to a sine for stripes and integer-exact. */
static int wave(int32_t phase)
{
    int t = phase & 255, u = t & 127;
    int s = u * (128 - u) / 16; /* 0..256 */
    return t < 128 ? s : -s;
}

/* ------------------------------------------------------------- the picture */

enum { SH_ELLIPSE, SH_RECT, SH_TRIANGLE };

typedef struct {
    int kind;
    int x0, y0, x1, y1;     /* bounding box, half-open */
    int64_t cx, cy, rx, ry; /* ellipse centre and radii */
    int64_t e[3][3];        /* triangle: inside when a*x + b*y + c >= 0 for all edges */
    int col[3];
    int gx, gy;             /* shading: brightness change per 256 px */
    int tex;                /* texture strength, /256 */
    int stripe, su, sv, sp; /* stripe amplitude, direction (/256), period px */
} shape;

/* Directions for stripes: cos/sin of k * 22.5 degrees, times 256. */
static const int dir8[8][2] = {{256, 0}, {237, 98},  {181, 181},  {98, 237},
                               {0, 256}, {-98, 237}, {-181, 181}, {-237, 98}};

static int64_t floor_div(int64_t a, int64_t b) /* b > 0 */
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* The shape's pixels on row y: [*xa, *xb), empty when *xa >= *xb. Every shape
 * is convex, so one span per row describes it exactly and the pixel loop only
 * compares. */
static void row_span(const shape *s, int y, int *xa, int *xb)
{
    int64_t lo = s->x0, hi = s->x1; /* half-open */
    if (y < s->y0 || y >= s->y1) {
        *xa = *xb = 0;
        return;
    }
    if (s->kind == SH_ELLIPSE) {
        /* (dx/rx)^2 + (dy/ry)^2 <= 1 in 1/65536 units; |dx| <= rx, |dy| <= ry
         * within the box, so nothing overflows at any image size. Binary
         * search for the widest dx (the test is monotone in |dx|). */
        int64_t dy = y - s->cy, room = 65536 - dy * dy * 65536 / (s->ry * s->ry);
        int64_t a = -1, b = s->rx; /* a fits (or none does), b + 1 does not */
        if (room >= 0) {
            a = 0;
            while (a < b) {
                int64_t m = (a + b + 1) / 2;
                if (m * m * 65536 / (s->rx * s->rx) <= room)
                    a = m;
                else
                    b = m - 1;
            }
        }
        if (a < 0) {
            *xa = *xb = 0;
            return;
        }
        if (s->cx - a > lo)
            lo = s->cx - a;
        if (s->cx + a + 1 < hi)
            hi = s->cx + a + 1;
    } else if (s->kind == SH_TRIANGLE) {
        /* Each edge a*x + b*y + c >= 0 bounds x from one side. */
        for (int i = 0; i < 3; i++) {
            int64_t ea = s->e[i][0], k = -(s->e[i][1] * y + s->e[i][2]);
            if (ea > 0) {
                int64_t m = -floor_div(-k, ea); /* ceil(k / ea) */
                if (m > lo)
                    lo = m;
            } else if (ea < 0) {
                int64_t m = floor_div(-k, -ea) + 1;
                if (m < hi)
                    hi = m;
            } else if (k > 0) {
                hi = lo;
            }
        }
    }
    *xa = (int)lo;
    *xb = (int)(hi > lo ? hi : lo);
}

static void random_colour(prng *r, int col[3], int lo, int hi)
{
    /* Mostly muted, correlated channels as in natural scenes, now and then a
     * saturated one so chroma subsampling has something to lose. */
    int base = prng_range(r, lo, hi), spread = prng_range(r, 0, 9) < 2 ? 110 : 45;
    for (int c = 0; c < 3; c++)
        col[c] = clamp255(base + prng_range(r, -spread, spread));
}

static void make_shape(prng *r, shape *s, int w, int h)
{
    int m = w > h ? w : h;
    memset(s, 0, sizeof *s);
    s->kind = prng_range(r, 0, 2);
    int cx = prng_range(r, 0, w - 1), cy = prng_range(r, 0, h - 1);
    int rx = 1 + (int)((int64_t)m * prng_range(r, 6, 28) / 100);
    int ry = 1 + (int)((int64_t)m * prng_range(r, 6, 28) / 100);
    s->x0 = cx - rx < 0 ? 0 : cx - rx;
    s->y0 = cy - ry < 0 ? 0 : cy - ry;
    s->x1 = cx + rx + 1 > w ? w : cx + rx + 1;
    s->y1 = cy + ry + 1 > h ? h : cy + ry + 1;
    s->cx = cx;
    s->cy = cy;
    s->rx = rx;
    s->ry = ry;
    if (s->kind == SH_TRIANGLE) {
        /* Three points on the box's edges give slanted edges of any angle;
         * orient the edge equations so the inside is positive. */
        int64_t px[3], py[3];
        px[0] = cx + prng_range(r, -rx, rx), py[0] = cy - ry;
        px[1] = cx - rx, py[1] = cy + prng_range(r, 0, ry);
        px[2] = cx + rx, py[2] = cy + prng_range(r, -ry / 2, ry);
        int64_t area = (px[1] - px[0]) * (py[2] - py[0]) - (py[1] - py[0]) * (px[2] - px[0]);
        int sign = area < 0 ? -1 : 1;
        for (int i = 0; i < 3; i++) {
            int j = (i + 1) % 3;
            s->e[i][0] = sign * -(py[j] - py[i]);
            s->e[i][1] = sign * (px[j] - px[i]);
            s->e[i][2] = -(s->e[i][0] * px[i] + s->e[i][1] * py[i]);
        }
    }
    random_colour(r, s->col, 25, 230);
    s->gx = prng_range(r, -40, 40);
    s->gy = prng_range(r, -40, 40);
    s->tex = prng_range(r, 0, 9) < 3 ? prng_range(r, 20, 50) : prng_range(r, 70, 170);
    if (prng_range(r, 0, 9) < 3) {
        s->stripe = prng_range(r, 10, 30);
        const int *d = dir8[prng_range(r, 0, 7)];
        s->su = d[0];
        s->sv = d[1];
        s->sp = prng_range(r, 5, 16);
    }
}

uint8_t *tu_make_rgb(int width, int height, uint32_t seed)
{
    if (width <= 0 || height <= 0 || (size_t)width > SIZE_MAX / 3 / (size_t)height)
        return NULL;
    size_t n = (size_t)width * (size_t)height;
    uint8_t *rgb = malloc(n * 3);
    int32_t *tex = calloc(n, sizeof *tex);     /* fine texture, about -256..256 */
    int32_t *light = calloc(n, sizeof *light); /* slow lighting, -256..256 */
    if (!rgb || !tex || !light)
        goto fail;

    prng r = {((uint64_t)seed << 32) ^ 0x74657374ULL ^ seed};
    uint32_t hs = prng_next(&r);
    /* Texture octaves from ~1/8 of a 500 px picture down to 2 px: the
     * mid frequencies dominate, the finest octave stays weak. */
    static const int periods[] = {48, 24, 12, 6, 3, 2, 1};
    static const int amps[] = {100, 90, 90, 90, 90, 90, 80};
    for (int i = 0; i < 7; i++)
        if (add_octave(tex, width, height, periods[i], amps[i], hs + (uint32_t)i) < 0)
            goto fail;
    int m = width > height ? width : height;
    if (add_octave(light, width, height, m / 3 + 1, 256, hs ^ 0x5a5a5a5aU) < 0)
        goto fail;

    /* Scene: sky colour at the top, horizon, ground colour at the bottom. */
    int sky_top[3], sky_low[3], ground[3], ground_far[3];
    random_colour(&r, sky_top, 90, 200);
    random_colour(&r, sky_low, 140, 235);
    random_colour(&r, ground, 30, 140);
    random_colour(&r, ground_far, 60, 170);
    int horizon = (int)((int64_t)height * prng_range(&r, 25, 70) / 100);
    int sky_tex = prng_range(&r, 10, 35), ground_tex = prng_range(&r, 90, 180);
    int light_amp = prng_range(&r, 15, 40);
    int noise_amp = prng_range(&r, 3, 6);
    int chroma_tint[3];
    for (int c = 0; c < 3; c++)
        chroma_tint[c] = prng_range(&r, 140, 256); /* texture is not perfectly gray */

    enum { MAX_SHAPES = 8 };
    shape shapes[MAX_SHAPES];
    int nshapes = prng_range(&r, 3, MAX_SHAPES);
    for (int i = 0; i < nshapes; i++)
        make_shape(&r, &shapes[i], width, height);

    for (int y = 0; y < height; y++) {
        int bg[3], bgtex;
        if (y < horizon) {
            for (int c = 0; c < 3; c++)
                bg[c] = sky_top[c] + (sky_low[c] - sky_top[c]) * y / (horizon > 0 ? horizon : 1);
            bgtex = sky_tex;
        } else {
            int span = height - horizon;
            for (int c = 0; c < 3; c++)
                bg[c] = ground_far[c] +
                        (ground[c] - ground_far[c]) * (y - horizon) / (span > 0 ? span : 1);
            bgtex = ground_tex;
        }
        int xa[MAX_SHAPES], xb[MAX_SHAPES];
        for (int k = 0; k < nshapes; k++)
            row_span(&shapes[k], y, &xa[k], &xb[k]);
        for (int x = 0; x < width; x++) {
            size_t i = (size_t)y * width + x;
            int base[3], amp = bgtex, add = 0;
            const shape *s = NULL;
            for (int k = nshapes - 1; k >= 0; k--) /* later shapes lie on top */
                if (x >= xa[k] && x < xb[k]) {
                    s = &shapes[k];
                    break;
                }
            if (s) {
                int shade = (s->gx * (x - (int)s->cx) + s->gy * (y - (int)s->cy)) / 256;
                for (int c = 0; c < 3; c++)
                    base[c] = s->col[c] + shade;
                amp = s->tex;
                if (s->stripe)
                    add = s->stripe * wave((s->su * x + s->sv * y) / s->sp) / 256;
            } else {
                /* A little horizontal drift so the background is not banded. */
                for (int c = 0; c < 3; c++)
                    base[c] = bg[c] + (x - width / 2) * (c - 1) * 8 / (m + 1);
            }
            int lum = light[i] * light_amp / 256 + tex[i] * amp / 256 + add;
            uint32_t hn = hash2(hs ^ 0xa5a5a5a5U, (uint32_t)x, (uint32_t)y);
            /* Triangular-distributed noise: shared luminance part plus a
             * smaller independent part per channel. */
            int nl = ((int)(hn & 255) + (int)((hn >> 8) & 255) - 255) * noise_amp / 255;
            for (int c = 0; c < 3; c++) {
                int nc = ((int)((hn >> (16 + 5 * c)) & 31) - 15) * noise_amp / 30;
                rgb[i * 3 + c] = (uint8_t)clamp255(base[c] + lum * chroma_tint[c] / 256 + nl + nc);
            }
        }
    }
    free(tex);
    free(light);
    return rgb;
fail:
    free(rgb);
    free(tex);
    free(light);
    return NULL;
}

/* ------------------------------------------------------------- comparing */

double tu_psnr(const uint8_t *a, const uint8_t *b, size_t n)
{
    if (n == 0)
        return INFINITY;
    uint64_t se = 0;
    for (size_t i = 0; i < n; i++) {
        int d = (int)a[i] - (int)b[i];
        se += (uint64_t)(d * d);
    }
    if (se == 0)
        return INFINITY;
    return 10.0 * log10(255.0 * 255.0 * (double)n / (double)se);
}

uint64_t tu_fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

long tu_max_rss_kib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

/* ---------------------------------------------------------------- folders */

static int digits(int v)
{
    int d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

static int folder_opts_ok(const tu_folder_opts *f)
{
    return f && f->classes >= 1 && f->per_class >= 1 && f->classes <= INT_MAX / f->per_class &&
           f->width >= 1 && f->height >= 1 && f->width <= 30000 && f->height <= 30000 &&
           f->quality >= 0 && f->quality <= 100;
}

/* One size scale in 80..120 (per cent) from a hash. */
static int scale_pct(uint32_t hv)
{
    return 80 + (int)(hv % 41);
}

void tu_folder_item(const tu_folder_opts *f, int index, tu_jpeg_opts *o)
{
    uint32_t hv = hash3(f->seed, (uint32_t)index, 0x666f6c64U);
    uint32_t hw = mix32(hv ^ 1), hh = mix32(hv ^ 2), hk = mix32(hv ^ 3);
    int w = (int)((int64_t)f->width * scale_pct(hw) / 100);
    int h = (int)((int64_t)f->height * scale_pct(hh) / 100);
    int portrait;

    memset(o, 0, sizeof *o);
    o->quality = f->quality ? f->quality : 90;
    o->seed = mix32(hv ^ 4);
    o->subsamp = TU_420;
    if (f->mix == TU_MIX_PHOTO) {
        /* Roughly what a photo collection holds: camera baseline 4:2:0,
         * some web-saved progressive files, a few 4:4:4, 4:2:2 and gray
         * scans, and now and then restart markers. */
        int k = (int)(hk % 100);
        if (k < 86) {
        } else if (k < 92) {
            o->progressive = 1;
        } else if (k < 95) {
            o->subsamp = TU_444;
        } else if (k < 97) {
            o->subsamp = TU_422;
        } else if (k < 99) {
            o->subsamp = TU_GRAY;
        } else {
            o->restart_rows = 2;
        }
        portrait = (hk >> 8) % 100 < 20;
    } else {
        switch (index % 8) {
        case 0:
            break;
        case 1:
            o->subsamp = TU_422;
            break;
        case 2:
            o->subsamp = TU_444;
            break;
        case 3:
            o->subsamp = TU_GRAY;
            break;
        case 4:
            o->progressive = 1;
            break;
        case 5:
            o->subsamp = TU_444;
            o->progressive = 1;
            break;
        case 6:
            o->restart_rows = 1;
            break;
        default:
            o->arithmetic = 1;
            break;
        }
        portrait = index % 5 == 3;
    }
    o->width = w < 1 ? 1 : w;
    o->height = h < 1 ? 1 : h;
    if (portrait && o->width > o->height) {
        int t = o->width;
        o->width = o->height;
        o->height = t;
    }
}

int tu_folder_path(char *buf, size_t n, const char *root, const tu_folder_opts *f, int index)
{
    if (!buf || !root || !folder_opts_ok(f) || index < 0 || index >= f->classes * f->per_class)
        return -1;
    /* Zero-padded wide enough that name order is index order (the label). */
    int cw = digits(f->classes - 1), iw = digits(f->per_class - 1);
    int r = snprintf(buf, n, "%s/class%0*d/img%0*d.jpg", root, cw < 2 ? 2 : cw,
                     index / f->per_class, iw < 4 ? 4 : iw, index % f->per_class);
    return r < 0 || (size_t)r >= n ? -1 : 0;
}

int tu_folder_prepare(const char *root, const tu_folder_opts *f)
{
    if (!root || !folder_opts_ok(f) || tu_mkdir_p(root) != 0)
        return -1;
    char path[PATH_MAX];
    for (int c = 0; c < f->classes; c++) {
        if (tu_folder_path(path, sizeof path, root, f, c * f->per_class) != 0)
            return -1;
        *strrchr(path, '/') = 0;
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return -1;
    }
    return 0;
}

int tu_folder_write_item(const char *root, const tu_folder_opts *f, int index, size_t *bytes)
{
    char path[PATH_MAX];
    tu_jpeg_opts o;
    uint8_t *jpg;
    size_t len;
    if (tu_folder_path(path, sizeof path, root, f, index) != 0)
        return -1;
    tu_folder_item(f, index, &o);
    if (tu_make_jpeg(&o, &jpg, &len) != 0)
        return -1;
    int rc = tu_write_file(path, jpg, len);
    free(jpg);
    if (rc == 0 && bytes)
        *bytes = len;
    return rc;
}

int tu_make_folder_ex(const char *root, const tu_folder_opts *f, uint64_t *total_bytes)
{
    if (tu_folder_prepare(root, f) != 0)
        return -1;
    uint64_t total = 0;
    for (int i = 0; i < f->classes * f->per_class; i++) {
        size_t len;
        if (tu_folder_write_item(root, f, i, &len) != 0)
            return -1;
        total += len;
    }
    if (total_bytes)
        *total_bytes = total;
    return 0;
}

int tu_make_folder(const char *root, int classes, int per_class, int width, int height,
                   uint32_t seed)
{
    tu_folder_opts f = {classes, per_class, width, height, 90, seed, TU_MIX_CYCLE};
    return tu_make_folder_ex(root, &f, NULL);
}
