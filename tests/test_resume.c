/*
 * test_resume.c - end to end through the public API: a run stopped
 * mid-epoch on 4 ranks and resumed on 2 (rf_loader_tell_rest,
 * rf_loader_seek_rest, rf_loader_epoch_batches), the shard-aware shuffle
 * (RF_P_SHUFFLE_BLOCK) on a real source, and rf_loader_fingerprint.
 *
 * The source is record files (each file a shard): record i holds its own
 * global index as 8 little-endian bytes, so a batch's data must repeat its
 * rf_batch_samples, and they cost nothing to decode (valgrind runs this).
 * Ranks are loaders in one process, advanced in lockstep as DDP ranks are.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

enum { NFILES = 5, NSAMPLES = 25, BS = 2 };
static const int file_records[NFILES] = {5, 7, 3, 6, 4};

/* Writes the record files into dir; extra adds records to the last file.
 * spec gets the '\n'-separated list. */
static void write_records(const char *dir, int extra, char *spec, size_t cap)
{
    int64_t next = 0;
    spec[0] = '\0';
    for (int f = 0; f < NFILES; f++) {
        int n = file_records[f] + (f == NFILES - 1 ? extra : 0);
        uint8_t buf[64 * 8];
        for (int r = 0; r < n; r++, next++)
            for (int k = 0; k < 8; k++)
                buf[r * 8 + k] = (uint8_t)((uint64_t)next >> (8 * k));
        char path[512];
        snprintf(path, sizeof path, "%s/part-%d.bin", dir, f);
        assert_int_equal(tu_write_file(path, buf, (size_t)n * 8), 0);
        size_t len = strlen(spec);
        snprintf(spec + len, cap - len, "%s%s", len ? "\n" : "", path);
    }
}

static rf_loader *rank_loader(const char *spec, int64_t rank, int64_t world, int64_t block,
                              int trim, int workers)
{
    rf_loader *l = TU_LOADER(spec, {RF_P_RECORD_SIZE, 8}, {RF_P_TRANSFORM, RF_TRANSFORM_NONE},
                             {RF_P_BATCH_SIZE, BS}, {RF_P_SEED, 31}, {RF_P_RANK, rank},
                             {RF_P_WORLD_SIZE, world}, {RF_P_SHUFFLE_BLOCK, block},
                             {RF_P_SAMPLER_DROP_LAST, trim}, {RF_P_NUM_WORKERS, workers});
    tu_start(l);
    return l;
}

/* Takes one batch, counts its samples in hits and checks its data. */
static int take_batch(rf_loader *l, int64_t *hits)
{
    rf_batch *b;
    int rc = rf_loader_next(l, &b);
    if (rc == RF_END_OF_EPOCH)
        return 0;
    if (rc != RF_OK)
        fail_msg("next: %d %s", rc, rf_loader_errmsg(l));
    const int64_t *idx = rf_batch_samples(b);
    const uint8_t *data = rf_batch_data(b);
    for (int64_t j = 0; j < rf_batch_count(b); j++) {
        int64_t v = 0;
        for (int k = 0; k < 8; k++)
            v |= (int64_t)data[j * 8 + k] << (8 * k);
        assert_int_equal(v, idx[j]);
        assert_true(idx[j] >= 0 && idx[j] < NSAMPLES);
        hits[idx[j]]++;
    }
    rf_batch_release(b);
    return 1;
}

/* The must-show: 4 ranks take 2 batches each of epoch 1, then 2 ranks take
 * the rest: every sample of the epoch once over both runs, but for the
 * padding (one repeat at most with 2 ranks) or, trimmed, one left out. */
static void stop_at_4_resume_at_2(const char *spec, int64_t block, int trim)
{
    int64_t hits[NSAMPLES] = {0}, consumed = -1;
    for (int64_t r = 0; r < 4; r++) {
        rf_loader *l = rank_loader(spec, r, 4, block, trim, 1);
        assert_int_equal(rf_loader_set_epoch(l, 1), RF_OK);
        for (int k = 0; k < 2; k++)
            assert_true(take_batch(l, hits));
        int64_t e, b, start, c;
        assert_int_equal(rf_loader_tell(l, &e, &b), RF_OK);
        assert_int_equal(rf_loader_tell_rest(l, &start, &c), RF_OK);
        assert_int_equal(e, 1);
        assert_int_equal(b, 2);
        assert_int_equal(start, 0);
        assert_int_equal(c, 4 * 2 * BS);
        assert_true(consumed < 0 || consumed == c);
        consumed = c;
        rf_loader_destroy(l);
    }
    int64_t rest = NSAMPLES - consumed;
    int64_t per = trim ? rest / 2 : (rest + 1) / 2;
    for (int64_t r = 0; r < 2; r++) {
        rf_loader *l = rank_loader(spec, r, 2, block, trim, 2);
        assert_int_equal(rf_loader_seek_rest(l, 1, consumed, 0), RF_OK);
        assert_int_equal(rf_loader_epoch_batches(l), (per + BS - 1) / BS);
        int64_t start;
        assert_int_equal(rf_loader_tell_rest(l, &start, NULL), RF_OK);
        assert_int_equal(start, consumed);
        int64_t got = 0;
        while (take_batch(l, hits))
            got++;
        assert_int_equal(got, (per + BS - 1) / BS);
        int64_t c;
        assert_int_equal(rf_loader_tell_rest(l, NULL, &c), RF_OK);
        assert_int_equal(c, NSAMPLES); /* the epoch is over */
        /* the next epoch is a whole 2-rank epoch */
        assert_int_equal(rf_loader_set_epoch(l, 2), RF_OK);
        assert_int_equal(rf_loader_epoch_batches(l), rf_loader_num_batches(l));
        int64_t whole = trim ? NSAMPLES / 2 : (NSAMPLES + 1) / 2;
        assert_int_equal(rf_loader_num_batches(l), (whole + BS - 1) / BS);
        rf_loader_destroy(l);
    }
    int64_t extra = 0, missing = 0;
    for (int i = 0; i < NSAMPLES; i++) {
        extra += hits[i] > 1 ? hits[i] - 1 : 0;
        missing += hits[i] == 0;
    }
    assert_int_equal(extra, trim ? 0 : 2 * per - rest);
    assert_int_equal(missing, trim ? rest - 2 * per : 0);
}

static void test_stop_at_4_resume_at_2(void **state)
{
    (void)state;
    char *dir = tu_tempdir("resume");
    char spec[4096];
    write_records(dir, 0, spec, sizeof spec);
    for (int64_t block = 0; block <= 2; block += 2)
        for (int trim = 0; trim < 2; trim++)
            stop_at_4_resume_at_2(spec, block, trim);
    tu_tempdir_remove(&dir);
}

static uint64_t epoch_hash(const char *spec, int64_t block, int workers, int64_t epoch)
{
    rf_loader *l = rank_loader(spec, 1, 3, block, 0, workers);
    uint64_t h = tu_epoch_hash(l, epoch, 0);
    rf_loader_destroy(l);
    return h;
}

/* Shard blocks on a real source: the same batches for 1 and 3 workers, and
 * another order than the global shuffle's. */
static void test_blocks_deterministic(void **state)
{
    (void)state;
    char *dir = tu_tempdir("resume");
    char spec[4096];
    write_records(dir, 0, spec, sizeof spec);
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        uint64_t a = epoch_hash(spec, 2, 1, epoch);
        assert_int_equal(a, epoch_hash(spec, 2, 3, epoch));
        assert_int_not_equal(a, epoch_hash(spec, 0, 1, epoch));
    }
    tu_tempdir_remove(&dir);
}

static uint64_t fingerprint_of(const char *spec)
{
    rf_loader *l = rank_loader(spec, 0, 1, 0, 0, 1);
    uint64_t f = rf_loader_fingerprint(l);
    rf_loader_destroy(l);
    return f;
}

/* The same files elsewhere keep the fingerprint; a file with one record
 * more changes it. */
static void test_fingerprint(void **state)
{
    (void)state;
    char *a = tu_tempdir("resume"), *b = tu_tempdir("resume");
    char spec_a[4096], spec_b[4096];
    write_records(a, 0, spec_a, sizeof spec_a);
    write_records(b, 0, spec_b, sizeof spec_b);
    uint64_t fa = fingerprint_of(spec_a);
    assert_int_not_equal(fa, 0);
    assert_int_equal(fa, fingerprint_of(spec_b));
    write_records(b, 1, spec_b, sizeof spec_b);
    assert_int_not_equal(fa, fingerprint_of(spec_b));
    rf_loader *l = rf_loader_create(spec_a);
    assert_int_equal(rf_loader_fingerprint(l), 0); /* not started */
    rf_loader_destroy(l);
    tu_tempdir_remove(&a);
    tu_tempdir_remove(&b);
}

/* A list file has no shards: shuffle_block is refused at start, saying so. */
static void test_blocks_need_shards(void **state)
{
    (void)state;
    char *dir = tu_tempdir("resume");
    char list[512];
    snprintf(list, sizeof list, "%s/train.txt", dir);
    const char text[] = "a.jpg\t0\nb.jpg\t1\n";
    assert_int_equal(tu_write_file(list, text, sizeof text - 1), 0);
    rf_loader *l = TU_LOADER(list, {RF_P_SHUFFLE_BLOCK, 4});
    assert_int_equal(rf_loader_start(l), RF_E_INVALID);
    const char *msg = rf_loader_errmsg(l);
    printf("  %s\n", msg);
    assert_non_null(strstr(msg, "shuffle_block=4"));
    assert_non_null(strstr(msg, "a list file"));
    rf_loader_destroy(l);
    tu_tempdir_remove(&dir);
}

/* Out-of-range positions are refused and move nothing. */
static void test_seek_rest_bounds(void **state)
{
    (void)state;
    char *dir = tu_tempdir("resume");
    char spec[4096];
    write_records(dir, 0, spec, sizeof spec);
    rf_loader *l = rank_loader(spec, 0, 2, 0, 0, 1);
    assert_int_equal(rf_loader_seek_rest(l, 0, NSAMPLES + 1, 0), RF_E_INVALID);
    assert_int_equal(rf_loader_seek_rest(l, 0, -1, 0), RF_E_INVALID);
    assert_int_equal(rf_loader_seek_rest(l, -1, 0, 0), RF_E_INVALID);
    /* 5 left over 2 ranks: 3 samples, 2 batches each; batch 2 is the end */
    assert_int_equal(rf_loader_seek_rest(l, 0, 20, 3), RF_E_INVALID);
    assert_non_null(strstr(rf_loader_errmsg(l), "in this rest of the epoch"));
    int64_t e, b, start;
    assert_int_equal(rf_loader_tell(l, &e, &b), RF_OK);
    assert_int_equal(rf_loader_tell_rest(l, &start, NULL), RF_OK);
    assert_true(e == 0 && b == 0 && start == 0);
    assert_int_equal(rf_loader_seek_rest(l, 0, 20, 2), RF_OK);
    rf_batch *bt;
    assert_int_equal(rf_loader_next(l, &bt), RF_END_OF_EPOCH);
    assert_int_equal(rf_loader_seek_rest(l, 0, NSAMPLES, 0), RF_OK); /* nothing left */
    assert_int_equal(rf_loader_epoch_batches(l), 0);
    assert_int_equal(rf_loader_next(l, &bt), RF_END_OF_EPOCH);
    rf_loader_destroy(l);
    assert_int_equal(rf_loader_epoch_batches(NULL), 0);
    assert_int_equal(rf_loader_tell_rest(NULL, NULL, NULL), RF_E_INVALID);
    tu_tempdir_remove(&dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_at_4_resume_at_2), cmocka_unit_test(test_blocks_deterministic),
        cmocka_unit_test(test_fingerprint),           cmocka_unit_test(test_blocks_need_shards),
        cmocka_unit_test(test_seek_rest_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
