/*
 * test_mapped.c - ranges of local files read in place (lib/io/mapped.c).
 *
 * A file just written is in the page cache: its ranges come back as
 * pointers into one mapping, byte for byte the file's, at edges (first
 * byte, across pages, the last byte) and at random. Each range that is not
 * entirely in memory comes back NULL, for the reader: past the end, a
 * length that overflows, pages dropped from the cache (fadvise), the part
 * of a file cut short after it was mapped, a file that grew after it was
 * mapped, a folder, a FIFO, a missing path. Reading the dropped pages
 * again brings the pointer back. The table keeps apart more files than its
 * first size, and the counts add up.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "mapped.h"
#include "testutil.h"

#define FILE_LEN ((size_t)(1 << 20) + 333)
#define TMPFS_MAGIC_ 0x01021994

static char *g_tmp;
static char g_file[4096];
static uint8_t *g_data;

static int setup(void **state)
{
    (void)state;
    if (!(g_tmp = tu_tempdir("mapped")) || !(g_data = malloc(FILE_LEN)))
        return -1;
    uint32_t s = 99;
    for (size_t i = 0; i < FILE_LEN; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        g_data[i] = (uint8_t)(s >> 24);
    }
    snprintf(g_file, sizeof g_file, "%s/shard.tar", g_tmp);
    return tu_write_file(g_file, g_data, FILE_LEN);
}

static int teardown(void **state)
{
    (void)state;
    tu_tempdir_remove(&g_tmp);
    free(g_data);
    return 0;
}

static void check_range(rf_maps *m, const char *path, uint64_t off, uint64_t len)
{
    const uint8_t *p = rf__maps_resident(m, path, off, len);
    assert_non_null(p);
    assert_memory_equal(p, g_data + off, (size_t)len);
}

static void test_resident_ranges(void **state)
{
    (void)state;
    rf_maps *m = rf__maps_create();
    assert_non_null(m);
    static const uint64_t edges[][2] = {{0, 1},       {4095, 2},          {4096, 4096},
                                        {65535, 65538}, {0, FILE_LEN},    {FILE_LEN - 1, 1},
                                        {123, 300000}, {FILE_LEN - 10, 10}};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        check_range(m, g_file, edges[i][0], edges[i][1]);
    uint32_t rng = 5;
    for (int i = 0; i < 200; i++) {
        rng = rng * 1664525u + 1013904223u;
        uint64_t off = rng % FILE_LEN;
        rng = rng * 1664525u + 1013904223u;
        uint64_t len = 1 + (rng >> 8) % (FILE_LEN - off);
        check_range(m, g_file, off, len);
    }
    /* one mapping: the same file, the same place */
    assert_ptr_equal(rf__maps_resident(m, g_file, 100, 1) + 900,
                     rf__maps_resident(m, g_file, 1000, 1));
    /* nothing past the end, no overflow, nothing empty */
    assert_null(rf__maps_resident(m, g_file, FILE_LEN, 1));
    assert_null(rf__maps_resident(m, g_file, FILE_LEN - 5, 6));
    assert_null(rf__maps_resident(m, g_file, 1, UINT64_MAX));
    assert_null(rf__maps_resident(m, g_file, UINT64_MAX, 2));
    assert_null(rf__maps_resident(m, g_file, 0, 0));
    uint64_t in_place, read;
    rf__maps_counts(m, &in_place, &read);
    assert_int_equal(in_place, 8 + 200 + 2);
    assert_int_equal(read, 4); /* the empty range is not counted: nothing to read */
    rf__maps_destroy(m);
}

static int on_tmpfs(const char *path)
{
    struct statfs sf;
    return statfs(path, &sf) == 0 && sf.f_type == TMPFS_MAGIC_;
}

static void test_dropped_pages_go_to_the_reader(void **state)
{
    (void)state;
    if (on_tmpfs(g_tmp)) {
        print_message("skip: %s is tmpfs, whose pages cannot be dropped\n", g_tmp);
        return;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/dropped.tar", g_tmp);
    assert_int_equal(tu_write_file(path, g_data, FILE_LEN), 0);
    rf_maps *m = rf__maps_create();
    assert_non_null(m);
    /* not touched: pages this process maps are not dropped by fadvise */
    assert_non_null(rf__maps_resident(m, path, 5000, 200000));
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(fdatasync(fd), 0);
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    assert_null(rf__maps_resident(m, path, 5000, 200000));
    assert_null(rf__maps_resident(m, path, FILE_LEN - 1, 1));
    /* a read brings them back (what the reader does with such a range) */
    uint8_t *buf = malloc(200000);
    assert_non_null(buf);
    assert_int_equal(pread(fd, buf, 200000, 5000), 200000);
    check_range(m, path, 5000, 200000);
    free(buf);
    close(fd);
    rf__maps_destroy(m);
}

static void test_changed_files(void **state)
{
    (void)state;
    char cut[4200], grown[4200];
    snprintf(cut, sizeof cut, "%s/cut.tar", g_tmp);
    snprintf(grown, sizeof grown, "%s/grown.tar", g_tmp);
    assert_int_equal(tu_write_file(cut, g_data, FILE_LEN), 0);
    assert_int_equal(tu_write_file(grown, g_data, 10000), 0);
    rf_maps *m = rf__maps_create();
    assert_non_null(m);
    check_range(m, cut, FILE_LEN - 70000, 70000);
    check_range(m, grown, 0, 10000);
    /* cut short after it was mapped: what is gone is not resident, and
     * nothing past the new end is handed out (no SIGBUS) */
    assert_int_equal(truncate(cut, 300000), 0);
    assert_null(rf__maps_resident(m, cut, FILE_LEN - 70000, 70000));
    assert_null(rf__maps_resident(m, cut, 299000, 2000));
    check_range(m, cut, 0, 299000);
    /* grown: the mapping is of the size it had; the rest is read */
    FILE *f = fopen(grown, "ab");
    assert_non_null(f);
    assert_int_equal(fwrite(g_data + 10000, 1, 5000, f), 5000);
    fclose(f);
    check_range(m, grown, 0, 10000);
    assert_null(rf__maps_resident(m, grown, 9000, 2000));
    rf__maps_destroy(m);
}

static void test_not_regular_files(void **state)
{
    (void)state;
    char dir[4200], fifo[4200], missing[4200], link[4200];
    snprintf(dir, sizeof dir, "%s/folder.tar", g_tmp);
    snprintf(fifo, sizeof fifo, "%s/fifo.tar", g_tmp);
    snprintf(missing, sizeof missing, "%s/missing.tar", g_tmp);
    snprintf(link, sizeof link, "%s/link.tar", g_tmp);
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(symlink(g_file, link), 0);
    rf_maps *m = rf__maps_create();
    assert_non_null(m);
    for (int k = 0; k < 2; k++) { /* the second time from the table */
        assert_null(rf__maps_resident(m, dir, 0, 1));
        assert_null(rf__maps_resident(m, fifo, 0, 1)); /* and open did not block */
        assert_null(rf__maps_resident(m, missing, 0, 1));
        /* a link the user gave is the file it names, as the reader reads it */
        check_range(m, link, 10, 100);
    }
    uint64_t in_place, read;
    rf__maps_counts(m, &in_place, &read);
    assert_int_equal(in_place, 2);
    assert_int_equal(read, 6);
    rf__maps_destroy(m);
}

static void test_many_files(void **state)
{
    (void)state;
    enum { NF = 300 };
    char(*paths)[4200] = calloc(NF, sizeof *paths);
    assert_non_null(paths);
    for (int i = 0; i < NF; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/many-%03d.tar", g_tmp, i);
        assert_int_equal(tu_write_file(paths[i], g_data + i, 8192), 0);
    }
    rf_maps *m = rf__maps_create();
    assert_non_null(m);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < NF; i++) {
            const uint8_t *p = rf__maps_resident(m, paths[i], 17, 4000);
            assert_non_null(p);
            assert_memory_equal(p, g_data + i + 17, 4000);
        }
    rf__maps_destroy(m);
    for (int i = 0; i < NF; i++)
        unlink(paths[i]);
    free(paths);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resident_ranges),
        cmocka_unit_test(test_dropped_pages_go_to_the_reader),
        cmocka_unit_test(test_changed_files),
        cmocka_unit_test(test_not_regular_files),
        cmocka_unit_test(test_many_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
