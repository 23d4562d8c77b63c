/*
 * test_reader.c - file reads with io_uring and pread (lib/io/reader.c).
 *
 * Each backend reads files of awkward sizes (empty, one byte, around a page,
 * around the reader's first 64 KiB buffer, megabytes) with fewer reads in
 * flight than files, so submission meets RF_E_STATE and must wait for reaps;
 * every byte is compared with the file and the two backends with each other.
 * Ranged reads (a known [offset, offset + length) of a file) are checked the
 * same way. Failures carry the errno and the step. Files and ranges over the
 * size limit (sparse files of gigabytes) fail with EFBIG before any buffer
 * is allocated; one exactly at the limit is read. The io_uring part skips
 * cleanly when the machine refuses io_uring (seccomp,
 * kernel.io_uring_disabled).
 *
 * Files live in a temporary folder under $RINGFEED_TEST_TMP, $TMPDIR or /tmp,
 * removed afterwards.
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
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "reader.h"
#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

/* ----------------------------------------------------------------- fixture */

enum { NFILES = 48 };

typedef struct {
    char path[4096];
    uint8_t *data; /* expected contents */
    size_t len;
} tfile;

static char *g_tmp;
static tfile g_files[NFILES];
static char g_missing[4096], g_dir[4096], g_noperm[4096], g_fifo[4096];

/* Sizes that sit on the edges: empty, a byte, a page either side, the
 * reader's first buffer (64 KiB) either side, and a few megabytes. */
static const size_t edge_sizes[] = {0,     1,     4095,   4096,   4097,    65535,
                                    65536, 65537, 131075, 3 << 20, (3 << 20) + 1};
enum { NEDGE = sizeof edge_sizes / sizeof edge_sizes[0] };

static uint8_t *pattern(size_t len, uint32_t seed)
{
    uint8_t *p = malloc(len + 1);
    assert_non_null(p);
    uint32_t s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < len; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        p[i] = (uint8_t)(s >> 24);
    }
    return p;
}

static int setup(void **state)
{
    (void)state;
    g_tmp = tu_tempdir("reader");
    if (!g_tmp)
        return -1;
    for (int i = 0; i < NFILES; i++) {
        tfile *f = &g_files[i];
        /* The edge sizes first, then small and medium sizes mixed. */
        f->len = i < NEDGE ? edge_sizes[i] : (size_t)((i * 7919u) % 200000u);
        f->data = pattern(f->len, (uint32_t)i + 1);
        snprintf(f->path, sizeof f->path, "%s/file%02d.bin", g_tmp, i);
        if (tu_write_file(f->path, f->data, f->len) != 0)
            return -1;
    }
    snprintf(g_missing, sizeof g_missing, "%s/no-such-file.jpg", g_tmp);
    snprintf(g_dir, sizeof g_dir, "%s/a-folder.jpg", g_tmp);
    snprintf(g_noperm, sizeof g_noperm, "%s/locked.jpg", g_tmp);
    snprintf(g_fifo, sizeof g_fifo, "%s/a-fifo.jpg", g_tmp);
    if (mkdir(g_dir, 0755) != 0 || tu_write_file(g_noperm, "secret", 6) != 0 ||
        chmod(g_noperm, 0) != 0 || mkfifo(g_fifo, 0644) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NFILES; i++) {
        free(g_files[i].data);
        g_files[i].data = NULL;
    }
    tu_tempdir_remove(&g_tmp);
    return 0;
}

/* ----------------------------------------------------------------- helpers */

/* Reads reqs[0..n) through r: submits until RF_E_STATE, reaps (up to
 * reap_max at a time), submits more. Checks every request comes back exactly
 * once and in-flight never exceeds the depth. Returns how many submissions
 * were refused with RF_E_STATE. */
static int read_all(rf_reader *r, rf_read *reqs, int n, int reap_max)
{
    char *done = calloc((size_t)n, 1);
    rf_read **out = calloc((size_t)reap_max, sizeof *out);
    assert_non_null(done);
    assert_non_null(out);
    int next = 0, finished = 0, refused = 0, rounds = 0;
    while (finished < n) {
        while (next < n) {
            reqs[next].sample = next;
            reqs[next].user = &reqs[next];
            int rc = rf__reader_submit(r, &reqs[next]);
            if (rc == RF_E_STATE) {
                refused++;
                break;
            }
            assert_int_equal(rc, 0);
            next++;
        }
        assert_true(rf__reader_inflight(r) <= rf__reader_depth(r));
        assert_true(rf__reader_inflight(r) > 0);
        int got = rf__reader_reap(r, out, reap_max, -1);
        assert_true(got >= 1 && got <= reap_max); /* waiting forever returns something */
        for (int i = 0; i < got; i++) {
            ptrdiff_t k = out[i] - reqs;
            assert_true(k >= 0 && k < next);
            assert_int_equal(done[k], 0);
            assert_int_equal(out[i]->sample, k);
            assert_ptr_equal(out[i]->user, out[i]);
            assert_true(out[i]->t_done_ns >= out[i]->t_submit_ns);
            assert_true(out[i]->t_submit_ns > 0);
            done[k] = 1;
        }
        finished += got;
        assert_true(++rounds <= 4 * n + 16);
    }
    assert_int_equal(rf__reader_inflight(r), 0);
    rf_read *none;
    assert_int_equal(rf__reader_reap(r, &none, 1, 0), 0);
    free(done);
    free(out);
    return refused;
}

static void free_reqs(rf_read *reqs, int n)
{
    for (int i = 0; i < n; i++)
        free(reqs[i].buf);
    free(reqs);
}

/* Reads every test file `copies` times (n = NFILES * copies requests). */
static rf_read *read_files(int backend, unsigned depth, int copies, int reap_max)
{
    rf_reader *r;
    TU_READER_OR_SKIP(r, backend, depth);
    int n = NFILES * copies;
    rf_read *reqs = calloc((size_t)n, sizeof *reqs);
    assert_non_null(reqs);
    for (int i = 0; i < n; i++)
        reqs[i].path = g_files[i % NFILES].path;
    int refused = read_all(r, reqs, n, reap_max);
    if ((unsigned)n > depth)
        assert_true(refused > 0); /* the depth was reached and respected */
    for (int i = 0; i < n; i++) {
        const tfile *f = &g_files[i % NFILES];
        if (reqs[i].err)
            fail_msg("%s: %s: %s", f->path, reqs[i].what, strerror(reqs[i].err));
        assert_int_equal(reqs[i].len, f->len);
        if (f->len)
            assert_memory_equal(reqs[i].buf, f->data, f->len);
        assert_true(reqs[i].cap >= reqs[i].len);
    }
    rf__reader_destroy(r);
    return reqs;
}

/* ------------------------------------------------------------------- tests */

static void check_reads_files(int backend)
{
    static const unsigned depths[] = {1, 3, 8, 64};
    for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
        free_reqs(read_files(backend, depths[d], 2, 16), NFILES * 2);
        free_reqs(read_files(backend, depths[d], 1, 1), NFILES); /* reap one at a time */
    }
}

TU_TEST_BOTH_BACKENDS(reads_files)

static void test_backends_identical(void **state)
{
    (void)state;
    rf_reader *probe;
    TU_READER_OR_SKIP(probe, RF__IO_URING, 5);
    rf__reader_destroy(probe);
    rf_read *a = read_files(RF__IO_PREAD, 5, 1, 4);
    rf_read *b = read_files(RF__IO_URING, 5, 1, 4);
    for (int i = 0; i < NFILES; i++) {
        assert_int_equal(a[i].len, b[i].len);
        assert_int_equal(a[i].err, b[i].err);
        if (a[i].len)
            assert_memory_equal(a[i].buf, b[i].buf, a[i].len);
    }
    free_reqs(a, NFILES);
    free_reqs(b, NFILES);
}

/* One request through a fresh reader; returns it completed. */
static void read_one(int backend, rf_read *req, const char *path)
{
    rf_reader *r;
    TU_READER_OR_SKIP(r, backend, 4);
    req->path = path;
    assert_int_equal(rf__reader_submit(r, req), 0);
    rf_read *out = NULL;
    assert_int_equal(rf__reader_reap(r, &out, 1, -1), 1);
    assert_ptr_equal(out, req);
    rf__reader_destroy(r);
}

static void check_errors(int backend)
{
    rf_read req;
    memset(&req, 0, sizeof req);

    read_one(backend, &req, g_missing);
    assert_int_equal(req.err, ENOENT);
    assert_string_equal(req.what, "open");
    assert_int_equal(req.len, 0);

    read_one(backend, &req, g_dir);
    assert_int_equal(req.err, EISDIR);
    assert_int_equal(req.len, 0);
    assert_true(req.what && *req.what);

    /* Root opens anything: the permission check only means something otherwise. */
    if (geteuid() != 0) {
        read_one(backend, &req, g_noperm);
        assert_int_equal(req.err, EACCES);
        assert_string_equal(req.what, "open");
    }

    /* The same request succeeds afterwards: the error does not stick. */
    read_one(backend, &req, g_files[2].path);
    assert_int_equal(req.err, 0);
    assert_int_equal(req.len, g_files[2].len);
    assert_memory_equal(req.buf, g_files[2].data, g_files[2].len);
    free(req.buf);

    /* Errors mixed with good reads, more than the depth in flight. */
    rf_reader *r;
    TU_READER_OR_SKIP(r, backend, 3);
    enum { N = 24 };
    rf_read *reqs = calloc(N, sizeof *reqs);
    assert_non_null(reqs);
    for (int i = 0; i < N; i++)
        reqs[i].path = i % 4 == 1 ? g_missing : i % 4 == 3 ? g_dir : g_files[i % NFILES].path;
    read_all(r, reqs, N, 8);
    for (int i = 0; i < N; i++) {
        if (i % 4 == 1) {
            assert_int_equal(reqs[i].err, ENOENT);
            assert_string_equal(reqs[i].what, "open");
        } else if (i % 4 == 3) {
            assert_int_equal(reqs[i].err, EISDIR);
        } else {
            assert_int_equal(reqs[i].err, 0);
            assert_int_equal(reqs[i].len, g_files[i % NFILES].len);
            if (reqs[i].len)
                assert_memory_equal(reqs[i].buf, g_files[i % NFILES].data, reqs[i].len);
        }
    }
    free_reqs(reqs, N);

    /* Many missing files at once: with io_uring the open and the statx of a
     * request race, and whichever fails first must not decide the step
     * reported; it is "open", as with pread. */
    rf__reader_destroy(r);
    TU_READER_OR_SKIP(r, backend, 64);
    enum { M = 4096 };
    reqs = calloc(M, sizeof *reqs);
    assert_non_null(reqs);
    for (int i = 0; i < M; i++)
        reqs[i].path = g_missing;
    read_all(r, reqs, M, 64);
    int stat_first = 0;
    for (int i = 0; i < M; i++) {
        assert_int_equal(reqs[i].err, ENOENT);
        stat_first += strcmp(reqs[i].what, "open") != 0;
    }
    free_reqs(reqs, M);
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
        req.path = g_fifo;
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
    const tfile *big = &g_files[8];   /* 131075 bytes */
    const tfile *small = &g_files[5]; /* 65535 bytes */
    const tfile *huge = &g_files[9];  /* 3 MiB */
    assert_int_equal(big->len, 131075);
    assert_int_equal(small->len, 65535);
    assert_int_equal(huge->len, 3 << 20);

    rf_reader *r;
    TU_READER_OR_SKIP(r, backend, 2);
    rf_read req;
    memset(&req, 0, sizeof req);
    rf_read *out;
    const tfile *seq[] = {big, small, &g_files[0], big, small};
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
    req.path = g_files[3].path;
    assert_int_equal(rf__reader_submit(r, &req), 0);
    int got = 0;
    for (int i = 0; i < 100000 && !got; i++)
        got = rf__reader_reap(r, out, 4, i < 1000 ? 0 : 10);
    assert_int_equal(got, 1);
    assert_ptr_equal(out[0], &req);
    assert_int_equal(req.len, g_files[3].len);
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
            reqs[i].path = i == 5 ? g_missing : i == 7 ? g_dir : g_files[9 + i % 2].path;
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
        free_reqs(reqs, N);
    }
    rf__reader_destroy(NULL);
}

TU_TEST_BOTH_BACKENDS(destroy_in_flight)

/* Ranged reads (tar members, records): exactly [offset, offset + length),
 * no stat; running into the end of the file is EIO. Mixed with whole-file
 * reads, more than the depth, and checked against rf__read_sync. */
static void check_ranged(int backend)
{
    const tfile *f = &g_files[9]; /* 3 MiB */
    const uint64_t L = f->len;
    static const struct {
        uint64_t off, len;
    } ok[] = {{0, 0}, {0, 1}, {4095, 2}, {65536, 65537}, {1000, 0}, {0, 3 << 20},
              {1234567, 1}, {3 << 20, 0}, {(3 << 20) - 10, 10}, {1, (3 << 20) - 1}};
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
        reqs[2 * i + 1].path = g_files[i].path; /* whole files in between */
    }
    /* Past the end, from the middle and from beyond it. */
    reqs[2 * NOK] = (rf_read){.path = f->path, .ranged = 1, .offset = L - 10, .length = 20};
    reqs[2 * NOK + 1] = (rf_read){.path = f->path, .ranged = 1, .offset = L + 100, .length = 5};
    reqs[2 * NOK + 2] = (rf_read){.path = g_missing, .ranged = 1, .offset = 0, .length = 5};
    reqs[2 * NOK + 3] = (rf_read){.path = g_dir, .ranged = 1, .offset = 0, .length = 5};
    read_all(r, reqs, N, 4);
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
        assert_int_equal(w->len, g_files[i].len);
        if (w->len)
            assert_memory_equal(w->buf, g_files[i].data, w->len);

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
    free_reqs(reqs, N);
    rf__reader_destroy(r);

    /* rf__read_sync of a whole file and of failures. */
    rf_read sync;
    memset(&sync, 0, sizeof sync);
    sync.path = f->path;
    assert_int_equal(rf__read_sync(&sync, RF__READ_MAX_BYTES), 0);
    assert_int_equal(sync.len, L);
    assert_memory_equal(sync.buf, f->data, L);
    sync.path = g_missing;
    assert_int_equal(rf__read_sync(&sync, RF__READ_MAX_BYTES), -1);
    assert_int_equal(sync.err, ENOENT);
    assert_string_equal(sync.what, "open");
    free(sync.buf);
}

TU_TEST_BOTH_BACKENDS(ranged)

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
            reqs[i].path = g_files[(round + i) % 8].path;
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
            const tfile *f = &g_files[(round + i) % 8];
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

/* A sparse file of size bytes (nothing written: it costs no disk). */
static void make_sparse(const char *path, uint64_t size)
{
    assert_int_equal(tu_write_file(path, "", 0), 0);
    assert_int_equal(truncate(path, (off_t)size), 0);
}

static long max_rss_kib(void)
{
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss;
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
    snprintf(big, sizeof big, "%s/huge.jpg", g_tmp);
    snprintf(over, sizeof over, "%s/over.jpg", g_tmp);
    snprintf(exact, sizeof exact, "%s/exact.jpg", g_tmp);
    snprintf(dflt, sizeof dflt, "%s/over-default.jpg", g_tmp);
    make_sparse(big, huge);
    make_sparse(over, LIMIT + 1);
    make_sparse(dflt, RF__READ_MAX_BYTES + 1);
    uint8_t *data = pattern(LIMIT, 77);
    assert_int_equal(tu_write_file(exact, data, LIMIT), 0);
    long rss0 = max_rss_kib();

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
    read_all(r, q, N, 2);
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
    read_one(backend, &d, dflt);
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
    long grew = max_rss_kib() - rss0;
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
    alarm(300); /* a hung read fails the run instead of stalling it */
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
        cmocka_unit_test(test_uring_ranged),
        cmocka_unit_test(test_pread_ranged),
        cmocka_unit_test(test_uring_many_rounds),
        cmocka_unit_test(test_uring_size_limit),
        cmocka_unit_test(test_pread_size_limit),
    };
    /* RINGFEED_IO from the caller's environment would change what the
     * backend tests exercise: they ask for a backend explicitly, but the
     * auto test must start clean. */
    unsetenv("RINGFEED_IO");
    return cmocka_run_group_tests(tests, setup, teardown);
}
