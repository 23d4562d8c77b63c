/*
 * test_faults.c - hostile data and a hostile environment, end to end through
 * the public API (issue 6).
 *
 * Data: one image folder mixes valid JPEGs of every kind the decoder must get
 * right (baseline 4:2:0/4:2:2/4:4:4/gray, progressive, restart markers,
 * arithmetic coding, CMYK and YCCK) with truncated, bit-flipped, empty,
 * random-byte, PNG-named-.jpg, huge-dimension (SOF says 60000x60000) files,
 * a FIFO named like an image and a directory named like an image. With
 * on_error = skip an epoch has full batches, every valid picture arrives with
 * the right pixels (compared with a loader over the valid files alone, and
 * with the reference decode where transform "none" allows), nothing bad is
 * delivered, and every bad file is in the stats with its reason; with raise,
 * each error names its file, sample and reason, and the loader goes on.
 *
 * Size: a sparse 700 MiB file and a tar member whose header says 700 MiB
 * are refused by max_file_bytes before anything is allocated for them
 * (RF_E_LIMIT naming the size and the limit, or a recorded skip).
 *
 * Environment: in child processes (this program re-executed, so that limits
 * and filters stay there), io_uring refused by a seccomp filter,
 * RLIMIT_MEMLOCK = 0 and a small RLIMIT_NOFILE: the same bytes as the
 * unconstrained run, or clear errors; a FIFO named .jpg under a watchdog. The
 * children report with exit codes and messages, not with cmocka.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testutil.h"

#define SIDE 45 /* every valid picture: odd, not a multiple of an MCU */
#define NCLASS 3

typedef struct item {
    const char *rel; /* class/name.jpg */
    int bad;         /* 1: must fail */
    const char *why; /* bad: a substring of the expected reason ("" = any) */
    uint8_t *data;   /* file bytes (NULL for the FIFO) */
    size_t len;
} item;

static char *tmp;        /* the test's temporary folder */
static char mixed[2048]; /* tmp/mixed: valid + bad */
static char valid[2048]; /* tmp/valid: the valid files alone, same names */
static item items[32];
static int nitems, nvalid, nbad;

/* ---------------------------------------------------------------- making */

/* Full-size reference RGB of a valid file (RGB-family or CMYK). */
static uint8_t *reference(const item *it)
{
    uint8_t *rgb;
    int w, h;
    if (tu_decode_jpeg(it->data, it->len, &rgb, &w, &h) != 0 &&
        tu_decode_cmyk(it->data, it->len, &rgb, &w, &h) != 0)
        fail_msg("no reference decode of %s", it->rel);
    assert_int_equal(w, SIDE);
    assert_int_equal(h, SIDE);
    return rgb;
}

static uint8_t *jpeg_of(int subsamp, int prog, int rst, int arith, uint32_t seed, size_t *len)
{
    tu_jpeg_opts o = {SIDE, SIDE, 88, subsamp, prog, rst, arith, seed, 0, 0};
    uint8_t *out;
    assert_int_equal(tu_make_jpeg(&o, &out, len), 0);
    return out;
}

static void add_item(const char *rel, int bad, const char *why, uint8_t *data, size_t len)
{
    assert_true(nitems < (int)(sizeof items / sizeof items[0]));
    items[nitems++] = (item){rel, bad, why, data, len};
    if (bad)
        nbad++;
    else
        nvalid++;
}

static uint8_t *dup_bytes(const uint8_t *p, size_t n)
{
    uint8_t *q = malloc(n ? n : 1);
    assert_non_null(q);
    memcpy(q, p, n);
    return q;
}

static void mkdirs(const char *root)
{
    static const char *const cls[NCLASS] = {"a", "b", "c"};
    char p[2100];
    assert_int_equal(mkdir(root, 0755), 0);
    for (int c = 0; c < NCLASS; c++) {
        snprintf(p, sizeof p, "%s/%s", root, cls[c]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
}

static int setup(void **state)
{
    (void)state;
    tmp = tu_tempdir("faults");
    if (tmp && strlen(tmp) > 1900) {
        free(tmp);
        tmp = NULL;
    }
    if (!tmp)
        return -1;
    snprintf(mixed, sizeof mixed, "%s/mixed", tmp);
    snprintf(valid, sizeof valid, "%s/valid", tmp);
    size_t len;
    uint8_t *j;

    /* Valid pictures; names interleave with the bad ones in each class. */
    j = jpeg_of(TU_420, 0, 0, 0, 1, &len);
    add_item("a/a01_base420.jpg", 0, NULL, j, len);
    j = jpeg_of(TU_422, 0, 0, 0, 2, &len);
    add_item("a/a03_base422.jpg", 0, NULL, j, len);
    j = jpeg_of(TU_444, 0, 0, 0, 3, &len);
    add_item("a/a05_base444.jpg", 0, NULL, j, len);
    j = jpeg_of(TU_GRAY, 0, 0, 0, 4, &len);
    add_item("a/a07_gray.jpg", 0, NULL, j, len);
    j = jpeg_of(TU_420, 1, 0, 0, 5, &len);
    add_item("b/b01_prog420.jpg", 0, NULL, j, len);
    j = jpeg_of(TU_444, 1, 0, 0, 6, &len);
    add_item("b/b03_prog444.jpg", 0, NULL, j, len);
    j = jpeg_of(TU_420, 0, 1, 0, 7, &len);
    add_item("b/b05_restart.jpg", 0, NULL, j, len);
    j = jpeg_of(TU_422, 0, 2, 0, 8, &len);
    add_item("b/b07_restart422.jpg", 0, NULL, j, len);
    j = jpeg_of(TU_420, 0, 0, 1, 9, &len);
    add_item("c/c01_arith.jpg", 0, NULL, j, len);
    j = jpeg_of(TU_444, 1, 0, 1, 10, &len);
    add_item("c/c03_arithprog.jpg", 0, NULL, j, len);
    assert_int_equal(tu_encode_cmyk(SIDE, SIDE, 0, 11, 90, &j, &len), 0);
    add_item("c/c05_cmyk.jpg", 0, NULL, j, len);
    assert_int_equal(tu_encode_cmyk(SIDE, SIDE, 1, 12, 90, &j, &len), 0);
    add_item("c/c07_ycck.jpg", 0, NULL, j, len);
    /* Inside a directory named like an image: a sample, as ImageFolder walks
     * class folders recursively (the directory itself is not one). */
    j = jpeg_of(TU_420, 0, 0, 0, 13, &len);
    add_item("c/c08_dir.jpg/inner.jpg", 0, NULL, j, len);

    /* Bad files. */
    uint8_t *base = jpeg_of(TU_420, 0, 0, 0, 21, &len);
    add_item("a/a02_truncated.jpg", 1, "Premature end", dup_bytes(base, len / 2), len / 2);
    /* Bit flips in the entropy-coded data that libjpeg does notice (some
     * flips decode silently to other pixels: nothing can tell those apart). */
    uint8_t *f = NULL;
    size_t sos = tu_jpeg_sos_offset(base, len);
    assert_true(sos > 0);
    uint64_t rs = 0x9e3779b97f4a7c15ULL;
    for (int tries = 0; tries < 1000; tries++) {
        free(f);
        f = dup_bytes(base, len);
        for (int k = 0; k < 4; k++) {
            rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
            size_t at = sos + 20 + (size_t)(rs % (len - sos - 24));
            f[at] ^= (uint8_t)(1u << (rs >> 40) % 8);
        }
        /* a flip libjpeg reports while the rows are read (the kind found
         * only at the end has its own test, test_bitflip_found_only_at_the_end) */
        if (tu_jpeg_fails_in_rows(f, len))
            break;
    }
    add_item("a/a04_bitflip.jpg", 1, "", f, len);
    add_item("a/a06_empty.jpg", 1, "empty file", dup_bytes(base, 0), 0);
    uint8_t *rnd = malloc(4000);
    for (int k = 0; k < 4000; k++) {
        rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
        rnd[k] = (uint8_t)(rs >> 32);
    }
    rnd[0] = 0x52; /* not 0xFF: "not a JPEG" */
    add_item("b/b02_random.jpg", 1, "not a JPEG", rnd, 4000);
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0,    0, 0, 13,
                                  'I',  'H', 'D', 'R', 0,    0,    0,    45,   0,    0, 0, 45,
                                  8,    2,   0,   0,   0,    0x90, 0x91, 0x68, 0x36, 0, 0, 0,
                                  0,    'I', 'E', 'N', 'D',  0xae, 0x42, 0x60, 0x82};
    add_item("b/b04_png.jpg", 1, "PNG", dup_bytes(png, sizeof png), sizeof png);
    uint8_t *huge = dup_bytes(base, len);
    size_t sof = tu_jpeg_sof_offset(huge, len);
    assert_true(sof > 0);
    huge[sof + 1] = 60000 >> 8, huge[sof + 2] = 60000 & 255; /* height */
    huge[sof + 3] = 60000 >> 8, huge[sof + 4] = 60000 & 255; /* width */
    add_item("c/c02_huge.jpg", 1, "60000x60000", huge, len);
    uint8_t *prog = jpeg_of(TU_420, 1, 0, 0, 22, &len);
    add_item("c/c04_truncated_prog.jpg", 1, "Premature end", dup_bytes(prog, len * 2 / 3),
             len * 2 / 3);
    free(prog);
    add_item("c/c06_fifo.jpg", 1, "not a regular file", NULL, 0);
    free(base);

    mkdirs(mixed);
    mkdirs(valid);
    char p[2200];
    snprintf(p, sizeof p, "%s/c/c08_dir.jpg", mixed);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/c/c08_dir.jpg", valid);
    assert_int_equal(mkdir(p, 0755), 0);
    for (int i = 0; i < nitems; i++) {
        snprintf(p, sizeof p, "%s/%s", mixed, items[i].rel);
        if (!items[i].data)
            assert_int_equal(mkfifo(p, 0644), 0);
        else
            assert_int_equal(tu_write_file(p, items[i].data, items[i].len), 0);
        if (!items[i].bad) {
            snprintf(p, sizeof p, "%s/%s", valid, items[i].rel);
            assert_int_equal(tu_write_file(p, items[i].data, items[i].len), 0);
        }
    }
    /* A file that is not an image: ImageFolder skips it. */
    snprintf(p, sizeof p, "%s/a/notes.txt", mixed);
    assert_int_equal(tu_write_file(p, "x", 1), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < nitems; i++)
        free(items[i].data);
    tu_rmtree(tmp);
    free(tmp);
    return 0;
}

/* ---------------------------------------------------------------- helpers */

/* tmp/name/x, an empty folder of one class: its root is written to dir. */
static void one_class_folder(char *dir, size_t cap, const char *name)
{
    char p[4300];
    snprintf(dir, cap, "%s/%s", tmp, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(p, sizeof p, "%s/x", dir);
    assert_int_equal(mkdir(p, 0755), 0);
}

static rf_loader *make(const char *src, int transform, int size, int batch, int workers)
{
    return TU_LOADER(src, {RF_P_TRANSFORM, transform}, {RF_P_IMAGE_SIZE, size},
                     {RF_P_BATCH_SIZE, batch}, {RF_P_NUM_WORKERS, workers}, {RF_P_SEED, 77});
}

/* The item a delivered sample is, found by the path relative to its root. */
static const item *item_of(const rf_loader *l, const char *root, int64_t sample)
{
    const char *p = rf_loader_sample_path(l, sample);
    assert_non_null(p);
    size_t n = strlen(root);
    if (strncmp(p, root, n) != 0 || p[n] != '/')
        fail_msg("sample %lld path %s is not under %s", (long long)sample, p, root);
    for (int i = 0; i < nitems; i++)
        if (!strcmp(p + n + 1, items[i].rel))
            return &items[i];
    fail_msg("sample %lld path %s is none of the test's files", (long long)sample, p);
    return NULL;
}

/* The reason recorded in the stats' errors for path (first entry) into out: 0, or -1
 * when the path is not listed. */
static int stats_reason(const char *stats, const char *path, char *out, size_t cap)
{
    char key[4400];
    snprintf(key, sizeof key, "{\"path\": \"%s\", \"reason\": \"", path);
    const char *p = strstr(stats, key);
    if (!p)
        return -1;
    p += strlen(key);
    size_t n = 0;
    while (*p && *p != '"' && n + 1 < cap) {
        if (*p == '\\' && p[1])
            p++;
        out[n++] = *p++;
    }
    out[n] = '\0';
    return 0;
}

static int label_of(const item *it)
{
    return it->rel[0] - 'a';
}

/* ------------------------------------------------------------------ tests */

static void test_folder_indexes_files_not_dirs(void **state)
{
    (void)state;
    rf_loader *l = make(mixed, RF_TRANSFORM_CENTER, 32, 4, 1);
    tu_start(l);
    /* Every .jpg that is not a directory, in ImageFolder's order (sorted
     * os.walk of each class folder): notes.txt and the directory c08_dir.jpg/
     * are not samples, the picture inside it is. */
    assert_int_equal(rf_loader_num_samples(l), nitems);
    int seen[32] = {0};
    for (int64_t s = 0; s < nitems; s++) {
        const item *it = item_of(l, mixed, s);
        assert_int_equal(rf_loader_sample_label(l, s), label_of(it));
        seen[it - items]++;
        if (s > 0)
            assert_true(strcmp(rf_loader_sample_path(l, s - 1), rf_loader_sample_path(l, s)) < 0);
    }
    for (int i = 0; i < nitems; i++)
        assert_int_equal(seen[i], 1);
    rf_loader_destroy(l);
}

/* Pixels of each valid file under transform center (no flip: a sample's
 * pixels depend on its bytes alone), from a loader over the valid files. */
static uint8_t *center_refs(int S)
{
    rf_loader *v = make(valid, RF_TRANSFORM_CENTER, S, 3, 2);
    assert_int_equal(rf_loader_set_param(v, RF_P_SHUFFLE, 0), 0);
    tu_start(v);
    assert_int_equal(rf_loader_num_samples(v), nvalid);
    size_t per = (size_t)S * S * 3;
    uint8_t *ref = calloc((size_t)nitems, per);
    rf_batch *b;
    int rc, got = 0;
    while ((rc = rf_loader_next(v, &b)) == RF_OK) {
        for (int64_t i = 0; i < rf_batch_count(b); i++) {
            const item *it = item_of(v, valid, rf_batch_samples(b)[i]);
            memcpy(ref + (size_t)(it - items) * per, (uint8_t *)rf_batch_data(b) + i * per, per);
            got++;
        }
        rf_batch_release(b);
    }
    if (rc != RF_END_OF_EPOCH)
        fail_msg("valid folder: %d %s", rc, rf_loader_errmsg(v));
    assert_int_equal(got, nvalid);
    rf_loader_destroy(v);
    return ref;
}

/* One skip epoch over the mixed folder: full batches, only valid pictures,
 * each with its expected pixels; returns how often each item was delivered. */
static void skip_epoch(rf_loader *l, int64_t epoch, int S, const uint8_t *ref, int *delivered)
{
    size_t per = (size_t)S * S * 3;
    int64_t B;
    assert_int_equal(rf_loader_get_param(l, RF_P_BATCH_SIZE, &B), 0);
    /* Reposition only when needed: the exact counts checked here then do not
     * depend on dropped prefetch (test_skipped_counts_only_delivered_batches
     * checks that case). */
    int64_t cur, next;
    assert_int_equal(rf_loader_tell(l, &cur, &next), 0);
    if (cur != epoch || next != 0)
        assert_int_equal(rf_loader_set_epoch(l, epoch), 0);
    rf_batch *b;
    int rc;
    int64_t total = 0, batches = 0;
    while ((rc = rf_loader_next(l, &b)) == RF_OK) {
        int64_t n = rf_batch_count(b);
        int64_t want = nitems - batches * B < B ? nitems - batches * B : B;
        assert_int_equal(n, want); /* full batches: bad samples were replaced */
        for (int64_t i = 0; i < n; i++) {
            const item *it = item_of(l, mixed, rf_batch_samples(b)[i]);
            if (it->bad)
                fail_msg("epoch %lld: bad file %s delivered", (long long)epoch, it->rel);
            assert_int_equal(rf_batch_labels(b)[i], label_of(it));
            const uint8_t *px = (const uint8_t *)rf_batch_data(b) + i * per;
            if (memcmp(px, ref + (size_t)(it - items) * per, per) != 0)
                fail_msg("epoch %lld: %s: pixels differ from the reference (PSNR %.2f dB)",
                         (long long)epoch, it->rel,
                         tu_psnr(px, ref + (size_t)(it - items) * per, per));
            delivered[it - items]++;
        }
        total += n;
        batches++;
        rf_batch_release(b);
    }
    if (rc != RF_END_OF_EPOCH)
        fail_msg("skip: next returned %d: %s", rc, rf_loader_errmsg(l));
    assert_int_equal(total, nitems);
    assert_int_equal(batches, rf_loader_num_batches(l));
}

static void check_errors_listed(rf_loader *l, int epochs)
{
    char *st = tu_stats(l);
    if (tu_stats_int(st, "errors_count") != (int64_t)nbad * epochs ||
        tu_stats_int(st, "skipped") != (int64_t)nbad * epochs)
        fail_msg("%d bad files, %d epochs: errors_count %lld, skipped %lld: %s", nbad, epochs,
                 (long long)tu_stats_int(st, "errors_count"),
                 (long long)tu_stats_int(st, "skipped"), st);
    for (int i = 0; i < nitems; i++) {
        char path[4200], why[600];
        snprintf(path, sizeof path, "%s/%s", mixed, items[i].rel);
        int listed = stats_reason(st, path, why, sizeof why) == 0;
        if (items[i].bad && !listed)
            fail_msg("bad file %s is not in the stats' errors: %s", items[i].rel, st);
        if (!items[i].bad && listed)
            fail_msg("valid file %s is in the stats' errors (%s)", items[i].rel, why);
        if (items[i].bad && (!why[0] || !strstr(why, items[i].why)))
            fail_msg("%s: reason \"%s\" lacks \"%s\"", items[i].rel, why, items[i].why);
    }
    free(st);
}

static void test_skip_center_delivers_every_valid_picture(void **state)
{
    (void)state;
    const int S = 32;
    uint8_t *ref = center_refs(S);
    rf_loader *l = make(mixed, RF_TRANSFORM_CENTER, S, 5, 3);
    assert_int_equal(rf_loader_set_param(l, RF_P_ON_ERROR, RF_ON_ERROR_SKIP), 0);
    tu_start(l);
    for (int64_t e = 0; e < 2; e++) {
        int d[32] = {0};
        skip_epoch(l, e, S, ref, d);
        for (int i = 0; i < nitems; i++)
            if (!items[i].bad && d[i] == 0)
                fail_msg("epoch %lld: valid file %s never delivered", (long long)e, items[i].rel);
    }
    check_errors_listed(l, 2);
    rf_loader_destroy(l);
    free(ref);
}

static void test_skip_none_matches_reference_decode(void **state)
{
    (void)state;
    /* transform none: the pictures themselves, byte for byte as libjpeg
     * decodes them (CMYK/YCCK converted as documented). */
    size_t per = (size_t)SIDE * SIDE * 3;
    uint8_t *ref = calloc((size_t)nitems, per);
    for (int i = 0; i < nitems; i++)
        if (!items[i].bad) {
            uint8_t *r = reference(&items[i]);
            memcpy(ref + (size_t)i * per, r, per);
            free(r);
        }
    const int workers[] = {1, 4};
    for (int w = 0; w < 2; w++) {
        rf_loader *l = make(mixed, RF_TRANSFORM_NONE, SIDE, 4, workers[w]);
        assert_int_equal(rf_loader_set_param(l, RF_P_ON_ERROR, RF_ON_ERROR_SKIP), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_IO_BACKEND, w ? RF_IO_PREAD : RF_IO_AUTO), 0);
        tu_start(l);
        int d[32] = {0};
        skip_epoch(l, 0, SIDE, ref, d);
        for (int i = 0; i < nitems; i++)
            if (!items[i].bad && d[i] == 0)
                fail_msg("valid file %s never delivered", items[i].rel);
        check_errors_listed(l, 1);
        rf_loader_destroy(l);
    }
    free(ref);
}

static void test_raise_names_each_bad_file(void **state)
{
    (void)state;
    /* Batches of one: every bad sample is its own error. */
    for (int pass = 0; pass < 2; pass++) {
        rf_loader *l = make(mixed, RF_TRANSFORM_CENTER, 24, 1, 2);
        assert_int_equal(rf_loader_set_param(l, RF_P_SHUFFLE, pass), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_IO_BACKEND, pass ? RF_IO_PREAD : RF_IO_AUTO),
                         0);
        tu_start(l);
        int seen[32] = {0}, ok = 0, rc;
        rf_batch *b;
        while ((rc = rf_loader_next(l, &b)) != RF_END_OF_EPOCH) {
            if (rc == RF_OK) {
                const item *it = item_of(l, mixed, rf_batch_samples(b)[0]);
                assert_false(it->bad);
                ok++;
                rf_batch_release(b);
                continue;
            }
            const char *msg = rf_loader_errmsg(l);
            const item *hit = NULL;
            for (int i = 0; i < nitems; i++) {
                char path[4200];
                snprintf(path, sizeof path, "%s/%s", mixed, items[i].rel);
                if (strstr(msg, path))
                    hit = &items[i];
            }
            if (!hit || !hit->bad)
                fail_msg("error %d does not name a bad file: %s", rc, msg);
            seen[hit - items]++;
            if (!strstr(msg, "(sample ") || !strstr(msg, hit->why))
                fail_msg("error for %s lacks the sample or the reason \"%s\": %s", hit->rel,
                         hit->why, msg);
            if (!strcmp(hit->why, "60000x60000"))
                assert_int_equal(rc, RF_E_LIMIT);
            else if (!hit->data)
                assert_int_equal(rc, RF_E_IO); /* the FIFO */
            else
                assert_int_equal(rc, RF_E_DECODE);
        }
        assert_int_equal(ok, nvalid);
        for (int i = 0; i < nitems; i++)
            assert_int_equal(seen[i], items[i].bad ? 1 : 0);
        /* The loader stays usable. */
        assert_int_equal(rf_loader_set_epoch(l, 1), 0);
        int n = 0;
        while ((rc = rf_loader_next(l, &b)) != RF_END_OF_EPOCH) {
            if (rc == RF_OK)
                rf_batch_release(b);
            n++;
        }
        assert_int_equal(n, nitems);
        rf_loader_destroy(l);
    }
}

/* ------------------------------------------------- children with limits */

#define CHILD_CHECK(cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "child: %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            _exit(3);                                                                              \
        }                                                                                          \
    } while (0)

enum { CHILD_SKIP = 77 };

static char self_exe[4096]; /* this test program, re-executed for children */
static uint64_t ref_hash;   /* the unconstrained run's epoch hash */

/* Runs child `name` (see child_main) in a fresh copy of this program, with a
 * watchdog: fork, then exec, so that the child starts single-threaded under
 * every sanitizer (ThreadSanitizer refuses threads after a fork of a process
 * that had threads) and its limits and filters stay there. Returns its exit
 * status, or fails the test on a crash or a hang. */
static int in_child(const char *name, int arg, const char *path, unsigned timeout_s,
                    const char *what)
{
    char a[32], h[32];
    snprintf(a, sizeof a, "%d", arg);
    snprintf(h, sizeof h, "%016llx", (unsigned long long)ref_hash);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(timeout_s); /* survives exec: a hang ends as SIGALRM */
        execl(self_exe, self_exe, "--child", name, a, path, h, (char *)NULL);
        fprintf(stderr, "child: exec %s: %s\n", self_exe, strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(st))
        fail_msg("%s: the child died of signal %d%s", what, WTERMSIG(st),
                 WTERMSIG(st) == SIGALRM ? " (hung: watchdog)" : "");
    return WEXITSTATUS(st);
}

typedef struct epoch_run {
    const char *src;
    int backend; /* RF_IO_* */
    int workers;
    uint64_t hash;
    char io[32];
    char note[200];
    char err[1200];
    int rc;
} epoch_run;

/* FNV-1a over an epoch of the valid folder (random resized crop + flip):
 * data, labels and sample ids. rc < 0 with err set on any failure. */
static void run_epoch(epoch_run *r)
{
    r->hash = 0xcbf29ce484222325ULL;
    r->err[0] = r->io[0] = r->note[0] = '\0';
    rf_loader *l = rf_loader_create(r->src);
    if (!l) {
        r->rc = RF_E_NOMEM;
        return;
    }
    rf_loader_set_param(l, RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP);
    rf_loader_set_param(l, RF_P_FLIP, 1);
    rf_loader_set_param(l, RF_P_IMAGE_SIZE, 24);
    rf_loader_set_param(l, RF_P_BATCH_SIZE, 5);
    rf_loader_set_param(l, RF_P_NUM_WORKERS, r->workers);
    rf_loader_set_param(l, RF_P_SEED, 5);
    rf_loader_set_param(l, RF_P_IO_BACKEND, r->backend);
    r->rc = rf_loader_start(l);
    if (r->rc == 0) {
        rf_batch *b;
        while ((r->rc = rf_loader_next(l, &b)) == RF_OK) {
            const uint8_t *p = rf_batch_data(b);
            for (size_t i = 0; i < rf_batch_nbytes(b); i++)
                r->hash = (r->hash ^ p[i]) * 0x100000001b3ULL;
            const uint8_t *q = (const uint8_t *)rf_batch_labels(b);
            for (size_t i = 0; i < (size_t)rf_batch_count(b) * 8; i++)
                r->hash = (r->hash ^ q[i]) * 0x100000001b3ULL;
            rf_batch_release(b);
        }
        if (r->rc == RF_END_OF_EPOCH)
            r->rc = 0;
    }
    if (r->rc < 0)
        snprintf(r->err, sizeof r->err, "%s", rf_loader_errmsg(l));
    char st[16384];
    rf_loader_stats_json(l, st, sizeof st);
    const char *p = strstr(st, "\"io_backend\": \"");
    if (p)
        sscanf(p + 15, "%31[^\"]", r->io);
    p = strstr(st, "\"io_note\": \"");
    if (p)
        sscanf(p + 12, "%199[^\"]", r->note);
    rf_loader_destroy(l);
}

static uint64_t reference_hash(char *io, size_t cap)
{
    epoch_run r = {.src = valid, .backend = RF_IO_AUTO, .workers = 2};
    run_epoch(&r);
    if (r.rc != 0)
        fail_msg("reference epoch: %d %s", r.rc, r.err);
    if (io)
        snprintf(io, cap, "%s", r.io);
    return r.hash;
}

/* seccomp filter: io_uring_setup (and its siblings) fail with EPERM, as
 * Docker's default profile and many sandboxes make them. */
static int refuse_io_uring(void)
{
#if defined(__x86_64__)
    const uint32_t arch = 0xC000003E; /* AUDIT_ARCH_X86_64 */
#elif defined(__aarch64__)
    const uint32_t arch = 0xC00000B7; /* AUDIT_ARCH_AARCH64 */
#else
    return -1;
#endif
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 425 /* io_uring_setup */, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 426 /* io_uring_enter */, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 427 /* io_uring_register */, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return -1;
    return 0;
}

static int child_no_io_uring(int arg, const char *path)
{
    (void)arg;
    (void)path;
    unsetenv("RINGFEED_IO"); /* auto must try io_uring here (memcheck runs set pread) */
    if (refuse_io_uring() != 0) {
        fprintf(stderr, "child: cannot install a seccomp filter (%s): skipped\n", strerror(errno));
        return CHILD_SKIP;
    }
    long rc = syscall(425, 4, NULL);
    CHILD_CHECK(rc == -1 && errno == EPERM, "io_uring_setup gave %ld (%s)", rc, strerror(errno));
    const int backends[] = {RF_IO_AUTO, RF_IO_URING};
    for (int i = 0; i < 2; i++) {
        epoch_run r = {.src = valid, .backend = backends[i], .workers = 3};
        run_epoch(&r);
        CHILD_CHECK(r.rc == 0, "backend %d: %d %s", backends[i], r.rc, r.err);
        CHILD_CHECK(!strcmp(r.io, "pread"), "io_backend is \"%s\"", r.io);
        CHILD_CHECK(strstr(r.note, "io_uring"), "io_note \"%s\" does not say why", r.note);
        CHILD_CHECK(r.hash == ref_hash, "backend %d: bytes differ from the io_uring run",
                    backends[i]);
        fprintf(stderr, "child: io_uring refused: io_backend=%s, note \"%s\", same bytes\n", r.io,
                r.note);
    }
    return 0;
}

static void test_io_uring_refused_falls_back_to_pread(void **state)
{
    (void)state;
    char io[32];
    ref_hash = reference_hash(io, sizeof io);
    print_message("reference run: io_backend=%s\n", io);
    int rc = in_child("no_io_uring", 0, valid, 60, "io_uring refused");
    if (rc == CHILD_SKIP)
        skip();
    assert_int_equal(rc, 0);
}

static int child_memlock0(int arg, const char *path)
{
    (void)arg;
    (void)path;
    struct rlimit rl = {0, 0};
    CHILD_CHECK(setrlimit(RLIMIT_MEMLOCK, &rl) == 0, "setrlimit: %s", strerror(errno));
    for (int w = 1; w <= 3; w += 2) {
        epoch_run r = {.src = valid, .backend = RF_IO_AUTO, .workers = w};
        run_epoch(&r);
        CHILD_CHECK(r.rc == 0, "%d %s", r.rc, r.err);
        CHILD_CHECK(r.hash == ref_hash, "bytes differ (io_backend %s)", r.io);
        fprintf(stderr, "child: RLIMIT_MEMLOCK=0: io_backend=%s%s%s, same bytes\n", r.io,
                r.note[0] ? ", note: " : "", r.note);
    }
    return 0;
}

static void test_memlock_zero(void **state)
{
    (void)state;
    ref_hash = reference_hash(NULL, 0);
    assert_int_equal(in_child("memlock0", 0, valid, 60, "RLIMIT_MEMLOCK=0"), 0);
}

/* arg > 0: soft limit arg (liburing may raise it up to the hard limit);
 * arg < 0: soft and hard limit -arg. */
static int child_nofile(int arg, const char *path)
{
    (void)path;
    int limit = arg < 0 ? -arg : arg;
    struct rlimit old, rl;
    CHILD_CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0, "getrlimit: %s", strerror(errno));
    rl = old;
    rl.rlim_cur = (rlim_t)limit;
    if (arg < 0)
        rl.rlim_max = (rlim_t)limit;
    CHILD_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
    const int backends[] = {RF_IO_AUTO, RF_IO_PREAD};
    for (int i = 0; i < 2; i++) {
        epoch_run r = {.src = valid, .backend = backends[i], .workers = 4};
        run_epoch(&r);
        if (r.rc == 0) {
            CHILD_CHECK(r.hash == ref_hash, "RLIMIT_NOFILE=%d: bytes differ (io_backend %s)", limit,
                        r.io);
            fprintf(stderr, "child: RLIMIT_NOFILE=%d%s: io_backend=%s%s%s, same bytes\n", limit,
                    arg < 0 ? " (hard too)" : "", r.io, r.note[0] ? ", note: " : "", r.note);
        } else {
            /* A clear error: component and cause, and a path when a file
             * could not be opened. */
            CHILD_CHECK(r.err[0], "RLIMIT_NOFILE=%d: error %d without a message", limit, r.rc);
            CHILD_CHECK(strstr(r.err, "EMFILE") || strstr(r.err, "open files") ||
                            strstr(r.err, "descriptor"),
                        "RLIMIT_NOFILE=%d: error does not say why: %s", limit, r.err);
            CHILD_CHECK(r.rc != RF_E_IO || strstr(r.err, valid),
                        "RLIMIT_NOFILE=%d: read error does not name the file: %s", limit, r.err);
            fprintf(stderr, "child: RLIMIT_NOFILE=%d%s: error %d: %s\n", limit,
                    arg < 0 ? " (hard too)" : "", r.rc, r.err);
        }
    }
    /* LeakSanitizer needs descriptors at exit: restore the limit, or (a hard
     * limit that only root may raise again) leave without the leak check. */
    if (setrlimit(RLIMIT_NOFILE, &old) != 0) {
        fflush(NULL);
        _exit(0);
    }
    return 0;
}

static void test_few_open_files(void **state)
{
    (void)state;
    ref_hash = reference_hash(NULL, 0);
    /* 32: room for the library (it must work); 6 and 4: barely any room
     * (it may fail, with a clear error, never crash or hang). Soft limit
     * alone, then soft and hard. */
    static const int limits[] = {32, 6, 4, -32, -6, -4};
    for (int i = 0; i < 6; i++) {
        char what[64];
        snprintf(what, sizeof what, "RLIMIT_NOFILE=%d%s", abs(limits[i]),
                 limits[i] < 0 ? " (hard too)" : "");
        assert_int_equal(in_child("nofile", limits[i], valid, 60, what), 0);
    }
}

static int child_fifo(int backend, const char *dir)
{
    rf_loader *l = rf_loader_create(dir);
    rf_loader_set_param(l, RF_P_BATCH_SIZE, 1);
    rf_loader_set_param(l, RF_P_SHUFFLE, 0);
    rf_loader_set_param(l, RF_P_IMAGE_SIZE, 16);
    rf_loader_set_param(l, RF_P_NUM_WORKERS, 1);
    rf_loader_set_param(l, RF_P_IO_BACKEND, backend);
    CHILD_CHECK(rf_loader_start(l) == 0, "start: %s", rf_loader_errmsg(l));
    rf_batch *b;
    CHILD_CHECK(rf_loader_next(l, &b) == RF_OK, "first sample: %s", rf_loader_errmsg(l));
    rf_batch_release(b);
    int rc = rf_loader_next(l, &b);
    CHILD_CHECK(rc == RF_E_IO, "FIFO: next returned %d (%s)", rc, rf_loader_errmsg(l));
    CHILD_CHECK(strstr(rf_loader_errmsg(l), "z_fifo.jpg"), "error does not name the FIFO: %s",
                rf_loader_errmsg(l));
    fprintf(stderr, "child: FIFO, backend %d: %s\n", backend, rf_loader_errmsg(l));
    CHILD_CHECK(rf_loader_next(l, &b) == RF_END_OF_EPOCH, "after the FIFO");
    rf_loader_destroy(l);
    return 0;
}

static void test_fifo_does_not_hang(void **state)
{
    (void)state;
    char dir[4200], p[4300];
    one_class_folder(dir, sizeof dir, "fifo");
    snprintf(p, sizeof p, "%s/x/a.jpg", dir);
    assert_int_equal(tu_write_file(p, items[0].data, items[0].len), 0);
    snprintf(p, sizeof p, "%s/x/z_fifo.jpg", dir);
    assert_int_equal(mkfifo(p, 0644), 0);
    const int backends[] = {RF_IO_AUTO, RF_IO_URING, RF_IO_PREAD};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(in_child("fifo", backends[i], dir, 30, "FIFO named .jpg"), 0);
    }
    tu_rmtree(dir);
}

static void test_unreadable_file_eacces(void **state)
{
    (void)state;
    if (geteuid() == 0) {
        print_message("running as root: permissions do not stop reads; skipped\n");
        skip();
    }
    char dir[4200], p[4300];
    one_class_folder(dir, sizeof dir, "noperm");
    snprintf(p, sizeof p, "%s/x/locked.jpg", dir);
    assert_int_equal(tu_write_file(p, items[0].data, items[0].len), 0);
    assert_int_equal(chmod(p, 0), 0);
    for (int pread = 0; pread <= 1; pread++) {
        rf_loader *l = make(dir, RF_TRANSFORM_CENTER, 16, 1, 1);
        rf_loader_set_param(l, RF_P_IO_BACKEND, pread ? RF_IO_PREAD : RF_IO_AUTO);
        tu_start(l);
        rf_batch *b;
        assert_int_equal(rf_loader_next(l, &b), RF_E_IO);
        assert_non_null(strstr(rf_loader_errmsg(l), "locked.jpg"));
        assert_non_null(strstr(rf_loader_errmsg(l), "EACCES"));
        rf_loader_destroy(l);
    }
    chmod(p, 0644);
    tu_rmtree(dir);
}

/* A bit flip that desynchronises the Huffman stream without hitting a
 * marker is reported by libjpeg only at the end of the data ("N extraneous
 * bytes before marker 0xd9"): the decoder must read on to the end marker
 * (it once stopped after the last row it needed and delivered garbage,
 * PSNR ~17 dB against the clean picture). */
static void test_bitflip_found_only_at_the_end(void **state)
{
    (void)state;
    size_t len;
    uint8_t *base = jpeg_of(TU_420, 0, 0, 0, 21, &len), *f = NULL;
    size_t sos = tu_jpeg_sos_offset(base, len);
    uint64_t rs = 0x1234567ULL;
    int found = 0;
    for (int tries = 0; tries < 5000 && !found; tries++) {
        free(f);
        f = dup_bytes(base, len);
        rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
        f[sos + 20 + (size_t)(rs % (len - sos - 24))] ^= (uint8_t)(1u << (rs >> 40) % 8);
        uint8_t *px;
        if (tu_decode_jpeg(f, len, &px, NULL, NULL) == 0)
            free(px);
        else if (!tu_jpeg_fails_in_rows(f, len))
            found = 1;
    }
    assert_true(found);
    char dir[2200], p[2300];
    one_class_folder(dir, sizeof dir, "late");
    snprintf(p, sizeof p, "%s/x/desync.jpg", dir);
    assert_int_equal(tu_write_file(p, f, len), 0);
    rf_loader *l = make(dir, RF_TRANSFORM_NONE, SIDE, 1, 1);
    tu_start(l);
    rf_batch *b;
    int rc = rf_loader_next(l, &b);
    if (rc == RF_OK)
        rf_batch_release(b);
    assert_int_equal(rc, RF_E_DECODE);
    assert_non_null(strstr(rf_loader_errmsg(l), "extraneous bytes"));
    rf_loader_destroy(l);
    tu_rmtree(dir);
    free(f);
    free(base);
}

/* RF_P_VERIFY: a portrait picture cut in its last rows, which a center crop
 * never reaches, beside intact ones. ONCE and ALWAYS report it in every epoch
 * and deliver the same bytes; ONCE decodes the intact files to their end only
 * once ("verified" counts them), then down to the crop's last row; NONE
 * delivers the cut picture's crop. */
static uint64_t verify_epochs(const char *dir, int mode, int64_t *errors, int64_t *verified)
{
    rf_loader *l = make(dir, RF_TRANSFORM_CENTER, 64, 3, 2);
    assert_int_equal(rf_loader_set_param(l, RF_P_ON_ERROR, RF_ON_ERROR_SKIP), 0);
    if (mode >= 0)
        assert_int_equal(rf_loader_set_param(l, RF_P_VERIFY, mode), 0);
    tu_start(l);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int e = 0; e < 3; e++) {
        assert_int_equal(rf_loader_set_epoch(l, e), 0);
        rf_batch *b;
        int rc;
        while ((rc = rf_loader_next(l, &b)) == RF_OK) {
            const uint8_t *p = rf_batch_data(b);
            for (size_t i = 0; i < rf_batch_nbytes(b); i++)
                h = (h ^ p[i]) * 0x100000001b3ULL;
            rf_batch_release(b);
        }
        assert_int_equal(rc, RF_END_OF_EPOCH);
        char *st = tu_stats(l);
        errors[e] = tu_stats_int(st, "errors_count");
        verified[e] = tu_stats_int(st, "verified");
        free(st);
    }
    rf_loader_destroy(l);
    return h;
}

static void test_verify_modes(void **state)
{
    (void)state;
    char dir[2200], p[2300];
    one_class_folder(dir, sizeof dir, "verify");
    const int ngood = 5;
    for (int i = 0; i <= ngood; i++) {
        /* 96x200: the center crop at 64 reads rows 57..143 or so */
        tu_jpeg_opts o = {96, 200, 88, TU_420, 0, 0, 0, (uint32_t)(300 + i), 0, 0};
        uint8_t *jpg;
        size_t len;
        assert_int_equal(tu_make_jpeg(&o, &jpg, &len), 0);
        if (i == ngood) {
            len -= len / 10; /* cut in its last rows */
            uint8_t *px;
            assert_int_not_equal(tu_decode_jpeg(jpg, len, &px, NULL, NULL), 0);
        }
        snprintf(p, sizeof p, "%s/x/%s%d.jpg", dir, i == ngood ? "cut" : "good", i);
        assert_int_equal(tu_write_file(p, jpg, len), 0);
        free(jpg);
    }
    int64_t err_once[3], ver_once[3], err_always[3], ver_always[3], err_none[3], ver_none[3];
    uint64_t once = verify_epochs(dir, -1, err_once, ver_once); /* the default */
    uint64_t always = verify_epochs(dir, RF_VERIFY_ALWAYS, err_always, ver_always);
    uint64_t none = verify_epochs(dir, RF_VERIFY_NONE, err_none, ver_none);
    for (int e = 0; e < 3; e++) {
        assert_int_equal(err_once[e], e + 1);
        assert_int_equal(ver_once[e], ngood);
        assert_int_equal(err_always[e], e + 1);
        assert_int_equal(ver_always[e], 0);
        assert_int_equal(err_none[e], 0);
        assert_int_equal(ver_none[e], 0);
    }
    assert_true(once == always);
    assert_true(none != always); /* the cut picture itself instead of a substitute */
    tu_rmtree(dir);
}

/* stats "skipped" counts the substitutions of delivered batches, as
 * "errors_count" counts their bad samples: batches decoded and then dropped
 * (set_epoch/seek after prefetching) count in neither (they once inflated
 * "skipped" to 2x). */
static void test_skipped_counts_only_delivered_batches(void **state)
{
    (void)state;
    rf_loader *l = make(mixed, RF_TRANSFORM_CENTER, 16, 7, 2);
    assert_int_equal(rf_loader_set_param(l, RF_P_ON_ERROR, RF_ON_ERROR_SKIP), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_PREFETCH, 8), 0); /* the whole epoch */
    tu_start(l);
    /* Until epoch 0 is prefetched, or the test would not drop decoded
     * batches (60 s: a hang guard; valgrind is slow). */
    int64_t decoded = 0;
    for (int i = 0; i < 12000 && decoded < nitems; i++) {
        char *st = tu_stats(l);
        decoded = tu_stats_int(st, "samples_decoded");
        free(st);
        if (decoded < nitems)
            usleep(5000);
    }
    if (decoded < nitems)
        fail_msg("epoch 0 was not prefetched: %lld of %d samples decoded", (long long)decoded,
                 nitems);
    assert_int_equal(rf_loader_set_epoch(l, 1), 0); /* drops the prefetched epoch 0 */
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == RF_OK)
        rf_batch_release(b);
    assert_int_equal(rc, RF_END_OF_EPOCH);
    char *st = tu_stats(l);
    int64_t errors = tu_stats_int(st, "errors_count"), skipped = tu_stats_int(st, "skipped");
    free(st);
    assert_int_equal(errors, nbad);
    if (skipped != errors)
        fail_msg("skipped %lld != errors_count %lld", (long long)skipped, (long long)errors);
    rf_loader_destroy(l);
}

/* ------------------------------------------------------ max_file_bytes */

enum { NSMALL = 4 };
#define HUGE_BYTES UINT64_C(734003200) /* 700 MiB, over the default 512 MiB */

static long max_rss_kib(void)
{
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss;
}

/* One epoch of batch-of-one samples, sample NSMALL being the huge one: with
 * raise it is the only error, RF_E_LIMIT, naming the reader, the sample, the
 * size and the limit; with skip the epoch is whole and the stats record it. */
static void huge_epoch(const char *src, const char *name, int64_t limit, int skip, int pread)
{
    rf_loader *l = make(src, RF_TRANSFORM_CENTER, 16, skip ? NSMALL + 1 : 1, 1);
    assert_int_equal(rf_loader_set_param(l, RF_P_SHUFFLE, 0), 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_IO_BACKEND, pread ? RF_IO_PREAD : RF_IO_AUTO), 0);
    if (limit)
        assert_int_equal(rf_loader_set_param(l, RF_P_MAX_FILE_BYTES, limit), 0);
    else
        limit = 512 << 20; /* the default */
    if (skip)
        assert_int_equal(rf_loader_set_param(l, RF_P_ON_ERROR, RF_ON_ERROR_SKIP), 0);
    tu_start(l);
    char want[160], sample[64];
    snprintf(want, sizeof want, "%s is %llu bytes, more than max_file_bytes=%lld",
             strchr(name, ':') ? "member" : "file", (unsigned long long)HUGE_BYTES,
             (long long)limit);
    snprintf(sample, sizeof sample, "%s (sample %d): ", name, NSMALL);
    int ok = 0, errors = 0, rc;
    rf_batch *b;
    while ((rc = rf_loader_next(l, &b)) != RF_END_OF_EPOCH) {
        if (rc == RF_OK) {
            for (int64_t i = 0; i < rf_batch_count(b); i++)
                assert_true(rf_batch_samples(b)[i] != NSMALL);
            ok += (int)rf_batch_count(b);
            rf_batch_release(b);
            continue;
        }
        const char *msg = rf_loader_errmsg(l);
        errors++;
        if (rc != RF_E_LIMIT || strncmp(msg, "reader: ", 8) || !strstr(msg, sample) ||
            !strstr(msg, want))
            fail_msg("error %d is not \"reader: ...%s%s\": %s", rc, sample, want, msg);
    }
    char *st = tu_stats(l);
    if (skip) {
        assert_int_equal(ok, NSMALL + 1);
        assert_int_equal(tu_stats_int(st, "errors_count"), 1);
        assert_int_equal(tu_stats_int(st, "skipped"), 1);
        if (!strstr(st, want))
            fail_msg("stats lack \"%s\": %s", want, st);
    } else {
        assert_int_equal(ok, NSMALL);
        assert_int_equal(errors, 1);
    }
    free(st);
    rf_loader_destroy(l);
}

/* The good files are JPEGs of a few KiB, the largest exactly at the limit;
 * huge.jpg (folder) and k4.jpg (tar) are holes of 700 MiB. */
static void test_max_file_bytes(void **state)
{
    (void)state;
    char dir[2200], p[2300], tar[2300];
    one_class_folder(dir, sizeof dir, "huge");
    snprintf(tar, sizeof tar, "%s/huge.tar", tmp);
    tw t;
    assert_int_equal(tw_open(&t, tar, TW_USTAR), 0);
    size_t limit = 0;
    for (int i = 0; i < NSMALL; i++) {
        size_t len;
        uint8_t *jpg = jpeg_of(i % 2 ? TU_444 : TU_420, i == 3, 0, 0, 900 + (uint32_t)i, &len);
        limit = len > limit ? len : limit;
        snprintf(p, sizeof p, "%s/x/good%d.jpg", dir, i);
        assert_int_equal(tu_write_file(p, jpg, len), 0);
        snprintf(p, sizeof p, "k%d.jpg", i);
        assert_int_equal(tw_file(&t, p, jpg, len), 0);
        snprintf(p, sizeof p, "k%d.cls", i);
        assert_int_equal(tw_file(&t, p, "1", 1), 0);
        free(jpg);
    }
    uint8_t h[512];
    tw_header(h, NULL, "k4.jpg", '0', HUGE_BYTES); /* its data: a hole */
    assert_int_equal(tw_raw(&t, h, 512), 0);
    assert_int_equal(fseek(t.f, (long)HUGE_BYTES, SEEK_CUR), 0); /* a multiple of 512 */
    t.pos += HUGE_BYTES;
    assert_int_equal(tw_file(&t, "k4.cls", "1", 1), 0);
    assert_int_equal(tw_close(&t), 0);
    snprintf(p, sizeof p, "%s/x/huge.jpg", dir);
    assert_int_equal(tu_write_file(p, "", 0), 0);
    assert_int_equal(truncate(p, (off_t)HUGE_BYTES), 0);

    long rss0 = max_rss_kib();
    char name[2400];
    for (int pread = 0; pread <= 1; pread++) {
        for (int skip = 0; skip <= 1; skip++) {
            huge_epoch(dir, p, (int64_t)limit, skip, pread);
            snprintf(name, sizeof name, "%s:k4.jpg", tar);
            huge_epoch(tar, name, (int64_t)limit, skip, pread);
        }
        huge_epoch(dir, p, 0, 0, pread); /* the default limit refuses it too */
    }
    long grew = max_rss_kib() - rss0;
    print_message("max RSS grew by %ld KiB\n", grew);
    assert_true(grew < 128 * 1024); /* nothing near the 700 MiB */
    tu_rmtree(dir);
    unlink(tar);
}

static int child_uring_many_workers(int workers, const char *path)
{
    (void)path;
    unsetenv("RINGFEED_IO");
    struct rlimit old, rl;
    CHILD_CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0, "getrlimit: %s", strerror(errno));
    /* Hard limit 1024 as well: with a higher one, liburing raises the soft
     * limit itself and retries. */
    rl.rlim_cur = rl.rlim_max = old.rlim_max < 1024 ? old.rlim_max : 1024;
    CHILD_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
    epoch_run r = {.src = valid, .backend = RF_IO_AUTO, .workers = workers};
    run_epoch(&r);
    setrlimit(RLIMIT_NOFILE, &old); /* only root may raise the hard limit again */
    CHILD_CHECK(r.rc == 0, "%d %s", r.rc, r.err);
    CHILD_CHECK(r.hash == ref_hash, "bytes differ");
    CHILD_CHECK(!strcmp(r.io, "io_uring"), "%d workers, RLIMIT_NOFILE %llu: io_backend %s (%s)",
                workers, (unsigned long long)rl.rlim_cur, r.io, r.note);
    return 0;
}

/* Regression (lib/io/reader.c, uring_setup): the io_uring file table is sized
 * 2 x read depth (depth = 16 + 4 x workers) and counts against
 * RLIMIT_NOFILE. With a hard limit of 1024 (some clusters) and 128 workers
 * (a 128-core node with num_workers = 0) the table is shrunk to fit rather
 * than io_uring given up for the single-threaded pread path. */
static void test_many_workers_keep_io_uring(void **state)
{
    (void)state;
    char io[32];
    ref_hash = reference_hash(io, sizeof io);
    if (strcmp(io, "io_uring") != 0)
        skip(); /* no io_uring here at all */
    assert_int_equal(in_child("uring_many_workers", 128, valid, 120, "128 workers"), 0);
}

/* A child started by in_child: --child NAME ARG PATH HASH. */
static int child_main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int, const char *);
    } children[] = {{"no_io_uring", child_no_io_uring},
                    {"memlock0", child_memlock0},
                    {"nofile", child_nofile},
                    {"fifo", child_fifo},
                    {"uring_many_workers", child_uring_many_workers}};
    if (argc != 6)
        return 2;
    snprintf(valid, sizeof valid, "%s", argv[4]);
    ref_hash = strtoull(argv[5], NULL, 16);
    for (size_t i = 0; i < sizeof children / sizeof children[0]; i++)
        if (!strcmp(argv[2], children[i].name))
            return children[i].fn(atoi(argv[3]), argv[4]);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--child"))
        return child_main(argc, argv);
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) {
        fprintf(stderr, "cannot find this program (/proc/self/exe): %s\n", strerror(errno));
        return 1;
    }
    self_exe[n] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_folder_indexes_files_not_dirs),
        cmocka_unit_test(test_skip_center_delivers_every_valid_picture),
        cmocka_unit_test(test_skip_none_matches_reference_decode),
        cmocka_unit_test(test_raise_names_each_bad_file),
        cmocka_unit_test(test_fifo_does_not_hang),
        cmocka_unit_test(test_io_uring_refused_falls_back_to_pread),
        cmocka_unit_test(test_memlock_zero),
        cmocka_unit_test(test_few_open_files),
        cmocka_unit_test(test_unreadable_file_eacces),
        cmocka_unit_test(test_bitflip_found_only_at_the_end),
        cmocka_unit_test(test_skipped_counts_only_delivered_batches),
        cmocka_unit_test(test_verify_modes),
        cmocka_unit_test(test_max_file_bytes),
        cmocka_unit_test(test_many_workers_keep_io_uring),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
