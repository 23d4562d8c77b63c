/*
 * json.c - the growable JSON string (json.h).
 */
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void json_reserve(rf_json *j, size_t more)
{
    if (j->oom || j->len + more + 1 <= j->cap)
        return;
    size_t cap = j->cap ? j->cap : 4096;
    while (cap < j->len + more + 1)
        cap *= 2;
    char *b = realloc(j->buf, cap);
    if (!b) {
        j->oom = 1;
        return;
    }
    j->buf = b;
    j->cap = cap;
}

void rf__json_raw(rf_json *j, const char *s)
{
    size_t n = strlen(s);
    json_reserve(j, n);
    if (j->oom)
        return;
    memcpy(j->buf + j->len, s, n + 1);
    j->len += n;
}

void rf__json_fmt(rf_json *j, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    rf__json_raw(j, tmp);
}

void rf__json_str(rf_json *j, const char *s)
{
    rf__json_raw(j, "\"");
    char esc[8];
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            esc[2] = '\0';
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
        } else {
            esc[0] = (char)*p;
            esc[1] = '\0';
        }
        rf__json_raw(j, esc);
    }
    rf__json_raw(j, "\"");
}
