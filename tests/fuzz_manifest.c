/*
 * fuzz_manifest.c - fuzz target over ringfeed-pack's manifest.json as the
 * loader reads it: rf__manifest_parse and its consistency checks
 * (source_manifest.c), rf__manifest_find, then the indexes made from it -
 * a remote shard's from its entry alone (rf__source_tar_from_manifest, as
 * remote_manifest.c does before the shard is fetched) and a local shard's
 * (rf__source_tar_shard with the manifest: its end headers checked by
 * rf__tar_ends_ok, else the walk).
 *
 * Input: byte 0 picks the member options (fuzztar.h's fzt_opts); then the
 * manifest's bytes up to the first NUL (JSON holds none); after the NUL,
 * if any, the bytes of the shard named shard.tar.
 *
 * Oracles beyond "no crash, no UB, no leak" (ASan, UBSan): a parse that
 * fails is RF_E_SOURCE / RF_E_NOMEM with a terminated reason naming the
 * manifest; one that succeeds keeps its shards sorted by name, indexes only
 * those it found consistent (checked again here: members in order, after a
 * header, inside the stated size), finds each of them by name and size and
 * no other; an index made from an entry lies inside the stated size
 * (fzt_check), an index of the shard inside the shard; a refused entry
 * leaves the index as it was.
 *
 * Built two ways (tests/CMakeLists.txt), as fuzz_decode.c is:
 *   fuzz_manifest        clang -fsanitize=fuzzer,address,undefined (RF_FUZZ)
 *   fuzz_manifest_seeds  any compiler (RF_FUZZ_STANDALONE): fuzzmain.h's
 *                        fz_main; the seeds are fuzztar.h's shards, each with
 *                        the manifest ringfeed-pack would write for it.
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
#include "manifest.h"

#include "fuzztar.h"

#define PROG "fuzz_manifest"
#define FZ_MAX_SHARDS 16 /* entries indexed per input */

static int fz_verbose;

/* What rf__manifest_parse promises of a shard it marks indexed, read back
 * through the iterator as the tar source reads it: samples with a key and
 * members, each member's data after its own header and inside the shard,
 * in order, labels a walk can give; the iterator never finds it malformed. */
static int consistent(const rf_manifest *m, const rf_manifest_shard *sh)
{
    const char *name = m->arena + sh->name;
    if (!name[0] || strchr(name, '/'))
        return 0;
    rf_manifest_iter it;
    rf__manifest_iter(&it, m, sh);
    uint64_t end = 0, samples = 0;
    int rc, ok = 1;
    while (ok && (rc = rf__manifest_sample(&it)) == 1) {
        samples++;
        uint64_t members = 0;
        ok = it.key[0] && it.label >= -1 && it.label <= RF_SOURCE_MAX_LABEL;
        while (ok && (rc = rf__manifest_member(&it)) == 1) {
            members++;
            ok = it.ext[0] && it.off >= end + 512 && it.off <= sh->bytes &&
                 it.len <= sh->bytes - it.off;
            end = it.off + it.len;
        }
        if (ok && (rc != 0 || members == 0))
            ok = rc == RF_E_NOMEM ? -1 : 0;
    }
    if (ok == 1 && (rc != 0 || samples == 0))
        ok = rc == RF_E_NOMEM ? -1 : 0;
    rf__manifest_iter_free(&it);
    return ok;
}

static void entries(const rf_manifest *m, const rf_source_opts *o)
{
    for (size_t i = 1; i < m->nshards; i++)
        if (strcmp(m->arena + m->shards[m->by_name[i - 1]].name,
                   m->arena + m->shards[m->by_name[i]].name) > 0)
            fzt_finding(PROG, "shards not sorted by name", (int64_t)i);
    for (size_t k = 0; k < m->nshards && k < FZ_MAX_SHARDS; k++) {
        const rf_manifest_shard *sh = &m->shards[k];
        const char *name = m->arena + sh->name;
        if (sh->indexed && consistent(m, sh) == 0)
            fzt_finding(PROG, "an inconsistent index is marked indexed", (int64_t)k);
        /* a name listed twice is indexed in neither entry: an indexed
         * entry is the only one of its name */
        const rf_manifest_shard *f = rf__manifest_find(m, name, sh->bytes);
        if (sh->indexed ? f != sh : f != NULL)
            fzt_finding(PROG, "rf__manifest_find does not find what the entry says", (int64_t)k);
        if (!sh->indexed)
            continue;
        rf_source s = {.kind = RF_SOURCE_TAR, .nextras = o->nextras};
        int64_t maxlabel = -1;
        char err[512];
        memset(err, 'x', sizeof err);
        int rc = rf__source_tar_from_manifest(&s, (uint32_t)k, name, o, m, sh, &maxlabel, err,
                                              sizeof err);
        if (rc == 0) {
            if (s.n == 0 || s.nfiles_manifest != 1)
                fzt_finding(PROG, "an entry indexed without samples, or not counted", s.n);
            fzt_check(PROG, &s, 0, sh->bytes, o, maxlabel, FZT_AFTER_HEADER);
        } else if (s.n != 0 || maxlabel != -1) {
            fzt_finding(PROG, "a refused entry left samples behind", s.n);
        }
        rf__source_close(&s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t ctl = size ? data[0] : 0;
    const char *json = size ? (const char *)data + 1 : "";
    size_t rest = size ? size - 1 : 0;
    const char *nul = memchr(json, '\0', rest);
    size_t jl = nul ? (size_t)(nul - json) : rest;
    rf_source_opts o;
    fzt_opts(ctl, &o);

    rf_manifest m;
    char err[512];
    memset(err, 'x', sizeof err);
    int rc = rf__manifest_parse(json, jl, &m, err, sizeof err);
    if (rc != 0)
        fzt_check_failure(PROG, rc, err, sizeof err, "manifest: ");
    else
        entries(&m, &o);
    if (rc == 0 && nul) {
        /* the shard beside it: the manifest's index where its ends check
         * out, else the walk */
        const uint8_t *tar = (const uint8_t *)nul + 1;
        size_t len = rest - jl - 1;
        rf_source s = {.kind = RF_SOURCE_TAR, .nextras = o.nextras};
        int64_t maxlabel = -1;
        int r = rf__source_tar_shard(&s, 0, fzt_path(tar, len), "fuzz/shard.tar", &o, &m, &maxlabel,
                                     err, sizeof err);
        if (r != 0)
            fzt_check_failure(PROG, r, err, sizeof err, "source: ");
        else
            fzt_check(PROG, &s, 0, len, &o, maxlabel,
                      s.nfiles_manifest ? FZT_AFTER_HEADER : FZT_BLOCKS);
        if (fz_verbose)
            printf("  shard: %s (%lld samples%s)\n", r ? err : "ok", (long long)s.n,
                   s.nfiles_manifest ? ", from the manifest" : "");
        rf__source_close(&s);
    }
    err[sizeof err - 1] = '\0';
    if (fz_verbose)
        printf("  opts %d: %s (%zu shards)\n", ctl & 15, rc ? err : "ok", m.nshards);
    rf__manifest_free(&m);
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

/* Each seed shard's manifest: with the shard after it (and once cut
 * short), alone, and stating another size. */
static void emit(void *ctx, const char *name, fzt *z, uint8_t opts)
{
    corpus *c = ctx;
    char nm[48];
    for (int k = 0; k < 4; k++) {
        char *j = fzt_manifest(z, k == 3 ? z->len + 512 : z->len);
        size_t jl = strlen(j), tl = k < 2 ? z->len : 0;
        if (k == 1)
            tl = tl > 1024 ? tl - 1024 : 0;
        uint8_t *b = malloc(jl + 1 + tl);
        if (!b)
            abort();
        memcpy(b, j, jl);
        b[jl] = '\0';
        memcpy(b + jl + 1, z->buf, tl);
        snprintf(nm, sizeof nm, "%s-%d", name, k);
        add(c, nm, (uint8_t)(k == 2 ? (opts + 4) & 15 : opts), b, jl + (k < 2 ? 1 + tl : 0));
        free(b);
        free(j);
    }
}

static void make_corpus(corpus *c)
{
    fzt_shards(emit, c);
    static const char *const odd[] = {
        "{\"format\": \"ringfeed-pack 1\", \"shards\": []}",
        "{\"format\": \"ringfeed-pack 2\"}",
        "{\"shards\": [{\"name\": \"a.tar\", \"bytes\": 1}], \"format\": \"ringfeed-pack 1\"}",
        ("{\"format\":\"ringfeed-pack 1\",\"shards\":[{\"name\":\"a.tar\",\"bytes\":2048,\"index\":"
         "[[\"k\",9223372036854775807,\"jpg\",512,10]]},{\"name\":\"a.tar\",\"bytes\":2048,"
         "\"index\":[[\"k\",1,\"jpg\",512,10]]}]}"),
        ("{\"format\":\"ringfeed-pack 1\",\"x\":[[[[{\"a\":[1e5,-2.5E-3,null,true,false,"
         "\"\\ud83d\\u00e9\\n\"]}]]]],\"shards\":[{\"name\":\"d\\/e.tar\",\"bytes\":0,"
         "\"index\":[]}]}"),
        ("{\"format\":\"ringfeed-pack 1\",\"shards\":[{\"name\":\"shard.tar\",\"bytes\":99999,"
         "\"index\":[[\"a\",-1,\"jpg\",512,1,\"cls\",1536,1],[\"a\",2,\"png\",2560,5]]}]}"),
    };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        add(c, "odd", (uint8_t)i, (const uint8_t *)odd[i], strlen(odd[i]));
    /* labels no walk gives (.cls members as the manifest read them): the
     * class count overflowed */
    static const char big[] =
        "{\"format\":\"ringfeed-pack 1\",\"shards\":[{\"name\":\"big.tar\",\"bytes\":8192,"
        "\"index\":[[\"k\",9223372036854775807,\"jpg\",512,10,\"cls\",1536,19],"
        "[\"l\",1000000000000000000,\"jpg\",2560,10,\"cls\",3584,19]]}]}";
    add(c, "label-int64-max", 0, (const uint8_t *)big, strlen(big));
}

static const char dict[] = "\"\\\"format\\\"\"\n\"\\\"ringfeed-pack 1\\\"\"\n\"\\\"shards\\\"\"\n"
                           "\"\\\"name\\\"\"\n\"\\\"bytes\\\"\"\n\"\\\"index\\\"\"\n"
                           "\"\\\"shard.tar\\\"\"\n\"\\\"cls\\\"\"\n\"\\\"jpg\\\"\"\n"
                           "\"\\\\u00e9\"\n\"\\\\ud800\"\n\"null\"\n\"true\"\n\"-1\"\n"
                           "\"9223372036854775807\"\n\"18446744073709551616\"\n\"1e5\"\n"
                           "\"[[\"\n\"]]\"\n\"\\x00\"\n";

int main(int argc, char **argv)
{
    return fz_main(argc, argv, PROG "_seeds", make_corpus, fz_mutate, dict, &fz_verbose);
}
#endif /* RF_FUZZ_STANDALONE */
