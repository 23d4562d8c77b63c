/*
 * cache.c - the shard cache's folder: its checks, the files' names, pins,
 * the fetch lock, atomic commits, kept indexes (see cache.h for the rules
 * between processes; cache_room.c counts the room and evicts).
 *
 * The folder is trusted only when private (owned by this user, writable by
 * nobody else), because what lies under a shard's name is read as the
 * shard; inside it, a file is used only when it is a regular file of this
 * user's, opened with O_NOFOLLOW (a symbolic link is never followed: a link
 * planted at .starved once made a loader write into another file) and
 * O_NONBLOCK (a FIFO never blocks the open); a shard also needs one link
 * and no permission for others (the cache makes its files 0600: a copy made
 * with cp, or a hard link to another file, is not one of its files). A
 * shard that is not trusted counts as absent: it is fetched anew, and the
 * commit's rename replaces the name (never what a link pointed to).
 *
 * A complete shard takes its name BASE.tar (rename under DIR/.lock, already
 * pinned by its writer) before it is synced, so that the loaders read it at
 * once while fdatasync runs later (a 16 MB shard's sync took as long as its
 * transfer on a local disk; its writer holds it off until its first batch:
 * remote.c). Until its sync has returned, the file carries a mark: the
 * extended attribute RF__CACHE_MARK, set when the file is made and holding
 * the boot's id (/proc/sys/kernel/random/boot_id), removed only after the
 * sync. Bytes that were complete when renamed can be lost only to a machine
 * crash (or power loss), after which the machine has another boot id: so a
 * marked file of this boot is whole (in the page cache, if not on disk yet)
 * and is pinned as any other, whether its writer lives or not; one of
 * another boot may be torn, is never pinned, and the next taker of
 * BASE.lock removes it and fetches the shard again (rf__cache_drop_unsynced).
 * Nobody ever waits for another's sync. The mark is on disk whenever the
 * name is (it was set before the rename), and its removal follows the
 * data. A sync that fails leaves a mark no boot has. Where the folder keeps
 * no user attributes (the open probes one on a file of its own), or no boot
 * id can be read, the shard is synced before it takes its name, as is
 * always safe. A torn BASE.idx needs no mark: its reader checks every field.
 *
 * Locks are released with an explicit LOCK_UN before the close: a forked
 * child (a DataLoader worker) holds copies of the descriptors, and a flock
 * belongs to the open file, so a close alone would leave the child's copy
 * holding the pin (remote.c also closes the child's copies at the fork).
 */
#define _GNU_SOURCE
#include "cache_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "ringfeed.h"
#include "sha256.h"
#include "trace.h"

/* DIR/.lock, exclusive, for this process's threads too: a flock belongs to
 * the open file, which the threads of one loader share (the fetch thread's
 * transfers, the indexer's rf__cache_put_index), so a second thread's flock
 * would succeed while the first holds it; dir_mu makes them take turns. */
int rf__cache_dir_lock(rf_cache *c)
{
    pthread_mutex_lock(&c->dir_mu);
    while (flock(c->lock_fd, LOCK_EX) != 0)
        if (errno != EINTR) {
            int e = errno;
            pthread_mutex_unlock(&c->dir_mu);
            errno = e;
            return -1;
        }
    return 0;
}

void rf__cache_dir_unlock(rf_cache *c)
{
    int e = errno; /* callers report an errno from under the lock */
    flock(c->lock_fd, LOCK_UN);
    pthread_mutex_unlock(&c->dir_mu);
    errno = e;
}

void rf__cache_unlock_close(int fd)
{
    flock(fd, LOCK_UN);
    close(fd);
}

const char *rf__cache_leaf(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int rf__cache_open_file(const rf_cache *c, const char *name, int flags, char *why, size_t whycap)
{
    int f;
    do
        f = openat(c->dir_fd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    while (f < 0 && errno == EINTR);
    struct stat st;
    if (f >= 0 && fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        f = -1;
        errno = e;
    }
    if (f < 0) {
        if (why)
            snprintf(why, whycap, "%s", errno == ELOOP ? "a symbolic link (never followed)"
                                                       : strerror(errno));
        return -1;
    }
    int e = !S_ISREG(st.st_mode) ? EINVAL : st.st_uid != c->uid ? EPERM : 0;
    if (e && why) {
        if (e == EINVAL)
            snprintf(why, whycap, "not a regular file (mode %06o)", (unsigned)st.st_mode);
        else
            snprintf(why, whycap, "owned by uid %u, not by this user (uid %u)",
                     (unsigned)st.st_uid, (unsigned)c->uid);
    }
    if (e) {
        close(f);
        errno = e;
        return -1;
    }
    return f;
}

/* Creates the missing folders of path, each 0700 (a cache folder, and the
 * .cache above it, are private). 0 or -1 (errno), the folder at fault in
 * at. */
static int mkdirs(const char *path, char *at, size_t atcap)
{
    char p[RF__CACHE_PATH];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char was = *s;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            snprintf(at, atcap, "%s", p);
            return -1;
        }
        if (!was)
            return 0;
        *s = was;
    }
}

int rf__cache_default_dir(char *out, size_t cap, char *err, size_t errcap)
{
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    char buf[4096];
    struct passwd pw, *me = NULL;
    int n = -1;
    if (x && *x == '/') {
        n = snprintf(out, cap, "%s/ringfeed", x);
    } else if (h && *h == '/') {
        n = snprintf(out, cap, "%s/.cache/ringfeed", h);
    } else if (getpwuid_r(geteuid(), &pw, buf, sizeof buf, &me) == 0 && me && me->pw_dir &&
               me->pw_dir[0] == '/' && me->pw_dir[1] != '\0') {
        /* HOME unset (a service, a bare container): this user's own home,
         * never a folder others can write such as /tmp */
        n = snprintf(out, cap, "%s/.cache/ringfeed", me->pw_dir);
    } else {
        snprintf(err, errcap,
                 "cache: no folder for the cache: XDG_CACHE_HOME and HOME are not set and user "
                 "%u has no home; set cache_dir",
                 (unsigned)geteuid());
        return RF_E_SOURCE;
    }
    if (n < 0 || (size_t)n >= cap) {
        snprintf(err, errcap, "cache: the default folder's path is too long");
        return RF_E_SOURCE;
    }
    return 0;
}

/* The folder is private (see above): 0, or RF_E_SOURCE saying why. */
static int check_folder(const rf_cache *c, char *err, size_t errcap)
{
    struct stat st;
    if (fstat(c->dir_fd, &st) != 0) {
        snprintf(err, errcap, "cache: %s: %s", c->dir, strerror(errno));
        return RF_E_SOURCE;
    }
    if (st.st_uid != c->uid) {
        snprintf(err, errcap,
                 "cache: %s: owned by uid %u, not by this user (uid %u): a cache folder must be "
                 "private, since its files are read as the shards they are named after; give "
                 "cache_dir a folder of your own",
                 c->dir, (unsigned)st.st_uid, (unsigned)c->uid);
        return RF_E_SOURCE;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(err, errcap,
                 "cache: %s: writable by %s (mode %04o): a cache folder must be private, since "
                 "its files are read as the shards they are named after (chmod 700 it, or give "
                 "cache_dir a folder of your own)",
                 c->dir, st.st_mode & S_IWOTH ? "others" : "its group",
                 (unsigned)(st.st_mode & 07777));
        return RF_E_SOURCE;
    }
    return 0;
}

/* 1 when a file in the folder keeps a user attribute as set and removed
 * (see above), tried on a file of this call's own: nameless, or where the
 * file system makes none, a hidden name (never counted, removed at once);
 * 0 when not, or unknown. */
static int probe_marks(const rf_cache *c)
{
    char name[64] = "", v[8];
    int f = openat(c->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (f < 0) {
        static _Atomic unsigned probes; /* names: a counter, nothing to pair with */
        snprintf(name, sizeof name, ".probe.%d.%u", (int)getpid(),
                 atomic_fetch_add_explicit(&probes, 1, memory_order_relaxed));
        if ((f = rf__cache_open_file(c, name, O_RDWR | O_CREAT | O_EXCL, NULL, 0)) < 0)
            return 0;
        flock(f, LOCK_EX | LOCK_NB); /* live: a listing removes it only once we are gone */
    }
    int ok = fsetxattr(f, RF__CACHE_MARK, "probe", 5, 0) == 0 &&
             fgetxattr(f, RF__CACHE_MARK, v, sizeof v) == 5 && !memcmp(v, "probe", 5) &&
             fremovexattr(f, RF__CACHE_MARK) == 0 && fgetxattr(f, RF__CACHE_MARK, v, sizeof v) < 0 &&
             errno == ENODATA;
    close(f);
    if (name[0])
        unlinkat(c->dir_fd, name, 0);
    return ok;
}

/* This boot's id into c->boot: 0, or -1 when there is none to read. */
static int read_boot(rf_cache *c)
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    int ok = f && fgets(c->boot, sizeof c->boot, f) != NULL;
    if (f)
        fclose(f);
    c->boot[ok ? strcspn(c->boot, "\n") : 0] = '\0';
    if (strlen(c->boot) < 16)
        c->boot[0] = '\0'; /* none: every mark is suspect (mark_of) */
    return c->boot[0] ? 0 : -1;
}

/* DIR/name (.lock, .starved), created if needed, checked (see above):
 * the descriptor, or -1 with err naming the file. */
static int folder_file(const rf_cache *c, const char *name, char *err, size_t errcap)
{
    char why[160];
    int f = rf__cache_open_file(c, name, O_RDWR | O_CREAT, why, sizeof why);
    if (f < 0)
        snprintf(err, errcap, "cache: %s/%s: %s", c->dir, name, why);
    return f;
}

int rf__cache_open(rf_cache *c, const char *dir, uint64_t limit, char *err, size_t errcap)
{
    memset(c, 0, sizeof *c);
    c->dir_fd = c->lock_fd = c->starved_fd = c->lease_fd = -1;
    c->uid = geteuid();
    pthread_mutex_init(&c->dir_mu, NULL);
    if (dir && strlen(dir) >= sizeof c->dir) {
        snprintf(err, errcap, "cache: the folder's path is too long");
        return RF_E_SOURCE;
    }
    if (dir && *dir)
        snprintf(c->dir, sizeof c->dir, "%s", dir);
    else if (rf__cache_default_dir(c->dir, sizeof c->dir, err, errcap) != 0)
        return RF_E_SOURCE;
    size_t n = strlen(c->dir);
    while (n > 1 && c->dir[n - 1] == '/')
        c->dir[--n] = '\0';
    char at[RF__CACHE_PATH];
    /* the folder's own path may hold links (a home on another disk): it
     * is the opened folder that is checked, whatever the path led to */
    if (mkdirs(c->dir, at, sizeof at) != 0 ||
        (c->dir_fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        snprintf(err, errcap, "cache: %s: %s", c->dir_fd < 0 && at[0] ? at : c->dir,
                 strerror(errno));
        rf__cache_close(c);
        return RF_E_SOURCE;
    }
    if (check_folder(c, err, errcap) != 0 ||
        (c->lock_fd = folder_file(c, ".lock", err, errcap)) < 0 ||
        (c->starved_fd = folder_file(c, ".starved", err, errcap)) < 0) {
        rf__cache_close(c);
        return RF_E_SOURCE;
    }
    /* RINGFEED_CACHE_SYNC_FIRST=1: a file system that does not keep metadata
     * in order (ext4 without a journal, ext2: see above) */
    const char *sf = getenv("RINGFEED_CACHE_SYNC_FIRST");
    c->marks = read_boot(c) == 0 && !(sf && *sf && strcmp(sf, "0")) && probe_marks(c);
    c->limit = limit;
    if (limit == 0) {
        /* what the folder holds and half of what is free now */
        struct statvfs v;
        uint64_t free_bytes = fstatvfs(c->dir_fd, &v) == 0 ? (uint64_t)v.f_bavail * v.f_frsize : 0;
        int64_t used = rf__cache_usage(c);
        if (used < 0) {
            snprintf(err, errcap, "cache: listing %s: %s", c->dir, strerror(errno));
            rf__cache_close(c);
            return RF_E_SOURCE;
        }
        c->limit = (uint64_t)used + free_bytes / 2;
    }
    return 0;
}

void rf__cache_close(rf_cache *c)
{
    if (c->lease_fd >= 0)
        rf__cache_unlock_close(c->lease_fd); /* .use.PID.N: stale now, removed by a listing */
    if (c->lock_fd >= 0)
        close(c->lock_fd);
    if (c->dir_fd >= 0)
        close(c->dir_fd);
    if (c->starved_fd >= 0)
        close(c->starved_fd);
    free(c->use);
    c->use = NULL;
    c->nuse = 0;
    c->lock_fd = c->dir_fd = c->starved_fd = c->lease_fd = -1;
}

/* ---- names -------------------------------------------------------------------- */

void rf__cache_id(const char *url, uint64_t size, const char *etag, uint8_t *id)
{
    /* the folder's format in the name: a version that writes or reads the
     * files another way never takes them for its own (see cache.h); the
     * fields end with a NUL, which none of them holds, so that no two
     * versions hash the same bytes */
    char v[32];
    int vn = snprintf(v, sizeof v, "%llu", (unsigned long long)size);
    rf_sha256 h;
    uint8_t d[32];
    rf__sha256_init(&h);
    rf__sha256_update(&h, RF__CACHE_FORMAT, sizeof RF__CACHE_FORMAT);
    rf__sha256_update(&h, url, strlen(url) + 1);
    rf__sha256_update(&h, v, (size_t)vn + 1);
    rf__sha256_update(&h, etag, strlen(etag) + 1);
    rf__sha256_final(&h, d);
    memcpy(id, d, RF__CACHE_ID);
}

void rf__cache_base(const rf_cache *c, const char *url, uint64_t size, const char *etag, char *base)
{
    uint8_t id[RF__CACHE_ID];
    char hex[2 * RF__CACHE_ID + 1];
    rf__cache_id(url, size, etag, id);
    for (int i = 0; i < RF__CACHE_ID; i++)
        snprintf(hex + 2 * i, 3, "%02x", id[i]);
    snprintf(base, RF__CACHE_PATH, "%s/%s", c->dir, hex);
}

/* The leaf of BASE with suffix (".tar", ".lock", ...) into name. */
static void leaf_of(const char *base, const char *suffix, char *name, size_t cap)
{
    snprintf(name, cap, "%s%s", rf__cache_leaf(base), suffix);
}

/* ---- pins ------------------------------------------------------------------- */

enum { MARK_NONE = 0, MARK_THIS_BOOT = 1, MARK_SUSPECT = 2 };

/* The mark on f (see above): none (synced, or a folder without marks),
 * this boot's, or another's (or unreadable: suspect too). */
static int mark_of(const rf_cache *c, int f)
{
    /* read whether or not this process writes marks (c->marks): a folder
     * is shared with processes that do */
    char v[sizeof c->boot];
    ssize_t n = fgetxattr(f, RF__CACHE_MARK, v, sizeof v - 1);
    if (n < 0) /* no mark, or a file system (or client) without attributes */
        return errno == ENODATA || errno == ENOTSUP ? MARK_NONE : MARK_SUSPECT;
    v[n] = '\0';
    return c->boot[0] && !strcmp(v, c->boot) ? MARK_THIS_BOOT : MARK_SUSPECT;
}

int rf__cache_pin(rf_cache *c, const char *base, uint64_t size, int *fd)
{
    char name[96];
    leaf_of(base, ".tar", name, sizeof name);
    /* under DIR/.lock: an evictor (which unlinks only under it) never
     * removes the file between this open and the shared lock, so no pin
     * ever holds a removed file's blocks out of the count */
    if (rf__cache_dir_lock(c) != 0)
        return RF_E_IO;
    int f = rf__cache_open_file(c, name, O_RDONLY, NULL, 0);
    int rc = 0;
    struct stat st;
    if (f < 0) {
        /* absent, or not a regular file of this user's: a fetch replaces it */
        rc = errno == ENOENT || errno == ELOOP || errno == EINVAL || errno == EPERM ? 0 : RF_E_IO;
    } else if (flock(f, LOCK_SH) != 0 || fstat(f, &st) != 0) {
        rc = RF_E_IO;
    } else if (st.st_nlink == 1 && (uint64_t)st.st_size == size && !(st.st_mode & 077) &&
               mark_of(c, f) != MARK_SUSPECT) {
        rc = 1;
    }
    /* else: not this version's bytes, a hard link or a copy the cache did
     * not make (its files have one link and mode 0600), or not synced
     * before a crash (see above) */
    rf__cache_dir_unlock(c);
    if (rc != 1) {
        int e = errno;
        if (f >= 0)
            rf__cache_unlock_close(f);
        errno = e;
        return rc;
    }
    futimens(f, NULL); /* the LRU clock: last pinned now */
    *fd = f;
    return 1;
}

void rf__cache_unpin(int fd)
{
    if (fd >= 0)
        rf__cache_unlock_close(fd); /* also for a forked child's copy of fd (above) */
}

void rf__cache_drop_unsynced(rf_cache *c, const char *base)
{
    char name[96];
    leaf_of(base, ".tar", name, sizeof name);
    if (rf__cache_dir_lock(c) != 0)
        return; /* left: the next taker of BASE.lock tries again */
    int f = rf__cache_open_file(c, name, O_RDONLY, NULL, 0);
    /* exclusive without waiting: nobody pins a suspect file */
    if (f >= 0 && flock(f, LOCK_EX | LOCK_NB) == 0 && mark_of(c, f) == MARK_SUSPECT &&
        unlinkat(c->dir_fd, name, 0) == 0)
        RF_TRACE("removed a shard left unsynced before a crash: %s.tar", base);
    if (f >= 0)
        rf__cache_unlock_close(f);
    rf__cache_dir_unlock(c);
}

int rf__cache_lock_fetch(rf_cache *c, const char *base, int *fd, char *err, size_t errcap)
{
    char name[96], why[160];
    leaf_of(base, ".lock", name, sizeof name);
    /* the lock of a version may be removed (cache_room.c) between an open
     * and its flock: the lock is held only while the name is still the
     * file locked; else open the new one */
    for (int tries = 0; tries < 16; tries++) {
        int f = rf__cache_open_file(c, name, O_RDWR | O_CREAT, why, sizeof why);
        if (f < 0) {
            int e = errno;
            snprintf(err, errcap, "cache: %s.lock: %s", base, why);
            errno = e; /* the caller tells a want of descriptors by it */
            return RF_E_IO;
        }
        if (flock(f, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            close(f);
            if (e == EWOULDBLOCK)
                return 0;
            snprintf(err, errcap, "cache: %s.lock: cannot lock: %s", base, strerror(e));
            errno = e;
            return RF_E_IO;
        }
        struct stat a, b;
        if (fstat(f, &a) == 0 && fstatat(c->dir_fd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
            a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            *fd = f;
            return 1;
        }
        rf__cache_unlock_close(f);
    }
    snprintf(err, errcap, "cache: %s.lock: replaced again and again while being locked", base);
    return RF_E_IO;
}

/* ---- the folder's starvation count -------------------------------------------- */

uint64_t rf__cache_starved(rf_cache *c)
{
    uint64_t v = 0;
    if (pread(c->starved_fd, &v, sizeof v, 0) != (ssize_t)sizeof v)
        v = 0; /* never bumped yet */
    return v;
}

uint64_t rf__cache_starve(rf_cache *c)
{
    /* exclusive flock of .starved: two bumps never write the same value */
    while (flock(c->starved_fd, LOCK_EX) != 0)
        if (errno != EINTR)
            return 0;
    uint64_t v = rf__cache_starved(c) + 1;
    if (pwrite(c->starved_fd, &v, sizeof v, 0) != (ssize_t)sizeof v)
        v = 0;
    flock(c->starved_fd, LOCK_UN);
    return v;
}

/* ---- commits ------------------------------------------------------------------ */

/* Renames within the folder under DIR/.lock (exclusive): a listing taken
 * while a file is renamed may miss it under both names, and the count
 * would then take its room for free. share_fd (>= 0): the transfer's
 * exclusive lock becomes the pin's shared one first, under DIR/.lock too,
 * since flock converts a lock by dropping it first (a listing in between
 * would find the transfer file unlocked and remove it; an evictor, the
 * shard unpinned). 0 or -1 (errno). */
static int locked_rename(rf_cache *c, const char *from, const char *to, int share_fd)
{
    if (rf__cache_dir_lock(c) != 0)
        return -1;
    int rc = share_fd >= 0 && flock(share_fd, LOCK_SH) != 0
                 ? -1
                 : renameat(c->dir_fd, rf__cache_leaf(from), c->dir_fd, rf__cache_leaf(to));
    rf__cache_dir_unlock(c);
    return rc;
}

int rf__cache_commit(rf_cache *c, const char *tmp, const char *base, int fd, char *err,
                     size_t errcap)
{
    char p[RF__CACHE_PATH + 8];
    snprintf(p, sizeof p, "%s.tar", base);
    /* marked, or else on disk, before it has its name (see above); pinned
     * before it has its name: no evictor can take it in between */
    if ((!c->marks && fdatasync(fd) != 0) || locked_rename(c, tmp, p, fd) != 0) {
        snprintf(err, errcap, "cache: %s: %s", p, strerror(errno));
        rf__cache_abandon(c, tmp, fd);
        return RF_E_IO;
    }
    RF_TRACE("%s: %s", c->marks ? "renamed" : "synced and renamed", p);
    futimens(fd, NULL);
    return 0;
}

int rf__cache_finish(rf_cache *c, const char *base, int fd)
{
    if (!c->marks)
        return 0;
    /* the mark goes only after the data are on disk (see above); a failed
     * sync leaves one that no boot has: nobody pins the file again, and the
     * next taker of BASE.lock fetches the shard anew. Where even that mark
     * cannot be written (a file system gone read-only), the name goes, if
     * it is still this file's. */
    if (fdatasync(fd) != 0) {
        int e = errno;
        if (fsetxattr(fd, RF__CACHE_MARK, "sync failed", 11, 0) != 0 &&
            rf__cache_dir_lock(c) == 0) {
            char name[96];
            leaf_of(base, ".tar", name, sizeof name);
            struct stat a, b;
            if (fstat(fd, &a) == 0 && fstatat(c->dir_fd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
                a.st_dev == b.st_dev && a.st_ino == b.st_ino)
                unlinkat(c->dir_fd, name, 0);
            rf__cache_dir_unlock(c);
        }
        errno = e;
        return RF_E_IO;
    }
    if (fremovexattr(fd, RF__CACHE_MARK) != 0 && errno != ENODATA)
        return RF_E_IO;
    RF_TRACE("synced");
    return 0;
}

void rf__cache_abandon(rf_cache *c, const char *tmp, int fd)
{
    unlinkat(c->dir_fd, rf__cache_leaf(tmp), 0);
    if (fd >= 0)
        rf__cache_unlock_close(fd); /* the transfer's exclusive lock */
}

/* ---- kept indexes ---------------------------------------------------------------- */

int rf__cache_put_index(rf_cache *c, const char *base, const void *p, size_t n)
{
    char tmp[RF__CACHE_PATH], dst[RF__CACHE_PATH + 8], err[600];
    int fd = -1;
    int rc = rf__cache_reserve_as(c, base, "itmp", n, tmp, &fd, err, sizeof err);
    if (rc != 1)
        return rc == RF_E_LIMIT ? 0 : rc;
    snprintf(dst, sizeof dst, "%s.idx", base);
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *)p + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    if (done != n || locked_rename(c, tmp, dst, -1) != 0) {
        rf__cache_abandon(c, tmp, fd);
        return RF_E_IO;
    }
    rf__cache_unlock_close(fd); /* the transfer's exclusive lock, on BASE.idx now */
    return 1;
}

int rf__cache_get_index(const char *base, void **p, size_t *n)
{
    char path[RF__CACHE_PATH + 8];
    snprintf(path, sizeof path, "%s.idx", base);
    /* as rf__cache_open_file checks a file, by path (the index's readers
     * hold no rf_cache) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT || errno == ELOOP ? 0 : RF_E_IO;
    struct stat st;
    char *buf = NULL;
    int rc = RF_E_IO;
    if (fstat(fd, &st) != 0) {
        rc = RF_E_IO;
    } else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) ||
               (uint64_t)st.st_size > RF__CACHE_MAX_INDEX) {
        rc = 0; /* not one of the cache's files: as if absent (the shard is walked) */
    } else if ((buf = malloc((size_t)st.st_size + 1)) != NULL) {
        size_t got = 0;
        ssize_t r = 1;
        while (got < (size_t)st.st_size &&
               (r = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got)) > 0)
            got += (size_t)r;
        if (got == (size_t)st.st_size) {
            *p = buf;
            *n = got;
            buf = NULL;
            rc = 1;
        }
    }
    free(buf);
    close(fd);
    return rc;
}
