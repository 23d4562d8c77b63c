/*
 * loader.c - the public API's lifecycle: options, start (wiring the stages),
 * stop and teardown (also in a forked child), the error message and the
 * stats. The position (seek, tell) is in position.c, the consumer's side in
 * consume.c.
 *
 * rf_loader_start resolves the options once (options.c), indexes the source,
 * orders it (sampler.c), opens the copier and the ring, then builds the
 * stages from the bottom up: the reader, the per-sample work (work.c), the
 * decode pool (pool.c) running it, and the dispatcher (dispatch.c) feeding
 * the pool; threads start last. Lock rules: loader.h.
 */
#define _GNU_SOURCE
#include "loader.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "mapped.h"
#include "redact.h"
#include "mix.h"
#include "remote.h"
#include "source_remote.h"
#include "trace.h"

/* Formats into errmsg, under err_mu but in a forked child: there the lock may
 * be held by a thread of the parent that is not there, and the child is alone
 * with its copy. consumer: 1 for rf__loader_err, 0 for rf__loader_err_any. */
static void record(rf_loader *l, int consumer, const char *fmt, va_list ap)
{
    int locked = getpid() == l->pid;
    if (locked)
        pthread_mutex_lock(&l->err_mu);
    if (consumer || !l->err_unread) {
        /* shown as every message is: URLs' secrets hidden, bytes from
         * servers and shards escaped (redact.h) */
        char raw[sizeof l->errmsg];
        vsnprintf(raw, sizeof raw, fmt, ap);
        rf__redact_text(raw, l->errmsg, sizeof l->errmsg);
        l->err_unread = consumer;
    }
    if (locked)
        pthread_mutex_unlock(&l->err_mu);
}

void rf__loader_err(rf_loader *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(l, 1, fmt, ap);
    va_end(ap);
}

void rf__loader_err_any(rf_loader *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(l, 0, fmt, ap);
    va_end(ap);
}

const char *rf_loader_errmsg(const rf_loader *l)
{
    if (!l)
        return "no loader";
    rf_loader *m = (rf_loader *)l;
    int locked = getpid() == l->pid;
    if (locked)
        pthread_mutex_lock(&m->err_mu);
    memcpy(m->errmsg_out, m->errmsg, sizeof m->errmsg_out);
    m->err_unread = 0; /* read: errors from any thread may replace it now */
    if (locked)
        pthread_mutex_unlock(&m->err_mu);
    return m->errmsg_out;
}

int64_t rf_loader_errmsg_copy(const rf_loader *l, char *buf, size_t cap)
{
    if (!l)
        return (int64_t)snprintf(buf, cap, "no loader");
    rf_loader *m = (rf_loader *)l;
    int locked = getpid() == l->pid;
    if (locked)
        pthread_mutex_lock(&m->err_mu);
    int n = snprintf(buf, cap, "%s", m->errmsg); /* a look: err_unread stays */
    if (locked)
        pthread_mutex_unlock(&m->err_mu);
    return n;
}

int rf_version(void)
{
    return RF_VERSION_NUMBER;
}

const char *rf_strerror(int status)
{
    switch (status) {
    case RF_OK: return "ok";
    case RF_END_OF_EPOCH: return "end of epoch";
    case RF_AGAIN: return "not ready yet";
    case RF_E_INVALID: return "invalid argument";
    case RF_E_NOMEM: return "out of memory";
    case RF_E_IO: return "read error";
    case RF_E_DECODE: return "decode error";
    case RF_E_STATE: return "not valid in this state";
    case RF_E_SOURCE: return "source error";
    case RF_E_SYSTEM: return "system error";
    case RF_E_CUDA: return "CUDA error";
    case RF_E_TIMEOUT: return "timed out";
    case RF_E_LIMIT: return "limit exceeded";
    case RF_E_STOPPED: return "loader stopped";
    case RF_E_FORKED: return "loader used in a forked child process";
    case RF_E_NO_DEVICE: return "no CUDA device for this loader";
    case RF_E_RELEASED: return "batch already released";
    case RF_E_NOT_STARTED: return "loader not started";
    case RF_E_RING_FULL: return "every ring slot is lent";
    case RF_E_CALLBACK: return "the per-sample callback failed";
    default: return "unknown status";
    }
}

rf_loader *rf_loader_create(const char *source)
{
    if (!source)
        return NULL;
    rf_loader *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->spec = strdup(source);
    if (!l->spec) {
        free(l);
        return NULL;
    }
    rf__options_defaults(&l->opts);
    l->pid = getpid();
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->err_mu, NULL);
    pthread_mutex_init(&l->stop_mu, NULL);
    pthread_mutex_init(&l->cancel_mu, NULL);
    pthread_cond_init(&l->cv_cons, NULL);
    return l;
}

int rf_loader_set_param(rf_loader *l, int param, int64_t value)
{
    if (!l)
        return RF_E_INVALID;
    char err[200];
    if (rf__option_check(param, value, err, sizeof err) != RF_OK) {
        rf__loader_err(l, "%s", err);
        return RF_E_INVALID;
    }
    if (l->started) {
        rf__loader_err(l, "options: option %d cannot change after rf_loader_start", param);
        return RF_E_STATE;
    }
    l->opts.v[param] = value;
    if (param == RF_P_IMAGE_SIZE) /* sets both sides */
        l->opts.v[RF_P_IMAGE_HEIGHT] = l->opts.v[RF_P_IMAGE_WIDTH] = value;
    return RF_OK;
}

_Static_assert(RF__MAX_EXTRAS == RF_SOURCE_MAX_EXTRAS && RF__MAX_EXT == RF_SOURCE_MAX_EXT,
               "options.h and source.h must agree on the extras' limits");

/* rf_loader_set_label / rf_loader_set_extras: fixed before start. */
static int set_names(rf_loader *l, int (*set)(rf_options *, const char *, char *, size_t),
                     const char *value)
{
    if (!l)
        return RF_E_INVALID;
    if (l->started) {
        rf__loader_err(l, "options: label and extras cannot change after rf_loader_start");
        return RF_E_STATE;
    }
    char err[300];
    int rc = set(&l->opts, value, err, sizeof err);
    if (rc != RF_OK)
        rf__loader_err(l, "%s", err);
    return rc;
}

int rf_loader_set_label(rf_loader *l, const char *ext)
{
    return set_names(l, rf__option_set_label, ext);
}

int rf_loader_set_extras(rf_loader *l, const char *exts)
{
    return set_names(l, rf__option_set_extras, exts);
}

int rf_loader_set_cache_dir(rf_loader *l, const char *dir)
{
    if (!l)
        return RF_E_INVALID;
    if (l->started) {
        rf__loader_err(l, "options: cache_dir cannot change after rf_loader_start");
        return RF_E_STATE;
    }
    if (dir && strlen(dir) >= 4000) {
        rf__loader_err(l, "options: cache_dir is too long");
        return RF_E_INVALID;
    }
    char *copy = dir && *dir ? strdup(dir) : NULL;
    if (dir && *dir && !copy)
        return RF_E_NOMEM;
    free(l->cache_dir);
    l->cache_dir = copy;
    return RF_OK;
}

int rf_loader_get_param(const rf_loader *l, int param, int64_t *out)
{
    if (!l || !out || !rf__option_known(param))
        return RF_E_INVALID;
    *out = l->opts.v[param];
    return RF_OK;
}

int rf_loader_active_workers(const rf_loader *l)
{
    return l && l->started ? rf__pool_active(&l->pool) : 0;
}

static int fork_check(rf_loader *l)
{
    if (getpid() == l->pid)
        return 0;
    rf__loader_err(l,
                   "loader: used in a forked child process (pid %d, created in %d); create a "
                   "new loader in the child",
                   (int)getpid(), (int)l->pid);
    return RF_E_FORKED;
}

int rf__loader_usable(rf_loader *l)
{
    if (!l)
        return RF_E_INVALID;
    if (!l->started) {
        rf__loader_err(l, "loader: not started");
        return RF_E_NOT_STARTED;
    }
    return fork_check(l);
}

/* ---- lifecycle ----------------------------------------------------------- */

/* In a forked child the parent's threads, its io_uring completions, its
 * CUDA context and possibly-held mutexes are not ours: free plain memory only
 * and leave those alone (a child should create its own loader). */
static void teardown(rf_loader *l)
{
    int forked = getpid() != l->pid;
    if (forked) {
        atomic_store(&l->stopped, 1);
        rf__reader_abandon(l->reader); /* shared with the parent: do not drain */
        rf__ring_abandon(&l->ring);    /* no CUDA call: the page-locked slots are the parent's */
        rf__copier_abandon(l->copier); /* the parent's CUDA context */
        l->copier = NULL;
    } else {
        rf_loader_stop(l);
        rf__reader_destroy(l->reader);
    }
    l->reader = NULL;
    rf__dispatch_free(&l->disp, forked);
    rf__pool_destroy(&l->pool, forked);
    rf__maps_destroy(l->maps); /* no job is left to read the mappings */
    l->maps = NULL;
    rf__work_free(&l->work);
    /* The copies out of the ring and the consumers' work on the device
     * buffers end before their memory is freed (or it is leaked: a deadline). */
    rf__copier_drain(l->copier);
    rf__ring_free(&l->ring); /* the slots' memory, through the copier */
    rf__copier_destroy(l->copier);
    l->copier = NULL;
    rf__sampler_free(&l->sampler);
    rf__buckets_free(&l->buckets);
    memset(&l->buckets, 0, sizeof l->buckets);
    rf__loader_mix_stop(l->mix); /* after the sampler: its order is the sampler's fill */
    rf__source_close(&l->src);
    rf__stats_free(&l->stats);
}

/* Undoes a start that failed part-way, so that the loader can be started
 * again (after fixing an option, say): threads joined, memory freed, the
 * stop flag back to its state before rf_loader_start. */
static int start_failed(rf_loader *l, int rc)
{
    teardown(l);
    atomic_store(&l->stopped, 0);
    l->joined = 0;
    l->started = 0;
    l->nworkers = 0;
    memset(&l->stats, 0, sizeof l->stats);
    return rc;
}

/* RF_E_STOPPED, recorded, when rf_loader_cancel was called; else 0. */
static int cancelled(rf_loader *l)
{
    if (!atomic_load(&l->cancelled))
        return 0;
    rf__loader_err(l, "loader: the start was cancelled (rf_loader_cancel)");
    return RF_E_STOPPED;
}

static uint32_t sample_shard(const void *src, int64_t i)
{
    return rf__source_shard(src, i);
}

/* The sampler, shard-aware under RF_P_SHUFFLE_BLOCK; 0 or an error, recorded. */
static int open_sampler(rf_loader *l)
{
    if (l->mix)
        return rf__loader_mix_sampler(l);
    const rf_config *c = &l->cfg;
    int rc = rf__sampler_init(&l->sampler, l->src.n, c->batch_size, c->shuffle, c->drop_last,
                              c->sampler_drop_last, c->seed, c->rank, c->world_size);
    if (rc < 0) {
        rf__loader_err(l, "sampler: cannot order %lld samples", (long long)l->src.n);
        return rc;
    }
    if (c->shuffle_block == 0)
        return 0;
    int64_t nshards = rf__source_nshards(&l->src);
    if (nshards == 0) {
        rf__loader_err(l,
                       "options: shuffle_block=%lld needs a source made of shards (tar shards or "
                       "record files); %s is %s, whose samples are files of their own: use "
                       "shuffle_block=0",
                       (long long)c->shuffle_block, l->spec,
                       l->src.kind == RF_SOURCE_FOLDER ? "an image folder" : "a list file");
        return RF_E_INVALID;
    }
    rc = rf__sampler_set_shards(&l->sampler, c->shuffle_block, nshards, sample_shard, &l->src);
    if (rc < 0)
        rf__loader_err(l, "sampler: cannot group %lld samples by shard", (long long)l->src.n);
    return rc;
}

/* The ring and the copier; 0 or an error, recorded. */
static int open_memory(rf_loader *l)
{
    const rf_config *c = &l->cfg;
    char err[600];
    /* The copier first: the ring's slots get their memory (page-locked, with
     * a device buffer each) from it, on the loader's device. */
    int rc = rf__copier_open(&l->copier, c->device, c->prefetch + RF_RING_MAX_GROW,
                             (size_t)c->batch_size * c->sample_bytes, c->batch_size,
                             l->cuda_note, sizeof l->cuda_note, err, sizeof err);
    if (rc < 0) {
        rf__loader_err(l, "%s", err);
        return rc;
    }
    int pin = c->pin_memory && l->copier;
    rf_ring_hooks hooks = {l->copier, rf__copier_slot_done, rf__copier_slot_alloc,
                           rf__copier_slot_free};
    rc = rf__ring_init_hooks(&l->ring, c->prefetch, c->batch_size, c->sample_bytes, pin,
                             l->copier ? &hooks : NULL);
    if (rc == 0 && l->src.nextras > 0)
        rc = rf__ring_init_extras(&l->ring, l->src.nextras, (size_t)c->extras_bytes);
    assert(rc < 0 || l->ring.cap <= c->prefetch + RF_RING_MAX_GROW);
    if (rc < 0)
        rf__loader_err(l, "ring: cannot allocate %d slots of %lld x %zu bytes", c->prefetch,
                       (long long)c->batch_size,
                       c->sample_bytes + (l->src.nextras > 0 ? (size_t)c->extras_bytes : 0));
    return rc;
}

/* Worker count, the tuner, and the first tuner-log entry. */
static void plan_workers(rf_loader *l)
{
    const rf_config *c = &l->cfg;
    int budget = rf__worker_budget(c->local_world_size, l->budget_why, sizeof l->budget_why);
    l->nworkers = c->num_workers > 0 ? c->num_workers : budget;
    l->tuning = c->num_workers == 0;
    if (l->tuning) {
        /* Prefetch may grow within RF_RING_MAX_GROW slots and 2 GiB of ring. */
        size_t slot_bytes = (size_t)c->batch_size *
                            (c->sample_bytes + (l->src.nextras > 0 ? (size_t)c->extras_bytes : 0));
        int64_t by_mem = (int64_t)(((size_t)2 << 30) / (slot_bytes ? slot_bytes : 1));
        int max_prefetch = c->prefetch + RF_RING_MAX_GROW;
        if (by_mem < max_prefetch)
            max_prefetch = by_mem > c->prefetch ? (int)by_mem : c->prefetch;
        rf__tuner_init(&l->tuner, budget, budget, c->prefetch, max_prefetch);
    }
    char why[300];
    if (c->num_workers > 0)
        snprintf(why, sizeof why, "fixed: num_workers=%d (budget %d: %s)", l->nworkers, budget,
                 l->budget_why);
    else
        snprintf(why, sizeof why, "auto: %d workers, the budget (%s)", l->nworkers,
                 l->budget_why);
    rf__stats_add_decision(&l->stats, 0, l->nworkers, why);
}

/* The reader, the work, the pool and the dispatcher; 0 or an error, recorded. */
static int build_stages(rf_loader *l)
{
    const rf_config *c = &l->cfg;
    unsigned depth = c->read_depth > 0 ? c->read_depth : (unsigned)(16 + 4 * l->nworkers);
    int backend = c->io_backend == RF_IO_URING   ? RF__IO_URING
                  : c->io_backend == RF_IO_PREAD ? RF__IO_PREAD
                                                 : 0;
    int rc = rf__reader_create(&l->reader, backend, depth);
    if (rc < 0) {
        rf__loader_err(l, "reader: cannot set up");
        return rc;
    }
    rf__reader_set_timeout(l->reader, c->read_timeout_ms);
    rf__reader_set_max_bytes(l->reader, c->max_file_bytes);
    depth = rf__reader_depth(l->reader); /* may be lower: RLIMIT_NOFILE */
    char err[200];
    rc = rf__work_init(&l->work, c, &l->src, &l->disp.gen, l->nworkers, err, sizeof err);
    if (rc < 0) {
        rf__loader_err(l, "%s", err);
        return rc;
    }
    int njobs = (int)depth + 2 * l->nworkers + 4;
    if (rf__pool_init(&l->pool, l->nworkers, njobs, rf__work_sample, &l->work,
                      rf__dispatch_job_done, &l->disp) < 0 ||
        rf__dispatch_init(&l->disp, &l->src, &l->sampler, &l->ring, l->reader, &l->pool, njobs,
                          &l->mu, &l->cv_cons) < 0) {
        rf__loader_err(l, "loader: out of memory");
        return RF_E_NOMEM;
    }
    l->disp.copier = l->copier;
    /* no table (no memory): every member goes to the reader */
    l->disp.maps = l->maps = c->map_shards ? rf__maps_create() : NULL;
    l->disp.max_bytes = c->max_file_bytes;
    return 0;
}

int rf_loader_start(rf_loader *l)
{
    if (!l)
        return RF_E_INVALID;
    if (l->started) {
        rf__loader_err(l, "loader: already started");
        return RF_E_STATE;
    }
    int rc = fork_check(l);
    if (rc)
        return rc;
    if ((rc = cancelled(l)) != 0)
        return rc;
    RF_TRACE("loader start");
    int64_t t_start = rf__now_ns();
    char err[600];
    rc = rf__options_resolve(&l->opts, &l->cfg, err, sizeof err);
    if (rc < 0) {
        rf__loader_err(l, "%s", err);
        return rc;
    }
    const rf_config *c = &l->cfg;
    rf_source_opts so = {.record_size = c->record_size,
                         .header_size = c->header_size,
                         .label = c->names.label,
                         .unlabeled = c->names.unlabeled,
                         .nextras = c->names.nextras,
                         .cache_dir = l->cache_dir,
                         .cache_limit = c->cache_limit,
                         .fetch_retries = c->fetch_retries,
                         .fetch_timeout_ms = c->fetch_timeout_ms,
                         .fetch_parallel = c->fetch_parallel,
                         .cancel = &l->cancelled,
                         .remote = &rf__source_remote};
    for (int e = 0; e < c->names.nextras; e++)
        so.extras[e] = c->names.extras[e];
    if (l->mix)
        rc = rf__loader_mix_open(l, &so); /* says its own errors */
    else if ((rc = rf__source_open_ex(&l->src, l->spec, &so, err, sizeof err)) < 0 &&
             !atomic_load(&l->cancelled))
        rf__loader_err(l, "%s", err);
    if (rc < 0) /* a cancel: whatever it interrupted */
        return atomic_load(&l->cancelled) ? cancelled(l) : rc;
    if ((rc = cancelled(l)) != 0) /* a local index is not interrupted: it ends first */
        return start_failed(l, rc);
    RF_TRACE("index ready: %lld samples", (long long)l->src.n);
    if ((rc = rf__loader_open_buckets(l)) < 0 || (rc = open_sampler(l)) < 0 ||
        (rc = rf__loader_order_buckets(l)) < 0)
        return start_failed(l, rc);
    if ((rc = open_memory(l)) < 0)
        return start_failed(l, rc);
    plan_workers(l);
    if ((rc = build_stages(l)) < 0)
        return start_failed(l, rc);
    rf__loader_wire_shapes(l);

    l->started = 1;
    l->stats.t_start_ns = t_start;
    int e = 0;
    if (rf__dispatch_start(&l->disp, &e) < 0) {
        rf__loader_err(l, "loader: cannot start the reader thread: %s", strerror(e));
        return start_failed(l, RF_E_SYSTEM);
    }
    if (rf__pool_start(&l->pool) < 0) {
        rf__loader_err(l, "loader: cannot start decode worker %d: %s", l->pool.nthreads,
                       strerror(l->pool.start_err));
        return start_failed(l, RF_E_SYSTEM);
    }
    /* live, unless a cancel came first: then it is undone (see loader.h) */
    pthread_mutex_lock(&l->cancel_mu);
    l->live = !atomic_load(&l->cancelled);
    pthread_mutex_unlock(&l->cancel_mu);
    return l->live ? RF_OK : start_failed(l, cancelled(l));
}

void rf_loader_cancel(rf_loader *l)
{
    if (!l)
        return;
    if (getpid() != l->pid) { /* a forked child: nothing runs here to cancel */
        atomic_store(&l->cancelled, 1);
        return;
    }
    pthread_mutex_lock(&l->cancel_mu);
    atomic_store(&l->cancelled, 1);
    int live = l->live;
    pthread_mutex_unlock(&l->cancel_mu);
    if (live)
        rf_loader_stop(l);
}

void rf_loader_stop(rf_loader *l)
{
    if (!l || !l->started)
        return; /* before start: nothing to stop */
    if (getpid() != l->pid) {
        /* a forked child: no threads to stop, and the mutex may be held */
        atomic_store(&l->stopped, 1);
        return;
    }
    pthread_mutex_lock(&l->mu);
    atomic_store(&l->stopped, 1);
    rf__dispatch_stop(&l->disp);
    pthread_cond_broadcast(&l->cv_cons);
    pthread_mutex_unlock(&l->mu);
    rf__pool_stop(&l->pool);
    pthread_mutex_lock(&l->stop_mu);
    if (!l->joined) {
        rf__dispatch_join(&l->disp);
        rf__pool_join(&l->pool);
        l->joined = 1;
    }
    pthread_mutex_unlock(&l->stop_mu);
}

void rf_loader_destroy(rf_loader *l)
{
    if (!l)
        return;
    int child = getpid() != l->pid;
    teardown(l);
    if (!child) { /* in a forked child they may be held by a thread that is not there */
        pthread_mutex_destroy(&l->mu);
        pthread_mutex_destroy(&l->err_mu);
        pthread_mutex_destroy(&l->stop_mu);
        pthread_mutex_destroy(&l->cancel_mu);
        pthread_cond_destroy(&l->cv_cons);
    }
    rf__loader_mix_free(l->mix);
    free(l->spec);
    free(l->cache_dir);
    free(l);
}

int64_t rf_loader_num_samples(const rf_loader *l)
{
    return l && l->started ? l->src.n : 0;
}

int64_t rf_loader_num_batches(const rf_loader *l)
{
    return l && l->started ? l->sampler.epoch_batches : 0;
}

uint64_t rf_loader_fingerprint(const rf_loader *l)
{
    if (!l || !l->started)
        return 0;
    uint64_t h = rf__source_fingerprint(&l->src);
    return l->mix ? h ^ rf__mix_order_hash(&l->mix->order) : h;
}

const char *rf_loader_sample_path(const rf_loader *l, int64_t sample)
{
    if (!l || !l->started || sample < 0 || sample >= l->src.n)
        return NULL;
    return rf__source_path(&l->src, sample);
}

int64_t rf_loader_sample_label(const rf_loader *l, int64_t sample)
{
    if (!l || !l->started || sample < 0 || sample >= l->src.n)
        return -1;
    return rf__source_label(&l->src, sample);
}

int64_t rf_loader_sample_name(const rf_loader *l, int64_t sample, char *buf, size_t cap)
{
    if (buf && cap > 0)
        buf[0] = '\0';
    if (!l || !l->started || sample < 0 || sample >= l->src.n || (!buf && cap > 0))
        return -1;
    return rf__source_sample_name(&l->src, sample, cap ? buf : NULL, cap);
}

/* ---- stats --------------------------------------------------------------- */

/* The "remote" object of the stats (rf_stats_section). */
static void remote_section(void *remote, rf_json *j)
{
    rf__remote_stats(remote, j);
}

/* A mixture's epoch size and sources: fields of the stats' own object. */
static void mix_stats(void *ctx, rf_json *j)
{
    rf__loader_mix_stats(ctx, j);
}

int64_t rf_loader_stats_json(rf_loader *l, char *buf, size_t cap)
{
    if (!l)
        return RF_E_INVALID;
    rf_json j = {0};
    rf_copier_stats cs = {0};
    if (l->copier)
        rf__copier_stats(l->copier, &cs);
    pthread_mutex_lock(&l->mu);
    rf__work_totals(&l->work, &l->stats);
    l->stats.read_ns = l->disp.read_ns;
    rf_stats_snapshot v = {
        .stats = &l->stats,
        .now_ns = rf__now_ns(),
        .active_workers = rf__pool_active(&l->pool),
        .worker_threads = l->nworkers,
        .auto_workers = l->tuning,
        .epoch = l->disp.epoch,
        .num_samples = l->src.n,
        .num_batches = l->sampler.epoch_batches,
        .shards = rf__source_tar_counts(&l->src, 0),
        .shards_from_manifest = rf__source_tar_counts(&l->src, 1),
        .shards_mismatched = rf__source_tar_counts(&l->src, 2),
        .batch_size = l->opts.v[RF_P_BATCH_SIZE],
        .io_backend = !l->reader                                    ? "none"
                      : rf__reader_backend(l->reader) == RF__IO_URING ? "io_uring"
                                                                      : "pread",
        .io_note = l->reader ? rf__reader_note(l->reader) : "",
        .maps = l->maps,
        .pinned = l->ring.pinned,
        .ring_bytes = l->ring.mem_bytes + (size_t)l->ring.k * (size_t)l->ring.batch_size *
                                              l->ring.extras_bytes, /* tar extras */
        .index_bytes = rf__source_bytes(&l->src) + (size_t)l->src.n * 12 + l->work.verified_bytes,
        .prefetch = l->ring.k,
        .started = l->started,
        .ring_note = l->ring.note,
        .has_copier = l->copier != NULL,
        .cuda_note = l->cuda_note,
#ifdef RF_HAVE_CUDA
        .cuda_built = 1,
#endif
        .device = l->opts.v[RF_P_DEVICE],
        .copies = cs.copies,
        .direct_copies = cs.direct,
        .buffer_note = cs.buffer_note,
        .copy_bytes = cs.bytes,
        .d2d_copies = cs.d2d,
        .device_buffer_bytes = cs.dev_bytes,
        .cuda_errors = cs.errors,
        .cuda_last_error = cs.last_error,
        .worker_budget = l->budget_why,
        .more = l->mix && l->started ? mix_stats : NULL,
        .more_ctx = l,
    };
    rf_remote *rem = rf__source_remote_at(&l->src, 0); /* a mixture's first remote source */
    if (rem)
        v.sections[v.nsections++] = (rf_stats_section){"remote", remote_section, rem};
    if (l->started && !l->cfg.is_records)
        v.sections[v.nsections++] = (rf_stats_section){"shapes", rf__loader_shapes_stats, l};
    rf__stats_render(&v, &j);
    pthread_mutex_unlock(&l->mu);
    return rf__json_out(&j, buf, cap);
}
