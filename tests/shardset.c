/*
 * shardset.c - the source tests' shards and record files (shardset.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "shardset.h"
#include "testcheck.h"
#include "testutil.h"

void ss_put_member(tw *t, const char *key, const char *ext, const void *data, size_t len)
{
    char name[512];
    snprintf(name, sizeof name, "%s.%s", key, ext);
    assert_int_equal(tw_file(t, name, data, len), 0);
}

uint8_t *ss_jpeg(uint32_t seed, size_t *len)
{
    tu_jpeg_opts o = {48 + (int)(seed % 5) * 4, 40, 90, TU_420, 0, 0, 0, seed, 0, 0};
    uint8_t *jpg;
    assert_int_equal(tu_make_jpeg(&o, &jpg, len), 0);
    return jpg;
}

int ss_caption_of(int k, char *buf, size_t cap)
{
    if (k % 5 == 4)
        return -1;
    if (k % 7 == 3) {
        buf[0] = '\0';
        return 0;
    }
    int n = snprintf(buf, cap, "caption %d:", k);
    for (int i = 0; i < k * 3 && (size_t)n + 1 < cap; i++)
        buf[n++] = (char)('a' + (k + i) % 26);
    buf[n] = '\0';
    return n;
}

void ss_write_caption_shard(const char *path, int first, int n, int labeled)
{
    tw t;
    assert_int_equal(tw_open(&t, path, TW_PAX), 0);
    for (int k = first; k < first + n; k++) {
        char key[32], cap[400], json[64], cls[16];
        snprintf(key, sizeof key, "s%03d", k);
        size_t jlen;
        uint8_t *jpg = ss_jpeg((uint32_t)k + 1, &jlen);
        int clen = ss_caption_of(k, cap, sizeof cap);
        snprintf(json, sizeof json, "{\"k\": %d}", k);
        snprintf(cls, sizeof cls, "%d", k % 3);
        if (k % 2) { /* the caption before the picture */
            if (clen >= 0)
                ss_put_member(&t, key, "txt", cap, (size_t)clen);
            ss_put_member(&t, key, "jpg", jpg, jlen);
        } else {
            ss_put_member(&t, key, "jpg", jpg, jlen);
            ss_put_member(&t, key, "json", json, strlen(json));
            if (clen >= 0)
                ss_put_member(&t, key, "TXT", cap, (size_t)clen); /* any case */
        }
        if (labeled)
            ss_put_member(&t, key, "cls", cls, strlen(cls));
        free(jpg);
    }
    assert_int_equal(tw_close(&t), 0);
}

void ss_write_members(const char *path, ...)
{
    tw t;
    assert_int_equal(tw_open(&t, path, TW_USTAR), 0);
    va_list ap;
    va_start(ap, path);
    const char *name;
    while ((name = va_arg(ap, const char *)) != NULL) {
        const char *text = va_arg(ap, const char *);
        assert_int_equal(tw_file(&t, name, text, strlen(text)), 0);
    }
    va_end(ap);
    assert_int_equal(tw_close(&t), 0);
}

void ss_write_records(const char *path, size_t header, size_t rec, int n, size_t tail, int seed)
{
    size_t len = header + rec * (size_t)n + tail;
    uint8_t *b = malloc(len + 1);
    assert_non_null(b);
    for (size_t i = 0; i < len; i++)
        b[i] = (uint8_t)(i * 31 + (size_t)seed * 7 + i / 251);
    assert_int_equal(tu_write_file(path, b, len), 0);
    free(b);
}

rf_loader *ss_records_loader(const char *src, int64_t rec, int64_t header, int dtype, int workers,
                             int batch)
{
    return TU_LOADER(src, {RF_P_RECORD_SIZE, rec}, {RF_P_HEADER_SIZE, header}, {RF_P_DTYPE, dtype},
                     {RF_P_TRANSFORM, RF_TRANSFORM_NONE}, {RF_P_BATCH_SIZE, batch},
                     {RF_P_NUM_WORKERS, workers}, {RF_P_SEED, 5});
}

int64_t ss_batch_hashes(rf_loader *l, int64_t epoch, int64_t from, uint64_t *out, int cap)
{
    assert_int_equal(rf_loader_seek(l, epoch, from), 0);
    rf_batch *b;
    int rc;
    int64_t k = 0;
    while ((rc = rf_loader_next(l, &b)) == RF_OK) {
        assert_true(k < cap);
        out[k++] = tu_batch_hash(TU_FNV_INIT, b);
        rf_batch_release(b);
    }
    if (rc != RF_END_OF_EPOCH)
        fail_msg("next: %d %s", rc, rf_loader_errmsg(l));
    return k;
}
