/*
 * test_remote.c - remote shards end to end in C, so that the sanitizer
 * builds and valgrind see the fetch thread, the cache and the pins at work
 * (the Python tests of the same never run under them).
 *
 * The group's setup writes tar shards of JPEGs (tarwrite.h, testutil's
 * encoder) into a temporary folder and serves it with
 * `python3 -m http.server --bind 127.0.0.1 PORT` on a free port; the
 * server dies with the test (teardown, and PR_SET_PDEATHSIG when the test
 * process dies first). Checked: every batch's hash over http:// with a cache
 * of two shards and 2 workers equals the same shards read locally, under
 * shuffle_block=2 and under the global shuffle (which refetches, and gives
 * up pins when the room runs short), for two epochs, one rank or two ranks
 * at once on one cache folder; the folder stays under its limit; a missing
 * URL fails the start naming the URL and HTTP 404; a forked child that
 * never destroys the loader holds no pin once the parent destroys it; a
 * shard whose transfer failed (HTTP 404 mid-run) is tried again at the next
 * epoch. Skipped when the build has no libcurl.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cache.h"
#include "ringfeed.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testutil.h"

#define NSHARDS 6
#define PER_SHARD 7 /* 42 samples: batches of 5 leave a short last one */

static char *g_dir; /* the shards, served */
static char *g_tmp; /* cache folders */
static pid_t g_server = -1;
static int g_port;
static uint64_t g_shard_bytes;

static tu_http g_http = {-1, 0}; /* the server (testutil_http.c) */

static void stop_server(void)
{
    tu_http_stop(&g_http);
    g_server = g_http.pid;
}

/* http.server over g_dir; 0, or -1 when it does not answer within 20 s. */
static int start_server(void)
{
    int rc = tu_http_start(&g_http, g_dir);
    g_server = g_http.pid;
    g_port = g_http.port;
    return rc;
}

static void write_shards(void)
{
    for (int s = 0; s < NSHARDS; s++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/r-%04d.tar", g_dir, s);
        tw t;
        assert_int_equal(tw_open(&t, path, TW_USTAR), 0);
        for (int i = 0; i < PER_SHARD; i++) {
            /* one size for all: the shards are the same size */
            tu_jpeg_opts o = {40, 32, 85, 0, 0, 0, 0, (uint32_t)(s * 100 + i + 1), 0, 0};
            uint8_t *jpg;
            size_t len;
            assert_int_equal(tu_make_jpeg(&o, &jpg, &len), 0);
            char name[64], cls[8];
            snprintf(name, sizeof name, "k%02d%02d.jpg", s, i);
            assert_int_equal(tw_file(&t, name, jpg, len), 0);
            free(jpg);
            snprintf(name, sizeof name, "k%02d%02d.cls", s, i);
            snprintf(cls, sizeof cls, "%d", (s + i) % 4);
            assert_int_equal(tw_file(&t, name, cls, strlen(cls)), 0);
        }
        assert_int_equal(tw_close(&t), 0);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        if ((uint64_t)st.st_size > g_shard_bytes)
            g_shard_bytes = (uint64_t)st.st_size;
    }
}

static int setup(void **state)
{
    (void)state;
    g_dir = tu_tempdir("remote_shards");
    g_tmp = tu_tempdir("remote_cache");
    return g_dir && g_tmp ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    stop_server();
    tu_tempdir_remove(&g_dir);
    tu_tempdir_remove(&g_tmp);
    return 0;
}

/* The server starts once, on the first test's call (after the shards). */
static void need_server(void)
{
    if (g_server > 0)
        return;
    write_shards();
    if (start_server() != 0)
        fail_msg("python3 -m http.server did not start on port %d", g_port);
}

static uint64_t folder_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_size;
    }
    closedir(d);
    return total;
}

/* Shards (*.tar) of the cache folder for which is(dir fd, name) says 1. */
static int count_shards(const char *dir, int (*is)(int dfd, const char *name))
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len >= 4 && !strcmp(e->d_name + len - 4, ".tar"))
            n += is(dirfd(d), e->d_name);
    }
    closedir(d);
    return n;
}

/* Still marked as not synced (cache.c): none once the loaders that fetched
 * them are gone (synced after their first batch, or when destroyed). */
static int is_marked(int dfd, const char *name)
{
    char v[64];
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
    int marked = fd >= 0 && fgetxattr(fd, RF__CACHE_MARK, v, sizeof v) >= 0;
    if (fd >= 0)
        close(fd);
    return marked;
}

/* Held with a flock by some open file (what eviction finds: it takes an
 * exclusive lock without waiting). */
static int is_locked(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int locked = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return locked;
}

static int marked_shards(const char *dir)
{
    return count_shards(dir, is_marked);
}

static int locked_shards(const char *dir)
{
    return count_shards(dir, is_locked);
}

typedef struct run_opts {
    int64_t block;       /* RF_P_SHUFFLE_BLOCK */
    int world;           /* ranks, run at once, stepped batch by batch in turn */
    int64_t limit_extra; /* cache_limit: two shards and this */
} run_opts;

/* Every batch's hash of two epochs of each rank, into h[rank][] (room for
 * 32); returns the batches per rank. cache: NULL for a local source. The
 * ranks share the cache folder, as the loaders of one node do. */
static int epoch_hashes(const char *src, const char *cache, const run_opts *o, uint64_t h[][32],
                        int64_t *refetches, int64_t *releases, int64_t *evictions)
{
    rf_loader *l[2];
    assert_true(o->world <= 2);
    for (int r = 0; r < o->world; r++) {
        l[r] = TU_LOADER(src, {RF_P_BATCH_SIZE, 5}, {RF_P_IMAGE_SIZE, 24},
                         {RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP}, {RF_P_NUM_WORKERS, 2},
                         {RF_P_SHUFFLE, 1}, {RF_P_SEED, 7}, {RF_P_SHUFFLE_BLOCK, o->block},
                         {RF_P_RANK, r}, {RF_P_WORLD_SIZE, o->world}, {RF_P_PREFETCH, 2});
        if (cache) {
            assert_int_equal(rf_loader_set_cache_dir(l[r], cache), RF_OK);
            assert_int_equal(rf_loader_set_param(l[r], RF_P_CACHE_LIMIT,
                                                 (int64_t)(2 * g_shard_bytes) + o->limit_extra),
                             RF_OK);
        }
        tu_start(l[r]);
    }
    int n = 0;
    for (int e = 0; e < 2; e++) {
        for (int r = 0; r < o->world; r++)
            assert_int_equal(rf_loader_set_epoch(l[r], e), RF_OK);
        for (int done = 0; !done;) {
            for (int r = 0; r < o->world; r++) {
                rf_batch *b;
                int rc = rf_loader_next(l[r], &b);
                if (rc == RF_END_OF_EPOCH) {
                    done = 1;
                    continue;
                }
                if (rc != RF_OK)
                    fail_msg("rank %d, epoch %d: %d: %s", r, e, rc, rf_loader_errmsg(l[r]));
                assert_true(n < 32);
                h[r][n] = tu_batch_hash(TU_FNV_INIT, b);
                rf_batch_release(b);
            }
            n += !done;
        }
    }
    *refetches = *releases = *evictions = 0;
    for (int r = 0; r < o->world; r++) {
        if (cache) {
            char *st = tu_stats(l[r]);
            assert_int_equal(tu_stats_int(st, "retries"), 0);
            *refetches += tu_stats_int(st, "refetches");
            *releases += tu_stats_int(st, "releases");
            *evictions += tu_stats_int(st, "evictions");
            free(st);
        }
        rf_loader_destroy(l[r]);
    }
    return n;
}

/* Two epochs over http:// give the batches of the same shards on disk,
 * the cache folder never over its limit at the end. */
static void same_as_local(const run_opts *o, const char *tag, int64_t *refetches, int64_t *releases)
{
    need_server();
    char local[4300], url[200], cache[4300];
    snprintf(local, sizeof local, "%s/r-{0000..%04d}.tar", g_dir, NSHARDS - 1);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/r-{0000..%04d}.tar", g_port, NSHARDS - 1);
    snprintf(cache, sizeof cache, "%s/%s", g_tmp, tag);
    uint64_t want[2][32], got[2][32];
    int64_t evictions, unused;
    int nw = epoch_hashes(local, NULL, o, want, &unused, &unused, &unused);
    int ng = epoch_hashes(url, cache, o, got, refetches, releases, &evictions);
    /* 42 samples: 9 batches of 5 for one rank, 5 of 5 for each of two */
    assert_int_equal(nw, 2 * (o->world == 1 ? 9 : 5));
    assert_int_equal(ng, nw);
    for (int r = 0; r < o->world; r++)
        for (int i = 0; i < nw; i++)
            if (want[r][i] != got[r][i])
                fail_msg("%s: rank %d, batch %d differs from the local shards'", tag, r, i);
    assert_true(evictions > 0);
    print_message("%s: refetches %lld, releases %lld\n", tag, (long long)*refetches,
                  (long long)*releases);
    assert_true(folder_bytes(cache) <= 2 * g_shard_bytes + (uint64_t)o->limit_extra);
    assert_int_equal(marked_shards(cache), 0);
}

static void test_http_shard_blocks_match_local(void **state)
{
    (void)state;
    int64_t refetches, releases;
    same_as_local(&(run_opts){.block = 2, .world = 1, .limit_extra = 8192}, "blocks", &refetches,
                  &releases);
    same_as_local(&(run_opts){.block = 2, .world = 2, .limit_extra = 8192}, "blocks2", &refetches,
                  &releases);
}

/* The global shuffle over a cache smaller than the data: refetches. With
 * the indexes taking part of the two shards' room, one rank's pins for
 * later samples must be given up for its next sample's shard; two ranks
 * give up theirs for each other (the folder's starvation count). */
static void test_http_global_shuffle_matches_local(void **state)
{
    (void)state;
    int64_t refetches, releases;
    same_as_local(&(run_opts){.block = 0, .world = 1, .limit_extra = 8192}, "global", &refetches,
                  &releases);
    assert_true(refetches > 0);
    /* the kept indexes eat the spare room: the head finds none while this
     * loader pins the next shard, and gives that pin up */
    same_as_local(&(run_opts){.block = 0, .world = 1, .limit_extra = 200}, "squeezed", &refetches,
                  &releases);
    assert_true(releases > 0);
    same_as_local(&(run_opts){.block = 0, .world = 2, .limit_extra = 8192}, "global2", &refetches,
                  &releases);
    assert_true(refetches > 0);
}

static void test_http_missing_url_names_it(void **state)
{
    (void)state;
    need_server();
    char url[200], cache[4300], want[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/nope-{0000..0001}.tar", g_port);
    snprintf(cache, sizeof cache, "%s/missing", g_tmp);
    rf_loader *l = TU_LOADER(url, {RF_P_BATCH_SIZE, 5});
    assert_int_equal(rf_loader_set_cache_dir(l, cache), RF_OK);
    assert_int_equal(rf_loader_start(l), RF_E_SOURCE);
    snprintf(want, sizeof want, "HEAD http://127.0.0.1:%d/nope-0000.tar: HTTP status 404", g_port);
    if (!strstr(rf_loader_errmsg(l), want))
        fail_msg("message %s lacks %s", rf_loader_errmsg(l), want);
    rf_loader_destroy(l);
}

/* A loader on the http:// shards with the cache folder g_tmp/TAG (its path
 * in cache), started cold, after its first batch. */
static rf_loader *after_first_batch(const char *tag, char *cache, size_t cap)
{
    need_server();
    char url[200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/r-{0000..%04d}.tar", g_port, NSHARDS - 1);
    snprintf(cache, cap, "%s/%s", g_tmp, tag);
    rf_loader *l = TU_LOADER(url, {RF_P_BATCH_SIZE, 5}, {RF_P_IMAGE_SIZE, 24},
                             {RF_P_NUM_WORKERS, 2}, {RF_P_PREFETCH, 2});
    assert_int_equal(rf_loader_set_cache_dir(l, cache), RF_OK);
    tu_start(l);
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    rf_batch_release(b);
    return l;
}

/* A DataLoader worker forks the trainer and never destroys its copy of the
 * loader: once the parent destroys the loader, no shard stays pinned. */
static void test_forked_child_holds_no_pins(void **state)
{
    (void)state;
    char cache[4300];
    rf_loader *l = after_first_batch("fork", cache, sizeof cache);
    assert_true(locked_shards(cache) > 0); /* the next samples' shards */
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) { /* holds its copy of the loader until the parent says */
        close(p[1]);
        char x;
        while (read(p[0], &x, 1) < 0 && errno == EINTR)
            ;
        _exit(0);
    }
    close(p[0]);
    assert_true(locked_shards(cache) > 0); /* the parent's pins stay */
    rf_loader_destroy(l);
    int left = locked_shards(cache);
    close(p[1]);
    waitpid(child, NULL, 0);
    assert_int_equal(left, 0);
}

/* A shard that lands before the first batch is read at once and synced
 * after that batch (held while the loader is cold): its mark goes while
 * the loader lives, not only when it is destroyed. */
static void test_synced_after_the_first_batch(void **state)
{
    (void)state;
    char cache[4300];
    rf_loader *l = after_first_batch("synced", cache, sizeof cache);
    int marked = -1;
    for (int i = 0; i < 500 && marked != 0; i++) { /* up to 5 s: later shards land too */
        marked = marked_shards(cache);
        if (marked)
            usleep(10000);
    }
    assert_int_equal(marked, 0);
    rf_loader_destroy(l);
}

/* Batches of one epoch (shuffle off), hashed; errors counted, the last
 * message kept. */
static int epoch_of(rf_loader *l, int64_t epoch, uint64_t *h, int *errors, char *msg, size_t cap)
{
    assert_int_equal(rf_loader_set_epoch(l, epoch), RF_OK);
    int n = 0;
    *errors = 0;
    for (;;) {
        rf_batch *b;
        int rc = rf_loader_next(l, &b);
        if (rc == RF_END_OF_EPOCH)
            break;
        assert_true(n < 32);
        if (rc != RF_OK) {
            snprintf(msg, cap, "%s", rf_loader_errmsg(l));
            (*errors)++;
            h[n++] = 0;
            continue;
        }
        h[n++] = tu_batch_hash(TU_FNV_INIT, b);
        rf_batch_release(b);
    }
    return n;
}

static rf_loader *seq_loader(const char *src, const char *cache)
{
    rf_loader *l = TU_LOADER(src, {RF_P_BATCH_SIZE, 5}, {RF_P_IMAGE_SIZE, 24},
                             {RF_P_NUM_WORKERS, 2}, {RF_P_PREFETCH, 2});
    if (cache) {
        assert_int_equal(rf_loader_set_cache_dir(l, cache), RF_OK);
        assert_int_equal(
            rf_loader_set_param(l, RF_P_CACHE_LIMIT, (int64_t)(2 * g_shard_bytes) + 8192), RF_OK);
    }
    tu_start(l);
    return l;
}

/* A shard whose transfer fails (its object gone for a while: HTTP 404)
 * fails its samples for the epoch, and is fetched again at the next one. */
static void test_failed_shard_tried_again_next_epoch(void **state)
{
    (void)state;
    need_server();
    char local[4300], url[200], cache[4300], moved[4300], away[4310], msg[2048] = "";
    snprintf(local, sizeof local, "%s/r-{0000..%04d}.tar", g_dir, NSHARDS - 1);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/r-{0000..%04d}.tar", g_port, NSHARDS - 1);
    snprintf(cache, sizeof cache, "%s/retry", g_tmp);
    uint64_t want[32], got[32];
    int errors;
    rf_loader *l = seq_loader(local, NULL);
    int nw = epoch_of(l, 1, want, &errors, msg, sizeof msg);
    rf_loader_destroy(l);
    /* the indexes kept, no shard in the cache: the next start fetches none */
    rf_loader_destroy(seq_loader(url, cache));
    DIR *d = opendir(cache);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 4 && !strcmp(e->d_name + len - 4, ".tar"))
            assert_int_equal(unlinkat(dirfd(d), e->d_name, 0), 0);
    }
    closedir(d);
    l = seq_loader(url, cache);
    /* the last shard is wanted only once the first four are done with (the
     * cache holds two): gone before its GET */
    snprintf(moved, sizeof moved, "%s/r-%04d.tar", g_dir, NSHARDS - 1);
    snprintf(away, sizeof away, "%s.away", moved);
    assert_int_equal(rename(moved, away), 0);
    int n0 = epoch_of(l, 0, got, &errors, msg, sizeof msg);
    assert_int_equal(rename(away, moved), 0);
    assert_int_equal(n0, nw);
    assert_true(errors > 0);
    if (!strstr(msg, "404") || !strstr(msg, "r-0005.tar"))
        fail_msg("epoch 0's error lacks the URL or the status: %s", msg);
    int n1 = epoch_of(l, 1, got, &errors, msg, sizeof msg);
    rf_loader_destroy(l);
    assert_int_equal(n1, nw);
    if (errors)
        fail_msg("epoch 1: %d batches failed: %s", errors, msg);
    for (int i = 0; i < nw; i++)
        if (got[i] != want[i])
            fail_msg("epoch 1, batch %d differs from the local shards'", i);
}

int main(void)
{
#ifndef RF_HAVE_CURL
    print_message("[  SKIPPED ] test_remote: built without libcurl (RF_WITH_CURL)\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_shard_blocks_match_local),
        cmocka_unit_test(test_http_global_shuffle_matches_local),
        cmocka_unit_test(test_http_missing_url_names_it),
        cmocka_unit_test(test_forked_child_holds_no_pins),
        cmocka_unit_test(test_synced_after_the_first_batch),
        cmocka_unit_test(test_failed_shard_tried_again_next_epoch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
#endif
}
