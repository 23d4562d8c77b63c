/*
 * tar_fields.c - the fields of a tar header and what WebDataset
 * members hold as text, for the tar source (tar.c): octal / base-256
 * numbers, the header checksum, pax records, the integer of a label member.
 * Pure functions of bytes; declared in tar.h.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"
#include "tar.h"

/* Octal field (leading spaces/NULs, digits, then NUL or space), or GNU
 * base-256 (high bit of the first byte). 0, or -1 when malformed. */
int rf__tar_number(const uint8_t *f, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (f[0] & 0x80) {
        if (f[0] & 0x40)
            return -1; /* negative */
        v = f[0] & 0x3f;
        for (size_t i = 1; i < n; i++) {
            if (v >> 55)
                return -1;
            v = (v << 8) | f[i];
        }
        *out = v;
        return 0;
    }
    size_t i = 0;
    while (i < n && (f[i] == ' ' || f[i] == '\0'))
        i++;
    if (i == n) {
        *out = 0;
        return 0;
    }
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v >> 60)
            return -1;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    for (; i < n; i++)
        if (f[i] != ' ' && f[i] != '\0')
            return -1;
    *out = v;
    return 0;
}

int rf__tar_checksum_ok(const uint8_t *h)
{
    uint64_t want;
    if (rf__tar_number(h + 148, 8, &want) != 0)
        return 0;
    /* every byte summed (a loop the compiler vectorizes: a header is checked
     * per member, and per label member on the manifest's path), then the
     * checksum field counted as eight spaces instead */
    uint32_t usum = 0;
    int32_t ssum = 0;
    for (int i = 0; i < TAR_BLOCK; i++) {
        usum += h[i];
        ssum += (int8_t)h[i]; /* old tars summed signed chars */
    }
    for (int i = 148; i < 156; i++) {
        usum += (uint32_t)' ' - h[i];
        ssum += ' ' - (int8_t)h[i];
    }
    return usum == want || (uint64_t)(int64_t)ssum == want;
}

int rf__tar_all_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

/* Copies src[0..n) and a NUL into the growable string *dst. */
int rf__tar_set_str(char **dst, size_t *dcap, size_t *dlen, const char *src, size_t n)
{
    if (n + 1 > *dcap) {
        size_t cap = *dcap ? *dcap : 256;
        while (cap < n + 1)
            cap *= 2;
        char *p = realloc(*dst, cap);
        if (!p)
            return RF_E_NOMEM;
        *dst = p;
        *dcap = cap;
    }
    memcpy(*dst, src, n);
    (*dst)[n] = '\0';
    *dlen = n;
    return 0;
}

/* Parses pax records "LEN key=value\n" for path and size. 0, -1 when
 * malformed, or RF_E_NOMEM. */
int rf__tar_pax_parse(const char *p, size_t n, char **path, size_t *path_cap, size_t *path_len,
                      int *have_path, uint64_t *size, int *have_size)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i, len = 0;
        while (j < n && p[j] >= '0' && p[j] <= '9' && len < (1u << 30))
            len = len * 10 + (size_t)(p[j++] - '0');
        if (j == i || j >= n || p[j] != ' ' || len <= j - i + 1 || i + len > n ||
            p[i + len - 1] != '\n')
            return -1;
        const char *kv = p + j + 1, *end = p + i + len - 1;
        const char *eq = memchr(kv, '=', (size_t)(end - kv));
        if (!eq)
            return -1;
        size_t klen = (size_t)(eq - kv), vlen = (size_t)(end - eq - 1);
        if (klen == 4 && !memcmp(kv, "path", 4)) {
            if (rf__tar_set_str(path, path_cap, path_len, eq + 1, vlen) != 0)
                return RF_E_NOMEM;
            /* a NUL inside the value ends the name, as in a header field */
            *path_len = strlen(*path);
            *have_path = 1;
        } else if (klen == 4 && !memcmp(kv, "size", 4)) {
            uint64_t v = 0;
            if (vlen == 0 || vlen > 19)
                return -1;
            for (size_t k = 0; k < vlen; k++) {
                char c = eq[1 + k];
                if (c < '0' || c > '9')
                    return -1;
                v = v * 10 + (uint64_t)(c - '0');
            }
            *size = v;
            *have_size = 1;
        }
        i += len;
    }
    return 0;
}

/* The member name a ustar header h gives: its prefix (155 bytes at 345), a
 * '/', its name (100 bytes), into name; its length in *len. */
void rf__tar_ustar_name(const uint8_t *h, char name[TAR_BLOCK + 2], size_t *len)
{
    size_t nlen = strnlen((const char *)h, 100), plen = 0;
    if (!memcmp(h + 257, "ustar", 5))
        plen = strnlen((const char *)h + 345, 155);
    *len = 0;
    if (plen) {
        memcpy(name, h + 345, plen);
        name[plen] = '/';
        *len = plen + 1;
    }
    memcpy(name + *len, h, nlen);
    *len += nlen;
    name[*len] = '\0';
}

/* Parses the text of a .cls member: an integer >= 0, blanks around it
 * allowed; at most 18 digits, so at most RF_SOURCE_MAX_LABEL (source.h),
 * the bound every other place a label comes from is held to. */
int rf__tar_parse_label(const char *t, size_t n, int64_t *out)
{
    size_t i = 0;
    while (i < n && isspace((unsigned char)t[i]))
        i++;
    size_t j = i;
    int64_t v = 0;
    if (j < n && t[j] == '+')
        j++;
    size_t d = j;
    while (j < n && isdigit((unsigned char)t[j]) && j - d < 18)
        v = v * 10 + (t[j++] - '0');
    if (j == d)
        return -1;
    while (j < n && isspace((unsigned char)t[j]))
        j++;
    if (j != n)
        return -1;
    *out = v;
    return 0;
}
