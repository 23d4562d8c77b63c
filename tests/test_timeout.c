/*
 * test_timeout.c - a read that never completes fails with a timeout instead
 * of hanging the loader (RF_P_READ_TIMEOUT_MS, io_uring backend).
 *
 * The stuck read is a FIFO whose writer keeps it open and never writes: the
 * reader opens it (O_NONBLOCK), and io_uring waits for data that never
 * comes. A ranged read (tar member / record) skips statx's regular-file
 * check, so the read itself is what hangs. A list file of whole-file reads
 * shows the same for a FIFO caught by statx (an error, not a hang).
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "reader.h"
#include "ringfeed.h"
#include "testutil.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void test_reader_read_times_out(void **state)
{
    (void)state;
    rf_reader *r;
    assert_int_equal(rf__reader_create(&r, RF__IO_URING, 4), 0);
    if (rf__reader_backend(r) != RF__IO_URING) {
        rf__reader_destroy(r);
        skip(); /* no io_uring here: timeouts are an io_uring feature */
    }
    rf__reader_set_timeout(r, 150);
    char *dir = tu_tempdir("timeout");
    char fifo[4096];
    snprintf(fifo, sizeof fifo, "%s/stuck.jpg", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    /* A writer that holds the FIFO open and never writes. */
    int wfd = open(fifo, O_RDWR | O_NONBLOCK);
    assert_true(wfd >= 0);
    rf_read req = {0};
    req.path = fifo;
    req.ranged = 1;
    req.offset = 0;
    req.length = 4096;
    assert_int_equal(rf__reader_submit(r, &req), 0);
    double t0 = now_s();
    rf_read *done[1];
    int n = 0;
    while (n == 0 && now_s() - t0 < 10)
        n = rf__reader_reap(r, done, 1, 50);
    double dt = now_s() - t0;
    assert_int_equal(n, 1);
    assert_int_equal(req.err, ETIMEDOUT);
    print_message("stuck read failed after %.0f ms: %s\n", dt * 1e3, req.what);
    /* Not before its 150 ms (timers never fire early); the 10 s loop above
     * is the hang guard, no upper bound is asserted. */
    assert_true(dt >= 0.1);
    /* The reader is still usable afterwards. */
    char path[4096];
    snprintf(path, sizeof path, "%s/ok.bin", dir);
    assert_int_equal(tu_write_file(path, "hello", 5), 0);
    rf_read ok = {0};
    ok.path = path;
    assert_int_equal(rf__reader_submit(r, &ok), 0);
    n = 0;
    while (n == 0)
        n = rf__reader_reap(r, done, 1, 100);
    assert_int_equal(ok.err, 0);
    assert_int_equal(ok.len, 5);
    rf__reader_destroy(r);
    close(wfd);
    free(req.buf);
    free(ok.buf);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_read_times_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
