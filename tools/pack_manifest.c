/*
 * pack_manifest.c - OUT/manifest.json of ringfeed-pack: what was packed
 * (counts, classes, options, skipped samples) and, per shard, its name, byte
 * size, the SHA-256 of its bytes and its index: each sample's key, label and
 * members (extension, data offset, size), the layout lib/source/manifest.h
 * reads, and each sample's picture size ("sizes": width, height, read from
 * its header; 0, 0 when it cannot be), which aspect-ratio buckets use
 * instead of scanning the pictures. The loader uses the index instead of
 * walking the headers of a
 * shard of that name and size whose headers and labels are as stated
 * (lib/source/tar_check.c); the digest is for anyone checking a copy of the
 * shards (sha256sum), read by no loader: hashing every byte at each start
 * would cost what the index saves.
 *
 * The index is read back from each finished shard (pack_tar_walk), not
 * remembered while writing: shards kept from an earlier run (resume) and
 * new ones are described the same way, by what their bytes say.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "header_scan.h"
#include "pack.h"
#include "ringfeed.h"
#include "sha256.h"
#include "tar.h"

static void json_str(FILE *f, const char *s, size_t n)
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
    json_str(f, s, strlen(s));
}

/* The index of one shard being read back: the members of the current key
 * are gathered, then written as one sample array. */
typedef struct idx {
    FILE *out;
    FILE *sizes; /* the samples' picture sizes, "w, h" each, in index order */
    char key[256];
    int have_key;
    int64_t label;
    uint32_t w, h; /* the key's picture (0 x 0: none read) */
    char (*ext)[64];
    uint64_t *off, *len;
    int n, cap;
    int64_t samples;
} idx;

/* A member the loader takes as a sample's picture (or the raw pixels). */
static int picture_ext(const char *ext)
{
    static const char *const pics[] = {"jpg", "jpeg", "png", "ppm", "pgm", "pbm", "bmp",
                                       "webp", "tif", "tiff", "npy"};
    for (size_t i = 0; i < sizeof pics / sizeof pics[0]; i++)
        if (!strcasecmp(ext, pics[i]))
            return 1;
    return 0;
}

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
    x->samples++;
    x->have_key = 0;
    x->n = 0;
}

static int idx_member(void *ctx, FILE *f, const char *name, uint64_t off, uint64_t size)
{
    idx *x = ctx;
    const char *dot = strchr(name, '.');
    size_t kl = dot ? (size_t)(dot - name) : 0;
    /* the packer's names: "<key>.<ext>", no folders */
    if (!dot || kl == 0 || kl >= sizeof x->key || strchr(name, '/') || strlen(dot + 1) >= 64)
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
    x->off[x->n] = off;
    x->len[x->n] = size;
    x->n++;
    if (x->w == 0 && picture_ext(dot + 1)) { /* its size, from the header (sizes.h) */
        uint32_t w, h;
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

/* Writes ", \"index\": [...]" for the shard at path, or nothing when it
 * cannot be described (then the loader walks it). */
static void write_index(FILE *f, const char *path)
{
    char *buf = NULL, *sbuf = NULL;
    size_t n = 0, sn = 0;
    idx x = {0};
    x.out = open_memstream(&buf, &n);
    x.sizes = open_memstream(&sbuf, &sn);
    if (!x.out || !x.sizes) {
        if (x.out)
            fclose(x.out);
        if (x.sizes)
            fclose(x.sizes);
        free(buf);
        free(sbuf);
        return;
    }
    int rc = pack_tar_walk(path, idx_member, &x);
    idx_flush(&x);
    int bad = fclose(x.out) != 0;
    bad |= fclose(x.sizes) != 0;
    if (rc == 0 && !bad && x.samples > 0) /* each sample's picture size, "sizes" */
        fprintf(f, ", \"index\": [%s\n    ], \"sizes\": [%s]", buf, sbuf);
    free(buf);
    free(sbuf);
    free(x.ext);
    free(x.off);
    free(x.len);
}

int pack_write_manifest(const pack_opts *o, const rf_source *s, const int64_t *order,
                        const pack_shard *si, int64_t nshards, const pack_bad *bads, int64_t nbad)
{
    char path[4096], tmp[4096];
    snprintf(path, sizeof path, "%s/manifest.json", o->out);
    snprintf(tmp, sizeof tmp, "%s/.manifest.json.tmp", o->out);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    int64_t written = 0;
    for (int64_t k = 0; k < nshards; k++)
        written += si[k].samples;
    fprintf(f, "{\n  \"format\": \"ringfeed-pack 1\",\n  \"source\": ");
    json_cstr(f, o->src);
    fprintf(f, ",\n  \"source_samples\": %lld,\n  \"samples\": %lld,\n  \"skipped\": %lld,\n",
            (long long)s->n, (long long)written, (long long)nbad);
    fprintf(f, "  \"nclasses\": %lld,\n  \"classes\": [", (long long)s->nclasses);
    for (int64_t c = 0; s->class_off && c < s->nclasses; c++) {
        fputs(c ? ", " : "", f);
        json_cstr(f, s->arena + s->class_off[c]);
    }
    fprintf(f,
            "],\n  \"options\": {\"max_side\": %d, \"quality\": %d, \"shard_count\": %lld, "
            "\"shard_size\": %llu, \"shuffle\": %s, \"seed\": %llu, "
            "\"keep_original_if_smaller\": %s, \"on_error\": \"%s\", \"extras\": [",
            o->img.max_side, o->img.quality, o->shard_size ? 0LL : (long long)o->shard_count,
            (unsigned long long)o->shard_size, o->shuffle ? "true" : "false",
            (unsigned long long)o->seed, o->img.keep_original ? "true" : "false",
            o->skip_errors ? "skip" : "raise");
    for (int e = 0; e < o->nextras; e++) {
        fputs(e ? ", " : "", f);
        json_cstr(f, o->extras[e]);
    }
    fprintf(f, "], \"prefix\": ");
    json_cstr(f, o->prefix);
    fprintf(f, "},\n  \"shards\": [\n");
    for (int64_t k = 0; k < nshards; k++) {
        char name[4096], full[8192];
        snprintf(name, sizeof name, "%s-%06lld.tar", o->prefix, (long long)k);
        snprintf(full, sizeof full, "%s/%s", o->out, name);
        fprintf(f, "    {\"name\": ");
        json_cstr(f, name);
        fprintf(f, ", \"samples\": %lld, \"bytes\": %llu", (long long)si[k].samples,
                (unsigned long long)si[k].bytes);
        write_digest(f, full);
        write_index(f, full);
        fprintf(f, "}%s\n", k + 1 < nshards ? "," : "");
    }
    fprintf(f, "  ],\n  \"skipped_samples\": [");
    for (int64_t e = 0; e < nbad; e++) {
        char name[4096];
        rf__source_name(s, order[bads[e].pos], name, sizeof name);
        fprintf(f, "%s\n    {\"key\": %lld, \"source\": ", e ? "," : "", (long long)bads[e].pos);
        json_cstr(f, name);
        fprintf(f, ", \"reason\": ");
        json_cstr(f, bads[e].reason);
        fputc('}', f);
    }
    fprintf(f, "%s]\n}\n", nbad ? "\n  " : "");
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}
