/*
 * test_records.c - fixed-size record files (lib/source/records.c): the
 * index over several files with a header and a partial tail (ignored), and
 * through the loader every record's bytes as stored, in every element type,
 * in shuffled order, with any worker count.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "shardset.h"
#include "source.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testutil.h"

static void test_records_indexed_partial_tail_ignored(void **state)
{
    (void)state;
    char *a = tu_tmp_path("rec-a.bin"), *b = tu_tmp_path("rec-b.bin"),
         *c = tu_tmp_path("rec-c.bin");
    ss_write_records(a, 16, 12, 10, 5, 1); /* 10 records, a partial one ignored */
    ss_write_records(b, 16, 12, 0, 11, 2); /* no complete record */
    ss_write_records(c, 16, 12, 3, 0, 3);
    rf_source_opts o = {.record_size = 12, .header_size = 16};
    rf_source s;
    tu_source_open_ok(&s, a, &o);
    assert_int_equal(s.kind, RF_SOURCE_RECORDS);
    assert_int_equal(s.n, 10);
    assert_null(s.labels);
    assert_null(s.path_off);
    for (int64_t i = 0; i < s.n; i++) {
        int ranged;
        uint64_t off, len;
        rf__source_extent(&s, i, &ranged, &off, &len);
        assert_int_equal(ranged, 1);
        assert_int_equal(off, 16 + 12 * (uint64_t)i);
        assert_int_equal(len, 12);
        assert_int_equal(rf__source_label(&s, i), 0);
    }
    char name[4096], want[4096];
    rf__source_name(&s, 3, name, sizeof name);
    snprintf(want, sizeof want, "%s at offset %d", a, 16 + 36);
    assert_string_equal(name, want);
    rf__source_close(&s);

    char spec[8192];
    snprintf(spec, sizeof spec, "%s\n%s\n%s", a, b, c);
    tu_source_open_ok(&s, spec, &o);
    assert_int_equal(s.n, 13);
    assert_int_equal(s.nfiles, 3);
    for (int64_t i = 0; i < s.n; i++) {
        uint32_t f = rf__source_record_file(&s, i);
        assert_int_equal(f, i < 10 ? 0 : 2);
        assert_string_equal(rf__source_path(&s, i), i < 10 ? a : c);
        int ranged;
        uint64_t off, len;
        rf__source_extent(&s, i, &ranged, &off, &len);
        assert_int_equal(off, 16 + 12 * (uint64_t)(i < 10 ? i : i - 10));
    }
    rf__source_close(&s);

    /* A pattern of record files (record files need no .tar name). */
    snprintf(spec, sizeof spec, "%s/rec-{a,c}.bin", tu_tmp);
    tu_source_open_ok(&s, spec, &o);
    assert_int_equal(s.n, 13);
    rf__source_close(&s);
    /* Header only, header larger than the file, a folder. */
    tu_source_open_fails(b, &o, b, "no complete record", NULL);
    rf_source_opts big = {.record_size = 12, .header_size = 1 << 20};
    tu_source_open_fails(a, &big, "no complete record", NULL);
    tu_source_open_fails(tu_tmp, &o, "record", NULL);
    /* record_size 1: every byte a record */
    rf_source_opts one = {.record_size = 1};
    tu_source_open_ok(&s, c, &one);
    assert_int_equal(s.n, 16 + 36);
    rf__source_close(&s);
    free(a);
    free(b);
    free(c);
}

static void test_records_loader(void **state)
{
    (void)state;
    char *a = tu_tmp_path("tok-a.bin"), *c = tu_tmp_path("tok-c.bin");
    ss_write_records(a, 64, 24, 37, 7, 11);
    ss_write_records(c, 64, 24, 20, 0, 12);
    char spec[8192];
    snprintf(spec, sizeof spec, "%s\n%s", a, c);
    size_t alen, clen;
    uint8_t *adata = tu_read_file(a, &alen), *cdata = tu_read_file(c, &clen);
    uint64_t ref[64];
    int64_t nref = -1;
    for (int backend = RF_IO_URING; backend <= RF_IO_PREAD; backend++) {
        for (int workers = 1; workers <= 3; workers += 2) {
            rf_loader *l = ss_records_loader(spec, 24, 64, RF_DTYPE_UINT16, workers, 8);
            assert_int_equal(rf_loader_set_param(l, RF_P_IO_BACKEND, backend), 0);
            tu_start(l);
            assert_int_equal(rf_loader_num_samples(l), 57);
            assert_int_equal(rf_loader_num_batches(l), 8);
            rf_batch *b;
            int seen[57] = {0};
            while (rf_loader_next(l, &b) == RF_OK) {
                assert_int_equal(rf_batch_nbytes(b), (size_t)rf_batch_count(b) * 24);
                const uint8_t *d = rf_batch_data(b);
                for (int64_t i = 0; i < rf_batch_count(b); i++) {
                    int64_t s = rf_batch_samples(b)[i];
                    seen[s]++;
                    assert_int_equal(rf_batch_labels(b)[i], 0);
                    const uint8_t *want = s < 37 ? adata + 64 + 24 * s : cdata + 64 + 24 * (s - 37);
                    assert_memory_equal(d + 24 * i, want, 24);
                }
                rf_batch_release(b);
            }
            for (int s = 0; s < 57; s++)
                assert_int_equal(seen[s], 1);
            uint64_t h[64];
            int64_t nb = ss_batch_hashes(l, 2, 0, h, 64);
            if (nref < 0) {
                nref = nb;
                memcpy(ref, h, sizeof h);
            } else {
                assert_int_equal(nb, nref);
                assert_memory_equal(h, ref, (size_t)nb * sizeof *h);
            }
            assert_string_equal(rf_loader_sample_path(l, 40), c);
            assert_int_equal(rf_loader_sample_label(l, 40), 0);
            rf_loader_destroy(l);
        }
    }
    free(adata);
    free(cdata);

    /* Options: a record size that is not a multiple of the dtype, a transform. */
    const int64_t sizes[] = {1, 2, 4, 8};
    for (int dt = RF_DTYPE_UINT8; dt <= RF_DTYPE_INT64; dt++) {
        rf_loader *l = ss_records_loader(a, 12, 0, dt, 1, 4);
        assert_int_equal(rf_loader_start(l), 12 % sizes[dt] ? RF_E_INVALID : RF_OK);
        if (12 % sizes[dt])
            assert_non_null(strstr(rf_loader_errmsg(l), "multiple"));
        rf_loader_destroy(l);
    }
    rf_loader *l = ss_records_loader(a, 24, 0, RF_DTYPE_UINT8, 1, 4);
    assert_int_equal(rf_loader_set_param(l, RF_P_TRANSFORM, RF_TRANSFORM_CENTER), 0);
    assert_int_equal(rf_loader_start(l), RF_E_INVALID);
    assert_non_null(strstr(rf_loader_errmsg(l), "transform none"));
    rf_loader_destroy(l);
    int64_t lo, hi;
    assert_int_equal(rf_param_bounds(RF_P_DTYPE, &lo, &hi), 0);
    assert_int_equal(lo, RF_DTYPE_UINT8);
    assert_int_equal(hi, RF_DTYPE_BFLOAT16); /* the float types are for pictures */

    /* A file that shrank after indexing: a short read names the file and the offset. */
    for (int backend = RF_IO_URING; backend <= RF_IO_PREAD; backend++) {
        char *t = tu_tmp_path("shrink-%d.bin", backend);
        ss_write_records(t, 0, 100, 10, 0, 4);
        l = ss_records_loader(t, 100, 0, RF_DTYPE_UINT8, 1, 10);
        assert_int_equal(rf_loader_set_param(l, RF_P_SHUFFLE, 0), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_IO_BACKEND, backend), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_PREFETCH, 2), 0);
        tu_start(l);
        /* the first batch may already be in flight; stop it by seeking after the truncation */
        assert_int_equal(truncate(t, 950), 0);
        assert_int_equal(rf_loader_seek(l, 1, 0), 0);
        tu_next_fails(l, RF_E_IO, "%s at offset 900", t);
        rf_loader_destroy(l);
        free(t);
    }
    free(a);
    free(c);
}

int main(void)
{
    alarm(240); /* a hang fails the run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_indexed_partial_tail_ignored),
        cmocka_unit_test(test_records_loader),
    };
    return cmocka_run_group_tests(tests, tu_tmp_setup, tu_tmp_teardown);
}
