/*
 * sizes.c - the pictures' sizes at start (see sizes.h): the manifest's,
 * the kept file's, or a header scan through a reader of its own.
 *
 * The scan keeps `depth` pictures in flight, each in a slot that reads
 * RF__HEADER_FIRST bytes from the picture's start (a whole file: the first
 * bytes of it, the reader's `head`; a tar member: a range of it), asks
 * header_scan.c, and reads again where that says (appending, or from a JPEG
 * marker past a long segment), at most RF__HEADER_ROUNDS times. Remote
 * shards are scanned one after the other, each pinned in the cache while
 * its members are read through the pin (the shards wanted all at once, in
 * order, fetched as the cache's room allows, as the indexer does).
 *
 * The kept file: "ringfeed-sizes 1\n", the sample count (8 bytes), then
 * width and height (4 bytes each) per sample. Read back only when it is
 * exactly that long for this many samples; its values are sizes to bucket
 * by, never lengths to allocate by, so a damaged one costs buckets, not
 * memory.
 */
#define _GNU_SOURCE
#include "sizes.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache.h"
#include "clock.h"
#include "header_scan.h"
#include "reader.h"
#include "remote.h"
#include "ringfeed.h"
#include "sha256.h"

#define KEPT_MAGIC "ringfeed-sizes 1\n"

/* ---- the scan -------------------------------------------------------------- */

typedef struct slot {
    rf_read rd;
    int64_t sample;
    uint64_t origin;  /* file offset of the picture's first byte */
    uint64_t total;   /* the picture's bytes (a whole file: learned by its first read) */
    uint64_t base;    /* picture offset of acc[0] */
    uint64_t reading; /* picture offset of the read in flight */
    uint8_t *acc;
    size_t acc_len, acc_cap;
    int rounds;
} slot;

typedef struct scan {
    const rf_source *src;
    uint32_t *dims;
    rf_reader *r;
    slot *slots;
    int nslots;
    int *idle, nidle; /* slots without a read */
    int *wait, nwait; /* slots whose read the reader could not take yet */
    int fd;           /* remote: the pinned shard; -1: by path */
    rf_sizes_stats *st;
} scan;

static void note_error(scan *sc, int64_t sample, const char *why)
{
    if (sc->st->first_error[0])
        return;
    char name[300];
    rf__source_name(sc->src, sample, name, sizeof name);
    snprintf(sc->st->first_error, sizeof sc->st->first_error, "%.250s: %.140s", name, why);
}

/* Sets up slot k's read of the picture from offset off (its first when off
 * is 0 and the size is not known). */
static void prepare_read(scan *sc, slot *s, uint64_t off)
{
    rf_read *rd = &s->rd;
    const rf_source *src = sc->src;
    rd->path = rf__source_read_path(src, s->sample);
    rd->use_fd = sc->fd >= 0;
    rd->fd = sc->fd;
    rd->sample = s->sample;
    rd->user = s;
    s->reading = off;
    if (s->total == 0 && off == 0) { /* a file of its own, size unknown */
        rd->ranged = 0;
        rd->head = RF__HEADER_FIRST;
        return;
    }
    uint64_t left = s->total - off;
    rd->ranged = 1;
    rd->head = 0;
    rd->offset = s->origin + off;
    rd->length = left < RF__HEADER_FIRST ? left : RF__HEADER_FIRST;
}

static void submit(scan *sc, int k)
{
    if (rf__reader_submit(sc->r, &sc->slots[k].rd) != 0)
        sc->wait[sc->nwait++] = k; /* busy closing files: again after a reap */
}

/* A slot's read completed: the size, another read, or an unknown size. */
static void complete(scan *sc, int k)
{
    slot *s = &sc->slots[k];
    rf_read *rd = &s->rd;
    if (rd->err) {
        char why[200];
        snprintf(why, sizeof why, "%s: %s", rd->what, strerror(rd->err));
        note_error(sc, s->sample, why);
        sc->idle[sc->nidle++] = k;
        return;
    }
    if (s->total == 0 && s->reading == 0)
        s->total = rd->size; /* a whole file: now known */
    sc->st->bytes_read += rd->len;
    if (s->acc_len == 0 || s->reading != s->base + s->acc_len) {
        s->base = s->reading; /* anew (a JPEG marker further on) */
        s->acc_len = 0;
    }
    if (s->acc_len + rd->len > s->acc_cap) {
        size_t cap = s->acc_len + rd->len;
        uint8_t *p = realloc(s->acc, cap);
        if (!p) {
            note_error(sc, s->sample, "out of memory");
            sc->idle[sc->nidle++] = k;
            return;
        }
        s->acc = p;
        s->acc_cap = cap;
    }
    memcpy(s->acc + s->acc_len, rd->buf, rd->len);
    s->acc_len += rd->len;
    uint32_t w = 0, h = 0;
    uint64_t next = 0;
    const char *why = "";
    int rc = rd->len == 0
                 ? -1
                 : rf__header_dims(s->acc, s->acc_len, s->base, s->total, &w, &h, &next, &why);
    if (rd->len == 0)
        why = "empty file";
    if (rc == 1) {
        sc->dims[2 * s->sample] = w;
        sc->dims[2 * s->sample + 1] = h;
        sc->st->scanned++;
    } else if (rc == 0 && ++s->rounds < RF__HEADER_ROUNDS && next < s->total) {
        prepare_read(sc, s, next);
        submit(sc, k);
        return;
    } else {
        note_error(sc, s->sample, rc == 0 ? "header not found in its first reads" : why);
    }
    sc->idle[sc->nidle++] = k;
}

/* Scans the samples [lo, hi) whose size is unknown. 0 or RF_E_* (err). */
static int scan_range(scan *sc, int64_t lo, int64_t hi)
{
    const rf_source *src = sc->src;
    int64_t i = lo;
    rf_read *done[64];
    for (;;) {
        int nw = sc->nwait;
        sc->nwait = 0;
        for (int j = 0; j < nw; j++)
            submit(sc, sc->wait[j]);
        while (sc->nidle > 0 && i < hi && sc->nwait == 0) {
            if (sc->dims[2 * i] > 0 && sc->dims[2 * i + 1] > 0) {
                i++;
                continue;
            }
            int k = sc->idle[--sc->nidle];
            slot *s = &sc->slots[k];
            s->sample = i++;
            s->acc_len = 0;
            s->base = 0;
            s->rounds = 0;
            int ranged;
            uint64_t off, len;
            rf__source_extent(src, s->sample, &ranged, &off, &len);
            if (src->kind == RF_SOURCE_TAR) { /* the picture member, not the span of extras */
                off = src->data_off[s->sample];
                len = src->data_len[s->sample];
            }
            s->origin = ranged ? off : 0;
            s->total = ranged ? len : 0;
            if (ranged && len == 0) {
                note_error(sc, s->sample, "empty member");
                sc->idle[sc->nidle++] = k;
                continue;
            }
            prepare_read(sc, s, 0);
            submit(sc, k);
        }
        if (rf__reader_inflight(sc->r) == 0 && sc->nwait == 0 && i >= hi)
            return 0;
        int n = rf__reader_reap(sc->r, done, 64, 1000);
        for (int j = 0; j < n; j++)
            complete(sc, (int)((slot *)done[j]->user - sc->slots));
    }
}

/* Remote shards: each wanted in order, scanned through its pin. */
static int scan_remote(scan *sc, char *err, size_t errcap)
{
    const rf_source *src = sc->src;
    rf_remote *r = src->remote;
    uint32_t n = src->nfiles;
    int64_t *lo = calloc((size_t)n + 1, sizeof *lo), *hi = calloc((size_t)n + 1, sizeof *hi);
    uint8_t *want = calloc((size_t)n + 1, 1);
    if (!lo || !hi || !want) {
        free(lo);
        free(hi);
        free(want);
        snprintf(err, errcap, "sizes: out of memory");
        return RF_E_NOMEM;
    }
    /* a shard's samples are one run of indexes (source_tar.c) */
    for (int64_t i = 0; i < src->n; i++) {
        uint32_t k = src->shard[i];
        if (i == 0 || src->shard[i - 1] != k)
            lo[k] = i;
        hi[k] = i + 1;
    }
    for (int64_t i = 0; i < src->n; i++)
        if (sc->dims[2 * i] == 0 || sc->dims[2 * i + 1] == 0)
            want[src->shard[i]] = 1;
    for (uint32_t k = 0; k < n; k++)
        if (want[k])
            rf__remote_acquire(r, k);
    int rc = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (!want[k])
            continue;
        char why[300];
        if (rc == 0 && rf__remote_wait(r, k, why, sizeof why) == 0) {
            sc->fd = rf__remote_shard_fd(r, k);
            rc = scan_range(sc, lo[k], hi[k]);
            sc->fd = -1;
        } else if (rc == 0) {
            for (int64_t i = lo[k]; i < hi[k]; i++)
                if (sc->dims[2 * i] == 0)
                    note_error(sc, i, why);
        }
        rf__remote_release(r, k);
    }
    free(lo);
    free(hi);
    free(want);
    return rc;
}

static int run_scan(const rf_source *src, const rf_sizes_opts *o, uint32_t *dims,
                    rf_sizes_stats *st, char *err, size_t errcap)
{
    unsigned depth = o->depth ? o->depth : 64;
    scan sc = {.src = src, .dims = dims, .fd = -1, .st = st};
    int rc = rf__reader_create(&sc.r, o->backend, depth);
    if (rc < 0) {
        snprintf(err, errcap, "sizes: cannot set up a reader");
        return RF_E_SYSTEM;
    }
    depth = rf__reader_depth(sc.r);
    sc.nslots = (int)depth;
    sc.slots = calloc(depth, sizeof *sc.slots);
    sc.idle = malloc(depth * sizeof *sc.idle);
    sc.wait = malloc(depth * sizeof *sc.wait);
    if (!sc.slots || !sc.idle || !sc.wait) {
        snprintf(err, errcap, "sizes: out of memory");
        rc = RF_E_NOMEM;
    } else {
        for (int k = 0; k < sc.nslots; k++)
            sc.idle[sc.nidle++] = sc.nslots - 1 - k;
        rc = src->remote ? scan_remote(&sc, err, errcap) : scan_range(&sc, 0, src->n);
    }
    rf__reader_destroy(sc.r);
    for (int k = 0; sc.slots && k < sc.nslots; k++) {
        free(sc.slots[k].rd.buf);
        free(sc.slots[k].acc);
    }
    free(sc.slots);
    free(sc.idle);
    free(sc.wait);
    return rc;
}

/* ---- the kept file ----------------------------------------------------------- */

static void hash_stat(rf_sha256 *h, const char *path)
{
    struct stat st;
    char line[PATH_MAX + 100];
    int n;
    if (stat(path, &st) == 0)
        n = snprintf(line, sizeof line, "%s %lld %lld.%09ld\n", path, (long long)st.st_size,
                     (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    else
        n = snprintf(line, sizeof line, "%s ?\n", path);
    rf__sha256_update(h, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* The data's identity: the source as given (resolved when it is a local
 * path), the index's fingerprint, and what changes when files are added,
 * replaced or renamed: each shard's or record file's size and time (a
 * remote shard's URL, size and validator), a list file's, or the folders
 * of an image folder's samples. */
static void identity(const rf_source *src, const char *spec, char hex[65])
{
    rf_sha256 h;
    rf__sha256_init(&h);
    char real[PATH_MAX], line[200];
    const char *s = spec && realpath(spec, real) ? real : spec ? spec : "";
    rf__sha256_update(&h, KEPT_MAGIC, strlen(KEPT_MAGIC));
    rf__sha256_update(&h, s, strlen(s) + 1);
    int n = snprintf(line, sizeof line, "%d %lld %016llx\n", src->kind, (long long)src->n,
                     (unsigned long long)rf__source_fingerprint(src));
    rf__sha256_update(&h, line, (size_t)n);
    if (src->remote) {
        for (uint32_t k = 0; k < src->nfiles; k++) {
            const char *etag, *url = src->arena + src->file_off[k];
            uint64_t size = rf__remote_shard(src->remote, k, &etag);
            n = snprintf(line, sizeof line, " %llu ", (unsigned long long)size);
            rf__sha256_update(&h, url, strlen(url));
            rf__sha256_update(&h, line, (size_t)n);
            rf__sha256_update(&h, etag, strlen(etag) + 1);
        }
    } else if (src->nfiles > 0) {
        for (uint32_t k = 0; k < src->nfiles; k++)
            hash_stat(&h, src->arena + src->file_off[k]);
    } else if (src->kind == RF_SOURCE_LIST) {
        hash_stat(&h, s);
    } else {
        /* an image folder: each folder of samples once (they come sorted) */
        size_t prev_len = 0;
        const char *prev = NULL;
        for (int64_t i = 0; i < src->n; i++) {
            const char *p = src->arena + src->path_off[i], *slash = strrchr(p, '/');
            size_t len = slash ? (size_t)(slash - p) : 0;
            if (prev && len == prev_len && !memcmp(p, prev, len))
                continue;
            char dir[PATH_MAX];
            snprintf(dir, sizeof dir, "%.*s", (int)(len < sizeof dir ? len : sizeof dir - 1), p);
            hash_stat(&h, len ? dir : ".");
            prev = p;
            prev_len = len;
        }
    }
    uint8_t d[32];
    rf__sha256_final(&h, d);
    rf__sha256_hex(d, 32, hex);
}

/* The kept file's sizes for the samples still unknown: how many. */
static int64_t read_kept(const char *base, int64_t nsamples, uint32_t *dims)
{
    void *p = NULL;
    size_t n = 0;
    size_t head = strlen(KEPT_MAGIC) + 8;
    if (rf__cache_get_index(base, &p, &n) != 1)
        return 0;
    uint64_t count = 0;
    if (n >= head)
        memcpy(&count, (char *)p + strlen(KEPT_MAGIC), 8);
    int64_t got = 0;
    if (n >= head && !memcmp(p, KEPT_MAGIC, strlen(KEPT_MAGIC)) && count == (uint64_t)nsamples &&
        n == head + 8 * count) {
        const uint8_t *v = (const uint8_t *)p + head;
        for (int64_t i = 0; i < nsamples; i++) {
            uint32_t w, h;
            memcpy(&w, v + 8 * i, 4);
            memcpy(&h, v + 8 * i + 4, 4);
            if ((dims[2 * i] == 0 || dims[2 * i + 1] == 0) && w > 0 && h > 0) {
                dims[2 * i] = w;
                dims[2 * i + 1] = h;
                got++;
            }
        }
    }
    free(p);
    return got;
}

static int write_kept(rf_cache *c, const char *base, int64_t nsamples, const uint32_t *dims)
{
    size_t ml = strlen(KEPT_MAGIC), n = ml + 8 + 8 * (size_t)nsamples;
    char *p = malloc(n);
    if (!p)
        return 0;
    uint64_t count = (uint64_t)nsamples;
    memcpy(p, KEPT_MAGIC, ml);
    memcpy(p + ml, &count, 8);
    memcpy(p + ml + 8, dims, 8 * (size_t)nsamples);
    int rc = rf__cache_put_index(c, base, p, n);
    free(p);
    return rc == 1;
}

static int64_t unknown_count(const uint32_t *dims, int64_t n)
{
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++)
        u += dims[2 * i] == 0 || dims[2 * i + 1] == 0;
    return u;
}

int rf__sizes_learn(const rf_source *src, const rf_sizes_opts *o, uint32_t *dims,
                    rf_sizes_stats *st, char *err, size_t errcap)
{
    memset(st, 0, sizeof *st);
    int64_t t0 = rf__now_ns();
    for (int64_t i = 0; i < src->n; i++) {
        int known = src->dims && src->dims[2 * i] > 0 && src->dims[2 * i + 1] > 0;
        dims[2 * i] = known ? src->dims[2 * i] : 0;
        dims[2 * i + 1] = known ? src->dims[2 * i + 1] : 0;
        st->from_manifest += known;
    }
    int64_t missing = src->n - st->from_manifest;
    /* the kept file: in the remote shards' cache, or one opened for it */
    rf_cache own, *c = NULL;
    char base[RF__CACHE_PATH] = "", why[300] = "";
    if (missing > 0 && o->keep) {
        if (src->remote) {
            c = rf__remote_cache(src->remote);
        } else if (rf__cache_open(&own, o->cache_dir, 0, why, sizeof why) == 0) {
            c = &own;
        } else {
            rf__cache_close(&own);
            snprintf(st->kept, sizeof st->kept, "none: %s", why);
        }
    }
    if (c) {
        char hex[65], key[100];
        identity(src, o->spec, hex);
        snprintf(key, sizeof key, "ringfeed-sizes:%s", hex);
        rf__cache_base(c, key, (uint64_t)src->n, "", base);
        snprintf(st->kept, sizeof st->kept, "%s.idx", base);
        st->from_kept = read_kept(base, src->n, dims);
        missing -= st->from_kept;
    }
    int rc = 0;
    if (missing > 0) {
        rc = run_scan(src, o, dims, st, err, errcap);
        st->unknown = unknown_count(dims, src->n);
        if (rc == 0 && c && st->scanned > 0)
            st->kept_written = write_kept(c, base, src->n, dims);
    }
    if (c == &own)
        rf__cache_close(&own);
    st->scan_ns = rf__now_ns() - t0;
    return rc;
}
