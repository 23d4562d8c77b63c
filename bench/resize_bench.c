/*
 * resize_bench.c - rf-resize-bench: time of one rf__resample call on the
 * pictures and geometries the loader sees.
 *
 *   rf-resize-bench [--repeat N] [--size S] [--simd LEVEL] [--case NAME]
 *                   [--json FILE]
 *
 * The picture is photo-like (smooth gradients plus noise and some edges),
 * 500 x 375 RGB, the typical ImageNet size. Cases, each in NHWC and NCHW:
 *   center  Resize(256) + CenterCrop(224): 341 x 256 resampled, the centre
 *           224 x 224 kept (only that window is computed).
 *   rrc     RandomResizedCrop(224) + flip, a fixed set of 64 geometries drawn
 *           by rf__geom_rrc, each on the picture at the DCT scale the loader
 *           would decode it at (rf__geom_dct_denom), as the loader does.
 * Every repeat times one pass over the case (16 calls for center, the 64
 * calls for rrc, each after an untimed call of the same job, so that its
 * source is in cache as in the loader, which resamples rows it has just
 * decoded) and divides by the calls; the figure is the median over the
 * repeats, in ms per call and output Mpixel/s (S x S pixels per call).
 * The source region handed to rf__resample is rf__geom_bounds' rectangle, in
 * a buffer of its own, as the loader passes its decoded rows.
 * Every case runs at each instruction-set level the machine has (none: the
 * portable C; sse2; avx2: see rf__resampler_simd), or at --simd LEVEL
 * (0, 1, 2) alone; the loader uses the best. --case runs the cases whose
 * name starts with NAME.
 *
 * Baseline in the same run: built with -DRF_BENCH_BASELINE and linked with a
 * second copy of transform.c whose rf__ symbols are renamed base_rf__ (see
 * below), the bench times both versions interleaved, repeat by repeat, checks
 * that they give the same bytes, and prints the speed-up:
 *
 *   D=; for f in resampler_create resampler_destroy resampler_simd resample \
 *       geom_center geom_rrc geom_none geom_dct_denom geom_scale geom_bounds; do
 *     D="$D -Drf__$f=base_rf__$f"; done
 *   gcc -std=gnu11 -O2 -g -Ilib $D -c OLD/transform.c -o base.o
 *   gcc -std=gnu11 -O2 -g -Ilib -DRF_BENCH_BASELINE bench/resize_bench.c \
 *       bench/benchutil.c lib/transform/transform.c base.o -lm -o rf-resize-bench
 *
 * --json appends one JSON line per case with the machine, the parameters,
 * the git revision (see bu_git_revision) and every repeat's time.
 *
 * Links lib/transform/transform.c only, plus bench/benchutil.c and libm.
 */
#include "transform.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"

#ifdef RF_BENCH_BASELINE
rf_resampler *base_rf__resampler_create(void);
void base_rf__resampler_destroy(rf_resampler *r);
int base_rf__resample(rf_resampler *r, const rf_geom *g, int src_w, int src_h, const uint8_t *src,
                      size_t src_stride, int reg_x0, int reg_y0, int reg_w, int reg_h, uint8_t *dst,
                      int layout);
#endif

enum { PIC_W = 500, PIC_H = 375, RRC_N = 64 };

/* One call's inputs: geometry, and the region of the (DCT-scaled) picture. */
typedef struct job {
    rf_geom g;
    int full_w, full_h;
    int rx0, ry0, rw, rh;
    uint8_t *reg; /* rw x rh RGB, stride rw * 3 */
} job;

typedef int (*resample_fn)(rf_resampler *, const rf_geom *, int, int, const uint8_t *, size_t, int,
                           int, int, int, uint8_t *, int);

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "rf-resize-bench: out of memory\n");
        exit(1);
    }
    return p;
}

/* Photo-like: two gradients, a few hard edges, low-amplitude noise. */
static uint8_t *photo(int w, int h, uint32_t seed)
{
    uint8_t *p = xmalloc((size_t)w * h * 3);
    uint32_t s = seed * 2654435761u + 1u;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                int v = x * 200 / w + y * 55 / h + c * 30;
                if ((x / 37 + y / 29) % 3 == 0)
                    v = 255 - v; /* blocks with edges */
                v += (int)(s % 25) - 12;
                p[((size_t)y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return p;
}

/* Box-filters pic down by d (as a stand-in for libjpeg's DCT scaling) to
 * ceil(w / d) x ceil(h / d). */
static uint8_t *shrink(const uint8_t *pic, int w, int h, int d, int *ow, int *oh)
{
    int sw = (w + d - 1) / d, sh = (h + d - 1) / d;
    uint8_t *p = xmalloc((size_t)sw * sh * 3);
    for (int y = 0; y < sh; y++)
        for (int x = 0; x < sw; x++)
            for (int c = 0; c < 3; c++) {
                int sum = 0, n = 0;
                for (int v = y * d; v < y * d + d && v < h; v++)
                    for (int u = x * d; u < x * d + d && u < w; u++, n++)
                        sum += pic[((size_t)v * w + u) * 3 + c];
                p[((size_t)y * sw + x) * 3 + c] = (uint8_t)(sum / n);
            }
    *ow = sw;
    *oh = sh;
    return p;
}

/* Fills j for g on pic (w x h at full scale) the way decode.c does: DCT
 * scale, bounds, region copied out. */
static void make_job(job *j, rf_geom g, const uint8_t *pic, int w, int h)
{
    int d = rf__geom_dct_denom(&g);
    const uint8_t *p = pic;
    uint8_t *scaled = NULL;
    int fw = w, fh = h;
    if (d > 1) {
        rf__geom_scale(&g, d);
        scaled = shrink(pic, w, h, d, &fw, &fh);
        p = scaled;
    }
    int x0, y0, x1, y1;
    rf__geom_bounds(&g, fw, fh, &x0, &y0, &x1, &y1);
    j->g = g;
    j->full_w = fw;
    j->full_h = fh;
    j->rx0 = x0;
    j->ry0 = y0;
    j->rw = x1 - x0;
    j->rh = y1 - y0;
    j->reg = xmalloc((size_t)j->rw * j->rh * 3);
    for (int y = 0; y < j->rh; y++)
        memcpy(j->reg + (size_t)y * j->rw * 3, p + ((size_t)(y0 + y) * fw + x0) * 3,
               (size_t)j->rw * 3);
    free(scaled);
}

static void run_jobs(resample_fn fn, rf_resampler *r, const job *js, int n, uint8_t *dst,
                     int layout)
{
    for (int i = 0; i < n; i++) {
        const job *j = &js[i];
        if (fn(r, &j->g, j->full_w, j->full_h, j->reg, (size_t)j->rw * 3, j->rx0, j->ry0, j->rw,
               j->rh, dst, layout) != 0) {
            fprintf(stderr, "rf-resize-bench: rf__resample failed\n");
            exit(1);
        }
    }
}

/* Times one pass over js, per call, in seconds: each job's calls are timed
 * after an untimed one, so that its region is in cache as it is in the
 * loader, which resamples the rows it has just decoded. */
static double time_pass(resample_fn fn, rf_resampler *r, const job *js, int n, uint8_t *dst,
                        int layout, int inner)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        run_jobs(fn, r, &js[i], 1, dst, layout);
        double t0 = bu_now_s();
        for (int k = 0; k < inner; k++)
            run_jobs(fn, r, &js[i], 1, dst, layout);
        sum += bu_now_s() - t0;
    }
    return sum / ((double)n * inner);
}

/* ---- main ------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr, "usage: rf-resize-bench [--repeat N] [--size S] [--simd LEVEL] [--case NAME] "
                    "[--json FILE]\n");
    exit(2);
}

static const char *simd_name(int level)
{
    return level == RF__SIMD_AVX2 ? "avx2" : level == RF__SIMD_SSE2 ? "sse2" : "none";
}

int main(int argc, char **argv)
{
    int repeat = 41, size = 224, only = -1;
    const char *json = NULL, *only_case = "";
    const bu_opt opts[] = {
        {"--repeat", 'i', &repeat, 1, 1 << 20},
        {"--size", 'i', &size, 8, 4096},
        {"--simd", 'i', &only, 0, RF__SIMD_AVX2},
        {"--case", 's', &only_case, 0, 0},
        {"--json", 's', &json, 0, 0},
    };
    if (bu_parse_args("rf-resize-bench", argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0))
        usage();
    if (repeat < 1 || size < 8 || size > 4096 || only > RF__SIMD_AVX2)
        usage();

    uint8_t *pic = photo(PIC_W, PIC_H, 1);
    job center;
    rf_geom g;
    rf__geom_center(PIC_W, PIC_H, size, &g);
    make_job(&center, g, pic, PIC_W, PIC_H);
    job *rrc = xmalloc(RRC_N * sizeof *rrc);
    int denoms[9] = {0};
    for (int i = 0; i < RRC_N; i++) {
        rf_rng rng = rf__rng_make(42, 0, (uint64_t)i);
        rf__geom_rrc(PIC_W, PIC_H, size, &rng, &g);
        g.flip = rf__rng_uniform(&rng) < 0.5;
        denoms[rf__geom_dct_denom(&g)]++;
        make_job(&rrc[i], g, pic, PIC_W, PIC_H);
    }

    const struct {
        const char *name;
        const job *js;
        int n, layout, inner;
    } cases[] = {
        {"center_nhwc", &center, 1, RF__LAYOUT_NHWC, 16},
        {"center_nchw", &center, 1, RF__LAYOUT_NCHW, 16},
        {"rrc_nhwc", rrc, RRC_N, RF__LAYOUT_NHWC, 1},
        {"rrc_nchw", rrc, RRC_N, RF__LAYOUT_NCHW, 1},
    };
    const int ncases = (int)(sizeof cases / sizeof cases[0]);

    char cpu[256], rev[80];
    bu_cpu_model(cpu, sizeof cpu);
    bu_git_revision(rev, sizeof rev);
    printf("rf-resize-bench: %s; git %s; picture %dx%d, output %dx%d, %d repeats\n", cpu, rev,
           PIC_W, PIC_H, size, size, repeat);
    printf("center: resample %dx%d, window at %d,%d; rrc: %d crops, DCT 1/1: %d, 1/2: %d, "
           "1/4: %d, 1/8: %d\n",
           center.g.out_w, center.g.out_h, center.g.crop_x, center.g.crop_y, RRC_N, denoms[1],
           denoms[2], denoms[4], denoms[8]);

    size_t out_n = (size_t)size * size * 3;
    uint8_t *dst = xmalloc(out_n), *dst0 = xmalloc(out_n);
    rf_resampler *r = rf__resampler_create(), *r0 = rf__resampler_create();
    if (!r || !r0)
        return 1;
    int best = rf__resampler_simd(r, RF__SIMD_AVX2);
    rf__resampler_simd(r0, RF__SIMD_NONE);
#ifdef RF_BENCH_BASELINE
    uint8_t *dst_b = xmalloc(out_n);
    rf_resampler *rb = base_rf__resampler_create();
    if (!rb)
        return 1;
#endif
    double *t = xmalloc((size_t)repeat * sizeof *t);
    double *tb = xmalloc((size_t)repeat * sizeof *tb);
    FILE *jf = NULL;
    if (json && !(jf = fopen(json, "a"))) {
        perror(json);
        return 1;
    }
    int mismatches = 0;

    printf("\n%-12s %-5s %10s %10s", "case", "simd", "ms/call", "Mpix/s");
#ifdef RF_BENCH_BASELINE
    printf(" %12s %10s %8s", "base ms/call", "Mpix/s", "speedup");
#endif
    printf("\n");
    for (int level = best; level >= RF__SIMD_NONE; level--) {
        if (only >= 0 && level != only)
            continue;
        if (rf__resampler_simd(r, level) != level)
            continue;
        for (int c = 0; c < ncases; c++) {
            if (strncmp(cases[c].name, only_case, strlen(only_case)) != 0)
                continue;
            const job *js = cases[c].js;
            int n = cases[c].n, layout = cases[c].layout, inner = cases[c].inner;
            /* Same bytes, call by call, as the portable C (and the baseline). */
            for (int i = 0; i < n; i++) {
                run_jobs(rf__resample, r, &js[i], 1, dst, layout);
                run_jobs(rf__resample, r0, &js[i], 1, dst0, layout);
                if (memcmp(dst, dst0, out_n) != 0) {
                    fprintf(stderr, "MISMATCH: %s call %d, %s differs from none\n", cases[c].name,
                            i, simd_name(level));
                    mismatches++;
                }
#ifdef RF_BENCH_BASELINE
                run_jobs(base_rf__resample, rb, &js[i], 1, dst_b, layout);
                if (memcmp(dst, dst_b, out_n) != 0) {
                    fprintf(stderr, "MISMATCH: %s call %d differs from the baseline\n",
                            cases[c].name, i);
                    mismatches++;
                }
#endif
            }
#ifdef RF_BENCH_BASELINE
            time_pass(base_rf__resample, rb, js, n, dst_b, layout, inner); /* warm-up */
#endif
            time_pass(rf__resample, r, js, n, dst, layout, inner); /* warm-up */
            for (int k = 0; k < repeat; k++) {
                t[k] = time_pass(rf__resample, r, js, n, dst, layout, inner);
#ifdef RF_BENCH_BASELINE
                tb[k] = time_pass(base_rf__resample, rb, js, n, dst_b, layout, inner);
#endif
            }
            double m = bu_median(t, repeat);
            double mpix = (double)size * size / m * 1e-6;
            printf("%-12s %-5s %10.4f %10.1f", cases[c].name, simd_name(level), m * 1e3, mpix);
            double mb = 0.0;
#ifdef RF_BENCH_BASELINE
            mb = bu_median(tb, repeat);
            printf(" %12.4f %10.1f %7.2fx", mb * 1e3, (double)size * size / mb * 1e-6, mb / m);
#endif
            printf("\n");
            if (jf) {
                bu_json_begin(jf, "resize", rev);
                fprintf(jf,
                        ", \"case\": \"%s\", \"simd\": \"%s\", \"picture\": [%d, %d], \"size\": "
                        "%d, \"calls_per_repeat\": %d, "
                        "\"median_ms\": %.5f, \"mpix_s\": %.2f, \"ms\": ",
                        cases[c].name, simd_name(level), PIC_W, PIC_H, size, n * inner, m * 1e3,
                        mpix);
                bu_json_array(jf, t, repeat, 1e3, 5);
                if (mb > 0.0) {
                    fprintf(jf, ", \"baseline_median_ms\": %.5f, \"baseline_ms\": ", mb * 1e3);
                    bu_json_array(jf, tb, repeat, 1e3, 5);
                }
                fprintf(jf, "}\n");
            }
        }
    }
    (void)tb;

    if (jf)
        fclose(jf);
    rf__resampler_destroy(r);
    rf__resampler_destroy(r0);
#ifdef RF_BENCH_BASELINE
    base_rf__resampler_destroy(rb);
    free(dst_b);
#endif
    if (mismatches)
        fprintf(stderr, "%d mismatches\n", mismatches);
    free(t);
    free(tb);
    free(dst);
    free(dst0);
    for (int i = 0; i < RRC_N; i++)
        free(rrc[i].reg);
    free(rrc);
    free(center.reg);
    free(pic);
    return mismatches ? 1 : 0;
}
