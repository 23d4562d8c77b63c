/*
 * test_remote_start.c - the start of a loader over remote shards: its
 * descriptors, the parallelism of its walks, and its cancel; and what
 * rf_loader_next does after an error. In C, so that the sanitizer builds
 * and valgrind see the fetch thread halt and the start undo itself.
 *
 * The shards (2 JPEGs each) are served by testutil_http's server, in a
 * process of its own. Checked:
 *   - 80 shards, and 80 folders of one shard each, start and give every
 *     sample, cold and then warm (kept indexes, pins from the cache), in a
 *     child whose RLIMIT_NOFILE is 64 (soft and hard): the pins are bounded
 *     by the descriptors, the manifests' GETs (one per folder) too;
 *   - a soft limit below the hard one is raised to it at start;
 *   - without a manifest or kept indexes, the walks at start fetch shards
 *     fetch_parallel at once (the server counts the GETs in progress);
 *   - rf_loader_cancel from another thread ends a start stalled on a server
 *     that never answers (the HEADs) or never sends a shard (its transfer
 *     running, a temporary file and a fetch lock held) with RF_E_STOPPED,
 *     at once, leaving no thread, no temporary file and no flock; a cancel
 *     before the start fails it, for good; after a start it stops the loader;
 *   - after an error of a batch, rf_loader_next returns the next batch.
 * Skipped (the remote parts) when the build has no libcurl.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testutil.h"
#include "testutil_http.h"

#define NSHARDS 80
#define PER_SHARD 2

/* Shards the descriptor tests read: NSHARDS, but under valgrind (which
 * keeps the hard limit: see in_child) the limit is not the point, and a
 * fifth of them does for its checks (RINGFEED_TEST_SCALE < 1). */
static int g_nshards = NSHARDS;
static char *g_dir; /* served: flat/t-NNNN.tar, dirs/dNNN/t-NNNN.tar */
static char *g_tmp; /* cache folders */
static tu_http g_srv;
static int g_ncache;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int have_remote(void)
{
    return strstr(rf_features(), "remote") != NULL;
}

static void write_shard(const char *path, int s)
{
    tw t;
    assert_int_equal(tw_open(&t, path, TW_USTAR), 0);
    for (int i = 0; i < PER_SHARD; i++) {
        tu_jpeg_opts o = {24, 20, 80, 0, 0, 0, 0, (uint32_t)(s * 10 + i + 1), 0, 0};
        uint8_t *jpg;
        size_t len;
        assert_int_equal(tu_make_jpeg(&o, &jpg, &len), 0);
        char name[64], cls[8];
        snprintf(name, sizeof name, "k%03d%d.jpg", s, i);
        assert_int_equal(tw_file(&t, name, jpg, len), 0);
        free(jpg);
        snprintf(name, sizeof name, "k%03d%d.cls", s, i);
        snprintf(cls, sizeof cls, "%d", (s + i) % 3);
        assert_int_equal(tw_file(&t, name, cls, strlen(cls)), 0);
    }
    assert_int_equal(tw_close(&t), 0);
}

static int setup(void **state)
{
    (void)state;
    g_dir = tu_tempdir("start_shards");
    g_tmp = tu_tempdir("start_cache");
    return g_dir && g_tmp ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tu_http_stop(&g_srv);
    tu_tempdir_remove(&g_dir);
    tu_tempdir_remove(&g_tmp);
    return 0;
}

/* The shards and the server, once (while the process has no thread). */
static void need_server(void)
{
    if (!have_remote())
        skip();
    if (g_srv.pid > 0)
        return;
    const char *scale = getenv("RINGFEED_TEST_SCALE");
    if (scale && atof(scale) > 0 && atof(scale) < 1)
        g_nshards = NSHARDS / 5;
    char p[4200];
    for (int s = 0; s < NSHARDS; s++) {
        snprintf(p, sizeof p, "%s/flat", g_dir);
        assert_int_equal(tu_mkdir_p(p), 0);
        snprintf(p, sizeof p, "%s/flat/t-%04d.tar", g_dir, s);
        write_shard(p, s);
        snprintf(p, sizeof p, "%s/dirs/d%03d", g_dir, s);
        assert_int_equal(tu_mkdir_p(p), 0);
        snprintf(p, sizeof p, "%s/dirs/d%03d/t-%04d.tar", g_dir, s, s);
        write_shard(p, s);
    }
    if (tu_http_start(&g_srv, g_dir, 0, 0) != 0)
        fail_msg("the test's HTTP server did not start");
}

/* A new cache folder's path. */
static void new_cache(char *out, size_t cap)
{
    snprintf(out, cap, "%s/c%d", g_tmp, g_ncache++);
}

/* http://127.0.0.1:PORT/flat/t-{0000..N-1}.tar, or the N folders' shards. */
static void source_of(char *out, size_t cap, int port, int n, int folders)
{
    if (!folders) {
        snprintf(out, cap, "http://127.0.0.1:%d/flat/t-{0000..%04d}.tar", port, n - 1);
        return;
    }
    size_t at = 0;
    for (int s = 0; s < n && at < cap; s++)
        at += (size_t)snprintf(out + at, cap - at, "%shttp://127.0.0.1:%d/dirs/d%03d/t-%04d.tar",
                               s ? "\n" : "", port, s, s);
}

static rf_loader *remote_loader(const char *src, const char *cache, int parallel)
{
    rf_loader *l = TU_LOADER(src, {RF_P_BATCH_SIZE, 8}, {RF_P_IMAGE_SIZE, 16},
                             {RF_P_NUM_WORKERS, 1}, {RF_P_FETCH_PARALLEL, parallel},
                             {RF_P_FETCH_TIMEOUT_MS, 20000}, {RF_P_FETCH_RETRIES, 2});
    assert_int_equal(rf_loader_set_cache_dir(l, cache), RF_OK);
    return l;
}

/* ---- descriptors (items run in a child with a low RLIMIT_NOFILE) ---------- */

/* The child's side, without cmocka: a loader over src on cache, started and
 * read for one epoch; its samples, or -1 with the reason on stderr. */
static int64_t child_epoch(const char *src, const char *cache)
{
    rf_loader *l = rf_loader_create(src);
    if (!l)
        return -1;
    int64_t got = -1;
    int rc = RF_OK;
    const int param[][2] = {{RF_P_BATCH_SIZE, 8}, {RF_P_IMAGE_SIZE, 16}, {RF_P_NUM_WORKERS, 1},
                            {RF_P_FETCH_TIMEOUT_MS, 20000}, {RF_P_FETCH_RETRIES, 2}};
    for (size_t i = 0; i < sizeof param / sizeof *param && rc == RF_OK; i++)
        rc = rf_loader_set_param(l, param[i][0], param[i][1]);
    if (rc == RF_OK)
        rc = rf_loader_set_cache_dir(l, cache);
    if (rc == RF_OK)
        rc = rf_loader_start(l);
    if (rc == RF_OK) {
        rf_batch *b;
        got = 0;
        while ((rc = rf_loader_next(l, &b)) == RF_OK) {
            got += rf_batch_count(b);
            rf_batch_release(b);
        }
    }
    if (rc < 0) {
        fprintf(stderr, "child: %s: %s\n", rf_strerror(rc), rf_loader_errmsg(l));
        got = -1;
    }
    rf_loader_destroy(l);
    return got;
}

/* Runs two epochs of src (a cold start on a new cache, then a warm one:
 * kept indexes, shards pinned from the cache) in a child whose
 * RLIMIT_NOFILE is soft / hard; then checks, in the child, that the soft
 * limit became want_soft. Fails unless both epochs gave every sample. */
static void in_child(const char *src, rlim_t soft, rlim_t hard, rlim_t want_soft)
{
    char cache[4200];
    new_cache(cache, sizeof cache);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {soft, hard};
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0 && errno == EPERM &&
            getrlimit(RLIMIT_NOFILE, &rl) == 0) {
            /* valgrind keeps the hard limit as it is (lowering it is allowed
             * anywhere else): the soft one alone, which the start raises */
            want_soft = rl.rlim_max;
            rl.rlim_cur = soft;
        }
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            fprintf(stderr, "child: setrlimit: %s\n", strerror(errno));
            _exit(2);
        }
        int bad = 0;
        for (int run = 0; run < 2; run++) {
            int64_t n = child_epoch(src, cache);
            if (n != g_nshards * PER_SHARD) {
                fprintf(stderr, "child: run %d: %lld samples, want %d\n", run, (long long)n,
                        g_nshards * PER_SHARD);
                bad = 1;
            }
        }
        if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur != want_soft) {
            fprintf(stderr, "child: soft limit %llu, want %llu\n", (unsigned long long)rl.rlim_cur,
                    (unsigned long long)want_soft);
            bad = 1;
        }
        _exit(bad);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("the child failed (status %#x): see its messages above", st);
}

static void test_many_shards_under_64_descriptors(void **state)
{
    (void)state;
    need_server();
    char src[256];
    source_of(src, sizeof src, g_srv.port, g_nshards, 0);
    in_child(src, 64, 64, 64);
}

static void test_many_folders_under_64_descriptors(void **state)
{
    (void)state;
    need_server();
    char src[NSHARDS * 80];
    source_of(src, sizeof src, g_srv.port, g_nshards, 1);
    in_child(src, 64, 64, 64);
}

static void test_soft_limit_raised_to_the_hard_one(void **state)
{
    (void)state;
    need_server();
    char src[256];
    source_of(src, sizeof src, g_srv.port, g_nshards, 0);
    in_child(src, 64, 4096, 4096);
}

/* ---- the walks at start ----------------------------------------------------- */

static void test_walks_fetch_parallel(void **state)
{
    (void)state;
    need_server();
    tu_http slow;
    if (tu_http_start(&slow, g_dir, 150, 0) != 0)
        fail_msg("the slow server did not start");
    char src[256], cache[4200];
    source_of(src, sizeof src, slow.port, 12, 0);
    new_cache(cache, sizeof cache);
    rf_loader *l = remote_loader(src, cache, 4);
    double t0 = now_s();
    tu_start(l);
    double took = now_s() - t0;
    int most = atomic_load(&slow.counts->tar_gets_max);
    rf_loader_destroy(l);
    tu_http_stop(&slow);
    /* 12 shards of 150 ms each: about 1.8 s one at a time, 0.5 s 4 at once */
    print_message("12 walks, 150 ms per GET: start %.2f s, %d GETs at once at most\n", took, most);
    assert_true(most >= 3);
}

/* ---- cancel ------------------------------------------------------------------- */

static int count_entries(const char *dir, const char *holding)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.' && (!holding || strstr(e->d_name, holding));
    closedir(d);
    return n;
}

/* flocks this process holds (/proc/locks: "N: FLOCK ADVISORY WRITE PID ..."). */
static int my_flocks(void)
{
    FILE *f = fopen("/proc/locks", "r");
    if (!f)
        return 0;
    char line[256], kind[32];
    int n = 0, pid;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%*s %31s %*s %*s %d", kind, &pid) == 2 && !strcmp(kind, "FLOCK") &&
            pid == getpid())
            n++;
    fclose(f);
    return n;
}

typedef struct canceller {
    rf_loader *l;
    const char *cache; /* NULL: cancel after delay_ms; else once a transfer file is there */
    int delay_ms;
    double at; /* when rf_loader_cancel was called */
    int saw_tmp, flocks_before;
} canceller;

static void *cancel_main(void *arg)
{
    canceller *c = arg;
    for (int waited = 0; waited < 20000; waited += 10) {
        if (c->cache ? count_entries(c->cache, ".tmp.") > 0 : waited >= c->delay_ms)
            break;
        struct timespec t = {0, 10 * 1000000L};
        nanosleep(&t, NULL);
    }
    if (c->cache) {
        c->saw_tmp = count_entries(c->cache, ".tmp.");
        c->flocks_before = my_flocks();
    }
    c->at = now_s();
    rf_loader_cancel(c->l);
    return NULL;
}

/* Starts l while another thread cancels it (c); the start must fail with
 * RF_E_STOPPED soon after the cancel and leave nothing running or held. */
static void start_cancelled(rf_loader *l, canceller *c, const char *cache)
{
    int threads = count_entries("/proc/self/task", NULL);
    c->l = l;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cancel_main, c), 0);
    int rc = rf_loader_start(l);
    double end = now_s();
    pthread_join(t, NULL);
    if (rc != RF_E_STOPPED)
        fail_msg("start: %d (%s), want RF_E_STOPPED", rc, rf_loader_errmsg(l));
    assert_non_null(strstr(rf_loader_errmsg(l), "cancelled"));
    /* sanitizers and valgrind slow everything: RINGFEED_TEST_SCALE < 1 */
    const char *sc = getenv("RINGFEED_TEST_SCALE");
    double scale = sc ? atof(sc) : 1.0, limit = 0.5 / (scale > 0 && scale < 1 ? scale : 1.0);
    print_message("cancelled start returned %.3f s after the cancel\n", end - c->at);
    assert_true(end - c->at < limit);
    assert_int_equal(count_entries("/proc/self/task", NULL), threads);
    assert_int_equal(count_entries(cache, ".tmp."), 0);
    assert_int_equal(my_flocks(), 0);
    /* for good: a cancelled loader does not start again */
    assert_int_equal(rf_loader_start(l), RF_E_STOPPED);
    rf_loader_destroy(l);
}

static void test_cancel_a_start_stalled_on_its_heads(void **state)
{
    (void)state;
    need_server();
    tu_http stall;
    if (tu_http_start(&stall, g_dir, 0, TU_HTTP_STALL) != 0)
        fail_msg("the stalling server did not start");
    char src[256], cache[4200];
    source_of(src, sizeof src, stall.port, 4, 0);
    new_cache(cache, sizeof cache);
    canceller c = {.delay_ms = 300};
    start_cancelled(remote_loader(src, cache, 4), &c, cache);
    assert_true(atomic_load(&stall.counts->requests) > 0); /* it was waiting on them */
    tu_http_stop(&stall);
}

static void test_cancel_a_start_stalled_in_a_transfer(void **state)
{
    (void)state;
    need_server();
    tu_http stall;
    if (tu_http_start(&stall, g_dir, 0, TU_HTTP_STALL_TAR) != 0)
        fail_msg("the stalling server did not start");
    char src[256], cache[4200];
    source_of(src, sizeof src, stall.port, 4, 0);
    new_cache(cache, sizeof cache);
    canceller c = {.cache = cache};
    start_cancelled(remote_loader(src, cache, 4), &c, cache);
    assert_true(c.saw_tmp > 0);      /* a transfer was running */
    assert_true(c.flocks_before > 0); /* with its locks */
    tu_http_stop(&stall);
}

static void test_cancel_before_and_after_a_start(void **state)
{
    (void)state;
    char *dir = tu_tempdir("start_folder");
    assert_int_equal(tu_make_folder(dir, 2, 4, 24, 20, 3), 0);
    rf_loader *l = TU_LOADER(dir, {RF_P_BATCH_SIZE, 4}, {RF_P_IMAGE_SIZE, 16});
    rf_loader_cancel(l);
    assert_int_equal(rf_loader_start(l), RF_E_STOPPED);
    assert_int_equal(rf_loader_start(l), RF_E_STOPPED);
    rf_loader_destroy(l);
    l = TU_LOADER(dir, {RF_P_BATCH_SIZE, 4}, {RF_P_IMAGE_SIZE, 16});
    tu_start(l);
    rf_loader_cancel(l); /* after a start: rf_loader_stop */
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_E_STOPPED);
    rf_loader_cancel(NULL);
    rf_loader_destroy(l);
    tu_tempdir_remove(&dir);
}

/* ---- after an error ------------------------------------------------------------ */

static void test_next_goes_on_after_an_error(void **state)
{
    (void)state;
    char *dir = tu_tempdir("start_bad");
    tu_folder_opts fo = {.classes = 2, .per_class = 8, .width = 24, .height = 20, .seed = 5};
    assert_int_equal(tu_make_folder_ex(dir, &fo, NULL), 0);
    char bad[4200];
    assert_int_equal(tu_folder_path(bad, sizeof bad, dir, &fo, 9), 0); /* batch 2 of 4 */
    assert_int_equal(truncate(bad, 40), 0);
    rf_loader *l = TU_LOADER(dir, {RF_P_BATCH_SIZE, 4}, {RF_P_IMAGE_SIZE, 16},
                             {RF_P_SHUFFLE, 0}, {RF_P_ON_ERROR, RF_ON_ERROR_RAISE});
    tu_start(l);
    int64_t want = 0, samples = 0;
    int errors = 0, rc;
    rf_batch *b;
    while ((rc = rf_loader_next(l, &b)) != RF_END_OF_EPOCH) {
        if (rc < 0) {
            assert_int_equal(want, 2); /* the batch with the bad file, consumed */
            assert_non_null(strstr(rf_loader_errmsg(l), "img0001"));
            errors++;
            want++;
            continue;
        }
        assert_int_equal(rf_batch_index(b), want++);
        samples += rf_batch_count(b);
        rf_batch_release(b);
    }
    assert_int_equal(errors, 1);
    assert_int_equal(samples, 12);
    assert_int_equal(want, 4);
    rf_loader_destroy(l);
    tu_tempdir_remove(&dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_shards_under_64_descriptors),
        cmocka_unit_test(test_many_folders_under_64_descriptors),
        cmocka_unit_test(test_soft_limit_raised_to_the_hard_one),
        cmocka_unit_test(test_walks_fetch_parallel),
        cmocka_unit_test(test_cancel_a_start_stalled_on_its_heads),
        cmocka_unit_test(test_cancel_a_start_stalled_in_a_transfer),
        cmocka_unit_test(test_cancel_before_and_after_a_start),
        cmocka_unit_test(test_next_goes_on_after_an_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
