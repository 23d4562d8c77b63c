/*
 * test_tuner.c - the worker budget and the tuner's controller (lib/core/tuner.c).
 *
 * The controller is a pure function of window measurements, so it is run here
 * against a small fluid model of the pipeline instead of threads:
 *   supply(w)  = min(w, cores) / cpu_per_sample          images/s the workers can make
 *   throughput = min(demand, supply)                      (demand 0 = infinitely fast consumer)
 *   stall      = 1 - throughput / demand                  the consumer waits for the rest
 * Workers beyond `cores` share them: each gets cores/w of a core, so their
 * busy time per sample grows while their thread CPU time per sample does not
 * (what the thread CPU clock shows on an oversubscribed machine). A bursty
 * consumer with a shallow ring is modelled by a `burst` stall that vanishes
 * once prefetch reaches `need_prefetch`, with producers blocked on the full
 * ring meanwhile. Optional multiplicative noise (Gaussian, sigma `noise`) hits
 * every measured time independently, with a fixed seed: the tests are
 * deterministic.
 *
 * Checked: convergence from a cold start within 5 windows, stability after
 * (at most 2 changes per 100 windows, with noise too), the budget, revert on
 * no gain, removal when the consumer slows down, prefetch growth only with
 * blocked producers, non-empty reasons; rf__worker_budget and
 * rf__tuner_window_ready.
 *
 * Self-contained: links lib/ and cmocka; no files, no threads.
 */
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tuner.h"

/* ------------------------------------------------------------- the model */

typedef struct {
    double demand; /* images/s the consumer takes when it never waits; 0: unbounded */
    double cpu;    /* CPU seconds per sample on a core of its own */
    int cores;     /* cores the workers really get */
    int batch;     /* samples per batch */
    double burst;  /* stall from bursts while prefetch < need_prefetch */
    int need_prefetch;
    double noise; /* relative sigma on every measured time */
    uint64_t rng; /* xorshift state for the noise */
} sim;

static double uniform(sim *s)
{
    /* xorshift64*: plenty for noise, and the same on every machine. */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return (double)((s->rng * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}

static double jitter(sim *s)
{
    if (s->noise <= 0)
        return 1;
    double u1 = uniform(s), u2 = uniform(s);
    double g = sqrt(-2 * log(u1 + 1e-300)) * cos(6.283185307179586 * u2);
    double f = 1 + s->noise * g;
    return f < 0.5 ? 0.5 : f > 1.5 ? 1.5 : f;
}

/* One window of the pipeline running with `workers` and `prefetch`. */
static rf_tuner_window sim_window(sim *s, int workers, int prefetch)
{
    double supply = (workers < s->cores ? workers : s->cores) / s->cpu;
    double share = workers <= s->cores ? 1.0 : (double)s->cores / workers;
    double tput = s->demand > 0 && s->demand < supply ? s->demand : supply;
    double burst = 0;
    if (prefetch < s->need_prefetch)
        burst = s->burst * (double)(s->need_prefetch - prefetch) / s->need_prefetch;
    tput *= 1 - burst;
    /* The window policy: 16 batches and 0.1 s. */
    int64_t batches = 16;
    while (!rf__tuner_window_ready(batches, (double)batches * s->batch / tput))
        batches++;
    double n = (double)(batches * s->batch);
    double wall = n / tput;
    double step = s->demand > 0 ? n / s->demand : 0;
    double stall = wall - step > 0 ? wall - step : 0;
    rf_tuner_window w = {
        .batches = batches,
        .samples = (int64_t)n,
        .wall_s = wall * jitter(s),
        .stall_s = stall * jitter(s),
        .step_s = step * jitter(s),
        .worker_cpu_s = n * s->cpu * jitter(s),
        .worker_busy_s = n * s->cpu / share * jitter(s),
        .blocked_s = 1.5 * burst * wall * jitter(s),
        .read_s = n * 0.002,
        .workers = workers,
        .prefetch = prefetch,
    };
    return w;
}

/* ------------------------------------------------------------- helpers */

enum { MAX_WINDOWS = 600 };

typedef struct {
    int workers[MAX_WINDOWS]; /* decided after window i */
    int prefetch[MAX_WINDOWS];
    int changed[MAX_WINDOWS];
    char reason[MAX_WINDOWS][160];
} trace;

/* Runs windows [from, to) of the model through the tuner, as the loader
 * would: each decision applies to the next window. */
static void run(sim *s, rf_tuner *t, trace *tr, int from, int to)
{
    assert_true(to <= MAX_WINDOWS);
    for (int i = from; i < to; i++) {
        rf_tuner_window w = sim_window(s, t->workers, t->prefetch);
        rf_tuner_decision d;
        rf__tuner_step(t, &w, &d);
        assert_true(d.reason[0] != '\0');
        assert_true(strlen(d.reason) < sizeof d.reason);
        assert_true(d.workers >= 1 && d.workers <= t->budget);
        assert_true(d.prefetch >= t->min_prefetch && d.prefetch <= t->max_prefetch);
        assert_int_equal(d.changed, d.workers != w.workers || d.prefetch != w.prefetch);
        assert_int_equal(d.workers, t->workers);
        assert_int_equal(d.prefetch, t->prefetch);
        tr->workers[i] = d.workers;
        tr->prefetch[i] = d.prefetch;
        tr->changed[i] = d.changed;
        snprintf(tr->reason[i], sizeof tr->reason[i], "%s", d.reason);
    }
}

static int changes(const trace *tr, int from, int to)
{
    int c = 0;
    for (int i = from; i < to; i++)
        c += tr->changed[i];
    return c;
}

/* Most changes in any `span` consecutive windows of [from, to). */
static int max_changes_in_span(const trace *tr, int from, int to, int span)
{
    int worst = 0;
    for (int i = from; i < to; i++) {
        int end = i + span < to ? i + span : to;
        int c = changes(tr, i, end);
        worst = c > worst ? c : worst;
    }
    return worst;
}

static void print_trace(const trace *tr, int from, int to)
{
    for (int i = from; i < to; i++)
        if (tr->changed[i] || i < 6)
            print_message("  window %3d: workers %d prefetch %d  %s\n", i, tr->workers[i],
                          tr->prefetch[i], tr->reason[i]);
}

static int contains(const char *s, const char *sub)
{
    return strstr(s, sub) != NULL;
}

/* A consumer that needs `workers_needed` single-core workers' worth. */
static sim model(double workers_needed, int cores)
{
    sim s = {.cpu = 0.004, .cores = cores, .batch = 64, .rng = 0x9E3779B97F4A7C15ULL};
    s.demand = workers_needed > 0 ? workers_needed / s.cpu : 0;
    return s;
}

/* A tuner with budget and initial workers (prefetch 4, at most 8), run for
 * windows windows of s from the first. */
static void start_run(sim *s, rf_tuner *t, trace *tr, int budget, int initial, int windows)
{
    rf__tuner_init(t, budget, initial, 4, 8);
    run(s, t, tr, 0, windows);
}

/* Cold start from `initial` workers; converged by window 5 (0-based window 4
 * is the fifth decision) to `want`, then stable for `windows` more. */
static void check_converges(sim s, int budget, int initial, int want, int windows)
{
    rf_tuner t;
    trace tr;
    start_run(&s, &t, &tr, budget, initial, 5 + windows);
    if (tr.workers[4] != want || changes(&tr, 5, 5 + windows) > 2)
        print_trace(&tr, 0, 5 + windows);
    assert_int_equal(tr.workers[4], want);
    assert_true(changes(&tr, 5, 5 + windows) <= 2);
    assert_true(max_changes_in_span(&tr, 5, 5 + windows, 100) <= 2);
    assert_true(contains(tr.reason[0], "little's law"));
}

/* check_converges over 100 windows of a consumer needing `needed` workers
 * with `cores` cores free (model), from budget and initial to want. */
typedef struct converge_case {
    double needed;
    int cores, budget, initial, want;
} converge_case;

static void check_converge_cases(const converge_case *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        check_converges(model(v[i].needed, v[i].cores), v[i].budget, v[i].initial, v[i].want, 100);
}

/* ------------------------------------------------------------- tests */

static void test_window_ready_needs_16_batches_and_100ms(void **state)
{
    (void)state;
    assert_false(rf__tuner_window_ready(0, 0));
    assert_false(rf__tuner_window_ready(15, 10.0));
    assert_false(rf__tuner_window_ready(16, 0.099));
    assert_true(rf__tuner_window_ready(16, 0.1));
    assert_true(rf__tuner_window_ready(1000, 3.5));
    assert_false(rf__tuner_window_ready(1000, 0.05));
}

static void test_worker_budget(void **state)
{
    (void)state;
    char why[256] = "";
    int cores = rf__usable_cores(why, sizeof why);
    assert_true(cores >= 1);
    assert_true(why[0] != '\0');
    why[0] = '\0';
    int b1 = rf__worker_budget(1, why, sizeof why);
    assert_int_equal(b1, cores);
    assert_true(contains(why, "1 training process on the node"));
    int b2 = rf__worker_budget(2, why, sizeof why);
    assert_int_equal(b2, cores / 2 >= 1 ? cores / 2 : 1);
    assert_true(contains(why, "2 training processes"));
    assert_int_equal(rf__worker_budget(INT_MAX, why, sizeof why), 1);
    assert_int_equal(rf__worker_budget(100000, NULL, 0), 1);
    /* Nonsense (0, negative) counts as one process. */
    assert_int_equal(rf__worker_budget(0, NULL, 0), cores);
    assert_int_equal(rf__worker_budget(-3, NULL, 0), cores);
    /* A tiny buffer is truncated, not overrun. */
    char tiny[4];
    rf__worker_budget(1, tiny, sizeof tiny);
    assert_true(strlen(tiny) < sizeof tiny);
}

static void test_init_clamps_to_budget_and_prefetch(void **state)
{
    (void)state;
    rf_tuner t;
    rf__tuner_init(&t, 0, 5, 0, -1);
    assert_int_equal(t.budget, 1);
    assert_int_equal(t.workers, 1);
    assert_int_equal(t.prefetch, 1);
    assert_int_equal(t.max_prefetch, 1);
    rf__tuner_init(&t, 4, 9, 3, 2);
    assert_int_equal(t.workers, 4);
    assert_int_equal(t.prefetch, 3);
    assert_int_equal(t.max_prefetch, 3);
    rf__tuner_init(&t, 4, -2, 3, 10);
    assert_int_equal(t.workers, 1);
}

/* A window with nothing in it (or nonsense in it) changes nothing. */
static void test_empty_or_nonsense_window_changes_nothing(void **state)
{
    (void)state;
    rf_tuner t;
    rf__tuner_init(&t, 4, 2, 4, 8);
    rf_tuner_window w = {.workers = 2, .prefetch = 4};
    rf_tuner_decision d;
    rf__tuner_step(&t, &w, &d);
    assert_int_equal(d.changed, 0);
    assert_int_equal(d.workers, 2);
    assert_true(d.reason[0] != '\0');
    w.samples = 64;
    w.batches = 16;
    w.wall_s = NAN;
    rf__tuner_step(&t, &w, &d);
    assert_int_equal(d.changed, 0);
    /* Negative and NaN sums are read as 0: the decision is the one a twin
     * tuner with the same history makes on the same window with zeros. */
    rf_tuner twin;
    rf_tuner_decision dt;
    rf__tuner_init(&twin, 4, 2, 4, 8);
    rf_tuner_window z = {.workers = 2, .prefetch = 4};
    rf__tuner_step(&twin, &z, &dt);
    z.samples = 64;
    z.batches = 16;
    z.wall_s = NAN;
    rf__tuner_step(&twin, &z, &dt);
    w.wall_s = z.wall_s = 1;
    w.stall_s = -1;
    w.step_s = NAN;
    w.worker_cpu_s = -5;
    z.stall_s = z.step_s = z.worker_cpu_s = 0;
    rf__tuner_step(&t, &w, &d);
    rf__tuner_step(&twin, &z, &dt);
    assert_true(d.workers >= 1 && d.workers <= 4);
    assert_int_equal(d.workers, dt.workers);
    assert_int_equal(d.prefetch, dt.prefetch);
    assert_int_equal(d.changed, dt.changed);
    assert_string_equal(d.reason, dt.reason);
}

/* Fast consumer, 2 cores really free, budget 4: from the budget (how the
 * loader starts) and from 1, to 2 within 5 windows; 3 is tried, brings
 * nothing and is reverted. */
static void test_converge_fast_consumer_two_cores(void **state)
{
    (void)state;
    static const converge_case v[] = {{0, 2, 4, 4, 2}, {0, 2, 4, 1, 2}, {0, 2, 8, 8, 2}};
    check_converge_cases(v, sizeof v / sizeof v[0]);
}

/* Slow consumer needing 1.3 workers: 2. Very slow consumer: 1. */
static void test_converge_slow_consumers(void **state)
{
    (void)state;
    /* The last needs 3.3 of 8 free cores: Little's law says 4 (3.63 rounded up). */
    static const converge_case v[] = {{1.3, 8, 8, 8, 2}, {1.3, 8, 8, 1, 2}, {1.3, 2, 2, 2, 2},
                                      {0.2, 8, 8, 8, 1}, {0.2, 2, 2, 1, 1}, {0.02, 16, 16, 16, 1},
                                      {3.3, 8, 8, 8, 4}};
    check_converge_cases(v, sizeof v / sizeof v[0]);
}

/* Budget 1 and budget 3 with 8 cores free: never above. */
static void test_budget_respected(void **state)
{
    (void)state;
    static const converge_case v[] = {
        {0, 8, 1, 1, 1}, {0, 8, 1, 6, 1}, {0, 8, 3, 3, 3}, {0, 8, 3, 1, 3}, {6.0, 8, 3, 1, 3}};
    check_converge_cases(v, sizeof v / sizeof v[0]);
}

/* Saturated at 2: the tuner tries 3, sees no gain, reverts and holds; the
 * retry after the hold fails the same way and the hold doubles. */
static void test_revert_on_no_gain(void **state)
{
    (void)state;
    sim s = model(2.6, 2); /* would need 3 workers, only 2 cores */
    rf_tuner t;
    trace tr;
    /* Start at 2 with a consumer step that Little's law maps to 2... */
    rf__tuner_init(&t, 4, 2, 4, 8);
    s.demand = 1.5 / s.cpu;
    run(&s, &t, &tr, 0, 1);
    assert_int_equal(tr.workers[0], 2);
    /* ...then the consumer speeds up: it stalls at 2. */
    s.demand = 2.6 / s.cpu;
    run(&s, &t, &tr, 1, 300);
    int tried = -1, reverted = -1;
    for (int i = 1; i < 300 && reverted < 0; i++) {
        if (tr.workers[i] == 3 && tried < 0)
            tried = i;
        if (tried >= 0 && i > tried && tr.workers[i] == 2) {
            reverted = i;
            assert_true(contains(tr.reason[i], "no gain from 2 -> 3"));
            assert_true(contains(tr.reason[i], "revert"));
        }
    }
    print_trace(&tr, 0, 300);
    assert_true(tried >= 1 && tried <= 3);
    assert_int_equal(reverted, tried + 1);
    /* Holds: at most one blind retry (2 changes) in any 100 windows. */
    assert_true(max_changes_in_span(&tr, reverted + 1, 300, 100) <= 2);
    assert_int_equal(tr.workers[299], 2);
    for (int i = reverted + 1; i < reverted + 9; i++)
        assert_int_equal(tr.workers[i], 2); /* the minimum hold */
}

/* Holds are not forever. Saturated at 2 of 2 cores, then 6 cores free up
 * (another job ended): invisible while only 2 workers run, so found by the
 * blind retry, after 100 windows without a change doubled once, as the cold
 * start met two failures (trims from 6 and from 3 kept the rate). */
static void test_hold_retried_blindly(void **state)
{
    (void)state;
    sim s = model(0, 2);
    rf_tuner t;
    static trace tr;
    start_run(&s, &t, &tr, 6, 6, 20);
    assert_int_equal(tr.workers[19], 2);
    int settled = 0;
    for (int i = 0; i < 20; i++)
        if (tr.changed[i])
            settled = i;
    s.cores = 6;
    run(&s, &t, &tr, 20, settled + 230);
    print_trace(&tr, 0, settled + 230);
    int retry = settled + 1 + 200;
    for (int i = settled + 1; i < retry; i++)
        assert_int_equal(tr.workers[i], 2);
    assert_true(contains(tr.reason[retry], "hold expired: retry 3"));
    assert_int_equal(tr.workers[settled + 229], 6);
}

/* ...and lifted early when the conditions change a lot: the images get 50%
 * dearer to decode while 6 cores free up; the changed CPU/img is visible. */
static void test_hold_lifted_when_conditions_change(void **state)
{
    (void)state;
    sim s = model(2.6, 2);
    rf_tuner t;
    trace tr;
    start_run(&s, &t, &tr, 6, 6, 20);
    assert_int_equal(tr.workers[19], 2);
    s.cpu *= 1.5; /* needs 3.9 workers now */
    s.cores = 6;
    run(&s, &t, &tr, 20, 60);
    print_trace(&tr, 0, 60);
    int reached = -1;
    for (int i = 20; i < 60 && reached < 0; i++)
        if (tr.workers[i] == 4)
            reached = i;
    assert_true(reached > 20 && reached < 35);
    assert_true(contains(tr.reason[reached - 1], "conditions changed"));
    assert_int_equal(tr.workers[59], 4);
}

/* The consumer slows down mid-run: workers are removed one at a time, never
 * to a count that stalls, and nothing moves once settled. */
static void test_removal_when_consumer_slows(void **state)
{
    (void)state;
    sim s = model(3.5, 8);
    rf_tuner t;
    trace tr;
    start_run(&s, &t, &tr, 8, 8, 30);
    assert_int_equal(tr.workers[29], 4);
    s.demand = 1.2 / s.cpu; /* needs 1.2 workers now: 2 keep up, 1 would not */
    run(&s, &t, &tr, 30, 150);
    print_trace(&tr, 0, 150);
    int removals = 0;
    for (int i = 30; i < 150; i++) {
        if (tr.changed[i]) {
            assert_true(contains(tr.reason[i], "remove"));
            assert_int_equal(tr.workers[i], tr.workers[i - 1] - 1);
            removals++;
        }
    }
    assert_int_equal(removals, 2);
    assert_int_equal(tr.workers[149], 2);
    int settled = 0;
    for (int i = 30; i < 150; i++)
        if (tr.workers[i] == 2) {
            settled = i;
            break;
        }
    assert_true(settled > 30 && settled <= 30 + 10);
}

/* Removal that turns out wrong (the consumer speeds up right after it) is
 * undone after 2 stalled windows, without a trial, and not repeated unless
 * the conditions change. */
static void test_add_back_after_removal(void **state)
{
    (void)state;
    sim s = model(3.5, 8);
    rf_tuner t;
    trace tr;
    start_run(&s, &t, &tr, 8, 8, 10);
    assert_int_equal(tr.workers[9], 4);
    s.demand = 2.0 / s.cpu;
    int removed = -1;
    for (int i = 10; i < 40 && removed < 0; i++) {
        run(&s, &t, &tr, i, i + 1);
        if (tr.workers[i] == 3)
            removed = i;
    }
    assert_true(removed > 0);
    s.demand = 3.5 / s.cpu; /* back up: 3 workers stall */
    run(&s, &t, &tr, removed + 1, removed + 30);
    print_trace(&tr, 0, removed + 30);
    /* The first stalled window only waits; the second adds back. */
    assert_int_equal(tr.workers[removed + 1], 3);
    assert_true(contains(tr.reason[removed + 1], "after a removal"));
    assert_int_equal(tr.workers[removed + 2], 4);
    assert_true(contains(tr.reason[removed + 2], "add back"));
    assert_true(changes(&tr, removed + 3, removed + 30) == 0);
    /* The consumer slows again: the floor holds the removal back until the
     * changed step time has been seen for 3 windows. */
    int r = removed + 30;
    s.demand = 2.0 / s.cpu;
    run(&s, &t, &tr, r, r + 40);
    print_trace(&tr, r, r + 40);
    assert_int_equal(tr.workers[r], 4);
    assert_int_equal(tr.workers[r + 1], 4);
    assert_true(contains(tr.reason[r + 1], "fewer than 4 stalled: hold"));
    assert_int_equal(tr.workers[r + 2], 3);
    assert_true(contains(tr.reason[r + 2], "conditions changed"));
    assert_true(changes(&tr, r + 3, r + 40) == 0);
}

/* Prefetch grows only when the consumer stalls while producers are blocked
 * on a full ring, one slot at a time, up to max_prefetch. */
static void test_prefetch_growth(void **state)
{
    (void)state;
    rf_tuner t;
    trace tr;

    /* CPU-bound, stalling, producers never blocked: prefetch stays. */
    sim s = model(0, 2);
    start_run(&s, &t, &tr, 2, 2, 50);
    for (int i = 0; i < 50; i++)
        assert_int_equal(tr.prefetch[i], 4);

    /* Slow consumer: producers wait on the full ring all the time, but the
     * consumer never stalls: prefetch stays. */
    s = model(0.5, 8);
    s.need_prefetch = 0;
    rf__tuner_init(&t, 8, 8, 4, 8);
    for (int i = 0; i < 50; i++) {
        rf_tuner_window w = sim_window(&s, t.workers, t.prefetch);
        w.blocked_s = 0.8 * w.wall_s;
        rf_tuner_decision d;
        rf__tuner_step(&t, &w, &d);
        assert_int_equal(d.prefetch, 4);
    }

    /* Bursty consumer that needs 6 slots: grows 4 -> 5 -> 6, then stops. */
    s = model(1.3, 8);
    s.burst = 0.45;
    s.need_prefetch = 6;
    start_run(&s, &t, &tr, 8, 2, 60);
    print_trace(&tr, 0, 60);
    assert_int_equal(tr.prefetch[59], 6);
    int grew = 0;
    for (int i = 0; i < 60; i++)
        if (i > 0 && tr.prefetch[i] != tr.prefetch[i - 1]) {
            assert_int_equal(tr.prefetch[i], tr.prefetch[i - 1] + 1);
            assert_true(contains(tr.reason[i], "prefetch"));
            grew++;
        }
    assert_int_equal(grew, 2);
    assert_true(changes(&tr, 10, 60) == 0);

    /* Needs 12 slots, allowed 8: stops at 8. */
    s.need_prefetch = 12;
    start_run(&s, &t, &tr, 8, 2, 60);
    assert_int_equal(tr.prefetch[59], 8);
}

/* With 5% noise (sigma) on every measured time: at most 2 changes in any
 * 100 windows after convergence and the budget respected, over many seeds.
 * The count stays within one of the right one, except that on an
 * oversubscribed machine a trim can look like a loss and be undone (more
 * threads than cores, the same images/s): there only the budget bounds it.
 * How often each case lands exactly is printed. */
static void test_noise_stability(void **state)
{
    (void)state;
    static const struct {
        double need;
        int cores, budget, initial, want, hi;
    } cases[] = {
        {0, 2, 4, 4, 2, 4},   {0, 2, 4, 1, 2, 4},   {1.3, 8, 8, 8, 2, 3},    {0.2, 8, 8, 8, 1, 2},
        {3.3, 8, 8, 8, 4, 5}, {0, 8, 3, 3, 3, 3},   {0, 8, 1, 1, 1, 1},      {1.3, 2, 2, 2, 2, 2},
        {2.6, 2, 4, 4, 2, 4}, {0.9, 4, 4, 4, 1, 2}, {5.5, 16, 16, 16, 6, 7},
    };
    enum { SEEDS = 60, WINDOWS = 230 };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int exact = 0, hist[17] = {0};
        for (int seed = 1; seed <= SEEDS; seed++) {
            sim s = model(cases[c].need, cases[c].cores);
            s.noise = 0.05;
            s.rng = 0x12345678ULL * (uint64_t)seed + 1;
            rf_tuner t;
            static trace tr;
            start_run(&s, &t, &tr, cases[c].budget, cases[c].initial, WINDOWS);
            int worst = max_changes_in_span(&tr, 5, WINDOWS, 100);
            int final = tr.workers[WINDOWS - 1];
            int lo = cases[c].want - 1, hi = cases[c].hi;
            int ok5 = tr.workers[4] >= lo && tr.workers[4] <= hi;
            int okf = final >= lo && final <= hi;
            if (worst > 2 || !ok5 || !okf) {
                print_message("case %zu seed %d: worst %d, final %d\n", c, seed, worst, final);
                print_trace(&tr, 0, WINDOWS);
            }
            assert_true(worst <= 2);
            assert_true(ok5);
            assert_true(okf);
            exact += final == cases[c].want;
            hist[final]++;
        }
        char h[200] = "";
        for (int k = 1; k <= 16; k++)
            if (hist[k])
                snprintf(h + strlen(h), sizeof h - strlen(h), " %dx%d", hist[k], k);
        print_message("noise case %zu (need %.1f, %d cores, budget %d): %d/%d seeds end at %d;"
                      " final counts:%s\n",
                      c, cases[c].need, cases[c].cores, cases[c].budget, exact, SEEDS,
                      cases[c].want, h);
    }
}

/* The reasons read as the issue asks. */
static void test_reasons_name_rule_and_figures(void **state)
{
    (void)state;
    rf_tuner t;
    trace tr;
    sim s = model(0.2, 8);
    start_run(&s, &t, &tr, 8, 8, 3);
    /* 0.2 workers x 1.1 -> 1: "little's law: 50 img/s needed x 4.00 ms/img -> 1 worker" */
    assert_true(contains(tr.reason[0], "little's law: 50 img/s needed x 4.00 ms/img -> 1 worker"));
    assert_int_equal(tr.changed[0], 1);
    assert_int_equal(tr.changed[1], 0);
    assert_true(contains(tr.reason[1], "hold"));

    s = model(0, 8);
    start_run(&s, &t, &tr, 5, 1, 2);
    assert_true(contains(tr.reason[0], "budget, 5 workers"));
    assert_true(contains(tr.reason[1], "at the budget"));

    /* An add that pays off says so. Little's law would reach 4 at once for
     * a consumer that needs 3.5, so force a climb by making the first
     * window's CPU look cheaper than the truth. */
    s = model(3.5, 8);
    rf__tuner_init(&t, 8, 1, 4, 8);
    rf_tuner_window w = sim_window(&s, 1, 4);
    w.worker_cpu_s *= 0.5;
    rf_tuner_decision d;
    rf__tuner_step(&t, &w, &d);
    assert_int_equal(d.workers, 2);
    run(&s, &t, &tr, 1, 4);
    print_trace(&tr, 1, 4);
    assert_true(contains(tr.reason[1], "stall"));
    assert_true(contains(tr.reason[1], "try 3"));
    assert_true(contains(tr.reason[2], "% from last add: add"));
    assert_int_equal(tr.workers[2], 4);
    assert_true(contains(tr.reason[3], "from last add"));
}

/* The loader could not apply a decision: the tuner follows what ran. */
static void test_follows_worker_count_that_ran(void **state)
{
    (void)state;
    sim s = model(0, 8);
    rf_tuner t;
    rf__tuner_init(&t, 8, 1, 4, 8);
    rf_tuner_window w = sim_window(&s, 1, 4);
    rf_tuner_decision d;
    rf__tuner_step(&t, &w, &d);
    assert_int_equal(d.workers, 8);
    w = sim_window(&s, 3, 4); /* it ran with 3 */
    rf__tuner_step(&t, &w, &d);
    assert_true(d.workers >= 3);
    assert_int_equal(t.workers, d.workers);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_ready_needs_16_batches_and_100ms),
        cmocka_unit_test(test_worker_budget),
        cmocka_unit_test(test_init_clamps_to_budget_and_prefetch),
        cmocka_unit_test(test_empty_or_nonsense_window_changes_nothing),
        cmocka_unit_test(test_converge_fast_consumer_two_cores),
        cmocka_unit_test(test_converge_slow_consumers),
        cmocka_unit_test(test_budget_respected),
        cmocka_unit_test(test_revert_on_no_gain),
        cmocka_unit_test(test_hold_retried_blindly),
        cmocka_unit_test(test_hold_lifted_when_conditions_change),
        cmocka_unit_test(test_removal_when_consumer_slows),
        cmocka_unit_test(test_add_back_after_removal),
        cmocka_unit_test(test_prefetch_growth),
        cmocka_unit_test(test_noise_stability),
        cmocka_unit_test(test_reasons_name_rule_and_figures),
        cmocka_unit_test(test_follows_worker_count_that_ran),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
