/*
 * redact.c - URLs and outside text as they may be shown (see redact.h).
 *
 * One pass over the text, with a writer that never passes its room and
 * never cuts an escape or a character in two. A URL is found by its "://";
 * its scheme is the run of scheme characters before. Validating UTF-8 is
 * RFC 3629's: no overlong form, no surrogate, nothing past U+10FFFF; each
 * byte of a sequence that fails is shown on its own.
 */
#define _GNU_SOURCE
#include "redact.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct out {
    char *p;
    size_t len, cap; /* cap: room without the NUL */
    int full;        /* something did not fit: nothing more is written */
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->full || n > o->cap - o->len) {
        o->full = 1;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

/* put, but a piece that does not fit is cut at a character's start */
static void put_cut(out *o, const char *s, size_t n)
{
    if (o->full)
        return;
    if (n > o->cap - o->len) {
        n = o->cap - o->len;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
        memcpy(o->p + o->len, s, n);
        o->len += n;
        o->full = 1;
        return;
    }
    put(o, s, n);
}

static int scheme_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '-' || c == '.';
}

/* The scheme ending at end (the "://" after it) in [start, end), and
 * whether it is http or https. */
static int scheme_is_http(const char *start, const char *end)
{
    const char *b = end;
    while (b > start && scheme_char(b[-1]))
        b--;
    size_t n = (size_t)(end - b);
    return (n == 4 && !strncasecmp(b, "http", 4)) || (n == 5 && !strncasecmp(b, "https", 5));
}

/* Where a URL's authority ends (exclusive), from its start a. In free text
 * (text != 0) a space or a quote ends it too. */
static const char *authority_end(const char *a, int text)
{
    return a + strcspn(a, text ? "/?#\"'<> \t\r\n" : "/?#");
}

/* The last '@' in [a, e), or NULL. */
static const char *userinfo_at(const char *a, const char *e)
{
    const char *at = NULL;
    for (const char *p = a; p < e; p++)
        if (*p == '@')
            at = p;
    return at;
}

const char *rf__redact_url(const char *url, char *outp, size_t cap)
{
    if (cap == 0)
        return outp;
    out o = {outp, 0, cap - 1, 0};
    const char *sep = strstr(url, "://");
    const char *b = sep;
    while (b && b > url && scheme_char(b[-1]))
        b--;
    if (!sep || b != url || sep == url) { /* not a URL: as it is */
        put_cut(&o, url, strlen(url));
    } else {
        const char *a = sep + 3, *e = authority_end(a, 0), *at = userinfo_at(a, e);
        put_cut(&o, url, (size_t)(a - url));
        if (at) {
            put(&o, "***@", 4);
            a = at + 1;
        }
        put_cut(&o, a, (size_t)(e - a));
        size_t rest = strlen(e);
        size_t path = scheme_is_http(url, sep) ? strcspn(e, "?#") : rest;
        put_cut(&o, e, path);
        if (path < rest) {
            put(&o, e + path, 1); /* the '?' or '#' */
            put(&o, "***", 3);
        }
    }
    outp[o.len] = '\0';
    return outp;
}

int rf__url_has_secret(const char *url)
{
    const char *sep = strstr(url, "://");
    if (!sep)
        return 0;
    const char *a = sep + 3, *e = authority_end(a, 0);
    return userinfo_at(a, e) != NULL || (scheme_is_http(url, sep) && strpbrk(e, "?#") != NULL);
}

size_t rf__url_name_len(const char *url)
{
    if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
        return strlen(url);
    return strcspn(url, "?#");
}

/* The length of the valid UTF-8 character at p (1 to 4), or 0 when the
 * byte at p starts none; *cp: its code point. */
static size_t utf8_char(const unsigned char *p, unsigned long *cp)
{
    unsigned char c = p[0];
    size_t n;
    unsigned long v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        n = 2, v = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3, v = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) /* a NUL ends the text here too */
            return 0;
        v = (v << 6) | (p[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return n;
}

/* A code point a terminal or an editor acts on: C1 controls, the
 * bidirectional marks, embeddings, overrides and isolates, and the line
 * and paragraph separators. */
static int shown_as_escape(unsigned long c)
{
    return (c >= 0x80 && c <= 0x9F) || c == 0x061C || c == 0x200E || c == 0x200F ||
           (c >= 0x2028 && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

/* Writes the character at p, escaped where it must be; returns the bytes
 * of p it took. */
static size_t put_escaped(out *o, const char *p)
{
    unsigned long c;
    size_t n = utf8_char((const unsigned char *)p, &c);
    char esc[16];
    if (n == 0 || c < 0x20 || c == 0x7F) {
        snprintf(esc, sizeof esc, "\\x%02x", (unsigned char)*p);
        put(o, esc, 4);
        return 1;
    }
    if (shown_as_escape(c)) {
        snprintf(esc, sizeof esc, "\\u%04x", (unsigned)(c & 0xFFFF)); /* all below U+FFFF */
        put(o, esc, 6);
        return n;
    }
    put(o, p, n);
    return n;
}

/* In free text: a space, a quote, or the end ends a URL. */
static int ends_url(char c)
{
    return c == '\0' || c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '"' || c == '\'' ||
           c == '<' || c == '>';
}

size_t rf__redact_text(const char *text, char *outp, size_t cap)
{
    if (cap == 0)
        return 0;
    out o = {outp, 0, cap - 1, 0};
    const char *p = text;
    int in_http = 0; /* inside an http(s) URL, past its authority */
    while (*p && !o.full) {
        if (p[0] == ':' && p[1] == '/' && p[2] == '/') {
            int http = scheme_is_http(text, p);
            const char *a = p + 3, *e = authority_end(a, 1), *at = userinfo_at(a, e);
            put(&o, "://", 3);
            p = a;
            if (at) {
                put(&o, "***@", 4);
                p = at + 1;
            }
            while (p < e && !o.full)
                p += put_escaped(&o, p);
            in_http = http;
            continue;
        }
        if (in_http && (*p == '?' || *p == '#')) {
            put(&o, p, 1);
            p++;
            if (!strncmp(p, "***", 3)) {
                p += 3; /* already shown: what follows is the message's */
            } else {
                while (!ends_url(*p))
                    p++;
            }
            put(&o, "***", 3);
            in_http = 0;
            continue;
        }
        if (ends_url(*p))
            in_http = 0;
        p += put_escaped(&o, p);
    }
    outp[o.len] = '\0';
    return o.len;
}
