/*
 * tuner_bench.c - rf-tuner-bench: the tuner's controller on a live synthetic
 * pipeline whose optimum is known, against every fixed worker count.
 *
 *   rf-tuner-bench [--cpu-ms MS] [--read-ms MS] [--step-ms MS]
 *                  [--step-kind sleep|burn] [--batch N] [--batches N]
 *                  [--budget N] [--prefetch N] [--max-prefetch N]
 *                  [--repeat N] [--json FILE]
 *
 * The pipeline is threads, like the loader's, without any image: `budget`
 * worker threads (those beyond the active count park on a condition
 * variable) take the next sample index from a shared counter, wait the read
 * latency (a sleep: the read of the pread fallback, which holds its worker),
 * then burn the decode cost on their own thread CPU clock, and count the
 * sample into its batch's ring slot. A worker is held back while the batch
 * of its next sample lies beyond the ring (consumed + prefetch slots): that
 * wall time is blocked_s. The consumer (the main thread) waits for each
 * batch in turn (stall), then spends its step as a sleep (a GPU step) or as
 * CPU burn (a step that competes with the workers for cores).
 *
 * With cpu = --cpu-ms, step = --step-ms, B = --batch and c free cores, the
 * best count is about min(c, B x cpu / step) workers (more when reads are
 * long): the consumer is fed as fast as it eats, or the cores are full.
 *
 * Runs, in this order: every fixed count 1..budget, then auto, which starts
 * at the budget like the loader and feeds rf__tuner_step the same window
 * measurements (windows of >= 16 batches and >= 0.1 s, worker CPU from each
 * thread's CPU clock) and applies its decisions at once. --repeat N runs that
 * sequence N times, interleaved, so that a machine whose load drifts (other
 * jobs) treats every mode alike; the summary takes each mode's median.
 * Prints a table (workers, images/s over the run and over its second half,
 * stall %), auto's decisions and the comparison with the best fixed count;
 * --json appends one JSON line per run with the machine, the parameters and
 * the git revision (see bu_git_revision), and the cores the tuner counts.
 *
 * Links lib/core/tuner.c and bench/benchutil.c, plus pthread and libm.
 */
#define _GNU_SOURCE /* pthread_getcpuclockid */

#include "tuner.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"

enum { MAX_THREADS = 256, MAX_DECISIONS = 256 };

typedef struct {
    double cpu_ms, read_ms, step_ms;
    int step_burn;
    int batch, batches, budget, prefetch, max_prefetch, repeat;
    const char *json;
} params;

typedef struct {
    int64_t batch; /* batches delivered when the decision was taken */
    int workers, prefetch;
    char reason[160];
} decision;

typedef struct {
    const params *p;
    pthread_mutex_t mu;     /* protects everything below */
    pthread_cond_t cv_work; /* workers: unparked, or a ring slot freed, or stop */
    pthread_cond_t cv_cons; /* consumer: a batch completed */
    int active, prefetch;   /* the count of workers allowed to run; ring slots */
    int64_t next_sample, total_samples;
    int64_t consumed; /* batches released by the consumer */
    int *done;        /* samples finished per slot (slot = batch % max_prefetch) */
    int stop;
    double busy_s, read_s, blocked_s; /* window sums */
    int nblocked;                     /* active workers held back by the full ring now */
    double blocked_since;
} pipeline;

typedef struct {
    pipeline *pl;
    int id;
} worker;

typedef struct {
    int fixed;   /* 0: auto */
    int workers; /* fixed count, or auto's final count */
    double seconds, images_per_sec, images_per_sec_2nd, stall_pct, stall_pct_2nd;
    int ndecisions;
    decision d[MAX_DECISIONS];
} result;

static double clock_s(clockid_t c)
{
    struct timespec ts;
    if (clock_gettime(c, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(double ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static _Atomic uint64_t burn_sink; /* keeps the burn loop's result alive; value unused */

/* Spins until this thread has used `ms` of CPU: the cost is CPU time, so a
 * preempted worker takes longer in wall time, as a real decoder would. */
static void burn_ms(double ms)
{
    if (ms <= 0)
        return;
    double end = clock_s(CLOCK_THREAD_CPUTIME_ID) + ms * 1e-3;
    uint64_t x = (uint64_t)(uintptr_t)&x;
    /* An LCG chain the compiler cannot fold; about 10 us between clock reads,
     * which are system calls for a thread CPU clock. */
    while (clock_s(CLOCK_THREAD_CPUTIME_ID) < end)
        for (int i = 0; i < 20000; i++)
            x = x * 6364136223846793005u + (uint64_t)i;
    burn_sink += x;
}

/* Called with pl->mu held. */
static int ring_full(const pipeline *pl)
{
    return pl->next_sample / pl->p->batch >= pl->consumed + pl->prefetch;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    pipeline *pl = w->pl;
    const params *p = pl->p;
    pthread_mutex_lock(&pl->mu);
    for (;;) {
        int blocked = 0;
        while (!pl->stop &&
               (w->id >= pl->active || pl->next_sample >= pl->total_samples || ring_full(pl))) {
            /* Held back by the ring with work left: that is blocked time. */
            int want = w->id < pl->active && pl->next_sample < pl->total_samples;
            if (want && !blocked && pl->nblocked++ == 0)
                pl->blocked_since = bu_now_s();
            if (!want && blocked && --pl->nblocked == 0)
                pl->blocked_s += bu_now_s() - pl->blocked_since;
            blocked = want;
            pthread_cond_wait(&pl->cv_work, &pl->mu);
        }
        if (blocked && --pl->nblocked == 0)
            pl->blocked_s += bu_now_s() - pl->blocked_since;
        if (pl->stop)
            break;
        int64_t s = pl->next_sample++;
        int slot = (int)(s / p->batch % p->max_prefetch);
        pthread_mutex_unlock(&pl->mu);

        double t0 = bu_now_s();
        sleep_ms(p->read_ms);
        double t1 = bu_now_s();
        burn_ms(p->cpu_ms);
        double t2 = bu_now_s();

        pthread_mutex_lock(&pl->mu);
        pl->read_s += t1 - t0;
        pl->busy_s += t2 - t1;
        if (++pl->done[slot] == p->batch)
            pthread_cond_signal(&pl->cv_cons);
    }
    pthread_mutex_unlock(&pl->mu);
    return NULL;
}

/* One run: fixed > 0 workers, or auto (fixed == 0). */
static int run(const params *p, int fixed, result *r)
{
    pipeline pl = {.p = p};
    worker ws[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    clockid_t clk[MAX_THREADS];
    double cpu_prev[MAX_THREADS];
    int n = p->budget;
    memset(r, 0, sizeof *r);
    r->fixed = fixed;
    pthread_mutex_init(&pl.mu, NULL);
    pthread_cond_init(&pl.cv_work, NULL);
    pthread_cond_init(&pl.cv_cons, NULL);
    pl.done = calloc((size_t)p->max_prefetch, sizeof *pl.done);
    if (!pl.done)
        return -1;
    pl.active = fixed ? fixed : n; /* auto starts at the budget, like the loader */
    pl.prefetch = p->prefetch;
    pl.total_samples = (int64_t)p->batch * p->batches;
    rf_tuner tuner;
    rf__tuner_init(&tuner, n, pl.active, p->prefetch, p->max_prefetch);

    int started = 0;
    for (int i = 0; i < n; i++) {
        ws[i] = (worker){&pl, i};
        if (pthread_create(&th[i], NULL, worker_main, &ws[i]) != 0)
            break;
        if (pthread_getcpuclockid(th[i], &clk[i]) != 0)
            clk[i] = (clockid_t)-1;
        started++;
    }
    if (started < n) {
        fprintf(stderr, "rf-tuner-bench: cannot start %d threads\n", n);
        pthread_mutex_lock(&pl.mu);
        pl.stop = 1;
        pthread_cond_broadcast(&pl.cv_work);
        pthread_mutex_unlock(&pl.mu);
        for (int i = 0; i < started; i++)
            pthread_join(th[i], NULL);
        free(pl.done);
        return -1;
    }
    for (int i = 0; i < n; i++)
        cpu_prev[i] = clk[i] == (clockid_t)-1 ? 0 : clock_s(clk[i]);

    double t_start = bu_now_s(), t_half = 0, stall = 0, stall_half = 0;
    double win_t0 = t_start, win_stall = 0, win_step = 0, last_return = 0;
    int64_t win_batches = 0, half = p->batches / 2;
    for (int64_t k = 0; k < p->batches; k++) {
        if (k == half) {
            t_half = bu_now_s();
            stall_half = stall;
        }
        double t0 = bu_now_s();
        if (last_return > 0)
            win_step += t0 - last_return; /* the training step, between next() calls */
        pthread_mutex_lock(&pl.mu);
        int slot = (int)(k % p->max_prefetch);
        while (pl.done[slot] < p->batch)
            pthread_cond_wait(&pl.cv_cons, &pl.mu);
        pthread_mutex_unlock(&pl.mu);
        double t1 = bu_now_s();
        stall += t1 - t0;
        win_stall += t1 - t0;
        last_return = t1;

        if (p->step_burn)
            burn_ms(p->step_ms);
        else
            sleep_ms(p->step_ms);

        /* Release the slot, and close the window when it is long enough. */
        pthread_mutex_lock(&pl.mu);
        pl.done[slot] = 0;
        pl.consumed++;
        pthread_cond_broadcast(&pl.cv_work);
        win_batches++;
        double t = bu_now_s();
        if (rf__tuner_window_ready(win_batches, t - win_t0)) {
            double cpu = 0;
            for (int i = 0; i < n; i++) {
                double c = clk[i] == (clockid_t)-1 ? 0 : clock_s(clk[i]);
                cpu += c - cpu_prev[i];
                cpu_prev[i] = c;
            }
            if (pl.nblocked > 0) {
                pl.blocked_s += t - pl.blocked_since;
                pl.blocked_since = t;
            }
            /* The step in progress counts up to now, the next one from now. */
            win_step += t - last_return;
            last_return = t;
            rf_tuner_window w = {
                .batches = win_batches,
                .samples = win_batches * p->batch,
                .wall_s = t - win_t0,
                .stall_s = win_stall,
                .step_s = win_step,
                .worker_cpu_s = cpu,
                .worker_busy_s = pl.busy_s,
                .blocked_s = pl.blocked_s,
                .read_s = pl.read_s,
                .workers = pl.active,
                .prefetch = pl.prefetch,
            };
            if (!fixed) {
                rf_tuner_decision d;
                rf__tuner_step(&tuner, &w, &d);
                if (d.changed && r->ndecisions < MAX_DECISIONS) {
                    decision *e = &r->d[r->ndecisions++];
                    e->batch = k + 1;
                    e->workers = d.workers;
                    e->prefetch = d.prefetch;
                    snprintf(e->reason, sizeof e->reason, "%s", d.reason);
                }
                pl.active = d.workers;
                pl.prefetch = d.prefetch > p->max_prefetch ? p->max_prefetch : d.prefetch;
                pthread_cond_broadcast(&pl.cv_work);
            }
            win_t0 = t;
            win_batches = 0;
            win_stall = win_step = 0;
            pl.busy_s = pl.read_s = pl.blocked_s = 0;
        }
        pthread_mutex_unlock(&pl.mu);
    }
    double t_end = bu_now_s();

    pthread_mutex_lock(&pl.mu);
    pl.stop = 1;
    pthread_cond_broadcast(&pl.cv_work);
    r->workers = pl.active;
    pthread_mutex_unlock(&pl.mu);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    free(pl.done);
    pthread_cond_destroy(&pl.cv_cons);
    pthread_cond_destroy(&pl.cv_work);
    pthread_mutex_destroy(&pl.mu);

    double images = (double)p->batches * p->batch;
    r->seconds = t_end - t_start;
    r->images_per_sec = images / r->seconds;
    r->stall_pct = 100 * stall / r->seconds;
    double second = t_end - t_half;
    r->images_per_sec_2nd = (double)(p->batches - half) * p->batch / second;
    r->stall_pct_2nd = 100 * (stall - stall_half) / second;
    return 0;
}

/* ---- output -------------------------------------------------------------- */

static void json_line(FILE *f, const params *p, const result *r, int round, const char *git,
                      int usable, const char *why)
{
    bu_json_begin(f, "rf-tuner-bench", git);
    fprintf(f, ", \"tuner_cores\": %d, \"tuner_cores_why\": ", usable);
    bu_json_str(f, why);
    fprintf(f,
            ", \"params\": {\"cpu_ms\": %g, \"read_ms\": %g, \"step_ms\": %g, \"step_kind\": "
            "\"%s\", \"batch\": %d, \"batches\": %d, \"budget\": %d, \"prefetch\": %d, "
            "\"max_prefetch\": %d, \"repeat\": %d}",
            p->cpu_ms, p->read_ms, p->step_ms, p->step_burn ? "burn" : "sleep", p->batch,
            p->batches, p->budget, p->prefetch, p->max_prefetch, p->repeat);
    fprintf(f, ", \"round\": %d", round);
    fprintf(f,
            ", \"mode\": \"%s\", \"workers\": %d, \"seconds\": %.4f, \"images_per_sec\": %.2f, "
            "\"images_per_sec_2nd_half\": %.2f, \"stall_pct\": %.2f, \"stall_pct_2nd_half\": "
            "%.2f",
            r->fixed ? "fixed" : "auto", r->workers, r->seconds, r->images_per_sec,
            r->images_per_sec_2nd, r->stall_pct, r->stall_pct_2nd);
    if (!r->fixed) {
        fprintf(f, ", \"final_workers\": %d, \"decisions\": [", r->workers);
        for (int i = 0; i < r->ndecisions; i++) {
            fprintf(f, "%s{\"batch\": %lld, \"workers\": %d, \"prefetch\": %d, \"reason\": ",
                    i ? ", " : "", (long long)r->d[i].batch, r->d[i].workers, r->d[i].prefetch);
            bu_json_str(f, r->d[i].reason);
            fputc('}', f);
        }
        fputc(']', f);
    }
    fprintf(f, "}\n");
}

static void usage(FILE *f)
{
    fprintf(f, "usage: rf-tuner-bench [--cpu-ms MS] [--read-ms MS] [--step-ms MS]\n"
               "                      [--step-kind sleep|burn] [--batch N] [--batches N]\n"
               "                      [--budget N] [--prefetch N] [--max-prefetch N]\n"
               "                      [--repeat N] [--json FILE]\n");
}

int main(int argc, char **argv)
{
    params p = {.cpu_ms = 2,
                .read_ms = 0,
                .step_ms = 0,
                .batch = 32,
                .batches = 300,
                .budget = 0,
                .prefetch = 4,
                .max_prefetch = 0,
                .repeat = 1};
    const char *step_kind = "sleep";
    const bu_opt opts[] = {
        {"--cpu-ms", 'd', &p.cpu_ms, 0, 1e4},
        {"--read-ms", 'd', &p.read_ms, 0, 1e4},
        {"--step-ms", 'd', &p.step_ms, 0, 1e5},
        {"--step-kind", 's', &step_kind, 0, 0},
        {"--batch", 'i', &p.batch, 1, 1 << 20},
        {"--batches", 'i', &p.batches, 1, 1 << 30},
        {"--budget", 'i', &p.budget, 1, MAX_THREADS},
        {"--prefetch", 'i', &p.prefetch, 1, 1024},
        {"--max-prefetch", 'i', &p.max_prefetch, 1, 1024},
        {"--repeat", 'i', &p.repeat, 1, 100},
        {"--json", 's', &p.json, 0, 0},
    };
    int rc =
        bu_parse_args("rf-tuner-bench", argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0);
    if (rc == 0 && strcmp(step_kind, "sleep") && strcmp(step_kind, "burn")) {
        fprintf(stderr, "rf-tuner-bench: bad value for --step-kind: %s\n", step_kind);
        rc = -1;
    }
    if (rc) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : 2;
    }
    p.step_burn = !strcmp(step_kind, "burn");
    char why[256];
    int usable = rf__usable_cores(why, sizeof why);
    char budget_why[512] = "set by --budget";
    if (!p.budget)
        p.budget = rf__worker_budget(1, budget_why, sizeof budget_why);
    if (p.budget > MAX_THREADS)
        p.budget = MAX_THREADS;
    if (!p.max_prefetch)
        p.max_prefetch = 2 * p.prefetch;
    if (p.max_prefetch < p.prefetch)
        p.max_prefetch = p.prefetch;

    char git[128], cpu[256];
    bu_git_revision(git, sizeof git);
    bu_cpu_model(cpu, sizeof cpu);

    printf("rf-tuner-bench: %s; %d usable cores (%s); git %s\n", cpu, usable, why, git);
    printf("  cpu %.2f ms/img, read %.2f ms/img, step %.2f ms/batch (%s), batch %d, %d batches, "
           "prefetch %d (max %d)\n",
           p.cpu_ms, p.read_ms, p.step_ms, p.step_burn ? "burn" : "sleep", p.batch, p.batches,
           p.prefetch, p.max_prefetch);
    printf("  budget %d workers (%s)\n", p.budget, budget_why);
    if (p.step_ms > 0 && p.cpu_ms > 0)
        printf("  the consumer needs %.2f workers' worth of decode (B x cpu / step)\n",
               p.batch * p.cpu_ms / p.step_ms);

    FILE *jf = NULL;
    if (p.json) {
        jf = fopen(p.json, "a");
        if (!jf) {
            fprintf(stderr, "rf-tuner-bench: cannot open %s: %s\n", p.json, strerror(errno));
            return 1;
        }
    }
    /* res[round][mode]: mode 0..budget-1 = fixed 1..budget, mode budget = auto. */
    int nmodes = p.budget + 1;
    result *res = calloc((size_t)p.repeat * (size_t)nmodes, sizeof *res);
    if (!res)
        return 1;
    printf("\n  %-5s %-6s %7s %10s %14s %7s %13s\n", "round", "mode", "workers", "images/s",
           "2nd half img/s", "stall%", "2nd half st%");
    for (int round = 0; round < p.repeat; round++) {
        for (int m = 0; m < nmodes; m++) {
            int fixed = m < p.budget ? m + 1 : 0;
            result *r = &res[round * nmodes + m];
            if (run(&p, fixed, r) != 0)
                return 1;
            printf("  %-5d %-6s %7d %10.1f %14.1f %7.1f %13.1f\n", round + 1,
                   fixed ? "fixed" : "auto", r->workers, r->images_per_sec, r->images_per_sec_2nd,
                   r->stall_pct, r->stall_pct_2nd);
            fflush(stdout);
            if (jf)
                json_line(jf, &p, r, round + 1, git, usable, why);
        }
        result *a = &res[round * nmodes + p.budget];
        printf("        auto decisions (%d):\n", a->ndecisions);
        for (int i = 0; i < a->ndecisions; i++)
            printf("          batch %5lld: workers %d, prefetch %d  %s\n", (long long)a->d[i].batch,
                   a->d[i].workers, a->d[i].prefetch, a->d[i].reason);
    }

    /* Medians per mode over the rounds. */
    double med[MAX_THREADS + 1], med2[MAX_THREADS + 1], medst[MAX_THREADS + 1];
    for (int m = 0; m < nmodes; m++) {
        double v[100], v2[100], vs[100];
        for (int round = 0; round < p.repeat; round++) {
            v[round] = res[round * nmodes + m].images_per_sec;
            v2[round] = res[round * nmodes + m].images_per_sec_2nd;
            vs[round] = res[round * nmodes + m].stall_pct;
        }
        med[m] = bu_median(v, p.repeat);
        med2[m] = bu_median(v2, p.repeat);
        medst[m] = bu_median(vs, p.repeat);
    }
    int best = 0;
    for (int m = 1; m < p.budget; m++)
        if (med[m] > med[best])
            best = m;
    printf("\n  medians over %d round%s:\n", p.repeat, p.repeat == 1 ? "" : "s");
    for (int m = 0; m < nmodes; m++) {
        if (m < p.budget) {
            printf("    fixed %-3d %10.1f img/s (2nd half %.1f), stall %.1f%%%s\n", m + 1, med[m],
                   med2[m], medst[m], m == best ? "  <- best fixed" : "");
        } else {
            printf("    auto      %10.1f img/s (2nd half %.1f), stall %.1f%%, final workers:",
                   med[m], med2[m], medst[m]);
            for (int round = 0; round < p.repeat; round++)
                printf(" %d", res[round * nmodes + m].workers);
            printf("\n");
        }
    }
    printf("\n  auto = %.0f%% of the best fixed count (%d workers) over the run, %.0f%% over "
           "its second half\n",
           100 * med[p.budget] / med[best], best + 1, 100 * med2[p.budget] / med2[best]);
    free(res);
    if (jf)
        fclose(jf);
    return 0;
}
