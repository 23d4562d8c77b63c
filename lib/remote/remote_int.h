/*
 * remote_int.h - the remote stage's own state, shared by its two files:
 * remote.c (a loader's shards: creation, fork, uses and pins, the
 * dispatcher's side, stats) and remote_tick.c (what the fetch thread does
 * for them: the want list, room, transfers and their completion). Nothing
 * else includes it; remote.c's opening comment says how the whole works
 * and remote.h which lock guards what.
 */
#ifndef RF_REMOTE_INT_H
#define RF_REMOTE_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache.h"
#include "fetch.h"
#include "remote.h"

enum { SH_IDLE = 0, SH_WANTED = 1, SH_FETCHING = 2, SH_READY = 3, SH_FAILED = 4 };

typedef struct rf_shard {
    struct rf_remote *owner;
    char *url;
    uint64_t size;
    char etag[RF__FETCH_ETAG];
    int state;
    int queued;       /* in the want list */
    int retry;        /* FAILED before the last seek: IDLE again once unused */
    int deferred;     /* WANTED after a release: wanted again once it is the head */
    int seen;         /* read from since the last seek (a fetch then is a refetch) */
    int64_t planned;  /* samples the lookahead walked, not yet handed on */
    int64_t inflight; /* samples being read or decoded, and the indexer's use */
    /* (mu, written only under it; set to -1 under it before the close, so
     * that fork_child never closes a number reused meanwhile) */
    int pin_fd;  /* READY: BASE.tar, shared-locked */
    int lock_fd; /* FETCHING: BASE.lock */
    int tmp_fd;  /* FETCHING: the temporary file */
    int sync_fd; /* committed while the loader was cold: a duplicate of the
                  * shard's file, synced (cache.c) once warm (remote_tick.c) */
    int late_fd; /* the pin of sync_fd's file, ended while its sync was due:
                  * held until the sync, which then runs at once (even cold) */
    char *tmp;
    rf_fetch_req *req;
    char *err; /* FAILED */
} rf_shard;

struct rf_remote {
    rf_fetch *fetch;
    rf_cache cache;
    pid_t pid;
    struct rf_remote *next_live; /* (live_mu) the live remotes, for the fork handlers */
    pthread_mutex_t mu;          /* see remote.h */
    pthread_cond_t cv;           /* (mu) a shard became READY or FAILED */
    rf_shard *sh;                /* (mu) grown by rf__remote_add; entries: see remote.h */
    uint32_t nsh, cap;           /* (mu) shards, and room for them (set at index time) */
    uint32_t *want;              /* (mu) shard ids in the order wanted */
    uint32_t nwant;
    int64_t nused; /* (mu) shards with uses */
    /* shards the lookahead may want at once: written once at index time
     * (rf__remote_plan_room, under mu, before the dispatcher starts), then
     * only read */
    int64_t cap_shards;
    /* descriptors the shards may hold at once (pins, transfer files and
     * fetch locks, held syncs), from RLIMIT_NOFILE at create (remote.c);
     * then only read */
    int64_t fd_cap;
    int parallel;              /* RF_P_FETCH_PARALLEL; read-only */
    const _Atomic int *cancel; /* rf_remote_opts.cancel (NULL: never); read-only */
    int dispatching;           /* (mu) the dispatcher runs (rf__remote_set_wake): before it,
                                * the indexer's walks want every transfer at once */
    /* fetch thread only: since when (ns, 0: not) a shard's open failed for
     * want of descriptors (EMFILE), waiting for some to be let go */
    int64_t fd_short_since;
    int64_t cur_batch, cur_pos; /* (mu) the lookahead's next sample */
    pthread_mutex_t wake_mu;    /* protects wake and wake_ctx, held across the call,
                              * so that no call runs after rf__remote_set_wake
                              * returns (order: wake_mu, then the loader's mutex) */
    void (*wake)(void *);
    void *wake_ctx;
    int64_t head; /* (mu) the shard the dispatcher waits on, or -1 */
    /* fetch thread only: the folder's starvation count last seen; since when
     * (ns, 0: not) the head, starve_head, has found no room */
    uint64_t starved_seen;
    int64_t starve_since, starve_head;
    /* fetch thread only: no room before; the folder is listed again from
     * room_next_ns (ns), room_ms later each time (see above) */
    int64_t room_next_ns;
    int room_ms;
    int unpinned;         /* (mu) this loader unpinned a shard: list the folder at once */
    int cold;             /* (mu) the dispatcher runs and has no complete batch yet (see above) */
    uint64_t largest;     /* (mu) the largest shard (rf__remote_plan_room), then read-only */
    int warned;           /* (mu) the room warning was given (remote_tick.c) */
    int64_t hits, misses; /* (mu) pins found in the cache / fetches started */
    int64_t releases, refetches; /* (mu) pins given up early / shards fetched again */
    struct rf_rman *man; /* owned; set under mu before any shard is wanted, then
                          * read-only here (its checks run on the fetch thread) */
};

/* Under mu: ends shard s's pin. When the pinned file's sync is still due
 * (sync_fd), the pin lasts (late_fd) until the fetch thread has synced it,
 * which it then does at once: a duplicate outliving its pin would hold an
 * evicted file's blocks out of the folder's count (cache.h). The caller
 * wakes the fetch thread. */
void rf__remote_unpin(rf_shard *s);

/* The room warning's text (remote_tick.c), with the refetches so far. */
void rf__remote_room_warning(rf_remote *r, int64_t refetches, char *out, size_t cap);

/* The fetch thread's tick (remote_tick.c), set at creation (rf__fetch_set_tick):
 * walks the want list, starts transfers, settles shards. */
void rf__remote_tick(void *ctx);

#endif
