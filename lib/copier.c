/*
 * copier.c - host allocation for the ring; the CUDA copier builds on it.
 *
 * Built with RF_HAVE_CUDA, page-locked memory comes from cudaHostAlloc when
 * a device is present, and pinning failures fall back to pageable memory
 * with the reason recorded. Without CUDA everything is pageable and the
 * library runs on the CPU alone.
 */
#define _GNU_SOURCE
#include "copier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef RF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int rf__cuda_devices(char *note, size_t notecap)
{
#ifdef RF_HAVE_CUDA
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(note, notecap, "no CUDA device: %s", cudaGetErrorString(e));
        (void)cudaGetLastError(); /* clear the sticky error */
        return 0;
    }
    if (n == 0)
        snprintf(note, notecap, "no CUDA device");
    return n;
#else
    snprintf(note, notecap, "built without CUDA");
    return 0;
#endif
}

void *rf__host_alloc(size_t bytes, int pin, int *pinned, char *note, size_t notecap)
{
    *pinned = 0;
    if (bytes == 0)
        bytes = 1;
#ifdef RF_HAVE_CUDA
    if (pin && rf__cuda_devices(note, notecap) > 0) {
        void *p = NULL;
        cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
        if (e == cudaSuccess) {
            *pinned = 1;
            return p;
        }
        snprintf(note, notecap, "cudaHostAlloc(%zu bytes) failed: %s; using pageable memory",
                 bytes, cudaGetErrorString(e));
        (void)cudaGetLastError();
    }
#else
    if (pin)
        snprintf(note, notecap, "pageable memory: built without CUDA");
#endif
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes) != 0)
        return NULL;
    return p;
}

void rf__host_free(void *p, int pinned)
{
#ifdef RF_HAVE_CUDA
    if (pinned) {
        cudaFreeHost(p);
        return;
    }
#endif
    (void)pinned;
    free(p);
}
