/*
 * fuzz_webp.c - fuzz target for the WebP decoder: file bytes ->
 * rf__decode_sample -> a slot-sized buffer, checked against PIL's decoder.
 *
 * Input: byte 0 picks the options (transform = b % 3, flip = bit 2, epoch =
 * bits 3-4, output side = fz_sizes[b >> 5]; for transform "none" with epoch
 * bits 11, the picture's own side when it is square and at most
 * FZ_NONE_MAX_SIDE); the rest is the file (any bytes: a file that is not
 * WebP takes the other decoders' paths, which is fine).
 *
 * Oracles beyond "no crash, no UB, no leak" (ASan, UBSan): a failure returns
 * RF_E_DECODE, RF_E_LIMIT or RF_E_NOMEM with a NUL-terminated, non-empty
 * reason; a success fills every byte of a buffer exactly one sample long. And
 * a differential one against libwebp's WebPAnimDecoder, which Pillow opens
 * every WebP with (frame 1, RGBA, alpha then dropped): when ringfeed decodes
 * a WebP file, the reference decodes it too and, resampled with the same
 * geometry, gives the same bytes; when the reference decodes a file whose
 * canvas is within the size limit (and "none" fits), so does ringfeed.
 *
 * Built two ways from this one file:
 *   fuzz_webp        clang -fsanitize=fuzzer,address,undefined (CMake RF_FUZZ).
 *   fuzz_webp_seeds  any compiler, RF_FUZZ_STANDALONE (every build with libwebp):
 *                      --gen DIR    writes the seed corpus (tests/webpgen.h) to DIR/seeds,
 *                                   makes DIR/corpus and DIR/artifacts
 *                      --list       decodes every seed, printing the outcome
 *                      --self [N]   every seed and N deterministic mutations of each
 *                      FILE|DIR...  replays inputs (reproduces a finding)
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

#include <webp/decode.h>
#include <webp/demux.h>

#include "decode.h"
#include "resample.h"
#include "ringfeed.h"
#include "rng.h"
#include "transform.h"

#define FZ_NAME "fuzz_webp"
#include "fuzzdecode.h"

static rf_decoder *fz_decoder;
static rf_resampler *fz_resampler;
static int fz_verbose;

/* PIL's decode: WebPAnimDecoder's first frame, RGB kept. *out w*h*3
 * (malloc'd). 0, or -1 when it refuses the file. */
static int reference(const uint8_t *f, size_t len, uint8_t **out, int *w, int *h)
{
    WebPData in = {f, len};
    /* The canvas first (the demuxer the animation decoder uses itself): over
     * the limit, the reference would allocate and clear it for nothing. */
    WebPDemuxer *dmx = WebPDemux(&in);
    if (!dmx)
        return -1;
    uint64_t canvas = (uint64_t)WebPDemuxGetI(dmx, WEBP_FF_CANVAS_WIDTH) *
                      WebPDemuxGetI(dmx, WEBP_FF_CANVAS_HEIGHT);
    WebPDemuxDelete(dmx);
    if (canvas > FZ_MAX_PIXELS)
        return -1;
    WebPAnimDecoder *dec = WebPAnimDecoderNew(&in, NULL);
    if (!dec)
        return -1;
    WebPAnimInfo info;
    uint8_t *rgba;
    int ts, rc = -1;
    if (WebPAnimDecoderGetInfo(dec, &info) && WebPAnimDecoderGetNext(dec, &rgba, &ts)) {
        *w = (int)info.canvas_width;
        *h = (int)info.canvas_height;
        size_t n = (size_t)*w * (size_t)*h;
        *out = malloc(n * 3);
        if (!*out)
            abort();
        for (size_t i = 0; i < n; i++)
            memcpy(*out + 3 * i, rgba + 4 * i, 3);
        rc = 0;
    }
    WebPAnimDecoderDelete(dec);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fz_decoder) {
        fz_decoder = rf__decoder_create();
        fz_resampler = rf__resampler_create();
        if (!fz_decoder || !fz_resampler)
            abort();
    }
    uint8_t ctl = size ? data[0] : 0;
    const uint8_t *file = size ? data + 1 : data;
    size_t len = size ? size - 1 : 0;
    int is_webp = len >= 12 && !memcmp(file, "RIFF", 4) && !memcmp(file + 8, "WEBP", 4);

    rf_decode_opts o;
    fz_opts(&o, ctl, len);
    o.check_tail = 1;
    o.layout = RF_LAYOUT_NHWC;
    int fw = 0, fh = 0;
    int info_ok = is_webp && WebPGetInfo(file, len, &fw, &fh);
    if (info_ok && fz_none_at_side(&o, ctl, fw, fh))
        o.size = fw;

    size_t n = (size_t)o.size * (size_t)o.size * 3;
    uint8_t *a = malloc(n); /* exactly one sample's place: an overrun is an ASan report */
    if (!a)
        abort();
    memset(a, 0xa5, n);
    char err[512];
    memset(err, 'x', sizeof err); /* no NUL: a failure must write a terminated reason */
    rf_decode_times t;
    int rc = rf__decode_sample(fz_decoder, file, len, &o, a, err, sizeof err, &t);
    if (rc != 0)
        check_failure(rc, err, sizeof err);
    err[sizeof err - 1] = '\0';
    if (fz_verbose)
        printf("  t=%d S=%d flip=%d len=%zu: %s\n", o.transform, o.size, o.flip, len,
               rc ? err : "ok");

    /* The differential oracle, for WebP files whose size the reference can
     * afford (the limit is ringfeed's alone). */
    uint8_t *ref_rgb = NULL;
    int rw = 0, rh = 0;
    int ref_ok = is_webp && reference(file, len, &ref_rgb, &rw, &rh) == 0;
    if (rc == 0 && is_webp && !ref_ok)
        finding("decoded a WebP file PIL's decoder refuses", rc, rc, "", "");
    if (ref_ok && rc != 0 && !(o.transform == RF_TRANSFORM_NONE && (rw != o.size || rh != o.size)))
        finding("refused a WebP file PIL's decoder decodes", rc, rc, err, "");
    if (rc == 0 && ref_ok) {
        rf_geom g;
        rf_rng rng = rf__rng_make(o.seed, (uint64_t)o.epoch, (uint64_t)o.sample);
        if (o.transform == RF_TRANSFORM_CENTER)
            rf__geom_center(rw, rh, o.size, &g);
        else if (o.transform == RF_TRANSFORM_RANDOM_RESIZED_CROP)
            rf__geom_rrc(rw, rh, o.size, &rng, &g);
        else
            rf__geom_none(rw, rh, o.size, &g);
        g.flip = o.flip ? rf__rng_uniform(&rng) < 0.5 : 0;
        uint8_t *b = malloc(n);
        if (!b)
            abort();
        if (rf__resample(fz_resampler, &g, rw, rh, ref_rgb, (size_t)rw * 3, 0, 0, rw, rh, b,
                         RF__LAYOUT_NHWC) != 0)
            abort();
        if (memcmp(a, b, n) != 0)
            finding("pixels differ from PIL's decoder", rc, rc, "", "");
        free(b);
    }
    free(ref_rgb);
    free(a);
    return 0;
}

#ifdef RF_FUZZ_STANDALONE
/* ------------------------------------------------------------------------
 * The seed corpus and the standalone driver (no libFuzzer needed).
 * ------------------------------------------------------------------------ */
#include "testutil.h"
#include "webpgen.h"
#include "fuzzmain.h"

/* Control byte for transform t (0 none, 1 center, 2 rrc), size index k;
 * own: "none" at the picture's own side. */
static uint8_t ctl_own_of(int t, int k, int flip, int own)
{
    for (int c = 0; c < 256; c++)
        if (c % 3 == t && (c >> 5) == k && ((c >> 2) & 1) == flip && (((c & 0x18) == 0x18) == own))
            return (uint8_t)c;
    abort();
}

static void make_corpus(corpus *c)
{
    static const char *const kn[] = {"lossy", "lossy-alpha", "lossless", "lossless-alpha"};
    static const struct {
        int w, h;
    } sz[] = {{1, 1}, {16, 16}, {33, 33}, {64, 48}, {7, 90}};
    uint64_t rs = 0x243f6a8885a308d3ULL;
    char nm[48];
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
            size_t len;
            uint8_t *f = wg_encode(k, sz[i].w, sz[i].h, (uint32_t)(k * 10 + i), 60 + 10 * k, &len);
            if (!f) {
                fprintf(stderr, "fuzz_webp_seeds: cannot encode\n");
                exit(1);
            }
            int sq = sz[i].w == sz[i].h;
            snprintf(nm, sizeof nm, "%s-%dx%d-none", kn[k], sz[i].w, sz[i].h);
            add(c, nm, ctl_own_of(0, (int)i % 8, 0, sq), f, len);
            snprintf(nm, sizeof nm, "%s-%dx%d-center", kn[k], sz[i].w, sz[i].h);
            add(c, nm, ctl_own_of(1, (int)(i + k) % 8, 0, 0), f, len);
            snprintf(nm, sizeof nm, "%s-%dx%d-rrc", kn[k], sz[i].w, sz[i].h);
            add(c, nm, ctl_own_of(2, (int)(i + 2 * k) % 8, 1, 0), f, len);
            if (i == 3) {
                snprintf(nm, sizeof nm, "%s-trunc-half", kn[k]);
                add(c, nm, ctl_own_of(1, 5, 0, 0), f, len / 2);
                snprintf(nm, sizeof nm, "%s-trunc-20", kn[k]);
                add(c, nm, ctl_own_of(1, 3, 0, 0), f, len < 20 ? len : 20);
                uint8_t *g = malloc(len);
                memcpy(g, f, len);
                for (int b = 0; b < 4; b++) /* flips in the compressed data */
                    g[30 + xs(&rs) % (len - 30)] ^= (uint8_t)(1u << (xs(&rs) % 8));
                snprintf(nm, sizeof nm, "%s-bitflip", kn[k]);
                add(c, nm, ctl_own_of(2, 6, 0, 0), g, len);
                memcpy(g, f, len);
                if (wg_set_size(g, len, 16383, 16383) == 0) {
                    snprintf(nm, sizeof nm, "%s-huge", kn[k]);
                    add(c, nm, ctl_own_of(1, 4, 0, 0), g, len);
                }
                memcpy(g, f, len);
                if (wg_set_size(g, len, 1024, 1024) == 0) { /* at the fuzz limit, lying */
                    snprintf(nm, sizeof nm, "%s-1024-lying", kn[k]);
                    add(c, nm, ctl_own_of(1, 4, 0, 0), g, len);
                }
                free(g);
            }
            free(f);
        }
    for (int k = WG_LOSSY_RGB; k <= WG_LOSSLESS_RGB; k += 2) {
        size_t len;
        uint8_t *f = wg_animation(40, 30, 20, 16, 6, 4, k, (uint32_t)(90 + k), &len);
        if (!f)
            exit(1);
        snprintf(nm, sizeof nm, "anim-%s-center", kn[k]);
        add(c, nm, ctl_own_of(1, 6, 0, 0), f, len);
        snprintf(nm, sizeof nm, "anim-%s-rrc", kn[k]);
        add(c, nm, ctl_own_of(2, 7, 1, 0), f, len);
        snprintf(nm, sizeof nm, "anim-%s-trunc", kn[k]);
        add(c, nm, ctl_own_of(1, 6, 0, 0), f, len - 30);
        free(f);
    }
    add(c, "riff-only", ctl_own_of(1, 1, 0, 0), (const uint8_t *)"RIFF\x04\x00\x00\x00WEBP", 12);
    add(c, "vp8x-only", ctl_own_of(1, 1, 0, 0),
        (const uint8_t *)"RIFF\x16\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x10\x00\x00\x00"
                         "\x0f\x00\x00\x0f\x00\x00",
        30);
}

/* Deterministic mutations of a seed: bit flips, bytes, cuts, copied runs,
 * and rewritten chunk sizes (where WebP parsers are most often wrong). */
static size_t mutate(const uint8_t *in, size_t len, uint8_t *out, size_t cap, uint64_t *rs)
{
    size_t n = len < cap ? len : cap;
    memcpy(out, in, n);
    int ops = 1 + (int)(xs(rs) % 4);
    for (int k = 0; k < ops && n > 1; k++) {
        switch (xs(rs) % 6) {
        case 0:
            out[1 + xs(rs) % (n - 1)] ^= (uint8_t)(1u << (xs(rs) % 8));
            break;
        case 1:
            out[1 + xs(rs) % (n - 1)] = (uint8_t)xs(rs);
            break;
        case 2:
            n = 1 + xs(rs) % n;
            break;
        case 3: /* copy a run over another place */
            fz_copy_run(out, n, rs);
            break;
        case 4: { /* a chunk's (or the RIFF's) 32-bit size */
            static const size_t at[] = {5, 17, 35, 45};
            size_t p = at[xs(rs) % 4];
            if (p + 4 <= n) {
                static const uint32_t v[] = {0, 1, 0x7fffffffu, 0xffffffffu, 0xfffffff6u};
                uint32_t x = v[xs(rs) % 5];
                memcpy(out + p, &x, 4);
            }
            break;
        }
        default:
            out[0] = (uint8_t)xs(rs);
            break;
        }
    }
    return n;
}

int main(int argc, char **argv)
{
    int rc = fz_main(argc, argv, "fuzz_webp_seeds", make_corpus, mutate, NULL, &fz_verbose);
    rf__decoder_destroy(fz_decoder);
    rf__resampler_destroy(fz_resampler);
    return rc;
}
#endif /* RF_FUZZ_STANDALONE */
