/*
 * profile_bench.c - where the time goes, and how close the loader is to the
 * machine's decode ceiling.
 *
 *   rf-profile DATA [--image-size S] [--batch-size B] [--workers N]
 *              [--transform center|random_resized_crop] [--epochs E]
 *              [--verify once|always|none] [--exact] [--repeats R] [--json FILE]
 *              [--augment SPEC] [--dtype uint8|float32|float16|bfloat16] [--layout NHWC|NCHW]
 *
 * --exact sets RF_P_EXACT (full-resolution decode, no DCT scaling), to
 * measure what torchvision-identical pixels cost. --augment takes
 * rf_loader_set_augment's spec ("RandAugment(2, 9); RandomErasing(0.25)"),
 * --dtype a float output normalised with ImageNet's mean and std: the
 * augmentation and conversion stages then show beside the decode's.
 *
 * The ceiling: one thread decodes whole pictures (libjpeg-turbo, RGB, the
 * same settings the loader uses) from memory, with the files already read;
 * images/s of that thread times the usable cores is what a CPU loader that
 * decodes every pixel could reach at best. The loader's images/s is measured
 * on the same pictures beside it, with its per-stage times per image (read,
 * header, decode, resize) and the consumer's wait. Medians over the repeats.
 *
 * Each repeat is one loader reading E epochs (default 2), timed one by one:
 * the first epoch decodes every file to its end (RF_VERIFY_ONCE checks it
 * for damage below the crop), later ones only the rows their crops need, as
 * in the rest of a training run. Both rates are reported, and the CPU time
 * the process spent per image while the loader ran (every thread: reader,
 * dispatcher, workers), which contention on a shared machine distorts less
 * than images/s.
 *
 * --json appends one JSON line: the machine, the git revision, the
 * parameters and the medians.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <jpeglib.h>

#include "benchutil.h"
#include "ringfeed.h"

typedef struct jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
} jerr;

static void on_error(j_common_ptr c)
{
    longjmp(((jerr *)c->err)->jump, 1);
}

/* CPU seconds of the whole process (every thread), user + system. */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Whole-picture decode of every file, one thread: images/s. */
static double decode_ceiling_one_core(unsigned char **bufs, size_t *lens, int n, int *decoded)
{
    struct jpeg_decompress_struct c;
    jerr e;
    c.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = on_error;
    jpeg_create_decompress(&c);
    size_t cap = 0;
    unsigned char *rows = NULL;
    int ok = 0;
    double t0 = bu_now_s();
    for (int i = 0; i < n; i++) {
        if (setjmp(e.jump)) {
            jpeg_abort_decompress(&c);
            continue;
        }
        jpeg_mem_src(&c, bufs[i], (unsigned long)lens[i]);
        jpeg_read_header(&c, TRUE);
        c.out_color_space = JCS_RGB;
        jpeg_start_decompress(&c);
        size_t need = (size_t)c.output_width * 3 * c.output_height;
        if (need > cap) {
            free(rows);
            rows = malloc(need);
            cap = need;
        }
        while (c.output_scanline < c.output_height) {
            JSAMPROW r = rows + (size_t)c.output_scanline * c.output_width * 3;
            jpeg_read_scanlines(&c, &r, 1);
        }
        jpeg_finish_decompress(&c);
        ok++;
    }
    double dt = bu_now_s() - t0;
    jpeg_destroy_decompress(&c);
    free(rows);
    *decoded = ok;
    return ok / dt;
}

static double json_num(const char *js, const char *key)
{
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(js, pat);
    return p ? atof(p + strlen(pat)) : 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: rf-profile DATA [--image-size S] [--batch-size B] [--workers N]\n"
                    "                  [--transform center|random_resized_crop] [--epochs E]\n"
                    "                  [--verify once|always|none] [--exact] [--repeats R]\n"
                    "                  [--json FILE] [--augment SPEC] [--dtype uint8|float32|"
                    "float16|bfloat16]\n                  [--layout NHWC|NCHW]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *data = NULL, *json = NULL, *transform = "center", *verify = "once";
    const char *augment = "", *dtype = "uint8", *layout = "NHWC";
    int size = 224, batch = 64, workers = 0, epochs = 2, repeats = 3, exact = 0;
    const bu_opt opts[] = {
        {"--image-size", 'i', &size, 1, 1 << 14},
        {"--batch-size", 'i', &batch, 1, 1 << 20},
        {"--workers", 'i', &workers, 0, 1024},
        {"--transform", 's', &transform, 0, 0},
        {"--epochs", 'i', &epochs, 1, 1000},
        {"--repeats", 'i', &repeats, 1, 100},
        {"--json", 's', &json, 0, 0},
        {"--verify", 's', &verify, 0, 0},
        {"--exact", 'f', &exact, 0, 0},
        {"--augment", 's', &augment, 0, 0},
        {"--dtype", 's', &dtype, 0, 0},
        {"--layout", 's', &layout, 0, 0},
    };
    if (bu_parse_args("rf-profile", argc, argv, opts, sizeof opts / sizeof opts[0], &data, 1) ||
        !data)
        usage();
    int verify_v = !strcmp(verify, "none")     ? RF_VERIFY_NONE
                   : !strcmp(verify, "always") ? RF_VERIFY_ALWAYS
                   : !strcmp(verify, "once")   ? RF_VERIFY_ONCE
                                               : -1;
    static const char *const dtypes[] = {"uint8", "uint16", "int32", "int64",
                                         "float32", "float16", "bfloat16"};
    int dtype_v = -1;
    for (int d = 0; d < 7; d++)
        if (!strcmp(dtype, dtypes[d]) && (d == 0 || d >= 4))
            dtype_v = d;
    int layout_v = !strcmp(layout, "NCHW") ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC;
    if (repeats < 1 || repeats > 100 || epochs < 1 || verify_v < 0 || dtype_v < 0)
        usage();
    int tf = !strcmp(transform, "center") ? RF_TRANSFORM_CENTER : RF_TRANSFORM_RANDOM_RESIZED_CROP;

    /* The loader's index gives the files; the ceiling decodes the same ones. */
    rf_loader *probe = rf_loader_create(data);
    if (!probe || rf_loader_start(probe) < 0) {
        fprintf(stderr, "rf-profile: %s\n", probe ? rf_loader_errmsg(probe) : "out of memory");
        return 1;
    }
    int n = (int)rf_loader_num_samples(probe);
    unsigned char **bufs = calloc((size_t)n, sizeof *bufs);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    int nread = 0;
    /* The ceiling decodes whole files: samples that share a file (members of
     * tar shards, records) are not files of their own, and reading the file
     * per sample would hold a copy of each shard per sample. */
    int shared = n > 1 && !strcmp(rf_loader_sample_path(probe, 0), rf_loader_sample_path(probe, 1));
    if (shared)
        fprintf(stderr, "rf-profile: samples are members of larger files (shards): the decode "
                        "ceiling is not measured (0)\n");
    for (int i = 0; i < n && !shared; i++) {
        FILE *f = fopen(rf_loader_sample_path(probe, i), "rb");
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        rewind(f);
        if (len > 0 && (bufs[nread] = malloc((size_t)len)) &&
            fread(bufs[nread], 1, (size_t)len, f) == (size_t)len)
            lens[nread++] = (size_t)len;
        fclose(f);
    }
    rf_loader_destroy(probe);
    int cores = bu_usable_cores();
    if (cores < 1)
        cores = 1;

    double *ceil_v = calloc((size_t)repeats, sizeof *ceil_v);
    double *rate_v = calloc((size_t)repeats, sizeof *rate_v);   /* all epochs */
    double *first_v = calloc((size_t)repeats, sizeof *first_v); /* epoch 0 */
    double *later_v = calloc((size_t)repeats, sizeof *later_v); /* epochs 1.. */
    double *cpu_v = calloc((size_t)repeats, sizeof *cpu_v);     /* loader CPU ms per image */
    /* read, header, decode, resize, wait, augment, convert (ms per image); the
     * workers' CPU ms per image in the decode (header + decode + resize), the
     * augmentations and the conversion */
    double stage[10][100] = {{0}};
    char *stats = malloc(1 << 20);
    int used_workers = 0, decoded = 0;
    for (int r = 0; r < repeats; r++) {
        ceil_v[r] = decode_ceiling_one_core(bufs, lens, nread, &decoded);
        double c0 = cpu_s(); /* the loader's threads alone from here to its destroy */
        rf_loader *l = rf_loader_create(data);
        rf_loader_set_param(l, RF_P_BATCH_SIZE, batch);
        rf_loader_set_param(l, RF_P_IMAGE_SIZE, size);
        rf_loader_set_param(l, RF_P_TRANSFORM, tf);
        rf_loader_set_param(l, RF_P_FLIP, tf == RF_TRANSFORM_RANDOM_RESIZED_CROP);
        rf_loader_set_param(l, RF_P_NUM_WORKERS, workers);
        rf_loader_set_param(l, RF_P_SEED, r);
        rf_loader_set_param(l, RF_P_VERIFY, verify_v);
        if (exact)
            rf_loader_set_param(l, RF_P_EXACT, 1);
        rf_loader_set_param(l, RF_P_LAYOUT, layout_v);
        rf_loader_set_param(l, RF_P_DTYPE, dtype_v);
        static const double mean[3] = {0.485, 0.456, 0.406}, std[3] = {0.229, 0.224, 0.225};
        if (dtype_v != RF_DTYPE_UINT8)
            rf_loader_set_normalize(l, mean, std);
        if (rf_loader_set_augment(l, augment) < 0 || rf_loader_start(l) < 0) {
            fprintf(stderr, "rf-profile: %s\n", rf_loader_errmsg(l));
            return 1;
        }
        int64_t images = 0, images0 = 0;
        double t0 = bu_now_s(), t1 = t0;
        for (int e = 0; e < epochs; e++) {
            if (e == 1) {
                t1 = bu_now_s();
                images0 = images;
            }
            rf_loader_set_epoch(l, e);
            rf_batch *b;
            int rc;
            while ((rc = rf_loader_next(l, &b)) != RF_END_OF_EPOCH) {
                if (rc == RF_OK) {
                    images += rf_batch_count(b);
                    rf_batch_release(b);
                } else if (rc < 0) {
                    fprintf(stderr, "rf-profile: %s\n", rf_loader_errmsg(l));
                }
            }
        }
        double t2 = bu_now_s();
        rate_v[r] = (double)images / (t2 - t0);
        first_v[r] = epochs > 1 ? (double)images0 / (t1 - t0) : rate_v[r];
        later_v[r] = epochs > 1 ? (double)(images - images0) / (t2 - t1) : rate_v[r];
        rf_loader_stats_json(l, stats, 1 << 20);
        const char *p = strstr(stats, "\"per_image_ms\"");
        stage[0][r] = p ? json_num(p, "read") : 0;
        stage[1][r] = p ? json_num(p, "header") : 0;
        stage[2][r] = p ? json_num(p, "decode") : 0;
        stage[3][r] = p ? json_num(p, "resize") : 0;
        stage[4][r] = json_num(stats, "stall_seconds") * 1e3 / (double)(images ? images : 1);
        stage[5][r] = p ? json_num(p, "augment") : 0;
        stage[6][r] = p ? json_num(p, "convert") : 0;
        const char *q = strstr(stats, "\"per_image_cpu_ms\"");
        stage[7][r] = q ? json_num(q, "decode") : 0;
        stage[8][r] = q ? json_num(q, "augment") : 0;
        stage[9][r] = q ? json_num(q, "convert") : 0;
        used_workers = (int)json_num(stats, "num_workers");
        rf_loader_destroy(l);
        cpu_v[r] = (cpu_s() - c0) * 1e3 / (double)(images ? images : 1);
        fprintf(stderr,
                "\rrepeat %d/%d: ceiling %.0f img/s/core, loader %.0f img/s (first "
                "epoch %.0f, later %.0f)   ",
                r + 1, repeats, ceil_v[r], rate_v[r], first_v[r], later_v[r]);
    }
    fprintf(stderr, "\n");
    double one = bu_median(ceil_v, repeats), rate = bu_median(rate_v, repeats);
    double first = bu_median(first_v, repeats), later = bu_median(later_v, repeats);
    double ceiling = one * cores;
    double cpu_ms = bu_median(cpu_v, repeats);
    double ms[10];
    for (int k = 0; k < 10; k++)
        ms[k] = bu_median(stage[k], repeats);
    printf("data %s: %d pictures, transform %s%s, %dx%d, batch %d, %d workers, %d usable "
           "cores\n",
           data, nread, transform, exact ? " (exact)" : "", size, size, batch, used_workers, cores);
    printf("per image (ms, summed over workers): read %.3f  header %.3f  decode %.3f  resize "
           "%.3f  augment %.3f  convert %.3f  | consumer wait %.3f\n",
           ms[0], ms[1], ms[2], ms[3], ms[5], ms[6], ms[4]);
    printf("workers' CPU per image (ms): decode (header + decode + resize) %.3f  augment %.3f  "
           "convert %.3f\n",
           ms[7], ms[8], ms[9]);
    if (augment[0])
        printf("augment: %s: %.1f%% of the decode's CPU time\n", augment,
               100.0 * ms[8] / (ms[7] > 0 ? ms[7] : 1));
    printf("decode ceiling: %.0f img/s on one core x %d cores = %.0f img/s\n", one, cores, ceiling);
    printf("loader (verify %s, %d epochs): %.0f img/s = %.2f x the ceiling\n", verify, epochs, rate,
           rate / ceiling);
    if (epochs > 1)
        printf("  first epoch %.0f img/s = %.2f x; later epochs %.0f img/s = %.2f x\n", first,
               first / ceiling, later, later / ceiling);
    printf("loader CPU time (all threads, user + system): %.3f ms per image\n", cpu_ms);
    if (json) {
        FILE *f = fopen(json, "a");
        if (f) {
            char rev[128];
            bu_git_revision(rev, sizeof rev);
            bu_json_begin(f, "profile", rev);
            fputs(", \"data\": ", f);
            bu_json_str(f, data);
            fputs(", \"augment\": ", f);
            bu_json_str(f, augment);
            fprintf(f,
                    ", \"images\": %d, \"transform\": "
                    "\"%s\", \"image_size\": %d, \"batch_size\": %d, \"workers\": %d, "
                    "\"cores\": %d, \"repeats\": %d, \"epochs\": %d, "
                    "\"verify\": \"%s\", \"exact\": %d, \"dtype\": \"%s\", \"layout\": \"%s\", "
                    "\"per_image_ms\": {\"read\": %.4f, \"header\": %.4f, \"decode\": %.4f, "
                    "\"resize\": %.4f, \"wait\": %.4f, \"augment\": %.4f, \"convert\": %.4f}, "
                    "\"per_image_cpu_ms\": {\"decode\": %.4f, \"augment\": %.4f, "
                    "\"convert\": %.4f}, "
                    "\"ceiling_one_core\": %.1f, "
                    "\"ceiling\": %.1f, \"loader_images_per_sec\": %.1f, \"ratio\": %.3f, "
                    "\"first_epoch_images_per_sec\": %.1f, \"first_epoch_ratio\": %.3f, "
                    "\"later_epochs_images_per_sec\": %.1f, \"later_epochs_ratio\": %.3f, "
                    "\"cpu_ms_per_image\": %.4f}\n",
                    nread, transform, size, batch, used_workers, cores, repeats, epochs, verify,
                    exact, dtype, layout, ms[0], ms[1], ms[2], ms[3], ms[4], ms[5], ms[6], ms[7],
                    ms[8], ms[9], one,
                    ceiling, rate, rate / ceiling,
                    first, first / ceiling, later, later / ceiling, cpu_ms);
            fclose(f);
        }
    }
    for (int i = 0; i < nread; i++)
        free(bufs[i]);
    free(bufs);
    free(lens);
    free(ceil_v);
    free(rate_v);
    free(first_v);
    free(later_v);
    free(cpu_v);
    free(stats);
    return 0;
}
