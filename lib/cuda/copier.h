/*
 * copier.h - host memory for the ring, and the CUDA copier.
 *
 * This is the seam between the CPU pipeline and CUDA. Without CUDA (or
 * without a device), host memory is plain page-aligned memory, no copier
 * exists and the loader runs on the CPU alone.
 *
 * The copier talks to CUDA through a small table of functions (rf_gpu_ops):
 * the CUDA runtime, loaded at run time by cudart.c (no libcudart is linked;
 * gpu_cuda.c wraps it), or a fake backend in tests/test_copier*.c that
 * records every call, so that the ordering rules below are tested without a
 * device.
 *
 * Per ring slot the copier holds, from the moment the slot is made (ring
 * start, or growth on the dispatcher: rf__copier_slot_alloc), never later:
 * the slot's host block (page-locked when it can be, the batch's images
 * then a staging area for its labels, so that both copies are from
 * page-locked memory), a device buffer of the same shape (none if the device
 * is out of memory: that slot's batches then go straight from the host block
 * into the caller's memory, rf_batch_copy_to), and three events. So the
 * training loop allocates nothing.
 *
 * Ordering rules (one host slot i of the ring, one device buffer per slot):
 *   - every copy out of host slot i is enqueued on the copier's own
 *     non-blocking copy stream and followed by ev_copy[i]; the consumer's
 *     stream waits on ev_copy[i] (cudaStreamWaitEvent): no host sync;
 *   - the ring reuses host slot i only after ev_copy[i] completed
 *     (ring.h, copy_pending; polled with rf__copier_slot_done);
 *   - device buffer i is overwritten only after the copy stream waited on
 *     ev_release[i], recorded on the consumer's stream at rf_batch_release;
 *   - rf_batch_copy_to into caller memory first makes the copy stream wait for
 *     the caller's stream (ev_order): memory from a stream-ordered allocator
 *     (torch's) is free to write only for work ordered after the call;
 *   - every copy is cudaMemcpyDefault: the caller's memory may be device,
 *     page-locked host or managed memory.
 *
 * Contexts: every call that touches CUDA makes the loader's device's context
 * current on the calling thread for its duration and puts back the thread's
 * own (which may be none) afterwards, through the driver's context calls
 * (cudart.h): a consumer thread that never chose a device gets no context on
 * device 0. The dispatcher, the loader's own thread, keeps the device's
 * context (rf__copier_bind_thread).
 */
#ifndef RF_COPIER_H
#define RF_COPIER_H

#include <stddef.h>
#include <stdint.h>

/* Allocates bytes of host memory. With pin and a usable CUDA device it is
 * page-locked (*pinned = 1) in the calling thread's current context;
 * otherwise pageable, with the reason written to note when pinning was asked
 * for. NULL when out of memory. A loader's ring uses rf__copier_slot_alloc. */
void *rf__host_alloc(size_t bytes, int pin, int *pinned, char *note, size_t notecap);
void rf__host_free(void *p, int pinned);

/* Number of usable CUDA devices (0 without CUDA, runtime, driver or device),
 * and a note saying why when 0: "no CUDA runtime: tried ..." (cudart.h) or
 * "cudart 13.0 from <path>; no CUDA device: cudaGetDeviceCount: ...". Loads
 * the runtime on the first call. */
int rf__cuda_devices(char *note, size_t notecap);

/* ---- the GPU backend ------------------------------------------------------ */

/* Results of the rf_gpu_ops functions: 0, RF__GPU_NOT_READY (event_query
 * only), RF__GPU_OOM (an allocation found no memory), or another value: the
 * backend's error code (cudaError_t; a driver call's CUresult + RF__GPU_DRIVER). */
#define RF__GPU_NOT_READY (-1)
#define RF__GPU_OOM (-2)
#define RF__GPU_DRIVER 100000

/* What a thread had current before rf_gpu_ops.enter: put back by leave. */
typedef struct rf_gpu_saved {
    void *ctx;   /* its context (the driver's), NULL: none */
    int device;  /* its device (the runtime's, without the driver's calls) */
    int changed; /* enter changed it */
} rf_gpu_saved;

typedef struct rf_gpu_ops {
    const char *name;
    /* The device's context, held from open to close (*dctx: for enter). */
    int (*open)(void *ctx, int device, void **dctx);
    void (*close)(void *ctx, int device, void *dctx);
    /* Makes the device's context current on the calling thread (nothing when
     * it is already); *saved: what leave puts back. */
    int (*enter)(void *ctx, int device, void *dctx, rf_gpu_saved *saved);
    void (*leave)(void *ctx, const rf_gpu_saved *saved);
    int (*stream_create)(void *ctx, void **stream); /* non-blocking (no legacy-stream sync) */
    int (*stream_destroy)(void *ctx, void *stream);
    int (*stream_sync)(void *ctx, void *stream);
    int (*event_create)(void *ctx, void **event); /* timing disabled */
    int (*event_destroy)(void *ctx, void *event);
    int (*event_record)(void *ctx, void *event, void *stream);
    int (*event_query)(void *ctx, void *event); /* 0: completed; RF__GPU_NOT_READY */
    int (*stream_wait)(void *ctx, void *stream, void *event);
    int (*memcpy_async)(void *ctx, void *dst, const void *src, size_t n, void *stream);
    int (*dev_alloc)(void *ctx, void **p, size_t n);
    int (*dev_free)(void *ctx, void *p);
    int (*host_alloc)(void *ctx, void **p, size_t n); /* page-locked, portable */
    int (*host_free)(void *ctx, void *p);
    const char *(*error_string)(void *ctx, int code);
} rf_gpu_ops;

/* The CUDA runtime backend, whose ctx is the runtime's table (the
 * rf_cudart from rf__cudart); NULL when built without CUDA. */
const rf_gpu_ops *rf__cuda_ops(void);

/* ---- the copier ----------------------------------------------------------- */

typedef struct rf_copier rf_copier;

typedef struct rf_copier_stats {
    int64_t copies;        /* host-to-device batch copies enqueued */
    int64_t bytes;         /* their bytes (images and labels) */
    int64_t d2d;           /* device-to-device copies (rf_batch_copy_to of a device batch) */
    int64_t direct;        /* rf_loader_next_device batches of a slot without a device buffer */
    int64_t errors;        /* failed CUDA calls */
    int64_t dev_bytes;     /* device memory held by the device buffers */
    int buffers;           /* slots with a device buffer */
    char last_error[256];  /* the last failure, "" if none */
    char buffer_note[200]; /* why a slot has no device buffer, "" if every one has */
} rf_copier_stats;

/* The loader's copier for CUDA device `device` (-1: none). Returns 0 with
 * *out NULL and note saying why when there is no copier to make (device -1,
 * built without CUDA, no device or no driver: the loader runs on the CPU);
 * RF_E_INVALID when the device does not exist; RF_E_CUDA when CUDA fails.
 * nslots: slots the ring may ever have; slot_bytes: image bytes of one slot;
 * batch_size: labels per slot. Makes the stream and the events; the slots'
 * memory comes with each slot (rf__copier_slot_alloc). The calling thread's
 * context is as it was. */
int rf__copier_open(rf_copier **out, int device, int nslots, size_t slot_bytes, int64_t batch_size,
                    char *note, size_t notecap, char *err, size_t errcap);

/* As rf__copier_open with an explicit backend (tests). 0, RF_E_NOMEM or RF_E_CUDA. */
int rf__copier_create(rf_copier **out, const rf_gpu_ops *ops, void *ctx, int device, int nslots,
                      size_t slot_bytes, int64_t batch_size, char *err, size_t errcap);

/* Ring hooks (rf_ring_hooks, with the copier as ctx): the memory of slot
 * `slot`, made on the loader's device whichever thread asks: its host block
 * of `bytes` (at most slot_bytes; page-locked with pin when it can be:
 * *pinned, else note says why), its label staging and its device buffer (on
 * device out-of-memory none, said in the stats' buffer_note). NULL when no
 * host memory could be had. rf__copier_slot_free gives it back (on the
 * loader's device; after rf__copier_drain, which may have chosen to leak). */
uint8_t *rf__copier_slot_alloc(void *copier, int slot, size_t bytes, int pin, int *pinned,
                               char *note, size_t notecap);
void rf__copier_slot_free(void *copier, int slot, uint8_t *mem, int pinned);

/* Makes the loader's device current on the calling thread for good: a thread
 * of the loader's own (the dispatcher), which grows the ring and polls the
 * copies. NULL is a no-op. */
void rf__copier_bind_thread(rf_copier *c);

/* The time rf__copier_drain waits at most, in milliseconds (default 10000). */
extern int rf__copier_drain_ms;

/* Before the slots' memory is freed: waits for every copy and for the
 * consumers' work on every device buffer (a batch still lent gets its release
 * recorded on its stream now), polling events, no longer than
 * rf__copier_drain_ms. Past it, says so on stderr and leaks the device
 * buffers, the page-locked blocks, the stream and the events rather than
 * free memory a stream that never ends may still use. 0, or -1 when it
 * leaks. Idempotent; NULL is a no-op. Not with the loader's mutex held. */
int rf__copier_drain(rf_copier *c);

/* rf__copier_drain, then frees what is left: events, stream, the slots'
 * memory the ring did not give back, the device's context. NULL is a no-op. */
void rf__copier_destroy(rf_copier *c);

/* In a forked child: frees the copier's plain memory only (no CUDA call, no
 * lock: the parent's context and threads are not the child's). NULL is a no-op. */
void rf__copier_abandon(rf_copier *c);

/* Host slot `slot` (img: img_n bytes, labels: count values) onto its device
 * buffer: enqueued on the copy stream after the buffer's previous release,
 * and `stream` waits for it. *dev_img and *dev_labels point into the device
 * buffer; both NULL when the slot has no device buffer (device out of
 * memory: nothing is enqueued, the batch stays on the host). The slot stays
 * "on the device" until rf__copier_release. 0 or RF_E_CUDA (err names the
 * call). */
int rf__copier_to_device(rf_copier *c, int slot, const void *img, size_t img_n,
                         const int64_t *labels, int64_t count, void *stream, void **dev_img,
                         int64_t **dev_labels, char *err, size_t errcap);

/* Copies host slot `slot` into caller memory (either destination may be
 * NULL), ordered on `stream`: from the device buffer when the slot is on the
 * device (on `stream`), else from the host block through the copy stream.
 * 0, RF_E_INVALID or RF_E_CUDA. */
int rf__copier_copy_to(rf_copier *c, int slot, const void *img, size_t img_n, const int64_t *labels,
                       int64_t count, void *dst_img, void *dst_labels, void *stream, char *err,
                       size_t errcap);

/* The consumer is done with the device buffer of `slot`: records its release
 * event on the consumer's stream. No-op when the slot is not on the device.
 * Never waits (it runs under the loader's mutex): if the record fails, the
 * next copy into the buffer waits for that stream instead. */
void rf__copier_release(rf_copier *c, int slot);

/* Ring hook (rf_ring.copy_done): 1 when the last copy out of host slot `slot`
 * completed (or can never complete: a failed context), 0 while it runs.
 * Never waits (it runs under the loader's mutex). */
int rf__copier_slot_done(void *copier, int slot);

/* A step enqueued on the copy stream after a batch reached its device buffer
 * and before the copy's event (so the consumer's stream waits for it too):
 * e.g. a kernel that converts the buffer in place or into memory of its own.
 * It returns 0 or a backend error code (then RF_E_CUDA, err names "post-copy
 * step"). Set before the first batch; NULL removes it. */
typedef int (*rf_copier_step)(void *arg, int slot, void *stream, void *dev, size_t img_n,
                              int64_t count);
void rf__copier_set_step(rf_copier *c, rf_copier_step step, void *arg);

void rf__copier_stats(rf_copier *c, rf_copier_stats *out);

#endif
