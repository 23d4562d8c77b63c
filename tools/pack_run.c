/*
 * pack_run.c - ringfeed-pack's write loop: the order, the part, the resume,
 * the workers, the shards, the progress line and the summary.
 *
 * Samples are taken in the source's order, or in a seeded shuffled order
 * (--shuffle --seed); --part K/N takes the K-th of N contiguous slices of
 * that order (positions [K*n/N, (K+1)*n/N)), so N machines together write
 * exactly what one would, under the same keys. Positions are cut into
 * shards by a rule that depends only on the samples' bytes: a fixed number
 * of positions per shard (--shard-count), or a shard closes after the
 * written sample that brings it to --shard-size bytes. So a rerun finds
 * where the complete shards of an earlier run end (from the count, or from
 * the largest key in the last one), skips them and writes the others
 * byte-identical to an uninterrupted run (resume), part by part.
 *
 * Positions are encoded in chunks: workers take them by an atomic counter
 * and leave each result in its own slot; the main thread then writes the
 * chunk in order, so the bytes do not depend on the worker count. Table
 * rows come over a pipe: the main thread receives a chunk before the
 * workers start on it, and asks for the next one first, so the reader
 * prepares it while they work. Each shard is written as OUT/.<name>.tmp and
 * renamed when complete. The key of a sample is its position in the write
 * order, zero-padded, or its source's own key (--keep-keys, pack_keys.c); a
 * skipped bad sample leaves a gap. Extra members (a tar source's captions, a
 * table's other columns as .json) are copied unchanged into the sample.
 *
 * --raw-fraction F stores the smallest pictures (by their raw bytes at
 * --max-side) raw, up to F times the number of samples, the others as
 * JPEG: a first pass reads every picture's header (the first 256 KiB of a
 * file, all of it when the header needs more) over the whole source, so
 * every part chooses as one machine would.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pack.h"
#include "ringfeed.h"

#define ERRCAP PACK_ERRCAP
#define CHUNK 1024              /* positions encoded before they are written (bounds the memory) */
#define SIZE_PREFIX (256 << 10) /* --raw-fraction: bytes read for a header */

typedef struct result {
    pack_item in; /* the sample's bytes and label */
    uint8_t *out; /* the picture member's bytes */
    size_t len;
    const char *ext; /* its extension ("jpg", "npy", or the original's) */
    uint64_t raw;    /* the size pass: raw bytes, UINT64_MAX when it failed */
    int rc;
    char err[ERRCAP];
} result;

/* What the progress line shows: positions [base, total) to do, [base,
 * start) done before t0 (by an earlier run). */
typedef struct progress {
    const char *what; /* "images", or "headers" for the size pass */
    int64_t base, start, total;
    double t0, last;
    int tty;
} progress;

typedef struct job {
    const pack_opts *o;
    const pack_input *in;
    const int64_t *order;
    const unsigned char *raw_pick; /* --raw-fraction: per position, 1 = raw */
    int sizes;                     /* 1: the size pass */
    int64_t a, b;                  /* positions of this chunk */
    result *res;                   /* b - a slots, one per position */
    atomic_llong next; /* next position to take; fetch_add by workers, no ordering needed */
    atomic_llong done; /* finished positions; release by workers, acquire by the progress line */
} job;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* The progress line: on a terminal redrawn 5 times a second; in a log (a
 * batch job's output) a line every 30 s. */
static void show(progress *pr, int64_t d, int final)
{
    double t = now_s();
    if (!final && t - pr->last < (pr->tty ? 0.2 : 30.0))
        return;
    pr->last = t;
    double el = t - pr->t0, rate = el > 0 ? (double)(d - pr->start) / el : 0;
    double eta = rate > 0 ? (double)(pr->total - d) / rate : 0;
    fprintf(stderr, "%s%lld/%lld %s, %.0f %s/s, ETA %.0f s%s",
            pr->tty ? "\r" : "ringfeed-pack: ", (long long)(d - pr->base),
            (long long)(pr->total - pr->base), pr->what, rate, pr->what, eta,
            pr->tty ? "   " : "\n");
}

/* One position: its bytes read (unless received), then encoded, or sized. */
static void work_one(job *j, pack_coder *c, int64_t p)
{
    result *r = &j->res[p - j->a];
    int64_t i = j->order[p];
    if (!c) {
        r->rc = RF_E_NOMEM;
        snprintf(r->err, ERRCAP, "out of memory");
        return;
    }
    if (!pack_input_fetched(j->in))
        pack_input_read(j->in, i, j->sizes ? SIZE_PREFIX : 0, &r->in);
    if ((r->rc = r->in.rc) != 0) {
        snprintf(r->err, ERRCAP, "%s", r->in.err);
        return;
    }
    const uint8_t *pic = r->in.data + r->in.img_off;
    if (j->sizes) {
        r->rc = pack_image_raw_bytes(c, pic, r->in.img_len, &j->o->img, &r->raw, r->err, ERRCAP);
        if (r->rc != 0 && !pack_input_fetched(j->in) && r->in.img_len == SIZE_PREFIX) {
            pack_item_free(&r->in); /* the header needs more: all of it */
            if ((r->rc = pack_input_read(j->in, i, 0, &r->in)) == 0)
                r->rc = pack_image_raw_bytes(c, r->in.data + r->in.img_off, r->in.img_len,
                                             &j->o->img, &r->raw, r->err, ERRCAP);
        }
        pack_item_free(&r->in);
        return;
    }
    int store = j->raw_pick ? (j->raw_pick[p] ? PACK_STORE_RAW : PACK_STORE_JPEG) : j->o->img.store;
    r->rc = pack_image(c, pic, r->in.img_len, &j->o->img, store, &r->out, &r->len, &r->ext, r->err,
                       ERRCAP);
}

static void *worker(void *arg)
{
    job *j = arg;
    pack_coder *c = pack_coder_create();
    for (;;) {
        int64_t p = j->a + atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (p >= j->b)
            break;
        work_one(j, c, p);
        atomic_fetch_add_explicit(&j->done, 1, memory_order_release);
    }
    pack_coder_destroy(c);
    return NULL;
}

/* Runs the workers over the chunk and draws the progress line meanwhile. */
static void run_chunk(job *j, progress *pr)
{
    int nw = j->o->workers;
    pthread_t *th = calloc((size_t)nw, sizeof *th);
    int started = 0;
    for (int w = 0; th && w < nw; w++)
        if (pthread_create(&th[w], NULL, worker, j) == 0)
            started++;
    if (started == 0)
        worker(j); /* no thread could start: do the work here */
    int64_t n = j->b - j->a;
    for (int64_t d; (d = atomic_load_explicit(&j->done, memory_order_acquire)) < n;) {
        show(pr, j->a + d, 0);
        usleep(50000);
    }
    for (int w = 0; w < started; w++)
        pthread_join(th[w], NULL);
    free(th);
}

/* Positions [a, b) through the workers; received first for tables (the
 * next chunk asked for before the workers start: ask_next). 0 or 1. */
static int chunk(job *j, progress *pr, int64_t ask_next_a, int64_t ask_next_b)
{
    memset(j->res, 0, (size_t)(j->b - j->a) * sizeof *j->res);
    atomic_init(&j->next, 0);
    atomic_init(&j->done, 0);
    pack_input *in = (pack_input *)j->in;
    if (pack_input_fetched(in)) {
        pack_item *items = malloc((size_t)(j->b - j->a) * sizeof *items);
        if (!items || pack_input_fetch(in, j->order + j->a, j->b - j->a, items) != 0) {
            free(items);
            return 1;
        }
        for (int64_t k = 0; k < j->b - j->a; k++)
            j->res[k].in = items[k];
        free(items);
        if (ask_next_b > ask_next_a &&
            pack_input_ask(in, j->order + ask_next_a, ask_next_b - ask_next_a) != 0)
            return 1;
    }
    run_chunk(j, pr);
    return 0;
}

/* ---- --raw-fraction: the size pass ----------------------------------------- */

static const uint64_t *sort_sizes; /* qsort's key; the size pass runs on the main thread */

static int by_size(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    uint64_t sa = sort_sizes[a], sb = sort_sizes[b];
    return sa < sb ? -1 : sa > sb ? 1 : (a > b) - (a < b);
}

/* Per position 1 where its picture is stored raw: the floor(F * n) smallest
 * by raw bytes (ties by position), bad pictures never. NULL on failure. */
static unsigned char *pick_raw(const pack_opts *o, pack_input *in, const int64_t *order, int tty)
{
    int64_t n = in->n;
    uint64_t *sizes = malloc((size_t)(n ? n : 1) * sizeof *sizes);
    int64_t *pos = malloc((size_t)(n ? n : 1) * sizeof *pos);
    unsigned char *pick = calloc((size_t)(n ? n : 1), 1);
    result *res = calloc(CHUNK, sizeof *res);
    int rc = !sizes || !pos || !pick || !res;
    progress pr = {"headers", 0, 0, n, now_s(), now_s(), tty};
    if (!rc && pack_input_fetched(in) && n > 0)
        rc = pack_input_ask(in, order, n < CHUNK ? n : CHUNK);
    for (int64_t a = 0; !rc && a < n; a += CHUNK) {
        int64_t b = a + CHUNK < n ? a + CHUNK : n, nb = b + CHUNK < n ? b + CHUNK : n;
        job j = {.o = o, .in = in, .order = order, .sizes = 1, .a = a, .b = b, .res = res};
        rc = chunk(&j, &pr, b, nb);
        for (int64_t p = a; !rc && p < b; p++) {
            sizes[p] = res[p - a].rc == 0 ? res[p - a].raw : UINT64_MAX;
            pack_item_free(&res[p - a].in);
        }
    }
    if (!rc) {
        show(&pr, n, 1);
        if (tty)
            fputc('\n', stderr);
        for (int64_t p = 0; p < n; p++)
            pos[p] = p;
        sort_sizes = sizes;
        qsort(pos, (size_t)n, sizeof *pos, by_size);
        int64_t k = (int64_t)(o->raw_fraction * (double)n);
        for (int64_t r = 0; r < k && r < n && sizes[pos[r]] != UINT64_MAX; r++)
            pick[pos[r]] = 1;
    } else if (!sizes || !pos || !pick || !res) {
        fprintf(stderr, "ringfeed-pack: out of memory\n");
    }
    free(sizes);
    free(pos);
    free(res);
    if (rc) {
        free(pick);
        return NULL;
    }
    return pick;
}

/* ---- resume: the complete shards of an earlier run ------------------------- */

/* A complete shard of an earlier run: counts its samples (label members),
 * marks their positions in present[] and gives the largest. */
typedef struct scan {
    const pack_keys *keys;
    unsigned char *present; /* positions [a, b) */
    int64_t a, b, maxpos, samples;
} scan;

static int scan_member(void *ctx, FILE *f, const char *name, uint64_t off, uint64_t size)
{
    (void)f, (void)off, (void)size;
    scan *sc = ctx;
    const char *base = strrchr(name, '/');
    const char *dot = strchr(base ? base + 1 : name, '.');
    if (dot && !strcmp(dot, ".cls")) {
        int64_t p = pack_key_pos(sc->keys, name, (size_t)(dot - name));
        if (p >= sc->a && p < sc->b)
            sc->present[p - sc->a] = 1;
        sc->maxpos = p > sc->maxpos ? p : sc->maxpos;
        sc->samples++;
    }
    return 0;
}

/* Room for shard k in *si (zeroed). 0, or 1 when out of memory. */
static int grow_shards(pack_shard **si, int64_t *cap, int64_t k)
{
    if (k < *cap)
        return 0;
    int64_t nc = *cap ? 2 * *cap : 64;
    pack_shard *p = realloc(*si, (size_t)nc * sizeof *p);
    if (!p) {
        fprintf(stderr, "ringfeed-pack: out of memory\n");
        return 1;
    }
    memset(p + *cap, 0, (size_t)(nc - *cap) * sizeof *p);
    *si = p;
    *cap = nc;
    return 0;
}

/* Lists position pos as skipped. 0, or 1 when out of memory. */
static int add_bad(pack_bad **bads, int64_t *nbad, int64_t *cap, int64_t pos, const char *reason)
{
    if (*nbad == *cap) {
        int64_t nc = *cap ? 2 * *cap : 16;
        pack_bad *p = realloc(*bads, (size_t)nc * sizeof *p);
        if (!p) {
            fprintf(stderr, "ringfeed-pack: out of memory\n");
            return 1;
        }
        *bads = p;
        *cap = nc;
    }
    (*bads)[*nbad].pos = pos;
    snprintf((*bads)[*nbad].reason, ERRCAP, "%s", reason);
    (*nbad)++;
    return 0;
}

/* Ends the tar, makes it durable and gives it its final name. 0 or 1. */
static int finish_shard(FILE *f, const char *tmp, const char *final, uint64_t *bytes)
{
    static const uint8_t end[1024];
    int e = fwrite(end, 1, sizeof end, f) != sizeof end;
    e |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    *bytes = (uint64_t)ftello(f);
    e |= fclose(f) != 0;
    if (e || rename(tmp, final) != 0) {
        fprintf(stderr, "ringfeed-pack: cannot write %s: %s\n", final, strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}

/* ---- the run ------------------------------------------------------------------ */

FILE *pack_create(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    return f;
}

void pack_shard_name(const pack_opts *o, int64_t k, char *buf, size_t cap)
{
    if (o->parts) {
        int w = snprintf(NULL, 0, "%lld", (long long)(o->parts - 1));
        snprintf(buf, cap, "%s-p%0*lldof%lld-%06lld.tar", o->prefix, w, (long long)o->part,
                 (long long)o->parts, (long long)k);
    } else {
        snprintf(buf, cap, "%s-%06lld.tar", o->prefix, (long long)k);
    }
}

void pack_manifest_name(const pack_opts *o, char *buf, size_t cap)
{
    if (o->parts) {
        int w = snprintf(NULL, 0, "%lld", (long long)(o->parts - 1));
        snprintf(buf, cap, "manifest-p%0*lldof%lld.json", w, (long long)o->part,
                 (long long)o->parts);
    } else {
        snprintf(buf, cap, "manifest.json");
    }
}

void pack_part_range(const pack_opts *o, int64_t n, int64_t *a, int64_t *b)
{
    *a = o->parts ? o->part * n / o->parts : 0;
    *b = o->parts ? (o->part + 1) * n / o->parts : n;
}

static void shard_path(const pack_opts *o, int64_t k, int tmp, char *buf, size_t cap)
{
    char name[256]; /* the prefix is at most 128 bytes (pack.c) */
    pack_shard_name(o, k, name, sizeof name);
    snprintf(buf, cap, "%s/%s%s%s", o->out, tmp ? "." : "", name, tmp ? ".tmp" : "");
}

/* The end of the chunk from position p of the part [a, b): CHUNK positions
 * at most, never past a shard of the count rule. */
static int64_t chunk_end(const pack_opts *o, int64_t a, int64_t b, int64_t p)
{
    int64_t e = p + CHUNK < b ? p + CHUNK : b;
    if (!o->shard_size) {
        int64_t left = o->shard_count - (p - a) % o->shard_count; /* in p's shard */
        e = left < e - p ? p + left : e;
    }
    return e;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Writes position p's members to f. 0 or 1. */
static int write_sample(const pack_opts *o, const pack_input *in, const pack_keys *keys, int64_t p,
                        const result *r, FILE *f)
{
    char key[PACK_PATHCAP], member[PACK_PATHCAP + 80], label[32];
    pack_key(keys, p, key, sizeof key);
    int ll = snprintf(label, sizeof label, "%lld", (long long)r->in.label);
    snprintf(member, sizeof member, "%s.%s", key, r->ext);
    int e = pack_tar_member(f, member, r->out, r->len);
    snprintf(member, sizeof member, "%s.cls", key);
    e = e || pack_tar_member(f, member, label, (size_t)ll);
    for (int x = 0; !e && x < in->nextras; x++) {
        if (r->in.xlen[x] == RF_SOURCE_ABSENT)
            continue;
        snprintf(member, sizeof member, "%s.%s", key, in->extras[x]);
        e = pack_tar_member(f, member, r->in.data + r->in.xoff[x], r->in.xlen[x]);
    }
    (void)o;
    return e;
}

int pack_run(const pack_opts *o, pack_input *in)
{
    int64_t n = in->n, a, b;
    pack_part_range(o, n, &a, &b);
    int64_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    pack_shard *si = NULL;
    int64_t si_cap = 0;
    result *res = calloc(CHUNK, sizeof *res);
    unsigned char *present = calloc((size_t)(b - a ? b - a : 1), 1); /* resume: keys found */
    unsigned char *raw_pick = NULL;
    pack_keys *keys = NULL;
    pack_bad *bads = NULL;
    int64_t nbad = 0, bad_cap = 0;
    int rc = 0, tty = isatty(2);
    if (!order || !res || !present) {
        fprintf(stderr, "ringfeed-pack: out of memory\n");
        rc = 1;
        goto out;
    }
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    if (o->shuffle) { /* Fisher-Yates from a splitmix64 stream of the seed */
        uint64_t st = o->seed;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t r = (int64_t)(splitmix(&st) % (uint64_t)(i + 1));
            int64_t t = order[i];
            order[i] = order[r];
            order[r] = t;
        }
    }
    double t0 = now_s();
    if (!(keys = pack_keys_make(in, order, n, o->keep_keys)) ||
        (o->raw_fraction >= 0 && !(raw_pick = pick_raw(o, in, order, tty)))) {
        rc = 1;
        goto out;
    }
    int64_t pos = a, k = 0, written_now = 0;
    /* Resume: the complete shards of an earlier run, in order. Shard k of
     * --shard-count holds positions [a + k * count, a + (k + 1) * count); a
     * shard of --shard-size ends with a written sample (it closes right
     * after one), so the next starts after its largest key. */
    for (;; k++) {
        char final[PACK_PATHCAP + 512];
        shard_path(o, k, 0, final, sizeof final);
        if (pos >= b || access(final, F_OK) != 0)
            break;
        scan sc = {keys, present, a, b, -1, 0};
        if ((rc = grow_shards(&si, &si_cap, k)) != 0)
            goto out;
        if (pack_tar_walk(final, scan_member, &sc) != 0) {
            fprintf(stderr, "ringfeed-pack: cannot read %s\n", final);
            rc = 1;
            goto out;
        }
        struct stat st;
        si[k].samples = sc.samples;
        si[k].bytes = stat(final, &st) == 0 ? (uint64_t)st.st_size : 0;
        int64_t end = o->shard_size                      ? sc.maxpos + 1
                      : k + 1 > (b - a) / o->shard_count ? b
                                                         : a + (k + 1) * o->shard_count;
        end = end > b ? b : end;
        for (int64_t p = pos; p < end; p++)
            if (!present[p - a] &&
                add_bad(&bads, &nbad, &bad_cap, p, "skipped by an earlier run")) {
                rc = 1;
                goto out;
            }
        pos = end > pos ? end : pos;
    }
    progress pr = {"images", a, pos, b, now_s(), now_s(), tty};
    FILE *f = NULL;
    char final[PACK_PATHCAP + 512], tmp[PACK_PATHCAP + 512];
    if (pos < b && pack_input_fetched(in) &&
        pack_input_ask(in, order + pos, chunk_end(o, a, b, pos) - pos) != 0)
        rc = 1;
    while (pos < b && rc == 0) {
        int64_t cb = chunk_end(o, a, b, pos), nb = chunk_end(o, a, b, cb);
        job j = {
            .o = o, .in = in, .order = order, .raw_pick = raw_pick, .a = pos, .b = cb, .res = res};
        if (chunk(&j, &pr, cb, nb) != 0) {
            rc = 1;
            break;
        }
        for (int64_t p = pos; p < cb; p++) {
            result *r = &res[p - pos];
            if (rc != 0)
                goto next;
            if (!f) {
                if ((rc = grow_shards(&si, &si_cap, k)) != 0)
                    goto next;
                shard_path(o, k, 0, final, sizeof final);
                shard_path(o, k, 1, tmp, sizeof tmp);
                if (!(f = pack_create(tmp))) {
                    fprintf(stderr, "ringfeed-pack: cannot create %s: %s\n", tmp, strerror(errno));
                    rc = 1;
                    goto next;
                }
            }
            if (r->rc != 0) {
                char name[PACK_PATHCAP];
                pack_input_name(in, order[p], name, sizeof name);
                fprintf(stderr, "%sringfeed-pack: %s%s: %s\n", tty ? "\n" : "",
                        o->skip_errors ? "skipped " : "", name, r->err);
                if (!o->skip_errors || add_bad(&bads, &nbad, &bad_cap, p, r->err)) {
                    rc = 1; /* and the shard is not finished: rc stays */
                    goto next;
                }
            } else if (write_sample(o, in, keys, p, r, f) != 0) {
                fprintf(stderr, "ringfeed-pack: cannot write %s\n", tmp);
                rc = 1;
                goto next;
            } else {
                si[k].samples++;
            }
            int close_now = p + 1 == b;
            if (o->shard_size)
                close_now |= r->rc == 0 && (uint64_t)ftello(f) + 1024 >= o->shard_size;
            else
                close_now |= (p + 1 - a) % o->shard_count == 0;
            if (close_now) {
                if (o->shard_size && si[k].samples == 0) {
                    /* only skipped samples after the last full shard: no shard */
                    fclose(f);
                    f = NULL;
                    unlink(tmp);
                    goto next;
                }
                rc = finish_shard(f, tmp, final, &si[k].bytes);
                f = NULL;
                k++;
                if (rc == 0 && o->stop_after && ++written_now >= o->stop_after && p + 1 < b) {
                    fprintf(stderr,
                            "%sringfeed-pack: stopped after %d shard(s) "
                            "(--stop-after-shards)\n",
                            tty ? "\n" : "", o->stop_after);
                    rc = 3;
                }
            }
        next:
            free(r->out);
            pack_item_free(&r->in);
        }
        pos = cb;
    }
    if (f) { /* stopped by an error: the partial shard goes */
        fclose(f);
        unlink(tmp);
    }
    if (rc == 0 && b > pr.start)
        show(&pr, b, 1);
    if (tty)
        fputc('\n', stderr);
    if (rc == 0) {
        pack_done d = {order, keys, si, k, bads, nbad, a, b};
        pack_kinds kinds = {0};
        char mname[256];
        pack_manifest_name(o, mname, sizeof mname);
        if (pack_write_manifest(o, in, &d, &kinds) != 0) {
            fprintf(stderr, "ringfeed-pack: cannot write %s/%s\n", o->out, mname);
            rc = 1;
        } else {
            double el = now_s() - t0;
            int64_t written = b - a - nbad;
            char part[64] = "";
            if (o->parts)
                snprintf(part, sizeof part, "part %lld of %lld: ", (long long)o->part,
                         (long long)o->parts);
            fprintf(stderr,
                    "ringfeed-pack: %s%lld samples in %lld shard%s, %.1f MB (%lld raw .npy, %lld "
                    "JPEG, %lld kept as they came); %lld errors skipped; %.1f s, %.0f images/s\n",
                    part, (long long)written, (long long)k, k == 1 ? "" : "s",
                    (double)kinds.bytes / 1e6, (long long)kinds.raw, (long long)kinds.jpeg,
                    (long long)kinds.other, (long long)nbad, el,
                    el > 0 ? (double)written / el : 0.0);
            if (o->keep_keys)
                fprintf(stderr,
                        "ringfeed-pack: keys: %lld of the source's own kept, %lld "
                        "numbered (not unique or not tar-safe)\n",
                        (long long)pack_keys_kept(keys), (long long)(n - pack_keys_kept(keys)));
        }
    }
out:
    free(order);
    free(si);
    for (int i = 0; res && i < CHUNK; i++)
        pack_item_free(&res[i].in);
    free(res);
    free(present);
    free(raw_pick);
    free(bads);
    pack_keys_free(keys);
    return rc;
}
