/*
 * gpu_cuda.c - the copier's backend over the CUDA runtime (rf_gpu_ops, see
 * copier.h), plain host memory for rings without a copier, and the device
 * count.
 *
 * Every call goes through the runtime's table (cudart.c: loaded at run time,
 * not linked). A failed call also sets the calling thread's "last error",
 * which the next framework on this thread (torch checks cudaGetLastError
 * after its kernel launches) would take for its own: it is cleared here, the
 * code is returned.
 *
 * Contexts (enter/leave): with the driver's context calls (cudart.h; any
 * runtime of CUDA 12 or later) the device's primary context is retained once
 * (open) and made current around each call with cuCtxSetCurrent, the
 * thread's own context (or none) put back after; cudaSetDevice, which since
 * CUDA 12 creates a device's context, is never used to put a device back.
 * Without them (a runtime before 12, whose cudaSetDevice creates nothing) the
 * thread's device is switched and restored with cudaSetDevice.
 */
#define _GNU_SOURCE
#include "copier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudart.h"

int rf__cuda_devices(char *note, size_t notecap)
{
#ifdef RF_HAVE_CUDA
    const rf_cudart *rt = rf__cudart(note, notecap); /* the note says why not */
    if (!rt)
        return 0;
    int n = 0;
    cudaError_t e = rt->GetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(note, notecap, "%s; no CUDA device: cudaGetDeviceCount: %s (%s)", rt->desc,
                 rt->GetErrorString(e), rt->GetErrorName(e));
        (void)rt->GetLastError(); /* clear the error state of this thread */
        return 0;
    }
    if (n == 0)
        snprintf(note, notecap, "%s; no CUDA device: cudaGetDeviceCount found none", rt->desc);
    return n;
#else
    snprintf(note, notecap, "no CUDA: built without the CUDA toolkit");
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
        const rf_cudart *rt = rf__cudart(NULL, 0); /* loaded: there is a device */
        void *p = NULL;
        cudaError_t e = rt->HostAlloc(&p, bytes, cudaHostAllocPortable);
        if (e == cudaSuccess) {
            *pinned = 1;
            return p;
        }
        snprintf(note, notecap, "cudaHostAlloc(%zu bytes) failed: %s; using pageable memory", bytes,
                 rt->GetErrorString(e));
        (void)rt->GetLastError();
    } else if (pin) {
        size_t n = strlen(note);
        snprintf(note + n, notecap - n, "; using pageable memory");
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
        rf__cudart(NULL, 0)->FreeHost(p); /* pinned: the runtime was loaded */
        return;
    }
#endif
    (void)pinned;
    free(p);
}

#ifdef RF_HAVE_CUDA
/* The backend's ctx is the runtime's table (rf_cudart, from rf__cudart). */
#define RT ((const rf_cudart *)ctx)

static int cu(const rf_cudart *rt, cudaError_t e)
{
    if (e != cudaSuccess)
        (void)rt->GetLastError();
    return e == cudaErrorMemoryAllocation ? RF__GPU_OOM : (int)e;
}

static int drv(CUresult r)
{
    return r == CUDA_SUCCESS ? 0 : RF__GPU_DRIVER + (int)r;
}

static int cu_open(void *ctx, int device, void **dctx)
{
    *dctx = NULL;
    if (!RT->CtxSetCurrent)
        return 0;
    CUdevice dev;
    CUcontext c = NULL;
    int e = drv(RT->DeviceGet(&dev, device));
    if (e == 0)
        e = drv(RT->PrimaryCtxRetain(&c, dev));
    *dctx = c;
    return e;
}

static void cu_close(void *ctx, int device, void *dctx)
{
    CUdevice dev;
    if (dctx && RT->DeviceGet(&dev, device) == CUDA_SUCCESS)
        (void)RT->PrimaryCtxRelease(dev);
}

static int cu_enter(void *ctx, int device, void *dctx, rf_gpu_saved *sv)
{
    sv->changed = 0;
    sv->ctx = NULL;
    sv->device = -1;
    if (RT->CtxSetCurrent) {
        CUcontext cur = NULL;
        int e = drv(RT->CtxGetCurrent(&cur));
        if (e != 0 || cur == (CUcontext)dctx)
            return e;
        sv->ctx = cur;
        e = drv(RT->CtxSetCurrent((CUcontext)dctx));
        sv->changed = e == 0;
        return e;
    }
    int cur = -1;
    int e = cu(RT, RT->GetDevice(&cur));
    if (e != 0 || cur == device)
        return e;
    sv->device = cur;
    e = cu(RT, RT->SetDevice(device));
    sv->changed = e == 0;
    return e;
}

static void cu_leave(void *ctx, const rf_gpu_saved *sv)
{
    if (!sv->changed)
        return;
    if (RT->CtxSetCurrent)
        (void)RT->CtxSetCurrent((CUcontext)sv->ctx); /* NULL: the thread had none */
    else if (RT->SetDevice(sv->device) != cudaSuccess)
        (void)RT->GetLastError();
}

static int cu_stream_create(void *ctx, void **s)
{
    cudaStream_t st = NULL;
    int e = cu(RT, RT->StreamCreateWithFlags(&st, cudaStreamNonBlocking));
    if (e == 0)
        *s = st;
    return e;
}

static int cu_stream_destroy(void *ctx, void *s)
{
    return cu(RT, RT->StreamDestroy((cudaStream_t)s));
}

static int cu_stream_sync(void *ctx, void *s)
{
    return cu(RT, RT->StreamSynchronize((cudaStream_t)s));
}

static int cu_event_create(void *ctx, void **ev)
{
    cudaEvent_t e = NULL;
    int rc = cu(RT, RT->EventCreateWithFlags(&e, cudaEventDisableTiming));
    if (rc == 0)
        *ev = e;
    return rc;
}

static int cu_event_destroy(void *ctx, void *ev)
{
    return cu(RT, RT->EventDestroy((cudaEvent_t)ev));
}

static int cu_event_record(void *ctx, void *ev, void *s)
{
    return cu(RT, RT->EventRecord((cudaEvent_t)ev, (cudaStream_t)s));
}

static int cu_event_query(void *ctx, void *ev)
{
    cudaError_t e = RT->EventQuery((cudaEvent_t)ev);
    if (e == cudaErrorNotReady) {
        (void)RT->GetLastError();
        return RF__GPU_NOT_READY;
    }
    return cu(RT, e);
}

static int cu_stream_wait(void *ctx, void *s, void *ev)
{
    return cu(RT, RT->StreamWaitEvent((cudaStream_t)s, (cudaEvent_t)ev, 0));
}

/* cudaMemcpyDefault: the kind follows from the pointers (unified addressing),
 * so a caller's page-locked or managed destination is as good as device memory. */
static int cu_memcpy_async(void *ctx, void *dst, const void *src, size_t n, void *s)
{
    return cu(RT, RT->MemcpyAsync(dst, src, n, cudaMemcpyDefault, (cudaStream_t)s));
}

static int cu_dev_alloc(void *ctx, void **p, size_t n)
{
    return cu(RT, RT->Malloc(p, n));
}

static int cu_dev_free(void *ctx, void *p)
{
    return cu(RT, RT->Free(p));
}

static int cu_host_alloc(void *ctx, void **p, size_t n)
{
    return cu(RT, RT->HostAlloc(p, n, cudaHostAllocPortable));
}

static int cu_host_free(void *ctx, void *p)
{
    return cu(RT, RT->FreeHost(p));
}

static const char *cu_error_string(void *ctx, int code)
{
    static __thread char buf[64];
    if (code == RF__GPU_OOM)
        return RT->GetErrorString(cudaErrorMemoryAllocation);
    if (code >= RF__GPU_DRIVER) {
        snprintf(buf, sizeof buf, "CUDA driver error %d", code - RF__GPU_DRIVER);
        return buf;
    }
    return RT->GetErrorString((cudaError_t)code);
}
#undef RT

static const rf_gpu_ops cuda_ops = {
    .name = "cuda",
    .open = cu_open,
    .close = cu_close,
    .enter = cu_enter,
    .leave = cu_leave,
    .stream_create = cu_stream_create,
    .stream_destroy = cu_stream_destroy,
    .stream_sync = cu_stream_sync,
    .event_create = cu_event_create,
    .event_destroy = cu_event_destroy,
    .event_record = cu_event_record,
    .event_query = cu_event_query,
    .stream_wait = cu_stream_wait,
    .memcpy_async = cu_memcpy_async,
    .dev_alloc = cu_dev_alloc,
    .dev_free = cu_dev_free,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .error_string = cu_error_string,
};

const rf_gpu_ops *rf__cuda_ops(void)
{
    return &cuda_ops;
}
#else
const rf_gpu_ops *rf__cuda_ops(void)
{
    return NULL;
}
#endif
