/*
 * fake_cudart_mem.c - the stand-in's memory (see fake_cudart.c): device
 * memory (cudaMalloc), page-locked host memory (cudaHostAlloc,
 * cudaMallocHost) and managed memory (cudaMallocManaged) are host memory
 * registered here with their kind and the device current when they were
 * made (cudaPointerGetAttributes reports it, as CUDA does), so that every
 * copy is checked against its kind and bounds when it is enqueued and again
 * when it runs.
 *
 * As the real runtime: an allocation needs a context (the thread's current
 * one, made if there is none), takes time (pinning is slow), and fails with
 * cudaErrorMemoryAllocation past a limit (fake_cudart_set "device_memory" /
 * "pinned_memory", $FAKE_CUDART_DEVICE_MEMORY, or
 * $FAKE_CUDART_HOSTALLOC_FAIL_SIZE=N: a cudaHostAlloc of exactly N bytes).
 * cudaFree and cudaFreeHost do not wait for the streams: a copy or kernel
 * still queued on freed memory is caught when it runs (an abort, not silent
 * corruption). Freed blocks are poisoned and kept for a while (up to 64 MiB)
 * so that their addresses are not handed out again while work may still
 * name them.
 */
#define _GNU_SOURCE
#include "fake_cudart.h"

#include <stdlib.h>
#include <string.h>

typedef struct fk_alloc {
    uint8_t *p;
    size_t n;
    int kind;   /* enum fk_mem */
    int device; /* the device of the context current when it was made */
    int freed;  /* kept poisoned (quarantine) */
} fk_alloc;

/* Under fk_mu. */
static fk_alloc *tab;
static size_t ntab, captab;
static size_t quarantined;
#define QUARANTINE ((size_t)64 << 20)

static fk_alloc *lookup(const void *p)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < ntab; i++)
        if (b >= tab[i].p && b < tab[i].p + tab[i].n)
            return &tab[i];
    return NULL;
}

int fk_mem_kind(const void *p, size_t n, int *dev)
{
    const fk_alloc *a = lookup(p);
    *dev = a ? a->device : -1;
    if (!a)
        return FK_PAGEABLE;
    if (a->freed)
        fk_die("use of freed %s memory %p", a->kind == FK_DEVICE ? "device" : "host", p);
    if ((const uint8_t *)p + n > a->p + a->n)
        return -1;
    return a->kind;
}

int fk_mem_live(const void *p, size_t n)
{
    const fk_alloc *a = lookup(p);
    return a && !a->freed && (const uint8_t *)p + n <= a->p + a->n;
}

/* Frees the oldest quarantined blocks beyond the quarantine's size. */
static void evict(void)
{
    size_t w = 0;
    for (size_t i = 0; i < ntab; i++) {
        if (tab[i].freed && quarantined > QUARANTINE) {
            quarantined -= tab[i].n;
            free(tab[i].p);
            continue;
        }
        tab[w++] = tab[i];
    }
    ntab = w;
}

static cudaError_t do_alloc(const char *api, void **out, size_t n, int kind)
{
    *out = NULL;
    cudaError_t e = fk_gate(api, 1);
    if (e)
        return fk_err(e);
    size_t size = n ? n : 1;
    int d = fk_cur_device();
    const char *fail = kind == FK_PINNED ? getenv("FAKE_CUDART_HOSTALLOC_FAIL_SIZE") : NULL;
    if (fail && strtoull(fail, NULL, 10) == n)
        return fk_err(cudaErrorMemoryAllocation);
    pthread_mutex_lock(&fk_mu);
    int over = kind == FK_DEVICE   ? fk.dev_limit && fk.dev_used[d] + size > fk.dev_limit
               : kind == FK_PINNED ? fk.pin_limit && fk.pin_used + size > fk.pin_limit
                                   : 0;
    pthread_mutex_unlock(&fk_mu);
    if (over)
        return fk_err(cudaErrorMemoryAllocation);
    /* Time: cudaMalloc ~20 us; pinning ~8 GB/s, at least 50 us. */
    fk_nap_us(kind == FK_PINNED ? 50 + (long)(size >> 13) : 20);
    void *m = NULL;
    if (posix_memalign(&m, kind == FK_PINNED ? 4096 : 256, size) != 0)
        return fk_err(cudaErrorMemoryAllocation);
    memset(m, 0xA5, size); /* not zeroed, as device memory is not */
    pthread_mutex_lock(&fk_mu);
    if (ntab == captab) {
        captab = captab ? 2 * captab : 256;
        tab = realloc(tab, captab * sizeof *tab);
        if (!tab)
            fk_die("out of memory");
    }
    tab[ntab++] = (fk_alloc){m, size, kind, d, 0};
    if (kind == FK_DEVICE)
        fk.dev_used[d] += size;
    else if (kind == FK_PINNED)
        fk.pin_used += size;
    fk.allocs++;
    fk_tls.allocs++;
    pthread_mutex_unlock(&fk_mu);
    *out = m;
    return cudaSuccess;
}

static cudaError_t do_free(const char *api, void *p, int kind)
{
    cudaError_t e = fk_gate(api, 1);
    if (e)
        return fk_err(e);
    if (!p)
        return cudaSuccess;
    fk_nap_us(10);
    pthread_mutex_lock(&fk_mu);
    fk_alloc *a = lookup(p);
    if (!a || a->p != p) {
        pthread_mutex_unlock(&fk_mu);
        return fk_err(cudaErrorInvalidValue);
    }
    if (a->freed)
        fk_die("%s(%p): freed twice", api, p);
    if ((kind == FK_DEVICE) != (a->kind == FK_DEVICE || a->kind == FK_MANAGED))
        fk_die("%s(%p): it is %s memory", api, p, a->kind == FK_DEVICE ? "device" : "host");
    /* No wait for the streams: work still queued on it is caught when it runs. */
    a->freed = 1;
    memset(a->p, 0xDD, a->n);
    if (a->kind == FK_DEVICE)
        fk.dev_used[a->device] -= a->n;
    else if (a->kind == FK_PINNED)
        fk.pin_used -= a->n;
    quarantined += a->n;
    fk.frees++;
    evict();
    pthread_cond_broadcast(&fk_cv);
    pthread_mutex_unlock(&fk_mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMalloc(void **p, size_t n)
{
    return do_alloc("cudaMalloc", p, n, FK_DEVICE);
}

EXPORT cudaError_t cudaFree(void *p)
{
    return do_free("cudaFree", p, FK_DEVICE);
}

EXPORT cudaError_t cudaMallocHost(void **p, size_t n)
{
    return do_alloc("cudaMallocHost", p, n, FK_PINNED);
}

EXPORT cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags)
{
    (void)flags;
    return do_alloc("cudaHostAlloc", p, n, FK_PINNED);
}

EXPORT cudaError_t cudaFreeHost(void *p)
{
    return do_free("cudaFreeHost", p, FK_PINNED);
}

EXPORT cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int flags)
{
    (void)flags;
    return do_alloc("cudaMallocManaged", p, n, FK_MANAGED);
}

EXPORT cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    memset(a, 0, sizeof *a);
    cudaError_t e = fk_gate("cudaPointerGetAttributes", 0);
    if (e)
        return fk_err(e);
    pthread_mutex_lock(&fk_mu);
    const fk_alloc *x = lookup(p);
    if (x && x->freed)
        x = NULL;
    a->type = !x                      ? cudaMemoryTypeUnregistered
              : x->kind == FK_DEVICE  ? cudaMemoryTypeDevice
              : x->kind == FK_MANAGED ? cudaMemoryTypeManaged
                                      : cudaMemoryTypeHost;
    a->device = x ? x->device : -2;
    a->devicePointer = x && x->kind != FK_PINNED ? (void *)p : NULL;
    a->hostPointer = x && x->kind != FK_DEVICE ? (void *)p : NULL;
    pthread_mutex_unlock(&fk_mu);
    return cudaSuccess;
}
