/*
 * readerset.c - the reader tests' files and read loops (readerset.h).
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

#include "readerset.h"
#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

rs_file rs_files[RS_NFILES];
char rs_missing[4096], rs_dir[4096], rs_noperm[4096], rs_fifo[4096];

/* Sizes that sit on the edges: empty, a byte, a page either side, the
 * reader's first buffer (64 KiB) either side, and a few megabytes. */
static const size_t edge_sizes[] = {0,     1,     4095,   4096,    4097,         65535,
                                    65536, 65537, 131075, 3 << 20, (3 << 20) + 1};
enum { NEDGE = sizeof edge_sizes / sizeof edge_sizes[0] };

uint8_t *rs_pattern(size_t len, uint32_t seed)
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

int rs_setup(void **state)
{
    alarm(300); /* a hung read fails the run instead of stalling it */
    /* RINGFEED_IO from the caller's environment would change what the
     * backend tests exercise: they ask for a backend explicitly, but the
     * auto test must start clean. */
    unsetenv("RINGFEED_IO");
    if (tu_tmp_setup(state) != 0)
        return -1;
    for (int i = 0; i < RS_NFILES; i++) {
        rs_file *f = &rs_files[i];
        /* The edge sizes first, then small and medium sizes mixed. */
        f->len = i < NEDGE ? edge_sizes[i] : (size_t)((i * 7919u) % 200000u);
        f->data = rs_pattern(f->len, (uint32_t)i + 1);
        snprintf(f->path, sizeof f->path, "%s/file%02d.bin", tu_tmp, i);
        if (tu_write_file(f->path, f->data, f->len) != 0)
            return -1;
    }
    snprintf(rs_missing, sizeof rs_missing, "%s/no-such-file.jpg", tu_tmp);
    snprintf(rs_dir, sizeof rs_dir, "%s/a-folder.jpg", tu_tmp);
    snprintf(rs_noperm, sizeof rs_noperm, "%s/locked.jpg", tu_tmp);
    snprintf(rs_fifo, sizeof rs_fifo, "%s/a-fifo.jpg", tu_tmp);
    if (mkdir(rs_dir, 0755) != 0 || tu_write_file(rs_noperm, "secret", 6) != 0 ||
        chmod(rs_noperm, 0) != 0 || mkfifo(rs_fifo, 0644) != 0)
        return -1;
    return 0;
}

int rs_teardown(void **state)
{
    for (int i = 0; i < RS_NFILES; i++) {
        free(rs_files[i].data);
        rs_files[i].data = NULL;
    }
    return tu_tmp_teardown(state);
}

int rs_read_all(rf_reader *r, rf_read *reqs, int n, int reap_max)
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

void rs_free_reqs(rf_read *reqs, int n)
{
    for (int i = 0; i < n; i++)
        free(reqs[i].buf);
    free(reqs);
}

rf_read *rs_read_files(int backend, unsigned depth, int copies, int reap_max)
{
    rf_reader *r;
    TU_READER_OR_SKIP(r, backend, depth);
    int n = RS_NFILES * copies;
    rf_read *reqs = calloc((size_t)n, sizeof *reqs);
    assert_non_null(reqs);
    for (int i = 0; i < n; i++)
        reqs[i].path = rs_files[i % RS_NFILES].path;
    int refused = rs_read_all(r, reqs, n, reap_max);
    if ((unsigned)n > depth)
        assert_true(refused > 0); /* the depth was reached and respected */
    for (int i = 0; i < n; i++) {
        const rs_file *f = &rs_files[i % RS_NFILES];
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

void rs_read_one(int backend, rf_read *req, const char *path)
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
