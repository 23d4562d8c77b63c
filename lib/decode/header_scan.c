/*
 * header_scan.c - pictures' sizes from their headers (see header_scan.h).
 *
 * Sizes are those the decoders report (decode_*.c): a JPEG's SOF frame
 * size, PNG's IHDR, WebP's canvas (VP8X) or frame, a BMP's |height| (a
 * negative one is top-down), PNM's first two numbers. A size of 0 is
 * malformed. Nothing here allocates.
 */
#include "header_scan.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static uint32_t be16(const uint8_t *p)
{
    return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t le16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t le24(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
}

static uint32_t le32(const uint8_t *p)
{
    return le24(p) | (uint32_t)p[3] << 24;
}

static int fail(const char **why, const char *msg)
{
    *why = msg;
    return -1;
}

/* More bytes, appended to those at hand (a header read whole), unless
 * there are no more or the header would grow too long. */
static int more(size_t n, uint64_t base, uint64_t total, uint64_t *next, const char **why,
                const char *what)
{
    if (base + n >= total || n >= RF__HEADER_MAX)
        return fail(why, what);
    *next = base + n;
    return 0;
}

/* JPEG: from a marker at base (SOI at 0), segment by segment to an SOFn. */
static int jpeg_dims(const uint8_t *p, size_t n, uint64_t base, uint64_t total, uint32_t *w,
                     uint32_t *h, uint64_t *next, const char **why)
{
    size_t at = 0;
    if (base == 0) {
        if (n < 2 || p[0] != 0xFF || p[1] != 0xD8)
            return fail(why, "not a JPEG");
        at = 2;
    }
    for (;;) {
        while (at < n && p[at] == 0xFF && at + 1 < n && p[at + 1] == 0xFF)
            at++; /* fill bytes before a marker */
        if (at + 4 > n) {
            if (base + at >= total)
                return fail(why, "JPEG ends before its frame header (no SOF)");
            *next = base + at;
            return 0;
        }
        if (p[at] != 0xFF)
            return fail(why, "JPEG: a segment does not start with a marker");
        uint8_t m = p[at + 1];
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { /* standalone markers */
            at += 2;
            continue;
        }
        if (m == 0xD8 || m == 0xD9 || m == 0xDA)
            return fail(why, "JPEG: no frame header (SOF) before the scan");
        uint32_t len = be16(p + at + 2);
        if (len < 2)
            return fail(why, "JPEG: a segment length under 2");
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            if (len < 8)
                return fail(why, "JPEG: a frame header (SOF) too short");
            if (at + 9 > n) {
                *next = base + at; /* the SOF read anew from its marker */
                return base + at + 9 > total ? fail(why, "JPEG: truncated frame header") : 0;
            }
            *h = be16(p + at + 5);
            *w = be16(p + at + 7);
            if (*w == 0 || *h == 0)
                return fail(why, "JPEG: a frame size of 0 (DNL is not supported)");
            return 1;
        }
        uint64_t after = base + at + 2 + len;
        if (after >= total)
            return fail(why, "JPEG ends inside a segment before its frame header");
        if (at + 2 + len + 4 > n) { /* the next marker lies past what is here */
            *next = after;
            return 0;
        }
        at += 2 + (size_t)len;
    }
}

static int png_dims(const uint8_t *p, size_t n, uint64_t total, uint32_t *w, uint32_t *h,
                    uint64_t *next, const char **why)
{
    if (n < 24)
        return more(n, 0, total, next, why, "PNG: truncated before IHDR");
    if (memcmp(p + 12, "IHDR", 4) != 0)
        return fail(why, "PNG: the first chunk is not IHDR");
    *w = be32(p + 16);
    *h = be32(p + 20);
    if (*w == 0 || *h == 0 || *w > 0x7fffffffu || *h > 0x7fffffffu)
        return fail(why, "PNG: a size of 0 or above 2^31 - 1");
    return 1;
}

static int webp_dims(const uint8_t *p, size_t n, uint64_t total, uint32_t *w, uint32_t *h,
                     uint64_t *next, const char **why)
{
    if (n < 30)
        return more(n, 0, total, next, why, "WebP: truncated header");
    const uint8_t *c = p + 12;
    if (!memcmp(c, "VP8 ", 4)) {
        if (p[23] != 0x9d || p[24] != 0x01 || p[25] != 0x2a)
            return fail(why, "WebP: a VP8 frame without its start code");
        *w = le16(p + 26) & 0x3fff;
        *h = le16(p + 28) & 0x3fff;
    } else if (!memcmp(c, "VP8L", 4)) {
        if (p[20] != 0x2f)
            return fail(why, "WebP: a VP8L stream without its signature");
        uint32_t v = le32(p + 21);
        *w = (v & 0x3fff) + 1;
        *h = (v >> 14 & 0x3fff) + 1;
    } else if (!memcmp(c, "VP8X", 4)) {
        *w = le24(p + 24) + 1;
        *h = le24(p + 27) + 1;
    } else {
        return fail(why, "WebP: the first chunk is not VP8, VP8L or VP8X");
    }
    if (*w == 0 || *h == 0)
        return fail(why, "WebP: a size of 0");
    return 1;
}

static int bmp_dims(const uint8_t *p, size_t n, uint64_t total, uint32_t *w, uint32_t *h,
                    uint64_t *next, const char **why)
{
    if (n < 26)
        return more(n, 0, total, next, why, "BMP: truncated header");
    uint32_t dib = le32(p + 14);
    if (dib == 12) { /* OS/2 BITMAPCOREHEADER: 16-bit sizes */
        *w = le16(p + 18);
        *h = le16(p + 20);
    } else if (dib >= 16 && dib <= 4096) {
        int32_t sw = (int32_t)le32(p + 18), sh = (int32_t)le32(p + 22);
        if (sw <= 0 || sh == INT32_MIN)
            return fail(why, "BMP: a width under 1");
        *w = (uint32_t)sw;
        *h = (uint32_t)(sh < 0 ? -sh : sh); /* negative: rows top-down */
    } else {
        return fail(why, "BMP: an info header of an unknown size");
    }
    if (*w == 0 || *h == 0)
        return fail(why, "BMP: a size of 0");
    return 1;
}

static int is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* PNM: the magic, then width and height as PIL's tokeniser reads them
 * (tokens of at most 10 characters, '#' comments to the end of the line). */
static int pnm_dims(const uint8_t *p, size_t n, uint64_t total, uint32_t *w, uint32_t *h,
                    uint64_t *next, const char **why)
{
    size_t at = 2;
    uint32_t v[2];
    for (int k = 0; k < 2; k++) {
        char tok[12];
        size_t len = 0;
        for (;;) {
            if (at >= n) {
                if (len == 0 || n < total)
                    return more(n, 0, total, next, why, "PNM: truncated header");
                break;
            }
            uint8_t c = p[at++];
            if (c == '#') {
                while (at < n && p[at] != '\r' && p[at] != '\n')
                    at++;
                if (at >= n)
                    return more(n, 0, total, next, why, "PNM: truncated header");
                at++;
                continue;
            }
            if (is_space(c)) {
                if (len == 0)
                    continue;
                break;
            }
            if (c < '0' || c > '9' || len == 10)
                return fail(why, "PNM: a size is not a decimal number of 10 digits at most");
            tok[len++] = (char)c;
        }
        uint64_t x = 0;
        for (size_t i = 0; i < len; i++)
            x = x * 10 + (uint64_t)(tok[i] - '0');
        if (x == 0 || x > 0x7fffffff)
            return fail(why, "PNM: a size of 0 or above 2^31 - 1");
        v[k] = (uint32_t)x;
    }
    *w = v[0];
    *h = v[1];
    return 1;
}

/* A raw .npy array: the header's 'shape': (h, w) or (h, w, c). */
static int npy_dims(const uint8_t *p, size_t n, uint64_t total, uint32_t *w, uint32_t *h,
                    uint64_t *next, const char **why)
{
    if (n < 10)
        return more(n, 0, total, next, why, "npy: truncated header");
    size_t hl = p[6] == 1 ? le16(p + 8) : (n < 12 ? 0 : le32(p + 8));
    size_t start = p[6] == 1 ? 10 : 12;
    if (p[6] != 1 && n < 12)
        return more(n, 0, total, next, why, "npy: truncated header");
    if (hl > RF__HEADER_MAX)
        return fail(why, "npy: a header longer than 64 KiB");
    if (start + hl > n)
        return more(n, 0, total, next, why, "npy: truncated header");
    const char *d = (const char *)p + start, *end = d + hl;
    const char *s = NULL;
    for (const char *q = d; q + 8 <= end; q++)
        if (!memcmp(q, "'shape'", 7)) {
            s = q + 7;
            break;
        }
    if (!s)
        return fail(why, "npy: no 'shape' in the header");
    while (s < end && *s != '(')
        s++;
    uint64_t dim[2] = {0, 0};
    int k = 0;
    for (s++; s < end && *s != ')' && k < 2; s++) {
        if (*s >= '0' && *s <= '9') {
            if (dim[k] > 0x7fffffff)
                return fail(why, "npy: a dimension too large");
            dim[k] = dim[k] * 10 + (uint64_t)(*s - '0');
        } else if (*s == ',') {
            k++;
        } else if (*s != ' ') {
            return fail(why, "npy: a malformed shape");
        }
    }
    if (dim[0] == 0 || dim[1] == 0 || dim[0] > 0x7fffffff || dim[1] > 0x7fffffff)
        return fail(why, "npy: not a picture's shape (h, w[, c])");
    *h = (uint32_t)dim[0];
    *w = (uint32_t)dim[1];
    return 1;
}

int rf__header_dims(const uint8_t *p, size_t n, uint64_t base, uint64_t total, uint32_t *w,
                    uint32_t *h, uint64_t *next, const char **why)
{
    *why = "";
    if (base > 0) /* only a JPEG reads from anywhere but its start */
        return jpeg_dims(p, n, base, total, w, h, next, why);
    if (n >= 2 && p[0] == 0xFF && p[1] == 0xD8)
        return jpeg_dims(p, n, 0, total, w, h, next, why);
    if (n >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8))
        return png_dims(p, n, total, w, h, next, why);
    if (n >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4))
        return webp_dims(p, n, total, w, h, next, why);
    if (n >= 2 && p[0] == 'B' && p[1] == 'M')
        return bmp_dims(p, n, total, w, h, next, why);
    if (n >= 3 && p[0] == 'P' && p[1] >= '1' && p[1] <= '6' && is_space(p[2]))
        return pnm_dims(p, n, total, w, h, next, why);
    if (n >= 8 && !memcmp(p, "\x93NUMPY", 6))
        return npy_dims(p, n, total, w, h, next, why);
    if (n < 12 && n < total) {
        *next = n;
        return 0;
    }
    return fail(why, "not a picture of a known format");
}

int rf__header_dims_fd(int fd, uint64_t off, uint64_t len, uint32_t *w, uint32_t *h,
                       const char **why)
{
    uint8_t buf[RF__HEADER_MAX + RF__HEADER_FIRST];
    size_t have = 0;
    uint64_t base = 0, at = 0; /* at: where the next read starts, in the picture */
    for (int round = 0; round < RF__HEADER_ROUNDS; round++) {
        size_t want = len - at < RF__HEADER_FIRST ? (size_t)(len - at) : RF__HEADER_FIRST;
        if (at != base + have) { /* anew, from a JPEG marker */
            base = at;
            have = 0;
        }
        if (have + want > sizeof buf)
            return fail(why, "header longer than 64 KiB");
        size_t got = 0;
        while (got < want) {
            ssize_t r = pread(fd, buf + have + got, want - got, (off_t)(off + at + got));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return fail(why, r < 0 ? "read error" : "file shorter than its member");
            got += (size_t)r;
        }
        have += got;
        uint64_t next = 0;
        int rc = rf__header_dims(buf, have, base, len, w, h, &next, why);
        if (rc != 0)
            return rc;
        if (next >= len)
            return fail(why, "header past the end");
        at = next;
    }
    return fail(why, "header not found in its first reads");
}
