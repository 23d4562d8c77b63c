/*
 * cache.h - the local cache of remote shards: a folder of whole shards,
 * bounded in bytes, shared safely by the loaders of one node.
 *
 * A shard version (URL, size, validator) owns the files BASE.tar (the
 * shard), BASE.idx (its index, see source_remote.c), BASE.lock (held while
 * one process fetches it) and BASE.tmp.PID.N (a transfer in progress), with
 * BASE = DIR/ + 32 hex digits of a hash of the version and of the folder's
 * format (RF__CACHE_FORMAT): a changed object is a new name, and a stale
 * copy is never read as the new one; nor is a file of another format
 * (0.4.0 renamed shards only once synced, and knows no mark: it must not
 * pin a file marked before a crash), though all share the folder's room.
 *
 * Cross-process rules, all with flock(2), which holds per open file (so two
 * loaders of one process exclude each other as two processes do; the
 * threads of one loader share its open files, and take DIR/.lock in turn
 * through a mutex beside it):
 *   - DIR/.lock, exclusive, is held while the folder is measured, files are
 *     evicted and a temporary file takes its room: the byte count and the
 *     room taken change together; and while a file is renamed (a listing
 *     taken during a rename may miss the file under both names).
 *   - A pinned shard is one whose BASE.tar some loader holds open with a
 *     shared lock; eviction takes an exclusive lock without waiting, so it
 *     never removes a pinned shard, and a pin taken on a file being removed
 *     sees its link count at 0 and counts as absent.
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
 * The folder's bytes (every file in it) stay under the limit: room is taken
 * before a transfer starts, by evicting unpinned shards, least recently
 * pinned first (BASE.tar's mtime is set at every pin). When pinned shards
 * fill the limit, room is refused and the caller waits for an unpin. Kept
 * indexes are never evicted (small; those of another format, or of a
 * dataset gone, stay until the folder is cleared).
 */
#ifndef RF_CACHE_H
#define RF_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define RF__CACHE_PATH 4096
/* Goes into every BASE (rf__cache_base): a new value when the files' meaning changes. */
#define RF__CACHE_FORMAT "ringfeed-cache 2"
/* The extended attribute on a shard not synced yet: the boot id of its writer (cache.c). */
#define RF__CACHE_MARK "user.ringfeed.unsynced"

typedef struct rf_cache {
    char dir[RF__CACHE_PATH - 128]; /* room left for a shard's file names */
    uint64_t limit;
    int dir_fd;                /* the folder, for *at() calls */
    int lock_fd;               /* DIR/.lock */
    pthread_mutex_t dir_mu;    /* held with DIR/.lock's flock: this process's threads
                                * share lock_fd's open file, which the flock alone
                                * would let them all hold at once (cache.c) */
    int starved_fd;            /* DIR/.starved (rf__cache_starve) */
    int marks;                 /* 1: the folder keeps user attributes, and a shard is
                                * named before it is synced, marked (cache.c) */
    char boot[40];             /* this boot's id, the mark's value (marks 1) */
    _Atomic unsigned seq;      /* temporary file names: a counter, nothing to pair with */
    _Atomic int64_t evictions; /* shards this object evicted (stats; relaxed) */
} rf_cache;

/* Opens (creating) dir, or the default ($XDG_CACHE_HOME/ringfeed, else
 * ~/.cache/ringfeed) when dir is NULL or "". limit 0: the bytes the folder
 * holds now plus half the free space of its file system. 0 or RF_E_SOURCE
 * with the reason in err. */
int rf__cache_open(rf_cache *c, const char *dir, uint64_t limit, char *err, size_t errcap);
void rf__cache_close(rf_cache *c);

/* BASE of a shard version into base (RF__CACHE_PATH bytes). */
void rf__cache_base(const rf_cache *c, const char *url, uint64_t size, const char *etag,
                    char *base);

/* Pins BASE.tar if it is there with size bytes (and not marked in another
 * boot, cache.c): 1 and the pinned file in *fd; 0 when absent (or suspect);
 * a negative RF_E_* on a system error. */
int rf__cache_pin(rf_cache *c, const char *base, uint64_t size, int *fd);
/* Ends a pin (closes fd). */
void rf__cache_unpin(int fd);

/* Takes BASE.lock without waiting: 1 (*fd holds it), 0 when another loader
 * holds it, or a negative RF_E_*. rf__cache_unpin releases it. */
/* With BASE.lock held: removes BASE.tar if it was marked in another boot
 * (cache.c: perhaps torn by a crash), unless it is pinned. */
void rf__cache_drop_unsynced(rf_cache *c, const char *base);
int rf__cache_lock_fetch(rf_cache *c, const char *base, int *fd);

/* Room for size bytes: 1 with a temporary file of that size, open for
 * writing in *fd, its path in tmp (RF__CACHE_PATH bytes); 0 when pinned
 * shards leave no room now; RF_E_LIMIT when size is over the limit itself;
 * another negative RF_E_* on a system error (reason in err). */
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
/* Reads BASE.idx: 1 with a malloc'd copy in *p, *n; 0 when absent. */
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

/* Bytes of every file in the folder now, or RF_E_IO when it cannot be
 * listed. */
int64_t rf__cache_usage(rf_cache *c);

/* 1 when the folder holds a kept index (BASE.idx) of any shard, or cannot
 * be listed; 0 when it holds none: then no shard has one. */
int rf__cache_has_index(rf_cache *c);

#endif
