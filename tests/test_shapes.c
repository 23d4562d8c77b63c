/*
 * test_shapes.c - the output's shapes below the loader: rectangular center
 * and random_resized_crop geometry, Resize((H, W)), the letterbox's and
 * native sizes' geometry and frames (resampled into a frame as into a
 * picture of their own, the padding filled), the header scan of every
 * format (sizes equal to the decoders', JPEG segments skipped, damage
 * refused), the shape options, and the automatic buckets and assignment.
 */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bucket.h"
#include "decode.h"
#include "header_scan.h"
#include "letterbox.h"
#include "options.h"
#include "resample.h"
#include "ringfeed.h"
#include "testutil.h"
#include "transform.h"

#ifdef RF_HAVE_SPNG
#include <spng.h>
#endif
#ifdef RF_HAVE_WEBP
#include "webpgen.h"
#endif

/* ---- geometry ------------------------------------------------------------- */

static void test_center_rectangle(void **state)
{
    (void)state;
    rf_geom g;
    /* 224 x 320: Resize(round(320 / 0.875) = 366) + CenterCrop((224, 320)) */
    rf_resize_to to = rf__resize_default(224, 320);
    assert_int_equal(to.side, 366);
    rf__geom_center_to(500, 375, 224, 320, &to, &g); /* landscape: h 366, w int(366*500/375) */
    assert_int_equal(g.out_h, 366);
    assert_int_equal(g.out_w, 488);
    assert_int_equal(g.crop_w, 320);
    assert_int_equal(g.crop_h, 224);
    assert_int_equal(g.crop_x, 84);                  /* int(round((488 - 320) / 2.0)) */
    assert_int_equal(g.crop_y, 71);                  /* round(71.0) */
    rf__geom_center_to(375, 500, 224, 320, &to, &g); /* portrait */
    assert_int_equal(g.out_w, 366);
    assert_int_equal(g.out_h, 488);
    assert_int_equal(g.crop_x, 23);
    assert_int_equal(g.crop_y, 132);
    /* Resize((h, w)) exactly, then a crop larger than it on one side: padded */
    rf_resize_to pair = {0, 200, 300};
    rf__geom_center_to(640, 480, 224, 320, &pair, &g);
    assert_int_equal(g.out_h, 200);
    assert_int_equal(g.out_w, 300);
    assert_int_equal(g.crop_y, -12); /* (224 - 200) // 2 before */
    assert_int_equal(g.crop_x, -10);
    /* the square case is what it was */
    rf_geom sq;
    rf__geom_center(500, 375, 224, &sq);
    rf_resize_to def = rf__resize_default(224, 224);
    rf__geom_center_to(500, 375, 224, 224, &def, &g);
    assert_memory_equal(&g, &sq, sizeof g);
    assert_int_equal(def.side, 256);
}

static void test_rrc_rectangle_draws_as_square(void **state)
{
    (void)state;
    /* torchvision's get_params does not look at the output size: the same
     * boxes for (H, W) as for S, only resized to another shape */
    for (int k = 0; k < 200; k++) {
        rf_rng a = rf__rng_make(3, 1, (uint64_t)k), b = rf__rng_make(3, 1, (uint64_t)k);
        rf_geom ga, gb;
        rf__geom_rrc_range(640, 427, 224, &rf__rrc_default, &a, &ga);
        rf__geom_rrc_to(640, 427, 384, 640, &rf__rrc_default, &b, &gb);
        assert_true(ga.x0 == gb.x0 && ga.y0 == gb.y0 && ga.x1 == gb.x1 && ga.y1 == gb.y1);
        assert_int_equal(gb.out_h, 384);
        assert_int_equal(gb.out_w, 640);
        assert_int_equal(gb.crop_h, 384);
        assert_int_equal(gb.crop_w, 640);
    }
}

/* The letterbox of a w x h picture into 640 x 640 (and a rectangle). */
static void test_letterbox_sizes(void **state)
{
    (void)state;
    static const struct {
        int w, h, oh, ow, fh, fw, top, left;
        float scale;
    } t[] = {
        {500, 375, 640, 640, 480, 640, 80, 0, 1.28f},        /* landscape */
        {375, 500, 640, 640, 640, 480, 0, 80, 1.28f},        /* portrait */
        {300, 300, 640, 640, 640, 640, 0, 0, 640.f / 300.f}, /* square, enlarged */
        {1000, 10, 640, 640, 6, 640, 317, 0, 0.64f},         /* a strip */
        {7, 3000, 640, 640, 640, 1, 0, 319, 640.f / 3000.f}, /* round(1.49) = 1 */
        {640, 480, 384, 640, 384, 512, 0, 64, 0.8f},         /* into a rectangle */
        {1, 1, 5, 9, 5, 5, 0, 2, 5.f},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        rf_geom g;
        rf_frame fr;
        rf_fit fit;
        rf__geom_letterbox(t[i].w, t[i].h, t[i].oh, t[i].ow, 0, &g, &fr, &fit);
        assert_int_equal(fit.h, t[i].fh);
        assert_int_equal(fit.w, t[i].fw);
        assert_true(fit.scale == t[i].scale);
        assert_int_equal(fr.w, t[i].ow);
        assert_int_equal(fr.h, t[i].oh);
        assert_int_equal(fr.y, t[i].top);
        assert_int_equal(fr.x, t[i].left);
        assert_true(g.x0 == 0 && g.y0 == 0 && g.x1 == t[i].w && g.y1 == t[i].h);
        assert_int_equal(g.out_w, fit.w);
        assert_int_equal(g.crop_h, fit.h);
        rf__geom_letterbox(t[i].w, t[i].h, t[i].oh, t[i].ow, 1, &g, &fr, &fit);
        assert_int_equal(fr.x, 0);
        assert_int_equal(fr.y, 0);
    }
}

static void test_native_and_cover(void **state)
{
    (void)state;
    rf_geom g;
    rf_frame fr;
    rf_fit fit;
    rf__geom_native(300, 200, 512, &g, &fr, &fit); /* kept: no resampling */
    assert_int_equal(fit.w, 300);
    assert_int_equal(fit.h, 200);
    assert_true(fit.scale == 1.0f);
    assert_int_equal(fr.w, 512);
    assert_int_equal(fr.x, 0);
    assert_int_equal(g.out_w, 300);
    rf__geom_native(1000, 750, 512, &g, &fr, &fit); /* shrunk: 512 x 384 */
    assert_int_equal(fit.w, 512);
    assert_int_equal(fit.h, 384);
    rf__geom_native(5, 2000, 512, &g, &fr, &fit);
    assert_int_equal(fit.h, 512);
    assert_int_equal(fit.w, 1);
    /* cover: the bucket covered, then centre-cropped */
    rf__geom_cover(500, 375, 192, 256, &g); /* 4:3 into 3:4... 192 x 256 is wider */
    assert_int_equal(g.out_h, 192);
    assert_int_equal(g.out_w, 256);
    rf__geom_cover(500, 375, 256, 192, &g); /* landscape into portrait: height limits */
    assert_int_equal(g.out_h, 256);
    assert_int_equal(g.out_w, 341); /* round(500 * 256 / 375 = 341.33) */
    assert_int_equal(g.crop_x, 74); /* round(74.5) = 74, half to even */
    assert_int_equal(g.crop_w, 192);
    rf__geom_resize(500, 375, 100, 70, &g);
    assert_int_equal(g.out_h, 100);
    assert_int_equal(g.out_w, 70);
    assert_int_equal(g.crop_x, 0);
}

/* Resampled into a frame, a window has the bytes it has on its own, flipped
 * within its place; fill touches nothing but the rest. */
static void test_frame_resample_and_fill(void **state)
{
    (void)state;
    int w = 97, h = 61;
    uint8_t *pic = tu_make_rgb(w, h, 5);
    rf_resampler *rs = rf__resampler_create();
    assert_non_null(rs);
    const uint8_t fill[3] = {114, 7, 250};
    for (int layout = 0; layout < 2; layout++)
        for (int flip = 0; flip < 2; flip++) {
            rf_geom g;
            rf_frame fr;
            rf_fit fit;
            rf__geom_letterbox(w, h, 50, 40, 0, &g, &fr, &fit);
            g.flip = flip;
            size_t fb = (size_t)fr.w * fr.h * 3, wb = (size_t)g.crop_w * g.crop_h * 3;
            uint8_t *alone = malloc(wb), *framed = malloc(fb);
            memset(framed, 0xAA, fb);
            assert_int_equal(
                rf__resample(rs, &g, w, h, pic, (size_t)w * 3, 0, 0, w, h, alone, layout), 0);
            assert_int_equal(rf__resample_into(rs, &g, &fr, w, h, pic, (size_t)w * 3, 0, 0, w, h,
                                               framed, layout),
                             0);
            rf__frame_fill(framed, layout, &g, &fr, fill);
            for (int c = 0; c < 3; c++)
                for (int y = 0; y < fr.h; y++)
                    for (int x = 0; x < fr.w; x++) {
                        int in =
                            y >= fr.y && y < fr.y + g.crop_h && x >= fr.x && x < fr.x + g.crop_w;
                        size_t at = layout ? (size_t)c * fr.w * fr.h + (size_t)y * fr.w + x
                                           : ((size_t)y * fr.w + x) * 3 + c;
                        uint8_t want = fill[c];
                        if (in) {
                            int wy = y - fr.y, wx = x - fr.x;
                            want = layout ? alone[(size_t)c * g.crop_w * g.crop_h +
                                                  (size_t)wy * g.crop_w + wx]
                                          : alone[((size_t)wy * g.crop_w + wx) * 3 + c];
                        }
                        if (framed[at] != want)
                            fail_msg("layout %d flip %d: (%d, %d, %d) is %d, not %d", layout, flip,
                                     x, y, c, framed[at], want);
                    }
            free(alone);
            free(framed);
        }
    rf__resampler_destroy(rs);
    free(pic);
}

/* ---- header scan ----------------------------------------------------------- */

/* The size a decoder reports for a file (transform resize: any size). */
static void decoder_size(const uint8_t *f, size_t n, int *w, int *h)
{
    rf_decoder *d = rf__decoder_create();
    rf_decode_opts o = {
        .transform = RF_TRANSFORM_RESIZE, .size = 8, .max_pixels = 1 << 30, .max_scans = 1000};
    rf_geom g;
    char err[200];
    int rc = rf__decode_geometry(d, f, n, &o, &g, NULL, w, h, err, sizeof err);
    if (rc)
        fail_msg("decoder: %s", err);
    rf__decoder_destroy(d);
}

/* The scan as the loader runs it: first bytes, then reads where it says
 * (appending, or anew from a JPEG marker), each read at most `chunk`. */
static int scan(const uint8_t *f, size_t n, size_t chunk, uint32_t *w, uint32_t *h, int *rounds)
{
    uint8_t *acc = malloc(n + 1);
    size_t len = chunk < n ? chunk : n;
    uint64_t base = 0;
    memcpy(acc, f, len);
    for (*rounds = 1;; (*rounds)++) {
        uint64_t next = 0;
        const char *why;
        int rc = rf__header_dims(acc, len, base, n, w, h, &next, &why);
        if (rc != 0 || *rounds >= RF__HEADER_ROUNDS) {
            free(acc);
            return rc;
        }
        assert_true(next < n);
        size_t take = n - next < chunk ? n - next : chunk;
        if (next == base + len) { /* appended */
            memcpy(acc + len, f + next, take);
            len += take;
        } else {
            assert_true(next > base + len || next >= base);
            base = next;
            memcpy(acc, f + next, take);
            len = take;
        }
    }
}

static void expect_scan(const uint8_t *f, size_t n, const char *what)
{
    int dw, dh, rounds;
    uint32_t w, h;
    decoder_size(f, n, &dw, &dh);
    for (size_t chunk = 16; chunk <= 1024; chunk *= 8) {
        int rc = scan(f, n, chunk, &w, &h, &rounds);
        if (rc != 1 || (int)w != dw || (int)h != dh)
            fail_msg("%s (chunk %zu): rc %d, %ux%u, the decoder says %dx%d", what, chunk, rc, w, h,
                     dw, dh);
    }
}

/* A JPEG with an APP1 segment of n bytes after SOI (an EXIF block). */
static uint8_t *jpeg_with_app(int w, int h, size_t app, size_t *len)
{
    tu_jpeg_opts o = {.width = w, .height = h, .quality = 80, .subsamp = TU_420, .seed = 9};
    uint8_t *j;
    size_t n;
    assert_int_equal(tu_make_jpeg(&o, &j, &n), 0);
    uint8_t *out = malloc(n + app + 4);
    memcpy(out, j, 2);
    out[2] = 0xFF;
    out[3] = 0xE1;
    out[4] = (uint8_t)((app + 2) >> 8);
    out[5] = (uint8_t)(app + 2);
    memset(out + 6, 'x', app);
    memcpy(out + 6 + app, j + 2, n - 2);
    *len = n + app + 4;
    free(j);
    return out;
}

static void put_le(uint8_t *p, uint32_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A 24-bit BMP (bottom-up, or top-down with a negative height), or with
 * the OS/2 core header. */
static uint8_t *bmp_of(int w, int h, int topdown, int core, size_t *len)
{
    size_t row = ((size_t)w * 3 + 3) & ~(size_t)3, hdr = core ? 12 : 40;
    size_t n = 14 + hdr + row * (size_t)h;
    uint8_t *b = calloc(1, n);
    b[0] = 'B';
    b[1] = 'M';
    put_le(b + 2, (uint32_t)n, 4);
    put_le(b + 10, (uint32_t)(14 + hdr), 4);
    put_le(b + 14, (uint32_t)hdr, 4);
    if (core) {
        put_le(b + 18, (uint32_t)w, 2);
        put_le(b + 20, (uint32_t)h, 2);
        put_le(b + 22, 1, 2);
        put_le(b + 24, 24, 2);
    } else {
        put_le(b + 18, (uint32_t)w, 4);
        put_le(b + 22, (uint32_t)(topdown ? -h : h), 4);
        put_le(b + 26, 1, 2);
        put_le(b + 28, 24, 2);
        put_le(b + 34, (uint32_t)(row * (size_t)h), 4);
    }
    for (size_t i = 14 + hdr; i < n; i++)
        b[i] = (uint8_t)(i * 7);
    *len = n;
    return b;
}

static void test_header_scan_formats(void **state)
{
    (void)state;
    size_t n;
    uint8_t *f;
    /* JPEG: plain, then with a 40 KB segment before its frame header */
    f = jpeg_with_app(123, 45, 0, &n);
    expect_scan(f, n, "jpeg");
    free(f);
    f = jpeg_with_app(61, 200, 40000, &n);
    expect_scan(f, n, "jpeg with a 40 KB APP1");
    int rounds;
    uint32_t w, h;
    assert_int_equal(scan(f, n, 1024, &w, &h, &rounds), 1);
    assert_int_equal(rounds, 2); /* the segment skipped, not read */
    free(f);
    /* BMP: bottom-up, top-down, OS/2 */
    for (int k = 0; k < 3; k++) {
        f = bmp_of(33, 17, k == 1, k == 2, &n);
        expect_scan(f, n, "bmp");
        free(f);
    }
    /* PNM: P6 and P5 with comments between the tokens, P3 */
    static const char *const pnm[] = {"P6\n# made by a test\n 41 # width\n23\n255\n",
                                      "P5 17\n#c\n9 255\n", "P3\n2 3\n255\n"};
    for (int k = 0; k < 3; k++) {
        size_t hl = strlen(pnm[k]), px = k == 0 ? 41 * 23 * 3 : k == 1 ? 17 * 9 : 0;
        n = hl + (k == 2 ? 6 * 3 * 4 : px);
        f = malloc(n);
        memcpy(f, pnm[k], hl);
        for (size_t i = hl; i < n; i++)
            f[i] = k == 2 ? (uint8_t)((i - hl) % 4 == 3 ? ' ' : '1') : (uint8_t)i;
        expect_scan(f, n, pnm[k]);
        free(f);
    }
#ifdef RF_HAVE_SPNG
    {
        spng_ctx *e = spng_ctx_new(SPNG_CTX_ENCODER);
        spng_set_option(e, SPNG_ENCODE_TO_BUFFER, 1);
        struct spng_ihdr ihdr = {77, 31, 8, 2, 0, 0, 0};
        spng_set_ihdr(e, &ihdr);
        uint8_t *px = tu_make_rgb(77, 31, 4);
        assert_int_equal(spng_encode_image(e, px, 77 * 31 * 3, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE),
                         0);
        int err = 0;
        f = spng_get_png_buffer(e, &n, &err);
        expect_scan(f, n, "png");
        free(f);
        free(px);
        spng_ctx_free(e);
    }
#endif
#ifdef RF_HAVE_WEBP
    for (int k = 0; k < 4; k++) {
        f = wg_encode(k, 53 + k, 29, 3, 80, &n);
        assert_non_null(f);
        expect_scan(f, n, "webp");
        free(f);
    }
#endif
    /* a raw .npy array (the packer's raw members) */
    const char npy[] = "\x93NUMPY\x01\x00\x46\x00{'descr': '|u1', 'fortran_order': False, "
                       "'shape': (480, 640, 3), }        \n";
    assert_int_equal(rf__header_dims((const uint8_t *)npy, sizeof npy - 1, 0, 1 << 20, &w, &h,
                                     &(uint64_t){0}, &(const char *){NULL}),
                     1);
    assert_int_equal(w, 640);
    assert_int_equal(h, 480);
}

static void test_header_scan_refuses_damage(void **state)
{
    (void)state;
    uint32_t w = 0, h = 0;
    uint64_t next;
    const char *why;
    /* bytes of no format; a JPEG that ends in a segment; one whose segment
     * length runs past its end; a JPEG scan before any frame header */
    const uint8_t junk[] = "hello, world: not a picture at all";
    assert_int_equal(rf__header_dims(junk, sizeof junk, 0, sizeof junk, &w, &h, &next, &why), -1);
    assert_non_null(strstr(why, "not a picture"));
    const uint8_t seg[] = {0xFF, 0xD8, 0xFF, 0xE0, 0x40, 0x00, 1, 2, 3};
    assert_int_equal(rf__header_dims(seg, sizeof seg, 0, sizeof seg, &w, &h, &next, &why), -1);
    assert_non_null(strstr(why, "ends inside a segment"));
    const uint8_t sos[] = {0xFF, 0xD8, 0xFF, 0xDA, 0, 8, 1, 2, 3, 4, 5, 6, 0xFF, 0xD9};
    assert_int_equal(rf__header_dims(sos, sizeof sos, 0, sizeof sos, &w, &h, &next, &why), -1);
    const uint8_t zero[] = {0xFF, 0xD8, 0xFF, 0xC0, 0, 11, 8, 0, 0, 0, 5, 1, 1, 0x11, 0};
    assert_int_equal(rf__header_dims(zero, sizeof zero, 0, sizeof zero, &w, &h, &next, &why), -1);
    /* every prefix of a real JPEG: more bytes asked for within the file, or
     * a refusal; never a size made up */
    size_t n;
    uint8_t *f = jpeg_with_app(40, 30, 300, &n);
    size_t sof = tu_jpeg_sof_offset(f, n);
    for (size_t cut = 0; cut < sof + 8; cut++) {
        int rc = rf__header_dims(f, cut, 0, cut, &w, &h, &next, &why);
        if (cut >= sof + 5) /* the frame size is there */
            assert_true(rc == 1 && w == 40 && h == 30);
        else
            assert_true(rc == -1 || (rc == 0 && next < cut));
    }
    free(f);
    /* BMP and PNG fields of 0 or negative */
    uint8_t *b = bmp_of(5, 5, 0, 0, &n);
    put_le(b + 18, 0xFFFFFFF0u, 4);
    assert_int_equal(rf__header_dims(b, n, 0, n, &w, &h, &next, &why), -1);
    free(b);
    const uint8_t png[] = "\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\0\0\0\0\x05\x08\x02\0\0\0";
    assert_int_equal(rf__header_dims(png, sizeof png - 1, 0, 1000, &w, &h, &next, &why), -1);
}

/* ---- options ----------------------------------------------------------------- */

static int resolve(const int64_t (*kv)[2], size_t n, rf_config *c, char *err, size_t cap)
{
    rf_options o;
    rf__options_defaults(&o);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(rf__option_check((int)kv[i][0], kv[i][1], err, cap), RF_OK);
        o.v[kv[i][0]] = kv[i][1];
    }
    return rf__options_resolve(&o, c, err, cap);
}

#define RESOLVE(c, err, ...)                                                                       \
    resolve((const int64_t[][2]){__VA_ARGS__},                                                     \
            sizeof((const int64_t[][2]){__VA_ARGS__}) / sizeof(int64_t[2]), (c), (err),            \
            sizeof(err))

static void test_shape_options(void **state)
{
    (void)state;
    rf_config c;
    char err[300];
    assert_int_equal(RESOLVE(&c, err, {RF_P_IMAGE_HEIGHT, 224}, {RF_P_IMAGE_WIDTH, 320}), RF_OK);
    assert_int_equal(c.out_h, 224);
    assert_int_equal(c.out_w, 320);
    assert_int_equal(c.resize.side, 366);
    assert_int_equal(c.sample_bytes, 224 * 320 * 3);
    assert_int_equal(RESOLVE(&c, err, {RF_P_RESIZE_HEIGHT, 400}, {RF_P_RESIZE_WIDTH, 500}), RF_OK);
    assert_int_equal(c.resize.h, 400);
    assert_int_equal(c.resize.side, 0);
    assert_int_equal(RESOLVE(&c, err, {RF_P_RESIZE_HEIGHT, 400}), RF_E_INVALID);
    assert_int_equal(RESOLVE(&c, err, {RF_P_RESIZE_SIZE, 300}, {RF_P_RESIZE_WIDTH, 9}),
                     RF_E_INVALID);
    assert_int_equal(
        RESOLVE(&c, err, {RF_P_TRANSFORM, RF_TRANSFORM_RESIZE}, {RF_P_RESIZE_SIZE, 300}),
        RF_E_INVALID);
    assert_non_null(strstr(err, "resize_size"));
    assert_int_equal(RESOLVE(&c, err, {RF_P_FILL, 0x727272}), RF_E_INVALID);
    assert_int_equal(RESOLVE(&c, err, {RF_P_ALIGN, RF_ALIGN_TOP_LEFT}), RF_E_INVALID);
    assert_int_equal(RESOLVE(&c, err, {RF_P_TRANSFORM, RF_TRANSFORM_LETTERBOX},
                             {RF_P_ALIGN, RF_ALIGN_TOP_LEFT}, {RF_P_FILL, 0x010203}),
                     RF_OK);
    assert_true(c.framed && c.top_left && c.fill[0] == 1 && c.fill[1] == 2 && c.fill[2] == 3);
    assert_int_equal(RESOLVE(&c, err, {RF_P_MAX_SIDE, 512}), RF_E_INVALID); /* not none */
    assert_int_equal(RESOLVE(&c, err, {RF_P_TRANSFORM, RF_TRANSFORM_NONE}, {RF_P_MAX_SIDE, 512},
                             {RF_P_DTYPE, RF_DTYPE_FLOAT16}),
                     RF_OK);
    assert_int_equal(c.sample_bytes, 512 * 512 * 3 * 2);
    assert_int_equal(RESOLVE(&c, err, {RF_P_TRANSFORM, RF_TRANSFORM_NONE}, {RF_P_BUCKETS, 3}),
                     RF_E_INVALID);
    assert_int_equal(RESOLVE(&c, err, {RF_P_BUCKETS, 3}, {RF_P_SHUFFLE_BLOCK, 2}), RF_E_INVALID);
    assert_int_equal(RESOLVE(&c, err, {RF_P_BUCKETS, 3}, {RF_P_RESIZE_SIZE, 300}), RF_E_INVALID);
    /* the list's largest bucket sizes the slots */
    rf_options o;
    rf__options_defaults(&o);
    const int32_t hw[] = {256, 192, 160, 320, 224, 224};
    assert_int_equal(rf__option_set_buckets(&o, hw, 3, err, sizeof err), RF_OK);
    assert_int_equal(rf__options_resolve(&o, &c, err, sizeof err), RF_OK);
    assert_true(c.bucketed);
    assert_int_equal(c.sample_bytes, 160 * 320 * 3);
    const int32_t twice[] = {8, 8, 8, 8};
    assert_int_equal(rf__option_set_buckets(&o, twice, 2, err, sizeof err), RF_E_INVALID);
    const int32_t big[] = {8, 20000};
    assert_int_equal(rf__option_set_buckets(&o, big, 1, err, sizeof err), RF_E_INVALID);
    /* RF_P_IMAGE_SIZE sets both sides (rf_loader_set_param) */
    rf_loader *l = rf_loader_create("x");
    int64_t v;
    assert_int_equal(rf_loader_set_param(l, RF_P_IMAGE_SIZE, 96), RF_OK);
    assert_int_equal(rf_loader_get_param(l, RF_P_IMAGE_HEIGHT, &v), RF_OK);
    assert_int_equal(v, 96);
    assert_int_equal(rf_loader_get_param(l, RF_P_IMAGE_WIDTH, &v), RF_OK);
    assert_int_equal(v, 96);
    rf_loader_destroy(l);
}

/* ---- buckets ------------------------------------------------------------------ */

static void test_buckets_auto_and_assign(void **state)
{
    (void)state;
    /* 60 landscape 4:3, 30 portrait 3:4, 10 square, 2 unknown */
    enum { N = 102 };
    uint32_t dims[2 * N];
    for (int i = 0; i < N; i++) {
        uint32_t w = i < 60 ? 400 : i < 90 ? 300 : i < 100 ? 350 : 0;
        uint32_t h = i < 60 ? 300 : i < 90 ? 400 : i < 100 ? 350 : 0;
        dims[2 * i] = w + (uint32_t)(i % 3); /* a little noise */
        dims[2 * i + 1] = h ? h : 0;
        if (!h)
            dims[2 * i] = 0;
    }
    int32_t hw[RF__BUCKETS_MAX][2];
    int n = rf__buckets_auto(dims, N, 4, 224, 224, 8, hw);
    /* the quantiles at 1/8, 3/8, 5/8, 7/8 of the 100 known ratios (30
     * portrait, 10 square, 60 landscape): portrait, square, landscape twice
     * (merged) */
    assert_int_equal(n, 3);
    assert_true(abs(hw[1][0] - hw[1][1]) <= 8); /* about square (the noise) */
    for (int b = 0; b < n; b++) {
        assert_int_equal(hw[b][0] % 8, 0);
        assert_int_equal(hw[b][1] % 8, 0);
        assert_true(hw[b][0] * hw[b][1] <= 224 * 224);
    }
    assert_true(hw[0][0] > hw[0][1]); /* portrait first: the ratios ascend */
    assert_true(hw[2][0] < hw[2][1]);
    const int32_t list[3][2] = {{256, 192}, {224, 224}, {192, 256}};
    rf_buckets b;
    assert_int_equal(rf__buckets_assign(&b, dims, N, list, 3), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(b.of[i], i < 60 ? 2 : i < 90 ? 0 : 1); /* unknown: the square */
    assert_int_equal(b.unknown, 2);
    assert_int_equal(b.first[1] - b.first[0], 30);
    assert_int_equal(b.first[3] - b.first[2], 60);
    for (int k = 0; k < 3; k++)
        for (int64_t i = b.first[k]; i < b.first[k + 1]; i++) {
            assert_int_equal(b.of[b.members[i]], k);
            if (i > b.first[k])
                assert_true(b.members[i] > b.members[i - 1]);
        }
    rf_rng rng = rf__rng_make(1, 2, 3);
    for (int k = 0; k < 200; k++) {
        assert_int_equal(b.of[rf__bucket_draw(&b, 0, &rng)], 0);
        int64_t in = rf__bucket_draw_in(&b, 1, 80, 100, &rng);
        assert_true(in >= 90 && in < 100);
    }
    assert_int_equal(rf__bucket_draw_in(&b, 1, 0, 50, &rng), -1);
    /* a tie goes to the lower bucket */
    assert_int_equal(rf__bucket_nearest(&b, 1, 1), 1);
    rf__buckets_free(&b);
    /* nothing known: one bucket of the budget */
    uint32_t none[4] = {0};
    assert_int_equal(rf__buckets_auto(none, 2, 5, 100, 120, 8, hw), 1);
    assert_int_equal(hw[0][0], 100);
    assert_int_equal(hw[0][1], 120);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_center_rectangle),
        cmocka_unit_test(test_rrc_rectangle_draws_as_square),
        cmocka_unit_test(test_letterbox_sizes),
        cmocka_unit_test(test_native_and_cover),
        cmocka_unit_test(test_frame_resample_and_fill),
        cmocka_unit_test(test_header_scan_formats),
        cmocka_unit_test(test_header_scan_refuses_damage),
        cmocka_unit_test(test_shape_options),
        cmocka_unit_test(test_buckets_auto_and_assign),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
