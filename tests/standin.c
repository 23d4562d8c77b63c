/*
 * standin.c - the helpers of the CUDA tests (standin.h).
 */
#define _GNU_SOURCE
#include "standin.h"

#ifdef RF_HAVE_CUDA
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "copier.h"
#include "testcheck.h"
#include "testutil.h"

standin SI;

static char *root;
static uint64_t ref[SI_EPOCHS][SI_NB];
static int64_t ref_count[SI_EPOCHS][SI_NB];

int si_init(const char *prog, int need_fake)
{
    char why[1100] = "";
    memset(&SI, 0, sizeof SI);
    SI.rt = rf__cudart(why, sizeof why);
    const char *want = getenv("RINGFEED_TEST_EXPECT_CUDART");
    if (want && want[0] && (!SI.rt || !strstr(SI.rt->path, want))) {
        printf("%s: FAILED - the runtime should come from %s: %s\n", prog, want,
               SI.rt ? SI.rt->desc : why);
        return 1;
    }
    int n = rf_cuda_device_count();
    if (n == 0) {
        rf__cuda_devices(why, sizeof why);
        printf("%s: SKIPPED - no CUDA device (%s)\n", prog, why);
        return 77;
    }
    void *h = SI.rt->handle;
    SI.MemsetAsync = (__typeof__(SI.MemsetAsync))dlsym(h, RF_CUDART_SYM(cudaMemsetAsync));
    SI.PointerGetAttributes =
        (__typeof__(SI.PointerGetAttributes))dlsym(h, RF_CUDART_SYM(cudaPointerGetAttributes));
    SI.MallocManaged = (__typeof__(SI.MallocManaged))dlsym(h, RF_CUDART_SYM(cudaMallocManaged));
    SI.DeviceSynchronize =
        (__typeof__(SI.DeviceSynchronize))dlsym(h, RF_CUDART_SYM(cudaDeviceSynchronize));
    if (!SI.MemsetAsync || !SI.PointerGetAttributes || !SI.MallocManaged || !SI.DeviceSynchronize) {
        printf("%s: FAILED - %s lacks cudaMemsetAsync, cudaPointerGetAttributes, "
               "cudaMallocManaged or cudaDeviceSynchronize\n",
               prog, SI.rt->desc);
        return 1;
    }
    SI.get = (__typeof__(SI.get))dlsym(h, "fake_cudart_get");
    SI.set = (__typeof__(SI.set))dlsym(h, "fake_cudart_set");
    SI.fail_call = (__typeof__(SI.fail_call))dlsym(h, "fake_cudart_fail");
    SI.hook = (__typeof__(SI.hook))dlsym(h, "fake_cudart_hook");
    if (!SI.get || !SI.set || !SI.fail_call || !SI.hook) {
        SI.get = NULL;
        SI.set = NULL;
        SI.fail_call = NULL;
        SI.hook = NULL;
        if (need_fake) {
            printf("%s: SKIPPED - %s is not the stand-in runtime (tests/fake_cudart.c), whose "
                   "knobs these tests need\n",
                   prog, SI.rt->desc);
            return 77;
        }
    }
    const char *only = getenv("RINGFEED_TEST_FILTER");
    if (only && only[0])
        cmocka_set_test_filter(only);
    printf("%s: %d CUDA device(s), %s\n", prog, n, SI.rt->desc);
    return 0;
}

int si_run(const char *prog, int need_fake, const struct CMUnitTest *tests, size_t n,
           int (*setup)(void **), int (*teardown)(void **))
{
    int rc = si_init(prog, need_fake);
    if (rc != 0)
        return rc;
    return _cmocka_run_group_tests(prog, tests, n, setup, teardown);
}

int si_reset(void **state)
{
    (void)state;
    if (!SI.set)
        return 0;
    static const char *const apis[] = {"sync", "cudaMemcpyAsync", "cudaEventRecord"};
    for (size_t i = 0; i < sizeof apis / sizeof *apis; i++)
        SI.hook(apis[i], NULL, NULL);
    SI.fail_call("", -1, 0);
    SI.set("pause", 0);
    SI.set("sticky", 0);
    SI.set("device_memory", 0);
    SI.set("pinned_memory", 0);
    return 0;
}

uint64_t si_hash(const void *img, const int64_t *labels, int64_t count)
{
    uint64_t h = tu_fnv1a(TU_FNV_INIT, img, (size_t)count * SI_SAMPLE_BYTES);
    return tu_fnv1a(h, labels, (size_t)count * sizeof *labels);
}

rf_loader *si_loader(int device, int pin, int prefetch)
{
    rf_loader *l = TU_LOADER(root, {RF_P_BATCH_SIZE, SI_BATCH}, {RF_P_IMAGE_SIZE, SI_SIZE},
                             {RF_P_TRANSFORM, RF_TRANSFORM_RANDOM_RESIZED_CROP}, {RF_P_FLIP, 1},
                             {RF_P_SEED, 7}, {RF_P_NUM_WORKERS, 2}, {RF_P_PREFETCH, prefetch},
                             {RF_P_DEVICE, device}, {RF_P_PIN_MEMORY, pin});
    tu_start(l);
    return l;
}

int si_setup(void **state)
{
    (void)state;
    root = tu_tempdir("standin");
    if (!root || tu_make_folder(root, SI_CLASSES, SI_PER_CLASS, 60, 45, 5) != 0)
        return -1;
    rf_loader *l = si_loader(-1, 0, 2);
    for (int e = 0; e < SI_EPOCHS; e++) {
        rf_loader_set_epoch(l, e);
        for (int k = 0; k < SI_NB; k++) {
            rf_batch *b;
            if (rf_loader_next(l, &b) != RF_OK)
                return -1;
            ref_count[e][k] = rf_batch_count(b);
            ref[e][k] = si_hash(rf_batch_data(b), rf_batch_labels(b), rf_batch_count(b));
            rf_batch_release(b);
        }
    }
    rf_loader_destroy(l);
    return 0;
}

int si_teardown(void **state)
{
    (void)state;
    tu_rmtree(root);
    free(root);
    root = NULL;
    return 0;
}

uint64_t si_ref_hash(int epoch, int k)
{
    return ref[epoch][k];
}

int64_t si_ref_count(int epoch, int k)
{
    return ref_count[epoch][k];
}

uint64_t si_fetch_hash(const void *img, const int64_t *labels, int64_t count, void *stream)
{
    /* Page-locked, made at the first call and kept: a test that counts
     * allocations counts none of these after it. */
    static uint8_t *h_img;
    static int64_t *h_lab;
    const rf_cudart *rt = SI.rt;
    if (!h_img) {
        assert_int_equal(rt->HostAlloc((void **)&h_img, SI_BATCH_BYTES, cudaHostAllocPortable), 0);
        assert_int_equal(rt->HostAlloc((void **)&h_lab, SI_BATCH * 8, cudaHostAllocPortable), 0);
    }
    assert_int_equal(rt->MemcpyAsync(h_img, img, (size_t)count * SI_SAMPLE_BYTES, cudaMemcpyDefault,
                                     (cudaStream_t)stream),
                     0);
    assert_int_equal(
        rt->MemcpyAsync(h_lab, labels, (size_t)count * 8, cudaMemcpyDefault, (cudaStream_t)stream),
        0);
    assert_int_equal(rt->StreamSynchronize((cudaStream_t)stream), 0);
    return si_hash(h_img, h_lab, count);
}

void si_dst_open(si_dst *d, int stream)
{
    const rf_cudart *rt = SI.rt;
    d->s = NULL;
    if (stream)
        assert_int_equal(rt->StreamCreateWithFlags(&d->s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(rt->Malloc(&d->img, SI_BATCH_BYTES), cudaSuccess);
    assert_int_equal(rt->Malloc((void **)&d->lab, SI_BATCH * 8), cudaSuccess);
}

void si_dst_close(si_dst *d)
{
    const rf_cudart *rt = SI.rt;
    rt->Free(d->img);
    rt->Free(d->lab);
    if (d->s)
        rt->StreamDestroy(d->s);
}
#else
typedef int rf_standin_empty; /* ISO C: a translation unit is not empty */
#endif
