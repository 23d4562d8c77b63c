/*
 * test_copier_api.c - the CUDA API of a loader that has no device (device 0
 * asked for on a machine without one: it runs on the CPU and says why; the
 * device calls say RF_E_NO_DEVICE), and the runtime's table as loaded
 * (lib/cuda/cudart.c). The search for the runtime itself is tested end to end by
 * CTest's cuda_hidden, cuda_fake_env, cuda_fake_loaded and cuda_fake_driver
 * (tests/cuda_probe.c).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "copier.h"
#include "cudart.h"
#include "ringfeed.h"
#include "testutil.h"

static char *root;

static void test_api_without_device(void **state)
{
    (void)state;
    int n = rf_cuda_device_count();
    if (n > 0)
        skip(); /* test_cuda.c covers the device */
    root = tu_tempdir("copier");
    assert_non_null(root);
    assert_int_equal(tu_make_folder(root, 2, 3, 64, 48, 1), 0);
    for (int pin = 0; pin <= 1; pin++) {
        rf_loader *l = rf_loader_create(root);
        assert_non_null(l);
        assert_int_equal(rf_loader_set_param(l, RF_P_BATCH_SIZE, 2), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_IMAGE_SIZE, 32), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_NUM_WORKERS, 1), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_DEVICE, 0), 0);
        assert_int_equal(rf_loader_set_param(l, RF_P_PIN_MEMORY, pin), 0);
        /* device 0 asked for, none here: the loader runs on the CPU. */
        assert_int_equal(rf_loader_start(l), 0);
        char js[8192];
        assert_true(rf_loader_stats_json(l, js, sizeof js) > 0);
        assert_non_null(strstr(js, "\"mode\": \"pageable\""));
        assert_non_null(strstr(js, "\"device\": \"cpu\""));
        assert_non_null(strstr(js, "\"available\": false"));
        assert_non_null(strstr(js, "\"requested_device\": 0"));
#ifdef RF_HAVE_CUDA
        assert_non_null(strstr(js, "\"built\": true"));
        const rf_cudart *rt = rf__cudart(NULL, 0);
        if (rt) {
            /* A runtime without a device: which runtime, and why no device. */
            assert_non_null(strstr(js, rt->desc));
            assert_non_null(strstr(js, "no CUDA device"));
        } else {
            assert_non_null(strstr(js, "no CUDA runtime: tried"));
        }
#else
        assert_non_null(strstr(js, "\"built\": false"));
        assert_non_null(strstr(js, "built without"));
#endif
        rf_batch *b = (rf_batch *)1;
        assert_int_equal(rf_loader_next_device(l, NULL, &b), RF_E_NO_DEVICE);
        assert_null(b);
        assert_non_null(strstr(rf_loader_errmsg(l), "no CUDA device"));
        assert_int_equal(rf_loader_next(l, &b), RF_OK);
        assert_null(rf_batch_device_data(b));
        assert_null(rf_batch_device_labels(b));
        uint8_t dst[16];
        assert_int_equal(rf_batch_copy_to(b, dst, NULL, NULL), RF_E_NO_DEVICE);
        rf_batch_release(b);
        rf_loader_destroy(l);
    }
    /* CPU loader: pageable, and the stats say why. */
    rf_loader *l = rf_loader_create(root);
    assert_int_equal(rf_loader_set_param(l, RF_P_NUM_WORKERS, 1), 0);
    assert_int_equal(rf_loader_start(l), 0);
    char js[8192];
    assert_true(rf_loader_stats_json(l, js, sizeof js) > 0);
    assert_non_null(strstr(js, "\"mode\": \"pageable\""));
    assert_non_null(strstr(js, "device=cpu"));
    rf_loader_destroy(l);
    /* NULL-safety of the CUDA entry points. */
    assert_int_equal(rf_loader_next_device(NULL, NULL, NULL), RF_E_INVALID);
    assert_int_equal(rf_batch_copy_to(NULL, NULL, NULL, NULL), RF_E_INVALID);
    assert_null(rf_batch_device_data(NULL));
    assert_null(rf_batch_device_labels(NULL));
    tu_rmtree(root);
    free(root);
}

/* The runtime table: loaded once, by the names the header binds to, and a
 * note that says what happened either way. */
static void test_cudart_table(void **state)
{
    (void)state;
    char note[1024] = "";
    const rf_cudart *rt = rf__cudart(note, sizeof note);
    assert_ptr_equal(rf__cudart(NULL, 0), rt); /* loaded once */
    int n = rf_cuda_device_count();
    char why[1024] = "";
    assert_int_equal(rf__cuda_devices(why, sizeof why), n);
#ifdef RF_HAVE_CUDA
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    assert_string_equal(RF_CUDART_SYM(cudaMemcpyAsync), "cudaMemcpyAsync_ptsz");
#else
    assert_string_equal(RF_CUDART_SYM(cudaMemcpyAsync), "cudaMemcpyAsync");
#endif
    if (!rt) {
        print_message("no runtime: %s\n", note);
        assert_non_null(strstr(note, "no CUDA runtime: tried "));
        assert_int_equal(n, 0);
        assert_string_equal(why, note);
        return;
    }
    print_message("%s (contexts: %s)\n", rt->desc, rt->contexts);
    /* The driver's context calls: all or none, and all from CUDA 12 on. */
    int ndrv = !!rt->CtxGetCurrent + !!rt->CtxSetCurrent + !!rt->DeviceGet +
               !!rt->PrimaryCtxRetain + !!rt->PrimaryCtxRelease;
    assert_true(ndrv == 0 || ndrv == 5);
    assert_string_equal(rt->contexts, ndrv ? "driver" : "runtime");
    if (rt->version >= 12000)
        assert_int_equal(ndrv, 5);
    int major = rt->version / 1000;
    assert_true(major == CUDART_VERSION / 1000 || (major >= 11 && major <= 13));
    assert_non_null(rt->handle);
    assert_true(rt->path[0] == '/');
    assert_non_null(strstr(rt->desc, rt->path));
    int v = 0;
    assert_int_equal(rt->RuntimeGetVersion(&v), cudaSuccess);
    assert_int_equal(v, rt->version);
    if (n == 0)
        assert_non_null(strstr(why, "no CUDA device"));
#else
    assert_null(rt);
    assert_non_null(strstr(note, "built without"));
    assert_int_equal(n, 0);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_without_device),
        cmocka_unit_test(test_cudart_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
