/*
 * test_tar_extras.c - WebDataset samples through the loader: extra members
 * returned as raw bytes per sample (rf_loader_set_extras, rf_batch_field,
 * the RF_P_EXTRAS_BYTES bound and the ring's room for it), unlabeled shards,
 * an undecodable member reported, an image folder holding files no decoder
 * reads yet (reported, never dropped), and sample names
 * (rf_loader_sample_name).
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

#include "ring.h"
#include "ringfeed.h"
#include "shardset.h"
#include "source.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testutil.h"

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
        int clen = ss_caption_of(k, cap, sizeof cap);
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
    char *a = tu_tmp_path("cap-0.tar"), *b = tu_tmp_path("cap-1.tar");
    ss_write_caption_shard(a, 0, 13, 1);
    ss_write_caption_shard(b, 13, 9, 1);
    char *spec = tu_tmp_path("cap-{0..1}.tar");
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
    char *p = tu_tmp_path("bound.tar");
    /* captions of 10 + 3k bytes ("caption k:" and 3k letters), but s003's
     * empty and s004's absent; .json (8 bytes) for even k */
    ss_write_caption_shard(p, 0, 7, 1);
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
    char *p = tu_tmp_path("unlabeled.tar");
    ss_write_caption_shard(p, 0, 6, 0);
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
    char *p = tu_tmp_path("mixed.tar");
    tw t;
    assert_int_equal(tw_open(&t, p, TW_USTAR), 0);
    for (int k = 0; k < 4; k++) {
        char key[16];
        snprintf(key, sizeof key, "m%d", k);
        if (k == 2) {
            ss_put_member(&t, key, "png", "\x89PNG\r\n\x1a\nnot really", 18);
        } else {
            size_t len;
            uint8_t *jpg = ss_jpeg((uint32_t)k + 40, &len);
            ss_put_member(&t, key, "jpg", jpg, len);
            free(jpg);
        }
        ss_put_member(&t, key, "cls", "1", 1);
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
    char *root = tu_tmp_path("mixedfolder");
    char *cls = tu_tmp_path("mixedfolder/c");
    assert_int_equal(tu_mkdir_p(cls), 0);
    tu_jpeg_opts gray = {40, 30, 90, TU_GRAY, 0, 0, 0, 3, 0, 0};
    uint8_t *jpg;
    size_t len;
    assert_int_equal(tu_make_jpeg(&gray, &jpg, &len), 0);
    static const char *files[] = {"gray.jpg", "y.JPG", "p.webp", "x.png",
                                  "z.tif",    "a.txt", "b.gif"};
    for (int i = 0; i < 7; i++) {
        char *f = tu_tmp_path("mixedfolder/c/%s", files[i]);
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
        char *f = tu_tmp_path("mixedfolder/c/%s", files[i]);
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
    char *p = tu_tmp_path("names.tar");
    ss_write_members(p, "dir.v1/k0.jpg", "x", "dir.v1/k0.cls", "1", "k1.seg.png", "x", "k1.png",
                     "y", "k1.cls", "2", NULL);
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

    char *rec = tu_tmp_path("names.bin");
    assert_int_equal(tu_write_file(rec, "0123456789abcdef", 16), 0);
    l = TU_LOADER(rec, {RF_P_RECORD_SIZE, 4}, {RF_P_HEADER_SIZE, 4},
                  {RF_P_TRANSFORM, RF_TRANSFORM_NONE});
    tu_start(l);
    snprintf(want, sizeof want, "%s@12", rec);
    assert_true(rf_loader_sample_name(l, 2, buf, sizeof buf) > 0);
    assert_string_equal(buf, want);
    rf_loader_destroy(l);

    char *folder = tu_tmp_path("namefolder");
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

int main(void)
{
    alarm(240); /* a hang fails the run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extras_through_the_loader),
        cmocka_unit_test(test_extras_over_the_bound),
        cmocka_unit_test(test_unlabeled_shards_load),
        cmocka_unit_test(test_undecodable_member_reported),
        cmocka_unit_test(test_folder_of_mixed_files),
        cmocka_unit_test(test_sample_names),
        cmocka_unit_test(test_ring_extras_room),
    };
    return cmocka_run_group_tests(tests, tu_tmp_setup, tu_tmp_teardown);
}
