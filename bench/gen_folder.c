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
#define _POSIX_C_SOURCE 200809L /* sysconf */

#include "testutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchutil.h"

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

int main(int argc, char **argv)
{
    tu_folder_opts f = {10, 300, 500, 375, 90, 0, TU_MIX_PHOTO};
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    const char *root = NULL;

    const char *mix = "photo";
    long seed = 0;
    const bu_opt opts[] = {
        {"--classes", 'i', &f.classes, 1, 100000},
        {"--per-class", 'i', &f.per_class, 1, 1000000},
        {"--width", 'i', &f.width, 1, 20000},
        {"--height", 'i', &f.height, 1, 20000},
        {"--quality", 'i', &f.quality, 1, 100},
        {"--seed", 'l', &seed, 0, 4294967295.0},
        {"--threads", 'l', &threads, 1, MAX_THREADS},
        {"--mix", 's', &mix, 0, 0},
    };
    int rc =
        bu_parse_args("rf-gen-folder", argc, argv, opts, sizeof opts / sizeof opts[0], &root, 1);
    if (rc > 0) {
        usage(stdout);
        return 0;
    }
    if (rc < 0) {
        usage(stderr);
        return 2;
    }
    if (strcmp(mix, "photo") == 0) {
        f.mix = TU_MIX_PHOTO;
    } else if (strcmp(mix, "cycle") == 0) {
        f.mix = TU_MIX_CYCLE;
    } else {
        fprintf(stderr, "rf-gen-folder: bad value for --mix: %s\n", mix);
        return 2;
    }
    f.seed = (uint32_t)seed;
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

    double t0 = bu_now_s();
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
    double secs = bu_now_s() - t0;

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
