/*
 * test_reader_range.c - ranged reads (lib/io/reader.c): exactly the bytes
 * [offset, offset + length) of a file, as tar members and records are read,
 * with io_uring (no statx: the length is known) and with pread.
 *
 * Ranges sit on the edges (empty, first byte, across page and 64 KiB
 * boundaries, the last byte) and at random places, mixed with whole-file
 * reads on the same requests (buffers reused both ways), with fewer reads
 * in flight than requests. Every byte is compared with the file and the two
 * backends with each other. A range past the end of the file fails with EIO
 * and says so; a missing file fails at "open". The io_uring part skips
 * cleanly where io_uring is refused.
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
#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

#define FILE_LEN ((size_t)(1 << 20) + 333)

static char *g_tmp;
static char g_file[4096], g_small[4096], g_dir[4096], g_missing[4096];
static uint8_t *g_data;

static int setup(void **state)
{
    (void)state;
    if (!(g_tmp = tu_tempdir("range")))
        return -1;
    g_data = malloc(FILE_LEN);
    if (!g_data)
        return -1;
    uint32_t s = 12345;
    for (size_t i = 0; i < FILE_LEN; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        g_data[i] = (uint8_t)(s >> 24);
    }
    snprintf(g_file, sizeof g_file, "%s/data.bin", g_tmp);
    snprintf(g_small, sizeof g_small, "%s/small.bin", g_tmp);
    snprintf(g_dir, sizeof g_dir, "%s/folder.tar", g_tmp);
    snprintf(g_missing, sizeof g_missing, "%s/missing.tar", g_tmp);
    if (tu_write_file(g_file, g_data, FILE_LEN) != 0 || tu_write_file(g_small, g_data, 100) != 0 ||
        mkdir(g_dir, 0755) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(g_data);
    tu_tempdir_remove(&g_tmp);
    return 0;
}

/* Submits all, reaping as the depth requires; every request back once. */
static void read_all(rf_reader *r, rf_read *reqs, int n)
{
    rf_read *out[8];
    int next = 0, finished = 0;
    while (finished < n) {
        while (next < n && rf__reader_submit(r, &reqs[next]) == 0)
            next++;
        int got = rf__reader_reap(r, out, 8, -1);
        assert_true(got >= 1);
        finished += got;
    }
    assert_int_equal(rf__reader_inflight(r), 0);
}

/* Request i: a range (most) or the whole file (every 7th). */
static void plan(rf_read *q, int i, uint32_t *rng)
{
    static const struct {
        uint64_t off, len;
    } edges[] = {{0, 0},
                 {0, 1},
                 {4095, 2},
                 {4096, 4096},
                 {65535, 65538},
                 {0, FILE_LEN},
                 {FILE_LEN - 1, 1},
                 {FILE_LEN, 0},
                 {123, 300000},
                 {FILE_LEN - 10, 10}};
    enum { NE = sizeof edges / sizeof edges[0] };
    q->path = g_file;
    q->sample = i;
    if (i % 7 == 6) {
        q->ranged = 0;
        return;
    }
    q->ranged = 1;
    if (i < NE) {
        q->offset = edges[i].off;
        q->length = edges[i].len;
        return;
    }
    *rng = *rng * 1664525u + 1013904223u;
    q->offset = *rng % FILE_LEN;
    *rng = *rng * 1664525u + 1013904223u;
    uint64_t room = FILE_LEN - q->offset;
    q->length = (*rng >> 8) % (room < 200000 ? room + 1 : 200000);
}

static void check_ranges(int backend)
{
    rf_reader *r;
    TU_READER_OR_SKIP(r, backend, 5);
    enum { N = 120 };
    rf_read *reqs = calloc(N, sizeof *reqs);
    assert_non_null(reqs);
    uint32_t rng = 7;
    for (int round = 0; round < 2; round++) { /* round 2 reuses the buffers, other plans */
        for (int i = 0; i < N; i++)
            plan(&reqs[i], (i + round * 3) % N, &rng);
        read_all(r, reqs, N);
        for (int i = 0; i < N; i++) {
            rf_read *q = &reqs[i];
            if (q->err)
                fail_msg("request %d (%llu+%llu): %s: %s", i, (unsigned long long)q->offset,
                         (unsigned long long)q->length, q->what, strerror(q->err));
            size_t off = q->ranged ? (size_t)q->offset : 0;
            size_t len = q->ranged ? (size_t)q->length : FILE_LEN;
            assert_int_equal(q->len, len);
            if (len)
                assert_memory_equal(q->buf, g_data + off, len);
        }
    }
    for (int i = 0; i < N; i++)
        free(reqs[i].buf);
    free(reqs);
    rf__reader_destroy(r);
}

TU_TEST_BOTH_BACKENDS(ranges)

static void check_range_errors(int backend)
{
    rf_reader *r;
    TU_READER_OR_SKIP(r, backend, 4);
    enum { N = 7 };
    rf_read q[N];
    memset(q, 0, sizeof q);
    q[0] = (rf_read){.path = g_small, .ranged = 1, .offset = 90, .length = 11}; /* one past */
    q[1] = (rf_read){.path = g_small, .ranged = 1, .offset = 200, .length = 1}; /* beyond */
    q[2] = (rf_read){.path = g_missing, .ranged = 1, .offset = 0, .length = 10};
    q[3] = (rf_read){.path = g_dir, .ranged = 1, .offset = 0, .length = 10};
    q[4] = (rf_read){.path = g_small, .ranged = 1, .offset = 90, .length = 10}; /* fits */
    q[5] = (rf_read){.path = g_small, .ranged = 1, .offset = 100, .length = 0}; /* empty, at end */
    q[6] = (rf_read){.path = g_small, .ranged = 0};
    read_all(r, q, N);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(q[i].err, EIO);
        if (!strstr(q[i].what, "end of file"))
            fail_msg("request %d: what = \"%s\"", i, q[i].what);
    }
    assert_int_equal(q[2].err, ENOENT);
    assert_string_equal(q[2].what, "open");
    assert_int_equal(q[3].err, EISDIR);
    assert_int_equal(q[4].err, 0);
    assert_int_equal(q[4].len, 10);
    assert_memory_equal(q[4].buf, g_data + 90, 10);
    assert_int_equal(q[5].err, 0);
    assert_int_equal(q[5].len, 0);
    assert_int_equal(q[6].err, 0);
    assert_int_equal(q[6].len, 100);
    /* The synchronous path gives the same outcome. */
    for (int i = 0; i < N; i++) {
        rf_read s = q[i];
        s.buf = NULL;
        s.cap = 0;
        rf__read_sync(&s, RF__READ_MAX_BYTES);
        assert_int_equal(s.err, q[i].err);
        assert_int_equal(s.len, q[i].len);
        if (s.len)
            assert_memory_equal(s.buf, q[i].buf, s.len);
        free(s.buf);
    }
    for (int i = 0; i < N; i++)
        free(q[i].buf);
    rf__reader_destroy(r);
}

TU_TEST_BOTH_BACKENDS(range_errors)

int main(void)
{
    alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uring_ranges),
        cmocka_unit_test(test_pread_ranges),
        cmocka_unit_test(test_uring_range_errors),
        cmocka_unit_test(test_pread_range_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
