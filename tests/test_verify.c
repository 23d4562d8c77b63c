/*
 * test_verify.c - damage that only a decode to the end of the data finds
 * (RF_P_VERIFY), end to end through the public API: a bit flip libjpeg
 * reports only at the end marker, and a picture cut in rows a center crop
 * never reaches, under each verify mode.
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

#include "faultset.h"
#include "ringfeed.h"
#include "testcheck.h"
#include "testutil.h"

/* A bit flip that desynchronises the Huffman stream without hitting a
 * marker is reported by libjpeg only at the end of the data ("N extraneous
 * bytes before marker 0xd9"): the decoder must read on to the end marker
 * (it once stopped after the last row it needed and delivered garbage,
 * PSNR ~17 dB against the clean picture). */
static void test_bitflip_found_only_at_the_end(void **state)
{
    (void)state;
    size_t len;
    uint8_t *base = fs_jpeg(TU_420, 0, 0, 0, 21, &len), *f = NULL;
    size_t sos = tu_jpeg_sos_offset(base, len);
    uint64_t rs = 0x1234567ULL;
    int found = 0;
    for (int tries = 0; tries < 5000 && !found; tries++) {
        free(f);
        f = fs_dup(base, len);
        rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
        f[sos + 20 + (size_t)(rs % (len - sos - 24))] ^= (uint8_t)(1u << (rs >> 40) % 8);
        uint8_t *px;
        if (tu_decode_jpeg(f, len, &px, NULL, NULL) == 0)
            free(px);
        else if (!tu_jpeg_fails_in_rows(f, len))
            found = 1;
    }
    assert_true(found);
    char dir[2200], p[2300];
    fs_one_class_folder(dir, sizeof dir, "late");
    snprintf(p, sizeof p, "%s/x/desync.jpg", dir);
    assert_int_equal(tu_write_file(p, f, len), 0);
    rf_loader *l = fs_loader(dir, RF_TRANSFORM_NONE, FS_SIDE, 1, 1);
    tu_start(l);
    rf_batch *b;
    int rc = rf_loader_next(l, &b);
    if (rc == RF_OK)
        rf_batch_release(b);
    assert_int_equal(rc, RF_E_DECODE);
    assert_non_null(strstr(rf_loader_errmsg(l), "extraneous bytes"));
    rf_loader_destroy(l);
    tu_rmtree(dir);
    free(f);
    free(base);
}

/* RF_P_VERIFY: a portrait picture cut in its last rows, which a center crop
 * never reaches, beside intact ones. ONCE and ALWAYS report it in every epoch
 * and deliver the same bytes; ONCE decodes the intact files to their end only
 * once ("verified" counts them), then down to the crop's last row; NONE
 * delivers the cut picture's crop. */
static uint64_t verify_epochs(const char *dir, int mode, int64_t *errors, int64_t *verified)
{
    rf_loader *l = fs_loader(dir, RF_TRANSFORM_CENTER, 64, 3, 2);
    assert_int_equal(rf_loader_set_param(l, RF_P_ON_ERROR, RF_ON_ERROR_SKIP), 0);
    if (mode >= 0)
        assert_int_equal(rf_loader_set_param(l, RF_P_VERIFY, mode), 0);
    tu_start(l);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int e = 0; e < 3; e++) {
        assert_int_equal(rf_loader_set_epoch(l, e), 0);
        rf_batch *b;
        int rc;
        while ((rc = rf_loader_next(l, &b)) == RF_OK) {
            const uint8_t *p = rf_batch_data(b);
            for (size_t i = 0; i < rf_batch_nbytes(b); i++)
                h = (h ^ p[i]) * 0x100000001b3ULL;
            rf_batch_release(b);
        }
        assert_int_equal(rc, RF_END_OF_EPOCH);
        char *st = tu_stats(l);
        errors[e] = tu_stats_int(st, "errors_count");
        verified[e] = tu_stats_int(st, "verified");
        free(st);
    }
    rf_loader_destroy(l);
    return h;
}

static void test_verify_modes(void **state)
{
    (void)state;
    char dir[2200], p[2300];
    fs_one_class_folder(dir, sizeof dir, "verify");
    const int ngood = 5;
    for (int i = 0; i <= ngood; i++) {
        /* 96x200: the center crop at 64 reads rows 57..143 or so */
        tu_jpeg_opts o = {96, 200, 88, TU_420, 0, 0, 0, (uint32_t)(300 + i), 0, 0};
        uint8_t *jpg;
        size_t len;
        assert_int_equal(tu_make_jpeg(&o, &jpg, &len), 0);
        if (i == ngood) {
            len -= len / 10; /* cut in its last rows */
            uint8_t *px;
            assert_int_not_equal(tu_decode_jpeg(jpg, len, &px, NULL, NULL), 0);
        }
        snprintf(p, sizeof p, "%s/x/%s%d.jpg", dir, i == ngood ? "cut" : "good", i);
        assert_int_equal(tu_write_file(p, jpg, len), 0);
        free(jpg);
    }
    int64_t err_once[3], ver_once[3], err_always[3], ver_always[3], err_none[3], ver_none[3];
    uint64_t once = verify_epochs(dir, -1, err_once, ver_once); /* the default */
    uint64_t always = verify_epochs(dir, RF_VERIFY_ALWAYS, err_always, ver_always);
    uint64_t none = verify_epochs(dir, RF_VERIFY_NONE, err_none, ver_none);
    for (int e = 0; e < 3; e++) {
        assert_int_equal(err_once[e], e + 1);
        assert_int_equal(ver_once[e], ngood);
        assert_int_equal(err_always[e], e + 1);
        assert_int_equal(ver_always[e], 0);
        assert_int_equal(err_none[e], 0);
        assert_int_equal(ver_none[e], 0);
    }
    assert_true(once == always);
    assert_true(none != always); /* the cut picture itself instead of a substitute */
    tu_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitflip_found_only_at_the_end),
        cmocka_unit_test(test_verify_modes),
    };
    return cmocka_run_group_tests(tests, fs_setup_tmp, fs_teardown);
}
