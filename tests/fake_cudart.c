/*
 * fake_cudart.c - a stand-in for the CUDA runtime (libcudart.so.<major>), as
 * strict as the real one where the library's correctness depends on it, so
 * that the CUDA path is tested on a machine without a GPU (CTest: the
 * test_cuda*_fake tests find it by its soname through LD_LIBRARY_PATH;
 * cuda_fake_env and cuda_fake_loaded through RINGFEED_CUDART or already
 * loaded; cuda_fake_driver with a second major version).
 *
 * What it models, as CUDA 12 and 13 document it:
 *   - devices: $FAKE_CUDART_DEVICES of them (1 to 16, default 1); per thread a
 *     current context and the runtime's current device (0 on a new thread);
 *   - primary contexts, one per device, created by cudaSetDevice (since CUDA
 *     12 it makes the device's context at once) or by the first call that
 *     needs one on a thread with no current context (the current device's),
 *     and counted: a stray context on device 0 is ~0.5 GiB on a real GPU;
 *   - the driver's context calls the library reaches through
 *     cudaGetDriverEntryPoint[ByVersion] (cuCtxGetCurrent, cuCtxSetCurrent,
 *     cuDeviceGet, cuDevicePrimaryCtxRetain/Release/GetState);
 *   - streams, events and memory (fake_cudart_stream.c, fake_cudart_mem.c);
 *   - failures on demand: $FAKE_CUDART_INSUFFICIENT_DRIVER=<major>[,<major>]
 *     (this copy, if its major is listed, answers cudaErrorInsufficientDriver
 *     as with a driver older than it), sticky errors (a failed context:
 *     every call returns the error, nothing runs any more), the n-th call of
 *     a function failing once (fake_cudart_fail), memory limits; and always,
 *     in a forked child, cudaErrorInitializationError without touching the
 *     parent's state (the real runtime cannot be used across fork either).
 *
 * Test knobs and counters, exported beside the API (a test finds them with
 * dlsym on the runtime the library loaded; a real runtime has none, and the
 * test then skips what needs them):
 *   long long fake_cudart_get(const char *key, int device);
 *   void fake_cudart_set(const char *key, long long value);
 *   void fake_cudart_fail(const char *api, int nth, int error);
 *   void fake_cudart_hook(const char *api, void (*fn)(void *), void *arg);
 * (keys: see fake_cudart_get and fake_cudart_set below).
 *
 * It implements only the calls libringfeed, its tests and rf-copy-bench
 * make; a function missing here makes the library refuse this runtime (the
 * note names it). Not part of the library; never installed.
 */
#define _GNU_SOURCE
#include "fake_cudart.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CTX_MAGIC 0x43545854u

pthread_mutex_t fk_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t fk_cv = PTHREAD_COND_INITIALIZER;
__thread fk_thread fk_tls;
fk_state fk;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static fk_ctx prim[FK_MAXDEV];
static int insufficient; /* this major is listed in $FAKE_CUDART_INSUFFICIENT_DRIVER */

/* One failure asked for by a test, and the hooks (under fk_mu). */
static struct {
    char api[64];
    int left; /* calls to let pass before the failing one, -1: none */
    cudaError_t code;
} failing = {"", -1, cudaSuccess};
#define MAXHOOK 4
static struct {
    char api[64];
    void (*fn)(void *);
    void *arg;
} hooks[MAXHOOK];

void fk_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fake_cudart: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

void fk_nap_us(long us)
{
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

cudaError_t fk_err(cudaError_t e)
{
    if (e != cudaSuccess)
        fk_tls.last = e;
    return e;
}

static void init(void)
{
    fk.pid = getpid();
    const char *e = getenv("FAKE_CUDART_DEVICES");
    int n = e ? atoi(e) : 1;
    fk.ndev = n >= 1 && n <= FK_MAXDEV ? n : 1;
    for (int i = 0; i < FK_MAXDEV; i++)
        prim[i] = (fk_ctx){CTX_MAGIC, i};
    const char *ins = getenv("FAKE_CUDART_INSUFFICIENT_DRIVER");
    for (const char *p = ins; p && *p;) {
        char *end;
        long m = strtol(p, &end, 10);
        if (end == p)
            break;
        insufficient |= m == FAKE_CUDART_MAJOR;
        p = *end == ',' ? end + 1 : end;
    }
    const char *lim = getenv("FAKE_CUDART_DEVICE_MEMORY");
    if (lim)
        fk.dev_limit = strtoull(lim, NULL, 10);
    fk_streams_init();
}

/* The primary context of device d, made current on this thread (with fk_mu). */
static fk_ctx *activate(int d)
{
    if (!fk.active[d]) {
        fk.active[d] = 1;
        fk.created[d]++;
    }
    return &prim[d];
}

void fk_run_hook(const char *api)
{
    void (*fn)(void *) = NULL;
    void *arg = NULL;
    if (fk.pid && getpid() != fk.pid)
        return; /* a forked child: no lock, no hook */
    pthread_once(&once, init);
    pthread_mutex_lock(&fk_mu);
    for (int i = 0; i < MAXHOOK; i++)
        if (hooks[i].fn && strcmp(hooks[i].api, api) == 0) {
            fn = hooks[i].fn;
            arg = hooks[i].arg;
        }
    pthread_mutex_unlock(&fk_mu);
    if (fn)
        fn(arg);
}

void fk_count_sync(void)
{
    fk.syncs++;
    fk_tls.syncs++;
}

cudaError_t fk_gate(const char *api, int needs_ctx)
{
    /* A forked child: the parent's runtime state is not usable here, and its
     * device thread is not there (nor may fk_mu be taken). */
    if (fk.pid && getpid() != fk.pid) {
        fk.after_fork++;
        return cudaErrorInitializationError;
    }
    pthread_once(&once, init);
    if (insufficient)
        return cudaErrorInsufficientDriver;
    fk_run_hook(api);
    pthread_mutex_lock(&fk_mu);
    cudaError_t e = fk.sticky;
    if (e == cudaSuccess && failing.left >= 0 && strcmp(failing.api, api) == 0 &&
        failing.left-- == 0)
        e = failing.code;
    if (e == cudaSuccess && needs_ctx && !fk_tls.cur)
        fk_tls.cur = activate(fk_tls.rt_device);
    pthread_mutex_unlock(&fk_mu);
    return e;
}

int fk_cur_device(void)
{
    return fk_tls.cur ? fk_tls.cur->device : fk_tls.rt_device;
}

/* ---- version, devices, errors ------------------------------------------- */

EXPORT cudaError_t cudaRuntimeGetVersion(int *version)
{
    *version = FK_VERSION;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDriverGetVersion(int *version)
{
    pthread_once(&once, init);
    *version = insufficient ? FK_VERSION - 1000 : FK_VERSION;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 0;
    cudaError_t e = fk_gate("cudaGetDeviceCount", 0);
    if (e)
        return fk_err(e);
    *count = fk.ndev;
    return cudaSuccess;
}

/* Does not make a context: the device of the current one, else the
 * runtime's device for this thread. */
EXPORT cudaError_t cudaGetDevice(int *device)
{
    cudaError_t e = fk_gate("cudaGetDevice", 0);
    if (e)
        return fk_err(e);
    *device = fk_cur_device();
    return cudaSuccess;
}

/* As since CUDA 12: the device's primary context is made (if it was not)
 * and made current. */
EXPORT cudaError_t cudaSetDevice(int device)
{
    cudaError_t e = fk_gate("cudaSetDevice", 0);
    if (e)
        return fk_err(e);
    if (device < 0 || device >= fk.ndev)
        return fk_err(cudaErrorInvalidDevice);
    pthread_mutex_lock(&fk_mu);
    fk_tls.rt_device = device;
    fk_tls.cur = activate(device);
    pthread_mutex_unlock(&fk_mu);
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    cudaError_t e = fk_gate("cudaGetDeviceProperties", 0);
    if (e)
        return fk_err(e);
    if (device < 0 || device >= fk.ndev)
        return fk_err(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "fake_cudart device %d (a stand-in, not a GPU)", device);
    p->major = 9;
    p->unifiedAddressing = 1;
    return cudaSuccess;
}

/* A failed context's error stays (sticky), as CUDA's does. */
EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = fk_tls.last;
    if (fk.pid && getpid() != fk.pid) {
        fk_tls.last = cudaSuccess;
        return e;
    }
    pthread_mutex_lock(&fk_mu);
    if (fk.sticky == cudaSuccess)
        fk_tls.last = cudaSuccess;
    pthread_mutex_unlock(&fk_mu);
    return e;
}

EXPORT cudaError_t cudaPeekAtLastError(void)
{
    return fk_tls.last;
}

static const struct {
    cudaError_t e;
    const char *name, *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
};

EXPORT const char *cudaGetErrorName(cudaError_t e)
{
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
        if (errors[i].e == e)
            return errors[i].name;
    return "cudaErrorUnknown";
}

EXPORT const char *cudaGetErrorString(cudaError_t e)
{
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
        if (errors[i].e == e)
            return errors[i].text;
    return "unknown error (fake_cudart)";
}

/* ---- the driver's context calls ------------------------------------------ */

static CUresult drv_gate(void)
{
    if (fk.pid && getpid() != fk.pid) {
        fk.after_fork++;
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    pthread_once(&once, init);
    return insufficient ? CUDA_ERROR_NOT_INITIALIZED : CUDA_SUCCESS;
}

static CUresult drv_ctx_get_current(CUcontext *pctx)
{
    CUresult r = drv_gate();
    if (r == CUDA_SUCCESS)
        *pctx = (CUcontext)fk_tls.cur;
    return r;
}

static CUresult drv_ctx_set_current(CUcontext ctx)
{
    CUresult r = drv_gate();
    if (r != CUDA_SUCCESS)
        return r;
    fk_ctx *c = (fk_ctx *)ctx;
    pthread_mutex_lock(&fk_mu);
    if (c && (c < prim || c >= prim + fk.ndev || !fk.active[c->device]))
        r = CUDA_ERROR_INVALID_CONTEXT;
    else
        fk_tls.cur = c; /* NULL: no current context */
    pthread_mutex_unlock(&fk_mu);
    return r;
}

/* drv_gate, and device d must exist. */
static CUresult drv_gate_device(int d)
{
    CUresult r = drv_gate();
    if (r == CUDA_SUCCESS && (d < 0 || d >= fk.ndev))
        r = CUDA_ERROR_INVALID_DEVICE;
    return r;
}

static CUresult drv_device_get(CUdevice *dev, int ordinal)
{
    CUresult r = drv_gate_device(ordinal);
    if (r == CUDA_SUCCESS)
        *dev = ordinal;
    return r;
}

static CUresult drv_primary_retain(CUcontext *pctx, CUdevice dev)
{
    CUresult r = drv_gate_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fk_mu);
    *pctx = (CUcontext)activate(dev);
    fk.retains[dev]++;
    pthread_mutex_unlock(&fk_mu);
    return CUDA_SUCCESS;
}

/* The runtime keeps its own reference: the context stays. */
static CUresult drv_primary_release(CUdevice dev)
{
    CUresult r = drv_gate_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fk_mu);
    if (fk.retains[dev] <= 0)
        fk_die("cuDevicePrimaryCtxRelease(%d) without a retain", dev);
    fk.retains[dev]--;
    pthread_mutex_unlock(&fk_mu);
    return CUDA_SUCCESS;
}

static CUresult drv_primary_state(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult r = drv_gate_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fk_mu);
    *flags = 0;
    *active = fk.active[dev];
    pthread_mutex_unlock(&fk_mu);
    return CUDA_SUCCESS;
}

static const struct {
    const char *name;
    void *fn;
} driver[] = {
    {"cuCtxGetCurrent", (void *)drv_ctx_get_current},
    {"cuCtxSetCurrent", (void *)drv_ctx_set_current},
    {"cuDeviceGet", (void *)drv_device_get},
    {"cuDevicePrimaryCtxRetain", (void *)drv_primary_retain},
    {"cuDevicePrimaryCtxRelease", (void *)drv_primary_release},
    {"cuDevicePrimaryCtxGetState", (void *)drv_primary_state},
};

static cudaError_t entry_point(const char *symbol, void **fn,
                               enum cudaDriverEntryPointQueryResult *status)
{
    cudaError_t e = fk_gate("cudaGetDriverEntryPoint", 0);
    *fn = NULL;
    if (e)
        return fk_err(e);
    for (size_t i = 0; i < sizeof driver / sizeof *driver; i++)
        if (strcmp(driver[i].name, symbol) == 0)
            *fn = driver[i].fn;
    if (status)
        *status = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                           enum cudaDriverEntryPointQueryResult *status)
{
    (void)flags;
    return entry_point(symbol, fn, status);
}

EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
                                                    unsigned int version, unsigned long long flags,
                                                    enum cudaDriverEntryPointQueryResult *status)
{
    (void)flags;
    if (version > FK_VERSION) { /* newer than the driver: as CUDA says */
        *fn = NULL;
        return fk_err(cudaErrorInvalidValue);
    }
    return entry_point(symbol, fn, status);
}

/* ---- test knobs and counters ---------------------------------------------- */

/* Counters: "contexts" (primary contexts created on `device`),
 * "context_active", "retains", "current_device" (this thread's current
 * context's device, -1: none), "allocs", "thread_allocs" (this thread's),
 * "frees", "syncs" and "thread_syncs" (host waits on the device: stream,
 * event and device synchronisations, pageable copies), "pageable" (copies
 * staged from pageable memory), "h2d", "d2h", "d2d" (copies enqueued),
 * "dev_used" (bytes of `device`), "pin_used", "after_fork". -1: unknown key. */
EXPORT long long fake_cudart_get(const char *key, int device)
{
    if (strcmp(key, "after_fork") == 0)
        return fk.after_fork;
    pthread_once(&once, init);
    int d = device >= 0 && device < FK_MAXDEV ? device : 0;
    long long v = -1;
    pthread_mutex_lock(&fk_mu);
#define K(name, expr) else if (strcmp(key, name) == 0) v = (long long)(expr);
    if (0)
        ;
    K("contexts", fk.created[d])
    K("context_active", fk.active[d])
    K("retains", fk.retains[d])
    K("current_device", fk_tls.cur ? fk_tls.cur->device : -1)
    K("allocs", fk.allocs)
    K("thread_allocs", fk_tls.allocs)
    K("frees", fk.frees)
    K("syncs", fk.syncs)
    K("thread_syncs", fk_tls.syncs)
    K("host_waits", fk.host_waits)
    K("pageable", fk.pageable)
    K("h2d", fk.h2d)
    K("d2h", fk.d2h)
    K("d2d", fk.d2d)
    K("dev_used", fk.dev_used[d])
    K("pin_used", fk.pin_used)
#undef K
    pthread_mutex_unlock(&fk_mu);
    return v;
}

/* Knobs: "pause" (1: the device thread runs nothing, as a stream that never
 * ends; 0: again), "sticky" (a cudaError_t: the context fails, every later
 * call returns it; 0 clears it, for the next test), "device_memory" and
 * "pinned_memory" (bytes each device / all page-locked memory may hold; 0:
 * unlimited). */
EXPORT void fake_cudart_set(const char *key, long long value)
{
    pthread_once(&once, init);
    pthread_mutex_lock(&fk_mu);
    if (strcmp(key, "pause") == 0)
        fk.paused = value != 0;
    else if (strcmp(key, "sticky") == 0 && value)
        fk.sticky = (cudaError_t)value;
    else if (strcmp(key, "sticky") == 0)
        fk.sticky = cudaSuccess, fk_streams_discard(); /* the failed context's work is gone */
    else if (strcmp(key, "device_memory") == 0)
        fk.dev_limit = (size_t)value;
    else if (strcmp(key, "pinned_memory") == 0)
        fk.pin_limit = (size_t)value;
    else
        fk_die("fake_cudart_set: unknown key %s", key);
    if (strcmp(key, "sticky") == 0 && value == 0)
        fk_tls.last = cudaSuccess;
    pthread_cond_broadcast(&fk_cv);
    pthread_mutex_unlock(&fk_mu);
}

/* The nth next call (0: the next one) of `api` fails once with `error`. */
EXPORT void fake_cudart_fail(const char *api, int nth, int error)
{
    pthread_once(&once, init);
    pthread_mutex_lock(&fk_mu);
    snprintf(failing.api, sizeof failing.api, "%s", api);
    failing.left = nth;
    failing.code = (cudaError_t)error;
    pthread_mutex_unlock(&fk_mu);
}

/* fn(arg) runs at the start of every call of `api` (the thread that makes
 * it, no lock held), or at every host wait for api "sync"; fn NULL removes it. */
EXPORT void fake_cudart_hook(const char *api, void (*fn)(void *), void *arg)
{
    pthread_once(&once, init);
    pthread_mutex_lock(&fk_mu);
    int free_at = -1;
    for (int i = 0; i < MAXHOOK; i++) {
        if (strcmp(hooks[i].api, api) == 0)
            hooks[i].fn = NULL;
        if (!hooks[i].fn && free_at < 0)
            free_at = i;
    }
    if (fn) {
        if (free_at < 0)
            fk_die("fake_cudart_hook: too many hooks");
        snprintf(hooks[free_at].api, sizeof hooks[free_at].api, "%s", api);
        hooks[free_at].fn = fn;
        hooks[free_at].arg = arg;
    }
    pthread_mutex_unlock(&fk_mu);
}
