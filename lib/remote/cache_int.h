/*
 * cache_int.h - what the cache's two files share: cache.c (the folder,
 * names, pins, commits, indexes) and cache_room.c (the listing: names of
 * the cache's own form, room, eviction, the loaders' leases). Nothing else
 * includes it; cache.h says how the whole works.
 */
#ifndef RF_CACHE_INT_H
#define RF_CACHE_INT_H

#include "cache.h"

/* DIR/.lock, exclusive, for this process's threads too (cache.c). 0, or -1
 * (errno) with neither held. */
int rf__cache_dir_lock(rf_cache *c);
void rf__cache_dir_unlock(rf_cache *c);

/* Closes fd, ending first any flock it may hold (cache.c). */
void rf__cache_unlock_close(int fd);

/* Opens the folder's file name (flags: O_RDONLY / O_RDWR, O_CREAT, O_EXCL;
 * O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC added, created 0600) and checks it is
 * a regular file of this user's: the descriptor, or -1 with errno (ELOOP
 * for a symbolic link, EINVAL not a regular file, EPERM another user's)
 * and the reason to print in why (may be NULL). */
int rf__cache_open_file(const rf_cache *c, const char *name, int flags, char *why, size_t whycap);

/* rf__cache_reserve for a temporary file "BASE.SUFFIX.PID.N" ("tmp": a
 * shard's, marked as not synced where the folder keeps marks; "itmp": an
 * index's). */
int rf__cache_reserve_as(rf_cache *c, const char *base, const char *suffix, uint64_t size,
                         char *tmp, int *fd, char *err, size_t errcap);

/* The leaf of a BASE or path in the folder: what *at() calls take. */
const char *rf__cache_leaf(const char *path);

#endif
