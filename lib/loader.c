/*
 * loader.c - the public API: options, start/stop, and the threads that move
 * samples from the index through the reader and the decode pool into the ring.
 *
 * Threads:
 *   - the dispatcher claims a free ring slot for each upcoming batch (at most
 *     `prefetch` batches ahead of the consumer), hands the batch's samples to
 *     the reader in order, and queues every completed read as a decode job;
 *   - N decode workers (one libjpeg decompressor each) decode jobs straight
 *     into their place in the slot; the last sample of a slot makes it READY;
 *   - the consumer (the caller of rf_loader_next) waits for the slot holding
 *     the next batch and borrows it until rf_batch_release.
 *
 * Lock rules: one mutex, l->mu, protects the ring's slot states, the job free
 * list, the decode queue, the position (gen, epoch, next/sched batch), the
 * read cursor and the stats. Nobody holds it across a read, a decode or a
 * wait on io_uring. cv_disp wakes the dispatcher (slot freed, job returned,
 * position moved, stop), cv_work the workers (job queued, stop), cv_cons the
 * consumer (slot ready, stop).
 *
 * Generations: set_epoch/seek bump l->gen. Work of an older generation is
 * never delivered: reads in flight complete and are dropped, queued jobs are
 * dropped by the workers, slots being filled become FREE when their last
 * submitted sample is accounted for (ring.c).
 */
#define _GNU_SOURCE
#include "ringfeed.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "copier.h"
#include "decode.h"
#include "reader.h"
#include "ring.h"
#include "rng.h"
#include "sampler.h"
#include "source.h"
#include "stats.h"
#include "tuner.h"

#define RF_NPARAMS 28

typedef struct param_def {
    int64_t lo, hi, def;
} param_def;

static const param_def params_table[RF_NPARAMS] = {
    [RF_P_BATCH_SIZE] = {1, 1 << 20, 256},
    [RF_P_IMAGE_SIZE] = {1, 1 << 14, 224},
    [RF_P_TRANSFORM] = {0, 2, RF_TRANSFORM_CENTER},
    [RF_P_FLIP] = {0, 1, 0},
    [RF_P_LAYOUT] = {0, 1, RF_LAYOUT_NHWC},
    [RF_P_SHUFFLE] = {0, 1, 1},
    [RF_P_SEED] = {INT64_MIN, INT64_MAX, 0},
    [RF_P_DROP_LAST] = {0, 1, 0},
    [RF_P_NUM_WORKERS] = {0, 1024, 0},
    [RF_P_PREFETCH] = {2, 1024, 4},
    [RF_P_ON_ERROR] = {0, 1, RF_ON_ERROR_RAISE},
    [RF_P_RANK] = {0, 1 << 24, 0},
    [RF_P_WORLD_SIZE] = {1, 1 << 24, 1},
    [RF_P_LOCAL_WORLD_SIZE] = {1, 1 << 16, 1},
    [RF_P_IO_BACKEND] = {0, 2, RF_IO_AUTO},
    [RF_P_PIN_MEMORY] = {0, 1, 1},
    [RF_P_DEVICE] = {-1, 1024, -1},
    [RF_P_MAX_PIXELS] = {1, INT64_C(1) << 40, 178956970},
    [RF_P_MAX_SCANS] = {1, 1 << 20, 1000},
    [RF_P_READ_DEPTH] = {0, 4096, 0},
    [RF_P_READ_TIMEOUT_MS] = {0, INT64_C(1) << 40, 0},
    [RF_P_MAX_ERRORS] = {-1, INT64_MAX, -1},
    [RF_P_RECORD_SIZE] = {0, 1 << 30, 0},
    [RF_P_HEADER_SIZE] = {0, INT64_C(1) << 50, 0},
    [RF_P_DTYPE] = {0, 3, RF_DTYPE_UINT8},
    [RF_P_VERIFY] = {0, 2, RF_VERIFY_ONCE},
    [RF_P_MAX_FILE_BYTES] = {1, INT64_C(1) << 40, INT64_C(512) << 20},
};

typedef struct rf_job {
    rf_read rd; /* first: the reader hands back rf_read pointers */
    rf_slot *slot;
    int64_t pos; /* place within the batch */
    int64_t gen;
    int64_t epoch;
    struct rf_job *next_free; /* link in the free stack */
} rf_job;

/* Per-worker counters: written by their worker only (relaxed load + store,
 * no read-modify-write), read by whoever renders stats or closes a tuner
 * window. Totals since start. */
typedef struct rf_worker_counters {
    _Atomic int64_t decoded, header_ns, decode_ns, resize_ns, dct_scaled;
    _Atomic int64_t cpu_ns, busy_ns;
} rf_worker_counters;

typedef struct rf_worker {
    rf_loader *l;
    int id;
    pthread_t thread;
    rf_decoder *dec;
    rf_read sub; /* buffer for substitute samples (on_error = skip) */
    rf_worker_counters c;
} rf_worker;

struct rf_loader {
    char *spec;
    int64_t params[RF_NPARAMS];
    int started;
    pid_t pid;
    char errmsg[1024];

    rf_source src;
    /* RF_VERIFY_ONCE: one bit per sample, set once the sample's file was
     * decoded to its end marker without fault; nverified counts them. */
    _Atomic uint64_t *verified; /* NULL for other modes and record sources */
    size_t verified_bytes;
    _Atomic int64_t nverified;
    rf_sampler sampler;
    rf_ring ring;
    rf_copier *copier;   /* NULL: no CUDA device (cuda_note says why) */
    char cuda_note[240];
    rf_reader *reader;
    size_t sample_bytes;
    int nworkers;
    rf_worker *workers;
    pthread_t dispatcher;
    int threads; /* 1 when the dispatcher runs */
    int nworker_threads;
    char budget_why[200];

    pthread_mutex_t stop_mu; /* serialises rf_loader_stop's joins */
    int joined;

    /* The per-sample path takes no lock: the dispatcher (single producer)
     * publishes decode jobs in `queue` by a release store of qtail, workers
     * claim them by compare-exchange on qhead; finished jobs go back on the
     * lock-free free stack (workers push, the dispatcher takes the whole stack
     * with one exchange, so no ABA); a slot's last sample takes the lock. A
     * sleeper count per side (Dekker-style, seq_cst on both sides) says when
     * a push must take the lock to wake someone. */
    rf_job *jobs;
    int njobs;
    _Atomic(rf_job *) *queue;        /* njobs entries, indexed mod njobs */
    _Atomic uint64_t qhead, qtail;   /* claimed / published decode jobs */
    _Atomic(rf_job *) free_stack;    /* pairs: release push, acquire exchange */
    rf_job *free_local;              /* the dispatcher's own free jobs */
    _Atomic int work_sleepers;       /* workers waiting on cv_work */
    _Atomic int disp_waiting;        /* the dispatcher waits on cv_disp */
    _Atomic int64_t gen;             /* written under mu; read anywhere */
    _Atomic int active_workers;      /* the tuner's choice; others park on cv_park */
    _Atomic int stopped;
    _Atomic int64_t errors_seen;     /* bad samples met by workers: the max_errors cap */

    pthread_mutex_t mu; /* protects everything below, the ring's states and the stats */
    pthread_cond_t cv_disp, cv_work, cv_park, cv_cons;
    int64_t epoch, next_batch, sched_batch;
    rf_slot **fill; /* slots whose samples are still being handed to the reader */
    int nfill;
    /* Tuner (num_workers = 0): measurements of the current window. */
    int tuning;
    rf_tuner tuner;
    int64_t win_t0, win_batches, win_samples, win_stall_ns, win_step_ns;
    int64_t win_cpu_ns, win_busy_ns, win_blocked_ns, win_read_ns;
    int64_t last_return_ns; /* when next() last handed out a batch: the step starts */
    int64_t blocked_since;  /* producers idle on a full ring since (0: they are not) */
    int64_t win_cpu_base, win_busy_base; /* worker totals when the window opened */
    rf_stats stats;
};

static void set_err(rf_loader *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->errmsg, sizeof l->errmsg, fmt, ap);
    va_end(ap);
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
    default: return "unknown status";
    }
}

static int param_known(int p)
{
    return p > 0 && p < RF_NPARAMS && params_table[p].hi > params_table[p].lo;
}

int rf_param_bounds(int param, int64_t *lo, int64_t *hi)
{
    if (!param_known(param))
        return RF_E_INVALID;
    if (lo)
        *lo = params_table[param].lo;
    if (hi)
        *hi = params_table[param].hi;
    return RF_OK;
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
    for (int p = 1; p < RF_NPARAMS; p++)
        l->params[p] = params_table[p].def;
    l->pid = getpid();
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->stop_mu, NULL);
    pthread_cond_init(&l->cv_disp, NULL);
    pthread_cond_init(&l->cv_work, NULL);
    pthread_cond_init(&l->cv_park, NULL);
    pthread_cond_init(&l->cv_cons, NULL);
    return l;
}

int rf_loader_set_param(rf_loader *l, int param, int64_t value)
{
    if (!l)
        return RF_E_INVALID;
    if (!param_known(param)) {
        set_err(l, "options: unknown option %d", param);
        return RF_E_INVALID;
    }
    if (value < params_table[param].lo || value > params_table[param].hi) {
        set_err(l, "options: option %d = %lld is outside [%lld, %lld]", param, (long long)value,
                (long long)params_table[param].lo, (long long)params_table[param].hi);
        return RF_E_INVALID;
    }
    if (l->started) {
        set_err(l, "options: option %d cannot change after rf_loader_start", param);
        return RF_E_STATE;
    }
    l->params[param] = value;
    return RF_OK;
}

int rf_loader_get_param(const rf_loader *l, int param, int64_t *out)
{
    if (!l || !out || !param_known(param))
        return RF_E_INVALID;
    if (param == RF_P_NUM_WORKERS && l->started)
        *out = l->active_workers; /* the tuner's current choice under auto */
    else
        *out = l->params[param];
    return RF_OK;
}

/* ---- shared helpers (called with l->mu held) ----------------------------- */

static int fork_check(rf_loader *l)
{
    if (getpid() == l->pid)
        return 0;
    set_err(l, "loader: used in a forked child process (pid %d, created in %d); create a new "
               "loader in the child",
            (int)getpid(), (int)l->pid);
    return RF_E_STATE;
}

/* Any thread: a finished job goes back to the dispatcher. */
static void put_free_job(rf_loader *l, rf_job *j)
{
    rf_job *head = atomic_load_explicit(&l->free_stack, memory_order_relaxed);
    do
        j->next_free = head;
    /* seq_cst, not just release: the push and the caller's later load of
     * disp_waiting form a Dekker pair with the dispatcher's store of
     * disp_waiting and its load of free_stack (no store-load reordering). */
    while (!atomic_compare_exchange_weak_explicit(&l->free_stack, &head, j, memory_order_seq_cst,
                                                  memory_order_relaxed));
}

/* Dispatcher only. */
static rf_job *take_free_job(rf_loader *l)
{
    if (!l->free_local)
        l->free_local = atomic_exchange_explicit(&l->free_stack, NULL, memory_order_acquire);
    rf_job *j = l->free_local;
    if (j)
        l->free_local = j->next_free;
    return j;
}

static int have_free_job(rf_loader *l)
{
    return l->free_local || atomic_load(&l->free_stack);
}

static uint64_t queue_len(rf_loader *l)
{
    return atomic_load(&l->qtail) - atomic_load(&l->qhead);
}

/* Any thread, without the lock: one sample of a slot is accounted for. Only
 * the slot's last sample takes the lock (to make it READY and wake the
 * consumer); otherwise the lock is taken only if the dispatcher sleeps
 * waiting for free jobs and the decode queue is down to half the jobs. The
 * dispatcher then finds many free jobs and submits their reads at once:
 * waking it for each one costs a context switch per sample, each one
 * preempting a worker on a machine with no spare core. The queue only
 * shrinks while the dispatcher sleeps, so a later finish sees it short. */
static void finish_job(rf_loader *l, rf_job *j)
{
    rf_slot *s = j->slot; /* read before the job can be reused */
    int last = rf__ring_sample_release(s);
    put_free_job(l, j);
    if (last) {
        pthread_mutex_lock(&l->mu);
        rf__ring_complete(s, atomic_load(&l->gen));
        if (s->state == RF_SLOT_READY)
            pthread_cond_broadcast(&l->cv_cons);
        pthread_cond_signal(&l->cv_disp);
        pthread_mutex_unlock(&l->mu);
    } else if (atomic_load(&l->disp_waiting) && queue_len(l) <= (uint64_t)l->njobs / 2) {
        pthread_mutex_lock(&l->mu);
        pthread_cond_signal(&l->cv_disp);
        pthread_mutex_unlock(&l->mu);
    }
}

/* Dispatcher only (single producer). */
static void queue_push(rf_loader *l, rf_job *j)
{
    uint64_t t = atomic_load_explicit(&l->qtail, memory_order_relaxed);
    /* Entry t % njobs is free: at most njobs jobs exist and the one at
     * t - njobs was claimed before its job could be freed and pushed again. */
    atomic_store_explicit(&l->queue[t % (uint64_t)l->njobs], j, memory_order_relaxed);
    atomic_store(&l->qtail, t + 1); /* seq_cst: pairs with the worker's sleeper check */
    if (atomic_load(&l->work_sleepers) > 0) {
        pthread_mutex_lock(&l->mu);
        pthread_cond_signal(&l->cv_work);
        pthread_mutex_unlock(&l->mu);
    }
}

/* Workers: claims the next decode job, or waits; NULL when stopping. */
static rf_job *queue_pop(rf_loader *l, rf_worker *w)
{
    for (;;) {
        if (atomic_load(&l->stopped))
            return NULL;
        if (w->id < atomic_load(&l->active_workers)) {
            uint64_t h = atomic_load(&l->qhead);
            while (h < atomic_load(&l->qtail)) {
                /* Read before claiming: entry h cannot be overwritten while
                 * qhead <= h (see queue_push). */
                rf_job *j = atomic_load_explicit(&l->queue[h % (uint64_t)l->njobs],
                                                 memory_order_relaxed);
                if (atomic_compare_exchange_weak(&l->qhead, &h, h + 1))
                    return j;
            }
        }
        pthread_mutex_lock(&l->mu);
        if (w->id >= atomic_load(&l->active_workers)) {
            /* parked by the tuner */
            while (!atomic_load(&l->stopped) && w->id >= atomic_load(&l->active_workers))
                pthread_cond_wait(&l->cv_park, &l->mu);
        } else {
            atomic_fetch_add(&l->work_sleepers, 1);
            while (!atomic_load(&l->stopped) && queue_len(l) == 0 &&
                   w->id < atomic_load(&l->active_workers))
                pthread_cond_wait(&l->cv_work, &l->mu);
            atomic_fetch_sub(&l->work_sleepers, 1);
        }
        pthread_mutex_unlock(&l->mu);
    }
}

/* Claims slots for the batches ahead of the consumer, in order. */
static void schedule(rf_loader *l)
{
    int64_t nb = l->sampler.num_batches;
    while (l->sched_batch < nb && l->sched_batch < l->next_batch + l->ring.k) {
        const int64_t *idx;
        int64_t count = rf__sampler_batch(&l->sampler, l->sched_batch, &idx);
        rf_slot *s = rf__ring_claim(&l->ring, l->gen, l->sched_batch, count);
        if (!s)
            break;
        for (int64_t i = 0; i < count; i++) {
            s->view.samples[i] = idx[i];
            s->view.labels[i] = rf__source_label(&l->src, idx[i]);
        }
        s->view.epoch = l->epoch;
        l->fill[l->nfill++] = s;
        l->sched_batch++;
    }
    /* Producers are blocked on a full ring when batches remain to be made,
     * nothing is left to read or decode, and no slot can take the next one. */
    int blocked = l->sched_batch < nb && l->nfill == 0 && queue_len(l) == 0 &&
                  rf__reader_inflight(l->reader) == 0;
    int64_t now = blocked || l->blocked_since ? rf__now_ns() : 0;
    if (blocked && !l->blocked_since)
        l->blocked_since = now;
    else if (!blocked && l->blocked_since) {
        l->win_blocked_ns += now - l->blocked_since;
        l->blocked_since = 0;
    }
}

static void *dispatcher_main(void *arg)
{
    rf_loader *l = arg;
    rf_read *done[64];
    unsigned depth = rf__reader_depth(l->reader);
    int64_t read_ns = 0;
    pthread_mutex_lock(&l->mu);
    while (!atomic_load(&l->stopped)) {
        l->stats.read_ns += read_ns;
        l->win_read_ns += read_ns;
        read_ns = 0;
        schedule(l);
        rf_job *j;
        while (l->nfill > 0 && rf__reader_inflight(l->reader) < depth &&
               (j = take_free_job(l)) != NULL) {
            rf_slot *s = l->fill[0];
            int64_t sample = s->view.samples[s->submitted];
            j->slot = s;
            j->pos = s->submitted;
            j->gen = atomic_load(&l->gen);
            j->epoch = l->epoch;
            j->rd.path = rf__source_path(&l->src, sample);
            rf__source_extent(&l->src, sample, &j->rd.ranged, &j->rd.offset, &j->rd.length);
            j->rd.sample = sample;
            if (rf__reader_submit(l->reader, &j->rd) != 0) {
                j->next_free = l->free_local; /* file slots busy closing: later */
                l->free_local = j;
                break;
            }
            if (++s->submitted == s->count) {
                memmove(l->fill, l->fill + 1, (size_t)(l->nfill - 1) * sizeof *l->fill);
                l->nfill--;
            }
        }
        if (rf__reader_inflight(l->reader) == 0) {
            /* Nothing in flight: wait for a freed slot, a freed job, a new
             * position or stop. Workers returning jobs wake us only while
             * disp_waiting is set (checked again after setting it). */
            atomic_store(&l->disp_waiting, 1);
            if (l->nfill > 0 && have_free_job(l)) {
                atomic_store(&l->disp_waiting, 0);
                continue;
            }
            if (rf__ring_reap_copies(&l->ring) > 0) {
                /* A free slot waits for its copy to the GPU, whose end
                 * signals nobody: look again in 0.5 ms (ring.h). */
                struct timespec t;
                clock_gettime(CLOCK_REALTIME, &t);
                t.tv_nsec += 500000;
                if (t.tv_nsec >= 1000000000) {
                    t.tv_sec++;
                    t.tv_nsec -= 1000000000;
                }
                pthread_cond_timedwait(&l->cv_disp, &l->mu, &t);
            } else {
                pthread_cond_wait(&l->cv_disp, &l->mu);
            }
            atomic_store(&l->disp_waiting, 0);
            continue;
        }
        pthread_mutex_unlock(&l->mu);
        int n = rf__reader_reap(l->reader, done, 64, 20);
        for (int i = 0; i < n; i++) {
            rf_job *dj = (rf_job *)done[i];
            read_ns += dj->rd.t_done_ns - dj->rd.t_submit_ns;
            if (dj->gen != atomic_load(&l->gen) || atomic_load(&l->stopped))
                finish_job(l, dj); /* abandoned position: drop */
            else
                queue_push(l, dj);
        }
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void read_reason(const rf_read *rd, char *out, size_t cap)
{
    const char *name = strerrorname_np(rd->err);
    snprintf(out, cap, "%s: %s (%s)", rd->what, strerror(rd->err), name ? name : "?");
}

/* Reads a substitute sample synchronously (rare path: on_error = skip). */
static int read_sample_sync(const rf_loader *l, int64_t sample, rf_read *rd)
{
    rd->path = rf__source_path(&l->src, sample);
    rf__source_extent(&l->src, sample, &rd->ranged, &rd->offset, &rd->length);
    rd->sample = sample;
    return rf__read_sync(rd, (uint64_t)l->params[RF_P_MAX_FILE_BYTES]);
}

static int is_verified(const rf_loader *l, int64_t sample)
{
    uint64_t word = atomic_load_explicit(&l->verified[sample >> 6], memory_order_relaxed);
    return (int)(word >> (sample & 63) & 1);
}

/* A sample decoded to its end marker without fault: trusted from now on. */
static void mark_verified(rf_loader *l, int64_t sample)
{
    uint64_t bit = UINT64_C(1) << (sample & 63);
    if (!(atomic_fetch_or_explicit(&l->verified[sample >> 6], bit, memory_order_relaxed) & bit))
        atomic_fetch_add_explicit(&l->nverified, 1, memory_order_relaxed);
}

static void worker_opts(const rf_loader *l, int64_t epoch, int64_t sample, rf_decode_opts *o)
{
    o->transform = (int)l->params[RF_P_TRANSFORM];
    o->size = (int)l->params[RF_P_IMAGE_SIZE];
    o->flip = (int)l->params[RF_P_FLIP];
    o->layout = (int)l->params[RF_P_LAYOUT];
    o->max_pixels = l->params[RF_P_MAX_PIXELS];
    o->max_scans = (int)l->params[RF_P_MAX_SCANS];
    o->seed = (uint64_t)l->params[RF_P_SEED];
    o->epoch = epoch;
    o->sample = sample;
    int64_t v = l->params[RF_P_VERIFY];
    o->check_tail = v == RF_VERIFY_ALWAYS || (v == RF_VERIFY_ONCE && !is_verified(l, sample));
}

/* Reads (if needed) and decodes one sample into dst; reason set on failure. */
static int process_sample(rf_worker *w, const rf_read *rd, int64_t epoch, int64_t sample,
                          uint8_t *dst, char *reason, size_t cap, rf_decode_times *t)
{
    rf_loader *l = w->l;
    memset(t, 0, sizeof *t);
    if (rd->err == ETIMEDOUT) {
        snprintf(reason, cap, "%s timed out after %lld ms (read_timeout_ms)", rd->what,
                 (long long)l->params[RF_P_READ_TIMEOUT_MS]);
        return RF_E_TIMEOUT;
    }
    if (rd->err == EFBIG && !strcmp(rd->what, "size")) {
        snprintf(reason, cap, "%s is %llu bytes, more than max_file_bytes=%lld",
                 l->src.kind == RF_SOURCE_RECORDS ? "record"
                 : rd->ranged                     ? "member"
                                                  : "file",
                 (unsigned long long)rd->size, (long long)l->params[RF_P_MAX_FILE_BYTES]);
        return RF_E_LIMIT;
    }
    if (rd->err) {
        read_reason(rd, reason, cap);
        return RF_E_IO;
    }
    if (l->src.kind == RF_SOURCE_RECORDS) {
        /* records: the bytes themselves, no decode (the reader failed short reads) */
        if (rd->len != l->sample_bytes) {
            snprintf(reason, cap, "short read: %zu of %zu bytes", rd->len, l->sample_bytes);
            return RF_E_IO;
        }
        memcpy(dst, rd->buf, rd->len);
        return 0;
    }
    rf_decode_opts o;
    worker_opts(l, epoch, sample, &o);
    int rc = rf__decode_sample(w->dec, rd->buf, rd->len, &o, dst, reason, cap, t);
    if (rc == 0 && t->whole && l->params[RF_P_VERIFY] == RF_VERIFY_ONCE)
        mark_verified(l, sample);
    return rc;
}

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Single writer: a relaxed load and store, no locked instruction. */
static void counter_add(_Atomic int64_t *c, int64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                          memory_order_relaxed);
}

static void *worker_main(void *arg)
{
    rf_worker *w = arg;
    rf_loader *l = w->l;
    char reason[400], msg[900];
    rf_job *j;
    while ((j = queue_pop(l, w)) != NULL) {
        int stale = j->gen != atomic_load(&l->gen);
        rf_slot *s = j->slot;
        uint8_t *dst = s->view.data + (size_t)j->pos * l->ring.sample_bytes;
        int64_t busy0 = rf__now_ns(), cpu0 = thread_cpu_ns();
        rf_decode_times t = {0};
        int rc = 0;
        int64_t sample = j->rd.sample, used = sample, subs = 0;
        char first_reason[sizeof reason];
        msg[0] = '\0';
        if (!stale)
            rc = process_sample(w, &j->rd, j->epoch, sample, dst, reason, sizeof reason, &t);
        int skip = l->params[RF_P_ON_ERROR] == RF_ON_ERROR_SKIP;
        if (rc != 0) {
            char name[440]; /* the path, "shard.tar:key.jpg" or "file.bin at offset N" */
            rf__source_name(&l->src, sample, name, sizeof name);
            snprintf(msg, sizeof msg, "%s: %s (sample %lld): %s",
                     rc == RF_E_IO || j->rd.err ? "reader" : "decode", name, (long long)sample,
                     reason);
            snprintf(first_reason, sizeof first_reason, "%s", reason);
            int64_t cap = l->params[RF_P_MAX_ERRORS];
            int over = cap >= 0 && atomic_fetch_add(&l->errors_seen, 1) + 1 > cap;
            if (skip && over) {
                snprintf(msg + strlen(msg), sizeof msg - strlen(msg),
                         " [more than max_errors=%lld bad samples]", (long long)cap);
                skip = 0;
            }
            /* Deterministic substitute: drawn from (seed, epoch, sample). */
            rf_rng rng = rf__rng_make((uint64_t)l->params[RF_P_SEED], (uint64_t)j->epoch,
                                      (uint64_t)sample ^ 0x5355425354ULL /* "SUBST" */);
            while (skip && rc != 0 && subs < 16) {
                subs++;
                used = (int64_t)rf__rng_below(&rng, (uint64_t)l->src.n);
                if (read_sample_sync(l, used, &w->sub) != 0) {
                    rc = RF_E_IO;
                    continue;
                }
                rc = process_sample(w, &w->sub, j->epoch, used, dst, reason, sizeof reason, &t);
            }
            if (skip && rc == 0) {
                s->view.samples[j->pos] = used;
                s->view.labels[j->pos] = rf__source_label(&l->src, used);
            } else if (skip) {
                snprintf(msg + strlen(msg), sizeof msg - strlen(msg),
                         " [no readable substitute in %lld tries]", (long long)subs);
            }
        }
        counter_add(&w->c.cpu_ns, thread_cpu_ns() - cpu0);
        counter_add(&w->c.busy_ns, rf__now_ns() - busy0);
        /* Work for an abandoned position is not counted. The slot's fields
         * below are published to the consumer by the pending decrement in
         * finish_job (release) and the lock its last sample takes. */
        if (j->gen == atomic_load(&l->gen)) {
            if (msg[0]) {
                int i = atomic_fetch_add(&s->nbad, 1);
                if (i < RF_SLOT_MAX_BAD) {
                    s->bad[i].sample = sample;
                    snprintf(s->bad[i].reason, sizeof s->bad[0].reason, "%s", first_reason);
                } else {
                    atomic_fetch_add(&s->bad_dropped, 1);
                }
            }
            counter_add(&w->c.decoded, 1);
            counter_add(&w->c.header_ns, t.header_ns);
            counter_add(&w->c.decode_ns, t.decode_ns);
            counter_add(&w->c.resize_ns, t.resize_ns);
            counter_add(&w->c.dct_scaled, t.denom > 1);
            if (subs > 0 && rc == 0)
                atomic_fetch_add(&s->nskipped, 1); /* counted if the batch is delivered */
            int zero = 0;
            if (rc != 0 && atomic_compare_exchange_strong(&s->errcode, &zero, rc))
                snprintf(s->errmsg, sizeof s->errmsg, "%s", msg);
        }
        finish_job(l, j);
    }
    return NULL;
}

/* Totals of the workers' counters into the stats (under mu). */
static void gather_counters(rf_loader *l, int64_t *cpu_ns, int64_t *busy_ns)
{
    rf_stats *st = &l->stats;
    st->samples_decoded = st->header_ns = st->decode_ns = st->resize_ns = 0;
    st->dct_scaled = 0;
    int64_t cpu = 0, busy = 0;
    for (int i = 0; l->workers && i < l->nworkers; i++) {
        rf_worker_counters *c = &l->workers[i].c;
        st->samples_decoded += atomic_load_explicit(&c->decoded, memory_order_relaxed);
        st->header_ns += atomic_load_explicit(&c->header_ns, memory_order_relaxed);
        st->decode_ns += atomic_load_explicit(&c->decode_ns, memory_order_relaxed);
        st->resize_ns += atomic_load_explicit(&c->resize_ns, memory_order_relaxed);
        st->dct_scaled += atomic_load_explicit(&c->dct_scaled, memory_order_relaxed);
        cpu += atomic_load_explicit(&c->cpu_ns, memory_order_relaxed);
        busy += atomic_load_explicit(&c->busy_ns, memory_order_relaxed);
    }
    st->verified = atomic_load_explicit(&l->nverified, memory_order_relaxed);
    if (cpu_ns)
        *cpu_ns = cpu;
    if (busy_ns)
        *busy_ns = busy;
}

/* ---- lifecycle ----------------------------------------------------------- */

/* In a forked child the parent's threads, its io_uring completions, its
 * CUDA context and possibly-held mutex are not ours: free plain memory only
 * and leave those alone (a child should create its own loader). */
static void teardown(rf_loader *l)
{
    if (getpid() != l->pid) {
        atomic_store(&l->stopped, 1);
        rf__reader_abandon(l->reader); /* shared with the parent: do not drain */
        l->copier = NULL;              /* the parent's CUDA context */
        if (l->ring.pinned) {
            l->ring.mem = NULL;        /* page-locked by the parent's CUDA context */
            l->ring.ngrown = 0;
        }
    } else {
        rf_loader_stop(l);
        rf__reader_destroy(l->reader);
    }
    l->reader = NULL;
    if (l->workers) {
        for (int i = 0; i < l->nworkers; i++) {
            rf__decoder_destroy(l->workers[i].dec);
            free(l->workers[i].sub.buf);
        }
        free(l->workers);
        l->workers = NULL;
    }
    if (l->jobs)
        for (int i = 0; i < l->njobs; i++)
            free(l->jobs[i].rd.buf);
    free(l->jobs);
    free(l->queue);
    free(l->fill);
    l->jobs = NULL;
    l->free_local = NULL;
    atomic_store(&l->free_stack, NULL);
    l->queue = NULL;
    l->fill = NULL;
    rf__copier_destroy(l->copier); /* waits for copies out of the ring's memory */
    l->copier = NULL;
    rf__ring_free(&l->ring);
    rf__sampler_free(&l->sampler);
    rf__source_close(&l->src);
    free((void *)l->verified);
    l->verified = NULL;
    l->verified_bytes = 0;
    atomic_store(&l->nverified, 0);
    rf__stats_free(&l->stats);
}

/* Undoes a start that failed part-way, so that the loader can be started
 * again (after fixing an option, say): threads joined, memory freed, the
 * stop flag and the queues back to their state before rf_loader_start. */
static void start_failed(rf_loader *l)
{
    teardown(l);
    atomic_store(&l->stopped, 0);
    l->joined = 0;
    l->threads = 0;
    l->nworker_threads = 0;
    l->started = 0;
    atomic_store(&l->qhead, 0);
    atomic_store(&l->qtail, 0);
    atomic_store(&l->errors_seen, 0);
    l->nfill = 0;
    l->nworkers = 0;
    memset(&l->stats, 0, sizeof l->stats);
}

int rf_loader_start(rf_loader *l)
{
    if (!l)
        return RF_E_INVALID;
    if (l->started) {
        set_err(l, "loader: already started");
        return RF_E_STATE;
    }
    int rc = fork_check(l);
    if (rc)
        return rc;
    int64_t *p = l->params;
    if (p[RF_P_RANK] >= p[RF_P_WORLD_SIZE]) {
        set_err(l, "options: rank %lld is not below world_size %lld", (long long)p[RF_P_RANK],
                (long long)p[RF_P_WORLD_SIZE]);
        return RF_E_INVALID;
    }
    if (p[RF_P_RECORD_SIZE] > 0) {
        static const int64_t itemsize[] = {1, 2, 4, 8}; /* enum rf_dtype */
        if (p[RF_P_TRANSFORM] != RF_TRANSFORM_NONE) {
            set_err(l, "options: record files need transform none (their bytes are passed "
                       "through, not decoded)");
            return RF_E_INVALID;
        }
        if (p[RF_P_RECORD_SIZE] % itemsize[p[RF_P_DTYPE]] != 0) {
            set_err(l, "options: record_size %lld is not a multiple of the dtype's size %lld",
                    (long long)p[RF_P_RECORD_SIZE], (long long)itemsize[p[RF_P_DTYPE]]);
            return RF_E_INVALID;
        }
    }
    char err[600];
    rf_source_opts so = {(uint64_t)p[RF_P_RECORD_SIZE], (uint64_t)p[RF_P_HEADER_SIZE]};
    rc = rf__source_open_ex(&l->src, l->spec, &so, err, sizeof err);
    if (rc < 0) {
        set_err(l, "%s", err);
        return rc;
    }
    if (p[RF_P_VERIFY] == RF_VERIFY_ONCE && l->src.kind != RF_SOURCE_RECORDS) {
        l->verified_bytes = ((size_t)l->src.n / 64 + 1) * sizeof *l->verified;
        l->verified = calloc(1, l->verified_bytes);
        if (!l->verified) {
            set_err(l, "loader: out of memory for %lld samples", (long long)l->src.n);
            start_failed(l);
            return RF_E_NOMEM;
        }
    }
    rc = rf__sampler_init(&l->sampler, l->src.n, p[RF_P_BATCH_SIZE], (int)p[RF_P_SHUFFLE],
                          (int)p[RF_P_DROP_LAST], (uint64_t)p[RF_P_SEED], p[RF_P_RANK],
                          p[RF_P_WORLD_SIZE]);
    if (rc < 0) {
        set_err(l, "sampler: cannot order %lld samples", (long long)l->src.n);
        start_failed(l);
        return rc;
    }
    int64_t size = p[RF_P_IMAGE_SIZE];
    l->sample_bytes = p[RF_P_RECORD_SIZE] > 0 ? (size_t)p[RF_P_RECORD_SIZE]
                                              : (size_t)size * (size_t)size * 3;
    /* The copier first: it makes the device current, so that the ring's
     * page-locked memory belongs to the loader's device's context. */
    rc = rf__copier_open(&l->copier, (int)p[RF_P_DEVICE], (int)p[RF_P_PREFETCH] + RF_RING_MAX_GROW,
                         (size_t)p[RF_P_BATCH_SIZE] * l->sample_bytes, p[RF_P_BATCH_SIZE],
                         l->cuda_note, sizeof l->cuda_note, err, sizeof err);
    if (rc < 0) {
        set_err(l, "%s", err);
        start_failed(l);
        return rc;
    }
    int pin = p[RF_P_PIN_MEMORY] && l->copier;
    rc = rf__ring_init(&l->ring, (int)p[RF_P_PREFETCH], p[RF_P_BATCH_SIZE], l->sample_bytes, pin);
    if (rc == 0 && l->copier) {
        assert(l->ring.cap <= (int)p[RF_P_PREFETCH] + RF_RING_MAX_GROW);
        l->ring.copy_done = rf__copier_slot_done;
        l->ring.copy_ctx = l->copier;
    }
    rf__copier_leave(l->copier); /* the caller's current device again */
    if (rc < 0) {
        set_err(l, "ring: cannot allocate %lld slots of %lld x %zu bytes",
                (long long)p[RF_P_PREFETCH], (long long)p[RF_P_BATCH_SIZE], l->sample_bytes);
        start_failed(l);
        return rc;
    }
    int budget = rf__worker_budget((int)p[RF_P_LOCAL_WORLD_SIZE], l->budget_why,
                                   sizeof l->budget_why);
    l->nworkers = p[RF_P_NUM_WORKERS] > 0 ? (int)p[RF_P_NUM_WORKERS] : budget;
    l->active_workers = l->nworkers;
    l->tuning = p[RF_P_NUM_WORKERS] == 0;
    if (l->tuning) {
        /* Prefetch may grow within RF_RING_MAX_GROW slots and 2 GiB of ring. */
        size_t slot_bytes = (size_t)p[RF_P_BATCH_SIZE] * l->sample_bytes;
        int64_t by_mem = (int64_t)(((size_t)2 << 30) / (slot_bytes ? slot_bytes : 1));
        int max_prefetch = (int)p[RF_P_PREFETCH] + RF_RING_MAX_GROW;
        if (by_mem < max_prefetch)
            max_prefetch = by_mem > p[RF_P_PREFETCH] ? (int)by_mem : (int)p[RF_P_PREFETCH];
        rf__tuner_init(&l->tuner, budget, budget, (int)p[RF_P_PREFETCH], max_prefetch);
    }
    unsigned depth = p[RF_P_READ_DEPTH] > 0 ? (unsigned)p[RF_P_READ_DEPTH]
                                             : (unsigned)(16 + 4 * l->nworkers);
    int backend = p[RF_P_IO_BACKEND] == RF_IO_URING   ? RF__IO_URING
                  : p[RF_P_IO_BACKEND] == RF_IO_PREAD ? RF__IO_PREAD
                                                      : 0;
    rc = rf__reader_create(&l->reader, backend, depth);
    if (rc < 0) {
        set_err(l, "reader: cannot set up");
        start_failed(l);
        return rc;
    }
    rf__reader_set_timeout(l->reader, p[RF_P_READ_TIMEOUT_MS]);
    rf__reader_set_max_bytes(l->reader, (uint64_t)p[RF_P_MAX_FILE_BYTES]);
    depth = rf__reader_depth(l->reader); /* may be lower: RLIMIT_NOFILE */
    l->njobs = (int)depth + 2 * l->nworkers + 4;
    l->jobs = calloc((size_t)l->njobs, sizeof *l->jobs);
    l->queue = calloc((size_t)l->njobs, sizeof *l->queue);
    l->fill = calloc((size_t)l->ring.cap, sizeof *l->fill);
    l->workers = calloc((size_t)l->nworkers, sizeof *l->workers);
    if (!l->jobs || !l->queue || !l->fill || !l->workers) {
        set_err(l, "loader: out of memory");
        start_failed(l);
        return RF_E_NOMEM;
    }
    for (int i = 0; i < l->njobs; i++)
        put_free_job(l, &l->jobs[i]);
    for (int i = 0; i < l->nworkers; i++) {
        l->workers[i].l = l;
        l->workers[i].id = i;
        l->workers[i].dec = rf__decoder_create();
        if (!l->workers[i].dec) {
            set_err(l, "decode: cannot create a JPEG decompressor");
            start_failed(l);
            return RF_E_NOMEM;
        }
    }
    rf__sampler_set_epoch(&l->sampler, 0);
    l->gen = 1;
    l->epoch = 0;
    char why[300];
    if (p[RF_P_NUM_WORKERS] > 0)
        snprintf(why, sizeof why, "fixed: num_workers=%d (budget %d: %s)", l->nworkers, budget,
                 l->budget_why);
    else
        snprintf(why, sizeof why, "auto: %d workers, the budget (%s)", l->nworkers,
                 l->budget_why);
    rf__stats_add_decision(&l->stats, 0, l->nworkers, why);

    l->started = 1;
    if (pthread_create(&l->dispatcher, NULL, dispatcher_main, l) != 0) {
        set_err(l, "loader: cannot start the reader thread: %s", strerror(errno));
        start_failed(l);
        l->started = 0;
        return RF_E_SYSTEM;
    }
    l->threads = 1;
    for (int i = 0; i < l->nworkers; i++) {
        if (pthread_create(&l->workers[i].thread, NULL, worker_main, &l->workers[i]) != 0) {
            set_err(l, "loader: cannot start decode worker %d: %s", i, strerror(errno));
            start_failed(l);
            l->started = 0;
            return RF_E_SYSTEM;
        }
        l->nworker_threads = i + 1;
    }
    return RF_OK;
}

void rf_loader_stop(rf_loader *l)
{
    if (!l)
        return;
    if (getpid() != l->pid) {
        /* a forked child: no threads to stop, and the mutex may be held */
        atomic_store(&l->stopped, 1);
        return;
    }
    pthread_mutex_lock(&l->mu);
    atomic_store(&l->stopped, 1);
    pthread_cond_broadcast(&l->cv_disp);
    pthread_cond_broadcast(&l->cv_work);
    pthread_cond_broadcast(&l->cv_park);
    pthread_cond_broadcast(&l->cv_cons);
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_lock(&l->stop_mu);
    if (!l->joined) {
        if (l->threads)
            pthread_join(l->dispatcher, NULL);
        for (int i = 0; i < l->nworker_threads; i++)
            pthread_join(l->workers[i].thread, NULL);
        l->threads = 0;
        l->nworker_threads = 0;
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
        pthread_mutex_destroy(&l->stop_mu);
        pthread_cond_destroy(&l->cv_disp);
        pthread_cond_destroy(&l->cv_work);
        pthread_cond_destroy(&l->cv_park);
        pthread_cond_destroy(&l->cv_cons);
    }
    free(l->spec);
    free(l);
}

int64_t rf_loader_num_samples(const rf_loader *l)
{
    return l && l->started ? l->src.n : 0;
}

int64_t rf_loader_num_batches(const rf_loader *l)
{
    return l && l->started ? l->sampler.num_batches : 0;
}

/* ---- position ------------------------------------------------------------ */

/* A started loader of this process, or why not. */
static int usable_check(rf_loader *l)
{
    if (!l)
        return RF_E_INVALID;
    if (!l->started) {
        set_err(l, "loader: not started");
        return RF_E_STATE;
    }
    return fork_check(l);
}

int rf_loader_seek(rf_loader *l, int64_t epoch, int64_t batch)
{
    int rc = usable_check(l);
    if (rc)
        return rc;
    if (epoch < 0 || batch < 0 || batch > l->sampler.num_batches) {
        set_err(l, "loader: cannot seek to epoch %lld batch %lld (%lld batches per epoch)",
                (long long)epoch, (long long)batch, (long long)l->sampler.num_batches);
        return RF_E_INVALID;
    }
    pthread_mutex_lock(&l->mu);
    l->gen++;
    l->epoch = epoch;
    rf__sampler_set_epoch(&l->sampler, epoch);
    l->next_batch = l->sched_batch = batch;
    l->nfill = 0;
    l->last_return_ns = 0; /* time between epochs is not a training step */
    rf__ring_invalidate(&l->ring, l->gen);
    pthread_cond_broadcast(&l->cv_disp);
    pthread_cond_broadcast(&l->cv_work);
    pthread_mutex_unlock(&l->mu);
    return RF_OK;
}

int rf_loader_set_epoch(rf_loader *l, int64_t epoch)
{
    return rf_loader_seek(l, epoch, 0);
}

int rf_loader_tell(const rf_loader *l, int64_t *epoch, int64_t *batch)
{
    if (!l)
        return RF_E_INVALID;
    rf_loader *m = (rf_loader *)l;
    pthread_mutex_lock(&m->mu);
    if (epoch)
        *epoch = l->epoch;
    if (batch)
        *batch = l->next_batch;
    pthread_mutex_unlock(&m->mu);
    return RF_OK;
}

/* ---- consuming ----------------------------------------------------------- */

/* Closes the measurement window: feeds it to the tuner and applies the
 * decision (unparks/parks workers, grows the ring). Called with l->mu held. */
static void tuner_window(rf_loader *l, int64_t now)
{
    if (l->blocked_since) {
        l->win_blocked_ns += now - l->blocked_since;
        l->blocked_since = now;
    }
    int64_t cpu_total, busy_total;
    gather_counters(l, &cpu_total, &busy_total);
    l->win_cpu_ns = cpu_total - l->win_cpu_base;
    l->win_busy_ns = busy_total - l->win_busy_base;
    l->win_cpu_base = cpu_total;
    l->win_busy_base = busy_total;
    rf_tuner_window w = {
        .batches = l->win_batches,
        .samples = l->win_samples,
        .wall_s = (double)(now - l->win_t0) / 1e9,
        .stall_s = (double)l->win_stall_ns / 1e9,
        .step_s = (double)l->win_step_ns / 1e9,
        .worker_cpu_s = (double)l->win_cpu_ns / 1e9,
        .worker_busy_s = (double)l->win_busy_ns / 1e9,
        .blocked_s = (double)l->win_blocked_ns / 1e9,
        .read_s = (double)l->win_read_ns / 1e9,
        .workers = l->active_workers,
        .prefetch = l->ring.k,
    };
    rf_tuner_decision d;
    rf__tuner_step(&l->tuner, &w, &d);
    if (d.workers >= 1 && d.workers <= l->nworkers && d.workers != l->active_workers) {
        atomic_store(&l->active_workers, d.workers);
        pthread_cond_broadcast(&l->cv_park); /* unpark */
        pthread_cond_broadcast(&l->cv_work); /* or let the extra ones park */
    }
    while (d.prefetch > l->ring.k && rf__ring_grow(&l->ring) == 0)
        pthread_cond_signal(&l->cv_disp);
    if (d.changed)
        rf__stats_add_decision(&l->stats, l->stats.batches, l->active_workers, d.reason);
    l->win_t0 = now;
    l->win_batches = l->win_samples = 0;
    l->win_stall_ns = l->win_step_ns = l->win_cpu_ns = l->win_busy_ns = 0;
    l->win_blocked_ns = l->win_read_ns = 0;
}

int rf_loader_next_wait(rf_loader *l, rf_batch **out, int64_t timeout_ms)
{
    if (!out)
        return RF_E_INVALID;
    *out = NULL;
    int rc = usable_check(l);
    if (rc)
        return rc;
    int64_t t0 = rf__now_ns();
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    if (timeout_ms >= 0) {
        deadline.tv_sec += timeout_ms / 1000;
        deadline.tv_nsec += (timeout_ms % 1000) * 1000000;
        if (deadline.tv_nsec >= 1000000000) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000;
        }
    }
    pthread_mutex_lock(&l->mu);
    if (!l->stats.t_first_ns)
        l->stats.t_first_ns = t0;
    if (!l->win_t0)
        l->win_t0 = t0;
    if (l->last_return_ns) {
        l->win_step_ns += t0 - l->last_return_ns; /* the consumer's step since its last batch */
        l->last_return_ns = 0;
    }
    rf_slot *s = NULL;
    for (;;) {
        if (l->stopped) {
            set_err(l, "loader: stopped");
            rc = RF_E_STATE;
            break;
        }
        if (l->next_batch >= l->sampler.num_batches) {
            rc = RF_END_OF_EPOCH;
            break;
        }
        s = rf__ring_find(&l->ring, l->gen, l->next_batch);
        if (s && s->state == RF_SLOT_READY)
            break;
        if (!s && rf__ring_count(&l->ring, RF_SLOT_LENT) == l->ring.k) {
            set_err(l, "ring: all %d slots are lent; release batches before asking for more",
                    l->ring.k);
            rc = RF_E_STATE;
            break;
        }
        int w;
        if (timeout_ms >= 0) {
            w = pthread_cond_timedwait(&l->cv_cons, &l->mu, &deadline);
        } else {
            w = pthread_cond_wait(&l->cv_cons, &l->mu);
        }
        if (w == ETIMEDOUT) {
            rc = RF_AGAIN;
            break;
        }
    }
    int64_t t1 = rf__now_ns();
    l->stats.stall_ns += t1 - t0;
    l->win_stall_ns += t1 - t0;
    if (rc != RF_OK) {
        pthread_mutex_unlock(&l->mu);
        return rc;
    }
    l->next_batch++;
    pthread_cond_signal(&l->cv_disp); /* the prefetch window moved */
    int nbad = atomic_load(&s->nbad);
    for (int i = 0; i < nbad && i < RF_SLOT_MAX_BAD; i++) {
        char name[512]; /* the path, or "shard.tar:key.jpg", or "file at offset N" */
        rf__source_name(&l->src, s->bad[i].sample, name, sizeof name);
        rf__stats_add_error(&l->stats, s->bad[i].sample, l->epoch, name, s->bad[i].reason);
    }
    l->stats.errors_total += s->bad_dropped;
    if (!s->errcode)
        l->stats.skipped += atomic_load(&s->nskipped);
    if (s->errcode) {
        rc = s->errcode;
        snprintf(l->errmsg, sizeof l->errmsg, "%s", s->errmsg);
        s->state = RF_SLOT_FREE;
        pthread_mutex_unlock(&l->mu);
        return rc;
    }
    rf__ring_lend(s);
    s->view.loader = l;
    l->stats.images += s->count;
    l->stats.batches++;
    l->stats.t_last_ns = t1;
    l->last_return_ns = t1;
    l->win_batches++;
    l->win_samples += s->count;
    if (l->tuning && rf__tuner_window_ready(l->win_batches, (double)(t1 - l->win_t0) / 1e9))
        tuner_window(l, t1);
    pthread_mutex_unlock(&l->mu);
    *out = &s->view;
    return RF_OK;
}

int rf_loader_next(rf_loader *l, rf_batch **out)
{
    return rf_loader_next_wait(l, out, -1);
}

void rf_batch_release(rf_batch *b)
{
    if (!b || !b->loader)
        return;
    rf_loader *l = b->loader;
    if (b->dev_data && l->copier) {
        /* Records the release on the consumer's stream (copier.h). */
        rf__copier_release(l->copier, b->slot->id);
        b->dev_data = NULL;
        b->dev_labels = NULL;
    }
    pthread_mutex_lock(&l->mu);
    if (rf__ring_release(b->slot) == 0)
        pthread_cond_signal(&l->cv_disp);
    pthread_mutex_unlock(&l->mu);
}

void *rf_batch_data(const rf_batch *b)
{
    return b ? b->data : NULL;
}

const int64_t *rf_batch_labels(const rf_batch *b)
{
    return b ? b->labels : NULL;
}

int64_t rf_batch_count(const rf_batch *b)
{
    return b ? b->count : 0;
}

int64_t rf_batch_index(const rf_batch *b)
{
    return b ? b->index : -1;
}

int64_t rf_batch_epoch(const rf_batch *b)
{
    return b ? b->epoch : -1;
}

const int64_t *rf_batch_samples(const rf_batch *b)
{
    return b ? b->samples : NULL;
}

size_t rf_batch_nbytes(const rf_batch *b)
{
    return b ? b->nbytes : 0;
}

/* ---- CUDA (the copier does the work: copier.c) ---------------------------- */

int rf_cuda_device_count(void)
{
    char note[240];
    return rf__cuda_devices(note, sizeof note);
}

static int no_device(rf_loader *l)
{
    set_err(l, "copier: this loader has no CUDA device: %s",
            l->started ? l->cuda_note : "not started");
    return RF_E_STATE;
}

int rf_loader_next_device_wait(rf_loader *l, void *stream, rf_batch **out, int64_t timeout_ms)
{
    if (!out)
        return RF_E_INVALID;
    *out = NULL;
    if (!l)
        return RF_E_INVALID;
    if (!l->copier)
        return no_device(l);
    rf_batch *b;
    int rc = rf_loader_next_wait(l, &b, timeout_ms);
    if (rc != RF_OK)
        return rc;
    void *dev = NULL;
    int64_t *dev_labels = NULL;
    rc = rf__copier_to_device(l->copier, b->slot->id, b->data, b->nbytes, b->labels, b->count,
                              stream, &dev, &dev_labels, l->errmsg, sizeof l->errmsg);
    rf__ring_mark_copy(b->slot); /* also on failure: something may have been enqueued */
    if (rc < 0) {
        rf_batch_release(b);
        return rc;
    }
    b->dev_data = dev;
    b->dev_labels = dev_labels;
    *out = b;
    return RF_OK;
}

int rf_loader_next_device(rf_loader *l, void *stream, rf_batch **out)
{
    return rf_loader_next_device_wait(l, stream, out, -1);
}

void *rf_batch_device_data(const rf_batch *b)
{
    return b ? b->dev_data : NULL;
}

const int64_t *rf_batch_device_labels(const rf_batch *b)
{
    return b ? b->dev_labels : NULL;
}

int rf_batch_copy_to(rf_batch *b, void *dst_images, void *dst_labels, void *stream)
{
    if (!b || !b->loader || !b->slot)
        return RF_E_INVALID;
    rf_loader *l = b->loader;
    if (!l->copier)
        return no_device(l);
    pthread_mutex_lock(&l->mu);
    int lent = b->slot->state == RF_SLOT_LENT;
    pthread_mutex_unlock(&l->mu);
    if (!lent) {
        set_err(l, "copier: rf_batch_copy_to: the batch was released");
        return RF_E_STATE;
    }
    int rc = rf__copier_copy_to(l->copier, b->slot->id, b->data, b->nbytes, b->labels, b->count,
                                dst_images, dst_labels, stream, l->errmsg, sizeof l->errmsg);
    if (rc != RF_E_INVALID)
        rf__ring_mark_copy(b->slot);
    return rc;
}

const char *rf_loader_errmsg(const rf_loader *l)
{
    return l ? l->errmsg : "no loader";
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

int64_t rf_loader_stats_json(rf_loader *l, char *buf, size_t cap)
{
    if (!l)
        return RF_E_INVALID;
    rf_json j = {0};
    pthread_mutex_lock(&l->mu);
    rf__json_raw(&j, "{");
    gather_counters(l, NULL, NULL);
    rf__stats_json(&l->stats, rf__now_ns(), &j);
    rf__json_fmt(&j, ", \"num_workers\": %d, \"worker_threads\": %d, \"auto_workers\": %s, ",
                 l->active_workers, l->nworkers, l->tuning ? "true" : "false");
    rf__json_fmt(&j, "\"epoch\": %lld, ", (long long)l->epoch);
    rf__json_fmt(&j, "\"num_samples\": %lld, \"num_batches\": %lld, \"batch_size\": %lld, ",
                 (long long)l->src.n, (long long)l->sampler.num_batches,
                 (long long)l->params[RF_P_BATCH_SIZE]);
    rf__json_raw(&j, "\"io_backend\": ");
    rf__json_str(&j, !l->reader                                    ? "none"
                     : rf__reader_backend(l->reader) == RF__IO_URING ? "io_uring"
                                                                     : "pread");
    rf__json_raw(&j, ", \"io_note\": ");
    rf__json_str(&j, l->reader ? rf__reader_note(l->reader) : "");
    size_t index_bytes = rf__source_bytes(&l->src) + (size_t)l->src.n * 12 + l->verified_bytes;
    rf__json_fmt(&j,
                 ", \"memory\": {\"mode\": \"%s\", \"ring_bytes\": %zu, \"index_bytes\": %zu, "
                 "\"prefetch\": %d, \"note\": ",
                 l->ring.pinned ? "pinned" : "pageable", l->ring.mem_bytes, index_bytes,
                 l->ring.k);
    char why[300];
    if (l->ring.note[0] || l->ring.pinned || !l->started)
        snprintf(why, sizeof why, "%s", l->ring.note);
    else if (!l->copier)
        snprintf(why, sizeof why, "pageable: %s", l->cuda_note);
    else
        snprintf(why, sizeof why, "pageable on purpose: pin_memory=0");
    rf__json_str(&j, why);
    char dev[32];
    if (l->copier)
        snprintf(dev, sizeof dev, "cuda:%lld", (long long)l->params[RF_P_DEVICE]);
    else
        snprintf(dev, sizeof dev, "cpu");
    rf__json_raw(&j, "}, \"device\": ");
    rf__json_str(&j, dev);
    rf_copier_stats cs = {0};
    if (l->copier)
        rf__copier_stats(l->copier, &cs);
#ifdef RF_HAVE_CUDA
    rf__json_raw(&j, ", \"cuda\": {\"built\": true");
#else
    rf__json_raw(&j, ", \"cuda\": {\"built\": false");
#endif
    rf__json_fmt(&j,
                 ", \"available\": %s, \"requested_device\": %lld, \"copies\": %lld, "
                 "\"copy_bytes\": %lld, \"d2d_copies\": %lld, \"device_buffer_bytes\": %lld, "
                 "\"errors\": %lld, \"last_error\": ",
                 l->copier ? "true" : "false", (long long)l->params[RF_P_DEVICE],
                 (long long)cs.copies, (long long)cs.bytes, (long long)cs.d2d,
                 (long long)cs.dev_bytes, (long long)cs.errors);
    rf__json_str(&j, cs.last_error);
    rf__json_raw(&j, ", \"reason\": ");
    rf__json_str(&j, l->cuda_note);
    rf__json_raw(&j, "}");
    rf__json_raw(&j, ", \"worker_budget\": ");
    rf__json_str(&j, l->budget_why);
    rf__json_raw(&j, "}");
    pthread_mutex_unlock(&l->mu);
    if (j.oom) {
        free(j.buf);
        return RF_E_NOMEM;
    }
    if (buf && cap > 0) {
        size_t n = j.len < cap - 1 ? j.len : cap - 1;
        memcpy(buf, j.buf, n);
        buf[n] = '\0';
    }
    int64_t len = (int64_t)j.len;
    free(j.buf);
    return len;
}
