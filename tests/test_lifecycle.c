/*
 * test_lifecycle.c - shutdown and lifecycle through the public API (issue 6):
 * breaking out of an epoch and destroying, destroying with reads and decodes
 * in flight, stopping a loader while another thread waits in rf_loader_next,
 * a thousand create/start/destroy cycles without fd, thread or heap growth,
 * and two loaders in one process consumed alternately giving the bytes each
 * gives alone.
 *
 * RINGFEED_TEST_SCALE (0 < x <= 1) shrinks the iteration counts for slow
 * tools (valgrind); sanitizer builds keep the full counts.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RF_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RF_TEST_SANITIZED 1
#endif
#endif
#ifndef RF_TEST_SANITIZED
#define RF_TEST_SANITIZED 0
#endif

static char *tmp;
static char small[2048]; /* 3 classes x 8 images around 96 x 72 */
static char tiny[2048];  /* 1 class x 3 images of 16 x 12 */
static char slow[2048];  /* a list file: a few large pictures, many times */

static double scale(void)
{
    const char *e = getenv("RINGFEED_TEST_SCALE");
    double s = e ? atof(e) : 1.0;
    return s > 0 && s <= 1 ? s : 1.0;
}

static int scaled(int n)
{
    int m = (int)(n * scale());
    return m > 0 ? m : 1;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* Open descriptors (less opendir's own) and threads of this process. */
static int count_fds(void)
{
    return count_entries("/proc/self/fd") - 1;
}

/* Threads of this process, without the kernel's io_uring workers
 * (iou-wrk-*, iou-sqp-*), which the kernel starts and retires on its own
 * schedule and which end with their ring. */
static int count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[300], comm[64] = "";
        snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(p, "r");
        if (f) {
            if (!fgets(comm, sizeof comm, f))
                comm[0] = '\0';
            fclose(f);
        }
        if (strncmp(comm, "iou-", 4) != 0)
            n++;
    }
    closedir(d);
    return n;
}

/* A joined thread may linger in /proc/self/task for a moment (the kernel
 * clears the tid that pthread_join waits on before it unlists the task):
 * counts are taken once they settle. */
static int settled_threads(void)
{
    int last = -1, same = 0;
    for (int i = 0; i < 1000; i++) {
        int n = count_threads();
        if (n == last && ++same >= 5)
            return n;
        if (n != last) {
            last = n;
            same = 0;
        }
        usleep(1000);
    }
    return last;
}

/* The thread count once it is down to `want` (or 2 s have passed). */
static int threads_down_to(int want)
{
    int n = count_threads();
    for (int i = 0; i < 2000 && n > want; i++) {
        usleep(1000);
        n = count_threads();
    }
    return n;
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static int setup(void **state)
{
    (void)state;
    tmp = tu_tempdir("lifecycle");
    if (!tmp || strlen(tmp) > 1900)
        return -1;
    snprintf(small, sizeof small, "%s/small", tmp);
    snprintf(tiny, sizeof tiny, "%s/tiny", tmp);
    if (tu_make_folder(small, 3, 8, 96, 72, 11) != 0 || tu_make_folder(tiny, 1, 3, 16, 12, 12) != 0)
        return -1;
    /* Large pictures (decode takes a while with one worker), listed many
     * times: batches are slow to fill, so the consumer really waits. */
    char p[2200];
    snprintf(p, sizeof p, "%s/big", tmp);
    if (tu_make_folder(p, 1, 3, 1600, 1200, 13) != 0)
        return -1;
    snprintf(slow, sizeof slow, "%s/slow.txt", tmp);
    FILE *f = fopen(slow, "w");
    if (!f)
        return -1;
    for (int i = 0; i < 600; i++)
        fprintf(f, "big/class00/img%04d.jpg\t%d\n", i % 3, i % 3);
    fclose(f);
    /* One loader's life before any count is taken: ThreadSanitizer starts its
     * own background thread at the first pthread_create. */
    rf_loader *l = rf_loader_create(tiny);
    if (!l || rf_loader_start(l) != 0)
        return -1;
    rf_loader_destroy(l);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(tmp);
    free(tmp);
    return 0;
}

static rf_loader *make(const char *src, int transform, int size, int batch, int workers,
                       int64_t seed)
{
    return TU_LOADER(src, {RF_P_TRANSFORM, transform}, {RF_P_IMAGE_SIZE, size},
                     {RF_P_BATCH_SIZE, batch}, {RF_P_NUM_WORKERS, workers}, {RF_P_SEED, seed},
                     {RF_P_FLIP, transform == RF_TRANSFORM_RANDOM_RESIZED_CROP});
}

/* The batch's hash (tu_batch_hash) with its index in the top bits. */
static uint64_t batch_hash(const rf_batch *b)
{
    return tu_batch_hash(TU_FNV_INIT, b) ^ (uint64_t)rf_batch_index(b) << 48;
}

/* ------------------------------------------------------------------ tests */

static void test_null_and_unstarted(void **state)
{
    (void)state;
    int fds = count_fds(), threads = settled_threads();
    rf_loader_destroy(NULL);
    rf_loader_stop(NULL);
    rf_batch_release(NULL);
    rf_loader *l = rf_loader_create(small);
    rf_loader_stop(l); /* before start: nothing to stop */
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_E_NOT_STARTED);
    rf_loader_destroy(l);
    l = rf_loader_create(small);
    rf_loader_destroy(l); /* never started */
    /* A failed start leaves nothing behind and can be destroyed. */
    l = rf_loader_create("/nonexistent/ringfeed/folder");
    assert_int_equal(rf_loader_start(l), RF_E_SOURCE);
    assert_int_equal(rf_loader_next(l, &b), RF_E_NOT_STARTED);
    rf_loader_destroy(l);
    assert_int_equal(count_fds(), fds);
    assert_int_equal(threads_down_to(threads), threads);
}

static void test_break_out_of_epoch_and_destroy(void **state)
{
    (void)state;
    int fds = count_fds(), threads = settled_threads();
    for (int k = 0; k < 12; k++) {
        rf_loader *l = make(small, 1 + k % 2, 40, 5, 1 + k % 3, k);
        tu_start(l);
        assert_true(count_threads() > threads);
        assert_int_equal(rf_loader_set_epoch(l, k % 2), 0);
        rf_batch *b = NULL, *held = NULL;
        for (int i = 0; i <= k % 4; i++) {
            assert_int_equal(rf_loader_next(l, &b), RF_OK);
            if (i == 0 && k % 2)
                held = b; /* destroyed while lent */
            else
                rf_batch_release(b);
        }
        if (k % 4 == 3) {
            /* Move away mid-epoch, break out again. */
            assert_int_equal(rf_loader_seek(l, 5, 2), 0);
            assert_int_equal(rf_loader_next(l, &b), RF_OK);
            assert_int_equal(rf_batch_epoch(b), 5);
            assert_int_equal(rf_batch_index(b), 2);
            rf_batch_release(b);
        }
        if (k % 6 == 5)
            rf_loader_stop(l); /* stop, then destroy */
        (void)held;
        rf_loader_destroy(l);
        assert_int_equal(threads_down_to(threads), threads);
    }
    assert_int_equal(count_fds(), fds);
}

static void test_destroy_with_work_in_flight(void **state)
{
    (void)state;
    int fds = count_fds(), threads = settled_threads();
    int n = scaled(60);
    for (int k = 0; k < n; k++) {
        rf_loader *l = make(small, RF_TRANSFORM_RANDOM_RESIZED_CROP, 64, 8, 1 + k % 4, k);
        assert_int_equal(rf_loader_set_param(l, RF_P_PREFETCH, 2 + k % 5), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_IO_BACKEND, k % 2 ? RF_IO_PREAD : RF_IO_AUTO),
                         0);
        tu_start(l);
        /* Reads and decodes are under way right after start; give them a
         * varying head start (0 to ~2 ms), sometimes consume one batch. */
        if (k % 3)
            usleep((useconds_t)(k * 137 % 2000));
        if (k % 5 == 4) {
            rf_batch *b;
            assert_int_equal(rf_loader_next(l, &b), RF_OK);
            if (k % 2)
                rf_batch_release(b);
        }
        rf_loader_destroy(l);
    }
    assert_int_equal(threads_down_to(threads), threads);
    assert_int_equal(count_fds(), fds);
}

typedef struct waiter {
    rf_loader *l;
    int use_wait; /* 1: rf_loader_next_wait with a timeout loop */
    int rc;
    int64_t t_return;
    int batches;
    pid_t tid; /* atomic: the waiter's thread id, 0 until it runs; polled by the test */
} waiter;

/* The state letter of /proc/self/task/<tid>/stat ('R' running, 'S'
 * sleeping, ...), or 0 when it cannot be read. */
static char task_state(pid_t tid)
{
    char p[64], buf[512];
    snprintf(p, sizeof p, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* "pid (comm) S ..." */
    return paren && paren[1] == ' ' ? paren[2] : 0;
}

/* Returns once the waiter has been seen asleep 20 times, 1 ms apart, without
 * having returned: it is then inside rf_loader_next(_wait), the only place it
 * sleeps, on a batch that one worker needs far longer to make. The count is
 * not of consecutive looks: rf_loader_next_wait wakes every 5 ms, and under
 * valgrind on a loaded machine a wake-up can span a look. */
static void wait_until_asleep(const waiter *w)
{
    pid_t tid;
    while ((tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE)) == 0)
        usleep(1000);
    int asleep = 0;
    for (int i = 0; i < 60000 && asleep < 20; i++) {
        asleep += task_state(tid) == 'S';
        usleep(1000);
    }
    if (asleep < 20)
        fail_msg("the waiting thread never blocked");
    if (__atomic_load_n(&w->t_return, __ATOMIC_ACQUIRE))
        fail_msg("the waiting thread returned before the stop (rc %d)", w->rc);
}

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    rf_batch *b;
    int rc;
    __atomic_store_n(&w->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    for (;;) {
        if (w->use_wait) {
            while ((rc = rf_loader_next_wait(w->l, &b, 5)) == RF_AGAIN)
                ;
        } else {
            rc = rf_loader_next(w->l, &b);
        }
        if (rc != RF_OK)
            break;
        w->batches++;
        rf_batch_release(b);
    }
    w->rc = rc;
    __atomic_store_n(&w->t_return, now_ns(), __ATOMIC_RELEASE);
    return NULL;
}

typedef struct stopper {
    rf_loader *l;
    int64_t t0, t1;
} stopper;

static void *stopper_main(void *arg)
{
    stopper *s = arg;
    s->t0 = now_ns();
    rf_loader_stop(s->l);
    s->t1 = now_ns();
    return NULL;
}

static void test_stop_while_another_thread_waits(void **state)
{
    (void)state;
    int threads = settled_threads(), fds = count_fds();
    for (int variant = 0; variant < 4; variant++) {
        /* One worker on 1600x1200 pictures at full resolution: a batch of
         * 32 takes far longer than the waiter needs to block on it. */
        rf_loader *l = make(slow, RF_TRANSFORM_CENTER, 1024, 32, 1, 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_SHUFFLE, 0), 0);
        tu_start(l);
        rf_batch *held = NULL;
        if (variant == 3) {
            /* A batch lent before the stop stays readable after it. */
            assert_int_equal(rf_loader_next(l, &held), RF_OK);
        }
        waiter w = {.l = l, .use_wait = variant % 2};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
        wait_until_asleep(&w);
        int64_t t_stop;
        if (variant == 2) {
            /* Several threads stop at once: idempotent, joins serialised. */
            stopper s[3];
            pthread_t st[3];
            for (int i = 0; i < 3; i++) {
                s[i].l = l;
                assert_int_equal(pthread_create(&st[i], NULL, stopper_main, &s[i]), 0);
            }
            for (int i = 0; i < 3; i++)
                pthread_join(st[i], NULL);
            t_stop = s[0].t0;
            for (int i = 1; i < 3; i++)
                t_stop = s[i].t0 < t_stop ? s[i].t0 : t_stop;
        } else {
            t_stop = now_ns();
            rf_loader_stop(l);
        }
        int64_t t_stopped = now_ns();
        pthread_join(t, NULL);
        assert_int_equal(w.rc, RF_E_STOPPED);
        assert_non_null(strstr(rf_loader_errmsg(l), "stop"));
        double ms = (double)(w.t_return - t_stop) / 1e6;
        print_message("variant %d: waiting consumer returned %.1f ms after stop (stop itself took "
                      "%.1f ms, %d batches before)\n",
                      variant, ms, (double)(t_stopped - t_stop) / 1e6, w.batches);
        /* A hang guard, not a speed check (the time is printed above): the
         * consumer is woken before the joins, which wait for the decode in
         * progress, seconds under valgrind on a busy machine. */
        if (ms > 20000)
            fail_msg("rf_loader_next returned %.0f ms after rf_loader_stop", ms);
        /* After the stop: errors, never a hang. */
        rf_batch *b;
        assert_int_equal(rf_loader_next(l, &b), RF_E_STOPPED);
        assert_int_equal(rf_loader_next_wait(l, &b, 0), RF_E_STOPPED);
        rf_loader_stop(l); /* idempotent */
        assert_int_equal(threads_down_to(threads), threads);
        if (held) {
            const uint8_t *p = rf_batch_data(held);
            unsigned sum = 0;
            for (size_t i = 0; i < rf_batch_nbytes(held); i += 4096)
                sum += p[i];
            (void)sum;
            assert_int_equal(rf_batch_count(held), 32);
            rf_batch_release(held);
        }
        rf_loader_destroy(l);
    }
    assert_int_equal(count_fds(), fds);
}

static void test_create_start_destroy_1000(void **state)
{
    (void)state;
    int n = scaled(1000);
    /* Warm up: first-use allocations of libc, libjpeg, cmocka, and glibc's
     * arenas for new threads (they stop growing after a few dozen cycles). */
    for (int i = 0; i < 50; i++) {
        rf_loader *l = make(tiny, RF_TRANSFORM_CENTER, 8, 2, 1, i);
        assert_int_equal(rf_loader_set_param(l, RF_P_PREFETCH, 2), 0);
        tu_start(l);
        rf_batch *b;
        assert_int_equal(rf_loader_next(l, &b), RF_OK);
        rf_batch_release(b);
        rf_loader_destroy(l);
    }
    int fds = count_fds(), threads = settled_threads();
    size_t heap = heap_in_use(), mid = 0;
    int64_t t0 = now_ns();
    for (int i = 0; i < n; i++) {
        if (i == n / 2)
            mid = heap_in_use();
        rf_loader *l = make(tiny, RF_TRANSFORM_CENTER, 8, 2, 1, i);
        assert_int_equal(rf_loader_set_param(l, RF_P_PREFETCH, 2), 0);
        tu_start(l);
        if (i % 10 == 3) {
            rf_batch *b;
            assert_int_equal(rf_loader_next(l, &b), RF_OK);
            if (i % 20 == 3)
                rf_batch_release(b); /* else destroyed while lent */
        }
        rf_loader_destroy(l);
        if (i % 100 == 99) {
            assert_int_equal(threads_down_to(threads), threads);
            assert_int_equal(count_fds(), fds);
        }
    }
    int64_t t1 = now_ns();
    assert_int_equal(threads_down_to(threads), threads);
    assert_int_equal(count_fds(), fds);
    size_t after = heap_in_use();
    print_message("%d cycles in %.2f s; heap in use %zu -> %zu -> %zu bytes%s\n", n,
                  (double)(t1 - t0) / 1e9, heap, mid, after,
                  RF_TEST_SANITIZED ? " (sanitizer build: not compared; LeakSanitizer checks)"
                                    : "");
    /* Without sanitizers (whose allocators malloc's statistics do not see),
     * nothing may accumulate. glibc's per-thread arenas move the count by a
     * few KB now and then (measured: +8 KB in one 1000-cycle run, flat in the
     * next), so growth must show in both halves of the run: 32 bytes a cycle
     * would; a step of noise in one half does not. */
    long half = n / 2 > 0 ? n / 2 : 1;
    size_t step = (size_t)half * 32;
    if (!RF_TEST_SANITIZED &&
        ((mid > heap + step && after > mid + step) || after > heap + (size_t)n * 256 + 65536))
        fail_msg("heap grew over %d cycles: %zu -> %zu -> %zu bytes", n, heap, mid, after);
}

enum { MAXB = 64, EPOCHS = 2 };

/* Loader k of the pair: different transforms, sizes, batches, workers,
 * layouts and seeds. */
static rf_loader *pair_member(int k, int *nb)
{
    rf_loader *l = k == 0 ? make(small, RF_TRANSFORM_RANDOM_RESIZED_CROP, 32, 5, 2, 1)
                          : make(small, RF_TRANSFORM_CENTER, 40, 7, 3, 2);
    if (k == 1)
        assert_int_equal(rf_loader_set_param(l, RF_P_LAYOUT, RF_LAYOUT_NCHW), 0);
    tu_start(l);
    *nb = (int)rf_loader_num_batches(l);
    assert_true(*nb <= MAXB);
    return l;
}

static void test_two_loaders_alternately(void **state)
{
    (void)state;
    uint64_t alone[2][EPOCHS][MAXB];
    int nb[2];
    for (int k = 0; k < 2; k++) {
        rf_loader *l = pair_member(k, &nb[k]);
        for (int e = 0; e < EPOCHS; e++) {
            assert_int_equal(rf_loader_set_epoch(l, e), 0);
            rf_batch *b;
            for (int i = 0; i < nb[k]; i++) {
                assert_int_equal(rf_loader_next(l, &b), RF_OK);
                alone[k][e][i] = batch_hash(b);
                rf_batch_release(b);
            }
            assert_int_equal(rf_loader_next(l, &b), RF_END_OF_EPOCH);
        }
        rf_loader_destroy(l);
    }
    /* Both at once, one batch from each in turn. */
    rf_loader *l[2];
    for (int k = 0; k < 2; k++)
        l[k] = pair_member(k, &nb[k]);
    for (int e = 0; e < EPOCHS; e++) {
        assert_int_equal(rf_loader_set_epoch(l[0], e), 0);
        assert_int_equal(rf_loader_set_epoch(l[1], e), 0);
        int i[2] = {0, 0}, done[2] = {0, 0};
        while (!done[0] || !done[1]) {
            for (int k = 0; k < 2; k++) {
                if (done[k])
                    continue;
                rf_batch *b;
                int rc = rf_loader_next(l[k], &b);
                if (rc == RF_END_OF_EPOCH) {
                    assert_int_equal(i[k], nb[k]);
                    done[k] = 1;
                    continue;
                }
                assert_int_equal(rc, RF_OK);
                if (batch_hash(b) != alone[k][e][i[k]])
                    fail_msg("loader %d epoch %d batch %d differs from the loader alone", k, e,
                             i[k]);
                i[k]++;
                rf_batch_release(b);
            }
        }
    }
    rf_loader_destroy(l[0]);
    rf_loader_destroy(l[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_and_unstarted),
        cmocka_unit_test(test_break_out_of_epoch_and_destroy),
        cmocka_unit_test(test_destroy_with_work_in_flight),
        cmocka_unit_test(test_stop_while_another_thread_waits),
        cmocka_unit_test(test_create_start_destroy_1000),
        cmocka_unit_test(test_two_loaders_alternately),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
