/*
 * test_errmsg.c - who writes a loader's error message (include/ringfeed.h,
 * rf_loader_errmsg): a failure of rf_batch_release or rf_batch_copy_to, calls
 * that may run on any thread, does not replace an error of the consumer's
 * calls that the consumer has not read yet, so the consumer reads the bad
 * file's name after a failed rf_loader_next even while another thread's
 * stale releases fail; rf_loader_errmsg_copy copies the message from any
 * thread, snprintf-like, without counting as the consumer's read; and
 * rf_batch_copy_to, like rf_batch_release, refuses to run in a forked child.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

#define CLASSES 2
#define PER_CLASS 12
#define BAD "img0005.jpg" /* class01/img0005.jpg does not decode */

static char *root;

static int setup(void **state)
{
    (void)state;
    root = tu_tempdir("errmsg");
    if (!root || tu_make_folder(root, CLASSES, PER_CLASS, 64, 48, 4) != 0)
        return -1;
    char p[4096];
    snprintf(p, sizeof p, "%s/class01/" BAD, root);
    static const char junk[] = "this is not a JPEG file";
    return tu_write_file(p, junk, sizeof junk);
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    free(root);
    return 0;
}

/* Batches of 4 in a ring of 4: the 6 batches of the epoch lend each slot at
 * most twice, well within the stale-handle bound of rf_batch_release. */
static rf_loader *make(void)
{
    rf_loader *l = TU_LOADER(root, {RF_P_BATCH_SIZE, 4}, {RF_P_IMAGE_SIZE, 32},
                             {RF_P_NUM_WORKERS, 1}, {RF_P_PREFETCH, 4}, {RF_P_SEED, 3});
    tu_start(l);
    return l;
}

typedef struct releaser {
    rf_loader *l;
    rf_batch *stale;
    atomic_int stop;
    atomic_long refused; /* stale releases refused so far */
    long bad;            /* anything else */
} releaser;

static void *release_stale(void *arg)
{
    releaser *r = arg;
    char msg[64];
    while (!atomic_load(&r->stop)) {
        if (rf_batch_release(r->stale) == RF_E_RELEASED)
            atomic_fetch_add(&r->refused, 1);
        else
            r->bad++;
        /* a look from this thread, beside the consumer */
        if (rf_loader_errmsg_copy(r->l, msg, sizeof msg) < 0)
            r->bad++;
    }
    return NULL;
}

/* Waits until the releaser has failed n more releases (and so written, or
 * tried to write, the message n more times). */
static void wait_refusals(releaser *r, long n)
{
    long until = atomic_load(&r->refused) + n;
    for (int i = 0; i < 10000 && atomic_load(&r->refused) < until; i++)
        usleep(1000);
    assert_true(atomic_load(&r->refused) >= until);
}

/* A thread keeps releasing a stale handle while the consumer meets the bad
 * file: the consumer's rf_loader_errmsg still names it. */
static void test_stale_releases_keep_the_consumers_error(void **state)
{
    (void)state;
    rf_loader *l = make();
    rf_batch *a;
    assert_int_equal(rf_loader_next(l, &a), RF_OK);
    assert_int_equal(rf_batch_release(a), RF_OK);
    releaser r = {.l = l, .stale = a};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_stale, &r), 0);
    wait_refusals(&r, 10);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == RF_OK)
        assert_int_equal(rf_batch_release(b), RF_OK);
    if (rc != RF_E_DECODE)
        fail_msg("expected RF_E_DECODE from the bad file, got %d", rc);
    wait_refusals(&r, 200); /* stale releases failed after the decode error */
    char copy[1024];
    int64_t n = rf_loader_errmsg_copy(l, copy, sizeof copy);
    const char *m = rf_loader_errmsg(l);
    print_message("after the failed next: %s\n", m);
    if (!strstr(m, BAD))
        fail_msg("the consumer's message should name " BAD ", it is \"%s\"", m);
    assert_string_equal(copy, m); /* the copy taken before it, the same */
    assert_int_equal(n, (int64_t)strlen(m));
    /* Read: the stale releases' message may replace it now. */
    wait_refusals(&r, 200);
    m = rf_loader_errmsg(l);
    if (!strstr(m, "already released"))
        fail_msg("once read, a stale release's message should replace it, it is \"%s\"", m);
    atomic_store(&r.stop, 1);
    pthread_join(t, NULL);
    assert_int_equal(r.bad, 0);
    /* The loader stays usable after the bad batch. */
    while ((rc = rf_loader_next(l, &b)) == RF_OK)
        assert_int_equal(rf_batch_release(b), RF_OK);
    assert_true(rc == RF_END_OF_EPOCH || rc == RF_E_DECODE);
    rf_loader_destroy(l);
}

/* rf_loader_errmsg_copy: snprintf's contract, no "read" of the message;
 * rf_batch_copy_to's failures follow the same rule as rf_batch_release's. */
static void test_errmsg_copy(void **state)
{
    (void)state;
    char buf[256];
    assert_int_equal(rf_loader_errmsg_copy(NULL, buf, sizeof buf), 9);
    assert_string_equal(buf, "no loader");
    rf_loader *l = make();
    assert_int_equal(rf_loader_errmsg_copy(l, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    rf_batch *a, *b;
    assert_int_equal(rf_loader_next(l, &a), RF_OK);
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    assert_int_equal(rf_batch_release(a), RF_OK);
    /* Nothing unread: a stale release writes the message. */
    assert_int_equal(rf_batch_release(a), RF_E_RELEASED);
    assert_int_equal(rf_loader_errmsg_copy(l, NULL, 0), (int64_t)strlen(rf_loader_errmsg(l)));
    assert_non_null(strstr(rf_loader_errmsg(l), "already released"));
    /* A consumer error replaces it, and stays until rf_loader_errmsg. */
    assert_int_equal(rf_loader_seek(l, 0, 1000), RF_E_INVALID);
    int64_t n = rf_loader_errmsg_copy(l, NULL, 0);
    assert_true(n > 20);
    assert_int_equal(rf_batch_release(a), RF_E_RELEASED);
    uint8_t dst[16];
    assert_int_equal(rf_batch_copy_to(a, dst, NULL, NULL), RF_E_RELEASED);
    assert_int_equal(rf_batch_copy_to(b, dst, NULL, NULL), RF_E_NO_DEVICE); /* a CPU loader */
    assert_int_equal(rf_loader_errmsg_copy(l, buf, 8), n); /* cut, NUL-terminated */
    assert_int_equal(strlen(buf), 7);
    assert_int_equal(rf_loader_errmsg_copy(l, buf, sizeof buf), n);
    assert_non_null(strstr(buf, "cannot seek")); /* the copies did not "read" it */
    assert_string_equal(rf_loader_errmsg(l), buf);
    /* Read: any call's error replaces it. */
    assert_int_equal(rf_batch_copy_to(b, dst, NULL, NULL), RF_E_NO_DEVICE);
    assert_non_null(strstr(rf_loader_errmsg(l), "no CUDA device"));
    assert_int_equal(rf_batch_release(a), RF_E_RELEASED);
    assert_non_null(strstr(rf_loader_errmsg(l), "already released"));
    /* A consumer error replaces an unread one (the newer detail). */
    assert_int_equal(rf_loader_seek(l, 0, 1000), RF_E_INVALID);
    assert_int_equal(rf_loader_seek(l, -7, 0), RF_E_INVALID);
    assert_non_null(strstr(rf_loader_errmsg(l), "epoch -7"));
    assert_int_equal(rf_batch_release(b), RF_OK);
    rf_loader_destroy(l);
}

/* A lent batch in a forked child: neither copied nor released. */
static void test_copy_to_in_forked_child(void **state)
{
    (void)state;
    rf_loader *l = make();
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(10);
        uint8_t dst[16];
        int c = rf_batch_copy_to(b, dst, NULL, NULL);
        int ok = c == RF_E_FORKED && strstr(rf_loader_errmsg(l), "forked child") != NULL;
        ok = ok && rf_batch_release(b) == RF_E_FORKED;
        if (!ok)
            fprintf(stderr, "child: rf_batch_copy_to gave %d (%s)\n", c, rf_loader_errmsg(l));
        rf_loader_destroy(l);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(rf_batch_release(b), RF_OK); /* still the parent's */
    rf_loader_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_releases_keep_the_consumers_error),
        cmocka_unit_test(test_errmsg_copy),
        cmocka_unit_test(test_copy_to_in_forked_child),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
