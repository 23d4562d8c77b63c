/*
 * standin.h - what the CUDA tests through the public API share
 * (tests/test_cuda_*.c): the runtime the library loaded and the functions of
 * it they call themselves, the stand-in runtime's test knobs
 * (tests/fake_cudart.c; NULL on a real runtime), a small image folder with
 * the CPU loader's batches as the reference, and a loader on a device.
 *
 * Linked into every tests/test_*.c executable with ringfeed_testcheck (empty
 * without CUDA).
 */
#ifndef RF_STANDIN_H
#define RF_STANDIN_H

#ifdef RF_HAVE_CUDA
#include <stddef.h>
#include <stdint.h>

#include "cudart.h"
#include "ringfeed.h"

typedef struct standin {
    const rf_cudart *rt;
    __typeof__(cudaMemsetAsync) *MemsetAsync;
    __typeof__(cudaPointerGetAttributes) *PointerGetAttributes;
    __typeof__(cudaMallocManaged) *MallocManaged;
    __typeof__(cudaDeviceSynchronize) *DeviceSynchronize;
    /* the stand-in's knobs (see fake_cudart.c), all or none */
    long long (*get)(const char *key, int device);
    void (*set)(const char *key, long long value);
    void (*fail_call)(const char *api, int nth, int error);
    void (*hook)(const char *api, void (*fn)(void *), void *arg);
} standin;

extern standin SI;

/* Loads the runtime as the library does and checks it is the one
 * RINGFEED_TEST_EXPECT_CUDART names (when set). Returns 0 to run the tests,
 * 77 to skip them (no device; or need_fake and the runtime is not the
 * stand-in), 1 on failure; prints why as "prog: ...". $RINGFEED_TEST_FILTER
 * (a cmocka pattern: "test_a*") runs only the tests it matches. */
int si_init(const char *prog, int need_fake);

/* main's work once it has listed its tests: si_init, then the cmocka group
 * of n tests with setup and teardown (either may be NULL) when si_init says
 * run. main's exit status. */
struct CMUnitTest;
int si_run(const char *prog, int need_fake, const struct CMUnitTest *tests, size_t n,
           int (*setup)(void **), int (*teardown)(void **));

/* The folder: SI_CLASSES x SI_PER_CLASS small JPEGs, batches of SI_BATCH at
 * SI_SIZE, SI_EPOCHS epochs of SI_NB batches. */
#define SI_CLASSES 2
#define SI_PER_CLASS 9
#define SI_BATCH 4
#define SI_SIZE 32
#define SI_NB ((SI_CLASSES * SI_PER_CLASS + SI_BATCH - 1) / SI_BATCH)
#define SI_EPOCHS 2
#define SI_SAMPLE_BYTES (SI_SIZE * SI_SIZE * 3)
#define SI_BATCH_BYTES ((size_t)SI_BATCH * SI_SAMPLE_BYTES)

/* Puts the stand-in's knobs back (no limits, no pause, no failure, no hook):
 * a cmocka setup, so that a failed test leaves nothing behind. */
int si_reset(void **state);

/* Makes the folder and the reference (cmocka group setup / teardown). */
int si_setup(void **state);
int si_teardown(void **state);

/* The CPU loader's batch k of epoch e: its images+labels hash and count. */
uint64_t si_ref_hash(int epoch, int k);
int64_t si_ref_count(int epoch, int k);
/* The hash of count samples' images and labels, as si_ref_hash has them. */
uint64_t si_hash(const void *img, const int64_t *labels, int64_t count);

/* A started loader on `device` (-1: CPU) over the folder. */
rf_loader *si_loader(int device, int pin, int prefetch);

/* The hash of a batch's copy in device (or managed, or page-locked) memory:
 * copied to the host on `stream` (the calling thread's current device must
 * be the memory's), waited for. */
uint64_t si_fetch_hash(const void *img, const int64_t *labels, int64_t count, void *stream);

/* A batch's destination in device memory: room for SI_BATCH images and
 * labels, cudaMalloc'd on the calling thread's current device, and with
 * `stream` a non-blocking stream (s is NULL without). si_dst_open asserts
 * each call succeeds; si_dst_close frees what si_dst_open made. */
typedef struct si_dst {
    cudaStream_t s;
    void *img;
    int64_t *lab;
} si_dst;
void si_dst_open(si_dst *d, int stream);
void si_dst_close(si_dst *d);
#endif

#endif
