/*
 * tar.c - the WebDataset source kind: samples inside tar shards.
 *
 * One walk over the 512-byte headers of each shard: pread of the headers
 * only, member data skipped (except the few bytes of label members). A
 * member "dir/key.ext" belongs to sample "dir/key" and has extension "ext"
 * (the key ends at the first '.' of the base name, the extension is the
 * rest, any case: webdataset's split); consecutive members with the same key
 * form one sample; names webdataset keeps for itself ("__...__") are skipped.
 *
 * A sample is exactly one picture member (any extension of ImageFolder's
 * list: jpg jpeg png ppm bmp pgm tif tiff webp; the bytes decide the format
 * later; or raw pixels, .npy, where the key has no other picture: beside
 * one, a .npy is another modality and skipped), the integer text of its label member (".cls" unless the options
 * name another; none for unlabeled shards, whose labels are -1), and the
 * extra members asked for (".txt", ".json", ...; a member asked for as an
 * extra is never the picture). A key without a picture, with two pictures,
 * with a repeated label or extra member, or without its label is an error
 * naming the shard and the key: nothing is dropped silently. Other members
 * (other modalities) are skipped. GNU long names ('L') and pax headers ('x':
 * path, size) are honoured; directories, links and other member types are
 * skipped. A bad header checksum or a member running past the end of the
 * shard is RF_E_SOURCE naming the shard and the offset; a compressed shard
 * (gzip, zstd, bzip2, xz magic) is refused with a message saying so.
 *
 * Per sample the index keeps the shard, the picture's data offset and length
 * (the reader reads just that range) and its member name, for messages.
 * With extras it also keeps the span from the first to the last of the
 * sample's wanted members, read in one piece, and where each extra lies in
 * it (webdataset writes a key's members back to back, so the span is
 * little more than what is wanted).
 *
 * A shard that the manifest.json beside it (written by ringfeed-pack;
 * manifest.c) describes - same file name, same byte size, its first and
 * last member headers where and as the manifest says, and each label
 * member's header and text as its entry says, read as the entry is fed
 * (tar_check.c) - is not walked: the manifest's members are fed to the
 * same code, labels from .cls members included, so the index is the walk's.
 * A shard the manifest names but does not describe (rewritten since) is
 * walked and counted (s->nfiles_mismatched); a malformed manifest or an
 * error on the way falls back to the walk too; stats count the shards
 * indexed from a manifest (s->nfiles_manifest). A remote shard not fetched
 * yet is indexed from its entry alone (rf__source_tar_from_manifest: the
 * same feed, without the file), its checks left to the moment it lands in
 * the cache (remote_manifest.c). The header fields are read in
 * tar_fields.c.
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

#include "kinds.h"
#include "manifest.h"
#include "ringfeed.h"
#include "tar.h"

#define TAR_MAX_NAME 65536    /* GNU long name / pax path */
#define TAR_MAX_PAX (1 << 20) /* pax extended header */
/* manifest_index: the shard is not the one its manifest entry describes */
#define TAR_NOT_AS_SAID 2

/* ---- the walk over one shard --------------------------------------------- */

/* Where a member of the sample being gathered lies. */
typedef struct tar_place {
    int have;
    uint64_t hdr, off, len; /* header offset, data offset, data length */
} tar_place;

/* The sample being gathered: consecutive members sharing a key. */
typedef struct tar_group {
    char *key;
    size_t key_len, key_cap;
    int active;
    uint64_t first_hdr; /* header of the key's first member */
    tar_place img;
    int img_raw; /* img is a .npy member */
    char *img_name;
    size_t img_name_len, img_name_cap;
    tar_place cls;
    int64_t label;
    tar_place ext[RF_SOURCE_MAX_EXTRAS];
} tar_group;

/* One shard being walked, and what its extended headers said about the
 * member that follows them. */
typedef struct tar_walk {
    int fd;
    const char *shard;
    uint32_t shard_id;
    uint64_t fsize;
    const rf_source_opts *o;
    const char *label_ext; /* NULL: unlabeled */
    char *lname;           /* GNU long name or pax path of the next member */
    size_t lname_cap, lname_len;
    int have_lname;
    uint64_t pax_size; /* pax size of the next member */
    int have_pax_size;
    char *pax; /* body of the last extended header */
    size_t pax_cap;
    tar_group g;
    int64_t *maxlabel;
    char *err;
    size_t errcap;
    rf_tar_member_fn *each; /* rf__tar_walk_members: each member to it, not indexed */
    void *each_ctx;
} tar_walk;

/* Reads exactly n bytes at off; RF_E_SOURCE with the reason in w->err (EIO
 * when the file ends first). */
static int tar_read(tar_walk *w, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    if (w->fd < 0) { /* indexing from a manifest alone: the shard is not here */
        snprintf(w->err, w->errcap, "source: %s: not fetched yet", w->shard);
        return RF_E_SOURCE;
    }
    while (got < n) {
        ssize_t r = pread(w->fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0) {
            snprintf(w->err, w->errcap, "source: read %s at offset %llu: %s", w->shard,
                     (unsigned long long)off, strerror(r == 0 ? EIO : errno));
            return RF_E_SOURCE;
        }
        got += (size_t)r;
    }
    return 0;
}

/* With extras: the span of the sample's members that one read fetches,
 * and each extra's place in it. */
static int group_span(rf_source *s, tar_walk *w)
{
    tar_group *g = &w->g;
    uint64_t lo = g->img.off, hi = g->img.off + g->img.len;
    for (int e = 0; e < s->nextras; e++) {
        if (!g->ext[e].have)
            continue;
        if (g->ext[e].off < lo)
            lo = g->ext[e].off;
        if (g->ext[e].off + g->ext[e].len > hi)
            hi = g->ext[e].off + g->ext[e].len;
    }
    if (hi - lo >= UINT32_MAX) {
        snprintf(w->err, w->errcap,
                 "source: %s: the members of sample \"%s\" (from offset %llu) span over 4 GiB",
                 w->shard, g->key, (unsigned long long)g->first_hdr);
        return RF_E_SOURCE;
    }
    s->span_off[s->n] = lo;
    s->span_len[s->n] = (uint32_t)(hi - lo);
    for (int e = 0; e < s->nextras; e++) {
        size_t at = (size_t)s->n * (size_t)s->nextras + (size_t)e;
        s->ext_rel[at] = g->ext[e].have ? (uint32_t)(g->ext[e].off - lo) : 0;
        s->ext_len[at] = g->ext[e].have ? (uint32_t)g->ext[e].len : RF_SOURCE_ABSENT;
    }
    return 0;
}

/* Adds the gathered sample: its one image, its label, its extras. */
static int group_finish(rf_source *s, tar_walk *w)
{
    tar_group *g = &w->g;
    if (!g->active)
        return 0;
    g->active = 0;
    if (!g->img.have) {
        /* webdataset yields such a key as a sample, which then fails where
         * its image is asked for: an error here too, never a silent gap */
        snprintf(w->err, w->errcap,
                 "source: %s: sample \"%s\" (members from offset %llu) has no image member "
                 "(%s .npy)",
                 w->shard, g->key, (unsigned long long)g->first_hdr, rf__image_exts_text);
        return RF_E_SOURCE;
    }
    if (w->label_ext && !g->cls.have) {
        snprintf(w->err, w->errcap,
                 "source: %s: sample \"%s\" (%s at offset %llu) has no .%s member (label=None "
                 "reads shards without labels)",
                 w->shard, g->key, g->img_name, (unsigned long long)g->img.hdr, w->label_ext);
        return RF_E_SOURCE;
    }
    if (g->img.len > UINT32_MAX) {
        snprintf(w->err, w->errcap, "source: %s: member %s at offset %llu is over 4 GiB", w->shard,
                 g->img_name, (unsigned long long)g->img.hdr);
        return RF_E_SOURCE;
    }
    int64_t label = w->label_ext ? g->label : -1;
    if (label > *w->maxlabel)
        *w->maxlabel = label;
    uint64_t noff;
    if (rf__source_reserve(s, 1) < 0 || rf__source_put(s, g->img_name, g->img_name_len, &noff) < 0)
        return RF_E_NOMEM;
    if (s->nextras > 0) {
        int rc = group_span(s, w);
        if (rc != 0)
            return rc;
    }
    s->path_off[s->n] = noff;
    s->labels[s->n] = label;
    s->shard[s->n] = w->shard_id;
    s->data_off[s->n] = g->img.off;
    s->data_len[s->n] = (uint32_t)g->img.len;
    s->n++;
    return 0;
}

/* A second member of a kind the sample must have once: webdataset refuses
 * a repeated extension, and two pictures leave the sample ambiguous. */
static int twice(tar_walk *w, const char *what, const tar_place *first, uint64_t hdr)
{
    snprintf(w->err, w->errcap,
             "source: %s: sample \"%s\" has two %s members (at offsets %llu and %llu); a sample "
             "must have one%s",
             w->shard, w->g.key, what, (unsigned long long)first->hdr, (unsigned long long)hdr,
             strcmp(what, "image") ? ""
                                   : " (a picture member named in extras is read as an extra)");
    return RF_E_SOURCE;
}

/* Reads and parses the label member at data (size bytes). */
static int read_label(tar_walk *w, const char *mname, uint64_t hdr, uint64_t data, uint64_t size)
{
    char text[TAR_MAX_CLS];
    if (size >= TAR_MAX_CLS) {
        snprintf(w->err, w->errcap,
                 "source: %s: %s at offset %llu: a .%s member of %llu bytes "
                 "(expected a small integer)",
                 w->shard, mname, (unsigned long long)hdr, w->label_ext, (unsigned long long)size);
        return RF_E_SOURCE;
    }
    int rc = tar_read(w, text, size, data);
    if (rc != 0)
        return rc;
    if (rf__tar_parse_label(text, size, &w->g.label) != 0) {
        snprintf(w->err, w->errcap,
                 "source: %s: %s at offset %llu: label \"%.*s\" is not an "
                 "integer >= 0",
                 w->shard, mname, (unsigned long long)hdr, (int)(size > 40 ? 40 : size), text);
        return RF_E_SOURCE;
    }
    return 0;
}

/* webdataset skips names matching "__[^/]*__($|/)" (its metadata). */
static int is_meta_name(const char *name)
{
    if (strncmp(name, "__", 2) != 0)
        return 0;
    size_t n = strcspn(name, "/");
    return n >= 4 && name[n - 1] == '_' && name[n - 2] == '_';
}

/* A GNU long name ('L') or pax header ('x') at pos, size bytes of data at
 * data: what it says applies to the next member. */
static int tar_extended(tar_walk *w, char type, uint64_t pos, uint64_t data, uint64_t size)
{
    size_t cap_max = type == 'L' ? TAR_MAX_NAME : TAR_MAX_PAX;
    if (size > cap_max) {
        snprintf(w->err, w->errcap,
                 "source: %s: %s header at offset %llu is too large (%llu "
                 "bytes)",
                 w->shard, type == 'L' ? "long-name" : "pax", (unsigned long long)pos,
                 (unsigned long long)size);
        return RF_E_SOURCE;
    }
    if (size + 1 > w->pax_cap) {
        char *np = realloc(w->pax, size + 1);
        if (!np)
            return RF_E_NOMEM;
        w->pax = np;
        w->pax_cap = size + 1;
    }
    int rc = tar_read(w, w->pax, size, data);
    if (rc != 0)
        return rc;
    w->pax[size] = '\0';
    if (type == 'L') {
        w->have_lname = 1;
        return rf__tar_set_str(&w->lname, &w->lname_cap, &w->lname_len, w->pax,
                               strnlen(w->pax, size));
    }
    rc = rf__tar_pax_parse(w->pax, size, &w->lname, &w->lname_cap, &w->lname_len, &w->have_lname,
                           &w->pax_size, &w->have_pax_size);
    if (rc == -1) {
        snprintf(w->err, w->errcap, "source: %s: malformed pax header at offset %llu", w->shard,
                 (unsigned long long)pos);
        rc = RF_E_SOURCE;
    }
    return rc;
}

/* A regular member named mname (header at hdr, size bytes of data at data):
 * starts a new sample when its key changes, and is one of its extras, its
 * image or its label (or none of these: other modalities are skipped). */
static int tar_member(rf_source *s, tar_walk *w, const char *mname, size_t mlen, uint64_t hdr,
                      uint64_t data, uint64_t size, const int64_t *cls_label)
{
    tar_group *g = &w->g;
    if (is_meta_name(mname))
        return 0;
    /* key: up to the first '.' of the base name; ext: the rest, any case
     * (webdataset's base_plus_ext, extensions lowercased) */
    const char *base = strrchr(mname, '/');
    base = base ? base + 1 : mname;
    const char *dot = strchr(base, '.');
    if (!dot || dot == base)
        return 0; /* no key: skipped, as webdataset does */
    size_t klen = (size_t)(dot - mname);
    const char *ext = dot + 1;
    int rc;
    if (!g->active || g->key_len != klen || memcmp(g->key, mname, klen) != 0) {
        if ((rc = group_finish(s, w)) != 0)
            return rc;
        if ((rc = rf__tar_set_str(&g->key, &g->key_cap, &g->key_len, mname, klen)) != 0)
            return rc;
        g->active = 1;
        g->first_hdr = hdr;
        g->img.have = g->cls.have = g->img_raw = 0;
        for (int e = 0; e < RF_SOURCE_MAX_EXTRAS; e++)
            g->ext[e].have = 0;
    }
    tar_place here = {1, hdr, data, size};
    int extra = 0;
    for (int e = 0; e < w->o->nextras; e++) {
        if (strcasecmp(ext, w->o->extras[e]))
            continue;
        if (g->ext[e].have) {
            char what[RF_SOURCE_MAX_EXT + 2];
            snprintf(what, sizeof what, ".%s", w->o->extras[e]);
            return twice(w, what, &g->ext[e], hdr);
        }
        g->ext[e] = here;
        extra = 1;
    }
    /* a member asked for as an extra is not the picture (key.jpg with a
     * key.png mask and extras=("png",)) */
    int raw = !extra && !strcasecmp(ext, "npy");
    if (!extra && (raw || rf__image_ext(ext))) {
        if (g->img.have && raw && !g->img_raw)
            return 0; /* a picture's key: the .npy is another modality */
        if (g->img.have && !(g->img_raw && !raw))
            return twice(w, "image", &g->img, hdr);
        g->img = here;
        g->img_raw = raw;
        return rf__tar_set_str(&g->img_name, &g->img_name_cap, &g->img_name_len, mname, mlen);
    }
    if (!w->label_ext || strcasecmp(ext, w->label_ext))
        return 0;
    if (g->cls.have) {
        char what[RF_SOURCE_MAX_EXT + 2];
        snprintf(what, sizeof what, ".%s", w->label_ext);
        return twice(w, what, &g->cls, hdr);
    }
    g->cls = here;
    if (cls_label && !strcasecmp(ext, "cls")) { /* the manifest read the .cls member already */
        g->label = *cls_label;
        return 0;
    }
    return read_label(w, mname, hdr, data, size);
}

/* Reads and checks the header at *pos; *type and *size describe the member
 * (size from a preceding pax header where there was one), *next is the
 * header after it. Returns 1 at the end of the archive. */
static int tar_header(tar_walk *w, uint64_t pos, uint8_t *h, char *type, uint64_t *size,
                      uint64_t *next)
{
    if (w->fsize - pos < TAR_BLOCK) {
        snprintf(w->err, w->errcap,
                 "source: %s: truncated tar header at offset %llu (shard is %llu "
                 "bytes)",
                 w->shard, (unsigned long long)pos, (unsigned long long)w->fsize);
        return RF_E_SOURCE;
    }
    int rc = tar_read(w, h, TAR_BLOCK, pos);
    if (rc != 0)
        return rc;
    if (rf__tar_all_zero(h, TAR_BLOCK))
        return 1; /* end of archive */
    if (!rf__tar_checksum_ok(h)) {
        snprintf(w->err, w->errcap,
                 "source: %s: bad tar header checksum at offset %llu (not a tar "
                 "file, or corrupt)",
                 w->shard, (unsigned long long)pos);
        return RF_E_SOURCE;
    }
    if (rf__tar_number(h + 124, 12, size) != 0) {
        snprintf(w->err, w->errcap, "source: %s: bad size field in the tar header at offset %llu",
                 w->shard, (unsigned long long)pos);
        return RF_E_SOURCE;
    }
    *type = (char)h[156];
    if (w->have_pax_size && *type != 'x' && *type != 'g' && *type != 'L' && *type != 'K')
        *size = w->pax_size;
    uint64_t data = pos + TAR_BLOCK;
    if (*size > w->fsize - data) {
        snprintf(w->err, w->errcap,
                 "source: %s: truncated: the member at offset %llu needs %llu "
                 "bytes, the shard ends after %llu",
                 w->shard, (unsigned long long)pos, (unsigned long long)*size,
                 (unsigned long long)(w->fsize - data));
        return RF_E_SOURCE;
    }
    *next = data + (*size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
    return 0;
}

/* The member's name: the long name or pax path if one came before it, else
 * ustar's prefix (155 bytes at 345) "/" name (100 bytes), into name. */
static const char *tar_name(const tar_walk *w, const uint8_t *h, char name[TAR_BLOCK + 2],
                            size_t *mlen)
{
    if (w->have_lname) {
        *mlen = w->lname_len;
        return w->lname;
    }
    rf__tar_ustar_name(h, name, mlen);
    return name;
}

/* Feeds the manifest entry's members to tar_member as the walk would, each
 * named key.ext, its header the block before its data. The shard itself is
 * read for each label member whose text the entry states, to check it
 * (rf__tar_label_ok: TAR_NOT_AS_SAID when it is not as stated), and for a
 * label member the manifest did not read (another label extension), which
 * fails when there is no shard (w->fd < 0: nothing checked, nothing read).
 * 0: the shard counts as indexed from a manifest; nonzero (an error, no
 * sample, a label not as stated): s is as before, and the caller indexes
 * the shard by its walk. */
static int manifest_index(rf_source *s, tar_walk *w, const rf_manifest *m,
                          const rf_manifest_shard *ms)
{
    int64_t before = s->n, maxlabel_before = *w->maxlabel;
    size_t arena_before = s->arena_len;
    int check = w->fd >= 0 && w->label_ext && !strcasecmp(w->label_ext, "cls");
    rf_tar_window win = {.fd = w->fd, .fsize = w->fsize};
    rf_manifest_iter it;
    rf__manifest_iter(&it, m, ms);
    int rc;
    while ((rc = rf__manifest_sample(&it)) == 1) {
        while ((rc = rf__manifest_member(&it)) == 1) {
            size_t need = it.key_len + strlen(it.ext) + 2;
            if (need > w->lname_cap) {
                char *p = realloc(w->lname, need);
                if (!p) {
                    rc = RF_E_NOMEM;
                    break;
                }
                w->lname = p;
                w->lname_cap = need;
            }
            memcpy(w->lname, it.key, it.key_len);
            w->lname[it.key_len] = '.';
            strcpy(w->lname + it.key_len + 1, it.ext);
            /* the label tar_member takes from the entry: checked first */
            int stated = it.label >= 0 && !strcasecmp(it.ext, "cls");
            if (check && stated &&
                !rf__tar_label_ok(&win, it.key, it.ext, it.off, it.len, it.label))
                rc = TAR_NOT_AS_SAID;
            else
                rc = tar_member(s, w, w->lname, need - 1, it.off - TAR_BLOCK, it.off, it.len,
                                it.label >= 0 ? &it.label : NULL);
            if (rc != 0)
                break;
        }
        if (rc != 0)
            break;
    }
    rf__manifest_iter_free(&it);
    rf__tar_window_free(&win);
    if (rc == 0)
        rc = group_finish(s, w);
    if (rc == 0 && s->n == before)
        rc = -1; /* no sample: the walk says why */
    if (rc == 0) {
        s->nfiles_manifest++;
        rf__source_manifest_dims(s, before, m, ms); /* the pictures' sizes, if stated */
        return 0;
    }
    /* undo what the manifest added: the walk alone decides */
    s->n = before;
    s->arena_len = arena_before;
    *w->maxlabel = maxlabel_before;
    w->g.active = 0;
    return rc;
}

/* The header walk: every member in turn. */
static int header_walk(rf_source *s, tar_walk *w)
{
    uint8_t h[TAR_BLOCK];
    char name[TAR_BLOCK + 2];
    uint64_t pos = 0;
    int rc = 0;
    while (rc == 0 && pos < w->fsize) {
        char type;
        uint64_t size, next;
        if ((rc = tar_header(w, pos, h, &type, &size, &next)) != 0)
            break;
        uint64_t hdr = pos, data = pos + TAR_BLOCK;
        pos = next;
        if (type == 'L' || type == 'x') {
            rc = tar_extended(w, type, hdr, data, size);
            continue;
        }
        if (type == 'K' || type == 'g') /* long link name, global pax: not ours */
            continue;
        size_t mlen;
        const char *mname = tar_name(w, h, name, &mlen);
        w->have_lname = w->have_pax_size = 0;
        if (type != '0' && type != '\0' && type != '7') /* not directories, links, ... */
            continue;
        rc = w->each ? w->each(w->each_ctx, mname, mlen, data, size)
                     : tar_member(s, w, mname, mlen, hdr, data, size, NULL);
    }
    if (rc == 1) /* end of archive */
        rc = 0;
    return rc == 0 && !w->each ? group_finish(s, w) : rc;
}

static tar_walk walk_init(int fd, const char *shard, uint32_t shard_id, uint64_t fsize,
                          const rf_source_opts *o, int64_t *maxlabel, char *err, size_t errcap)
{
    return (tar_walk){.fd = fd,
                      .shard = shard,
                      .shard_id = shard_id,
                      .fsize = fsize,
                      .o = o,
                      .label_ext = o->unlabeled ? NULL
                                   : o->label   ? o->label
                                                : "cls",
                      .maxlabel = maxlabel,
                      .err = err,
                      .errcap = errcap};
}

static void walk_free(tar_walk *w)
{
    free(w->g.key);
    free(w->g.img_name);
    free(w->lname);
    free(w->pax);
}

int rf__source_tar_shard(rf_source *s, uint32_t shard_id, const char *path, const char *shard,
                         const rf_source_opts *o, const rf_manifest *man, int64_t *maxlabel,
                         char *err, size_t errcap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) {
        snprintf(err, errcap, "source: open %s: %s", shard, strerror(errno));
        return RF_E_SOURCE;
    }
    int rc = rf__source_tar_shard_fd(s, shard_id, fd, shard, o, man, maxlabel, err, errcap);
    close(fd);
    return rc;
}

int rf__source_tar_shard_fd(rf_source *s, uint32_t shard_id, int fd, const char *shard,
                            const rf_source_opts *o, const rf_manifest *man, int64_t *maxlabel,
                            char *err, size_t errcap)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errcap, "source: %s: not a regular file", shard);
        return RF_E_SOURCE;
    }
    /* A compressed tar says so in its first bytes, whatever its name (a
     * valid tar header whose name happens to start so is a tar). */
    uint8_t first[TAR_BLOCK];
    ssize_t got = pread(fd, first, sizeof first, 0);
    const char *how = got > 0 && !(got == TAR_BLOCK && rf__tar_checksum_ok(first))
                          ? rf__compressed_magic(first, (size_t)got)
                          : NULL;
    if (how)
        return rf__compressed_error(shard, how, err, errcap);
    tar_walk w = walk_init(fd, shard, shard_id, (uint64_t)st.st_size, o, maxlabel, err, errcap);
    int64_t before = s->n;
    const char *base = strrchr(shard, '/');
    const rf_manifest_shard *named = man ? rf__manifest_named(man, base ? base + 1 : shard) : NULL;
    int rc = -1;
    if (named && named->indexed && named->bytes == w.fsize) {
        rf_tar_ends ends;
        rf__tar_manifest_ends(man, named, &ends);
        rc = rf__tar_ends_ok(fd, w.fsize, &ends, NULL) ? manifest_index(s, &w, man, named)
                                                       : TAR_NOT_AS_SAID;
    }
    /* named and indexed, but another size, other ends or other labels: the
     * shard was rewritten since the manifest was written */
    if (named && named->indexed && (named->bytes != w.fsize || rc == TAR_NOT_AS_SAID))
        s->nfiles_mismatched++;
    if (rc != 0)
        rc = header_walk(s, &w);
    if (rc == 0 && s->n == before) {
        snprintf(err, errcap,
                 "source: %s: no samples (no members named <key>.<picture extension>: %s .npy)",
                 shard,
                 rf__image_exts_text);
        rc = RF_E_SOURCE;
    }
    walk_free(&w);
    return rc;
}

int rf__tar_walk_members(int fd, uint64_t fsize, rf_tar_member_fn *fn, void *ctx)
{
    char err[256];
    rf_source_opts o = {0};
    int64_t maxlabel = -1;
    tar_walk w = walk_init(fd, "", 0, fsize, &o, &maxlabel, err, sizeof err);
    w.each = fn;
    w.each_ctx = ctx;
    int rc = header_walk(NULL, &w);
    walk_free(&w);
    return rc;
}

int rf__source_tar_from_manifest(rf_source *s, uint32_t shard_id, const char *shard,
                                 const rf_source_opts *o, const rf_manifest *man,
                                 const rf_manifest_shard *ms, int64_t *maxlabel, char *err,
                                 size_t errcap)
{
    tar_walk w = walk_init(-1, shard, shard_id, ms->bytes, o, maxlabel, err, errcap);
    int rc = manifest_index(s, &w, man, ms);
    walk_free(&w);
    return rc;
}

/* The manifest.json in the folder of shard path, parsed into *m unless the
 * folder is the one parsed last (prefix: that folder, with its '/').
 * Returns m, or NULL when the folder has no usable manifest. */
static const rf_manifest *folder_manifest(const char *path, rf_manifest *m, char *prefix,
                                          size_t cap, int *have)
{
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
    if (dl >= cap)
        return NULL;
    if (*have >= 0 && strlen(prefix) == dl && !memcmp(prefix, path, dl))
        return *have ? m : NULL;
    rf__manifest_free(m);
    memcpy(prefix, path, dl);
    prefix[dl] = '\0';
    char mp[4096], merr[256];
    snprintf(mp, sizeof mp, "%smanifest.json", prefix);
    *have = access(mp, F_OK) == 0 && rf__manifest_read(mp, m, merr, sizeof merr) == 0;
    return *have ? m : NULL;
}

int rf__source_index_tar(rf_source *s, const rf_strlist *paths, const rf_source_opts *o, char *err,
                         size_t errcap)
{
    s->kind = RF_SOURCE_TAR;
    s->nextras = o->nextras;
    int rc = rf__source_put_files(s, paths);
    int64_t maxlabel = -1;
    rf_manifest man = {0};
    char prefix[4096];
    int have = -1; /* -1: no folder's manifest looked for yet */
    for (uint32_t f = 0; rc == 0 && f < s->nfiles; f++) {
        const char *path = s->arena + s->file_off[f];
        const rf_manifest *m = folder_manifest(path, &man, prefix, sizeof prefix, &have);
        /* path points into the arena, which indexing moves: copied first */
        char *p = strdup(path);
        rc = p ? rf__source_tar_shard(s, f, p, p, o, m, &maxlabel, err, errcap) : RF_E_NOMEM;
        free(p);
        if (rc == 0 && s->n > UINT32_MAX) {
            snprintf(err, errcap, "source: more than %u samples", UINT32_MAX);
            rc = RF_E_SOURCE;
        }
    }
    rf__manifest_free(&man);
    s->nclasses = maxlabel + 1;
    return rc;
}
