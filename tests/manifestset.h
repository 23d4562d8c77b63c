/*
 * manifestset.h - tar shards with the manifest.json ringfeed-pack would
 * write beside them, made by the tests of the manifest's use
 * (test_manifest.c, test_manifest_trust.c, test_remote_trust.c): SHARDS
 * shards s-K.tar of PER_SHARD samples, each a JPEG, a .cls label and (most)
 * a .txt caption; and what those tests do with them (and
 * test_label_bound.c: a manifest of one sample, one_sample_manifest).
 *
 * Header-only (static inline) with cmocka's asserts: include it after
 * cmocka.h.
 */
#ifndef RF_MANIFESTSET_H
#define RF_MANIFESTSET_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "source.h"
#include "manifest.h"
#include "tarwrite.h"
#include "testutil.h"

enum { SHARDS = 3, PER_SHARD = 7 };

/* Writes dir/s-K.tar (K < SHARDS), samples with a JPEG, a .cls label,
 * (most) a .txt caption and, with pad > 0, a .pad member of pad bytes
 * (labels that far apart), and with manifest, dir/manifest.json describing
 * them as ringfeed-pack does. */
static inline void write_set_pad(const char *dir, int manifest, size_t pad)
{
    assert_int_equal(tu_mkdir_p(dir), 0);
    char *man = NULL;
    size_t mlen = 0;
    FILE *mf = open_memstream(&man, &mlen);
    fprintf(mf, "{\"format\": \"ringfeed-pack 1\", \"shards\": [");
    for (int k = 0; k < SHARDS; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/s-%d.tar", dir, k);
        tw t;
        assert_int_equal(tw_open(&t, path, TW_USTAR), 0);
        fprintf(mf, "%s{\"name\": \"s-%d.tar\", \"index\": [", k ? ", " : "", k);
        for (int i = 0; i < PER_SHARD; i++) {
            int id = k * PER_SHARD + i, label = (id * 7) % 5;
            tu_jpeg_opts o = {
                .width = 24 + id % 5, .height = 20, .quality = 80, .seed = (uint32_t)id};
            uint8_t *jpg;
            size_t jl;
            assert_int_equal(tu_make_jpeg(&o, &jpg, &jl), 0);
            char name[64], text[64];
            int tl = snprintf(text, sizeof text, "caption %d", id);
            int ll = snprintf(text + 32, 32, "%d", label);
            fprintf(mf, "%s[\"%06d\", %d", i ? ", " : "", id, label);
            snprintf(name, sizeof name, "%06d.jpg", id);
            fprintf(mf, ", \"jpg\", %llu, %zu", (unsigned long long)t.pos + 512, jl);
            assert_int_equal(tw_file(&t, name, jpg, jl), 0);
            snprintf(name, sizeof name, "%06d.cls", id);
            fprintf(mf, ", \"cls\", %llu, %d", (unsigned long long)t.pos + 512, ll);
            assert_int_equal(tw_file(&t, name, text + 32, (size_t)ll), 0);
            if (id % 4 != 3) {
                snprintf(name, sizeof name, "%06d.txt", id);
                fprintf(mf, ", \"txt\", %llu, %d", (unsigned long long)t.pos + 512, tl);
                assert_int_equal(tw_file(&t, name, text, (size_t)tl), 0);
            }
            if (pad) {
                uint8_t *p = calloc(1, pad);
                assert_non_null(p);
                snprintf(name, sizeof name, "%06d.pad", id);
                fprintf(mf, ", \"pad\", %llu, %zu", (unsigned long long)t.pos + 512, pad);
                assert_int_equal(tw_file(&t, name, p, pad), 0);
                free(p);
            }
            fprintf(mf, "]");
            free(jpg);
        }
        assert_int_equal(tw_close(&t), 0);
        fprintf(mf, "], \"bytes\": %llu}", (unsigned long long)t.pos);
    }
    fprintf(mf, "]}\n");
    fclose(mf);
    if (manifest) {
        char path[4096];
        snprintf(path, sizeof path, "%s/manifest.json", dir);
        assert_int_equal(tu_write_file(path, man, mlen), 0);
    }
    free(man);
}

static inline void write_set(const char *dir, int manifest)
{
    write_set_pad(dir, manifest, 0);
}

/* Indexes dir's shards s-0.tar .. (with opts o, or none). */
static inline void open_set(rf_source *s, const char *dir, const rf_source_opts *o)
{
    char spec[4096], err[512];
    snprintf(spec, sizeof spec, "%s/s-{0..%d}.tar", dir, SHARDS - 1);
    int rc = rf__source_open_ex(s, spec, o, err, sizeof err);
    if (rc != 0)
        fail_msg("%s", err);
}

/* The two indexes describe the same samples at the same places. */
static inline void assert_same_index(const rf_source *a, const rf_source *b)
{
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->nclasses, b->nclasses);
    assert_int_equal(a->nextras, b->nextras);
    for (int64_t i = 0; i < a->n; i++) {
        char na[256], nb[256];
        rf__source_name(a, i, na, sizeof na);
        rf__source_name(b, i, nb, sizeof nb);
        /* same shard file name, same member */
        assert_string_equal(strrchr(na, '/'), strrchr(nb, '/'));
        assert_int_equal(rf__source_label(a, i), rf__source_label(b, i));
        int ra, rb;
        uint64_t oa, ob, la, lb;
        rf__source_extent(a, i, &ra, &oa, &la);
        rf__source_extent(b, i, &rb, &ob, &lb);
        assert_int_equal(oa, ob);
        assert_int_equal(la, lb);
        assert_int_equal(a->data_off[i], b->data_off[i]);
        assert_int_equal(a->data_len[i], b->data_len[i]);
        for (int e = 0; e < a->nextras; e++) {
            uint64_t ea = 0, eb = 0;
            uint32_t xa = 0, xb = 0;
            assert_int_equal(rf__source_extra_in_span(a, i, e, &ea, &xa),
                             rf__source_extra_in_span(b, i, e, &eb, &xb));
            assert_int_equal(ea, eb);
            assert_int_equal(xa, xb);
        }
    }
}

/* Where the .cls member of sample i of dir/s-K.tar lies, and the label the
 * manifest states for it. */
static inline void cls_place(const char *dir, int k, int i, uint64_t *off, int64_t *label)
{
    char path[4096], err[256], name[32];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    rf_manifest m;
    assert_int_equal(rf__manifest_read(path, &m, err, sizeof err), 0);
    snprintf(name, sizeof name, "s-%d.tar", k);
    const rf_manifest_shard *ms = rf__manifest_named(&m, name);
    assert_non_null(ms);
    rf_manifest_iter it;
    rf__manifest_iter(&it, &m, ms);
    for (int n = 0; n <= i; n++)
        assert_int_equal(rf__manifest_sample(&it), 1);
    *off = UINT64_MAX;
    while (rf__manifest_member(&it) == 1)
        if (!strcmp(it.ext, "cls"))
            *off = it.off;
    *label = it.label;
    assert_true(*off != UINT64_MAX);
    rf__manifest_iter_free(&it);
    rf__manifest_free(&m);
}

/* Writes n bytes at off of the file at path (its size unchanged). */
static inline void overwrite(const char *path, uint64_t off, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, p, n, (off_t)off), (ssize_t)n);
    close(fd);
}

/* Parses into m a manifest of one shard, `shard` of 4096 bytes, whose one
 * sample k has a JPEG of 10 bytes at 512 and a .cls member of cls_len bytes
 * at 1536 labelled label (the text of a JSON number). The manifest keeps
 * pointers into its text: json (cap bytes, the caller's) must outlive m. */
static inline void one_sample_manifest(rf_manifest *m, char *json, size_t cap, const char *shard,
                                       const char *label, unsigned cls_len)
{
    char err[256];
    snprintf(json, cap,
             "{\"format\": \"ringfeed-pack 1\", \"shards\": [{\"name\": \"%s\", \"bytes\": "
             "4096, \"index\": [[\"k\", %s, \"jpg\", 512, 10, \"cls\", 1536, %u]]}]}",
             shard, label, cls_len);
    assert_int_equal(rf__manifest_parse(json, strlen(json), m, err, sizeof err), 0);
}

#endif
