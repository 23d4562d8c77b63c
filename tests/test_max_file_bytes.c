/*
 * test_max_file_bytes.c - a sample larger than max_file_bytes, end to end
 * through the public API: a sparse 700 MiB file in an image folder and a tar
 * member whose header says 700 MiB are refused before anything is allocated
 * for them (RF_E_LIMIT naming the reader, the sample, the size and the
 * limit; or, under skip, a whole epoch with the skip recorded), with either
 * reader, at a set limit and at the default one; the process's peak memory
 * stays far below the file's size.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "faultset.h"
#include "ringfeed.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testutil.h"

/* ------------------------------------------------------ max_file_bytes */

enum { NSMALL = 4 };
#define HUGE_BYTES UINT64_C(734003200) /* 700 MiB, over the default 512 MiB */

/* One epoch of batch-of-one samples, sample NSMALL being the huge one: with
 * raise it is the only error, RF_E_LIMIT, naming the reader, the sample, the
 * size and the limit; with skip the epoch is whole and the stats record it. */
static void huge_epoch(const char *src, const char *name, int64_t limit, int skip, int pread)
{
    rf_loader *l = fs_loader(src, RF_TRANSFORM_CENTER, 16, skip ? NSMALL + 1 : 1, 1);
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
    fs_one_class_folder(dir, sizeof dir, "huge");
    snprintf(tar, sizeof tar, "%s/huge.tar", fs_tmp);
    tw t;
    assert_int_equal(tw_open(&t, tar, TW_USTAR), 0);
    size_t limit = 0;
    for (int i = 0; i < NSMALL; i++) {
        size_t len;
        uint8_t *jpg = fs_jpeg(i % 2 ? TU_444 : TU_420, i == 3, 0, 0, 900 + (uint32_t)i, &len);
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

    long rss0 = tu_max_rss_kib();
    char name[2400];
    for (int pread = 0; pread <= 1; pread++) {
        for (int skip = 0; skip <= 1; skip++) {
            huge_epoch(dir, p, (int64_t)limit, skip, pread);
            snprintf(name, sizeof name, "%s:k4.jpg", tar);
            huge_epoch(tar, name, (int64_t)limit, skip, pread);
        }
        huge_epoch(dir, p, 0, 0, pread); /* the default limit refuses it too */
    }
    long grew = tu_max_rss_kib() - rss0;
    print_message("max RSS grew by %ld KiB\n", grew);
    assert_true(grew < 128 * 1024); /* nothing near the 700 MiB */
    tu_rmtree(dir);
    unlink(tar);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_file_bytes),
    };
    return cmocka_run_group_tests(tests, fs_setup_tmp, fs_teardown);
}
