/*
 * testcheck.h - cmocka helpers shared by the tests that drive the library:
 * a loader with a list of options set (each asserted), start-or-fail,
 * hashes of delivered batches, figures from the stats JSON, a source that
 * must open (or must be refused with given words in its message), a reader
 * of the backend asked for, the test program's temporary folder. Each helper fails the running cmocka test itself
 * (fail_msg / assert_*), so it may only be called from inside a test.
 *
 * Linked into every tests/test_*.c executable (ringfeed_testcheck, see
 * tests/CMakeLists.txt); testutil.h holds what does not need cmocka.
 */
#ifndef RF_TESTCHECK_H
#define RF_TESTCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "reader.h"
#include "ringfeed.h"
#include "source.h"

/* -------------------------------------------------------- temporary folder */

/* The test program's temporary folder (tu_tempdir, named after the program),
 * made by tu_tmp_setup and removed with all it holds by tu_tmp_teardown: a
 * cmocka group's set-up and tear-down. */
extern char *tu_tmp;
int tu_tmp_setup(void **state);
int tu_tmp_teardown(void **state);

/* tu_tmp/<fmt...>, malloc'd. */
char *tu_tmp_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------ loader */

typedef struct tu_param {
    int param; /* enum rf_param */
    int64_t value;
} tu_param;

/* A loader over src with params[0..n) set in that order, each asserted to
 * succeed. Not started. */
rf_loader *tu_loader_with(const char *src, const tu_param *params, size_t n);

/* TU_LOADER(src, {RF_P_BATCH_SIZE, 8}, {RF_P_SEED, 5}, ...): the same with
 * the options written in place. */
#define TU_LOADER(src, ...)                                                                        \
    tu_loader_with((src), (const tu_param[]){__VA_ARGS__},                                         \
                   sizeof((const tu_param[]){__VA_ARGS__}) / sizeof(tu_param))

/* FNV-1a over every batch of epoch from batch from_batch on (rf_loader_seek,
 * then next until the end of the epoch): data, labels and sample ids. */
uint64_t tu_epoch_hash(rf_loader *l, int64_t epoch, int64_t from_batch);

/* rf_loader_start, failing the test with the code and rf_loader_errmsg. */
void tu_start(rf_loader *l);

/* The next batch fails with want_rc and the loader's message (printed)
 * holds the text fmt formats. */
void tu_next_fails(rf_loader *l, int want_rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* FNV-1a of a batch's data, labels and sample indices, continuing from h
 * (TU_FNV_INIT to begin). */
uint64_t tu_batch_hash(uint64_t h, const rf_batch *b);

/* rf_loader_stats_json in full, malloc'd. */
char *tu_stats(rf_loader *l);

/* The number after "key": in a stats JSON text (its first occurrence); a
 * missing key fails the test. */
int64_t tu_stats_int(const char *js, const char *key);
double tu_stats_double(const char *js, const char *key);

/* ------------------------------------------------------------------ source */

/* rf__source_open_ex that must succeed (o may be NULL: the defaults). */
void tu_source_open_ok(rf_source *s, const char *spec, const rf_source_opts *o);

/* rf__source_open_ex that must fail with RF_E_SOURCE, leave nothing behind
 * (no samples, no arena), and give a message holding each of the strings
 * that follow o (NULL-ended). The message is printed. */
void tu_source_open_fails(const char *spec, const rf_source_opts *o, ...);

/* ------------------------------------------------------------------ decode */

/* What a loader with default options hands the decoder: transform and size
 * given, NHWC, no flip, PIL's pixel limit, 1000 scans, seed given, epoch
 * and sample 0, the whole file checked. */
rf_decode_opts tu_decode_opts(int transform, int size, uint64_t seed);

/* ------------------------------------------------------------------ reader */

/* A reader of the backend asked for, with depth (0: the default, 64) and
 * nothing in flight; NULL when io_uring was asked for and the machine
 * refused it (the reason is printed, and the reader fell back to pread). */
rf_reader *tu_reader_open(int backend, unsigned depth);

/* r = tu_reader_open(backend, depth), or skip() the test when NULL. */
#define TU_READER_OR_SKIP(r, backend, depth)                                                       \
    do {                                                                                           \
        (r) = tu_reader_open((backend), (depth));                                                  \
        if (!(r))                                                                                  \
            skip();                                                                                \
    } while (0)

/* test_uring_<name> and test_pread_<name>: check_<name>(backend) run with
 * each reader backend (the io_uring one skips where io_uring is refused). */
#define TU_TEST_BOTH_BACKENDS(name)                                                                \
    static void test_uring_##name(void **state)                                                    \
    {                                                                                              \
        (void)state;                                                                               \
        check_##name(RF__IO_URING);                                                                \
    }                                                                                              \
    static void test_pread_##name(void **state)                                                    \
    {                                                                                              \
        (void)state;                                                                               \
        check_##name(RF__IO_PREAD);                                                                \
    }

/* ------------------------------------------------------------------ orders */

/* o[0..n) holds every index 0..n-1 exactly once. */
void tu_assert_permutation(const int64_t *o, int64_t n);

#endif
