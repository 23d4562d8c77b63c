/*
 * train_loop.c - a training loop in C on top of ringfeed, using nothing but
 * the public header.
 *
 *   train_loop SOURCE [--batch-size N] [--image-size S] [--workers N]
 *              [--transform center|random_resized_crop|none] [--flip]
 *              [--epochs E] [--seed N]
 *
 * The "training step" is a stand-in: it sums the batch's pixels and counts
 * its labels. That is enough to check the loader's promises end to end, which
 * is why the tests run this program: every epoch delivers each sample exactly
 * once (images == samples, batches == batches per epoch, in order), labels
 * are valid, and with a deterministic transform (center or none, no flip)
 * every epoch sums to the same pixel total, whatever the order.
 * Prints images/s and the loader's statistics; exits 1 on any error.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <ringfeed.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_LABELS = 1 << 20 }; /* more classes than that is a corrupt label */

typedef struct {
    int64_t images, batches;
    uint64_t pixel_sum;
    int64_t *label_count; /* label_cap entries */
    int64_t label_cap;
} epoch_tally;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: train_loop SOURCE [--batch-size N] [--image-size S] [--workers N]\n"
                 "                  [--transform center|random_resized_crop|none] [--flip]\n"
                 "                  [--epochs E] [--seed N]\n");
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* The stand-in for forward + backward: reads every pixel and label once. */
static int train_step(const rf_batch *b, epoch_tally *t)
{
    const uint8_t *px = rf_batch_data(b);
    size_t n = rf_batch_nbytes(b);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += px[i];
    t->pixel_sum += sum;

    const int64_t *labels = rf_batch_labels(b);
    int64_t count = rf_batch_count(b);
    for (int64_t i = 0; i < count; i++) {
        int64_t y = labels[i];
        if (y < 0 || y >= MAX_LABELS) {
            fprintf(stderr,
                    "train_loop: batch %" PRId64 " sample %" PRId64 ": bad label %" PRId64 "\n",
                    rf_batch_index(b), i, y);
            return -1;
        }
        if (y >= t->label_cap) {
            int64_t cap = t->label_cap ? t->label_cap : 16;
            while (cap <= y)
                cap *= 2;
            int64_t *grown = realloc(t->label_count, (size_t)cap * sizeof *grown);
            if (!grown) {
                fprintf(stderr, "train_loop: out of memory\n");
                return -1;
            }
            memset(grown + t->label_cap, 0, (size_t)(cap - t->label_cap) * sizeof *grown);
            t->label_count = grown;
            t->label_cap = cap;
        }
        t->label_count[y]++;
    }
    t->images += count;
    t->batches++;
    return 0;
}

static int fail(rf_loader *l, const char *what, int rc)
{
    fprintf(stderr, "train_loop: %s: %s: %s\n", what, rf_strerror(rc),
            l ? rf_loader_errmsg(l) : "");
    rf_loader_destroy(l);
    return 1;
}

int main(int argc, char **argv)
{
    const char *source = NULL;
    int64_t batch_size = 64, image_size = 224, workers = 0, epochs = 2, seed = 0, flip = 0;
    int64_t transform = RF_TRANSFORM_CENTER;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--flip") == 0) {
            flip = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            if (source) {
                usage(stderr);
                return 2;
            }
            source = a;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "train_loop: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        int bad = 0;
        if (strcmp(a, "--batch-size") == 0) {
            bad = parse_i64(v, 1, INT32_MAX, &batch_size);
        } else if (strcmp(a, "--image-size") == 0) {
            bad = parse_i64(v, 1, 65535, &image_size);
        } else if (strcmp(a, "--workers") == 0) {
            bad = parse_i64(v, 0, 4096, &workers);
        } else if (strcmp(a, "--epochs") == 0) {
            bad = parse_i64(v, 1, 1000000, &epochs);
        } else if (strcmp(a, "--seed") == 0) {
            bad = parse_i64(v, 0, INT64_MAX, &seed);
        } else if (strcmp(a, "--transform") == 0) {
            if (strcmp(v, "center") == 0)
                transform = RF_TRANSFORM_CENTER;
            else if (strcmp(v, "random_resized_crop") == 0)
                transform = RF_TRANSFORM_RANDOM_RESIZED_CROP;
            else if (strcmp(v, "none") == 0)
                transform = RF_TRANSFORM_NONE;
            else
                bad = 1;
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "train_loop: bad option %s %s\n", a, v);
            usage(stderr);
            return 2;
        }
    }
    if (!source) {
        usage(stderr);
        return 2;
    }

    printf("train_loop: ringfeed %d.%d.%d, source %s\n", rf_version() / 10000,
           rf_version() / 100 % 100, rf_version() % 100, source);
    rf_loader *l = rf_loader_create(source);
    if (!l) {
        fprintf(stderr, "train_loop: rf_loader_create failed (out of memory)\n");
        return 1;
    }
    const struct {
        int param;
        int64_t value;
        const char *name;
    } params[] = {
        {RF_P_BATCH_SIZE, batch_size, "batch_size"},
        {RF_P_IMAGE_SIZE, image_size, "image_size"},
        {RF_P_TRANSFORM, transform, "transform"},
        {RF_P_FLIP, flip, "flip"},
        {RF_P_NUM_WORKERS, workers, "num_workers"},
        {RF_P_SEED, seed, "seed"},
        {RF_P_SHUFFLE, 1, "shuffle"},
    };
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        int rc = rf_loader_set_param(l, params[i].param, params[i].value);
        if (rc < 0)
            return fail(l, params[i].name, rc);
    }
    int rc = rf_loader_start(l);
    if (rc < 0)
        return fail(l, "start", rc);

    int64_t samples = rf_loader_num_samples(l), batches = rf_loader_num_batches(l);
    printf("train_loop: %" PRId64 " samples, %" PRId64 " batches of %" PRId64 " per epoch\n",
           samples, batches, batch_size);
    if (samples <= 0 || batches <= 0) {
        fprintf(stderr, "train_loop: the source holds no samples\n");
        rf_loader_destroy(l);
        return 1;
    }

    int deterministic = (transform != RF_TRANSFORM_RANDOM_RESIZED_CROP) && !flip;
    uint64_t first_sum = 0;
    int64_t total_images = 0;
    int status = 0;
    double t0 = now_s();
    for (int64_t epoch = 0; epoch < epochs && status == 0; epoch++) {
        rc = rf_loader_set_epoch(l, epoch);
        if (rc < 0)
            return fail(l, "set_epoch", rc);
        epoch_tally t = {0};
        double te = now_s();
        rf_batch *b;
        while ((rc = rf_loader_next(l, &b)) == RF_OK) {
            if (rf_batch_epoch(b) != epoch || rf_batch_index(b) != t.batches) {
                fprintf(stderr,
                        "train_loop: got batch %" PRId64 " of epoch %" PRId64
                        ", expected batch %" PRId64 " of epoch %" PRId64 "\n",
                        rf_batch_index(b), rf_batch_epoch(b), t.batches, epoch);
                status = 1;
            } else if (train_step(b, &t) < 0) {
                status = 1;
            }
            rf_batch_release(b);
            if (status)
                break;
        }
        if (status == 0 && rc != RF_END_OF_EPOCH) {
            free(t.label_count);
            return fail(l, "next", rc);
        }
        double dt = now_s() - te;
        if (status == 0 && (t.images != samples || t.batches != batches)) {
            fprintf(stderr,
                    "train_loop: epoch %" PRId64 ": %" PRId64 " images in %" PRId64
                    " batches, expected %" PRId64 " in %" PRId64 "\n",
                    epoch, t.images, t.batches, samples, batches);
            status = 1;
        }
        if (status == 0 && deterministic && epoch > 0 && t.pixel_sum != first_sum) {
            fprintf(stderr,
                    "train_loop: epoch %" PRId64 " pixel sum %" PRIu64
                    " differs from epoch 0's %" PRIu64 " (same images, same transform)\n",
                    epoch, t.pixel_sum, first_sum);
            status = 1;
        }
        if (epoch == 0)
            first_sum = t.pixel_sum;
        total_images += t.images;
        printf("epoch %" PRId64 ": %" PRId64 " images, %" PRId64 " batches, %.1f images/s, "
               "pixel sum %" PRIu64 ", labels:",
               epoch, t.images, t.batches, dt > 0 ? (double)t.images / dt : 0.0, t.pixel_sum);
        for (int64_t y = 0; y < t.label_cap; y++)
            if (t.label_count[y])
                printf(" %" PRId64 "x%" PRId64, y, t.label_count[y]);
        printf("\n");
        free(t.label_count);
    }
    double elapsed = now_s() - t0;
    printf("train_loop: %" PRId64 " images in %.3f s: %.1f images/s\n", total_images, elapsed,
           elapsed > 0 ? (double)total_images / elapsed : 0.0);

    char small[4096];
    int64_t need = rf_loader_stats_json(l, small, sizeof small);
    if (need >= 0 && (size_t)need < sizeof small) {
        printf("stats: %s\n", small);
    } else if (need >= 0) {
        char *json = malloc((size_t)need + 1);
        if (json) {
            rf_loader_stats_json(l, json, (size_t)need + 1);
            printf("stats: %s\n", json);
            free(json);
        }
    }
    rf_loader_destroy(l);
    return status;
}
