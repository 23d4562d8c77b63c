/*
 * test_tar_fields.c - what a WebDataset sample is made of, and the edges of
 * the tar source: a picture member of any ImageFolder format (exactly one
 * per key), the label member or none (unlabeled shards, labels -1), extra
 * members returned as raw bytes per sample (rf_loader_set_extras,
 * rf_batch_field, the RF_P_EXTRAS_BYTES bound), compressed shards refused by
 * name and by magic, sample names (rf_loader_sample_name), and an image
 * folder holding files no decoder reads yet (reported, never dropped).
 *
 * Shards are written by tests/tarwrite.h in a temporary folder under
 * $RINGFEED_TEST_TMP, $TMPDIR or /tmp, removed afterwards.
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

#include "ring.h"
#include "ringfeed.h"
#include "source.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testutil.h"

static char *g_tmp;

/* g_tmp/<fmt...>, malloc'd. */
static char *tmp_path(const char *fmt, ...)
{
    char rel[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    char *p = NULL;
    assert_true(asprintf(&p, "%s/%s", g_tmp, rel) > 0);
    return p;
}

static void put_member(tw *t, const char *key, const char *ext, const void *data, size_t len)
{
    char name[512];
    snprintf(name, sizeof name, "%s.%s", key, ext);
    assert_int_equal(tw_file(t, name, data, len), 0);
}

/* A small JPEG of its own content per seed; malloc'd. */
static uint8_t *jpeg_of(uint32_t seed, size_t *len)
{
    tu_jpeg_opts o = {48 + (int)(seed % 5) * 4, 40, 90, TU_420, 0, 0, 0, seed, 0, 0};
    uint8_t *jpg;
    assert_int_equal(tu_make_jpeg(&o, &jpg, len), 0);
    return jpg;
}

/* The caption of sample k ("" for k % 7 == 3, absent for k % 5 == 4). */
static int caption_of(int k, char *buf, size_t cap)
{
    if (k % 5 == 4)
        return -1;
    if (k % 7 == 3) {
        buf[0] = '\0';
        return 0;
    }
    int n = snprintf(buf, cap, "caption %d:", k);
    for (int i = 0; i < k * 3 && (size_t)n + 1 < cap; i++)
        buf[n++] = (char)('a' + (k + i) % 26);
    buf[n] = '\0';
    return n;
}

/* A shard of n samples sNNN: .jpg, .cls (k % 3) unless unlabeled, .txt
 * (caption_of) and, for even k, .json; members in varied orders. */
static void write_caption_shard(const char *path, int first, int n, int labeled)
{
    tw t;
    assert_int_equal(tw_open(&t, path, TW_PAX), 0);
    for (int k = first; k < first + n; k++) {
        char key[32], cap[400], json[64], cls[16];
        snprintf(key, sizeof key, "s%03d", k);
        size_t jlen;
        uint8_t *jpg = jpeg_of((uint32_t)k + 1, &jlen);
        int clen = caption_of(k, cap, sizeof cap);
        snprintf(json, sizeof json, "{\"k\": %d}", k);
        snprintf(cls, sizeof cls, "%d", k % 3);
        if (k % 2) { /* the caption before the picture */
            if (clen >= 0)
                put_member(&t, key, "txt", cap, (size_t)clen);
            put_member(&t, key, "jpg", jpg, jlen);
        } else {
            put_member(&t, key, "jpg", jpg, jlen);
            put_member(&t, key, "json", json, strlen(json));
            if (clen >= 0)
                put_member(&t, key, "TXT", cap, (size_t)clen); /* any case */
        }
        if (labeled)
            put_member(&t, key, "cls", cls, strlen(cls));
        free(jpg);
    }
    assert_int_equal(tw_close(&t), 0);
}

/* ------------------------------------------------------------ the index */

static void test_picture_members_of_every_format(void **state)
{
    (void)state;
    char *p = tmp_path("formats.tar");
    static const char *exts[] = {"jpg", "jpeg", "png", "webp", "bmp", "ppm", "pgm", "tif", "TIFF"};
    tw t;
    assert_int_equal(tw_open(&t, p, TW_USTAR), 0);
    for (int k = 0; k < 9; k++) {
        char key[16], cls[8];
        snprintf(key, sizeof key, "k%d", k);
        snprintf(cls, sizeof cls, "%d", k);
        put_member(&t, key, exts[k], "bytes", 5);
        put_member(&t, key, "cls", cls, strlen(cls));
    }
    put_member(&t, "k9", "gif", "x", 1); /* not a picture member: the key has none */
    assert_int_equal(tw_close(&t), 0);
    tu_source_open_fails(p, NULL, p, "\"k9\"", "no image member", NULL);

    assert_int_equal(tw_open(&t, p, TW_USTAR), 0);
    for (int k = 0; k < 9; k++) {
        char key[16], cls[8];
        snprintf(key, sizeof key, "k%d", k);
        snprintf(cls, sizeof cls, "%d", k);
        put_member(&t, key, exts[k], "bytes", 5);
        put_member(&t, key, "cls", cls, strlen(cls));
    }
    assert_int_equal(tw_close(&t), 0);
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

/* Writes members (name, text) pairs into path, NULL-ended. */
static void write_members(const char *path, ...)
{
    tw t;
    assert_int_equal(tw_open(&t, path, TW_USTAR), 0);
    va_list ap;
    va_start(ap, path);
    const char *name;
    while ((name = va_arg(ap, const char *)) != NULL) {
        const char *text = va_arg(ap, const char *);
        assert_int_equal(tw_file(&t, name, text, strlen(text)), 0);
    }
    va_end(ap);
    assert_int_equal(tw_close(&t), 0);
}

static void test_key_errors_name_shard_and_key(void **state)
{
    (void)state;
    char *p = tmp_path("keys.tar");
    /* two pictures under one key: ambiguous */
    write_members(p, "a.jpg", "x", "a.cls", "1", "k2.JPEG", "x", "k2.jpg", "y", "k2.cls", "0",
                  NULL);
    tu_source_open_fails(p, NULL, p, "\"k2\"", "two image members", "offsets 2048 and 3072", NULL);
    /* a key without a picture (a stray file): an error, not a silent gap */
    write_members(p, "a.jpg", "x", "a.cls", "1", "meta.txt", "x", NULL);
    tu_source_open_fails(p, NULL, p, "\"meta\"", "no image member", ".webp", NULL);
    /* "k3.a.jpeg": key k3, extension "a.jpeg" (webdataset's split): no picture */
    write_members(p, "k3.a.jpeg", "x", "k3.cls", "1", NULL);
    tu_source_open_fails(p, NULL, p, "\"k3\"", "no image member", NULL);
    /* a repeated label member (webdataset refuses a repeated extension) */
    write_members(p, "a.jpg", "x", "a.cls", "1", "a.CLS", "2", NULL);
    tu_source_open_fails(p, NULL, p, "\"a\"", "two .cls members", NULL);
    /* a label member named by the options, missing: the key and the member */
    rf_source_opts o = {.label = "label"};
    write_members(p, "a.jpg", "x", "a.label", "4", "b.jpg", "x", "b.cls", "1", NULL);
    tu_source_open_fails(p, &o, p, "\"b\"", "no .label member", NULL);
    /* a repeated extra member */
    rf_source_opts ox = {.nextras = 1, .extras = {"txt"}};
    write_members(p, "a.jpg", "x", "a.cls", "1", "a.txt", "t", "a.Txt", "u", NULL);
    tu_source_open_fails(p, &ox, p, "\"a\"", "two .txt members", NULL);
    free(p);
}

static void test_label_member_and_unlabeled(void **state)
{
    (void)state;
    char *p = tmp_path("labels.tar");
    write_members(p, "a.jpg", "x", "a.label", " 7\n", "a.cls", "1", "b.label", "2", "b.png", "y",
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
    write_members(p, "a.jpg", "x", "b.webp", "y", "b.cls", "not a number", "c.jpeg", "z", NULL);
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
    char *p = tmp_path("spans.tar");
    /* a: picture, caption, json; b: caption first, no json; c: neither; d:
     * a .png mask asked for as an extra, beside its .jpg picture */
    write_members(p, "a.jpg", "AAAA", "a.cls", "1", "a.txt", "cap-a", "a.json", "{}", "b.TXT",
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
        char *p = tmp_path("%s", names[i]);
        assert_int_equal(tu_write_file(p, "path\t1\n", 7), 0);
        tu_source_open_fails(p, NULL, p, "is compressed", "cannot be read at offsets",
                             "plain .tar shards", tools[i], NULL);
        free(p);
    }
    char *p = tmp_path("c-0.tar.gz"), *q = tmp_path("c-1.tar.gz");
    assert_int_equal(tu_write_file(p, "x", 1), 0);
    assert_int_equal(tu_write_file(q, "x", 1), 0);
    char *pat = tmp_path("c-{0..1}.tar.gz");
    tu_source_open_fails(pat, NULL, p, "is compressed", NULL);
    char *glob = tmp_path("c-*.tar.gz");
    tu_source_open_fails(glob, NULL, p, "is compressed", NULL);
    char *plain = tmp_path("plain.tar"), list[4096];
    write_members(plain, "a.jpg", "x", "a.cls", "1", NULL);
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
    write_members(plain, "BZh91.jpg", "x", "BZh91.cls", "1", NULL);
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
    char *shard = tmp_path("opts.tar");
    write_caption_shard(shard, 0, 4, 1);
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
    char *folder = tmp_path("optfolder");
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
    char *rec = tmp_path("opts.bin");
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

/* ------------------------------------------------------- through the loader */

static rf_loader *caption_loader(const char *src, const char *extras, int workers, int skip)
{
    rf_loader *l =
        TU_LOADER(src, {RF_P_BATCH_SIZE, 4}, {RF_P_IMAGE_SIZE, 24}, {RF_P_NUM_WORKERS, workers},
                  {RF_P_SEED, 11}, {RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP},
                  {RF_P_FLIP, 1}, {RF_P_ON_ERROR, skip ? RF_ON_ERROR_SKIP : RF_ON_ERROR_RAISE});
    if (extras)
        assert_int_equal(rf_loader_set_extras(l, extras), RF_OK);
    return l;
}

/* The key number of sample s ("shard:sNNN"). */
static int key_number(rf_loader *l, int64_t s)
{
    char name[4200];
    assert_true(rf_loader_sample_name(l, s, name, sizeof name) > 0);
    const char *k = strrchr(name, ':');
    assert_non_null(k);
    assert_int_equal(k[1], 's');
    return atoi(k + 2);
}

static void check_fields(rf_loader *l, const rf_batch *b)
{
    const int64_t *samples = rf_batch_samples(b);
    for (int64_t i = 0; i < rf_batch_count(b); i++) {
        int k = key_number(l, samples[i]);
        char cap[400], json[64];
        int clen = caption_of(k, cap, sizeof cap);
        size_t len = 99;
        const char *got = rf_batch_field(b, i, "txt", &len);
        if (clen < 0) {
            assert_null(got);
            assert_int_equal(len, 0);
        } else {
            assert_non_null(got); /* an empty caption is present, of length 0 */
            assert_int_equal(len, (size_t)clen);
            assert_memory_equal(got, cap, len);
        }
        const char *j = rf_batch_field(b, i, ".JSON", &len);
        if (k % 2) {
            assert_null(j);
        } else {
            snprintf(json, sizeof json, "{\"k\": %d}", k);
            assert_non_null(j);
            assert_int_equal(len, strlen(json));
            assert_memory_equal(j, json, len);
        }
        assert_null(rf_batch_field(b, i, "cls", &len)); /* not asked for */
        assert_int_equal(rf_batch_labels(b)[i], k % 3);
    }
    size_t len = 5;
    assert_null(rf_batch_field(b, -1, "txt", &len));
    assert_null(rf_batch_field(b, rf_batch_count(b), "txt", &len));
    assert_null(rf_batch_field(b, 0, NULL, &len));
    assert_int_equal(len, 0);
}

static void test_extras_through_the_loader(void **state)
{
    (void)state;
    char *a = tmp_path("cap-0.tar"), *b = tmp_path("cap-1.tar");
    write_caption_shard(a, 0, 13, 1);
    write_caption_shard(b, 13, 9, 1);
    char *spec = tmp_path("cap-{0..1}.tar");
    /* the pixels, labels and order are those of the same loader without extras */
    rf_loader *ref = caption_loader(spec, NULL, 2, 0);
    tu_start(ref);
    uint64_t want = TU_FNV_INIT;
    rf_batch *bt;
    while (rf_loader_next(ref, &bt) == RF_OK) {
        want = tu_batch_hash(want, bt);
        assert_null(rf_batch_field(bt, 0, "txt", NULL)); /* no extras asked for */
        rf_batch_release(bt);
    }
    rf_loader_destroy(ref);
    for (int workers = 1; workers <= 3; workers += 2) {
        rf_loader *l = caption_loader(spec, "txt,json", workers, 0);
        tu_start(l);
        assert_int_equal(rf_loader_num_samples(l), 22);
        uint64_t got = TU_FNV_INIT;
        int rc;
        rf_batch *held = NULL;
        while ((rc = rf_loader_next(l, &bt)) == RF_OK) {
            got = tu_batch_hash(got, bt);
            check_fields(l, bt);
            if (!held) {
                held = bt; /* released later: its fields stay valid meanwhile */
                continue;
            }
            rf_batch_release(bt);
            /* a released handle gives nothing */
            assert_null(rf_batch_field(bt, 0, "txt", NULL));
        }
        assert_int_equal(rc, RF_END_OF_EPOCH);
        check_fields(l, held);
        rf_batch_release(held);
        assert_null(rf_batch_field(held, 0, "txt", NULL));
        assert_true(got == want);
        rf_loader_destroy(l);
    }
    free(spec);
    free(a);
    free(b);
}

static void test_extras_over_the_bound(void **state)
{
    (void)state;
    char *p = tmp_path("bound.tar");
    /* captions of 10 + 3k bytes ("caption k:" and 3k letters), but s003's
     * empty and s004's absent; .json (8 bytes) for even k */
    write_caption_shard(p, 0, 7, 1);
    /* raise: the batch holding s006 (28 + 8 bytes) fails, named by shard,
     * key and member */
    rf_loader *l = caption_loader(p, "txt", 2, 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_EXTRAS_BYTES, 26), RF_OK);
    assert_int_equal(rf_loader_set_param(l, RF_P_SHUFFLE, 0), RF_OK);
    tu_start(l);
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_OK); /* s000..s003: captions fit */
    rf_batch_release(b);
    assert_int_equal(rf_loader_next(l, &b), RF_E_LIMIT);
    const char *msg = rf_loader_errmsg(l);
    printf("  %s\n", msg);
    char want[4200];
    snprintf(want, sizeof want, "%s:s006.jpg", p);
    assert_non_null(strstr(msg, want));
    assert_non_null(strstr(msg, "member s006.txt is 28 bytes"));
    assert_non_null(strstr(msg, "extras_bytes=26"));
    rf_loader_destroy(l);

    /* skip: replaced by a sample whose extras fit, recorded in the stats */
    l = caption_loader(p, "txt,json", 2, 1);
    assert_int_equal(rf_loader_set_param(l, RF_P_EXTRAS_BYTES, 26), RF_OK);
    tu_start(l);
    int n = 0;
    while (rf_loader_next(l, &b) == RF_OK) {
        for (int64_t i = 0; i < rf_batch_count(b); i++) {
            size_t len;
            const char *t = rf_batch_field(b, i, "txt", &len);
            const char *j = rf_batch_field(b, i, "json", NULL);
            size_t total = (t ? len : 0);
            if (j)
                rf_batch_field(b, i, "json", &len), total += len;
            assert_true(total <= 26);
            n++;
        }
        rf_batch_release(b);
    }
    assert_int_equal(n, 7);
    char *js = tu_stats(l);
    assert_non_null(strstr(js, "s006.jpg"));
    assert_non_null(strstr(js, "extras_bytes=26"));
    free(js);
    rf_loader_destroy(l);
    free(p);
}

static void test_unlabeled_shards_load(void **state)
{
    (void)state;
    char *p = tmp_path("unlabeled.tar");
    write_caption_shard(p, 0, 6, 0);
    rf_loader *l = caption_loader(p, NULL, 2, 0);
    assert_int_equal(rf_loader_start(l), RF_E_SOURCE); /* labeled by default */
    assert_non_null(strstr(rf_loader_errmsg(l), "\"s000\""));
    assert_non_null(strstr(rf_loader_errmsg(l), "no .cls member"));
    rf_loader_destroy(l);

    l = caption_loader(p, "txt", 2, 0);
    assert_int_equal(rf_loader_set_label(l, ""), RF_OK);
    tu_start(l);
    assert_int_equal(rf_loader_num_samples(l), 6);
    for (int64_t s = 0; s < 6; s++)
        assert_int_equal(rf_loader_sample_label(l, s), -1);
    rf_batch *b;
    int n = 0;
    while (rf_loader_next(l, &b) == RF_OK) {
        for (int64_t i = 0; i < rf_batch_count(b); i++, n++)
            assert_int_equal(rf_batch_labels(b)[i], -1);
        rf_batch_release(b);
    }
    assert_int_equal(n, 6);
    rf_loader_destroy(l);
    free(p);
}

/* A tar with a picture member no decoder reads (garbage after a PNG
 * signature): an error with its name under both policies, never dropped. */
static void test_undecodable_member_reported(void **state)
{
    (void)state;
    char *p = tmp_path("mixed.tar");
    tw t;
    assert_int_equal(tw_open(&t, p, TW_USTAR), 0);
    for (int k = 0; k < 4; k++) {
        char key[16];
        snprintf(key, sizeof key, "m%d", k);
        if (k == 2) {
            put_member(&t, key, "png", "\x89PNG\r\n\x1a\nnot really", 18);
        } else {
            size_t len;
            uint8_t *jpg = jpeg_of((uint32_t)k + 40, &len);
            put_member(&t, key, "jpg", jpg, len);
            free(jpg);
        }
        put_member(&t, key, "cls", "1", 1);
    }
    assert_int_equal(tw_close(&t), 0);
    rf_loader *l = caption_loader(p, NULL, 1, 0);
    assert_int_equal(rf_loader_set_param(l, RF_P_SHUFFLE, 0), RF_OK);
    tu_start(l);
    assert_int_equal(rf_loader_num_samples(l), 4);
    rf_batch *b;
    int rc = rf_loader_next(l, &b);
    assert_true(rc == RF_E_DECODE || rc == RF_E_LIMIT);
    char want[4200];
    snprintf(want, sizeof want, "%s:m2.png", p);
    assert_non_null(strstr(rf_loader_errmsg(l), want));
    rf_loader_destroy(l);

    l = caption_loader(p, NULL, 1, 1);
    tu_start(l);
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    assert_int_equal(rf_batch_count(b), 4);
    rf_batch_release(b);
    char *js = tu_stats(l);
    assert_non_null(strstr(js, "m2.png"));
    free(js);
    rf_loader_destroy(l);
    free(p);
}

/* ImageFolder's files: gray.jpg, p.webp, x.png, y.JPG, z.tif are samples
 * (a.txt and b.gif are not); what does not decode is an error with its
 * path under both policies. */
static void test_folder_of_mixed_files(void **state)
{
    (void)state;
    char *root = tmp_path("mixedfolder");
    char *cls = tmp_path("mixedfolder/c");
    assert_int_equal(tu_mkdir_p(cls), 0);
    tu_jpeg_opts gray = {40, 30, 90, TU_GRAY, 0, 0, 0, 3, 0, 0};
    uint8_t *jpg;
    size_t len;
    assert_int_equal(tu_make_jpeg(&gray, &jpg, &len), 0);
    static const char *files[] = {"gray.jpg", "y.JPG", "p.webp", "x.png",
                                  "z.tif",    "a.txt", "b.gif"};
    for (int i = 0; i < 7; i++) {
        char *f = tmp_path("mixedfolder/c/%s", files[i]);
        if (i < 2)
            assert_int_equal(tu_write_file(f, jpg, len), 0);
        else if (i == 4)
            assert_int_equal(tu_write_file(f, "II*\0\x08\0\0\0junk", 12), 0);
        else
            assert_int_equal(tu_write_file(f, "RIFF\0\0\0\0WEBPjunk", 16), 0);
        free(f);
    }
    free(jpg);
    rf_loader *l =
        TU_LOADER(root, {RF_P_BATCH_SIZE, 5}, {RF_P_IMAGE_SIZE, 16}, {RF_P_SHUFFLE, 0},
                  {RF_P_NUM_WORKERS, 1}, {RF_P_ON_ERROR, RF_ON_ERROR_SKIP}, {RF_P_MAX_ERRORS, -1});
    tu_start(l);
    /* sorted: gray.jpg p.webp x.png y.JPG z.tif */
    assert_int_equal(rf_loader_num_samples(l), 5);
    static const char *order[] = {"gray.jpg", "p.webp", "x.png", "y.JPG", "z.tif"};
    for (int64_t s = 0; s < 5; s++) {
        const char *path = rf_loader_sample_path(l, s);
        assert_string_equal(strrchr(path, '/') + 1, order[s]);
    }
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    rf_batch_release(b);
    char *js = tu_stats(l);
    /* the three that no decoder reads here, each with its path (p.webp and
     * x.png are junk after their signatures: errors with any decoder) */
    for (int i = 2; i < 5; i++) {
        char *f = tmp_path("mixedfolder/c/%s", files[i]);
        if (!strstr(js, f))
            fail_msg("stats lack %s: %s", f, js);
        free(f);
    }
    free(js);
    rf_loader_destroy(l);
    free(cls);
    free(root);
}

/* ------------------------------------------------------------ sample names */

static void test_sample_names(void **state)
{
    (void)state;
    char *p = tmp_path("names.tar");
    write_members(p, "dir.v1/k0.jpg", "x", "dir.v1/k0.cls", "1", "k1.seg.png", "x", "k1.png", "y",
                  "k1.cls", "2", NULL);
    rf_loader *l = rf_loader_create(p);
    char buf[4200], want[4200];
    assert_int_equal(rf_loader_sample_name(l, 0, buf, sizeof buf), -1); /* not started */
    assert_string_equal(buf, "");
    assert_int_equal(rf_loader_set_extras(l, "seg.png"), RF_OK);
    tu_start(l);
    snprintf(want, sizeof want, "%s:dir.v1/k0", p);
    assert_int_equal(rf_loader_sample_name(l, 0, buf, sizeof buf), (int64_t)strlen(want));
    assert_string_equal(buf, want);
    snprintf(want, sizeof want, "%s:k1", p);
    assert_int_equal(rf_loader_sample_name(l, 1, buf, sizeof buf), (int64_t)strlen(want));
    assert_string_equal(buf, want);
    /* as snprintf: the length needed, the text cut to fit */
    assert_int_equal(rf_loader_sample_name(l, 1, NULL, 0), (int64_t)strlen(want));
    char small[6];
    assert_int_equal(rf_loader_sample_name(l, 1, small, sizeof small), (int64_t)strlen(want));
    assert_int_equal(strlen(small), 5);
    assert_memory_equal(small, want, 5);
    assert_int_equal(rf_loader_sample_name(l, 2, buf, sizeof buf), -1);
    assert_int_equal(rf_loader_sample_name(l, -1, buf, sizeof buf), -1);
    assert_string_equal(rf_loader_sample_path(l, 1), p); /* the C contract: the shard */
    rf_loader_destroy(l);

    char *rec = tmp_path("names.bin");
    assert_int_equal(tu_write_file(rec, "0123456789abcdef", 16), 0);
    l = TU_LOADER(rec, {RF_P_RECORD_SIZE, 4}, {RF_P_HEADER_SIZE, 4},
                  {RF_P_TRANSFORM, RF_TRANSFORM_NONE});
    tu_start(l);
    snprintf(want, sizeof want, "%s@12", rec);
    assert_true(rf_loader_sample_name(l, 2, buf, sizeof buf) > 0);
    assert_string_equal(buf, want);
    rf_loader_destroy(l);

    char *folder = tmp_path("namefolder");
    assert_int_equal(tu_make_folder(folder, 1, 2, 40, 30, 1), 0);
    l = rf_loader_create(folder);
    tu_start(l);
    assert_true(rf_loader_sample_name(l, 1, buf, sizeof buf) > 0);
    assert_string_equal(buf, rf_loader_sample_path(l, 1));
    rf_loader_destroy(l);
    free(folder);
    free(rec);
    free(p);
}

/* The ring keeps room for the extras of every slot, grown ones too. */
static void test_ring_extras_room(void **state)
{
    (void)state;
    rf_ring r;
    assert_int_equal(rf__ring_init(&r, 2, 3, 12, 0), 0);
    assert_int_equal(rf__ring_init_extras(&r, 2, 40), 0);
    assert_int_equal(rf__ring_grow(&r), 0);
    assert_int_equal(r.k, 3);
    for (int i = 0; i < 3; i++) {
        rf_slot *s = &r.slots[i];
        assert_non_null(s->view.extras);
        assert_true(s->view.extras_len == r.extras_len + (size_t)i * 3 * 2);
        memset(s->view.extras, i, 3 * 40); /* the whole block is the slot's */
        for (int j = 0; j < 3 * 2; j++)
            s->view.extras_len[j] = RF_SOURCE_ABSENT;
    }
    assert_true(r.slots[2].view.extras == r.extras_grown[0]);
    rf__ring_free(&r);
    /* without extras, nothing is kept for them */
    assert_int_equal(rf__ring_init(&r, 2, 3, 12, 0), 0);
    assert_int_equal(rf__ring_grow(&r), 0);
    assert_null(r.slots[2].view.extras);
    assert_null(r.extras_grown[0]);
    rf__ring_free(&r);
}

static int setup(void **state)
{
    (void)state;
    g_tmp = tu_tempdir("tarfields");
    return g_tmp ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tu_tempdir_remove(&g_tmp);
    return 0;
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
        cmocka_unit_test(test_extras_through_the_loader),
        cmocka_unit_test(test_extras_over_the_bound),
        cmocka_unit_test(test_unlabeled_shards_load),
        cmocka_unit_test(test_undecodable_member_reported),
        cmocka_unit_test(test_folder_of_mixed_files),
        cmocka_unit_test(test_sample_names),
        cmocka_unit_test(test_ring_extras_room),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
