/*
 * fuzztar.h - what the fuzzers of the shard indexes (fuzz_tar.c,
 * fuzz_manifest.c, fuzz_kept.c) share: the member options a control byte
 * picks, the checks that any index of a shard must pass whichever way it was
 * made (a walk, a manifest, a kept index), and for their standalone drivers
 * the seed shards, written in memory with tarwrite.h, each with the
 * manifest.json that ringfeed-pack would write for it.
 *
 * Included after <stdint.h>, <stdio.h>, <stdlib.h>, <string.h>,
 * <sys/mman.h>, <unistd.h>, "ringfeed.h" and "source.h"; included again with
 * FZT_SEEDS defined, after tarwrite.h and fuzzmain.h, for the seed part. All
 * static inline: each fuzzer uses a different part.
 */
#ifndef RF_TESTS_FUZZTAR_H
#define RF_TESTS_FUZZTAR_H

#define FZT_MAX_LABEL INT64_C(999999999999999999) /* the most a .cls member's 18 digits say */

/* The member options of control bits 0-3: the label member (bits 0-1:
 * .cls, none, .idx, .cls) and the extras (bits 2-3: none, txt, txt+json,
 * json+png; a png named as an extra is not the picture). */
static inline void fzt_opts(uint8_t ctl, rf_source_opts *o)
{
    static const char *const ex[4][2] = {
        {NULL, NULL}, {"txt", NULL}, {"txt", "json"}, {"json", "png"}};
    memset(o, 0, sizeof *o);
    o->unlabeled = (ctl & 3) == 1;
    o->label = (ctl & 3) == 2 ? "idx" : NULL;
    for (int e = 0; e < 2; e++)
        if (ex[ctl >> 2 & 3][e])
            o->extras[o->nextras++] = ex[ctl >> 2 & 3][e];
}

/* A path the library can open(2) that holds p[0..n): one memory file,
 * rewritten for each input (no disk, nothing left behind). */
static inline const char *fzt_path(const void *p, size_t n)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz-shard", MFD_CLOEXEC);
        if (fd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || (n && pwrite(fd, p, n, 0) != (ssize_t)n))
        abort();
    return path;
}

static inline void fzt_finding(const char *prog, const char *what, int64_t i)
{
    fprintf(stderr, "%s: FINDING: %s (sample %lld)\n", prog, what, (long long)i);
    abort(); /* libFuzzer saves the input as a crash artifact */
}

/* A failure of an indexer: RF_E_SOURCE or RF_E_NOMEM, with a terminated
 * reason in err (cap bytes, filled with 'x' before the call) that begins
 * with prefix and says more. */
static inline void fzt_check_failure(const char *prog, int rc, const char *err, size_t cap,
                                     const char *prefix)
{
    size_t n = strlen(prefix);
    if (rc != RF_E_SOURCE && rc != RF_E_NOMEM)
        fzt_finding(prog, "unexpected status", rc);
    if (!memchr(err, '\0', cap) || strncmp(err, prefix, n) || !err[n])
        fzt_finding(prog, "a failure without a terminated reason naming its source", rc);
}

/* Where an index may place a picture in its shard: anywhere inside (a kept
 * index: a file anyone could write, bound only by the shard), after a
 * header's 512 bytes (a manifest's entry), or after it on a block boundary
 * (a walk). */
enum { FZT_INSIDE = 0, FZT_AFTER_HEADER = 1, FZT_BLOCKS = 2 };

/* Samples [from, s->n) of a shard of size bytes, as any index of it must
 * give them: each name a string of the arena; the picture's data inside the
 * shard, placed as where says; the label -1 exactly when o says unlabeled,
 * else (o NULL: either) in [0, FZT_MAX_LABEL], and at most maxlabel; with
 * extras the span inside the shard, the picture and every extra present
 * inside the span. */
static inline void fzt_check(const char *prog, const rf_source *s, int64_t from, uint64_t size,
                             const rf_source_opts *o, int64_t maxlabel, int where)
{
    for (int64_t i = from; i < s->n; i++) {
        uint64_t off = s->data_off[i], len = s->data_len[i];
        if (s->path_off[i] >= s->arena_len ||
            !memchr(s->arena + s->path_off[i], '\0', s->arena_len - s->path_off[i]))
            fzt_finding(prog, "a name outside the arena", i);
        if (off > size || len > size - off || (where >= FZT_AFTER_HEADER && off < 512) ||
            (where == FZT_BLOCKS && off % 512))
            fzt_finding(prog, "the picture is not inside the shard, or not where it can be", i);
        int64_t l = s->labels[i];
        if (o && o->unlabeled ? l != -1 : l < (o ? 0 : -1) || l > FZT_MAX_LABEL || l > maxlabel)
            fzt_finding(prog, "a label out of its range", i);
        if (s->nextras == 0)
            continue;
        uint64_t so = s->span_off[i], sl = s->span_len[i];
        if (so > size || sl > size - so || off < so || off + len > so + sl)
            fzt_finding(prog, "the span is not inside the shard, or the picture not in it", i);
        for (int e = 0; e < s->nextras; e++) {
            size_t at = (size_t)i * (size_t)s->nextras + (size_t)e;
            uint64_t rel = s->ext_rel[at], el = s->ext_len[at];
            if (el == RF_SOURCE_ABSENT ? rel != 0 : rel > sl || el > sl - rel)
                fzt_finding(prog, "an extra member outside the span", i);
        }
    }
}

/* 1 when samples [0, a->n) of a and b are the same index. */
static inline int fzt_same(const rf_source *a, const rf_source *b)
{
    if (a->n != b->n || a->nextras != b->nextras)
        return 0;
    for (int64_t i = 0; i < a->n; i++) {
        if (strcmp(a->arena + a->path_off[i], b->arena + b->path_off[i]) ||
            a->labels[i] != b->labels[i] || a->data_off[i] != b->data_off[i] ||
            a->data_len[i] != b->data_len[i] || a->shard[i] != b->shard[i])
            return 0;
        if (a->nextras && (a->span_off[i] != b->span_off[i] || a->span_len[i] != b->span_len[i]))
            return 0;
        size_t at = (size_t)i * (size_t)a->nextras, ne = (size_t)a->nextras;
        if (ne && (memcmp(a->ext_rel + at, b->ext_rel + at, ne * sizeof *a->ext_rel) ||
                   memcmp(a->ext_len + at, b->ext_len + at, ne * sizeof *a->ext_len)))
            return 0;
    }
    return 1;
}

#endif /* RF_TESTS_FUZZTAR_H */

#if defined(FZT_SEEDS) && !defined(RF_TESTS_FUZZTAR_SEEDS)
#define RF_TESTS_FUZZTAR_SEEDS
/* ------------------------------------------------------------------------
 * Seed shards (standalone drivers only).
 * ------------------------------------------------------------------------ */

#define FZT_MAX_MEMBERS 64

/* A shard being written in memory, and where each member's data went. */
typedef struct fzt {
    tw t;
    char *buf;
    size_t len;
    struct {
        char key[300], ext[32];
        uint64_t off, len;
        int64_t label; /* a .cls member's integer, else -1 */
    } m[FZT_MAX_MEMBERS];
    int n;
} fzt;

static inline void fzt_open(fzt *z, int flavor)
{
    memset(z, 0, sizeof *z);
    z->t.f = open_memstream(&z->buf, &z->len);
    z->t.flavor = flavor;
    if (!z->t.f)
        abort();
}

/* A member "key.ext" of type '0' holding data (a string). */
static inline void fzt_file(fzt *z, const char *key, const char *ext, const char *data)
{
    char name[512];
    size_t len = strlen(data);
    snprintf(name, sizeof name, "%s.%s", key, ext);
    if (tw_file(&z->t, name, data, len) != 0 || z->n == FZT_MAX_MEMBERS)
        abort();
    snprintf(z->m[z->n].key, sizeof z->m[z->n].key, "%s", key);
    snprintf(z->m[z->n].ext, sizeof z->m[z->n].ext, "%s", ext);
    z->m[z->n].len = len;
    z->m[z->n].off = z->t.pos - (len + 511) / 512 * 512;
    z->m[z->n].label = strcmp(ext, "cls") ? -1 : strtoll(data, NULL, 10);
    z->n++;
}

/* The end blocks; the bytes are z->buf[0..z->len). */
static inline void fzt_close(fzt *z)
{
    if (tw_close(&z->t) != 0)
        abort();
}

/* Rewrites the checksum of the header at off after a change to it. */
static inline void fzt_rechecksum(fzt *z, size_t off)
{
    uint8_t *h = (uint8_t *)z->buf + off;
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    tw_octal((char *)h + 148, 7, sum);
    h[155] = ' ';
}

/* ringfeed-pack's manifest.json for z, named shard.tar (bytes: the size the
 * manifest states), with the other keys a real one has (skipped by the
 * reader). Returns malloc'd text. */
static inline char *fzt_manifest(const fzt *z, uint64_t bytes)
{
    char *p;
    size_t n;
    FILE *f = open_memstream(&p, &n);
    if (!f)
        abort();
    fprintf(f,
            "{\n  \"format\": \"ringfeed-pack 1\",\n  \"source\": \"/data/in\",\n"
            "  \"samples\": %d, \"nclasses\": 2, \"classes\": [\"a\", \"b\\u00e9\"],\n"
            "  \"options\": {\"quality\": 9.5e1, \"resize\": null, \"keep\": true},\n"
            "  \"shards\": [\n    {\"name\": \"shard.tar\", \"samples\": 0, \"bytes\": %llu, "
            "\"index\": [",
            z->n, (unsigned long long)bytes);
    int samples = 0;
    for (int i = 0; i < z->n;) {
        int j = i;
        int64_t label = -1;
        while (j < z->n && !strcmp(z->m[j].key, z->m[i].key)) {
            if (z->m[j].label >= 0)
                label = z->m[j].label;
            j++;
        }
        fprintf(f, "%s\n      [\"%s\", %lld", samples++ ? "," : "", z->m[i].key, (long long)label);
        for (int k = i; k < j; k++)
            fprintf(f, ", \"%s\", %llu, %llu", z->m[k].ext, (unsigned long long)z->m[k].off,
                    (unsigned long long)z->m[k].len);
        fputc(']', f);
        i = j;
    }
    fprintf(f, "\n    ]}\n  ],\n  \"skipped_samples\": [{\"key\": 3, \"reason\": \"x\"}]\n}\n");
    if (fclose(f) != 0)
        abort();
    return p;
}

/* Every seed shard in turn: emit(ctx, name, shard, control bits 0-3 that
 * suit it). The good ones first, then the damage a walk must report. */
typedef void fzt_emit_fn(void *ctx, const char *name, fzt *z, uint8_t opts);

static inline void fzt_shards(fzt_emit_fn *emit, void *ctx)
{
    fzt z;
    char key[300];
    /* plain ustar, labels as pack writes them and with blanks */
    fzt_open(&z, TW_USTAR);
    fzt_file(&z, "s/k0", "jpg", "\xff\xd8 jpeg bytes");
    fzt_file(&z, "s/k0", "cls", "0");
    fzt_file(&z, "s/k1", "png",
             "\x89PNG\r\n\x1a\n and more than a block of it: "
             "..............................................................");
    fzt_file(&z, "s/k1", "cls", " 1\n");
    fzt_file(&z, "s/k2", "JPEG", "x");
    fzt_file(&z, "s/k2", "cls", "+17");
    fzt_close(&z);
    emit(ctx, "ustar", &z, 0);
    free(z.buf);
    /* extras (txt, json), one sample without its json; GNU long names */
    fzt_open(&z, TW_GNU);
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "%s/sample%d",
                 i == 1 ? "a-folder-name-long-enough-to-need-a"
                          "-gnu-long-name-header-in-the-tar/"
                          "and-then-some-more"
                        : "d",
                 i);
        fzt_file(&z, key, "webp", "RIFF....WEBP");
        fzt_file(&z, key, "cls", i ? "3" : "999999999999999999");
        fzt_file(&z, key, "txt", "a caption");
        if (i != 2)
            fzt_file(&z, key, "json", "{\"a\": 1}");
    }
    fzt_close(&z);
    emit(ctx, "gnu-extras", &z, 2 << 2);
    free(z.buf);
    /* pax paths, a prefix split by ustar, labels in .idx members */
    for (int flavor = TW_USTAR; flavor <= TW_PAX; flavor += TW_PAX - TW_USTAR) {
        fzt_open(&z, flavor);
        for (int i = 0; i < 2; i++) {
            snprintf(key, sizeof key,
                     "top/a-folder-whose-name-is-quite-long-%d/another-level-of-folders-also-long"
                     "/and-a-key-of-its-own-%d",
                     i, i);
            fzt_file(&z, key, "ppm", "P6 1 1 255 abc");
            fzt_file(&z, key, "idx", "5");
            fzt_file(&z, key, "png", "\x89PNG mask");
            fzt_file(&z, key, "json", "[]");
        }
        fzt_close(&z);
        emit(ctx, flavor == TW_PAX ? "pax-idx" : "prefix-idx", &z, 2 | 3 << 2);
        free(z.buf);
    }
    /* unlabeled, with members a walk skips: a folder, a link, webdataset's
     * own names, a name without a key, a member of another modality */
    fzt_open(&z, TW_USTAR);
    tw_typed(&z.t, "dir/", '5', "", 0);
    tw_typed(&z.t, "dir/link.jpg", '2', "", 0);
    tw_typed(&z.t, "__meta__/x.jpg", '0', "m", 1);
    fzt_file(&z, "dir/.hidden", "jpg", "no key");
    fzt_file(&z, "dir/k", "bmp", "BM");
    fzt_file(&z, "dir/k", "mp4", "video");
    fzt_file(&z, "dir/k.d/x", "tif", "II*");
    tw_typed(&z.t, "dir/c.jpg", '7', "contiguous", 10);
    fzt_close(&z);
    emit(ctx, "unlabeled-odd", &z, 1);
    free(z.buf);
    /* a size field in GNU base-256, and the old signed checksum */
    fzt_open(&z, TW_USTAR);
    fzt_file(&z, "b", "jpg", "0123456789");
    fzt_file(&z, "b", "cls", "2");
    fzt_close(&z);
    memset(z.buf + 124, 0, 12);
    z.buf[124] = (char)0x80;
    z.buf[135] = 10;
    fzt_rechecksum(&z, 0);
    emit(ctx, "base256", &z, 0);
    free(z.buf);
    /* errors: two pictures, no label, a label that is not one, a bad
     * checksum, a member past the end, a compressed shard, nothing */
    static const char *const bad[][4] = {{"two-images", "jpg", "png", "1"},
                                         {"no-label", "jpg", "txt", NULL},
                                         {"bad-label", "jpg", "cls", "-3"},
                                         {"checksum", "jpg", "cls", "4"},
                                         {"truncated", "jpg", "cls", "4"}};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        fzt_open(&z, TW_USTAR);
        fzt_file(&z, "k", bad[b][1], "picture");
        fzt_file(&z, "k", bad[b][2], bad[b][3] ? bad[b][3] : "text");
        fzt_close(&z);
        if (b == 3)
            z.buf[1024] ^= 0x20; /* the second header's name */
        if (b == 4)
            z.len = 1536; /* the second member's header, not its byte */
        emit(ctx, bad[b][0], &z, 0);
        free(z.buf);
    }
    fzt_open(&z, TW_USTAR);
    fzt_close(&z);
    emit(ctx, "empty", &z, 0);
    memcpy(z.buf, "\x1f\x8b\x08\x00", 4);
    emit(ctx, "gzip", &z, 0);
    free(z.buf);
}
#endif /* FZT_SEEDS */
