/*
 * test_manifest_trust.c - a manifest.json is used only for shards it still
 * describes (lib/source/tar_check.c), and bounds what it states.
 *
 * Shards written here with a manifest beside them (manifestset.h), then
 * rewritten at the same size as a user relabelling or reordering them
 * would, the manifest left as it was: the index is the walk's (labels from
 * the shards, the walk's offsets), the shard is counted as mismatched
 * (stats: shards_manifest_mismatched), the shards left alone still come
 * from the manifest; also with labels far apart (a 40 KiB member between
 * them: one read per label, not a window). A label past the tar walk's
 * bound (INT64_MAX: the class count overflowed) makes the entry unusable.
 * The digest a remote shard is checked with when it lands (entry against
 * a walk of its headers) is equal for the shard described, differs for a
 * relabelled one (equal without labels, which it then does not cover) and
 * for a reordered one, and a damaged shard gives none.
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
#include <unistd.h>

#include <cmocka.h>

#include "manifestset.h"
#include "ringfeed.h"
#include "source.h"
#include "kinds.h"
#include "manifest.h"

static char *g_tmp;

/* dir's index with its manifest, and the walk of the same shards (the
 * manifest moved away meanwhile). */
static void index_both(const char *dir, rf_source *with, rf_source *walked)
{
    char a[4096], b[4096];
    open_set(with, dir, NULL);
    snprintf(a, sizeof a, "%s/manifest.json", dir);
    snprintf(b, sizeof b, "%s/manifest.away", dir);
    assert_int_equal(rename(a, b), 0);
    open_set(walked, dir, NULL);
    assert_int_equal(walked->nfiles_manifest, 0);
    assert_int_equal(rename(b, a), 0);
}

/* The label of sample i of shard 1 changed in its .cls member, one digit
 * for another: the shard keeps its size, its headers, its ends. */
static void relabel_check(const char *dir)
{
    char path[4096];
    uint64_t off;
    int64_t label;
    cls_place(dir, 1, 3, &off, &label);
    char digit = (char)('0' + (label + 1) % 5);
    snprintf(path, sizeof path, "%s/s-1.tar", dir);
    overwrite(path, off, &digit, 1);

    rf_source with, walked;
    index_both(dir, &with, &walked);
    int64_t i = PER_SHARD + 3; /* shard 1, sample 3 */
    assert_int_equal(rf__source_label(&walked, i), (label + 1) % 5);
    assert_same_index(&with, &walked); /* the shard's label, not the manifest's */
    assert_int_equal(with.nfiles_manifest, SHARDS - 1);
    assert_int_equal(with.nfiles_mismatched, 1);
    rf__source_close(&with);
    rf__source_close(&walked);
}

static void test_relabel_at_the_same_size_is_walked(void **state)
{
    (void)state;
    char dir[2048];
    snprintf(dir, sizeof dir, "%.1900s/relabel", g_tmp);
    write_set(dir, 1);
    rf_source s;
    open_set(&s, dir, NULL);
    assert_int_equal(s.nfiles_manifest, SHARDS);
    assert_int_equal(s.nfiles_mismatched, 0);
    rf__source_close(&s);
    relabel_check(dir);
    /* unlabeled: the labels are not used, nothing to check or count */
    rf_source_opts o = {.unlabeled = 1};
    open_set(&s, dir, &o);
    assert_int_equal(s.nfiles_manifest, SHARDS);
    assert_int_equal(s.nfiles_mismatched, 0);
    rf__source_close(&s);
}

static void test_relabel_far_apart_is_walked(void **state)
{
    (void)state;
    char dir[2048];
    snprintf(dir, sizeof dir, "%.1900s/relabel-far", g_tmp);
    write_set_pad(dir, 1, 40 << 10);
    rf_source s;
    open_set(&s, dir, NULL);
    assert_int_equal(s.nfiles_manifest, SHARDS);
    rf__source_close(&s);
    relabel_check(dir);
}

/* Samples 2 and 3 of shard 1 swapped (their members' bytes): a valid tar
 * of the same size and the same ends, but the middle is another. */
static void test_reorder_at_the_same_size_is_walked(void **state)
{
    (void)state;
    char dir[2048], path[4096];
    snprintf(dir, sizeof dir, "%.1900s/reorder", g_tmp);
    write_set(dir, 1);
    uint64_t c2, c3, c4;
    int64_t l;
    cls_place(dir, 1, 2, &c2, &l);
    cls_place(dir, 1, 3, &c3, &l);
    cls_place(dir, 1, 4, &c4, &l);
    /* sample i's members run from its .jpg header to the next one's: the
     * .jpg is the first member, one member before the .cls */
    rf_source before;
    open_set(&before, dir, NULL);
    uint64_t a = before.data_off[PER_SHARD + 2] - 512, b = before.data_off[PER_SHARD + 3] - 512,
             e = before.data_off[PER_SHARD + 4] - 512;
    rf__source_close(&before);
    assert_true(a < c2 && c2 < b && b < c3 && c3 < e && e < c4);
    snprintf(path, sizeof path, "%s/s-1.tar", dir);
    size_t n;
    uint8_t *bytes = tu_read_file(path, &n);
    assert_non_null(bytes);
    uint8_t *swapped = malloc(e - a);
    memcpy(swapped, bytes + b, e - b);
    memcpy(swapped + (e - b), bytes + a, b - a);
    overwrite(path, a, swapped, e - a);
    free(swapped);
    free(bytes);

    rf_source with, walked;
    index_both(dir, &with, &walked);
    assert_same_index(&with, &walked);
    assert_int_equal(with.nfiles_mismatched, 1);
    rf__source_close(&with);
    rf__source_close(&walked);
}

/* A manifest whose one shard has a sample labelled label. */
static int indexed_with_label(const char *label)
{
    rf_manifest m;
    char json[512]; /* the manifest's text, kept by m */
    one_sample_manifest(&m, json, sizeof json, "a.tar", label, 1);
    int found = rf__manifest_find(&m, "a.tar", 4096) != NULL;
    rf__manifest_free(&m);
    return found;
}

static void test_labels_bounded_as_the_walk(void **state)
{
    (void)state;
    assert_true(indexed_with_label("999999999999999999"));   /* RF_SOURCE_MAX_LABEL */
    assert_false(indexed_with_label("1000000000000000000")); /* 19 digits: the walk refuses */
    assert_false(indexed_with_label("9223372036854775807")); /* INT64_MAX */
    assert_true(indexed_with_label("-1"));

    /* through the source: the sample's label is the shard's, nclasses sane */
    char dir[2048], path[4096];
    snprintf(dir, sizeof dir, "%.1900s/bounds", g_tmp);
    write_set(dir, 1);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    size_t n;
    char *text = (char *)tu_read_file(path, &n);
    assert_non_null(text);
    char *at = memmem(text, n, "[\"000008\", ", 11);
    assert_non_null(at);
    at += 11;
    char *end = strchr(at, ',');
    char *big = NULL;
    assert_true(asprintf(&big, "%.*s9223372036854775807%s", (int)(at - text), text, end) > 0);
    assert_int_equal(tu_write_file(path, big, strlen(big)), 0);
    free(big);
    free(text);
    rf_source with, walked;
    index_both(dir, &with, &walked);
    assert_same_index(&with, &walked);
    assert_int_equal(with.nclasses, 5);
    assert_int_equal(with.nfiles_manifest, SHARDS - 1);
    rf__source_close(&with);
    rf__source_close(&walked);
}

/* The digest of s-1's entry and of the shard's headers, labelled or not. */
static void digests(const char *dir, int labeled, uint8_t entry[32], uint8_t shard[32], int *rc)
{
    char path[4096], err[256];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    rf_manifest m;
    assert_int_equal(rf__manifest_read(path, &m, err, sizeof err), 0);
    const rf_manifest_shard *ms = rf__manifest_named(&m, "s-1.tar");
    assert_non_null(ms);
    assert_int_equal(rf__tar_entry_digest(&m, ms, labeled, entry), 0);
    rf__manifest_free(&m);
    snprintf(path, sizeof path, "%s/s-1.tar", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    off_t size = lseek(fd, 0, SEEK_END);
    *rc = rf__tar_shard_digest(fd, (uint64_t)size, labeled, shard);
    close(fd);
}

static void test_landing_digest(void **state)
{
    (void)state;
    char dir[2048], path[4096];
    snprintf(dir, sizeof dir, "%.1900s/digest", g_tmp);
    write_set(dir, 1);
    uint8_t e[32], s[32], e0[32], s0[32];
    int rc;
    digests(dir, 1, e, s, &rc);
    assert_int_equal(rc, 0);
    assert_memory_equal(e, s, 32);
    digests(dir, 0, e0, s0, &rc);
    assert_memory_equal(e0, s0, 32);
    assert_memory_not_equal(e, e0, 32); /* the labels count, when asked for */

    uint64_t off;
    int64_t label;
    cls_place(dir, 1, 5, &off, &label);
    char digit = (char)('0' + (label + 2) % 5);
    snprintf(path, sizeof path, "%s/s-1.tar", dir);
    overwrite(path, off, &digit, 1);
    digests(dir, 1, e, s, &rc);
    assert_int_equal(rc, 0);
    assert_memory_not_equal(e, s, 32);
    digests(dir, 0, e0, s0, &rc);
    assert_memory_equal(e0, s0, 32); /* unlabeled: a label is nobody's business */

    /* a member renamed, same size: every header is in the digest */
    rf_source before;
    open_set(&before, dir, NULL);
    uint64_t hdr = before.data_off[PER_SHARD + 4] - 512;
    rf__source_close(&before);
    size_t n;
    uint8_t *b = tu_read_file(path, &n);
    assert_non_null(b);
    b[hdr + 5] = b[hdr + 5] == '9' ? '8' : '9'; /* the key's last digit */
    uint64_t sum = 0;                           /* the header's checksum again */
    for (int i = 0; i < 512; i++)
        sum += i >= 148 && i < 156 ? ' ' : b[hdr + (uint64_t)i];
    snprintf((char *)b + hdr + 148, 8, "%06llo", (unsigned long long)sum);
    assert_int_equal(tu_write_file(path, b, n), 0);
    digests(dir, 0, e0, s0, &rc);
    assert_int_equal(rc, 0);
    assert_memory_not_equal(e0, s0, 32);

    /* damage: a header's checksum wrong, no digest */
    b[hdr] ^= 1;
    assert_int_equal(tu_write_file(path, b, n), 0);
    free(b);
    digests(dir, 0, e0, s0, &rc);
    assert_int_not_equal(rc, 0);
}

static int setup(void **state)
{
    (void)state;
    g_tmp = tu_tempdir("manifest_trust");
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
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relabel_at_the_same_size_is_walked),
        cmocka_unit_test(test_relabel_far_apart_is_walked),
        cmocka_unit_test(test_reorder_at_the_same_size_is_walked),
        cmocka_unit_test(test_labels_bounded_as_the_walk),
        cmocka_unit_test(test_landing_digest),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
