/*
 * test_testutil.c - checks the test-data generator every other test relies
 * on: each JPEG variant really is what it claims (read back from the
 * markers) and decodes to the picture it was made from, pictures compress
 * like photos, output is deterministic, folders and list files have the
 * ImageFolder layout, and the reference decoder refuses damaged data.
 */
#define _POSIX_C_SOURCE 200809L /* chmod, mkdir */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first. */
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

/* What the frame header and markers before the first scan say. */
typedef struct {
    int sof; /* 0xc0 baseline, 0xc1 extended, 0xc2 progressive, 0xc9/0xca arithmetic */
    int width, height;
    int ncomp;
    int hs[3], vs[3]; /* sampling factors */
    int dri;          /* a DRI marker with a non-zero interval */
} jinfo;

static int parse_markers(const uint8_t *p, size_t n, jinfo *ji)
{
    memset(ji, 0, sizeof *ji);
    if (n < 4 || p[0] != 0xff || p[1] != 0xd8)
        return -1;
    size_t i = 2;
    while (i + 4 <= n) {
        if (p[i] != 0xff)
            return -1;
        int m = p[i + 1];
        size_t len = (size_t)p[i + 2] << 8 | p[i + 3];
        if (i + 2 + len > n)
            return -1;
        const uint8_t *s = p + i + 4;
        if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
            ji->sof = m;
            ji->height = s[1] << 8 | s[2];
            ji->width = s[3] << 8 | s[4];
            ji->ncomp = s[5];
            for (int c = 0; c < ji->ncomp && c < 3; c++) {
                ji->hs[c] = s[6 + 3 * c + 1] >> 4;
                ji->vs[c] = s[6 + 3 * c + 1] & 15;
            }
        } else if (m == 0xdd) {
            ji->dri = (s[0] << 8 | s[1]) != 0;
        } else if (m == 0xda) {
            return ji->sof ? 0 : -1;
        }
        i += 2 + len;
    }
    return -1;
}

/* The luma libjpeg computes from RGB (jccolor.c's fixed-point BT.601). */
static uint8_t *gray_of(const uint8_t *rgb, size_t npix)
{
    uint8_t *g = malloc(npix * 3);
    assert_non_null(g);
    for (size_t i = 0; i < npix; i++) {
        const uint8_t *q = rgb + 3 * i;
        uint8_t y = (uint8_t)((19595 * q[0] + 38470 * q[1] + 7471 * q[2] + 32768) >> 16);
        g[3 * i] = g[3 * i + 1] = g[3 * i + 2] = y;
    }
    return g;
}

/* Checks the markers of jpg against what o asked for. */
static void check_variant(const uint8_t *jpg, size_t len, const tu_jpeg_opts *o)
{
    jinfo ji;
    assert_int_equal(parse_markers(jpg, len, &ji), 0);
    assert_int_equal(ji.width, o->width);
    assert_int_equal(ji.height, o->height);
    int sof = o->arithmetic ? (o->progressive ? 0xca : 0xc9) : (o->progressive ? 0xc2 : 0xc0);
    assert_int_equal(ji.sof, sof);
    assert_int_equal(ji.dri, o->restart_rows > 0);
    if (o->subsamp == TU_GRAY) {
        assert_int_equal(ji.ncomp, 1);
        return;
    }
    assert_int_equal(ji.ncomp, 3);
    assert_int_equal(ji.hs[0], o->subsamp == TU_444 ? 1 : 2);
    assert_int_equal(ji.vs[0], o->subsamp == TU_420 ? 2 : 1);
    for (int c = 1; c < 3; c++) {
        assert_int_equal(ji.hs[c], 1);
        assert_int_equal(ji.vs[c], 1);
    }
}

static void test_roundtrip_every_variant(void **state)
{
    (void)state;
    static const int sizes[][2] = {{1, 1}, {2, 3}, {17, 9}, {9, 17}, {333, 251}};
    /* progressive, restart rows, arithmetic */
    static const int coding[][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 3, 0},
                                    {0, 0, 1}, {1, 0, 1}, {0, 2, 1}};
    double worst = INFINITY, worst_luma = INFINITY; /* over sizes of 32 px and more */
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int w = sizes[s][0], h = sizes[s][1];
        uint8_t *rgb = tu_make_rgb(w, h, (uint32_t)(100 + s));
        assert_non_null(rgb);
        uint8_t *gray = gray_of(rgb, (size_t)w * h);
        for (int ss = TU_444; ss <= TU_GRAY; ss++) {
            for (size_t k = 0; k < sizeof coding / sizeof coding[0]; k++) {
                tu_jpeg_opts o = {w, h, 95, ss, coding[k][0], coding[k][1], coding[k][2], 0, 0, 0};
                uint8_t *jpg = NULL, *pix = NULL;
                size_t len = 0;
                int dw = 0, dh = 0;
                assert_int_equal(tu_encode_jpeg(rgb, &o, &jpg, &len), 0);
                assert_true(len > 100);
                check_variant(jpg, len, &o);
                assert_int_equal(tu_decode_jpeg(jpg, len, &pix, &dw, &dh), 0);
                assert_int_equal(dw, w);
                assert_int_equal(dh, h);
                size_t npix = (size_t)w * h;
                double p = tu_psnr(pix, ss == TU_GRAY ? gray : rgb, npix * 3);
                uint8_t *ypix = gray_of(pix, npix);
                double py = tu_psnr(ypix, gray, npix * 3);
                free(ypix);
                if (getenv("TU_VERBOSE"))
                    print_message("%dx%d subsamp %d coding %zu: %.2f dB (luma %.2f)\n", w, h, ss, k,
                                  p, py);
                /* Luma is never subsampled: it must survive at q95 whatever
                 * the size. Colour must too, except where halving chroma
                 * resolution on a picture a few pixels wide loses whole
                 * shapes' colour edges (4:2:0 at 17x9: 27 dB); there a
                 * lower bound still catches swapped or misplaced chroma. */
                assert_true(py > 30.0);
                int tiny = w < 32 || h < 32;
                assert_true(p > (tiny && (ss == TU_420 || ss == TU_422) ? 24.0 : 30.0));
                if (!tiny && p < worst)
                    worst = p;
                if (py < worst_luma)
                    worst_luma = py;
                free(jpg);
                free(pix);
            }
        }
        free(gray);
        free(rgb);
    }
    print_message("round trip at q95: worst RGB PSNR %.2f dB (333x251), worst luma %.2f dB\n",
                  worst, worst_luma);
}

static void test_photo_like_sizes(void **state)
{
    (void)state;
    /* ImageNet photos at about this size and quality weigh 60-120 KB; the
     * content must cost what real photos cost, or decode-speed figures mean
     * little. */
    size_t sum = 0, lo = SIZE_MAX, hi = 0;
    for (uint32_t seed = 0; seed < 16; seed++) {
        tu_jpeg_opts o = {500, 375, 90, TU_420, 0, 0, 0, seed, 0, 0};
        uint8_t *jpg;
        size_t len;
        assert_int_equal(tu_make_jpeg(&o, &jpg, &len), 0);
        assert_in_range(len, 60000, 125000);
        sum += len;
        lo = len < lo ? len : lo;
        hi = len > hi ? len : hi;
        if (seed == 0) {
            /* Variants order as they do for photos: 4:4:4 costs more, gray
             * and progressive (optimised Huffman tables) cost less. */
            size_t l2;
            uint8_t *j2;
            o.subsamp = TU_444;
            assert_int_equal(tu_make_jpeg(&o, &j2, &l2), 0);
            assert_true(l2 > len * 11 / 10);
            free(j2);
            o.subsamp = TU_GRAY;
            assert_int_equal(tu_make_jpeg(&o, &j2, &l2), 0);
            assert_true(l2 < len);
            free(j2);
            o.subsamp = TU_420;
            o.progressive = 1;
            assert_int_equal(tu_make_jpeg(&o, &j2, &l2), 0);
            assert_true(l2 < len);
            free(j2);
        }
        free(jpg);
    }
    print_message("500x375 q90 4:2:0: %zu..%zu bytes, mean %zu\n", lo, hi, sum / 16);
    assert_in_range(sum / 16, 70000, 110000);
}

static void test_same_seed_same_bytes(void **state)
{
    (void)state;
    tu_jpeg_opts o = {123, 77, 90, TU_420, 1, 0, 0, 42, 0, 0};
    uint8_t *a, *b, *c;
    size_t la, lb, lc;
    assert_int_equal(tu_make_jpeg(&o, &a, &la), 0);
    assert_int_equal(tu_make_jpeg(&o, &b, &lb), 0);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    o.seed = 43;
    assert_int_equal(tu_make_jpeg(&o, &c, &lc), 0);
    assert_true(la != lc || memcmp(a, c, la) != 0);
    free(a);
    free(b);
    free(c);

    uint8_t *p = tu_make_rgb(64, 48, 7), *q = tu_make_rgb(64, 48, 7);
    assert_non_null(p);
    assert_non_null(q);
    assert_memory_equal(p, q, 64 * 48 * 3);
    free(p);
    free(q);
}

static void test_encode_rejects_bad_options(void **state)
{
    (void)state;
    uint8_t *rgb = tu_make_rgb(8, 8, 1);
    uint8_t *jpg = NULL;
    size_t len = 0;
    const tu_jpeg_opts good = {8, 8, 90, TU_420, 0, 0, 0, 1, 0, 0};
    tu_jpeg_opts o = good;
    o.quality = 0;
    assert_int_equal(tu_encode_jpeg(rgb, &o, &jpg, &len), -1);
    o = good;
    o.width = 0;
    assert_int_equal(tu_encode_jpeg(rgb, &o, &jpg, &len), -1);
    o = good;
    o.subsamp = 7;
    assert_int_equal(tu_encode_jpeg(rgb, &o, &jpg, &len), -1);
    o = good;
    o.height = 70000;
    assert_int_equal(tu_make_jpeg(&o, &jpg, &len), -1);
    assert_null(tu_make_rgb(0, 5, 1));
    assert_null(jpg);
    free(rgb);
}

static void test_decode_refuses_damaged_data(void **state)
{
    (void)state;
    tu_jpeg_opts o = {200, 150, 90, TU_420, 0, 0, 0, 5, 0, 0};
    uint8_t *jpg, *pix = NULL;
    size_t len;
    int w, h;
    assert_int_equal(tu_make_jpeg(&o, &jpg, &len), 0);
    assert_int_equal(tu_decode_jpeg(jpg, len, &pix, &w, &h), 0);
    free(pix);
    pix = NULL;

    /* Truncated: libjpeg only warns (and pads with gray); must be an error. */
    assert_int_equal(tu_decode_jpeg(jpg, len / 2, &pix, &w, &h), -1);
    assert_null(pix);
    /* Progressive files fail the same way. */
    o.progressive = 1;
    uint8_t *pj;
    size_t pl;
    assert_int_equal(tu_make_jpeg(&o, &pj, &pl), 0);
    assert_int_equal(tu_decode_jpeg(pj, pl * 2 / 3, &pix, &w, &h), -1);
    free(pj);
    /* Not a JPEG at all. */
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
    assert_int_equal(tu_decode_jpeg(png, sizeof png, &pix, &w, &h), -1);
    assert_int_equal(tu_decode_jpeg(jpg, 0, &pix, &w, &h), -1);
    assert_int_equal(tu_decode_jpeg(jpg, 2, &pix, &w, &h), -1);
    /* Garbage after a valid header: corrupt entropy data. */
    uint8_t *bad = malloc(len);
    assert_non_null(bad);
    memcpy(bad, jpg, len);
    jinfo ji;
    assert_int_equal(parse_markers(bad, len, &ji), 0);
    for (size_t i = len / 3; i < len - 2; i++)
        bad[i] = (uint8_t)(i * 37 + 11) == 0xff ? 0 : (uint8_t)(i * 37 + 11);
    assert_int_equal(tu_decode_jpeg(bad, len, &pix, &w, &h), -1);
    assert_null(pix);
    free(bad);
    free(jpg);
}

static void test_files_and_tempdirs(void **state)
{
    (void)state;
    char *dir = tu_tempdir("tu");
    assert_non_null(dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/a.bin", dir);
    uint8_t data[70000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7);
    assert_int_equal(tu_write_file(path, data, sizeof data), 0);
    size_t n = 0;
    uint8_t *back = tu_read_file(path, &n);
    assert_non_null(back);
    assert_int_equal(n, sizeof data);
    assert_memory_equal(back, data, n);
    free(back);

    assert_int_equal(tu_write_file(path, NULL, 0), 0);
    back = tu_read_file(path, &n);
    assert_non_null(back);
    assert_int_equal(n, 0);
    free(back);
    snprintf(path, sizeof path, "%s/missing", dir);
    assert_null(tu_read_file(path, &n));

    /* rmtree copes with nesting and with a directory chmod'ed to 000. */
    snprintf(path, sizeof path, "%s/x", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/x/y", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/x/y/f", dir);
    assert_int_equal(tu_write_file(path, "z", 1), 0);
    snprintf(path, sizeof path, "%s/x/y", dir);
    assert_int_equal(chmod(path, 0), 0);
    tu_rmtree(dir);
    struct stat st;
    assert_int_not_equal(stat(dir, &st), 0);
    free(dir);
}

/* Entries of dir whose names end with ext, counted with readdir so that
 * tu_make_list's own view of the folder is not what checks it. */
static int count_entries(const char *dir, const char *ext)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    size_t el = strlen(ext);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        n += l > el && strcmp(de->d_name + l - el, ext) == 0;
    }
    closedir(d);
    return n;
}

static void test_folder_layout(void **state)
{
    (void)state;
    char *root = tu_tempdir("tu-folder");
    assert_non_null(root);
    enum { C = 3, P = 9, W = 40, H = 30 };
    assert_int_equal(tu_make_folder(root, C, P, W, H, 7), 0);
    tu_folder_opts f = {C, P, W, H, 90, 7, TU_MIX_CYCLE};
    int variants[8] = {0};
    for (int i = 0; i < C * P; i++) {
        char path[4096];
        assert_int_equal(tu_folder_path(path, sizeof path, root, &f, i), 0);
        char want[4096];
        snprintf(want, sizeof want, "%s/class%02d/img%04d.jpg", root, i / P, i % P);
        assert_string_equal(path, want);
        size_t len;
        uint8_t *jpg = tu_read_file(path, &len), *pix;
        assert_non_null(jpg);
        tu_jpeg_opts o;
        tu_folder_item(&f, i, &o);
        check_variant(jpg, len, &o);
        int w, h;
        assert_int_equal(tu_decode_jpeg(jpg, len, &pix, &w, &h), 0);
        assert_int_equal(w, o.width);
        assert_int_equal(h, o.height);
        /* +-20% around the nominal size, every fifth one portrait. */
        int lw = i % 5 == 3 ? h : w, lh = i % 5 == 3 ? w : h;
        assert_in_range(lw, W * 8 / 10, W * 12 / 10);
        assert_in_range(lh, H * 8 / 10, H * 12 / 10);
        if (i % 5 == 3)
            assert_true(w <= h);
        variants[i % 8]++;
        free(pix);
        free(jpg);
    }
    for (int v = 0; v < 8; v++)
        assert_true(variants[v] > 0);
    for (int c = 0; c < C; c++) {
        char d[4096];
        snprintf(d, sizeof d, "%s/class%02d", root, c);
        assert_int_equal(count_entries(d, ".jpg"), P);
    }

    /* Files the list must ignore: other extensions, a directory named like
     * an image, a stray file at the top. */
    char p[4096];
    snprintf(p, sizeof p, "%s/class01/notes.txt", root);
    assert_int_equal(tu_write_file(p, "x", 1), 0);
    snprintf(p, sizeof p, "%s/class01/dir.jpg", root);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/README", root);
    assert_int_equal(tu_write_file(p, "x", 1), 0);

    /* A list inside the folder's parent gets relative paths. */
    char *top = tu_tempdir("tu-list");
    assert_non_null(top);
    char sub[4096], list[4096];
    snprintf(sub, sizeof sub, "%s/data", top);
    assert_int_equal(tu_make_folder(sub, 2, 3, 16, 12, 1), 0);
    snprintf(list, sizeof list, "%s/train.txt", top);
    assert_int_equal(tu_make_list(list, sub), 6);
    size_t n;
    char *text = (char *)tu_read_file(list, &n);
    assert_non_null(text);
    assert_string_equal(text, "data/class00/img0000.jpg\t0\n"
                              "data/class00/img0001.jpg\t0\n"
                              "data/class00/img0002.jpg\t0\n"
                              "data/class01/img0000.jpg\t1\n"
                              "data/class01/img0001.jpg\t1\n"
                              "data/class01/img0002.jpg\t1\n");
    free(text);

    /* Elsewhere: absolute paths, labels in class order, extras ignored. */
    assert_int_equal(tu_make_list(list, root), C * P);
    text = (char *)tu_read_file(list, &n);
    assert_non_null(text);
    int line = 0;
    for (char *s = text, *e; (e = strchr(s, '\n')) != NULL; s = e + 1, line++) {
        *e = 0;
        char *tab = strchr(s, '\t');
        assert_non_null(tab);
        *tab = 0;
        assert_int_equal(s[0], '/');
        assert_int_equal(atoi(tab + 1), line / P);
        char want[4096];
        snprintf(want, sizeof want, "/class%02d/img%04d.jpg", line / P, line % P);
        assert_non_null(strstr(s, want));
        struct stat st;
        assert_int_equal(stat(s, &st), 0);
    }
    assert_int_equal(line, C * P);
    free(text);
    tu_rmtree(top);
    free(top);

    /* Same seed, same bytes, file by file. */
    char *again = tu_tempdir("tu-folder2");
    assert_non_null(again);
    assert_int_equal(tu_make_folder(again, C, P, W, H, 7), 0);
    for (int i = 0; i < C * P; i++) {
        char a[4096], b[4096];
        size_t la, lb;
        assert_int_equal(tu_folder_path(a, sizeof a, root, &f, i), 0);
        assert_int_equal(tu_folder_path(b, sizeof b, again, &f, i), 0);
        uint8_t *x = tu_read_file(a, &la), *y = tu_read_file(b, &lb);
        assert_non_null(x);
        assert_non_null(y);
        assert_int_equal(la, lb);
        assert_memory_equal(x, y, la);
        free(x);
        free(y);
    }
    tu_rmtree(again);
    free(again);
    tu_rmtree(root);
    free(root);
}

static void test_folder_names_stay_sorted(void **state)
{
    (void)state;
    /* With 100+ classes or 10000+ images the padding widens so that name
     * order (ImageFolder's label order) stays index order. */
    tu_folder_opts f = {120, 10001, 10, 10, 90, 0, TU_MIX_CYCLE};
    char a[256], b[256];
    assert_int_equal(tu_folder_path(a, sizeof a, "r", &f, 0), 0);
    assert_string_equal(a, "r/class000/img00000.jpg");
    assert_int_equal(tu_folder_path(b, sizeof b, "r", &f, 119 * 10001 + 10000), 0);
    assert_string_equal(b, "r/class119/img10000.jpg");
    assert_int_equal(tu_folder_path(b, sizeof b, "r", &f, 120 * 10001), -1);
    assert_int_equal(tu_folder_path(b, 8, "r", &f, 0), -1);
}

static void test_photo_mix(void **state)
{
    (void)state;
    tu_folder_opts f = {10, 300, 500, 375, 90, 3, TU_MIX_PHOTO};
    int base420 = 0, prog = 0, s444 = 0, s422 = 0, gray = 0, rst = 0, portrait = 0, arith = 0;
    for (int i = 0; i < 3000; i++) {
        tu_jpeg_opts o;
        tu_folder_item(&f, i, &o);
        assert_int_equal(o.quality, 90);
        int lw = o.width, lh = o.height;
        if (o.height > o.width) {
            portrait++;
            lw = o.height;
            lh = o.width;
        }
        assert_in_range(lw, 400, 600);
        assert_in_range(lh, 300, 450);
        base420 += o.subsamp == TU_420 && !o.progressive && !o.restart_rows;
        prog += o.progressive;
        s444 += o.subsamp == TU_444;
        s422 += o.subsamp == TU_422;
        gray += o.subsamp == TU_GRAY;
        rst += o.restart_rows > 0;
        arith += o.arithmetic;
    }
    print_message("photo mix of 3000: %d baseline 4:2:0, %d progressive, %d 4:4:4, %d 4:2:2, "
                  "%d gray, %d restart, %d portrait\n",
                  base420, prog, s444, s422, gray, rst, portrait);
    assert_in_range(base420, 2400, 2700);
    assert_in_range(prog, 100, 300);
    assert_true(s444 > 30 && s422 > 10 && gray > 10 && rst > 5);
    assert_int_equal(arith, 0);
    assert_in_range(portrait, 450, 750);
}

static void test_psnr_of_known_error(void **state)
{
    (void)state;
    uint8_t a[4] = {10, 20, 30, 40}, b[4] = {10, 20, 30, 41};
    assert_true(isinf(tu_psnr(a, a, 4)));
    /* MSE 1/4: 10*log10(255^2 * 4) = 54.15 dB */
    assert_true(fabs(tu_psnr(a, b, 4) - 54.15) < 0.01);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_every_variant),
        cmocka_unit_test(test_photo_like_sizes),
        cmocka_unit_test(test_same_seed_same_bytes),
        cmocka_unit_test(test_encode_rejects_bad_options),
        cmocka_unit_test(test_decode_refuses_damaged_data),
        cmocka_unit_test(test_files_and_tempdirs),
        cmocka_unit_test(test_folder_layout),
        cmocka_unit_test(test_folder_names_stay_sorted),
        cmocka_unit_test(test_photo_mix),
        cmocka_unit_test(test_psnr_of_known_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
