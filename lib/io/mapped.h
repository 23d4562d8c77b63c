/*
 * mapped.h - byte ranges of local files read in place, without a copy, when
 * they are already in memory.
 *
 * A shard (tar, record file) that the page cache holds is read fastest by
 * not reading it: each file is mapped read-only once, whole, and a range
 * whose pages are all resident (mincore) is handed out as a pointer into
 * the mapping. A range that is not resident gets NULL, and the caller reads
 * it with the reader (reader.h), which warms the cache without blocking a
 * decode worker on the disk; so does every range of a file that cannot be
 * mapped (not a regular file, too many mappings, a 32-bit address space)
 * or whose residency this process may not see (Linux reports the page cache
 * of a file only to its owner or to who may write it; otherwise the file is
 * left to the reader).
 *
 * Each range is checked against the file's size as it is now (a mapped
 * file keeps its descriptor: at most a quarter of the process's, 4096 at
 * most; files past those are left to the reader): a file shortened after it
 * was mapped sends the ranges past its new end to the reader, which reports
 * the short read. Only a shortening in the moment between the check and the
 * decode can still fault (SIGBUS): RF_P_MAP_SHARDS = 0 reads everything
 * through the reader.
 *
 * One rf_maps is used by one thread; the pointers it hands out stay valid
 * for any thread until rf__maps_destroy.
 */
#ifndef RF_MAPPED_H
#define RF_MAPPED_H

#include <stdint.h>

typedef struct rf_maps rf_maps;

/* A new table, or NULL (no memory). */
rf_maps *rf__maps_create(void);
/* Unmaps every file: no pointer handed out may be used after this. */
void rf__maps_destroy(rf_maps *m);

/* The bytes [off, off + len) of the file at path (the caller's string: its
 * address names the file, and it must live as long as m) when every page of
 * them is in memory now; NULL when they are to be read instead. */
const uint8_t *rf__maps_resident(rf_maps *m, const char *path, uint64_t off, uint64_t len);

/* How many ranges were handed out in place, and how many went to the reader
 * (for the stats). */
void rf__maps_counts(const rf_maps *m, uint64_t *in_place, uint64_t *read);

#endif
