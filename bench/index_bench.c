/*
 * index_bench.c - rf-index-bench: how fast and how small the index of a large
 * dataset is, and how soon the first batch of a tar-shard dataset arrives.
 *
 *   rf-index-bench [--out DIR] [--lines N] [--shards S] [--per-shard P]
 *                  [--width W] [--height H] [--batch B[,B...]] [--image-size S]
 *                  [--repeats R] [--keep]
 *
 * 1. List index: writes a list file of N lines (default 1,000,000;
 *    "train/nXXXXXXXX/..._NNNNNN.JPEG<TAB>label", files that do not exist:
 *    indexing must not touch them) and times rf_loader_create ..
 *    rf_loader_start (the index and the sampler's order), R times; reports
 *    the median, the process's peak RSS (getrusage) and the index bytes the
 *    loader states. Targets: < 2 s, < 200 MB.
 * 2. First batch: writes S tar shards of P photo-like JPEGs each (default
 *    8 x 500, ImageNet-like 500 x 375, WebDataset members key.jpg / key.cls)
 *    and times rf_loader_create .. the first rf_loader_next (center crop,
 *    auto workers), R times per batch size, page cache warm. Target: < 100 ms.
 *
 * Prints a summary and appends JSON lines (machine, parameters, git revision,
 * every repeat) to DIR/index_bench.jsonl (DIR defaults to ./index-bench).
 * Generated data lives in DIR/data, removed afterwards unless --keep.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "benchutil.h"
#include "ringfeed.h"
#include "tarwrite.h"
#include "testutil.h"

enum { MAX_REPEATS = 64, MAX_BATCHES = 8 };

static double peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

static double current_rss_mb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return (double)rss * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

/* ---- helpers ------------------------------------------------------------- */

static void die(const char *what)
{
    fprintf(stderr, "rf-index-bench: %s: %s\n", what, strerror(errno));
    exit(1);
}

static rf_loader *start_or_die(rf_loader *l)
{
    if (rf_loader_start(l) != 0) {
        fprintf(stderr, "rf-index-bench: start: %s\n", rf_loader_errmsg(l));
        exit(1);
    }
    return l;
}

static long long stats_field(rf_loader *l, const char *key)
{
    char buf[1 << 16];
    rf_loader_stats_json(l, buf, sizeof buf);
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(buf, pat);
    return p ? atoll(p + strlen(pat)) : -1;
}

/* ---- 1. list index --------------------------------------------------------- */

static void bench_list(const char *data, FILE *jl, const char *rev, long lines, int repeats)
{
    char list[4096];
    snprintf(list, sizeof list, "%s/train.txt", data);
    double t0 = bu_now_s();
    FILE *f = fopen(list, "w");
    if (!f)
        die(list);
    for (long i = 0; i < lines; i++)
        fprintf(f, "train/n%08ld/n%08ld_%06ld.JPEG\t%ld\n", i % 1000, i % 1000, i, i % 1000);
    if (fclose(f) != 0)
        die(list);
    printf("list: %ld lines written in %.2f s (%s)\n", lines, bu_now_s() - t0, list);

    double secs[MAX_REPEATS], rss_before = current_rss_mb();
    long long index_bytes = -1, samples = -1;
    for (int r = 0; r < repeats; r++) {
        double a = bu_now_s();
        rf_loader *l = rf_loader_create(list);
        /* a small ring: the figure is the index, not the batch memory */
        rf_loader_set_param(l, RF_P_BATCH_SIZE, 32);
        rf_loader_set_param(l, RF_P_IMAGE_SIZE, 64);
        rf_loader_set_param(l, RF_P_PREFETCH, 2);
        rf_loader_set_param(l, RF_P_NUM_WORKERS, 1);
        start_or_die(l);
        secs[r] = bu_now_s() - a;
        samples = rf_loader_num_samples(l);
        index_bytes = stats_field(l, "index_bytes");
        rf_loader_destroy(l);
    }
    double peak = peak_rss_mb(), med = bu_median(secs, repeats), lo = secs[0];
    for (int r = 1; r < repeats; r++)
        lo = secs[r] < lo ? secs[r] : lo;
    printf("list: %lld samples indexed in %.3f s (median of %d; min %.3f), peak RSS %.1f MB "
           "(%.1f MB before), index %.1f MB  [targets: < 2 s, < 200 MB]\n",
           samples, med, repeats, lo, peak, rss_before, (double)index_bytes / 1e6);
    bu_json_begin(jl, "index_list", rev);
    fprintf(jl,
            ", \"params\": {\"lines\": %ld, \"repeats\": %d}, \"samples\": %lld, "
            "\"index_seconds_median\": %.4f, \"index_seconds\": ",
            lines, repeats, samples, med);
    bu_json_array(jl, secs, repeats, 1.0, 3);
    fprintf(jl,
            ", \"peak_rss_mb\": %.1f, \"rss_before_mb\": %.1f, \"index_bytes\": %lld, "
            "\"target_seconds\": 2, \"target_rss_mb\": 200}\n",
            peak, rss_before, index_bytes);
}

/* ---- 2. tar shards, first batch ---------------------------------------------- */

static uint64_t write_shards(const char *data, int shards, int per_shard, int width, int height)
{
    tu_folder_opts fo = {.classes = 10,
                         .per_class = (shards * per_shard + 9) / 10,
                         .width = width,
                         .height = height,
                         .quality = 90,
                         .seed = 7,
                         .mix = TU_MIX_PHOTO};
    uint64_t bytes = 0;
    double t0 = bu_now_s();
    for (int s = 0; s < shards; s++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/train-%04d.tar", data, s);
        tw t;
        if (tw_open(&t, path, TW_USTAR) != 0)
            die(path);
        for (int k = 0; k < per_shard; k++) {
            int i = s * per_shard + k;
            tu_jpeg_opts o;
            tu_folder_item(&fo, i, &o);
            uint8_t *jpg;
            size_t len;
            if (tu_make_jpeg(&o, &jpg, &len) != 0) {
                fprintf(stderr, "rf-index-bench: cannot encode image %d\n", i);
                exit(1);
            }
            char name[64], cls[16];
            snprintf(name, sizeof name, "sample%06d.jpg", i);
            snprintf(cls, sizeof cls, "%d", i / fo.per_class);
            if (tw_file(&t, name, jpg, len) != 0)
                die(path);
            snprintf(name, sizeof name, "sample%06d.cls", i);
            if (tw_file(&t, name, cls, strlen(cls)) != 0)
                die(path);
            bytes += len;
            free(jpg);
        }
        if (tw_close(&t) != 0)
            die(path);
    }
    printf("tar: %d shards x %d images (%.1f MB of JPEG, ~%dx%d) written in %.1f s\n", shards,
           per_shard, (double)bytes / 1e6, width, height, bu_now_s() - t0);
    return bytes;
}

static void bench_first_batch(const char *data, FILE *jl, const char *rev, int shards,
                              int per_shard, int width, int height, const int *batches,
                              int nbatches, int image_size, int repeats)
{
    uint64_t bytes = write_shards(data, shards, per_shard, width, height);
    char spec[4096];
    snprintf(spec, sizeof spec, "%s/train-{0000..%04d}.tar", data, shards - 1);
    for (int b = 0; b < nbatches; b++) {
        double first[MAX_REPEATS], index[MAX_REPEATS];
        int workers = 0;
        for (int r = 0; r < repeats; r++) {
            double a = bu_now_s();
            rf_loader *l = rf_loader_create(spec);
            rf_loader_set_param(l, RF_P_BATCH_SIZE, batches[b]);
            rf_loader_set_param(l, RF_P_IMAGE_SIZE, image_size);
            rf_loader_set_param(l, RF_P_TRANSFORM, RF_TRANSFORM_CENTER);
            start_or_die(l);
            index[r] = bu_now_s() - a;
            rf_batch *batch;
            int rc = rf_loader_next(l, &batch);
            first[r] = bu_now_s() - a;
            if (rc != RF_OK) {
                fprintf(stderr, "rf-index-bench: next: %s\n", rf_loader_errmsg(l));
                exit(1);
            }
            rf_batch_release(batch);
            workers = rf_loader_active_workers(l);
            rf_loader_destroy(l);
        }
        double mf = bu_median(first, repeats), mi = bu_median(index, repeats);
        printf("tar: first batch of %d (%dx%d center) %.1f ms after rf_loader_create (median "
               "of %d; index %.1f ms; %d workers)  [target: < 100 ms]\n",
               batches[b], image_size, image_size, mf * 1e3, repeats, mi * 1e3, workers);
        bu_json_begin(jl, "first_batch_tar", rev);
        fprintf(jl,
                ", \"params\": {\"shards\": %d, \"per_shard\": %d, \"width\": %d, "
                "\"height\": %d, \"jpeg_bytes\": %llu, \"batch_size\": %d, "
                "\"image_size\": %d, \"transform\": \"center\", \"num_workers\": \"auto\", "
                "\"repeats\": %d, \"page_cache\": \"warm\"}, \"workers\": %d, "
                "\"first_batch_ms_median\": %.2f, \"index_ms_median\": %.2f, "
                "\"first_batch_ms\": ",
                shards, per_shard, width, height, (unsigned long long)bytes, batches[b], image_size,
                repeats, workers, mf * 1e3, mi * 1e3);
        bu_json_array(jl, first, repeats, 1e3, 3);
        fprintf(jl, ", \"index_ms\": ");
        bu_json_array(jl, index, repeats, 1e3, 3);
        fprintf(jl, ", \"target_ms\": 100}\n");
    }
}

/* ---- main ---------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: rf-index-bench [--out DIR] [--lines N] [--shards S] "
                    "[--per-shard P] [--width W] [--height H] [--batch B[,B...]] "
                    "[--image-size S] [--repeats R] [--keep]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *out = "index-bench";
    long lines = 1000000;
    int shards = 8, per_shard = 500, width = 500, height = 375, image_size = 224, repeats = 5;
    int keep = 0, nbatches = 0, batches[MAX_BATCHES];
    const char *batch_list = NULL;
    const bu_opt opts[] = {
        {"--out", 's', &out, 0, 0},
        {"--lines", 'l', &lines, 1, 1e12},
        {"--shards", 'i', &shards, 1, 10000},
        {"--per-shard", 'i', &per_shard, 1, 1 << 24},
        {"--width", 'i', &width, 8, 1 << 15},
        {"--height", 'i', &height, 8, 1 << 15},
        {"--image-size", 'i', &image_size, 1, 1 << 14},
        {"--repeats", 'i', &repeats, 1, MAX_REPEATS},
        {"--batch", 's', &batch_list, 0, 0},
        {"--keep", 'f', &keep, 0, 0},
    };
    if (bu_parse_args("rf-index-bench", argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0))
        usage();
    if (batch_list) {
        char *copy = strdup(batch_list), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t && nbatches < MAX_BATCHES;
             t = strtok_r(NULL, ",", &save))
            batches[nbatches++] = atoi(t);
        free(copy);
    }
    if (nbatches == 0) {
        batches[nbatches++] = 32;
        batches[nbatches++] = 256;
    }
    if (lines < 1 || shards < 1 || shards > 10000 || per_shard < 1 || width < 8 || height < 8 ||
        repeats < 1 || repeats > MAX_REPEATS || image_size < 1)
        usage();
    for (int b = 0; b < nbatches; b++)
        if (batches[b] < 1)
            usage();

    char data[3000], jpath[3000], rev[128];
    if (strlen(out) > 2900)
        usage();
    if (mkdir(out, 0755) != 0 && errno != EEXIST)
        die(out);
    snprintf(data, sizeof data, "%s/data", out);
    snprintf(jpath, sizeof jpath, "%s/index_bench.jsonl", out);
    tu_rmtree(data);
    if (mkdir(data, 0755) != 0)
        die(data);
    bu_git_revision(rev, sizeof rev);
    char cpu[256];
    bu_cpu_model(cpu, sizeof cpu);
    printf("machine: %s, %ld cores; libringfeed %d; git %s\n", cpu, sysconf(_SC_NPROCESSORS_ONLN),
           rf_version(), rev);
    FILE *jl = fopen(jpath, "a");
    if (!jl)
        die(jpath);

    bench_list(data, jl, rev, lines, repeats);
    bench_first_batch(data, jl, rev, shards, per_shard, width, height, batches, nbatches,
                      image_size, repeats);

    if (fclose(jl) != 0)
        die(jpath);
    if (!keep)
        tu_rmtree(data);
    printf("JSON lines appended to %s\n", jpath);
    return 0;
}
