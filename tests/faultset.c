/*
 * faultset.c - the fault tests' data set (faultset.h): valid JPEGs of every
 * kind beside hostile files, in an image folder, and the helpers the four
 * fault tests share.
 */
#define _GNU_SOURCE
#include "faultset.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "testcheck.h"
#include "testutil.h"

char *fs_tmp;
char fs_mixed[2048];
char fs_valid[2048];
fs_item fs_items[32];
int fs_nitems, fs_nvalid, fs_nbad;

/* ---------------------------------------------------------------- making */

/* Full-size reference RGB of a valid file (RGB-family or CMYK). */
uint8_t *fs_reference(const fs_item *it)
{
    uint8_t *rgb;
    int w, h;
    if (tu_decode_jpeg(it->data, it->len, &rgb, &w, &h) != 0 &&
        tu_decode_cmyk(it->data, it->len, &rgb, &w, &h) != 0)
        fail_msg("no reference decode of %s", it->rel);
    assert_int_equal(w, FS_SIDE);
    assert_int_equal(h, FS_SIDE);
    return rgb;
}

uint8_t *fs_jpeg(int subsamp, int prog, int rst, int arith, uint32_t seed, size_t *len)
{
    tu_jpeg_opts o = {FS_SIDE, FS_SIDE, 88, subsamp, prog, rst, arith, seed, 0, 0};
    uint8_t *out;
    assert_int_equal(tu_make_jpeg(&o, &out, len), 0);
    return out;
}

static void add_item(const char *rel, int bad, const char *why, uint8_t *data, size_t len)
{
    assert_true(fs_nitems < (int)(sizeof fs_items / sizeof fs_items[0]));
    fs_items[fs_nitems++] = (fs_item){rel, bad, why, data, len};
    if (bad)
        fs_nbad++;
    else
        fs_nvalid++;
}

uint8_t *fs_dup(const uint8_t *p, size_t n)
{
    uint8_t *q = malloc(n ? n : 1);
    assert_non_null(q);
    memcpy(q, p, n);
    return q;
}

static void mkdirs(const char *root)
{
    static const char *const cls[FS_NCLASS] = {"a", "b", "c"};
    char p[2100];
    assert_int_equal(mkdir(root, 0755), 0);
    for (int c = 0; c < FS_NCLASS; c++) {
        snprintf(p, sizeof p, "%s/%s", root, cls[c]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
}

int fs_setup_tmp(void **state)
{
    (void)state;
    fs_tmp = tu_tempdir("faults");
    if (fs_tmp && strlen(fs_tmp) > 1900) {
        free(fs_tmp);
        fs_tmp = NULL;
    }
    return fs_tmp ? 0 : -1;
}

int fs_setup(void **state)
{
    if (fs_setup_tmp(state) != 0)
        return -1;
    snprintf(fs_mixed, sizeof fs_mixed, "%s/mixed", fs_tmp);
    snprintf(fs_valid, sizeof fs_valid, "%s/valid", fs_tmp);
    size_t len;
    uint8_t *j;

    /* Valid pictures; names interleave with the bad ones in each class.
     * Picture k's content is seed k + 1. */
    static const struct {
        const char *rel;
        int subsamp, prog, rst, arith; /* as tu_jpeg_opts */
    } good[] = {
        {"a/a01_base420.jpg", TU_420, 0, 0, 0}, {"a/a03_base422.jpg", TU_422, 0, 0, 0},
        {"a/a05_base444.jpg", TU_444, 0, 0, 0}, {"a/a07_gray.jpg", TU_GRAY, 0, 0, 0},
        {"b/b01_prog420.jpg", TU_420, 1, 0, 0}, {"b/b03_prog444.jpg", TU_444, 1, 0, 0},
        {"b/b05_restart.jpg", TU_420, 0, 1, 0}, {"b/b07_restart422.jpg", TU_422, 0, 2, 0},
        {"c/c01_arith.jpg", TU_420, 0, 0, 1},   {"c/c03_arithprog.jpg", TU_444, 1, 0, 1},
    };
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        j = fs_jpeg(good[k].subsamp, good[k].prog, good[k].rst, good[k].arith, (uint32_t)k + 1,
                    &len);
        add_item(good[k].rel, 0, NULL, j, len);
    }
    assert_int_equal(tu_encode_cmyk(FS_SIDE, FS_SIDE, 0, 11, 90, &j, &len), 0);
    add_item("c/c05_cmyk.jpg", 0, NULL, j, len);
    assert_int_equal(tu_encode_cmyk(FS_SIDE, FS_SIDE, 1, 12, 90, &j, &len), 0);
    add_item("c/c07_ycck.jpg", 0, NULL, j, len);
    /* Inside a directory named like an image: a sample, as ImageFolder walks
     * class folders recursively (the directory itself is not one). */
    j = fs_jpeg(TU_420, 0, 0, 0, 13, &len);
    add_item("c/c08_dir.jpg/inner.jpg", 0, NULL, j, len);

    /* Bad files. */
    uint8_t *base = fs_jpeg(TU_420, 0, 0, 0, 21, &len);
    add_item("a/a02_truncated.jpg", 1, "Premature end", fs_dup(base, len / 2), len / 2);
    /* Bit flips in the entropy-coded data that libjpeg does notice (some
     * flips decode silently to other pixels: nothing can tell those apart). */
    uint8_t *f = NULL;
    size_t sos = tu_jpeg_sos_offset(base, len);
    assert_true(sos > 0);
    uint64_t rs = 0x9e3779b97f4a7c15ULL;
    for (int tries = 0; tries < 1000; tries++) {
        free(f);
        f = fs_dup(base, len);
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
    add_item("a/a06_empty.jpg", 1, "empty file", fs_dup(base, 0), 0);
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
    add_item("b/b04_png.jpg", 1, "PNG", fs_dup(png, sizeof png), sizeof png);
    uint8_t *huge = fs_dup(base, len);
    size_t sof = tu_jpeg_sof_offset(huge, len);
    assert_true(sof > 0);
    huge[sof + 1] = 60000 >> 8, huge[sof + 2] = 60000 & 255; /* height */
    huge[sof + 3] = 60000 >> 8, huge[sof + 4] = 60000 & 255; /* width */
    add_item("c/c02_huge.jpg", 1, "60000x60000", huge, len);
    uint8_t *prog = fs_jpeg(TU_420, 1, 0, 0, 22, &len);
    add_item("c/c04_truncated_prog.jpg", 1, "Premature end", fs_dup(prog, len * 2 / 3),
             len * 2 / 3);
    free(prog);
    add_item("c/c06_fifo.jpg", 1, "not a regular file", NULL, 0);
    free(base);

    mkdirs(fs_mixed);
    mkdirs(fs_valid);
    char p[2200];
    snprintf(p, sizeof p, "%s/c/c08_dir.jpg", fs_mixed);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/c/c08_dir.jpg", fs_valid);
    assert_int_equal(mkdir(p, 0755), 0);
    for (int i = 0; i < fs_nitems; i++) {
        snprintf(p, sizeof p, "%s/%s", fs_mixed, fs_items[i].rel);
        if (!fs_items[i].data)
            assert_int_equal(mkfifo(p, 0644), 0);
        else
            assert_int_equal(tu_write_file(p, fs_items[i].data, fs_items[i].len), 0);
        if (!fs_items[i].bad) {
            snprintf(p, sizeof p, "%s/%s", fs_valid, fs_items[i].rel);
            assert_int_equal(tu_write_file(p, fs_items[i].data, fs_items[i].len), 0);
        }
    }
    /* A file that is not an image: ImageFolder skips it. */
    snprintf(p, sizeof p, "%s/a/notes.txt", fs_mixed);
    assert_int_equal(tu_write_file(p, "x", 1), 0);
    return 0;
}

int fs_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < fs_nitems; i++)
        free(fs_items[i].data);
    tu_rmtree(fs_tmp);
    free(fs_tmp);
    return 0;
}

/* tmp/name/x, an empty folder of one class: its root is written to dir. */
void fs_one_class_folder(char *dir, size_t cap, const char *name)
{
    char p[4300];
    snprintf(dir, cap, "%s/%s", fs_tmp, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(p, sizeof p, "%s/x", dir);
    assert_int_equal(mkdir(p, 0755), 0);
}

rf_loader *fs_loader(const char *src, int transform, int size, int batch, int workers)
{
    return TU_LOADER(src, {RF_P_TRANSFORM, transform}, {RF_P_IMAGE_SIZE, size},
                     {RF_P_BATCH_SIZE, batch}, {RF_P_NUM_WORKERS, workers}, {RF_P_SEED, 77});
}

/* The item a delivered sample is, found by the path relative to its root. */
const fs_item *fs_item_of(const rf_loader *l, const char *root, int64_t sample)
{
    const char *p = rf_loader_sample_path(l, sample);
    assert_non_null(p);
    size_t n = strlen(root);
    if (strncmp(p, root, n) != 0 || p[n] != '/')
        fail_msg("sample %lld path %s is not under %s", (long long)sample, p, root);
    for (int i = 0; i < fs_nitems; i++)
        if (!strcmp(p + n + 1, fs_items[i].rel))
            return &fs_items[i];
    fail_msg("sample %lld path %s is none of the test's files", (long long)sample, p);
    return NULL;
}

int fs_label_of(const fs_item *it)
{
    return it->rel[0] - 'a';
}
