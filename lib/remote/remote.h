/*
 * remote.h - a loader's remote shards: which are wanted, fetched, pinned in
 * the local cache (cache.c), and the lookahead that asks for them in the
 * order the sampler will read them. Transfers run on the fetch thread
 * (fetch.c), which also runs this file's tick.
 *
 * A shard is wanted while it has uses: samples the lookahead walked and the
 * dispatcher has not handed to the reader yet (planned), samples being read
 * or decoded (inflight), or the indexer at start. A wanted shard is pinned in the cache
 * once it is there (found, or fetched by this loader or another on the
 * node); with no use left it is unpinned, and the cache may evict it.
 *
 * The lookahead walks this rank's order from the dispatcher's position and
 * plans samples while fewer than cap_shards shards (what fits in the cache
 * limit) are wanted, so a cache smaller than the dataset holds the shards
 * of the next samples, and the dispatcher hands a sample to the reader only
 * when its shard is pinned: reads are of complete local files, and decode,
 * order and output are those of local shards. When the room runs out before
 * the next sample's shard is in, pins held for later samples are given up
 * (remote.c: release), by this loader and the others on the node.
 *
 * Lock rules: r->mu protects the shards' states, uses and files, the want
 * list and the cursor. Order: the loader's mutex, then r->mu, then the fetch
 * queue's lock. The fetch thread takes r->mu in its tick and completions and
 * calls the wake callback (which takes the loader's mutex) without it, under
 * r->wake_mu (order: wake_mu, then the loader's mutex).
 */
#ifndef RF_REMOTE_H
#define RF_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "fetch.h"

struct rf_source;

typedef struct rf_remote_opts {
    const char *cache_dir; /* NULL: the default folder (cache.h) */
    uint64_t cache_limit;  /* 0: auto (cache.h) */
    int retries;
    int64_t timeout_ms;
    int parallel;
    /* set by any thread (NULL: never): the start is cancelled; the fetch
     * thread halts and every wait here returns RF_E_STOPPED (remote.c) */
    const _Atomic int *cancel;
} rf_remote_opts;

typedef struct rf_remote rf_remote;

/* Opens the cache and makes the fetcher; sizes the descriptors the shards
 * may hold (remote.c: raising RLIMIT_NOFILE's soft limit to the hard one
 * first). 0 or a negative RF_E_* (err). */
int rf__remote_create(rf_remote **out, const rf_remote_opts *o, char *err, size_t errcap);
/* Stops the fetch thread, unpins, frees. A forked child frees memory only. */
void rf__remote_destroy(rf_remote *r);

rf_fetch *rf__remote_fetcher(rf_remote *r);
rf_cache *rf__remote_cache(rf_remote *r);

/* Index time (one thread). Adds shard number nshards (in order); 0 or
 * RF_E_NOMEM. */
int rf__remote_add(rf_remote *r, const char *url, uint64_t size, const char *etag);
/* Shard k's size (and *etag: its validator, valid while r lives). */
uint64_t rf__remote_shard(rf_remote *r, uint32_t k, const char **etag);
/* The cache's BASE of shard k (RF__CACHE_PATH bytes). */
void rf__remote_base(rf_remote *r, uint32_t k, char *base);
/* Index time: wants shard k (fetched in the order asked, as room allows). */
void rf__remote_acquire(rf_remote *r, uint32_t k);
/* Waits until shard k is pinned: 0, RF_E_SOURCE with the fetch error, or
 * RF_E_STOPPED when the start was cancelled (rf_remote_opts.cancel). */
int rf__remote_wait(rf_remote *r, uint32_t k, char *err, size_t errcap);
/* Index time, once rf__remote_plan_room ran: how many shards the indexer
 * may want at once for its walks (the one walked and those fetched ahead):
 * fetch_parallel + 1, within the cache's room and the descriptors. */
int64_t rf__remote_walk_window(rf_remote *r);
/* 1 when the start was cancelled; err says so. */
int rf__remote_cancelled(rf_remote *r, char *err, size_t errcap);
/* Ends rf__remote_acquire's use. */
void rf__remote_release(rf_remote *r, uint32_t k);
/* Index time: hands r the manifest state (remote_manifest.h; NULL: none),
 * which r then owns: its check runs on every shard pinned from now on. */
struct rf_rman;
void rf__remote_set_manifest(rf_remote *r, struct rf_rman *m);
/* Once all shards are added: sets how many shards the lookahead may want at
 * once (what the cache limit holds, from the largest shard, and what the
 * descriptors allow), and declares them in use to the cache folder
 * (rf__cache_lease). 0, or a negative RF_E_* (err: RF_E_LIMIT when what the
 * folder holds and the cache may not evict leaves no room for a shard). */
int rf__remote_plan_room(rf_remote *r, char *err, size_t errcap);
/* Shard k's pinned file, while rf__remote_wait's pin lasts: a shard is read
 * through its pin, never by its name again (cache.h). */
int rf__remote_shard_fd(rf_remote *r, uint32_t k);

/* The dispatcher calls (under the loader's mutex unless said). The wake is
 * called on the fetch thread when a shard becomes ready or fails; once
 * set_wake (without the loader's mutex) returns, the old one is not running
 * and will not be called. */
void rf__remote_set_wake(rf_remote *r, void (*fn)(void *), void *ctx);
/* The first batch is complete: transfers for later samples no longer wait
 * for it (remote.c). Any thread, without r->mu. */
void rf__remote_warm(rf_remote *r);
/* The position moved to batch `batch`: planned uses are dropped. */
void rf__remote_seek(rf_remote *r, int64_t batch);
/* This rank's batch k of the epoch: its count, *idx pointed at its samples
 * (the sampler's rf__sampler_batch, handed in by the dispatcher: the order
 * is core's, and this room does not call up). */
typedef int64_t rf_remote_batch_fn(const void *ctx, int64_t k, const int64_t **idx);
/* Plans the samples ahead (see above) in the order batch(ctx, 0 ..
 * num_batches - 1) gives; src may be a mixture, whose samples of other
 * sources are passed over. */
void rf__remote_lookahead(rf_remote *r, const struct rf_source *src, int64_t num_batches,
                          rf_remote_batch_fn *batch, const void *ctx);
/* Takes sample for a read when its shard is pinned: 1 (the pin is held
 * until rf__remote_done), -1 when the shard failed (*why: the fetch error,
 * valid while r lives; rf__remote_done still follows), 0 not yet (the
 * shard becomes the head: wanted first). */
int rf__remote_take(rf_remote *r, const struct rf_source *src, int64_t sample, const char **why);
/* The pinned file of a sample taken (rf__remote_take returned 1), valid
 * until rf__remote_done: what its read reads. Any thread. */
int rf__remote_pin_fd(rf_remote *r, const struct rf_source *src, int64_t sample);
/* Undoes a take whose read could not be submitted. */
void rf__remote_untake(rf_remote *r, const struct rf_source *src, int64_t sample);
/* Its job ended: read and decoded, or dropped (without the loader's mutex).
 * The pin lasts until then, so that a substitute (on_error=skip, work.c)
 * can be read from the same shard. */
void rf__remote_done(rf_remote *r, const struct rf_source *src, int64_t sample);

/* Stats: the "remote" object's fields (no braces), JSON. */
struct rf_json;
void rf__remote_stats(rf_remote *r, struct rf_json *j);

#endif
