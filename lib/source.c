/*
 * source.c - builds the sample index: image folder, list file, WebDataset tar
 * shards, fixed-size record files; and expands the patterns that name shards.
 *
 * Image folder: torchvision ImageFolder semantics. The class folders under the
 * root, sorted by name, give labels 0..C-1; within a class every file whose
 * name ends in .jpg/.jpeg (any case) is a sample, found by walking the class
 * folder recursively and ordered as sorted(os.walk(...)) then sorted(files)
 * orders them. Only directories are listed; sample files are never opened or
 * stat'ed (readdir's d_type tells files from folders).
 *
 * List file: "path<TAB>label" per line; relative paths are resolved against
 * the folder holding the list; blank lines and lines starting with '#' are
 * skipped.
 *
 * Tar shards (WebDataset): one walk over the 512-byte headers of each shard,
 * pread of the headers only, member data skipped (except the few bytes of
 * .cls members, which hold the labels). A member "dir/key.ext" belongs to
 * sample "dir/key" (the key ends at the first '.' of the base name, as
 * webdataset splits it); consecutive members with the same key form one
 * sample. A sample is its .jpg or .jpeg member (the first one) and the
 * integer text of its .cls member; keys without a .jpg/.jpeg are ignored
 * (other modalities, metadata), a .jpg without a .cls is an error naming the
 * shard and the key. GNU long names ('L') and pax headers ('x': path, size)
 * are honoured; directories, links and other members are skipped. A bad
 * header checksum or a member running past the end of the shard is
 * RF_E_SOURCE naming the shard and the offset.
 *
 * Record files: sample i is record i of the concatenated files, bytes
 * [header + j * record_size, + record_size) of its file; a trailing partial
 * record is ignored. Nothing is stored per record.
 *
 * Patterns: "{0000..0099}" (zero-padded when an end is), "{a,b}" (nested
 * braces allowed), expanded left to right as bash does; then each result
 * with '*', '?' or '[' is globbed, matches sorted by byte value.
 */
#define _GNU_SOURCE
#include "source.h"

#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ringfeed.h"

static int arena_put(rf_source *s, const char *str, size_t len, uint64_t *off)
{
    if (s->arena_len + len + 1 > s->arena_cap) {
        size_t cap = s->arena_cap ? s->arena_cap : 1 << 16;
        while (cap < s->arena_len + len + 1)
            cap *= 2;
        char *a = realloc(s->arena, cap);
        if (!a)
            return RF_E_NOMEM;
        s->arena = a;
        s->arena_cap = cap;
    }
    memcpy(s->arena + s->arena_len, str, len);
    s->arena[s->arena_len + len] = '\0';
    *off = s->arena_len;
    s->arena_len += len + 1;
    return 0;
}

int rf__source_add(rf_source *s, const char *path, size_t path_len, int64_t label)
{
    if (s->n == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 1024;
        uint64_t *po = realloc(s->path_off, (size_t)cap * sizeof *po);
        if (!po)
            return RF_E_NOMEM;
        s->path_off = po;
        int64_t *lb = realloc(s->labels, (size_t)cap * sizeof *lb);
        if (!lb)
            return RF_E_NOMEM;
        s->labels = lb;
        s->cap = cap;
    }
    uint64_t off;
    if (arena_put(s, path, path_len, &off) < 0)
        return RF_E_NOMEM;
    s->path_off[s->n] = off;
    s->labels[s->n] = label;
    s->n++;
    return 0;
}

void rf__source_close(rf_source *s)
{
    if (!s)
        return;
    free(s->arena);
    free(s->path_off);
    free(s->labels);
    free(s->class_off);
    free(s->file_off);
    free(s->shard);
    free(s->data_off);
    free(s->data_len);
    free(s->first);
    memset(s, 0, sizeof *s);
}

static int has_jpeg_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

/* A growable list of strings in a private arena (used while walking). */
typedef struct strlist {
    char *buf;
    size_t len, cap;
    size_t *off;
    size_t n, ncap;
} strlist;

static int strlist_add(strlist *l, const char *a, const char *b)
{
    size_t la = strlen(a), lb = b ? strlen(b) : 0;
    size_t need = la + (b ? 1 + lb : 0) + 1;
    if (l->len + need > l->cap) {
        size_t cap = l->cap ? l->cap : 4096;
        while (cap < l->len + need)
            cap *= 2;
        char *nb = realloc(l->buf, cap);
        if (!nb)
            return RF_E_NOMEM;
        l->buf = nb;
        l->cap = cap;
    }
    if (l->n == l->ncap) {
        size_t ncap = l->ncap ? l->ncap * 2 : 256;
        size_t *no = realloc(l->off, ncap * sizeof *no);
        if (!no)
            return RF_E_NOMEM;
        l->off = no;
        l->ncap = ncap;
    }
    char *p = l->buf + l->len;
    memcpy(p, a, la);
    if (b) {
        p[la] = '/';
        memcpy(p + la + 1, b, lb);
    }
    p[need - 1] = '\0';
    l->off[l->n++] = l->len;
    l->len += need;
    return 0;
}

static void strlist_free(strlist *l)
{
    free(l->buf);
    free(l->off);
    memset(l, 0, sizeof *l);
}

/* qsort_r (glibc): the strings' base travels as the context, never in a
 * global, so that loaders may index on several threads at once. */
static int cmp_off(const void *a, const void *b, void *base)
{
    const char *s = base;
    return strcmp(s + *(const size_t *)a, s + *(const size_t *)b);
}

static void strlist_sort(strlist *l)
{
    if (l->n > 1)
        qsort_r(l->off, l->n, sizeof *l->off, cmp_off, l->buf);
}

static int entry_is_dir(const char *dir, struct dirent *e)
{
    if (e->d_type == DT_DIR)
        return 1;
    if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK)
        return 0;
    /* Unknown type or a symlink: ImageFolder follows links, so ask stat. */
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
        return 0;
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Lists the directories below `dir` (itself included), recursively. */
/* The folders above the one being walked: a symlink back to one of them is a
 * loop, which would otherwise make the walk explode. */
typedef struct walk_parent {
    dev_t dev;
    ino_t ino;
    const struct walk_parent *up;
} walk_parent;

static int walk_dirs(const char *dir, strlist *dirs, const walk_parent *up, int depth, char *err,
                     size_t errcap)
{
    if (depth > 64) {
        snprintf(err, errcap, "source: %s: folders nested too deep", dir);
        return RF_E_SOURCE;
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(err, errcap, "source: stat %s: %s", dir, strerror(errno));
        return RF_E_SOURCE;
    }
    for (const walk_parent *p = up; p; p = p->up)
        if (p->dev == st.st_dev && p->ino == st.st_ino) {
            snprintf(err, errcap, "source: %s: symlink loop (a folder contains itself)", dir);
            return RF_E_SOURCE;
        }
    walk_parent self = {st.st_dev, st.st_ino, up};
    int rc = strlist_add(dirs, dir, NULL);
    if (rc < 0)
        return rc;
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errcap, "source: opendir %s: %s", dir, strerror(errno));
        return RF_E_SOURCE;
    }
    strlist subs = {0};
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (entry_is_dir(dir, e) && (rc = strlist_add(&subs, dir, e->d_name)) < 0)
            break;
    }
    closedir(d);
    for (size_t i = 0; rc == 0 && i < subs.n; i++)
        rc = walk_dirs(subs.buf + subs.off[i], dirs, &self, depth + 1, err, errcap);
    strlist_free(&subs);
    return rc;
}

/* Appends the samples of one class folder in ImageFolder's order. */
static int index_class(rf_source *s, const char *cdir, int64_t label, char *err, size_t errcap)
{
    strlist dirs = {0}, files = {0};
    int rc = walk_dirs(cdir, &dirs, NULL, 0, err, errcap);
    if (rc == 0)
        strlist_sort(&dirs); /* sorted(os.walk()) orders by the walked path */
    for (size_t i = 0; rc == 0 && i < dirs.n; i++) {
        const char *dir = dirs.buf + dirs.off[i];
        DIR *d = opendir(dir);
        if (!d) {
            snprintf(err, errcap, "source: opendir %s: %s", dir, strerror(errno));
            rc = RF_E_SOURCE;
            break;
        }
        files.len = files.n = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_type == DT_DIR || !has_jpeg_ext(e->d_name))
                continue;
            /* A directory named like an image is kept when d_type cannot tell
             * (DT_UNKNOWN): the reader reports it with its path. */
            if (e->d_type == DT_LNK && entry_is_dir(dir, e))
                continue;
            if ((rc = strlist_add(&files, e->d_name, NULL)) < 0)
                break;
        }
        closedir(d);
        strlist_sort(&files);
        size_t dlen = strlen(dir);
        char path[8192];
        for (size_t j = 0; rc == 0 && j < files.n; j++) {
            const char *name = files.buf + files.off[j];
            size_t nlen = strlen(name);
            if (dlen + 1 + nlen + 1 > sizeof path) {
                snprintf(err, errcap, "source: %s/%s: path too long", dir, name);
                rc = RF_E_SOURCE;
                break;
            }
            memcpy(path, dir, dlen);
            path[dlen] = '/';
            memcpy(path + dlen + 1, name, nlen + 1);
            rc = rf__source_add(s, path, dlen + 1 + nlen, label);
        }
    }
    strlist_free(&dirs);
    strlist_free(&files);
    return rc;
}

static int index_folder(rf_source *s, const char *root, char *err, size_t errcap)
{
    DIR *d = opendir(root);
    if (!d) {
        snprintf(err, errcap, "source: opendir %s: %s", root, strerror(errno));
        return RF_E_SOURCE;
    }
    strlist classes = {0};
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (entry_is_dir(root, e) && (rc = strlist_add(&classes, e->d_name, NULL)) < 0)
            break;
    }
    closedir(d);
    if (rc == 0 && classes.n == 0) {
        snprintf(err, errcap, "source: %s: no class folders (expected root/<class>/<file>.jpg)",
                 root);
        rc = RF_E_SOURCE;
    }
    if (rc == 0) {
        strlist_sort(&classes);
        s->kind = RF_SOURCE_FOLDER;
        s->nclasses = (int64_t)classes.n;
        s->class_off = calloc(classes.n, sizeof *s->class_off);
        if (!s->class_off)
            rc = RF_E_NOMEM;
    }
    size_t rlen = strlen(root);
    while (rlen > 1 && root[rlen - 1] == '/')
        rlen--;
    char cdir[4096];
    for (size_t c = 0; rc == 0 && c < classes.n; c++) {
        const char *name = classes.buf + classes.off[c];
        if ((rc = arena_put(s, name, strlen(name), &s->class_off[c])) < 0)
            break;
        if (snprintf(cdir, sizeof cdir, "%.*s/%s", (int)rlen, root, name) >= (int)sizeof cdir) {
            snprintf(err, errcap, "source: %s/%s: path too long", root, name);
            rc = RF_E_SOURCE;
            break;
        }
        int64_t before = s->n;
        rc = index_class(s, cdir, (int64_t)c, err, errcap);
        if (rc == 0 && s->n == before) {
            /* As ImageFolder: a class without images is an error, not a silent gap in labels. */
            snprintf(err, errcap, "source: class folder %s has no .jpg/.jpeg files", cdir);
            rc = RF_E_SOURCE;
        }
    }
    strlist_free(&classes);
    return rc;
}

static int index_list(rf_source *s, const char *list, char *err, size_t errcap)
{
    FILE *f = fopen(list, "r");
    if (!f) {
        snprintf(err, errcap, "source: open %s: %s", list, strerror(errno));
        return RF_E_SOURCE;
    }
    s->kind = RF_SOURCE_LIST;
    const char *slash = strrchr(list, '/');
    size_t base_len = slash ? (size_t)(slash - list) + 1 : 0;
    char *line = NULL, *path = NULL;
    size_t line_cap = 0, path_cap = 0;
    ssize_t got;
    int64_t lineno = 0, maxlabel = -1;
    int rc = 0;
    while (rc == 0 && (got = getline(&line, &line_cap, f)) >= 0) {
        lineno++;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = '\0';
        if (got == 0 || line[0] == '#')
            continue;
        char *tab = strrchr(line, '\t');
        char *end = NULL;
        errno = 0;
        long long label = tab ? strtoll(tab + 1, &end, 10) : -1;
        /* INT64_MAX is refused too: nclasses = max label + 1 must not overflow */
        if (!tab || tab == line || end == tab + 1 || *end != '\0' || label < 0 || errno == ERANGE ||
            label == INT64_MAX) {
            snprintf(err, errcap, "source: %s:%lld: expected \"path<TAB>label\" with label >= 0",
                     list, (long long)lineno);
            rc = RF_E_SOURCE;
            break;
        }
        size_t plen = (size_t)(tab - line);
        size_t need = (line[0] == '/' ? 0 : base_len) + plen + 1;
        if (need > path_cap) {
            char *np = realloc(path, need);
            if (!np) {
                rc = RF_E_NOMEM;
                break;
            }
            path = np;
            path_cap = need;
        }
        size_t at = 0;
        if (line[0] != '/') {
            memcpy(path, list, base_len);
            at = base_len;
        }
        memcpy(path + at, line, plen);
        path[at + plen] = '\0';
        rc = rf__source_add(s, path, at + plen, label);
        if (label > maxlabel)
            maxlabel = label;
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errcap, "source: read %s: %s", list, strerror(errno));
        rc = RF_E_SOURCE;
    }
    if (rc == 0 && s->n == 0) {
        snprintf(err, errcap, "source: %s: no samples", list);
        rc = RF_E_SOURCE;
    }
    s->nclasses = maxlabel + 1;
    free(line);
    free(path);
    fclose(f);
    return rc;
}

/* ---- patterns ------------------------------------------------------------ */

#define RF_MAX_EXPANSION (1 << 20) /* paths one pattern may expand to */

typedef struct expand_ctx {
    int (*fn)(const char *path, void *ctx);
    void *ctx;
    const char *pattern;
    int64_t count;
    char *err;
    size_t errcap;
} expand_ctx;

static int has_glob_chars(const char *p)
{
    return strpbrk(p, "*?[") != NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int emit(expand_ctx *x, const char *path)
{
    if (++x->count > RF_MAX_EXPANSION) {
        snprintf(x->err, x->errcap, "source: pattern %s expands to more than %d paths", x->pattern,
                 RF_MAX_EXPANSION);
        return RF_E_SOURCE;
    }
    return x->fn(path, x->ctx);
}

/* A brace-free word: itself, or its glob matches in byte order. */
static int expand_glob(expand_ctx *x, const char *word)
{
    if (!has_glob_chars(word))
        return emit(x, word);
    glob_t g;
    memset(&g, 0, sizeof g);
    int grc = glob(word, GLOB_NOSORT | GLOB_ERR, NULL, &g);
    if (grc == GLOB_NOMATCH) {
        globfree(&g);
        snprintf(x->err, x->errcap, "source: pattern %s matches no files", word);
        return RF_E_SOURCE;
    }
    if (grc != 0) {
        globfree(&g);
        snprintf(x->err, x->errcap, "source: pattern %s: %s", word,
                 grc == GLOB_NOSPACE ? "out of memory" : "read error");
        return grc == GLOB_NOSPACE ? RF_E_NOMEM : RF_E_SOURCE;
    }
    /* glob sorts with strcoll; the order must not depend on the locale. */
    qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, cmp_str);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
        rc = emit(x, g.gl_pathv[i]);
    globfree(&g);
    return rc;
}

/* One integer of a range at *pp (optional sign, 1..18 digits). */
static int parse_int(const char **pp, const char *e, long long *v, int *len, int *zero_padded)
{
    const char *p = *pp, *q = p;
    if (q < e && (*q == '-' || *q == '+'))
        q++;
    const char *digits = q;
    while (q < e && isdigit((unsigned char)*q))
        q++;
    if (q == digits || q - digits > 18)
        return 0;
    char num[24];
    memcpy(num, p, (size_t)(q - p));
    num[q - p] = '\0';
    *v = strtoll(num, NULL, 10);
    *len = (int)(q - p);
    *zero_padded = q - digits > 1 && digits[0] == '0';
    *pp = q;
    return 1;
}

static int parse_dots(const char **pp, const char *e)
{
    if (e - *pp < 2 || (*pp)[0] != '.' || (*pp)[1] != '.')
        return 0;
    *pp += 2;
    return 1;
}

/* Parses the brace body [b, e) as "A..B" or "A..B..STEP" (integers). As
 * bash, the numbers are zero-padded to the wider end when an end is. */
static int parse_range(const char *b, const char *e, long long *lo, long long *hi, long long *step,
                       int *width)
{
    const char *p = b;
    int l1, l2, l3, z1, z2, z3;
    *step = 1;
    if (!parse_int(&p, e, lo, &l1, &z1) || !parse_dots(&p, e) || !parse_int(&p, e, hi, &l2, &z2))
        return 0;
    if (p < e && (!parse_dots(&p, e) || !parse_int(&p, e, step, &l3, &z3)))
        return 0;
    if (p != e)
        return 0;
    if (*step < 0)
        *step = -*step;
    if (*step == 0)
        *step = 1;
    *width = z1 || z2 ? (l1 > l2 ? l1 : l2) : 0;
    return 1;
}

/* Expands the first valid brace group at or after `from` in word (bash
 * semantics: "{a}" and unbalanced braces stay literal), recursively. */
static int expand_braces(expand_ctx *x, const char *word, size_t from)
{
    size_t len = strlen(word);
    for (size_t i = from; i < len; i++) {
        if (word[i] != '{')
            continue;
        int depth = 0, commas = 0;
        size_t j;
        for (j = i; j < len; j++) {
            if (word[j] == '{')
                depth++;
            else if (word[j] == '}' && --depth == 0)
                break;
            else if (word[j] == ',' && depth == 1)
                commas++;
        }
        if (j == len)
            break; /* unbalanced: the rest is literal */
        const char *body = word + i + 1, *body_end = word + j;
        long long lo, hi, step;
        int width;
        int is_range = !commas && parse_range(body, body_end, &lo, &hi, &step, &width);
        if (!commas && !is_range)
            continue; /* "{x}": literal */
        size_t cap = len + 64;
        char *buf = malloc(cap);
        if (!buf)
            return RF_E_NOMEM;
        memcpy(buf, word, i);
        int rc = 0;
        if (is_range) {
            long long dir = lo <= hi ? 1 : -1;
            for (long long v = lo; rc == 0 && (dir > 0 ? v <= hi : v >= hi); v += dir * step) {
                /* cap: the number (at most 20 characters, padded to at most the body's
                 * width) replaces a body at least as long as its width */
                int nl = snprintf(buf + i, cap - i, "%0*lld", width, v);
                assert(nl > 0 && i + (size_t)nl + strlen(word + j + 1) < cap);
                strcpy(buf + i + nl, word + j + 1);
                /* the suffix may hold more groups; the number holds none */
                rc = expand_braces(x, buf, i + (size_t)nl);
            }
        } else {
            const char *alt = body;
            depth = 0;
            for (const char *p = body; rc == 0 && p <= body_end; p++) {
                if (p < body_end && *p == '{')
                    depth++;
                else if (p < body_end && *p == '}')
                    depth--;
                if (p < body_end && (*p != ',' || depth != 0))
                    continue;
                size_t alen = (size_t)(p - alt);
                memcpy(buf + i, alt, alen);
                strcpy(buf + i + alen, word + j + 1);
                rc = expand_braces(x, buf, i); /* the alternative may hold groups */
                alt = p + 1;
            }
        }
        free(buf);
        return rc;
    }
    return expand_glob(x, word);
}

int rf__source_expand(const char *pattern, int (*fn)(const char *path, void *ctx), void *ctx,
                      char *err, size_t errcap)
{
    expand_ctx x = {fn, ctx, pattern, 0, err, errcap};
    return expand_braces(&x, pattern, 0);
}

/* ---- per-sample arrays of tar shards --------------------------------------- */

static int tar_add(rf_source *s, uint32_t shard, uint64_t off, uint32_t len, const char *name,
                   size_t name_len, int64_t label)
{
    if (s->n == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 1024;
        uint64_t *po = realloc(s->path_off, (size_t)cap * sizeof *po);
        if (po)
            s->path_off = po;
        int64_t *lb = realloc(s->labels, (size_t)cap * sizeof *lb);
        if (lb)
            s->labels = lb;
        uint32_t *sh = realloc(s->shard, (size_t)cap * sizeof *sh);
        if (sh)
            s->shard = sh;
        uint64_t *dof = realloc(s->data_off, (size_t)cap * sizeof *dof);
        if (dof)
            s->data_off = dof;
        uint32_t *dl = realloc(s->data_len, (size_t)cap * sizeof *dl);
        if (dl)
            s->data_len = dl;
        if (!po || !lb || !sh || !dof || !dl)
            return RF_E_NOMEM;
        s->cap = cap;
    }
    uint64_t noff;
    if (arena_put(s, name, name_len, &noff) < 0)
        return RF_E_NOMEM;
    s->path_off[s->n] = noff;
    s->labels[s->n] = label;
    s->shard[s->n] = shard;
    s->data_off[s->n] = off;
    s->data_len[s->n] = len;
    s->n++;
    return 0;
}

/* ---- tar shards ---------------------------------------------------------- */

#define TAR_BLOCK 512
#define TAR_MAX_NAME 65536    /* GNU long name / pax path */
#define TAR_MAX_PAX (1 << 20) /* pax extended header */
#define TAR_MAX_CLS 256       /* text of a .cls member */

/* Reads exactly n bytes at off: 0, or -1 with errno (EIO at end of file). */
static int pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {
            errno = EIO;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

/* Octal field (leading spaces/NULs, digits, then NUL or space), or GNU
 * base-256 (high bit of the first byte). 0, or -1 when malformed. */
static int tar_number(const uint8_t *f, size_t n, uint64_t *out)
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

static int tar_checksum_ok(const uint8_t *h)
{
    uint64_t want;
    if (tar_number(h + 148, 8, &want) != 0)
        return 0;
    uint64_t usum = 0;
    int64_t ssum = 0;
    for (int i = 0; i < TAR_BLOCK; i++) {
        int c = i >= 148 && i < 156 ? ' ' : h[i];
        usum += (uint64_t)c;
        ssum += i >= 148 && i < 156 ? ' ' : (int8_t)h[i]; /* old tars summed signed chars */
    }
    return usum == want || (uint64_t)ssum == want;
}

static int all_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

/* Parses pax records "LEN key=value\n" for path and size. */
static int pax_parse(const char *p, size_t n, char **path, size_t *path_cap, int *have_path,
                     uint64_t *size, int *have_size)
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
            if (vlen + 1 > *path_cap) {
                char *np = realloc(*path, vlen + 1);
                if (!np)
                    return RF_E_NOMEM;
                *path = np;
                *path_cap = vlen + 1;
            }
            memcpy(*path, eq + 1, vlen);
            (*path)[vlen] = '\0';
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

/* The sample being gathered: consecutive members sharing a key. */
typedef struct tar_group {
    char *key;
    size_t key_len, key_cap;
    int active;
    int has_img, has_cls;
    uint64_t img_off, img_len, img_hdr;
    char *img_name;
    size_t img_name_len, img_name_cap;
    int64_t label;
} tar_group;

static int set_str(char **dst, size_t *dcap, size_t *dlen, const char *src, size_t n)
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

static int group_finish(rf_source *s, uint32_t shard_id, const char *shard, tar_group *g,
                        int64_t *maxlabel, char *err, size_t errcap)
{
    if (!g->active || !g->has_img) {
        g->active = 0;
        return 0; /* no image: another modality or metadata, ignored */
    }
    g->active = 0;
    if (!g->has_cls) {
        snprintf(err, errcap, "source: %s: sample \"%s\" (%s at offset %llu) has no .cls member",
                 shard, g->key, g->img_name, (unsigned long long)g->img_hdr);
        return RF_E_SOURCE;
    }
    if (g->img_len > UINT32_MAX) {
        snprintf(err, errcap, "source: %s: member %s at offset %llu is over 4 GiB", shard,
                 g->img_name, (unsigned long long)g->img_hdr);
        return RF_E_SOURCE;
    }
    if (g->label > *maxlabel)
        *maxlabel = g->label;
    return tar_add(s, shard_id, g->img_off, (uint32_t)g->img_len, g->img_name, g->img_name_len,
                   g->label);
}

/* Parses the text of a .cls member: an integer >= 0, blanks around it allowed. */
static int parse_label(const char *t, size_t n, int64_t *out)
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

static int index_tar(rf_source *s, uint32_t shard_id, const char *shard, int64_t *maxlabel,
                     char *err, size_t errcap)
{
    int fd = open(shard, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) {
        snprintf(err, errcap, "source: open %s: %s", shard, strerror(errno));
        return RF_E_SOURCE;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errcap, "source: %s: not a regular file", shard);
        close(fd);
        return RF_E_SOURCE;
    }
    uint64_t fsize = (uint64_t)st.st_size, pos = 0;
    uint8_t h[TAR_BLOCK];
    char *lname = NULL, *pax = NULL;
    size_t lname_cap = 0, lname_len = 0, pax_cap = 0;
    int have_lname = 0, have_pax_size = 0;
    uint64_t pax_size = 0;
    tar_group g = {0};
    char name[TAR_BLOCK + 2];
    int64_t before = s->n;
    int rc = 0;
    while (rc == 0 && pos < fsize) {
        if (fsize - pos < TAR_BLOCK) {
            snprintf(err, errcap,
                     "source: %s: truncated tar header at offset %llu (shard is %llu "
                     "bytes)",
                     shard, (unsigned long long)pos, (unsigned long long)fsize);
            rc = RF_E_SOURCE;
            break;
        }
        if (pread_full(fd, h, TAR_BLOCK, pos) != 0) {
            snprintf(err, errcap, "source: read %s at offset %llu: %s", shard,
                     (unsigned long long)pos, strerror(errno));
            rc = RF_E_SOURCE;
            break;
        }
        if (all_zero(h, TAR_BLOCK))
            break; /* end of archive */
        uint64_t size;
        if (!tar_checksum_ok(h)) {
            snprintf(err, errcap,
                     "source: %s: bad tar header checksum at offset %llu (not a tar "
                     "file, or corrupt)",
                     shard, (unsigned long long)pos);
            rc = RF_E_SOURCE;
            break;
        }
        if (tar_number(h + 124, 12, &size) != 0) {
            snprintf(err, errcap, "source: %s: bad size field in the tar header at offset %llu",
                     shard, (unsigned long long)pos);
            rc = RF_E_SOURCE;
            break;
        }
        char type = (char)h[156];
        if (have_pax_size && type != 'x' && type != 'g' && type != 'L' && type != 'K')
            size = pax_size;
        uint64_t data = pos + TAR_BLOCK;
        if (size > fsize - data) {
            snprintf(err, errcap,
                     "source: %s: truncated: the member at offset %llu needs %llu "
                     "bytes, the shard ends after %llu",
                     shard, (unsigned long long)pos, (unsigned long long)size,
                     (unsigned long long)(fsize - data));
            rc = RF_E_SOURCE;
            break;
        }
        uint64_t next = data + (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
        if (type == 'L' || type == 'x') {
            /* GNU long name / pax header: applies to the next member */
            size_t cap_max = type == 'L' ? TAR_MAX_NAME : TAR_MAX_PAX;
            if (size > cap_max) {
                snprintf(err, errcap,
                         "source: %s: %s header at offset %llu is too large (%llu "
                         "bytes)",
                         shard, type == 'L' ? "long-name" : "pax", (unsigned long long)pos,
                         (unsigned long long)size);
                rc = RF_E_SOURCE;
                break;
            }
            if (size + 1 > pax_cap) {
                char *np = realloc(pax, size + 1);
                if (!np) {
                    rc = RF_E_NOMEM;
                    break;
                }
                pax = np;
                pax_cap = size + 1;
            }
            if (pread_full(fd, pax, size, data) != 0) {
                snprintf(err, errcap, "source: read %s at offset %llu: %s", shard,
                         (unsigned long long)data, strerror(errno));
                rc = RF_E_SOURCE;
                break;
            }
            pax[size] = '\0';
            if (type == 'L') {
                rc = set_str(&lname, &lname_cap, &lname_len, pax, strnlen(pax, size));
                have_lname = 1;
            } else {
                rc = pax_parse(pax, size, &lname, &lname_cap, &have_lname, &pax_size,
                               &have_pax_size);
                if (rc == 0 && have_lname)
                    lname_len = strlen(lname);
                if (rc == -1) {
                    snprintf(err, errcap, "source: %s: malformed pax header at offset %llu", shard,
                             (unsigned long long)pos);
                    rc = RF_E_SOURCE;
                }
            }
            pos = next;
            continue;
        }
        if (type == 'K' || type == 'g') { /* long link name, global pax: not ours */
            pos = next;
            continue;
        }
        const char *mname;
        size_t mlen;
        if (have_lname) {
            mname = lname;
            mlen = lname_len;
        } else {
            /* ustar: prefix (155 bytes at 345) "/" name (100 bytes) */
            size_t nlen = strnlen((const char *)h, 100), plen = 0;
            if (!memcmp(h + 257, "ustar", 5))
                plen = strnlen((const char *)h + 345, 155);
            mlen = 0;
            if (plen) {
                memcpy(name, h + 345, plen);
                name[plen] = '/';
                mlen = plen + 1;
            }
            memcpy(name + mlen, h, nlen);
            mlen += nlen;
            name[mlen] = '\0';
            mname = name;
        }
        have_lname = have_pax_size = 0;
        uint64_t hdr = pos;
        pos = next;
        if (type != '0' && type != '\0' && type != '7')
            continue; /* directories, links, devices, ... */
        /* key: up to the first '.' of the base name (webdataset's split) */
        const char *base = strrchr(mname, '/');
        base = base ? base + 1 : mname;
        const char *dot = strchr(base, '.');
        if (!dot || dot == base)
            continue; /* no key: skipped, as webdataset does */
        size_t klen = (size_t)(dot - mname);
        const char *ext = dot + 1;
        if (!g.active || g.key_len != klen || memcmp(g.key, mname, klen) != 0) {
            if ((rc = group_finish(s, shard_id, shard, &g, maxlabel, err, errcap)) != 0)
                break;
            if ((rc = set_str(&g.key, &g.key_cap, &g.key_len, mname, klen)) != 0)
                break;
            g.active = 1;
            g.has_img = g.has_cls = 0;
        }
        if (!strcasecmp(ext, "jpg") || !strcasecmp(ext, "jpeg")) {
            if (g.has_img)
                continue; /* the first image of a key is the sample */
            g.has_img = 1;
            g.img_off = data;
            g.img_len = size;
            g.img_hdr = hdr;
            rc = set_str(&g.img_name, &g.img_name_cap, &g.img_name_len, mname, mlen);
        } else if (!strcasecmp(ext, "cls")) {
            char text[TAR_MAX_CLS];
            if (size >= TAR_MAX_CLS) {
                snprintf(err, errcap,
                         "source: %s: %s at offset %llu: a .cls member of %llu bytes "
                         "(expected a small integer)",
                         shard, mname, (unsigned long long)hdr, (unsigned long long)size);
                rc = RF_E_SOURCE;
                break;
            }
            if (pread_full(fd, text, size, data) != 0) {
                snprintf(err, errcap, "source: read %s at offset %llu: %s", shard,
                         (unsigned long long)data, strerror(errno));
                rc = RF_E_SOURCE;
                break;
            }
            if (parse_label(text, size, &g.label) != 0) {
                snprintf(err, errcap,
                         "source: %s: %s at offset %llu: label \"%.*s\" is not an "
                         "integer >= 0",
                         shard, mname, (unsigned long long)hdr, (int)(size > 40 ? 40 : size), text);
                rc = RF_E_SOURCE;
                break;
            }
            g.has_cls = 1;
        }
    }
    if (rc == 0)
        rc = group_finish(s, shard_id, shard, &g, maxlabel, err, errcap);
    if (rc == 0 && s->n == before) {
        snprintf(err, errcap, "source: %s: no samples (no .jpg/.jpeg members with a .cls label)",
                 shard);
        rc = RF_E_SOURCE;
    }
    free(g.key);
    free(g.img_name);
    free(lname);
    free(pax);
    close(fd);
    return rc;
}

/* ---- files named by a spec ------------------------------------------------ */

typedef struct file_list {
    strlist paths;
} file_list;

static int collect(const char *path, void *ctx)
{
    file_list *f = ctx;
    return strlist_add(&f->paths, path, NULL);
}

/* Every file of a spec: '\n'-separated entries, each expanded. */
static int collect_files(const char *spec, file_list *files, char *err, size_t errcap)
{
    const char *p = spec;
    char *entry = NULL;
    int rc = 0;
    while (rc == 0 && *p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (n > 0) {
            char *e = realloc(entry, n + 1);
            if (!e) {
                rc = RF_E_NOMEM;
                break;
            }
            entry = e;
            memcpy(entry, p, n);
            entry[n] = '\0';
            struct stat st;
            /* an existing path is itself, even when it holds pattern characters */
            if (stat(entry, &st) == 0)
                rc = strlist_add(&files->paths, entry, NULL);
            else
                rc = rf__source_expand(entry, collect, files, err, errcap);
        }
        p += nl ? (size_t)(nl - p) + 1 : strlen(p);
    }
    free(entry);
    if (rc == 0 && files->paths.n == 0) {
        snprintf(err, errcap, "source: \"%s\" names no files", spec);
        rc = RF_E_SOURCE;
    }
    if (rc == 0 && files->paths.n > UINT32_MAX / 2) {
        snprintf(err, errcap, "source: too many files (%zu)", files->paths.n);
        rc = RF_E_SOURCE;
    }
    return rc;
}

static int has_tar_ext(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && !strcasecmp(path + n - 4, ".tar");
}

static int put_files(rf_source *s, const file_list *files)
{
    s->nfiles = (uint32_t)files->paths.n;
    s->file_off = calloc(s->nfiles, sizeof *s->file_off);
    if (!s->file_off)
        return RF_E_NOMEM;
    for (uint32_t f = 0; f < s->nfiles; f++) {
        const char *p = files->paths.buf + files->paths.off[f];
        if (arena_put(s, p, strlen(p), &s->file_off[f]) < 0)
            return RF_E_NOMEM;
    }
    return 0;
}

static int index_tars(rf_source *s, const file_list *files, char *err, size_t errcap)
{
    s->kind = RF_SOURCE_TAR;
    int rc = put_files(s, files);
    int64_t maxlabel = -1;
    for (uint32_t f = 0; rc == 0 && f < s->nfiles; f++) {
        rc = index_tar(s, f, s->arena + s->file_off[f], &maxlabel, err, errcap);
        if (rc == 0 && s->n > UINT32_MAX) {
            snprintf(err, errcap, "source: more than %u samples", UINT32_MAX);
            rc = RF_E_SOURCE;
        }
    }
    s->nclasses = maxlabel + 1;
    return rc;
}

static int index_records(rf_source *s, const file_list *files, const rf_source_opts *o, char *err,
                         size_t errcap)
{
    s->kind = RF_SOURCE_RECORDS;
    s->record_size = o->record_size;
    s->header_size = o->header_size;
    int rc = put_files(s, files);
    if (rc == 0 && !(s->first = calloc((size_t)s->nfiles + 1, sizeof *s->first)))
        rc = RF_E_NOMEM;
    int64_t n = 0;
    for (uint32_t f = 0; rc == 0 && f < s->nfiles; f++) {
        const char *path = s->arena + s->file_off[f];
        struct stat st;
        if (stat(path, &st) != 0) {
            snprintf(err, errcap, "source: %s: %s", path, strerror(errno));
            rc = RF_E_SOURCE;
            break;
        }
        if (!S_ISREG(st.st_mode)) {
            snprintf(err, errcap, "source: %s: not a regular file (record files expected)", path);
            rc = RF_E_SOURCE;
            break;
        }
        uint64_t size = (uint64_t)st.st_size;
        s->first[f] = n;
        if (size > s->header_size)
            n += (int64_t)((size - s->header_size) / s->record_size);
    }
    if (rc == 0) {
        s->first[s->nfiles] = n;
        s->n = n;
    }
    if (rc == 0 && n == 0) {
        snprintf(err, errcap,
                 "source: %s%s: no complete record of %llu bytes after a header of "
                 "%llu bytes",
                 s->arena + s->file_off[0], s->nfiles > 1 ? " ..." : "",
                 (unsigned long long)s->record_size, (unsigned long long)s->header_size);
        rc = RF_E_SOURCE;
    }
    if (rc == 0 && n > UINT32_MAX) {
        snprintf(err, errcap, "source: %lld records: more than %u", (long long)n, UINT32_MAX);
        rc = RF_E_SOURCE;
    }
    return rc;
}

/* ---- the index ------------------------------------------------------------ */

uint32_t rf__source_record_file(const rf_source *s, int64_t i)
{
    assert(s->kind == RF_SOURCE_RECORDS && i >= 0 && i < s->n);
    /* largest f with first[f] <= i; first[nfiles] = n > i, so it holds records */
    uint32_t lo = 0, hi = s->nfiles;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->first[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

void rf__source_extent(const rf_source *s, int64_t i, int *ranged, uint64_t *offset,
                       uint64_t *length)
{
    if (s->kind == RF_SOURCE_TAR) {
        *ranged = 1;
        *offset = s->data_off[i];
        *length = s->data_len[i];
    } else if (s->kind == RF_SOURCE_RECORDS) {
        uint32_t f = rf__source_record_file(s, i);
        *ranged = 1;
        *offset = s->header_size + (uint64_t)(i - s->first[f]) * s->record_size;
        *length = s->record_size;
    } else {
        *ranged = 0;
        *offset = 0;
        *length = 0;
    }
}

int rf__source_name(const rf_source *s, int64_t i, char *buf, size_t cap)
{
    if (i < 0 || i >= s->n)
        return snprintf(buf, cap, "(no sample %lld)", (long long)i);
    if (s->kind == RF_SOURCE_TAR)
        return snprintf(buf, cap, "%s:%s", rf__source_path(s, i), s->arena + s->path_off[i]);
    if (s->kind == RF_SOURCE_RECORDS) {
        int ranged;
        uint64_t off, len;
        rf__source_extent(s, i, &ranged, &off, &len);
        return snprintf(buf, cap, "%s at offset %llu", rf__source_path(s, i),
                        (unsigned long long)off);
    }
    return snprintf(buf, cap, "%s", rf__source_path(s, i));
}

size_t rf__source_bytes(const rf_source *s)
{
    size_t per = 0;
    if (s->path_off)
        per += sizeof *s->path_off;
    if (s->labels)
        per += sizeof *s->labels;
    if (s->shard)
        per += sizeof *s->shard + sizeof *s->data_off + sizeof *s->data_len;
    size_t b = s->arena_cap + (size_t)s->cap * per;
    b += (size_t)s->nfiles * sizeof(uint64_t) + (s->first ? ((size_t)s->nfiles + 1) * 8 : 0);
    b += (size_t)(s->class_off ? s->nclasses : 0) * sizeof(uint64_t);
    return b;
}

int rf__source_open_ex(rf_source *s, const char *spec, const rf_source_opts *opts, char *err,
                       size_t errcap)
{
    memset(s, 0, sizeof *s);
    rf_source_opts none = {0, 0};
    const rf_source_opts *o = opts ? opts : &none;
    int records = o->record_size > 0;
    int several = strchr(spec, '\n') != NULL;
    struct stat st;
    int exists = !several && stat(spec, &st) == 0;
    int stat_errno = errno;
    int rc;
    if (exists && S_ISDIR(st.st_mode) && !records) {
        rc = index_folder(s, spec, err, errcap);
    } else if (exists && S_ISREG(st.st_mode) && !records && !has_tar_ext(spec)) {
        rc = index_list(s, spec, err, errcap);
    } else if (exists && !S_ISREG(st.st_mode)) {
        snprintf(err, errcap, "source: %s: %s", spec,
                 S_ISDIR(st.st_mode) ? "a folder, but record_size is set (record files expected)"
                                     : "not a folder or a regular file");
        rc = RF_E_SOURCE;
    } else if (!exists && !several && !strpbrk(spec, "{*?[")) {
        snprintf(err, errcap, "source: %s: %s", spec, strerror(stat_errno));
        rc = RF_E_SOURCE;
    } else {
        /* files: a tar shard or a record file, a pattern, or several entries */
        file_list files = {0};
        rc = collect_files(spec, &files, err, errcap);
        for (size_t f = 0; rc == 0 && !records && f < files.paths.n; f++) {
            const char *p = files.paths.buf + files.paths.off[f];
            if (!has_tar_ext(p)) {
                snprintf(err, errcap,
                         "source: %s: a pattern or a list of sources must name .tar "
                         "shards (or record files, with record_size set)",
                         p);
                rc = RF_E_SOURCE;
            }
        }
        if (rc == 0)
            rc = records ? index_records(s, &files, o, err, errcap)
                         : index_tars(s, &files, err, errcap);
        strlist_free(&files.paths);
    }
    if (rc == RF_E_NOMEM)
        snprintf(err, errcap, "source: %s: out of memory while indexing", spec);
    if (rc < 0)
        rf__source_close(s);
    return rc;
}

int rf__source_open(rf_source *s, const char *spec, char *err, size_t errcap)
{
    return rf__source_open_ex(s, spec, NULL, err, errcap);
}
