/*
 * fuzz_formats.c - fuzz target over the PNG, BMP and PBM/PGM/PPM decoders:
 * file bytes -> rf__decode_sample -> a slot-sized buffer, as a decode worker
 * does it (the format is sniffed from the bytes, as for real files).
 *
 * Input: byte 0 picks the options (transform = b % 3, flip = bit 2, epoch =
 * bits 3-4, output side = fz_sizes[b >> 5]; for transform "none" with epoch
 * bits 11, the picture's own side when it is square and at most
 * FZ_NONE_MAX_SIDE, learned from a first decode); the rest is the file.
 * Every input is decoded twice, NHWC into a buffer filled with 0x00 and NCHW
 * into one filled with 0xff, each exactly one sample's size (an overrun is
 * an ASan report). Oracles beyond "no crash, no UB, no leak", as in
 * fuzz_decode.c: both layouts agree on success or failure and on the reason,
 * a success writes every byte and NCHW is NHWC transposed, a failure is
 * RF_E_DECODE / RF_E_LIMIT / RF_E_NOMEM with a non-empty terminated reason.
 * The decoder is reused from one input to the next, as a worker's is.
 *
 * Built two ways (tests/CMakeLists.txt), as fuzz_decode.c is:
 *   fuzz_formats        clang -fsanitize=fuzzer,address,undefined (RF_FUZZ)
 *   fuzz_formats_seeds  any compiler (RF_FUZZ_STANDALONE): --gen DIR writes the
 *                       seed corpus (PNG via libspng when the build has it,
 *                       BMP and PNM written here), --list, --self [N] replays
 *                       the seeds and N deterministic mutations of each,
 *                       FILE|DIR... replays inputs.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "decode.h"
#include "ringfeed.h"

#define FZ_NAME "fuzz_formats"
#include "fuzzdecode.h"
#include "lewrite.h"

static rf_decoder *fz_decoder;
static int fz_verbose;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fz_decoder && !(fz_decoder = rf__decoder_create()))
        abort();
    uint8_t ctl = size ? data[0] : 0;
    const uint8_t *file = size ? data + 1 : data;
    size_t len = size ? size - 1 : 0;

    rf_decode_opts o;
    fz_opts(&o, ctl, len);
    o.check_tail = (len & 1) == 0; /* both: decoded to the end and not */
    if (o.transform == RF_TRANSFORM_NONE && (ctl & 0x18) == 0x18) {
        /* "none" at the picture's own side: the header says it */
        rf_decode_opts c = o;
        c.transform = RF_TRANSFORM_CENTER;
        c.size = 1;
        uint8_t probe[3];
        char err[512];
        rf_decode_times t;
        rf__decode_sample(fz_decoder, file, len, &c, probe, err, sizeof err, &t);
        if (fz_none_at_side(&o, ctl, t.width, t.height))
            o.size = t.width;
    }
    fz_decode_both_layouts(fz_decoder, file, len, &o, fz_verbose);
    return 0;
}

#ifdef RF_FUZZ_STANDALONE
/* ------------------------------------------------------------------------
 * The seed corpus and the standalone driver (no libFuzzer needed).
 * ------------------------------------------------------------------------ */
#ifdef RF_HAVE_SPNG
#include <spng.h>
#endif

#include "fuzzmain.h"

/* Every transform on a file, then damaged copies: cut in half, cut short,
 * bytes flipped past the first `header` bytes, and in them. */
static void add_all(corpus *c, const char *name, const uint8_t *f, size_t len, int square,
                    size_t header, uint64_t *rs)
{
    char nm[56];
    for (int t = 1; t <= 2; t++) {
        snprintf(nm, sizeof nm, "%s-t%d", name, t);
        add(c, nm, ctl_of(t, (int)(len + (size_t)t) % 8, t == 2), f, len);
    }
    snprintf(nm, sizeof nm, "%s-none", name);
    add(c, nm, square ? ctl_none_own_side() : ctl_of(0, 3, 0), f, len);
    snprintf(nm, sizeof nm, "%s-half", name);
    add(c, nm, ctl_of(1, 7, 0), f, len / 2);
    snprintf(nm, sizeof nm, "%s-short", name);
    add(c, nm, ctl_of(2, 6, 1), f, len - 3);
    uint8_t *g = malloc(len);
    memcpy(g, f, len);
    for (int k = 0; k < 4 && len > header + 1; k++)
        g[header + xs(rs) % (len - header)] ^= (uint8_t)(1u << (xs(rs) % 8));
    snprintf(nm, sizeof nm, "%s-flip", name);
    add(c, nm, ctl_of(1, 5, 0), g, len);
    memcpy(g, f, len);
    for (int k = 0; k < 2; k++)
        g[2 + xs(rs) % (header - 2)] ^= (uint8_t)(1u << (xs(rs) % 8));
    snprintf(nm, sizeof nm, "%s-hdrflip", name);
    add(c, nm, ctl_of(2, 4, 0), g, len);
    free(g);
}

#ifdef RF_HAVE_SPNG
static void png_seeds(corpus *c, uint64_t *rs)
{
    static const struct {
        int w, h, depth, ctype, adam7, plte;
    } v[] = {{23, 17, 8, 2, 0, 0},  {32, 32, 8, 6, 1, 0},   {30, 20, 16, 2, 0, 0},
             {24, 24, 16, 0, 1, 0}, {40, 9, 1, 0, 0, 0},    {21, 21, 2, 3, 1, 3},
             {19, 33, 4, 3, 0, 16}, {32, 32, 8, 3, 0, 200}, {17, 29, 8, 4, 0, 0},
             {16, 16, 16, 6, 0, 0}, {64, 48, 8, 2, 1, 0}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        int ch = v[i].ctype == 0 || v[i].ctype == 3 ? 1
                 : v[i].ctype == 4                  ? 2
                 : v[i].ctype == 2                  ? 3
                                                    : 4;
        size_t row = ((size_t)v[i].w * ch * v[i].depth + 7) / 8, n = row * v[i].h;
        uint8_t *img = malloc(n);
        for (size_t k = 0; k < n; k++)
            img[k] = (uint8_t)(k * 7 + xs(rs) % 5);
        spng_ctx *e = spng_ctx_new(SPNG_CTX_ENCODER);
        struct spng_ihdr ih = {
            (uint32_t)v[i].w,   (uint32_t)v[i].h, (uint8_t)v[i].depth, (uint8_t)v[i].ctype, 0, 0,
            (uint8_t)v[i].adam7};
        struct spng_plte pl = {.n_entries = (uint32_t)v[i].plte};
        for (int k = 0; k < v[i].plte; k++)
            pl.entries[k].red = pl.entries[k].green = (uint8_t)(k * 3);
        int err = !e || spng_set_option(e, SPNG_ENCODE_TO_BUFFER, 1) || spng_set_ihdr(e, &ih) ||
                  (v[i].plte && spng_set_plte(e, &pl)) ||
                  spng_encode_image(e, img, n, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
        size_t len = 0;
        uint8_t *png = err ? NULL : spng_get_png_buffer(e, &len, &err);
        if (!png || err) {
            fprintf(stderr, "fuzz_formats_seeds: cannot encode PNG %zu\n", i);
            exit(1);
        }
        char nm[32];
        snprintf(nm, sizeof nm, "png%zu-d%d-c%d%s", i, v[i].depth, v[i].ctype,
                 v[i].adam7 ? "-adam7" : "");
        add_all(c, nm, png, len, v[i].w == v[i].h, 33, rs);
        if (i == 0) { /* IHDR sizes: huge, just over the limit (CRC not fixed: both paths) */
            memcpy(png + 16, "\0\x01\0\0\0\x01\0\0", 8);
            add(c, "png-65536x65536", ctl_of(1, 3, 0), png, len);
            memcpy(png + 16, "\0\0\x04\x01\0\0\x04\0", 8);
            add(c, "png-1025x1024", ctl_of(2, 3, 0), png, len);
        }
        free(png);
        spng_ctx_free(e);
        free(img);
    }
}
#endif

static void bmp_seeds(corpus *c, uint64_t *rs)
{
    static const struct {
        int w, h, bits, comp, header, colors, topdown;
        uint32_t m[4];
    } v[] = {{23, 17, 24, 0, 40, 0, 0, {0}},
             {32, 32, 8, 0, 40, 256, 0, {0}},
             {19, 21, 4, 0, 40, 16, 1, {0}},
             {37, 37, 1, 0, 40, 2, 0, {0}},
             {20, 13, 16, 3, 40, 0, 0, {0xF800, 0x7E0, 0x1F}},
             {16, 16, 32, 3, 108, 0, 0, {0xFF, 0xFF00, 0xFF0000, 0xFF000000u}},
             {25, 25, 8, 0, 12, 256, 0, {0}},
             {30, 12, 32, 0, 124, 0, 1, {0}},
             {24, 24, 8, 1, 40, 256, 0, {0}},
             {22, 14, 4, 2, 40, 16, 0, {0}}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        int entry = v[i].header == 12 ? 3 : 4, rle = v[i].comp == 1 || v[i].comp == 2;
        size_t stride = (((size_t)v[i].w * v[i].bits + 31) >> 3) & ~(size_t)3;
        size_t raster = rle ? (size_t)v[i].h * (2 * (size_t)v[i].w / 3 + 8) + 2 : stride * v[i].h;
        size_t masks = v[i].comp == 3 && v[i].header == 40 ? 12 : 0;
        size_t off = 14 + (size_t)v[i].header + masks + (size_t)entry * v[i].colors;
        size_t len = off + raster;
        uint8_t *f = calloc(1, len);
        f[0] = 'B';
        f[1] = 'M';
        put32(f + 10, (uint32_t)off);
        put32(f + 14, (uint32_t)v[i].header);
        if (v[i].header == 12) {
            put16(f + 18, (unsigned)v[i].w);
            put16(f + 20, (unsigned)v[i].h);
            put16(f + 24, (unsigned)v[i].bits);
        } else {
            put32(f + 18, (uint32_t)v[i].w);
            put32(f + 22, v[i].topdown ? (uint32_t)-v[i].h : (uint32_t)v[i].h);
            put16(f + 28, (unsigned)v[i].bits);
            put32(f + 30, (uint32_t)v[i].comp);
            put32(f + 46, (uint32_t)v[i].colors);
            for (int k = 0; k < (v[i].header == 40 ? 3 : 4) && v[i].comp == 3; k++)
                put32(f + 54 + 4 * k, v[i].m[k]);
        }
        for (size_t k = 14 + v[i].header + masks; k < off; k++)
            f[k] = (uint8_t)xs(rs);
        uint8_t *r = f + off;
        if (rle) { /* runs of 3 per row: 2 bytes a run; end of line; end of bitmap */
            size_t n = 0;
            for (int y = 0; y < v[i].h; y++) {
                for (int x = 0; x < v[i].w; x += 3, n += 2) {
                    r[n] = (uint8_t)(v[i].w - x < 3 ? v[i].w - x : 3);
                    r[n + 1] = (uint8_t)xs(rs);
                }
                n += 2;
            }
            r[n + 1] = 1;
        } else {
            for (size_t k = 0; k < raster; k++)
                r[k] = (uint8_t)xs(rs);
        }
        char nm[32];
        snprintf(nm, sizeof nm, "bmp%zu-%d-c%d-h%d", i, v[i].bits, v[i].comp, v[i].header);
        add_all(c, nm, f, len, v[i].w == v[i].h, 14 + (size_t)v[i].header, rs);
        if (i == 0) {
            put32(f + 18, 60000);
            put32(f + 22, 60000);
            add(c, "bmp-60000x60000", ctl_of(1, 3, 0), f, len);
            put32(f + 18, 1025);
            put32(f + 22, (uint32_t)-1024);
            add(c, "bmp-1025x-1024", ctl_of(2, 2, 0), f, len);
        }
        free(f);
    }
}

static void pnm_seeds(corpus *c, uint64_t *rs)
{
    static const struct {
        int magic, w, h, maxval;
    } v[] = {{1, 13, 7, 1},    {2, 9, 9, 15},      {3, 7, 5, 1000},
             {4, 20, 20, 1},   {5, 31, 31, 255},   {5, 17, 9, 4095},
             {6, 24, 16, 255}, {6, 12, 12, 65535}, {5, 16, 16, 65535}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        int bands = v[i].magic == 3 || v[i].magic == 6 ? 3 : 1;
        size_t ns = (size_t)v[i].w * v[i].h * bands, cap = ns * 8 + 64;
        char *f = malloc(cap);
        size_t n = (size_t)snprintf(f, cap, "P%d\n# seed\n%d %d\n", v[i].magic, v[i].w, v[i].h);
        if (v[i].magic != 1 && v[i].magic != 4)
            n += (size_t)snprintf(f + n, cap - n, "%d\n", v[i].maxval);
        if (v[i].magic == 4)
            ns = ((size_t)v[i].w + 7) / 8 * v[i].h;
        for (size_t k = 0; k < ns; k++) {
            unsigned s = xs(rs) % ((unsigned)v[i].maxval + 1);
            if (v[i].magic <= 3)
                n += (size_t)snprintf(f + n, cap - n, k % 11 == 5 ? "%u #c\n" : "%u ", s);
            else if (v[i].maxval > 255) {
                f[n++] = (char)(s >> 8);
                f[n++] = (char)s;
            } else
                f[n++] = (char)(v[i].magic == 4 ? xs(rs) : s);
        }
        char nm[32];
        snprintf(nm, sizeof nm, "pnm%zu-P%d-%d", i, v[i].magic, v[i].maxval);
        add_all(c, nm, (const uint8_t *)f, n, v[i].w == v[i].h, 4, rs);
        free(f);
    }
    static const char *odd[] = {"P6\n60000 60000\n255\n", "P5 1025 1024 255 ", "P2 2 1 255 7",
                                "P5 1#x\n2 1 255\nAB",    "P3 1 1 7 1 2 9",    "P1 3 1 0x1"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        add(c, "pnm-odd", ctl_of((int)i % 3, 2, 0), (const uint8_t *)odd[i], strlen(odd[i]));
}

static void make_corpus(corpus *c)
{
    uint64_t rs = 0x243f6a8885a308d3ULL;
#ifdef RF_HAVE_SPNG
    png_seeds(c, &rs);
#else
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0,    0,    0,
                                  13,   'I', 'H', 'D', 'R',  0,    0,    0,    16,   0,    0,
                                  0,    16,  8,   2,   0,    0,    0,    0x90, 0x91, 0x68, 0x36};
    add(c, "png-nolib", ctl_of(1, 3, 0), png, sizeof png);
#endif
    bmp_seeds(c, &rs);
    pnm_seeds(c, &rs);
}

int main(int argc, char **argv)
{
    int rc = fz_main(argc, argv, "fuzz_formats_seeds", make_corpus, fz_mutate, NULL, &fz_verbose);
    rf__decoder_destroy(fz_decoder);
    return rc;
}
#endif /* RF_FUZZ_STANDALONE */
