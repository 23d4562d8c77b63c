/*
 * test_shards.c - sources at scale (lib/source/source.c) and their trip through the
 * loader: WebDataset tar shards, brace and glob patterns, fixed-size record
 * files, distributed ranks and exact resume over them.
 *
 * Tar shards are written by tests/tarwrite.h with every header flavour the
 * indexer must read (ustar with a prefix, GNU 'L' long names, pax 'x'
 * headers) and the damage it must report (a bad checksum, truncation). The
 * main promise checked: a tar copy of an image folder gives byte-identical
 * batches (images, labels) to the folder itself.
 *
 * Files live in a temporary folder under $RINGFEED_TEST_TMP, $TMPDIR or
 * /tmp, removed afterwards.
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
#include "source.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testutil.h"

/* ----------------------------------------------------------------- helpers */

static char *g_tmp;

/* g_tmp/<fmt...>, malloc'd. */
static char *tmp_path(const char *fmt, ...)
{
    char rel[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    char *p = NULL;
    assert_true(asprintf(&p, "%s/%s", g_tmp, rel) > 0);
    return p;
}

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

/* ------------------------------------------------------------ patterns */

typedef struct {
    char items[64][256];
    int n;
} collected;

static int collect_cb(const char *path, void *ctx)
{
    collected *c = ctx;
    if (c->n >= 64)
        return -100;
    snprintf(c->items[c->n++], sizeof c->items[0], "%s", path);
    return 0;
}

static void expect_expansion(const char *pattern, const char *const *want, int nwant)
{
    collected c = {.n = 0};
    char err[512] = "";
    int rc = rf__source_expand(pattern, collect_cb, &c, err, sizeof err);
    if (rc != 0)
        fail_msg("expand(%s) = %d: %s", pattern, rc, err);
    if (c.n != nwant)
        fail_msg("expand(%s): %d paths, want %d", pattern, c.n, nwant);
    for (int i = 0; i < nwant; i++)
        if (strcmp(c.items[i], want[i]) != 0)
            fail_msg("expand(%s)[%d] = %s, want %s", pattern, i, c.items[i], want[i]);
}

#define EXPECT(pattern, ...)                                                                       \
    do {                                                                                           \
        const char *const w_[] = {__VA_ARGS__};                                                    \
        expect_expansion(pattern, w_, (int)(sizeof w_ / sizeof w_[0]));                            \
    } while (0)

static void test_pattern_braces(void **state)
{
    (void)state;
    EXPECT("s/train-{0000..0003}.tar", "s/train-0000.tar", "s/train-0001.tar", "s/train-0002.tar",
           "s/train-0003.tar");
    EXPECT("x{1..3}", "x1", "x2", "x3");
    EXPECT("x{3..1}", "x3", "x2", "x1");
    EXPECT("x{08..11}", "x08", "x09", "x10", "x11");
    EXPECT("x{8..011}", "x008", "x009", "x010", "x011");
    EXPECT("x{0..10..5}", "x0", "x5", "x10");
    EXPECT("{a,b}-{1..2}", "a-1", "a-2", "b-1", "b-2");
    EXPECT("{x,y{1,2},}z", "xz", "y1z", "y2z", "z");
    EXPECT("a{b}c", "a{b}c"); /* one alternative: literal, as bash */
    EXPECT("a{b", "a{b");     /* unbalanced: literal */
    EXPECT("a{1..x}{2,3}", "a{1..x}2", "a{1..x}3");
    EXPECT("plain.tar", "plain.tar");
    /* The callback's refusal stops the expansion and is returned. */
    collected c = {.n = 0};
    char err[512] = "";
    assert_int_equal(rf__source_expand("{0..99999999}", collect_cb, &c, err, sizeof err), -100);
    assert_int_equal(c.n, 64);
}

static int count_cb(const char *path, void *ctx)
{
    (void)path;
    (*(int64_t *)ctx)++;
    return 0;
}

static void test_pattern_limit_and_glob(void **state)
{
    (void)state;
    int64_t n = 0;
    char err[512] = "";
    int rc = rf__source_expand("{0..9999999}", count_cb, &n, err, sizeof err);
    assert_int_equal(rc, RF_E_SOURCE);
    assert_non_null(strstr(err, "more than"));
    printf("  %s\n", err);

    char *dir = tmp_path("globs");
    assert_int_equal(tu_mkdir_p(dir), 0);
    const char *names[] = {"b.tar", "a.tar", "B.tar", "c.txt", "a10.tar", "a9.tar"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *p = tmp_path("globs/%s", names[i]);
        assert_int_equal(tu_write_file(p, "", 0), 0);
        free(p);
    }
    char pat[4096], w[6][4096];
    snprintf(pat, sizeof pat, "%s/*.tar", dir);
    const char *order[] = {"B.tar", "a.tar", "a10.tar", "a9.tar", "b.tar"}; /* byte order */
    for (int i = 0; i < 5; i++)
        snprintf(w[i], sizeof w[i], "%s/%s", dir, order[i]);
    const char *const want[] = {w[0], w[1], w[2], w[3], w[4]};
    expect_expansion(pat, want, 5);
    snprintf(pat, sizeof pat, "%s/{a,b}*.tar", dir);
    snprintf(w[0], sizeof w[0], "%s/a.tar", dir);
    snprintf(w[1], sizeof w[1], "%s/a10.tar", dir);
    snprintf(w[2], sizeof w[2], "%s/a9.tar", dir);
    snprintf(w[3], sizeof w[3], "%s/b.tar", dir);
    const char *const want2[] = {w[0], w[1], w[2], w[3]};
    expect_expansion(pat, want2, 4);

    collected c = {.n = 0};
    snprintf(pat, sizeof pat, "%s/*.nothing", dir);
    rc = rf__source_expand(pat, collect_cb, &c, err, sizeof err);
    assert_int_equal(rc, RF_E_SOURCE);
    assert_non_null(strstr(err, "matches no files"));
    free(dir);
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
    char *shard = tmp_path("basic.tar");
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
        char *shard = tmp_path("long%d.tar", flavor);
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
    char *p = tmp_path("nocls.tar");
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
    p = tmp_path("badlabel.tar");
    assert_int_equal(tw_open(&t, p, TW_USTAR), 0);
    assert_int_equal(tw_file(&t, "a.jpg", "xx", 2), 0);
    assert_int_equal(tw_file(&t, "a.cls", "cat", 3), 0);
    assert_int_equal(tw_close(&t), 0);
    tu_source_open_fails(p, NULL, p, "a.cls", "\"cat\"", NULL);
    free(p);

    /* Bad checksum in the third header (offset 2 * 1024). */
    p = tmp_path("badsum.tar");
    write_shard(p, 0, 4, TW_USTAR);
    corrupt_byte(p, 2048 + 10, 0x20); /* a byte of the member's name */
    snprintf(off_text, sizeof off_text, "offset %d", 2048);
    tu_source_open_fails(p, NULL, p, "checksum", off_text, NULL);
    free(p);

    /* Garbage: not a tar at all. */
    p = tmp_path("garbage.tar");
    char junk[2048];
    payload(junk, sizeof junk, 99);
    assert_int_equal(tu_write_file(p, junk, sizeof junk), 0);
    tu_source_open_fails(p, NULL, p, "checksum", "offset 0", NULL);
    free(p);

    /* Truncated inside a member's data, and inside a header. */
    p = tmp_path("trunc.tar");
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
    p = tmp_path("nosamples.tar");
    assert_int_equal(tw_open(&t, p, TW_USTAR), 0);
    assert_int_equal(tw_file(&t, "noext", "xx", 2), 0);
    assert_int_equal(tw_file(&t, ".hidden.png", "xx", 2), 0);
    assert_int_equal(tw_file(&t, "__key__", "1", 1), 0);
    assert_int_equal(tw_close(&t), 0);
    tu_source_open_fails(p, NULL, p, "no samples", NULL);
    free(p);
    p = tmp_path("missing.tar");
    tu_source_open_fails(p, NULL, p, "No such file", NULL);
    free(p);
    p = tmp_path("empty.tar");
    assert_int_equal(tu_write_file(p, "", 0), 0);
    tu_source_open_fails(p, NULL, p, "no samples", NULL);
    free(p);

    /* A FIFO named like a shard fails instead of blocking the indexer. */
    p = tmp_path("fifo.tar");
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
    char *good = tmp_path("fuzz-good.tar"), *bad = tmp_path("fuzz-bad.tar");
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
    char *dir = tmp_path("multi");
    assert_int_equal(tu_mkdir_p(dir), 0);
    for (int k = 0; k < 3; k++) {
        char *p = tmp_path("multi/train-%04d.tar", k);
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

/* ------------------------------------------------------------ records */

static void write_records(const char *path, size_t header, size_t rec, int n, size_t tail, int seed)
{
    size_t len = header + rec * (size_t)n + tail;
    uint8_t *b = malloc(len + 1);
    assert_non_null(b);
    for (size_t i = 0; i < len; i++)
        b[i] = (uint8_t)(i * 31 + (size_t)seed * 7 + i / 251);
    assert_int_equal(tu_write_file(path, b, len), 0);
    free(b);
}

static void test_records_indexed_partial_tail_ignored(void **state)
{
    (void)state;
    char *a = tmp_path("rec-a.bin"), *b = tmp_path("rec-b.bin"), *c = tmp_path("rec-c.bin");
    write_records(a, 16, 12, 10, 5, 1); /* 10 records, a partial one ignored */
    write_records(b, 16, 12, 0, 11, 2); /* no complete record */
    write_records(c, 16, 12, 3, 0, 3);
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
    snprintf(spec, sizeof spec, "%s/rec-{a,c}.bin", g_tmp);
    tu_source_open_ok(&s, spec, &o);
    assert_int_equal(s.n, 13);
    rf__source_close(&s);
    /* Header only, header larger than the file, a folder. */
    tu_source_open_fails(b, &o, b, "no complete record", NULL);
    rf_source_opts big = {.record_size = 12, .header_size = 1 << 20};
    tu_source_open_fails(a, &big, "no complete record", NULL);
    tu_source_open_fails(g_tmp, &o, "record", NULL);
    /* record_size 1: every byte a record */
    rf_source_opts one = {.record_size = 1};
    tu_source_open_ok(&s, c, &one);
    assert_int_equal(s.n, 16 + 36);
    rf__source_close(&s);
    free(a);
    free(b);
    free(c);
}

/* ------------------------------------------------------------ loader */

#define CLASSES 3
#define PER_CLASS 10
#define N (CLASSES * PER_CLASS)

static char *g_folder;        /* image folder made by tu_make_folder */
static char *g_shard_pattern; /* the same images as 4 tar shards */

/* Copies the image folder into 4 shards, in order, 8 samples per shard, keys
 * "class%02d/img%04d" (members key.jpg and key.cls), as a WebDataset writer
 * would. */
static void make_tar_copy(void)
{
    char *dir = tmp_path("folder-shards");
    assert_int_equal(tu_mkdir_p(dir), 0);
    tu_folder_opts f = {CLASSES, PER_CLASS, 120, 90, 90, 5, TU_MIX_CYCLE};
    tw t = {0};
    int shard = -1;
    for (int i = 0; i < N; i++) {
        if (i / 8 != shard) {
            if (shard >= 0)
                assert_int_equal(tw_close(&t), 0);
            shard = i / 8;
            char *p = tmp_path("folder-shards/part-%02d.tar", shard);
            assert_int_equal(tw_open(&t, p, shard % 3), 0);
            free(p);
        }
        char path[4096];
        assert_int_equal(tu_folder_path(path, sizeof path, g_folder, &f, i), 0);
        size_t len;
        uint8_t *jpg = tu_read_file(path, &len);
        assert_non_null(jpg);
        const char *rel = path + strlen(g_folder) + 1;
        char key[512], member[600], cls[16];
        snprintf(key, sizeof key, "%.*s", (int)(strrchr(rel, '.') - rel), rel);
        snprintf(member, sizeof member, "%s.jpg", key);
        assert_int_equal(tw_file(&t, member, jpg, len), 0);
        snprintf(member, sizeof member, "%s.cls", key);
        snprintf(cls, sizeof cls, "%d", i / PER_CLASS);
        assert_int_equal(tw_file(&t, member, cls, strlen(cls)), 0);
        free(jpg);
    }
    assert_int_equal(tw_close(&t), 0);
    assert_true(asprintf(&g_shard_pattern, "%s/part-{00..03}.tar", dir) > 0);
    free(dir);
}

static rf_loader *make(const char *src, int workers, int batch, int transform)
{
    return TU_LOADER(src, {RF_P_BATCH_SIZE, batch}, {RF_P_IMAGE_SIZE, 40},
                     {RF_P_NUM_WORKERS, workers}, {RF_P_TRANSFORM, transform}, {RF_P_FLIP, 1},
                     {RF_P_SEED, 77});
}

/* Hashes of each batch of an epoch from batch `from` on (data, labels,
 * samples); returns the number of batches. */
static int64_t batch_hashes(rf_loader *l, int64_t epoch, int64_t from, uint64_t *out, int cap)
{
    assert_int_equal(rf_loader_seek(l, epoch, from), 0);
    rf_batch *b;
    int rc;
    int64_t k = 0;
    while ((rc = rf_loader_next(l, &b)) == RF_OK) {
        assert_true(k < cap);
        out[k++] = tu_batch_hash(TU_FNV_INIT, b);
        rf_batch_release(b);
    }
    if (rc != RF_END_OF_EPOCH)
        fail_msg("next: %d %s", rc, rf_loader_errmsg(l));
    return k;
}

static void test_tar_copy_matches_folder(void **state)
{
    (void)state;
    const int transforms[] = {RF_TRANSFORM_CENTER, RF_TRANSFORM_RANDOM_RESIZED_CROP};
    for (int ti = 0; ti < 2; ti++) {
        rf_loader *ref = make(g_folder, 2, 7, transforms[ti]);
        tu_start(ref);
        uint64_t want[16], got[16];
        int64_t nb = batch_hashes(ref, 1, 0, want, 16);
        assert_int_equal(nb, (N + 6) / 7);
        for (int backend = RF_IO_URING; backend <= RF_IO_PREAD; backend++) {
            rf_loader *l = make(g_shard_pattern, 3, 7, transforms[ti]);
            assert_int_equal(rf_loader_set_param(l, RF_P_IO_BACKEND, backend), 0);
            tu_start(l);
            assert_int_equal(rf_loader_num_samples(l), N);
            for (int64_t i = 0; i < N; i++)
                assert_int_equal(rf_loader_sample_label(l, i), rf_loader_sample_label(ref, i));
            assert_int_equal(batch_hashes(l, 1, 0, got, 16), nb);
            for (int64_t k = 0; k < nb; k++)
                if (got[k] != want[k])
                    fail_msg("transform %d backend %d: batch %lld differs from the folder's",
                             transforms[ti], backend, (long long)k);
            char stats[8192];
            rf_loader_stats_json(l, stats, sizeof stats);
            assert_non_null(strstr(stats, "\"index_bytes\""));
            rf_loader_destroy(l);
        }
        rf_loader_destroy(ref);
    }
}

/* A valid tar with a corrupt JPEG: the error names shard.tar:key.jpg. */
static void test_tar_bad_member_named(void **state)
{
    (void)state;
    char *p = tmp_path("badjpeg.tar");
    tu_jpeg_opts o = {64, 48, 90, TU_420, 0, 0, 0, 5, 0, 0};
    uint8_t *jpg;
    size_t len;
    assert_int_equal(tu_make_jpeg(&o, &jpg, &len), 0);
    tw t;
    assert_int_equal(tw_open(&t, p, TW_USTAR), 0);
    for (int k = 0; k < 4; k++) {
        char m[64];
        snprintf(m, sizeof m, "s%d.jpg", k);
        assert_int_equal(tw_file(&t, m, jpg, k == 2 ? len / 2 : len), 0); /* s2 truncated */
        snprintf(m, sizeof m, "s%d.cls", k);
        assert_int_equal(tw_file(&t, m, "1", 1), 0);
    }
    assert_int_equal(tw_close(&t), 0);
    free(jpg);
    rf_loader *l = make(p, 2, 4, RF_TRANSFORM_CENTER);
    assert_int_equal(rf_loader_set_param(l, RF_P_SHUFFLE, 0), 0);
    tu_start(l);
    rf_batch *b;
    int rc = rf_loader_next(l, &b);
    assert_int_equal(rc, RF_E_DECODE);
    char want[4200];
    snprintf(want, sizeof want, "%s:s2.jpg", p);
    if (!strstr(rf_loader_errmsg(l), want))
        fail_msg("message \"%s\" lacks \"%s\"", rf_loader_errmsg(l), want);
    printf("  %s\n", rf_loader_errmsg(l));
    rf_loader_destroy(l);

    /* on_error = skip: recorded in the stats with the same name */
    l = make(p, 2, 4, RF_TRANSFORM_CENTER);
    assert_int_equal(rf_loader_set_param(l, RF_P_ON_ERROR, RF_ON_ERROR_SKIP), 0);
    tu_start(l);
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    rf_batch_release(b);
    char stats[16384];
    rf_loader_stats_json(l, stats, sizeof stats);
    if (!strstr(stats, "s2.jpg"))
        fail_msg("stats lack the bad member: %s", stats);
    rf_loader_destroy(l);
    free(p);
}

static rf_loader *make_records(const char *src, int64_t rec, int64_t header, int dtype, int workers,
                               int batch)
{
    return TU_LOADER(src, {RF_P_RECORD_SIZE, rec}, {RF_P_HEADER_SIZE, header}, {RF_P_DTYPE, dtype},
                     {RF_P_TRANSFORM, RF_TRANSFORM_NONE}, {RF_P_BATCH_SIZE, batch},
                     {RF_P_NUM_WORKERS, workers}, {RF_P_SEED, 5});
}

static void test_records_loader(void **state)
{
    (void)state;
    char *a = tmp_path("tok-a.bin"), *c = tmp_path("tok-c.bin");
    write_records(a, 64, 24, 37, 7, 11);
    write_records(c, 64, 24, 20, 0, 12);
    char spec[8192];
    snprintf(spec, sizeof spec, "%s\n%s", a, c);
    size_t alen, clen;
    uint8_t *adata = tu_read_file(a, &alen), *cdata = tu_read_file(c, &clen);
    uint64_t ref[64];
    int64_t nref = -1;
    for (int backend = RF_IO_URING; backend <= RF_IO_PREAD; backend++) {
        for (int workers = 1; workers <= 3; workers += 2) {
            rf_loader *l = make_records(spec, 24, 64, RF_DTYPE_UINT16, workers, 8);
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
            int64_t nb = batch_hashes(l, 2, 0, h, 64);
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
        rf_loader *l = make_records(a, 12, 0, dt, 1, 4);
        assert_int_equal(rf_loader_start(l), 12 % sizes[dt] ? RF_E_INVALID : RF_OK);
        if (12 % sizes[dt])
            assert_non_null(strstr(rf_loader_errmsg(l), "multiple"));
        rf_loader_destroy(l);
    }
    rf_loader *l = make_records(a, 24, 0, RF_DTYPE_UINT8, 1, 4);
    assert_int_equal(rf_loader_set_param(l, RF_P_TRANSFORM, RF_TRANSFORM_CENTER), 0);
    assert_int_equal(rf_loader_start(l), RF_E_INVALID);
    assert_non_null(strstr(rf_loader_errmsg(l), "transform none"));
    rf_loader_destroy(l);
    int64_t lo, hi;
    assert_int_equal(rf_param_bounds(RF_P_DTYPE, &lo, &hi), 0);
    assert_int_equal(lo, RF_DTYPE_UINT8);
    assert_int_equal(hi, RF_DTYPE_INT64);

    /* A file that shrank after indexing: a short read names the file and the offset. */
    for (int backend = RF_IO_URING; backend <= RF_IO_PREAD; backend++) {
        char *t = tmp_path("shrink-%d.bin", backend);
        write_records(t, 0, 100, 10, 0, 4);
        l = make_records(t, 100, 0, RF_DTYPE_UINT8, 1, 10);
        assert_int_equal(rf_loader_set_param(l, RF_P_SHUFFLE, 0), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_IO_BACKEND, backend), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_PREFETCH, 2), 0);
        tu_start(l);
        /* the first batch may already be in flight; stop it by seeking after the truncation */
        assert_int_equal(truncate(t, 950), 0);
        assert_int_equal(rf_loader_seek(l, 1, 0), 0);
        rf_batch *b;
        int rc = rf_loader_next(l, &b);
        assert_int_equal(rc, RF_E_IO);
        char want[4200];
        snprintf(want, sizeof want, "%s at offset 900", t);
        if (!strstr(rf_loader_errmsg(l), want))
            fail_msg("message \"%s\" lacks \"%s\"", rf_loader_errmsg(l), want);
        printf("  %s\n", rf_loader_errmsg(l));
        rf_loader_destroy(l);
        free(t);
    }
    free(a);
    free(c);
}

/* DistributedSampler's split over a tar source: for world sizes 1, 2, 3, 8
 * the ranks' samples are disjoint but for the padding, cover the dataset,
 * and the batch counts are DistributedSampler's. */
static void test_distributed_tar(void **state)
{
    (void)state;
    const int sizes[] = {1, 2, 3, 8};
    const int64_t bs = 4;
    int64_t perm[N]; /* the global order of world_size 1 */
    for (int si = 0; si < 4; si++) {
        int ws = sizes[si];
        int64_t per_rank = (N + ws - 1) / ws;
        int64_t *padded = calloc((size_t)(per_rank * ws), sizeof *padded);
        assert_non_null(padded);
        for (int r = 0; r < ws; r++) {
            for (int drop = 0; drop <= 1; drop++) {
                rf_loader *l = make(g_shard_pattern, 2, (int)bs, RF_TRANSFORM_CENTER);
                assert_int_equal(rf_loader_set_param(l, RF_P_RANK, r), 0);
                assert_int_equal(rf_loader_set_param(l, RF_P_WORLD_SIZE, ws), 0);
                assert_int_equal(rf_loader_set_param(l, RF_P_DROP_LAST, drop), 0);
                assert_int_equal(rf_loader_set_param(l, RF_P_IMAGE_SIZE, 16), 0);
                tu_start(l);
                int64_t want_nb = drop ? per_rank / bs : (per_rank + bs - 1) / bs;
                assert_int_equal(rf_loader_num_batches(l), want_nb);
                if (drop) {
                    rf_loader_destroy(l);
                    continue;
                }
                assert_int_equal(rf_loader_set_epoch(l, 3), 0);
                rf_batch *b;
                int64_t k = 0;
                while (rf_loader_next(l, &b) == RF_OK) {
                    for (int64_t i = 0; i < rf_batch_count(b); i++, k++) {
                        assert_true(k < per_rank);
                        padded[k * ws + r] = rf_batch_samples(b)[i];
                        assert_int_equal(rf_batch_labels(b)[i],
                                         rf_loader_sample_label(l, rf_batch_samples(b)[i]));
                    }
                    rf_batch_release(b);
                }
                assert_int_equal(k, per_rank);
                rf_loader_destroy(l);
            }
        }
        /* The first N entries of the padded global order are a permutation;
         * the padding repeats its head, as DistributedSampler wraps. */
        int seen[N] = {0};
        for (int64_t i = 0; i < N; i++) {
            assert_true(padded[i] >= 0 && padded[i] < N);
            seen[padded[i]]++;
        }
        for (int i = 0; i < N; i++)
            assert_int_equal(seen[i], 1);
        for (int64_t i = N; i < per_rank * ws; i++)
            assert_int_equal(padded[i], padded[i - N]);
        /* Every rank draws the same global permutation (no per-rank seed):
         * interleaved, the ranks' orders give world_size 1's order. */
        if (ws == 1)
            memcpy(perm, padded, sizeof perm);
        assert_memory_equal(padded, perm, sizeof perm);
        free(padded);
    }
}

/* Exact resume on shards and records: stop after k batches, seek a fresh
 * loader with another worker count, the rest is byte-identical. */
static void test_resume_tar_and_records(void **state)
{
    (void)state;
    uint64_t want[16], got[16];
    rf_loader *a = make(g_shard_pattern, 1, 4, RF_TRANSFORM_RANDOM_RESIZED_CROP);
    tu_start(a);
    int64_t nb = batch_hashes(a, 2, 0, want, 16);
    rf_loader_destroy(a);
    for (int64_t k = 1; k < nb; k += 3) {
        rf_loader *b = make(g_shard_pattern, 4, 4, RF_TRANSFORM_RANDOM_RESIZED_CROP);
        tu_start(b);
        assert_int_equal(batch_hashes(b, 2, k, got, 16), nb - k);
        assert_memory_equal(got, want + k, (size_t)(nb - k) * sizeof *got);
        int64_t e, bi;
        assert_int_equal(rf_loader_tell(b, &e, &bi), 0);
        assert_int_equal(e, 2);
        assert_int_equal(bi, nb);
        rf_loader_destroy(b);
    }
    char *r = tmp_path("resume.bin");
    write_records(r, 0, 32, 50, 3, 9);
    a = make_records(r, 32, 0, RF_DTYPE_INT32, 1, 6);
    tu_start(a);
    nb = batch_hashes(a, 4, 0, want, 16);
    rf_loader_destroy(a);
    rf_loader *b = make_records(r, 32, 0, RF_DTYPE_INT32, 3, 6);
    tu_start(b);
    assert_int_equal(batch_hashes(b, 4, 5, got, 16), nb - 5);
    assert_memory_equal(got, want + 5, (size_t)(nb - 5) * sizeof *got);
    rf_loader_destroy(b);
    free(r);
}

/* ------------------------------------------------------------------- main */

static int setup(void **state)
{
    (void)state;
    g_tmp = tu_tempdir("shards");
    if (!g_tmp)
        return -1;
    g_folder = tmp_path("folder");
    if (tu_make_folder(g_folder, CLASSES, PER_CLASS, 120, 90, 5) != 0)
        return -1;
    make_tar_copy();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_tempdir_remove(&g_tmp);
    free(g_folder);
    free(g_shard_pattern);
    return 0;
}

int main(void)
{
    alarm(240); /* a hang fails the run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern_braces),
        cmocka_unit_test(test_pattern_limit_and_glob),
        cmocka_unit_test(test_tar_members_indexed_as_ranges),
        cmocka_unit_test(test_tar_long_names),
        cmocka_unit_test(test_tar_errors_name_shard_member_and_offset),
        cmocka_unit_test(test_tar_damage_never_crashes),
        cmocka_unit_test(test_tar_patterns_and_lists),
        cmocka_unit_test(test_records_indexed_partial_tail_ignored),
        cmocka_unit_test(test_tar_copy_matches_folder),
        cmocka_unit_test(test_tar_bad_member_named),
        cmocka_unit_test(test_records_loader),
        cmocka_unit_test(test_distributed_tar),
        cmocka_unit_test(test_resume_tar_and_records),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
