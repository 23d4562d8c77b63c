/*
 * benchutil.c - the clock, medians, machine description, git revision, JSON
 * and option parsing shared by the benchmark programs (see benchutil.h).
 *
 * The machine and the revision are read the plain way (/proc, uname, git
 * through popen) each time they are asked for: programs ask once per run or
 * per JSON line, never inside a timed region.
 */
#define _GNU_SOURCE /* popen, sched_getaffinity */
#include "benchutil.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

double bu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bu_median(const double *v, int n)
{
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) {
        fprintf(stderr, "benchutil: out of memory\n");
        exit(1);
    }
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    free(s);
    return m;
}

int bu_usable_cores(void)
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
}

void bu_cpu_model(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        char *colon = strchr(line, ':');
        if (colon) {
            colon += 1 + strspn(colon + 1, " \t");
            colon[strcspn(colon, "\n")] = '\0';
            snprintf(buf, cap, "%s", colon);
        }
        break;
    }
    fclose(f);
}

/* First line of a command's output, or "" (git may be missing). */
static void first_line(const char *cmd, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p)
        return;
    if (fgets(out, (int)cap, p))
        out[strcspn(out, "\n")] = '\0';
    pclose(p);
}

void bu_git_revision(char *buf, size_t cap)
{
    const char *env = getenv("RINGFEED_GIT_REV");
    if (env && *env) {
        snprintf(buf, cap, "%s", env);
        return;
    }
#ifdef RF_SOURCE_DIR
    /* single-quoted in the shell command: a path holding a quote cannot be */
    const char *dir = strchr(RF_SOURCE_DIR, '\'') ? "." : RF_SOURCE_DIR;
#else
    const char *dir = ".";
#endif
    char cmd[4200], rev[64], dirty[8];
    snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --short HEAD 2>/dev/null", dir);
    first_line(cmd, rev, sizeof rev);
    if (!rev[0]) {
        snprintf(buf, cap, "unknown");
        return;
    }
    snprintf(cmd, sizeof cmd,
             "git -C '%s' status --porcelain --untracked-files=no 2>/dev/null | head -c1", dir);
    first_line(cmd, dirty, sizeof dirty);
    snprintf(buf, cap, "%s%s", rev, dirty[0] ? "-dirty" : "");
}

void bu_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void bu_json_array(FILE *f, const double *v, int n, double scale, int decimals)
{
    fputc('[', f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.*f", i ? ", " : "", decimals, v[i] * scale);
    fputc(']', f);
}

void bu_machine_json(FILE *f)
{
    char cpu[256];
    bu_cpu_model(cpu, sizeof cpu);
    struct utsname u;
    const char *kernel = uname(&u) == 0 ? u.release : "unknown";
    long mem_kb = 0;
    FILE *m = fopen("/proc/meminfo", "r");
    if (m) {
        if (fscanf(m, "MemTotal: %ld kB", &mem_kb) != 1)
            mem_kb = 0;
        fclose(m);
    }
    fputs("{\"cpu\": ", f);
    bu_json_str(f, cpu);
    fprintf(f,
            ", \"cores\": %ld, \"usable_cores\": %d, \"kernel\": ", sysconf(_SC_NPROCESSORS_ONLN),
            bu_usable_cores());
    bu_json_str(f, kernel);
    fprintf(f, ", \"mem_kb\": %ld}", mem_kb);
}

void bu_json_begin(FILE *f, const char *bench, const char *git)
{
    fputs("{\"bench\": ", f);
    bu_json_str(f, bench);
    fputs(", \"git\": ", f);
    bu_json_str(f, git);
    fputs(", \"machine\": ", f);
    bu_machine_json(f);
}

int bu_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int bu_parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int set_opt(const bu_opt *o, const char *v)
{
    long l;
    double d;
    switch (o->type) {
    case 'i':
    case 'l':
        if (bu_parse_long(v, (long)o->lo, (long)o->hi, &l) != 0)
            return -1;
        if (o->type == 'i')
            *(int *)o->dst = (int)l;
        else
            *(long *)o->dst = l;
        return 0;
    case 'd':
        if (bu_parse_double(v, o->lo, o->hi, &d) != 0)
            return -1;
        *(double *)o->dst = d;
        return 0;
    case 's':
        *(const char **)o->dst = v;
        return 0;
    default:
        return -1;
    }
}

int bu_parse_args(const char *prog, int argc, char **argv, const bu_opt *opts, int n,
                  const char **pos, int npos)
{
    int npos_seen = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return 1;
        if (strncmp(a, "--", 2) != 0) {
            if (npos_seen == npos) {
                fprintf(stderr, "%s: unexpected argument: %s\n", prog, a);
                return -1;
            }
            pos[npos_seen++] = a;
            continue;
        }
        const bu_opt *o = NULL;
        for (int k = 0; k < n && !o; k++)
            if (!strcmp(a, opts[k].name))
                o = &opts[k];
        if (!o) {
            fprintf(stderr, "%s: unknown option %s\n", prog, a);
            return -1;
        }
        if (o->type == 'f') {
            *(int *)o->dst = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value\n", prog, a);
            return -1;
        }
        const char *v = argv[++i];
        if (set_opt(o, v) != 0) {
            fprintf(stderr, "%s: bad value for %s: %s\n", prog, a, v);
            return -1;
        }
    }
    return 0;
}
