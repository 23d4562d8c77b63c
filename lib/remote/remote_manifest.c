/*
 * remote_manifest.c - ringfeed-pack's manifest.json for remote shards (see
 * remote_manifest.h).
 *
 * At start, for each folder of the shard URLs that holds a shard without a
 * kept index: one GET of FOLDER/manifest.json (absent: 404, or 403, which
 * S3 answers for a missing key without list rights) into an anonymous
 * memory file, mapped and parsed by rf__manifest_parse on the indexing
 * thread as each GET ends (the done callback says which, in the order they
 * end). Its size is not known before: the GET is capped as bytes arrive,
 * at RF__RMAN_MAX_BYTES (fetch.h's max_size), and all folders' GETs draw
 * from one budget of RF__RMAN_TOTAL_BYTES (the manifests are all in memory
 * at once): the GET that finds it spent fails and its folder goes without
 * a manifest (stats: over_total). The folders' requests run in parallel on
 * the fetcher, RMAN_INFLIGHT at most: each holds a memory file (a
 * descriptor), made as its GET is submitted and closed once it is parsed,
 * so that a dataset of many folders never holds a descriptor per folder;
 * a dataset in one folder costs one round trip. A shard
 * whose base name and HEAD size match an entry is indexed from it by the
 * tar kind's own code (rf__source_tar_from_manifest): the same index a
 * walk of the shard would give, without the shard.
 *
 * What a walk would have found - the shard's members where the manifest
 * says, its labels as it says - is checked when the shard lands in the
 * cache (remote.c calls rf__rman_check on the fetch thread before the
 * shard counts as ready): its first and last member headers, as for local
 * shards, then a walk of all its headers (and .cls labels) whose digest
 * must be the one taken from its entry at index time (tar_check.c):
 * a shard relabelled or reordered at the same size beside an old manifest
 * is caught before any of its samples is used. A shard that fails is
 * failed for good, with a message naming its URL and manifest.json, so its
 * samples fail (or are skipped): never delivered with the manifest's
 * labels, and no byte read at an offset the shard does not have. The
 * check's inputs (the two members' names, offsets, lengths, and the
 * digest) are kept per shard; the manifests (their bytes, mapped: the
 * parse keeps no copy of the samples) are let go once indexing is over.
 *
 * An index from a manifest is not written to the cache as BASE.idx: that
 * file stands for a walk of the very bytes in the cache, and the manifest
 * costs one request per folder at the next start anyway. A kept BASE.idx
 * (from an earlier walk) is preferred to the manifest.
 */
#define _GNU_SOURCE
#include "remote_manifest.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "fetch.h"
#include "json.h"
#include "kinds.h"
#include "manifest.h"
#include "ringfeed.h"
#include "trace.h"

enum { MF_UNNEEDED = 0, MF_ABSENT = 1, MF_FAILED = 2, MF_FOUND = 3 };

typedef struct rman_folder {
    char *url;          /* FOLDER/manifest.json */
    int needed;         /* a shard here has no kept index */
    int state;          /* MF_* */
    char note[400];     /* why absent or failed */
    rf_manifest m;      /* MF_FOUND, until rf__rman_trim */
    void *map;          /* MF_FOUND: the bytes m reads, mapped until rf__rman_trim */
    int64_t shards;     /* shards indexed from it */
    int fd;             /* the GET's memory file, -1: none */
    uint64_t size;
} rman_folder;

/* What shard k's headers must say, once it is in the cache. */
typedef struct rman_end {
    char *names;       /* "key0\0ext0\0key1\0ext1\0"; NULL: not from a manifest */
    uint64_t off[2], len[2];
    uint8_t digest[32]; /* rf__tar_entry_digest of its entry */
    int labeled;        /* the digest holds the .cls labels */
    int checked;       /* fetch thread only: 1 matched, 2 did not */
    int bad;           /* fetch thread only, checked 2: the member (0, 1) not as said,
                        * or 2: another digest */
} rman_end;

/* The manifests' GETs, and which have ended in the order they did: the
 * done callback (fetch thread) appends, the indexing thread takes. */
typedef struct rman_gets {
    rf_fetch_req *q;    /* per folder */
    pthread_mutex_t mu; /* protects ended, nended */
    pthread_cond_t cv;  /* a GET ended (nended grew) */
    uint32_t *ended;    /* folders whose GET ended, in that order */
    uint32_t nended;
    uint32_t sent, taken; /* indexing thread: GETs submitted, and collected */
    uint32_t next;        /* indexing thread: the next folder to submit a GET for */
    rf_fetch *fe;         /* their fetcher; NULL: none submitted */
    /* the bytes all manifests may hold together: each GET draws what it
     * writes (fetch.h), so memory never holds more, whatever their order */
    _Atomic uint64_t budget;
} rman_gets;

struct rf_rman {
    rman_folder *f;
    uint32_t nf, n;                  /* folders, shards */
    uint32_t *folder;                /* per shard: its folder; UINT32_MAX: none (a query) */
    const rf_manifest_shard **entry; /* per shard, index time: its entry or NULL */
    rman_end *end;                   /* per shard */
    int64_t from_manifest;           /* index time; read by stats after it */
    int64_t over_total;              /* index time: folders left without one (total cap) */
    _Atomic int64_t mismatched;      /* shards that failed the check: a count, relaxed */
    rman_gets g;                     /* index time: the manifests' GETs */
};

/* The length of url's folder with its '/' (0: none that a manifest could
 * sit in: a query string, or no path). */
static size_t folder_len(const char *url)
{
    const char *path = strstr(url, "://");
    if (!path || strchr(url, '?') || !(path = strchr(path + 3, '/')))
        return 0;
    return (size_t)(strrchr(url, '/') - url) + 1;
}

/* The folder of shard url (len bytes of it): found or added; UINT32_MAX
 * on no memory. */
static uint32_t folder_of(rf_rman *m, const char *url, size_t len)
{
    for (uint32_t i = m->nf; i-- > 0;) { /* the last first: shards come by folder */
        const char *u = m->f[i].url;
        if (strlen(u) == len + strlen("manifest.json") && !memcmp(u, url, len))
            return i;
    }
    if (m->nf % 16 == 0) {
        rman_folder *nf = realloc(m->f, (m->nf + 16) * sizeof *nf);
        if (!nf)
            return UINT32_MAX;
        m->f = nf;
    }
    rman_folder *f = &m->f[m->nf];
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (!(f->url = malloc(len + sizeof "manifest.json")))
        return UINT32_MAX;
    memcpy(f->url, url, len);
    strcpy(f->url + len, "manifest.json");
    return m->nf++;
}

/* The manifest's bytes are in f->fd: parsed into f->m, or a note why not. */
static void parse(rman_folder *f)
{
    char err[300];
    void *p = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
    if (p == MAP_FAILED) {
        snprintf(f->note, sizeof f->note, "%s: cannot map %llu bytes", f->url,
                 (unsigned long long)f->size);
        f->state = MF_FAILED;
        return;
    }
    int rc = rf__manifest_parse(p, (size_t)f->size, &f->m, err, sizeof err);
    if (rc != 0) {
        rf__manifest_free(&f->m);
        munmap(p, (size_t)f->size);
        snprintf(f->note, sizeof f->note, "%s: %s", f->url, err);
        f->state = MF_FAILED;
        return;
    }
    f->map = p; /* the entries are read from it: it stays (the memory file may close) */
    f->state = MF_FOUND;
}

static void on_done(rf_fetch_req *req, void *ctx)
{
    rman_gets *g = ctx;
    pthread_mutex_lock(&g->mu);
    g->ended[g->nended++] = (uint32_t)(req - g->q);
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Folder f's GET q ended: its manifest parsed, or a note why not. The
 * bytes of one not used go back to the budget. */
static void got(rf_rman *m, rman_folder *f, const rf_fetch_req *q, _Atomic uint64_t *budget)
{
    f->state = MF_FAILED;
    if (q->rc != 0) {
        if (q->http == 404 || q->http == 403)
            f->state = MF_ABSENT;
        if (q->over == RF__FETCH_OVER_BUDGET) {
            snprintf(f->note, sizeof f->note,
                     "GET %s: over the limit of %llu bytes for all folders' manifests together",
                     f->url, (unsigned long long)RF__RMAN_TOTAL_BYTES);
            m->over_total++;
        } else {
            snprintf(f->note, sizeof f->note, "%.390s", q->err);
        }
    } else if (q->size == 0) {
        snprintf(f->note, sizeof f->note, "GET %s: empty", f->url);
    } else {
        f->size = q->size;
        parse(f);
        RF_TRACE("manifest parsed: %s", f->url);
    }
    if (f->state != MF_FOUND) /* relaxed: a count (see fetch.c's draw) */
        atomic_fetch_add_explicit(budget, q->drawn, memory_order_relaxed);
    close(f->fd);
    f->fd = -1;
}

/* GETs of manifests in flight at most (see above). */
#define RMAN_INFLIGHT 4

/* Submits the GETs of the next needed folders' manifests while fewer than
 * RMAN_INFLIGHT are out (collect takes their ends and calls it again). */
static void submit_more(rf_rman *m)
{
    rman_gets *g = &m->g;
    for (; g->next < m->nf && g->sent - g->taken < RMAN_INFLIGHT; g->next++) {
        uint32_t i = g->next;
        rman_folder *f = &m->f[i];
        if (!f->needed)
            continue;
        if ((f->fd = memfd_create("ringfeed-manifest", MFD_CLOEXEC)) < 0) {
            f->state = MF_FAILED;
            snprintf(f->note, sizeof f->note, "%s: no memory file for it", f->url);
            continue;
        }
        g->q[i] = (rf_fetch_req){.op = RF__FETCH_GET,
                                 .url = f->url,
                                 .fd = f->fd,
                                 .max_size = RF__RMAN_MAX_BYTES,
                                 .budget = &g->budget,
                                 .done = on_done,
                                 .ctx = g};
        rf__fetch_submit(g->fe, &g->q[i]);
        g->sent++;
    }
}

/* Starts the GETs (submit_more). 0 or RF_E_NOMEM (nothing submitted). */
static int submit_all(rf_rman *m, rf_remote *r)
{
    if (m->nf == 0)
        return 0; /* no folder: nothing to fetch (and calloc(0) may be NULL) */
    rman_gets *g = &m->g;
    g->q = calloc(m->nf, sizeof *g->q);
    g->ended = calloc(m->nf, sizeof *g->ended);
    if (!g->q || !g->ended)
        return RF_E_NOMEM; /* freed by rf__rman_free */
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->fe = rf__remote_fetcher(r);
    atomic_init(&g->budget, RF__RMAN_TOTAL_BYTES);
    submit_more(m);
    return 0;
}

/* How often a wait for a GET looks whether the fetch thread halted (a
 * cancelled start: no GET ends any more). */
#define HALT_POLL_MS 20

/* Waits for the GETs submitted, each manifest parsed as its GET ends; with
 * more, the next folders' GETs start as these end. Returns early when the
 * fetch thread halted (the GETs out are abandoned: their files are closed
 * by rf__rman_free). */
static void collect(rf_rman *m, int more)
{
    rman_gets *g = &m->g;
    while (g->taken < g->sent) {
        pthread_mutex_lock(&g->mu);
        while (g->nended == g->taken) {
            struct timespec t = rf__deadline_in(0, HALT_POLL_MS * 1000000L);
            if (pthread_cond_timedwait(&g->cv, &g->mu, &t) != 0 && rf__fetch_halted(g->fe)) {
                pthread_mutex_unlock(&g->mu);
                return;
            }
        }
        uint32_t i = g->ended[g->taken];
        pthread_mutex_unlock(&g->mu);
        /* its done returned: the fetch thread is done with it (or halted) */
        rf__fetch_wait(g->fe, &g->q[i]);
        got(m, &m->f[i], &g->q[i], &g->budget);
        g->taken++;
        if (more)
            submit_more(m);
    }
}

int rf__rman_start(rf_rman **out, rf_remote *r, const rf_source *s, const uint8_t *skip)
{
    *out = NULL;
    rf_rman *m = calloc(1, sizeof *m);
    if (!m)
        return RF_E_NOMEM;
    m->n = s->nfiles;
    m->folder = calloc(m->n ? m->n : 1, sizeof *m->folder);
    m->entry = calloc(m->n ? m->n : 1, sizeof *m->entry);
    m->end = calloc(m->n ? m->n : 1, sizeof *m->end);
    int rc = m->folder && m->entry && m->end ? 0 : RF_E_NOMEM;
    for (uint32_t k = 0; rc == 0 && k < m->n; k++) {
        const char *url = s->arena + s->file_off[k];
        size_t len = folder_len(url);
        m->folder[k] = len ? folder_of(m, url, len) : UINT32_MAX;
        if (len && m->folder[k] == UINT32_MAX)
            rc = RF_E_NOMEM;
        else if (len && !(skip && skip[k]))
            m->f[m->folder[k]].needed = 1;
    }
    if (rc == 0)
        rc = submit_all(m, r);
    if (rc != 0) {
        rf__rman_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void rf__rman_match(rf_rman *m, rf_remote *r, const rf_source *s, const uint8_t *skip)
{
    collect(m, 1);
    for (uint32_t k = 0; k < m->n; k++) {
        if ((skip && skip[k]) || m->folder[k] == UINT32_MAX)
            continue;
        rman_folder *f = &m->f[m->folder[k]];
        const char *url = s->arena + s->file_off[k], *etag;
        uint64_t size = rf__remote_shard(r, k, &etag);
        if (f->state == MF_FOUND)
            m->entry[k] = rf__manifest_find(&f->m, strrchr(url, '/') + 1, size);
    }
}

int rf__rman_covers(const rf_rman *m, uint32_t k)
{
    return m && m->entry && m->entry[k] != NULL;
}

int rf__rman_index(rf_rman *m, rf_source *s, uint32_t k, const rf_source_opts *o,
                   int64_t *maxlabel)
{
    if (!rf__rman_covers(m, k))
        return 1;
    rman_folder *f = &m->f[m->folder[k]];
    rman_end *e = &m->end[k];
    e->labeled = !o->unlabeled;
    if (rf__tar_entry_digest(&f->m, m->entry[k], e->labeled, e->digest) != 0)
        return 1;
    rf_tar_ends t;
    rf__tar_manifest_ends(&f->m, m->entry[k], &t);
    size_t l[4] = {strlen(t.key[0]) + 1, strlen(t.ext[0]) + 1, strlen(t.key[1]) + 1,
                   strlen(t.ext[1]) + 1};
    const char *src[4] = {t.key[0], t.ext[0], t.key[1], t.ext[1]};
    char *names = malloc(l[0] + l[1] + l[2] + l[3]);
    char *url = strdup(s->arena + s->file_off[k]); /* the arena moves as samples are added */
    char err[512];
    int rc = names && url ? rf__source_tar_from_manifest(s, k, url, o, &f->m, m->entry[k],
                                                         maxlabel, err, sizeof err)
                          : 1;
    free(url);
    if (rc != 0) {
        free(names);
        return 1;
    }
    for (size_t i = 0, at = 0; i < 4; at += l[i], i++)
        memcpy(names + at, src[i], l[i]);
    e->names = names;
    for (int i = 0; i < 2; i++) {
        e->off[i] = t.off[i];
        e->len[i] = t.len[i];
    }
    f->shards++;
    m->from_manifest++;
    return 0;
}

void rf__rman_trim(rf_rman *m)
{
    if (!m)
        return;
    for (uint32_t i = 0; i < m->nf; i++) {
        rman_folder *f = &m->f[i];
        rf__manifest_free(&f->m);
        if (f->map)
            munmap(f->map, (size_t)f->size);
        f->map = NULL;
    }
    free(m->entry);
    m->entry = NULL;
}

int rf__rman_check(rf_rman *m, uint32_t k, int fd, const char *url, uint64_t size, char *msg,
                   size_t cap)
{
    rman_end *e = &m->end[k];
    if (!e->names || e->checked == 1)
        return 0;
    const char *p = e->names, *v[4];
    for (int i = 0; i < 4; i++, p += strlen(p) + 1)
        v[i] = p;
    rf_tar_ends t = {.key = {v[0], v[2]},
                     .ext = {v[1], v[3]},
                     .off = {e->off[0], e->off[1]},
                     .len = {e->len[0], e->len[1]}};
    if (e->checked == 0) {
        int bad = 0;
        uint8_t d[32];
        if (!rf__tar_ends_ok(fd, size, &t, &bad))
            e->bad = bad;
        else if (rf__tar_shard_digest(fd, size, e->labeled, d) != 0 ||
                 memcmp(d, e->digest, sizeof d) != 0)
            e->bad = 2;
        else {
            e->checked = 1;
            return 0;
        }
        atomic_fetch_add_explicit(&m->mismatched, 1, memory_order_relaxed);
        e->checked = 2;
    }
    int bad = e->bad;
    char what[600];
    if (bad < 2)
        snprintf(
            what, sizeof what, "the header before offset %llu is not member %s.%s of %llu bytes",
            (unsigned long long)t.off[bad], t.key[bad], t.ext[bad], (unsigned long long)t.len[bad]);
    else
        snprintf(what, sizeof what,
                 "its members or labels are not those its entry lists (rewritten since the "
                 "manifest was written)");
    snprintf(msg, cap,
             "source: %s does not match manifest.json (%s): %s, so the index taken from the "
             "manifest is wrong for this shard and none of its samples is read (repack the "
             "folder, or remove its manifest.json)",
             url, m->f[m->folder[k]].url, what);
    return RF_E_SOURCE;
}

int rf__rman_refused(rf_rman *m, uint32_t k, const char *url, char *msg, size_t cap)
{
    /* checked 2: rf__rman_check fails at once, without reading fd */
    return m->end[k].checked == 2 && rf__rman_check(m, k, -1, url, 0, msg, cap) != 0;
}

void rf__rman_stats(const rf_rman *m, rf_json *j)
{
    int64_t count[4] = {0};
    for (uint32_t i = 0; i < m->nf; i++)
        count[m->f[i].state]++;
    rf__json_fmt(j,
                 "{\"folders\": %u, \"found\": %lld, \"absent\": %lld, \"failed\": %lld, "
                 "\"shards\": %lld, \"mismatched\": %lld, \"over_total\": %lld, "
                 "\"notes\": [",
                 m->nf, (long long)count[MF_FOUND], (long long)count[MF_ABSENT],
                 (long long)count[MF_FAILED], (long long)m->from_manifest,
                 (long long)atomic_load_explicit(&m->mismatched, memory_order_relaxed),
                 (long long)m->over_total);
    /* one line per folder (the first 16): what became of its manifest */
    for (uint32_t i = 0; i < m->nf && i < 16; i++) {
        const rman_folder *f = &m->f[i];
        char line[600];
        if (f->state == MF_FOUND)
            snprintf(line, sizeof line, "%s: found, %lld shards indexed from it", f->url,
                     (long long)f->shards);
        else if (f->state == MF_UNNEEDED)
            snprintf(line, sizeof line, "%s: not fetched (every shard's index was kept)",
                     f->url);
        else
            snprintf(line, sizeof line, "%s: %s (%.400s)", f->url,
                     f->state == MF_ABSENT ? "none" : "not used", f->note);
        rf__json_raw(j, i ? ", " : "");
        rf__json_str(j, line);
    }
    rf__json_raw(j, "]}");
}

void rf__rman_free(rf_rman *m)
{
    if (!m)
        return;
    collect(m, 0); /* GETs still out (a start that failed after rf__rman_start) */
    if (m->g.fe) {
        pthread_mutex_destroy(&m->g.mu);
        pthread_cond_destroy(&m->g.cv);
    }
    free(m->g.q);
    free(m->g.ended);
    m->g.q = NULL;
    m->g.ended = NULL;
    rf__rman_trim(m);
    for (uint32_t i = 0; i < m->nf; i++) {
        free(m->f[i].url);
        if (m->f[i].fd >= 0)
            close(m->f[i].fd);
    }
    for (uint32_t k = 0; m->end && k < m->n; k++)
        free(m->end[k].names);
    free(m->f);
    free(m->folder);
    free(m->end);
    free(m);
}
