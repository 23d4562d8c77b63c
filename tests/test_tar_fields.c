/*
 * test_tar_fields.c - what a WebDataset sample is made of, in the index of
 * the tar source: a picture member of any ImageFolder format (exactly one
 * per key, errors naming shard and key), the label member or none
 * (unlabeled shards, labels -1), the spans of extra members, compressed
 * shards refused by name and by magic, and the label and extras options.
 * Through the loader: test_tar_extras.c.
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

/* ------------------------------------------------------------ the index */

static const char *const picture_exts[] = {"jpg", "jpeg", "png", "webp", "bmp",
                                           "ppm", "pgm",  "tif", "TIFF"};

/* Keys k0..k8, one per picture extension with its .cls; with_gif, also a
 * key k9 whose only member is a .gif (no picture member). */
static void write_formats_shard(const char *p, int with_gif)
{
    tw t;
    assert_int_equal(tw_open(&t, p, TW_USTAR), 0);
    for (int k = 0; k < 9; k++) {
        char key[16], cls[8];
        snprintf(key, sizeof key, "k%d", k);
        snprintf(cls, sizeof cls, "%d", k);
        ss_put_member(&t, key, picture_exts[k], "bytes", 5);
        ss_put_member(&t, key, "cls", cls, strlen(cls));
    }
    if (with_gif)
        ss_put_member(&t, "k9", "gif", "x", 1);
    assert_int_equal(tw_close(&t), 0);
}

static void test_picture_members_of_every_format(void **state)
{
    (void)state;
    char *p = tu_tmp_path("formats.tar");
    const char *const *exts = picture_exts;
    write_formats_shard(p, 1); /* k9: not a picture member, the key has none */
    tu_source_open_fails(p, NULL, p, "\"k9\"", "no image member", NULL);

    write_formats_shard(p, 0);
    rf_source s;
    tu_source_open_ok(&s, p, NULL);
    assert_int_equal(s.n, 9);
    for (int k = 0; k < 9; k++) {
        char name[4200], want[4200];
        rf__source_name(&s, k, name, sizeof name);
        snprintf(want, sizeof want, "%s:k%d.%s", p, k, exts[k]);
        assert_string_equal(name, want);
        assert_int_equal(rf__source_label(&s, k), k);
        /* without extras the read is the picture member alone */
        int ranged;
        uint64_t off, len;
        rf__source_extent(&s, k, &ranged, &off, &len);
        assert_int_equal(len, 5);
        assert_int_equal(off, (uint64_t)k * 2048 + 512);
    }
    rf__source_close(&s);
    free(p);
}

static void test_key_errors_name_shard_and_key(void **state)
{
    (void)state;
    char *p = tu_tmp_path("keys.tar");
    /* two pictures under one key: ambiguous */
    ss_write_members(p, "a.jpg", "x", "a.cls", "1", "k2.JPEG", "x", "k2.jpg", "y", "k2.cls", "0",
                     NULL);
    tu_source_open_fails(p, NULL, p, "\"k2\"", "two image members", "offsets 2048 and 3072", NULL);
    /* a key without a picture (a stray file): an error, not a silent gap */
    ss_write_members(p, "a.jpg", "x", "a.cls", "1", "meta.txt", "x", NULL);
    tu_source_open_fails(p, NULL, p, "\"meta\"", "no image member", ".webp", NULL);
    /* "k3.a.jpeg": key k3, extension "a.jpeg" (webdataset's split): no picture */
    ss_write_members(p, "k3.a.jpeg", "x", "k3.cls", "1", NULL);
    tu_source_open_fails(p, NULL, p, "\"k3\"", "no image member", NULL);
    /* a repeated label member (webdataset refuses a repeated extension) */
    ss_write_members(p, "a.jpg", "x", "a.cls", "1", "a.CLS", "2", NULL);
    tu_source_open_fails(p, NULL, p, "\"a\"", "two .cls members", NULL);
    /* a label member named by the options, missing: the key and the member */
    rf_source_opts o = {.label = "label"};
    ss_write_members(p, "a.jpg", "x", "a.label", "4", "b.jpg", "x", "b.cls", "1", NULL);
    tu_source_open_fails(p, &o, p, "\"b\"", "no .label member", NULL);
    /* a repeated extra member */
    rf_source_opts ox = {.nextras = 1, .extras = {"txt"}};
    ss_write_members(p, "a.jpg", "x", "a.cls", "1", "a.txt", "t", "a.Txt", "u", NULL);
    tu_source_open_fails(p, &ox, p, "\"a\"", "two .txt members", NULL);
    free(p);
}

static void test_label_member_and_unlabeled(void **state)
{
    (void)state;
    char *p = tu_tmp_path("labels.tar");
    ss_write_members(p, "a.jpg", "x", "a.label", " 7\n", "a.cls", "1", "b.label", "2", "b.png", "y",
                     "c.jpg", "z", "c.label", "0", NULL);
    rf_source s;
    rf_source_opts o = {.label = "label"};
    tu_source_open_ok(&s, p, &o);
    assert_int_equal(s.n, 3);
    assert_int_equal(rf__source_label(&s, 0), 7);
    assert_int_equal(rf__source_label(&s, 1), 2);
    assert_int_equal(rf__source_label(&s, 2), 0);
    assert_int_equal(s.nclasses, 8);
    rf__source_close(&s);

    /* unlabeled: no member is looked for, labels are -1, no classes */
    ss_write_members(p, "a.jpg", "x", "b.webp", "y", "b.cls", "not a number", "c.jpeg", "z", NULL);
    tu_source_open_fails(p, NULL, p, "\"a\"", "no .cls member", "label=None", NULL);
    rf_source_opts un = {.unlabeled = 1};
    tu_source_open_ok(&s, p, &un);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.nclasses, 0);
    for (int k = 0; k < 3; k++)
        assert_int_equal(rf__source_label(&s, k), -1);
    rf__source_close(&s);
    free(p);
}

static void test_extras_spans(void **state)
{
    (void)state;
    char *p = tu_tmp_path("spans.tar");
    /* a: picture, caption, json; b: caption first, no json; c: neither; d:
     * a .png mask asked for as an extra, beside its .jpg picture */
    ss_write_members(p, "a.jpg", "AAAA", "a.cls", "1", "a.txt", "cap-a", "a.json", "{}", "b.TXT",
                     "cap-b!", "b.npy", "skipped", "b.jpeg", "BBB", "b.cls", "2", "c.webp", "C",
                     "c.cls", "0", "d.jpg", "DD", "d.png", "mask", "d.cls", "1", NULL);
    rf_source_opts o = {.nextras = 3, .extras = {"txt", "json", "png"}};
    rf_source s;
    tu_source_open_ok(&s, p, &o);
    assert_int_equal(s.n, 4);
    assert_int_equal(s.nextras, 3);
    size_t n;
    uint8_t *all = tu_read_file(p, &n);
    assert_non_null(all);
    struct {
        const char *img, *ext[3];
    } want[] = {{"AAAA", {"cap-a", "{}", NULL}},
                {"BBB", {"cap-b!", NULL, NULL}},
                {"C", {NULL, NULL, NULL}},
                {"DD", {NULL, NULL, "mask"}}};
    for (int i = 0; i < 4; i++) {
        int ranged;
        uint64_t off, len, rel, ilen;
        rf__source_extent(&s, i, &ranged, &off, &len);
        assert_int_equal(ranged, 1);
        assert_true(off + len <= n);
        const uint8_t *span = all + off;
        rf__source_image_in_span(&s, i, &rel, &ilen);
        assert_int_equal(ilen, strlen(want[i].img));
        assert_memory_equal(span + rel, want[i].img, ilen);
        for (int e = 0; e < 3; e++) {
            uint64_t erel;
            uint32_t elen;
            int have = rf__source_extra_in_span(&s, i, e, &erel, &elen);
            assert_int_equal(have, want[i].ext[e] != NULL);
            if (have) {
                assert_int_equal(elen, strlen(want[i].ext[e]));
                assert_true(erel + elen <= len);
                assert_memory_equal(span + erel, want[i].ext[e], elen);
            }
        }
    }
    /* the span of b runs from its caption over the .npy to its picture */
    int ranged;
    uint64_t off, len;
    rf__source_extent(&s, 1, &ranged, &off, &len);
    assert_memory_equal(all + off, "cap-b!", 6);
    assert_memory_equal(all + off + len - 3, "BBB", 3);
    /* sample c: the picture alone */
    rf__source_extent(&s, 2, &ranged, &off, &len);
    assert_int_equal(len, 1);
    free(all);
    rf__source_close(&s);

    /* without "png" among the extras, d has two pictures */
    o.nextras = 2;
    tu_source_open_fails(p, &o, p, "\"d\"", "two image members", NULL);
    free(p);
}

/* ---------------------------------------------------- compressed shards */

static void test_compressed_shards_refused(void **state)
{
    (void)state;
    /* by name: a single file (not read as a list file), a pattern, a list */
    static const char *names[] = {"s.tar.gz",  "s.tgz",    "s.tar.zst",
                                  "s.tar.bz2", "s.tar.xz", "s.TAR.GZ"};
    static const char *tools[] = {"`gunzip ",  "`gunzip ", "`zstd -d ",
                                  "`bunzip2 ", "`unxz ",   "`gunzip "};
    for (int i = 0; i < 6; i++) {
        char *p = tu_tmp_path("%s", names[i]);
        assert_int_equal(tu_write_file(p, "path\t1\n", 7), 0);
        tu_source_open_fails(p, NULL, p, "is compressed", "cannot be read at offsets",
                             "plain .tar shards", tools[i], NULL);
        free(p);
    }
    char *p = tu_tmp_path("c-0.tar.gz"), *q = tu_tmp_path("c-1.tar.gz");
    assert_int_equal(tu_write_file(p, "x", 1), 0);
    assert_int_equal(tu_write_file(q, "x", 1), 0);
    char *pat = tu_tmp_path("c-{0..1}.tar.gz");
    tu_source_open_fails(pat, NULL, p, "is compressed", NULL);
    char *glob = tu_tmp_path("c-*.tar.gz");
    tu_source_open_fails(glob, NULL, p, "is compressed", NULL);
    char *plain = tu_tmp_path("plain.tar"), list[4096];
    ss_write_members(plain, "a.jpg", "x", "a.cls", "1", NULL);
    snprintf(list, sizeof list, "%s\n%s", plain, q);
    tu_source_open_fails(list, NULL, q, "is compressed (gzip)", NULL);

    /* by magic, whatever the name */
    static const char *magic[] = {"\x1f\x8b\x08\x00", "\x28\xb5\x2f\xfd", "BZh91AY&SY",
                                  "\xfd\x37\x7a\x58\x5a\x00\x00"};
    static const size_t mlen[] = {4, 4, 10, 7};
    static const char *how[] = {"(gzip)", "(zstd)", "(bzip2)", "(xz)"};
    for (int i = 0; i < 4; i++) {
        uint8_t buf[2048];
        memset(buf, 0x55, sizeof buf);
        memcpy(buf, magic[i], mlen[i]);
        assert_int_equal(tu_write_file(plain, buf, i == 3 ? 100 : sizeof buf), 0);
        tu_source_open_fails(plain, NULL, plain, "is compressed", how[i], "-dc", "plain.plain.tar",
                             NULL);
        snprintf(list, sizeof list, "%s\n%s", plain, plain);
        tu_source_open_fails(list, NULL, plain, "is compressed", how[i], NULL);
    }
    /* a tar whose first member's name happens to start like bzip2 is a tar */
    ss_write_members(plain, "BZh91.jpg", "x", "BZh91.cls", "1", NULL);
    rf_source s;
    tu_source_open_ok(&s, plain, NULL);
    assert_int_equal(s.n, 1);
    rf__source_close(&s);
    free(p);
    free(q);
    free(pat);
    free(glob);
    free(plain);
}

/* ------------------------------------------------------------- options */

static void test_label_and_extras_options(void **state)
{
    (void)state;
    assert_int_equal(rf_loader_set_label(NULL, "cls"), RF_E_INVALID);
    assert_int_equal(rf_loader_set_extras(NULL, "txt"), RF_E_INVALID);
    char *shard = tu_tmp_path("opts.tar");
    ss_write_caption_shard(shard, 0, 4, 1);
    rf_loader *l = rf_loader_create(shard);
    static const char *bad_labels[] = {
        "a/b", "a,b",  ".",
        "  ",  "x\ty", "0123456789012345678901234567890123456789012345678901234567890123"};
    for (size_t i = 0; i < sizeof bad_labels / sizeof bad_labels[0]; i++) {
        assert_int_equal(rf_loader_set_label(l, bad_labels[i]), RF_E_INVALID);
        assert_non_null(strstr(rf_loader_errmsg(l), "label"));
    }
    static const char *bad_extras[] = {"txt,",    ",txt", "txt,,json",
                                       "txt,TXT", "a/b",  "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q"};
    for (size_t i = 0; i < sizeof bad_extras / sizeof bad_extras[0]; i++) {
        assert_int_equal(rf_loader_set_extras(l, bad_extras[i]), RF_E_INVALID);
        assert_non_null(strstr(rf_loader_errmsg(l), "extras"));
    }
    assert_int_equal(rf_loader_set_extras(l, "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p"), RF_OK);
    assert_int_equal(rf_loader_set_extras(l, " .TXT , json"), RF_OK);
    assert_int_equal(rf_loader_set_label(l, ".CLS"), RF_OK);
    assert_int_equal(rf_loader_set_param(l, RF_P_EXTRAS_BYTES, 0), RF_E_INVALID);
    int64_t v;
    assert_int_equal(rf_loader_get_param(l, RF_P_EXTRAS_BYTES, &v), RF_OK);
    assert_int_equal(v, 65536);
    tu_start(l);
    assert_int_equal(rf_loader_set_label(l, NULL), RF_E_STATE);
    assert_int_equal(rf_loader_set_extras(l, NULL), RF_E_STATE);
    rf_loader_destroy(l);

    /* other sources refuse labels other than "cls", unlabeled, extras */
    char *folder = tu_tmp_path("optfolder");
    assert_int_equal(tu_make_folder(folder, 2, 2, 40, 30, 1), 0);
    l = rf_loader_create(folder);
    assert_int_equal(rf_loader_set_label(l, "cls"), RF_OK);
    tu_start(l);
    rf_loader_destroy(l);
    for (int which = 0; which < 3; which++) {
        l = rf_loader_create(folder);
        if (which == 0)
            assert_int_equal(rf_loader_set_label(l, NULL), RF_OK);
        else if (which == 1)
            assert_int_equal(rf_loader_set_label(l, "txt"), RF_OK);
        else
            assert_int_equal(rf_loader_set_extras(l, "txt"), RF_OK);
        assert_int_equal(rf_loader_start(l), RF_E_INVALID);
        assert_non_null(strstr(rf_loader_errmsg(l), "tar shards"));
        assert_non_null(strstr(rf_loader_errmsg(l), "an image folder"));
        rf_loader_destroy(l);
    }
    char *rec = tu_tmp_path("opts.bin");
    assert_int_equal(tu_write_file(rec, "0123456789abcdef", 16), 0);
    l = TU_LOADER(rec, {RF_P_RECORD_SIZE, 4}, {RF_P_TRANSFORM, RF_TRANSFORM_NONE});
    assert_int_equal(rf_loader_set_extras(l, "txt"), RF_OK);
    assert_int_equal(rf_loader_start(l), RF_E_INVALID);
    assert_non_null(strstr(rf_loader_errmsg(l), "record files have neither"));
    rf_loader_destroy(l);
    free(rec);
    free(folder);
    free(shard);
}

int main(void)
{
    alarm(240); /* a hang fails the run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_picture_members_of_every_format),
        cmocka_unit_test(test_key_errors_name_shard_and_key),
        cmocka_unit_test(test_label_member_and_unlabeled),
        cmocka_unit_test(test_extras_spans),
        cmocka_unit_test(test_compressed_shards_refused),
        cmocka_unit_test(test_label_and_extras_options),
    };
    return cmocka_run_group_tests(tests, tu_tmp_setup, tu_tmp_teardown);
}
