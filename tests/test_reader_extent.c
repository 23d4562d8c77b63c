/*
 * test_reader_extent.c - how much a read covers (lib/io/reader.c), with
 * io_uring and pread, and through the synchronous path (rf__read_sync).
 *
 * Ranged reads (tar members, records) give exactly [offset, offset +
 * length), mixed with whole-file reads and more than the depth; running
 * into the end of the file is EIO. Files and ranges over the size limit
 * (sparse files of gigabytes) fail with EFBIG before any buffer is
 * allocated, and the process stays small; one exactly at the limit is read
 * whole; the default limit (512 MiB) does the same.
 */
#define _GNU_SOURCE
#include <errno.h>
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

#include "reader.h"
#include "readerset.h"
#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

/* Ranged reads (tar members, records): exactly [offset, offset + length),
 * no stat; running into the end of the file is EIO. Mixed with whole-file
 * reads, more than the depth, and checked against rf__read_sync. */
static void check_ranged(int backend)
{
    const rs_file *f = &rs_files[9]; /* 3 MiB */
    const uint64_t L = f->len;
    static const struct {
        uint64_t off, len;
    } ok[] = {{0, 0},       {0, 1},       {4095, 2},    {65536, 65537},       {1000, 0},
              {0, 3 << 20}, {1234567, 1}, {3 << 20, 0}, {(3 << 20) - 10, 10}, {1, (3 << 20) - 1}};
    enum { NOK = sizeof ok / sizeof ok[0], N = 2 * NOK + 4 };
    rf_reader *r;
    TU_READER_OR_SKIP(r, backend, 3);
    rf_read *reqs = calloc(N, sizeof *reqs);
    assert_non_null(reqs);
    for (int i = 0; i < NOK; i++) {
        reqs[2 * i].path = f->path;
        reqs[2 * i].ranged = 1;
        reqs[2 * i].offset = ok[i].off;
        reqs[2 * i].length = ok[i].len;
        reqs[2 * i + 1].path = rs_files[i].path; /* whole files in between */
    }
    /* Past the end, from the middle and from beyond it. */
    reqs[2 * NOK] = (rf_read){.path = f->path, .ranged = 1, .offset = L - 10, .length = 20};
    reqs[2 * NOK + 1] = (rf_read){.path = f->path, .ranged = 1, .offset = L + 100, .length = 5};
    reqs[2 * NOK + 2] = (rf_read){.path = rs_missing, .ranged = 1, .offset = 0, .length = 5};
    reqs[2 * NOK + 3] = (rf_read){.path = rs_dir, .ranged = 1, .offset = 0, .length = 5};
    rs_read_all(r, reqs, N, 4);
    for (int i = 0; i < NOK; i++) {
        rf_read *q = &reqs[2 * i];
        if (q->err)
            fail_msg("range [%llu, +%llu): %s: %s", (unsigned long long)ok[i].off,
                     (unsigned long long)ok[i].len, q->what, strerror(q->err));
        assert_int_equal(q->len, ok[i].len);
        if (q->len)
            assert_memory_equal(q->buf, f->data + ok[i].off, q->len);
        rf_read *w = &reqs[2 * i + 1];
        assert_int_equal(w->err, 0);
        assert_int_equal(w->len, rs_files[i].len);
        if (w->len)
            assert_memory_equal(w->buf, rs_files[i].data, w->len);

        /* The synchronous path gives the same bytes. */
        rf_read sync;
        memset(&sync, 0, sizeof sync);
        sync.path = f->path;
        sync.ranged = 1;
        sync.offset = ok[i].off;
        sync.length = ok[i].len;
        assert_int_equal(rf__read_sync(&sync, RF__READ_MAX_BYTES), 0);
        assert_int_equal(sync.len, q->len);
        if (sync.len)
            assert_memory_equal(sync.buf, q->buf, sync.len);
        free(sync.buf);
    }
    for (int i = 2 * NOK; i < 2 * NOK + 2; i++) {
        assert_int_equal(reqs[i].err, EIO);
        assert_non_null(strstr(reqs[i].what, "read"));
    }
    assert_int_equal(reqs[2 * NOK + 2].err, ENOENT);
    assert_string_equal(reqs[2 * NOK + 2].what, "open");
    assert_int_equal(reqs[2 * NOK + 3].err, EISDIR);
    rs_free_reqs(reqs, N);
    rf__reader_destroy(r);

    /* rf__read_sync of a whole file and of failures. */
    rf_read sync;
    memset(&sync, 0, sizeof sync);
    sync.path = f->path;
    assert_int_equal(rf__read_sync(&sync, RF__READ_MAX_BYTES), 0);
    assert_int_equal(sync.len, L);
    assert_memory_equal(sync.buf, f->data, L);
    sync.path = rs_missing;
    assert_int_equal(rf__read_sync(&sync, RF__READ_MAX_BYTES), -1);
    assert_int_equal(sync.err, ENOENT);
    assert_string_equal(sync.what, "open");
    free(sync.buf);
}

TU_TEST_BOTH_BACKENDS(ranged)

/* A sparse file of size bytes (nothing written: it costs no disk). */
static void make_sparse(const char *path, uint64_t size)
{
    assert_int_equal(tu_write_file(path, "", 0), 0);
    assert_int_equal(truncate(path, (off_t)size), 0);
}

/* A refused request: EFBIG at the "size" step, its size said, no buffer. */
static void assert_refused(const rf_read *q, uint64_t size)
{
    assert_int_equal(q->err, EFBIG);
    assert_string_equal(q->what, "size");
    assert_true(q->size == size);
    assert_int_equal(q->len, 0);
    assert_null(q->buf);
    assert_int_equal(q->cap, 0);
}

/* Files and ranges over max_bytes are refused before the buffer is grown:
 * a 4 GiB sparse file leaves no buffer behind and the process stays small;
 * a file of exactly the limit is read whole. The synchronous path and the
 * default limit (512 MiB) do the same. */
static void check_size_limit(int backend)
{
    enum { LIMIT = 1 << 20 };
    const uint64_t huge = (uint64_t)4 << 30;
    char big[4096], over[4096], exact[4096], dflt[4096];
    snprintf(big, sizeof big, "%s/huge.jpg", tu_tmp);
    snprintf(over, sizeof over, "%s/over.jpg", tu_tmp);
    snprintf(exact, sizeof exact, "%s/exact.jpg", tu_tmp);
    snprintf(dflt, sizeof dflt, "%s/over-default.jpg", tu_tmp);
    make_sparse(big, huge);
    make_sparse(over, LIMIT + 1);
    make_sparse(dflt, RF__READ_MAX_BYTES + 1);
    uint8_t *data = rs_pattern(LIMIT, 77);
    assert_int_equal(tu_write_file(exact, data, LIMIT), 0);
    long rss0 = tu_max_rss_kib();

    rf_reader *r;
    TU_READER_OR_SKIP(r, backend, 2);
    rf__reader_set_max_bytes(r, LIMIT);
    enum { N = 6 };
    rf_read q[N];
    memset(q, 0, sizeof q);
    q[0].path = big;
    q[1].path = over;
    q[2].path = exact;
    q[3] = (rf_read){.path = big, .ranged = 1, .offset = 0, .length = LIMIT + 1};
    q[4] = (rf_read){.path = big, .ranged = 1, .offset = huge - LIMIT, .length = LIMIT};
    q[5].path = exact; /* after the refusals: the reader goes on */
    rs_read_all(r, q, N, 2);
    assert_refused(&q[0], huge);
    assert_refused(&q[1], LIMIT + 1);
    assert_refused(&q[3], LIMIT + 1);
    for (int i = 2; i < N; i += 3) {
        assert_int_equal(q[i].err, 0);
        assert_int_equal(q[i].len, LIMIT);
        assert_memory_equal(q[i].buf, data, LIMIT);
    }
    assert_int_equal(q[4].err, 0); /* a range of exactly the limit, at the end */
    assert_int_equal(q[4].len, LIMIT);
    for (size_t i = 0; i < LIMIT; i++)
        if (q[4].buf[i])
            fail_msg("byte %zu of a sparse range is %d", i, q[4].buf[i]);
    for (int i = 0; i < N; i++)
        free(q[i].buf);
    rf__reader_destroy(r);

    /* The default limit, without set_max_bytes. */
    rf_read d;
    memset(&d, 0, sizeof d);
    rs_read_one(backend, &d, dflt);
    assert_refused(&d, RF__READ_MAX_BYTES + 1);

    /* The synchronous path applies the limit it is given. */
    rf_read s;
    memset(&s, 0, sizeof s);
    s.path = big;
    assert_int_equal(rf__read_sync(&s, LIMIT), -1);
    assert_refused(&s, huge);
    s = (rf_read){.path = big, .ranged = 1, .offset = 1, .length = LIMIT + 1};
    assert_int_equal(rf__read_sync(&s, LIMIT), -1);
    assert_refused(&s, LIMIT + 1);
    s = (rf_read){.path = exact};
    assert_int_equal(rf__read_sync(&s, LIMIT), 0);
    assert_int_equal(s.len, LIMIT);
    assert_memory_equal(s.buf, data, LIMIT);
    free(s.buf);

    /* Nothing of the 4 GiB came to memory (the buffers above are 2 MiB). */
    long grew = tu_max_rss_kib() - rss0;
    printf("  max RSS grew by %ld KiB\n", grew);
    assert_true(grew < 64 * 1024);
    free(data);
    unlink(big);
    unlink(over);
    unlink(exact);
    unlink(dflt);
}

TU_TEST_BOTH_BACKENDS(size_limit)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uring_ranged),
        cmocka_unit_test(test_pread_ranged),
        cmocka_unit_test(test_uring_size_limit),
        cmocka_unit_test(test_pread_size_limit),
    };
    return cmocka_run_group_tests(tests, rs_setup, rs_teardown);
}
