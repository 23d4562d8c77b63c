/*
 * names.c - what file and member names mean to the sources.
 *
 * Picture extensions: the list torchvision's ImageFolder indexes
 * (IMG_EXTENSIONS), matched as Python's filename.lower().endswith() matches
 * it. The folder kind indexes every file so named and the tar kind takes a
 * member so named as a sample's image; the bytes are sniffed by the decoders
 * later, so a name never decides that a file is dropped (TIFF, for one, is
 * indexed and then reported as an unsupported format).
 *
 * Compressed tars: a shard must be a plain tar, read at member offsets; a
 * .tar.gz (or zstd, bzip2, xz) cannot be, and says so by its name or by the
 * magic bytes it starts with. Both are recognised here so that the message
 * can say how to make a plain one.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kinds.h"
#include "ringfeed.h"

/* torchvision 0.14 datasets/folder.py, IMG_EXTENSIONS, in its order. */
static const char *const image_exts[] = {"jpg", "jpeg", "png",  "ppm", "bmp",
                                         "pgm", "tif",  "tiff", "webp"};

const char rf__image_exts_text[] = ".jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp";

int rf__image_ext(const char *ext)
{
    for (size_t i = 0; i < sizeof image_exts / sizeof image_exts[0]; i++)
        if (!strcasecmp(ext, image_exts[i]))
            return 1;
    return 0;
}

/* Name endings of compressed tars: what compressed them, and the command
 * that leaves a plain .tar beside (NULL: none does it by the name). */
static const struct {
    const char *suffix, *how, *tool;
} compressed_suffixes[] = {
    {".tar.gz", "gzip", "gunzip"}, {".tgz", "gzip", "gunzip"},   {".tar.zst", "zstd", "zstd -d"},
    {".tzst", "zstd", "zstd -d"},  {".tar.zstd", "zstd", NULL},  {".tar.bz2", "bzip2", "bunzip2"},
    {".tbz2", "bzip2", "bunzip2"}, {".tbz", "bzip2", "bunzip2"}, {".tar.xz", "xz", "unxz"},
    {".txz", "xz", "unxz"},
};
enum { NSUFFIXES = sizeof compressed_suffixes / sizeof compressed_suffixes[0] };

/* Index in compressed_suffixes of path's ending, or -1. */
static int compressed_suffix(const char *path)
{
    size_t n = strlen(path);
    for (int i = 0; i < NSUFFIXES; i++) {
        size_t k = strlen(compressed_suffixes[i].suffix);
        if (n > k && !strcasecmp(path + n - k, compressed_suffixes[i].suffix))
            return i;
    }
    return -1;
}

const char *rf__compressed_name(const char *path)
{
    int i = compressed_suffix(path);
    return i < 0 ? NULL : compressed_suffixes[i].how;
}

const char *rf__compressed_magic(const uint8_t *b, size_t n)
{
    if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
        return "gzip";
    if (n >= 4 && !memcmp(b, "\x28\xb5\x2f\xfd", 4))
        return "zstd";
    if (n >= 4 && !memcmp(b, "BZh", 3) && b[3] >= '1' && b[3] <= '9')
        return "bzip2";
    if (n >= 6 && !memcmp(b, "\xfd\x37\x7a\x58\x5a\x00", 6))
        return "xz";
    return NULL;
}

int rf__compressed_error(const char *path, const char *how, char *err, size_t errcap)
{
    int i = compressed_suffix(path);
    char how_to[300];
    if (i >= 0 && compressed_suffixes[i].tool && !strcmp(compressed_suffixes[i].how, how)) {
        snprintf(how_to, sizeof how_to, "%s %s", compressed_suffixes[i].tool, path);
    } else {
        /* the name says nothing (or nothing a tool knows): decompress to a
         * new .tar by hand */
        size_t n = strlen(path), cut = i >= 0 ? strlen(compressed_suffixes[i].suffix) : 0;
        if (i < 0 && n > 4 && !strcasecmp(path + n - 4, ".tar"))
            cut = 4;
        snprintf(how_to, sizeof how_to, "%s -dc %s > %.*s%s.tar", how, path, (int)(n - cut), path,
                 i >= 0 ? "" : ".plain");
    }
    snprintf(err, errcap,
             "source: %s is compressed (%s): compressed shards cannot be read at offsets; "
             "write plain .tar shards (e.g. `%s`, or `tar -cf` without compression)",
             path, how, how_to);
    return RF_E_SOURCE;
}
