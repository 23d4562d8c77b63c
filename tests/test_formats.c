/*
 * test_formats.c - PNG and PBM/PGM/PPM bytes to pixels in a slot: every
 * variant the decoders take, with PIL's convert("RGB") values (worked out
 * here from the samples written; the Python test compares with PIL itself),
 * region decoding equal to resampling the whole picture, the size limit
 * before any pixel memory, and broken files failing with a reason. PNGs are
 * encoded with libspng (any depth, colour type, palette, tRNS, Adam7), PNM
 * files written byte by byte. BMP: test_formats_bmp.c.
 */
#define _GNU_SOURCE
#include <math.h>

#include "formatcheck.h"
#include "testutil.h"
#ifdef RF_HAVE_SPNG
#include <spng.h>
#endif

/* ------------------------------------------------------------------ PNG */

#ifdef RF_HAVE_SPNG
/* CRC-32 of PNG chunks (to fix one up after an edit). */
static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xFFFFFFFFu;
}

/* A PNG of random-ish samples (photo-like where 8 bits allow) at the given
 * depth and colour type; n_plte palette entries (indices run past them);
 * tRNS where the colour type has one. */
static void png_make(int w, int h, int depth, int ctype, int adam7, int n_plte, int trns,
                     uint32_t seed, pic *p)
{
    int ch = ctype == 0 || ctype == 3 ? 1 : ctype == 4 ? 2 : ctype == 2 ? 3 : 4;
    size_t row = ((size_t)w * ch * depth + 7) / 8, n = row * h;
    uint8_t *img = calloc(1, n), *photo = tu_make_rgb(w, h, seed);
    p->w = w;
    p->h = h;
    p->rgb = malloc((size_t)w * h * 3);
    struct spng_plte plte = {.n_entries = (uint32_t)n_plte};
    for (int i = 0; i < n_plte; i++) {
        plte.entries[i].red = (uint8_t)(rnd(&seed) | 1);
        plte.entries[i].green = (uint8_t)rnd(&seed);
        plte.entries[i].blue = (uint8_t)(i * 7);
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *ph = photo + ((size_t)y * w + x) * 3, *out = p->rgb + ((size_t)y * w + x) * 3;
            for (int c = 0; c < ch; c++) {
                unsigned v;
                if (depth == 16) /* gray: many values over 255, some under */
                    v = ctype == 0 ? (x % 3 ? ph[1] * 97u + (rnd(&seed) & 255) : ph[1])
                                   : (c < 3 ? ph[c] : 0) * 257u + (rnd(&seed) & 255);
                else if (depth == 8)
                    v = c < 3 && ctype != 3 ? ph[c] : (uint8_t)rnd(&seed);
                else
                    v = (ph[0] >> (8 - depth)) ^ (rnd(&seed) & 1);
                if (ctype == 4 && c == 1) /* gray + alpha: the alpha */
                    v = rnd(&seed) & (depth == 16 ? 0xFFFF : 0xFF);
                size_t s = ((size_t)x * ch + c);
                if (depth == 16)
                    ((uint16_t *)(void *)(img + (size_t)y * row))[s] = (uint16_t)v;
                else if (depth == 8)
                    img[(size_t)y * row + s] = (uint8_t)v;
                else
                    img[(size_t)y * row + s * depth / 8] |=
                        (uint8_t)(v << (8 - depth - (s * depth) % 8));
                /* PIL's RGB of it (decode/png.c's comment has the rules) */
                if (ctype == 3) {
                    int in = (int)v < n_plte;
                    out[0] = in ? plte.entries[v].red : (uint8_t)v;
                    out[1] = in ? plte.entries[v].green : (uint8_t)v;
                    out[2] = in ? plte.entries[v].blue : (uint8_t)v;
                } else if (ctype == 0) {
                    out[0] = out[1] = out[2] = depth == 16
                                                   ? (v > 255 ? 255 : (uint8_t)v)
                                                   : (uint8_t)(v * (255u / ((1u << depth) - 1u)));
                } else if (c < 3 && (ctype != 4 || c == 0)) {
                    uint8_t b = depth == 16 ? (uint8_t)(v >> 8) : (uint8_t)v;
                    if (ctype == 4)
                        out[0] = out[1] = out[2] = b;
                    else
                        out[c] = b;
                }
            }
        }
    free(photo);
    spng_ctx *e = spng_ctx_new(SPNG_CTX_ENCODER);
    assert_non_null(e);
    assert_int_equal(spng_set_option(e, SPNG_ENCODE_TO_BUFFER, 1), 0);
    struct spng_ihdr ihdr = {(uint32_t)w, (uint32_t)h, (uint8_t)depth, (uint8_t)ctype,
                             0,           0,           (uint8_t)adam7};
    assert_int_equal(spng_set_ihdr(e, &ihdr), 0);
    if (ctype == 3)
        assert_int_equal(spng_set_plte(e, &plte), 0);
    if (trns && (ctype == 0 || ctype == 2 || ctype == 3)) {
        struct spng_trns t = {.gray = 1, .red = 2, .green = 3, .blue = 4};
        t.n_type3_entries = n_plte < 3 ? (uint32_t)n_plte : 3;
        memset(t.type3_alpha, 0x40, sizeof t.type3_alpha);
        assert_int_equal(spng_set_trns(e, &t), 0);
    }
    assert_int_equal(spng_set_gama(e, 0.8), 0); /* ignored by PIL, so by the decoder */
    int rc = spng_encode_image(e, img, n, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
    if (rc)
        fail_msg("spng_encode_image: %s", spng_strerror(rc));
    int gerr = 0;
    p->file = spng_get_png_buffer(e, &p->len, &gerr);
    assert_int_equal(gerr, 0);
    spng_ctx_free(e);
    free(img);
}

static void test_png_variants(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    static const struct {
        int depth, ctype, n_plte, trns;
    } v[] = {{1, 0, 0, 0},  {2, 0, 0, 1},   {4, 0, 0, 0},  {8, 0, 0, 1},  {16, 0, 0, 1},
             {8, 4, 0, 0},  {16, 4, 0, 0},  {8, 2, 0, 1},  {16, 2, 0, 1}, {8, 6, 0, 0},
             {16, 6, 0, 0}, {1, 3, 2, 1},   {1, 3, 1, 0},  {2, 3, 3, 1},  {4, 3, 16, 0},
             {4, 3, 9, 1},  {8, 3, 256, 1}, {8, 3, 100, 0}};
    static const int sizes[][2] = {{37, 37}, {64, 41}, {29, 70}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        for (int adam7 = 0; adam7 <= 1; adam7++)
            for (int s = 0; s < 3; s++) {
                pic p;
                png_make(sizes[s][0], sizes[s][1], v[i].depth, v[i].ctype, adam7, v[i].n_plte,
                         v[i].trns, (uint32_t)(i * 10 + s + 1), &p);
                char what[96];
                snprintf(what, sizeof what, "PNG depth %d type %d plte %d%s %dx%d", v[i].depth,
                         v[i].ctype, v[i].n_plte, adam7 ? " Adam7" : "", p.w, p.h);
                check_pic(d, &p, what);
                pic_free(&p);
            }
    rf__decoder_destroy(d);
}

static void test_png_broken(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    pic p;
    png_make(300, 200, 8, 2, 0, 0, 0, 5, &p);
    uint8_t *f = malloc(p.len);
    /* Truncated: the crop of a 32-pixel center reads the middle rows. */
    expect_error(d, p.file, p.len / 3, 1, RF_E_DECODE, "PNG", "cut in the middle");
    expect_error(d, p.file, p.len - 20, 1, RF_E_DECODE, "PNG", "cut near the end, checked");
    expect_error(d, p.file, 40, 1, RF_E_DECODE, "PNG", "cut in the header");
    expect_error(d, p.file, 8, 1, RF_E_DECODE, "PNG", "signature only");
    /* Cut near the end, not checked: the crop decodes; checked, it fails. */
    rf_decode_opts o = opts(RF_TRANSFORM_CENTER, 32);
    o.check_tail = 0;
    uint8_t out[32 * 32 * 3];
    char err[256] = "";
    rf_decode_times t;
    assert_int_equal(rf__decode_sample(d, p.file, p.len - 40, &o, out, err, sizeof err, &t), 0);
    assert_int_equal(t.whole, 0);
    assert_int_equal(rf__decode_sample(d, p.file, p.len, &o, out, err, sizeof err, &t), 0);
    assert_int_equal(t.whole, 0);
    o.check_tail = 1;
    assert_int_equal(rf__decode_sample(d, p.file, p.len, &o, out, err, sizeof err, &t), 0);
    assert_int_equal(t.whole, 1);
    /* A flipped byte in the image data, or in IHDR's CRC: CRC errors. */
    memcpy(f, p.file, p.len);
    f[p.len * 9 / 10] ^= 0x20;
    expect_error(d, f, p.len, 1, RF_E_DECODE, "PNG", "IDAT byte flipped");
    memcpy(f, p.file, p.len);
    f[30] ^= 1;
    expect_error(d, f, p.len, 1, RF_E_DECODE, "invalid chunk checksum", "IHDR CRC flipped");
    memcpy(f, p.file, p.len);
    f[20] ^= 1; /* height 2^24 + 200: over libspng's side limit, before the CRC is seen */
    expect_error(d, f, p.len, 1, RF_E_LIMIT, "exceeds user limit", "IHDR height flipped");
    /* Huge dimensions (CRC fixed up): the limit, before any pixel memory. */
    memcpy(f, p.file, p.len);
    const uint8_t dims[8] = {0, 1, 0, 0, 0, 1, 0, 0}; /* 65536 x 65536 */
    memcpy(f + 16, dims, 8);
    uint32_t crc = crc32_of(f + 12, 17);
    uint8_t be[4] = {(uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8), (uint8_t)crc};
    memcpy(f + 29, be, 4);
    expect_error(d, f, p.len, 1, RF_E_LIMIT, "exceeds the limit", "65536 x 65536");
    /* The worker's decoder goes on after all that. */
    check_pic(d, &p, "PNG after errors");
    free(f);
    pic_free(&p);
    rf__decoder_destroy(d);
}
#else
static void test_png_variants(void **state)
{
    (void)state;
    skip();
}

static void test_png_broken(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0,    0,    0,
                                  13,   'I', 'H', 'D', 'R',  0,    0,    0,    16,   0,    0,
                                  0,    16,  8,   2,   0,    0,    0,    0x90, 0x91, 0x68, 0x36};
    expect_error(d, png, sizeof png, 1, RF_E_DECODE,
                 "unsupported format: PNG (this build has no libspng: its features lack \"png\"",
                 "PNG without libspng");
    rf__decoder_destroy(d);
}
#endif

/* ------------------------------------------------------------------ PNM */

/* PIL's round(v / maxval * out_max), clipped to a byte. */
static uint8_t pil_scale(unsigned v, unsigned maxval, unsigned out_max)
{
    double q = nearbyint((double)v / maxval * out_max);
    q = q > out_max ? out_max : q;
    return q > 255 ? 255 : (uint8_t)q;
}

/* P1..P6 at maxval mx: samples random in 0..mx (P5/P6 at maxval 100: some
 * over it, which PIL clips). */
static void pnm_make(int magic, int w, int h, unsigned mx, uint32_t seed, pic *p)
{
    int bands = magic == 3 || magic == 6 ? 3 : 1, bits = magic == 1 || magic == 4;
    size_t ns = (size_t)w * h * bands, cap = ns * 8 + 256, n;
    p->w = w;
    p->h = h;
    p->rgb = malloc((size_t)w * h * 3);
    p->file = malloc(cap);
    char *t = (char *)p->file;
    n = (size_t)snprintf(t, cap, "P%d\n# a comment\n%d %d\n", magic, w, h);
    if (!bits)
        n += (size_t)snprintf(t + n, cap - n, "%u\n", mx);
    unsigned out_max = magic == 2 && mx > 255 ? 65535 : (magic == 5 && mx > 255 ? 65535 : 255);
    size_t stride4 = ((size_t)w + 7) / 8;
    if (magic == 4)
        memset(p->file + n, 0, stride4 * h);
    for (size_t i = 0; i < ns; i++) {
        unsigned v = bits ? rnd(&seed) & 1 : rnd(&seed) % (mx + 1);
        if ((magic == 5 || magic == 6) && mx == 100)
            v = rnd(&seed) % 256;
        uint8_t o;
        if (bits)
            o = v ? 0 : 255;
        else if (magic == 5 && mx == 65535)
            o = v > 255 ? 255 : (uint8_t)v;
        else
            o = pil_scale(v, mx, out_max);
        if (bands == 3)
            p->rgb[i] = o;
        else
            memset(p->rgb + 3 * i, o, 3);
        if (magic == 1)
            n += (size_t)snprintf(t + n, cap - n, i % 7 == 3 ? "%u\n" : "%u", v);
        else if (magic <= 3)
            n += (size_t)snprintf(t + n, cap - n, i % 9 == 4 ? "%u #c\n" : "%u ", v);
        else if (magic == 4)
            p->file[n + (i / w) * stride4 + (i % w) / 8] |= (uint8_t)(v << (7 - (i % w) % 8));
        else if (mx > 255) {
            p->file[n++] = (uint8_t)(v >> 8);
            p->file[n++] = (uint8_t)v;
        } else
            p->file[n++] = (uint8_t)v;
    }
    if (magic == 4)
        n += stride4 * h;
    p->len = n;
}

static void test_pnm_variants(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    static const unsigned maxvals[] = {1, 15, 100, 255, 256, 1000, 65535};
    static const int sizes[][2] = {{35, 35}, {50, 31}, {17, 44}};
    for (int magic = 1; magic <= 6; magic++)
        for (size_t m = 0; m < sizeof maxvals / sizeof maxvals[0]; m++)
            for (int k = 0; k < 3; k++) {
                if ((magic == 1 || magic == 4) && m > 0)
                    break;
                pic p;
                pnm_make(magic, sizes[k][0], sizes[k][1], maxvals[m],
                         (uint32_t)(magic * 100 + m * 3 + k + 1), &p);
                char what[64];
                snprintf(what, sizeof what, "P%d maxval %u %dx%d", magic, maxvals[m], p.w, p.h);
                check_pic(d, &p, what);
                pic_free(&p);
            }
    rf__decoder_destroy(d);
}

static void test_pnm_broken(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    pic p;
    pnm_make(6, 40, 30, 255, 1, &p);
    expect_error(d, p.file, p.len - 1, 1, RF_E_DECODE, "PNM truncated", "P6 one byte short");
    pic_free(&p);
#define BAD(s, rc, want) expect_error(d, (const uint8_t *)(s), sizeof(s) - 1, 1, rc, want, s)
    BAD("P6\n60000 60000\n255\n", RF_E_LIMIT, "exceeds the limit");
    BAD("P5\n0 5\n255\n", RF_E_DECODE, "a side is 0");
    BAD("P5\n5 5\n0\n", RF_E_DECODE, "maxval 0");
    BAD("P5\n5 5\n70000\n", RF_E_DECODE, "maxval 70000");
    BAD("P5\n5 5", RF_E_DECODE, "header truncated");
    BAD("P5\n123456789012 5\n255\n", RF_E_DECODE, "token too long");
    BAD("P5\n-5 5\n255\n", RF_E_DECODE, "not a plain decimal");
    BAD("P2\n2 1\n7\n3 9\n", RF_E_DECODE, "over maxval");
    BAD("P2\n2 1\n7\n3 x\n", RF_E_DECODE, "not a plain decimal");
    BAD("P2\n2 1\n7\n3 12345678901\n", RF_E_DECODE, "longer than");
    BAD("P3\n2 1\n7\n1 2 3 4 5\n", RF_E_DECODE, "ends after 5 of 6");
    BAD("P1\n3 1\n0 2 1\n", RF_E_DECODE, "invalid character");
    BAD("P1\n3 1\n01", RF_E_DECODE, "ends after 2 of 3");
    BAD("P4\n9 2\n\x01\x02\x03", RF_E_DECODE, "PNM truncated");
#undef BAD
    /* PIL's quirks: a comment inside a header token does not end it; a file
     * ending inside a plain token repeats that sample. */
    static const char glued[] = "P5 1#x\n2 1 255\n0123456789AB";
    static const char repeat[] = "P2 3 1 255 7 9";
    rf_decode_opts o = opts(RF_TRANSFORM_NONE, 12);
    uint8_t out[12 * 12 * 3];
    char err[256] = "";
    rf_decode_times t;
    int rc = rf__decode_sample(d, (const uint8_t *)glued, sizeof glued - 1, &o, out, err,
                               sizeof err, &t);
    assert_int_equal(rc, RF_E_DECODE); /* 12 x 1: "none" needs 12 x 12, but the size is known */
    assert_int_equal(t.width, 12);
    assert_int_equal(t.height, 1);
    o = opts(RF_TRANSFORM_CENTER, 4);
    assert_int_equal(rf__decode_sample(d, (const uint8_t *)repeat, sizeof repeat - 1, &o, out, err,
                                       sizeof err, &t),
                     0);
    rf__decoder_destroy(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_png_variants),
        cmocka_unit_test(test_png_broken),
        cmocka_unit_test(test_pnm_variants),
        cmocka_unit_test(test_pnm_broken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
