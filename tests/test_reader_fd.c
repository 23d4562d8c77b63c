/*
 * test_reader_fd.c - reads through a descriptor the caller holds
 * (rf_read.use_fd: a remote shard read through its pin in the cache,
 * lib/remote/cache.h) with io_uring and with pread: the bytes of the file opened,
 * not of whatever was renamed over its path since; whole and ranged reads;
 * the descriptor left open, and no other descriptor of the process closed
 * (an io_uring request without a file slot once queued a close of
 * descriptor 0 for each read). The io_uring part skips cleanly where
 * io_uring is refused.
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

#include "reader.h"
#include "ringfeed.h"
#include "testutil.h"

#define LEN 70000
#define NREQ 24

static char *g_tmp;

static int setup(void **state)
{
    (void)state;
    return (g_tmp = tu_tempdir("readerfd")) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tu_tempdir_remove(&g_tmp);
    return 0;
}

static void fill(uint8_t *p, size_t n, uint32_t s)
{
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        p[i] = (uint8_t)(s >> 24);
    }
}

static void reads_through(int backend)
{
    char path[4200], other[4200];
    snprintf(path, sizeof path, "%s/shard.tar", g_tmp);
    snprintf(other, sizeof other, "%s/other", g_tmp);
    static uint8_t data[LEN], junk[LEN];
    fill(data, LEN, 7);
    memset(junk, 0, sizeof junk);
    assert_int_equal(tu_write_file(path, data, LEN), 0);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    /* the name now holds other bytes: only the descriptor has the shard */
    assert_int_equal(tu_write_file(other, junk, LEN), 0);
    assert_int_equal(rename(other, path), 0);
    /* descriptor 0 is a file of ours for the test: it must stay open */
    int saved0 = dup(0);
    int zero = open("/dev/null", O_RDONLY);
    assert_true(saved0 >= 0 && zero >= 0);
    assert_int_equal(dup2(zero, 0), 0);
    close(zero);

    rf_reader *r = NULL;
    assert_int_equal(rf__reader_create(&r, backend, 8), 0);
    if (backend == RF__IO_URING && rf__reader_backend(r) != RF__IO_URING) {
        rf__reader_destroy(r);
        dup2(saved0, 0);
        close(saved0);
        close(fd);
        skip();
    }
    rf_read req[NREQ];
    memset(req, 0, sizeof req);
    for (int i = 0; i < NREQ; i++) {
        req[i].path = path; /* named in messages only */
        req[i].use_fd = 1;
        req[i].fd = fd;
        req[i].ranged = i % 4 != 0; /* every fourth the whole file */
        req[i].offset = (uint64_t)(i * 2897) % (LEN - 5000);
        req[i].length = 1 + (uint64_t)(i * 997) % 5000;
        req[i].sample = i;
    }
    int next = 0, finished = 0;
    rf_read *out[8];
    while (finished < NREQ) {
        while (next < NREQ && rf__reader_submit(r, &req[next]) == 0)
            next++;
        int got = rf__reader_reap(r, out, 8, -1);
        for (int k = 0; k < got; k++) {
            rf_read *q = out[k];
            assert_int_equal(q->err, 0);
            if (q->ranged) {
                assert_int_equal(q->len, q->length);
                assert_memory_equal(q->buf, data + q->offset, q->length);
            } else {
                assert_int_equal(q->len, LEN);
                assert_memory_equal(q->buf, data, LEN);
            }
        }
        finished += got;
    }
    rf__reader_destroy(r);
    for (int i = 0; i < NREQ; i++)
        free(req[i].buf);
    assert_true(fcntl(fd, F_GETFD) >= 0); /* left open for its owner */
    assert_true(fcntl(0, F_GETFD) >= 0); /* and nothing else closed */
    dup2(saved0, 0);
    close(saved0);
    close(fd);
}

static void test_uring_reads_through_fd(void **state)
{
    (void)state;
    reads_through(RF__IO_URING);
}

static void test_pread_reads_through_fd(void **state)
{
    (void)state;
    reads_through(RF__IO_PREAD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_uring_reads_through_fd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pread_reads_through_fd, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
