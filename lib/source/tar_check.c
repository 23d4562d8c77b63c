/*
 * tar_check.c - whether a tar shard is the one an entry of
 * ringfeed-pack's manifest.json describes (manifest.h), before the
 * entry stands in for a walk of the shard's headers.
 *
 * A stale manifest beside rewritten shards must never give the old index:
 * a shard relabelled at the same size keeps its name and size, so those
 * prove nothing. Three checks, from cheap to whole:
 *   - the ends: the headers of the entry's first and last members, where
 *     and as the entry says (two reads);
 *   - the labels, for a local shard as it is indexed (tar.c): each
 *     label member's header and text, read as the entry's samples are fed,
 *     through a window that reads 64 KiB at once when the label members lie
 *     close together (small samples: a few reads per shard) and just the
 *     member's block when they do not (one read per sample). A relabel, a
 *     reorder or anything that moves a label member is caught; what is
 *     left unchecked (the headers of members without a label between the
 *     ends) cannot change a label or move a read past a label member;
 *   - the digest, for a remote shard when it lands in the cache
 *     (remote_manifest.c), where the parsed manifest is gone: SHA-256 over
 *     every member's name, data offset and length and (labelled) the text
 *     of its .cls label, once from the entry at index time and once from a
 *     walk of the landed shard's headers. Equal digests mean the index
 *     taken from the entry is the one the walk gives; the walk reads the
 *     headers of a file the transfer has just written (page cache), some
 *     milliseconds per thousand samples.
 * The packer's per-shard "sha256" of the whole file is not checked here:
 * hashing every byte at every start (local) or on the fetch thread (remote,
 * a few hundred MB/s) costs what the manifest saves, and the bytes that are
 * not headers or labels are read by the reader as they are, as after a walk.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ringfeed.h"
#include "sha256.h"
#include "kinds.h"
#include "manifest.h"
#include "tar.h"

#define WINDOW (64 << 10) /* bytes a label window reads at once when labels lie close */

/* Exactly n bytes at off; 0, or -1 (an error, or the file ends first). */
static int pread_all(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

/* 1 when h is a valid header of a regular member named key.ext of len
 * bytes (a ustar name: the packer writes no long names). */
static int header_is(const uint8_t *h, const char *key, const char *ext, uint64_t len)
{
    uint64_t size;
    char name[TAR_BLOCK + 2];
    size_t n, kl = strlen(key);
    if (!rf__tar_checksum_ok(h) || (h[156] != '0' && h[156] != '\0') ||
        rf__tar_number(h + 124, 12, &size) != 0 || size != len)
        return 0;
    rf__tar_ustar_name(h, name, &n);
    return n == kl + 1 + strlen(ext) && !memcmp(name, key, kl) && name[kl] == '.' &&
           !strcmp(name + kl + 1, ext);
}

/* 1 when a member of len bytes whose data starts at off fits in fsize
 * bytes with its header before it. */
static int fits(uint64_t off, uint64_t len, uint64_t fsize)
{
    return off >= TAR_BLOCK && off <= fsize && len <= fsize - off;
}

void rf__tar_manifest_ends(const rf_manifest *m, const rf_manifest_shard *ms, rf_tar_ends *e)
{
    for (int i = 0; i < 2; i++) {
        e->key[i] = m->arena + ms->ends[i].key;
        e->ext[i] = m->arena + ms->ends[i].ext;
        e->off[i] = ms->ends[i].off;
        e->len[i] = ms->ends[i].len;
    }
}

int rf__tar_ends_ok(int fd, uint64_t fsize, const rf_tar_ends *e, int *bad)
{
    for (int i = 0; i < 2; i++) {
        uint8_t h[TAR_BLOCK];
        if (!fits(e->off[i], e->len[i], fsize) ||
            pread_all(fd, h, TAR_BLOCK, e->off[i] - TAR_BLOCK) != 0 ||
            !header_is(h, e->key[i], e->ext[i], e->len[i])) {
            if (bad)
                *bad = i;
            return 0;
        }
    }
    return 1;
}

/* The bytes [off, off + n) of the window's shard (fits checked), or NULL
 * when they cannot be read. */
static const uint8_t *window(rf_tar_window *w, uint64_t off, size_t n)
{
    uint64_t stride = off > w->last ? off - w->last : UINT64_MAX;
    w->last = off;
    if (off >= w->at && n <= w->len && off - w->at <= w->len - n)
        return w->buf + (off - w->at);
    size_t want = stride <= WINDOW / 4 ? WINDOW : n; /* four labels or more per read */
    if (want < n)
        want = n;
    if (want > w->fsize - off)
        want = (size_t)(w->fsize - off);
    if (want > w->cap) {
        uint8_t *b = realloc(w->buf, want);
        if (!b)
            return NULL;
        w->buf = b;
        w->cap = want;
    }
    w->len = 0;
    if (pread_all(w->fd, w->buf, want, off) != 0)
        return NULL;
    w->at = off;
    w->len = want;
    return w->buf;
}

int rf__tar_label_ok(rf_tar_window *w, const char *key, const char *ext, uint64_t off, uint64_t len,
                     int64_t label)
{
    int64_t v;
    if (len >= TAR_MAX_CLS || !fits(off, len, w->fsize))
        return 0;
    const uint8_t *h = window(w, off - TAR_BLOCK, TAR_BLOCK + (size_t)len);
    return h && header_is(h, key, ext, len) &&
           rf__tar_parse_label((const char *)h + TAR_BLOCK, (size_t)len, &v) == 0 && v == label;
}

void rf__tar_window_free(rf_tar_window *w)
{
    free(w->buf);
    w->buf = NULL;
    w->cap = w->len = 0;
}

/* ---- the digest of an entry, and of a shard's headers -------------------- */

/* 1 when ext (a member's extension) is that of a .cls label. */
static int is_cls(const char *ext)
{
    return !strcasecmp(ext, "cls");
}

/* What both digests hash per member, in tar order: the name and its NUL,
 * the data's offset and length, whether a label follows, the label. The
 * digests never leave the process: host byte order. */
static void feed(rf_sha256 *s, const char *name, size_t nlen, uint64_t off, uint64_t len,
                 int has_label, int64_t label)
{
    uint8_t b[2 * sizeof(uint64_t) + 1 + sizeof(int64_t)];
    rf__sha256_update(s, name, nlen + 1);
    memcpy(b, &off, sizeof off);
    memcpy(b + 8, &len, sizeof len);
    b[16] = (uint8_t)has_label;
    memcpy(b + 17, &label, sizeof label);
    rf__sha256_update(s, b, has_label ? sizeof b : 17);
}

int rf__tar_entry_digest(const rf_manifest *m, const rf_manifest_shard *ms, int labeled,
                         uint8_t out[32])
{
    rf_manifest_iter it;
    rf_sha256 s;
    char *name = NULL;
    size_t cap = 0;
    int rc;
    rf__manifest_iter(&it, m, ms);
    rf__sha256_init(&s);
    while ((rc = rf__manifest_sample(&it)) == 1) {
        while ((rc = rf__manifest_member(&it)) == 1) {
            size_t el = strlen(it.ext), n = it.key_len + 1 + el;
            if (n + 1 > cap) {
                char *p = realloc(name, n + 1);
                if (!p) {
                    rc = RF_E_NOMEM;
                    break;
                }
                name = p;
                cap = n + 1;
            }
            memcpy(name, it.key, it.key_len);
            name[it.key_len] = '.';
            memcpy(name + it.key_len + 1, it.ext, el + 1);
            feed(&s, name, n, it.off, it.len, labeled && is_cls(it.ext), it.label);
        }
        if (rc != 0)
            break;
    }
    free(name);
    rf__manifest_iter_free(&it);
    rf__sha256_final(&s, out);
    return rc;
}

typedef struct shard_digest {
    rf_sha256 s;
    int fd, labeled;
} shard_digest;

/* rf__tar_walk_members' callback: one member into the digest, its label
 * read as the packer reads it (a .cls member of fewer than TAR_MAX_CLS
 * bytes whose text is an integer; -1 otherwise). */
static int digest_member(void *ctx, const char *name, size_t nlen, uint64_t off, uint64_t len)
{
    shard_digest *d = ctx;
    const char *base = strrchr(name, '/'), *dot;
    base = base ? base + 1 : name;
    dot = strchr(base, '.');
    int has_label = d->labeled && dot && is_cls(dot + 1);
    int64_t label = -1;
    char text[TAR_MAX_CLS];
    if (has_label && len < TAR_MAX_CLS && pread_all(d->fd, text, (size_t)len, off) == 0)
        rf__tar_parse_label(text, (size_t)len, &label); /* sets it only when it parses */
    feed(&d->s, name, nlen, off, len, has_label, label);
    return 0;
}

int rf__tar_shard_digest(int fd, uint64_t fsize, int labeled, uint8_t out[32])
{
    shard_digest d = {.fd = fd, .labeled = labeled};
    rf__sha256_init(&d.s);
    int rc = rf__tar_walk_members(fd, fsize, digest_member, &d);
    rf__sha256_final(&d.s, out);
    return rc;
}
