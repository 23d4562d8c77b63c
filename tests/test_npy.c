/*
 * test_npy.c - raw pixels in NumPy's .npy format (lib/decode_npy.c): arrays
 * of shape (H, W, 3), (H, W, 1) and (H, W) read with no decode, through
 * transform "none", center and random_resized_crop (formatcheck.h), the
 * header's accepted spellings (versions 1.0 to 3.0, key order, quotes,
 * byte-order marks, trailing commas, Python 2's long suffix), and every
 * refusal named: another dtype, Fortran order, a bad shape, data shorter or
 * longer than the shape, a header past the end, a malformed dict, the pixel
 * limit. Then tar shards whose pictures are .npy members, indexed and
 * loaded end to end; a .npy beside another picture is not the picture.
 */
#define _GNU_SOURCE
#include "formatcheck.h"

#include "source.h"
#include "tarwrite.h"
#include "testcheck.h"
#include "testutil.h"

/* An .npy file: the magic, version major.0, the header text as given
 * (padded with spaces and a newline to a multiple of 64 bytes, as NumPy
 * pads), then the data. */
static void npy_raw(int major, const char *header, const uint8_t *data, size_t dlen, pic *p)
{
    size_t pre = major == 1 ? 10 : 12, hl = strlen(header);
    size_t total = (pre + hl + 1 + 63) / 64 * 64, hlen = total - pre;
    p->len = total + dlen;
    p->file = malloc(p->len);
    memcpy(p->file, "\x93NUMPY", 6);
    p->file[6] = (uint8_t)major;
    p->file[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        p->file[8 + i] = (uint8_t)(hlen >> (8 * i));
    memset(p->file + pre, ' ', hlen);
    memcpy(p->file + pre, header, hl);
    p->file[total - 1] = '\n';
    if (dlen)
        memcpy(p->file + total, data, dlen);
}

/* An h x w picture of c channels (0: shape (H, W)), random pixels, as
 * np.save writes it; p->rgb the RGB it means. */
static void npy_make(int h, int w, int c, uint32_t seed, pic *p)
{
    int ch = c ? c : 1;
    size_t n = (size_t)h * w * ch;
    uint8_t *d = malloc(n);
    for (size_t i = 0; i < n; i++)
        d[i] = (uint8_t)rnd(&seed);
    char hdr[128];
    if (c)
        snprintf(hdr, sizeof hdr,
                 "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d, %d), }", h, w, c);
    else
        snprintf(hdr, sizeof hdr, "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d), }",
                 h, w);
    npy_raw(1, hdr, d, n, p);
    p->w = w;
    p->h = h;
    p->rgb = malloc((size_t)h * w * 3);
    for (size_t i = 0; i < (size_t)h * w; i++)
        for (int k = 0; k < 3; k++)
            p->rgb[3 * i + k] = d[i * ch + (ch == 3 ? k : 0)];
    free(d);
}

static void test_npy_shapes(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    static const int sizes[][3] = {{64, 64, 3}, {57, 83, 3}, {90, 41, 3}, {48, 48, 1},
                                   {37, 70, 1}, {40, 40, 0}, {71, 33, 0}, {1, 1, 3}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        pic p;
        npy_make(sizes[i][0], sizes[i][1], sizes[i][2], 5 + (uint32_t)i, &p);
        char what[64];
        snprintf(what, sizeof what, "npy %dx%dx%d", sizes[i][0], sizes[i][1], sizes[i][2]);
        check_pic(d, &p, what);
        pic_free(&p);
    }
    rf__decoder_destroy(d);
}

/* np.save's own bytes for a 2x3x3 array, and other spellings of the header
 * NumPy (and Python's literal_eval) reads the same way. */
static void test_npy_header_spellings(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    pic p;
    npy_make(2, 3, 3, 9, &p);
    static const uint8_t numpy_prefix[] = "\x93NUMPY\x01\x00v\x00{'descr': '|u1', "
                                          "'fortran_order': False, 'shape': (2, 3, 3), }";
    assert_memory_equal(p.file, numpy_prefix, sizeof numpy_prefix - 1);
    assert_int_equal(p.len, 128 + 18); /* np.save pads the header to 128 bytes */
    const uint8_t *data = p.file + 128;
    static const struct {
        int major;
        const char *h;
    } ok[] = {
        {2, "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3, 3), }"},
        {3, "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3, 3), }"},
        {1, "{'shape': (2, 3, 3), 'fortran_order': False, 'descr': '<u1'}"},
        {1, "{\"descr\": \"u1\", \"fortran_order\": False, \"shape\": (2L, 3L, 3L)}"},
        {1, " { 'descr' : '>u1' ,\n'fortran_order':False,'shape':( 2 , 3 , 3 , ) , } "},
    };
    uint8_t out[3 * 3 * 3]; /* a 3x3 output */
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        pic q = {0};
        npy_raw(ok[i].major, ok[i].h, data, 18, &q);
        rf_decode_opts o = opts(RF_TRANSFORM_RANDOM_RESIZED_CROP, 3);
        /* "none" needs a square: decode a 2x3 through the resampler */
        char err[256] = "";
        rf_decode_times t;
        pic ref = p;
        uint8_t want[3 * 3 * 3];
        assert_int_equal(decode(d, &ref, &o, want, err, sizeof err, &t), 0);
        int rc = decode(d, &q, &o, out, err, sizeof err, &t);
        if (rc != 0)
            fail_msg("header %zu refused: %s", i, err);
        assert_memory_equal(out, want, sizeof want);
        assert_int_equal(t.width, 3);
        assert_int_equal(t.height, 2);
        pic_free(&q);
    }
    pic_free(&p);
    rf__decoder_destroy(d);
}

static void expect_header_error(rf_decoder *d, int major, const char *header, size_t dlen,
                                const char *want)
{
    uint8_t data[64 * 64 * 3] = {0};
    pic q = {0};
    npy_raw(major, header, data, dlen, &q);
    expect_error(d, q.file, q.len, 1, RF_E_DECODE, want, header);
    pic_free(&q);
}

static void test_npy_refusals(void **state)
{
    (void)state;
    rf_decoder *d = rf__decoder_create();
    const char *good = "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 4, 3), }";
    static const struct {
        const char *h;
        size_t dlen;
        const char *want;
    } bad[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4, 3), }", 192, "dtype '<f4'"},
        {"{'descr': '|i1', 'fortran_order': False, 'shape': (4, 4, 3), }", 48, "expected uint8"},
        {"{'descr': '|u1', 'fortran_order': True, 'shape': (4, 4, 3), }", 48, "Fortran order"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (4, 4, 4), }", 64, "not 1 or 3"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (48,), }", 48, "1 dimensions"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (2, 2, 4, 3), }", 48, "4 dimensions"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (), }", 1, "0 dimensions"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (0, 4, 3), }", 0, "a side is 0"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (4, 4, 3), }", 47,
         "47 bytes of data, the shape (4, 4, 3) needs 48 (truncated)"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (4, 4, 3), }", 49, "49 bytes of data"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (99999, 99999, 3), }", 48,
         "needs 29999400003"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (3000000000, 4, 3), }", 48,
         "too large"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (4, 4, 3), 'x': 1}", 48,
         "key 'x' unknown"},
        {"{'descr': '|u1', 'descr': '|u1', 'shape': (4, 4, 3), }", 48, "'descr' repeated"},
        {"{'descr': '|u1', 'shape': (4, 4, 3), }", 48, "lacks 'fortran_order'"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (4, 4, 3), ", 48, "malformed"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (4, 4, 3)} x", 48, "bytes after"},
        {"{'descr': '|u1', 'fortran_order': 0, 'shape': (4, 4, 3), }", 48,
         "value of 'fortran_order'"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (4, -4, 3), }", 48, "value of 'shape'"},
        {"{'descr': '|u\\x31', 'fortran_order': False, 'shape': (4, 4, 3), }", 48,
         "value of 'descr'"},
        {"['descr', '|u1']", 48, "not a dict"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_header_error(d, 1, bad[i].h, bad[i].dlen, bad[i].want);

    /* the preamble: a version NumPy never wrote, a header running past the end */
    pic q = {0};
    uint8_t data[48] = {0};
    npy_raw(1, good, data, sizeof data, &q);
    q.file[6] = 4;
    expect_error(d, q.file, q.len, 1, RF_E_DECODE, "format version 4.0", "version");
    q.file[6] = 1;
    q.file[7] = 1;
    expect_error(d, q.file, q.len, 1, RF_E_DECODE, "format version 1.1", "minor");
    q.file[7] = 0;
    q.file[8] = 0xff;
    q.file[9] = 0x7f;
    expect_error(d, q.file, q.len, 1, RF_E_DECODE, "runs past the end", "header length");
    expect_error(d, q.file, 9, 1, RF_E_DECODE, "npy: truncated (9 bytes)", "short");
    pic_free(&q);
    npy_raw(2, good, data, sizeof data, &q);
    q.file[10] = 0x10; /* a 4-byte length of about a megabyte */
    expect_error(d, q.file, q.len, 1, RF_E_DECODE, "is too long", "long header");
    pic_free(&q);

    /* the pixel limit, from the header, before any pixel is touched */
    pic big;
    npy_make(100, 100, 3, 1, &big);
    rf_decode_opts o = opts(RF_TRANSFORM_CENTER, 32);
    o.max_pixels = 5000;
    uint8_t out[32 * 32 * 3];
    char err[256] = "";
    rf_decode_times t;
    assert_int_equal(rf__decode_sample(d, big.file, big.len, &o, out, err, sizeof err, &t),
                     RF_E_LIMIT);
    assert_non_null(strstr(err, "100x100"));
    pic_free(&big);
    rf__decoder_destroy(d);
}

/* ---- tar shards of .npy members ------------------------------------------ */

static void put_sample(tw *t, const char *key, const char *ext, const pic *p, int label)
{
    char name[128], cls[16];
    snprintf(name, sizeof name, "%s.%s", key, ext);
    assert_int_equal(tw_file(t, name, p->file, p->len), 0);
    if (label >= 0) {
        snprintf(name, sizeof name, "%s.cls", key);
        snprintf(cls, sizeof cls, "%d", label);
        assert_int_equal(tw_file(t, name, cls, strlen(cls)), 0);
    }
}

/* Samples of .npy pictures load as their pixels (transform "none"), labels
 * and order kept; a .npy beside a .jpg of the same key is not the picture. */
static void test_npy_shard_loads(void **state)
{
    (void)state;
    char *dir = tu_tempdir("npy");
    char path[512];
    snprintf(path, sizeof path, "%s/s-0.tar", dir);
    tw t;
    assert_int_equal(tw_open(&t, path, TW_USTAR), 0);
    enum { N = 6, SIDE = 16 };
    pic pics[N];
    for (int i = 0; i < N; i++) {
        npy_make(SIDE, SIDE, i % 3 == 2 ? 0 : 3, 40 + (uint32_t)i, &pics[i]);
        char key[16];
        snprintf(key, sizeof key, "k%02d", i);
        put_sample(&t, key, "npy", &pics[i], i % 4);
    }
    /* a JPEG sample carrying a .npy (an embedding, say): the JPEG is its picture */
    uint8_t *jpg;
    size_t jlen;
    tu_jpeg_opts jo = {.width = SIDE, .height = SIDE, .quality = 90, .subsamp = TU_444, .seed = 3};
    assert_int_equal(tu_make_jpeg(&jo, &jpg, &jlen), 0);
    pic emb;
    npy_make(1, 8, 0, 1, &emb);
    pic jp = {.file = jpg, .len = jlen};
    assert_int_equal(tw_file(&t, "k99.npy", emb.file, emb.len), 0);
    put_sample(&t, "k99", "jpg", &jp, 1);
    assert_int_equal(tw_close(&t), 0);

    rf_source s;
    tu_source_open_ok(&s, path, NULL);
    assert_int_equal(s.n, N + 1);
    char name[256];
    rf__source_name(&s, N, name, sizeof name);
    assert_non_null(strstr(name, "k99.jpg"));
    rf__source_close(&s);

    rf_loader *l =
        TU_LOADER(path, {RF_P_BATCH_SIZE, N + 1}, {RF_P_IMAGE_SIZE, SIDE},
                  {RF_P_TRANSFORM, RF_TRANSFORM_NONE}, {RF_P_SHUFFLE, 0}, {RF_P_NUM_WORKERS, 2});
    tu_start(l);
    rf_batch *b;
    assert_int_equal(rf_loader_next(l, &b), RF_OK);
    assert_int_equal(rf_batch_count(b), N + 1);
    const uint8_t *px = rf_batch_data(b);
    const int64_t *labels = rf_batch_labels(b);
    for (int i = 0; i < N; i++) {
        assert_memory_equal(px + (size_t)i * SIDE * SIDE * 3, pics[i].rgb, SIDE * SIDE * 3);
        assert_int_equal(labels[i], i % 4);
    }
    uint8_t *ref;
    assert_int_equal(tu_decode_jpeg(jpg, jlen, &ref, NULL, NULL), 0);
    assert_memory_equal(px + (size_t)N * SIDE * SIDE * 3, ref, SIDE * SIDE * 3);
    free(ref);
    rf_batch_release(b);
    rf_loader_destroy(l);
    for (int i = 0; i < N; i++)
        pic_free(&pics[i]);
    pic_free(&emb);
    free(jpg);
    tu_tempdir_remove(&dir);
}

/* A shard member with a bad header is an error naming the member and the
 * reason, or with on_error skip a recorded skip. */
static void test_npy_bad_member_named(void **state)
{
    (void)state;
    char *dir = tu_tempdir("npybad");
    char path[512];
    snprintf(path, sizeof path, "%s/s-0.tar", dir);
    tw t;
    assert_int_equal(tw_open(&t, path, TW_USTAR), 0);
    pic good, bad = {0};
    npy_make(8, 8, 3, 2, &good);
    uint8_t data[8 * 8 * 4] = {0};
    npy_raw(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (8, 8), }", data, sizeof data,
            &bad);
    put_sample(&t, "a", "npy", &good, 0);
    put_sample(&t, "b", "npy", &bad, 1);
    assert_int_equal(tw_close(&t), 0);
    rf_loader *l = TU_LOADER(path, {RF_P_BATCH_SIZE, 2}, {RF_P_IMAGE_SIZE, 8}, {RF_P_SHUFFLE, 0},
                             {RF_P_NUM_WORKERS, 1});
    tu_start(l);
    rf_batch *b = NULL;
    int rc = rf_loader_next(l, &b);
    assert_true(rc < 0);
    const char *msg = rf_loader_errmsg(l);
    if (!strstr(msg, "b.npy") || !strstr(msg, "dtype '<f4'"))
        fail_msg("message: %s", msg);
    rf_loader_destroy(l);
    pic_free(&good);
    pic_free(&bad);
    tu_tempdir_remove(&dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npy_shapes),           cmocka_unit_test(test_npy_header_spellings),
        cmocka_unit_test(test_npy_refusals),         cmocka_unit_test(test_npy_shard_loads),
        cmocka_unit_test(test_npy_bad_member_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
