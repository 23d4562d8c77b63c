/*
 * test_webp.c - WebP pictures through rf__decode_sample: lossy and lossless,
 * with and without alpha, and an animation (its first frame), each equal to
 * what PIL decodes (libwebp's WebPAnimDecoder, the decoder Pillow uses, with
 * the alpha dropped) after the same transform; truncated, corrupt and lying
 * files refused with a reason, a huge header refused by the size limit
 * before anything is decoded. WebP files are made here with libwebp's
 * encoder (tests/webpgen.h).
 *
 * In a build without libwebp the one test left checks that WebP files are
 * refused as unsupported, saying why.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decode.h"
#include "resample.h"
#include "ringfeed.h"
#include "rng.h"
#include "testcheck.h"
#include "testutil.h"
#include "transform.h"

#ifdef RF_HAVE_WEBP
#include <webp/decode.h>
#include <webp/demux.h>

#include "webpgen.h"
#endif

static rf_decode_opts opts(int transform, int size)
{
    return tu_decode_opts(transform, size, 11);
}

#ifdef RF_HAVE_WEBP

/* PIL's pixels: WebPAnimDecoder (RGBA, default options) frame 1, alpha
 * dropped. *out is w*h*3, malloc'd. 0, or -1 when libwebp refuses the file. */
static int pil_like_decode(const uint8_t *f, size_t len, uint8_t **out, int *w, int *h)
{
    WebPData in = {f, len};
    WebPAnimDecoder *dec = WebPAnimDecoderNew(&in, NULL);
    if (!dec)
        return -1;
    WebPAnimInfo info;
    uint8_t *rgba;
    int ts;
    if (!WebPAnimDecoderGetInfo(dec, &info) || !WebPAnimDecoderGetNext(dec, &rgba, &ts)) {
        WebPAnimDecoderDelete(dec);
        return -1;
    }
    *w = (int)info.canvas_width;
    *h = (int)info.canvas_height;
    size_t n = (size_t)*w * *h;
    *out = malloc(n * 3);
    assert_non_null(*out);
    for (size_t i = 0; i < n; i++)
        memcpy(*out + 3 * i, rgba + 4 * i, 3);
    WebPAnimDecoderDelete(dec);
    return 0;
}

/* The expected slot: PIL's pixels resampled whole with o's geometry. */
static uint8_t *expected(const uint8_t *f, size_t len, const rf_decode_opts *o)
{
    uint8_t *rgb;
    int w, h;
    assert_int_equal(pil_like_decode(f, len, &rgb, &w, &h), 0);
    rf_geom g;
    rf_rng rng = rf__rng_make(o->seed, (uint64_t)o->epoch, (uint64_t)o->sample);
    if (o->transform == RF_TRANSFORM_CENTER)
        rf__geom_center(w, h, o->size, &g);
    else if (o->transform == RF_TRANSFORM_RANDOM_RESIZED_CROP)
        rf__geom_rrc(w, h, o->size, &rng, &g);
    else
        rf__geom_none(w, h, o->size, &g);
    g.flip = o->flip ? rf__rng_uniform(&rng) < 0.5 : 0;
    size_t n = (size_t)o->size * o->size * 3;
    uint8_t *ref = malloc(n);
    assert_non_null(ref);
    rf_resampler *rs = rf__resampler_create();
    assert_non_null(rs);
    assert_int_equal(rf__resample(rs, &g, w, h, rgb, (size_t)w * 3, 0, 0, w, h, ref,
                                  o->layout == RF_LAYOUT_NCHW ? RF__LAYOUT_NCHW : RF__LAYOUT_NHWC),
                     0);
    rf__resampler_destroy(rs);
    free(rgb);
    return ref;
}

/* Decodes f with o and checks the slot against expected(). */
static void check_same(rf_decoder *d, const uint8_t *f, size_t len, const rf_decode_opts *o,
                       const char *what)
{
    size_t n = (size_t)o->size * o->size * 3;
    uint8_t *out = malloc(n);
    assert_non_null(out);
    memset(out, 0xa5, n);
    char err[256] = "";
    rf_decode_times t;
    int rc = rf__decode_sample(d, f, len, o, out, err, sizeof err, &t);
    if (rc != 0)
        fail_msg("%s: rc %d: %s", what, rc, err);
    assert_int_equal(t.denom, 1);
    assert_int_equal(t.whole, 1);
    uint8_t *ref = expected(f, len, o);
    if (memcmp(out, ref, n) != 0) {
        size_t i = 0;
        while (out[i] == ref[i])
            i++;
        fail_msg("%s: byte %zu is %u, PIL's is %u", what, i, out[i], ref[i]);
    }
    free(ref);
    free(out);
}

static const char *const kind_name[] = {"lossy RGB", "lossy RGBA", "lossless RGB", "lossless RGBA"};

/* Transform "none" is a plain decode: PIL's pixels exactly; lossless RGB is
 * the encoded picture itself. */
static void test_none_is_pils_decode(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    assert_non_null(d);
    const int sides[] = {1, 2, 17, 64, 101};
    for (int k = 0; k < 4; k++)
        for (size_t s = 0; s < sizeof sides / sizeof sides[0]; s++) {
            int side = sides[s];
            size_t len;
            uint8_t *f = wg_encode(k, side, side, (uint32_t)(k * 100 + side), 80, &len);
            assert_non_null(f);
            char what[64];
            snprintf(what, sizeof what, "%s %dx%d none", kind_name[k], side, side);
            rf_decode_opts o = opts(RF_TRANSFORM_NONE, side);
            check_same(d, f, len, &o, what);
            if (k == WG_LOSSLESS_RGB) {
                uint8_t *out = malloc((size_t)side * side * 3);
                uint8_t *src = tu_make_rgb(side, side, (uint32_t)(k * 100 + side));
                char err[256];
                rf_decode_times t;
                assert_int_equal(rf__decode_sample(d, f, len, &o, out, err, sizeof err, &t), 0);
                assert_memory_equal(out, src, (size_t)side * side * 3);
                free(src);
                free(out);
            }
            free(f);
        }
    rf__decoder_destroy(d);
}

/* center and random_resized_crop, both layouts, with flips, down- and
 * upscaling: the full decode handed to the resampler, as the reference does. */
static void test_center_and_rrc_match_pil(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    assert_non_null(d);
    const struct {
        int w, h;
    } sz[] = {{300, 200}, {181, 257}, {64, 48}, {33, 97}};
    const int sizes[] = {224, 32, 57};
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
            size_t len;
            uint8_t *f = wg_encode(k, sz[i].w, sz[i].h, (uint32_t)(7 * k + i), 85, &len);
            assert_non_null(f);
            for (int t = 0; t < 2; t++)
                for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                    rf_decode_opts o =
                        opts(t ? RF_TRANSFORM_RANDOM_RESIZED_CROP : RF_TRANSFORM_CENTER, sizes[s]);
                    o.flip = t;
                    o.sample = (int64_t)(i * 3 + s);
                    o.layout = (int)(s % 2 ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC);
                    char what[96];
                    snprintf(what, sizeof what, "%s %dx%d %s %d", kind_name[k], sz[i].w, sz[i].h,
                             t ? "rrc" : "center", sizes[s]);
                    check_same(d, f, len, &o, what);
                }
            free(f);
        }
    rf__decoder_destroy(d);
}

/* An animation gives its first frame on the transparent canvas (black once
 * the alpha is dropped), as PIL's Image.open does. */
static void test_animation_first_frame(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    assert_non_null(d);
    for (int k = WG_LOSSY_RGB; k <= WG_LOSSLESS_RGB; k += 2) {
        size_t len;
        uint8_t *f = wg_animation(80, 60, 50, 40, 12, 8, k, 5, &len);
        assert_non_null(f);
        WebPBitstreamFeatures ft;
        assert_int_equal(WebPGetFeatures(f, len, &ft), VP8_STATUS_OK);
        assert_true(ft.has_animation);
        rf_decode_opts o = opts(RF_TRANSFORM_CENTER, 48);
        check_same(d, f, len, &o, "animation center");
        o = opts(RF_TRANSFORM_RANDOM_RESIZED_CROP, 96);
        o.flip = 1;
        check_same(d, f, len, &o, "animation rrc");
        /* The canvas outside frame 1 is black, inside it is frame 1. */
        uint8_t *rgb;
        int w, h;
        assert_int_equal(pil_like_decode(f, len, &rgb, &w, &h), 0);
        assert_int_equal(w, 80);
        assert_int_equal(h, 60);
        assert_int_equal(rgb[0] | rgb[1] | rgb[2], 0);
        assert_int_equal(rgb[3 * (59 * 80 + 79)] | rgb[3 * (59 * 80 + 79) + 1], 0);
        free(rgb);
        free(f);
    }
    rf__decoder_destroy(d);
}

/* Decodes f, expecting failure rc with a reason containing want (when not NULL). */
static void check_fails(rf_decoder *d, const uint8_t *f, size_t len, int64_t max_pixels,
                        int want_rc, const char *want, const char *what)
{
    rf_decode_opts o = opts(RF_TRANSFORM_CENTER, 16);
    o.max_pixels = max_pixels;
    uint8_t out[16 * 16 * 3];
    char err[256] = "";
    rf_decode_times t;
    int rc = rf__decode_sample(d, f, len, &o, out, err, sizeof err, &t);
    if (rc != want_rc || !err[0] || (want && !strstr(err, want)))
        fail_msg("%s: rc %d (want %d), reason \"%s\" (want \"%s\")", what, rc, want_rc, err,
                 want ? want : "any");
}

/* Files cut anywhere: a reason, never pixels or a crash. */
static void test_truncated(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    assert_non_null(d);
    for (int k = 0; k < 5; k++) {
        size_t len;
        uint8_t *f = k < 4 ? wg_encode(k, 96, 80, (uint32_t)k, 80, &len)
                           : wg_animation(80, 60, 50, 40, 12, 8, WG_LOSSY_RGB, 3, &len);
        assert_non_null(f);
        char what[64];
        snprintf(what, sizeof what, "kind %d cut in half", k);
        check_fails(d, f, len / 2, 178956970, RF_E_DECODE, "truncated", what);
        snprintf(what, sizeof what, "kind %d without its last byte", k);
        check_fails(d, f, len - 1, 178956970, RF_E_DECODE, "truncated", what);
        for (size_t cut = 12; cut < len; cut += cut < 64 ? 1 : 37) {
            snprintf(what, sizeof what, "kind %d cut at %zu of %zu", k, cut, len);
            check_fails(d, f, cut, 178956970, RF_E_DECODE, NULL, what);
        }
        /* The decoder is fine after all that. */
        if (k < 4) {
            rf_decode_opts o = opts(RF_TRANSFORM_CENTER, 32);
            check_same(d, f, len, &o, "after truncated files");
        }
        free(f);
    }
    rf__decoder_destroy(d);
}

/* Damaged headers are refused with libwebp's status name; damage in the
 * compressed data either decodes to something or is refused, never more. */
static void test_corrupt(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    assert_non_null(d);
    size_t len;
    uint8_t *f = wg_encode(WG_LOSSY_RGB, 64, 64, 9, 80, &len);
    assert_non_null(f);
    size_t c = wg_chunk(f, len, "VP8 ");
    assert_true(c > 0);
    f[c + 8 + 3] ^= 0xff; /* the key frame's start code 9d 01 2a */
    check_fails(d, f, len, 178956970, RF_E_DECODE, "VP8_STATUS_BITSTREAM_ERROR", "start code");
    free(f);

    f = wg_encode(WG_LOSSLESS_RGB, 64, 64, 9, 80, &len);
    assert_non_null(f);
    c = wg_chunk(f, len, "VP8L");
    assert_true(c > 0);
    f[c + 8] = 0x2e; /* the lossless signature 0x2f */
    check_fails(d, f, len, 178956970, RF_E_DECODE, "VP8_STATUS_BITSTREAM_ERROR", "signature");
    free(f);

    /* Bit flips all over the data of every kind. */
    int failures = 0;
    uint64_t rs = 0x9e3779b97f4a7c15ULL;
    for (int k = 0; k < 4; k++) {
        uint8_t *orig = wg_encode(k, 72, 56, (uint32_t)(40 + k), 80, &len);
        assert_non_null(orig);
        uint8_t *g = malloc(len);
        for (int i = 0; i < 60; i++) {
            memcpy(g, orig, len);
            for (int b = 0; b < 1 + i % 4; b++) {
                rs ^= rs << 13;
                rs ^= rs >> 7;
                rs ^= rs << 17;
                size_t at = 20 + (size_t)(rs >> 8) % (len - 20);
                g[at] ^= (uint8_t)(1u << (rs % 8));
            }
            rf_decode_opts o = opts(RF_TRANSFORM_CENTER, 24);
            uint8_t out[24 * 24 * 3];
            char err[256] = "";
            rf_decode_times t;
            int rc = rf__decode_sample(d, g, len, &o, out, err, sizeof err, &t);
            if (rc != 0) {
                assert_int_equal(rc, RF_E_DECODE);
                assert_true(err[0] != '\0');
                failures++;
            }
        }
        free(g);
        free(orig);
    }
    assert_true(failures > 0);

    /* RIFF files of other kinds are not WebP; WebP with an unknown first chunk is bad. */
    check_fails(d, (const uint8_t *)"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00", 20, 178956970,
                RF_E_DECODE, NULL, "WAVE");
    check_fails(d, (const uint8_t *)"RIFF\x0c\x00\x00\x00WEBPJUNK\x00\x00\x00\x00", 20, 178956970,
                RF_E_DECODE, "VP8_STATUS_", "unknown chunk");
    check_fails(d, (const uint8_t *)"RIFF\x64\x00\x00\x00WEBP", 12, 178956970, RF_E_DECODE,
                "VP8_STATUS_NOT_ENOUGH_DATA", "header only");
    rf__decoder_destroy(d);
}

/* A header claiming a huge picture fails the size limit before anything is
 * decoded: the files below hold a few hundred bytes of data, which any
 * decoding attempt would find truncated instead. */
static void test_huge_header_is_a_limit(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    assert_non_null(d);
    const int kinds[] = {WG_LOSSY_RGB, WG_LOSSLESS_RGB, WG_LOSSLESS_RGBA};
    for (int i = 0; i < 3; i++) {
        size_t len;
        uint8_t *f = wg_encode(kinds[i], 40, 30, 2, 80, &len);
        assert_non_null(f);
        /* Lossless RGBA files keep the VP8L chunk after no VP8X: still simple. */
        assert_int_equal(wg_set_size(f, len, 16383, 16383), 0);
        int w = 0, h = 0;
        assert_true(WebPGetInfo(f, len, &w, &h));
        assert_int_equal(w, 16383);
        assert_int_equal(h, 16383);
        check_fails(d, f, len, 178956970, RF_E_LIMIT, "16383x16383 pixels exceeds the limit",
                    kind_name[kinds[i]]);
        free(f);
    }
    /* An animation's canvas counts, whatever its frames. */
    size_t len;
    uint8_t *f = wg_animation(80, 60, 50, 40, 12, 8, WG_LOSSY_RGB, 4, &len);
    assert_non_null(f);
    wg_le24(f + 12 + 8 + 4, 60000 - 1);
    wg_le24(f + 12 + 8 + 7, 50000 - 1);
    check_fails(d, f, len, 178956970, RF_E_LIMIT, "60000x50000 pixels", "animation canvas");
    free(f);
    /* And a valid picture over a small limit. */
    f = wg_encode(WG_LOSSY_RGBA, 40, 30, 2, 80, &len);
    assert_non_null(f);
    check_fails(d, f, len, 1199, RF_E_LIMIT, "40x30 pixels exceeds the limit of 1199", "limit");
    rf_decode_opts o = opts(RF_TRANSFORM_CENTER, 16);
    o.max_pixels = 1200;
    check_same(d, f, len, &o, "at the limit");
    free(f);
    rf__decoder_destroy(d);
}

/* Through the loader: a list file of WebP pictures of every kind and two
 * broken ones, three decode workers, on_error skip. Every delivered sample is
 * what rf__decode_sample makes of its file, and the broken ones are the
 * recorded errors. (The pool path for sanitizers and memcheck_test_webp.) */
static void test_loader_list_of_webp(void **state)
{
    (void)state;
    char *dir = tu_tempdir("webp");
    assert_non_null(dir);
    enum { N = 14, S = 40 };
    char path[N][512];
    uint8_t *file[N];
    size_t flen[N];
    char lst[600];
    snprintf(lst, sizeof lst, "%s/list.txt", dir);
    FILE *lf = fopen(lst, "w");
    assert_non_null(lf);
    for (int i = 0; i < N; i++) {
        if (i == N - 1)
            file[i] = wg_animation(80, 60, 50, 40, 12, 8, WG_LOSSLESS_RGB, 3, &flen[i]);
        else
            file[i] = wg_encode(i % 4, 60 + 7 * i, 90 - 3 * i, (uint32_t)i, 80, &flen[i]);
        assert_non_null(file[i]);
        if (i == 5)
            flen[i] /= 2; /* truncated */
        if (i == 10)
            wg_set_size(file[i], flen[i], 16383, 16383); /* over the limit */
        snprintf(path[i], sizeof path[i], "%s/p%02d.webp", dir, i);
        assert_int_equal(tu_write_file(path[i], file[i], flen[i]), 0);
        fprintf(lf, "%s\t%d\n", path[i], i);
    }
    fclose(lf);
    rf_loader *l = TU_LOADER(lst, {RF_P_BATCH_SIZE, 4}, {RF_P_IMAGE_SIZE, S}, {RF_P_NUM_WORKERS, 3},
                             {RF_P_TRANSFORM, RF_TRANSFORM_CENTER}, {RF_P_SHUFFLE, 0},
                             {RF_P_ON_ERROR, RF_ON_ERROR_SKIP});
    tu_start(l);
    rf_decoder *d = rf__decoder_create();
    assert_non_null(d);
    uint8_t want[S * S * 3];
    int delivered = 0;
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(l, &b)) == RF_OK) {
        const uint8_t *px = rf_batch_data(b);
        const int64_t *smp = rf_batch_samples(b), *lab = rf_batch_labels(b);
        for (int64_t k = 0; k < rf_batch_count(b); k++) {
            int i = (int)smp[k];
            assert_true(i >= 0 && i < N && i != 5 && i != 10);
            assert_int_equal(lab[k], i);
            rf_decode_opts o = opts(RF_TRANSFORM_CENTER, S);
            char err[256];
            rf_decode_times t;
            assert_int_equal(rf__decode_sample(d, file[i], flen[i], &o, want, err, sizeof err, &t),
                             0);
            assert_memory_equal(px + (size_t)k * sizeof want, want, sizeof want);
            delivered++;
        }
        rf_batch_release(b);
    }
    if (rc != RF_END_OF_EPOCH)
        fail_msg("next: %d %s", rc, rf_loader_errmsg(l));
    assert_int_equal(delivered, N);
    char *js = tu_stats(l);
    assert_int_equal(tu_stats_int(js, "errors_count"), 2);
    assert_non_null(strstr(js, "p05.webp"));
    assert_non_null(strstr(js, "truncated"));
    assert_non_null(strstr(js, "p10.webp"));
    assert_non_null(strstr(js, "exceeds the limit"));
    free(js);
    rf_loader_destroy(l);
    rf__decoder_destroy(d);
    for (int i = 0; i < N; i++)
        free(file[i]);
    tu_tempdir_remove(&dir);
}

#else /* !RF_HAVE_WEBP */

static void test_refused_without_libwebp(void **state)
{
    (void)state;
    /* A 1x1 lossless WebP (VP8L), written out by hand. */
    static const uint8_t f[] = {'R',  'I',  'F',  'F',  0x1a, 0,    0,    0,    'W',  'E', 'B', 'P',
                                'V',  'P',  '8',  'L',  0x0d, 0,    0,    0,    0x2f, 0,   0,   0,
                                0x10, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xfe, 0x07, 0};
    rf_decoder *d = rf__decoder_create();
    assert_non_null(d);
    rf_decode_opts o = opts(RF_TRANSFORM_CENTER, 16);
    uint8_t out[16 * 16 * 3];
    char err[256] = "";
    rf_decode_times t;
    assert_int_equal(rf__decode_sample(d, f, sizeof f, &o, out, err, sizeof err, &t), RF_E_DECODE);
    assert_string_equal(err, "unsupported format: WebP (this build has no libwebp: its features "
                             "lack \"webp\"; install libwebp-dev and rebuild)");
    rf__decoder_destroy(d);
}

#endif /* RF_HAVE_WEBP */

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifdef RF_HAVE_WEBP
        cmocka_unit_test(test_none_is_pils_decode),
        cmocka_unit_test(test_center_and_rrc_match_pil),
        cmocka_unit_test(test_animation_first_frame),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_huge_header_is_a_limit),
        cmocka_unit_test(test_loader_list_of_webp),
#else
        cmocka_unit_test(test_refused_without_libwebp),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
