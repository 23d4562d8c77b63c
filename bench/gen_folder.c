/*
 * gen_folder.c - rf-gen-folder: writes an ImageNet-like image folder for the
 * benchmark (and for trying ringfeed by hand).
 *
 *   rf-gen-folder OUT_DIR [--classes N] [--per-class N] [--width W]
 *                 [--height H] [--quality Q] [--seed S] [--threads T]
 *                 [--mix photo|cycle]
 *
 * Pictures come from tests/testutil.c: photo-like content, sizes within
 * +-20% of W x H (some portrait), mostly baseline 4:2:0 with a few
 * progressive, 4:4:4, 4:2:2 and gray files (--mix photo, the default), or
 * every variant in turn (--mix cycle). Output is a pure function of the
 * arguments, whatever the thread count. Threads (default: online CPUs) take
 * the next image index from a shared counter, so a slow picture never leaves
 * a core idle; the class folders are made first, so workers only write files.
 * Prints one line: files, bytes, seconds, path.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sysconf */

#include "testutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MAX_THREADS = 256 };

typedef struct {
    const char *root;
    const tu_folder_opts *f;
    atomic_int *next;   /* next image index to write; shared by all workers */
    atomic_int *failed; /* first failing index + 1, or 0; stops the others early */
    uint64_t bytes;     /* this worker's total, read after join */
    int files;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    int n = w->f->classes * w->f->per_class;
    for (;;) {
        /* relaxed: the counter only hands out distinct indices; results are
         * published by pthread_join. */
        int i = atomic_fetch_add_explicit(w->next, 1, memory_order_relaxed);
        if (i >= n || atomic_load_explicit(w->failed, memory_order_relaxed))
            break;
        size_t len;
        if (tu_folder_write_item(w->root, w->f, i, &len) != 0) {
            int expect = 0;
            atomic_compare_exchange_strong(w->failed, &expect, i + 1);
            break;
        }
        w->bytes += len;
        w->files++;
    }
    return NULL;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: rf-gen-folder OUT_DIR [--classes N] [--per-class N] [--width W]\n"
                 "                     [--height H] [--quality Q] [--seed S] [--threads T]\n"
                 "                     [--mix photo|cycle]\n"
                 "Writes OUT_DIR/classCC/imgIIII.jpg, photo-like JPEGs (defaults: 10 classes,\n"
                 "300 per class, about 500x375, quality 90, seed 0, threads = online CPUs).\n");
}

/* Parses a whole decimal number in [lo, hi]; 0 on success. */
static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    tu_folder_opts f = {10, 300, 500, 375, 90, 0, TU_MIX_PHOTO};
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    const char *root = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strncmp(a, "--", 2) != 0) {
            if (root) {
                fprintf(stderr, "rf-gen-folder: more than one OUT_DIR\n");
                return 2;
            }
            root = a;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "rf-gen-folder: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        long n = 0;
        int bad = 0;
        if (strcmp(a, "--mix") == 0) {
            if (strcmp(v, "photo") == 0)
                f.mix = TU_MIX_PHOTO;
            else if (strcmp(v, "cycle") == 0)
                f.mix = TU_MIX_CYCLE;
            else
                bad = 1;
        } else if (strcmp(a, "--classes") == 0) {
            bad = parse_int(v, 1, 100000, &n);
            f.classes = (int)n;
        } else if (strcmp(a, "--per-class") == 0) {
            bad = parse_int(v, 1, 1000000, &n);
            f.per_class = (int)n;
        } else if (strcmp(a, "--width") == 0) {
            bad = parse_int(v, 1, 20000, &n);
            f.width = (int)n;
        } else if (strcmp(a, "--height") == 0) {
            bad = parse_int(v, 1, 20000, &n);
            f.height = (int)n;
        } else if (strcmp(a, "--quality") == 0) {
            bad = parse_int(v, 1, 100, &n);
            f.quality = (int)n;
        } else if (strcmp(a, "--seed") == 0) {
            bad = parse_int(v, 0, 4294967295L, &n);
            f.seed = (uint32_t)n;
        } else if (strcmp(a, "--threads") == 0) {
            bad = parse_int(v, 1, MAX_THREADS, &threads);
        } else {
            fprintf(stderr, "rf-gen-folder: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "rf-gen-folder: bad value for %s: %s\n", a, v);
            return 2;
        }
    }
    if (!root) {
        usage(stderr);
        return 2;
    }
    if ((long)f.classes * f.per_class > 100000000L) {
        fprintf(stderr, "rf-gen-folder: too many images\n");
        return 2;
    }
    int total = f.classes * f.per_class;
    if (threads < 1)
        threads = 1;
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    if (threads > total)
        threads = total;

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (tu_folder_prepare(root, &f) != 0) {
        perror("rf-gen-folder: cannot create the class folders");
        return 1;
    }

    atomic_int next = 0, failed = 0;
    worker w[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started = 0;
    for (int t = 0; t < threads; t++) {
        w[t] = (worker){root, &f, &next, &failed, 0, 0};
        if (t > 0 && pthread_create(&tid[t], NULL, work, &w[t]) != 0)
            break; /* fewer threads is fine: the counter hands out the rest */
        started = t + 1;
    }
    work(&w[0]); /* the main thread is worker 0 */
    uint64_t bytes = w[0].bytes;
    int files = w[0].files;
    for (int t = 1; t < started; t++) {
        pthread_join(tid[t], NULL);
        bytes += w[t].bytes;
        files += w[t].files;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;

    int bad = atomic_load(&failed);
    if (bad) {
        char path[4096];
        if (tu_folder_path(path, sizeof path, root, &f, bad - 1) != 0)
            snprintf(path, sizeof path, "image %d", bad - 1);
        fprintf(stderr, "rf-gen-folder: failed writing %s\n", path);
        return 1;
    }
    printf("rf-gen-folder: wrote %d files, %" PRIu64 " bytes (%.1f KB average) in %.2f s "
           "with %d threads: %s\n",
           files, bytes, files ? (double)bytes / files / 1024.0 : 0.0, secs, started, root);
    return 0;
}
