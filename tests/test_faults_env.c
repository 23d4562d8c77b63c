/*
 * test_faults_env.c - a hostile environment end to end through the public
 * API (issue 6), over the valid files of the fault data set (faultset.h).
 *
 * In child processes (this program re-executed, so that limits and filters
 * stay there): io_uring refused by a seccomp filter, RLIMIT_MEMLOCK = 0, a
 * small RLIMIT_NOFILE (soft, then hard too) and 128 workers under a hard
 * limit of 1024 descriptors give the same bytes as the unconstrained run, or
 * clear errors; a FIFO named .jpg is an error under a watchdog, never a
 * hang. In this process: a file without read permission is an EACCES error
 * naming it. The children report with exit codes and messages, not with
 * cmocka.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "faultset.h"
#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

/* ------------------------------------------------- children with limits */

#define CHILD_CHECK(cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "child: %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            _exit(3);                                                                              \
        }                                                                                          \
    } while (0)

enum { CHILD_SKIP = 77 };

static char self_exe[4096]; /* this test program, re-executed for children */
static uint64_t ref_hash;   /* the unconstrained run's epoch hash */

/* Runs child `name` (see child_main) in a fresh copy of this program, with a
 * watchdog: fork, then exec, so that the child starts single-threaded under
 * every sanitizer (ThreadSanitizer refuses threads after a fork of a process
 * that had threads) and its limits and filters stay there. Returns its exit
 * status, or fails the test on a crash or a hang. */
static int in_child(const char *name, int arg, const char *path, unsigned timeout_s,
                    const char *what)
{
    char a[32], h[32];
    snprintf(a, sizeof a, "%d", arg);
    snprintf(h, sizeof h, "%016llx", (unsigned long long)ref_hash);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(timeout_s); /* survives exec: a hang ends as SIGALRM */
        execl(self_exe, self_exe, "--child", name, a, path, h, (char *)NULL);
        fprintf(stderr, "child: exec %s: %s\n", self_exe, strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(st))
        fail_msg("%s: the child died of signal %d%s", what, WTERMSIG(st),
                 WTERMSIG(st) == SIGALRM ? " (hung: watchdog)" : "");
    return WEXITSTATUS(st);
}

typedef struct epoch_run {
    const char *src;
    int backend; /* RF_IO_* */
    int workers;
    uint64_t hash;
    char io[32];
    char note[200];
    char err[1200];
    int rc;
} epoch_run;

/* FNV-1a over an epoch of the valid folder (random resized crop + flip):
 * data, labels and sample ids. rc < 0 with err set on any failure. */
static void run_epoch(epoch_run *r)
{
    r->hash = 0xcbf29ce484222325ULL;
    r->err[0] = r->io[0] = r->note[0] = '\0';
    rf_loader *l = rf_loader_create(r->src);
    if (!l) {
        r->rc = RF_E_NOMEM;
        return;
    }
    rf_loader_set_param(l, RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP);
    rf_loader_set_param(l, RF_P_FLIP, 1);
    rf_loader_set_param(l, RF_P_IMAGE_SIZE, 24);
    rf_loader_set_param(l, RF_P_BATCH_SIZE, 5);
    rf_loader_set_param(l, RF_P_NUM_WORKERS, r->workers);
    rf_loader_set_param(l, RF_P_SEED, 5);
    rf_loader_set_param(l, RF_P_IO_BACKEND, r->backend);
    r->rc = rf_loader_start(l);
    if (r->rc == 0) {
        rf_batch *b;
        while ((r->rc = rf_loader_next(l, &b)) == RF_OK) {
            const uint8_t *p = rf_batch_data(b);
            for (size_t i = 0; i < rf_batch_nbytes(b); i++)
                r->hash = (r->hash ^ p[i]) * 0x100000001b3ULL;
            const uint8_t *q = (const uint8_t *)rf_batch_labels(b);
            for (size_t i = 0; i < (size_t)rf_batch_count(b) * 8; i++)
                r->hash = (r->hash ^ q[i]) * 0x100000001b3ULL;
            rf_batch_release(b);
        }
        if (r->rc == RF_END_OF_EPOCH)
            r->rc = 0;
    }
    if (r->rc < 0)
        snprintf(r->err, sizeof r->err, "%s", rf_loader_errmsg(l));
    char st[16384];
    rf_loader_stats_json(l, st, sizeof st);
    const char *p = strstr(st, "\"io_backend\": \"");
    if (p)
        sscanf(p + 15, "%31[^\"]", r->io);
    p = strstr(st, "\"io_note\": \"");
    if (p)
        sscanf(p + 12, "%199[^\"]", r->note);
    rf_loader_destroy(l);
}

static uint64_t reference_hash(char *io, size_t cap)
{
    epoch_run r = {.src = fs_valid, .backend = RF_IO_AUTO, .workers = 2};
    run_epoch(&r);
    if (r.rc != 0)
        fail_msg("reference epoch: %d %s", r.rc, r.err);
    if (io)
        snprintf(io, cap, "%s", r.io);
    return r.hash;
}

/* seccomp filter: io_uring_setup (and its siblings) fail with EPERM, as
 * Docker's default profile and many sandboxes make them. */
static int refuse_io_uring(void)
{
#if defined(__x86_64__)
    const uint32_t arch = 0xC000003E; /* AUDIT_ARCH_X86_64 */
#elif defined(__aarch64__)
    const uint32_t arch = 0xC00000B7; /* AUDIT_ARCH_AARCH64 */
#else
    return -1;
#endif
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 425 /* io_uring_setup */, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 426 /* io_uring_enter */, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 427 /* io_uring_register */, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return -1;
    return 0;
}

static int child_no_io_uring(int arg, const char *path)
{
    (void)arg;
    (void)path;
    unsetenv("RINGFEED_IO"); /* auto must try io_uring here (memcheck runs set pread) */
    if (refuse_io_uring() != 0) {
        fprintf(stderr, "child: cannot install a seccomp filter (%s): skipped\n", strerror(errno));
        return CHILD_SKIP;
    }
    long rc = syscall(425, 4, NULL);
    CHILD_CHECK(rc == -1 && errno == EPERM, "io_uring_setup gave %ld (%s)", rc, strerror(errno));
    const int backends[] = {RF_IO_AUTO, RF_IO_URING};
    for (int i = 0; i < 2; i++) {
        epoch_run r = {.src = fs_valid, .backend = backends[i], .workers = 3};
        run_epoch(&r);
        CHILD_CHECK(r.rc == 0, "backend %d: %d %s", backends[i], r.rc, r.err);
        CHILD_CHECK(!strcmp(r.io, "pread"), "io_backend is \"%s\"", r.io);
        CHILD_CHECK(strstr(r.note, "io_uring"), "io_note \"%s\" does not say why", r.note);
        CHILD_CHECK(r.hash == ref_hash, "backend %d: bytes differ from the io_uring run",
                    backends[i]);
        fprintf(stderr, "child: io_uring refused: io_backend=%s, note \"%s\", same bytes\n", r.io,
                r.note);
    }
    return 0;
}

static void test_io_uring_refused_falls_back_to_pread(void **state)
{
    (void)state;
    char io[32];
    ref_hash = reference_hash(io, sizeof io);
    print_message("reference run: io_backend=%s\n", io);
    int rc = in_child("no_io_uring", 0, fs_valid, 60, "io_uring refused");
    if (rc == CHILD_SKIP)
        skip();
    assert_int_equal(rc, 0);
}

static int child_memlock0(int arg, const char *path)
{
    (void)arg;
    (void)path;
    struct rlimit rl = {0, 0};
    CHILD_CHECK(setrlimit(RLIMIT_MEMLOCK, &rl) == 0, "setrlimit: %s", strerror(errno));
    for (int w = 1; w <= 3; w += 2) {
        epoch_run r = {.src = fs_valid, .backend = RF_IO_AUTO, .workers = w};
        run_epoch(&r);
        CHILD_CHECK(r.rc == 0, "%d %s", r.rc, r.err);
        CHILD_CHECK(r.hash == ref_hash, "bytes differ (io_backend %s)", r.io);
        fprintf(stderr, "child: RLIMIT_MEMLOCK=0: io_backend=%s%s%s, same bytes\n", r.io,
                r.note[0] ? ", note: " : "", r.note);
    }
    return 0;
}

static void test_memlock_zero(void **state)
{
    (void)state;
    ref_hash = reference_hash(NULL, 0);
    assert_int_equal(in_child("memlock0", 0, fs_valid, 60, "RLIMIT_MEMLOCK=0"), 0);
}

/* arg > 0: soft limit arg (liburing may raise it up to the hard limit);
 * arg < 0: soft and hard limit -arg. */
static int child_nofile(int arg, const char *path)
{
    (void)path;
    int limit = arg < 0 ? -arg : arg;
    struct rlimit old, rl;
    CHILD_CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0, "getrlimit: %s", strerror(errno));
    rl = old;
    rl.rlim_cur = (rlim_t)limit;
    if (arg < 0)
        rl.rlim_max = (rlim_t)limit;
    CHILD_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
    const int backends[] = {RF_IO_AUTO, RF_IO_PREAD};
    for (int i = 0; i < 2; i++) {
        epoch_run r = {.src = fs_valid, .backend = backends[i], .workers = 4};
        run_epoch(&r);
        if (r.rc == 0) {
            CHILD_CHECK(r.hash == ref_hash, "RLIMIT_NOFILE=%d: bytes differ (io_backend %s)", limit,
                        r.io);
            fprintf(stderr, "child: RLIMIT_NOFILE=%d%s: io_backend=%s%s%s, same bytes\n", limit,
                    arg < 0 ? " (hard too)" : "", r.io, r.note[0] ? ", note: " : "", r.note);
        } else {
            /* A clear error: component and cause, and a path when a file
             * could not be opened. */
            CHILD_CHECK(r.err[0], "RLIMIT_NOFILE=%d: error %d without a message", limit, r.rc);
            CHILD_CHECK(strstr(r.err, "EMFILE") || strstr(r.err, "open files") ||
                            strstr(r.err, "descriptor"),
                        "RLIMIT_NOFILE=%d: error does not say why: %s", limit, r.err);
            CHILD_CHECK(r.rc != RF_E_IO || strstr(r.err, fs_valid),
                        "RLIMIT_NOFILE=%d: read error does not name the file: %s", limit, r.err);
            fprintf(stderr, "child: RLIMIT_NOFILE=%d%s: error %d: %s\n", limit,
                    arg < 0 ? " (hard too)" : "", r.rc, r.err);
        }
    }
    /* LeakSanitizer needs descriptors at exit: restore the limit, or (a hard
     * limit that only root may raise again) leave without the leak check. */
    if (setrlimit(RLIMIT_NOFILE, &old) != 0) {
        fflush(NULL);
        _exit(0);
    }
    return 0;
}

static void test_few_open_files(void **state)
{
    (void)state;
    ref_hash = reference_hash(NULL, 0);
    /* 32: room for the library (it must work); 6 and 4: barely any room
     * (it may fail, with a clear error, never crash or hang). Soft limit
     * alone, then soft and hard. */
    static const int limits[] = {32, 6, 4, -32, -6, -4};
    for (int i = 0; i < 6; i++) {
        char what[64];
        snprintf(what, sizeof what, "RLIMIT_NOFILE=%d%s", abs(limits[i]),
                 limits[i] < 0 ? " (hard too)" : "");
        assert_int_equal(in_child("nofile", limits[i], fs_valid, 60, what), 0);
    }
}

static int child_fifo(int backend, const char *dir)
{
    rf_loader *l = rf_loader_create(dir);
    rf_loader_set_param(l, RF_P_BATCH_SIZE, 1);
    rf_loader_set_param(l, RF_P_SHUFFLE, 0);
    rf_loader_set_param(l, RF_P_IMAGE_SIZE, 16);
    rf_loader_set_param(l, RF_P_NUM_WORKERS, 1);
    rf_loader_set_param(l, RF_P_IO_BACKEND, backend);
    CHILD_CHECK(rf_loader_start(l) == 0, "start: %s", rf_loader_errmsg(l));
    rf_batch *b;
    CHILD_CHECK(rf_loader_next(l, &b) == RF_OK, "first sample: %s", rf_loader_errmsg(l));
    rf_batch_release(b);
    int rc = rf_loader_next(l, &b);
    CHILD_CHECK(rc == RF_E_IO, "FIFO: next returned %d (%s)", rc, rf_loader_errmsg(l));
    CHILD_CHECK(strstr(rf_loader_errmsg(l), "z_fifo.jpg"), "error does not name the FIFO: %s",
                rf_loader_errmsg(l));
    fprintf(stderr, "child: FIFO, backend %d: %s\n", backend, rf_loader_errmsg(l));
    CHILD_CHECK(rf_loader_next(l, &b) == RF_END_OF_EPOCH, "after the FIFO");
    rf_loader_destroy(l);
    return 0;
}

static void test_fifo_does_not_hang(void **state)
{
    (void)state;
    char dir[4200], p[4300];
    fs_one_class_folder(dir, sizeof dir, "fifo");
    snprintf(p, sizeof p, "%s/x/a.jpg", dir);
    assert_int_equal(tu_write_file(p, fs_items[0].data, fs_items[0].len), 0);
    snprintf(p, sizeof p, "%s/x/z_fifo.jpg", dir);
    assert_int_equal(mkfifo(p, 0644), 0);
    const int backends[] = {RF_IO_AUTO, RF_IO_URING, RF_IO_PREAD};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(in_child("fifo", backends[i], dir, 30, "FIFO named .jpg"), 0);
    }
    tu_rmtree(dir);
}

static void test_unreadable_file_eacces(void **state)
{
    (void)state;
    if (geteuid() == 0) {
        print_message("running as root: permissions do not stop reads; skipped\n");
        skip();
    }
    char dir[4200], p[4300];
    fs_one_class_folder(dir, sizeof dir, "noperm");
    snprintf(p, sizeof p, "%s/x/locked.jpg", dir);
    assert_int_equal(tu_write_file(p, fs_items[0].data, fs_items[0].len), 0);
    assert_int_equal(chmod(p, 0), 0);
    for (int pread = 0; pread <= 1; pread++) {
        rf_loader *l = fs_loader(dir, RF_TRANSFORM_CENTER, 16, 1, 1);
        rf_loader_set_param(l, RF_P_IO_BACKEND, pread ? RF_IO_PREAD : RF_IO_AUTO);
        tu_start(l);
        rf_batch *b;
        assert_int_equal(rf_loader_next(l, &b), RF_E_IO);
        assert_non_null(strstr(rf_loader_errmsg(l), "locked.jpg"));
        assert_non_null(strstr(rf_loader_errmsg(l), "EACCES"));
        rf_loader_destroy(l);
    }
    chmod(p, 0644);
    tu_rmtree(dir);
}

static int child_uring_many_workers(int workers, const char *path)
{
    (void)path;
    unsetenv("RINGFEED_IO");
    struct rlimit old, rl;
    CHILD_CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0, "getrlimit: %s", strerror(errno));
    /* Hard limit 1024 as well: with a higher one, liburing raises the soft
     * limit itself and retries. */
    rl.rlim_cur = rl.rlim_max = old.rlim_max < 1024 ? old.rlim_max : 1024;
    CHILD_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
    epoch_run r = {.src = fs_valid, .backend = RF_IO_AUTO, .workers = workers};
    run_epoch(&r);
    setrlimit(RLIMIT_NOFILE, &old); /* only root may raise the hard limit again */
    CHILD_CHECK(r.rc == 0, "%d %s", r.rc, r.err);
    CHILD_CHECK(r.hash == ref_hash, "bytes differ");
    CHILD_CHECK(!strcmp(r.io, "io_uring"), "%d workers, RLIMIT_NOFILE %llu: io_backend %s (%s)",
                workers, (unsigned long long)rl.rlim_cur, r.io, r.note);
    return 0;
}

/* Regression (lib/io/reader.c, uring_setup): the io_uring file table is sized
 * 2 x read depth (depth = 16 + 4 x workers) and counts against
 * RLIMIT_NOFILE. With a hard limit of 1024 (some clusters) and 128 workers
 * (a 128-core node with num_workers = 0) the table is shrunk to fit rather
 * than io_uring given up for the single-threaded pread path. */
static void test_many_workers_keep_io_uring(void **state)
{
    (void)state;
    char io[32];
    ref_hash = reference_hash(io, sizeof io);
    if (strcmp(io, "io_uring") != 0)
        skip(); /* no io_uring here at all */
    assert_int_equal(in_child("uring_many_workers", 128, fs_valid, 120, "128 workers"), 0);
}

/* A child started by in_child: --child NAME ARG PATH HASH. */
static int child_main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int, const char *);
    } children[] = {{"no_io_uring", child_no_io_uring},
                    {"memlock0", child_memlock0},
                    {"nofile", child_nofile},
                    {"fifo", child_fifo},
                    {"uring_many_workers", child_uring_many_workers}};
    if (argc != 6)
        return 2;
    snprintf(fs_valid, sizeof fs_valid, "%s", argv[4]);
    ref_hash = strtoull(argv[5], NULL, 16);
    for (size_t i = 0; i < sizeof children / sizeof children[0]; i++)
        if (!strcmp(argv[2], children[i].name))
            return children[i].fn(atoi(argv[3]), argv[4]);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--child"))
        return child_main(argc, argv);
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) {
        fprintf(stderr, "cannot find this program (/proc/self/exe): %s\n", strerror(errno));
        return 1;
    }
    self_exe[n] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_does_not_hang),
        cmocka_unit_test(test_io_uring_refused_falls_back_to_pread),
        cmocka_unit_test(test_memlock_zero),
        cmocka_unit_test(test_few_open_files),
        cmocka_unit_test(test_unreadable_file_eacces),
        cmocka_unit_test(test_many_workers_keep_io_uring),
    };
    return cmocka_run_group_tests(tests, fs_setup, fs_teardown);
}
