/*
 * copier.h - host memory for the ring, and the CUDA copier.
 *
 * This is the seam between the CPU pipeline and CUDA. Without CUDA (or
 * without a device), host memory is plain page-aligned memory, no copier
 * exists and the loader runs on the CPU alone.
 *
 * The copier talks to CUDA through a small table of functions (rf_gpu_ops):
 * the CUDA runtime, loaded at run time by cudart.c (no libcudart is linked),
 * or a fake backend in tests/test_copier.c that records every call, so that
 * the ordering rules below are tested without a device.
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
 *     (torch's) is free to write only for work ordered after the call.
 */
#ifndef RF_COPIER_H
#define RF_COPIER_H

#include <stddef.h>
#include <stdint.h>

/* Allocates bytes of host memory for the ring. With pin and a usable CUDA
 * device it is page-locked (*pinned = 1); otherwise pageable, with the reason
 * written to note when pinning was asked for. NULL when out of memory. */
void *rf__host_alloc(size_t bytes, int pin, int *pinned, char *note, size_t notecap);
void rf__host_free(void *p, int pinned);

/* Number of usable CUDA devices (0 without CUDA, runtime, driver or device),
 * and a note saying why when 0: "no CUDA runtime: tried ..." (cudart.h) or
 * "cudart 13.0 from <path>; no CUDA device: cudaGetDeviceCount: ...". Loads
 * the runtime on the first call. */
int rf__cuda_devices(char *note, size_t notecap);

/* ---- the GPU backend ------------------------------------------------------ */

/* Results of the rf_gpu_ops functions: 0, RF__GPU_NOT_READY (event_query
 * only), or another value: the backend's error code (cudaError_t). */
#define RF__GPU_NOT_READY (-1)

enum rf_gpu_copy_kind { RF__GPU_H2D = 1, RF__GPU_D2D = 3 }; /* cudaMemcpyKind values */

typedef struct rf_gpu_ops {
    const char *name;
    int (*set_device)(void *ctx, int device);
    int (*stream_create)(void *ctx, void **stream); /* non-blocking (no legacy-stream sync) */
    int (*stream_destroy)(void *ctx, void *stream);
    int (*stream_sync)(void *ctx, void *stream);
    int (*event_create)(void *ctx, void **event); /* timing disabled */
    int (*event_destroy)(void *ctx, void *event);
    int (*event_record)(void *ctx, void *event, void *stream);
    int (*event_query)(void *ctx, void *event); /* 0: completed; RF__GPU_NOT_READY */
    int (*event_sync)(void *ctx, void *event);
    int (*stream_wait)(void *ctx, void *stream, void *event);
    int (*memcpy_async)(void *ctx, void *dst, const void *src, size_t n, int kind, void *stream);
    int (*dev_alloc)(void *ctx, void **p, size_t n);
    int (*dev_free)(void *ctx, void *p);
    int (*host_alloc)(void *ctx, void **p, size_t n); /* page-locked */
    int (*host_free)(void *ctx, void *p);
    const char *(*error_string)(void *ctx, int code);
} rf_gpu_ops;

/* The CUDA runtime backend, whose ctx is the runtime's table (the
 * rf_cudart from rf__cudart); NULL when built without CUDA. */
const rf_gpu_ops *rf__cuda_ops(void);

/* ---- the copier ----------------------------------------------------------- */

typedef struct rf_copier rf_copier;

typedef struct rf_copier_stats {
    int64_t copies;       /* host-to-device batch copies enqueued */
    int64_t bytes;        /* their bytes (images and labels) */
    int64_t d2d;          /* device-to-device copies (rf_batch_copy_to of a device batch) */
    int64_t errors;       /* failed CUDA calls */
    int64_t dev_bytes;    /* device memory held by the device buffers */
    char last_error[256]; /* the last failure, "" if none */
} rf_copier_stats;

/* The loader's copier for CUDA device `device` (-1: none). Returns 0 with
 * *out NULL and note saying why when there is no copier to make (device -1,
 * built without CUDA, no device or no driver: the loader runs on the CPU);
 * RF_E_INVALID when the device does not exist; RF_E_CUDA when CUDA fails.
 * nslots: host slots the ring may ever have; slot_bytes: image bytes of one
 * slot; batch_size: labels per slot. Makes `device` current on this thread
 * (for the ring's page-locked memory) until rf__copier_leave. */
int rf__copier_open(rf_copier **out, int device, int nslots, size_t slot_bytes, int64_t batch_size,
                    char *note, size_t notecap, char *err, size_t errcap);

/* Puts back the device that was current on this thread before
 * rf__copier_open (the caller's framework keeps its own current device).
 * Call once the ring's memory is allocated. NULL is a no-op. */
void rf__copier_leave(rf_copier *c);

/* Makes the loader's device current on the calling thread for good: a thread
 * of the loader's own (the dispatcher) that allocates page-locked ring memory
 * as the tuner grows the ring, which must belong to the loader's device, not
 * to device 0. NULL is a no-op. */
void rf__copier_bind_thread(rf_copier *c);

/* As rf__copier_open with an explicit backend (tests). 0, RF_E_NOMEM or RF_E_CUDA. */
int rf__copier_create(rf_copier **out, const rf_gpu_ops *ops, void *ctx, int device, int nslots,
                      size_t slot_bytes, int64_t batch_size, char *err, size_t errcap);

/* Waits for every copy and every recorded release, then frees device memory,
 * events and the stream. NULL is a no-op. */
void rf__copier_destroy(rf_copier *c);

/* Host slot `slot` (img: img_n bytes, labels: count values) onto its device
 * buffer: enqueued on the copy stream after the buffer's previous release,
 * and `stream` waits for it. *dev_img and *dev_labels point into the device
 * buffer. The slot stays "on the device" until rf__copier_release.
 * 0 or RF_E_CUDA (err names the call). */
int rf__copier_to_device(rf_copier *c, int slot, const void *img, size_t img_n,
                         const int64_t *labels, int64_t count, void *stream, void **dev_img,
                         int64_t **dev_labels, char *err, size_t errcap);

/* Copies host slot `slot` into caller memory (either destination may be
 * NULL), ordered on `stream`: from the device buffer when the slot is on the
 * device (device-to-device on `stream`), else host-to-device through the copy
 * stream. 0, RF_E_INVALID or RF_E_CUDA. */
int rf__copier_copy_to(rf_copier *c, int slot, const void *img, size_t img_n, const int64_t *labels,
                       int64_t count, void *dst_img, void *dst_labels, void *stream, char *err,
                       size_t errcap);

/* The consumer is done with the device buffer of `slot`: records its release
 * event on the consumer's stream. No-op when the slot is not on the device. */
void rf__copier_release(rf_copier *c, int slot);

/* Ring hook (rf_ring.copy_done): 1 when the last copy out of host slot `slot`
 * completed (or can never complete: a failed context), 0 while it runs. */
int rf__copier_slot_done(void *copier, int slot);

void rf__copier_stats(rf_copier *c, rf_copier_stats *out);

#endif
