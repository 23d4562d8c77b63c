/*
 * test_cache.c - the remote-shard cache folder (lib/remote/cache.c): names per
 * shard version (a changed size or validator is another file), pins that
 * eviction respects (also across open files, as across processes), the
 * byte limit counted over every file including transfers in progress, LRU
 * order by last pin, atomic commits (nothing under the final name before
 * the rename), the fetch lock, kept indexes, the transfer files of dead
 * writers reclaimed (by their lock, not their process id), a folder that
 * cannot be listed granting no room, a transfer that never appears
 * under the shard's name before its commit (complete), a shard marked
 * unsynced before a crash never pinned, and fetched anew.
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
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cache.h"
#include "ringfeed.h"
#include "testutil.h"

#define SZ 1000

static char *g_dir;

static int setup(void **state)
{
    g_dir = tu_tempdir("cache");
    return g_dir ? 0 : -1;
}

static int teardown(void **state)
{
    tu_tempdir_remove(&g_dir);
    return 0;
}

/* Fetches url (size SZ, validator etag) as a loader would: reserve, write,
 * commit. Returns the commit's pin fd, or -1 (no room: *room = 0). */
static int put_shard(rf_cache *c, const char *url, const char *etag, int *room)
{
    char base[RF__CACHE_PATH], tmp[RF__CACHE_PATH], err[600];
    rf__cache_base(c, url, SZ, etag, base);
    int fd = -1;
    int rc = rf__cache_reserve(c, base, SZ, tmp, &fd, err, sizeof err);
    *room = rc == 1;
    if (rc != 1)
        return -1;
    char data[SZ];
    memset(data, url[strlen(url) - 1], sizeof data);
    /* during the transfer: counted in full, and not under the final name */
    assert_true(rf__cache_usage(c) >= SZ);
    int pin = -1;
    assert_int_equal(rf__cache_pin(c, base, SZ, &pin), 0);
    assert_int_equal(pwrite(fd, data, sizeof data, 0), SZ);
    assert_int_equal(rf__cache_commit(c, tmp, base, fd, err, sizeof err), 0);
    assert_int_equal(rf__cache_finish(c, base, fd), 0);
    return fd;
}

static void test_names_per_version(void **state)
{
    rf_cache c;
    char err[600], a[RF__CACHE_PATH], b[RF__CACHE_PATH], d[RF__CACHE_PATH];
    assert_int_equal(rf__cache_open(&c, g_dir, 10 * SZ, err, sizeof err), 0);
    rf__cache_base(&c, "s3://b/x.tar", SZ, "\"e1\"", a);
    rf__cache_base(&c, "s3://b/x.tar", SZ, "\"e2\"", b);
    rf__cache_base(&c, "s3://b/x.tar", SZ + 1, "\"e1\"", d);
    assert_string_not_equal(a, b);
    assert_string_not_equal(a, d);
    assert_int_equal(strncmp(a, g_dir, strlen(g_dir)), 0);
    rf__cache_close(&c);
}

static void test_pin_limit_lru(void **state)
{
    rf_cache c;
    char err[600], base[RF__CACHE_PATH];
    assert_int_equal(rf__cache_open(&c, g_dir, 3 * SZ, err, sizeof err), 0);
    int room;
    int p1 = put_shard(&c, "u1", "e", &room), p2 = put_shard(&c, "u2", "e", &room);
    int p3 = put_shard(&c, "u3", "e", &room);
    assert_true(p1 >= 0 && p2 >= 0 && p3 >= 0);
    assert_int_equal(rf__cache_usage(&c), 3 * SZ);
    /* all pinned: no room, nothing evicted */
    assert_int_equal(put_shard(&c, "u4", "e", &room), -1);
    assert_int_equal(room, 0);
    assert_int_equal(rf__cache_usage(&c), 3 * SZ);
    /* unpinned u1 and u3; u3 pinned again later (newer): u1 goes first */
    rf__cache_unpin(p1);
    rf__cache_unpin(p3);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    rf__cache_base(&c, "u3", SZ, "e", base);
    int again = -1;
    assert_int_equal(rf__cache_pin(&c, base, SZ, &again), 1);
    rf__cache_unpin(again);
    int p4 = put_shard(&c, "u4", "e", &room);
    assert_true(p4 >= 0);
    assert_true(rf__cache_usage(&c) <= 3 * SZ);
    assert_int_equal(atomic_load(&c.evictions), 1);
    rf__cache_base(&c, "u1", SZ, "e", base);
    assert_int_equal(rf__cache_pin(&c, base, SZ, &again), 0); /* evicted */
    rf__cache_base(&c, "u3", SZ, "e", base);
    assert_int_equal(rf__cache_pin(&c, base, SZ, &again), 1); /* kept */
    rf__cache_unpin(again);
    /* a pin taken through another open file (another loader) holds too */
    rf__cache_base(&c, "u2", SZ, "e", base);
    int other = -1;
    assert_int_equal(rf__cache_pin(&c, base, SZ, &other), 1);
    rf__cache_unpin(p2);
    int p5 = put_shard(&c, "u5", "e", &room); /* evicts u3, not u2 */
    assert_true(p5 >= 0);
    assert_int_equal(rf__cache_pin(&c, base, SZ, &again), 1);
    rf__cache_unpin(again);
    rf__cache_unpin(other);
    rf__cache_unpin(p4);
    rf__cache_unpin(p5);
    /* wrong size: not this version's bytes, absent */
    assert_int_equal(rf__cache_pin(&c, base, SZ + 1, &again), 0);
    /* over the limit on its own */
    char tmp[RF__CACHE_PATH];
    int fd = -1;
    assert_int_equal(rf__cache_reserve(&c, base, 4 * SZ, tmp, &fd, err, sizeof err), RF_E_LIMIT);
    assert_non_null(strstr(err, "cache_limit"));
    rf__cache_close(&c);
}

static void test_fetch_lock_abandon_index(void **state)
{
    rf_cache c, c2;
    char err[600], base[RF__CACHE_PATH], tmp[RF__CACHE_PATH];
    assert_int_equal(rf__cache_open(&c, g_dir, 3 * SZ, err, sizeof err), 0);
    assert_int_equal(rf__cache_open(&c2, g_dir, 3 * SZ, err, sizeof err), 0);
    rf__cache_base(&c, "lk", SZ, "e", base);
    int l1 = -1, l2 = -1;
    assert_int_equal(rf__cache_lock_fetch(&c, base, &l1, err, sizeof err), 1);
    /* another loader fetches */
    assert_int_equal(rf__cache_lock_fetch(&c2, base, &l2, err, sizeof err), 0);
    int fd = -1;
    assert_int_equal(rf__cache_reserve(&c, base, SZ, tmp, &fd, err, sizeof err), 1);
    rf__cache_abandon(&c, tmp, fd); /* a failed transfer leaves nothing */
    int pin = -1;
    assert_int_equal(rf__cache_pin(&c, base, SZ, &pin), 0);
    rf__cache_unpin(l1);
    assert_int_equal(rf__cache_lock_fetch(&c2, base, &l2, err, sizeof err), 1);
    rf__cache_unpin(l2);
    /* kept index: written whole, read back */
    assert_int_equal(rf__cache_has_index(&c), 0); /* shards, locks: no index yet */
    assert_int_equal(rf__cache_put_index(&c, base, "hello", 5), 1);
    assert_int_equal(rf__cache_has_index(&c), 1);
    void *p = NULL;
    size_t n = 0;
    assert_int_equal(rf__cache_get_index(base, &p, &n), 1);
    assert_int_equal(n, 5);
    assert_memory_equal(p, "hello", 5);
    free(p);
    /* a dead process's transfer file is reclaimed when room is counted */
    char stale[RF__CACHE_PATH + 64];
    snprintf(stale, sizeof stale, "%s.tmp.%d.0", base, 999999999);
    assert_int_equal(tu_write_file(stale, "x", 1), 0);
    int64_t before = rf__cache_usage(&c);
    assert_int_equal(access(stale, F_OK), -1);
    assert_true(before >= 0 && before < 3 * SZ);
    rf__cache_close(&c);
    rf__cache_close(&c2);
}

/* A transfer file is stale when nobody holds its lock, whatever the process
 * id in its name says: a live writer in another PID namespace (a container
 * sharing the folder) may carry an id that is no process here, and a dead
 * one's id may be a live process here. Both suffixes (shard and index). */
static void test_stale_transfer_by_lock(void **state)
{
    rf_cache c;
    char err[600], base[RF__CACHE_PATH];
    assert_int_equal(rf__cache_open(&c, g_dir, 10 * SZ, err, sizeof err), 0);
    rf__cache_base(&c, "ns", SZ, "e", base);
    char live[RF__CACHE_PATH + 64], dead[RF__CACHE_PATH + 64], dead_idx[RF__CACHE_PATH + 64];
    snprintf(live, sizeof live, "%s.tmp.%d.7", base, 999999999);     /* no such pid here */
    snprintf(dead, sizeof dead, "%s.tmp.%d.8", base, (int)getpid()); /* a live pid here */
    snprintf(dead_idx, sizeof dead_idx, "%s.itmp.%d.9", base, (int)getpid());
    assert_int_equal(tu_write_file(live, "live", 4), 0);
    assert_int_equal(tu_write_file(dead, "x", 1), 0);
    assert_int_equal(tu_write_file(dead_idx, "y", 1), 0);
    int holder = open(live, O_RDONLY | O_CLOEXEC); /* the other container's writer */
    assert_true(holder >= 0);
    assert_int_equal(flock(holder, LOCK_EX | LOCK_NB), 0);
    assert_int_equal(rf__cache_usage(&c), 4);
    assert_int_equal(access(live, F_OK), 0);
    assert_int_equal(access(dead, F_OK), -1);
    assert_int_equal(access(dead_idx, F_OK), -1);
    /* a transfer of ours in progress is locked too: counted, never removed */
    char tmp[RF__CACHE_PATH];
    int fd = -1;
    assert_int_equal(rf__cache_reserve(&c, base, SZ, tmp, &fd, err, sizeof err), 1);
    assert_int_equal(rf__cache_usage(&c), 4 + SZ);
    assert_int_equal(access(tmp, F_OK), 0);
    rf__cache_abandon(&c, tmp, fd);
    close(holder); /* the writer died: its file goes at the next count */
    assert_int_equal(rf__cache_usage(&c), 0);
    assert_int_equal(access(live, F_OK), -1);
    rf__cache_close(&c);
}

/* A transfer is under its temporary name only until its commit: no pin
 * finds BASE.tar while it is written, even whole, with the writer's fetch
 * lock gone (a writer that died before the commit leaves no BASE.tar);
 * once committed it has its name and pins at once: where the folder keeps
 * marks, marked with this boot's id until rf__cache_finish has synced it;
 * elsewhere (marks 0) synced, unmarked, before the rename. Both ways, on
 * this folder. */
static void no_name_before_commit(int marks)
{
    rf_cache c;
    char err[600], base[RF__CACHE_PATH], tmp[RF__CACHE_PATH], path[RF__CACHE_PATH + 8];
    assert_int_equal(rf__cache_open(&c, g_dir, 10 * SZ, err, sizeof err), 0);
    c.marks = marks;
    rf__cache_base(&c, marks ? "whole-marked" : "whole", SZ, "e", base);
    snprintf(path, sizeof path, "%s.tar", base);
    int lk = -1, fd = -1, pin = -1;
    assert_int_equal(rf__cache_lock_fetch(&c, base, &lk, err, sizeof err), 1);
    assert_int_equal(rf__cache_reserve(&c, base, SZ, tmp, &fd, err, sizeof err), 1);
    char data[SZ];
    memset(data, 'w', sizeof data);
    assert_int_equal(pwrite(fd, data, SZ / 2, 0), SZ / 2);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(rf__cache_pin(&c, base, SZ, &pin), 0);
    assert_int_equal(pwrite(fd, data + SZ / 2, SZ - SZ / 2, SZ / 2), SZ - SZ / 2);
    rf__cache_unpin(lk); /* all bytes written, the lock gone: still absent */
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(rf__cache_pin(&c, base, SZ, &pin), 0);
    assert_int_equal(rf__cache_commit(&c, tmp, base, fd, err, sizeof err), 0);
    assert_int_equal(access(tmp, F_OK), -1);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, SZ);
    char v[64] = "";
    ssize_t n = getxattr(path, RF__CACHE_MARK, v, sizeof v - 1);
    if (marks) {
        assert_int_equal(n, (ssize_t)strlen(c.boot));
        assert_string_equal(v, c.boot);
    } else {
        assert_int_equal(n, -1);
    }
    assert_int_equal(rf__cache_pin(&c, base, SZ, &pin), 1); /* whole: pinned at once */
    rf__cache_unpin(pin);
    assert_int_equal(rf__cache_finish(&c, base, fd), 0);
    assert_int_equal(getxattr(path, RF__CACHE_MARK, v, sizeof v), -1);
    assert_int_equal(errno, ENODATA);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0111, 0);
    assert_int_equal(rf__cache_pin(&c, base, SZ, &pin), 1);
    char back[SZ];
    assert_int_equal(pread(pin, back, SZ, 0), SZ);
    assert_memory_equal(back, data, SZ);
    rf__cache_unpin(pin);
    rf__cache_unpin(fd);
    rf__cache_close(&c);
}

/* 1 when the test folder keeps marks (cache.c: user attributes and a boot
 * id); else the marked cases are skipped with a message, except under CI,
 * whose machines do keep them (a probe gone wrong must not pass unseen). */
static int folder_marks(void)
{
    rf_cache c;
    char err[600];
    assert_int_equal(rf__cache_open(&c, g_dir, 10 * SZ, err, sizeof err), 0);
    int marks = c.marks;
    rf__cache_close(&c);
    if (!marks && getenv("CI"))
        fail_msg("%s keeps no user attributes, or no boot id was read: marks are off", g_dir);
    if (!marks)
        print_message("skipped: %s keeps no user attributes (marks off)\n", g_dir);
    return marks;
}

static void test_no_name_before_commit(void **state)
{
    if (folder_marks())
        no_name_before_commit(1);
    no_name_before_commit(0);
}

/* RINGFEED_CACHE_SYNC_FIRST turns marks off (a file system that does not
 * keep metadata in order); "0" does not. */
static void test_sync_first_switch(void **state)
{
    if (!folder_marks())
        return;
    rf_cache c;
    char err[600];
    setenv("RINGFEED_CACHE_SYNC_FIRST", "1", 1);
    assert_int_equal(rf__cache_open(&c, g_dir, 10 * SZ, err, sizeof err), 0);
    assert_int_equal(c.marks, 0);
    rf__cache_close(&c);
    setenv("RINGFEED_CACHE_SYNC_FIRST", "0", 1);
    assert_int_equal(rf__cache_open(&c, g_dir, 10 * SZ, err, sizeof err), 0);
    assert_int_equal(c.marks, 1);
    rf__cache_close(&c);
    unsetenv("RINGFEED_CACHE_SYNC_FIRST");
}

/* Marked in another boot (a machine crash came between the commit and the
 * sync: the file may be torn) or by a failed sync: nobody pins it, even
 * with its writer's pin and lock gone; the next taker of BASE.lock removes
 * it (not while a pin holds it), fetches the shard anew, and that copy
 * pins. Marked in this boot, a dead writer's file is whole: pinned, and
 * never removed. */
static void test_marked_before_crash(void **state)
{
    if (!folder_marks())
        return;
    rf_cache c, c2, c3;
    char err[600], base[RF__CACHE_PATH], tmp[RF__CACHE_PATH], path[RF__CACHE_PATH + 8];
    assert_int_equal(rf__cache_open(&c, g_dir, 10 * SZ, err, sizeof err), 0);
    assert_int_equal(rf__cache_open(&c2, g_dir, 10 * SZ, err, sizeof err), 0);
    assert_int_equal(rf__cache_open(&c3, g_dir, 10 * SZ, err, sizeof err), 0);
    rf__cache_base(&c, "torn", SZ, "e", base);
    snprintf(path, sizeof path, "%s.tar", base);
    int lk = -1, lk2 = -1, fd = -1, pin = -1;
    assert_int_equal(rf__cache_lock_fetch(&c, base, &lk, err, sizeof err), 1);
    assert_int_equal(rf__cache_reserve(&c, base, SZ, tmp, &fd, err, sizeof err), 1);
    char data[SZ];
    memset(data, 't', sizeof data);
    assert_int_equal(pwrite(fd, data, SZ, 0), SZ);
    assert_int_equal(rf__cache_commit(&c, tmp, base, fd, err, sizeof err), 0);
    rf__cache_unpin(lk);
    rf__cache_unpin(fd); /* the writer dies before its sync */
    /* this boot: whole, pinned by another, and never taken for torn */
    assert_int_equal(rf__cache_lock_fetch(&c2, base, &lk2, err, sizeof err), 1);
    rf__cache_drop_unsynced(&c2, base);
    rf__cache_unpin(lk2);
    assert_int_equal(rf__cache_pin(&c2, base, SZ, &pin), 1);
    rf__cache_unpin(pin);
    /* a process that writes no marks still reads them: with this boot's id
     * it trusts the file; with no boot id to compare (a hidden /proc) it
     * cannot, and does not */
    c3.marks = 0;
    assert_int_equal(rf__cache_pin(&c3, base, SZ, &pin), 1);
    rf__cache_unpin(pin);
    c3.boot[0] = '\0';
    assert_int_equal(rf__cache_pin(&c3, base, SZ, &pin), 0);
    /* after a reboot: suspect */
    snprintf(c2.boot, sizeof c2.boot, "%s", "00000000-another-boot-0000000000000");
    assert_int_equal(rf__cache_pin(&c2, base, SZ, &pin), 0);
    assert_int_equal(rf__cache_lock_fetch(&c2, base, &lk2, err, sizeof err), 1);
    assert_int_equal(rf__cache_pin(&c2, base, SZ, &pin), 0);
    int other = -1; /* a pin of the old copy (taken before the reboot, say) */
    assert_int_equal(rf__cache_pin(&c, base, SZ, &other), 1);
    rf__cache_drop_unsynced(&c2, base); /* pinned: kept */
    assert_int_equal(access(path, F_OK), 0);
    rf__cache_unpin(other);
    rf__cache_drop_unsynced(&c2, base);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(rf__cache_reserve(&c2, base, SZ, tmp, &fd, err, sizeof err), 1);
    memset(data, 'u', sizeof data);
    assert_int_equal(pwrite(fd, data, SZ, 0), SZ);
    assert_int_equal(rf__cache_commit(&c2, tmp, base, fd, err, sizeof err), 0);
    rf__cache_unpin(lk2);
    assert_int_equal(rf__cache_finish(&c2, base, fd), 0);
    rf__cache_unpin(fd);
    /* synced: pinned in any boot, never removed */
    assert_int_equal(rf__cache_pin(&c, base, SZ, &pin), 1);
    char back[SZ];
    assert_int_equal(pread(pin, back, SZ, 0), SZ);
    assert_memory_equal(back, data, SZ);
    rf__cache_unpin(pin);
    rf__cache_drop_unsynced(&c2, base);
    assert_int_equal(access(path, F_OK), 0);
    /* a failed sync's mark: no boot's */
    assert_int_equal(setxattr(path, RF__CACHE_MARK, "sync failed", 11, 0), 0);
    assert_int_equal(rf__cache_pin(&c, base, SZ, &pin), 0);
    rf__cache_close(&c);
    rf__cache_close(&c2);
    rf__cache_close(&c3);
}

/* A folder that cannot be listed grants no room (it would count as empty). */
static void test_unlisted_folder_refuses_room(void **state)
{
    rf_cache c;
    char err[600], base[RF__CACHE_PATH], tmp[RF__CACHE_PATH];
    assert_int_equal(rf__cache_open(&c, g_dir, 10 * SZ, err, sizeof err), 0);
    rf__cache_base(&c, "unlisted", SZ, "e", base);
    int dir_fd = c.dir_fd;
    c.dir_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* fdopendir fails: ENOTDIR */
    assert_true(c.dir_fd >= 0);
    int fd = -1;
    err[0] = '\0';
    assert_int_equal(rf__cache_reserve(&c, base, SZ, tmp, &fd, err, sizeof err), RF_E_IO);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(err, "listing"));
    assert_non_null(strstr(err, strerror(ENOTDIR)));
    assert_true((int64_t)rf__cache_usage(&c) < 0);
    close(c.dir_fd);
    c.dir_fd = dir_fd;
    rf__cache_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_names_per_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pin_limit_lru, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fetch_lock_abandon_index, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_transfer_by_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unlisted_folder_refuses_room, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_name_before_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_marked_before_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_first_switch, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
