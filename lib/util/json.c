/*
 * json.c - the growable JSON string (json.h).
 */
#include "json.h"

#include "redact.h"
#include "ringfeed.h"

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
    /* shown as messages are (redact.h): URLs' secrets hidden, control
     * bytes and invalid UTF-8 from servers and shards as \xNN text, so that
     * the JSON is valid UTF-8 and a reader that prints a string prints no
     * byte a terminal acts on */
    size_t n = strlen(s), room = RF__REDACT_ROOM(n);
    char small[1024], *shown = room <= sizeof small ? small : malloc(room);
    if (!shown) {
        j->oom = 1;
        return;
    }
    rf__redact_text(s, shown, room);
    rf__json_raw(j, "\"");
    char esc[8];
    for (const unsigned char *p = (const unsigned char *)shown; *p; p++) {
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
    if (shown != small)
        free(shown);
}

int64_t rf__json_out(rf_json *j, char *buf, size_t cap)
{
    if (j->oom) {
        free(j->buf);
        return RF_E_NOMEM;
    }
    if (buf && cap > 0) {
        size_t n = j->len < cap - 1 ? j->len : cap - 1;
        memcpy(buf, j->buf, n);
        buf[n] = '\0';
    }
    int64_t len = (int64_t)j->len;
    free(j->buf);
    return len;
}
