/*
 * pack_table.c - tables (Parquet, Arrow) for ringfeed-pack: the Python
 * process that reads them with pyarrow (ringfeed/_pack_tables.py) started
 * with pipes on its standard input and output, its header read, rows asked
 * for and received (pack_table.h has the protocol).
 *
 * The reader is `$RINGFEED_PYTHON -m ringfeed._pack_tables` (python3 when
 * unset; `python -m ringfeed.pack` sets it to its own interpreter). It must
 * import ringfeed: PYTHONPATH gains $RINGFEED_PYTHONPATH, else the folder
 * that holds the package beside this program (a wheel puts the program in
 * ringfeed/; a build tree has bindings/python/ next to build/). Its
 * messages go to the packer's standard error as they are.
 *
 * Everything the reader says is bounded before memory is taken for it, and
 * every read has a deadline (PACK_TABLE_TIMEOUT_S without a byte): a reader
 * that hangs, dies or says something else stops the run with a message,
 * never a hang or a crash.
 */
#define _GNU_SOURCE
#include "pack_table.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ringfeed.h"

extern char **environ;

#define TABLE_MAX_ROWS (INT64_C(1) << 40)
#define TABLE_MAX_STR 65536            /* a class name, a file's path, a column list */
#define TABLE_MAX_LIST (1 << 24)       /* class names, files */
#define TABLE_MAX_PICTURE (512u << 20) /* the loader's default max_file_bytes */
#define TABLE_MAX_EXTRAS (64u << 20)

struct pack_table {
    pid_t pid;
    int to, from; /* requests to the reader; its answers */
    const char *python;
    int64_t rows, nclasses, nnames, nfiles;
    char *arena; /* names, paths, columns, keys: NUL-terminated, back to back */
    size_t alen, acap;
    uint64_t *name_off, *file_off, *key_off; /* key_off: rows entries, or NULL */
    int64_t *first;                          /* nfiles + 1: first row of each file */
    uint64_t col_off[3];
};

/* ---- bytes from the reader, with a deadline ------------------------------ */

static int fail(pack_table *t, const char *what)
{
    fprintf(stderr, "ringfeed-pack: the table reader (%s -m ringfeed._pack_tables) %s\n", t->python,
            what);
    return -1;
}

static int read_full(pack_table *t, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd p = {t->from, POLLIN, 0};
        int r = poll(&p, 1, PACK_TABLE_TIMEOUT_S * 1000);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            char what[64];
            snprintf(what, sizeof what, "sent nothing for %d s", PACK_TABLE_TIMEOUT_S);
            return fail(t, what);
        }
        ssize_t k = read(t->from, (char *)buf + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return fail(t, k == 0 ? "stopped (its message, if any, is above)"
                                  : "could not be read from");
        got += (size_t)k;
    }
    return 0;
}

static int read_u(pack_table *t, void *v, size_t width)
{
    uint8_t b[8];
    if (read_full(t, b, width) != 0)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < width; i++)
        x |= (uint64_t)b[i] << (8 * i);
    if (width == 1)
        *(uint8_t *)v = (uint8_t)x;
    else if (width == 2)
        *(uint16_t *)v = (uint16_t)x;
    else if (width == 4)
        *(uint32_t *)v = (uint32_t)x;
    else
        *(uint64_t *)v = x;
    return 0;
}

/* A string of at most max bytes into the arena; its offset in *off. */
static int read_str(pack_table *t, uint32_t len, uint32_t max, uint64_t *off)
{
    if (len > max)
        return fail(t, "sent a string too long");
    if (t->alen + len + 1 > t->acap) {
        size_t nc = t->acap ? t->acap : 1 << 16;
        while (nc < t->alen + len + 1)
            nc *= 2;
        char *a = realloc(t->arena, nc);
        if (!a)
            return fail(t, "sent more than memory holds");
        t->arena = a;
        t->acap = nc;
    }
    if (read_full(t, t->arena + t->alen, len) != 0)
        return -1;
    if (memchr(t->arena + t->alen, '\0', len))
        return fail(t, "sent a string holding a NUL");
    t->arena[t->alen + len] = '\0';
    *off = t->alen;
    t->alen += len + 1;
    return 0;
}

static int read_str32(pack_table *t, uint64_t *off)
{
    uint32_t len;
    return read_u(t, &len, 4) != 0 ? -1 : read_str(t, len, TABLE_MAX_STR, off);
}

/* ---- starting the reader -------------------------------------------------- */

static int has_package(const char *dir)
{
    char p[PACK_PATHCAP];
    struct stat st;
    if (snprintf(p, sizeof p, "%s/ringfeed/_pack_tables.py", dir) >= (int)sizeof p)
        return 0;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The folder to put first on the reader's PYTHONPATH, into buf; "" none. */
static void package_dir(char *buf, size_t cap)
{
    const char *env = getenv("RINGFEED_PYTHONPATH");
    buf[0] = '\0';
    if (env && *env) {
        snprintf(buf, cap, "%s", env);
        return;
    }
    char exe[PACK_PATHCAP];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0'; /* the program's folder */
    char cand[PACK_PATHCAP];
    /* a wheel: site-packages/ringfeed/ */
    if (snprintf(cand, sizeof cand, "%s/..", exe) < (int)sizeof cand && has_package(cand)) {
        snprintf(buf, cap, "%s", cand);
        return;
    }
    /* a build tree */
    if (snprintf(cand, sizeof cand, "%s/../bindings/python", exe) < (int)sizeof cand &&
        has_package(cand))
        snprintf(buf, cap, "%s", cand);
}

/* environ with PYTHONPATH led by dir; malloc'ed (the strings but the new one
 * borrowed), *pp the new one to free. */
static char **child_env(const char *dir, char **pp)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env)
        return NULL;
    const char *old = getenv("PYTHONPATH");
    *pp = NULL;
    if (*dir && asprintf(pp, "PYTHONPATH=%s%s%s", dir, old && *old ? ":" : "", old ? old : "") < 0)
        *pp = NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!*pp || strncmp(environ[i], "PYTHONPATH=", 11))
            env[k++] = environ[i];
    if (*pp)
        env[k++] = *pp;
    return env;
}

static int spawn(pack_table *t, const pack_opts *o, int keys)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0)
        return fail(t, "could not be started (no pipe)");
    if (pipe2(out, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        return fail(t, "could not be started (no pipe)");
    }
    const char *argv[64];
    int a = 0;
    argv[a++] = t->python;
    argv[a++] = "-m";
    argv[a++] = "ringfeed._pack_tables";
    argv[a++] = "--image-column";
    argv[a++] = o->image_column ? o->image_column : "";
    argv[a++] = "--label-column";
    argv[a++] = o->label_column ? o->label_column : "";
    argv[a++] = "--extras-columns";
    argv[a++] = o->extras_columns ? o->extras_columns : "";
    argv[a++] = keys ? "--keys" : "--no-keys";
    argv[a++] = "--";
    argv[a++] = o->src; /* the entries, '\n'-separated */
    argv[a] = NULL;
    char dir[PACK_PATHCAP], *pp = NULL;
    package_dir(dir, sizeof dir);
    char **env = child_env(dir, &pp);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    int e = env ? posix_spawnp(&t->pid, t->python, &fa, NULL, (char *const *)argv, env) : ENOMEM;
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    free(pp);
    close(in[0]);
    close(out[1]);
    t->to = in[1];
    t->from = out[0];
    if (e != 0) {
        t->pid = 0;
        fprintf(stderr,
                "ringfeed-pack: tables (.parquet, .arrow) are read with Python and pyarrow: "
                "cannot run %s: %s (set RINGFEED_PYTHON to a Python that has pyarrow)\n",
                t->python, strerror(e));
        return -1;
    }
    return 0;
}

static int read_header(pack_table *t)
{
    char magic[8];
    uint32_t count;
    if (read_full(t, magic, 8) != 0)
        return -1;
    if (memcmp(magic, "RFTABLE1", 8) != 0)
        return fail(t, "did not answer as expected (another version of the package?)");
    if (read_u(t, &t->rows, 8) != 0 || read_u(t, &t->nclasses, 8) != 0 || read_u(t, &count, 4) != 0)
        return -1;
    if (t->rows < 0 || t->rows > TABLE_MAX_ROWS || t->nclasses < 0 ||
        t->nclasses > RF_SOURCE_MAX_LABEL + 1 || count > TABLE_MAX_LIST ||
        (count && count != (uint64_t)t->nclasses))
        return fail(t, "sent counts out of range");
    t->nnames = count;
    if (!(t->name_off = malloc(((size_t)count + 1) * sizeof *t->name_off)))
        return fail(t, "sent more than memory holds");
    for (uint32_t i = 0; i < count; i++)
        if (read_str32(t, &t->name_off[i]) != 0)
            return -1;
    if (read_u(t, &count, 4) != 0)
        return -1;
    if (count == 0 || count > TABLE_MAX_LIST)
        return fail(t, "sent a count of files out of range");
    t->nfiles = count;
    t->file_off = malloc((size_t)count * sizeof *t->file_off);
    t->first = malloc(((size_t)count + 1) * sizeof *t->first);
    if (!t->file_off || !t->first)
        return fail(t, "sent more than memory holds");
    t->first[0] = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t r;
        if (read_str32(t, &t->file_off[i]) != 0 || read_u(t, &r, 8) != 0)
            return -1;
        if (r > (uint64_t)(t->rows - t->first[i]))
            return fail(t, "sent row counts that do not add up");
        t->first[i + 1] = t->first[i] + (int64_t)r;
    }
    if (t->first[count] != t->rows)
        return fail(t, "sent row counts that do not add up");
    for (int c = 0; c < 3; c++)
        if (read_str32(t, &t->col_off[c]) != 0)
            return -1;
    uint8_t keys;
    if (read_u(t, &keys, 1) != 0)
        return -1;
    if (keys) {
        if (!(t->key_off = malloc(((size_t)t->rows + 1) * sizeof *t->key_off)))
            return fail(t, "sent more keys than memory holds");
        for (int64_t i = 0; i < t->rows; i++) {
            uint16_t len;
            if (read_u(t, &len, 2) != 0 || read_str(t, len, UINT16_MAX, &t->key_off[i]) != 0)
                return -1;
        }
    }
    return 0;
}

pack_table *pack_table_open(const pack_opts *o, int keys)
{
    pack_table *t = calloc(1, sizeof *t);
    if (!t) {
        fprintf(stderr, "ringfeed-pack: out of memory\n");
        return NULL;
    }
    t->to = t->from = -1;
    const char *py = getenv("RINGFEED_PYTHON");
    t->python = py && *py ? py : "python3";
    signal(SIGPIPE, SIG_IGN); /* a reader gone is a write error, not the packer's death */
    if (spawn(t, o, keys) != 0 || read_header(t) != 0) {
        pack_table_close(t);
        return NULL;
    }
    return t;
}

void pack_table_close(pack_table *t)
{
    if (!t)
        return;
    if (t->to >= 0) {
        uint8_t end[4] = {0, 0, 0, 0};
        (void)!write(t->to, end, 4); /* the reader ends at the count 0 or at EOF */
        close(t->to);
    }
    if (t->from >= 0)
        close(t->from);
    if (t->pid > 0) { /* up to 30 s to end, then killed */
        int st;
        struct timespec nap = {0, 20 * 1000 * 1000};
        for (int i = 0; i < 1500 && waitpid(t->pid, &st, WNOHANG) == 0; i++)
            nanosleep(&nap, NULL);
        if (waitpid(t->pid, &st, WNOHANG) == 0) {
            kill(t->pid, SIGKILL);
            waitpid(t->pid, &st, 0);
        }
    }
    free(t->arena);
    free(t->name_off);
    free(t->file_off);
    free(t->key_off);
    free(t->first);
    free(t);
}

/* ---- what it said -------------------------------------------------------- */

int64_t pack_table_rows(const pack_table *t)
{
    return t->rows;
}

int64_t pack_table_nclasses(const pack_table *t)
{
    return t->nclasses;
}

int64_t pack_table_nnames(const pack_table *t)
{
    return t->nnames;
}

const char *pack_table_name(const pack_table *t, int64_t c)
{
    return t->arena + t->name_off[c];
}

const char *pack_table_column(const pack_table *t, int which)
{
    return t->arena + t->col_off[which];
}

int pack_table_has_extras(const pack_table *t)
{
    return *pack_table_column(t, 2) != '\0';
}

int pack_table_source(const pack_table *t, int64_t i, char *buf, size_t cap)
{
    int64_t lo = 0, hi = t->nfiles; /* the file f with first[f] <= i < first[f + 1] */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (t->first[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return snprintf(buf, cap, "%s:%lld", t->arena + t->file_off[lo], (long long)(i - t->first[lo]));
}

int pack_table_key(const pack_table *t, int64_t i, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%s", t->key_off ? t->arena + t->key_off[i] : "");
}

/* ---- rows ----------------------------------------------------------------- */

int pack_table_ask(pack_table *t, const int64_t *idx, int64_t n)
{
    if (n <= 0 || n > PACK_TABLE_MAX_ASK)
        return n == 0 ? 0 : fail(t, "was asked for too many rows at once");
    size_t len = 4 + 8 * (size_t)n, at = 0;
    uint8_t *b = malloc(len);
    if (!b)
        return fail(t, "could not be asked (out of memory)");
    for (int k = 0; k < 4; k++)
        b[k] = (uint8_t)((uint64_t)n >> (8 * k));
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            b[4 + 8 * i + k] = (uint8_t)((uint64_t)idx[i] >> (8 * k));
    while (at < len) {
        ssize_t w = write(t->to, b + at, len - at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            free(b);
            return fail(t, "stopped taking requests (its message, if any, is above)");
        }
        at += (size_t)w;
    }
    free(b);
    return 0;
}

static int fetch_one(pack_table *t, int64_t i, pack_item *it)
{
    uint8_t status;
    memset(it, 0, sizeof *it);
    if (read_u(t, &status, 1) != 0)
        return -1;
    if (status == 1) {
        uint32_t len;
        if (read_u(t, &len, 4) != 0)
            return -1;
        if (len >= sizeof it->err)
            return fail(t, "sent a reason too long");
        if (read_full(t, it->err, len) != 0)
            return -1;
        it->err[len] = '\0';
        it->rc = RF_E_DECODE;
        return 0;
    }
    uint64_t label;
    uint32_t len, xlen;
    if (status != 0 || read_u(t, &label, 8) != 0 || read_u(t, &len, 4) != 0)
        return status != 0 ? fail(t, "sent a row it was not asked for") : -1;
    if (len > TABLE_MAX_PICTURE)
        return fail(t, "sent a picture over 512 MiB");
    if (!(it->data = malloc((size_t)len + 1)))
        return fail(t, "sent more than memory holds");
    if (read_full(t, it->data, len) != 0 || read_u(t, &xlen, 4) != 0)
        return -1;
    it->len = it->img_len = len;
    it->xlen[0] = RF_SOURCE_ABSENT;
    if (xlen != UINT32_MAX) {
        if (xlen > TABLE_MAX_EXTRAS)
            return fail(t, "sent extras over 64 MiB");
        uint8_t *d = realloc(it->data, (size_t)len + xlen + 1);
        if (!d)
            return fail(t, "sent more than memory holds");
        it->data = d;
        if (read_full(t, it->data + len, xlen) != 0)
            return -1;
        it->xoff[0] = len;
        it->xlen[0] = xlen;
        it->len += xlen;
    }
    it->label = (int64_t)label;
    if (it->label < 0 || it->label > RF_SOURCE_MAX_LABEL ||
        (t->nclasses > 0 && it->label >= t->nclasses)) {
        snprintf(it->err, sizeof it->err, "label %lld out of range (row %lld)",
                 (long long)it->label, (long long)i);
        it->rc = RF_E_DECODE;
    }
    return 0;
}

int pack_table_fetch(pack_table *t, const int64_t *idx, int64_t n, pack_item *items)
{
    for (int64_t k = 0; k < n; k++)
        if (fetch_one(t, idx[k], &items[k]) != 0) {
            for (int64_t j = 0; j <= k; j++)
                pack_item_free(&items[j]);
            return -1;
        }
    return 0;
}
