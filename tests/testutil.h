/*
 * testutil.h - test data made at test time: JPEGs encoded with libjpeg-turbo
 * (photo-like content, every variant the decoder must handle) and image
 * folders / list files built from them in a temporary directory. No cmocka
 * and no ringfeed here: bench programs link it too (testcheck.h holds the
 * helpers that assert and drive the library).
 *
 * testutil.c        pictures, folders of them, comparing outputs
 * testutil_jpeg.c   encoding, reference decoding, marker offsets
 * testutil_files.c  files, temporary folders, list files
 * testutil_http.c   a file server for the remote tests (testutil_http.h)
 */
#ifndef RF_TESTUTIL_H
#define RF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

enum tu_subsamp { TU_444 = 0, TU_422 = 1, TU_420 = 2, TU_GRAY = 3 };

typedef struct tu_jpeg_opts {
    int width, height;
    int quality;      /* 1..100 */
    int subsamp;      /* enum tu_subsamp */
    int progressive;  /* 1: progressive scans */
    int restart_rows; /* >0: restart marker every N MCU rows */
    int arithmetic;   /* 1: arithmetic coding */
    uint32_t seed;    /* picture content */
    int hs, vs;       /* > 0: luma sampling factors instead of subsamp's (h2v4,
                         h4v2, ...: 1..4 each; chroma stays 1x1) */
} tu_jpeg_opts;

/* Photo-like RGB picture (smooth gradients, shapes, texture, noise), w*h*3. */
uint8_t *tu_make_rgb(int width, int height, uint32_t seed);

/* Encodes rgb (w*h*3) as a JPEG; *out is malloc'd, *out_len its size. 0 on success. */
int tu_encode_jpeg(const uint8_t *rgb, const tu_jpeg_opts *o, uint8_t **out, size_t *out_len);

/* CMYK (Adobe inverted ink) or, with ycck, YCCK JPEG of tu_make_rgb(w, h,
 * seed) at the given quality; *out malloc'd. 0 on success. */
int tu_encode_cmyk(int w, int h, int ycck, uint32_t seed, int quality, uint8_t **out,
                   size_t *out_len);

/* Photo-like JPEG with the given options. 0 on success. */
int tu_make_jpeg(const tu_jpeg_opts *o, uint8_t **out, size_t *out_len);

/* Full decode with libjpeg (RGB, no scaling); *out malloc'd. 0 on success.
 * -1 on any error, libjpeg warnings (truncated or corrupt data) included,
 * and for pictures over 64 Mpixel; *out is then NULL. w, h may be NULL. */
int tu_decode_jpeg(const uint8_t *jpg, size_t len, uint8_t **out, int *w, int *h);

/* Reference RGB of a CMYK or YCCK JPEG, as tu_decode_jpeg (which refuses
 * them): libjpeg's CMYK output converted with RGB = C' x K' / 255 on inverted
 * ink (Adobe files store inverted ink; others are inverted first). */
int tu_decode_cmyk(const uint8_t *jpg, size_t len, uint8_t **out, int *w, int *h);

/* 1 when libjpeg reports an error or warning by the time the last row is
 * read as RGB (before jpeg_finish_decompress, which reads on to EOI), else 0. */
int tu_jpeg_fails_in_rows(const uint8_t *jpg, size_t len);

/* Offset of the first SOFn segment's payload (after its length field), and
 * of the first SOS marker; 0 when the marker walk from SOI finds none. */
size_t tu_jpeg_sof_offset(const uint8_t *p, size_t n);
size_t tu_jpeg_sos_offset(const uint8_t *p, size_t n);

int tu_write_file(const char *path, const void *data, size_t len);
uint8_t *tu_read_file(const char *path, size_t *len);

/* mkdtemp of rf-<tag>-XXXXXX under $RINGFEED_TEST_TMP, else $TMPDIR, else
 * /tmp; returns a malloc'd path. */
char *tu_tempdir(const char *tag);
/* rm -rf (after making folders chmod'ed to 000 readable again). */
void tu_rmtree(const char *path);
/* tu_rmtree(*dir), free(*dir), *dir = NULL; nothing when *dir is NULL. */
void tu_tempdir_remove(char **dir);
/* A WebDataset shard (testutil_shard.c): n JPEGs of width x height
 * (content seed + i), keys "<prefix><i, 2 digits>", each with its .cls
 * label (label + i) % labels. *bytes (may be NULL) gets the shard's size.
 * 0, or -1. */
typedef struct tu_shard_opts {
    const char *prefix;
    int n, width, height;
    uint32_t seed;
    int label, labels;
} tu_shard_opts;
int tu_write_jpeg_shard(const char *path, const tu_shard_opts *o, uint64_t *bytes);

/* mkdir -p: 0 when path is a folder afterwards. */
int tu_mkdir_p(const char *path);

/* Image folder root/class%02d/img%04d.jpg with `classes` classes of
 * `per_class` images each, sizes varied around width x height by seed and
 * cycling through subsampling / progressive variants. 0 on success.
 * Same as tu_make_folder_ex with quality 90 and TU_MIX_CYCLE. */
int tu_make_folder(const char *root, int classes, int per_class, int width, int height,
                   uint32_t seed);

/* PSNR in dB of two byte arrays of n bytes; INFINITY when identical. */
double tu_psnr(const uint8_t *a, const uint8_t *b, size_t n);

/* FNV-1a (64-bit) of n bytes, continuing from h (TU_FNV_INIT to begin):
 * chained over several buffers it equals the hash of their concatenation. */
#define TU_FNV_INIT 0xcbf29ce484222325ULL
uint64_t tu_fnv1a(uint64_t h, const void *p, size_t n);

/* This process's peak resident memory so far, KiB (getrusage), or -1. */
long tu_max_rss_kib(void);

/* Which variants a folder holds. */
enum tu_mix {
    /* Image i (class-major index) cycles through i % 8: 0 baseline 4:2:0,
     * 1 4:2:2, 2 4:4:4, 3 gray, 4 progressive 4:2:0, 5 progressive 4:4:4,
     * 6 4:2:0 with a restart marker every MCU row, 7 arithmetic-coded 4:2:0.
     * Every fifth image (i % 5 == 3) is portrait. */
    TU_MIX_CYCLE = 0,
    /* Like a photo collection: 86% baseline 4:2:0, 6% progressive, 3% 4:4:4,
     * 2% 4:2:2, 2% gray, 1% restart markers; about 20% portrait. Chosen by
     * a hash of (seed, index). */
    TU_MIX_PHOTO = 1
};

typedef struct tu_folder_opts {
    int classes, per_class;
    int width, height; /* nominal; each side varies 80..120% per image */
    int quality;       /* 1..100; 0 means 90 */
    uint32_t seed;
    int mix; /* enum tu_mix */
} tu_folder_opts;

/* Image `index` (0 <= index < classes*per_class, class-major: label is
 * index / per_class) is root/class<C>/img<I>.jpg, C zero-padded to at least
 * 2 digits and I to at least 4 (wider when the counts need it, so name
 * order stays label order). tu_folder_item gives its encoding options,
 * tu_folder_path its path (0, or -1 when it does not fit in n). */
void tu_folder_item(const tu_folder_opts *f, int index, tu_jpeg_opts *o);
int tu_folder_path(char *buf, size_t n, const char *root, const tu_folder_opts *f, int index);

/* The pieces of tu_make_folder_ex, for callers that spread the work over
 * threads: prepare makes root (mkdir -p) and the class folders; write_item
 * writes one image (any order, any thread) and stores its size in *bytes. */
int tu_folder_prepare(const char *root, const tu_folder_opts *f);
int tu_folder_write_item(const char *root, const tu_folder_opts *f, int index, size_t *bytes);

/* Whole folder; *total_bytes (may be NULL) gets the bytes written. 0 on success. */
int tu_make_folder_ex(const char *root, const tu_folder_opts *f, uint64_t *total_bytes);

/* Writes a list file ("path<TAB>label" lines) for the image folder at root,
 * with ImageFolder semantics: class folders sorted by name give labels
 * 0..C-1, files ending .jpg/.jpeg/.JPEG sorted by name, anything else
 * ignored. Paths are relative to the list file's folder when root lies
 * inside it, absolute otherwise. Returns the number of lines, or -1. */
int tu_make_list(const char *list_path, const char *root);

#endif
