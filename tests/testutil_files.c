/*
 * testutil_files.c - files for tests (declared in testutil.h): whole-file
 * reads and writes, temporary folders (under $RINGFEED_TEST_TMP, $TMPDIR or
 * /tmp) removed with tu_rmtree, mkdir -p, and list files written from an
 * image folder with ImageFolder's rules (sorted class folders, sorted
 * .jpg/.jpeg/.JPEG files).
 */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* mkdtemp, lstat, realpath */
#endif

#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ files */

int tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = len == 0 || fwrite(data, 1, len, f) == len;
    if (fclose(f) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

uint8_t *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        free(buf);
        return NULL;
    }
    buf[n] = 0; /* so text files can be used as strings */
    if (len)
        *len = n;
    return buf;
}

char *tu_tempdir(const char *tag)
{
    /* CTest sets both to build/test-tmp; RINGFEED_TEST_TMP wins elsewhere. */
    const char *base = getenv("RINGFEED_TEST_TMP");
    if (!base || !*base)
        base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    size_t n = strlen(base) + (tag ? strlen(tag) : 0) + 16;
    char *p = malloc(n);
    if (!p)
        return NULL;
    snprintf(p, n, "%s/rf-%s-XXXXXX", base, tag ? tag : "test");
    if (!mkdtemp(p)) {
        free(p);
        return NULL;
    }
    return p;
}

void tu_rmtree(const char *path)
{
    struct stat st;
    /* Guard against the obvious disasters of a bad argument. */
    if (!path || !*path || strcmp(path, "/") == 0 || lstat(path, &st) != 0)
        return;
    if (!S_ISDIR(st.st_mode)) {
        unlink(path);
        return;
    }
    /* Tests chmod directories to 000 to provoke EACCES; undo that first. */
    chmod(path, 0700);
    DIR *d = opendir(path);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            size_t n = strlen(path) + strlen(de->d_name) + 2;
            char *child = malloc(n);
            if (!child)
                break;
            snprintf(child, n, "%s/%s", path, de->d_name);
            tu_rmtree(child);
            free(child);
        }
        closedir(d);
    }
    rmdir(path);
}

void tu_tempdir_remove(char **dir)
{
    if (*dir) {
        tu_rmtree(*dir);
        free(*dir);
        *dir = NULL;
    }
}

int tu_mkdir_p(const char *path)
{
    size_t n = strlen(path);
    char *p = malloc(n + 1);
    if (!p)
        return -1;
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] == '/' || p[i] == 0) {
            char ch = p[i];
            p[i] = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                free(p);
                return -1;
            }
            p[i] = ch;
        }
    }
    free(p);
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

/* ------------------------------------------------------------ list files */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int has_image_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot &&
           (strcmp(dot, ".jpg") == 0 || strcmp(dot, ".jpeg") == 0 || strcmp(dot, ".JPEG") == 0);
}

/* Sorted names in dir that pass keep (NULL: all but . and ..); *out is a
 * malloc'd array of malloc'd strings. Returns the count or -1. */
static int sorted_names(const char *dir, int want_dirs, char ***out)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **v = NULL;
    int n = 0, cap = 0, bad = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' &&
            (de->d_name[1] == 0 || (de->d_name[1] == '.' && de->d_name[2] == 0)))
            continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path)
            continue;
        /* torchvision: classes are directories; samples are files with an
         * image extension (a directory named x.jpg is not a sample). */
        if (want_dirs ? !is_dir(path) : (is_dir(path) || !has_image_ext(de->d_name)))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nv = realloc(v, (size_t)cap * sizeof *v);
            if (!nv) {
                bad = 1;
                break;
            }
            v = nv;
        }
        if (!(v[n] = strdup(de->d_name))) {
            bad = 1;
            break;
        }
        n++;
    }
    closedir(d);
    if (bad) {
        for (int i = 0; i < n; i++)
            free(v[i]);
        free(v);
        return -1;
    }
    if (n)
        qsort(v, (size_t)n, sizeof *v, cmp_str);
    *out = v;
    return n;
}

static void free_names(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

int tu_make_list(const char *list_path, const char *root)
{
    if (!list_path || !root)
        return -1;
    /* Paths are written relative to the list's folder when root lies inside
     * it (the list-file source resolves them against that folder), else
     * absolute. */
    char rootabs[PATH_MAX], listdir[PATH_MAX], prefix[PATH_MAX + 1];
    if (!realpath(root, rootabs))
        return -1;
    const char *slash = strrchr(list_path, '/');
    if (slash) {
        size_t n = (size_t)(slash - list_path);
        char tmp[PATH_MAX];
        if (n >= sizeof tmp)
            return -1;
        memcpy(tmp, list_path, n);
        tmp[n] = 0;
        if (!realpath(n ? tmp : "/", listdir))
            return -1;
    } else if (!realpath(".", listdir)) {
        return -1;
    }
    size_t ld = strlen(listdir);
    const char *rel = rootabs;
    if (strcmp(listdir, "/") == 0)
        rel = rootabs + 1;
    else if (strncmp(rootabs, listdir, ld) == 0 && rootabs[ld] == '/')
        rel = rootabs + ld + 1;
    else if (strcmp(rootabs, listdir) == 0)
        rel = ".";
    snprintf(prefix, sizeof prefix, "%s", rel);

    char **classes;
    int nc = sorted_names(rootabs, 1, &classes);
    if (nc < 0)
        return -1;
    FILE *out = fopen(list_path, "w");
    if (!out) {
        free_names(classes, nc);
        return -1;
    }
    int lines = 0, bad = 0;
    for (int c = 0; c < nc && !bad; c++) {
        char cdir[PATH_MAX];
        char **files;
        int nf = snprintf(cdir, sizeof cdir, "%s/%s", rootabs, classes[c]) < (int)sizeof cdir
                     ? sorted_names(cdir, 0, &files)
                     : -1;
        if (nf < 0) {
            bad = 1;
            break;
        }
        for (int i = 0; i < nf; i++) {
            if (fprintf(out, "%s/%s/%s\t%d\n", prefix, classes[c], files[i], c) < 0)
                bad = 1;
            lines++;
        }
        free_names(files, nf);
    }
    free_names(classes, nc);
    if (fclose(out) != 0)
        bad = 1;
    return bad ? -1 : lines;
}
