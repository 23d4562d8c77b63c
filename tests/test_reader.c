/*
 * test_reader.c - whole-file reads with io_uring and pread (lib/io/reader.c).
 *
 * Each backend reads files of awkward sizes (readerset.h) with fewer reads
 * in flight than files, so submission meets RF_E_STATE and must wait for
 * reaps; every byte is compared with the file and the two backends with
 * each other. Failures (missing, a folder, no permission, a FIFO) carry the
 * errno and the step and do not stick; buffers are reused; RINGFEED_IO
 * forces pread; an idle poll and a destroy with reads in flight return; an
 * io_uring reader serves many rounds without leaking file-table slots. The
 * io_uring part skips cleanly when the machine refuses io_uring (seccomp,
 * kernel.io_uring_disabled). Ranges and the size limit:
 * test_reader_extent.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "reader.h"
#include "readerset.h"
#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

/* ------------------------------------------------------------------- tests */

static void check_reads_files(int backend)
{
    static const unsigned depths[] = {1, 3, 8, 64};
    for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
        rs_free_reqs(rs_read_files(backend, depths[d], 2, 16), RS_NFILES * 2);
        rs_free_reqs(rs_read_files(backend, depths[d], 1, 1), RS_NFILES); /* reap one at a time */
    }
}

TU_TEST_BOTH_BACKENDS(reads_files)

static void test_backends_identical(void **state)
{
    (void)state;
    rf_reader *probe;
    TU_READER_OR_SKIP(probe, RF__IO_URING, 5);
    rf__reader_destroy(probe);
    rf_read *a = rs_read_files(RF__IO_PREAD, 5, 1, 4);
    rf_read *b = rs_read_files(RF__IO_URING, 5, 1, 4);
    for (int i = 0; i < RS_NFILES; i++) {
        assert_int_equal(a[i].len, b[i].len);
        assert_int_equal(a[i].err, b[i].err);
        if (a[i].len)
            assert_memory_equal(a[i].buf, b[i].buf, a[i].len);
    }
    rs_free_reqs(a, RS_NFILES);
    rs_free_reqs(b, RS_NFILES);
}

static void check_errors(int backend)
{
    rf_read req;
    memset(&req, 0, sizeof req);

    rs_read_one(backend, &req, rs_missing);
    assert_int_equal(req.err, ENOENT);
    assert_string_equal(req.what, "open");
    assert_int_equal(req.len, 0);

    rs_read_one(backend, &req, rs_dir);
    assert_int_equal(req.err, EISDIR);
    assert_int_equal(req.len, 0);
    assert_true(req.what && *req.what);

    /* Root opens anything: the permission check only means something otherwise. */
    if (geteuid() != 0) {
        rs_read_one(backend, &req, rs_noperm);
        assert_int_equal(req.err, EACCES);
        assert_string_equal(req.what, "open");
    }

    /* The same request succeeds afterwards: the error does not stick. */
    rs_read_one(backend, &req, rs_files[2].path);
    assert_int_equal(req.err, 0);
    assert_int_equal(req.len, rs_files[2].len);
    assert_memory_equal(req.buf, rs_files[2].data, rs_files[2].len);
    free(req.buf);

    /* Errors mixed with good reads, more than the depth in flight. */
    rf_reader *r;
    TU_READER_OR_SKIP(r, backend, 3);
    enum { N = 24 };
    rf_read *reqs = calloc(N, sizeof *reqs);
    assert_non_null(reqs);
    for (int i = 0; i < N; i++)
        reqs[i].path = i % 4 == 1 ? rs_missing : i % 4 == 3 ? rs_dir : rs_files[i % RS_NFILES].path;
    rs_read_all(r, reqs, N, 8);
    for (int i = 0; i < N; i++) {
        if (i % 4 == 1) {
            assert_int_equal(reqs[i].err, ENOENT);
            assert_string_equal(reqs[i].what, "open");
        } else if (i % 4 == 3) {
            assert_int_equal(reqs[i].err, EISDIR);
        } else {
            assert_int_equal(reqs[i].err, 0);
            assert_int_equal(reqs[i].len, rs_files[i % RS_NFILES].len);
            if (reqs[i].len)
                assert_memory_equal(reqs[i].buf, rs_files[i % RS_NFILES].data, reqs[i].len);
        }
    }
    rs_free_reqs(reqs, N);

    /* Many missing files at once: with io_uring the open and the statx of a
     * request race, and whichever fails first must not decide the step
     * reported; it is "open", as with pread. */
    rf__reader_destroy(r);
    TU_READER_OR_SKIP(r, backend, 64);
    enum { M = 4096 };
    reqs = calloc(M, sizeof *reqs);
    assert_non_null(reqs);
    for (int i = 0; i < M; i++)
        reqs[i].path = rs_missing;
    rs_read_all(r, reqs, M, 64);
    int stat_first = 0;
    for (int i = 0; i < M; i++) {
        assert_int_equal(reqs[i].err, ENOENT);
        stat_first += strcmp(reqs[i].what, "open") != 0;
    }
    rs_free_reqs(reqs, M);
    rf__reader_destroy(r);
    if (stat_first)
        fail_msg("%d of %d missing files reported as \"stat\", not \"open\"", stat_first, M);
}

TU_TEST_BOTH_BACKENDS(errors)

/* A FIFO named like an image (an image folder lists it: it is not a
 * folder) fails as "not a regular file" instead of blocking in open() until
 * a writer appears. Read in a child process so that a hang is a failure
 * here, not a stuck test run. */
static void check_fifo(int backend)
{
    rf_reader *probe;
    TU_READER_OR_SKIP(probe, backend, 2);
    rf__reader_destroy(probe);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        rf_reader *r = NULL;
        if (rf__reader_create(&r, backend, 2) != 0)
            _exit(3);
        rf_read req;
        memset(&req, 0, sizeof req);
        req.path = rs_fifo;
        rf_read *out;
        int ok = rf__reader_submit(r, &req) == 0 && rf__reader_reap(r, &out, 1, -1) == 1 &&
                 req.err == EINVAL;
        rf__reader_destroy(r);
        free(req.buf);
        _exit(ok ? 0 : 2);
    }
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 500 && got == 0; i++) { /* 5 s */
        got = waitpid(pid, &status, WNOHANG);
        if (got == 0)
            usleep(10 * 1000);
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("reading a FIFO blocked (backend %d): open() waits for a writer", backend);
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

TU_TEST_BOTH_BACKENDS(fifo)

static void check_buffer_reuse(int backend)
{
    const rs_file *big = &rs_files[8];   /* 131075 bytes */
    const rs_file *small = &rs_files[5]; /* 65535 bytes */
    const rs_file *huge = &rs_files[9];  /* 3 MiB */
    assert_int_equal(big->len, 131075);
    assert_int_equal(small->len, 65535);
    assert_int_equal(huge->len, 3 << 20);

    rf_reader *r;
    TU_READER_OR_SKIP(r, backend, 2);
    rf_read req;
    memset(&req, 0, sizeof req);
    rf_read *out;
    const rs_file *seq[] = {big, small, &rs_files[0], big, small};
    uint8_t *buf = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        req.path = seq[i]->path;
        assert_int_equal(rf__reader_submit(r, &req), 0);
        assert_int_equal(rf__reader_reap(r, &out, 1, -1), 1);
        assert_int_equal(req.err, 0);
        assert_int_equal(req.len, seq[i]->len);
        if (req.len)
            assert_memory_equal(req.buf, seq[i]->data, req.len);
        if (i == 0) {
            buf = req.buf;
            cap = req.cap;
            assert_non_null(buf);
            assert_true(cap >= big->len);
        } else {
            /* It fits: the same buffer, not a new one. */
            assert_ptr_equal(req.buf, buf);
            assert_int_equal(req.cap, cap);
        }
    }
    /* Bigger than the buffer: it grows and keeps the new size. */
    req.path = huge->path;
    assert_int_equal(rf__reader_submit(r, &req), 0);
    assert_int_equal(rf__reader_reap(r, &out, 1, -1), 1);
    assert_int_equal(req.err, 0);
    assert_int_equal(req.len, huge->len);
    assert_memory_equal(req.buf, huge->data, huge->len);
    assert_true(req.cap >= huge->len);
    buf = req.buf;
    cap = req.cap;
    req.path = small->path;
    assert_int_equal(rf__reader_submit(r, &req), 0);
    assert_int_equal(rf__reader_reap(r, &out, 1, -1), 1);
    assert_int_equal(req.len, small->len);
    assert_memory_equal(req.buf, small->data, small->len);
    assert_ptr_equal(req.buf, buf);
    assert_int_equal(req.cap, cap);
    free(req.buf);
    rf__reader_destroy(r);
}

TU_TEST_BOTH_BACKENDS(buffer_reuse)

static void test_env_forces_pread(void **state)
{
    (void)state;
    rf_reader *r = NULL;
    assert_int_equal(setenv("RINGFEED_IO", "pread", 1), 0);
    assert_int_equal(rf__reader_create(&r, 0, 4), 0);
    int backend = rf__reader_backend(r);
    const char *note = rf__reader_note(r);
    int mentions = strstr(note, "RINGFEED_IO") != NULL;
    rf__reader_destroy(r);
    assert_int_equal(unsetenv("RINGFEED_IO"), 0);
    assert_int_equal(backend, RF__IO_PREAD);
    assert_true(mentions); /* the stats say why */

    /* Without the variable, auto picks io_uring where it works. */
    assert_int_equal(rf__reader_create(&r, 0, 4), 0);
    backend = rf__reader_backend(r);
    rf__reader_destroy(r);
    rf_reader *u = tu_reader_open(RF__IO_URING, 4);
    if (u) {
        rf__reader_destroy(u);
        assert_int_equal(backend, RF__IO_URING);
    } else {
        assert_int_equal(backend, RF__IO_PREAD);
    }
}

static void check_poll_idle(int backend)
{
    rf_reader *r;
    TU_READER_OR_SKIP(r, backend, 4);
    rf_read *out[4];
    for (int i = 0; i < 100; i++)
        assert_int_equal(rf__reader_reap(r, out, 4, 0), 0);
    /* Nothing in flight: a reap with a 30 s timeout returns at once. One
     * that sat the timeout out would take 30 s at least, so the bound tells
     * the two apart on any machine, however loaded. */
    int64_t t0 = rf__now_ns();
    assert_int_equal(rf__reader_reap(r, out, 4, 30000), 0);
    int64_t dt = rf__now_ns() - t0;
    printf("  idle reap with a 30 s timeout: %.3f ms\n", (double)dt / 1e6);
    assert_true(dt < 30 * 1000000000LL);

    /* With a read in flight, polling eventually delivers it. */
    rf_read req;
    memset(&req, 0, sizeof req);
    req.path = rs_files[3].path;
    assert_int_equal(rf__reader_submit(r, &req), 0);
    int got = 0;
    for (int i = 0; i < 100000 && !got; i++)
        got = rf__reader_reap(r, out, 4, i < 1000 ? 0 : 10);
    assert_int_equal(got, 1);
    assert_ptr_equal(out[0], &req);
    assert_int_equal(req.len, rs_files[3].len);
    assert_int_equal(rf__reader_reap(r, out, 4, 0), 0);
    free(req.buf);
    rf__reader_destroy(r);
}

TU_TEST_BOTH_BACKENDS(poll_idle)

/* Destroying a reader with reads in flight waits for them (the kernel may be
 * writing into the buffers) and frees everything: ASan/LSan see no leak and
 * no write after free, since buffers are freed only after destroy. */
static void check_destroy_in_flight(int backend)
{
    enum { N = 16 };
    for (int variant = 0; variant < 3; variant++) {
        rf_reader *r;
        TU_READER_OR_SKIP(r, backend, N);
        rf_read *reqs = calloc(N, sizeof *reqs);
        assert_non_null(reqs);
        for (int i = 0; i < N; i++) {
            /* Mostly the 3 MiB files, some errors. */
            reqs[i].path = i == 5 ? rs_missing : i == 7 ? rs_dir : rs_files[9 + i % 2].path;
            assert_int_equal(rf__reader_submit(r, &reqs[i]), 0);
        }
        assert_int_equal(rf__reader_inflight(r), N);
        if (variant == 1) {
            /* Some finished and handed out, the rest still going. */
            rf_read *out[4];
            assert_true(rf__reader_reap(r, out, 4, -1) >= 1);
        } else if (variant == 2) {
            /* Everything finished in the kernel, nothing reaped yet. */
            usleep(100 * 1000);
            rf_read *out[1];
            assert_int_equal(rf__reader_reap(r, out, 1, -1), 1);
        }
        rf__reader_destroy(r);
        rs_free_reqs(reqs, N);
    }
    rf__reader_destroy(NULL);
}

TU_TEST_BOTH_BACKENDS(destroy_in_flight)

/* The reader can be reused for many rounds without leaking file-table
 * slots: a slot goes back when its close completes. */
static void test_uring_many_rounds(void **state)
{
    (void)state;
    rf_reader *r;
    TU_READER_OR_SKIP(r, RF__IO_URING, 4);
    rf_read reqs[4];
    memset(reqs, 0, sizeof reqs);
    for (int round = 0; round < 500; round++) {
        int k = 1 + round % 4;
        for (int i = 0; i < k; i++) {
            reqs[i].path = rs_files[(round + i) % 8].path;
            assert_int_equal(rf__reader_submit(r, &reqs[i]), 0);
        }
        int got = 0;
        rf_read *out[4];
        while (got < k) {
            int n = rf__reader_reap(r, out, 4, -1);
            assert_true(n >= 1);
            got += n;
        }
        assert_int_equal(got, k);
        for (int i = 0; i < k; i++) {
            const rs_file *f = &rs_files[(round + i) % 8];
            assert_int_equal(reqs[i].err, 0);
            assert_int_equal(reqs[i].len, f->len);
            if (f->len)
                assert_memory_equal(reqs[i].buf, f->data, f->len);
        }
    }
    for (int i = 0; i < 4; i++)
        free(reqs[i].buf);
    rf__reader_destroy(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uring_reads_files),
        cmocka_unit_test(test_pread_reads_files),
        cmocka_unit_test(test_backends_identical),
        cmocka_unit_test(test_uring_errors),
        cmocka_unit_test(test_pread_errors),
        cmocka_unit_test(test_uring_fifo),
        cmocka_unit_test(test_pread_fifo),
        cmocka_unit_test(test_uring_buffer_reuse),
        cmocka_unit_test(test_pread_buffer_reuse),
        cmocka_unit_test(test_env_forces_pread),
        cmocka_unit_test(test_uring_poll_idle),
        cmocka_unit_test(test_pread_poll_idle),
        cmocka_unit_test(test_uring_destroy_in_flight),
        cmocka_unit_test(test_pread_destroy_in_flight),
        cmocka_unit_test(test_uring_many_rounds),
    };
    return cmocka_run_group_tests(tests, rs_setup, rs_teardown);
}
