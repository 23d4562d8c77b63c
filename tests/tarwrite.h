/*
 * tarwrite.h - a small tar writer for tests and benchmarks: WebDataset shards
 * made at run time, with every header flavour the indexer must read (plain
 * ustar, ustar with a name prefix, GNU long names 'L', pax 'x' headers) and
 * the damage it must report (a bad checksum, a truncated member).
 *
 * Header-only (static inline): used by tests/test_shards.c and
 * bench/index_bench.c, which link nothing else in common.
 */
#ifndef RF_TARWRITE_H
#define RF_TARWRITE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum tw_flavor {
    TW_USTAR = 0, /* names over 100 bytes split into prefix + name (at a '/') */
    TW_GNU = 1,   /* names over 100 bytes in a preceding 'L' member */
    TW_PAX = 2,   /* names over 100 bytes in a preceding 'x' pax header */
};

typedef struct tw {
    FILE *f;
    uint64_t pos; /* bytes written */
    int flavor;
} tw;

static inline int tw_open(tw *t, const char *path, int flavor)
{
    t->f = fopen(path, "wb");
    t->pos = 0;
    t->flavor = flavor;
    return t->f ? 0 : -1;
}

static inline void tw_octal(char *field, size_t width, uint64_t v)
{
    /* width - 1 octal digits, zero-padded, then NUL (values must fit) */
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%0*llo", (int)width - 1, (unsigned long long)v);
    memcpy(field, tmp + (size_t)n - (width - 1), width - 1);
    field[width - 1] = '\0';
}

/* Fills a 512-byte header; name must fit 100 bytes (prefix 155). */
static inline void tw_header(uint8_t h[512], const char *prefix, const char *name, char type,
                             uint64_t size)
{
    memset(h, 0, 512);
    strncpy((char *)h, name, 100);
    tw_octal((char *)h + 100, 8, 0644);
    tw_octal((char *)h + 108, 8, 1000);
    tw_octal((char *)h + 116, 8, 1000);
    tw_octal((char *)h + 124, 12, size);
    tw_octal((char *)h + 136, 12, 1700000000);
    h[156] = (uint8_t)type;
    memcpy(h + 257, "ustar", 6); /* POSIX: "ustar\0" then version "00" */
    memcpy(h + 263, "00", 2);
    strcpy((char *)h + 265, "user");
    strcpy((char *)h + 297, "group");
    if (prefix)
        strncpy((char *)h + 345, prefix, 155);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    tw_octal((char *)h + 148, 7, sum); /* six digits, NUL, space */
    h[155] = ' ';
}

static inline int tw_raw(tw *t, const void *data, size_t len)
{
    if (len && fwrite(data, 1, len, t->f) != len)
        return -1;
    t->pos += len;
    size_t pad = (512 - len % 512) % 512;
    static const uint8_t zeros[512];
    if (pad && fwrite(zeros, 1, pad, t->f) != pad)
        return -1;
    t->pos += pad;
    return 0;
}

/* Appends a member of type `type` ('0' file, '5' directory, ...). */
static inline int tw_typed(tw *t, const char *name, char type, const void *data, size_t len)
{
    uint8_t h[512];
    size_t nlen = strlen(name);
    const char *prefix = NULL;
    char pbuf[160], nbuf[104];
    if (nlen > 100) {
        if (t->flavor == TW_GNU) {
            tw_header(h, NULL, "././@LongLink", 'L', nlen + 1);
            if (tw_raw(t, h, 512) || tw_raw(t, name, nlen + 1))
                return -1;
        } else if (t->flavor == TW_PAX) {
            char rec[8192];
            /* "LEN path=NAME\n": LEN counts its own digits */
            size_t body = strlen(" path=\n") + nlen, len = body + 1;
            while (snprintf(NULL, 0, "%zu", len) + body != len)
                len++;
            int n = snprintf(rec, sizeof rec, "%zu path=%s\n", len, name);
            if (n < 0 || (size_t)n != len)
                return -1;
            tw_header(h, NULL, "PaxHeaders/x", 'x', len);
            if (tw_raw(t, h, 512) || tw_raw(t, rec, len))
                return -1;
        } else {
            /* ustar: split at a '/' so that name <= 100 and prefix <= 155 */
            const char *cut = NULL;
            for (const char *p = name; *p; p++)
                if (*p == '/' && (size_t)(p - name) <= 155 && nlen - (size_t)(p - name) - 1 <= 100)
                    cut = p;
            if (!cut)
                return -1;
            memcpy(pbuf, name, (size_t)(cut - name));
            pbuf[cut - name] = '\0';
            prefix = pbuf;
            name = cut + 1;
        }
        if (!prefix) { /* the real name is elsewhere; the header holds a stand-in */
            memcpy(nbuf, name, 99);
            nbuf[99] = '\0';
            name = nbuf;
        }
    }
    tw_header(h, prefix, name, type, len);
    if (tw_raw(t, h, 512))
        return -1;
    return tw_raw(t, data, len);
}

static inline int tw_file(tw *t, const char *name, const void *data, size_t len)
{
    return tw_typed(t, name, '0', data, len);
}

/* The end-of-archive marker (two zero blocks), then closes. */
static inline int tw_close(tw *t)
{
    static const uint8_t zeros[1024];
    int rc = fwrite(zeros, 1, 1024, t->f) == 1024 ? 0 : -1;
    t->pos += 1024;
    if (fclose(t->f) != 0)
        rc = -1;
    t->f = NULL;
    return rc;
}

#endif
