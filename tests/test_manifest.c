/*
 * test_manifest.c - the shard index in a ringfeed-pack manifest.json
 * (lib/source/manifest.c) and its use by the tar source (lib/source/tar.c).
 *
 * The parser reads bytes from memory: a good manifest gives its shards,
 * samples and members; every cut of it and every one-byte change must parse
 * or fail cleanly (ASan / valgrind catch a stray read); an inconsistent
 * index (members overlapping, past the shard's end) is not used. Through
 * rf__source_open_ex, shards written here with a manifest beside them give
 * the same index (member names, labels, offsets, extras spans) as the header
 * walk of the same shards without it, and the manifest is used only while
 * the shards are the ones it describes: appended bytes, or a member renamed
 * at the same size, fall back to the walk. The index from the manifest
 * alone (a remote shard not fetched yet) is the walk's too, and the check of
 * its first and last member headers, made when the shard arrives, catches
 * another name, size or place.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kinds.h"
#include "manifest.h"
#include "manifestset.h"
#include "ringfeed.h"
#include "source.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testutil.h"

static const char GOOD[] =
    "{\"format\": \"ringfeed-pack 1\", \"source\": \"a\\\"b\\u00e9\", \"samples\": 2,\n"
    " \"classes\": [\"x\", \"y\"], \"options\": {\"max_side\": 320, \"shuffle\": false,\n"
    " \"f\": -1.5e3, \"n\": null},\n"
    " \"shards\": [\n"
    "  {\"name\": \"s-1.tar\", \"samples\": 2, \"bytes\": 6144, \"index\": [\n"
    "    [\"000000\", 3, \"jpg\", 512, 100, \"cls\", 1536, 1],\n"
    "    [\"000001\", -1, \"png\", 2560, 1000, \"txt\", 4096, 5]]},\n"
    "  {\"name\": \"s-0.tar\", \"bytes\": 100}\n"
    " ], \"skipped_samples\": []}\n";

static void test_parse_good(void **state)
{
    (void)state;
    rf_manifest m;
    char err[256];
    assert_int_equal(rf__manifest_parse(GOOD, strlen(GOOD), &m, err, sizeof err), 0);
    assert_int_equal(m.nshards, 2);
    const rf_manifest_shard *s = rf__manifest_find(&m, "s-1.tar", 6144);
    assert_non_null(s);
    assert_null(rf__manifest_find(&m, "s-1.tar", 6145)); /* another size */
    assert_null(rf__manifest_find(&m, "s-0.tar", 100));  /* no index */
    assert_null(rf__manifest_find(&m, "s-2.tar", 6144));
    assert_ptr_equal(rf__manifest_named(&m, "s-1.tar"), s);
    assert_non_null(rf__manifest_named(&m, "s-0.tar"));
    assert_null(rf__manifest_named(&m, "s-2.tar"));
    /* the ends kept by the parse */
    rf_tar_ends e;
    rf__tar_manifest_ends(&m, s, &e);
    assert_string_equal(e.key[0], "000000");
    assert_string_equal(e.ext[0], "jpg");
    assert_int_equal(e.off[0], 512);
    assert_string_equal(e.key[1], "000001");
    assert_string_equal(e.ext[1], "txt");
    assert_int_equal(e.off[1], 4096);
    assert_int_equal(e.len[1], 5);
    /* the samples, read again from the bytes */
    rf_manifest_iter it;
    rf__manifest_iter(&it, &m, s);
    assert_int_equal(rf__manifest_sample(&it), 1);
    assert_string_equal(it.key, "000000");
    assert_int_equal(it.label, 3);
    assert_int_equal(rf__manifest_member(&it), 1);
    assert_string_equal(it.ext, "jpg");
    assert_int_equal(it.off, 512);
    assert_int_equal(it.len, 100);
    /* the rest of the sample is skipped by the next one */
    assert_int_equal(rf__manifest_sample(&it), 1);
    assert_string_equal(it.key, "000001");
    assert_int_equal(it.label, -1);
    int members = 0;
    while (rf__manifest_member(&it) == 1)
        members++;
    assert_int_equal(members, 2);
    assert_string_equal(it.ext, "txt");
    assert_int_equal(it.off, 4096);
    assert_int_equal(it.len, 5);
    assert_int_equal(rf__manifest_sample(&it), 0);
    assert_int_equal(rf__manifest_sample(&it), 0);
    rf__manifest_iter_free(&it);
    rf__manifest_free(&m);
    rf__manifest_free(&m); /* twice: a no-op */
}

static int parses(const char *text, size_t n)
{
    rf_manifest m;
    char err[256];
    int rc = rf__manifest_parse(text, n, &m, err, sizeof err);
    if (rc != 0)
        assert_true(err[0] != '\0');
    /* what parsed reads again, to its end, as an index does */
    for (size_t i = 0; rc == 0 && i < m.nshards; i++) {
        if (!m.shards[i].indexed)
            continue;
        rf_manifest_iter it;
        rf__manifest_iter(&it, &m, &m.shards[i]);
        int r, members = 0;
        while ((r = rf__manifest_sample(&it)) == 1)
            while ((r = rf__manifest_member(&it)) == 1)
                members++;
        assert_int_equal(r, 0);
        assert_true(members > 0);
        rf__manifest_iter_free(&it);
    }
    rf__manifest_free(&m);
    return rc;
}

/* Every cut of the text fails (it ends before the object does), and every
 * one-byte change parses or fails without reading outside the bytes: each
 * is a fresh malloc of exactly n bytes, so ASan / valgrind see a stray read. */
static void test_parse_cut_and_changed(void **state)
{
    (void)state;
    size_t n = strlen(GOOD);
    for (size_t k = 0; k < n - 1; k++) {
        char *cut = malloc(k ? k : 1);
        memcpy(cut, GOOD, k);
        assert_int_not_equal(parses(cut, k), 0);
        free(cut);
    }
    static const char subst[] = "\"\\{}[],:0-9ue. \x01\xff";
    for (size_t k = 0; k < n; k++) {
        for (size_t c = 0; c < sizeof subst - 1; c++) {
            char *t = malloc(n);
            memcpy(t, GOOD, n);
            t[k] = subst[c];
            (void)parses(t, n);
            free(t);
        }
    }
}

static void test_parse_refused(void **state)
{
    (void)state;
    /* too deep a nesting; a size past 2^64 */
    static const char deep[] =
        "{\"format\": \"ringfeed-pack 1\", \"x\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
        "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]], \"shards\": []}";
    static const char huge[] =
        "{\"format\": \"ringfeed-pack 1\", \"shards\": [{\"name\": \"a.tar\", \"bytes\": "
        "99999999999999999999}]}";
    static const char *const bad[] = {
        "",
        "[]",
        "{\"format\": \"ringfeed-pack 2\", \"shards\": []}",
        "{\"shards\": []}",
        "{\"format\": \"ringfeed-pack 1\", \"shards\": []} x",
        "{\"format\": \"ringfeed-pack 1\", \"shards\": [{\"name\": \"a.tar\"}]}",
        "{\"format\": \"ringfeed-pack 1\", \"shards\": [{\"name\": \"a.tar\", \"bytes\": 1.5}]}",
        "{\"format\": \"ringfeed-pack 1\", \"shards\": [{\"name\": \"a\\u0000\", \"bytes\": 1}]}",
        deep,
        huge,
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_not_equal(parses(bad[i], strlen(bad[i])), 0);
    const char *ok = "{\"format\": \"ringfeed-pack 1\", \"shards\": []}";
    assert_int_equal(parses(ok, strlen(ok)), 0);
}

/* An index that cannot describe a tar is kept but not used. */
static void test_inconsistent_index_unused(void **state)
{
    (void)state;
    static const char *const idx[] = {
        "[[\"k\", 0, \"jpg\", 0, 10]]",                      /* no room for its header */
        "[[\"k\", 0, \"jpg\", 512, 600, \"cls\", 1024, 1]]", /* overlaps the previous data */
        "[[\"k\", 0, \"jpg\", 512, 5000]]",                  /* past the end */
        "[[\"k\", 0, \"a/b\", 512, 10]]",                    /* not an extension */
        "[[\"k\", 0]]",                                      /* no members */
        "[]",                                                /* no samples */
    };
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"format\": \"ringfeed-pack 1\", \"shards\": [{\"name\": \"a.tar\", "
                 "\"bytes\": 4096, \"index\": %s}]}",
                 idx[i]);
        rf_manifest m;
        char err[256];
        assert_int_equal(rf__manifest_parse(text, strlen(text), &m, err, sizeof err), 0);
        assert_null(rf__manifest_find(&m, "a.tar", 4096));
        rf__manifest_free(&m);
    }
    /* the same name twice: neither is trusted */
    const char *twice = "{\"format\": \"ringfeed-pack 1\", \"shards\": ["
                        "{\"name\": \"a.tar\", \"bytes\": 4096, \"index\": [[\"k\", 0, \"jpg\", "
                        "512, 1]]}, {\"name\": \"a.tar\", \"bytes\": 4096, \"index\": [[\"k\", 0, "
                        "\"jpg\", 512, 1]]}]}";
    rf_manifest m;
    char err[256];
    assert_int_equal(rf__manifest_parse(twice, strlen(twice), &m, err, sizeof err), 0);
    assert_null(rf__manifest_find(&m, "a.tar", 4096));
    rf__manifest_free(&m);
}

/* ---- through the tar source ---------------------------------------------- */

static void test_source_same_index(void **state)
{
    (void)state;
    char with[2048], without[2048];
    snprintf(with, sizeof with, "%.1900s/with", tu_tmp);
    snprintf(without, sizeof without, "%.1900s/without", tu_tmp);
    write_set(with, 1);
    write_set(without, 0);
    static const char *const txt[] = {"txt"};
    rf_source_opts opts[] = {
        {0},                                            /* labels from .cls */
        {.unlabeled = 1},                               /* label=None */
        {.nextras = 1, .extras = {txt[0]}},             /* extras=("txt",) */
        {.label = "txt", .nextras = 0, .unlabeled = 0}, /* another label member */
    };
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        rf_source a, b;
        char spec[4096], err[512];
        snprintf(spec, sizeof spec, "%s/s-{0..%d}.tar", with, SHARDS - 1);
        int ra = rf__source_open_ex(&a, spec, &opts[k], err, sizeof err);
        snprintf(spec, sizeof spec, "%s/s-{0..%d}.tar", without, SHARDS - 1);
        int rb = rf__source_open_ex(&b, spec, &opts[k], err, sizeof err);
        assert_int_equal(ra, rb);
        if (ra == 0) {
            assert_int_equal(a.nfiles_manifest, SHARDS);
            assert_int_equal(b.nfiles_manifest, 0);
            assert_same_index(&a, &b);
        } else {
            /* label="txt": "caption 1" is no integer, with or without the manifest */
            assert_int_equal(k, 3);
            assert_non_null(strstr(err, "is not an integer"));
        }
        rf__source_close(&a);
        rf__source_close(&b);
    }
}

static void test_source_falls_back(void **state)
{
    (void)state;
    char dir[2048], path[4096];
    snprintf(dir, sizeof dir, "%.1900s/changed", tu_tmp);
    write_set(dir, 1);
    rf_source ref, s;
    open_set(&ref, dir, NULL);
    assert_int_equal(ref.nfiles_manifest, SHARDS);

    /* appended bytes: that shard is walked, the others are not */
    snprintf(path, sizeof path, "%s/s-1.tar", dir);
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    static const uint8_t zeros[1024];
    assert_int_equal(fwrite(zeros, 1, sizeof zeros, f), sizeof zeros);
    fclose(f);
    open_set(&s, dir, NULL);
    assert_int_equal(s.nfiles_manifest, SHARDS - 1);
    assert_same_index(&s, &ref);
    rf__source_close(&s);

    /* the same size, but the first member renamed: not the shard described */
    snprintf(path, sizeof path, "%s/s-2.tar", dir);
    size_t n;
    uint8_t *b = tu_read_file(path, &n);
    assert_non_null(b);
    b[0] = '9'; /* "000014.jpg" -> "900014.jpg"; the checksum is then wrong too */
    assert_int_equal(tu_write_file(path, b, n), 0);
    free(b);
    char err[512], spec[4096];
    snprintf(spec, sizeof spec, "%s/s-2.tar", dir);
    int rc = rf__source_open_ex(&s, spec, NULL, err, sizeof err);
    assert_int_not_equal(rc, 0); /* the walk's verdict, not the manifest's */
    assert_non_null(strstr(err, "checksum"));

    /* a manifest that is not JSON: every shard walked */
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    assert_int_equal(tu_write_file(path, "{\"format\": ", 11), 0);
    snprintf(spec, sizeof spec, "%s/s-0.tar", dir);
    assert_int_equal(rf__source_open_ex(&s, spec, NULL, err, sizeof err), 0);
    assert_int_equal(s.nfiles_manifest, 0);
    assert_int_equal(s.n, PER_SHARD);
    rf__source_close(&s);
    rf__source_close(&ref);
}

/* ---- without the shard (remote shards not fetched yet) ------------------------ */

/* The index from the manifest's entries alone (rf__source_tar_from_manifest,
 * no file opened) is the walk's, for the options where the entries say
 * enough; with a label member the manifest does not read (label="txt")
 * nothing is added and the caller must walk. */
static void test_from_manifest_alone(void **state)
{
    (void)state;
    char with[2048], without[2048], path[4096], err[512];
    snprintf(with, sizeof with, "%.1900s/alone", tu_tmp);
    snprintf(without, sizeof without, "%.1900s/alone-walked", tu_tmp);
    write_set(with, 1);
    write_set(without, 0);
    snprintf(path, sizeof path, "%s/manifest.json", with);
    rf_manifest m;
    assert_int_equal(rf__manifest_read(path, &m, err, sizeof err), 0);
    static const char *const txt[] = {"txt"};
    rf_source_opts opts[] = {{0}, {.unlabeled = 1}, {.nextras = 1, .extras = {txt[0]}},
                             {.label = "txt"}};
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        rf_source s = {.kind = RF_SOURCE_TAR, .nextras = opts[k].nextras};
        rf_strlist files = {0};
        for (int f = 0; f < SHARDS; f++) {
            char name[32];
            snprintf(name, sizeof name, "s-%d.tar", f);
            assert_int_equal(rf__strlist_add(&files, with, name), 0);
        }
        assert_int_equal(rf__source_put_files(&s, &files), 0);
        int64_t maxlabel = -1;
        for (uint32_t f = 0; f < SHARDS; f++) {
            char name[32];
            snprintf(name, sizeof name, "s-%u.tar", f);
            const rf_manifest_shard *ms = NULL;
            for (size_t i = 0; i < m.nshards && !ms; i++)
                if (!strcmp(m.arena + m.shards[i].name, name))
                    ms = rf__manifest_find(&m, name, m.shards[i].bytes);
            assert_non_null(ms);
            int64_t before = s.n;
            int rc = rf__source_tar_from_manifest(&s, f, rf__strlist_at(&files, f), &opts[k], &m,
                                                  ms, &maxlabel, err, sizeof err);
            if (k == 3) { /* the .txt label is in the shard, which is not there */
                assert_int_not_equal(rc, 0);
                assert_int_equal(s.n, before);
            } else {
                assert_int_equal(rc, 0);
            }
        }
        rf__strlist_free(&files);
        if (k != 3) {
            s.nclasses = maxlabel + 1;
            rf_source ref;
            open_set(&ref, without, &opts[k]);
            assert_int_equal(s.nfiles_manifest, SHARDS);
            assert_same_index(&s, &ref);
            rf__source_close(&ref);
        } else {
            assert_int_equal(s.nfiles_manifest, 0);
        }
        rf__source_close(&s);
    }
    rf__manifest_free(&m);
}

/* The check made when such a shard arrives: its first and last member
 * headers as the entry says; another name, size or place is caught. */
static void test_ends_check(void **state)
{
    (void)state;
    char dir[2048], path[4096], err[512];
    snprintf(dir, sizeof dir, "%.1900s/ends", tu_tmp);
    write_set(dir, 1);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    rf_manifest m;
    assert_int_equal(rf__manifest_read(path, &m, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/s-1.tar", dir);
    size_t n;
    uint8_t *b = tu_read_file(path, &n);
    assert_non_null(b);
    free(b);
    const rf_manifest_shard *ms = rf__manifest_find(&m, "s-1.tar", n);
    assert_non_null(ms);
    rf_tar_ends e;
    rf__tar_manifest_ends(&m, ms, &e);
    assert_string_equal(e.key[0], "000007");
    assert_string_equal(e.key[1], "000013");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    int fd = fileno(f), bad = -1;
    assert_int_equal(rf__tar_ends_ok(fd, n, &e, &bad), 1);
    rf_tar_ends x = e;
    x.len[1]++;
    assert_int_equal(rf__tar_ends_ok(fd, n, &x, &bad), 0);
    assert_int_equal(bad, 1);
    x = e;
    x.ext[0] = "png";
    assert_int_equal(rf__tar_ends_ok(fd, n, &x, &bad), 0);
    assert_int_equal(bad, 0);
    x = e;
    x.off[0] += 512; /* not a header before it */
    assert_int_equal(rf__tar_ends_ok(fd, n, &x, &bad), 0);
    assert_int_equal(bad, 0);
    x = e;
    x.off[1] = n + 512; /* past the end */
    assert_int_equal(rf__tar_ends_ok(fd, n, &x, &bad), 0);
    assert_int_equal(bad, 1);
    fclose(f);
    rf__manifest_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),        cmocka_unit_test(test_parse_cut_and_changed),
        cmocka_unit_test(test_parse_refused),     cmocka_unit_test(test_inconsistent_index_unused),
        cmocka_unit_test(test_source_same_index), cmocka_unit_test(test_source_falls_back),
        cmocka_unit_test(test_from_manifest_alone), cmocka_unit_test(test_ends_check),
    };
    return cmocka_run_group_tests(tests, tu_tmp_setup, tu_tmp_teardown);
}
