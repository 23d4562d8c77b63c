/*
 * test_buckets.c - the shapes end to end through the loader: aspect-ratio
 * buckets on a folder and a tar shard of small pictures of mixed
 * orientations (one shape per batch, as rf_batch_shape and rf_batch_bucket
 * say; every sample once per epoch; 1 and 3 workers alike; the sizes kept
 * for the second start; a resume on another world size; a bad sample's
 * substitute of the batch's bucket; a picture whose size cannot be read),
 * the letterbox's sizes, scales and padding (uint8 and float outputs),
 * native sizes, rectangles, and explain's new fields.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testutil.h"

enum { PICS = 48 };

/* Picture i's size: landscape, portrait, square or wide, by i % 4. */
static void pic_size(int i, int *w, int *h)
{
    static const int s[4][2] = {{64, 48}, {44, 66}, {52, 52}, {96, 40}};
    *w = s[i % 4][0] + (i % 3);
    *h = s[i % 4][1];
}

static uint8_t *pic_jpeg(int i, size_t *n)
{
    tu_jpeg_opts o = {.quality = 85, .subsamp = TU_420, .seed = (uint32_t)i + 1};
    pic_size(i, &o.width, &o.height);
    uint8_t *j;
    assert_int_equal(tu_make_jpeg(&o, &j, n), 0);
    return j;
}

/* root/c0/p00.jpg .. : two classes of PICS / 2 pictures. */
static void make_folder(const char *root)
{
    char path[4096];
    assert_true(strlen(root) < 2048);
    for (int i = 0; i < PICS; i++) {
        snprintf(path, sizeof path, "%s/c%d", root, i / (PICS / 2));
        assert_int_equal(tu_mkdir_p(path), 0);
        snprintf(path, sizeof path, "%s/c%d/p%02d.jpg", root, i / (PICS / 2), i);
        size_t n;
        uint8_t *j = pic_jpeg(i, &n);
        assert_int_equal(tu_write_file(path, j, n), 0);
        free(j);
    }
}

typedef struct fx {
    char *dir, folder[2048], cache[2048];
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    f->dir = tu_tempdir("buckets");
    snprintf(f->folder, sizeof f->folder, "%s/data", f->dir);
    snprintf(f->cache, sizeof f->cache, "%s/cache", f->dir);
    make_folder(f->folder);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    tu_tempdir_remove(&f->dir);
    free(f);
    return 0;
}

static rf_loader *bucketed(const fx *f, const char *src, int workers, int64_t rank, int64_t world)
{
    rf_loader *l = TU_LOADER(src, {RF_P_BATCH_SIZE, 4}, {RF_P_IMAGE_SIZE, 48},
                             {RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP}, {RF_P_FLIP, 1},
                             {RF_P_BUCKETS, 3}, {RF_P_NUM_WORKERS, workers}, {RF_P_SEED, 3},
                             {RF_P_RANK, rank}, {RF_P_WORLD_SIZE, world});
    assert_int_equal(rf_loader_set_cache_dir(l, f->cache), RF_OK);
    return l;
}

/* One epoch: every batch of one bucket, of that bucket's shape; the hash
 * of the output; hits per sample. */
static uint64_t run_epoch(rf_loader *l, int64_t epoch, int *hits)
{
    int32_t hw[2 * 8];
    int nb = rf_loader_buckets(l, hw, 8);
    assert_true(nb >= 2 && nb <= 3);
    assert_int_equal(rf_loader_set_epoch(l, epoch), RF_OK);
    uint64_t h = TU_FNV_INIT;
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == RF_OK) {
        int bk = rf_batch_bucket(b), bh, bw;
        assert_true(bk >= 0 && bk < nb);
        assert_int_equal(rf_batch_shape(b, &bh, &bw), RF_OK);
        assert_int_equal(bh, hw[2 * bk]);
        assert_int_equal(bw, hw[2 * bk + 1]);
        int64_t cnt = rf_batch_count(b);
        assert_int_equal(rf_batch_nbytes(b), (size_t)cnt * bh * bw * 3);
        const int64_t *s = rf_batch_samples(b);
        for (int64_t i = 0; i < cnt; i++) {
            assert_int_equal(rf_loader_sample_bucket(l, s[i]), bk);
            hits[s[i]]++;
        }
        assert_null(rf_batch_sizes(b)); /* a crop: no frame */
        h = tu_batch_hash(h, b);
        rf_batch_release(b);
    }
    assert_int_equal(rc, RF_END_OF_EPOCH);
    return h;
}

static void test_buckets_epoch_workers_and_kept_sizes(void **state)
{
    fx *f = *state;
    int hits[PICS] = {0};
    rf_loader *a = bucketed(f, f->folder, 1, 0, 1);
    tu_start(a);
    char *js = tu_stats(a);
    assert_int_equal(tu_stats_int(js, "scanned"), PICS); /* the first start scans */
    assert_non_null(strstr(js, "\"kept_written\": true"));
    assert_non_null(strstr(js, "\"shapes\""));
    free(js);
    uint64_t h1 = run_epoch(a, 0, hits);
    for (int i = 0; i < PICS; i++)
        assert_int_equal(hits[i], 1); /* every sample once */
    uint64_t h1b = run_epoch(a, 1, hits);
    assert_true(h1b != h1);
    rf_loader_destroy(a);
    /* 3 workers, a second start: the same batches, the sizes not scanned */
    rf_loader *b = bucketed(f, f->folder, 3, 0, 1);
    tu_start(b);
    js = tu_stats(b);
    assert_int_equal(tu_stats_int(js, "from_kept"), PICS);
    assert_int_equal(tu_stats_int(js, "scanned"), 0);
    free(js);
    memset(hits, 0, sizeof hits);
    assert_true(run_epoch(b, 0, hits) == h1);
    rf_loader_destroy(b);
    /* portrait, landscape and wide pictures are not in one bucket */
    rf_loader *c = bucketed(f, f->folder, 1, 0, 1);
    tu_start(c);
    assert_true(rf_loader_sample_bucket(c, 1) != rf_loader_sample_bucket(c, 3));
    assert_int_equal(rf_loader_sample_bucket(c, 0), rf_loader_sample_bucket(c, 4));
    rf_loader_destroy(c);
}

/* Two ranks stop after two batches; one rank takes the rest of the epoch. */
static void test_buckets_resume_other_world(void **state)
{
    fx *f = *state;
    int hits[PICS] = {0};
    int64_t consumed = -1, unit = -1;
    for (int r = 0; r < 2; r++) {
        rf_loader *l = bucketed(f, f->folder, 2, r, 2);
        tu_start(l);
        assert_int_equal(rf_loader_set_epoch(l, 4), RF_OK);
        for (int k = 0; k < 2; k++) {
            rf_batch *b;
            assert_int_equal(rf_loader_next(l, &b), RF_OK);
            const int64_t *s = rf_batch_samples(b);
            for (int64_t i = 0; i < rf_batch_count(b); i++)
                hits[s[i]]++;
            rf_batch_release(b);
        }
        int64_t start, c;
        assert_int_equal(rf_loader_tell_rest(l, &start, &c), RF_OK);
        assert_int_equal(start, 0);
        assert_true(consumed < 0 || c == consumed); /* the same on both ranks */
        consumed = c;
        unit = rf_loader_rest_unit(l);
        assert_int_equal(unit, 8); /* bucket_shared: batch_size x world_size */
        rf_loader_destroy(l);
    }
    rf_loader *one = bucketed(f, f->folder, 2, 0, 1);
    tu_start(one);
    assert_int_equal(rf_loader_seek_rest_unit(one, 4, consumed, unit, 0), RF_OK);
    assert_int_equal(rf_loader_rest_unit(one), unit);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(one, &b)) == RF_OK) {
        const int64_t *s = rf_batch_samples(b);
        for (int64_t i = 0; i < rf_batch_count(b); i++)
            hits[s[i]]++;
        rf_batch_release(b);
    }
    assert_int_equal(rc, RF_END_OF_EPOCH);
    for (int i = 0; i < PICS; i++)
        assert_true(hits[i] >= 1);
    /* out of range: refused, nothing moves */
    assert_int_equal(rf_loader_seek_rest_unit(one, 4, consumed, unit, 1000), RF_E_INVALID);
    assert_int_equal(rf_loader_seek_rest_unit(one, 4, PICS + 1, unit, 0), RF_E_INVALID);
    assert_int_equal(rf_loader_seek(one, 5, 0), RF_OK);
    assert_int_equal(rf_loader_rest_unit(one), 4); /* a whole epoch: its own unit */
    rf_loader_destroy(one);
}

/* A tar shard of the same pictures: the scan reads ranges of it, and the
 * buckets are the folder's. */
static void test_buckets_tar_shard(void **state)
{
    fx *f = *state;
    char shard[4096];
    snprintf(shard, sizeof shard, "%s/s.tar", f->dir);
    tw t;
    assert_int_equal(tw_open(&t, shard, TW_USTAR), 0);
    for (int i = 0; i < PICS; i++) {
        char name[64], cls[8];
        size_t n;
        uint8_t *j = pic_jpeg(i, &n);
        snprintf(name, sizeof name, "k%02d.jpg", i);
        assert_int_equal(tw_file(&t, name, j, n), 0);
        snprintf(name, sizeof name, "k%02d.cls", i);
        snprintf(cls, sizeof cls, "%d", i / (PICS / 2));
        assert_int_equal(tw_file(&t, name, cls, strlen(cls)), 0);
        free(j);
    }
    assert_int_equal(tw_close(&t), 0);
    rf_loader *a = bucketed(f, f->folder, 1, 0, 1), *b = bucketed(f, shard, 2, 0, 1);
    tu_start(a);
    tu_start(b);
    for (int i = 0; i < PICS; i++)
        assert_int_equal(rf_loader_sample_bucket(b, i), rf_loader_sample_bucket(a, i));
    int hits[PICS] = {0};
    run_epoch(b, 0, hits);
    for (int i = 0; i < PICS; i++)
        assert_int_equal(hits[i], 1);
    rf_loader_destroy(a);
    rf_loader_destroy(b);
}

/* A picture damaged past its header: sized by the scan, it fails when
 * decoded; under skip its substitute is of the batch's bucket. A file that
 * is no picture: its size unknown (the squarest bucket), named in the
 * stats. */
static void test_buckets_bad_samples(void **state)
{
    fx *f = *state;
    char root[2048], path[4096];
    snprintf(root, sizeof root, "%s/bad", f->dir);
    make_folder(root);
    size_t n;
    uint8_t *j = pic_jpeg(5, &n); /* portrait */
    snprintf(path, sizeof path, "%s/c0/p05.jpg", root);
    assert_int_equal(tu_write_file(path, j, n / 2), 0);
    free(j);
    snprintf(path, sizeof path, "%s/c1/p30.jpg", root);
    assert_int_equal(tu_write_file(path, "not a picture", 13), 0);
    rf_loader *l = TU_LOADER(root, {RF_P_BATCH_SIZE, 4}, {RF_P_IMAGE_SIZE, 48},
                             {RF_P_TRANSFORM, RF_TRANSFORM_CENTER}, {RF_P_BUCKETS, 3},
                             {RF_P_ON_ERROR, RF_ON_ERROR_SKIP}, {RF_P_NUM_WORKERS, 2});
    assert_int_equal(rf_loader_set_cache_dir(l, f->cache), RF_OK);
    tu_start(l);
    char *js = tu_stats(l);
    assert_int_equal(tu_stats_int(js, "unknown"), 1);
    assert_non_null(strstr(js, "p30.jpg"));
    free(js);
    int32_t hw[6];
    int nb = rf_loader_buckets(l, hw, 3);
    int square = 0;
    for (int k = 1; k < nb; k++) /* the bucket of the least log ratio */
        if (abs(hw[2 * k] - hw[2 * k + 1]) < abs(hw[2 * square] - hw[2 * square + 1]))
            square = k;
    assert_int_equal(rf_loader_sample_bucket(l, 30), square);
    assert_int_equal(rf_loader_sample_bucket(l, 5), rf_loader_sample_bucket(l, 1));
    rf_batch *b;
    int rc, replaced = 0;
    while ((rc = rf_loader_next(l, &b)) == RF_OK) {
        const int64_t *s = rf_batch_samples(b);
        for (int64_t i = 0; i < rf_batch_count(b); i++) {
            assert_true(s[i] != 5 && s[i] != 30); /* replaced */
            assert_int_equal(rf_loader_sample_bucket(l, s[i]), rf_batch_bucket(b));
        }
        replaced += rf_batch_bucket(b) == rf_loader_sample_bucket(l, 5);
        rf_batch_release(b);
    }
    assert_int_equal(rc, RF_END_OF_EPOCH);
    assert_true(replaced > 0);
    js = tu_stats(l);
    assert_int_equal(tu_stats_int(js, "errors_count"), 2);
    free(js);
    rf_loader_destroy(l);
}

/* Letterbox: each picture's size and scale, the padding the fill (uint8
 * NHWC) or its normalised value (float32 NCHW). */
static void test_letterbox_batches(void **state)
{
    fx *f = *state;
    for (int fl = 0; fl < 2; fl++) {
        rf_loader *l = TU_LOADER(f->folder, {RF_P_BATCH_SIZE, 5}, {RF_P_IMAGE_HEIGHT, 40},
                                 {RF_P_IMAGE_WIDTH, 60}, {RF_P_TRANSFORM, RF_TRANSFORM_LETTERBOX},
                                 {RF_P_FILL, 0x72FF01}, {RF_P_SHUFFLE, 0}, {RF_P_FLIP, 1},
                                 {RF_P_LAYOUT, fl ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC},
                                 {RF_P_DTYPE, fl ? RF_DTYPE_FLOAT32 : RF_DTYPE_UINT8});
        tu_start(l);
        rf_batch *b;
        int seen = 0;
        while (rf_loader_next(l, &b) == RF_OK) {
            int bh, bw;
            rf_batch_shape(b, &bh, &bw);
            assert_int_equal(bh, 40);
            assert_int_equal(bw, 60);
            const int32_t *sz = rf_batch_sizes(b);
            const float *sc = rf_batch_scales(b);
            assert_non_null(sz);
            assert_non_null(sc);
            const int64_t *s = rf_batch_samples(b);
            for (int64_t i = 0; i < rf_batch_count(b); i++, seen++) {
                int w, h;
                pic_size((int)s[i], &w, &h);
                float want = (int64_t)w * 40 <= (int64_t)60 * h ? 40.f / h : 60.f / w;
                assert_true(sc[i] == want);
                assert_true(sz[2 * i] == 40 || sz[2 * i + 1] == 60);
                int y0 = (40 - sz[2 * i]) / 2, x0 = (60 - sz[2 * i + 1]) / 2;
                for (int c = 0; c < 3; c++)
                    for (int y = 0; y < 40; y++)
                        for (int x = 0; x < 60; x++) {
                            if (y >= y0 && y < y0 + sz[2 * i] && x >= x0 && x < x0 + sz[2 * i + 1])
                                continue;
                            static const uint8_t fill[3] = {0x72, 0xFF, 0x01};
                            if (fl) {
                                const float *px =
                                    (const float *)rf_batch_data(b) + (size_t)i * 3 * 40 * 60;
                                float v = px[(size_t)c * 2400 + (size_t)y * 60 + x];
                                assert_true(v == (float)fill[c] / 255.0f);
                            } else {
                                const uint8_t *px =
                                    (const uint8_t *)rf_batch_data(b) + (size_t)i * 3 * 40 * 60;
                                assert_int_equal(px[((size_t)y * 60 + x) * 3 + c], fill[c]);
                            }
                        }
            }
            rf_batch_release(b);
        }
        assert_int_equal(seen, PICS);
        rf_loader_destroy(l);
    }
}

static void test_native_rect_and_explain(void **state)
{
    fx *f = *state;
    /* native: each picture in a 56 x 56 frame, shrunk only when larger */
    rf_loader *l = TU_LOADER(f->folder, {RF_P_BATCH_SIZE, 8}, {RF_P_TRANSFORM, RF_TRANSFORM_NONE},
                             {RF_P_MAX_SIDE, 56}, {RF_P_SHUFFLE, 0});
    tu_start(l);
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    int bh, bw;
    rf_batch_shape(b, &bh, &bw);
    assert_int_equal(bh, 56);
    assert_int_equal(bw, 56);
    const int32_t *sz = rf_batch_sizes(b);
    for (int64_t i = 0; i < rf_batch_count(b); i++) {
        int w, h;
        pic_size((int)i, &w, &h);
        int m = w > h ? w : h;
        if (m <= 56) {
            assert_int_equal(sz[2 * i], h);
            assert_int_equal(sz[2 * i + 1], w);
            assert_true(rf_batch_scales(b)[i] == 1.0f);
        } else {
            assert_int_equal(w > h ? sz[2 * i + 1] : sz[2 * i], 56);
        }
    }
    rf_batch_release(b);
    rf_loader_destroy(l);
    /* a rectangle, and what explain says of a letterbox and of buckets */
    l = TU_LOADER(f->folder, {RF_P_BATCH_SIZE, 8}, {RF_P_IMAGE_HEIGHT, 24}, {RF_P_IMAGE_WIDTH, 40},
                  {RF_P_TRANSFORM, RF_TRANSFORM_CENTER});
    tu_start(l);
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    rf_batch_shape(b, &bh, &bw);
    assert_true(bh == 24 && bw == 40 && rf_batch_nbytes(b) == 8 * 24 * 40 * 3);
    assert_int_equal(rf_batch_bucket(b), -1);
    rf_batch_release(b);
    char js[4096];
    assert_true(rf_loader_explain(l, 0, 1, js, sizeof js) > 0);
    assert_non_null(strstr(js, "\"output\": [24, 40]"));
    /* 45 x 66: the short side to round(40 / 0.875) = 46, the long int(46 * 66 / 45) */
    assert_non_null(strstr(js, "\"resize\": [67, 46]"));
    rf_loader_destroy(l);
    l = TU_LOADER(f->folder, {RF_P_IMAGE_SIZE, 64}, {RF_P_TRANSFORM, RF_TRANSFORM_LETTERBOX},
                  {RF_P_ALIGN, RF_ALIGN_TOP_LEFT});
    tu_start(l);
    assert_true(rf_loader_explain(l, 0, 1, js, sizeof js) > 0);
    /* 45 x 66 into 64 x 64: round(45 * 64 / 66 = 43.6) */
    assert_non_null(strstr(js, "\"fit\": {\"top\": 0, \"left\": 0, \"height\": 64, \"width\": 44"));
    rf_loader_destroy(l);
    l = bucketed(f, f->folder, 1, 0, 1);
    tu_start(l);
    assert_true(rf_loader_explain(l, 0, 3, js, sizeof js) > 0);
    char want[64];
    snprintf(want, sizeof want, "\"bucket\": %d", rf_loader_sample_bucket(l, 3));
    assert_non_null(strstr(js, want));
    rf_loader_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buckets_epoch_workers_and_kept_sizes),
        cmocka_unit_test(test_buckets_resume_other_world),
        cmocka_unit_test(test_buckets_tar_shard),
        cmocka_unit_test(test_buckets_bad_samples),
        cmocka_unit_test(test_letterbox_batches),
        cmocka_unit_test(test_native_rect_and_explain),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
