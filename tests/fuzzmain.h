/*
 * fuzzmain.h - the pieces of the fuzzers' standalone drivers (fuzz_decode.c,
 * fuzz_webp.c, fuzz_formats.c, built with RF_FUZZ_STANDALONE) that are the
 * same for every format: the in-memory seed corpus and the xorshift PRNG that
 * makes seeds and mutations deterministic. Each fuzzer keeps its own seeds,
 * mutations, oracle and main. Included once, inside #ifdef RF_FUZZ_STANDALONE,
 * after <dirent.h>, <errno.h>, <stdint.h>, <stdio.h>, <stdlib.h>, <string.h>
 * and <sys/stat.h>; all static.
 */
#ifndef RF_TESTS_FUZZMAIN_H
#define RF_TESTS_FUZZMAIN_H

typedef struct seed {
    char name[64];
    uint8_t *data; /* control byte + file */
    size_t len;
} seed;

typedef struct corpus {
    seed *v;
    int n, cap;
} corpus;

/* Appends seed "NNN-name": the control byte ctl, then the len bytes of file. */
static void add(corpus *c, const char *name, uint8_t ctl, const uint8_t *file, size_t len)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->v = realloc(c->v, (size_t)c->cap * sizeof *c->v);
        if (!c->v)
            abort();
    }
    seed *s = &c->v[c->n++];
    snprintf(s->name, sizeof s->name, "%03d-%s", c->n - 1, name);
    s->len = len + 1;
    s->data = malloc(s->len);
    if (!s->data)
        abort();
    s->data[0] = ctl;
    if (len)
        memcpy(s->data + 1, file, len);
}

static void free_corpus(corpus *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->v[i].data);
    free(c->v);
}

/* xorshift64: the same sequence on every machine, so seeds and mutations are
 * reproducible from the --self/--gen arguments alone. */
static uint32_t xs(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

/* Runs every file under path (a file, or a directory walked recursively,
 * dot files skipped) through run_file, which counts what it ran in *count.
 * prog names the program in the message for a path that cannot be stat'ed.
 * 0, or -1 when some path could not be read (the walk goes on). */
typedef int (*fz_file_fn)(const char *path, const struct stat *st, int *count);

static int fz_run_path(const char *prog, const char *path, int *count, fz_file_fn run_file)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return run_file(path, &st, count);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (fz_run_path(prog, p, count, run_file) != 0)
            rc = -1;
    }
    closedir(d);
    return rc;
}

/* Mutates seed in (len bytes) into out (cap >= len bytes); returns the length. */
typedef size_t (*fz_mutate_fn)(const uint8_t *in, size_t len, uint8_t *out, size_t cap,
                               uint64_t *rs);

/* --self [N]: N mutations per seed (default 50), fewer under RINGFEED_TEST_SCALE
 * < 1 (slow tools such as valgrind). */
static int fz_self_per(int argc, char **argv)
{
    int per = argc >= 3 ? atoi(argv[2]) : 50;
    const char *env = getenv("RINGFEED_TEST_SCALE"); /* < 1 under slow tools */
    if (env && atof(env) > 0 && atof(env) < 1)
        per = (int)(per * atof(env));
    return per;
}

/* Runs every seed of c, each followed by per deterministic mutations of it
 * (one PRNG stream over the whole corpus); returns the number of runs. */
static long fz_self(const corpus *c, int per, fz_mutate_fn mutate)
{
    uint64_t rs = 0x9e3779b97f4a7c15ULL;
    size_t cap = 1;
    for (int i = 0; i < c->n; i++)
        cap = c->v[i].len > cap ? c->v[i].len : cap;
    uint8_t *buf = malloc(cap);
    long runs = 0;
    for (int i = 0; i < c->n; i++) {
        LLVMFuzzerTestOneInput(c->v[i].data, c->v[i].len);
        runs++;
        for (int k = 0; k < per; k++) {
            size_t n = mutate(c->v[i].data, c->v[i].len, buf, cap, &rs);
            LLVMFuzzerTestOneInput(buf, n);
            runs++;
        }
    }
    free(buf);
    return runs;
}

#endif /* RF_TESTS_FUZZMAIN_H */
