/*
 * benchutil.h - what every benchmark program in bench/ needs around its
 * measurement: a monotonic clock, medians, the machine and the git revision
 * for its JSON lines, and strict number parsing for its options.
 *
 * A JSON line starts with bu_json_begin ({"bench": ..., "git": ...,
 * "machine": {...}), goes on with the program's parameters and figures, and
 * ends with the caller's "}\n", so that lines from every program can be
 * compared by machine and revision.
 *
 * bench/benchutil.c, C library only (no ringfeed), built once as the static
 * library rf_benchutil that each bench links. Prefix bu_, as testutil's tu_.
 */
#ifndef RF_BENCHUTIL_H
#define RF_BENCHUTIL_H

#include <stddef.h>
#include <stdio.h>

/* CLOCK_MONOTONIC in seconds. */
double bu_now_s(void);

/* The median of v[0..n) (n >= 1); v is left as it was. */
double bu_median(const double *v, int n);

/* Cores this process may run on (sched_getaffinity), or -1. */
int bu_usable_cores(void);

/* The CPU's model name from /proc/cpuinfo, or "unknown". */
void bu_cpu_model(char *buf, size_t cap);

/* The revision measured: $RINGFEED_GIT_REV when set, else `git rev-parse
 * --short HEAD` of the source tree (RF_SOURCE_DIR when the build defines it,
 * else the working directory) with "-dirty" when tracked files changed, else
 * "unknown". */
void bu_git_revision(char *buf, size_t cap);

/* s as a JSON string, quoted and escaped. */
void bu_json_str(FILE *f, const char *s);

/* [v[0] * scale, ...] with `decimals` digits after the point. */
void bu_json_array(FILE *f, const double *v, int n, double scale, int decimals);

/* {"cpu": ..., "cores": online CPUs, "usable_cores": ..., "kernel": ..., "mem_kb": ...} */
void bu_machine_json(FILE *f);

/* The start of a JSON line: {"bench": bench, "git": git, "machine": {...} */
void bu_json_begin(FILE *f, const char *bench, const char *git);

/* A whole decimal integer / number in [lo, hi] into out: 0, or -1 (out untouched). */
int bu_parse_long(const char *s, long lo, long hi, long *out);
int bu_parse_double(const char *s, double lo, double hi, double *out);

/* One command-line option, "--name VALUE" (or "--name" alone for a flag). */
typedef struct bu_opt {
    const char *name;
    char type; /* 'i' int, 'l' long, 'd' double (in [lo, hi]), 's' string, 'f' flag (int 1) */
    void *dst;
    double lo, hi;
} bu_opt;

/* Parses argv[1..argc) with opts[0..n): numbers must be whole ('i', 'l') and
 * within [lo, hi]; arguments not starting with "--" fill pos[0..npos) in
 * order. Returns 0; 1 for -h or --help; -1 after a message on stderr naming
 * prog and the argument that is unknown, lacks its value or is out of range. */
int bu_parse_args(const char *prog, int argc, char **argv, const bu_opt *opts, int n,
                  const char **pos, int npos);

#endif
