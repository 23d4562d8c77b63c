/*
 * test_shards.c - the index of WebDataset tar shards (lib/source/tar.c):
 * members found as byte ranges, long names in every header flavour the
 * indexer must read (ustar with a prefix, GNU 'L' long names, pax 'x'
 * headers), the damage it must report (a bad checksum, truncation) with the
 * shard, the member and the offset, damage that never crashes it, and
 * shards named by patterns and lists. Shards are written by
 * tests/tarwrite.h. Through the loader: test_shards_loader.c.
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

/* ----------------------------------------------------------------- helpers */

/* Bytes [off, off + len) of a file. */
static uint8_t *file_range(const char *path, uint64_t off, size_t len)
{
    size_t n;
    uint8_t *all = tu_read_file(path, &n);
    assert_non_null(all);
    assert_true(off + len <= n);
    uint8_t *out = malloc(len + 1);
    assert_non_null(out);
    memcpy(out, all + off, len);
    free(all);
    return out;
}

static void expect_member(const rf_source *s, int64_t i, const void *data, size_t len)
{
    int ranged;
    uint64_t off, l;
    rf__source_extent(s, i, &ranged, &off, &l);
    assert_int_equal(ranged, 1);
    assert_int_equal(l, len);
    uint8_t *got = file_range(rf__source_path(s, i), off, len);
    assert_memory_equal(got, data, len);
    free(got);
}

/* ------------------------------------------------------------ tar index */

/* Small fake "JPEG" payloads: the index never looks inside them. */
static void payload(char *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)('A' + (i * 7 + (size_t)seed * 13) % 26);
}

static void test_tar_members_indexed_as_ranges(void **state)
{
    (void)state;
    char *shard = tu_tmp_path("basic.tar");
    tw t;
    assert_int_equal(tw_open(&t, shard, TW_USTAR), 0);
    char a[700], b[1024], c[5];
    payload(a, sizeof a, 1);
    payload(b, sizeof b, 2);
    payload(c, sizeof c, 3);
    assert_int_equal(tw_typed(&t, "d/", '5', NULL, 0), 0); /* directory: ignored */
    assert_int_equal(tw_file(&t, "d/k1.jpg", a, sizeof a), 0);
    assert_int_equal(tw_file(&t, "d/k1.cls", "3\n", 2), 0);
    assert_int_equal(tw_file(&t, "d/k1.json", "{}", 2), 0);        /* other modality */
    assert_int_equal(tw_file(&t, "d/k2.cls", " 0 ", 3), 0);        /* .cls first */
    assert_int_equal(tw_file(&t, "d/k2.JPEG", b, sizeof b), 0);    /* case-insensitive */
    assert_int_equal(tw_file(&t, "d/.hidden.jpg", c, 1), 0);       /* no key: ignored */
    assert_int_equal(tw_typed(&t, "d/link.jpg", '2', NULL, 0), 0); /* symlink: ignored */
    assert_int_equal(tw_file(&t, "__index__", c, 1), 0);           /* webdataset's own */
    assert_int_equal(tw_file(&t, "__meta__/m.jpg", c, 1), 0);      /* webdataset's own */
    assert_int_equal(tw_file(&t, "k4.jpeg", c, 0), 0);             /* empty member */
    assert_int_equal(tw_file(&t, "k4.cls", "12", 2), 0);
    assert_int_equal(tw_file(&t, "k5.cls", "1", 1), 0);
    assert_int_equal(tw_file(&t, "k5.PNG", a, 300), 0);   /* any ImageFolder format */
    assert_int_equal(tw_file(&t, "k5.seg.png", c, 2), 0); /* ext "seg.png": other */
    assert_int_equal(tw_close(&t), 0);

    rf_source s;
    tu_source_open_ok(&s, shard, NULL);
    assert_int_equal(s.kind, RF_SOURCE_TAR);
    assert_int_equal(s.n, 4);
    assert_int_equal(s.nclasses, 13);
    assert_int_equal(s.nfiles, 1);
    assert_string_equal(rf__source_path(&s, 0), shard);
    assert_int_equal(rf__source_label(&s, 0), 3);
    assert_int_equal(rf__source_label(&s, 1), 0);
    assert_int_equal(rf__source_label(&s, 2), 12);
    assert_int_equal(rf__source_label(&s, 3), 1);
    expect_member(&s, 0, a, sizeof a);
    expect_member(&s, 1, b, sizeof b);
    expect_member(&s, 2, c, 0);
    expect_member(&s, 3, a, 300);
    char name[4096];
    rf__source_name(&s, 1, name, sizeof name);
    char want[4096];
    snprintf(want, sizeof want, "%s:d/k2.JPEG", shard);
    assert_string_equal(name, want);
    /* flat arrays (32 bytes per sample, 1024 allocated) and the arena */
    assert_true(rf__source_bytes(&s) <= (1 << 16) + 1024 * 32 + 64);
    rf__source_close(&s);
    free(shard);
}

static void test_tar_long_names(void **state)
{
    (void)state;
    /* A directory path of 140 bytes and keys past 100 bytes in every flavour. */
    char dir[200], key[400];
    memset(dir, 'd', 140);
    dir[140] = '\0';
    dir[60] = '/';
    for (int flavor = TW_USTAR; flavor <= TW_PAX; flavor++) {
        char *shard = tu_tmp_path("long%d.tar", flavor);
        tw t;
        assert_int_equal(tw_open(&t, shard, flavor), 0);
        char data[3][900];
        for (int k = 0; k < 3; k++) {
            payload(data[k], sizeof data[k], 10 + k);
            char member[512], cls[8];
            if (flavor == TW_USTAR)
                snprintf(key, sizeof key, "%s/sample_%d", dir, k);
            else
                snprintf(key, sizeof key, "%s/%0120d", dir, k); /* base name > 100 */
            snprintf(member, sizeof member, "%s.jpg", key);
            assert_int_equal(tw_file(&t, member, data[k], sizeof data[k] - (size_t)k), 0);
            snprintf(member, sizeof member, "%s.cls", key);
            snprintf(cls, sizeof cls, "%d", 7 - k);
            assert_int_equal(tw_file(&t, member, cls, strlen(cls)), 0);
        }
        assert_int_equal(tw_close(&t), 0);
        rf_source s;
        tu_source_open_ok(&s, shard, NULL);
        assert_int_equal(s.n, 3);
        for (int k = 0; k < 3; k++) {
            assert_int_equal(rf__source_label(&s, k), 7 - k);
            expect_member(&s, k, data[k], sizeof data[k] - (size_t)k);
            char name[2048], want[2048];
            rf__source_name(&s, k, name, sizeof name);
            if (flavor == TW_USTAR)
                snprintf(want, sizeof want, "%s:%s/sample_%d.jpg", shard, dir, k);
            else
                snprintf(want, sizeof want, "%s:%s/%0120d.jpg", shard, dir, k);
            assert_string_equal(name, want);
        }
        rf__source_close(&s);
        free(shard);
    }
}

/* Writes a shard of n samples key%03d.jpg/.cls (label k % 5). */
static void write_shard(const char *path, int first, int n, int flavor)
{
    tw t;
    assert_int_equal(tw_open(&t, path, flavor), 0);
    for (int k = first; k < first + n; k++) {
        char data[600], member[64], cls[16];
        payload(data, sizeof data, k);
        snprintf(member, sizeof member, "key%03d.jpg", k);
        assert_int_equal(tw_file(&t, member, data, 100 + (size_t)k), 0);
        snprintf(member, sizeof member, "key%03d.cls", k);
        snprintf(cls, sizeof cls, "%d\n", k % 5);
        assert_int_equal(tw_file(&t, member, cls, strlen(cls)), 0);
    }
    assert_int_equal(tw_close(&t), 0);
}

static void corrupt_byte(const char *path, uint64_t off, uint8_t xor_with)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
    b ^= xor_with;
    assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
    close(fd);
}

static void test_tar_errors_name_shard_member_and_offset(void **state)
{
    (void)state;
    char off_text[64];
    /* An image without its .cls: named by shard and key. */
    char *p = tu_tmp_path("nocls.tar");
    tw t;
    assert_int_equal(tw_open(&t, p, TW_USTAR), 0);
    assert_int_equal(tw_file(&t, "a.jpg", "xx", 2), 0);
    assert_int_equal(tw_file(&t, "a.cls", "1", 1), 0);
    assert_int_equal(tw_file(&t, "lonely.jpg", "xx", 2), 0);
    assert_int_equal(tw_file(&t, "lonely.txt", "xx", 2), 0);
    assert_int_equal(tw_file(&t, "c.jpg", "xx", 2), 0);
    assert_int_equal(tw_file(&t, "c.cls", "1", 1), 0);
    assert_int_equal(tw_close(&t), 0);
    tu_source_open_fails(p, NULL, p, "\"lonely\"", "no .cls", NULL);
    free(p);

    /* A label that is not a non-negative integer. */
    p = tu_tmp_path("badlabel.tar");
    assert_int_equal(tw_open(&t, p, TW_USTAR), 0);
    assert_int_equal(tw_file(&t, "a.jpg", "xx", 2), 0);
    assert_int_equal(tw_file(&t, "a.cls", "cat", 3), 0);
    assert_int_equal(tw_close(&t), 0);
    tu_source_open_fails(p, NULL, p, "a.cls", "\"cat\"", NULL);
    free(p);

    /* Bad checksum in the third header (offset 2 * 1024). */
    p = tu_tmp_path("badsum.tar");
    write_shard(p, 0, 4, TW_USTAR);
    corrupt_byte(p, 2048 + 10, 0x20); /* a byte of the member's name */
    snprintf(off_text, sizeof off_text, "offset %d", 2048);
    tu_source_open_fails(p, NULL, p, "checksum", off_text, NULL);
    free(p);

    /* Garbage: not a tar at all. */
    p = tu_tmp_path("garbage.tar");
    char junk[2048];
    payload(junk, sizeof junk, 99);
    assert_int_equal(tu_write_file(p, junk, sizeof junk), 0);
    tu_source_open_fails(p, NULL, p, "checksum", "offset 0", NULL);
    free(p);

    /* Truncated inside a member's data, and inside a header. */
    p = tu_tmp_path("trunc.tar");
    write_shard(p, 0, 4, TW_USTAR);
    /* members: key000.jpg (100 B -> 1 block) header at 0, .cls at 1024, key001.jpg at 2048 */
    assert_int_equal(truncate(p, 2048 + 512 + 50), 0);
    tu_source_open_fails(p, NULL, p, "truncated", "offset 2048", NULL);
    assert_int_equal(truncate(p, 2048 + 300), 0);
    tu_source_open_fails(p, NULL, p, "truncated", "offset 2048", NULL);
    /* Cut exactly at a header boundary without the end marker: accepted (the
     * members before it are whole). */
    assert_int_equal(truncate(p, 2048), 0);
    rf_source s;
    tu_source_open_ok(&s, p, NULL);
    assert_int_equal(s.n, 1);
    rf__source_close(&s);
    free(p);

    /* No samples (members without a key, webdataset's own); missing shard;
     * an empty file. */
    p = tu_tmp_path("nosamples.tar");
    assert_int_equal(tw_open(&t, p, TW_USTAR), 0);
    assert_int_equal(tw_file(&t, "noext", "xx", 2), 0);
    assert_int_equal(tw_file(&t, ".hidden.png", "xx", 2), 0);
    assert_int_equal(tw_file(&t, "__key__", "1", 1), 0);
    assert_int_equal(tw_close(&t), 0);
    tu_source_open_fails(p, NULL, p, "no samples", NULL);
    free(p);
    p = tu_tmp_path("missing.tar");
    tu_source_open_fails(p, NULL, p, "No such file", NULL);
    free(p);
    p = tu_tmp_path("empty.tar");
    assert_int_equal(tu_write_file(p, "", 0), 0);
    tu_source_open_fails(p, NULL, p, "no samples", NULL);
    free(p);

    /* A FIFO named like a shard fails instead of blocking the indexer. */
    p = tu_tmp_path("fifo.tar");
    assert_int_equal(mkfifo(p, 0644), 0);
    tu_source_open_fails(p, NULL, p, NULL);
    free(p);
}

/* Damaged shards (a byte changed, a tail cut, a header's size field
 * rewritten) index or fail with RF_E_SOURCE; whatever is indexed lies
 * inside the shard. Never a crash, a hang or an out-of-range extent. */
static void test_tar_damage_never_crashes(void **state)
{
    (void)state;
    char *good = tu_tmp_path("fuzz-good.tar"), *bad = tu_tmp_path("fuzz-bad.tar");
    write_shard(good, 0, 6, TW_PAX);
    size_t len;
    uint8_t *orig = tu_read_file(good, &len);
    assert_non_null(orig);
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    uint32_t rng = 99;
    int ok = 0, failed = 0;
    for (int round = 0; round < 400; round++) {
        memcpy(buf, orig, len);
        size_t n = len;
        rng = rng * 1664525u + 1013904223u;
        size_t at = (rng >> 4) % len;
        rng = rng * 1664525u + 1013904223u;
        switch (round % 4) {
        case 0:
            buf[at] ^= (uint8_t)(1u << (rng >> 29));
            break;
        case 1:
            n = at;
            break;
        case 2: /* a size field (with a valid checksum) claiming too much */
            at = at / 512 * 512;
            tw_octal((char *)buf + at + 124, 12, (uint64_t)(rng >> 8));
            memset(buf + at + 148, ' ', 8);
            {
                unsigned sum = 0;
                for (int i = 0; i < 512; i++)
                    sum += buf[at + (size_t)i];
                tw_octal((char *)buf + at + 148, 7, sum);
            }
            break;
        default:
            buf[at] = (uint8_t)(rng >> 24);
            buf[(at * 7) % len] = 0;
            break;
        }
        assert_int_equal(tu_write_file(bad, buf, n), 0);
        rf_source s;
        char err[1024];
        int rc = rf__source_open_ex(&s, bad, NULL, err, sizeof err);
        if (rc != 0 && rc != RF_E_SOURCE)
            fail_msg("round %d: rc %d: %s", round, rc, err);
        if (rc == 0) {
            ok++;
            for (int64_t i = 0; i < s.n; i++) {
                int ranged;
                uint64_t off, l;
                rf__source_extent(&s, i, &ranged, &off, &l);
                assert_true(off + l <= n);
            }
            rf__source_close(&s);
        } else {
            failed++;
            assert_null(s.arena);
        }
    }
    printf("  400 damaged shards: %d indexed, %d refused\n", ok, failed);
    free(orig);
    free(buf);
    free(good);
    free(bad);
}

static void test_tar_patterns_and_lists(void **state)
{
    (void)state;
    char *dir = tu_tmp_path("multi");
    assert_int_equal(tu_mkdir_p(dir), 0);
    for (int k = 0; k < 3; k++) {
        char *p = tu_tmp_path("multi/train-%04d.tar", k);
        write_shard(p, k * 5, 5, k); /* a different flavour per shard */
        free(p);
    }
    char spec[8192];
    int64_t want_n = 15;
    const char *forms[] = {"%s/train-{0000..0002}.tar", "%s/train-*.tar",
                           "%s/train-{0000,0001,0002}.tar"};
    for (int f = 0; f < 3; f++) {
        snprintf(spec, sizeof spec, forms[f], dir);
        rf_source s;
        tu_source_open_ok(&s, spec, NULL);
        assert_int_equal(s.n, want_n);
        assert_int_equal(s.nfiles, 3);
        for (int64_t i = 0; i < s.n; i++) {
            assert_int_equal(s.shard[i], i / 5);
            assert_int_equal(rf__source_label(&s, i), i % 5);
            char data[600];
            payload(data, sizeof data, (int)i);
            expect_member(&s, i, data, 100 + (size_t)i);
        }
        rf__source_close(&s);
    }
    /* A newline-separated list, in the given order (not sorted). */
    snprintf(spec, sizeof spec, "%s/train-0002.tar\n%s/train-0000.tar\n\n%s/train-0001.tar\n", dir,
             dir, dir);
    rf_source s;
    tu_source_open_ok(&s, spec, NULL);
    assert_int_equal(s.n, 15);
    assert_int_equal(rf__source_label(&s, 0), 10 % 5);
    char data[600];
    payload(data, sizeof data, 10);
    expect_member(&s, 0, data, 110);
    rf__source_close(&s);
    /* Entries of a list may be patterns too. */
    snprintf(spec, sizeof spec, "%s/train-000{0..1}.tar\n%s/train-0002.tar", dir, dir);
    tu_source_open_ok(&s, spec, NULL);
    assert_int_equal(s.n, 15);
    rf__source_close(&s);
    /* A pattern naming a missing shard, a list holding a non-tar. */
    snprintf(spec, sizeof spec, "%s/train-{0000..0003}.tar", dir);
    tu_source_open_fails(spec, NULL, "train-0003.tar", NULL);
    snprintf(spec, sizeof spec, "%s/train-0000.tar\n%s", dir, dir);
    tu_source_open_fails(spec, NULL, ".tar shards", NULL);
    snprintf(spec, sizeof spec, "%s/nothing-*.tar", dir);
    tu_source_open_fails(spec, NULL, "matches no files", NULL);
    free(dir);
}

int main(void)
{
    alarm(240); /* a hang fails the run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tar_members_indexed_as_ranges),
        cmocka_unit_test(test_tar_long_names),
        cmocka_unit_test(test_tar_errors_name_shard_member_and_offset),
        cmocka_unit_test(test_tar_damage_never_crashes),
        cmocka_unit_test(test_tar_patterns_and_lists),
    };
    return cmocka_run_group_tests(tests, tu_tmp_setup, tu_tmp_teardown);
}
