/*
 * cudart.h - the CUDA runtime (libcudart), loaded at run time.
 *
 * The library is compiled against the toolkit's headers but does not link
 * libcudart: built where the toolkit exists, it must still load, and run on
 * the CPU, where no runtime is installed. rf__cudart() dlopen()s a runtime on
 * first need and resolves the functions the copier calls into one table
 * (rf_cudart); cudart.c says where it looks and why a runtime of another
 * major version can serve.
 *
 * Without RF_HAVE_CUDA only rf__cudart() exists, and it always says why not.
 */
#ifndef RF_CUDART_H
#define RF_CUDART_H

#include <stddef.h>

typedef struct rf_cudart rf_cudart;

#ifdef RF_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

/* The symbol a runtime function `f` has for this build, as a string. The
 * header #defines some names (under CUDA_API_PER_THREAD_DEFAULT_STREAM,
 * cudaMemcpyAsync is cudaMemcpyAsync_ptsz): f is macro-expanded before it is
 * stringified, so this is the name the header's declaration binds to. */
#define RF_CUDART_STR_(x) #x
#define RF_CUDART_SYM(f) RF_CUDART_STR_(f)

/* Every function of the table: X(field, the header's name). Types come from
 * the header's declarations (__typeof__), never restated here. */
#define RF_CUDART_FUNCS(X)                                                                         \
    X(RuntimeGetVersion, cudaRuntimeGetVersion)                                                    \
    X(GetDeviceCount, cudaGetDeviceCount)                                                          \
    X(GetDevice, cudaGetDevice)                                                                    \
    X(SetDevice, cudaSetDevice)                                                                    \
    X(GetLastError, cudaGetLastError)                                                              \
    X(GetErrorString, cudaGetErrorString)                                                          \
    X(GetErrorName, cudaGetErrorName)                                                              \
    X(StreamCreateWithFlags, cudaStreamCreateWithFlags)                                            \
    X(StreamDestroy, cudaStreamDestroy)                                                            \
    X(StreamSynchronize, cudaStreamSynchronize)                                                    \
    X(StreamWaitEvent, cudaStreamWaitEvent)                                                        \
    X(EventCreateWithFlags, cudaEventCreateWithFlags)                                              \
    X(EventDestroy, cudaEventDestroy)                                                              \
    X(EventRecord, cudaEventRecord)                                                                \
    X(EventQuery, cudaEventQuery)                                                                  \
    X(EventSynchronize, cudaEventSynchronize)                                                      \
    X(MemcpyAsync, cudaMemcpyAsync)                                                                \
    X(Malloc, cudaMalloc)                                                                          \
    X(Free, cudaFree)                                                                              \
    X(HostAlloc, cudaHostAlloc)                                                                    \
    X(FreeHost, cudaFreeHost)

/* The driver's context calls, reached through the runtime's
 * cudaGetDriverEntryPoint[ByVersion] (so that they are the driver the runtime
 * uses): X(field, the driver's name). */
#define RF_CUDART_DRIVER_FUNCS(X)                                                                  \
    X(CtxGetCurrent, cuCtxGetCurrent)                                                              \
    X(CtxSetCurrent, cuCtxSetCurrent)                                                              \
    X(DeviceGet, cuDeviceGet)                                                                      \
    X(PrimaryCtxRetain, cuDevicePrimaryCtxRetain)                                                  \
    X(PrimaryCtxRelease, cuDevicePrimaryCtxRelease)

struct rf_cudart {
#define RF_CUDART_FIELD(field, fn) __typeof__(fn) *field;
    RF_CUDART_FUNCS(RF_CUDART_FIELD)
    /* All set, or all NULL: a runtime before CUDA 12 (whose cudaSetDevice
     * makes no context, so the runtime's calls serve) or one whose driver
     * does not give them; `contexts` says which. */
    RF_CUDART_DRIVER_FUNCS(RF_CUDART_FIELD)
#undef RF_CUDART_FIELD
    const char *contexts; /* "driver" or "runtime": how the copier keeps a thread's context */
    void *handle;   /* from dlopen; dlsym() on it for functions not in the table (tests) */
    int version;    /* cudaRuntimeGetVersion: 1000 * major + 10 * minor */
    char path[512]; /* the file that was loaded */
    char desc[1024]; /* "cudart 13.0 from <path>[; passed over: ...]", for notes */
};
#endif

/* The CUDA runtime, loaded by the first call from any thread; every later
 * call returns the same table. NULL when none could be loaded (or the build
 * has no CUDA): then note, when not NULL, says what was tried and why each
 * attempt failed ("no CUDA runtime: tried libcudart.so.13 (not found), ...").
 * The runtime is never unloaded. Thread-safe. */
const rf_cudart *rf__cudart(char *note, size_t notecap);

#endif
