/*
 * fuzz_kept.c - fuzz target over the index kept beside a remote shard in
 * the cache (BASE.idx): its bytes -> rf__source_kept_load (source_remote.c),
 * as a start that finds the file reads it. The file is in a folder other
 * users or programs may write: nothing in it may make a read leave the
 * shard.
 *
 * Input: byte 0 picks the member options (bits 0-1: 0 to 3 extras, which
 * give each sample a span and places in it); bytes 1-8 the shard's size as
 * the server gives it (little-endian); the rest is the file.
 *
 * Oracles beyond "no crash, no UB, no leak, no allocation the file's size
 * does not justify" (ASan, UBSan, -rss_limit_mb): 1, 0 or RF_E_NOMEM; a
 * refused file leaves no sample; an accepted one gives samples inside the
 * shard (fzt_check: pictures, spans, extras, labels) of the shard asked
 * for, and is exactly what rf__source_kept_make writes for them (the format
 * has one spelling: bytes that differ would be a second meaning).
 *
 * Built two ways (tests/CMakeLists.txt), as fuzz_decode.c is:
 *   fuzz_kept        clang -fsanitize=fuzzer,address,undefined (RF_FUZZ)
 *   fuzz_kept_seeds  any compiler (RF_FUZZ_STANDALONE): fuzzmain.h's fz_main;
 *                    the seeds are the kept indexes of fuzztar.h's shards.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ringfeed.h"
#include "source.h"
#include "kinds.h"
#include "source_remote.h"

#include "fuzztar.h"

#define PROG "fuzz_kept"
#define FZ_URL "https://host/data/shard-0007.tar"
#define FZ_ETAG "\"9b2cf535f27731c974343645a3985328\""
#define FZ_OKEY "label=cls;extras=txt,json,"
#define FZ_SHARD 7 /* the shard's number in the source */

static int fz_verbose;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 9)
        return 0;
    int nextras = data[0] & 3;
    uint64_t shard_size = 0;
    for (int i = 8; i >= 1; i--)
        shard_size = shard_size << 8 | data[i];
    const uint8_t *p = data + 9;
    size_t len = size - 9;

    rf_source s = {.kind = RF_SOURCE_TAR, .nextras = nextras};
    int64_t maxlabel = -1;
    int rc =
        rf__source_kept_load(&s, FZ_SHARD, p, len, FZ_URL, shard_size, FZ_ETAG, FZ_OKEY, &maxlabel);
    if (rc != 1 && rc != 0 && rc != RF_E_NOMEM)
        fzt_finding(PROG, "unexpected status", rc);
    if (rc != 1 && (s.n != 0 || maxlabel != -1))
        fzt_finding(PROG, "a refused index left samples or a label behind", s.n);
    if (rc == 1) {
        fzt_check(PROG, &s, 0, shard_size, NULL, maxlabel, FZT_INSIDE);
        for (int64_t i = 0; i < s.n; i++)
            if (s.shard[i] != FZ_SHARD)
                fzt_finding(PROG, "a sample of another shard", i);
        size_t kl;
        void *again = rf__source_kept_make(&s, 0, FZ_URL, shard_size, FZ_ETAG, FZ_OKEY, &kl);
        if (!again || kl != len || memcmp(again, p, len))
            fzt_finding(PROG, "an accepted index is not what the writer writes for it", s.n);
        free(again);
    }
    if (fz_verbose)
        printf("  extras %d, size %llu: %s (%lld samples)\n", nextras,
               (unsigned long long)shard_size,
               rc == 1   ? "used"
               : rc == 0 ? "refused"
                         : "no memory",
               (long long)s.n);
    rf__source_close(&s);
    return 0;
}

#ifdef RF_FUZZ_STANDALONE
/* ------------------------------------------------------------------------
 * The seed corpus and the standalone driver (no libFuzzer needed).
 * ------------------------------------------------------------------------ */
#include "fuzzmain.h"
#include "tarwrite.h"
#define FZT_SEEDS
#include "fuzztar.h"

/* One seed: control byte, size, the index of s as the cache keeps it. */
static void add_kept(corpus *c, const char *name, const rf_source *s, uint64_t size)
{
    size_t kl;
    uint8_t *k = rf__source_kept_make(s, 0, FZ_URL, size, FZ_ETAG, FZ_OKEY, &kl);
    uint8_t *b = k ? malloc(8 + kl) : NULL;
    if (!b)
        abort();
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(size >> 8 * i);
    memcpy(b + 8, k, kl);
    add(c, name, (uint8_t)s->nextras, b, 8 + kl);
    free(b);
    free(k);
}

/* The kept index of each seed shard that a walk indexes, with the options
 * it was made for; once more stating a smaller shard (a sample then leaves
 * it); and with labels past the largest a walk reads. */
static void emit(void *ctx, const char *name, fzt *z, uint8_t opts)
{
    corpus *c = ctx;
    rf_source_opts o;
    fzt_opts(opts, &o);
    rf_source s = {.kind = RF_SOURCE_TAR, .nextras = o.nextras};
    int64_t maxlabel = -1;
    char err[512];
    if (rf__source_tar_shard(&s, FZ_SHARD, fzt_path(z->buf, z->len), name, &o, NULL, &maxlabel, err,
                             sizeof err) == 0) {
        add_kept(c, name, &s, z->len);
        add_kept(c, name, &s, z->len - 512);
        if (!strcmp(name, "ustar")) { /* labels no walk gives: the class count overflowed */
            s.labels[1] = INT64_MAX;
            add_kept(c, "label-int64-max", &s, z->len);
            s.labels[1] = FZT_MAX_LABEL + 1;
            add_kept(c, "label-1e18", &s, z->len);
        }
    }
    rf__source_close(&s);
}

static void make_corpus(corpus *c)
{
    fzt_shards(emit, c);
    rf_source none = {.kind = RF_SOURCE_TAR};
    add_kept(c, "no-samples", &none, 10240);
}

static const char dict[] = "\"ringfeed-index 1\\x0a\"\n\"" FZ_URL "\\x00\"\n"
                           "\"\\\"9b2cf535f27731c974343645a3985328\\\"\\x00\"\n"
                           "\"" FZ_OKEY "\\x00\"\n\"\\xff\\xff\\xff\\xff\"\n"
                           "\"\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x7f\"\n"
                           "\"\\x00\\x02\\x00\\x00\\x00\\x00\\x00\\x00\"\n";

int main(int argc, char **argv)
{
    return fz_main(argc, argv, PROG "_seeds", make_corpus, fz_mutate, dict, &fz_verbose);
}
#endif /* RF_FUZZ_STANDALONE */
