/*
 * clock.h - the clocks the pipeline measures itself with.
 *
 * rf__now_ns is CLOCK_MONOTONIC in nanoseconds (stage times, stalls, tuner
 * windows); rf__thread_cpu_ns the calling thread's CPU time (the tuner tells
 * a starved worker from a busy one by it); rf__deadline_in turns a relative
 * wait into the CLOCK_REALTIME deadline pthread_cond_timedwait wants.
 */
#ifndef RF_CLOCK_H
#define RF_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic nanoseconds. */
static inline int64_t rf__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t rf__thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The CLOCK_REALTIME instant sec seconds and ns nanoseconds (< 1e9) from now. */
static inline struct timespec rf__deadline_in(int64_t sec, long ns)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += (time_t)sec;
    t.tv_nsec += ns;
    if (t.tv_nsec >= 1000000000) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000;
    }
    return t;
}

#endif
