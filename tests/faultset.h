/*
 * faultset.h - the data set of the fault tests (test_faults.c,
 * test_faults_env.c, test_verify.c, test_max_file_bytes.c).
 *
 * fs_setup writes, into a temporary folder, one image folder (fs_mixed)
 * that mixes valid JPEGs of every kind the decoder must get right (baseline
 * 4:2:0/4:2:2/4:4:4/gray, progressive, restart markers, arithmetic coding,
 * CMYK and YCCK, a picture inside a directory named like an image) with
 * truncated, bit-flipped, empty, random-byte, PNG-named-.jpg and
 * huge-dimension files and a FIFO named like an image; and the same valid
 * files alone, same names (fs_valid). fs_items describes each file: its
 * bytes, whether it must fail and a substring of the reason. fs_setup_tmp
 * makes the temporary folder alone. Both are cmocka group set-ups, undone by
 * fs_teardown.
 */
#ifndef RF_FAULTSET_H
#define RF_FAULTSET_H

#include <stddef.h>
#include <stdint.h>

#include "ringfeed.h"

#define FS_SIDE 45 /* every valid picture: odd, not a multiple of an MCU */
#define FS_NCLASS 3

typedef struct fs_item {
    const char *rel; /* class/name.jpg */
    int bad;         /* 1: must fail */
    const char *why; /* bad: a substring of the expected reason ("" = any) */
    uint8_t *data;   /* file bytes (NULL for the FIFO) */
    size_t len;
} fs_item;

extern char *fs_tmp;        /* the test's temporary folder */
extern char fs_mixed[2048]; /* fs_tmp/mixed: valid + bad */
extern char fs_valid[2048]; /* fs_tmp/valid: the valid files alone, same names */
extern fs_item fs_items[32];
extern int fs_nitems, fs_nvalid, fs_nbad;

int fs_setup_tmp(void **state);
int fs_setup(void **state);
int fs_teardown(void **state);

/* Full-size reference RGB of a valid file (RGB-family or CMYK). */
uint8_t *fs_reference(const fs_item *it);
/* A FS_SIDE x FS_SIDE JPEG (tu_jpeg_opts' fields). */
uint8_t *fs_jpeg(int subsamp, int prog, int rst, int arith, uint32_t seed, size_t *len);
/* A malloc'd copy of p[0..n). */
uint8_t *fs_dup(const uint8_t *p, size_t n);
/* fs_tmp/name/x, an empty folder of one class: its root is written to dir. */
void fs_one_class_folder(char *dir, size_t cap, const char *name);
/* A loader with these options and seed 77 (not started). */
rf_loader *fs_loader(const char *src, int transform, int size, int batch, int workers);
/* The item a delivered sample is, found by its path relative to root. */
const fs_item *fs_item_of(const rf_loader *l, const char *root, int64_t sample);
/* Its class: a, b, c -> 0, 1, 2. */
int fs_label_of(const fs_item *it);

#endif
