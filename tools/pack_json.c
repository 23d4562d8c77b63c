/*
 * pack_json.c - spans of JSON text (pack_json.h): the merge reads the parts'
 * manifests, which may have been copied from anywhere, so every byte is
 * bounds-checked and the nesting is limited; a span is only ever given for
 * a value that skipped cleanly to its end.
 */
#include "pack_json.h"

#include <string.h>

typedef struct cur {
    const char *p, *end;
} cur;

static void ws(cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

static int hexval(char h)
{
    return h >= '0' && h <= '9'   ? h - '0'
           : h >= 'a' && h <= 'f' ? h - 'a' + 10
           : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                  : -1;
}

/* A string at c->p ('"'): skipped, and decoded into out when out is not
 * NULL (code points as UTF-8, surrogate pairs joined). 0 or -1. */
static int string(cur *c, char *out, size_t cap)
{
    size_t n = 0;
    if (c->p >= c->end || *c->p != '"')
        return -1;
    c->p++;
    for (;;) {
        if (c->p >= c->end || (unsigned char)*c->p < 0x20)
            return -1;
        char ch = *c->p++;
        if (ch == '"')
            break;
        unsigned long cp = (unsigned char)ch;
        int raw = 1;
        if (ch == '\\') {
            if (c->p >= c->end)
                return -1;
            char e = *c->p++;
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *at = e ? strchr(from, e) : NULL;
            if (at) {
                cp = (unsigned char)to[at - from];
            } else if (e == 'u') {
                cp = 0;
                for (int k = 0; k < 4; k++) {
                    int d = c->p < c->end ? hexval(*c->p++) : -1;
                    if (d < 0)
                        return -1;
                    cp = cp * 16 + (unsigned long)d;
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) { /* a high surrogate: its pair follows */
                    unsigned long lo = 0;
                    if (c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u')
                        return -1;
                    c->p += 2;
                    for (int k = 0; k < 4; k++) {
                        int d = hexval(*c->p++);
                        if (d < 0)
                            return -1;
                        lo = lo * 16 + (unsigned long)d;
                    }
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return -1;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return -1;
                }
                raw = 0;
            } else {
                return -1;
            }
        }
        if (!out)
            continue;
        unsigned char u[4];
        size_t k = 0;
        if (raw || cp < 0x80) {
            u[k++] = (unsigned char)cp;
        } else if (cp < 0x800) {
            u[k++] = (unsigned char)(0xC0 | cp >> 6);
            u[k++] = (unsigned char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            u[k++] = (unsigned char)(0xE0 | cp >> 12);
            u[k++] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
            u[k++] = (unsigned char)(0x80 | (cp & 0x3F));
        } else {
            u[k++] = (unsigned char)(0xF0 | cp >> 18);
            u[k++] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
            u[k++] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
            u[k++] = (unsigned char)(0x80 | (cp & 0x3F));
        }
        if (cp == 0 || n + k >= cap)
            return -1;
        memcpy(out + n, u, k);
        n += k;
    }
    if (out)
        out[n] = '\0';
    return 0;
}

static int skip(cur *c, int depth)
{
    ws(c);
    if (c->p >= c->end || depth > PJ_MAX_DEPTH)
        return -1;
    char ch = *c->p;
    if (ch == '"')
        return string(c, NULL, 0);
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return 0;
        }
        for (;;) {
            if (ch == '{') {
                ws(c);
                if (string(c, NULL, 0) != 0)
                    return -1;
                ws(c);
                if (c->p >= c->end || *c->p++ != ':')
                    return -1;
            }
            if (skip(c, depth + 1) != 0)
                return -1;
            ws(c);
            if (c->p >= c->end)
                return -1;
            if (*c->p == ',') {
                c->p++;
                continue;
            }
            if (*c->p++ != close)
                return -1;
            return 0;
        }
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++) {
        size_t n = strlen(words[w]);
        if ((size_t)(c->end - c->p) >= n && !memcmp(c->p, words[w], n)) {
            c->p += n;
            return 0;
        }
    }
    /* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
    if (c->p < c->end && *c->p == '-')
        c->p++;
    const char *d = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
        c->p++;
    if (c->p == d || (*d == '0' && c->p - d > 1))
        return -1;
    if (c->p < c->end && *c->p == '.') {
        d = ++c->p;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
            c->p++;
        if (c->p == d)
            return -1;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
            c->p++;
        d = c->p;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
            c->p++;
        if (c->p == d)
            return -1;
    }
    return 0;
}

int pj_value(pj_span text, pj_span *v)
{
    cur c = {text.p, text.end};
    ws(&c);
    v->p = c.p;
    if (skip(&c, 0) != 0)
        return -1;
    v->end = c.p;
    ws(&c);
    return c.p == c.end ? 0 : -1;
}

int pj_member(pj_span o, const char *key, pj_span *v)
{
    cur c = {o.p, o.end};
    int found = 0;
    ws(&c);
    if (c.p >= c.end || *c.p++ != '{')
        return -1;
    ws(&c);
    if (c.p < c.end && *c.p == '}')
        return 0;
    for (;;) {
        char k[256];
        ws(&c);
        const char *ks = c.p;
        int decoded = string(&c, k, sizeof k) == 0;
        if (!decoded) { /* a key too long to decode is none of ours, but must be a string */
            c.p = ks;
            if (string(&c, NULL, 0) != 0)
                return -1;
        }
        int match = decoded && !strcmp(k, key);
        ws(&c);
        if (c.p >= c.end || *c.p++ != ':')
            return -1;
        ws(&c);
        const char *vs = c.p;
        if (skip(&c, 1) != 0)
            return -1;
        if (match) {
            if (found)
                return -1;
            found = 1;
            v->p = vs;
            v->end = c.p;
        }
        ws(&c);
        if (c.p >= c.end)
            return -1;
        if (*c.p == ',') {
            c.p++;
            continue;
        }
        return *c.p == '}' ? found : -1;
    }
}

int pj_next(pj_span a, pj_span *it)
{
    cur c = {it->p ? it->end : a.p, a.end};
    ws(&c);
    if (!it->p) {
        if (c.p >= c.end || *c.p++ != '[')
            return -1;
        ws(&c);
        if (c.p < c.end && *c.p == ']')
            return 0;
    } else {
        if (c.p >= c.end)
            return -1;
        if (*c.p == ']')
            return 0;
        if (*c.p++ != ',')
            return -1;
    }
    ws(&c);
    it->p = c.p;
    if (skip(&c, 1) != 0)
        return -1;
    it->end = c.p;
    return 1;
}

int pj_int(pj_span v, int64_t *out)
{
    int64_t x = 0;
    if (v.p >= v.end)
        return -1;
    for (const char *p = v.p; p < v.end; p++) {
        if (*p < '0' || *p > '9' || x > (INT64_MAX - 9) / 10)
            return -1;
        x = x * 10 + (*p - '0');
    }
    *out = x;
    return 0;
}

int pj_str(pj_span v, char *out, size_t cap)
{
    cur c = {v.p, v.end};
    return string(&c, out, cap) == 0 && c.p == v.end ? 0 : -1;
}

int pj_same(pj_span a, pj_span b)
{
    return a.end - a.p == b.end - b.p && !memcmp(a.p, b.p, (size_t)(a.end - a.p));
}
