/*
 * json.h - a small growable string for writing JSON: raw text, printf-style
 * fields and quoted, escaped strings. The stats object (core/stats.c) and the
 * stages that report into it (remote/remote.c, remote/remote_manifest.c)
 * write through it; it knows no stage.
 *
 * Out of memory is sticky: the first failed growth sets oom and every later
 * call is a no-op, so a writer checks once, at the end. The caller frees buf.
 */
#ifndef RF_JSON_H
#define RF_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef struct rf_json {
    char *buf;
    size_t len, cap;
    int oom;
} rf_json;

void rf__json_raw(rf_json *j, const char *s);
void rf__json_fmt(rf_json *j, const char *fmt, ...); /* at most 511 bytes per call */
/* Quoted and escaped, shown as messages are (redact.h: secrets in URLs
 * hidden, control bytes and invalid UTF-8 as \xNN text). */
void rf__json_str(rf_json *j, const char *s);

/* Copies j's text into buf (at most cap bytes, NUL-terminated; buf may be
 * NULL when cap is 0) and frees it. Returns the length the whole text needs,
 * as snprintf, or RF_E_NOMEM when j ran out of memory. */
int64_t rf__json_out(rf_json *j, char *buf, size_t cap);

#endif
