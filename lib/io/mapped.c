/*
 * mapped.c - resident ranges of local files read in place (mapped.h).
 *
 * The table is keyed by the address of the caller's path string (a
 * source's shard paths live in its arena for the loader's life): open
 * addressing, linear probing, grown at half load. A file is looked at once:
 * mapped whole (PROT_READ, MAP_SHARED: the page cache's own pages, no copy)
 * or marked to be left to the reader. A mapped file keeps its descriptor,
 * so that each range is checked against the file's size now (fstat) before
 * mincore says whether each of its pages is in memory, a megabyte of pages
 * at a time. At most a quarter of the process's descriptors (4096 at most)
 * are held so: the files past that are left to the reader.
 */
#define _GNU_SOURCE
#include "mapped.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct map_entry {
    const char *path;    /* NULL: an empty cell */
    const uint8_t *base; /* NULL: the file is left to the reader */
    uint64_t size;       /* of the mapping */
    int fd;              /* kept open while mapped: its size is checked per range */
} map_entry;

struct rf_maps {
    map_entry *cell;
    size_t cap, used; /* cap: a power of two */
    size_t mapped, max_mapped; /* files mapped (each holds a descriptor), and the most */
    uint64_t page;
    _Atomic uint64_t in_place, read; /* written by the owner, read by any thread */
};

enum { VEC_PAGES = 256 }; /* mincore's answer for this many pages at a time */

rf_maps *rf__maps_create(void)
{
    rf_maps *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->cap = 64;
    m->cell = calloc(m->cap, sizeof *m->cell);
    long pg = sysconf(_SC_PAGESIZE);
    m->page = pg > 0 ? (uint64_t)pg : 4096;
    /* a quarter of the descriptors this process may open, at most 4096: the
     * rest stay for the reader, the cache and the caller */
    struct rlimit rl;
    rlim_t fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    m->max_mapped = fds == RLIM_INFINITY || fds / 4 > 4096 ? 4096 : (size_t)(fds / 4);
    if (!m->cell) {
        free(m);
        return NULL;
    }
    return m;
}

void rf__maps_destroy(rf_maps *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->cap; i++)
        if (m->cell[i].base) {
            munmap((void *)m->cell[i].base, (size_t)m->cell[i].size);
            close(m->cell[i].fd);
        }
    free(m->cell);
    free(m);
}

void rf__maps_counts(const rf_maps *m, uint64_t *in_place, uint64_t *read)
{
    *in_place = m ? atomic_load_explicit(&m->in_place, memory_order_relaxed) : 0;
    *read = m ? atomic_load_explicit(&m->read, memory_order_relaxed) : 0;
}

static size_t slot_of(const rf_maps *m, const char *path)
{
    uint64_t h = (uint64_t)(uintptr_t)path * UINT64_C(0x9e3779b97f4a7c15);
    return (size_t)(h >> 32) & (m->cap - 1);
}

/* The cell of path, or the empty cell where it goes. */
static map_entry *find(rf_maps *m, const char *path)
{
    size_t i = slot_of(m, path);
    while (m->cell[i].path && m->cell[i].path != path)
        i = (i + 1) & (m->cap - 1);
    return &m->cell[i];
}

/* Doubles the table; 0, or -1 (no memory: the table stays as it was). */
static int grow(rf_maps *m)
{
    map_entry *old = m->cell;
    size_t ocap = m->cap;
    map_entry *cell = calloc(ocap * 2, sizeof *cell);
    if (!cell)
        return -1;
    m->cell = cell;
    m->cap = ocap * 2;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].path)
            *find(m, old[i].path) = old[i];
    free(old);
    return 0;
}

/* Whether this process sees the page cache of the file (Linux's mincore
 * reports it to the file's owner, to a process with CAP_FOWNER, and to who
 * may write the file; to others only the pages they have mapped). */
static int residency_visible(const char *path, const struct stat *st)
{
    uid_t me = geteuid();
    return me == 0 || st->st_uid == me || faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0;
}

/* Maps the file at path into e (e->base stays NULL when it is left to the
 * reader). */
static void map_file(rf_maps *m, map_entry *e, const char *path)
{
    e->fd = -1;
    if (sizeof(void *) < 8 || m->mapped >= m->max_mapped)
        return; /* shards would use up the address space, or the descriptors */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size <= SIZE_MAX && residency_visible(path, &st)) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            e->base = p;
            e->size = (uint64_t)st.st_size;
            e->fd = fd;
            m->mapped++;
            return;
        }
    }
    close(fd);
}

/* 1 when every page of [p, p + len) is in memory. */
static int resident(const rf_maps *m, const uint8_t *p, uint64_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(m->page - 1);
    uintptr_t end = (uintptr_t)p + len;
    unsigned char vec[VEC_PAGES];
    while (a < end) {
        uint64_t n = (end - a + m->page - 1) / m->page;
        if (n > VEC_PAGES)
            n = VEC_PAGES;
        if (mincore((void *)a, (size_t)(n * m->page), vec) != 0)
            return 0;
        for (uint64_t k = 0; k < n; k++)
            if (!(vec[k] & 1))
                return 0;
        a += n * m->page;
    }
    return 1;
}

const uint8_t *rf__maps_resident(rf_maps *m, const char *path, uint64_t off, uint64_t len)
{
    if (!m || !path || len == 0)
        return NULL;
    map_entry *e = find(m, path);
    if (!e->path) {
        if (2 * (m->used + 1) > m->cap) {
            if (grow(m) != 0)
                return NULL;
            e = find(m, path);
        }
        e->path = path;
        m->used++;
        map_file(m, e, path);
    }
    const uint8_t *p = e->base && off <= e->size && len <= e->size - off ? e->base + off : NULL;
    /* the file as it is now: a page cut short keeps its head in memory, and
     * its tail would read as zeros */
    struct stat st;
    if (p && (fstat(e->fd, &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size < off + len))
        p = NULL;
    if (p && !resident(m, p, len))
        p = NULL;
    _Atomic uint64_t *c = p ? &m->in_place : &m->read;
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    return p;
}
