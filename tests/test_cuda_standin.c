/*
 * test_cuda_standin.c - the stand-in runtime itself (tests/fake_cudart*.c)
 * keeps the rules of the real one that the library's correctness rests on,
 * so that the other CUDA tests mean something:
 *   - cudaSetDevice creates the device's primary context, cudaGetDevice does
 *     not, a call that needs a context on a thread without one creates the
 *     current device's; the driver's context calls see and set the same;
 *   - streams and events belong to a device: a stream used while another
 *     device is current, an event recorded on another device's stream, is
 *     cudaErrorInvalidResourceHandle; NULL is the current device's legacy
 *     stream, which serialises with that device's blocking streams only;
 *   - cudaFree and cudaStreamDestroy return at once, queued work or not;
 *   - a copy from pageable memory is staged when it is made (the host waits,
 *     the source may change right after); one from page-locked memory is
 *     read when it runs;
 *   - allocations fail past a limit; a sticky error stays; in a forked child
 *     every call fails with cudaErrorInitializationError.
 * (A runtime whose driver is too old, and the second major version: CTest's
 * cuda_fake_driver.) Only against the stand-in: CTest test_cuda_standin_fake.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "standin.h"

#ifdef RF_HAVE_CUDA
#define CK(x) assert_int_equal((x), cudaSuccess)

static void *fresh_thread_contexts(void *arg)
{
    const rf_cudart *rt = SI.rt;
    long long *out = arg;
    int d = -1;
    CK(rt->GetDevice(&d)); /* no context made */
    out[0] = d;
    out[1] = SI.get("current_device", 0);
    void *p;
    CK(rt->Malloc(&p, 16)); /* needs one: the current device's (0) */
    out[2] = SI.get("current_device", 0);
    CK(rt->Free(p));
    return NULL;
}

static void test_contexts(void **state)
{
    (void)state;
    const rf_cudart *rt = SI.rt;
    long long c0 = SI.get("contexts", 0), c1 = SI.get("contexts", 1);
    long long seen[3];
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fresh_thread_contexts, seen), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(seen[0], 0);
    assert_int_equal(seen[1], -1);
    assert_int_equal(seen[2], 0);
    assert_int_equal(SI.get("context_active", 0), 1);
    assert_true(SI.get("contexts", 0) - c0 <= 1); /* made once, if not before */
    CK(rt->SetDevice(1));
    assert_int_equal(SI.get("contexts", 1) - c1, SI.get("context_active", 1) && c1 ? 0 : 1);
    assert_int_equal(SI.get("current_device", 0), 1);
    /* The driver's calls: the current context, and none. */
    CUcontext cur = NULL;
    assert_int_equal(rt->CtxGetCurrent(&cur), CUDA_SUCCESS);
    assert_non_null(cur);
    assert_int_equal(rt->CtxSetCurrent(NULL), CUDA_SUCCESS);
    assert_int_equal(SI.get("current_device", 0), -1);
    int d = -1;
    CK(rt->GetDevice(&d));
    assert_int_equal(d, 1); /* the runtime's device for the thread is still 1 */
    assert_int_equal(rt->CtxSetCurrent(cur), CUDA_SUCCESS);
    assert_int_equal(SI.get("current_device", 0), 1);
}

static void test_streams_and_events_belong_to_a_device(void **state)
{
    (void)state;
    const rf_cudart *rt = SI.rt;
    cudaStream_t s1, s0;
    cudaEvent_t e1, e0;
    CK(rt->SetDevice(1));
    CK(rt->StreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(rt->EventCreateWithFlags(&e1, cudaEventDisableTiming));
    CK(rt->SetDevice(0));
    CK(rt->StreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CK(rt->EventCreateWithFlags(&e0, cudaEventDisableTiming));
    /* Device 0 current: device 1's stream and event are foreign. */
    assert_int_equal(rt->EventRecord(e1, s1), cudaErrorInvalidResourceHandle);
    assert_int_equal(rt->EventRecord(e1, NULL), cudaErrorInvalidResourceHandle);
    assert_int_equal(rt->EventRecord(e0, s1), cudaErrorInvalidResourceHandle);
    void *p;
    CK(rt->Malloc(&p, 64));
    assert_int_equal(rt->MemcpyAsync(p, p, 0, cudaMemcpyDefault, s1), cudaSuccess); /* empty */
    assert_int_equal(rt->MemcpyAsync(p, (char *)p + 32, 32, cudaMemcpyDefault, s1),
                     cudaErrorInvalidResourceHandle);
    (void)rt->GetLastError();
    CK(rt->EventRecord(e0, NULL)); /* device 0's legacy stream */
    CK(rt->StreamWaitEvent(s0, e0, 0));
    CK(rt->SetDevice(1));
    CK(rt->EventRecord(e1, NULL));      /* device 1's legacy stream now */
    CK(rt->StreamWaitEvent(s1, e0, 0)); /* another device's event may be waited for */
    CK(rt->StreamSynchronize(s1));
    CK(rt->SetDevice(0));
    CK(rt->Free(p));
    CK(rt->EventDestroy(e0));
    CK(rt->StreamDestroy(s0));
    CK(rt->SetDevice(1));
    CK(rt->EventDestroy(e1));
    CK(rt->StreamDestroy(s1));
    CK(rt->SetDevice(0));
}

/* Work on the legacy stream waits for blocking streams, not non-blocking
 * ones (each memset is 1 ms of "device" time). */
static void test_legacy_stream_serialises_with_blocking_streams(void **state)
{
    (void)state;
    const rf_cudart *rt = SI.rt;
    __typeof__(cudaStreamQuery) *StreamQuery =
        (__typeof__(StreamQuery))dlsym(rt->handle, RF_CUDART_SYM(cudaStreamQuery));
    assert_non_null(StreamQuery);
    cudaStream_t blocking, nonblocking;
    cudaEvent_t e;
    void *p;
    CK(rt->SetDevice(0));
    CK(rt->Malloc(&p, 4096));
    CK(rt->StreamCreateWithFlags(&blocking, cudaStreamDefault));
    CK(rt->StreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
    CK(rt->EventCreateWithFlags(&e, cudaEventDisableTiming));
    for (int round = 0; round < 2; round++) {
        cudaStream_t s = round == 0 ? blocking : nonblocking;
        SI.set("pause", 1);
        for (int i = 0; i < 3; i++)
            CK(SI.MemsetAsync(p, i, 4096, s));
        CK(rt->EventRecord(e, NULL));
        SI.set("pause", 0);
        while (rt->EventQuery(e) == cudaErrorNotReady)
            usleep(50);
        (void)rt->GetLastError();
        cudaError_t q = StreamQuery(s);
        (void)rt->GetLastError();
        if (round == 0)
            assert_int_equal(q, cudaSuccess); /* the legacy record waited for them */
        else
            assert_int_equal(q, cudaErrorNotReady); /* it did not */
        CK(rt->StreamSynchronize(s));
    }
    CK(rt->EventDestroy(e));
    CK(rt->StreamDestroy(blocking));
    CK(rt->StreamDestroy(nonblocking));
    CK(rt->Free(p));
}

/* cudaFree and cudaStreamDestroy do not wait for queued work. */
static void test_free_and_stream_destroy_return_at_once(void **state)
{
    (void)state;
    const rf_cudart *rt = SI.rt;
    cudaStream_t s;
    uint8_t *host;
    void *dev, *doomed;
    CK(rt->StreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(rt->HostAlloc((void **)&host, 64, cudaHostAllocDefault));
    CK(rt->Malloc(&dev, 64));
    CK(rt->Malloc(&doomed, 64));
    SI.set("pause", 1);
    CK(SI.MemsetAsync(dev, 0x5C, 64, s));
    CK(rt->MemcpyAsync(host, dev, 64, cudaMemcpyDefault, s));
    CK(rt->StreamDestroy(s)); /* returns, paused device or not */
    SI.set("pause", 0);
    CK(SI.DeviceSynchronize()); /* its work still ran */
    assert_int_equal(host[0], 0x5C);
    assert_int_equal(host[63], 0x5C);
    SI.set("pause", 1);
    long long frees = SI.get("frees", 0);
    CK(SI.MemsetAsync(doomed, 1, 64, NULL));
    CK(rt->Free(doomed)); /* returns too, the memset on it still queued */
    assert_int_equal(SI.get("frees", 0), frees + 1);
    /* That memset would abort the process when it ran: a failed context
     * drops every queued op. */
    SI.set("sticky", cudaErrorIllegalAddress);
    SI.set("sticky", 0);
    SI.set("pause", 0);
    rt->FreeHost(host);
    rt->Free(dev);
}

/* Pageable sources are staged when the copy is made; page-locked ones are
 * read when it runs. */
static void test_pageable_staged_page_locked_read_late(void **state)
{
    (void)state;
    const rf_cudart *rt = SI.rt;
    cudaStream_t s;
    uint8_t *pinned, pageable[256], out[256];
    void *dev;
    CK(rt->StreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(rt->HostAlloc((void **)&pinned, 256, cudaHostAllocDefault));
    CK(rt->Malloc(&dev, 512));
    long long syncs = SI.get("thread_syncs", 0), pg = SI.get("pageable", 0);
    memset(pageable, 0x11, sizeof pageable);
    CK(rt->MemcpyAsync(dev, pageable, 256, cudaMemcpyDefault, s));
    assert_int_equal(SI.get("thread_syncs", 0), syncs + 1); /* the host waited */
    assert_int_equal(SI.get("pageable", 0), pg + 1);
    memset(pageable, 0x22, sizeof pageable); /* too late to matter */
    SI.set("pause", 1);
    memset(pinned, 0x33, 256);
    CK(rt->MemcpyAsync((uint8_t *)dev + 256, pinned, 256, cudaMemcpyHostToDevice, s));
    assert_int_equal(SI.get("thread_syncs", 0), syncs + 1); /* no wait */
    memset(pinned, 0x44, 256);                              /* before it ran: it reads this */
    SI.set("pause", 0);
    CK(rt->MemcpyAsync(out, dev, 256, cudaMemcpyDefault, s)); /* to pageable: waits */
    assert_int_equal(out[0], 0x11);
    assert_int_equal(out[255], 0x11);
    CK(rt->MemcpyAsync(out, (uint8_t *)dev + 256, 256, cudaMemcpyDefault, s));
    assert_int_equal(out[0], 0x44);
    /* A kind that does not match the pointers is refused. */
    assert_int_equal(rt->MemcpyAsync(dev, pinned, 16, cudaMemcpyDeviceToHost, s),
                     cudaErrorInvalidValue);
    assert_int_equal(rt->MemcpyAsync(pinned, dev, 16, cudaMemcpyDeviceToDevice, s),
                     cudaErrorInvalidValue);
    assert_int_equal(rt->GetLastError(), cudaErrorInvalidValue);
    rt->FreeHost(pinned);
    rt->Free(dev);
    rt->StreamDestroy(s);
}

static void test_limits_sticky_errors_and_fork(void **state)
{
    (void)state;
    const rf_cudart *rt = SI.rt;
    void *p = NULL;
    SI.set("device_memory", SI.get("dev_used", 0) + 100);
    assert_int_equal(rt->Malloc(&p, 200), cudaErrorMemoryAllocation);
    assert_int_equal(rt->GetLastError(), cudaErrorMemoryAllocation);
    assert_int_equal(rt->GetLastError(), cudaSuccess);
    SI.set("device_memory", 0);
    SI.fail_call("cudaEventCreateWithFlags", 1, cudaErrorNotSupported);
    cudaEvent_t e[3];
    CK(rt->EventCreateWithFlags(&e[0], 0));
    assert_int_equal(rt->EventCreateWithFlags(&e[1], 0), cudaErrorNotSupported);
    CK(rt->EventCreateWithFlags(&e[2], 0));
    (void)rt->GetLastError();
    SI.set("sticky", cudaErrorIllegalAddress);
    assert_int_equal(rt->Malloc(&p, 16), cudaErrorIllegalAddress);
    assert_int_equal(rt->GetLastError(), cudaErrorIllegalAddress);
    assert_int_equal(rt->GetLastError(), cudaErrorIllegalAddress); /* it stays */
    SI.set("sticky", 0);
    assert_int_equal(rt->GetLastError(), cudaSuccess);
    CK(rt->EventDestroy(e[0]));
    CK(rt->EventDestroy(e[2]));
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        void *q = NULL;
        int ok = rt->Malloc(&q, 16) == cudaErrorInitializationError && SI.get("after_fork", 0) == 1;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(SI.get("after_fork", 0), 0);
}
#endif

int main(void)
{
#ifndef RF_HAVE_CUDA
    printf("test_cuda_standin: SKIPPED - built without CUDA\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_contexts, si_reset),
        cmocka_unit_test_setup(test_streams_and_events_belong_to_a_device, si_reset),
        cmocka_unit_test_setup(test_legacy_stream_serialises_with_blocking_streams, si_reset),
        cmocka_unit_test_setup(test_free_and_stream_destroy_return_at_once, si_reset),
        cmocka_unit_test_setup(test_pageable_staged_page_locked_read_late, si_reset),
        cmocka_unit_test_setup(test_limits_sticky_errors_and_fork, si_reset),
    };
    return si_run("test_cuda_standin", 1, tests, sizeof tests / sizeof tests[0], NULL, NULL);
#endif
}
