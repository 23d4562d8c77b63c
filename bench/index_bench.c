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
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "ringfeed.h"
#include "tarwrite.h"
#include "testutil.h"

#ifndef RF_SOURCE_DIR
#define RF_SOURCE_DIR "."
#endif

enum { MAX_REPEATS = 64, MAX_BATCHES = 8 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double s[MAX_REPEATS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void json_array(FILE *f, const double *v, int n, double scale)
{
    fputc('[', f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.3f", i ? ", " : "", v[i] * scale);
    fputc(']', f);
}

/* ---- machine and revision ------------------------------------------------- */

static void cpu_model(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        char *colon = strchr(line, ':');
        if (colon) {
            colon++;
            while (*colon == ' ' || *colon == '\t')
                colon++;
            colon[strcspn(colon, "\n")] = '\0';
            snprintf(buf, cap, "%s", colon);
        }
        break;
    }
    fclose(f);
}

static void git_revision(char *buf, size_t cap)
{
    const char *env = getenv("RINGFEED_GIT_REV");
    if (env && *env) {
        snprintf(buf, cap, "%s", env);
        return;
    }
    snprintf(buf, cap, "unknown");
    FILE *p = popen("git -C '" RF_SOURCE_DIR "' rev-parse --short HEAD 2>/dev/null", "r");
    if (!p)
        return;
    char rev[64] = "";
    if (fgets(rev, sizeof rev, p))
        rev[strcspn(rev, "\n")] = '\0';
    pclose(p);
    if (!rev[0])
        return;
    p = popen("git -C '" RF_SOURCE_DIR "' status --porcelain --untracked-files=no 2>/dev/null",
              "r");
    int dirty = 0;
    if (p) {
        char line[8];
        dirty = fgets(line, sizeof line, p) != NULL;
        pclose(p);
    }
    snprintf(buf, cap, "%s%s", rev, dirty ? "-dirty" : "");
}

static void machine_json(FILE *f)
{
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    cpu_set_t set;
    int usable = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
    struct utsname u;
    uname(&u);
    long mem_kb = 0;
    FILE *m = fopen("/proc/meminfo", "r");
    if (m) {
        if (fscanf(m, "MemTotal: %ld kB", &mem_kb) != 1)
            mem_kb = 0;
        fclose(m);
    }
    fprintf(f,
            "{\"cpu\": \"%s\", \"cores\": %ld, \"usable_cores\": %d, \"kernel\": \"%s\", "
            "\"mem_kb\": %ld}",
            cpu, sysconf(_SC_NPROCESSORS_ONLN), usable, u.release, mem_kb);
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
    double t0 = now_s();
    FILE *f = fopen(list, "w");
    if (!f)
        die(list);
    for (long i = 0; i < lines; i++)
        fprintf(f, "train/n%08ld/n%08ld_%06ld.JPEG\t%ld\n", i % 1000, i % 1000, i, i % 1000);
    if (fclose(f) != 0)
        die(list);
    printf("list: %ld lines written in %.2f s (%s)\n", lines, now_s() - t0, list);

    double secs[MAX_REPEATS], rss_before = current_rss_mb();
    long long index_bytes = -1, samples = -1;
    for (int r = 0; r < repeats; r++) {
        double a = now_s();
        rf_loader *l = rf_loader_create(list);
        /* a small ring: the figure is the index, not the batch memory */
        rf_loader_set_param(l, RF_P_BATCH_SIZE, 32);
        rf_loader_set_param(l, RF_P_IMAGE_SIZE, 64);
        rf_loader_set_param(l, RF_P_PREFETCH, 2);
        rf_loader_set_param(l, RF_P_NUM_WORKERS, 1);
        start_or_die(l);
        secs[r] = now_s() - a;
        samples = rf_loader_num_samples(l);
        index_bytes = stats_field(l, "index_bytes");
        rf_loader_destroy(l);
    }
    double peak = peak_rss_mb(), med = median(secs, repeats), lo = secs[0];
    for (int r = 1; r < repeats; r++)
        lo = secs[r] < lo ? secs[r] : lo;
    printf("list: %lld samples indexed in %.3f s (median of %d; min %.3f), peak RSS %.1f MB "
           "(%.1f MB before), index %.1f MB  [targets: < 2 s, < 200 MB]\n",
           samples, med, repeats, lo, peak, rss_before, (double)index_bytes / 1e6);
    fprintf(jl, "{\"bench\": \"index_list\", \"git\": \"%s\", \"machine\": ", rev);
    machine_json(jl);
    fprintf(jl,
            ", \"params\": {\"lines\": %ld, \"repeats\": %d}, \"samples\": %lld, "
            "\"index_seconds_median\": %.4f, \"index_seconds\": ",
            lines, repeats, samples, med);
    json_array(jl, secs, repeats, 1.0);
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
    double t0 = now_s();
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
           per_shard, (double)bytes / 1e6, width, height, now_s() - t0);
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
            double a = now_s();
            rf_loader *l = rf_loader_create(spec);
            rf_loader_set_param(l, RF_P_BATCH_SIZE, batches[b]);
            rf_loader_set_param(l, RF_P_IMAGE_SIZE, image_size);
            rf_loader_set_param(l, RF_P_TRANSFORM, RF_TRANSFORM_CENTER);
            start_or_die(l);
            index[r] = now_s() - a;
            rf_batch *batch;
            int rc = rf_loader_next(l, &batch);
            first[r] = now_s() - a;
            if (rc != RF_OK) {
                fprintf(stderr, "rf-index-bench: next: %s\n", rf_loader_errmsg(l));
                exit(1);
            }
            rf_batch_release(batch);
            int64_t w = 0;
            rf_loader_get_param(l, RF_P_NUM_WORKERS, &w);
            workers = (int)w;
            rf_loader_destroy(l);
        }
        double mf = median(first, repeats), mi = median(index, repeats);
        printf("tar: first batch of %d (%dx%d center) %.1f ms after rf_loader_create (median "
               "of %d; index %.1f ms; %d workers)  [target: < 100 ms]\n",
               batches[b], image_size, image_size, mf * 1e3, repeats, mi * 1e3, workers);
        fprintf(jl, "{\"bench\": \"first_batch_tar\", \"git\": \"%s\", \"machine\": ", rev);
        machine_json(jl);
        fprintf(jl,
                ", \"params\": {\"shards\": %d, \"per_shard\": %d, \"width\": %d, "
                "\"height\": %d, \"jpeg_bytes\": %llu, \"batch_size\": %d, "
                "\"image_size\": %d, \"transform\": \"center\", \"num_workers\": \"auto\", "
                "\"repeats\": %d, \"page_cache\": \"warm\"}, \"workers\": %d, "
                "\"first_batch_ms_median\": %.2f, \"index_ms_median\": %.2f, "
                "\"first_batch_ms\": ",
                shards, per_shard, width, height, (unsigned long long)bytes, batches[b], image_size,
                repeats, workers, mf * 1e3, mi * 1e3);
        json_array(jl, first, repeats, 1e3);
        fprintf(jl, ", \"index_ms\": ");
        json_array(jl, index, repeats, 1e3);
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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--keep")) {
            keep = 1;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--lines"))
            lines = atol(v);
        else if (!strcmp(a, "--shards"))
            shards = atoi(v);
        else if (!strcmp(a, "--per-shard"))
            per_shard = atoi(v);
        else if (!strcmp(a, "--width"))
            width = atoi(v);
        else if (!strcmp(a, "--height"))
            height = atoi(v);
        else if (!strcmp(a, "--image-size"))
            image_size = atoi(v);
        else if (!strcmp(a, "--repeats"))
            repeats = atoi(v);
        else if (!strcmp(a, "--batch")) {
            char *copy = strdup(v), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t && nbatches < MAX_BATCHES;
                 t = strtok_r(NULL, ",", &save))
                batches[nbatches++] = atoi(t);
            free(copy);
        } else
            usage();
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
    git_revision(rev, sizeof rev);
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
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
