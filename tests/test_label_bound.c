/*
 * test_label_bound.c - labels that no tar walk gives, from the indexes made
 * elsewhere: ringfeed-pack's manifest.json (lib/source_manifest.c) and the
 * index kept beside a remote shard in the cache (lib/source_remote.c).
 *
 * A walk reads a label member of at most 18 digits (RF_SOURCE_MAX_LABEL); a
 * manifest or a kept index that says INT64_MAX made the class count, largest
 * label + 1, overflow (UBSan: signed overflow in rf__source_index_remote),
 * and a label above the bound is no label of the shard's. Found by
 * fuzz_kept and fuzz_manifest. The manifest's entry is then not used (the
 * shard is walked); the kept index is refused (the shard is walked).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "source.h"
#include "kinds.h"
#include "manifest.h"
#include "source_remote.h"
#include "manifestset.h"

/* A manifest of one shard whose one sample has a .cls member of label. */
static int manifest_indexes(const char *label)
{
    char err[256];
    rf_manifest m;
    char json[512]; /* the manifest's text, kept by m */
    one_sample_manifest(&m, json, sizeof json, "s.tar", label, 19);
    const rf_manifest_shard *ms = rf__manifest_find(&m, "s.tar", 4096);
    int used = 0;
    if (ms) {
        rf_source s = {.kind = RF_SOURCE_TAR};
        rf_source_opts o = {0};
        int64_t maxlabel = -1;
        used = rf__source_tar_from_manifest(&s, 0, "s.tar", &o, &m, ms, &maxlabel, err,
                                            sizeof err) == 0;
        if (used) {
            assert_int_equal(s.n, 1);
            assert_true(maxlabel <= RF_SOURCE_MAX_LABEL);
        }
        rf__source_close(&s);
    }
    rf__manifest_free(&m);
    return used;
}

static void test_manifest_label_bound(void **state)
{
    (void)state;
    assert_true(manifest_indexes("999999999999999999"));
    assert_false(manifest_indexes("1000000000000000000"));
    assert_false(manifest_indexes("9223372036854775807"));
}

/* The kept index of one sample of label, read back: 1 used, 0 refused. */
static int kept_loads(int64_t label)
{
    char name[] = "k.jpg";
    uint64_t path_off = 0, data_off = 512;
    uint32_t data_len = 10, shard = 0;
    rf_source w = {.kind = RF_SOURCE_TAR,
                   .n = 1,
                   .arena = name,
                   .arena_len = sizeof name,
                   .path_off = &path_off,
                   .labels = &label,
                   .shard = &shard,
                   .data_off = &data_off,
                   .data_len = &data_len};
    size_t len;
    void *p = rf__source_kept_make(&w, 0, "http://h/s.tar", 4096, "\"e\"", "label=cls;", &len);
    assert_non_null(p);
    rf_source s = {.kind = RF_SOURCE_TAR};
    int64_t maxlabel = -1;
    int rc = rf__source_kept_load(&s, 0, p, len, "http://h/s.tar", 4096, "\"e\"", "label=cls;",
                                  &maxlabel);
    assert_true(rc == 0 || rc == 1);
    assert_int_equal(s.n, rc == 1 ? 1 : 0);
    assert_true(maxlabel <= RF_SOURCE_MAX_LABEL);
    free(p);
    rf__source_close(&s);
    return rc;
}

static void test_kept_label_bound(void **state)
{
    (void)state;
    assert_int_equal(kept_loads(-1), 1);
    assert_int_equal(kept_loads(RF_SOURCE_MAX_LABEL), 1);
    assert_int_equal(kept_loads(RF_SOURCE_MAX_LABEL + 1), 0);
    assert_int_equal(kept_loads(INT64_MAX), 0);
    assert_int_equal(kept_loads(-2), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_manifest_label_bound),
        cmocka_unit_test(test_kept_label_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
