/*
 * test_remote_trust.c - what a remote shard's index is taken from is
 * checked against its bytes: the index kept in the cache folder (BASE.idx,
 * lib/remote/source_remote.c) is applied only to the bytes it was taken from,
 * holds no secret and is checked as untrusted input; the manifest.json
 * beside the shards is checked when a shard lands (remote_manifest.c).
 *
 * testhttp.h's server (127.0.0.1, a free port)
 * serves the files of a folder to HEAD and GET, with or without a
 * validator (an ETag that changes with the bytes; never a Last-Modified);
 * the shards are indexed through rf__source_open_ex with a cache folder of
 * the test's, as a loader's start does. Checked:
 *   - without a validator no index is kept, so a shard relabelled at the
 *     same size on the server, its old copy gone from the cache, is walked
 *     anew: the labels are the new bytes' (a kept index of the old bytes
 *     gave the old labels);
 *   - with one, indexes are kept and used (no shard fetched to index), and
 *     none of them holds the URL, its user:password@ or its host;
 *   - a kept index whose label is INT64_MAX is damage: the shard is walked,
 *     the class count is the walk's (it overflowed);
 *   - beside an old manifest.json, a shard relabelled at the same size is
 *     refused when it lands (on the fetch thread: the sanitizers see it):
 *     its batch fails naming the URL and manifest.json, the stats count it
 *     as mismatched, the batches of the other shards come with the labels
 *     of their bytes (the manifest's labels were given before).
 * Skipped when the build has no libcurl.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "manifestset.h"
#include "ringfeed.h"
#include "source.h"
#include "source_remote.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testhttp.h"
#include "testutil.h"

enum { NSHARDS = 3, NSAMPLES = 5 }; /* the shards served at the top */

static char *g_dir; /* the shards, served */
static char *g_tmp; /* cache folders */
static th_server g_srv;
static int g_started; /* g_srv runs: teardown stops it */
static _Atomic int g_validators; /* the server sends an ETag */

/* ---- the server ------------------------------------------------------------- */

/* The files of g_dir to HEAD and GET; a send that fails is the client
 * gone, nothing to do. */
static void answer(th_req *q, void *ctx)
{
    (void)ctx;
    int c = q->fd;
    char file[8400];
    snprintf(file, sizeof file, "%s%s", g_dir, q->path);
    size_t len = 0;
    uint8_t *body = strstr(q->path, "..") ? NULL : tu_read_file(file, &len);
    if (!body) {
        th_sendf(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope");
        return;
    }
    char etag[64] = "";
    if (g_validators)
        snprintf(etag, sizeof etag, "ETag: \"%016llx\"\r\n",
                 (unsigned long long)tu_fnv1a(0xcbf29ce484222325ULL, body, len));
    th_sendf(c, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n", len,
             etag);
    if (!strcmp(q->method, "GET"))
        tu_send_all(c, body, len);
    free(body);
}

/* ---- shards and indexes ---------------------------------------------------------- */

/* g_dir/s-K.tar: NSAMPLES samples kKKII.jpg + kKKII.cls, labels one digit. */
static void write_shards(void)
{
    for (int k = 0; k < NSHARDS; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/s-%d.tar", g_dir, k);
        tw t;
        assert_int_equal(tw_open(&t, path, TW_USTAR), 0);
        for (int i = 0; i < PER_SHARD; i++) {
            tu_jpeg_opts o = {
                .width = 32, .height = 24, .quality = 85, .seed = (uint32_t)(k * 100 + i + 1)};
            uint8_t *jpg;
            size_t len;
            assert_int_equal(tu_make_jpeg(&o, &jpg, &len), 0);
            char name[64], cls[8];
            snprintf(name, sizeof name, "k%02d%02d.jpg", k, i);
            assert_int_equal(tw_file(&t, name, jpg, len), 0);
            free(jpg);
            snprintf(name, sizeof name, "k%02d%02d.cls", k, i);
            snprintf(cls, sizeof cls, "%d", (k + i) % 4);
            assert_int_equal(tw_file(&t, name, cls, strlen(cls)), 0);
        }
        assert_int_equal(tw_close(&t), 0);
    }
}

/* The label text of sample i of shard k on the server: delta (mod 10)
 * added to its one digit. */
static void relabel(int k, int i, int delta)
{
    char path[4200], key[16];
    snprintf(path, sizeof path, "%s/s-%d.tar", g_dir, k);
    snprintf(key, sizeof key, "k%02d%02d.cls", k, i);
    size_t n;
    uint8_t *b = tu_read_file(path, &n);
    assert_non_null(b);
    uint8_t *h = memmem(b, n, key, strlen(key));
    assert_non_null(h);
    h[512] = (uint8_t)('0' + (h[512] - '0' + 10 + delta) % 10); /* the data after its header */
    assert_int_equal(tu_write_file(path, b, n), 0);
    free(b);
}

/* Indexes the shards at http://AUTH127.0.0.1:PORT/ with cache folder
 * cache; the labels must be those of a walk of the served files. */
static void index_and_compare(const char *auth, const char *cache)
{
    rf_source remote, *s = &remote;
    char spec[4096], err[512];
    snprintf(spec, sizeof spec, "http://%s127.0.0.1:%d/s-{0..%d}.tar", auth, g_srv.port, NSHARDS - 1);
    rf_source_opts o = {.cache_dir = cache,
                        .fetch_timeout_ms = 10000,
                        .remote = &rf__source_remote}; /* URLs as the loader takes them */
    int rc = rf__source_open_ex(s, spec, &o, err, sizeof err);
    if (rc != 0)
        fail_msg("%s", err);
    rf_source local;
    snprintf(spec, sizeof spec, "%s/s-{0..%d}.tar", g_dir, NSHARDS - 1);
    assert_int_equal(rf__source_open(&local, spec, err, sizeof err), 0);
    assert_int_equal(s->n, local.n);
    assert_int_equal(s->nclasses, local.nclasses);
    for (int64_t i = 0; i < s->n; i++) {
        assert_int_equal(rf__source_label(s, i), rf__source_label(&local, i));
        assert_int_equal(s->data_off[i], local.data_off[i]);
    }
    rf__source_close(&local);
    rf__source_close(s);
}

/* Files of folder dir whose name ends with suffix; with rm, removed. */
static int files_ending(const char *dir, const char *suffix, int rm)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    size_t sl = strlen(suffix);
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < sl || strcmp(e->d_name + len - sl, suffix))
            continue;
        n++;
        if (rm)
            assert_int_equal(unlinkat(dirfd(d), e->d_name, 0), 0);
    }
    closedir(d);
    return n;
}

/* Whether any file of dir holds the bytes s. */
static int folder_holds(const char *dir, const char *s)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t n;
        uint8_t *b = e->d_name[0] == '.' ? NULL : tu_read_file(path, &n);
        found = b && memmem(b, n, s, strlen(s)) != NULL;
        free(b);
    }
    closedir(d);
    return found;
}

static void cache_dir(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%.2000s/%s", g_tmp, name);
}

static void test_no_validator_keeps_no_index(void **state)
{
    (void)state;
    g_validators = 0;
    char c[2100];
    cache_dir(c, sizeof c, "none");
    index_and_compare("", c);
    assert_int_equal(files_ending(c, ".idx", 0), 0);
    /* new bytes of the same size, the old copy evicted: walked anew */
    relabel(1, 2, 1);
    assert_int_equal(files_ending(c, ".tar", 1), NSHARDS);
    index_and_compare("", c);
    relabel(1, 2, -1); /* back as it was, for the other tests */
}

static void test_kept_index_holds_no_url(void **state)
{
    (void)state;
    g_validators = 1;
    char c[2100];
    cache_dir(c, sizeof c, "kept");
    index_and_compare("user:s3cr3t@", c);
    assert_int_equal(files_ending(c, ".idx", 0), NSHARDS);
    assert_false(folder_holds(c, "s3cr3t"));
    assert_false(folder_holds(c, "127.0.0.1"));
    assert_false(folder_holds(c, "http"));
    /* the kept indexes are used: no shard is fetched to index */
    assert_int_equal(files_ending(c, ".tar", 1), NSHARDS);
    index_and_compare("user:s3cr3t@", c);
    assert_int_equal(files_ending(c, ".tar", 0), 0);
    /* new bytes, a new validator: the old index is not theirs */
    relabel(2, 0, 1);
    index_and_compare("user:s3cr3t@", c);
    relabel(2, 0, -1);
}

/* The 8 bytes after the NUL of name in a kept index are its label. */
static int set_kept_label(const char *dir, const char *name, int64_t label)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int patched = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 4, ".idx"))
            continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t n;
        uint8_t *b = tu_read_file(path, &n);
        assert_non_null(b);
        uint8_t *at = memmem(b, n, name, strlen(name) + 1);
        if (at && at + strlen(name) + 1 + sizeof label <= b + n) {
            memcpy(at + strlen(name) + 1, &label, sizeof label);
            assert_int_equal(tu_write_file(path, b, n), 0);
            patched++;
        }
        free(b);
    }
    closedir(d);
    return patched;
}

static void test_kept_label_bounded(void **state)
{
    (void)state;
    g_validators = 1;
    char c[2100];
    cache_dir(c, sizeof c, "bounds");
    index_and_compare("", c);
    assert_int_equal(set_kept_label(c, "k0103.jpg", INT64_MAX), 1);
    index_and_compare("", c); /* the walk's labels and class count */
    assert_int_equal(set_kept_label(c, "k0103.jpg", -2), 1);
    index_and_compare("", c);
}

/* The labels of the samples of the folder dir's shards, by sample index. */
static void walk_labels(const char *dir, int64_t *labels)
{
    rf_source s;
    open_set(&s, dir, NULL);
    assert_int_equal(s.n, SHARDS * PER_SHARD);
    for (int64_t i = 0; i < s.n; i++)
        labels[i] = rf__source_label(&s, i);
    rf__source_close(&s);
}

static void test_stale_manifest_checked_when_a_shard_lands(void **state)
{
    (void)state;
    g_validators = 1;
    char dir[2048], url[300], c[2100], path[4300];
    snprintf(dir, sizeof dir, "%.1900s/stale", g_dir);
    write_set(dir, 1);
    uint64_t off;
    int64_t label, want[SHARDS * PER_SHARD];
    cls_place(dir, 1, 3, &off, &label);
    char digit = (char)('0' + (label + 1) % 5);
    snprintf(path, sizeof path, "%s/s-1.tar", dir);
    overwrite(path, off, &digit, 1);
    walk_labels(dir, want); /* the local index walks s-1 now */
    assert_int_equal(want[PER_SHARD + 3], (label + 1) % 5);

    snprintf(url, sizeof url, "http://127.0.0.1:%d/stale/s-{0..%d}.tar", g_srv.port, SHARDS - 1);
    cache_dir(c, sizeof c, "stale");
    rf_loader *l = TU_LOADER(url, {RF_P_BATCH_SIZE, PER_SHARD}, {RF_P_IMAGE_SIZE, 16},
                             {RF_P_TRANSFORM, RF_TRANSFORM_CENTER}, {RF_P_NUM_WORKERS, 2},
                             {RF_P_SHUFFLE, 0}, {RF_P_PREFETCH, 2});
    assert_int_equal(rf_loader_set_cache_dir(l, c), RF_OK);
    tu_start(l);
    for (int k = 0; k < SHARDS; k++) { /* a batch per shard */
        rf_batch *b;
        int rc = rf_loader_next(l, &b);
        if (k == 1) {
            assert_int_equal(rc, RF_E_IO); /* its samples cannot be read */
            const char *msg = rf_loader_errmsg(l);
            assert_non_null(strstr(msg, "/stale/s-1.tar does not match manifest.json"));
            continue;
        }
        if (rc != RF_OK)
            fail_msg("batch %d: %d: %s", k, rc, rf_loader_errmsg(l));
        const int64_t *labels = rf_batch_labels(b), *samples = rf_batch_samples(b);
        for (int64_t i = 0; i < rf_batch_count(b); i++)
            assert_int_equal(labels[i], want[samples[i]]);
        rf_batch_release(b);
    }
    char *st = tu_stats(l);
    assert_int_equal(tu_stats_int(st, "mismatched"), 1);
    assert_int_equal(tu_stats_int(st, "shards_from_manifest"), SHARDS);
    free(st);
    rf_loader_destroy(l);
}

static int setup(void **state)
{
    (void)state;
    g_dir = tu_tempdir("remote_trust_shards");
    g_tmp = tu_tempdir("remote_trust_cache");
    if (!g_dir || !g_tmp)
        return -1;
    write_shards();
    if (th_start(&g_srv, answer, NULL) != 0)
        return -1;
    g_started = 1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (g_started)
        th_stop(&g_srv);
    g_started = 0;
    tu_tempdir_remove(&g_dir);
    tu_tempdir_remove(&g_tmp);
    return 0;
}

int main(void)
{
#ifndef RF_HAVE_CURL
    print_message("[  SKIPPED ] test_remote_trust: built without libcurl (RF_WITH_CURL)\n");
    return 0;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_validator_keeps_no_index),
        cmocka_unit_test(test_kept_index_holds_no_url),
        cmocka_unit_test(test_kept_label_bounded),
        cmocka_unit_test(test_stale_manifest_checked_when_a_shard_lands),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
#endif
}
