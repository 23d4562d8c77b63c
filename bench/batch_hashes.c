/*
 * batch_hashes.c - rf-batch-hashes: the hash of every batch the library
 * delivers, in eight configurations, so that two builds can be shown to give
 * the same output byte for byte (a change that must not change behaviour:
 * run it before and after, compare the lines).
 *
 *   rf-batch-hashes PHOTO_FOLDER WORK_DIR [--epochs N] [--workers N]
 *                   [--config NAME] [--each]
 *
 * PHOTO_FOLDER is an ImageFolder of JPEGs (e.g. photos10: 1,500 pictures cut
 * from real photographs). From it the program writes into WORK_DIR, each
 * time and byte for byte the same: a list file (absolute paths, the folder's
 * labels), WebDataset tar shards (<key>.jpg + <key>.cls, ten shards, sample
 * i in shard i % 10) and one record file (a 64-byte header, then each
 * picture's first 16,384 bytes, zero-padded). Then, through the public API
 * only, it runs the configurations below for N epochs (default 2) and
 * prints one line each:
 *
 *   NAME  batches B  images I  hash H
 *
 * H chains FNV-1a 64 over every batch in order: its epoch, index and count,
 * the pixels (or record bytes), the labels and the sample indices. With
 * --each it also prints "NAME epoch E batch K hash H" for every batch, to
 * find the first that differs. Exits 1 on any error, with the loader's
 * message.
 *
 * The eight configurations (shuffle on, seed 1234, batch 64):
 *   center224      folder, center crop 224, NHWC
 *   center64_nchw  folder, center crop 64, NCHW
 *   rrc_flip       folder, random_resized_crop 160 with flip
 *   pread_w3       folder, pread reader, 3 workers, center 128
 *   list_rank1of3  list file, rank 1 of 3, center 96
 *   tar            tar shards, random_resized_crop 128
 *   records        record file, transform none (the bytes as stored)
 *   verify_always  folder, center 224, verify=always
 * Output does not depend on the worker count (the library's promise); a
 * config that sets none runs with --workers (default 2).
 */
#define _GNU_SOURCE

#include <ringfeed.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "benchutil.h"
#include "tarwrite.h"

enum { NSHARDS = 10, RECORD_SIZE = 16384, RECORD_HEADER = 64, BATCH = 64, SEED = 1234 };

typedef struct {
    char **path; /* absolute paths, ImageFolder order */
    int64_t *label;
    size_t n, cap;
} photos;

typedef struct {
    const char *name;
    const char *source; /* "folder", "list", "tar", "records" */
    int transform, image_size, layout, flip, io, workers, rank, world, verify;
} config;

static const config configs[] = {
    {"center224", "folder", RF_TRANSFORM_CENTER, 224, RF_LAYOUT_NHWC, 0, 0, 0, 0, 1, -1},
    {"center64_nchw", "folder", RF_TRANSFORM_CENTER, 64, RF_LAYOUT_NCHW, 0, 0, 0, 0, 1, -1},
    {"rrc_flip", "folder", RF_TRANSFORM_RANDOM_RESIZED_CROP, 160, RF_LAYOUT_NHWC, 1, 0, 0, 0, 1,
     -1},
    {"pread_w3", "folder", RF_TRANSFORM_CENTER, 128, RF_LAYOUT_NHWC, 0, RF_IO_PREAD, 3, 0, 1, -1},
    {"list_rank1of3", "list", RF_TRANSFORM_CENTER, 96, RF_LAYOUT_NHWC, 0, 0, 0, 1, 3, -1},
    {"tar", "tar", RF_TRANSFORM_RANDOM_RESIZED_CROP, 128, RF_LAYOUT_NHWC, 0, 0, 0, 0, 1, -1},
    {"records", "records", RF_TRANSFORM_NONE, 0, RF_LAYOUT_NHWC, 0, 0, 0, 0, 1, -1},
    {"verify_always", "folder", RF_TRANSFORM_CENTER, 224, RF_LAYOUT_NHWC, 0, 0, 0, 0, 1,
     RF_VERIFY_ALWAYS},
};

static void die(const char *what, const char *why)
{
    fprintf(stderr, "rf-batch-hashes: %s: %s\n", what, why);
    exit(1);
}

/* a/b into out (PATH_CAP bytes), or exits when it does not fit. */
enum { PATH_CAP = 4096 };
static void join(char *out, const char *a, const char *b)
{
    int n = snprintf(out, PATH_CAP, "%s/%s", a, b);
    if (n < 0 || n >= PATH_CAP)
        die(a, "path too long");
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of dir that are folders (want_dir) or regular files, sorted
 * by byte value; *n of them. */
static char **list_dir(const char *dir, int want_dir, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d)
        die(dir, strerror(errno));
    char **v = NULL;
    size_t cap = 0;
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[PATH_CAP];
        struct stat st;
        join(p, dir, e->d_name);
        if (stat(p, &st) != 0 || (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)))
            continue;
        if (*n == cap && !(v = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof *v)))
            die(dir, "out of memory");
        if (!(v[(*n)++] = strdup(e->d_name)))
            die(dir, "out of memory");
    }
    closedir(d);
    if (*n)
        qsort(v, *n, sizeof *v, cmp_str);
    return v;
}

/* Every file of root's class folders, as ImageFolder orders them (classes by
 * name, files by name; a folder's label is its rank among the classes). */
static void find_photos(const char *root, photos *ph)
{
    char abs[PATH_MAX];
    if (!realpath(root, abs))
        die(root, strerror(errno));
    size_t nc;
    char **classes = list_dir(abs, 1, &nc);
    for (size_t c = 0; c < nc; c++) {
        char cdir[PATH_CAP];
        join(cdir, abs, classes[c]);
        size_t nf;
        char **files = list_dir(cdir, 0, &nf);
        for (size_t f = 0; f < nf; f++) {
            if (ph->n == ph->cap) {
                ph->cap = ph->cap ? 2 * ph->cap : 1024;
                ph->path = realloc(ph->path, ph->cap * sizeof *ph->path);
                ph->label = realloc(ph->label, ph->cap * sizeof *ph->label);
                if (!ph->path || !ph->label)
                    die(root, "out of memory");
            }
            if (asprintf(&ph->path[ph->n], "%s/%s", cdir, files[f]) < 0)
                die(root, "out of memory");
            ph->label[ph->n++] = (int64_t)c;
            free(files[f]);
        }
        free(files);
        free(classes[c]);
    }
    free(classes);
    if (ph->n == 0)
        die(root, "no class folder holds a file");
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    if (!b || n < 0 || fread(b, 1, (size_t)n, f) != (size_t)n)
        die(path, "cannot read");
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* The list file, the tar shards and the record file of ph in work. */
static void write_derived(const photos *ph, const char *work)
{
    char p[4096];
    if (mkdir(work, 0755) != 0 && errno != EEXIST)
        die(work, strerror(errno));
    snprintf(p, sizeof p, "%s/list.txt", work);
    FILE *list = fopen(p, "w");
    if (!list)
        die(p, strerror(errno));
    for (size_t i = 0; i < ph->n; i++)
        fprintf(list, "%s\t%" PRId64 "\n", ph->path[i], ph->label[i]);
    if (fclose(list) != 0)
        die(p, "write failed");

    tw shards[NSHARDS];
    for (int s = 0; s < NSHARDS; s++) {
        snprintf(p, sizeof p, "%s/shard-%04d.tar", work, s);
        if (tw_open(&shards[s], p, TW_USTAR) != 0)
            die(p, strerror(errno));
    }
    snprintf(p, sizeof p, "%s/records.bin", work);
    FILE *rec = fopen(p, "wb");
    if (!rec)
        die(p, strerror(errno));
    unsigned char header[RECORD_HEADER] = "rf-batch-hashes records v1";
    fwrite(header, 1, sizeof header, rec);
    static unsigned char record[RECORD_SIZE];
    for (size_t i = 0; i < ph->n; i++) {
        size_t len;
        unsigned char *jpg = slurp(ph->path[i], &len);
        char key[64], name[80], cls[32];
        snprintf(key, sizeof key, "s%06zu", i);
        snprintf(name, sizeof name, "%s.jpg", key);
        int clen = snprintf(cls, sizeof cls, "%" PRId64, ph->label[i]);
        tw *t = &shards[i % NSHARDS];
        if (tw_file(t, name, jpg, len) != 0)
            die(name, "tar write failed");
        snprintf(name, sizeof name, "%s.cls", key);
        if (tw_file(t, name, cls, (size_t)clen) != 0)
            die(name, "tar write failed");
        memset(record, 0, sizeof record);
        memcpy(record, jpg, len < sizeof record ? len : sizeof record);
        if (fwrite(record, 1, sizeof record, rec) != sizeof record)
            die("records.bin", "write failed");
        free(jpg);
    }
    for (int s = 0; s < NSHARDS; s++)
        if (tw_close(&shards[s]) != 0)
            die("shard", "tar write failed");
    if (fclose(rec) != 0)
        die("records.bin", "write failed");
}

static void check(rf_loader *l, int rc, const config *c, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "rf-batch-hashes: %s: %s: %s (%s)\n", c->name, what, rf_strerror(rc),
                rf_loader_errmsg(l));
        exit(1);
    }
}

static void run(const config *c, const char *folder, const char *work, int epochs, int workers,
                int each)
{
    char spec[4096];
    if (!strcmp(c->source, "folder"))
        snprintf(spec, sizeof spec, "%s", folder);
    else if (!strcmp(c->source, "list"))
        snprintf(spec, sizeof spec, "%s/list.txt", work);
    else if (!strcmp(c->source, "tar"))
        snprintf(spec, sizeof spec, "%s/shard-{0000..%04d}.tar", work, NSHARDS - 1);
    else
        snprintf(spec, sizeof spec, "%s/records.bin", work);
    rf_loader *l = rf_loader_create(spec);
    if (!l)
        die(c->name, "rf_loader_create failed");
    int records = !strcmp(c->source, "records");
    const int64_t set[][2] = {
        {RF_P_BATCH_SIZE, BATCH},
        {RF_P_SEED, SEED},
        {RF_P_SHUFFLE, 1},
        {RF_P_TRANSFORM, c->transform},
        {RF_P_LAYOUT, c->layout},
        {RF_P_FLIP, c->flip},
        {RF_P_NUM_WORKERS, c->workers ? c->workers : workers},
        {RF_P_RANK, c->rank},
        {RF_P_WORLD_SIZE, c->world},
        {RF_P_IMAGE_SIZE, c->image_size ? c->image_size : 224},
        {RF_P_IO_BACKEND, c->io},
        {RF_P_VERIFY, c->verify >= 0 ? c->verify : RF_VERIFY_ONCE},
        {RF_P_RECORD_SIZE, records ? RECORD_SIZE : 0},
        {RF_P_HEADER_SIZE, records ? RECORD_HEADER : 0},
    };
    int n = (int)(sizeof set / sizeof set[0]);
    for (int k = 0; k < n; k++)
        check(l, rf_loader_set_param(l, (int)set[k][0], set[k][1]), c, "set_param");
    check(l, rf_loader_start(l), c, "start");
    uint64_t h = 0xcbf29ce484222325ULL;
    int64_t batches = 0, images = 0;
    for (int e = 0; e < epochs; e++) {
        check(l, rf_loader_set_epoch(l, e), c, "set_epoch");
        for (;;) {
            rf_batch *b;
            int rc = rf_loader_next(l, &b);
            check(l, rc, c, "next");
            if (rc == RF_END_OF_EPOCH)
                break;
            int64_t head[3] = {rf_batch_epoch(b), rf_batch_index(b), rf_batch_count(b)};
            uint64_t bh = fnv(0xcbf29ce484222325ULL, head, sizeof head);
            bh = fnv(bh, rf_batch_data(b), rf_batch_nbytes(b));
            bh = fnv(bh, rf_batch_labels(b), (size_t)head[2] * sizeof(int64_t));
            bh = fnv(bh, rf_batch_samples(b), (size_t)head[2] * sizeof(int64_t));
            if (each)
                printf("%s epoch %" PRId64 " batch %" PRId64 " hash %016" PRIx64 "\n", c->name,
                       head[0], head[1], bh);
            h = fnv(h, &bh, sizeof bh);
            batches++;
            images += head[2];
            check(l, rf_batch_release(b), c, "release");
        }
    }
    printf("%-14s batches %4" PRId64 "  images %6" PRId64 "  hash %016" PRIx64 "\n", c->name,
           batches, images, h);
    fflush(stdout);
    rf_loader_destroy(l);
}

static void usage(void)
{
    fprintf(stderr, "usage: rf-batch-hashes PHOTO_FOLDER WORK_DIR [--epochs N] [--workers N]\n"
                    "                       [--config NAME] [--each]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int epochs = 2, workers = 2, each = 0;
    const char *only = NULL, *pos[2] = {NULL, NULL};
    const bu_opt opts[] = {
        {"--epochs", 'i', &epochs, 1, 100},
        {"--workers", 'i', &workers, 1, 256},
        {"--config", 's', &only, 0, 0},
        {"--each", 'f', &each, 0, 0},
    };
    if (bu_parse_args("rf-batch-hashes", argc, argv, opts, sizeof opts / sizeof opts[0], pos, 2) ||
        !pos[1])
        usage();
    photos ph = {0};
    find_photos(pos[0], &ph);
    write_derived(&ph, pos[1]);
    int ran = 0;
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
        if (only && strcmp(only, configs[k].name))
            continue;
        run(&configs[k], pos[0], pos[1], epochs, workers, each);
        ran++;
    }
    if (!ran)
        die(only, "no such configuration");
    for (size_t i = 0; i < ph.n; i++)
        free(ph.path[i]);
    free(ph.path);
    free(ph.label);
    return 0;
}
