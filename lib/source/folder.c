/*
 * folder.c - the image-folder source kind: torchvision ImageFolder's
 * samples and labels from a root/<class>/.../<file> tree.
 *
 * The class folders under the root, sorted by name, give labels 0..C-1;
 * within a class every file whose name ends in one of ImageFolder's
 * IMG_EXTENSIONS (.jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp, any case;
 * names.c) is a sample, found by walking the class folder recursively
 * and ordered as sorted(os.walk(...)) then sorted(files) orders them. So the
 * index holds exactly ImageFolder's samples; each is later decoded or
 * reported as an error with its path (a format without a decoder, such as
 * TIFF, included), never dropped. Only directories are
 * listed; sample files are never opened or stat'ed (readdir's d_type tells
 * files from folders, stat only where it cannot, as for symlinks, which
 * ImageFolder follows; a link back to a folder being walked is an error).
 */
#define _GNU_SOURCE
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "kinds.h"
#include "ringfeed.h"

/* name.lower().endswith(IMG_EXTENSIONS): none of them holds a '.' of its
 * own, so the text after the last '.' decides. */
static int has_image_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && rf__image_ext(dot + 1);
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

/* Appends the folders in dir to out, as "dir/name" with full_paths, else as
 * "name"; in readdir's order. out must be freed, whatever the result. */
static int list_subdirs(const char *dir, int full_paths, rf_strlist *out, char *err, size_t errcap)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errcap, "source: opendir %s: %s", dir, strerror(errno));
        return RF_E_SOURCE;
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (entry_is_dir(dir, e) && (rc = full_paths ? rf__strlist_add(out, dir, e->d_name)
                                                     : rf__strlist_add(out, e->d_name, NULL)) < 0)
            break;
    }
    closedir(d);
    return rc;
}

/* The folders above the one being walked: a symlink back to one of them is a
 * loop, which would otherwise make the walk explode. */
typedef struct walk_parent {
    dev_t dev;
    ino_t ino;
    const struct walk_parent *up;
} walk_parent;

/* Lists the folders below `dir` (itself included), recursively. */
static int walk_dirs(const char *dir, rf_strlist *dirs, const walk_parent *up, int depth, char *err,
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
    int rc = rf__strlist_add(dirs, dir, NULL);
    if (rc < 0)
        return rc;
    rf_strlist subs = {0};
    rc = list_subdirs(dir, 1, &subs, err, errcap);
    for (size_t i = 0; rc == 0 && i < subs.n; i++)
        rc = walk_dirs(rf__strlist_at(&subs, i), dirs, &self, depth + 1, err, errcap);
    rf__strlist_free(&subs);
    return rc;
}

/* Appends the samples of one class folder in ImageFolder's order. */
static int index_class(rf_source *s, const char *cdir, int64_t label, char *err, size_t errcap)
{
    rf_strlist dirs = {0}, files = {0};
    int rc = walk_dirs(cdir, &dirs, NULL, 0, err, errcap);
    if (rc == 0)
        rf__strlist_sort(&dirs); /* sorted(os.walk()) orders by the walked path */
    for (size_t i = 0; rc == 0 && i < dirs.n; i++) {
        const char *dir = rf__strlist_at(&dirs, i);
        DIR *d = opendir(dir);
        if (!d) {
            snprintf(err, errcap, "source: opendir %s: %s", dir, strerror(errno));
            rc = RF_E_SOURCE;
            break;
        }
        files.len = files.n = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_type == DT_DIR || !has_image_ext(e->d_name))
                continue;
            /* A directory named like an image is kept when d_type cannot tell
             * (DT_UNKNOWN): the reader reports it with its path. */
            if (e->d_type == DT_LNK && entry_is_dir(dir, e))
                continue;
            if ((rc = rf__strlist_add(&files, e->d_name, NULL)) < 0)
                break;
        }
        closedir(d);
        rf__strlist_sort(&files);
        size_t dlen = strlen(dir);
        char path[8192];
        for (size_t j = 0; rc == 0 && j < files.n; j++) {
            const char *name = rf__strlist_at(&files, j);
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
    rf__strlist_free(&dirs);
    rf__strlist_free(&files);
    return rc;
}

int rf__source_index_folder(rf_source *s, const rf_strlist *paths, const rf_source_opts *o,
                            char *err, size_t errcap)
{
    (void)o;
    assert(paths->n == 1);
    const char *root = rf__strlist_at(paths, 0);
    rf_strlist classes = {0};
    int rc = list_subdirs(root, 0, &classes, err, errcap);
    if (rc == 0 && classes.n == 0) {
        snprintf(err, errcap, "source: %s: no class folders (expected root/<class>/<image file>)",
                 root);
        rc = RF_E_SOURCE;
    }
    if (rc == 0) {
        rf__strlist_sort(&classes);
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
        const char *name = rf__strlist_at(&classes, c);
        if ((rc = rf__source_put(s, name, strlen(name), &s->class_off[c])) < 0)
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
            snprintf(err, errcap, "source: class folder %s has no image files (%s)", cdir,
                     rf__image_exts_text);
            rc = RF_E_SOURCE;
        }
    }
    rf__strlist_free(&classes);
    return rc;
}
