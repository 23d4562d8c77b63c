/*
 * test_mix_remote.c - mixtures with remote sources in C, so that the
 * sanitizer builds and valgrind see a mixture's fetchers, pins and
 * lookaheads at work (the Python tests over S3 never run under them).
 *
 * The group's setup writes four tar shards and an image folder, and serves
 * the shards over http.server (testutil_http.c). Checked: a folder and two
 * remote sources (two shards each, one with a label offset, one shuffled by
 * blocks of a shard), with a cache folder of three shards, give batch for
 * batch (pixels, labels, samples, sources) what the same mixture of local
 * shards gives, for two epochs, with two workers; each source its share;
 * and epoch 1 stopped after 2 batches on 4 ranks and resumed on 3 delivers
 * every sample as many times as the uninterrupted epoch. Skipped without
 * libcurl.
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

#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"
#include "testutil_http.h"

enum { NSHARDS = 4, PER_SHARD = 6, FOLDER_N = 12, BATCH = 5, EPOCH = 60 };

static char *g_dir, *g_tmp;
static tu_http g_http;
static char g_folder[4200];
static uint64_t g_shard_bytes;

static void write_shards(void)
{
    for (int s = 0; s < NSHARDS; s++) {
        char path[4300], prefix[16];
        snprintf(path, sizeof path, "%s/m-%02d.tar", g_dir, s);
        snprintf(prefix, sizeof prefix, "m%02d", s);
        tu_shard_opts o = {prefix, PER_SHARD, 32, 28, (uint32_t)(s * 50 + 3), s * 3, 5};
        uint64_t bytes;
        assert_int_equal(tu_write_jpeg_shard(path, &o, &bytes), 0);
        g_shard_bytes = bytes > g_shard_bytes ? bytes : g_shard_bytes;
    }
}

static int setup(void **state)
{
    (void)state;
    g_dir = tu_tempdir("mixr_shards");
    g_tmp = tu_tempdir("mixr_cache");
    return g_dir && g_tmp ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tu_http_stop(&g_http);
    tu_tempdir_remove(&g_dir);
    tu_tempdir_remove(&g_tmp);
    return 0;
}

/* The shards written and served, the folder made (once). */
static void serve(void)
{
    if (g_http.pid > 0)
        return;
    write_shards();
    snprintf(g_folder, sizeof g_folder, "%s/folder", g_tmp);
    assert_int_equal(tu_make_folder(g_folder, 2, FOLDER_N / 2, 36, 30, 8), 0);
    if (tu_http_start(&g_http, g_dir, 0, 0) != 0)
        fail_msg("python3 -m http.server did not start");
}

/* Folder 0.4, shards 0-1 0.3 (labels + 10), shards 2-3 0.3 (blocks of one
 * shard), read from `where` (a URL or the folder of the shards). */
static rf_loader *mixture(const char *where, const char *cache, int rank, int world)
{
    rf_loader *l = rf_loader_create_mix(EPOCH);
    assert_non_null(l);
    const tu_param p[] = {{RF_P_BATCH_SIZE, BATCH},
                          {RF_P_IMAGE_SIZE, 16},
                          {RF_P_TRANSFORM, RF_TRANSFORM_CENTER},
                          {RF_P_SEED, 11},
                          {RF_P_NUM_WORKERS, 2},
                          {RF_P_RANK, rank},
                          {RF_P_WORLD_SIZE, world},
                          {RF_P_CACHE_LIMIT, (int64_t)(3 * g_shard_bytes + 4096)}};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        assert_int_equal(rf_loader_set_param(l, p[i].param, p[i].value), 0);
    char a[4300], b[4300];
    snprintf(a, sizeof a, "%s/m-{00..01}.tar", where);
    snprintf(b, sizeof b, "%s/m-{02..03}.tar", where);
    assert_int_equal(rf_loader_add_source(l, g_folder, RF_MIX_PROPORTION, 0.4), 0);
    assert_int_equal(rf_loader_add_source(l, a, RF_MIX_PROPORTION, 0.3), 1);
    assert_int_equal(rf_loader_add_source(l, b, RF_MIX_PROPORTION, 0.3), 2);
    assert_int_equal(rf_loader_set_source_param(l, 1, RF_SP_LABEL_OFFSET, 10), 0);
    assert_int_equal(rf_loader_set_source_param(l, 2, RF_SP_SHUFFLE_BLOCK, 1), 0);
    if (cache)
        assert_int_equal(rf_loader_set_cache_dir(l, cache), 0);
    tu_start(l);
    return l;
}

static void url(char *buf, size_t cap)
{
    snprintf(buf, cap, "http://127.0.0.1:%d", g_http.port);
}

static void cache_dir(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", g_tmp, name);
}

/* Batch hashes of epochs 0 and 1, and the samples per source. */
static void epochs(rf_loader *l, uint64_t *h, int64_t *per)
{
    for (int64_t e = 0; e < 2; e++) {
        assert_int_equal(rf_loader_set_epoch(l, e), 0);
        h[e] = TU_FNV_INIT;
        rf_batch *b;
        int rc;
        while ((rc = rf_loader_next(l, &b)) == RF_OK) {
            const int32_t *src = rf_batch_sources(b);
            for (int64_t i = 0; i < rf_batch_count(b); i++)
                per[src[i]]++;
            h[e] = tu_batch_hash(h[e], b);
            h[e] = tu_fnv1a(h[e], src, (size_t)rf_batch_count(b) * sizeof *src);
            rf_batch_release(b);
        }
        if (rc != RF_END_OF_EPOCH)
            fail_msg("epoch %lld: %d %s", (long long)e, rc, rf_loader_errmsg(l));
    }
}

static void test_remote_sources_match_local(void **state)
{
    (void)state;
    serve();
    char u[64], c[4300];
    url(u, sizeof u);
    cache_dir(c, sizeof c, "match");
    uint64_t local[2], remote[2];
    int64_t per_local[3] = {0}, per_remote[3] = {0};
    rf_loader *l = mixture(g_dir, NULL, 0, 1);
    epochs(l, local, per_local);
    rf_loader_destroy(l);
    l = mixture(u, c, 0, 1);
    epochs(l, remote, per_remote);
    char *js = tu_stats(l);
    assert_true(tu_stats_int(js, "cache_misses") >= 1); /* fetched, not found */
    free(js);
    rf_loader_destroy(l);
    assert_memory_equal(local, remote, sizeof local);
    const int64_t want[3] = {2 * 24, 2 * 18, 2 * 18};
    assert_memory_equal(per_local, want, sizeof want);
    assert_memory_equal(per_remote, want, sizeof want);
}

/* Samples of epoch 1, counted: `from` ranks take `k` batches each (all:
 * k < 0), then `to` ranks the rest. */
static void epoch1_counts(const char *where, const char *cache, int from, int to, int k,
                          int64_t *hits)
{
    int64_t consumed = -1;
    for (int r = 0; r < from; r++) {
        rf_loader *l = mixture(where, cache, r, from);
        assert_int_equal(rf_loader_set_epoch(l, 1), 0);
        rf_batch *b;
        for (int i = 0; (k < 0 || i < k) && rf_loader_next(l, &b) == RF_OK; i++) {
            for (int64_t j = 0; j < rf_batch_count(b); j++)
                hits[rf_batch_samples(b)[j]]++;
            rf_batch_release(b);
        }
        assert_int_equal(rf_loader_tell_rest(l, NULL, &consumed), 0);
        rf_loader_destroy(l);
    }
    for (int r = 0; r < to; r++) {
        rf_loader *l = mixture(where, cache, r, to);
        assert_int_equal(rf_loader_seek_rest(l, 1, consumed, 0), 0);
        rf_batch *b;
        int rc;
        while ((rc = rf_loader_next(l, &b)) == RF_OK) {
            for (int64_t j = 0; j < rf_batch_count(b); j++)
                hits[rf_batch_samples(b)[j]]++;
            rf_batch_release(b);
        }
        if (rc != RF_END_OF_EPOCH)
            fail_msg("rank %d of %d: %d %s", r, to, rc, rf_loader_errmsg(l));
        rf_loader_destroy(l);
    }
}

static void test_remote_mixture_resumes_4_on_3(void **state)
{
    (void)state;
    serve();
    char u[64], c[4300];
    url(u, sizeof u);
    cache_dir(c, sizeof c, "resume");
    enum { N = FOLDER_N + NSHARDS * PER_SHARD };
    int64_t want[N] = {0}, got[N] = {0};
    epoch1_counts(u, c, 1, 0, -1, want);
    /* 4 ranks x 2 batches of 5 leave 20 of the 60: 3 ranks pad it to 21 */
    epoch1_counts(u, c, 4, 3, 2, got);
    int64_t extra = 0, total = 0;
    for (int i = 0; i < N; i++) {
        assert_true(got[i] >= want[i]);
        extra += got[i] - want[i];
        total += want[i];
    }
    assert_int_equal(total, EPOCH);
    assert_int_equal(extra, 1); /* the padding, one entry of the rest again */
}

int main(void)
{
#ifndef RF_HAVE_CURL
    print_message("[  SKIPPED ] test_mix_remote: built without libcurl (RF_WITH_CURL)\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remote_sources_match_local),
        cmocka_unit_test(test_remote_mixture_resumes_4_on_3),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
#endif
}
