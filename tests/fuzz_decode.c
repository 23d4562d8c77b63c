/*
 * fuzz_decode.c - fuzz target over the decode path: file bytes ->
 * rf__decode_sample -> a slot-sized buffer, as a decode worker does it.
 *
 * Input: byte 0 picks the options (transform = b % 3, flip = bit 2, epoch =
 * bits 3-4, output side = fz_sizes[b >> 5]; for transform "none" with epoch
 * bits 11, the picture's own side, read from its SOF, when it is square and
 * at most FZ_NONE_MAX_SIDE); the rest is the file.
 * Every input is decoded twice, NHWC into a buffer filled with 0x00 and NCHW
 * into one filled with 0xff, each exactly one sample's size (any overrun is an
 * ASan report). Oracles beyond "no crash, no UB, no leak": both layouts agree
 * on success or failure, a success fills every byte (the two fills would show
 * through) and NCHW is NHWC transposed; a failure returns RF_E_DECODE,
 * RF_E_LIMIT or RF_E_NOMEM with a NUL-terminated, non-empty reason.
 *
 * The decoder is reused from one input to the next, as a worker reuses its
 * libjpeg handle after errors.
 *
 * Built two ways from this one file:
 *   fuzz_decode        clang -fsanitize=fuzzer,address,undefined (CMake RF_FUZZ):
 *                      libFuzzer's main; `make fuzz`, `make fuzz FUZZ_TIME=600`.
 *   fuzz_decode_seeds  any compiler, RF_FUZZ_STANDALONE (every build):
 *                        --gen DIR    writes the seed corpus (made with testutil.h) to
 *                                     DIR/seeds, makes DIR/corpus and DIR/artifacts
 *                        --list       decodes every seed, printing the outcome
 *                        --self [N]   runs every seed and N deterministic
 *                                     mutations of each through the target: a
 *                                     regression run for builds without libFuzzer
 *                        FILE|DIR...  replays inputs (reproduces a finding)
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

#define FZ_NAME "fuzz_decode"
#include "fuzzdecode.h"

/* Width and height from the first SOF marker; -1 when there is none. A bounded
 * walk over the marker segments: it only needs to be right for well-formed
 * headers (the decoder judges the rest). */
static int sof_dims(const uint8_t *p, size_t n, int *w, int *h)
{
    size_t i = 2;
    while (i + 4 <= n) {
        if (p[i] != 0xFF)
            return -1;
        uint8_t m = p[i + 1];
        if (m == 0xFF) {
            i++;
            continue;
        }
        if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
            i += 2;
            continue;
        }
        size_t len = ((size_t)p[i + 2] << 8) | p[i + 3];
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            if (i + 9 > n)
                return -1;
            *h = (p[i + 5] << 8) | p[i + 6];
            *w = (p[i + 7] << 8) | p[i + 8];
            return 0;
        }
        if (len < 2)
            return -1;
        i += 2 + len;
    }
    return -1;
}

static rf_decoder *fz_decoder;
static int fz_verbose; /* standalone --list: print each input's outcome */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fz_decoder) {
        fz_decoder = rf__decoder_create();
        if (!fz_decoder)
            abort();
    }
    uint8_t ctl = size ? data[0] : 0;
    const uint8_t *jpg = size ? data + 1 : data;
    size_t len = size ? size - 1 : 0;

    rf_decode_opts o;
    fz_opts(&o, ctl, len);
    o.check_tail = (len & 1) == 0; /* both ends of a crop: checked and not */
    int w, h;
    if (len >= 4 && sof_dims(jpg, len, &w, &h) == 0 && fz_none_at_side(&o, ctl, w, h))
        o.size = w; /* let "none" decode square pictures */
    fz_decode_both_layouts(fz_decoder, jpg, len, &o, fz_verbose);
    return 0;
}

#ifdef RF_FUZZ_STANDALONE
/* ------------------------------------------------------------------------
 * The seed corpus and the standalone driver (no libFuzzer needed).
 * ------------------------------------------------------------------------ */
#include "testutil.h"
#include "fuzzmain.h"

static void make_corpus(corpus *c)
{
    struct {
        const char *name;
        int w, h, sub, prog, rst, arith, none_ok, hs, vs;
    } kinds[] = {
        {"base420", 64, 48, TU_420, 0, 0, 0, 0, 0, 0},
        {"base422", 33, 17, TU_422, 0, 0, 0, 0, 0, 0},
        {"base444", 57, 57, TU_444, 0, 0, 0, 1, 0, 0},
        {"gray", 45, 45, TU_GRAY, 0, 0, 0, 1, 0, 0},
        {"prog420", 50, 70, TU_420, 1, 0, 0, 0, 0, 0},
        {"prog444", 32, 32, TU_444, 1, 0, 0, 1, 0, 0},
        {"proggray", 19, 23, TU_GRAY, 1, 0, 0, 0, 0, 0},
        {"rst1", 48, 48, TU_420, 0, 1, 0, 1, 0, 0},
        {"rst2-422", 61, 40, TU_422, 0, 2, 0, 0, 0, 0},
        {"arith", 40, 40, TU_420, 0, 0, 1, 1, 0, 0},
        {"arithprog", 37, 29, TU_444, 1, 0, 1, 0, 0, 0},
        {"tiny1x1", 1, 1, TU_420, 0, 0, 0, 1, 0, 0},
        {"wide", 300, 7, TU_420, 0, 0, 0, 0, 0, 0},
        {"tall", 9, 260, TU_444, 0, 0, 0, 0, 0, 0},
        {"big", 400, 300, TU_420, 0, 0, 0, 0, 0, 0},
        {"odd420", 17, 17, TU_420, 0, 1, 0, 1, 0, 0},
        {"h2v4prog", 90, 120, TU_420, 1, 3, 0, 0, 2, 4},
        {"h4v2", 70, 50, TU_420, 0, 0, 0, 0, 4, 2},
    };
    uint64_t rs = 0x243f6a8885a308d3ULL;
    const int nk = (int)(sizeof kinds / sizeof kinds[0]);
    for (int i = 0; i < nk; i++) {
        tu_jpeg_opts o = {kinds[i].w,    kinds[i].h,   75 + i,         kinds[i].sub,
                          kinds[i].prog, kinds[i].rst, kinds[i].arith, (uint32_t)(1000 + i),
                          kinds[i].hs,   kinds[i].vs};
        uint8_t *jpg;
        size_t len;
        if (tu_make_jpeg(&o, &jpg, &len) != 0) {
            fprintf(stderr, "fuzz_decode_seeds: cannot encode %s\n", kinds[i].name);
            exit(1);
        }
        char nm[48];
        /* Every transform and two output sizes; "none" at the picture's side. */
        for (int t = 1; t <= 2; t++) {
            snprintf(nm, sizeof nm, "%s-t%d", kinds[i].name, t);
            add(c, nm, ctl_of(t, (i + t) % 8, i & 1), jpg, len);
        }
        snprintf(nm, sizeof nm, "%s-none", kinds[i].name);
        add(c, nm, kinds[i].none_ok ? ctl_none_own_side() : ctl_of(0, i % 8, 0), jpg, len);
        /* Damaged variants of a few. */
        if (i % 2 == 0 || kinds[i].prog || kinds[i].arith) {
            snprintf(nm, sizeof nm, "%s-trunc-half", kinds[i].name);
            add(c, nm, ctl_of(1, 7, 0), jpg, len / 2);
            snprintf(nm, sizeof nm, "%s-no-eoi", kinds[i].name);
            add(c, nm, ctl_of(2, 6, 1), jpg, len - 2);
            size_t sos = tu_jpeg_sos_offset(jpg, len);
            if (sos) {
                snprintf(nm, sizeof nm, "%s-header-only", kinds[i].name);
                add(c, nm, ctl_of(1, 4, 0), jpg, sos);
            }
            uint8_t *f = malloc(len);
            memcpy(f, jpg, len);
            for (int k = 0; k < 6; k++) { /* bit flips in the entropy-coded data */
                size_t at = (sos ? sos : 2) + 20 + xs(&rs) % (len - (sos ? sos : 2) - 22);
                f[at] ^= (uint8_t)(1u << (xs(&rs) % 8));
            }
            snprintf(nm, sizeof nm, "%s-bitflip", kinds[i].name);
            add(c, nm, ctl_of(i % 3, 5, 0), f, len);
            memcpy(f, jpg, len);
            for (int k = 0; k < 3; k++) /* flips in the headers */
                f[2 + xs(&rs) % ((sos ? sos : len) - 2)] ^= (uint8_t)(1u << (xs(&rs) % 8));
            snprintf(nm, sizeof nm, "%s-hdrflip", kinds[i].name);
            add(c, nm, ctl_of(1, 3, 0), f, len);
            free(f);
        }
        if (i == 0 || i == 4 || i == 9) {
            /* SOF edits: huge, just over the test limit, zero width, 12-bit,
             * lossless: limits and "unsupported" paths. */
            size_t sof = tu_jpeg_sof_offset(jpg, len);
            uint8_t *f = malloc(len);
            static const struct {
                const char *n;
                int w, h, prec, marker;
            } ed[] = {{"60000x60000", 60000, 60000, 8, 0},
                      {"1025x1024", 1025, 1024, 8, 0},
                      {"1024x1024", 1024, 1024, 8, 0},
                      {"0xH", 0, 48, 8, 0},
                      {"12bit", -1, -1, 12, 0},
                      {"lossless", -1, -1, 8, 0xC3},
                      {"sof1", -1, -1, 8, 0xC1}};
            for (size_t k = 0; sof && k < sizeof ed / sizeof ed[0]; k++) {
                memcpy(f, jpg, len);
                f[sof] = (uint8_t)ed[k].prec;
                if (ed[k].w >= 0) {
                    f[sof + 1] = (uint8_t)(ed[k].h >> 8);
                    f[sof + 2] = (uint8_t)ed[k].h;
                    f[sof + 3] = (uint8_t)(ed[k].w >> 8);
                    f[sof + 4] = (uint8_t)ed[k].w;
                }
                if (ed[k].marker)
                    f[sof - 3] = (uint8_t)ed[k].marker;
                snprintf(nm, sizeof nm, "%s-%s", kinds[i].name, ed[k].n);
                add(c, nm, ctl_of((int)k % 3, (int)k % 8, 0), f, len);
            }
            free(f);
        }
        free(jpg);
    }
    for (int ycck = 0; ycck <= 1; ycck++) {
        uint8_t *jpg;
        size_t len;
        if (tu_encode_cmyk(40, 40, ycck, 77, 85, &jpg, &len) != 0) {
            fprintf(stderr, "fuzz_decode_seeds: cannot encode CMYK\n");
            exit(1);
        }
        add(c, ycck ? "ycck-none" : "cmyk-none", ctl_none_own_side(), jpg, len);
        add(c, ycck ? "ycck-rrc" : "cmyk-center", ctl_of(1 + ycck, 6, 1), jpg, len);
        add(c, ycck ? "ycck-trunc" : "cmyk-trunc", ctl_of(1, 2, 0), jpg, len * 2 / 3);
        free(jpg);
    }
    /* Not JPEG at all. */
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0,    0,    0,
                                  13,   'I', 'H', 'D', 'R',  0,    0,    0,    16,   0,    0,
                                  0,    16,  8,   2,   0,    0,    0,    0x90, 0x91, 0x68, 0x36};
    add(c, "png", ctl_of(1, 3, 0), png, sizeof png);
    add(c, "gif", ctl_of(2, 3, 0), (const uint8_t *)"GIF89a\x10\x00\x10\x00", 10);
    add(c, "empty", ctl_of(1, 0, 0), NULL, 0);
    add(c, "soi-only", ctl_of(1, 1, 0), (const uint8_t *)"\xff\xd8", 2);
    add(c, "soi-eoi", ctl_of(2, 1, 0), (const uint8_t *)"\xff\xd8\xff\xd9", 4);
    uint8_t rnd[700];
    for (size_t k = 0; k < sizeof rnd; k++)
        rnd[k] = (uint8_t)xs(&rs);
    add(c, "random", ctl_of(1, 5, 0), rnd, sizeof rnd);
    rnd[0] = 0xFF;
    rnd[1] = 0xD8;
    add(c, "soi-random", ctl_of(2, 5, 0), rnd, sizeof rnd);
}

/* Deterministic mutations of a seed, libFuzzer-style but much simpler. */
static size_t mutate(const uint8_t *in, size_t len, uint8_t *out, size_t cap, uint64_t *rs)
{
    size_t n = len < cap ? len : cap;
    memcpy(out, in, n);
    int ops = 1 + (int)(xs(rs) % 4);
    for (int k = 0; k < ops && n > 0; k++) {
        switch (xs(rs) % 7) {
        case 0: /* bit flip */
            out[xs(rs) % n] ^= (uint8_t)(1u << (xs(rs) % 8));
            break;
        case 1: /* random byte */
            out[xs(rs) % n] = (uint8_t)xs(rs);
            break;
        case 2: /* truncate */
            n = 1 + xs(rs) % n;
            break;
        case 3: { /* interesting value */
            static const uint8_t v[] = {0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff};
            out[xs(rs) % n] = v[xs(rs) % sizeof v];
            break;
        }
        case 4: /* copy a chunk over another place */
            fz_copy_run(out, n, rs);
            break;
        case 5: /* control byte */
            out[0] = (uint8_t)xs(rs);
            break;
        default: { /* a marker: FF xx at a random place */
            size_t a = xs(rs) % n;
            if (a + 1 < n) {
                out[a] = 0xFF;
                out[a + 1] = (uint8_t)(0xC0 + xs(rs) % 64);
            }
            break;
        }
        }
    }
    return n;
}

int main(int argc, char **argv)
{
    int rc = fz_main(argc, argv, "fuzz_decode_seeds", make_corpus, mutate, NULL, &fz_verbose);
    rf__decoder_destroy(fz_decoder);
    return rc;
}
#endif /* RF_FUZZ_STANDALONE */
