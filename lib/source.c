/*
 * source.c - builds the sample index from an image folder or a list file.
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
 */
#define _GNU_SOURCE
#include "source.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

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

static const char *sort_base; /* qsort has no context argument in C11 */

static int cmp_off(const void *a, const void *b)
{
    return strcmp(sort_base + *(const size_t *)a, sort_base + *(const size_t *)b);
}

static void strlist_sort(strlist *l)
{
    sort_base = l->buf;
    qsort(l->off, l->n, sizeof *l->off, cmp_off);
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
static int walk_dirs(const char *dir, strlist *dirs, int depth, char *err, size_t errcap)
{
    if (depth > 64) {
        snprintf(err, errcap, "source: %s: folders nested too deep", dir);
        return RF_E_SOURCE;
    }
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
        rc = walk_dirs(subs.buf + subs.off[i], dirs, depth + 1, err, errcap);
    strlist_free(&subs);
    return rc;
}

/* Appends the samples of one class folder in ImageFolder's order. */
static int index_class(rf_source *s, const char *cdir, int64_t label, char *err, size_t errcap)
{
    strlist dirs = {0}, files = {0};
    int rc = walk_dirs(cdir, &dirs, 0, err, errcap);
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
        long long label = tab ? strtoll(tab + 1, &end, 10) : -1;
        if (!tab || tab == line || end == tab + 1 || *end != '\0' || label < 0) {
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

int rf__source_open(rf_source *s, const char *spec, char *err, size_t errcap)
{
    memset(s, 0, sizeof *s);
    struct stat st;
    if (stat(spec, &st) != 0) {
        snprintf(err, errcap, "source: %s: %s", spec, strerror(errno));
        return RF_E_SOURCE;
    }
    int rc;
    if (S_ISDIR(st.st_mode))
        rc = index_folder(s, spec, err, errcap);
    else if (S_ISREG(st.st_mode))
        rc = index_list(s, spec, err, errcap);
    else {
        snprintf(err, errcap, "source: %s: not a folder or a list file", spec);
        rc = RF_E_SOURCE;
    }
    if (rc == RF_E_NOMEM)
        snprintf(err, errcap, "source: %s: out of memory while indexing", spec);
    if (rc < 0)
        rf__source_close(s);
    return rc;
}
