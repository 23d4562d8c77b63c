/*
 * remote_tick.c - what the fetch thread does for a loader's remote shards
 * (the tick, see remote.c's opening comment for the whole): it walks the
 * want list, the head first; pins shards the cache holds, takes room and
 * the fetch lock and starts the transfers of the others, commits a finished
 * transfer (size, validator, manifest headers checked) into the cache,
 * pinned, and settles each shard READY or FAILED; when even the head finds
 * no room for STARVE_MS it gives up the pins held only for later samples.
 * Runs on the fetch thread only; state shared with the dispatcher is under
 * r->mu (remote.h), dropped around the cache's calls. Also here: the stats
 * of what the ticks did (rf__remote_stats, any thread).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "json.h"
#include "remote_int.h"
#include "remote_manifest.h"
#include "ringfeed.h"
#include "trace.h"

/* Under mu: gives up the pins held only for later samples (READY, no read
 * in flight) and defers every wanted shard, the head's aside (see above).
 * Returns the pins given up. */
static int release(rf_remote *r)
{
    int n = 0;
    for (uint32_t k = 0; k < r->nsh; k++) {
        rf_shard *s = &r->sh[k];
        if ((int64_t)k == r->head || s->inflight > 0)
            continue;
        if (s->state == SH_READY) {
            rf__remote_unpin(s);
            s->state = SH_WANTED;
            r->unpinned = 1;
            n++;
        }
        if (s->state == SH_WANTED)
            s->deferred = 1;
    }
    r->releases += n;
    return n;
}

/* ---- the room warning ------------------------------------------------------------- */

void rf__remote_room_warning(rf_remote *r, int64_t refetches, char *out, size_t cap)
{
    int loaders = atomic_load_explicit(&r->cache.loaders, memory_order_relaxed);
    snprintf(out, cap,
             "cache_limit=%llu holds %lld shards of %llu bytes for %d loader%s using %.200s: fewer "
             "than two per loader, so shards are fetched again (refetches so far: %lld); give "
             "cache_limit at least %llu plus the indexes, or use shuffle_block",
             (unsigned long long)r->cache.limit, (long long)r->cap_shards,
             (unsigned long long)r->largest, loaders, loaders == 1 ? "" : "s", r->cache.dir,
             (long long)refetches, (unsigned long long)(r->largest * 2 * (uint64_t)loaders));
}

/* Under mu: once, when refetches or a starved head show the room short and
 * cache_limit holds fewer than two shards per loader on the folder (the
 * least with which every loader's head finds room: remote.c), says so on
 * stderr; stats carry it from then on (rf__remote_stats). */
static void warn_room(rf_remote *r)
{
    int loaders = atomic_load_explicit(&r->cache.loaders, memory_order_relaxed);
    if (r->warned || r->cap_shards >= 2 * (int64_t)(loaders > 0 ? loaders : 1))
        return;
    r->warned = 1;
    char w[400];
    rf__remote_room_warning(r, r->refetches, w, sizeof w);
    fprintf(stderr, "ringfeed: warning: %s\n", w);
}

/* ---- the fetch thread ----------------------------------------------------------- */

/* Under mu: the shard's end (READY with pin_fd, or FAILED with msg). */
static void settle(rf_remote *r, uint32_t k, int pin_fd, const char *msg)
{
    rf_shard *s = &r->sh[k];
    if (msg) {
        s->state = SH_FAILED;
        free(s->err);
        s->err = strdup(msg);
        if (!s->err)
            s->err = strdup("fetch: out of memory");
    } else {
        s->state = SH_READY;
        s->pin_fd = pin_fd;
        if (s->planned + s->inflight == 0) { /* nobody wants it any more */
            rf__remote_unpin(s);
            s->state = SH_IDLE;
        }
    }
    pthread_cond_broadcast(&r->cv);
}

static void announce(rf_remote *r)
{
    pthread_mutex_lock(&r->wake_mu);
    if (r->wake)
        r->wake(r->wake_ctx);
    pthread_mutex_unlock(&r->wake_mu);
}

/* Fetch thread, without mu: 1 when shard k, whole in fd, is as its entry in
 * manifest.json says, or was not indexed from one (remote_manifest.c); else
 * 0 with msg. A copy already in the cache stays there: the shard fails in
 * this loader only (another loader, without the manifest, may read it, or a
 * newer copy may have replaced the one checked), and its caller unpins it. */
static int matches_manifest(rf_remote *r, uint32_t k, int fd, char *msg, size_t cap)
{
    return !r->man || rf__rman_check(r->man, k, fd, r->sh[k].url, r->sh[k].size, msg, cap) == 0;
}

/* Fetch thread, under mu (dropped around the sync): syncs shard k's
 * committed file (cache.c) through its duplicate s->sync_fd, which stays
 * in the shard meanwhile (fork_child closes a child's copy), set to -1
 * under mu before its plain close (the pin's lock is not the duplicate's
 * to end). */
static void sync_one(rf_remote *r, uint32_t k)
{
    rf_shard *s = &r->sh[k];
    int fd = s->sync_fd;
    char base[RF__CACHE_PATH];
    rf__cache_base(&r->cache, s->url, s->size, s->etag, base);
    const char *url = s->url; /* its own allocation: stays while r lives */
    pthread_mutex_unlock(&r->mu);
    if (rf__cache_finish(&r->cache, base, fd) != 0)
        RF_TRACE("shard %s: not synced (%s): fetched anew after a crash", url, strerror(errno));
    pthread_mutex_lock(&r->mu);
    s = &r->sh[k];
    s->sync_fd = -1;
    int late = s->late_fd;
    s->late_fd = -1;
    pthread_mutex_unlock(&r->mu);
    close(fd);
    rf__cache_unpin(late); /* after the duplicate: the file's last descriptor */
    pthread_mutex_lock(&r->mu);
    if (late >= 0)
        r->unpinned = 1; /* room may be there now */
}

/* Fetch thread, under mu: once the loader is warm, the syncs held while it
 * was cold (and a just-committed shard's); at once, those of files whose
 * pin ended (rf__remote_unpin: their room waits for it). */
static void sync_held(rf_remote *r)
{
    for (uint32_t k = 0; k < r->nsh; k++)
        if (r->sh[k].sync_fd >= 0 && (!r->cold || r->sh[k].late_fd >= 0))
            sync_one(r, k);
}

/* A transfer ended (fetch thread): commit it, pinned, or fail the shard.
 * The transfer's descriptors are moved out of the shard under mu before
 * any of them is closed: fork_child (remote.c), under mu, closes what the
 * shard holds, which then is never a number closed and reused meanwhile. */
static void transfer_done(rf_fetch_req *req, void *ctx)
{
    rf_shard *s = ctx;
    rf_remote *r = s->owner;
    uint32_t k = (uint32_t)(s - r->sh);
    pthread_mutex_lock(&r->mu);
    int fd = s->tmp_fd, lk = s->lock_fd;
    s->lock_fd = s->tmp_fd = -1;
    pthread_mutex_unlock(&r->mu);
    char msg[1100];
    int failed = req->rc != 0, sync_fd = -1;
    if (failed) {
        snprintf(msg, sizeof msg, "%s", req->err);
        rf__cache_abandon(&r->cache, s->tmp, fd);
    } else if (!matches_manifest(r, k, fd, msg, sizeof msg)) {
        failed = 1; /* never in the cache, where a read could use the wrong offsets */
        rf__cache_abandon(&r->cache, s->tmp, fd);
    } else {
        char base[RF__CACHE_PATH];
        rf__cache_base(&r->cache, s->url, s->size, s->etag, base);
        failed = rf__cache_commit(&r->cache, s->tmp, base, fd, msg, sizeof msg) != 0;
        /* the sync runs after the loader may read the shard (cache.c), on a
         * duplicate: the pin's fd is the shard's once settled, and may be
         * closed (and its number reused) meanwhile */
        if (!failed && r->cache.marks)
            sync_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    }
    RF_TRACE("shard %s: %s", failed ? "failed" : "in the cache", s->url);
    pthread_mutex_lock(&r->mu);
    if (sync_fd >= 0 && s->sync_fd >= 0)
        sync_one(r, k); /* an earlier copy's, held while cold (evicted since) */
    if (sync_fd >= 0)
        s->sync_fd = sync_fd; /* before settle: a pin it ends takes the duplicate along */
    settle(r, k, failed ? -1 : fd, failed ? msg : NULL);
    pthread_mutex_unlock(&r->mu);
    announce(r);
    rf__cache_unpin(lk); /* BASE.tar is in place: others may pin it without us */
    /* now, or while cold after the first batch: it is decoded without the
     * sync's writes too (see remote.c); nobody waits for the sync (cache.c) */
    pthread_mutex_lock(&r->mu);
    sync_held(r);
    pthread_mutex_unlock(&r->mu);
}

/* How long a shard whose open fails for want of descriptors (EMFILE,
 * ENFILE: the process opened many files of its own, or two loaders counted
 * the same free ones, remote.c) waits for some to be let go, before it
 * fails. */
#define FD_WAIT_MS 10000

/* Fetch thread: errno e of a failed open. 1 when it is a want of
 * descriptors and the shard may wait for some (see above); 0: fail. */
static int short_of_fds(rf_remote *r, int e)
{
    if (e != EMFILE && e != ENFILE)
        return 0;
    int64_t now = rf__now_ns();
    if (!r->fd_short_since) {
        r->fd_short_since = now;
        RF_TRACE("out of descriptors (%s): waiting for pins to end", strerror(e));
    }
    return now - r->fd_short_since < (int64_t)FD_WAIT_MS * 1000000;
}

/* The backoff of the folder's listing while room is refused (see above):
 * well below STARVE_MS, so that the head is tried a few times before pins
 * are released. */
#define ROOM_MS 5
#define ROOM_MAX_MS 80

/* What the tick does for one wanted shard, without mu: 1 ready (pinned in
 * *pin), 2 a transfer to start (its file in *pin, BASE.lock in *lock: the
 * caller stores them in the shard under mu), 0 wait (another loader fetches
 * it, or it is absent and may_start is 0), 3 no room (stop the walk), -1
 * failed (msg). */
static int try_shard(rf_remote *r, rf_shard *s, int may_start, int *pin, int *lock, char *msg,
                     size_t cap)
{
    char base[RF__CACHE_PATH];
    rf__cache_base(&r->cache, s->url, s->size, s->etag, base);
    int rc = rf__cache_pin(&r->cache, base, s->size, pin);
    if (rc < 0 && short_of_fds(r, errno))
        return 0;
    if (rc != 0)
        return rc > 0 ? 1
                      : (snprintf(msg, cap, "cache: %.300s.tar (%.300s): cannot open: %s", base,
                                  s->url, strerror(errno)),
                         -1);
    r->fd_short_since = 0;
    if (!may_start)
        return 0;
    if (rf__now_ns() < r->room_next_ns)
        return 3; /* refused lately: no listing yet (see above) */
    int lk = -1;
    rc = rf__cache_lock_fetch(&r->cache, base, &lk, msg, cap);
    if (rc < 0 && short_of_fds(r, errno))
        return 0;
    if (rc <= 0)
        return rc == 0 ? 0 : -1; /* msg names the lock file and why */
    /* the lock's holder may have finished just before we took it; a shard
     * still marked now was left unsynced by a dead one (cache.c) */
    if ((rc = rf__cache_pin(&r->cache, base, s->size, pin)) == 0)
        rf__cache_drop_unsynced(&r->cache, base);
    if (rc != 0) {
        int e = errno;
        rf__cache_unpin(lk);
        errno = e; /* for the message */
        return rc > 0 ? 1
                      : (snprintf(msg, cap, "cache: %.300s.tar (%.300s): cannot open: %s", base,
                                  s->url, strerror(errno)),
                         -1);
    }
    char tmp[RF__CACHE_PATH];
    int fd = -1;
    rc = rf__cache_reserve(&r->cache, base, s->size, tmp, &fd, msg, cap);
    if (rc == 0) {
        r->room_ms =
            r->room_ms ? (r->room_ms * 2 < ROOM_MAX_MS ? r->room_ms * 2 : ROOM_MAX_MS) : ROOM_MS;
        r->room_next_ns = rf__now_ns() + (int64_t)r->room_ms * 1000000;
    } else {
        r->room_ms = 0;
        r->room_next_ns = 0;
    }
    if (rc != 1) {
        int e = errno;
        rf__cache_unpin(lk);
        return rc == 0 ? 3 : rc != RF_E_LIMIT && short_of_fds(r, e) ? 0 : -1;
    }
    free(s->tmp);
    s->tmp = strdup(tmp);
    if (!s->req)
        s->req = calloc(1, sizeof *s->req);
    if (!s->tmp || !s->req) {
        snprintf(msg, cap, "fetch: out of memory");
        rf__cache_abandon(&r->cache, tmp, fd);
        rf__cache_unpin(lk);
        return -1;
    }
    *pin = fd;
    *lock = lk;
    return 2;
}

/* Under mu, dropped around the cache calls: tries wanted shard k (see
 * try_shard); returns its code. A shard READY, FAILED or FETCHING after it
 * sets *changed. */
static int want_one(rf_remote *r, uint32_t k, int may_start, int *changed)
{
    rf_shard *s = &r->sh[k];
    pthread_mutex_unlock(&r->mu);
    char msg[1100];
    int pin = -1, lock = -1;
    /* a shard that failed its manifest check fails again without a fetch:
     * another copy of the same version has the same bytes */
    int rc = r->man && rf__rman_refused(r->man, k, s->url, msg, sizeof msg)
                 ? -1
                 : try_shard(r, s, may_start, &pin, &lock, msg, sizeof msg);
    if (rc == 1 && !matches_manifest(r, k, pin, msg, sizeof msg)) {
        rf__cache_unpin(pin);
        rc = -1;
    }
    pthread_mutex_lock(&r->mu);
    if (rc == 0 || rc == 3)
        return rc;
    *changed = 1;
    if (rc == 1) {
        r->hits++;
        settle(r, k, pin, NULL);
    } else if (rc == -1) {
        settle(r, k, -1, msg);
    } else {
        r->misses++;
        r->refetches += s->seen; /* read from since the last seek, and gone */
        if (s->seen)
            warn_room(r);
        s->state = SH_FETCHING;
        s->tmp_fd = pin; /* under mu, for fork_child (see transfer_done) */
        s->lock_fd = lock;
        rf_fetch_req *q = s->req;
        memset(q, 0, sizeof *q);
        q->op = RF__FETCH_GET;
        q->url = s->url;
        q->fd = s->tmp_fd;
        q->want_size = s->size;
        q->want_etag = s->etag;
        q->done = transfer_done;
        q->ctx = s;
        RF_TRACE("GET submitted: %s", s->url);
        rf__fetch_submit(r->fetch, q);
    }
    return rc;
}

/* How long the head finds no room before pins are released: the wait of
 * ranks in step for the one behind to finish a shard, without a release. */
#define STARVE_MS 200

/* Under mu: the head first; with no room for it for STARVE_MS, release
 * (see above), again every STARVE_MS while it lasts. */
static void want_head(rf_remote *r, int *changed)
{
    int64_t h = r->head;
    if (h < 0 || r->sh[h].state != SH_WANTED || want_one(r, (uint32_t)h, 1, changed) != 3) {
        r->starve_since = 0;
        return;
    }
    int64_t now = rf__now_ns();
    if (!r->starve_since || r->starve_head != h) {
        r->starve_since = now;
        r->starve_head = h;
    }
    if (now - r->starve_since < (int64_t)STARVE_MS * 1000000)
        return;
    r->starve_since = now;
    warn_room(r);
    int n = release(r);
    pthread_mutex_unlock(&r->mu);
    r->starved_seen = rf__cache_starve(&r->cache); /* the other loaders release too */
    pthread_mutex_lock(&r->mu);
    if (n > 0 && r->head == h && r->sh[h].state == SH_WANTED)
        want_one(r, (uint32_t)h, 1, changed); /* the released shards are evictable now */
}

void rf__remote_tick(void *ctx)
{
    rf_remote *r = ctx;
    int changed = 0;
    uint64_t starved = rf__cache_starved(&r->cache);
    pthread_mutex_lock(&r->mu);
    if (starved != r->starved_seen) { /* another loader has no room for its head */
        r->starved_seen = starved;
        release(r);
    }
    if (r->unpinned) { /* room may be there now: list the folder at once */
        r->unpinned = 0;
        r->room_next_ns = 0;
    }
    sync_held(r);
    want_head(r, &changed);
    /* While this loader's dispatcher has no shard ready, its first transfer
     * runs alone: sharing the link and the CPU with the next ones would
     * delay the first batch (the cold start) by the time of theirs. Before
     * the dispatcher runs, the indexer's walks need every shard they want
     * (as many as rf__remote_walk_window), fetch_parallel at once. */
    int64_t nready = 0, nfetching = 0, fds = 0;
    for (uint32_t k = 0; k < r->nsh; k++) {
        const rf_shard *s = &r->sh[k];
        nready += s->state == SH_READY;
        nfetching += s->state == SH_FETCHING;
        fds += (s->pin_fd >= 0) + (s->lock_fd >= 0) + (s->tmp_fd >= 0) + (s->sync_fd >= 0);
    }
    /* cold, with the head's shard pinned: the dispatcher needs no other now */
    int hold = r->cold && r->head >= 0 && r->sh[r->head].state == SH_READY;
    uint32_t kept = 0, i = 0;
    int stop = 0;
    for (; i < r->nwant && !stop; i++) {
        uint32_t k = r->want[i];
        rf_shard *s = &r->sh[k];
        if (s->state != SH_WANTED || s->deferred) {
            s->queued = 0;
            continue;
        }
        if (fds + 3 > r->fd_cap) { /* no descriptors for one more (3 at most, remote.c) */
            r->want[kept++] = k;
            stop = 1;
            continue;
        }
        int may_start = !hold && (!r->dispatching || nready > 0 || nfetching == 0);
        int rc = (int64_t)k == r->head ? 0 : want_one(r, k, may_start, &changed);
        fds += rc == 1 ? 1 : rc == 2 ? 2 : 0;
        nfetching += rc == 2;
        if (rc == 0 || rc == 3) {
            r->want[kept++] = k; /* later, in the same order */
            stop = rc == 3;
            continue;
        }
        s->queued = 0;
    }
    for (; i < r->nwant; i++)
        r->want[kept++] = r->want[i];
    r->nwant = kept;
    pthread_mutex_unlock(&r->mu);
    if (changed)
        announce(r);
}

void rf__remote_stats(rf_remote *r, rf_json *j)
{
    rf_fetch_totals t;
    rf__fetch_totals(r->fetch, &t);
    pthread_mutex_lock(&r->mu);
    int64_t hits = r->hits, misses = r->misses, pinned = 0, releases = r->releases,
            refetches = r->refetches;
    int warned = r->warned;
    for (uint32_t k = 0; k < r->nsh; k++)
        pinned += r->sh[k].state == SH_READY;
    pthread_mutex_unlock(&r->mu);
    rf__json_raw(j, "\"cache_dir\": ");
    rf__json_str(j, r->cache.dir);
    rf__json_fmt(j,
                 ", \"cache_limit\": %llu, \"shards\": %u, \"pinned\": %lld, "
                 "\"cache_hits\": %lld, \"cache_misses\": %lld, \"bytes_fetched\": %lld, "
                 "\"requests\": %lld, \"retries\": %lld, \"evictions\": %lld, "
                 "\"releases\": %lld, \"refetches\": %lld, \"foreign_bytes\": %lld, "
                 "\"loaders\": %d",
                 (unsigned long long)r->cache.limit, r->nsh, (long long)pinned, (long long)hits,
                 (long long)misses, (long long)t.bytes, (long long)t.requests, (long long)t.retries,
                 (long long)atomic_load_explicit(&r->cache.evictions, memory_order_relaxed),
                 (long long)releases, (long long)refetches,
                 (long long)atomic_load_explicit(&r->cache.foreign_bytes, memory_order_relaxed),
                 atomic_load_explicit(&r->cache.loaders, memory_order_relaxed));
    if (warned) {
        char w[400];
        rf__remote_room_warning(r, refetches, w, sizeof w);
        rf__json_raw(j, ", \"warning\": ");
        rf__json_str(j, w);
    }
    if (r->man) {
        rf__json_raw(j, ", \"manifest\": ");
        rf__rman_stats(r->man, j);
    }
}
