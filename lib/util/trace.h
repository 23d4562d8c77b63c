/*
 * trace.h - timestamps of the steps of a start, for finding where a cold
 * start's time goes (RINGFEED_TRACE=1 in the environment; off otherwise).
 *
 * Each mark writes one line to stderr, "ringfeed-trace +MS.mmm WHAT", in
 * milliseconds of CLOCK_MONOTONIC since the process's first mark. The marks
 * sit at steps that happen a few times per start (loader start, HEADs done,
 * index ready, each transfer's start, first byte, end, sync and rename,
 * the first read, the first decode, the first batch), never per sample.
 * Off, a mark is one relaxed atomic load.
 */
#ifndef RF_TRACE_H
#define RF_TRACE_H

/* 1 when RINGFEED_TRACE is set to a non-empty value other than "0". */
int rf__trace_on(void);
/* One line (printf format) when on. Any thread. */
void rf__trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define RF_TRACE(...)                                                                              \
    do {                                                                                           \
        if (rf__trace_on())                                                                        \
            rf__trace(__VA_ARGS__);                                                                \
    } while (0)

#endif
