/*
 * test_pack_run.c - ringfeed-pack (the build's program) run end to end on
 * a folder made here, its shards read back by the loader: raw pixels with
 * several workers, auto with --raw-fraction over a shuffled order, parts
 * merged, --keep-keys; and tables served by a fake reader (this program,
 * started as RINGFEED_PYTHON) that speaks tools/pack_table.h's protocol,
 * well and badly: a reader lying about its counts, stopping mid-row, or
 * sending a picture over the limit stops the run with a message, never a
 * crash or a hang.
 *
 * The point of running these from C is the sanitizer and valgrind builds:
 * the packer they start is built the same way (ASan, TSan: the child
 * reports and fails), and under memcheck (RF_PACK_WRAPPER, set by the
 * memcheck_test_pack_run test) the child runs under valgrind, so the
 * packer's threads, the .npy writer, the pipe protocol and the merge are
 * checked there, not only the loader.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

enum { CLASSES = 3, PER_CLASS = 7, N = CLASSES * PER_CLASS };

static char *root; /* the folder packed */
static char self[4096];

/* Runs the packer (RINGFEED_PACK, else ./ringfeed-pack: tests run in the
 * build folder) with args, through RF_PACK_WRAPPER's words when set; its
 * standard error into err. The exit status, or -1. */
static int run_pack(char *err, size_t errcap, const char *arg0, ...)
{
    const char *argv[64];
    int a = 0;
    char wrap[1024] = "";
    const char *w = getenv("RF_PACK_WRAPPER");
    if (w && *w) {
        snprintf(wrap, sizeof wrap, "%s", w);
        for (char *tok = strtok(wrap, " "); tok && a < 32; tok = strtok(NULL, " "))
            argv[a++] = tok;
    }
    const char *exe = getenv("RINGFEED_PACK");
    argv[a++] = exe && *exe ? exe : "./ringfeed-pack";
    va_list ap;
    va_start(ap, arg0);
    for (const char *s = arg0; s && a < 63; s = va_arg(ap, const char *))
        argv[a++] = s;
    va_end(ap);
    argv[a] = NULL;
    char *dir = tu_tempdir("packerr");
    char path[4200];
    snprintf(path, sizeof path, "%s/stderr", dir);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0)
            dup2(fd, 2);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    size_t len = 0;
    uint8_t *text = tu_read_file(path, &len);
    snprintf(err, errcap, "%.*s", (int)len, text ? (char *)text : "");
    free(text);
    tu_tempdir_remove(&dir);
    fprintf(stderr, "%s", err);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The labels of the whole epoch of spec, in order, and a hash of its
 * center crops (16 px). */
static int load_all(const char *spec, int64_t *labels, uint64_t *hash, int exact)
{
    rf_loader *l = TU_LOADER(spec, {RF_P_BATCH_SIZE, 8}, {RF_P_IMAGE_SIZE, 16}, {RF_P_SHUFFLE, 0},
                             {RF_P_NUM_WORKERS, 2}, {RF_P_EXACT, exact});
    tu_start(l);
    rf_batch *b;
    int n = 0, rc;
    *hash = TU_FNV_INIT;
    while ((rc = rf_loader_next(l, &b)) == RF_OK) {
        size_t c = rf_batch_count(b);
        memcpy(labels + n, rf_batch_labels(b), c * sizeof *labels);
        *hash = tu_fnv1a(*hash, rf_batch_data(b), c * 16 * 16 * 3);
        n += (int)c;
        rf_batch_release(b);
    }
    if (rc != RF_END_OF_EPOCH)
        fail_msg("%s: %s", spec, rf_loader_errmsg(l));
    rf_loader_destroy(l);
    return n;
}

static void folder_labels(int64_t *want)
{
    for (int i = 0; i < N; i++)
        want[i] = i / PER_CLASS;
}

/* Raw pixels at full size, 4 workers: the loader's center crops are the
 * folder's at full resolution. */
static void test_raw_with_workers(void **state)
{
    (void)state;
    char *out = tu_tempdir("packraw"), err[8192], spec[4200];
    assert_int_equal(run_pack(err, sizeof err, "--store", "raw", "--workers", "4", "--shard-count",
                              "5", root, out, NULL),
                     0);
    assert_non_null(strstr(err, "21 raw .npy"));
    int64_t got[N], want[N];
    uint64_t h1, h2;
    snprintf(spec, sizeof spec, "%s/shard-*.tar", out);
    assert_int_equal(load_all(spec, got, &h1, 0), N);
    assert_int_equal(load_all(root, want, &h2, 1), N);
    assert_memory_equal(got, want, sizeof got);
    assert_true(h1 == h2);
    tu_tempdir_remove(&out);
}

/* --raw-fraction over a shuffled order, 3 parts and a merge, kept keys:
 * the same samples as one run of it. */
static void test_fraction_parts_merge_keys(void **state)
{
    (void)state;
    char *one = tu_tempdir("packone"), *parts = tu_tempdir("packparts"), err[8192], spec[4200];
    const char *common[] = {"--raw-fraction", "0.5",    "--max-side", "40",
                            "--shuffle",      "--seed", "3",          "--keep-keys",
                            "--shard-count",  "4",      "--workers",  "3"};
#define COMMON                                                                                     \
    common[0], common[1], common[2], common[3], common[4], common[5], common[6], common[7],        \
        common[8], common[9], common[10], common[11]
    assert_int_equal(run_pack(err, sizeof err, COMMON, root, one, NULL), 0);
    assert_non_null(strstr(err, "10 raw .npy, 11 JPEG"));
    assert_non_null(strstr(err, "keys: 21 of the source's own kept"));
    for (int k = 0; k < 3; k++) {
        char part[16];
        snprintf(part, sizeof part, "%d/3", k);
        assert_int_equal(run_pack(err, sizeof err, COMMON, "--part", part, root, parts, NULL), 0);
    }
#undef COMMON
    assert_int_equal(run_pack(err, sizeof err, "merge", parts, NULL), 0);
    int64_t a[N], b[N];
    uint64_t h1, h2;
    snprintf(spec, sizeof spec, "%s/*.tar", one);
    assert_int_equal(load_all(spec, a, &h1, 0), N);
    snprintf(spec, sizeof spec, "%s/*.tar", parts);
    assert_int_equal(load_all(spec, b, &h2, 0), N);
    assert_memory_equal(a, b, sizeof a);
    assert_true(h1 == h2);
    tu_tempdir_remove(&one);
    tu_tempdir_remove(&parts);
}

/* ---- tables, through a fake reader ---------------------------------------- */

static void put(FILE *f, uint64_t v, int width)
{
    for (int i = 0; i < width; i++)
        fputc((int)(v >> (8 * i)) & 0xff, f);
}

static void put_str(FILE *f, const char *s)
{
    put(f, strlen(s), 4);
    fwrite(s, 1, strlen(s), f);
}

/* The reader's side, as RF_FAKE_READER says: "good" serves the folder's
 * JPEGs (row i: class i / PER_CLASS) in two files; "lie" says 5 rows more
 * than its files hold;
 * "short" stops in the middle of the first row; "huge" sends a picture of
 * 1 GiB; "badrow" answers row 4 as a bad row. */
static int fake_reader(const char *mode)
{
    FILE *out = fdopen(1, "wb");
    fwrite("RFTABLE1", 1, 8, out);
    put(out, !strcmp(mode, "lie") ? N + 5 : N, 8);
    put(out, CLASSES, 8);
    put(out, 0, 4); /* no class names */
    put(out, 2, 4);
    put_str(out, "a.parquet");
    put(out, 10, 8);
    put_str(out, "b.parquet");
    put(out, N - 10, 8);
    put_str(out, "jpeg");
    put_str(out, "label");
    put_str(out, "");
    put(out, 0, 1);
    fflush(out);
    for (;;) {
        uint8_t b[8];
        if (fread(b, 1, 4, stdin) != 4)
            return 0;
        uint32_t n =
            (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        if (n == 0)
            return 0;
        for (uint32_t k = 0; k < n; k++) {
            if (fread(b, 1, 8, stdin) != 8)
                return 1;
            uint64_t i = 0;
            for (int j = 0; j < 8; j++)
                i |= (uint64_t)b[j] << (8 * j);
            if (!strcmp(mode, "badrow") && i == 4) {
                put(out, 1, 1);
                put_str(out, "no picture (null)");
                continue;
            }
            tu_folder_opts fo = {CLASSES, PER_CLASS, 64, 48, 90, 1, TU_MIX_CYCLE};
            char path[4200];
            tu_folder_path(path, sizeof path, root, &fo, (int)i);
            size_t len;
            uint8_t *jpg = tu_read_file(path, &len);
            put(out, 0, 1);
            put(out, i / PER_CLASS, 8);
            if (!strcmp(mode, "huge")) {
                put(out, UINT32_C(1) << 30, 4);
                fflush(out);
                free(jpg);
                return 0;
            }
            put(out, len, 4);
            fwrite(jpg, 1, !strcmp(mode, "short") ? len / 2 : len, out);
            free(jpg);
            if (!strcmp(mode, "short")) {
                fflush(out);
                return 0;
            }
            put(out, UINT32_MAX, 4);
        }
        fflush(out);
    }
}

static void tables(const char *mode, int want_rc, const char *want)
{
    char *out = tu_tempdir("packtable"), err[8192], spec[4200];
    setenv("RINGFEED_PYTHON", self, 1);
    setenv("RF_FAKE_READER", mode, 1);
    int rc = run_pack(err, sizeof err, "--max-side", "32", "--workers", "2", "--shard-count", "8",
                      "x.parquet", out, NULL);
    unsetenv("RF_FAKE_READER");
    unsetenv("RINGFEED_PYTHON");
    if (rc != want_rc || !strstr(err, want))
        fail_msg("%s: exit %d, wanted %d with \"%s\"", mode, rc, want_rc, want);
    if (want_rc == 0) {
        int64_t got[N], labels[N];
        uint64_t h;
        folder_labels(labels);
        snprintf(spec, sizeof spec, "%s/shard-*.tar", out);
        assert_int_equal(load_all(spec, got, &h, 0), N);
        assert_memory_equal(got, labels, sizeof got);
        snprintf(spec, sizeof spec, "%s/manifest.json", out);
        size_t len;
        char *m = (char *)tu_read_file(spec, &len);
        assert_non_null(m);
        assert_non_null(memmem(m, len, "\"b.parquet:10\"", 14));
        free(m);
    }
    tu_tempdir_remove(&out);
}

static void test_tables_served(void **state)
{
    (void)state;
    tables("good", 0, "21 samples in 3 shards");
}

static void test_tables_reader_misbehaves(void **state)
{
    (void)state;
    tables("lie", 1, "sent row counts that do not add up");
    tables("short", 1, "stopped (its message, if any, is above)");
    tables("huge", 1, "sent a picture over 512 MiB");
    tables("badrow", 1, "a.parquet:4: no picture (null)");
}

int main(int argc, char **argv)
{
    const char *mode = getenv("RF_FAKE_READER");
    if (mode && argc > 1 && !strcmp(argv[1], "-m")) { /* started as the table reader */
        root = getenv("RF_FAKE_ROOT");
        return fake_reader(mode);
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    root = tu_tempdir("packsrc");
    tu_folder_opts fo = {CLASSES, PER_CLASS, 64, 48, 90, 1, TU_MIX_CYCLE};
    if (tu_make_folder_ex(root, &fo, NULL) != 0)
        return 1;
    setenv("RF_FAKE_ROOT", root, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw_with_workers),
        cmocka_unit_test(test_fraction_parts_merge_keys),
        cmocka_unit_test(test_tables_served),
        cmocka_unit_test(test_tables_reader_misbehaves),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_tempdir_remove(&root);
    return rc;
}
