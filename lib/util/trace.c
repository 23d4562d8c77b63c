/*
 * trace.c - RINGFEED_TRACE's marks (see trace.h): the switch read once from
 * the environment, the time origin set by the first mark. A line is shown
 * as messages are (redact.h): URLs' secrets hidden, outside bytes escaped.
 */
#include "trace.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "redact.h"

/* -1 not read yet, 0 off, 1 on: a racing first read reads the same value */
static _Atomic int trace_state = -1;
/* the first mark's time (0: none yet); a compare-exchange sets it once */
static _Atomic int64_t trace_t0;

int rf__trace_on(void)
{
    int s = atomic_load_explicit(&trace_state, memory_order_relaxed);
    if (s < 0) {
        const char *v = getenv("RINGFEED_TRACE");
        s = v && *v && strcmp(v, "0") != 0;
        atomic_store_explicit(&trace_state, s, memory_order_relaxed);
    }
    return s;
}

void rf__trace(const char *fmt, ...)
{
    int64_t now = rf__now_ns(), zero = 0;
    atomic_compare_exchange_strong(&trace_t0, &zero, now);
    int64_t t0 = atomic_load(&trace_t0);
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char shown[RF__REDACT_ROOM(sizeof line)];
    rf__redact_text(line, shown, sizeof shown);
    fprintf(stderr, "ringfeed-trace +%.3f %s\n", (double)(now - t0) / 1e6, shown);
}
