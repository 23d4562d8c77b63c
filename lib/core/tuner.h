/*
 * tuner.h - how many decode workers to run, and how deep the ring.
 *
 * The budget is the usable cores (CPU affinity mask, capped by the cgroup CPU
 * quota) divided among the training processes on the node.
 *
 * The controller is a pure function of measurements: the loader sums what
 * happened during one window (rf__tuner_window_ready says when a window is
 * long enough), feeds it to rf__tuner_step from the consumer thread, and
 * applies the decision (parks or unparks workers, grows the ring). Nothing in
 * here reads a clock or touches a thread, so the policy is unit-tested on
 * synthetic traces (tests/test_tuner.c) and run live by bench/tuner_bench.c.
 */
#ifndef RF_TUNER_H
#define RF_TUNER_H

#include <stddef.h>
#include <stdint.h>

/* Usable cores of this process: min(affinity mask, cgroup quota), >= 1.
 * why (optional) says where the number comes from. */
int rf__usable_cores(char *why, size_t whycap);

/* Worker budget: usable cores / local_world_size, at least 1. */
int rf__worker_budget(int local_world_size, char *why, size_t whycap);

/* One measurement window. Times are seconds; "summed" means over threads, so
 * such a figure may exceed wall_s. */
typedef struct rf_tuner_window {
    int64_t batches, samples; /* delivered to the consumer in the window */
    double wall_s;            /* window wall time */
    double stall_s;           /* consumer time waiting inside next() */
    double step_s;            /* consumer time between next() calls (its training step), summed */
    double worker_cpu_s;      /* decode workers' thread CPU time, summed over workers */
    double worker_busy_s;     /* decode workers' time processing samples, summed */
    double blocked_s;         /* wall time the producers had work ready but no free ring slot */
    double read_s;            /* reader latency, summed over samples */
    int workers;              /* active decode workers during the window */
    int prefetch;             /* ring slots during the window */
} rf_tuner_window;

typedef struct rf_tuner_decision {
    int workers;      /* active decode workers for the next window */
    int prefetch;     /* ring slots for the next window (only ever grows) */
    int changed;      /* 1 when workers or prefetch differ from the window's */
    char reason[160]; /* short, human; never empty */
} rf_tuner_decision;

/* A move that did not pay off, held back for a while: an add that brought no
 * more images/s (ceiling), a trim that lost images/s, a removal that had to
 * be undone (floor). Lifted when the conditions it was learnt under change a
 * lot, or blindly after a retry interval that doubles with each failure. */
typedef struct rf_tuner_hold {
    int active;
    int at;      /* ceiling: no add up to `at`; floor: no removal below `at` */
    int fails;   /* failures since the conditions last changed: the retry interval doubles */
    int age;     /* windows since it was set */
    int ref_set; /* windows summed into the reference conditions so far */
    int moved;   /* consecutive windows the conditions differed a lot from them */
    int lifted;  /* 1: lifted because conditions moved, 2: by the retry interval */
    int reset;   /* last lifted because conditions moved: the next failure counts from 1 */
    double ref_step, ref_cpu, ref_share; /* step s/img, CPU s/img, CPU/busy */
} rf_tuner_hold;

/* The controller's state: its own, read by nobody else (the loader uses the
 * decisions). Plain data, no allocation: a loader embeds it. */
typedef struct rf_tuner {
    int budget;                     /* workers in [1, budget] */
    int min_prefetch, max_prefetch; /* prefetch in [min_prefetch, max_prefetch] */
    int workers, prefetch;          /* the current decision */
    int64_t windows;                /* windows seen since the cold start */
    int quiet;                      /* windows since the last change */
    int steady;                     /* the previous decision changed nothing */

    /* A change under evaluation on the next window. */
    int pending;      /* RF__TUNE_* in tuner.c */
    int from;         /* worker count before the change */
    double from_rate; /* images/s level at `from` */
    double need_gain; /* gain a pending add must bring */
    int strict;       /* a retried climb: adds must beat 4x the jitter, not just 3% */
    double last_gain; /* gain of the last add that paid off (-1: none) */
    int proven;       /* count an add proved better than one fewer (0: none) */
    int removed_from; /* count before the last removal, until the next add (0: none) */

    /* Streaks and history of the current count. */
    int calm;            /* consecutive windows with stall < 1% */
    int stalled;         /* consecutive windows with stall > 5% */
    int starved;         /* consecutive windows with workers' CPU < 75% of their busy time */
    double busy_hist[3]; /* busy fraction of the last CALM_WINDOWS (3) windows */

    /* images/s: the level since the last change, and its jitter. */
    double level;     /* mean of the windows since the last change, then an EWMA */
    int level_n;      /* windows in level */
    double noise2;    /* mean square of the relative change between steady windows */
    int noise_n;      /* samples in noise2 */
    double prev_rate; /* last window's images/s, */
    double prev_step; /* consumer step s/img */
    double prev_cpu;  /* and worker CPU s/img */

    rf_tuner_hold ceiling, floor, trim;
} rf_tuner;

/* Cold start. budget >= 1 (clamped), initial_workers is clamped into
 * [1, budget], max_prefetch into [prefetch, ...]. */
void rf__tuner_init(rf_tuner *t, int budget, int initial_workers, int prefetch, int max_prefetch);

/* Feeds one window; returns the decision for the next window (workers within
 * [1, budget], prefetch within [prefetch, max_prefetch]). A window whose
 * workers/prefetch differ from the last decision (the loader could not apply
 * it) resynchronises the tuner to what really ran. */
void rf__tuner_step(rf_tuner *t, const rf_tuner_window *w, rf_tuner_decision *d);

/* Window policy: a window closes when it has >= 16 batches and >= 0.1 s. */
int rf__tuner_window_ready(int64_t batches, double wall_s);

#endif
