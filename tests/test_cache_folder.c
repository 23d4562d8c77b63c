/*
 * test_cache_folder.c - what the cache folder trusts, touches and refuses
 * (lib/remote/cache.c, lib/remote/cache_room.c): a folder created 0700 with files 0600;
 * a folder owned by another user or writable by others refused, saying
 * why; symbolic links, FIFOs and other users' files at the cache's names
 * never followed, blocked on or trusted, and the error naming the file at
 * fault; a shard planted at a cache name (a link, a copy, a hard link)
 * fetched anew; files of any other name never removed, counted, and named
 * when they leave no room (an error, not a wait without end); the indexes
 * of versions no live loader uses evicted when the kept bytes leave no
 * room, those a live loader's lease names kept; names from SHA-256; the
 * default folder without HOME. Runs as root in CI: files of "another user"
 * are chowned to OTHER_UID.
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
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cache.h"
#include "ringfeed.h"
#include "sha256.h"
#include "testutil.h"

#define SZ 1000
#define OTHER_UID 12345

static char *g_dir;    /* the test's folder: caches and victims below it */
static char g_cache[4200];

static int setup(void **state)
{
    (void)state;
    g_dir = tu_tempdir("cachefolder");
    if (!g_dir)
        return -1;
    snprintf(g_cache, sizeof g_cache, "%s/c", g_dir);
    alarm(60); /* an open that blocks on a FIFO fails the run, not hangs it */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    alarm(0);
    tu_tempdir_remove(&g_dir);
    return 0;
}

/* chown to another user: root only (CI runs as root); elsewhere those
 * checks are skipped with a message. */
static int root(void)
{
    if (geteuid() != 0)
        print_message("not root: the checks of another user's files are skipped\n");
    return geteuid() == 0;
}

static void path_of(char *out, size_t cap, const char *dir, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode & 07777;
}

/* A file outside the cache that must never change. */
static void make_victim(char *path, size_t cap, size_t size)
{
    path_of(path, cap, g_dir, "victim");
    char data[4096];
    memset(data, 'v', sizeof data);
    assert_true(size <= sizeof data);
    assert_int_equal(tu_write_file(path, data, size), 0);
}

static void victim_unchanged(const char *path, size_t size)
{
    size_t n = 0;
    uint8_t *p = tu_read_file(path, &n);
    assert_non_null(p);
    assert_int_equal(n, size);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(p[i], 'v');
    free(p);
}

/* Fetches url (SZ bytes, validator "e") into c as a loader would: 1 with
 * the pin in *pin, 0 without room, or the reserve's error. */
static int fetch(rf_cache *c, const char *url, int *pin, char *err, size_t cap)
{
    char base[RF__CACHE_PATH], tmp[RF__CACHE_PATH];
    rf__cache_base(c, url, SZ, "e", base);
    int fd = -1;
    int rc = rf__cache_reserve(c, base, SZ, tmp, &fd, err, cap);
    if (rc != 1)
        return rc;
    char data[SZ];
    memset(data, url[strlen(url) - 1], sizeof data);
    assert_int_equal(pwrite(fd, data, sizeof data, 0), SZ);
    assert_int_equal(rf__cache_commit(c, tmp, base, fd, err, cap), 0);
    assert_int_equal(rf__cache_finish(c, base, fd), 0);
    *pin = fd;
    return 1;
}

static void test_created_private(void **state)
{
    (void)state;
    char deep[4300], p[4400], err[800], base[RF__CACHE_PATH];
    snprintf(deep, sizeof deep, "%s/a/b", g_cache);
    rf_cache c;
    assert_int_equal(rf__cache_open(&c, deep, 10 * SZ, err, sizeof err), 0);
    assert_int_equal(mode_of(g_cache), 0700);
    assert_int_equal(mode_of(deep), 0700);
    path_of(p, sizeof p, deep, ".lock");
    assert_int_equal(mode_of(p), 0600);
    path_of(p, sizeof p, deep, ".starved");
    assert_int_equal(mode_of(p), 0600);
    int pin = -1, lk = -1;
    rf__cache_base(&c, "u1", SZ, "e", base);
    assert_int_equal(rf__cache_lock_fetch(&c, base, &lk, err, sizeof err), 1);
    assert_int_equal(fetch(&c, "u1", &pin, err, sizeof err), 1);
    snprintf(p, sizeof p, "%s.tar", base);
    assert_int_equal(mode_of(p), 0600);
    snprintf(p, sizeof p, "%s.lock", base);
    assert_int_equal(mode_of(p), 0600);
    assert_int_equal(rf__cache_put_index(&c, base, "idx", 3), 1);
    snprintf(p, sizeof p, "%s.idx", base);
    assert_int_equal(mode_of(p), 0600);
    uint8_t id[RF__CACHE_ID] = {1};
    assert_int_equal(rf__cache_lease(&c, id, 1, SZ, err, sizeof err), 0);
    char lease[64];
    snprintf(lease, sizeof lease, ".use.%d.", (int)getpid());
    int found = 0;
    for (unsigned n = 0; n < 1000 && !found; n++) {
        snprintf(p, sizeof p, "%s/%s%u", deep, lease, n);
        found = access(p, F_OK) == 0;
    }
    assert_true(found);
    assert_int_equal(mode_of(p), 0600);
    rf__cache_unpin(pin);
    rf__cache_unpin(lk);
    rf__cache_close(&c);
    /* a dead loader's lease goes at the next count */
    assert_int_equal(rf__cache_open(&c, deep, 10 * SZ, err, sizeof err), 0);
    assert_true(rf__cache_usage(&c) >= 0);
    assert_int_equal(access(p, F_OK), -1);
    rf__cache_close(&c);
}

static void test_not_private_refused(void **state)
{
    (void)state;
    char err[800];
    rf_cache c;
    assert_int_equal(tu_mkdir_p(g_cache), 0);
    assert_int_equal(chmod(g_cache, 0777), 0);
    assert_int_equal(rf__cache_open(&c, g_cache, 10 * SZ, err, sizeof err), RF_E_SOURCE);
    assert_non_null(strstr(err, g_cache));
    assert_non_null(strstr(err, "writable by others"));
    assert_int_equal(chmod(g_cache, 0770), 0);
    assert_int_equal(rf__cache_open(&c, g_cache, 10 * SZ, err, sizeof err), RF_E_SOURCE);
    assert_non_null(strstr(err, "writable by its group"));
    assert_int_equal(chmod(g_cache, 0700), 0);
    if (!root())
        return;
    assert_int_equal(chown(g_cache, OTHER_UID, OTHER_UID), 0);
    assert_int_equal(rf__cache_open(&c, g_cache, 10 * SZ, err, sizeof err), RF_E_SOURCE);
    assert_non_null(strstr(err, "owned by uid 12345"));
    assert_int_equal(chown(g_cache, getuid(), getgid()), 0);
    assert_int_equal(rf__cache_open(&c, g_cache, 10 * SZ, err, sizeof err), 0);
    rf__cache_close(&c);
    /* the folder's own file of another user: named, not the folder */
    char p[4300];
    path_of(p, sizeof p, g_cache, ".lock");
    assert_int_equal(chown(p, OTHER_UID, OTHER_UID), 0);
    assert_int_equal(rf__cache_open(&c, g_cache, 10 * SZ, err, sizeof err), RF_E_SOURCE);
    assert_non_null(strstr(err, p));
    assert_non_null(strstr(err, "owned by uid 12345"));
}

/* .starved, .lock, BASE.lock, BASE.idx as links or FIFOs: never followed,
 * never blocked on; the error names the file. */
static void test_links_and_fifos_never_followed(void **state)
{
    (void)state;
    char err[800], victim[4300], p[4400], base[RF__CACHE_PATH];
    make_victim(victim, sizeof victim, 8);
    assert_int_equal(tu_mkdir_p(g_cache), 0);
    assert_int_equal(chmod(g_cache, 0700), 0);
    rf_cache c;
    path_of(p, sizeof p, g_cache, ".starved");
    assert_int_equal(symlink(victim, p), 0);
    assert_int_equal(rf__cache_open(&c, g_cache, 10 * SZ, err, sizeof err), RF_E_SOURCE);
    assert_non_null(strstr(err, p));
    assert_non_null(strstr(err, "symbolic link"));
    unlink(p);
    path_of(p, sizeof p, g_cache, ".lock");
    unlink(p); /* made by the open above */
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_int_equal(rf__cache_open(&c, g_cache, 10 * SZ, err, sizeof err), RF_E_SOURCE);
    assert_non_null(strstr(err, p));
    assert_non_null(strstr(err, "not a regular file"));
    unlink(p);
    assert_int_equal(rf__cache_open(&c, g_cache, 10 * SZ, err, sizeof err), 0);
    assert_int_equal(rf__cache_starve(&c), 1);
    /* a shard version's fetch lock */
    rf__cache_base(&c, "u", SZ, "e", base);
    snprintf(p, sizeof p, "%s.lock", base);
    assert_int_equal(symlink(victim, p), 0);
    int lk = -1;
    assert_true(rf__cache_lock_fetch(&c, base, &lk, err, sizeof err) < 0);
    assert_non_null(strstr(err, p));
    assert_non_null(strstr(err, "symbolic link"));
    unlink(p);
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_true(rf__cache_lock_fetch(&c, base, &lk, err, sizeof err) < 0);
    assert_non_null(strstr(err, "not a regular file"));
    unlink(p);
    /* a kept index: as if absent (the shard is walked), never read */
    void *data = NULL;
    size_t n = 0;
    snprintf(p, sizeof p, "%s.idx", base);
    assert_int_equal(symlink(victim, p), 0);
    assert_int_equal(rf__cache_get_index(base, &data, &n), 0);
    unlink(p);
    assert_int_equal(mkfifo(p, 0600), 0); /* a blocking open would hang here */
    assert_int_equal(rf__cache_get_index(base, &data, &n), 0);
    unlink(p);
    assert_int_equal(tu_write_file(p, "idx", 3), 0);
    assert_int_equal(chmod(p, 0644), 0); /* a copy: not one the cache made */
    assert_int_equal(rf__cache_get_index(base, &data, &n), 0);
    assert_int_equal(chmod(p, 0600), 0);
    assert_int_equal(rf__cache_get_index(base, &data, &n), 1);
    free(data);
    if (root()) {
        assert_int_equal(chown(p, OTHER_UID, OTHER_UID), 0);
        assert_int_equal(rf__cache_get_index(base, &data, &n), 0);
    }
    rf__cache_close(&c);
    victim_unchanged(victim, 8);
}

/* A file at BASE.tar of the right size is the shard only when the cache
 * made it: a link (to a file of that size), a copy (mode 0644), a hard
 * link, another user's file, a FIFO are not pinned, and a fetch replaces
 * the name, not what it pointed to. */
static void test_planted_shard_not_trusted(void **state)
{
    (void)state;
    char err[800], victim[4300], tar[RF__CACHE_PATH + 8], other[4300], base[RF__CACHE_PATH];
    make_victim(victim, sizeof victim, SZ);
    rf_cache c;
    assert_int_equal(rf__cache_open(&c, g_cache, 10 * SZ, err, sizeof err), 0);
    rf__cache_base(&c, "s", SZ, "e", base);
    snprintf(tar, sizeof tar, "%s.tar", base);
    int pin = -1;
    assert_int_equal(symlink(victim, tar), 0);
    assert_int_equal(rf__cache_pin(&c, base, SZ, &pin), 0);
    unlink(tar);
    char data[SZ];
    memset(data, 'p', sizeof data);
    assert_int_equal(tu_write_file(tar, data, SZ), 0);
    assert_int_equal(chmod(tar, 0644), 0); /* cp's mode */
    assert_int_equal(rf__cache_pin(&c, base, SZ, &pin), 0);
    assert_int_equal(chmod(tar, 0600), 0);
    path_of(other, sizeof other, g_cache, "planted-elsewhere");
    assert_int_equal(link(tar, other), 0); /* two links */
    assert_int_equal(rf__cache_pin(&c, base, SZ, &pin), 0);
    unlink(other);
    if (root()) {
        assert_int_equal(chown(tar, OTHER_UID, OTHER_UID), 0);
        assert_int_equal(rf__cache_pin(&c, base, SZ, &pin), 0);
    }
    unlink(tar);
    assert_int_equal(mkfifo(tar, 0600), 0); /* a blocking open would hang here */
    assert_int_equal(rf__cache_pin(&c, base, SZ, &pin), 0);
    unlink(tar);
    /* a link again: the fetch's commit replaces the link itself */
    assert_int_equal(symlink(victim, tar), 0);
    int lk = -1;
    assert_int_equal(rf__cache_lock_fetch(&c, base, &lk, err, sizeof err), 1);
    assert_int_equal(fetch(&c, "s", &pin, err, sizeof err), 1);
    rf__cache_unpin(pin);
    rf__cache_unpin(lk);
    struct stat st;
    assert_int_equal(lstat(tar, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(rf__cache_pin(&c, base, SZ, &pin), 1);
    assert_int_equal(pread(pin, data, SZ, 0), SZ);
    assert_int_equal(data[0], 's');
    rf__cache_unpin(pin);
    rf__cache_close(&c);
    victim_unchanged(victim, SZ);
}

static const char *const foreign_names[] = {
    "my-own-dataset.tar",
    "notes.tmp.txt",
    "x.itmp.1.2",
    "0123456789ABCDEF0123456789ABCDEF.tar", /* capitals: not the cache's */
    "0123456789abcdef0123456789abcde.tar",  /* 31 digits */
    "0123456789abcdef0123456789abcdef.tar.bak",
    "0123456789abcdef0123456789abcdef.tmp.1.2.3",
    "0123456789abcdef0123456789abcdef.tmp.x.1",
    ".hidden",
    ".use.x.1",
};
#define NFOREIGN (sizeof foreign_names / sizeof *foreign_names)

/* Files of any other name than the cache's own are never removed, though
 * they count against the limit; when they leave no room the reserve says
 * so, naming them, instead of refusing room for ever. */
static void test_foreign_files_never_deleted(void **state)
{
    (void)state;
    char err[800], p[4400];
    assert_int_equal(tu_mkdir_p(g_cache), 0);
    assert_int_equal(chmod(g_cache, 0700), 0);
    char data[SZ];
    memset(data, 'f', sizeof data);
    for (size_t i = 0; i < NFOREIGN; i++) {
        path_of(p, sizeof p, g_cache, foreign_names[i]);
        assert_int_equal(tu_write_file(p, data, 100), 0);
        struct timespec old[2] = {{1, 0}, {1, 0}}; /* older than any shard */
        assert_int_equal(utimensat(AT_FDCWD, p, old, 0), 0);
    }
    path_of(p, sizeof p, g_cache, "sub");
    assert_int_equal(mkdir(p, 0700), 0);
    rf_cache c;
    /* room for the foreign files and three shards: the fourth evicts one */
    assert_int_equal(rf__cache_open(&c, g_cache, NFOREIGN * 100 + 3 * SZ, err, sizeof err), 0);
    assert_int_equal(rf__cache_usage(&c), (int64_t)(NFOREIGN * 100));
    assert_int_equal(atomic_load(&c.foreign_bytes), (int64_t)(NFOREIGN * 100));
    char url[16];
    for (int i = 0; i < 6; i++) {
        int pin = -1;
        snprintf(url, sizeof url, "u%d", i);
        assert_int_equal(fetch(&c, url, &pin, err, sizeof err), 1);
        rf__cache_unpin(pin);
    }
    assert_int_equal(atomic_load(&c.evictions), 3);
    for (size_t i = 0; i < NFOREIGN; i++) {
        path_of(p, sizeof p, g_cache, foreign_names[i]);
        if (access(p, F_OK) != 0)
            fail_msg("%s was removed", foreign_names[i]);
    }
    rf__cache_close(&c);
    /* a foreign file filling the room: an error that names it, at once */
    path_of(p, sizeof p, g_cache, "my-own-dataset.tar");
    assert_int_equal(tu_write_file(p, data, SZ), 0);
    assert_int_equal(rf__cache_open(&c, g_cache, NFOREIGN * 100 + SZ + SZ / 2, err, sizeof err),
                     0);
    int pin = -1;
    assert_int_equal(fetch(&c, "v", &pin, err, sizeof err), RF_E_LIMIT);
    assert_non_null(strstr(err, "my-own-dataset.tar"));
    assert_non_null(strstr(err, "did not make"));
    assert_int_equal(access(p, F_OK), 0);
    rf__cache_close(&c);
}

/* Indexes (and locks) of versions no live loader uses go when the kept
 * bytes leave no room, least recently written first and no more than
 * needed; those a live loader's lease names stay, and when they alone fill
 * the folder the reserve is an error that says so. */
static void test_unused_indexes_evicted(void **state)
{
    (void)state;
    char err[800], base[4][RF__CACHE_PATH], p[4 * RF__CACHE_PATH + 8], idx[SZ];
    const char *urls[4] = {"used-a", "used-b", "old-c", "old-d"};
    rf_cache user, c;
    assert_int_equal(rf__cache_open(&user, g_cache, 4 * SZ, err, sizeof err), 0);
    assert_int_equal(rf__cache_open(&c, g_cache, 4 * SZ, err, sizeof err), 0);
    memset(idx, 'i', sizeof idx);
    uint8_t ids[2][RF__CACHE_ID];
    for (int i = 0; i < 4; i++) {
        rf__cache_base(&c, urls[i], SZ, "e", base[i]);
        assert_int_equal(rf__cache_put_index(&c, base[i], idx, SZ / 2), 1);
        snprintf(p, sizeof p, "%s.idx", base[i]);
        struct timespec t[2] = {{10 + i, 0}, {10 + i, 0}}; /* written a, b, c, d */
        assert_int_equal(utimensat(AT_FDCWD, p, t, 0), 0);
        int lk = -1;
        assert_int_equal(rf__cache_lock_fetch(&c, base[i], &lk, err, sizeof err), 1);
        rf__cache_unpin(lk); /* a lock file left, held by nobody */
        if (i < 2)
            rf__cache_id(urls[i], SZ, "e", ids[i]);
    }
    /* another loader (another rf_cache, as of another process) uses a, b */
    assert_int_equal(rf__cache_lease(&user, (const uint8_t *)ids, 2, SZ, err, sizeof err), 0);
    rf__cache_close(&c);
    /* room for three indexes, the lease and one shard: the shard takes an
     * index's room, the oldest unused one's (c), and no more */
    assert_int_equal(rf__cache_open(&c, g_cache, 3 * SZ - 100, err, sizeof err), 0);
    int pin = -1;
    assert_int_equal(fetch(&c, "new", &pin, err, sizeof err), 1);
    rf__cache_unpin(pin);
    const int kept[4] = {1, 1, 0, 1};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s.idx", base[i]);
        if ((access(p, F_OK) == 0) != kept[i])
            fail_msg("%s's index %s", urls[i], kept[i] ? "evicted" : "kept");
    }
    snprintf(p, sizeof p, "%s.lock", base[2]);
    assert_int_equal(access(p, F_OK), -1); /* its lock went with it */
    /* in-use indexes fill the folder: an error, not a wait */
    for (int i = 0; i < 2; i++)
        assert_int_equal(rf__cache_put_index(&c, base[i], idx, SZ), 1);
    rf__cache_close(&c);
    assert_int_equal(rf__cache_open(&c, g_cache, 2 * SZ + SZ / 2, err, sizeof err), 0);
    assert_int_equal(fetch(&c, "more", &pin, err, sizeof err), RF_E_LIMIT);
    assert_non_null(strstr(err, "kept indexes"));
    snprintf(p, sizeof p, "%s.idx", base[3]);
    assert_int_equal(access(p, F_OK), -1); /* the unused one went first */
    /* the loader gone: its versions' indexes are evictable */
    rf__cache_close(&user);
    assert_int_equal(fetch(&c, "more", &pin, err, sizeof err), 1);
    rf__cache_unpin(pin);
    rf__cache_close(&c);
}

/* Names: the first 16 bytes of SHA-256 over the format and the version's
 * fields, each ended by a NUL. */
static void test_names_are_sha256(void **state)
{
    (void)state;
    char err[800], base[RF__CACHE_PATH], want[64];
    rf_cache c;
    assert_int_equal(rf__cache_open(&c, g_cache, 10 * SZ, err, sizeof err), 0);
    rf__cache_base(&c, "s3://b/x.tar", 1234, "\"e1\"", base);
    static const char in[] = RF__CACHE_FORMAT "\0s3://b/x.tar\0001234\0\"e1\"";
    uint8_t d[32];
    rf__sha256(in, sizeof in, d);
    rf__sha256_hex(d, 16, want);
    assert_string_equal(strrchr(base, '/') + 1, want);
    rf__cache_close(&c);
}

/* The default folder: XDG_CACHE_HOME, HOME, then this user's home in the
 * password database; never a folder under /tmp. */
static void test_default_folder(void **state)
{
    (void)state;
    char out[4096], err[800];
    const char *home = getenv("HOME"), *xdg = getenv("XDG_CACHE_HOME");
    char *h = home ? strdup(home) : NULL, *x = xdg ? strdup(xdg) : NULL;
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    setenv("HOME", "/h", 1);
    assert_int_equal(rf__cache_default_dir(out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "/x/cache/ringfeed");
    setenv("XDG_CACHE_HOME", "relative", 1); /* not absolute: not used */
    assert_int_equal(rf__cache_default_dir(out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "/h/.cache/ringfeed");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    int rc = rf__cache_default_dir(out, sizeof out, err, sizeof err);
    if (rc == 0) {
        assert_true(strncmp(out, "/tmp", 4) != 0);
        assert_non_null(strstr(out, "/.cache/ringfeed"));
    } else {
        assert_non_null(strstr(err, "cache_dir"));
    }
    /* an open with no folder named takes the default */
    setenv("XDG_CACHE_HOME", g_dir, 1);
    rf_cache c;
    assert_int_equal(rf__cache_open(&c, NULL, 10 * SZ, err, sizeof err), 0);
    snprintf(out, sizeof out, "%s/ringfeed", g_dir);
    assert_string_equal(c.dir, out);
    assert_int_equal(mode_of(out), 0700);
    rf__cache_close(&c);
    if (h)
        setenv("HOME", h, 1);
    if (x)
        setenv("XDG_CACHE_HOME", x, 1);
    else
        unsetenv("XDG_CACHE_HOME");
    free(h);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_created_private, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_private_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_links_and_fifos_never_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_planted_shard_not_trusted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_files_never_deleted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unused_indexes_evicted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names_are_sha256, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_folder, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
