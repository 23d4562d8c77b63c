/*
 * decode_npy.c - raw pixels in NumPy's .npy format: uint8 arrays of shape
 * (H, W, 3), (H, W, 1) or (H, W), C order, as ringfeed-pack --store raw
 * writes them and np.save writes such an array. Nothing to decode: the
 * geometry's region is handed to the resampler straight from the member's
 * bytes (three channels), or expanded to RGB row by row (one channel).
 *
 * The file: the magic "\x93NUMPY", a version byte pair (1.0: a 2-byte
 * little-endian header length; 2.0 and 3.0: 4 bytes), then the header, a
 * Python dict literal such as
 *     {'descr': '|u1', 'fortran_order': False, 'shape': (256, 192, 3), }
 * padded with spaces and ended by a newline, then the data. The header is
 * read by a small parser of exactly that grammar (the three keys, once
 * each, in any order; quoted strings, True/False, tuples of integers; a
 * trailing comma; blanks anywhere): nothing else is accepted, and every
 * refusal names what was wrong (the dtype, Fortran order, the shape, the
 * data's size). The data must be exactly H*W*C bytes: a shorter member is
 * truncated, a longer one is not what the header says. The pixel limit is
 * decode.c's, checked on the size the header gives before anything else.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "ringfeed.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAX_HEADER 65536 /* NumPy's own reader refuses headers past 10000 bytes */

typedef struct rf_npy {
    const uint8_t *data; /* borrowed, from header to region: the pixels */
    int w, h, c;         /* c: 1 or 3 */
    uint8_t *rgb;        /* one channel: the region expanded to RGB */
    size_t rgb_cap;
} rf_npy;

static int npy_sniff(const uint8_t *data, size_t len)
{
    return len >= 6 && !memcmp(data, NPY_MAGIC, 6);
}

static void *npy_create(void)
{
    return calloc(1, sizeof(rf_npy));
}

static void npy_destroy(void *state)
{
    rf_npy *p = state;
    if (!p)
        return;
    free(p->rgb);
    free(p);
}

static void npy_abandon(void *state)
{
    ((rf_npy *)state)->data = NULL;
}

/* ---- the header: a Python dict literal ----------------------------------- */

typedef struct lit {
    const char *p, *end;
} lit;

static void blanks(lit *l)
{
    while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r'))
        l->p++;
}

static int take(lit *l, char c)
{
    blanks(l);
    if (l->p < l->end && *l->p == c) {
        l->p++;
        return 1;
    }
    return 0;
}

/* A quoted string without escapes into out (cap bytes). 0 or -1. */
static int quoted(lit *l, char *out, size_t cap)
{
    blanks(l);
    if (l->p >= l->end || (*l->p != '\'' && *l->p != '"'))
        return -1;
    char q = *l->p++;
    size_t n = 0;
    while (l->p < l->end && *l->p != q) {
        if (*l->p == '\\' || n + 1 >= cap)
            return -1;
        out[n++] = *l->p++;
    }
    if (l->p >= l->end)
        return -1;
    l->p++;
    out[n] = '\0';
    return 0;
}

/* A nonnegative integer (Python 2's long suffix 'L' allowed), at most
 * 2^40. 0 or -1. */
static int number(lit *l, int64_t *v)
{
    blanks(l);
    const char *d = l->p;
    int64_t x = 0;
    while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
        x = x * 10 + (*l->p++ - '0');
        if (x > (INT64_C(1) << 40))
            return -1;
    }
    if (l->p == d)
        return -1;
    if (l->p < l->end && *l->p == 'L')
        l->p++;
    *v = x;
    return 0;
}

/* A tuple of integers; *n of them (at most 4 kept: *n may say more). */
static int tuple(lit *l, int64_t dims[4], int *n)
{
    *n = 0;
    if (!take(l, '('))
        return -1;
    if (take(l, ')'))
        return 0;
    do {
        blanks(l);
        if (l->p < l->end && *l->p == ')')
            break; /* (a, b,) */
        int64_t v;
        if (number(l, &v) != 0)
            return -1;
        if (*n < 4)
            dims[*n] = v;
        (*n)++;
    } while (take(l, ','));
    return take(l, ')') ? 0 : -1;
}

/* True or False. */
static int boolean(lit *l, int *v)
{
    blanks(l);
    size_t left = (size_t)(l->end - l->p);
    if (left >= 4 && !memcmp(l->p, "True", 4)) {
        l->p += 4;
        *v = 1;
        return 0;
    }
    if (left >= 5 && !memcmp(l->p, "False", 5)) {
        l->p += 5;
        *v = 0;
        return 0;
    }
    return -1;
}

/* The header's dict: descr, fortran_order and shape, once each. 0, or -1
 * with the reason in err. */
static int header_dict(lit *l, char *descr, size_t dcap, int *fortran, int64_t dims[4], int *ndim,
                       char *err, size_t errcap)
{
    int seen[3] = {0, 0, 0};
    if (!take(l, '{')) {
        snprintf(err, errcap, "npy: header is not a dict");
        return -1;
    }
    while (!take(l, '}')) {
        char key[32];
        int k;
        if (quoted(l, key, sizeof key) != 0 || !take(l, ':')) {
            snprintf(err, errcap, "npy: malformed header dict");
            return -1;
        }
        k = !strcmp(key, "descr")           ? 0
            : !strcmp(key, "fortran_order") ? 1
            : !strcmp(key, "shape")         ? 2
                                            : -1;
        if (k < 0 || seen[k]) {
            snprintf(err, errcap, "npy: header key '%s' %s", key, k < 0 ? "unknown" : "repeated");
            return -1;
        }
        seen[k] = 1;
        int rc = k == 0   ? quoted(l, descr, dcap)
                 : k == 1 ? boolean(l, fortran)
                          : tuple(l, dims, ndim);
        if (rc != 0) {
            snprintf(err, errcap, "npy: malformed value of '%s' in the header", key);
            return -1;
        }
        if (!take(l, ',')) {
            if (!take(l, '}')) {
                snprintf(err, errcap, "npy: malformed header dict");
                return -1;
            }
            break;
        }
    }
    blanks(l);
    if (l->p != l->end) {
        snprintf(err, errcap, "npy: bytes after the header dict");
        return -1;
    }
    if (!seen[0] || !seen[1] || !seen[2]) {
        snprintf(err, errcap, "npy: header lacks '%s'",
                 !seen[0]   ? "descr"
                 : !seen[1] ? "fortran_order"
                            : "shape");
        return -1;
    }
    return 0;
}

static int npy_header(void *state, const uint8_t *d, size_t len, int max_scans, int *width,
                      int *height, char *err, size_t errcap)
{
    (void)max_scans;
    rf_npy *p = state;
    p->data = NULL;
    if (len < 10) {
        snprintf(err, errcap, "npy: truncated (%zu bytes)", len);
        return RF_E_DECODE;
    }
    int major = d[6], minor = d[7];
    size_t pre = major == 1 ? 10 : 12;
    if ((major < 1 || major > 3) || minor != 0) {
        snprintf(err, errcap, "npy: format version %d.%d (1.0, 2.0 and 3.0 are read)", major,
                 minor);
        return RF_E_DECODE;
    }
    if (len < pre) {
        snprintf(err, errcap, "npy: truncated (%zu bytes)", len);
        return RF_E_DECODE;
    }
    uint64_t hlen = (uint64_t)d[8] | (uint64_t)d[9] << 8;
    if (major > 1)
        hlen |= (uint64_t)d[10] << 16 | (uint64_t)d[11] << 24;
    if (hlen > NPY_MAX_HEADER || hlen > len - pre) {
        snprintf(err, errcap, "npy: header of %llu bytes %s", (unsigned long long)hlen,
                 hlen > NPY_MAX_HEADER ? "is too long" : "runs past the end of the data");
        return RF_E_DECODE;
    }
    lit l = {(const char *)d + pre, (const char *)d + pre + hlen};
    char descr[32];
    int fortran = 0, ndim = 0;
    int64_t dims[4] = {0, 0, 0, 0};
    if (header_dict(&l, descr, sizeof descr, &fortran, dims, &ndim, err, errcap) != 0)
        return RF_E_DECODE;
    /* '|u1' as NumPy writes uint8; any byte order means the same for one byte */
    const char *t = descr[0] == '|' || descr[0] == '<' || descr[0] == '>' || descr[0] == '='
                        ? descr + 1
                        : descr;
    if (strcmp(t, "u1") != 0) {
        snprintf(err, errcap, "npy: dtype '%s' (expected uint8, '|u1')", descr);
        return RF_E_DECODE;
    }
    if (fortran) {
        snprintf(err, errcap, "npy: Fortran order (expected C order)");
        return RF_E_DECODE;
    }
    if (ndim < 2 || ndim > 3 || (ndim == 3 && dims[2] != 1 && dims[2] != 3)) {
        snprintf(err, errcap,
                 "npy: shape of %d dimensions%s (expected (H, W, 3), (H, W, 1) or (H, W))", ndim,
                 ndim == 3 ? " and not 1 or 3 channels" : "");
        return RF_E_DECODE;
    }
    if (dims[0] == 0 || dims[1] == 0 || dims[0] > INT32_MAX || dims[1] > INT32_MAX) {
        snprintf(err, errcap, "npy: shape (%lld, %lld, ...): a side is %s", (long long)dims[0],
                 (long long)dims[1], dims[0] == 0 || dims[1] == 0 ? "0" : "too large");
        return RF_E_DECODE;
    }
    int c = ndim == 3 ? (int)dims[2] : 1;
    /* each side below 2^31 (checked above): the product fits in 64 bits */
    uint64_t need = (uint64_t)dims[0] * (uint64_t)dims[1] * (uint64_t)c;
    if (need != len - pre - hlen) {
        snprintf(err, errcap, "npy: %llu bytes of data, the shape (%lld, %lld, %d) needs %llu%s",
                 (unsigned long long)(len - pre - hlen), (long long)dims[0], (long long)dims[1], c,
                 (unsigned long long)need, need > len - pre - hlen ? " (truncated)" : "");
        return RF_E_DECODE;
    }
    p->h = (int)dims[0];
    p->w = (int)dims[1];
    p->c = c;
    p->data = d + pre + hlen;
    *width = p->w;
    *height = p->h;
    return 0;
}

static int npy_region(void *state, rf_geom *g, int max_denom, int check_tail, rf_region *r,
                      char *err, size_t errcap)
{
    (void)max_denom, (void)check_tail; /* no scaling; nothing left to decode */
    rf_npy *p = state;
    memset(r, 0, sizeof *r);
    r->denom = 1;
    r->whole = 1;
    int x0, y0, x1, y1;
    rf__geom_bounds(g, p->w, p->h, &x0, &y0, &x1, &y1);
    size_t row = (size_t)p->w * (size_t)p->c;
    if (p->c == 3) { /* the bytes are the rows: no copy */
        r->rows = p->data + (size_t)y0 * row + (size_t)x0 * 3;
        r->stride = row;
    } else {
        size_t stride = (size_t)(x1 - x0) * 3;
        if (rf__buf_reserve(&p->rgb, &p->rgb_cap, stride * (size_t)(y1 - y0)) != 0) {
            p->data = NULL;
            snprintf(err, errcap, "out of memory for a %dx%d region", x1 - x0, y1 - y0);
            return RF_E_NOMEM;
        }
        for (int y = y0; y < y1; y++) {
            const uint8_t *in = p->data + (size_t)y * row + (size_t)x0;
            uint8_t *out = p->rgb + (size_t)(y - y0) * stride;
            for (int x = 0; x < x1 - x0; x++, out += 3)
                out[0] = out[1] = out[2] = in[x];
        }
        r->rows = p->rgb;
        r->stride = stride;
    }
    p->data = NULL;
    r->full_w = p->w;
    r->full_h = p->h;
    r->x0 = x0;
    r->y0 = y0;
    r->w = x1 - x0;
    r->h = y1 - y0;
    return 0;
}

const rf_format rf__format_npy = {
    npy_sniff, npy_create, npy_destroy, npy_header, npy_region, npy_abandon,
};
