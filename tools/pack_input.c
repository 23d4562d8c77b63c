/*
 * pack_input.c - what ringfeed-pack packs, whatever it is: the library's
 * own index (an image folder, a list file, tar shards: source.h), or tables
 * (Parquet files, Arrow files, a folder datasets' save_to_disk wrote), whose
 * rows a Python process reads with pyarrow and serves over a pipe
 * (pack_table.c). The write loop sees samples by index: their labels, their
 * sources for the manifest, their own keys for --keep-keys, and their bytes
 * - read by the workers from files (pack_input_read), or asked for by the
 * main thread a chunk ahead and received from the pipe (pack_input_ask,
 * pack_input_fetch).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pack.h"
#include "pack_table.h"
#include "ringfeed.h"
#include "kinds.h"
#include "source_remote.h"

/* ---- opening ------------------------------------------------------------ */

/* 1 when path names a table: a .parquet or .arrow file, or a folder that
 * datasets' save_to_disk wrote (state.json beside dataset_info.json). */
static int is_table(const char *path)
{
    size_t n = strlen(path);
    if ((n > 8 && !strcasecmp(path + n - 8, ".parquet")) ||
        (n > 6 && !strcasecmp(path + n - 6, ".arrow")))
        return 1;
    char p[PACK_PATHCAP + 32];
    struct stat st;
    snprintf(p, sizeof p, "%s/state.json", path);
    if (stat(p, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    snprintf(p, sizeof p, "%s/dataset_info.json", path);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* How many of o->src's '\n'-separated entries name tables, of how many. */
static void count_tables(const char *src, int *tables, int *entries)
{
    *tables = *entries = 0;
    for (const char *p = src; *p;) {
        size_t n = strcspn(p, "\n");
        char e[PACK_PATHCAP];
        if (n > 0 && n < sizeof e) {
            memcpy(e, p, n);
            e[n] = '\0';
            *tables += is_table(e);
            (*entries)++;
        }
        p += n + (p[n] == '\n');
    }
}

/* --extras "txt,json": distinct extensions, lowercased, neither a picture nor
 * the label. 0, or -1 with the reason in err. */
static int parse_extras(const char *arg, rf_source_opts *so, char *buf, size_t cap, char *err)
{
    size_t at = 0;
    for (const char *p = arg; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n > RF_SOURCE_MAX_EXT || memchr(p, '/', n) || at + n + 1 > cap ||
            so->nextras == RF_SOURCE_MAX_EXTRAS) {
            snprintf(err, PACK_ERRCAP,
                     "expected up to %d extensions of 1..%d bytes, comma-separated",
                     RF_SOURCE_MAX_EXTRAS, RF_SOURCE_MAX_EXT);
            return -1;
        }
        char *e = buf + at;
        for (size_t i = 0; i < n; i++)
            e[i] = (char)tolower((unsigned char)p[i]);
        e[n] = '\0';
        int dup = 0;
        for (int i = 0; i < so->nextras; i++)
            dup |= !strcmp(so->extras[i], e);
        if (dup || !strcmp(e, "cls") || rf__image_ext(e)) {
            snprintf(err, PACK_ERRCAP, "\"%s\": %s", e,
                     dup ? "named twice" : "the picture and the label are not extras");
            return -1;
        }
        so->extras[so->nextras++] = e;
        at += n + 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* The library's index of o->src: labelled, a tar source's extras indexed. */
static int open_index(pack_input *in, pack_opts *o)
{
    rf_source *s = &in->s;
    char err[PACK_ERRCAP];
    /* The packer reads each sample's bytes from a local file: shards in
     * object storage are copied first (docs/pack.md). The URL is not
     * repeated: it may hold a secret. */
    if (rf__source_remote.is_url(o->src)) {
        fprintf(stderr, "ringfeed-pack: the source is remote (s3://, http:// or https://): copy "
                        "the shards to a folder first (aws s3 sync, curl) and pack the copy\n");
        return 2;
    }
    const rf_source_opts base = {0};
    if (rf__source_open_ex(s, o->src, &base, err, sizeof err) != 0) {
        fprintf(stderr, "ringfeed-pack: %s: %s\n", o->src, err);
        return 1;
    }
    if (s->kind == RF_SOURCE_RECORDS || (s->labels && s->n > 0 && s->labels[0] < 0)) {
        fprintf(stderr, "ringfeed-pack: %s: only labelled sources are packed\n", o->src);
        return 1;
    }
    if (o->extras_arg && strcmp(o->extras_arg, "none") && s->kind != RF_SOURCE_TAR) {
        fprintf(stderr, "ringfeed-pack: %s: --extras names members of tar shards\n", o->src);
        return 2;
    }
    /* tar: index again, now with the extra members to pass through */
    static char extbuf[RF_SOURCE_MAX_EXTRAS * (RF_SOURCE_MAX_EXT + 1)];
    rf_source_opts so = base;
    if (s->kind == RF_SOURCE_TAR && !(o->extras_arg && !strcmp(o->extras_arg, "none"))) {
        int e = o->extras_arg ? parse_extras(o->extras_arg, &so, extbuf, sizeof extbuf, err)
                              : pack_tar_exts(o->src, &so, extbuf, sizeof extbuf, err, sizeof err);
        rf__source_close(s);
        if (e != 0 || rf__source_open_ex(s, o->src, &so, err, sizeof err) != 0) {
            fprintf(stderr, "ringfeed-pack: %s: %s\n", e ? "--extras" : o->src, err);
            return e ? 2 : 1;
        }
        in->nextras = so.nextras;
        memcpy(in->extras, so.extras, sizeof in->extras);
    }
    for (int e = 0; e < in->nextras; e++)
        if (!strcmp(in->extras[e], "npy") && o->img.store != PACK_STORE_JPEG) {
            fprintf(stderr,
                    "ringfeed-pack: --extras npy: raw pictures are <key>.npy members "
                    "(--store %s); keep .npy extras with --store jpeg\n",
                    o->img.store == PACK_STORE_RAW ? "raw" : "auto");
            return 2;
        }
    in->n = s->n;
    in->nclasses = s->nclasses;
    in->nnames = s->class_off ? s->nclasses : 0;
    in->kind = s->kind == RF_SOURCE_FOLDER ? "folder" : s->kind == RF_SOURCE_LIST ? "list" : "tar";
    if (s->kind == RF_SOURCE_FOLDER) {
        in->root = o->src;
    } else if (s->kind == RF_SOURCE_LIST) {
        const char *slash = strrchr(o->src, '/');
        in->root = slash ? strndup(o->src, (size_t)(slash - o->src)) : NULL;
        in->root_owned = 1;
    }
    return 0;
}

int pack_input_open(pack_input *in, pack_opts *o)
{
    memset(in, 0, sizeof *in);
    int tables, entries;
    count_tables(o->src, &tables, &entries);
    if (tables > 0 && tables < entries) {
        fprintf(stderr,
                "ringfeed-pack: %s: tables (.parquet, .arrow) are packed alone, not "
                "with other sources\n",
                o->src);
        return 2;
    }
    if (tables == 0) {
        if (o->image_column || o->label_column || o->extras_columns) {
            fprintf(stderr, "ringfeed-pack: --image-column, --label-column and "
                            "--extras-columns name columns of tables (.parquet, .arrow)\n");
            return 2;
        }
        return open_index(in, o);
    }
    if (o->extras_arg) {
        fprintf(stderr, "ringfeed-pack: --extras names members of tar shards; a table's "
                        "columns are kept with --extras-columns\n");
        return 2;
    }
    if (!(in->table = pack_table_open(o, o->keep_keys)))
        return 1;
    in->n = pack_table_rows(in->table);
    in->nclasses = pack_table_nclasses(in->table);
    in->nnames = pack_table_nnames(in->table);
    in->kind = "table";
    if (pack_table_has_extras(in->table)) {
        in->nextras = 1;
        in->extras[0] = "json";
    }
    return 0;
}

void pack_input_close(pack_input *in)
{
    rf__source_close(&in->s);
    pack_table_close(in->table);
    if (in->root_owned)
        free((char *)in->root);
    memset(in, 0, sizeof *in);
}

const char *pack_input_class(const pack_input *in, int64_t c)
{
    if (in->table)
        return pack_table_name(in->table, c);
    return in->s.arena + in->s.class_off[c];
}

/* path without the folder in->root and its '/', when it starts so. */
static const char *relative(const pack_input *in, const char *path)
{
    size_t rl = in->root ? strlen(in->root) : 0;
    while (rl > 1 && in->root[rl - 1] == '/')
        rl--;
    if (rl && !strncmp(path, in->root, rl) && path[rl] == '/')
        return path + rl + 1;
    return path;
}

int pack_input_source(const pack_input *in, int64_t i, char *buf, size_t cap)
{
    if (in->table)
        return pack_table_source(in->table, i, buf, cap);
    if (in->s.kind == RF_SOURCE_TAR)
        return rf__source_name(&in->s, i, buf, cap);
    return snprintf(buf, cap, "%s", relative(in, rf__source_path(&in->s, i)));
}

int pack_input_name(const pack_input *in, int64_t i, char *buf, size_t cap)
{
    if (in->table)
        return pack_table_source(in->table, i, buf, cap);
    return rf__source_name(&in->s, i, buf, cap);
}

int pack_input_key(const pack_input *in, int64_t i, char *buf, size_t cap)
{
    if (in->table)
        return pack_table_key(in->table, i, buf, cap);
    if (in->s.kind == RF_SOURCE_TAR)
        return rf__source_key(&in->s, i, buf, cap);
    /* a file's path without its extension (from the base name's last '.') */
    const char *p = relative(in, rf__source_path(&in->s, i));
    const char *base = strrchr(p, '/');
    const char *dot = strrchr(base ? base + 1 : p, '.');
    return snprintf(buf, cap, "%.*s", (int)(dot ? (size_t)(dot - p) : strlen(p)), p);
}

/* ---- reading ------------------------------------------------------------ */

void pack_item_free(pack_item *it)
{
    free(it->data);
    it->data = NULL;
}

int pack_input_fetched(const pack_input *in)
{
    return in->table != NULL;
}

int pack_input_ask(pack_input *in, const int64_t *idx, int64_t n)
{
    return pack_table_ask(in->table, idx, n);
}

int pack_input_fetch(pack_input *in, const int64_t *idx, int64_t n, pack_item *items)
{
    return pack_table_fetch(in->table, idx, n, items);
}

static int item_error(pack_item *it, int rc, const char *what, int e)
{
    snprintf(it->err, sizeof it->err, "%s%s%s", what, e ? ": " : "", e ? strerror(e) : "");
    it->rc = rc;
    return rc;
}

int pack_input_read(const pack_input *in, int64_t i, size_t prefix, pack_item *it)
{
    const rf_source *s = &in->s;
    int ranged;
    uint64_t off, n;
    memset(it, 0, sizeof *it);
    it->label = rf__source_label(s, i);
    rf__source_extent(s, i, &ranged, &off, &n);
    int fd = open(rf__source_path(s, i), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return item_error(it, RF_E_IO, "cannot open", errno);
    if (!ranged) {
        struct stat st;
        if (fstat(fd, &st) != 0) {
            close(fd);
            return item_error(it, RF_E_IO, "cannot stat", errno);
        }
        off = 0;
        n = (uint64_t)st.st_size;
    }
    uint64_t rel = 0, ilen = n;
    if (s->nextras > 0)
        rf__source_image_in_span(s, i, &rel, &ilen);
    if (prefix) { /* the picture's first bytes alone */
        off += rel;
        n = ilen < prefix ? ilen : prefix;
        rel = 0;
        ilen = n;
    }
    uint8_t *b = malloc(n ? n : 1);
    if (!b) {
        close(fd);
        return item_error(it, RF_E_NOMEM, "out of memory", 0);
    }
    uint64_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, b + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(b);
            close(fd);
            return item_error(it, RF_E_IO, r < 0 ? "read failed" : "read failed: file too short",
                              r < 0 ? errno : 0);
        }
        got += (uint64_t)r;
    }
    close(fd);
    it->data = b;
    it->len = n;
    it->img_off = rel;
    it->img_len = ilen;
    for (int e = 0; e < s->nextras; e++) {
        uint64_t xr = 0;
        uint32_t xl = RF_SOURCE_ABSENT;
        if (prefix || !rf__source_extra_in_span(s, i, e, &xr, &xl))
            xl = RF_SOURCE_ABSENT;
        it->xoff[e] = (uint32_t)xr;
        it->xlen[e] = xl;
    }
    return 0;
}
