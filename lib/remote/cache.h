/*
 * cache.h - the local cache of remote shards: a folder of whole shards,
 * bounded in bytes, shared safely by the loaders of one node.
 *
 * The folder must be private: owned by this user and writable by nobody
 * else (rf__cache_open refuses it otherwise, saying why), since a file at a
 * shard's name is read as that shard. It is created 0700, its files 0600;
 * every file in it is opened without following a symbolic link (O_NOFOLLOW)
 * or waiting on a FIFO (O_NONBLOCK) and used only when it is a regular file
 * of this user.
 *
 * The cache touches only names of its own exact form (cache_room.c,
 * name_kind): a shard version (URL, size, validator) owns BASE.tar (the
 * shard), BASE.idx (its index, see source_remote.c), BASE.lock (held while
 * one process fetches it) and BASE.tmp.PID.N / BASE.itmp.PID.N (a transfer
 * in progress), with BASE = DIR/ + 32 hex digits of a SHA-256 of the
 * version and of the folder's format (RF__CACHE_FORMAT): a changed object
 * is a new name, and a stale copy is never read as the new one; nor is a
 * file of another format, though all share the folder's room. The folder's
 * own files are .lock, .starved and .use.PID.N (a live loader's list of the
 * versions it uses). Any other file is foreign: never opened, renamed or
 * deleted, but counted against the limit (an error names such files when
 * they leave no room).
 *
 * Cross-process rules, all with flock(2), which holds per open file (so two
 * loaders of one process exclude each other as two processes do; the
 * threads of one loader share its open files, and take DIR/.lock in turn
 * through a mutex beside it):
 *   - DIR/.lock, exclusive, is held while the folder is measured, files are
 *     evicted and a temporary file takes its room: the byte count and the
 *     room taken change together; while a file is renamed (a listing
 *     taken during a rename may miss the file under both names); and while
 *     a shard is pinned (an evictor never unlinks a file a pin has open).
 *   - A pinned shard is one whose BASE.tar some loader holds open with a
 *     shared lock; eviction takes an exclusive lock without waiting, so it
 *     never removes a pinned shard. A loader reads a pinned shard through
 *     the pin's descriptor, never by its name again, and keeps no other
 *     descriptor of it once the pin ends: a file evicted is gone from the
 *     disk, not held open out of the count.
 *   - BASE.lock, exclusive, is held by the one process fetching the shard,
 *     until its BASE.tar is in place; the others wait for it and then find
 *     BASE.tar.
 *   - A transfer writes BASE.tmp.*, first sized to the whole shard (so it
 *     counts in full from the start), exclusively locked by its writer (a
 *     transfer file nobody holds is a crashed one's, removed when the room
 *     is counted); only a complete, size-checked file is renamed to
 *     BASE.tar (atomic), already pinned by its writer, and, where the folder
 *     keeps user attributes, marked with the boot's id until it is synced
 *     (cache.c: a file marked in another boot, i.e. before a crash, is never
 *     pinned); elsewhere it is synced before the rename.
 *   - .use.PID.N, exclusive, is held by a live loader for its life and lists
 *     the versions it uses (rf__cache_lease); one nobody holds is a dead
 *     loader's, removed when the room is counted.
 * The folder's bytes (the sizes of every file in it) stay under the limit: room is taken before a
 * transfer starts, by evicting unpinned shards, least recently pinned first
 * (BASE.tar's mtime is set at every pin), then the .idx and .lock files of
 * versions no live loader uses. When pinned shards fill the limit, room is
 * refused and the caller waits for an unpin; when what the cache may not
 * evict (foreign files, the indexes of versions in use) leaves no room, it
 * is an error that says what fills the folder.
 */
#ifndef RF_CACHE_H
#define RF_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RF__CACHE_PATH 4096
/* Goes into every BASE (rf__cache_base): a new value when the files' meaning changes. */
#define RF__CACHE_FORMAT "ringfeed-cache 3"
/* The extended attribute on a shard not synced yet: the boot id of its writer (cache.c). */
#define RF__CACHE_MARK "user.ringfeed.unsynced"
/* Bytes of a version's id: the first half of its SHA-256, 32 hex digits in BASE. */
#define RF__CACHE_ID 16

typedef struct rf_cache {
    char dir[RF__CACHE_PATH - 128]; /* room left for a shard's file names */
    uint64_t limit;
    uid_t uid;                 /* this process's effective user: owns every file it trusts */
    int dir_fd;                /* the folder, for *at() calls */
    int lock_fd;               /* DIR/.lock */
    pthread_mutex_t dir_mu;    /* held with DIR/.lock's flock: this process's threads
                                * share lock_fd's open file, which the flock alone
                                * would let them all hold at once (cache.c) */
    int starved_fd;            /* DIR/.starved (rf__cache_starve) */
    int lease_fd;              /* DIR/.use.PID.N (rf__cache_lease), or -1 */
    uint8_t (*use)[RF__CACHE_ID]; /* the versions this object uses, sorted; written once
                                   * (rf__cache_lease, before any transfer), then read
                                   * under DIR/.lock */
    size_t nuse;
    int marks;                 /* 1: the folder keeps user attributes, and a shard is
                                * named before it is synced, marked (cache.c) */
    char boot[40];             /* this boot's id, the mark's value (marks 1) */
    _Atomic unsigned seq;      /* temporary file names: a counter, nothing to pair with */
    _Atomic int64_t evictions; /* shards this object evicted (stats; relaxed) */
    /* what the last listing found (stats; relaxed, each on its own) */
    _Atomic int64_t foreign_bytes; /* files the cache did not make */
    _Atomic int loaders;           /* live loaders' .use files, this one's among them */
} rf_cache;

/* The default folder: $XDG_CACHE_HOME/ringfeed, else $HOME/.cache/ringfeed,
 * else the .cache/ringfeed of this user's home in the password database
 * (never a shared folder such as /tmp); each only when it is an absolute
 * path. 0, or RF_E_SOURCE (err) when there is none. */
int rf__cache_default_dir(char *out, size_t cap, char *err, size_t errcap);

/* Opens (creating, 0700) dir, or the default (rf__cache_default_dir) when
 * dir is NULL or "", refusing a folder that is not private (see above).
 * limit 0: the bytes the folder holds now plus half the free space of its
 * file system. 0 or RF_E_SOURCE with the reason, naming the file at fault,
 * in err. */
int rf__cache_open(rf_cache *c, const char *dir, uint64_t limit, char *err, size_t errcap);
void rf__cache_close(rf_cache *c);

/* A version's id (RF__CACHE_ID bytes), and its BASE into base
 * (RF__CACHE_PATH bytes). */
void rf__cache_id(const char *url, uint64_t size, const char *etag, uint8_t *id);
void rf__cache_base(const rf_cache *c, const char *url, uint64_t size, const char *etag,
                    char *base);

/* Declares the versions (ids, n of them) this object's loader uses, for its
 * life: their indexes are never evicted meanwhile, by any loader on the
 * node (DIR/.use.PID.N, held until rf__cache_close). Once, before the
 * first transfer. largest: the largest shard's size; when what the cache
 * may not evict leaves no room for it, RF_E_LIMIT with err saying what
 * fills the folder. 0, or a negative RF_E_* (err). */
int rf__cache_lease(rf_cache *c, const uint8_t *ids, size_t n, uint64_t largest, char *err,
                    size_t errcap);

/* Pins BASE.tar if it is there, trusted (a regular file of this user's,
 * one link, no permission for others, size bytes; not marked in another
 * boot, cache.c): 1 and the pinned file in *fd; 0 when absent or not
 * trusted (a fetch replaces it); a negative RF_E_* on a system error. */
int rf__cache_pin(rf_cache *c, const char *base, uint64_t size, int *fd);
/* Ends a pin (closes fd). */
void rf__cache_unpin(int fd);

/* With BASE.lock held: removes BASE.tar if it was marked in another boot
 * (cache.c: perhaps torn by a crash), unless it is pinned. */
void rf__cache_drop_unsynced(rf_cache *c, const char *base);
/* Takes BASE.lock without waiting: 1 (*fd holds it), 0 when another loader
 * holds it, or a negative RF_E_* with err naming the file and the reason.
 * rf__cache_unpin releases it. */
int rf__cache_lock_fetch(rf_cache *c, const char *base, int *fd, char *err, size_t errcap);

/* Room for size bytes: 1 with a temporary file of that size, open for
 * writing in *fd, its path in tmp (RF__CACHE_PATH bytes); 0 when pinned
 * shards leave no room now; RF_E_LIMIT when size is over the limit itself,
 * or when what the cache may not evict leaves no room (err says what fills
 * the folder); another negative RF_E_* on a system error (reason in err). */
int rf__cache_reserve(rf_cache *c, const char *base, uint64_t size, char *tmp, int *fd, char *err,
                      size_t errcap);
/* The complete temporary file becomes BASE.tar, pinned by fd: marked (not
 * synced yet) where the folder keeps marks, else synced first. 0 or a
 * negative RF_E_* (err; the temporary file is then removed, fd closed). The
 * caller may let BASE.lock go at once, and calls rf__cache_finish later. */
int rf__cache_commit(rf_cache *c, const char *tmp, const char *base, int fd, char *err,
                     size_t errcap);
/* After rf__cache_commit: syncs the shard BASE.tar (fd: its file, or a
 * duplicate of it) and removes its mark. 0, or RF_E_IO with a mark no boot
 * has, or where none can be written, the name removed (no later pin trusts
 * the file; the next fetch replaces it). Nothing to do where the folder
 * keeps no marks. */
int rf__cache_finish(rf_cache *c, const char *base, int fd);
/* Removes the temporary file and closes fd. */
void rf__cache_abandon(rf_cache *c, const char *tmp, int fd);

/* BASE.idx: written whole (temporary file, rename) when there is room, 1;
 * 0 when there is none; negative on a system error. */
int rf__cache_put_index(rf_cache *c, const char *base, const void *p, size_t n);
/* Reads BASE.idx: 1 with a malloc'd copy in *p, *n; 0 when absent, or not
 * a regular file of this user's (not followed, not trusted), or larger
 * than RF__CACHE_MAX_INDEX. */
#define RF__CACHE_MAX_INDEX ((size_t)256 << 20)
int rf__cache_get_index(const char *base, void **p, size_t *n);

/* The folder's starvation count, DIR/.starved: a loader that finds no room
 * for the shard its very next sample needs bumps it (rf__cache_starve); the
 * other loaders on the node see it change (rf__cache_starved) and give up
 * the pins they hold only for later samples (remote.c), so that pins held
 * ahead by one loader never keep another from its next sample. The count
 * changes under an exclusive flock of the file; it is read without one (a
 * torn read only looks like one more change). */
uint64_t rf__cache_starved(rf_cache *c);
/* Bumps the count; returns its new value. */
uint64_t rf__cache_starve(rf_cache *c);

/* Bytes of every file in the folder now (as counted against the limit), or
 * RF_E_IO when it cannot be listed. */
int64_t rf__cache_usage(rf_cache *c);

/* 1 when the folder holds a kept index (BASE.idx) of any shard, or cannot
 * be listed; 0 when it holds none: then no shard has one. */
int rf__cache_has_index(rf_cache *c);

#endif
