/*
 * fuzz_tar.c - fuzz target over the tar walk: shard bytes ->
 * rf__source_tar_shard (source_tar.c, its header fields in
 * source_tar_fields.c), as a local shard or a remote one in the cache is
 * indexed.
 *
 * Input: byte 0 picks the member options (fuzztar.h's fzt_opts: the label
 * member .cls, none or .idx; extras none, txt, txt+json, json+png); the
 * rest is the shard, put in a memory file that the walk opens by path.
 *
 * Oracles beyond "no crash, no UB, no leak, no unbounded allocation" (ASan,
 * UBSan, libFuzzer's -rss_limit_mb): a failure is RF_E_SOURCE or
 * RF_E_NOMEM with a terminated reason that names the source; a success
 * gives at least one sample and every sample inside the shard as a walk
 * places it (fzt_check: data after a header on a block boundary, labels in
 * range, spans and extras in place); and the index kept in the cache for it
 * (rf__source_kept_make) reads back (rf__source_kept_load) as the very same
 * index: what a walk gives, the next start must accept.
 *
 * Built two ways (tests/CMakeLists.txt), as fuzz_decode.c is:
 *   fuzz_tar        clang -fsanitize=fuzzer,address,undefined (RF_FUZZ)
 *   fuzz_tar_seeds  any compiler (RF_FUZZ_STANDALONE): fuzzmain.h's fz_main
 *                   (--gen DIR with the seed shards of fuzztar.h and a
 *                   dictionary, --list, --self [N], FILE|DIR...).
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

#define PROG "fuzz_tar"

static int fz_verbose;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t ctl = size ? data[0] : 0;
    const uint8_t *tar = size ? data + 1 : data;
    size_t len = size ? size - 1 : 0;
    rf_source_opts o;
    fzt_opts(ctl, &o);
    const char *path = fzt_path(tar, len);

    rf_source s = {.kind = RF_SOURCE_TAR, .nextras = o.nextras};
    int64_t maxlabel = -1;
    char err[512];
    memset(err, 'x', sizeof err); /* no NUL: a failure must write a terminated reason */
    int rc = rf__source_tar_shard(&s, 0, path, "fuzz.tar", &o, NULL, &maxlabel, err, sizeof err);
    if (rc != 0) {
        fzt_check_failure(PROG, rc, err, sizeof err, "source: ");
    } else {
        if (s.n == 0 || s.nfiles_manifest)
            fzt_finding(PROG, "a walk without samples, or not a walk", s.n);
        fzt_check(PROG, &s, 0, len, &o, maxlabel, FZT_BLOCKS);
        /* the kept index of this walk, read back as the next start does */
        size_t kl;
        void *kept = rf__source_kept_make(&s, 0, "s3://b/fuzz.tar", len, "\"e\"", "k", &kl);
        rf_source t = {.kind = RF_SOURCE_TAR, .nextras = o.nextras};
        int64_t ml = -1;
        if (!kept ||
            rf__source_kept_load(&t, 0, kept, kl, "s3://b/fuzz.tar", len, "\"e\"", "k", &ml) != 1 ||
            !fzt_same(&s, &t) || ml != maxlabel)
            fzt_finding(PROG, "the kept index of a walk does not read back as the walk", s.n);
        free(kept);
        rf__source_close(&t);
    }
    err[sizeof err - 1] = '\0';
    if (fz_verbose)
        printf("  opts %d: %s (%lld samples)\n", ctl & 15, rc ? err : "ok", (long long)s.n);
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

/* Each seed shard with the options it was made for, and with two others. */
static void emit(void *ctx, const char *name, fzt *z, uint8_t opts)
{
    corpus *c = ctx;
    char nm[48];
    for (int k = 0; k < 3; k++) {
        snprintf(nm, sizeof nm, "%s-%d", name, k);
        add(c, nm, (uint8_t)(k == 0 ? opts : (opts + 5 * k) & 15), (const uint8_t *)z->buf, z->len);
    }
}

static void make_corpus(corpus *c)
{
    fzt_shards(emit, c);
}

/* The words of a header and of webdataset's names, for libFuzzer. */
static const char dict[] = "\"ustar\\x0000\"\n\"ustar  \\x00\"\n\"././@LongLink\"\n"
                           "\"path=\"\n\"size=\"\n\" path=a.jpg\\x0a\"\n\".cls\"\n\".jpg\"\n"
                           "\".txt\"\n\".json\"\n\".idx\"\n\"__key__\"\n\"0000644\\x00\"\n"
                           "\"00000000012\\x00\"\n\"\\x80\\x00\\x00\\x00\"\n";

int main(int argc, char **argv)
{
    return fz_main(argc, argv, PROG "_seeds", make_corpus, fz_mutate, dict, &fz_verbose);
}
#endif /* RF_FUZZ_STANDALONE */
