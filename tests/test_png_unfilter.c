/*
 * test_png_unfilter.c - decode/png.c's own path for non-interlaced image
 * data: the unfiltering (png_unfilter.c) of every filter type at every
 * bytes-per-pixel PNG has, at each SIMD level, against a plain reference
 * written here; and PNG files built here byte by byte (rows filtered with
 * every filter, stored zlib blocks, any IDAT split) decoded through
 * rf__decode_sample: odd widths, a stream in many IDAT chunks, bad CRCs,
 * cut data, bad filter bytes, a stream longer than the picture, bytes after
 * IEND. Expected pixels follow PIL's convert("RGB") rules (decode/png.c's
 * opening comment); formatcheck.h runs the checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "png_unfilter.h"
#ifdef RF_HAVE_SPNG
#include "formatcheck.h" /* the decode checks (pic, check_pic, expect_error) */
#endif

/* ------------------------------------------------------------ unfilter */

static int ref_paeth(int a, int b, int c)
{
    int p = a + b - c;
    int pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    if (pa <= pb && pa <= pc)
        return a;
    return pb <= pc ? b : c;
}

/* The prediction of byte i of a row from the specification; row holds the
 * bytes already reconstructed left of i. */
static int ref_pred(int filter, const uint8_t *row, const uint8_t *prev, size_t i, size_t bpp)
{
    int a = i >= bpp ? row[i - bpp] : 0, b = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
    switch (filter) {
    case 1:
        return a;
    case 2:
        return b;
    case 3:
        return (a + b) / 2;
    case 4:
        return ref_paeth(a, b, c);
    default:
        return 0;
    }
}

static uint8_t next_byte(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return (uint8_t)(*s >> 16);
}

static void test_unfilter_rows(void **state)
{
    (void)state;
    static const unsigned bpps[] = {1, 2, 3, 4, 6, 8};
    static const size_t widths[] = {1, 2, 3, 15, 17, 64};
    int levels[2] = {RF__SIMD_NONE, rf__png_unfilter_best()};
    uint32_t s = 12345;
    for (int li = 0; li < 2; li++)
        for (size_t bi = 0; bi < sizeof bpps / sizeof bpps[0]; bi++)
            for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
                for (int filter = 0; filter <= 4; filter++)
                    for (int first = 0; first <= 1; first++) {
                        size_t len = widths[wi] * bpps[bi];
                        /* exactly len bytes each: a read or write past them
                         * is an ASan or valgrind report */
                        uint8_t *row = malloc(len), *prev = malloc(len), *want = malloc(len);
                        for (size_t i = 0; i < len; i++) {
                            row[i] = next_byte(&s);
                            prev[i] = first ? 0 : next_byte(&s);
                        }
                        memcpy(want, row, len);
                        for (size_t i = 0; i < len; i++)
                            want[i] =
                                (uint8_t)(want[i] + ref_pred(filter, want, prev, i, bpps[bi]));
                        assert_int_equal(
                            rf__png_unfilter_row(levels[li], filter, row, prev, len, bpps[bi]), 0);
                        if (memcmp(row, want, len) != 0)
                            fail_msg("level %d filter %d bpp %u width %zu%s differs", levels[li],
                                     filter, bpps[bi], widths[wi], first ? " (first row)" : "");
                        free(row);
                        free(prev);
                        free(want);
                    }
    /* A filter type past Paeth: refused, the row untouched. */
    uint8_t row[6] = {1, 2, 3, 4, 5, 6}, prev[6] = {9, 9, 9, 9, 9, 9};
    for (int li = 0; li < 2; li++) {
        assert_int_equal(rf__png_unfilter_row(levels[li], 5, row, prev, 6, 3), -1);
        assert_int_equal(rf__png_unfilter_row(levels[li], 255, row, prev, 6, 3), -1);
        assert_int_equal(row[0] + row[5], 7);
    }
}

/* ------------------------------------------------- PNG files built here */

#ifdef RF_HAVE_SPNG
typedef struct out {
    uint8_t *b;
    size_t n, cap;
} out;

static void put(out *o, const void *p, size_t n)
{
    if (o->n + n > o->cap) {
        o->cap = (o->n + n) * 2 + 64;
        o->b = realloc(o->b, o->cap);
        assert_non_null(o->b);
    }
    if (n)
        memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void put32(out *o, uint32_t v)
{
    uint8_t be[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    put(o, be, 4);
}

static uint32_t crc_png(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xffffffffu;
}

static void chunk(out *o, const char *type, const uint8_t *data, size_t len)
{
    put32(o, (uint32_t)len);
    size_t at = o->n;
    put(o, type, 4);
    put(o, data, len);
    put32(o, crc_png(o->b + at, len + 4));
}

/* A zlib stream of stored blocks (no compression: the bytes are where a
 * test can find them). */
static void zlib_stored(out *z, const uint8_t *raw, size_t n)
{
    static const uint8_t head[2] = {0x78, 0x01};
    put(z, head, 2);
    size_t off = 0;
    do {
        size_t len = n - off > 65535 ? 65535 : n - off;
        uint8_t h[5] = {(uint8_t)(off + len == n), (uint8_t)len, (uint8_t)(len >> 8), (uint8_t)~len,
                        (uint8_t)(~len >> 8)};
        put(z, h, 5);
        put(z, raw + off, len);
        off += len;
    } while (off < n);
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        a = (a + raw[i]) % 65521;
        b = (b + a) % 65521;
    }
    put32(z, b << 16 | a);
}

typedef struct spec {
    int depth, ctype;
    int idat_piece;   /* bytes of stream per IDAT chunk; 0: one chunk */
    int empty_idats;  /* zero-length IDAT chunks between the others */
    size_t extra;     /* bytes of stream past the picture's (zeros) */
    const char *tail; /* bytes after IEND, or NULL */
} spec;

static int channels(int ctype)
{
    return ctype == 2 ? 3 : ctype == 6 ? 4 : ctype == 4 ? 2 : 1;
}

/* A w x h picture of random samples, its rows filtered with filter
 * (y + seed) % 5, written per s; p->rgb is PIL's RGB of it. */
static void png_build(const spec *sp, int w, int h, uint32_t seed, pic *p)
{
    int depth = sp->depth, ctype = sp->ctype, ch = channels(ctype);
    size_t rb = ((size_t)w * ch * depth + 7) / 8, bpp = ((size_t)ch * depth + 7) / 8;
    uint8_t *raw = malloc(rb * h), *flt = calloc((rb + 1) * h + sp->extra, 1);
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < rb * h; i++)
        raw[i] = (uint8_t)rnd(&s);
    /* a PLTE short of the indices' range: the indices past it are gray */
    uint8_t plte[3 * 200];
    unsigned n_plte = depth == 8 ? 200 : (1u << depth) - 1;
    for (size_t i = 0; i < sizeof plte; i++)
        plte[i] = (uint8_t)rnd(&s);
    for (int y = 0; y < h; y++) {
        int filter = (int)((y + seed) % 5);
        const uint8_t *cur = raw + (size_t)y * rb;
        uint8_t *zero = calloc(rb, 1);
        const uint8_t *up = y ? cur - rb : zero;
        uint8_t *f = flt + (size_t)y * (rb + 1);
        f[0] = (uint8_t)filter;
        for (size_t i = 0; i < rb; i++)
            f[1 + i] = (uint8_t)(cur[i] - ref_pred(filter, cur, up, i, bpp));
        free(zero);
    }
    p->w = w;
    p->h = h;
    p->rgb = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const uint8_t *r = raw + (size_t)y * rb;
            uint8_t *o = p->rgb + ((size_t)y * w + x) * 3;
            int hi = depth == 16 ? 2 : 1; /* the high byte of 16-bit samples */
            if (ctype == 3 || (ctype == 0 && depth <= 8)) {
                int per = 8 / depth, shift = 8 - depth - (x % per) * depth;
                unsigned v = (r[x / per] >> shift) & ((1u << depth) - 1u);
                if (ctype == 3) {
                    for (int c = 0; c < 3; c++)
                        o[c] = v < n_plte ? plte[3 * v + c] : (uint8_t)v;
                } else {
                    o[0] = o[1] = o[2] = (uint8_t)(v * (255u / ((1u << depth) - 1u)));
                }
            } else if (ctype == 0) { /* 16-bit gray: clipped */
                unsigned v = (unsigned)r[2 * x] << 8 | r[2 * x + 1];
                o[0] = o[1] = o[2] = v > 255 ? 255 : (uint8_t)v;
            } else if (ctype == 4) {
                o[0] = o[1] = o[2] = r[(size_t)x * ch * hi];
            } else {
                for (int c = 0; c < 3; c++)
                    o[c] = r[((size_t)x * ch + c) * hi];
            }
        }

    out z = {0}, f = {0};
    zlib_stored(&z, flt, (rb + 1) * h + sp->extra);
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    put(&f, sig, 8);
    uint8_t ihdr[13] = {(uint8_t)(w >> 24),
                        (uint8_t)(w >> 16),
                        (uint8_t)(w >> 8),
                        (uint8_t)w,
                        (uint8_t)(h >> 24),
                        (uint8_t)(h >> 16),
                        (uint8_t)(h >> 8),
                        (uint8_t)h,
                        (uint8_t)depth,
                        (uint8_t)ctype,
                        0,
                        0,
                        0};
    chunk(&f, "IHDR", ihdr, 13);
    if (ctype == 3)
        chunk(&f, "PLTE", plte, 3 * (size_t)n_plte);
    size_t piece = sp->idat_piece ? (size_t)sp->idat_piece : z.n;
    for (size_t off = 0; off < z.n; off += piece) {
        chunk(&f, "IDAT", z.b + off, z.n - off < piece ? z.n - off : piece);
        for (int e = 0; e < sp->empty_idats && off + piece < z.n; e++)
            chunk(&f, "IDAT", NULL, 0);
    }
    chunk(&f, "IEND", NULL, 0);
    if (sp->tail)
        put(&f, sp->tail, strlen(sp->tail));
    p->file = f.b;
    p->len = f.n;
    free(z.b);
    free(raw);
    free(flt);
}

/* depth, colour type: every bytes-per-pixel (1, 2, 3, 4, 6, 8) and sub-byte rows */
static const int variants[][2] = {{1, 0}, {4, 3}, {8, 0},  {8, 3},  {8, 4}, {16, 0},
                                  {8, 2}, {8, 6}, {16, 4}, {16, 2}, {16, 6}};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

static void test_png_odd_widths(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    static const int sides[] = {1, 2, 3, 15, 17};
    for (size_t v = 0; v < N_VARIANTS; v++)
        for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++)
            for (int square = 0; square <= 1; square++) {
                spec sp = {.depth = variants[v][0], .ctype = variants[v][1]};
                int w = sides[i], h = square ? w : 23;
                pic p;
                png_build(&sp, w, h, (uint32_t)(v * 31 + i), &p);
                char what[96];
                snprintf(what, sizeof what, "depth %d type %d %dx%d", sp.depth, sp.ctype, w, h);
                check_pic(d, &p, what);
                pic_free(&p);
            }
    rf__decoder_destroy(d);
}

static void test_png_many_idat(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    for (size_t v = 0; v < N_VARIANTS; v++) {
        /* 1 byte per IDAT, then 7 with empty IDATs between, then 1000 */
        static const int pieces[] = {1, 7, 1000};
        for (int k = 0; k < 3; k++) {
            spec sp = {.depth = variants[v][0],
                       .ctype = variants[v][1],
                       .idat_piece = pieces[k],
                       .empty_idats = k == 1 ? 2 : 0};
            pic p;
            png_build(&sp, 40, 40, (uint32_t)v, &p);
            check_pic(d, &p, "IDAT split");
            pic_free(&p);
        }
    }
    rf__decoder_destroy(d);
}

/* The offset of the n-th (0-based) chunk of type t in p->file, and its length. */
static size_t find_chunk(const pic *p, const char *t, int n, uint32_t *len)
{
    for (size_t off = 8; off + 12 <= p->len;) {
        uint32_t l = (uint32_t)p->file[off] << 24 | (uint32_t)p->file[off + 1] << 16 |
                     (uint32_t)p->file[off + 2] << 8 | p->file[off + 3];
        if (!memcmp(p->file + off + 4, t, 4) && n-- == 0) {
            *len = l;
            return off;
        }
        off += 12 + (size_t)l;
    }
    fail_msg("no chunk %s", t);
    return 0;
}

/* Decoded with center 32 (the crop reads the middle rows): 0 or the error. */
static int decode_center(rf_decoder *d, const uint8_t *f, size_t len, int check_tail, uint8_t *buf,
                         char *err, size_t errcap, int *whole)
{
    rf_decode_opts o = opts(RF_TRANSFORM_CENTER, 32);
    o.check_tail = check_tail;
    rf_decode_times t;
    int rc = rf__decode_sample(d, f, len, &o, buf, err, errcap, &t);
    *whole = t.whole;
    return rc;
}

/* Where raw row y's filter byte lies in png_build's stream (one stored
 * block: y < 181 for 361-byte rows), as (file offset) for IDATs of piece
 * bytes. */
static size_t row_at(const pic *p, size_t y, size_t stride, size_t piece)
{
    size_t z = 2 + 5 + y * stride;
    uint32_t len;
    return find_chunk(p, "IDAT", (int)(z / piece), &len) + 8 + z % piece;
}

static void test_png_damage(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    /* 120 x 200, center 32: the crop reads rows ~45..~157 */
    spec sp = {.depth = 8, .ctype = 2, .idat_piece = 4096};
    pic p;
    png_build(&sp, 120, 200, 3, &p);
    uint8_t good[32 * 32 * 3], got[32 * 32 * 3];
    char err[256];
    int whole;
    assert_int_equal(decode_center(d, p.file, p.len, 1, good, err, sizeof err, &whole), 0);
    assert_int_equal(whole, 1);
    assert_int_equal(decode_center(d, p.file, p.len, 0, got, err, sizeof err, &whole), 0);
    assert_int_equal(whole, 0);
    assert_memory_equal(got, good, sizeof good);
    uint8_t *f = malloc(p.len);

    /* A bad CRC in an IDAT: an error when checked, ignored (as PIL does)
     * when not. (libspng checks a chunk's CRC when it reads the next chunk's
     * header, so not the last IDAT's: decode/png.c leaves that as it was.) */
    uint32_t len;
    size_t at = find_chunk(&p, "IDAT", 9, &len);
    memcpy(f, p.file, p.len);
    f[at + 8 + len] ^= 0x10;
    expect_error(d, f, p.len, 1, RF_E_DECODE, "invalid chunk checksum", "IDAT CRC");
    assert_int_equal(decode_center(d, f, p.len, 0, got, err, sizeof err, &whole), 0);
    assert_memory_equal(got, good, sizeof good);
    memcpy(f, p.file, p.len);
    f[at + 8 + 100] ^= 0x10; /* the data, not the CRC: the same */
    expect_error(d, f, p.len, 1, RF_E_DECODE, "invalid chunk checksum", "IDAT data flipped");

    /* Cut below the crop: an error when checked; unchecked, the crop still
     * decodes (libspng stops at its last row). Cut in the crop: an error. */
    expect_error(d, p.file, row_at(&p, 170, 361, 4096), 1, RF_E_DECODE, "PNG data", "cut");
    assert_int_equal(
        decode_center(d, p.file, row_at(&p, 170, 361, 4096), 0, got, err, sizeof err, &whole), 0);
    assert_int_equal(whole, 0);
    assert_memory_equal(got, good, sizeof good);
    expect_error(d, p.file, row_at(&p, 100, 361, 4096), 0, RF_E_DECODE, "PNG data",
                 "cut in the crop");

    /* A filter byte past Paeth below the crop: an error when checked only;
     * in the crop: an error either way. */
    memcpy(f, p.file, p.len);
    f[row_at(&p, 175, 361, 4096)] = 5;
    expect_error(d, f, p.len, 1, RF_E_DECODE, "PNG data", "filter 5, checked");
    assert_int_equal(decode_center(d, f, p.len, 0, got, err, sizeof err, &whole), 0);
    assert_memory_equal(got, good, sizeof good);
    memcpy(f, p.file, p.len);
    f[row_at(&p, 100, 361, 4096)] = 7;
    expect_error(d, f, p.len, 0, RF_E_DECODE, "PNG data", "filter 7 in the crop");

    /* A bad zlib block type: an error. */
    at = find_chunk(&p, "IDAT", 0, &len);
    memcpy(f, p.file, p.len);
    f[at + 8 + 2] = 0x07; /* BFINAL, BTYPE 11 */
    expect_error(d, f, p.len, 0, RF_E_DECODE, "PNG", "zlib block type 3");
    free(f);

    /* A stream longer than the picture (libspng ignores the rest), bytes
     * after IEND: decoded as PIL does. */
    pic q;
    spec longer = {.depth = 8, .ctype = 6, .extra = 300};
    png_build(&longer, 33, 33, 4, &q);
    check_pic(d, &q, "stream longer than the picture");
    pic_free(&q);
    spec tail = {.depth = 8, .ctype = 2, .idat_piece = 500, .tail = "garbage after IEND\n"};
    png_build(&tail, 33, 33, 5, &q);
    check_pic(d, &q, "bytes after IEND");
    pic_free(&q);
    /* The decoder goes on after all that. */
    assert_int_equal(decode_center(d, p.file, p.len, 1, got, err, sizeof err, &whole), 0);
    assert_memory_equal(got, good, sizeof good);
    pic_free(&p);
    rf__decoder_destroy(d);
}
#else
static void test_png_odd_widths(void **state)
{
    (void)state;
    skip();
}

static void test_png_many_idat(void **state)
{
    (void)state;
    skip();
}

static void test_png_damage(void **state)
{
    (void)state;
    skip();
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unfilter_rows),
        cmocka_unit_test(test_png_odd_widths),
        cmocka_unit_test(test_png_many_idat),
        cmocka_unit_test(test_png_damage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
