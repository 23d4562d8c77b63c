/*
 * cache_room.c - the cache folder's room: which names are the cache's own,
 * the count of the folder's bytes, eviction, the loaders' leases (see
 * cache.h for the rules; cache.c for the files themselves).
 *
 * The count lists the folder under DIR/.lock and adds up the sizes of the
 * regular files in it: shards, indexes, transfers in progress (sized in
 * full when they start), the loaders' small files, and files the cache did
 * not make (links and subfolders are not followed: they count nothing). On
 * disk a file takes up to one block more than its size. Only names of the cache's exact form are ever
 * touched: BASE.tar, BASE.idx, BASE.lock, BASE.tmp.P.N, BASE.itmp.P.N with
 * BASE 32 lowercase hex digits, .use.P.N and .probe.P.N (P, N decimal), and
 * .lock, .starved; and only when they are regular files of this user's.
 * Any other file (my-own-dataset.tar, notes.tmp.txt, a link, a folder) is
 * foreign: counted, never opened, renamed or removed.
 *
 * A transfer file (BASE.tmp.* or BASE.itmp.*) is held with an exclusive
 * flock by its writer from its creation (under DIR/.lock) until it is
 * renamed or removed; one that the listing can lock without waiting has no
 * writer any more (a crash: the kernel dropped the lock) and is removed on
 * the way, so a crash leaves no room taken for ever. A lease (.use.P.N),
 * likewise, is held by a live loader, and lists the versions it uses. A
 * flock, unlike a process id, means the same in every PID namespace, so
 * loaders in containers that share the folder never take each other's live
 * files for stale ones.
 *
 * Room for a file: unpinned shards are evicted, least recently pinned
 * first, each with its BASE.lock when nobody holds it (cache.c holds a
 * lock only while its name is still the file locked). What no unpin can
 * free is kept: foreign files, the loaders' small files and the indexes.
 * When the kept bytes leave no room for the file, the indexes of versions
 * no live loader uses go, least recently written first (never one a live
 * loader's lease names: evicting the indexes another rank was about to read
 * once made it fetch shards to walk them while its peer's pins held the
 * room, and both stopped). If even then the kept bytes leave no room,
 * waiting for pins would never end: the caller gets an error that names
 * what fills the folder. Otherwise pinned shards fill the rest, and the
 * caller waits for an unpin.
 */
#define _GNU_SOURCE
#include "cache_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "ringfeed.h"

/* ---- names ---------------------------------------------------------------------- */

enum { K_FOREIGN, K_META, K_USE, K_PROBE, K_TAR, K_IDX, K_LOCK, K_TMP, K_ITMP };

#define HEX (2 * RF__CACHE_ID)
#define USE_MAGIC "ringfeed-use 1\n"

/* 1 when s starts with HEX lowercase hex digits (their bytes in id). */
static int hex_id(const char *s, uint8_t *id)
{
    for (int i = 0; i < HEX; i++) {
        int ch = (unsigned char)s[i];
        int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (v < 0)
            return 0;
        id[i / 2] = (uint8_t)(i % 2 ? id[i / 2] | v : v << 4);
    }
    return 1;
}

/* 1 when s is exactly ".P.N", two decimal numbers of 1 to 10 digits. */
static int pid_seq(const char *s)
{
    for (int part = 0; part < 2; part++) {
        if (*s++ != '.')
            return 0;
        int n = 0;
        while (*s >= '0' && *s <= '9' && n <= 10) {
            s++;
            n++;
        }
        if (n == 0 || n > 10)
            return 0;
    }
    return *s == '\0';
}

/* What a name is, by its exact form (see above); a version's id in id. */
static int name_kind(const char *name, uint8_t *id)
{
    if (!strcmp(name, ".lock") || !strcmp(name, ".starved"))
        return K_META;
    if (!strncmp(name, ".use", 4) && pid_seq(name + 4))
        return K_USE;
    if (!strncmp(name, ".probe", 6) && pid_seq(name + 6))
        return K_PROBE;
    if (strnlen(name, HEX) < HEX || !hex_id(name, id))
        return K_FOREIGN;
    const char *t = name + HEX;
    return !strcmp(t, ".tar")                          ? K_TAR
           : !strcmp(t, ".idx")                        ? K_IDX
           : !strcmp(t, ".lock")                       ? K_LOCK
           : !strncmp(t, ".tmp", 4) && pid_seq(t + 4)   ? K_TMP
           : !strncmp(t, ".itmp", 5) && pid_seq(t + 5) ? K_ITMP
                                                       : K_FOREIGN;
}

static int cmp_id(const void *a, const void *b)
{
    return memcmp(a, b, RF__CACHE_ID);
}

/* ---- the listing ------------------------------------------------------------------ */

/* A shard, index or lock the cache may evict. */
typedef struct entry {
    char name[HEX + 8];
    uint8_t id[RF__CACHE_ID];
    int kind, gone;
    uint64_t bytes;
    struct timespec mtime;
} entry;

typedef struct listing {
    uint64_t used;     /* every file */
    uint64_t foreign;  /* files the cache did not make */
    uint64_t nforeign;
    char big[3][80];   /* the largest of them, largest first, for a message */
    uint64_t bigb[3];
    uint64_t meta;     /* .lock, .starved, the live leases */
    uint64_t idx;      /* kept indexes */
    int loaders;       /* live leases */
    entry *e;          /* (with entries) shards, indexes, locks */
    size_t n, cap;
    char (*lease)[32]; /* the live leases' names */
    size_t nlease, leasecap;
} listing;

static void listing_free(listing *L)
{
    free(L->e);
    free(L->lease);
}

/* Under DIR/.lock: removes the folder's file `name` (a transfer, a lease, a
 * probe) when nobody holds its lock (see above); 1 when removed. */
static int remove_stale(rf_cache *c, const char *name)
{
    int f = rf__cache_open_file(c, name, O_RDONLY, NULL, 0);
    if (f < 0)
        return 0;
    int gone = flock(f, LOCK_EX | LOCK_NB) == 0 && unlinkat(c->dir_fd, name, 0) == 0;
    rf__cache_unlock_close(f); /* locked even when the unlink failed */
    return gone;
}

/* A foreign file, kept among the three largest for a message (its name
 * with control bytes shown as '?'). */
static void note_foreign(listing *L, const char *name, uint64_t b)
{
    L->foreign += b;
    L->nforeign++;
    int at = 0;
    while (at < 3 && L->bigb[at] >= b)
        at++;
    if (at == 3)
        return;
    for (int i = 2; i > at; i--) {
        L->bigb[i] = L->bigb[i - 1];
        memcpy(L->big[i], L->big[i - 1], sizeof L->big[i]);
    }
    snprintf(L->big[at], sizeof L->big[at], "%.79s", name);
    for (char *s = L->big[at]; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
    L->bigb[at] = b;
}

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    void *np = realloc(*p, nc * size);
    if (!np)
        return -1;
    *p = np;
    *cap = nc;
    return 0;
}

/* Under DIR/.lock: lists the folder into L (with entries: the evictable
 * files too). 0, or -1 (errno) when the folder cannot be listed: then
 * nothing is known, and no room may be granted. */
static int measure(rf_cache *c, listing *L, int entries)
{
    memset(L, 0, sizeof *L);
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
    struct dirent *de;
    int rc = 0;
    for (;;) {
        errno = 0;
        if ((de = readdir(d)) == NULL) {
            rc = errno ? -1 : 0;
            break;
        }
        const char *name = de->d_name;
        if (!strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        struct stat st;
        if (fstatat(c->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT)
                continue; /* removed since the listing */
            rc = -1;
            break;
        }
        uint8_t id[RF__CACHE_ID];
        int k = name_kind(name, id);
        if (k != K_FOREIGN && (!S_ISREG(st.st_mode) || st.st_uid != c->uid))
            k = K_FOREIGN; /* a link, a folder, another user's file at such a name */
        if ((k == K_TMP || k == K_ITMP || k == K_USE || k == K_PROBE) && remove_stale(c, name))
            continue;
        uint64_t b = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
        L->used += b;
        if (k == K_FOREIGN) {
            note_foreign(L, name, b);
            continue;
        }
        if (k == K_META || k == K_USE)
            L->meta += b;
        if (k == K_IDX)
            L->idx += b;
        if (k == K_USE) {
            L->loaders++;
            if (L->nlease == SIZE_MAX)
                ; /* one was not kept already */
            else if (grow((void **)&L->lease, &L->leasecap, L->nlease, sizeof *L->lease) == 0)
                snprintf(L->lease[L->nlease++], sizeof *L->lease, "%.31s", name);
            else
                L->nlease = SIZE_MAX; /* unknown: every version counts as in use */
        }
        if (!entries || (k != K_TAR && k != K_IDX && k != K_LOCK))
            continue;
        if (grow((void **)&L->e, &L->cap, L->n, sizeof *L->e) != 0)
            continue; /* fewer candidates: less eviction, never more bytes */
        entry *e = &L->e[L->n++];
        snprintf(e->name, sizeof e->name, "%.39s", name);
        memcpy(e->id, id, sizeof e->id);
        e->kind = k;
        e->gone = 0;
        e->bytes = b;
        e->mtime = st.st_mtim;
    }
    int err = errno;
    closedir(d);
    atomic_store_explicit(&c->foreign_bytes, (int64_t)L->foreign, memory_order_relaxed);
    atomic_store_explicit(&c->loaders, L->loaders, memory_order_relaxed);
    errno = err;
    return rc;
}

int64_t rf__cache_usage(rf_cache *c)
{
    /* DIR/.lock: the listing removes stale files (see above) */
    if (rf__cache_dir_lock(c) != 0)
        return RF_E_IO;
    listing L;
    int rc = measure(c, &L, 0);
    rf__cache_dir_unlock(c);
    listing_free(&L);
    return rc == 0 ? (int64_t)L.used : RF_E_IO;
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
    uint8_t id[RF__CACHE_ID];
    while (!found && (e = readdir(d)) != NULL)
        found = name_kind(e->d_name, id) == K_IDX;
    closedir(d);
    return found;
}

/* ---- eviction --------------------------------------------------------------------- */

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Under DIR/.lock: removes the version's BASE.lock when nobody holds it. */
static void drop_lock(rf_cache *c, const uint8_t *id)
{
    char name[HEX + 8];
    for (int i = 0; i < RF__CACHE_ID; i++)
        snprintf(name + 2 * i, 3, "%02x", id[i]);
    strcat(name, ".lock");
    remove_stale(c, name);
}

/* Under DIR/.lock: evicts unpinned shards, least recently pinned first,
 * until need more bytes fit (L: sorted entries). */
static void evict_shards(rf_cache *c, listing *L, uint64_t need)
{
    for (size_t i = 0; i < L->n && L->used + need > c->limit; i++) {
        entry *e = &L->e[i];
        if (e->kind != K_TAR)
            continue;
        int f = rf__cache_open_file(c, e->name, O_RDONLY, NULL, 0);
        if (f < 0)
            continue;
        /* without waiting: a shared lock means some loader has it pinned */
        if (flock(f, LOCK_EX | LOCK_NB) == 0 && unlinkat(c->dir_fd, e->name, 0) == 0) {
            L->used = L->used > e->bytes ? L->used - e->bytes : 0;
            e->gone = 1;
            atomic_fetch_add_explicit(&c->evictions, 1, memory_order_relaxed);
            drop_lock(c, e->id);
        }
        rf__cache_unlock_close(f); /* locked even when the unlink failed */
    }
}

/* Under DIR/.lock, after evict_shards: removes the BASE.lock files nobody
 * holds of versions whose shard is not in the folder (a lock is the
 * cache's only while it is held: see above). */
static void drop_orphan_locks(rf_cache *c, const listing *L)
{
    uint8_t(*t)[RF__CACHE_ID] = malloc((L->n ? L->n : 1) * RF__CACHE_ID);
    if (!t)
        return;
    size_t nt = 0;
    for (size_t i = 0; i < L->n; i++)
        if (L->e[i].kind == K_TAR && !L->e[i].gone)
            memcpy(t[nt++], L->e[i].id, RF__CACHE_ID);
    qsort(t, nt, RF__CACHE_ID, cmp_id);
    for (size_t i = 0; i < L->n; i++)
        if (L->e[i].kind == K_LOCK && !bsearch(L->e[i].id, t, nt, RF__CACHE_ID, cmp_id))
            remove_stale(c, L->e[i].name);
    free(t);
}

/* The versions the live leases name (see above), and this object's own:
 * sorted id lists, one per lease; *all set when one cannot be read (then
 * every version counts as in use). */
typedef struct leases {
    uint8_t (**ids)[RF__CACHE_ID];
    size_t *n, count;
    int all;
} leases;

static void leases_free(leases *u)
{
    for (size_t i = 0; i < u->count; i++)
        free(u->ids[i]);
    free(u->ids);
    free(u->n);
}

/* Reads lease `name` (sorted ids after USE_MAGIC) into *ids: its count, or
 * -1 when it is not one. */
static int64_t read_lease(rf_cache *c, const char *name, uint8_t (**ids)[RF__CACHE_ID])
{
    int f = rf__cache_open_file(c, name, O_RDONLY, NULL, 0);
    struct stat st;
    int64_t n = -1;
    size_t m = sizeof USE_MAGIC - 1;
    if (f >= 0 && fstat(f, &st) == 0 && (uint64_t)st.st_size >= m &&
        (uint64_t)st.st_size - m <= (uint64_t)RF__CACHE_MAX_INDEX &&
        ((uint64_t)st.st_size - m) % RF__CACHE_ID == 0) {
        size_t len = (size_t)st.st_size;
        char *buf = malloc(len ? len : 1);
        if (buf && pread(f, buf, len, 0) == (ssize_t)len && !memcmp(buf, USE_MAGIC, m)) {
            n = (int64_t)((len - m) / RF__CACHE_ID);
            memmove(buf, buf + m, len - m);
            *ids = (uint8_t (*)[RF__CACHE_ID])buf;
            buf = NULL;
        }
        free(buf);
    }
    if (f >= 0)
        close(f);
    return n;
}

static void leases_load(rf_cache *c, const listing *L, leases *u)
{
    memset(u, 0, sizeof *u);
    u->all = L->nlease == SIZE_MAX;
    size_t want = u->all ? 0 : L->nlease + 1;
    u->ids = calloc(want ? want : 1, sizeof *u->ids);
    u->n = calloc(want ? want : 1, sizeof *u->n);
    if (!u->ids || !u->n) {
        u->all = 1;
        return;
    }
    if (want) { /* this object's own, whether or not its lease file was written */
        u->n[0] = c->nuse;
        u->ids[0] = NULL;
        u->count = 1;
    }
    for (size_t i = 0; !u->all && i < L->nlease; i++) {
        int64_t n = read_lease(c, L->lease[i], &u->ids[u->count]);
        if (n < 0 && errno != ENOENT)
            u->all = 1; /* a live lease unread: nothing may be taken for unused */
        if (n >= 0)
            u->n[u->count++] = (size_t)n;
    }
}

static int in_use(const rf_cache *c, const leases *u, const uint8_t *id)
{
    if (u->all)
        return 1;
    for (size_t i = 0; i < u->count; i++) {
        const void *set = i == 0 ? (const void *)c->use : (const void *)u->ids[i];
        if (u->n[i] && bsearch(id, set, u->n[i], RF__CACHE_ID, cmp_id))
            return 1;
    }
    return 0;
}

/* Under DIR/.lock: evicts the indexes (and locks) of versions no live
 * loader uses, least recently written first, while *keep + need is over the
 * limit. */
static void evict_indexes(rf_cache *c, listing *L, uint64_t need, uint64_t *keep)
{
    leases u;
    leases_load(c, L, &u);
    for (size_t i = 0; i < L->n && *keep + need > c->limit; i++) {
        entry *e = &L->e[i];
        if (e->kind != K_IDX || in_use(c, &u, e->id))
            continue;
        /* no lock: a reader holds its copy open, and reads it whole */
        if (unlinkat(c->dir_fd, e->name, 0) == 0) {
            L->used = L->used > e->bytes ? L->used - e->bytes : 0;
            L->idx -= e->bytes;
            *keep -= e->bytes;
            e->gone = 1;
            drop_lock(c, e->id);
        }
    }
    leases_free(&u);
}

/* The error when what the cache keeps leaves no room for need bytes. */
static void no_room(const rf_cache *c, const listing *L, uint64_t need, char *err, size_t errcap)
{
    int n = snprintf(err, errcap,
                     "cache: no room for %llu bytes in %.200s under cache_limit=%llu, and none will "
                     "come:",
                     (unsigned long long)need, c->dir, (unsigned long long)c->limit);
#define MORE(...)                                                                          \
    do {                                                                                   \
        if (n >= 0 && (size_t)n < errcap)                                                  \
            n += snprintf(err + n, errcap - (size_t)n, __VA_ARGS__);                       \
    } while (0)
    if (L->foreign) {
        MORE(" %llu bytes in %llu files the cache did not make, which it never deletes (",
             (unsigned long long)L->foreign, (unsigned long long)L->nforeign);
        for (int i = 0; i < 3 && L->bigb[i]; i++)
            MORE("%s%.80s: %llu bytes", i ? ", " : "", L->big[i], (unsigned long long)L->bigb[i]);
        MORE("%s);", L->nforeign > 3 ? ", ..." : "");
    }
    if (L->idx)
        MORE(" %llu bytes of kept indexes of shards that live loaders use;",
             (unsigned long long)L->idx);
    if (L->meta)
        MORE(" %llu bytes of its own lock and lease files;", (unsigned long long)L->meta);
    MORE(" give the cache a folder of its own (cache_dir) or raise cache_limit");
#undef MORE
}

/* Under DIR/.lock: room for now bytes (see above), while the bytes kept
 * also leave room for later more. 1 when now fits, 0 when pinned shards
 * fill the rest (wait for an unpin), -2 when the kept bytes leave no room
 * (err says what they are), -1 (errno) when the folder cannot be listed. */
static int make_room(rf_cache *c, uint64_t now, uint64_t later, char *err, size_t errcap)
{
    listing L;
    if (measure(c, &L, 1) != 0) {
        int e = errno;
        listing_free(&L);
        errno = e;
        return -1;
    }
    int rc = 1;
    uint64_t keep = L.foreign + L.meta + L.idx; /* what no unpin frees */
    if (L.used + now > c->limit || keep + now + later > c->limit) {
        qsort(L.e, L.n, sizeof *L.e, cmp_entry);
        evict_shards(c, &L, now);
        drop_orphan_locks(c, &L);
        if (keep + now + later > c->limit)
            evict_indexes(c, &L, now + later, &keep);
        rc = keep + now + later > c->limit ? -2 : L.used + now <= c->limit ? 1 : 0;
        if (rc == -2)
            no_room(c, &L, now + later, err, errcap);
    }
    listing_free(&L);
    return rc;
}

/* ---- room for a file --------------------------------------------------------------- */

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

int rf__cache_reserve_as(rf_cache *c, const char *base, const char *suffix, uint64_t size,
                         char *tmp, int *fd, char *err, size_t errcap)
{
    uint64_t need = size;
    if (need > c->limit) {
        snprintf(err, errcap, "cache: %llu bytes do not fit cache_limit=%llu (%.200s)",
                 (unsigned long long)size, (unsigned long long)c->limit, c->dir);
        return RF_E_LIMIT;
    }
    /* DIR/.lock: the count and the room taken change together */
    if (rf__cache_dir_lock(c) != 0) {
        snprintf(err, errcap, "cache: %.200s/.lock: %s", c->dir, strerror(errno));
        return RF_E_IO;
    }
    int rc = make_room(c, need, 0, err, errcap);
    if (rc == -1) {
        snprintf(err, errcap, "cache: listing %.200s: %s (no room is granted unmeasured)", c->dir,
                 strerror(errno));
        rc = RF_E_IO;
    } else if (rc == -2) {
        rc = RF_E_LIMIT;
    } else if (rc == 1) {
        unsigned n = atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed);
        snprintf(tmp, RF__CACHE_PATH, "%s.%s.%d.%u", base, suffix, (int)getpid(), n);
        char why[160];
        int f = rf__cache_open_file(c, rf__cache_leaf(tmp), O_RDWR | O_CREAT | O_EXCL, why,
                                    sizeof why);
        /* locked before DIR/.lock is let go: no listing ever sees it unlocked
         * while it is written (see above); a shard's marked as not synced */
        int mark = c->marks && !strcmp(suffix, "tmp");
        if (f >= 0 && (flock(f, LOCK_EX | LOCK_NB) != 0 ||
                       (mark && fsetxattr(f, RF__CACHE_MARK, c->boot, strlen(c->boot), 0) != 0) ||
                       take_blocks(f, size) != 0))
            snprintf(why, sizeof why, "%s", strerror(errno));
        else if (f >= 0)
            why[0] = '\0';
        if (f < 0 || why[0]) {
            snprintf(err, errcap, "cache: %s: %s", tmp, why);
            if (f >= 0) {
                unlinkat(c->dir_fd, rf__cache_leaf(tmp), 0); /* under our lock: no listing
                                                              * takes it for stale first */
                rf__cache_unlock_close(f);
            }
            rc = RF_E_IO;
        } else {
            *fd = f;
        }
    }
    rf__cache_dir_unlock(c);
    return rc;
}

int rf__cache_reserve(rf_cache *c, const char *base, uint64_t size, char *tmp, int *fd, char *err,
                      size_t errcap)
{
    return rf__cache_reserve_as(c, base, "tmp", size, tmp, fd, err, errcap);
}

/* ---- the lease ---------------------------------------------------------------------- */

int rf__cache_lease(rf_cache *c, const uint8_t *ids, size_t n, uint64_t largest, char *err,
                    size_t errcap)
{
    if (c->lease_fd >= 0 || c->use)
        return 0; /* once */
    size_t m = sizeof USE_MAGIC - 1;
    uint8_t *buf = malloc(m + n * RF__CACHE_ID + 1);
    if (!buf)
        return RF_E_NOMEM;
    memcpy(buf, USE_MAGIC, m);
    uint8_t(*use)[RF__CACHE_ID] = (uint8_t (*)[RF__CACHE_ID])(buf + m);
    memcpy(use, ids, n * RF__CACHE_ID);
    qsort(use, n, RF__CACHE_ID, cmp_id);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || memcmp(use[k - 1], use[i], RF__CACHE_ID))
            memmove(use[k++], use[i], RF__CACHE_ID);
    size_t len = m + k * RF__CACHE_ID;
    uint8_t(*own)[RF__CACHE_ID] = malloc(k ? k * RF__CACHE_ID : 1);
    if (!own) {
        free(buf);
        return RF_E_NOMEM;
    }
    memcpy(own, use, k * RF__CACHE_ID);
    if (rf__cache_dir_lock(c) != 0) {
        snprintf(err, errcap, "cache: %.200s/.lock: %s", c->dir, strerror(errno));
        free(own);
        free(buf);
        return RF_E_IO;
    }
    c->use = own; /* under DIR/.lock, where the evictors of this object read it */
    c->nuse = k;
    /* room for the lease now, and for the largest shard once pins allow:
     * a folder whose kept bytes leave none fails the start, saying why,
     * rather than wait for ever (with every index kept, at the first batch) */
    int rc = make_room(c, len, largest, err, errcap);
    char name[64], why[160];
    /* one process, many loaders: a counter of the process's, not c's */
    static _Atomic unsigned leases; /* names: a counter, nothing to pair with */
    unsigned seq = atomic_fetch_add_explicit(&leases, 1, memory_order_relaxed);
    snprintf(name, sizeof name, ".use.%d.%u", (int)getpid(), seq);
    int f = -1;
    if (rc == -1) {
        snprintf(err, errcap, "cache: listing %.200s: %s", c->dir, strerror(errno));
    } else if (rc == -2) {
        /* err says what fills the folder */
    } else if ((f = rf__cache_open_file(c, name, O_RDWR | O_CREAT | O_EXCL, why, sizeof why)) <
                   0 ||
               flock(f, LOCK_EX | LOCK_NB) != 0 || pwrite(f, buf, len, 0) != (ssize_t)len) {
        /* (with pins filling the folder, written all the same: a block
         * over the limit until one ends, rather than indexes unprotected) */
        snprintf(err, errcap, "cache: %.200s/%s: %s", c->dir, name, f < 0 ? why : strerror(errno));
        if (f >= 0) {
            unlinkat(c->dir_fd, name, 0);
            rf__cache_unlock_close(f);
            f = -1;
        }
        rc = -1;
    }
    rf__cache_dir_unlock(c);
    free(buf);
    if (f < 0)
        return rc == -2 ? RF_E_LIMIT : RF_E_IO;
    c->lease_fd = f;
    return 0;
}
