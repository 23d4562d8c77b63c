/*
 * remote.c - a loader's remote shards: wants, pins, the dispatcher's
 * lookahead (see remote.h); the fetch thread's tick is in remote_tick.c,
 * the state both share in remote_int.h.
 *
 * A shard goes IDLE -> WANTED (in the want list, in the order asked) ->
 * READY (pinned), through FETCHING when this loader transfers it, or FAILED
 * (the error is kept and every sample of the shard reports it until the
 * next seek or epoch, after which the shard is IDLE again once its last use
 * ends: a transient network failure costs one epoch's samples of the shard,
 * not the rest of the run).
 * The tick walks the want list in order: a shard already in the cache is
 * pinned; one that another loader is fetching (its BASE.lock is held) waits;
 * otherwise this loader takes the lock and room (evicting unpinned shards)
 * and starts the GET into a temporary file, which the completion checks
 * (size, validator: fetch.c; a shard indexed from manifest.json, its
 * headers: remote_manifest.c), renames into place, pinned, and announces
 * (only complete files ever carry a shard's name); the sync to disk comes
 * after (cache.c: the file is marked until then), and while the loader is
 * cold, after its first batch (a shard whose last use ends before then is
 * synced at once, its pin held until the sync: rf__remote_unpin).
 * A shard that finds no room stops the walk, so that room goes to shards in
 * the order they are needed. At index time (no dispatcher yet) the
 * indexer's walks want a window of shards (source_remote.c), fetched up to
 * RF_P_FETCH_PARALLEL at once. Once the dispatcher runs, while no shard of
 * the loader is ready, one transfer runs at a time (the cold start's first
 * batch waits for one shard at the link's full speed); then up to
 * RF_P_FETCH_PARALLEL. Once the
 * dispatcher runs, and until its first batch is complete (rf__remote_warm),
 * transfers for later samples also wait while the dispatcher has the shards
 * it needs now: the first batch is decoded without their traffic and
 * writes on the link and the CPUs (the cold start: one transfer, then one
 * batch's decoding).
 *
 * The head (the shard of the sample the dispatcher waits on, or at index
 * time the one the indexer waits on) is tried first. When even it finds no room for STARVE_MS, the pins held only for later samples
 * are in the way (this loader's, when the folder holds fewer shards than
 * cache_limit / largest shard, e.g. beside the indexes; or another loader's
 * on the node): this loader releases its own (unpins READY shards with no
 * read in flight; they and its other wanted shards are deferred: wanted
 * again only once they are the head) and bumps the folder's starvation
 * count, on which every other loader does the same (cache.h). A loader
 * then holds at most its head's pin and its reads', so the head of each
 * loader finds room once the limit holds two shards per loader: no cycle of
 * loaders waiting for each other's room. The cost is refetches (stats:
 * releases, refetches), which a cache smaller than the data brings under
 * the global shuffle (every shard is needed all the time); shuffle_block
 * reads a few shards at a time and never needs them.
 *
 * Cache calls (flock, the folder's listing, rename) run on the fetch thread
 * without r->mu: only that thread moves a shard out of WANTED or FETCHING,
 * so the state it works on cannot change under it; uses can, and are looked
 * at again when the lock is retaken. While room is refused, the folder is
 * listed again only after a backoff (ROOM_MS doubling to ROOM_MAX_MS), or at
 * once when this loader unpinned a shard.
 *
 * Descriptors: a pinned shard holds one (a transfer two, a held sync one
 * more), so the shards wanted at once are bounded by what RLIMIT_NOFILE
 * leaves (fd_room below, raised to the hard limit first) as well as by the
 * cache limit, and the tick starts no shard past it; an open that fails
 * with EMFILE anyway waits (remote_tick.c).
 *
 * Cancel (rf_remote_opts.cancel, set by rf_loader_cancel): the fetch thread
 * halts within its tick period, abandoning its requests, and every wait of
 * the index time (rf__remote_wait here, the HEADs' and listings' in
 * source_remote.c, the manifests' in remote_manifest.c) looks at the flag
 * at least every CANCEL_POLL_MS and returns RF_E_STOPPED; rf__remote_destroy
 * then removes the transfer files and lets the locks go as always.
 *
 * Fork: the descriptors of pins, fetch locks and transfer files are copied
 * into a forked child (a DataLoader worker forks the trainer), and a flock
 * belongs to the open file, shared by the copies: a child that never
 * destroys the loader would keep the shards pinned for ever. A
 * pthread_atfork handler closes the child's copies of every live remote's
 * descriptors (under each r->mu, taken by the prepare handler so that the
 * copy is consistent); the parent's locks stay, and its unpins end the
 * locks with LOCK_UN (cache.c) for the descriptors the fetch thread held in
 * hand at the fork.
 */
#define _GNU_SOURCE
#include "remote_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clock.h"
#include "remote_manifest.h"
#include "ringfeed.h"
#include "source.h"
#include "trace.h"


/* ---- fork --------------------------------------------------------------------- */

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER; /* protects live; before any r->mu */
static rf_remote *live;                                     /* (live_mu) this process's remotes */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
    pthread_mutex_lock(&live_mu);
    for (rf_remote *r = live; r; r = r->next_live)
        pthread_mutex_lock(&r->mu);
}

static void fork_parent(void)
{
    for (rf_remote *r = live; r; r = r->next_live)
        pthread_mutex_unlock(&r->mu);
    pthread_mutex_unlock(&live_mu);
}

static void close_copy(int *fd)
{
    if (*fd >= 0)
        close(*fd); /* no LOCK_UN: the lock is the parent's */
    *fd = -1;
}

/* The child's copies of the descriptors go; the memory stays for
 * rf__remote_destroy, which in a child frees memory only. */
static void fork_child(void)
{
    for (rf_remote *r = live; r; r = r->next_live) {
        for (uint32_t k = 0; k < r->nsh; k++) {
            close_copy(&r->sh[k].pin_fd);
            close_copy(&r->sh[k].lock_fd);
            close_copy(&r->sh[k].tmp_fd);
            close_copy(&r->sh[k].sync_fd);
            close_copy(&r->sh[k].late_fd);
        }
        close_copy(&r->cache.dir_fd);
        close_copy(&r->cache.lease_fd);
        close_copy(&r->cache.lock_fd);
        close_copy(&r->cache.starved_fd);
        pthread_mutex_unlock(&r->mu);
    }
    pthread_mutex_unlock(&live_mu);
}

static void atfork_register(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ---- descriptors --------------------------------------------------------------- */

/* A soft RLIMIT_NOFILE below the hard one is raised to it, once per process
 * (to FD_RAISE_MAX at most: select() and programs that walk every possible
 * descriptor suffer from an enormous limit). */
#define FD_RAISE_MAX 65536
static pthread_once_t nofile_once = PTHREAD_ONCE_INIT;

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= FD_RAISE_MAX)
        return;
    rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > FD_RAISE_MAX ? FD_RAISE_MAX
                                                                             : rl.rlim_max;
    if (want > rl.rlim_cur) {
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            RF_TRACE("RLIMIT_NOFILE raised to %llu", (unsigned long long)want);
    }
}

/* Descriptors open in this process now (/proc/self/fd), or -1. */
static int64_t fds_open(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int64_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the listing's own */
}

/* What the rest of the process may open beside the shards: curl's
 * connections (its cache keeps up to 2 * parallel + 16; fetch.c), the
 * reader's, the caller's own files (16). */
#define FD_KEEP(parallel) (2 * (int64_t)(parallel) + 32)

/* The descriptors this loader's shards may hold at once: what the soft
 * limit leaves beside those open now and FD_KEEP; 3 at least (one shard,
 * fetched: its file, its lock, a held sync). Two loaders made one after the
 * other both count what is free before either opened its shards: a shard
 * whose open fails for want of descriptors then waits (remote_tick.c). */
static int64_t fd_room(int parallel)
{
    pthread_once(&nofile_once, raise_nofile);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return INT64_MAX / 4;
    int64_t lim = (int64_t)rl.rlim_cur, open = fds_open();
    if (open < 0)
        open = lim / 4;
    int64_t room = lim - open - FD_KEEP(parallel);
    return room < 3 ? 3 : room;
}

int rf__remote_create(rf_remote **out, const rf_remote_opts *o, char *err, size_t errcap)
{
    *out = NULL;
    rf_remote *r = calloc(1, sizeof *r);
    if (!r)
        return RF_E_NOMEM;
    r->pid = getpid();
    r->cap_shards = 1;
    r->head = -1;
    r->cancel = o->cancel;
    r->parallel = o->parallel > 0 ? o->parallel : 4;
    int rc = rf__cache_open(&r->cache, o->cache_dir, o->cache_limit, err, errcap);
    if (rc < 0) {
        free(r);
        return rc;
    }
    rf_fetch_opts fo = {.retries = o->retries,
                        .timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 30000,
                        .parallel = r->parallel,
                        .cancel = o->cancel};
    rc = rf__fetch_create(&r->fetch, &fo, err, errcap);
    if (rc < 0) {
        rf__cache_close(&r->cache);
        free(r);
        return rc;
    }
    /* after the cache's own descriptors are open: they are counted */
    r->fd_cap = fd_room(r->parallel);
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->wake_mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    /* before any request starts the fetch thread, which reads it */
    rf__fetch_set_tick(r->fetch, rf__remote_tick, r, 20);
    pthread_once(&atfork_once, atfork_register);
    pthread_mutex_lock(&live_mu);
    r->next_live = live;
    live = r;
    pthread_mutex_unlock(&live_mu);
    *out = r;
    return 0;
}

void rf__remote_destroy(rf_remote *r)
{
    if (!r)
        return;
    int forked = getpid() != r->pid;
    pthread_mutex_lock(&live_mu);
    for (rf_remote **pp = &live; *pp; pp = &(*pp)->next_live)
        if (*pp == r) {
            *pp = r->next_live;
            break;
        }
    pthread_mutex_unlock(&live_mu);
    rf__fetch_destroy(r->fetch, forked); /* no tick or completion runs after this */
    for (uint32_t k = 0; k < r->nsh; k++) {
        rf_shard *s = &r->sh[k];
        if (forked) { /* closed at the fork already (fork_child); the locks are the parent's */
            close_copy(&s->tmp_fd);
            close_copy(&s->pin_fd);
            close_copy(&s->lock_fd);
            close_copy(&s->late_fd);
        } else if (s->state == SH_FETCHING) {
            rf__cache_abandon(&r->cache, s->tmp, s->tmp_fd);
        }
        if (forked) {
            close_copy(&s->sync_fd);
        } else if (s->sync_fd >= 0) { /* held while cold: the shard is whole, sync it */
            char base[RF__CACHE_PATH];
            rf__cache_base(&r->cache, s->url, s->size, s->etag, base);
            rf__cache_finish(&r->cache, base, s->sync_fd);
            close(s->sync_fd); /* a duplicate: the pin's lock is not its to end */
        }
        rf__cache_unpin(s->pin_fd);
        rf__cache_unpin(s->late_fd);
        rf__cache_unpin(s->lock_fd);
        if (s->req)
            free(s->req->body);
        free(s->req);
        free(s->tmp);
        free(s->url);
        free(s->err);
    }
    free(r->sh);
    free(r->want);
    rf__rman_free(r->man);
    rf__cache_close(&r->cache);
    if (!forked) {
        pthread_mutex_destroy(&r->mu);
        pthread_mutex_destroy(&r->wake_mu);
        pthread_cond_destroy(&r->cv);
    }
    free(r);
}

rf_fetch *rf__remote_fetcher(rf_remote *r)
{
    return r->fetch;
}

rf_cache *rf__remote_cache(rf_remote *r)
{
    return &r->cache;
}

/* Under r->mu: the tick may run already (the HEAD requests of the index
 * start the fetch thread), and a release walks every shard. */
int rf__remote_add(rf_remote *r, const char *url, uint64_t size, const char *etag)
{
    char *u = strdup(url);
    if (!u)
        return RF_E_NOMEM;
    pthread_mutex_lock(&r->mu);
    if (r->nsh == r->cap) {
        uint32_t cap = r->cap ? r->cap * 2 : 64;
        rf_shard *sh = realloc(r->sh, cap * sizeof *sh);
        uint32_t *w = sh ? realloc(r->want, cap * sizeof *w) : NULL;
        if (sh)
            r->sh = sh;
        if (!w) {
            pthread_mutex_unlock(&r->mu);
            free(u);
            return RF_E_NOMEM;
        }
        r->want = w;
        r->cap = cap;
    }
    rf_shard *s = &r->sh[r->nsh];
    memset(s, 0, sizeof *s);
    s->pin_fd = s->lock_fd = s->tmp_fd = s->sync_fd = s->late_fd = -1;
    s->owner = r;
    s->size = size;
    snprintf(s->etag, sizeof s->etag, "%s", etag);
    s->url = u;
    r->nsh++;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

uint64_t rf__remote_shard(rf_remote *r, uint32_t k, const char **etag)
{
    *etag = r->sh[k].etag;
    return r->sh[k].size;
}

void rf__remote_base(rf_remote *r, uint32_t k, char *base)
{
    rf__cache_base(&r->cache, r->sh[k].url, r->sh[k].size, r->sh[k].etag, base);
}

void rf__remote_set_manifest(rf_remote *r, struct rf_rman *m)
{
    pthread_mutex_lock(&r->mu);
    rf__rman_free(r->man);
    r->man = m;
    pthread_mutex_unlock(&r->mu);
}

int rf__remote_plan_room(rf_remote *r, char *err, size_t errcap)
{
    uint64_t big = 1;
    uint8_t *ids = malloc((size_t)r->nsh * RF__CACHE_ID + 1);
    if (!ids)
        return RF_E_NOMEM;
    for (uint32_t k = 0; k < r->nsh; k++) {
        if (r->sh[k].size > big)
            big = r->sh[k].size;
        rf__cache_id(r->sh[k].url, r->sh[k].size, r->sh[k].etag, ids + (size_t)k * RF__CACHE_ID);
    }
    pthread_mutex_lock(&r->mu); /* the tick's room warning reads them */
    r->largest = big;
    r->cap_shards = (int64_t)(r->cache.limit / big);
    /* each wanted shard holds up to 3 descriptors (see fd_room) */
    if (r->cap_shards > r->fd_cap / 3)
        r->cap_shards = r->fd_cap / 3;
    if (r->cap_shards < 1)
        r->cap_shards = 1;
    pthread_mutex_unlock(&r->mu);
    RF_TRACE("room: %lld shards at once (%lld descriptors)", (long long)r->cap_shards,
             (long long)r->fd_cap);
    /* the versions in use, before any index is read or shard fetched: no
     * loader on the node evicts their indexes meanwhile (cache_room.c) */
    int rc = rf__cache_lease(&r->cache, ids, r->nsh, big, err, errcap);
    free(ids);
    return rc;
}

int64_t rf__remote_walk_window(rf_remote *r)
{
    pthread_mutex_lock(&r->mu);
    int64_t w = r->parallel + 1;
    if (w > r->cap_shards)
        w = r->cap_shards;
    pthread_mutex_unlock(&r->mu);
    return w;
}

/* ---- uses (under mu) --------------------------------------------------------- */

static void queue_want(rf_remote *r, uint32_t k)
{
    if (!r->sh[k].queued) {
        r->sh[k].queued = 1;
        r->want[r->nwant++] = k;
    }
}

static void used(rf_remote *r, uint32_t k)
{
    rf_shard *s = &r->sh[k];
    if (s->planned + s->inflight != 1)
        return; /* it had uses already */
    r->nused++;
    if (s->state == SH_IDLE) {
        s->state = SH_WANTED;
        queue_want(r, k);
        rf__fetch_wake(r->fetch);
    }
}

void rf__remote_unpin(rf_shard *s)
{
    int fd = s->pin_fd;
    s->pin_fd = -1; /* before the close: see transfer_done */
    if (s->sync_fd >= 0 && s->late_fd < 0) {
        s->late_fd = fd; /* sync_held ends it (remote_tick.c) */
        return;
    }
    /* (a later pin of a file whose earlier pin waits: the lock of that
     * one keeps the file meanwhile) */
    rf__cache_unpin(fd);
}

/* A use ended: with none left, a READY shard is unpinned (the cache may
 * evict it now: the fetch thread is woken to look for room again). */
/* A FAILED shard from before the last seek becomes IDLE: wanted again,
 * it is tried again. Its message goes (no job holds it: no uses). */
static void fail_over(rf_shard *s)
{
    s->state = SH_IDLE;
    s->retry = 0;
    free(s->err);
    s->err = NULL;
}

static void unused(rf_remote *r, uint32_t k)
{
    rf_shard *s = &r->sh[k];
    if (s->planned + s->inflight != 0)
        return;
    r->nused--;
    if (s->state == SH_READY) {
        rf__remote_unpin(s);
        s->state = SH_IDLE;
        r->unpinned = 1;
        rf__fetch_wake(r->fetch);
    } else if (s->state == SH_WANTED) {
        s->state = SH_IDLE; /* the tick drops it from the want list */
        s->deferred = 0;
    } else if (s->state == SH_FAILED && s->retry) {
        fail_over(s);
    }
}

void rf__remote_acquire(rf_remote *r, uint32_t k)
{
    pthread_mutex_lock(&r->mu);
    r->sh[k].inflight++;
    used(r, k);
    pthread_mutex_unlock(&r->mu);
}

void rf__remote_release(rf_remote *r, uint32_t k)
{
    pthread_mutex_lock(&r->mu);
    r->sh[k].inflight--;
    unused(r, k);
    pthread_mutex_unlock(&r->mu);
}

int rf__remote_cancelled(rf_remote *r, char *err, size_t errcap)
{
    if (!r->cancel || !atomic_load(r->cancel))
        return 0;
    snprintf(err, errcap, "source: the start was cancelled (rf_loader_cancel)");
    return 1;
}

/* How often a wait looks at the cancel flag, which is set without a wake. */
#define CANCEL_POLL_MS 20

int rf__remote_wait(rf_remote *r, uint32_t k, char *err, size_t errcap)
{
    pthread_mutex_lock(&r->mu);
    /* at index time no dispatcher names a head: the shard waited for is
     * one, so that when it finds no room the pins other loaders hold for
     * later samples are given up as for a dispatcher's (remote_tick.c) */
    int head = r->head < 0 && r->sh[k].state == SH_WANTED;
    if (head) {
        r->head = k;
        r->sh[k].deferred = 0;
        queue_want(r, k);
        rf__fetch_wake(r->fetch);
    }
    int rc = 0;
    while (r->sh[k].state != SH_READY && r->sh[k].state != SH_FAILED) {
        if (rf__remote_cancelled(r, err, errcap)) {
            rc = RF_E_STOPPED;
            break;
        }
        struct timespec t = rf__deadline_in(0, CANCEL_POLL_MS * 1000000L);
        pthread_cond_timedwait(&r->cv, &r->mu, &t);
    }
    if (head && r->head == (int64_t)k)
        r->head = -1;
    if (rc == 0 && r->sh[k].state != SH_READY) {
        snprintf(err, errcap, "%s", r->sh[k].err);
        rc = RF_E_SOURCE;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* ---- the dispatcher's side ------------------------------------------------------ */

void rf__remote_set_wake(rf_remote *r, void (*fn)(void *), void *ctx)
{
    pthread_mutex_lock(&r->wake_mu);
    r->wake = fn;
    r->wake_ctx = ctx;
    pthread_mutex_unlock(&r->wake_mu);
    pthread_mutex_lock(&r->mu);
    r->cold = fn != NULL; /* a dispatcher from now on, without a batch yet */
    r->dispatching |= fn != NULL;
    pthread_mutex_unlock(&r->mu);
}

void rf__remote_warm(rf_remote *r)
{
    pthread_mutex_lock(&r->mu);
    int was = r->cold;
    r->cold = 0;
    pthread_mutex_unlock(&r->mu);
    if (was)
        rf__fetch_wake(r->fetch); /* the held transfers may start */
}

void rf__remote_seek(rf_remote *r, int64_t batch)
{
    pthread_mutex_lock(&r->mu);
    for (uint32_t k = 0; k < r->nsh; k++) {
        rf_shard *s = &r->sh[k];
        s->seen = 0;
        if (s->state == SH_FAILED)
            s->retry = 1; /* tried again once its last use ends */
        if (s->planned > 0) {
            s->planned = 0;
            unused(r, k);
        } else if (s->state == SH_FAILED && s->inflight == 0) {
            fail_over(s);
        }
    }
    r->head = -1;
    r->cur_batch = batch;
    r->cur_pos = 0;
    pthread_mutex_unlock(&r->mu);
}

/* Samples walked per call at most: the dispatcher holds the loader's mutex. */
#define LOOKAHEAD_STEP 4096

void rf__remote_lookahead(rf_remote *r, const rf_source *src, int64_t num_batches,
                          rf_remote_batch_fn *batch, const void *ctx)
{
    pthread_mutex_lock(&r->mu);
    for (int walked = 0; walked < LOOKAHEAD_STEP && r->cur_batch < num_batches;) {
        const int64_t *idx;
        int64_t count = batch(ctx, r->cur_batch, &idx);
        if (r->cur_pos >= count) {
            r->cur_batch++;
            r->cur_pos = 0;
            continue;
        }
        int64_t i = idx[r->cur_pos];
        const rf_source *ps = rf__source_at(src, &i);
        if (ps->remote != r) { /* a sample of another source of a mixture */
            r->cur_pos++;
            walked++;
            continue;
        }
        uint32_t k = ps->shard[i];
        rf_shard *s = &r->sh[k];
        if (s->planned + s->inflight == 0 && r->nused >= r->cap_shards)
            break; /* the cache holds no more: wait for a shard to be done with */
        s->planned++;
        used(r, k);
        r->cur_pos++;
        walked++;
    }
    pthread_mutex_unlock(&r->mu);
}

int rf__remote_take(rf_remote *r, const rf_source *src, int64_t sample, const char **why)
{
    uint32_t k = src->shard[sample];
    rf_shard *s = &r->sh[k];
    pthread_mutex_lock(&r->mu);
    /* planned: the lookahead walked it (every walked sample comes before the
     * cursor, and the dispatcher hands them on in the same order) */
    int rc = s->planned == 0 ? 0 : s->state == SH_READY ? 1 : s->state == SH_FAILED ? -1 : 0;
    if (rc != 0) {
        s->planned--;
        s->inflight++;
        s->seen = 1;
        if (rc < 0)
            *why = s->err;
    } else if (s->planned > 0 && (int64_t)k != r->head) {
        r->head = k; /* the tick tries it first */
        if (s->state == SH_WANTED) {
            s->deferred = 0;
            queue_want(r, k);
        }
        rf__fetch_wake(r->fetch);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int rf__remote_pin_fd(rf_remote *r, const rf_source *src, int64_t sample)
{
    pthread_mutex_lock(&r->mu);
    int fd = r->sh[src->shard[sample]].pin_fd;
    pthread_mutex_unlock(&r->mu);
    return fd;
}

int rf__remote_shard_fd(rf_remote *r, uint32_t k)
{
    pthread_mutex_lock(&r->mu);
    int fd = r->sh[k].pin_fd;
    pthread_mutex_unlock(&r->mu);
    return fd;
}

void rf__remote_untake(rf_remote *r, const rf_source *src, int64_t sample)
{
    rf_shard *s = &r->sh[src->shard[sample]];
    pthread_mutex_lock(&r->mu);
    s->inflight--;
    s->planned++;
    pthread_mutex_unlock(&r->mu);
}

void rf__remote_done(rf_remote *r, const rf_source *src, int64_t sample)
{
    uint32_t k = src->shard[sample];
    pthread_mutex_lock(&r->mu);
    r->sh[k].inflight--;
    unused(r, k);
    pthread_mutex_unlock(&r->mu);
}
