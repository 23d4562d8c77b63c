/*
 * tuner.c - the worker budget from the cores this process may really use, and
 * the controller that picks the active worker count and the ring depth.
 *
 * Budget: sched_getaffinity gives the cores the scheduler allows (taskset,
 * cpusets); a cgroup v2 cpu.max quota (or v1 cfs_quota_us / cfs_period_us),
 * rounded up, caps it, as in containers the affinity mask often shows the
 * whole host.
 *
 * Controller (issue 4), one decision per measurement window, a pure function
 * of the windows seen (no clock, no thread):
 *  - cold start: jump by Little's law, workers = ceil(demand x CPU s/img x
 *    1.1), where demand = samples / step_s is what the consumer would take if
 *    it never waited (no measurable step: the budget);
 *  - while the consumer stalls > 5%: add one worker and judge it on the next
 *    window: >= 3% more images/s keeps it (and may add again at once), less
 *    reverts it and sets a ceiling (a hold);
 *  - workers starved of CPU for 2 windows (thread CPU < 75% of their busy
 *    time: more threads than cores really free; one window may be noise)
 *    while the consumer stalls: trim toward
 *    the cores they got, by half at most per step, judged on the next window
 *    (losing > 5% of images/s restores them and holds trimming back: a
 *    consumer that burns CPU, or a machine shared with other jobs, can make
 *    more threads pay although each gets less than a core); a trim that
 *    keeps images/s sets a ceiling at the count it came from;
 *  - calm for 3 windows (stall < 1%) and the busy fraction over them says
 *    one fewer would still keep up with 15% margin (busy / (w x wall) <
 *    (w-1)/w x 0.85): remove one; after a removal, an add needs 2 stalled
 *    windows, and then simply undoes the removal (no trial: that count kept
 *    the consumer fed) and sets a floor (a hold);
 *  - the consumer stalls while producers were blocked on a full ring > 10%
 *    of the window: one more ring slot, up to max_prefetch (a deeper ring
 *    absorbs bursts; more workers would not).
 * Holds: one stands for at least 8 windows, then lifts when the conditions
 * it was learnt under (consumer step/img, CPU/img, CPU share; not the share
 * for a trim) move by > 25% for 3 windows in a row against their mean over
 * its first 8 (CPU share is a ratio of two noisy times: a reference from
 * fewer windows, or 2 windows off it, lift holds on noise alone). A ceiling
 * also lifts blindly after 100 windows without any change, doubling with
 * each failure since the conditions last changed (a slow drift, such as
 * another job leaving the node, never looks like a sudden change); a retry
 * and its revert are then the only 2 changes in any 100 windows. A retried
 * add must beat 4x the RMS jitter of images/s between steady windows, not
 * just 3%: in noisy measurements a useless worker often looks like +3%.
 * Gains and losses are judged against the images/s level of the windows
 * since the last change (up to 8), not the last window alone.
 */
#define _GNU_SOURCE
#include "tuner.h"

#include <assert.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static double cgroup_quota_cores(void)
{
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (f) {
        char max[32] = "";
        long long period = 0;
        int got = fscanf(f, "%31s %lld", max, &period);
        fclose(f);
        if (got == 2 && strcmp(max, "max") != 0 && period > 0) {
            long long quota = 0;
            if (sscanf(max, "%lld", &quota) == 1 && quota > 0)
                return (double)quota / (double)period;
        }
        return 0;
    }
    long long quota = 0, period = 0;
    f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r");
    if (f) {
        if (fscanf(f, "%lld", &quota) != 1)
            quota = 0;
        fclose(f);
    }
    f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r");
    if (f) {
        if (fscanf(f, "%lld", &period) != 1)
            period = 0;
        fclose(f);
    }
    return quota > 0 && period > 0 ? (double)quota / (double)period : 0;
}

int rf__usable_cores(char *why, size_t whycap)
{
    cpu_set_t set;
    int cores = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cores = CPU_COUNT(&set);
    if (cores <= 0)
        cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (cores <= 0)
        cores = 1;
    double quota = cgroup_quota_cores();
    int capped = cores;
    if (quota > 0) {
        int q = (int)quota;
        if (q < quota)
            q++;
        if (q < capped)
            capped = q;
    }
    if (capped < 1)
        capped = 1;
    if (why) {
        if (capped < cores)
            snprintf(why, whycap, "%d cores in the affinity mask, cgroup quota %.2f cores", cores,
                     quota);
        else
            snprintf(why, whycap, "%d cores in the affinity mask", cores);
    }
    return capped;
}

int rf__worker_budget(int local_world_size, char *why, size_t whycap)
{
    char cores_why[128];
    int cores = rf__usable_cores(cores_why, sizeof cores_why);
    if (local_world_size < 1)
        local_world_size = 1;
    int budget = cores / local_world_size;
    if (budget < 1)
        budget = 1;
    if (why)
        snprintf(why, whycap, "%s, %d training process%s on the node", cores_why, local_world_size,
                 local_world_size == 1 ? "" : "es");
    return budget;
}

/* ---- controller ---------------------------------------------------------- */

/* Thresholds of the decision rule; see the file comment. */
#define STALL_ADD 0.05     /* consumer waits more than this of wall: more supply wanted */
#define STALL_CALM 0.01    /* below this the consumer is not waiting */
#define GAIN_MIN 0.03      /* an added worker must bring this much more images/s */
#define HEADROOM 1.1       /* Little's law jump */
#define BUSY_MARGIN 0.85   /* removal: the remaining workers stay under this busy fraction */
#define CALM_WINDOWS 3     /* calm windows before a removal */
#define BLOCKED_GROW 0.10  /* producers blocked on a full ring this much of wall */
#define SHARE_STARVED 0.75 /* thread CPU / busy time below this: workers wait for a core */
#define TRIM_LOSS 0.05     /* a trim that loses more than this much images/s is undone */
#define HOLD_MIN 8         /* windows a hold stands whatever the measurements say */
#define REF_WINDOWS 8      /* windows averaged into a hold's reference conditions */
#define MOVED_WINDOWS 3    /* consecutive windows the conditions must differ to lift a hold */
#define HOLD_RETRY 100     /* windows without any change before a held add is retried blindly */
#define HOLD_RETRY_SHIFT 4 /* ... doubling per repeated failure, up to 100 << 4 */
#define MOVED 0.25         /* relative change of the conditions that lifts a hold early */
#define RETRY_NOISE_K 4    /* a retried add must gain this many times the images/s jitter (RMS) */
#define NOISE_WEIGHT 0.03  /* EWMA weight of one window in the jitter estimate */
#define LEVEL_WINDOWS 8    /* windows in the images/s level a change is judged against */
#define NOISE_CAP 0.5      /* one window's jitter counts at most this (a checkpoint pause) */
#define WINDOW_BATCHES 16
#define WINDOW_SECONDS 0.1

enum { RF__TUNE_NONE = 0, RF__TUNE_ADD = 1, RF__TUNE_TRIM = 2 };

_Static_assert(sizeof((rf_tuner *)0)->busy_hist == CALM_WINDOWS * sizeof(double),
               "rf_tuner.busy_hist holds the calm windows");

/* What one window says, derived once. */
typedef struct {
    double rate;     /* images/s delivered */
    double stall;    /* fraction of wall the consumer waited */
    double blocked;  /* fraction of wall the producers waited for a ring slot */
    double busy;     /* busy_s / (workers x wall): how loaded the active workers are */
    double cores;    /* worker_cpu_s / wall: cores the workers really got */
    double share;    /* worker_cpu_s / worker_busy_s: fraction of a core per busy worker */
    double step_img; /* consumer step seconds per image */
    double cpu_img;  /* worker CPU seconds per image */
} measures;

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static double pos(double v)
{
    return v > 0 && isfinite(v) ? v : 0; /* negative or NaN sums from a confused caller: 0 */
}

static void measure(const rf_tuner_window *w, int workers, measures *m)
{
    double wall = w->wall_s, n = (double)w->samples;
    double cpu = pos(w->worker_cpu_s), busy = pos(w->worker_busy_s);
    m->rate = n / wall;
    m->stall = fmin(pos(w->stall_s) / wall, 1.0);
    m->blocked = fmin(pos(w->blocked_s) / wall, 1.0);
    m->busy = busy / ((double)workers * wall);
    m->cores = cpu / wall;
    /* No busy time measured: nothing says the workers were starved. */
    m->share = busy > 0 ? fmin(cpu / busy, 1.5) : 1.0;
    m->step_img = pos(w->step_s) / n;
    m->cpu_img = cpu / n;
}

/* Relative difference, ignoring differences among values below `tiny`
 * (a consumer at 1 us/img and one at 2 us/img are both "infinitely fast"). */
static double rel(double a, double b, double tiny)
{
    double hi = fmax(fmax(a, b), tiny);
    return fabs(a - b) / hi;
}

static void hold_set(rf_tuner_hold *h, int at)
{
    /* Failing again doubles the blind-retry interval, whatever the count
     * (a retry that overshoots one further fails at the next count), until
     * the conditions change. */
    int fails = (h->reset ? 0 : h->fails) + 1;
    memset(h, 0, sizeof *h);
    h->active = 1;
    h->at = at;
    h->fails = fails;
}

/* One window older. The reference conditions are the mean of the first
 * REF_WINDOWS windows after the hold was set, i.e. with the worker count it
 * leaves in place: one window alone may be an outlier that every later
 * window then seems to have moved away from.
 * `blind`: the hold also expires after the retry interval; only for the
 * ceiling, since retrying an add costs nothing when it fails, while retrying
 * a trim or a removal that hurt costs images/s again.
 * `share`: a change in the workers' CPU share counts. Not for the trim
 * hold: on a machine shared with other jobs the share swings all the time,
 * and a trim that lost images/s there (fewer threads, a smaller slice of the
 * machine) would lose them again. */
static void hold_tick(rf_tuner_hold *h, const measures *m, int blind, int share, int quiet)
{
    if (!h->active)
        return;
    h->age++;
    if (h->ref_set < REF_WINDOWS) {
        h->ref_step += m->step_img / REF_WINDOWS;
        h->ref_cpu += m->cpu_img / REF_WINDOWS;
        h->ref_share += m->share / REF_WINDOWS;
        h->ref_set++;
        return;
    }
    int moved = rel(m->step_img, h->ref_step, 1e-5) > MOVED ||
                rel(m->cpu_img, h->ref_cpu, 1e-6) > MOVED ||
                (share && rel(m->share, h->ref_share, 0.05) > MOVED);
    h->moved = moved ? h->moved + 1 : 0;
    assert(h->fails >= 1);
    int shift = h->fails - 1 < HOLD_RETRY_SHIFT ? h->fails - 1 : HOLD_RETRY_SHIFT;
    if (h->age >= HOLD_MIN && h->moved >= MOVED_WINDOWS) {
        h->active = 0;
        h->lifted = 1;
        h->reset = 1;
    } else if (blind && quiet >= (HOLD_RETRY << shift)) {
        h->active = 0;
        h->lifted = 2;
    }
}

/* Consumes a hold's "just lifted" note for the reason of the move it allows. */
static const char *hold_note(rf_tuner_hold *h)
{
    int l = h->lifted;
    h->lifted = 0;
    return l == 1 ? ", conditions changed" : l == 2 ? ", hold expired" : "";
}

void rf__tuner_init(rf_tuner *t, int budget, int initial_workers, int prefetch, int max_prefetch)
{
    assert(t);
    memset(t, 0, sizeof *t);
    t->budget = budget < 1 ? 1 : budget;
    t->workers = clampi(initial_workers, 1, t->budget);
    t->min_prefetch = prefetch < 1 ? 1 : prefetch;
    t->max_prefetch = max_prefetch < t->min_prefetch ? t->min_prefetch : max_prefetch;
    t->prefetch = t->min_prefetch;
    t->last_gain = -1;
}

int rf__tuner_window_ready(int64_t batches, double wall_s)
{
    return batches >= WINDOW_BATCHES && wall_s >= WINDOW_SECONDS;
}

static void set_workers(rf_tuner *t, rf_tuner_decision *d, int n)
{
    assert(n >= 1 && n <= t->budget);
    if (n != t->workers) {
        d->changed = 1;
        /* Streaks describe the count they were measured with. */
        t->calm = t->stalled = t->starved = 0;
    }
    t->workers = d->workers = n;
}

/* snprintf that may cut: reasons are short by design, and a cut one is
 * still a reason. (Through a va_list, so that -Wformat-truncation does not
 * flag a cut the code accepts.) */
__attribute__((format(printf, 3, 4))) static void say(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

#define REASON(...) say(d->reason, sizeof d->reason, __VA_ARGS__)

/* First window: Little's law. Needed workers = demand (img/s) x CPU s/img x
 * headroom = cpu_s / step_s x headroom: the CPU time the workers must spend
 * per second of consumer step. */
static void cold_start(rf_tuner *t, const measures *m, rf_tuner_decision *d)
{
    int n;
    if (m->cpu_img <= 0) {
        n = 1;
        REASON("little's law: no worker CPU time measured -> 1 worker");
    } else if (m->step_img <= 0 || m->cpu_img / m->step_img * HEADROOM >= t->budget) {
        n = t->budget;
        if (m->step_img * 1e6 < 1)
            REASON("little's law: consumer step ~0, demand unbounded -> budget, %d worker%s", n,
                   n == 1 ? "" : "s");
        else
            REASON("little's law: %.0f img/s needed x %.2f ms/img -> budget, %d worker%s",
                   1 / m->step_img, m->cpu_img * 1e3, n, n == 1 ? "" : "s");
    } else {
        n = clampi((int)ceil(m->cpu_img / m->step_img * HEADROOM), 1, t->budget);
        REASON("little's law: %.0f img/s needed x %.2f ms/img -> %d worker%s", 1 / m->step_img,
               m->cpu_img * 1e3, n, n == 1 ? "" : "s");
    }
    set_workers(t, d, n);
}

static void decide(rf_tuner *t, const measures *mp, rf_tuner_decision *d);

void rf__tuner_step(rf_tuner *t, const rf_tuner_window *w, rf_tuner_decision *d)
{
    assert(t && w && d);
    assert(t->workers >= 1 && t->workers <= t->budget);
    memset(d, 0, sizeof *d);

    /* What really ran wins over what was decided: judging an add that never
     * happened would teach the tuner nonsense. */
    int ran = clampi(w->workers, 1, t->budget);
    int ran_prefetch = clampi(w->prefetch, t->min_prefetch, t->max_prefetch);
    if (ran != t->workers || ran_prefetch != t->prefetch) {
        t->workers = ran;
        t->prefetch = ran_prefetch;
        t->pending = RF__TUNE_NONE;
        t->calm = t->stalled = 0;
        t->steady = 0;
    }
    d->workers = t->workers;
    d->prefetch = t->prefetch;

    if (!(w->samples > 0 && w->wall_s > 0 && isfinite(w->wall_s))) {
        REASON("empty window (no samples or no time): hold");
        return;
    }
    measures m;
    measure(w, t->workers, &m);
    /* Jitter of images/s between consecutive windows run alike: an RMS, so
     * that a multiple of it is a number of sigmas. A window whose consumer
     * step or decode cost moved a lot is a new level, not jitter. */
    int alike = t->steady && t->prev_rate > 0 && rel(m.step_img, t->prev_step, 1e-5) <= MOVED &&
                rel(m.cpu_img, t->prev_cpu, 1e-6) <= MOVED;
    if (alike) {
        double x = fmin(fabs(m.rate / t->prev_rate - 1), NOISE_CAP);
        t->noise_n++;
        /* A plain mean at first, then an EWMA long enough that its root is
         * steady (a short one swings by half and lets noise through). */
        double a = 1.0 / t->noise_n > NOISE_WEIGHT ? 1.0 / t->noise_n : NOISE_WEIGHT;
        t->noise2 += a * (x * x - t->noise2);
    }
    /* The images/s level of the current configuration: what a change is
     * judged against, steadier than the last window alone. */
    t->level_n = alike ? t->level_n + 1 : 1;
    double a = t->level_n < LEVEL_WINDOWS ? 1.0 / t->level_n : 1.0 / LEVEL_WINDOWS;
    t->level = t->level_n == 1 ? m.rate : t->level + a * (m.rate - t->level);
    t->prev_rate = m.rate;
    t->prev_step = m.step_img;
    t->prev_cpu = m.cpu_img;
    t->starved = m.share < SHARE_STARVED ? t->starved + 1 : 0;
    if (++t->windows == 1)
        cold_start(t, &m, d);
    else
        decide(t, &m, d);
    t->steady = !d->changed;
    t->quiet = d->changed ? 0 : t->quiet + 1;
    assert(d->reason[0]);
    assert(d->workers == t->workers && d->workers >= 1 && d->workers <= t->budget);
    assert(d->prefetch == t->prefetch && d->prefetch >= t->min_prefetch &&
           d->prefetch <= t->max_prefetch);
}

/* Every window after the first. */
static void decide(rf_tuner *t, const measures *mp, rf_tuner_decision *d)
{
    const measures m = *mp;
    t->calm = m.stall < STALL_CALM ? t->calm + 1 : 0;
    t->busy_hist[t->windows % CALM_WINDOWS] = m.busy;
    t->stalled = m.stall > STALL_ADD ? t->stalled + 1 : 0;
    hold_tick(&t->ceiling, &m, 1, 1, t->quiet);
    hold_tick(&t->floor, &m, 0, 1, t->quiet);
    hold_tick(&t->trim, &m, 0, 0, t->quiet);

    int n = t->workers;
    char note[80] = ""; /* the verdict on a pending change, when it stands */

    /* 1. Judge the change made at the end of the previous window. */
    if (t->pending == RF__TUNE_ADD) {
        double gain = m.rate / t->from_rate - 1;
        double need = t->need_gain;
        t->pending = RF__TUNE_NONE;
        if (gain < need) {
            int from = t->from;
            hold_set(&t->ceiling, n);
            t->strict = 0;
            set_workers(t, d, from);
            if (need > GAIN_MIN)
                REASON("no gain from %d -> %d (%+.0f%%, %.0f%% needed): revert, hold", from, n,
                       gain * 100, need * 100);
            else
                REASON("no gain from %d -> %d (%+.0f%%): revert, hold", from, n, gain * 100);
            return;
        }
        t->last_gain = gain;
        t->proven = n;
        say(note, sizeof note, "%+.0f%% from last add", gain * 100);
    } else if (t->pending == RF__TUNE_TRIM) {
        double kept = m.rate / t->from_rate;
        int from = t->from;
        t->pending = RF__TUNE_NONE;
        if (kept < 1 - TRIM_LOSS) {
            hold_set(&t->trim, from);
            set_workers(t, d, from);
            REASON("trim %d -> %d lost %.0f%% of images/s: restore, hold", from, n,
                   (1 - kept) * 100);
            return;
        }
        /* `from` workers did no better than n: do not climb back to it. */
        hold_set(&t->ceiling, from);
        say(note, sizeof note, "trim %d -> %d kept %.0f%% of images/s", from, n, kept * 100);
    }
    const char *sep = note[0] ? "; " : "";

    /* 2. Bursts: the consumer waited while the producers were held back by
     * a full ring, so the ring, not the workers, is short. */
    if (m.stall > STALL_ADD && m.blocked > BLOCKED_GROW && t->prefetch < t->max_prefetch) {
        d->prefetch = ++t->prefetch;
        d->changed = 1;
        REASON("%s%sstall %.0f%%, producers blocked on a full ring %.0f%%: prefetch %d -> %d", note,
               sep, m.stall * 100, m.blocked * 100, t->prefetch - 1, t->prefetch);
        return;
    }

    /* 3. Starved workers: more threads than cores they really get. To the
     * cores they got, but by half at most in one step: on a machine shared
     * with other jobs the cores got swing, and more threads may be a bigger
     * slice of it. Never below a count an add proved worth it (a consumer
     * that burns CPU itself can gain from workers that get less than a core
     * each). */
    int lowest = t->proven > (n + 1) / 2 ? t->proven : (n + 1) / 2;
    if (m.stall > STALL_ADD && lowest < n && t->starved >= 2 && !t->trim.active) {
        int to = clampi((int)lround(m.cores), lowest, n - 1);
        const char *why = hold_note(&t->trim);
        t->pending = RF__TUNE_TRIM;
        t->from = n;
        t->from_rate = t->level;
        int starved = t->starved;
        set_workers(t, d, to);
        t->starved = starved; /* still starved after this trim: the next may follow at once */
        REASON("%s%sstall %.0f%%, %d workers got %.1f cores (%.0f%% each while busy)%s: trim "
               "to %d",
               note, sep, m.stall * 100, n, m.cores, m.share * 100, why, to);
        return;
    }

    /* 4. Add while the consumer waits and adding pays off. */
    if (m.stall > STALL_ADD) {
        if (n >= t->budget) {
            REASON("%s%sstall %.0f%% at the budget (%d worker%s): hold", note, sep, m.stall * 100,
                   n, n == 1 ? "" : "s");
        } else if (t->ceiling.active && n + 1 >= t->ceiling.at) {
            REASON("%s%sstall %.0f%% but %d workers gave no gain: hold", note, sep, m.stall * 100,
                   t->ceiling.at);
        } else if (t->removed_from && t->stalled < 2) {
            REASON("%s%sstall %.0f%% after a removal: wait for a second window", note, sep,
                   m.stall * 100);
        } else {
            if (t->removed_from == n + 1) {
                /* Undoing a removal: n + 1 kept the consumer fed before, so
                 * no trial (one noisy window could refute it), but do not
                 * remove below it again for a while. */
                t->removed_from = 0;
                hold_set(&t->floor, n + 1);
                set_workers(t, d, n + 1);
                REASON("%s%sstall %.0f%% for 2 windows after a removal: add back", note, sep,
                       m.stall * 100);
                return;
            }
            const char *why = hold_note(&t->ceiling);
            /* A retry after a hold expects no gain: a useless worker can
             * look like +3% when images/s jitter by more than that, so a
             * retried climb must beat the jitter measured while settled. */
            if (why[0])
                t->strict = 1;
            else if (!note[0])
                t->strict = 0; /* a fresh climb, not the continuation of one */
            t->need_gain = GAIN_MIN;
            double noise = sqrt(t->noise2);
            if (t->strict && RETRY_NOISE_K * noise > GAIN_MIN)
                t->need_gain = RETRY_NOISE_K * noise;
            t->pending = RF__TUNE_ADD;
            t->from = n;
            t->from_rate = t->level;
            t->removed_from = 0;
            set_workers(t, d, n + 1);
            if (note[0] && t->last_gain >= 0)
                REASON("stall %.0f%% and %s: add", m.stall * 100, note);
            else if (why[0])
                REASON("%s%sstall %.0f%%%s: retry %d", note, sep, m.stall * 100, why, n + 1);
            else
                REASON("%s%sstall %.0f%%: try %d", note, sep, m.stall * 100, n + 1);
        }
        return;
    }

    /* 5. Remove when the consumer has not waited for a while and one fewer
     * worker would still keep up with margin, by the busy fraction over the
     * calm windows (all at this count: a change resets the calm streak), as
     * one window's may be an outlier. */
    double keep_up = (double)(n - 1) / n * BUSY_MARGIN;
    double busy = 0;
    for (int i = 0; i < CALM_WINDOWS; i++)
        busy += t->busy_hist[i] / CALM_WINDOWS;
    if (t->calm >= CALM_WINDOWS && n > 1 && busy < keep_up) {
        if (t->floor.active && n - 1 < t->floor.at) {
            REASON("%s%sno stall, workers %.0f%% busy, but fewer than %d stalled: hold", note, sep,
                   busy * 100, t->floor.at);
            return;
        }
        const char *why = hold_note(&t->floor);
        int calm = t->calm;
        t->removed_from = n;
        if (t->proven >= n)
            t->proven = 0; /* the consumer slowed: that proof is about another load */
        set_workers(t, d, n - 1);
        REASON("%s%sno stall for %d windows, workers %.0f%% busy%s: remove", note, sep, calm,
               busy * 100, why);
        return;
    }
    REASON("%s%sstall %.0f%%, workers %.0f%% busy: hold", note, sep, m.stall * 100, m.busy * 100);
}
