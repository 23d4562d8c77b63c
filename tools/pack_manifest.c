/*
 * pack_manifest.c - OUT/manifest.json of ringfeed-pack (or a part's,
 * OUT/manifest-pKofN.json, which `merge` joins): what was packed (counts,
 * classes, options, the part, the kinds of pictures stored, skipped
 * samples) and, per shard, its name, byte size, the SHA-256 of its bytes,
 * how many of its pictures are of each kind ("stored": {"npy": raw
 * pixels, "jpg": JPEGs, "png", ...: originals kept}), its index: each
 * sample's key, label and members (extension, data offset, size), the
 * layout lib/source/manifest.h reads; each sample's picture size
 * ("sizes": width, height, read from its header; 0, 0 when it cannot be),
 * which aspect-ratio buckets use instead of scanning the pictures; and each
 * sample's source
 * ("sources", in the index's order: a folder's path relative to it, a list
 * file's path, "shard.tar:key.ext", "file.parquet:row"), which readers of
 * the index skip. The loader uses the index instead of walking the headers of a
 * shard of that name and size whose headers and labels are as stated
 * (lib/source/tar_check.c); the digest is for anyone checking a copy of the
 * shards (sha256sum), read by no loader: hashing every byte at each start
 * would cost what the index saves.
 *
 * The index is read back from each finished shard (pack_tar_walk), not
 * remembered while writing: shards kept from an earlier run (resume) and
 * new ones are described the same way, by what their bytes say. The shards'
 * entries go to a nameless temporary file first (the kinds they hold are
 * summed before them), then into the manifest: the packer holds one shard's
 * index in memory, not the pack's (hundreds of MB for millions of samples).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "header_scan.h"
#include "kinds.h"
#include "pack.h"
#include "pack_table.h"
#include "ringfeed.h"
#include "sha256.h"
#include "tar.h"

enum { MAX_KINDS = 16 };

/* Pictures of each extension. */
typedef struct kinds {
    char ext[MAX_KINDS][8];
    int64_t n[MAX_KINDS];
    int count;
} kinds;

static void kinds_add(kinds *k, const char *ext, int64_t n)
{
    int i = 0;
    while (i < k->count && strcmp(k->ext[i], ext))
        i++;
    if (i == k->count) {
        if (k->count == MAX_KINDS || strlen(ext) >= sizeof k->ext[0])
            return;
        snprintf(k->ext[k->count++], sizeof k->ext[0], "%s", ext);
    }
    k->n[i] += n;
}

static void kinds_write(FILE *f, const kinds *k)
{
    fputc('{', f);
    for (int i = 0; i < k->count; i++)
        fprintf(f, "%s\"%s\": %lld", i ? ", " : "", k->ext[i], (long long)k->n[i]);
    fputc('}', f);
}

void pack_json_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_cstr(FILE *f, const char *s)
{
    pack_json_str(f, s, strlen(s));
}

/* The index of one shard being read back: the members of the current key
 * are gathered, then written as one sample array. */
typedef struct idx {
    FILE *out, *src; /* the index's samples; their sources */
    FILE *sizes;      /* the samples' picture sizes, "w, h" each, in index order */
    const pack_input *in;
    const pack_done *d;
    kinds k;
    char key[PACK_PATHCAP];
    int have_key;
    int64_t label;
    uint32_t w, h; /* the key's picture (0 x 0: none read) */
    char (*ext)[64];
    uint64_t *off, *len;
    int n, cap;
    int64_t samples;
} idx;

static void idx_flush(idx *x)
{
    if (!x->have_key)
        return;
    fprintf(x->out, "%s\n      [", x->samples ? "," : "");
    json_cstr(x->out, x->key);
    fprintf(x->out, ", %lld", (long long)x->label);
    for (int i = 0; i < x->n; i++) {
        fputs(", ", x->out);
        json_cstr(x->out, x->ext[i]);
        fprintf(x->out, ", %llu, %llu", (unsigned long long)x->off[i],
                (unsigned long long)x->len[i]);
    }
    fputc(']', x->out);
    fprintf(x->sizes, "%s%u, %u", x->samples ? ", " : "", x->w, x->h);
    /* the source of the sample its key names (null: no such key) */
    int64_t p = pack_key_pos(x->d->keys, x->key, strlen(x->key));
    fprintf(x->src, "%s\n      ", x->samples ? "," : "");
    if (p >= 0) {
        char name[PACK_PATHCAP];
        pack_input_source(x->in, x->d->order[p], name, sizeof name);
        json_cstr(x->src, name);
    } else {
        fputs("null", x->src);
    }
    x->samples++;
    x->have_key = 0;
    x->n = 0;
}

static int idx_member(void *ctx, FILE *f, const char *name, uint64_t off, uint64_t size)
{
    idx *x = ctx;
    /* the packer's names: "<key>.<ext>", the key ending at the base name's
     * first '.' (a kept key may have folders) */
    const char *base = strrchr(name, '/');
    const char *dot = strchr(base ? base + 1 : name, '.');
    size_t kl = dot ? (size_t)(dot - name) : 0;
    if (!dot || kl == 0 || kl >= sizeof x->key || strlen(dot + 1) >= 64)
        return 1;
    if (!x->have_key || strncmp(x->key, name, kl) || x->key[kl]) {
        idx_flush(x);
        memcpy(x->key, name, kl);
        x->key[kl] = '\0';
        x->have_key = 1;
        x->label = -1;
        x->w = x->h = 0;
    }
    if (x->n == x->cap) {
        int nc = x->cap ? 2 * x->cap : 8;
        void *a = realloc(x->ext, (size_t)nc * sizeof *x->ext);
        if (a)
            x->ext = a;
        void *b = a ? realloc(x->off, (size_t)nc * sizeof *x->off) : NULL;
        if (b)
            x->off = b;
        void *c = b ? realloc(x->len, (size_t)nc * sizeof *x->len) : NULL;
        if (!c)
            return -1;
        x->len = c;
        x->cap = nc;
    }
    strcpy(x->ext[x->n], dot + 1);
    if (rf__image_ext(dot + 1) || !strcasecmp(dot + 1, "npy"))
        kinds_add(&x->k, dot + 1, 1);
    x->off[x->n] = off;
    x->len[x->n] = size;
    x->n++;
    if (x->w == 0 && (rf__image_ext(dot + 1) || !strcasecmp(dot + 1, "npy"))) {
        uint32_t w, h; /* the picture's size, from its header (core/sizes.h) */
        const char *why;
        if (rf__header_dims_fd(fileno(f), off, size, &w, &h, &why) == 1) {
            x->w = w;
            x->h = h;
        }
    }
    if (!strcasecmp(dot + 1, "cls") && size < 256) {
        char text[256];
        int64_t v;
        if (fseeko(f, (off_t)off, SEEK_SET) == 0 && fread(text, 1, size, f) == size &&
            rf__tar_parse_label(text, size, &v) == 0)
            x->label = v;
    }
    return 0;
}

/* Writes ", \"sha256\": \"<hex>\"" for the shard at path, or nothing when it
 * cannot be read. */
static void write_digest(FILE *f, const char *path)
{
    FILE *in = fopen(path, "rb");
    if (!in)
        return;
    rf_sha256 s;
    rf__sha256_init(&s);
    char buf[16384];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        rf__sha256_update(&s, buf, n);
    int bad = ferror(in);
    fclose(in);
    uint8_t d[32];
    char hex[65];
    rf__sha256_final(&s, d);
    rf__sha256_hex(d, 32, hex);
    if (!bad)
        fprintf(f, ", \"sha256\": \"%s\"", hex);
}

/* Writes ", \"stored\": {...}, \"index\": [...], \"sources\": [...]" for the
 * shard at path, or nothing when it cannot be described (then the loader
 * walks it); its kinds are added to *all. */
static void write_index(FILE *f, const char *path, const pack_input *in, const pack_done *d,
                        kinds *all)
{
    char *buf = NULL, *sbuf = NULL, *zbuf = NULL;
    size_t n = 0, sn = 0, zn = 0;
    idx x = {0};
    x.in = in;
    x.d = d;
    x.out = open_memstream(&buf, &n);
    x.src = open_memstream(&sbuf, &sn);
    x.sizes = open_memstream(&zbuf, &zn);
    int made = x.out && x.src && x.sizes;
    int rc = made ? pack_tar_walk(path, idx_member, &x) : -1;
    if (made)
        idx_flush(&x);
    int bad = 0; /* every stream closed, whichever fails */
    FILE *streams[] = {x.out, x.src, x.sizes};
    for (int i = 0; i < 3; i++)
        if (streams[i] && fclose(streams[i]) != 0)
            bad = 1;
    if (rc == 0 && !bad && x.samples > 0) {
        fprintf(f, ", \"stored\": ");
        kinds_write(f, &x.k);
        /* each sample's picture size ("sizes": buckets need not scan them) */
        fprintf(f, ", \"index\": [%s\n    ], \"sizes\": [%s], \"sources\": [%s\n    ]", buf,
                zbuf, sbuf);
        for (int i = 0; i < x.k.count; i++)
            kinds_add(all, x.k.ext[i], x.k.n[i]);
    }
    free(buf);
    free(sbuf);
    free(zbuf);
    free(x.ext);
    free(x.off);
    free(x.len);
}

static const char *store_name(int store)
{
    return store == PACK_STORE_RAW ? "raw" : store == PACK_STORE_AUTO ? "auto" : "jpeg";
}

static void write_options(FILE *f, const pack_opts *o, const pack_input *in)
{
    fprintf(f,
            "  \"options\": {\"max_side\": %d, \"quality\": %d, \"store\": \"%s\", "
            "\"raw_max_ratio\": %g, \"raw_fraction\": ",
            o->img.max_side, o->img.quality, store_name(o->img.store), o->img.raw_max_ratio);
    if (o->raw_fraction >= 0)
        fprintf(f, "%g", o->raw_fraction);
    else
        fputs("null", f);
    fprintf(f,
            ", \"shard_count\": %lld, \"shard_size\": %llu, \"shuffle\": %s, \"seed\": %llu, "
            "\"keep_original_if_smaller\": %s, \"keep_keys\": %s, \"on_error\": \"%s\", "
            "\"extras\": [",
            o->shard_size ? 0LL : (long long)o->shard_count, (unsigned long long)o->shard_size,
            o->shuffle ? "true" : "false", (unsigned long long)o->seed,
            o->img.keep_original ? "true" : "false", o->keep_keys ? "true" : "false",
            o->skip_errors ? "skip" : "raise");
    for (int e = 0; e < in->nextras; e++) {
        fputs(e ? ", " : "", f);
        json_cstr(f, in->extras[e]);
    }
    fprintf(f, "], \"prefix\": ");
    json_cstr(f, o->prefix);
    if (in->table) {
        static const char *const names[3] = {"image_column", "label_column", "extras_columns"};
        for (int c = 0; c < 3; c++) {
            fprintf(f, ", \"%s\": ", names[c]);
            json_cstr(f, pack_table_column(in->table, c));
        }
    }
    fprintf(f, "},\n");
}

/* A temporary file without a name (in dir where the file system allows it,
 * else where tmpfile puts it): nothing is left behind, and no name in OUT
 * can be a link planted there. NULL when none can be had. */
static FILE *scratch_file(const char *dir)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w+") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    return f ? f : tmpfile();
}

/* Appends what was written to from (from its start) to to. 0 or -1. */
static int copy_file(FILE *from, FILE *to)
{
    char buf[1 << 16];
    size_t n;
    rewind(from);
    while ((n = fread(buf, 1, sizeof buf, from)) > 0)
        if (fwrite(buf, 1, n, to) != n)
            return -1;
    return ferror(from) || ferror(to) ? -1 : 0;
}

int pack_write_manifest(const pack_opts *o, const pack_input *in, const pack_done *d,
                        pack_kinds *out_kinds)
{
    char name[256], path[PACK_PATHCAP], tmp[PACK_PATHCAP];
    pack_manifest_name(o, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", o->out, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", o->out, name);
    FILE *f = pack_create(tmp);
    if (!f)
        return -1;
    int64_t written = 0;
    for (int64_t k = 0; k < d->nshards; k++)
        written += d->si[k].samples;
    fprintf(f, "{\n  \"format\": \"ringfeed-pack 1\",\n  \"source\": ");
    json_cstr(f, o->src);
    fprintf(f, ",\n  \"source_kind\": \"%s\",\n", in->kind);
    fprintf(f, "  \"source_samples\": %lld,\n  \"samples\": %lld,\n  \"skipped\": %lld,\n",
            (long long)in->n, (long long)written, (long long)d->nbad);
    fprintf(f, "  \"nclasses\": %lld,\n  \"classes\": [", (long long)in->nclasses);
    for (int64_t c = 0; c < in->nnames; c++) {
        fputs(c ? ", " : "", f);
        json_cstr(f, pack_input_class(in, c));
    }
    fprintf(f, "],\n");
    write_options(f, o, in);
    if (o->parts)
        fprintf(f,
                "  \"part\": {\"index\": %lld, \"count\": %lld, \"first\": %lld, \"end\": %lld},\n",
                (long long)o->part, (long long)o->parts, (long long)d->first, (long long)d->end);
    /* the shards first, into a temporary file: the kinds they hold come
     * before them */
    FILE *sf = scratch_file(o->out);
    kinds all = {0};
    uint64_t bytes = 0;
    for (int64_t k = 0; sf && k < d->nshards; k++) {
        char sname[PACK_PATHCAP], full[2 * PACK_PATHCAP];
        pack_shard_name(o, k, sname, sizeof sname);
        snprintf(full, sizeof full, "%s/%s", o->out, sname);
        fprintf(sf, "    {\"name\": ");
        json_cstr(sf, sname);
        fprintf(sf, ", \"samples\": %lld, \"bytes\": %llu", (long long)d->si[k].samples,
                (unsigned long long)d->si[k].bytes);
        bytes += d->si[k].bytes;
        write_digest(sf, full);
        write_index(sf, full, in, d, &all);
        fprintf(sf, "}%s\n", k + 1 < d->nshards ? "," : "");
    }
    if (!sf || fflush(sf) != 0 || ferror(sf)) {
        if (sf)
            fclose(sf);
        fclose(f);
        unlink(tmp);
        return -1;
    }
    fprintf(f, "  \"stored\": ");
    kinds_write(f, &all);
    fprintf(f, ",\n  \"shards\": [\n");
    int copied = copy_file(sf, f);
    fclose(sf);
    if (copied != 0) {
        fclose(f);
        unlink(tmp);
        return -1;
    }
    fprintf(f, "  ],\n  \"skipped_samples\": [");
    for (int64_t e = 0; e < d->nbad; e++) {
        char src[PACK_PATHCAP];
        pack_input_name(in, d->order[d->bads[e].pos], src, sizeof src);
        fprintf(f, "%s\n    {\"key\": %lld, \"source\": ", e ? "," : "", (long long)d->bads[e].pos);
        json_cstr(f, src);
        fprintf(f, ", \"reason\": ");
        json_cstr(f, d->bads[e].reason);
        fputc('}', f);
    }
    fprintf(f, "%s]\n}\n", d->nbad ? "\n  " : "");
    if (fclose(f) != 0)
        return -1;
    memset(out_kinds, 0, sizeof *out_kinds);
    for (int i = 0; i < all.count; i++) {
        if (!strcmp(all.ext[i], "npy"))
            out_kinds->raw += all.n[i];
        else if (!strcmp(all.ext[i], "jpg"))
            out_kinds->jpeg += all.n[i];
        else
            out_kinds->other += all.n[i];
    }
    out_kinds->bytes = bytes;
    return rename(tmp, path);
}
