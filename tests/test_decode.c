/*
 * test_decode.c - one JPEG's bytes to pixels in a slot: every variant the
 * decoder must handle, region decoding equal to a full decode, the limits,
 * and every kind of bad input reported with a reason instead of pixels.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jpeglib.h>

#include "decode.h"
#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"
#include "transform.h"

static rf_decode_opts opts(int transform, int size)
{
    return tu_decode_opts(transform, size, 7);
}

static uint8_t *jpeg_of(int w, int h, int subsamp, int progressive, int restart, int arith,
                        size_t *len)
{
    tu_jpeg_opts o = {.width = w,
                      .height = h,
                      .quality = 90,
                      .subsamp = subsamp,
                      .progressive = progressive,
                      .restart_rows = restart,
                      .arithmetic = arith,
                      .seed = (uint32_t)(w * 31 + h)};
    uint8_t *jpg = NULL;
    assert_int_equal(tu_make_jpeg(&o, &jpg, len), 0);
    return jpg;
}

/* Transform "none" is a plain decode: byte-identical to libjpeg's full decode. */
static void test_none_equals_full_decode(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    assert_non_null(d);
    const int subs[] = {TU_444, TU_422, TU_420, TU_GRAY};
    for (int si = 0; si < 4; si++)
        for (int prog = 0; prog <= 1; prog++)
            for (int rst = 0; rst <= 1; rst++) {
                size_t len;
                uint8_t *jpg = jpeg_of(57, 57, subs[si], prog, rst ? 2 : 0, 0, &len);
                uint8_t *ref;
                int w, h;
                assert_int_equal(tu_decode_jpeg(jpg, len, &ref, &w, &h), 0);
                uint8_t *out = malloc(57 * 57 * 3);
                char err[256] = "";
                rf_decode_times t;
                rf_decode_opts o = opts(RF_TRANSFORM_NONE, 57);
                assert_int_equal(rf__decode_sample(d, jpg, len, &o, out, err, sizeof err, &t), 0);
                assert_memory_equal(out, ref, 57 * 57 * 3);
                free(out);
                free(ref);
                free(jpg);
            }
    rf__decoder_destroy(d);
}

/* The geometry the decoder draws for o on a w x h picture. */
static void geom_of(const rf_decode_opts *o, int w, int h, rf_geom *g)
{
    rf_rng rng = rf__rng_make(o->seed, (uint64_t)o->epoch, (uint64_t)o->sample);
    if (o->transform == RF_TRANSFORM_CENTER)
        rf__geom_center(w, h, o->size, g);
    else
        rf__geom_rrc(w, h, o->size, &rng, g);
    g->flip = o->flip ? rf__rng_uniform(&rng) < 0.5 : 0;
}

/* Reference: full decode, then resample the whole picture. Region decoding
 * (skip/crop scanlines) must give the same bytes. */
static void check_against_full(int w, int h, int subsamp, int progressive, int transform,
                               int size, int flip, int layout, double min_psnr)
{
    size_t len;
    uint8_t *jpg = jpeg_of(w, h, subsamp, progressive, 0, 0, &len);
    uint8_t *ref_rgb;
    int rw, rh;
    assert_int_equal(tu_decode_jpeg(jpg, len, &ref_rgb, &rw, &rh), 0);

    rf_decode_opts o = opts(transform, size);
    o.flip = flip;
    o.layout = layout;
    o.sample = w + h;
    rf_geom g;
    geom_of(&o, w, h, &g);
    int denom = rf__geom_dct_denom(&g);

    size_t n = (size_t)size * size * 3;
    uint8_t *ref = malloc(n), *out = malloc(n);
    rf_resampler *rs = rf__resampler_create();
    assert_int_equal(rf__resample(rs, &g, w, h, ref_rgb, (size_t)w * 3, 0, 0, w, h, ref,
                                  layout == RF_LAYOUT_NCHW ? RF__LAYOUT_NCHW : RF__LAYOUT_NHWC),
                     0);
    rf_decoder *d = rf__decoder_create();
    char err[256] = "";
    rf_decode_times t;
    assert_int_equal(rf__decode_sample(d, jpg, len, &o, out, err, sizeof err, &t), 0);
    assert_int_equal(t.denom, denom);
    if (denom == 1) {
        assert_memory_equal(out, ref, n); /* region decode == full decode */
    } else {
        /* DCT scaling is a different (box-like) prefilter: close, not equal. */
        double p = tu_psnr(out, ref, n);
        if (p < min_psnr)
            fail_msg("%dx%d denom %d: PSNR %.2f dB < %.1f", w, h, denom, p, min_psnr);
    }
    rf__decoder_destroy(d);
    rf__resampler_destroy(rs);
    free(ref);
    free(out);
    free(ref_rgb);
    free(jpg);
}

static void test_center_region_exact(void **state)
{
    (void)state;
    check_against_full(500, 375, TU_420, 0, RF_TRANSFORM_CENTER, 224, 0, RF_LAYOUT_NHWC, 0);
    check_against_full(375, 500, TU_420, 0, RF_TRANSFORM_CENTER, 224, 0, RF_LAYOUT_NHWC, 0);
    check_against_full(333, 251, TU_422, 1, RF_TRANSFORM_CENTER, 224, 0, RF_LAYOUT_NCHW, 0);
    check_against_full(301, 299, TU_444, 0, RF_TRANSFORM_CENTER, 128, 0, RF_LAYOUT_NHWC, 0);
    check_against_full(250, 190, TU_GRAY, 0, RF_TRANSFORM_CENTER, 224, 0, RF_LAYOUT_NHWC, 0);
    /* Picture smaller than the crop: CenterCrop's zero padding. */
    check_against_full(100, 80, TU_420, 0, RF_TRANSFORM_CENTER, 224, 0, RF_LAYOUT_NHWC, 0);
}

static void test_rrc_region_and_flip(void **state)
{
    (void)state;
    check_against_full(500, 375, TU_420, 0, RF_TRANSFORM_RANDOM_RESIZED_CROP, 224, 1,
                       RF_LAYOUT_NHWC, 0);
    check_against_full(640, 480, TU_420, 1, RF_TRANSFORM_RANDOM_RESIZED_CROP, 96, 1,
                       RF_LAYOUT_NCHW, 0);
    check_against_full(201, 333, TU_444, 0, RF_TRANSFORM_RANDOM_RESIZED_CROP, 64, 0,
                       RF_LAYOUT_NHWC, 0);
}

/* The decoder's output for o (*out) and the reference (*ref): the full
 * decode full (w x h) resampled with the same geometry g. Both malloc'd. */
static void decode_with_reference(rf_decoder *d, rf_resampler *rs, const rf_decode_opts *o,
                                  const uint8_t *jpg, size_t len, const uint8_t *full, int w,
                                  int h, const rf_geom *g, uint8_t **out, uint8_t **ref,
                                  rf_decode_times *t)
{
    size_t n = (size_t)o->size * (size_t)o->size * 3;
    *out = malloc(n);
    *ref = malloc(n);
    assert_non_null(*out);
    assert_non_null(*ref);
    assert_int_equal(
        rf__resample(rs, g, w, h, full, (size_t)w * 3, 0, 0, w, h, *ref, RF__LAYOUT_NHWC), 0);
    char err[256] = "";
    int rc = rf__decode_sample(d, jpg, len, o, *out, err, sizeof err, t);
    if (rc != 0)
        fail_msg("%dx%d: decode failed (%d): %s", w, h, rc, err);
}

/* Region decoding against a full decode over many random geometries: every
 * subsampling, progressive and restart-marker streams, arithmetic coding,
 * center and random crops at several sizes, flipped or not. Only the crop's
 * columns (widened to iMCU columns, plus a small margin) and rows are
 * decoded, so an edge effect of the upsampler or of the skip would show. */
static void test_region_exact_random(void **state)
{
    (void)state;
    uint32_t r = 12345;
    rf_decoder *d = rf__decoder_create();
    rf_resampler *rs = rf__resampler_create();
    int checked = 0;
    for (int i = 0; i < 48; i++) {
        r = r * 1103515245u + 12345u;
        tu_jpeg_opts jo = {.width = 120 + (int)(r >> 8) % 600,
                           .height = 120 + (int)(r >> 4) % 500,
                           .quality = 75 + i % 23,
                           .subsamp = i % 4,
                           .progressive = i % 5 == 1,
                           .restart_rows = i % 7 == 2 ? 1 + i % 3 : 0,
                           .arithmetic = i % 11 == 3,
                           .seed = (uint32_t)i};
        uint8_t *jpg, *full;
        size_t len;
        int w, h;
        assert_int_equal(tu_make_jpeg(&jo, &jpg, &len), 0);
        assert_int_equal(tu_decode_jpeg(jpg, len, &full, &w, &h), 0);
        for (int k = 0; k < 6; k++) {
            static const int sizes[] = {224, 128, 64, 32};
            int tr = k == 0 ? RF_TRANSFORM_CENTER : RF_TRANSFORM_RANDOM_RESIZED_CROP;
            int size = sizes[(i + k) % 4];
            rf_decode_opts o = opts(tr, size);
            o.flip = 1;
            o.epoch = k;
            o.sample = i;
            rf_geom g;
            geom_of(&o, w, h, &g);
            if (rf__geom_dct_denom(&g) != 1)
                continue; /* DCT scaling: close, not equal (test_dct_scaling_close) */
            size_t n = (size_t)size * size * 3;
            uint8_t *ref, *out;
            rf_decode_times t;
            decode_with_reference(d, rs, &o, jpg, len, full, w, h, &g, &out, &ref, &t);
            if (memcmp(out, ref, n) != 0)
                fail_msg("%dx%d subsamp %d prog %d restart %d arith %d transform %d size %d: "
                         "region decode differs from full decode (PSNR %.1f dB)",
                         w, h, jo.subsamp, jo.progressive, jo.restart_rows, jo.arithmetic, tr,
                         size, tu_psnr(out, ref, n));
            checked++;
            free(ref);
            free(out);
        }
        free(full);
        free(jpg);
    }
    assert_true(checked >= 100);
    rf__decoder_destroy(d);
    rf__resampler_destroy(rs);
}

static void test_dct_scaling_close(void **state)
{
    (void)state;
    /* 2000x1500 to 224: DCT scaling by 1/4 or so, result close to full decode. */
    check_against_full(2000, 1500, TU_420, 0, RF_TRANSFORM_CENTER, 224, 0, RF_LAYOUT_NHWC, 30);
    check_against_full(1600, 1200, TU_444, 0, RF_TRANSFORM_CENTER, 112, 0, RF_LAYOUT_NHWC, 30);
}

static void test_arithmetic_and_restart(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    size_t len;
    uint8_t *jpg = jpeg_of(96, 96, TU_420, 0, 1, 1, &len);
    uint8_t *ref;
    int w, h;
    assert_int_equal(tu_decode_jpeg(jpg, len, &ref, &w, &h), 0);
    uint8_t out[96 * 96 * 3];
    char err[256];
    rf_decode_times t;
    rf_decode_opts o = opts(RF_TRANSFORM_NONE, 96);
    assert_int_equal(rf__decode_sample(d, jpg, len, &o, out, err, sizeof err, &t), 0);
    assert_memory_equal(out, ref, sizeof out);
    free(ref);
    free(jpg);
    rf__decoder_destroy(d);
}

static int decode_err(const uint8_t *data, size_t len, rf_decode_opts *o, char *err, size_t cap)
{
    rf_decoder *d = rf__decoder_create();
    uint8_t *out = malloc((size_t)o->size * o->size * 3);
    rf_decode_times t;
    err[0] = '\0';
    int rc = rf__decode_sample(d, data, len, o, out, err, cap, &t);
    free(out);
    rf__decoder_destroy(d);
    return rc;
}

static void expect_error(const uint8_t *data, size_t len, rf_decode_opts *o, int code,
                         const char *needle)
{
    char err[512];
    int rc = decode_err(data, len, o, err, sizeof err);
    if (rc != code || !strstr(err, needle))
        fail_msg("expected %d with \"%s\", got %d \"%s\"", code, needle, rc, err);
}

static void test_bad_inputs_fail_with_reason(void **state)
{
    (void)state;
    rf_decode_opts o = opts(RF_TRANSFORM_CENTER, 64);
    char err[512];
    expect_error((const uint8_t *)"", 0, &o, RF_E_DECODE, "empty file");
    const uint8_t png[16] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
    expect_error(png, sizeof png, &o, RF_E_DECODE, "PNG");
    expect_error((const uint8_t *)"hello world, not an image", 25, &o, RF_E_DECODE, "not a JPEG");

    size_t len;
    uint8_t *jpg = jpeg_of(300, 200, TU_420, 0, 0, 0, &len);
    /* Truncated at several points: an error, never gray pixels. */
    const double cuts[] = {0.05, 0.3, 0.6, 0.9, 0.99};
    for (int i = 0; i < 5; i++) {
        size_t cut = (size_t)((double)len * cuts[i]);
        int rc = decode_err(jpg, cut, &o, err, sizeof err);
        if (rc != RF_E_DECODE)
            fail_msg("truncated at %zu/%zu: rc %d (%s)", cut, len, rc, err);
        assert_true(strlen(err) > 0);
    }
    /* Cut in its last rows: the center crop (rows 13..187 of 200, at 64 from
     * 300x200) does not reach the damage. Checking the tail finds it; not
     * checking delivers the crop, which is the full decode's. */
    {
        size_t cut = len - len / 50;
        rf_decode_opts nocheck = o;
        nocheck.check_tail = 0;
        uint8_t px[64 * 64 * 3];
        rf_decode_times t;
        rf_decoder *d = rf__decoder_create();
        assert_int_equal(rf__decode_sample(d, jpg, len, &nocheck, px, err, sizeof err, &t), 0);
        assert_int_equal(t.whole, 0); /* stopped at the crop's last row */
        assert_int_equal(rf__decode_sample(d, jpg, len, &o, px, err, sizeof err, &t), 0);
        assert_int_equal(t.whole, 1);
        assert_int_equal(rf__decode_sample(d, jpg, cut, &nocheck, px, err, sizeof err, &t), 0);
        assert_int_equal(decode_err(jpg, cut, &o, err, sizeof err), RF_E_DECODE);
        rf__decoder_destroy(d);
    }
    /* Garbage in the entropy-coded data past the headers. */
    uint8_t *bad = malloc(len);
    memcpy(bad, jpg, len);
    for (size_t i = len / 3; i < len / 3 + 64; i++)
        bad[i] = (uint8_t)(0xFF ^ (i * 37));
    bad[len / 3 + 64] = 0xFF; /* and a bogus marker */
    bad[len / 3 + 65] = 0xC8;
    int rc = decode_err(bad, len, &o, err, sizeof err);
    assert_int_not_equal(rc, 0);
    free(bad);

    /* Huge dimensions declared in the header: refused before any allocation. */
    uint8_t *huge = malloc(len);
    memcpy(huge, jpg, len);
    for (size_t i = 0; i + 9 < len; i++)
        if (huge[i] == 0xFF && (huge[i + 1] == 0xC0 || huge[i + 1] == 0xC2)) {
            huge[i + 5] = 0xEA; /* height 60000 */
            huge[i + 6] = 0x60;
            huge[i + 7] = 0xEA; /* width 60000 */
            huge[i + 8] = 0x60;
            break;
        }
    expect_error(huge, len, &o, RF_E_LIMIT, "exceeds the limit");
    free(huge);
    /* A lower configured limit. */
    rf_decode_opts small = o;
    small.max_pixels = 1000;
    expect_error(jpg, len, &small, RF_E_LIMIT, "300x200");
    free(jpg);

    /* Too many progressive scans. */
    jpg = jpeg_of(64, 64, TU_420, 1, 0, 0, &len);
    rf_decode_opts scans = o;
    scans.max_scans = 2;
    expect_error(jpg, len, &scans, RF_E_LIMIT, "scans");
    free(jpg);
}

/* Encodes a CMYK JPEG with libjpeg directly (Adobe-inverted, as Photoshop). */
static uint8_t *cmyk_jpeg(int w, int h, size_t *len)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    unsigned char *buf = NULL;
    unsigned long blen = 0;
    jpeg_mem_dest(&c, &buf, &blen);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 4;
    c.in_color_space = JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 95, TRUE);
    jpeg_start_compress(&c, TRUE);
    uint8_t *row = malloc((size_t)w * 4);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            /* inverted ink: 255 = no ink. Red: no cyan ink -> 255, full magenta -> 0... */
            row[4 * x + 0] = 255; /* C */
            row[4 * x + 1] = 0;   /* M */
            row[4 * x + 2] = 0;   /* Y */
            row[4 * x + 3] = 255; /* K: none */
        }
        JSAMPROW rp = row;
        jpeg_write_scanlines(&c, &rp, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    *len = blen;
    return buf;
}

/* Samplings beyond 2x2 are decoded whole (libjpeg-turbo 2.1 crops them
 * inexactly, and skipping can loop forever on progressive h2v4 with DCT
 * scaling): the same bytes as a full decode, DCT-scaled ones close to it
 * (27 dB: DCT scaling of 4x-subsampled chroma is coarser than of 2x2), and
 * no hang (the alarm turns one into a failure). */
/* Copy of a JPEG without its segments of one marker type (DQT 0xDB, DHT
 * 0xC4) before the first scan; *out_len is the new size. */
static uint8_t *strip_marker(const uint8_t *jpg, size_t len, int marker, size_t *out_len)
{
    uint8_t *out = malloc(len);
    size_t i = 2, n = 2;
    memcpy(out, jpg, 2);
    while (i + 4 <= len) {
        int m = jpg[i + 1];
        size_t seg = 2 + ((size_t)jpg[i + 2] << 8 | jpg[i + 3]);
        if (m == 0xDA)
            break;
        if (m != marker) {
            memcpy(out + n, jpg + i, seg);
            n += seg;
        }
        i += seg;
    }
    memcpy(out + n, jpg + i, len - i);
    *out_len = n + len - i;
    return out;
}

/* A picture that lacks its own tables decodes as on a new decoder (what PIL
 * does), whatever the same worker decoded before: no table of an earlier
 * picture leaks into it. */
static void test_no_tables_carried_between_pictures(void **state)
{
    (void)state;
    rf_decode_opts o = opts(RF_TRANSFORM_CENTER, 48);
    size_t a_len, b_len, x_len, nq_len, nh_len;
    tu_jpeg_opts to = {.width = 96, .height = 80, .quality = 20, .subsamp = TU_420, .seed = 3};
    uint8_t *a;
    assert_int_equal(tu_make_jpeg(&to, &a, &a_len), 0); /* other quantization tables */
    to.quality = 95;
    to.progressive = 1; /* progressive: optimized Huffman tables, not the standard ones */
    uint8_t *b;
    assert_int_equal(tu_make_jpeg(&to, &b, &b_len), 0);
    to.progressive = 0;
    to.seed = 4;
    uint8_t *x;
    assert_int_equal(tu_make_jpeg(&to, &x, &x_len), 0); /* standard Huffman tables */
    uint8_t *no_dqt = strip_marker(x, x_len, 0xDB, &nq_len);
    uint8_t *no_dht = strip_marker(x, x_len, 0xC4, &nh_len);
    assert_true(nq_len < x_len && nh_len < x_len);

    size_t out_size = (size_t)o.size * o.size * 3;
    uint8_t *fresh = malloc(out_size), *after = malloc(out_size);
    char err[512];
    rf_decode_times t;
    /* Without DHT, a new decoder uses the standard tables: same pixels as x. */
    assert_int_equal(decode_err(no_dht, nh_len, &o, err, sizeof err), 0);
    rf_decoder *d = rf__decoder_create();
    assert_int_equal(rf__decode_sample(d, x, x_len, &o, fresh, err, sizeof err, &t), 0);
    assert_int_equal(rf__decode_sample(d, b, b_len, &o, after, err, sizeof err, &t), 0);
    assert_int_equal(rf__decode_sample(d, no_dht, nh_len, &o, after, err, sizeof err, &t), 0);
    assert_memory_equal(fresh, after, out_size);
    /* Without DQT there is nothing to decode with, before or after another picture. */
    expect_error(no_dqt, nq_len, &o, RF_E_DECODE, "Quantization table 0x00 was not defined");
    assert_int_equal(rf__decode_sample(d, a, a_len, &o, after, err, sizeof err, &t), 0);
    err[0] = '\0';
    assert_int_equal(rf__decode_sample(d, no_dqt, nq_len, &o, after, err, sizeof err, &t),
                     RF_E_DECODE);
    assert_non_null(strstr(err, "Quantization table 0x00 was not defined"));
    rf__decoder_destroy(d);
    free(fresh);
    free(after);
    free(no_dqt);
    free(no_dht);
    free(x);
    free(b);
    free(a);
}

static void test_unusual_sampling_decoded_whole(void **state)
{
    (void)state;
    static const int f[][2] = {{2, 4}, {4, 2}, {1, 4}, {4, 1}, {3, 2}};
    rf_decoder *d = rf__decoder_create();
    rf_resampler *rs = rf__resampler_create();
    alarm(60);
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 8; k++) {
            int w = 434 - 37 * k, h = 568 - 23 * i, size = k < 4 ? 64 : 224;
            size_t len;
            tu_jpeg_opts jo = {.width = w,
                               .height = h,
                               .quality = 90,
                               .subsamp = TU_420,
                               .progressive = k % 2,
                               .restart_rows = k % 3 ? 3 : 0,
                               .seed = (uint32_t)(w * 7 + h),
                               .hs = f[i][0],
                               .vs = f[i][1]};
            uint8_t *jpg;
            assert_int_equal(tu_make_jpeg(&jo, &jpg, &len), 0);
            uint8_t *full;
            assert_int_equal(tu_decode_jpeg(jpg, len, &full, NULL, NULL), 0);
            rf_decode_opts o =
                opts(k % 4 == 0 ? RF_TRANSFORM_CENTER : RF_TRANSFORM_RANDOM_RESIZED_CROP, size);
            o.flip = 1;
            o.sample = i * 8 + k;
            rf_geom g;
            geom_of(&o, w, h, &g);
            size_t n = (size_t)size * size * 3;
            uint8_t *ref, *out;
            rf_decode_times t;
            decode_with_reference(d, rs, &o, jpg, len, full, w, h, &g, &out, &ref, &t);
            assert_int_equal(t.whole, 1);
            if (t.denom == 1)
                assert_memory_equal(out, ref, n);
            else if (tu_psnr(out, ref, n) < 27) /* 4x-subsampled chroma: coarser than 2x2 */
                fail_msg("h%dv%d %dx%d denom %d: PSNR %.1f dB", f[i][0], f[i][1], w, h, t.denom,
                         tu_psnr(out, ref, n));
            free(ref);
            free(out);
            free(full);
            free(jpg);
        }
    alarm(0);
    rf__resampler_destroy(rs);
    rf__decoder_destroy(d);
}

/* Arithmetic coding fills zeros where its data ends early, silently: the
 * rows below a crop are read one by one and the marker the decoder met is
 * checked. A file cut at three quarters of its data (and closed with EOI)
 * fails when its tail is checked, for every subsampling and with DCT
 * scaling, and delivers its crop when not; intact files pass both ways. */
static void test_arithmetic_cut_below_the_crop(void **state)
{
    (void)state;
    static const int subsamp[] = {TU_444, TU_422, TU_420, TU_GRAY};
    for (int i = 0; i < 4; i++)
        for (int scaled = 0; scaled < 2; scaled++) {
            size_t len;
            uint8_t *jpg = jpeg_of(96, 400, subsamp[i], 0, 0, 1, &len);
            size_t sos = 0;
            for (size_t k = 2; k + 1 < len && !sos; k++)
                if (jpg[k] == 0xFF && jpg[k + 1] == 0xDA)
                    sos = k;
            assert_true(sos > 0);
            size_t cut = sos + (len - sos) * 3 / 4;
            uint8_t *bad = malloc(cut + 2);
            memcpy(bad, jpg, cut);
            bad[cut] = 0xFF;
            bad[cut + 1] = 0xD9;
            /* center at 64 reads rows 158..242 of 400; at 16 (DCT 1/4) the same */
            rf_decode_opts o = opts(RF_TRANSFORM_CENTER, scaled ? 16 : 64);
            rf_decode_opts nocheck = o;
            nocheck.check_tail = 0;
            char err[512];
            assert_int_equal(decode_err(jpg, len, &o, err, sizeof err), 0);
            assert_int_equal(decode_err(jpg, len, &nocheck, err, sizeof err), 0);
            assert_int_equal(decode_err(bad, cut + 2, &nocheck, err, sizeof err), 0);
            int rc = decode_err(bad, cut + 2, &o, err, sizeof err);
            if (rc != RF_E_DECODE || !strstr(err, "ends early"))
                fail_msg("subsamp %d scaled %d: cut at 3/4 gave %d \"%s\"", subsamp[i], scaled,
                         rc, err);
            free(bad);
            free(jpg);
        }
}

static void test_cmyk_converts(void **state)
{
    (void)state;
    size_t len;
    uint8_t *jpg = cmyk_jpeg(32, 32, &len);
    rf_decoder *d = rf__decoder_create();
    uint8_t out[32 * 32 * 3];
    char err[256];
    rf_decode_times t;
    rf_decode_opts o = opts(RF_TRANSFORM_NONE, 32);
    int rc = rf__decode_sample(d, jpg, len, &o, out, err, sizeof err, &t);
    if (rc != 0)
        fail_msg("CMYK decode failed: %s", err);
    /* No Adobe marker from plain libjpeg: values are taken as plain ink, so
     * C=255 (full cyan) M=0 Y=0 K=255 (full black) -> black; check it is a
     * consistent, non-gray solid colour. */
    for (int i = 1; i < 32 * 32; i++)
        assert_memory_equal(out + 3 * i, out, 3);
    free(jpg);
    rf__decoder_destroy(d);
}

/* Same sample key -> same pixels; another sample key -> another crop. */
static void test_rrc_deterministic(void **state)
{
    (void)state;
    size_t len;
    uint8_t *jpg = jpeg_of(400, 300, TU_420, 0, 0, 0, &len);
    rf_decoder *d1 = rf__decoder_create(), *d2 = rf__decoder_create();
    uint8_t *a = malloc(64 * 64 * 3), *b = malloc(64 * 64 * 3);
    char err[256];
    rf_decode_times t;
    rf_decode_opts o = opts(RF_TRANSFORM_RANDOM_RESIZED_CROP, 64);
    o.flip = 1;
    assert_int_equal(rf__decode_sample(d1, jpg, len, &o, a, err, sizeof err, &t), 0);
    assert_int_equal(rf__decode_sample(d2, jpg, len, &o, b, err, sizeof err, &t), 0);
    assert_memory_equal(a, b, 64 * 64 * 3);
    int differ = 0;
    for (int s = 1; s < 6 && !differ; s++) {
        o.sample = s;
        assert_int_equal(rf__decode_sample(d2, jpg, len, &o, b, err, sizeof err, &t), 0);
        differ = memcmp(a, b, 64 * 64 * 3) != 0;
    }
    assert_true(differ);
    free(a);
    free(b);
    free(jpg);
    rf__decoder_destroy(d1);
    rf__decoder_destroy(d2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none_equals_full_decode),
        cmocka_unit_test(test_center_region_exact),
        cmocka_unit_test(test_rrc_region_and_flip),
        cmocka_unit_test(test_region_exact_random),
        cmocka_unit_test(test_dct_scaling_close),
        cmocka_unit_test(test_arithmetic_and_restart),
        cmocka_unit_test(test_arithmetic_cut_below_the_crop),
        cmocka_unit_test(test_unusual_sampling_decoded_whole),
        cmocka_unit_test(test_bad_inputs_fail_with_reason),
        cmocka_unit_test(test_no_tables_carried_between_pictures),
        cmocka_unit_test(test_cmyk_converts),
        cmocka_unit_test(test_rrc_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
