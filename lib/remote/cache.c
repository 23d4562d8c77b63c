/*
 * cache.c - the shard cache's folder: names, pins, room and eviction,
 * atomic commits (see cache.h for the rules between processes).
 *
 * Room is counted by listing the folder under DIR/.lock: the apparent size
 * of every file (shards, indexes, transfers in progress, sized in full when
 * they start). A transfer file (BASE.tmp.* or BASE.itmp.*) is held with an
 * exclusive flock by its writer from its creation (under DIR/.lock) until
 * it is renamed or removed; one that the listing can lock without waiting
 * has no writer any more (a crash: the kernel dropped the lock) and is
 * removed on the way, so a crash leaves no room taken for ever. A flock,
 * unlike a process id, means the same in every PID namespace, so loaders in
 * containers that share the folder never take each other's live transfers
 * for stale ones.
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
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
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
#include "trace.h"

/* DIR/.lock, exclusive, for this process's threads too: a flock belongs to
 * the open file, which the threads of one loader share (the fetch thread's
 * transfers, the indexer's rf__cache_put_index), so a second thread's flock
 * would succeed while the first holds it; dir_mu makes them take turns.
 * 0, or -1 (errno) with neither held. */
static int dir_lock(rf_cache *c)
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

static void dir_unlock(rf_cache *c)
{
    int e = errno; /* callers report an errno from under the lock */
    flock(c->lock_fd, LOCK_UN);
    pthread_mutex_unlock(&c->dir_mu);
    errno = e;
}

/* Closes fd, ending first any flock it may hold (see above). */
static void unlock_close(int fd)
{
    flock(fd, LOCK_UN);
    close(fd);
}

static int mkdirs(const char *path)
{
    char p[RF__CACHE_PATH];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* 1 when a file in the folder keeps a user attribute as set and removed
 * (see above), tried on a file of this call's own: nameless, or where the
 * file system makes none, a hidden name (never counted, removed at once);
 * 0 when not, or unknown. */
static int probe_marks(int dir_fd)
{
    char name[64] = "", v[8];
    int f = openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
    if (f < 0) {
        static _Atomic unsigned probes; /* names: a counter, nothing to pair with */
        snprintf(name, sizeof name, ".probe.%d.%u", (int)getpid(),
                 atomic_fetch_add_explicit(&probes, 1, memory_order_relaxed));
        if ((f = openat(dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
            return 0;
    }
    int ok = fsetxattr(f, RF__CACHE_MARK, "probe", 5, 0) == 0 &&
             fgetxattr(f, RF__CACHE_MARK, v, sizeof v) == 5 && !memcmp(v, "probe", 5) &&
             fremovexattr(f, RF__CACHE_MARK) == 0 && fgetxattr(f, RF__CACHE_MARK, v, sizeof v) < 0 &&
             errno == ENODATA;
    close(f);
    if (name[0])
        unlinkat(dir_fd, name, 0);
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

int rf__cache_open(rf_cache *c, const char *dir, uint64_t limit, char *err, size_t errcap)
{
    memset(c, 0, sizeof *c);
    c->dir_fd = c->lock_fd = c->starved_fd = -1;
    pthread_mutex_init(&c->dir_mu, NULL);
    if (dir && strlen(dir) >= sizeof c->dir) {
        snprintf(err, errcap, "cache: the folder's path is too long");
        return RF_E_SOURCE;
    }
    if (dir && *dir) {
        snprintf(c->dir, sizeof c->dir, "%s", dir);
    } else {
        const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
        if (x && *x == '/')
            snprintf(c->dir, sizeof c->dir, "%s/ringfeed", x);
        else
            snprintf(c->dir, sizeof c->dir, "%s/.cache/ringfeed", h && *h ? h : "/tmp");
    }
    size_t n = strlen(c->dir);
    while (n > 1 && c->dir[n - 1] == '/')
        c->dir[--n] = '\0';
    if (mkdirs(c->dir) != 0 || (c->dir_fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
        (c->lock_fd = openat(c->dir_fd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0 ||
        (c->starved_fd = openat(c->dir_fd, ".starved", O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
        snprintf(err, errcap, "cache: %s: %s", c->dir, strerror(errno));
        rf__cache_close(c);
        return RF_E_SOURCE;
    }
    /* RINGFEED_CACHE_SYNC_FIRST=1: a file system that does not keep metadata
     * in order (ext4 without a journal, ext2: see above) */
    const char *sf = getenv("RINGFEED_CACHE_SYNC_FIRST");
    c->marks = read_boot(c) == 0 && !(sf && *sf && strcmp(sf, "0")) && probe_marks(c->dir_fd);
    c->limit = limit;
    if (limit == 0) {
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
    if (c->lock_fd >= 0)
        close(c->lock_fd);
    if (c->dir_fd >= 0)
        close(c->dir_fd);
    if (c->starved_fd >= 0)
        close(c->starved_fd);
    c->lock_fd = c->dir_fd = c->starved_fd = -1;
}

/* FNV-1a, 64 bits, from a chosen start: two starts give the 128-bit name. */
static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

void rf__cache_base(const rf_cache *c, const char *url, uint64_t size, const char *etag, char *base)
{
    /* the folder's format in the name: a version that writes or reads the
     * files another way never takes them for its own (see cache.h) */
    char v[64];
    int vn = snprintf(v, sizeof v, "\n%llu\n%s", (unsigned long long)size, RF__CACHE_FORMAT);
    uint64_t h1 = 0xcbf29ce484222325ULL, h2 = 0x6c62272e07bb0142ULL;
    h1 = fnv(fnv(fnv(h1, url, strlen(url)), v, (size_t)vn), etag, strlen(etag));
    h2 = fnv(fnv(fnv(h2, etag, strlen(etag)), v, (size_t)vn), url, strlen(url));
    snprintf(base, RF__CACHE_PATH, "%s/%016llx%016llx", c->dir, (unsigned long long)h1,
             (unsigned long long)h2);
}

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
    char p[RF__CACHE_PATH + 8];
    snprintf(p, sizeof p, "%s.tar", base);
    int f = open(p, O_RDONLY | O_CLOEXEC);
    if (f < 0)
        return errno == ENOENT ? 0 : RF_E_IO;
    /* waits only while an evictor holds the exclusive lock to remove it */
    while (flock(f, LOCK_SH) != 0 && errno == EINTR)
        ;
    struct stat st;
    if (fstat(f, &st) != 0 || st.st_nlink == 0 || (uint64_t)st.st_size != size ||
        mark_of(c, f) == MARK_SUSPECT) {
        /* removed while we waited, not this version's bytes, or not synced
         * before a crash (see above) */
        rf__cache_unpin(f);
        return 0;
    }
    futimens(f, NULL); /* the LRU clock: last pinned now */
    *fd = f;
    return 1;
}

void rf__cache_unpin(int fd)
{
    if (fd >= 0)
        unlock_close(fd); /* also for a forked child's copy of fd (above) */
}

void rf__cache_drop_unsynced(rf_cache *c, const char *base)
{
    char p[RF__CACHE_PATH + 8];
    snprintf(p, sizeof p, "%s.tar", base);
    if (dir_lock(c) != 0)
        return; /* left: the next taker of BASE.lock tries again */
    int f = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    /* exclusive without waiting: nobody pins a suspect file */
    if (f >= 0 && flock(f, LOCK_EX | LOCK_NB) == 0 && mark_of(c, f) == MARK_SUSPECT &&
        unlink(p) == 0)
        RF_TRACE("removed a shard left unsynced before a crash: %s", p);
    if (f >= 0)
        unlock_close(f);
    dir_unlock(c);
}

int rf__cache_lock_fetch(rf_cache *c, const char *base, int *fd)
{
    char p[RF__CACHE_PATH + 8];
    snprintf(p, sizeof p, "%s.lock", base);
    int f = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0)
        return RF_E_IO;
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(f);
        errno = e; /* for the caller's message */
        return e == EWOULDBLOCK ? 0 : RF_E_IO;
    }
    *fd = f;
    return 1;
}

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

/* ---- room ------------------------------------------------------------------ */

typedef struct victim {
    char name[80];
    uint64_t size;
    struct timespec mtime;
} victim;

static int cmp_victim(const void *a, const void *b)
{
    const victim *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Under DIR/.lock: removes the transfer file `name` (BASE.tmp.PID.N or
 * BASE.itmp.PID.N) when no writer holds it (see above); 1 when removed. */
static int remove_stale_tmp(rf_cache *c, const char *name)
{
    if (!strstr(name, ".tmp.") && !strstr(name, ".itmp."))
        return 0;
    int f = openat(c->dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (f < 0)
        return 0;
    int gone = flock(f, LOCK_EX | LOCK_NB) == 0 && unlinkat(c->dir_fd, name, 0) == 0;
    unlock_close(f); /* locked even when the unlink failed */
    return gone;
}

/* Under DIR/.lock: the folder's bytes in *used, and its shards (when v is
 * not NULL: a malloc'd list in *v, *nv). 0, or -1 (errno) when the folder
 * cannot be listed: then nothing is known, and no room may be granted. */
static int measure(rf_cache *c, uint64_t *used_out, victim **v, size_t *nv)
{
    int dfd = dup(c->dir_fd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        errno = e;
        return -1;
    }
    rewinddir(d);
    uint64_t used = 0;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    for (;;) {
        errno = 0;
        if ((e = readdir(d)) == NULL) {
            rc = errno ? -1 : 0;
            break;
        }
        struct stat st;
        if (e->d_name[0] == '.')
            continue;
        if (fstatat(c->dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT)
                continue; /* removed since the listing */
            rc = -1;
            break;
        }
        if (!S_ISREG(st.st_mode))
            continue;
        if (remove_stale_tmp(c, e->d_name))
            continue;
        used += (uint64_t)st.st_size;
        size_t len = strlen(e->d_name);
        /* shards only: a kept index outlives its shard on purpose (a later
         * start, or another rank's, indexes without a fetch, which a full
         * folder could not give it) */
        if (!v || len < 4 || len >= sizeof((victim *)0)->name ||
            strcmp(e->d_name + len - 4, ".tar"))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            victim *nv2 = realloc(*v, cap * sizeof **v);
            if (!nv2)
                break; /* fewer candidates: less eviction, never more bytes */
            *v = nv2;
        }
        snprintf((*v)[n].name, sizeof(*v)[n].name, "%s", e->d_name);
        (*v)[n].size = (uint64_t)st.st_size;
        (*v)[n].mtime = st.st_mtim;
        n++;
    }
    int err = errno;
    closedir(d);
    errno = err;
    if (nv)
        *nv = n;
    *used_out = used;
    return rc;
}

int64_t rf__cache_usage(rf_cache *c)
{
    /* DIR/.lock: the listing removes stale transfer files (see above) */
    if (dir_lock(c) != 0)
        return RF_E_IO;
    uint64_t used = 0;
    int rc = measure(c, &used, NULL, NULL);
    dir_unlock(c);
    return rc == 0 ? (int64_t)used : RF_E_IO;
}

int rf__cache_has_index(rf_cache *c)
{
    /* no lock: an index that comes or goes meanwhile only makes the answer
     * one of a moment ago, which is all a caller may rely on */
    int dfd = openat(c->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return 1; /* unknown: as if there were one */
    }
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        found = len > 4 && !strcmp(e->d_name + len - 4, ".idx");
    }
    closedir(d);
    return found;
}

/* Under DIR/.lock: evicts unpinned shards, oldest pin first, until size
 * more bytes fit. 1 when they do, 0 when they do not, -1 (errno) when the
 * folder cannot be listed. */
static int make_room(rf_cache *c, uint64_t size)
{
    victim *v = NULL;
    size_t nv = 0;
    uint64_t used = 0;
    if (measure(c, &used, &v, &nv) != 0) {
        int e = errno;
        free(v);
        errno = e;
        return -1;
    }
    if (used + size > c->limit && nv > 0)
        qsort(v, nv, sizeof *v, cmp_victim);
    for (size_t i = 0; i < nv && used + size > c->limit; i++) {
        int f = openat(c->dir_fd, v[i].name, O_RDONLY | O_CLOEXEC);
        if (f < 0)
            continue;
        /* without waiting: a shared lock means some loader has it pinned */
        if (flock(f, LOCK_EX | LOCK_NB) == 0 && unlinkat(c->dir_fd, v[i].name, 0) == 0) {
            used = used > v[i].size ? used - v[i].size : 0;
            atomic_fetch_add_explicit(&c->evictions, 1, memory_order_relaxed);
        }
        unlock_close(f); /* locked even when the unlink failed */
    }
    free(v);
    return used + size <= c->limit;
}

/* Renames within the folder under DIR/.lock (exclusive): a listing taken
 * while a file is renamed may miss it under both names, and measure() would
 * then count its room as free. share_fd (>= 0): the transfer's exclusive
 * lock becomes the pin's shared one first, under DIR/.lock too, since
 * flock converts a lock by dropping it first (a listing in between would
 * find the transfer file unlocked and remove it; an evictor, the shard
 * unpinned). 0 or -1 (errno). */
static int locked_rename(rf_cache *c, const char *from, const char *to, int share_fd)
{
    if (dir_lock(c) != 0)
        return -1;
    int rc = share_fd >= 0 && flock(share_fd, LOCK_SH) != 0 ? -1 : rename(from, to);
    dir_unlock(c);
    return rc;
}

/* Marks a new shard file as not synced in this boot (see above): 0 or -1 (errno). */
static int set_mark(const rf_cache *c, int fd)
{
    return fsetxattr(fd, RF__CACHE_MARK, c->boot, strlen(c->boot), 0);
}

/* The file's size and its disk blocks, taken now: a full disk fails here,
 * before a byte is fetched, not in the middle of the transfer; where the
 * file system cannot allocate ahead, the size alone. 0 or -1 (errno). */
static int take_blocks(int fd, uint64_t size)
{
    if (size == 0)
        return 0;
    if (fallocate(fd, 0, 0, (off_t)size) == 0)
        return 0;
    return errno == EOPNOTSUPP || errno == ENOSYS ? ftruncate(fd, (off_t)size) : -1;
}

/* Room for size bytes and a temporary file "BASE.SUFFIX.PID.N" holding it,
 * marked as not synced when mark is 1 and the folder keeps marks. */
static int reserve(rf_cache *c, const char *base, const char *suffix, int mark, uint64_t size,
                   char *tmp, int *fd, char *err, size_t errcap)
{
    if (size > c->limit) {
        snprintf(err, errcap, "cache: %llu bytes do not fit cache_limit=%llu (%.200s)",
                 (unsigned long long)size, (unsigned long long)c->limit, c->dir);
        return RF_E_LIMIT;
    }
    /* DIR/.lock: the count and the room taken change together */
    if (dir_lock(c) != 0) {
        snprintf(err, errcap, "cache: %.200s/.lock: %s", c->dir, strerror(errno));
        return RF_E_IO;
    }
    int rc = make_room(c, size);
    if (rc < 0) {
        snprintf(err, errcap, "cache: listing %.200s: %s (no room is granted unmeasured)", c->dir,
                 strerror(errno));
        rc = RF_E_IO;
    } else if (rc == 1) {
        unsigned n = atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed);
        snprintf(tmp, RF__CACHE_PATH, "%s.%s.%d.%u", base, suffix, (int)getpid(), n);
        int f = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        /* locked before DIR/.lock is let go: no listing ever sees it unlocked
         * while it is written (see above) */
        if (f < 0 || flock(f, LOCK_EX | LOCK_NB) != 0 || (mark && set_mark(c, f) != 0) ||
            take_blocks(f, size) != 0) {
            snprintf(err, errcap, "cache: %s: %s", tmp, strerror(errno));
            if (f >= 0) {
                unlink(tmp); /* under our lock: no listing takes it for stale first */
                unlock_close(f);
            }
            rc = RF_E_IO;
        } else {
            *fd = f;
        }
    }
    dir_unlock(c);
    return rc;
}

int rf__cache_reserve(rf_cache *c, const char *base, uint64_t size, char *tmp, int *fd, char *err,
                      size_t errcap)
{
    return reserve(c, base, "tmp", c->marks, size, tmp, fd, err, errcap);
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
        if (fsetxattr(fd, RF__CACHE_MARK, "sync failed", 11, 0) != 0 && dir_lock(c) == 0) {
            char p[RF__CACHE_PATH + 8];
            snprintf(p, sizeof p, "%s.tar", base);
            struct stat a, b;
            if (fstat(fd, &a) == 0 && stat(p, &b) == 0 && a.st_dev == b.st_dev &&
                a.st_ino == b.st_ino)
                unlink(p);
            dir_unlock(c);
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
    unlink(tmp);
    if (fd >= 0)
        unlock_close(fd); /* the transfer's exclusive lock */
}

int rf__cache_put_index(rf_cache *c, const char *base, const void *p, size_t n)
{
    char tmp[RF__CACHE_PATH], dst[RF__CACHE_PATH + 8], err[600];
    int fd = -1;
    int rc = reserve(c, base, "itmp", 0, n, tmp, &fd, err, sizeof err);
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
    unlock_close(fd); /* the transfer's exclusive lock, on BASE.idx now */
    return 1;
}

int rf__cache_get_index(const char *base, void **p, size_t *n)
{
    char path[RF__CACHE_PATH + 8];
    snprintf(path, sizeof path, "%s.idx", base);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : RF_E_IO;
    struct stat st;
    char *buf = NULL;
    int rc = RF_E_IO;
    if (fstat(fd, &st) == 0 && (buf = malloc((size_t)st.st_size + 1)) != NULL) {
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
