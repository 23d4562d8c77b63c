/*
 * pack_merge.c - `ringfeed-pack merge OUT`: the manifests of the parts of a
 * pack made with --part K/N (OUT/manifest-pKofN.json, each written when
 * its part's run ended) joined into OUT/manifest.json, after checking that
 * the pack is whole:
 *   - every part 0..N-1 has its manifest, all with the same N (a missing one
 *     is named, with the command that makes it);
 *   - the parts describe one pack: the same source, source kind, sample
 *     count, classes and options, and part K covers positions
 *     [K*n/N, (K+1)*n/N) of it;
 *   - every shard a part lists is in OUT, a regular file (not a link) of the
 *     byte size stated, its name a plain file name listed once (without
 *     the shards, --without-shards: the names alone, for shards already in
 *     object storage, which the loader checks against their entries).
 * The merged manifest has the one-machine layout: the counts summed, the
 * kinds of pictures stored summed, the shards of part 0, then part 1, ...
 * (their entries copied as written: index, sources, digests), the skipped
 * samples likewise, and "parts": N. The shards keep their names; in name
 * order they are the one-machine order, under the same keys.
 *
 * The part manifests are read as hostile text (pack_json.c: bounded, depth
 * limited; at most 1 GiB each); only spans that parsed as JSON values are
 * copied. Part 0 stays in memory; the others are read one at a time, twice
 * (checked and summed, then copied, of the same length), so that merging a
 * pack of many parts holds two of them, not the pack's whole index.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pack.h"
#include "pack_json.h"
#include "ringfeed.h"

#define MERGE_MAX_FILE (INT64_C(1) << 30)
#define MERGE_MAX_KINDS 16

typedef struct part {
    char *text; /* the manifest, read whole */
    size_t len;
    pj_span top, source, kind, classes, options, shards, skipped_list, stored;
    int64_t source_samples, samples, skipped, nclasses, index, count, first, end;
} part;

static int merge_error(const char *out, const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "ringfeed-pack merge: %s: ", out);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 1;
}

/* "manifest-p<K>of<N>.json" as pack_manifest_name writes it: K and N. */
static int part_name(const char *name, int64_t *k, int64_t *n)
{
    long long a, b;
    int used = 0;
    if (sscanf(name, "manifest-p%lldof%lld.json%n", &a, &b, &used) != 2 || name[used] || b < 1 ||
        a < 0 || a >= b || b > (1 << 20))
        return -1;
    char again[128];
    int w = snprintf(NULL, 0, "%lld", b - 1);
    snprintf(again, sizeof again, "manifest-p%0*lldof%lld.json", w, a, b);
    if (strcmp(again, name))
        return -1;
    *k = a;
    *n = b;
    return 0;
}

static int read_whole(const char *path, char **text, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > MERGE_MAX_FILE) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *b = malloc(n ? n : 1);
    while (b && got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!b || got != n) {
        free(b);
        return -1;
    }
    *text = b;
    *len = n;
    return 0;
}

/* Part k's manifest at path, read and its fields found. 0, or 1 (printed). */
static int read_part(const char *out, const char *path, part *pt)
{
    if (read_whole(path, &pt->text, &pt->len) != 0)
        return merge_error(out, "cannot read %s%s", path, "");
    pj_span all = {pt->text, pt->text + pt->len}, v, part;
    char format[64];
    if (pj_value(all, &pt->top) != 0 || pj_member(pt->top, "format", &v) != 1 ||
        pj_str(v, format, sizeof format) != 0 || strcmp(format, "ringfeed-pack 1"))
        return merge_error(out, "%s is not a ringfeed-pack manifest%s", path, "");
    static const char *const ints[] = {"source_samples", "samples", "skipped", "nclasses"};
    int64_t *dst[] = {&pt->source_samples, &pt->samples, &pt->skipped, &pt->nclasses};
    for (int i = 0; i < 4; i++)
        if (pj_member(pt->top, ints[i], &v) != 1 || pj_int(v, dst[i]) != 0)
            return merge_error(out, "%s: no \"%s\" count", path, ints[i]);
    static const char *const spans[] = {"source", "source_kind",     "classes", "options",
                                        "shards", "skipped_samples", "stored",  "part"};
    pj_span *sdst[] = {&pt->source, &pt->kind,         &pt->classes, &pt->options,
                       &pt->shards, &pt->skipped_list, &pt->stored,  &part};
    for (int i = 0; i < 8; i++)
        if (pj_member(pt->top, spans[i], sdst[i]) != 1)
            return merge_error(out, "%s: no \"%s\"", path, spans[i]);
    static const char *const pf[] = {"index", "count", "first", "end"};
    int64_t *pdst[] = {&pt->index, &pt->count, &pt->first, &pt->end};
    for (int i = 0; i < 4; i++)
        if (pj_member(part, pf[i], &v) != 1 || pj_int(v, pdst[i]) != 0)
            return merge_error(out, "%s: its \"part\" has no \"%s\"", path, pf[i]);
    return 0;
}

/* The shards part k lists: each in OUT as stated, listed once in the pack
 * (names seen so far in *seen, '\n'-separated, kept sorted by nothing: a
 * linear search over the few thousand shards of a pack). 0 or 1. */
static int check_shards(const char *out, const char *mpath, const part *pt, int files, char **seen,
                        size_t *seen_len, int64_t *nshards)
{
    pj_span it = {NULL, NULL};
    int r;
    while ((r = pj_next(pt->shards, &it)) == 1) {
        pj_span v;
        char name[256], path[PACK_PATHCAP + 256];
        int64_t bytes, samples;
        if (pj_member(it, "name", &v) != 1 || pj_str(v, name, sizeof name) != 0 ||
            pj_member(it, "bytes", &v) != 1 || pj_int(v, &bytes) != 0 ||
            pj_member(it, "samples", &v) != 1 || pj_int(v, &samples) != 0)
            return merge_error(out, "%s: a shard entry without its name, bytes and samples%s",
                               mpath, "");
        if (!name[0] || name[0] == '.' || strchr(name, '/'))
            return merge_error(out, "%s: shard name \"%s\" is not a file name in OUT", mpath, name);
        size_t nl = strlen(name);
        for (const char *s = *seen; s && s < *seen + *seen_len; s += strlen(s) + 1)
            if (!strcmp(s, name))
                return merge_error(out, "shard %s is listed twice (again in %s)", name, mpath);
        char *ns = realloc(*seen, *seen_len + nl + 1);
        if (!ns)
            return merge_error(out, "out of memory%s%s", "", "");
        *seen = ns;
        memcpy(ns + *seen_len, name, nl + 1);
        *seen_len += nl + 1;
        snprintf(path, sizeof path, "%s/%s", out, name);
        struct stat st;
        if (!files) {
            (*nshards)++;
            continue;
        }
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            return merge_error(out, "shard %s, listed in %s, is missing (or not a file)", name,
                               mpath);
        if ((int64_t)st.st_size != bytes) {
            char what[128];
            snprintf(what, sizeof what, "%lld bytes, %lld stated", (long long)st.st_size,
                     (long long)bytes);
            fprintf(stderr, "ringfeed-pack merge: %s: shard %s has %s in %s\n", out, name, what,
                    mpath);
            return 1;
        }
        (*nshards)++;
    }
    return r < 0 ? merge_error(out, "%s: malformed \"shards\"%s", mpath, "") : 0;
}

/* The pictures stored, by kind, summed over the parts. */
typedef struct kinds {
    char ext[MERGE_MAX_KINDS][16];
    int64_t n[MERGE_MAX_KINDS];
    int count;
} kinds;

static int add_kinds(kinds *k, pj_span stored)
{
    static const char *const exts[] = {"npy", "jpg", "jpeg", "png", "webp",
                                       "bmp", "ppm", "pgm",  "tif", "tiff"};
    for (size_t e = 0; e < sizeof exts / sizeof exts[0]; e++) {
        pj_span v;
        int64_t n;
        int r = pj_member(stored, exts[e], &v);
        if (r < 0 || (r == 1 && pj_int(v, &n) != 0))
            return -1;
        if (r == 0)
            continue;
        int i = 0;
        while (i < k->count && strcmp(k->ext[i], exts[e]))
            i++;
        if (i == k->count)
            snprintf(k->ext[k->count++], sizeof k->ext[0], "%s", exts[e]);
        k->n[i] += n;
    }
    return 0;
}

static void put(FILE *f, pj_span s)
{
    fwrite(s.p, 1, (size_t)(s.end - s.p), f);
}

/* Part k's manifest, "manifest-p<K>of<N>.json" in out, into path. */
static void part_path(const char *out, int64_t k, int64_t count, char *name, size_t ncap,
                      char *path, size_t pcap)
{
    int w = snprintf(NULL, 0, "%lld", (long long)(count - 1));
    snprintf(name, ncap, "manifest-p%0*lldof%lld.json", w, (long long)k, (long long)count);
    snprintf(path, pcap, "%s/%s", out, name);
}

/* What the parts add up to (the first pass), for the merged header. */
typedef struct totals {
    int64_t samples, skipped, nshards;
    kinds k;
    size_t *len; /* each part's manifest's length: the second pass reads the same */
} totals;

/* Appends the entries of list (a JSON array) to f, after *first. */
static void put_entries(FILE *f, pj_span list, int *first)
{
    pj_span it = {NULL, NULL};
    while (pj_next(list, &it) == 1) {
        fprintf(f, "%s\n    ", *first ? "" : ",");
        put(f, it);
        *first = 0;
    }
}

/* Writes the merged manifest through a temporary name: part 0's header
 * (p0), the totals, then the parts' shards and skipped samples, each part
 * read again in turn, so that one part besides part 0 is in memory at a
 * time. 0 or 1. */
static int write_merged(const char *out, const part *p0, int64_t n, const totals *t)
{
    char path[PACK_PATHCAP], tmp[PACK_PATHCAP];
    snprintf(path, sizeof path, "%s/manifest.json", out);
    snprintf(tmp, sizeof tmp, "%s/.manifest.json.tmp", out);
    FILE *f = pack_create(tmp);
    if (!f)
        return merge_error(out, "cannot write %s: %s", tmp, strerror(errno));
    fprintf(f, "{\n  \"format\": \"ringfeed-pack 1\",\n  \"source\": ");
    put(f, p0->source);
    fprintf(f, ",\n  \"source_kind\": ");
    put(f, p0->kind);
    fprintf(f, ",\n  \"source_samples\": %lld,\n  \"samples\": %lld,\n  \"skipped\": %lld,\n",
            (long long)p0->source_samples, (long long)t->samples, (long long)t->skipped);
    fprintf(f, "  \"nclasses\": %lld,\n  \"classes\": ", (long long)p0->nclasses);
    put(f, p0->classes);
    fprintf(f, ",\n  \"options\": ");
    put(f, p0->options);
    fprintf(f, ",\n  \"parts\": %lld,\n  \"stored\": {", (long long)n);
    for (int i = 0; i < t->k.count; i++)
        fprintf(f, "%s\"%s\": %lld", i ? ", " : "", t->k.ext[i], (long long)t->k.n[i]);
    int rc = 0;
    for (int list = 0; list < 2 && rc == 0; list++) {
        fprintf(f, list == 0 ? "},\n  \"shards\": [" : "\n  ],\n  \"skipped_samples\": [");
        int first = 1;
        for (int64_t k = 0; k < n && rc == 0; k++) {
            part again = {0};
            const part *pt = p0;
            if (k > 0) {
                char name[128], ppath[PACK_PATHCAP + 128];
                part_path(out, k, n, name, sizeof name, ppath, sizeof ppath);
                if ((rc = read_part(out, ppath, &again)) == 0 && again.len != t->len[k])
                    rc = merge_error(out, "%s changed while it was merged", name, "");
                pt = &again;
            }
            if (rc == 0)
                put_entries(f, list == 0 ? pt->shards : pt->skipped_list, &first);
            free(again.text);
            if (list == 1 && k == n - 1 && !first)
                fputs("\n  ", f);
        }
    }
    fprintf(f, "]\n}\n");
    int e = fflush(f) != 0 || fsync(fileno(f)) != 0;
    e |= fclose(f) != 0;
    if (rc != 0 || e || rename(tmp, path) != 0) {
        unlink(tmp);
        return rc ? rc : merge_error(out, "cannot write %s: %s", path, strerror(errno));
    }
    return 0;
}

int pack_merge(const char *out, int shards_here)
{
    DIR *d = opendir(out);
    if (!d)
        return merge_error(out, "cannot open the folder: %s%s", strerror(errno), "");
    int64_t count = 0;
    char found_name[256] = "";
    unsigned char *have = NULL;
    int rc = 0;
    struct dirent *e;
    /* the parts' manifests: the count first (all must agree) */
    while (rc == 0 && (e = readdir(d)) != NULL) {
        int64_t k, n;
        if (part_name(e->d_name, &k, &n) != 0)
            continue;
        if (count && n != count) {
            rc = merge_error(out, "part manifests of different counts: %s and %s", found_name,
                             e->d_name);
            break;
        }
        if (!count) {
            count = n;
            snprintf(found_name, sizeof found_name, "%s", e->d_name);
            if (!(have = calloc((size_t)n, 1)))
                rc = merge_error(out, "out of memory%s%s", "", "");
        }
        if (have)
            have[k] = 1;
    }
    closedir(d);
    if (rc == 0 && !count)
        rc = merge_error(out,
                         "no part manifests (manifest-pKofN.json, written by ringfeed-pack "
                         "--part K/N when its part is complete)%s%s",
                         "", "");
    int64_t missing = 0;
    for (int64_t k = 0; rc == 0 && k < count; k++) {
        if (have[k])
            continue;
        char name[128], path[PACK_PATHCAP + 128], cmd[128];
        part_path(out, k, count, name, sizeof name, path, sizeof path);
        snprintf(cmd, sizeof cmd, "--part %lld/%lld", (long long)k, (long long)count);
        fprintf(stderr,
                "ringfeed-pack merge: %s: part %lld of %lld is missing or unfinished (no %s): run "
                "ringfeed-pack %s with the same source and options\n",
                out, (long long)k, (long long)count, name, cmd);
        missing++;
    }
    if (rc == 0 && missing)
        rc = 1;
    /* first pass: each part read, checked against part 0 (kept) and
     * summed, then freed */
    part p0 = {0};
    totals t = {0};
    if (rc == 0 && !(t.len = calloc((size_t)count, sizeof *t.len)))
        rc = merge_error(out, "out of memory%s%s", "", "");
    char *seen = NULL;
    size_t seen_len = 0;
    for (int64_t k = 0; rc == 0 && k < count; k++) {
        char name[128], path[PACK_PATHCAP + 128];
        part_path(out, k, count, name, sizeof name, path, sizeof path);
        part cur = {0};
        part *pt = k == 0 ? &p0 : &cur;
        if ((rc = read_part(out, path, pt)) == 0) {
            int64_t n = pt->source_samples;
            if (pt->index != k || pt->count != count || pt->first != k * n / count ||
                pt->end != (k + 1) * n / count)
                rc = merge_error(out,
                                 "%s does not describe its part of the source (another run's?)",
                                 name, "");
            else if (k > 0 &&
                     (!pj_same(pt->source, p0.source) || !pj_same(pt->kind, p0.kind) ||
                      pt->source_samples != p0.source_samples || pt->nclasses != p0.nclasses ||
                      !pj_same(pt->classes, p0.classes) || !pj_same(pt->options, p0.options)))
                rc = merge_error(out,
                                 "%s was packed from another source, or with other options, "
                                 "than part 0",
                                 name, "");
            else if ((rc = check_shards(out, name, pt, shards_here, &seen, &seen_len,
                                        &t.nshards)) == 0) {
                if (add_kinds(&t.k, pt->stored) != 0)
                    rc = merge_error(out, "%s: malformed \"stored\"%s", name, "");
                t.samples += pt->samples;
                t.skipped += pt->skipped;
                t.len[k] = pt->len;
            }
        }
        free(cur.text);
    }
    if (rc == 0)
        rc = write_merged(out, &p0, count, &t);
    if (rc == 0)
        fprintf(stderr,
                "ringfeed-pack merge: %s: %lld parts, %lld samples in %lld shards: "
                "manifest.json written\n",
                out, (long long)count, (long long)t.samples, (long long)t.nshards);
    free(p0.text);
    free(t.len);
    free(seen);
    free(have);
    return rc;
}
