/*
 * pack_tar.c - the tar side of ringfeed-pack: members written with fixed
 * metadata (the same input gives the same bytes), and existing tars read
 * back member by member: the packer's own shards (resume, the manifest's
 * index) and a tar source's member extensions (what --extras passes through
 * by default). Reading uses the library's header-field parsers
 * (lib/source/tar.h), so it takes GNU long names and pax paths as the
 * loader does.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kinds.h"
#include "pack.h"
#include "ringfeed.h"
#include "tar.h"

static void octal(char *field, size_t width, uint64_t v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%0*llo", (int)width - 1, (unsigned long long)v);
    memcpy(field, tmp + (size_t)n - (width - 1), width - 1);
    field[width - 1] = '\0';
}

/* Where name[0..len) is cut into ustar's prefix and name: 0 when it fits
 * the name field alone, the position of the '/' otherwise, -1 when it fits
 * neither way. */
static long name_split(const char *name, size_t len)
{
    if (len < 100)
        return 0;
    /* a '/' with 1..99 bytes after it and at most 155 before */
    for (size_t i = len - 1; i > 0 && len - i - 1 < 100; i--)
        if (name[i] == '/' && i < len - 1 && i <= 155)
            return (long)i;
    return -1;
}

int pack_tar_name_fits(const char *name, size_t len)
{
    return name_split(name, len) >= 0;
}

int pack_tar_member(FILE *f, const char *name, const void *data, size_t len)
{
    uint8_t h[512] = {0};
    size_t nl = strlen(name);
    long cut = name_split(name, nl);
    if (cut < 0)
        return -1;
    if (cut > 0) {
        memcpy(h + 345, name, (size_t)cut);
        memcpy(h, name + cut + 1, nl - (size_t)cut - 1);
    } else {
        memcpy(h, name, nl);
    }
    octal((char *)h + 100, 8, 0644);
    octal((char *)h + 108, 8, 0);
    octal((char *)h + 116, 8, 0);
    octal((char *)h + 124, 12, len);
    octal((char *)h + 136, 12, 0);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int k = 0; k < 512; k++)
        sum += h[k];
    snprintf((char *)h + 148, 8, "%06o", sum);
    static const uint8_t zero[512];
    if (fwrite(h, 1, 512, f) != 512 || fwrite(data, 1, len, f) != len)
        return -1;
    size_t pad = (512 - len % 512) % 512;
    return fwrite(zero, 1, pad, f) == pad ? 0 : -1;
}

int pack_tar_walk(const char *path, pack_tar_fn *fn, void *ctx)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        if (f)
            fclose(f);
        return -1;
    }
    uint64_t fsize = (uint64_t)st.st_size, pos = 0;
    char *lname = NULL, *ext = NULL;
    size_t lcap = 0, llen = 0, ecap = 0;
    int have_lname = 0, have_size = 0, rc = 0;
    uint64_t pax_size = 0;
    uint8_t h[TAR_BLOCK];
    while (rc == 0 && pos + TAR_BLOCK <= fsize) {
        uint64_t size;
        if (fseeko(f, (off_t)pos, SEEK_SET) != 0 || fread(h, 1, TAR_BLOCK, f) != TAR_BLOCK) {
            rc = -1;
            break;
        }
        if (rf__tar_all_zero(h, TAR_BLOCK))
            break;
        if (!rf__tar_checksum_ok(h) || rf__tar_number(h + 124, 12, &size) != 0) {
            rc = -1;
            break;
        }
        char type = (char)h[156];
        if (have_size && type != 'x' && type != 'g' && type != 'L' && type != 'K')
            size = pax_size;
        uint64_t data = pos + TAR_BLOCK;
        if (size > fsize - data) {
            rc = -1;
            break;
        }
        pos = data + (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
        if (type == 'L' || type == 'x') {
            char *np = size + 1 > ecap && size <= (1 << 20) ? realloc(ext, size + 1) : ext;
            if (size > (1 << 20) || !np) {
                rc = -1;
                break;
            }
            if (np != ext) {
                ext = np;
                ecap = size + 1;
            }
            if (fseeko(f, (off_t)data, SEEK_SET) != 0 || fread(ext, 1, size, f) != size) {
                rc = -1;
                break;
            }
            ext[size] = '\0';
            if (type == 'L') {
                have_lname = 1;
                rc = rf__tar_set_str(&lname, &lcap, &llen, ext, strnlen(ext, size)) ? -1 : 0;
            } else if (rf__tar_pax_parse(ext, size, &lname, &lcap, &llen, &have_lname, &pax_size,
                                         &have_size) != 0) {
                rc = -1;
            }
            continue;
        }
        if (type == 'K' || type == 'g')
            continue;
        char name[TAR_BLOCK + 2];
        if (!have_lname) {
            size_t nlen = strnlen((const char *)h, 100), plen = 0, at = 0;
            if (!memcmp(h + 257, "ustar", 5))
                plen = strnlen((const char *)h + 345, 155);
            if (plen) {
                memcpy(name, h + 345, plen);
                name[plen] = '/';
                at = plen + 1;
            }
            memcpy(name + at, h, nlen);
            name[at + nlen] = '\0';
        }
        const char *mname = have_lname ? lname : name;
        have_lname = have_size = 0;
        if (type == '0' || type == '\0' || type == '7')
            rc = fn(ctx, f, mname, data, size);
    }
    free(lname);
    free(ext);
    fclose(f);
    return rc;
}

typedef struct exts {
    char (*e)[RF_SOURCE_MAX_EXT + 1];
    int n;
    char *err;
    size_t errcap;
} exts;

static int collect_ext(void *ctx, FILE *f, const char *name, uint64_t off, uint64_t size)
{
    (void)f, (void)off, (void)size;
    exts *x = ctx;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strchr(base, '.');
    if (!dot || dot == base || !strncmp(name, "__", 2))
        return 0; /* no key, or webdataset's own metadata */
    char ext[RF_SOURCE_MAX_EXT + 1];
    size_t n = strlen(dot + 1);
    /* pictures, raw ones (.npy) included, and the label are never extras */
    if (n == 0 || rf__image_ext(dot + 1) || !strcasecmp(dot + 1, "npy") ||
        !strcasecmp(dot + 1, "cls"))
        return 0;
    if (n > RF_SOURCE_MAX_EXT) {
        snprintf(x->err, x->errcap, "member %s: extension longer than %d bytes", name,
                 RF_SOURCE_MAX_EXT);
        return -2;
    }
    for (size_t i = 0; i <= n; i++)
        ext[i] = (char)tolower((unsigned char)dot[1 + i]);
    for (int i = 0; i < x->n; i++)
        if (!strcmp(x->e[i], ext))
            return 0;
    if (x->n == RF_SOURCE_MAX_EXTRAS) {
        snprintf(x->err, x->errcap,
                 "more than %d kinds of extra members (at %s): name the ones to keep with "
                 "--extras",
                 RF_SOURCE_MAX_EXTRAS, name);
        return -2;
    }
    memcpy(x->e[x->n++], ext, n + 1);
    return 0;
}

static int cmp_ext(const void *a, const void *b)
{
    return strcmp(a, b);
}

int pack_tar_exts(const char *spec, rf_source_opts *o, char *buf, size_t cap, char *err,
                  size_t errcap)
{
    char e[RF_SOURCE_MAX_EXTRAS][RF_SOURCE_MAX_EXT + 1];
    exts x = {e, 0, err, errcap};
    rf_strlist paths = {0};
    int rc = rf__source_files(spec, &paths, err, errcap) ? -1 : 0;
    for (size_t i = 0; rc == 0 && i < paths.n; i++) {
        rc = pack_tar_walk(rf__strlist_at(&paths, i), collect_ext, &x);
        if (rc == -1)
            snprintf(err, errcap, "%s: cannot read it as a tar", rf__strlist_at(&paths, i));
    }
    rf__strlist_free(&paths);
    if (rc != 0)
        return -1;
    qsort(e, (size_t)x.n, sizeof e[0], cmp_ext);
    size_t at = 0;
    for (int i = 0; i < x.n; i++) {
        size_t n = strlen(e[i]) + 1;
        if (at + n > cap) {
            snprintf(err, errcap, "extensions too long");
            return -1;
        }
        memcpy(buf + at, e[i], n);
        o->extras[i] = buf + at;
        at += n;
    }
    o->nextras = x.n;
    return 0;
}
