/*
 * pnm.c - the Netpbm family P1..P6 (PBM, PGM, PPM), read as PIL 9's
 * PpmImagePlugin reads them, pixels as Image.open(p).convert("RGB") gives.
 *
 * The header is tokenised as PIL does it: whitespace-separated tokens of at
 * most 10 characters, where '#' starts a comment running to CR or LF that
 * does not end the token it interrupts, and the data start one byte after
 * the last token. Samples are scaled by PIL's rules:
 *   maxval 255 (P5, P6) or bits (P1, P4)  as stored; bit 1 is black
 *   P5 with maxval 65535                  min(v, 255) (mode "I", clipped)
 *   P5/P2 with another maxval > 255       min(255, round(v / maxval * 65535))
 *   any other                             min(255, round(v / maxval * 255))
 * with Python's round (half to even) on the same double arithmetic. Binary
 * data (P4, P5, P6) must be all there (PIL fails on a short file); only the
 * crop's rows are converted. Plain data (P1, P2, P3) is tokenised whole, as
 * PIL does on files up to its 1 MB read block (comments removed first; a
 * file that ends inside a token repeats it until the picture is full, as
 * PIL's decoder does). A sample that is not plain decimal digits is refused.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "ringfeed.h"

#define PNM_TOKEN_MAX 10 /* PIL's longest token */

typedef struct rf_pnm {
    const uint8_t *data; /* borrowed, from header to region */
    size_t len, off;     /* off: where the samples start */
    int magic;           /* 1..6 */
    int w, h, maxval;    /* maxval 1 for P1 and P4 */
    int in_bytes;        /* binary: bytes per sample */
    uint8_t *lut;        /* binary samples -> bytes (65536 entries) */
    uint8_t *rgb;        /* crop rows, or the whole picture for plain data */
    size_t rgb_cap;
} rf_pnm;

static int is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static int pnm_sniff(const uint8_t *data, size_t len)
{
    /* PIL reads the magic up to whitespace: "P6#..." is not PPM to it */
    return len >= 3 && data[0] == 'P' && data[1] >= '1' && data[1] <= '6' && is_space(data[2]);
}

static void *pnm_create(void)
{
    rf_pnm *p = calloc(1, sizeof *p);
    if (p && !(p->lut = malloc(65536))) {
        free(p);
        return NULL;
    }
    return p;
}

static void pnm_destroy(void *state)
{
    rf_pnm *p = state;
    if (!p)
        return;
    free(p->lut);
    free(p->rgb);
    free(p);
}

static void pnm_abandon(void *state)
{
    rf_pnm *p = state;
    p->data = NULL;
}

/* A header token as PIL's _read_token reads it, parsed as a decimal number.
 * *at moves past the whitespace byte that ended it. 0 or -1 (err set). */
static int header_token(const uint8_t *d, size_t len, size_t *at, long *value, char *err,
                        size_t errcap)
{
    char tok[PNM_TOKEN_MAX + 2];
    size_t n = 0, i = *at;
    while (n <= PNM_TOKEN_MAX) {
        if (i >= len)
            break;
        uint8_t c = d[i++];
        if (is_space(c)) {
            if (n == 0)
                continue;
            break;
        }
        if (c == '#') { /* to CR or LF (consumed) or the end; the token goes on */
            while (i < len && d[i] != '\r' && d[i] != '\n')
                i++;
            if (i < len)
                i++;
            continue;
        }
        tok[n++] = (char)c;
    }
    *at = i;
    tok[n] = '\0';
    if (n == 0) {
        snprintf(err, errcap, "PNM header truncated");
        return -1;
    }
    if (n > PNM_TOKEN_MAX) {
        snprintf(err, errcap, "PNM header token too long");
        return -1;
    }
    long v = 0;
    for (size_t k = 0; k < n; k++) {
        if (tok[k] < '0' || tok[k] > '9') {
            snprintf(err, errcap, "PNM header: '%s' is not a plain decimal number (unsupported)",
                     tok);
            return -1;
        }
        v = v * 10 + (tok[k] - '0');
    }
    *value = v;
    return 0;
}

/* PIL's scaling of sample v to 0..out_max, then clipped to a byte. */
static uint8_t scale(unsigned v, unsigned maxval, unsigned out_max)
{
    double q = nearbyint((double)v / (double)maxval * (double)out_max);
    if (q > out_max)
        q = out_max;
    return q > 255 ? 255 : (uint8_t)q;
}

static int pnm_header(void *state, const uint8_t *d, size_t len, int max_scans, int *width,
                      int *height, char *err, size_t errcap)
{
    rf_pnm *p = state;
    p->data = NULL;
    p->magic = d[1] - '0';
    size_t at = 3;
    long v[3] = {0, 0, 1};
    int ntok = p->magic == 1 || p->magic == 4 ? 2 : 3;
    for (int k = 0; k < ntok; k++)
        if (header_token(d, len, &at, &v[k], err, errcap) != 0)
            return RF_E_DECODE;
    if (v[0] == 0 || v[1] == 0) {
        snprintf(err, errcap, "PNM of %ldx%ld pixels (a side is 0)", v[0], v[1]);
        return RF_E_DECODE;
    }
    if (v[0] > INT32_MAX || v[1] > INT32_MAX) {
        snprintf(err, errcap, "PNM of %ldx%ld pixels is too large", v[0], v[1]);
        return RF_E_LIMIT;
    }
    if (v[2] < 1 || v[2] > 65535) {
        snprintf(err, errcap, "PNM maxval %ld is not in 1..65535", v[2]);
        return RF_E_DECODE;
    }
    p->w = (int)v[0];
    p->h = (int)v[1];
    p->maxval = (int)v[2];
    p->off = at;
    p->in_bytes = p->maxval > 255 ? 2 : 1;
    p->data = d;
    p->len = len;
    *width = p->w;
    *height = p->h;
    return 0;
}

/* Skips a comment at d[*i] == '#' through its CR or LF. */
static void skip_comment(const uint8_t *d, size_t len, size_t *i)
{
    while (*i < len && d[*i] != '\r' && d[*i] != '\n')
        (*i)++;
    if (*i < len)
        (*i)++;
}

/* P1: '0'/'1' characters, whitespace optional; every character left must be one. */
static int plain_bits(rf_pnm *p, char *err, size_t errcap)
{
    size_t total = (size_t)p->w * (size_t)p->h, n = 0;
    for (size_t i = p->off; i < p->len;) {
        uint8_t c = p->data[i];
        if (c == '#') {
            skip_comment(p->data, p->len, &i);
            continue;
        }
        i++;
        if (is_space(c))
            continue;
        if (c != '0' && c != '1') {
            snprintf(err, errcap, "PBM: invalid character 0x%02x in the data", c);
            return -1;
        }
        if (n < total)
            memset(p->rgb + 3 * n++, c == '1' ? 0 : 255, 3);
    }
    if (n < total) {
        snprintf(err, errcap, "PBM data ends after %zu of %zu pixels", n, total);
        return -1;
    }
    return 0;
}

/* P2, P3: decimal samples. */
static int plain_samples(rf_pnm *p, char *err, size_t errcap)
{
    int bands = p->magic == 3 ? 3 : 1;
    /* PIL's mode "I" for a PGM of maxval > 255: scaled to 65535, clipped later */
    unsigned out_max = p->magic == 2 && p->maxval > 255 ? 65535 : 255;
    size_t total = (size_t)p->w * (size_t)p->h * (size_t)bands, n = 0;
    unsigned last = 0;
    int last_open = 0; /* the data ended inside the last token */
    size_t i = p->off;
    while (i < p->len && n < total) {
        uint8_t c = p->data[i];
        if (c == '#') {
            skip_comment(p->data, p->len, &i);
            continue;
        }
        if (is_space(c)) {
            i++;
            continue;
        }
        /* A token: up to whitespace, with comments cut out of it. */
        char tok[PNM_TOKEN_MAX + 2];
        size_t k = 0;
        while (i < p->len && !is_space(p->data[i])) {
            if (p->data[i] == '#') {
                skip_comment(p->data, p->len, &i);
                continue;
            }
            if (k <= PNM_TOKEN_MAX)
                tok[k] = (char)p->data[i];
            k++;
            i++;
        }
        if (k == 0)
            continue; /* a comment alone */
        if (k > PNM_TOKEN_MAX) {
            snprintf(err, errcap, "PNM data: token longer than %d characters", PNM_TOKEN_MAX);
            return -1;
        }
        unsigned long v = 0;
        for (size_t j = 0; j < k; j++) {
            if (tok[j] < '0' || tok[j] > '9') {
                tok[k] = '\0';
                snprintf(err, errcap,
                         "PNM data: '%s' is not a plain decimal number "
                         "(unsupported)",
                         tok);
                return -1;
            }
            v = v * 10 + (unsigned long)(tok[j] - '0');
        }
        if (v > (unsigned long)p->maxval) {
            snprintf(err, errcap, "PNM data: sample %lu over maxval %d", v, p->maxval);
            return -1;
        }
        last = (unsigned)v;
        last_open = i >= p->len;
        uint8_t b = scale(last, (unsigned)p->maxval, out_max);
        if (bands == 3)
            p->rgb[n++] = b;
        else
            memset(p->rgb + 3 * n++, b, 3);
    }
    /* PIL keeps a token the data ends in and stitches it again after every
     * empty read: it repeats until the picture is full. */
    if (n < total && n > 0 && last_open) {
        uint8_t b = scale(last, (unsigned)p->maxval, out_max);
        for (; n < total; n++) {
            if (bands == 3)
                p->rgb[n] = b;
            else
                memset(p->rgb + 3 * n, b, 3);
        }
    }
    if (n < total) {
        snprintf(err, errcap, "PNM data ends after %zu of %zu samples", n, total);
        return -1;
    }
    return 0;
}

/* Binary row y's columns [x0, x1) as RGB. */
static void binary_row(const rf_pnm *p, int y, int x0, int x1, uint8_t *out)
{
    const uint8_t *d = p->data + p->off;
    if (p->magic == 4) {
        const uint8_t *in = d + (size_t)y * (((size_t)p->w + 7) / 8);
        for (int x = x0; x < x1; x++, out += 3)
            out[0] = out[1] = out[2] = (in[x / 8] >> (7 - x % 8)) & 1 ? 0 : 255;
        return;
    }
    int bands = p->magic == 6 ? 3 : 1, nb = p->in_bytes;
    const uint8_t *in = d + (size_t)y * (size_t)p->w * (size_t)bands * (size_t)nb;
    for (int x = x0; x < x1; x++, out += 3) {
        for (int c = 0; c < 3; c++) {
            const uint8_t *s =
                in + ((size_t)x * (size_t)bands + (size_t)(bands == 3 ? c : 0)) * (size_t)nb;
            out[c] = p->lut[nb == 2 ? (unsigned)s[0] << 8 | s[1] : s[0]];
        }
    }
}

static int pnm_region(void *state, rf_geom *g, int max_denom, int check_tail, rf_region *r,
                      char *err, size_t errcap)
{
    (void)max_denom; /* no reduced-scale decoding */
    rf_pnm *p = state;
    memset(r, 0, sizeof *r);
    r->denom = 1;
    r->whole = 1; /* binary data was checked whole, plain data is read whole */
    int plain = p->magic <= 3;
    int bx0 = 0, by0 = 0, bx1 = p->w, by1 = p->h;
    if (!plain)
        rf__geom_bounds(g, p->w, p->h, &bx0, &by0, &bx1, &by1);
    int rows = by1 - by0, cols = bx1 - bx0;
    size_t stride = (size_t)cols * 3;
    if (!plain) { /* all of it must be there, as PIL reads it whole */
        uint64_t row = p->magic == 4   ? ((uint64_t)p->w + 7) / 8
                       : p->magic == 5 ? (uint64_t)p->w * (uint64_t)p->in_bytes
                                       : (uint64_t)p->w * 3 * (uint64_t)p->in_bytes;
        uint64_t need = row * (uint64_t)p->h;
        if (need > p->len - p->off) {
            snprintf(err, errcap, "PNM truncated: the samples need %llu bytes, %llu are left",
                     (unsigned long long)need, (unsigned long long)(p->len - p->off));
            p->data = NULL;
            return RF_E_DECODE;
        }
    }
    if (rf__buf_reserve(&p->rgb, &p->rgb_cap, stride * (size_t)rows) != 0) {
        p->data = NULL;
        snprintf(err, errcap, "out of memory for a %dx%d region", cols, rows);
        return RF_E_NOMEM;
    }
    int rc = 0;
    if (plain) {
        rc = p->magic == 1 ? plain_bits(p, err, errcap) : plain_samples(p, err, errcap);
    } else {
        if (p->magic != 4) {
            /* P5 maxval 65535 is PIL's mode "I" read raw: clipped, not scaled */
            int lut_n = p->in_bytes == 2 ? 65536 : 256;
            int clip = p->magic == 5 && p->maxval == 65535;
            unsigned out_max = p->magic == 5 && p->maxval > 255 ? 65535 : 255;
            for (int v = 0; v < lut_n; v++)
                p->lut[v] = clip ? (uint8_t)(v > 255 ? 255 : v)
                                 : scale((unsigned)v, (unsigned)p->maxval, out_max);
        }
        for (int y = by0; y < by1; y++)
            binary_row(p, y, bx0, bx1, p->rgb + (size_t)(y - by0) * stride);
    }
    p->data = NULL;
    if (rc != 0)
        return RF_E_DECODE;
    r->rows = p->rgb;
    r->stride = stride;
    r->full_w = p->w;
    r->full_h = p->h;
    r->x0 = bx0;
    r->y0 = by0;
    r->w = cols;
    r->h = rows;
    return 0;
}

const rf_format rf__format_pnm = {
    pnm_sniff, pnm_create, pnm_destroy, pnm_header, pnm_region, pnm_abandon,
};
