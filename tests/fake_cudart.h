/*
 * fake_cudart.h - what the files of the stand-in CUDA runtime share
 * (tests/fake_cudart.c: the gate every call passes, devices and contexts, the
 * driver's context calls, the test knobs; fake_cudart_mem.c: memory;
 * fake_cudart_stream.c: streams, events, copies and the device thread).
 *
 * Lock rules: fk_mu protects every stream, event and allocation, the device
 * thread's state and the counters that are not per thread; fk_cv is
 * broadcast whenever an op is queued or has run, a knob changed, or memory
 * was freed. Per-thread state (the current context, the runtime's current
 * device, the last error, the thread's counters) is thread-local. A forked
 * child never takes fk_mu (the device thread is not there and may have held
 * it): fk_gate refuses every call there first.
 */
#ifndef FAKE_CUDART_H
#define FAKE_CUDART_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#define EXPORT __attribute__((visibility("default")))
#define FK_MAXDEV 16

/* The runtime major this copy pretends to be (CMake builds a second one). */
#ifndef FAKE_CUDART_MAJOR
#define FAKE_CUDART_MAJOR (CUDART_VERSION / 1000)
#endif
#define FK_VERSION (FAKE_CUDART_MAJOR * 1000 + CUDART_VERSION % 1000)

/* A device's primary context: the only kind the runtime makes. */
typedef struct fk_ctx {
    unsigned magic;
    int device;
} fk_ctx;

/* Per-thread state. */
typedef struct fk_thread {
    fk_ctx *cur;        /* the thread's current context (NULL: none) */
    int rt_device;      /* the runtime's device for this thread (cudaSetDevice) */
    cudaError_t last;   /* cudaGetLastError */
    long allocs, syncs; /* this thread's allocations, host waits on the device */
} fk_thread;

extern __thread fk_thread fk_tls;
extern pthread_mutex_t fk_mu;
extern pthread_cond_t fk_cv;

/* Global counters and knobs (under fk_mu unless said). */
typedef struct fk_state {
    pid_t pid; /* the process that loaded the runtime */
    int ndev;
    int active[FK_MAXDEV];   /* primary context exists */
    long created[FK_MAXDEV]; /* primary contexts created (each activation) */
    long retains[FK_MAXDEV]; /* cuDevicePrimaryCtxRetain minus releases */
    long allocs, frees, syncs, host_waits, pageable, h2d, d2h, d2d;
    int paused;                  /* the device thread runs nothing */
    cudaError_t sticky;          /* a failed context: every call returns it */
    size_t dev_limit, pin_limit; /* bytes (0: unlimited) */
    size_t dev_used[FK_MAXDEV], pin_used;
    long after_fork; /* calls in a forked child (the child's copy) */
} fk_state;
extern fk_state fk;

/* Every API call begins here: a forked child, a driver too old for this
 * runtime, a failed context, or a failure asked for by a test (fake_cudart_fail)
 * is returned at once; with needs_ctx, the thread's current context is made
 * (the current device's primary context, created when it does not exist yet)
 * as the real runtime does on first use. Returns cudaSuccess or the error. */
cudaError_t fk_gate(const char *api, int needs_ctx);
/* Records e as the thread's last error (cudaGetLastError); returns e. */
cudaError_t fk_err(cudaError_t e);
/* The device of the calling thread's current context (fk_gate made one). */
int fk_cur_device(void);
/* A test's hook for api ("sync": every host wait), run outside fk_mu. */
void fk_run_hook(const char *api);
void fk_nap_us(long us);
void fk_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* With fk_mu held: a host wait on the device (counted; the "sync" hook is the
 * caller's to run before taking fk_mu). */
void fk_count_sync(void);

/* ---- memory (fake_cudart_mem.c) ---------------------------------------- */

enum fk_mem { FK_PAGEABLE = 0, FK_DEVICE = 1, FK_PINNED = 2, FK_MANAGED = 3 };

/* The kind of memory p..p+n lies in, with fk_mu held: FK_PAGEABLE when no
 * live allocation holds it. *dev: the owning device. Returns -1 when p lies
 * in a live allocation but p+n runs past its end. */
int fk_mem_kind(const void *p, size_t n, int *dev);
/* With fk_mu held: 1 when p..p+n is still a live allocation (an op checks
 * its registered memory again when it runs). */
int fk_mem_live(const void *p, size_t n);

/* ---- streams (fake_cudart_stream.c) ------------------------------------- */

/* Starts the device thread and the legacy streams (once, from fk_gate). */
void fk_streams_init(void);
/* With fk_mu held: every queued op is dropped, as a failed context's work
 * never runs (the streams count it as run, so that waits end). */
void fk_streams_discard(void);

#endif
