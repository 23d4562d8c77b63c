/*
 * pack.c - ringfeed-pack: writes any source the loader reads (image folder,
 * list file, tar shards) as WebDataset tar shards of bounded-size JPEGs.
 *
 * The source is indexed by the library's own indexer (source.h). Samples are
 * taken in the source's order, or in a seeded shuffled order (--shuffle
 * --seed), and cut into shards by a rule that depends only on the
 * samples' bytes: a fixed number of positions per shard (--shard-count), or
 * a shard closes after the written sample that brings it to --shard-size
 * bytes. So a rerun finds where the complete shards of an earlier run end
 * (from the count, or from the largest key in the last one), skips them and
 * writes the others byte-identical to an uninterrupted run (resume).
 * Positions are encoded in chunks: workers take them by an atomic counter
 * and leave each result in its own slot; the main thread then writes the
 * chunk in order, so the bytes do not depend on the worker count. Each shard
 * is written as OUT/.<name>.tmp and renamed when complete. The key of a
 * sample is its position in the write order, zero-padded; a skipped bad
 * sample leaves a gap in the keys. From tar shards, the members other than
 * the picture and the label (captions, metadata) are copied unchanged into
 * the output sample (--extras). OUT/manifest.json, with the index that lets
 * the loader skip the header walk (pack_manifest.c), is written last.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kinds.h"
#include "pack.h"
#include "ringfeed.h"
#include "source.h"
#include "source_remote.h"

#define ERRCAP PACK_ERRCAP
#define CHUNK 1024 /* positions encoded before they are written (bounds the memory) */

typedef pack_opts opts;
typedef pack_shard shard_info;
typedef pack_bad bad;

typedef struct result {
    uint8_t *jpg;    /* the picture member's bytes */
    size_t len;
    const char *ext; /* its extension ("jpg", or the original's) */
    uint8_t *xbuf;   /* the extra members' bytes, back to back */
    uint32_t xlen[RF_SOURCE_MAX_EXTRAS]; /* RF_SOURCE_ABSENT: the sample has none */
    int rc;
    char err[ERRCAP];
} result;

typedef struct job {
    const opts *o;
    const rf_source *s;
    const int64_t *order;
    int64_t a, b;        /* positions of this shard */
    result *res;         /* b - a slots, one per position */
    atomic_llong next;   /* next position to take; fetch_add by workers, no ordering needed */
    atomic_llong done;   /* finished positions; release by workers, acquire by the progress line */
} job;

/* Reads sample i's bytes whole (file, or its tar member). */
static int read_sample(const rf_source *s, int64_t i, uint8_t **buf, size_t *len, char *err)
{
    int ranged;
    uint64_t off, n;
    rf__source_extent(s, i, &ranged, &off, &n);
    int fd = open(rf__source_path(s, i), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, ERRCAP, "cannot open: %s", strerror(errno));
        return RF_E_IO;
    }
    if (!ranged) {
        struct stat st;
        if (fstat(fd, &st) != 0) {
            snprintf(err, ERRCAP, "cannot stat: %s", strerror(errno));
            close(fd);
            return RF_E_IO;
        }
        off = 0;
        n = (uint64_t)st.st_size;
    }
    uint8_t *b = malloc(n ? n : 1);
    if (!b) {
        close(fd);
        snprintf(err, ERRCAP, "out of memory");
        return RF_E_NOMEM;
    }
    uint64_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, b + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(err, ERRCAP, "read failed: %s", r < 0 ? strerror(errno) : "file too short");
            free(b);
            close(fd);
            return RF_E_IO;
        }
        got += (uint64_t)r;
    }
    close(fd);
    *buf = b;
    *len = n;
    return 0;
}

/* Sample i's bytes (with extras: the span of its members) to its result:
 * the picture member, and the extras' bytes copied out of the span. */
static int pack_sample(pack_coder *c, const rf_source *s, int64_t i, const uint8_t *data,
                       size_t len, const pack_image_opts *io, result *r)
{
    uint64_t rel = 0, ilen = len;
    if (s->nextras > 0)
        rf__source_image_in_span(s, i, &rel, &ilen);
    int rc = pack_image(c, data + rel, (size_t)ilen, io, &r->jpg, &r->len, &r->ext, r->err,
                        ERRCAP);
    if (rc != 0 || s->nextras == 0)
        return rc;
    size_t total = 0, at = 0;
    for (int e = 0; e < s->nextras; e++) {
        uint32_t el;
        r->xlen[e] = rf__source_extra_in_span(s, i, e, &rel, &el) ? el : RF_SOURCE_ABSENT;
        total += r->xlen[e] == RF_SOURCE_ABSENT ? 0 : el;
    }
    if (!(r->xbuf = malloc(total ? total : 1))) {
        snprintf(r->err, ERRCAP, "out of memory");
        return RF_E_NOMEM;
    }
    for (int e = 0; e < s->nextras; e++) {
        uint32_t el;
        if (rf__source_extra_in_span(s, i, e, &rel, &el)) {
            memcpy(r->xbuf + at, data + rel, el);
            at += el;
        }
    }
    return 0;
}

static void *worker(void *arg)
{
    job *j = arg;
    pack_coder *c = pack_coder_create();
    for (;;) {
        int64_t p = j->a + atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (p >= j->b)
            break;
        result *r = &j->res[p - j->a];
        uint8_t *data = NULL;
        size_t len = 0;
        if (!c) {
            r->rc = RF_E_NOMEM;
            snprintf(r->err, ERRCAP, "out of memory");
        } else if ((r->rc = read_sample(j->s, j->order[p], &data, &len, r->err)) == 0) {
            r->rc = pack_sample(c, j->s, j->order[p], data, len, &j->o->img, r);
        }
        free(data);
        atomic_fetch_add_explicit(&j->done, 1, memory_order_release);
    }
    pack_coder_destroy(c);
    return NULL;
}

static void shard_name(const opts *o, int64_t k, char *buf, size_t cap, int tmp)
{
    if (tmp)
        snprintf(buf, cap, "%s/.%s-%06lld.tar.tmp", o->out, o->prefix, (long long)k);
    else
        snprintf(buf, cap, "%s/%s-%06lld.tar", o->out, o->prefix, (long long)k);
}

/* A complete shard of an earlier run: counts its samples (.cls members),
 * marks their keys in present[0..n) and gives the largest key. */
typedef struct scan {
    unsigned char *present;
    int64_t n, maxkey, samples;
} scan;

static int scan_member(void *ctx, FILE *f, const char *name, uint64_t off, uint64_t size)
{
    (void)f, (void)off, (void)size;
    scan *sc = ctx;
    const char *dot = strchr(name, '.');
    if (dot && !strcmp(dot, ".cls")) {
        int64_t key = strtoll(name, NULL, 10);
        if (key >= 0 && key < sc->n)
            sc->present[key] = 1;
        sc->maxkey = key > sc->maxkey ? key : sc->maxkey;
        sc->samples++;
    }
    return 0;
}

static int scan_shard(const char *path, unsigned char *present, int64_t n, int64_t *maxkey,
                      shard_info *si)
{
    scan sc = {present, n, *maxkey, 0};
    if (pack_tar_walk(path, scan_member, &sc) != 0)
        return -1;
    *maxkey = sc.maxkey;
    si->samples = sc.samples;
    struct stat st;
    si->bytes = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    return 0;
}

/* Room for shard k in *si (zeroed). 0, or 1 when out of memory. */
static int grow_shards(shard_info **si, int64_t *cap, int64_t k)
{
    if (k < *cap)
        return 0;
    int64_t nc = *cap ? 2 * *cap : 64;
    shard_info *p = realloc(*si, (size_t)nc * sizeof *p);
    if (!p)
        return 1;
    memset(p + *cap, 0, (size_t)(nc - *cap) * sizeof *p);
    *si = p;
    *cap = nc;
    return 0;
}

/* Lists position pos as skipped. 0, or 1 when out of memory. */
static int add_bad(bad **bads, int64_t *nbad, int64_t *cap, int64_t pos, const char *reason)
{
    if (*nbad == *cap) {
        int64_t nc = *cap ? 2 * *cap : 16;
        bad *p = realloc(*bads, (size_t)nc * sizeof *p);
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

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Runs the workers over positions [a, b) and draws the progress line while
 * they run. */
static void run_shard(job *j, int64_t total_done, int64_t total, double t0, int tty)
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
    while (tty && atomic_load_explicit(&j->done, memory_order_acquire) < n) {
        int64_t d = total_done + atomic_load_explicit(&j->done, memory_order_acquire);
        double el = now_s() - t0, rate = el > 0 ? (double)d / el : 0;
        double eta = rate > 0 ? (double)(total - d) / rate : 0;
        fprintf(stderr, "\r%lld/%lld images, %.0f images/s, ETA %.0f s   ", (long long)d,
                (long long)total, rate, eta);
        usleep(200000);
    }
    for (int w = 0; w < started; w++)
        pthread_join(th[w], NULL);
    free(th);
}

/* ---- main ---- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ringfeed-pack [options] SRC OUT\n"
            "Writes SRC (an image folder, a list file or tar shards: anything the loader reads;\n"
            "JPEG, PNG, WebP, BMP, PNM pictures) as WebDataset tar shards\n"
            "OUT/<prefix>-000000.tar, ... with members <key>.jpg and <key>.cls (and a tar\n"
            "source's other members), and OUT/manifest.json, whose index lets the loader skip\n"
            "the shards' header walk (and which holds each shard's SHA-256, for checking\n"
            "copies). A rerun skips the shards already complete.\n"
            "  --max-side N        shrink so that the longer side is at most N (never enlarge;\n"
            "                      0, the default: keep the size)\n"
            "  --quality Q         JPEG quality 1..100 (default 90)\n"
            "  --shard-count N     samples per shard (default 1000)\n"
            "  --shard-size BYTES  instead: close each shard once it holds BYTES (suffixes k, M, G)\n"
            "  --workers N         encoding threads (default: the CPUs); output does not depend on it\n"
            "  --shuffle           write the samples in a shuffled order (seeded by --seed)\n"
            "  --seed S            seed of --shuffle (default 0)\n"
            "  --keep-original-if-smaller  store a picture needing no shrink as it came, under\n"
            "                      its own extension (<key>.png, ...): a JPEG always, another\n"
            "                      format when its bytes are fewer than the JPEG's\n"
            "  --extras LIST       tar sources: the members besides the picture and the .cls\n"
            "                      label copied unchanged into each sample, by extension\n"
            "                      (\"txt,json\"); default: all of them; \"none\": none\n"
            "  --prefix NAME       shard name prefix (default \"shard\")\n"
            "  --on-error raise|skip  a bad source file stops the run (default) or is left out\n"
            "                      and listed in the manifest\n"
            "  -h, --help          this text\n");
}

static int parse_int(const char *s, long long lo, long long hi, long long *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

/* A byte count with an optional k, M or G suffix (powers of 1024). */
static int parse_size(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    int shift = *end == 'k' || *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (shift)
        end++;
    if (errno || end == s || *end || *s == '-' || x == 0 || x > (UINT64_MAX >> shift))
        return -1;
    *v = (uint64_t)x << shift;
    return 0;
}

/* --extras "txt,json": distinct extensions, lowercased, neither a picture nor
 * the label. 0, or -1 with the reason in err. */
static int parse_extras(const char *arg, rf_source_opts *so, char *buf, size_t cap, char *err)
{
    size_t at = 0;
    for (const char *p = arg; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n > RF_SOURCE_MAX_EXT || memchr(p, '/', n) || at + n + 1 > cap ||
            so->nextras == RF_SOURCE_MAX_EXTRAS) {
            snprintf(err, ERRCAP, "expected up to %d extensions of 1..%d bytes, comma-separated",
                     RF_SOURCE_MAX_EXTRAS, RF_SOURCE_MAX_EXT);
            return -1;
        }
        char *e = buf + at;
        for (size_t i = 0; i < n; i++)
            e[i] = (char)tolower((unsigned char)p[i]);
        e[n] = '\0';
        int dup = 0;
        for (int i = 0; i < so->nextras; i++)
            dup |= !strcmp(so->extras[i], e);
        if (dup || !strcmp(e, "cls") || rf__image_ext(e)) {
            snprintf(err, ERRCAP, "\"%s\": %s", e,
                     dup ? "named twice" : "the picture and the label are not extras");
            return -1;
        }
        so->extras[so->nextras++] = e;
        at += n + 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
    opts o = {.prefix = "shard", .img = {0, 90, 0}, .shard_count = 1000};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    o.workers = cpus > 0 ? (int)cpus : 1;
    enum { O_MAX = 256, O_Q, O_SC, O_SS, O_W, O_SH, O_SEED, O_KEEP, O_PRE, O_ERR, O_STOP, O_EXTRAS };
    static const struct option lo[] = {
        {"max-side", 1, 0, O_MAX}, {"quality", 1, 0, O_Q}, {"shard-count", 1, 0, O_SC},
        {"shard-size", 1, 0, O_SS},
        {"workers", 1, 0, O_W}, {"shuffle", 0, 0, O_SH}, {"seed", 1, 0, O_SEED},
        {"keep-original-if-smaller", 0, 0, O_KEEP}, {"prefix", 1, 0, O_PRE},
        {"on-error", 1, 0, O_ERR}, {"stop-after-shards", 1, 0, O_STOP}, {"extras", 1, 0, O_EXTRAS},
        {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    int c, sc_given = 0;
    long long v;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        int bad_arg = 0;
        switch (c) {
        case O_MAX: bad_arg = parse_int(optarg, 0, 1 << 16, &v); o.img.max_side = (int)v; break;
        case O_Q: bad_arg = parse_int(optarg, 1, 100, &v); o.img.quality = (int)v; break;
        case O_SC: sc_given = 1; bad_arg = parse_int(optarg, 1, INT64_MAX, &v); o.shard_count = v; break;
        case O_SS: bad_arg = parse_size(optarg, &o.shard_size); break;
        case O_W: bad_arg = parse_int(optarg, 1, 1024, &v); o.workers = (int)v; break;
        case O_SH: o.shuffle = 1; break;
        case O_SEED: bad_arg = parse_int(optarg, 0, INT64_MAX, &v); o.seed = (uint64_t)v; break;
        case O_KEEP: o.img.keep_original = 1; break;
        case O_PRE:
            o.prefix = optarg;
            bad_arg = !*optarg || strchr(optarg, '/') != NULL;
            break;
        case O_ERR:
            bad_arg = strcmp(optarg, "raise") && strcmp(optarg, "skip");
            o.skip_errors = !strcmp(optarg, "skip");
            break;
        case O_STOP: bad_arg = parse_int(optarg, 1, INT32_MAX, &v); o.stop_after = (int)v; break;
        case O_EXTRAS: o.extras_arg = optarg; bad_arg = !*optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (bad_arg) {
            fprintf(stderr, "ringfeed-pack: bad value '%s' for --%s\n", optarg,
                    lo[c - O_MAX].name);
            return 2;
        }
    }
    if (sc_given && o.shard_size) {
        fprintf(stderr, "ringfeed-pack: --shard-count and --shard-size exclude each other\n");
        return 2;
    }
    if (argc - optind != 2) {
        usage(stderr);
        return 2;
    }
    o.src = argv[optind];
    o.out = argv[optind + 1];

    rf_source s;
    char err[ERRCAP];
    const rf_source_opts base = {.remote = &rf__source_remote}; /* URLs as the loader takes them */
    if (rf__source_open_ex(&s, o.src, &base, err, sizeof err) != 0) {
        fprintf(stderr, "ringfeed-pack: %s: %s\n", o.src, err);
        return 1;
    }
    if (s.kind == RF_SOURCE_RECORDS || (s.labels && s.n > 0 && s.labels[0] < 0)) {
        fprintf(stderr, "ringfeed-pack: %s: only labelled sources are packed\n", o.src);
        rf__source_close(&s);
        return 1;
    }
    /* tar: index again, now with the extra members to pass through */
    char extbuf[RF_SOURCE_MAX_EXTRAS * (RF_SOURCE_MAX_EXT + 1)];
    rf_source_opts so = base;
    if (o.extras_arg && strcmp(o.extras_arg, "none") && s.kind != RF_SOURCE_TAR) {
        fprintf(stderr, "ringfeed-pack: %s: --extras names members of tar shards\n", o.src);
        rf__source_close(&s);
        return 2;
    }
    if (s.kind == RF_SOURCE_TAR && !(o.extras_arg && !strcmp(o.extras_arg, "none"))) {
        int e = o.extras_arg ? parse_extras(o.extras_arg, &so, extbuf, sizeof extbuf, err)
                             : pack_tar_exts(o.src, &so, extbuf, sizeof extbuf, err, sizeof err);
        rf__source_close(&s);
        if (e != 0 || (so.nextras > 0 && rf__source_open_ex(&s, o.src, &so, err, sizeof err))) {
            fprintf(stderr, "ringfeed-pack: %s: %s\n", e ? "--extras" : o.src, err);
            return e ? 2 : 1;
        }
        if (so.nextras == 0 && rf__source_open_ex(&s, o.src, &base, err, sizeof err) != 0) {
            fprintf(stderr, "ringfeed-pack: %s: %s\n", o.src, err);
            return 1;
        }
        o.nextras = so.nextras;
        memcpy(o.extras, so.extras, sizeof o.extras);
    }
    if (mkdir(o.out, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "ringfeed-pack: cannot create %s: %s\n", o.out, strerror(errno));
        rf__source_close(&s);
        return 1;
    }
    int64_t n = s.n;
    int64_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    shard_info *si = NULL;
    int64_t si_cap = 0;
    result *res = calloc(CHUNK, sizeof *res);
    unsigned char *present = calloc((size_t)(n ? n : 1), 1); /* resume: keys found */
    bad *bads = NULL;
    int64_t nbad = 0, bad_cap = 0;
    int rc = 0;
    if (!order || !res || !present) {
        fprintf(stderr, "ringfeed-pack: out of memory\n");
        rc = 1;
        goto out;
    }
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    if (o.shuffle) { /* Fisher-Yates from a splitmix64 stream of the seed */
        uint64_t st = o.seed;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t r = (int64_t)(splitmix(&st) % (uint64_t)(i + 1));
            int64_t t = order[i];
            order[i] = order[r];
            order[r] = t;
        }
    }
    int tty = isatty(2);
    double t0 = now_s();
    int width = 6; /* digits of the keys */
    for (int64_t m = n; m >= 1000000; m /= 10)
        width++;
    int64_t pos = 0, k = 0, written_now = 0;
    /* Resume: the complete shards of an earlier run, in order. Shard k of
     * --shard-count holds positions [k * count, (k + 1) * count); a shard of
     * --shard-size ends with a written sample (it closes right after one),
     * so the next starts after its largest key. */
    for (;; k++) {
        char final[4096];
        shard_name(&o, k, final, sizeof final, 0);
        if (pos >= n || access(final, F_OK) != 0)
            break;
        int64_t maxkey = -1;
        if ((rc = grow_shards(&si, &si_cap, k)) != 0 ||
            scan_shard(final, present, n, &maxkey, &si[k]) != 0) {
            fprintf(stderr, "ringfeed-pack: cannot read %s\n", final);
            rc = 1;
            goto out;
        }
        int64_t end = o.shard_size ? maxkey + 1 : (k + 1) * o.shard_count;
        end = end > n ? n : end;
        for (int64_t p = pos; p < end; p++)
            if (!present[p] && add_bad(&bads, &nbad, &bad_cap, p, "skipped by an earlier run")) {
                rc = 1;
                goto out;
            }
        pos = end > pos ? end : pos;
    }
    int64_t shard_first = pos;
    FILE *f = NULL;
    char final[4096], tmp[4096];
    while (pos < n && rc == 0) {
        /* a chunk of positions, encoded in parallel, then written in order */
        int64_t b = pos + CHUNK < n ? pos + CHUNK : n;
        if (!o.shard_size && b > (k + 1) * o.shard_count)
            b = (k + 1) * o.shard_count; /* the count rule: a chunk never spans two shards */
        job j = {.o = &o, .s = &s, .order = order, .a = pos, .b = b, .res = res};
        atomic_init(&j.next, 0);
        atomic_init(&j.done, 0);
        memset(res, 0, (size_t)(b - pos) * sizeof *res);
        run_shard(&j, pos - shard_first, n - shard_first, t0, tty);
        for (int64_t p = pos; p < b; p++) {
            result *r = &res[p - pos];
            if (rc != 0)
                goto next;
            if (!f) {
                if ((rc = grow_shards(&si, &si_cap, k)) != 0) {
                    fprintf(stderr, "ringfeed-pack: out of memory\n");
                    goto next;
                }
                shard_name(&o, k, final, sizeof final, 0);
                shard_name(&o, k, tmp, sizeof tmp, 1);
                if (!(f = fopen(tmp, "wb"))) {
                    fprintf(stderr, "ringfeed-pack: cannot create %s: %s\n", tmp,
                            strerror(errno));
                    rc = 1;
                    goto next;
                }
            }
            if (r->rc != 0) {
                char name[4096];
                rf__source_name(&s, order[p], name, sizeof name);
                fprintf(stderr, "%sringfeed-pack: %s%s: %s\n", tty ? "\n" : "",
                        o.skip_errors ? "skipped " : "", name, r->err);
                if (!o.skip_errors || add_bad(&bads, &nbad, &bad_cap, p, r->err))
                    rc = 1;
            } else {
                char member[160], keyname[64], label[32];
                int nd = snprintf(label, sizeof label, "%lld", (long long)p);
                /* the key: p zero-padded to the width of the largest one */
                snprintf(keyname, sizeof keyname, "%.*s%s", width > nd ? width - nd : 0,
                         "000000000000000000000", label);
                int ll = snprintf(label, sizeof label, "%lld",
                                  (long long)rf__source_label(&s, order[p]));
                snprintf(member, sizeof member, "%s.%s", keyname, r->ext);
                int e = pack_tar_member(f, member, r->jpg, r->len);
                snprintf(member, sizeof member, "%s.cls", keyname);
                e = e || pack_tar_member(f, member, label, (size_t)ll);
                for (size_t x = 0, at = 0; !e && x < (size_t)s.nextras; x++) {
                    if (r->xlen[x] == RF_SOURCE_ABSENT)
                        continue;
                    snprintf(member, sizeof member, "%s.%s", keyname, o.extras[x]);
                    e = pack_tar_member(f, member, r->xbuf + at, r->xlen[x]);
                    at += r->xlen[x];
                }
                if (e) {
                    fprintf(stderr, "ringfeed-pack: cannot write %s\n", tmp);
                    rc = 1;
                    goto next;
                }
                si[k].samples++;
            }
            int close_now = p + 1 == n;
            if (o.shard_size)
                close_now |= r->rc == 0 && (uint64_t)ftello(f) + 1024 >= o.shard_size;
            else
                close_now |= p + 1 == (k + 1) * o.shard_count;
            if (close_now) {
                if (o.shard_size && si[k].samples == 0) {
                    /* only skipped samples after the last full shard: no shard */
                    fclose(f);
                    f = NULL;
                    unlink(tmp);
                    goto next;
                }
                rc = finish_shard(f, tmp, final, &si[k].bytes);
                f = NULL;
                k++;
                if (rc == 0 && o.stop_after && ++written_now >= o.stop_after && p + 1 < n) {
                    fprintf(stderr, "%sringfeed-pack: stopped after %d shard(s) "
                                    "(--stop-after-shards)\n", tty ? "\n" : "", o.stop_after);
                    rc = 3;
                }
            }
        next:
            free(r->jpg);
            free(r->xbuf);
        }
        pos = b;
    }
    if (f) { /* stopped by an error: the partial shard goes */
        fclose(f);
        unlink(tmp);
    }
    int64_t nshards = k;
    if (tty)
        fputc('\n', stderr);
    if (rc == 0) {
        if (pack_write_manifest(&o, &s, order, si, nshards, bads, nbad) != 0) {
            fprintf(stderr, "ringfeed-pack: cannot write %s/manifest.json\n", o.out);
            rc = 1;
        } else {
            double el = now_s() - t0;
            fprintf(stderr, "ringfeed-pack: %lld samples (%lld skipped) in %lld shards, %.1f s\n",
                    (long long)(n - nbad), (long long)nbad, (long long)nshards, el);
        }
    }
out:
    free(order);
    free(si);
    free(res);
    free(present);
    free(bads);
    rf__source_close(&s);
    return rc;
}
