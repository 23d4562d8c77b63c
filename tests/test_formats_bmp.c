/*
 * test_formats_bmp.c - BMP bytes to pixels in a slot: every variant PIL
 * reads (palettes of 1/4/8 bits, short ones, gray ramps, black and white
 * read as 1-bit data, 16-bit 5-5-5 and 5-6-5, 24, 32 with the bit-field
 * layouts PIL takes, OS/2, V4, V5 and top-down, RLE8 and RLE4), with PIL's
 * RGB worked out from the bytes written, and broken files failing with a
 * reason. The checks: formatcheck.h.
 */
#define _GNU_SOURCE
#include "formatcheck.h"
#include "lewrite.h"

/* ------------------------------------------------------------------ BMP */

enum { BM_RAW = 0, BM_RLE8 = 1, BM_RLE4 = 2, BM_FIELDS = 3 };

typedef struct bmp_spec {
    int w, h, bits, comp, header, topdown, colors; /* colors: palette entries written */
    uint32_t masks[4];
    const uint8_t *pal; /* colors x RGB */
} bmp_spec;

/* A BMP file of the given header, palette and raster (rows as stored). */
static void bmp_file(const bmp_spec *s, const uint8_t *raster, size_t rlen, pic *p)
{
    int os2 = s->header == 12, entry = os2 ? 3 : 4;
    size_t masks = s->comp == BM_FIELDS && s->header == 40 ? 12 : 0;
    size_t off = 14 + (size_t)s->header + masks + (size_t)entry * s->colors;
    p->len = off + rlen;
    p->file = calloc(1, p->len);
    uint8_t *f = p->file;
    f[0] = 'B';
    f[1] = 'M';
    put32(f + 2, (uint32_t)p->len);
    put32(f + 10, (uint32_t)off);
    put32(f + 14, (uint32_t)s->header);
    if (os2) {
        put16(f + 18, (unsigned)s->w);
        put16(f + 20, (unsigned)s->h);
        put16(f + 22, 1);
        put16(f + 24, (unsigned)s->bits);
    } else {
        put32(f + 18, (uint32_t)s->w);
        put32(f + 22, s->topdown ? (uint32_t)-s->h : (uint32_t)s->h);
        put16(f + 26, 1);
        put16(f + 28, (unsigned)s->bits);
        put32(f + 30, (uint32_t)s->comp);
        put32(f + 34, (uint32_t)rlen);
        put32(f + 46, (uint32_t)(s->bits <= 8 ? s->colors : 0));
        for (int i = 0; i < 4 && s->comp == BM_FIELDS; i++)
            if (s->header > 40 || i < 3)
                put32(f + 54 + 4 * i, s->masks[i]);
    }
    uint8_t *pal = f + 14 + s->header + masks;
    for (int i = 0; i < s->colors; i++) {
        pal[entry * i] = s->pal[3 * i + 2];
        pal[entry * i + 1] = s->pal[3 * i + 1];
        pal[entry * i + 2] = s->pal[3 * i];
    }
    memcpy(f + off, raster, rlen);
}

/* An uncompressed BMP of random bytes, and PIL's RGB of it. */
static void bmp_make(const bmp_spec *s, uint32_t seed, pic *p)
{
    size_t stride = (((size_t)s->w * s->bits + 31) >> 3) & ~(size_t)3;
    uint8_t *raster = malloc(stride * s->h);
    for (size_t i = 0; i < stride * s->h; i++)
        raster[i] = (uint8_t)rnd(&seed);
    p->w = s->w;
    p->h = s->h;
    p->rgb = malloc((size_t)s->w * s->h * 3);
    int bw = s->colors == 2 && !memcmp(s->pal, "\0\0\0\xff\xff\xff", 6);
    for (int y = 0; y < s->h; y++) {
        const uint8_t *row = raster + stride * (size_t)(s->topdown ? y : s->h - 1 - y);
        for (int x = 0; x < s->w; x++) {
            uint8_t *o = p->rgb + ((size_t)y * s->w + x) * 3;
            if (bw || s->bits == 1 || s->bits == 4 || s->bits == 8) {
                unsigned i = bw || s->bits == 1 ? (row[x / 8] >> (7 - x % 8)) & 1
                             : s->bits == 4     ? (row[x / 2] >> (x % 2 ? 0 : 4)) & 15
                                                : row[x];
                if (bw)
                    memset(o, i ? 255 : 0, 3);
                else if ((int)i < s->colors)
                    memcpy(o, s->pal + 3 * i, 3);
                else
                    memset(o, (int)i, 3);
            } else if (s->bits == 16) {
                unsigned v = row[2 * x] | row[2 * x + 1] << 8;
                int six = s->comp == BM_FIELDS && s->masks[1] == 0x7E0;
                o[0] = (uint8_t)(((v >> (six ? 11 : 10)) & 31) * 255 / 31);
                o[1] = (uint8_t)(six ? ((v >> 5) & 63) * 255 / 63 : ((v >> 5) & 31) * 255 / 31);
                o[2] = (uint8_t)((v & 31) * 255 / 31);
            } else {
                const uint8_t *px = row + (size_t)x * (s->bits / 8);
                int rgba = s->comp == BM_FIELDS && s->masks[0] == 0xFF;
                int xbgr = s->comp == BM_FIELDS && s->masks[0] == 0xFF000000u;
                for (int c = 0; c < 3; c++)
                    o[c] = rgba ? px[c] : xbgr ? px[3 - c] : px[2 - c];
            }
        }
    }
    bmp_file(s, raster, stride * s->h, p);
    free(raster);
}

/* RLE8 (or RLE4 with two-colour runs) of random runs and, for RLE8, absolute
 * runs, and the indices it means: row y of idx is picture row y. */
static void bmp_rle(const bmp_spec *s, uint32_t seed, pic *p)
{
    size_t cap = (size_t)s->w * s->h * 4 + 64, n = 0;
    uint8_t *rle = malloc(cap), *idx = malloc((size_t)s->w * s->h);
    int four = s->comp == BM_RLE4;
    for (int r = 0; r < s->h; r++) { /* bottom-up */
        uint8_t *row = idx + (size_t)(s->h - 1 - r) * s->w;
        for (int x = 0; x < s->w;) {
            int left = s->w - x, k = 1 + (int)(rnd(&seed) % 9);
            k = k > left ? left : k;
            uint8_t a = (uint8_t)(rnd(&seed) % (four ? 16 : 256));
            uint8_t b = (uint8_t)(rnd(&seed) % (four ? 16 : 256));
            if (!four && k >= 3 && rnd(&seed) % 2) { /* absolute run, word aligned */
                rle[n++] = 0;
                rle[n++] = (uint8_t)k;
                for (int i = 0; i < k; i++)
                    rle[n++] = row[x + i] = (uint8_t)rnd(&seed);
                if (k % 2)
                    rle[n++] = 0;
            } else {
                rle[n++] = (uint8_t)k;
                rle[n++] = four ? (uint8_t)(a << 4 | b) : a;
                for (int i = 0; i < k; i++)
                    row[x + i] = four ? (i % 2 ? b : a) : a;
            }
            x += k;
        }
        rle[n++] = 0;
        rle[n++] = 0; /* end of line */
    }
    rle[n++] = 0;
    rle[n++] = 1; /* end of bitmap */
    p->w = s->w;
    p->h = s->h;
    p->rgb = malloc((size_t)s->w * s->h * 3);
    for (size_t i = 0; i < (size_t)s->w * s->h; i++) {
        if (idx[i] < s->colors)
            memcpy(p->rgb + 3 * i, s->pal + 3 * idx[i], 3);
        else
            memset(p->rgb + 3 * i, idx[i], 3);
    }
    bmp_file(s, rle, n, p);
    free(rle);
    free(idx);
}

static void test_bmp_variants(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    uint8_t pal[256 * 3], ramp[256 * 3];
    uint32_t seed = 99;
    for (int i = 0; i < 256 * 3; i++) {
        pal[i] = (uint8_t)rnd(&seed);
        ramp[i] = (uint8_t)(i / 3);
    }
    pal[0] = 1; /* no accidental gray ramp or black and white */
    const uint8_t bw[6] = {0, 0, 0, 255, 255, 255};
    const bmp_spec v[] = {
        {.bits = 8, .header = 40, .colors = 256, .pal = pal},
        {.bits = 8, .header = 40, .colors = 100, .pal = pal},  /* indices past it: gray */
        {.bits = 8, .header = 40, .colors = 256, .pal = ramp}, /* PIL's mode "L" */
        {.bits = 8, .header = 40, .colors = 2, .pal = bw},     /* PIL reads 1-bit data */
        {.bits = 4, .header = 40, .colors = 16, .pal = pal},
        {.bits = 4, .header = 40, .colors = 5, .pal = pal},
        {.bits = 4, .header = 40, .colors = 2, .pal = bw},
        {.bits = 1, .header = 40, .colors = 2, .pal = pal},
        {.bits = 1, .header = 40, .colors = 2, .pal = bw},
        {.bits = 8, .header = 12, .colors = 256, .pal = pal}, /* OS/2 */
        {.bits = 24, .header = 12},
        {.bits = 24, .header = 40},
        {.bits = 24, .header = 124, .topdown = 1},
        {.bits = 16, .header = 40}, /* 5-5-5 */
        {.bits = 16, .header = 40, .comp = BM_FIELDS, .masks = {0xF800, 0x7E0, 0x1F}},
        {.bits = 16, .header = 108, .comp = BM_FIELDS, .masks = {0x7C00, 0x3E0, 0x1F}},
        {.bits = 24, .header = 40, .comp = BM_FIELDS, .masks = {0xFF0000, 0xFF00, 0xFF}},
        {.bits = 32, .header = 40}, /* BGRX */
        {.bits = 32, .header = 40, .comp = BM_FIELDS, .masks = {0xFF0000, 0xFF00, 0xFF}},
        {.bits = 32,
         .header = 108,
         .comp = BM_FIELDS,
         .masks = {0xFF, 0xFF00, 0xFF0000, 0xFF000000u}},
        {.bits = 32,
         .header = 124,
         .comp = BM_FIELDS,
         .masks = {0xFF000000u, 0xFF0000, 0xFF00, 0xFF},
         .topdown = 1},
        {.bits = 32, .header = 108, .comp = BM_FIELDS}, /* all zero: BGRA */
        {.bits = 8, .header = 40, .comp = BM_RLE8, .colors = 256, .pal = pal},
        {.bits = 8, .header = 40, .comp = BM_RLE8, .colors = 40, .pal = pal},
        {.bits = 4, .header = 40, .comp = BM_RLE4, .colors = 16, .pal = pal},
    };
    static const int sizes[][2] = {{33, 33}, {61, 40}, {23, 45}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        for (int k = 0; k < 3; k++) {
            bmp_spec s = v[i];
            s.w = sizes[k][0];
            s.h = sizes[k][1];
            pic p;
            if (s.comp == BM_RLE8 || s.comp == BM_RLE4)
                bmp_rle(&s, (uint32_t)(i * 3 + k + 1), &p);
            else
                bmp_make(&s, (uint32_t)(i * 3 + k + 1), &p);
            char what[96];
            snprintf(what, sizeof what, "BMP #%zu: %d bits, comp %d, header %d, %dx%d", i, s.bits,
                     s.comp, s.header, s.w, s.h);
            check_pic(d, &p, what);
            pic_free(&p);
        }
    rf__decoder_destroy(d);
}

static void test_bmp_broken(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    uint8_t pal[256 * 3], ramp[16 * 3];
    for (int i = 0; i < 256 * 3; i++)
        pal[i] = (uint8_t)(i * 5 + 1);
    for (int i = 0; i < 16 * 3; i++)
        ramp[i] = (uint8_t)(i / 3);
    pic p;
    bmp_spec s = {.w = 40, .h = 30, .bits = 24, .header = 40};
    bmp_make(&s, 3, &p);
    expect_error(d, p.file, p.len - 1, 1, RF_E_DECODE, "BMP truncated", "one byte short");
    expect_error(d, p.file, 30, 1, RF_E_DECODE, "header truncated", "header cut");
    uint8_t *f = malloc(p.len);
    memcpy(f, p.file, p.len);
    put32(f + 18, 60000);
    put32(f + 22, 60000);
    expect_error(d, f, p.len, 1, RF_E_LIMIT, "exceeds the limit", "60000 x 60000");
    put32(f + 22, (uint32_t)-60000); /* top-down */
    expect_error(d, f, p.len, 1, RF_E_LIMIT, "exceeds the limit", "60000 x -60000");
    memcpy(f, p.file, p.len);
    put16(f + 28, 2);
    expect_error(d, f, p.len, 1, RF_E_DECODE, "depth of 2 bits", "2 bits");
    memcpy(f, p.file, p.len);
    put32(f + 30, 4);
    expect_error(d, f, p.len, 1, RF_E_DECODE, "compression 4", "JPEG in BMP");
    memcpy(f, p.file, p.len);
    put32(f + 14, 52);
    expect_error(d, f, p.len, 1, RF_E_DECODE, "header size 52", "header size");
    memcpy(f, p.file, p.len);
    put32(f + 18, 0);
    expect_error(d, f, p.len, 1, RF_E_DECODE, "a side is 0", "zero width");
    pic_free(&p);
    free(f);

    bmp_spec b = {.w = 16,
                  .h = 8,
                  .bits = 24,
                  .header = 40,
                  .comp = BM_FIELDS,
                  .masks = {0xFF, 0xFF00, 0xFF0000}};
    bmp_make(&b, 4, &p);
    expect_error(d, p.file, p.len, 1, RF_E_DECODE, "bit field layout", "BGR masks reversed");
    pic_free(&p);
    bmp_spec g = {.w = 16, .h = 8, .bits = 4, .header = 40, .colors = 16, .pal = ramp};
    bmp_make(&g, 4, &p);
    expect_error(d, p.file, p.len, 1, RF_E_DECODE, "gray ramp", "4-bit gray ramp");
    pic_free(&p);
    bmp_spec big = {.w = 16, .h = 8, .bits = 8, .header = 40, .colors = 256, .pal = pal};
    bmp_make(&big, 4, &p);
    put32(p.file + 46, 300);
    expect_error(d, p.file, p.len, 1, RF_E_DECODE, "palette of 300", "300 colours");
    pic_free(&p);

    bmp_spec r = {
        .w = 20, .h = 10, .bits = 8, .header = 40, .comp = BM_RLE8, .colors = 256, .pal = pal};
    bmp_rle(&r, 6, &p);
    /* An early end of bitmap leaves the picture short: PIL fails, so do we. */
    expect_error(d, p.file, p.len - 30, 1, RF_E_DECODE, "RLE data ends", "RLE cut");
    memcpy(p.file + p.len - 2, "\0\0", 2);
    check_pic(d, &p, "RLE without its end of bitmap"); /* the rows are all there */
    pic_free(&p);
    rf__decoder_destroy(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bmp_variants),
        cmocka_unit_test(test_bmp_broken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
