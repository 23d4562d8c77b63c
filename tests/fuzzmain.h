/*
 * fuzzmain.h - the standalone driver of every fuzzer (tests/fuzz_*.c built
 * with RF_FUZZ_STANDALONE): the in-memory seed corpus, the xorshift PRNG that
 * makes seeds and mutations deterministic, a generic byte mutator, and main's
 * commands (fz_main: --gen DIR, --list, --self [N], FILE|DIR...). Each fuzzer
 * keeps its own seeds, oracle, and mutations where its format wants more than
 * bytes changed. Included once, inside #ifdef RF_FUZZ_STANDALONE, after
 * <dirent.h>, <errno.h>, <stdint.h>, <stdio.h>, <stdlib.h>, <string.h> and
 * <sys/stat.h>; all static.
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

/* Copies a run of 1 to 64 of the n bytes at out over another place. */
static inline void fz_copy_run(uint8_t *out, size_t n, uint64_t *rs)
{
    size_t a = xs(rs) % n, b = xs(rs) % n, m = 1 + xs(rs) % 64;
    m = a + m > n ? n - a : m;
    m = b + m > n ? n - b : m;
    memmove(out + b, out + a, m);
}

/* Generic mutations of a seed (the control byte included): bit flips, bytes,
 * cuts, interesting values, copied runs, a new control byte. */
static inline size_t fz_mutate(const uint8_t *in, size_t len, uint8_t *out, size_t cap,
                               uint64_t *rs)
{
    (void)cap; /* out holds the longest seed */
    size_t n = len;
    memcpy(out, in, n);
    int ops = 1 + (int)(xs(rs) % 4);
    for (int k = 0; k < ops && n > 0; k++) {
        switch (xs(rs) % 6) {
        case 0:
            out[xs(rs) % n] ^= (uint8_t)(1u << (xs(rs) % 8));
            break;
        case 1:
            out[xs(rs) % n] = (uint8_t)xs(rs);
            break;
        case 2:
            n = 1 + xs(rs) % n;
            break;
        case 3: {
            static const uint8_t v[] = {0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff};
            out[xs(rs) % n] = v[xs(rs) % sizeof v];
            break;
        }
        case 4:
            fz_copy_run(out, n, rs);
            break;
        default:
            out[0] = (uint8_t)xs(rs);
            break;
        }
    }
    return n;
}

/* Replays one file through the target (fz_run_path's run_file). */
static int fz_run_file(const char *path, const struct stat *st, int *count)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    uint8_t *buf = malloc((size_t)st->st_size + 1);
    if (!buf)
        abort();
    size_t n = fread(buf, 1, (size_t)st->st_size, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    (*count)++;
    return 0;
}

/* Writes len bytes to path; 0 or -1. */
static int fz_write(const char *path, const void *p, size_t len)
{
    FILE *f = fopen(path, "wb");
    int rc = !f || (len && fwrite(p, 1, len, f) != len) ? -1 : 0;
    if (f && fclose(f) != 0)
        rc = -1;
    return rc;
}

/* The commands of every standalone driver (prog names it in messages):
 *   --gen DIR    writes the seed corpus to DIR/seeds (and dict, when given: a
 *                libFuzzer dictionary, to DIR/dict), makes DIR/corpus and
 *                DIR/artifacts
 *   --list       runs every seed, *verbose set (the target prints outcomes)
 *   --self [N]   every seed and N deterministic mutations of each
 *   FILE|DIR...  replays inputs (reproduces a finding)
 * Returns main's exit status; the caller then frees what the target keeps. */
typedef void (*fz_corpus_fn)(corpus *c);

static int fz_main(int argc, char **argv, const char *prog, fz_corpus_fn make_corpus,
                   fz_mutate_fn mutate, const char *dict, int *verbose)
{
    corpus c = {0};
    int rc = 0;
    if (argc >= 3 && !strcmp(argv[1], "--gen")) {
        char p[4200];
        const char *sub[] = {"", "/seeds", "/corpus", "/artifacts"};
        for (int i = 0; i < 4; i++) {
            snprintf(p, sizeof p, "%s%s", argv[2], sub[i]);
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                fprintf(stderr, "%s: mkdir %s: %s\n", prog, p, strerror(errno));
                return 1;
            }
        }
        make_corpus(&c);
        for (int i = 0; i < c.n && rc == 0; i++) {
            snprintf(p, sizeof p, "%s/seeds/%s", argv[2], c.v[i].name);
            rc = fz_write(p, c.v[i].data, c.v[i].len) != 0;
        }
        if (rc == 0 && dict) {
            snprintf(p, sizeof p, "%s/dict", argv[2]);
            rc = fz_write(p, dict, strlen(dict)) != 0;
        }
        if (rc)
            fprintf(stderr, "%s: cannot write %s: %s\n", prog, p, strerror(errno));
        else
            printf("%s: %d seeds in %s/seeds\n", prog, c.n, argv[2]);
    } else if (argc >= 2 && !strcmp(argv[1], "--list")) {
        make_corpus(&c);
        *verbose = 1;
        for (int i = 0; i < c.n; i++) {
            printf("%s\n", c.v[i].name);
            LLVMFuzzerTestOneInput(c.v[i].data, c.v[i].len);
        }
    } else if (argc >= 2 && !strcmp(argv[1], "--self")) {
        int per = fz_self_per(argc, argv);
        make_corpus(&c);
        long runs = fz_self(&c, per, mutate);
        printf("%s: %d seeds, %ld runs, no findings\n", prog, c.n, runs);
    } else if (argc >= 2 && argv[1][0] != '-') {
        int count = 0;
        for (int i = 1; i < argc; i++)
            rc |= fz_run_path(prog, argv[i], &count, fz_run_file) != 0;
        printf("%s: replayed %d inputs\n", prog, count);
    } else {
        fprintf(stderr, "usage: %s --gen DIR | --list | --self [N] | FILE|DIR...\n", argv[0]);
        rc = 2;
    }
    free_corpus(&c);
    return rc;
}

#endif /* RF_TESTS_FUZZMAIN_H */
