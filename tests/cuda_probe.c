/*
 * cuda_probe.c - a program that uses libringfeed.so as a user would, to see
 * which CUDA runtime the library loads at run time, and that it runs without
 * one (CTest: cuda_hidden through tests/cuda_hidden.sh, cuda_fake_env,
 * cuda_fake_loaded).
 *
 *   cuda_probe [--preload PATH] [--expect-devices N] [--expect-reason TEXT]...
 *
 * It checks that no libcudart is mapped before the library needs CUDA (the
 * library does not link it), optionally dlopen()s PATH first (as importing
 * torch loads its own cudart), asks for device cuda:0, reads one epoch of a
 * small image folder, and checks rf_cuda_device_count() and that the stats'
 * cuda.reason contains each TEXT. Prints the reason. Exit 0 when every check
 * holds, 1 otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"
#include "testutil.h"

#define CLASSES 2
#define PER_CLASS 5
#define MAX_EXPECT 8

static int failures;

static void check(int ok, const char *what, const char *detail)
{
    if (!ok) {
        fprintf(stderr, "cuda_probe: FAIL: %s%s%s\n", what, detail ? ": " : "",
                detail ? detail : "");
        failures++;
    }
}

/* 1 when a file named libcudart* is mapped into this process. */
static int cudart_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    char line[4096];
    int hit = 0;
    while (!hit && fgets(line, sizeof line, f)) {
        const char *slash = strrchr(line, '/');
        hit = slash && strncmp(slash + 1, "libcudart", 9) == 0;
    }
    fclose(f);
    return hit;
}

/* The string value of "reason" inside the "cuda" object of the stats, into out. */
static int cuda_reason(const char *js, char *out, size_t cap)
{
    const char *c = strstr(js, "\"cuda\": {");
    const char *r = c ? strstr(c, "\"reason\": \"") : NULL;
    if (!r)
        return -1;
    r += strlen("\"reason\": \"");
    size_t n = 0;
    for (; *r && *r != '"' && n + 1 < cap; r++) {
        if (*r == '\\' && r[1])
            r++;
        out[n++] = *r;
    }
    out[n] = '\0';
    return 0;
}

int main(int argc, char **argv)
{
    const char *preload = NULL, *expect[MAX_EXPECT];
    int nexpect = 0, expect_devices = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--preload") && i + 1 < argc)
            preload = argv[++i];
        else if (!strcmp(argv[i], "--expect-devices") && i + 1 < argc)
            expect_devices = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--expect-reason") && i + 1 < argc && nexpect < MAX_EXPECT)
            expect[nexpect++] = argv[++i];
        else {
            fprintf(stderr, "usage: cuda_probe [--preload PATH] [--expect-devices N] "
                            "[--expect-reason TEXT]...\n");
            return 2;
        }
    }
    check(!cudart_mapped(), "a libcudart is mapped before the library needed CUDA", NULL);
    if (preload) {
        void *h = dlopen(preload, RTLD_NOW | RTLD_LOCAL);
        check(h != NULL, "dlopen of --preload", h ? NULL : dlerror());
    }

    char *root = tu_tempdir("cuda_probe");
    if (!root || tu_make_folder(root, CLASSES, PER_CLASS, 40, 30, 3) != 0) {
        fprintf(stderr, "cuda_probe: cannot make the image folder\n");
        return 1;
    }
    rf_loader *l = rf_loader_create(root);
    check(l != NULL, "rf_loader_create", NULL);
    if (!l)
        return 1;
    check(rf_loader_set_param(l, RF_P_BATCH_SIZE, 4) == 0, "batch_size", NULL);
    check(rf_loader_set_param(l, RF_P_IMAGE_SIZE, 16) == 0, "image_size", NULL);
    check(rf_loader_set_param(l, RF_P_NUM_WORKERS, 1) == 0, "num_workers", NULL);
    check(rf_loader_set_param(l, RF_P_DEVICE, 0) == 0, "device", NULL);
    int rc = rf_loader_start(l);
    check(rc == 0, "rf_loader_start", rf_loader_errmsg(l));
    int64_t images = 0;
    rf_batch *b;
    while (rc == 0 && (rc = rf_loader_next(l, &b)) == RF_OK) {
        images += rf_batch_count(b);
        rf_batch_release(b);
    }
    check(rc == RF_END_OF_EPOCH, "rf_loader_next", rf_loader_errmsg(l));
    check(images == CLASSES * PER_CLASS, "one epoch on the host has every image", NULL);

    static char js[1 << 16];
    char reason[1024] = "";
    check(rf_loader_stats_json(l, js, sizeof js) > 0, "rf_loader_stats_json", NULL);
    check(cuda_reason(js, reason, sizeof reason) == 0, "stats have cuda.reason", js);
    printf("cuda.reason: %s\n", reason);
    for (int i = 0; i < nexpect; i++)
        check(strstr(reason, expect[i]) != NULL, "cuda.reason lacks", expect[i]);
    int n = rf_cuda_device_count();
    printf("rf_cuda_device_count: %d\n", n);
    if (expect_devices >= 0) {
        char want[64];
        snprintf(want, sizeof want, "expected %d", expect_devices);
        check(n == expect_devices, "rf_cuda_device_count", want);
    }
    rf_loader_destroy(l);
    tu_rmtree(root);
    free(root);
    printf("cuda_probe: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
