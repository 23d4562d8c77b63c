/*
 * fuzz_listing.c - fuzz target over the S3 listing parser: one page of a
 * ListObjectsV2 answer -> rf__source_list_page (source_remote.c: the keys
 * of <Contents>, XML entities and numeric references, URL-decoding, the
 * glob, the continuation token), as a glob over s3:// reads each page a
 * server sends.
 *
 * Input: byte 0 picks the glob (fz_globs); the rest is the page's body.
 *
 * Oracles beyond "no crash, no UB, no leak" (ASan, UBSan): a failure is
 * RF_E_SOURCE / RF_E_NOMEM with a terminated reason naming the listing; a
 * success gives keys that are the bucket's URL, '/', and a key the glob
 * matches, no more of them than the page has <Contents>, and a terminated
 * continuation token, empty unless the page says whether it is truncated.
 *
 * Built two ways (tests/CMakeLists.txt), as fuzz_decode.c is:
 *   fuzz_listing        clang -fsanitize=fuzzer,address,undefined (RF_FUZZ)
 *   fuzz_listing_seeds  any compiler (RF_FUZZ_STANDALONE): fuzzmain.h's
 *                       fz_main; the seeds are pages as S3 and servers that
 *                       do not URL-encode write them.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ringfeed.h"
#include "source_kinds.h"

#define PROG "fuzz_listing"
#define FZ_BUCKET "s3://bkt"

static const char *const fz_globs[8] = {"train-*.tar",      "*",        "data/shard-??.tar",
                                        "a/[0-9]*/x-*.tar", "*.tar",    "[!a-c]*",
                                        "dir/*/*.tar",      "exact.tar"};

static int fz_verbose;

static void finding(const char *what, const char *detail)
{
    fprintf(stderr, "%s: FINDING: %s (%.200s)\n", PROG, what, detail);
    abort(); /* libFuzzer saves the input as a crash artifact */
}

/* Occurrences of needle in the NUL-terminated s. */
static size_t count(const char *s, const char *needle)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t ctl = size ? data[0] : 0;
    size_t len = size ? size - 1 : 0;
    char *body = malloc(len + 1); /* as the fetcher hands it: NUL-terminated */
    if (!body)
        abort();
    if (len)
        memcpy(body, data + 1, len);
    body[len] = '\0';
    const char *glob = fz_globs[ctl % 8];
    char word[64], token[2048], err[512];
    snprintf(word, sizeof word, FZ_BUCKET "/%s", glob);
    memset(token, 'x', sizeof token);
    memset(err, 'x', sizeof err);
    rf_strlist keys = {0};
    int rc = rf__source_list_page(body, len, word, glob, FZ_BUCKET, &keys, token, sizeof token, err,
                                  sizeof err);
    if (!memchr(token, '\0', sizeof token))
        finding("continuation token not terminated", "");
    if (rc != 0) {
        if (rc != RF_E_SOURCE && rc != RF_E_NOMEM)
            finding("unexpected status", "");
        if (!memchr(err, '\0', sizeof err) || strncmp(err, "source: listing ", 16))
            finding("a failure without a terminated reason naming the listing", "");
    } else {
        if (token[0] && !strstr(body, "<IsTruncated>"))
            finding("a continuation token on a page that is not truncated", token);
        if (keys.n > count(body, "<Contents>"))
            finding("more keys than <Contents>", "");
        for (size_t i = 0; i < keys.n; i++) {
            const char *k = rf__strlist_at(&keys, i);
            if (strncmp(k, FZ_BUCKET "/", sizeof FZ_BUCKET) ||
                fnmatch(glob, k + sizeof FZ_BUCKET, FNM_PATHNAME))
                finding("a key outside the bucket or the glob", k);
        }
    }
    err[sizeof err - 1] = '\0';
    if (fz_verbose)
        printf("  %s: %s (%zu keys, token \"%.40s\")\n", glob, rc ? err : "ok", keys.n,
               rc ? "" : token);
    rf__strlist_free(&keys);
    free(body);
    return 0;
}

#ifdef RF_FUZZ_STANDALONE
/* ------------------------------------------------------------------------
 * The seed corpus and the standalone driver (no libFuzzer needed).
 * ------------------------------------------------------------------------ */
#include "fuzzmain.h"

/* A page: keys k[0..n), URL-encoded as asked or as XML text, truncated with
 * a token or the last. */
static void page(corpus *c, const char *name, uint8_t glob, const char *const *k, int n, int url,
                 const char *token)
{
    char *p;
    size_t len;
    FILE *f = open_memstream(&p, &len);
    if (!f)
        abort();
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
            "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>bkt</Name>"
            "<Prefix></Prefix><KeyCount>%d</KeyCount><MaxKeys>1000</MaxKeys>%s"
            "<IsTruncated>%s</IsTruncated>",
            n, url ? "<EncodingType>url</EncodingType>" : "", token ? "true" : "false");
    if (token)
        fprintf(f, "<NextContinuationToken>%s</NextContinuationToken>", token);
    for (int i = 0; i < n; i++)
        fprintf(f,
                "<Contents><Key>%s</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>"
                "<ETag>&quot;0123456789abcdef&quot;</ETag><Size>%d</Size>"
                "<StorageClass>STANDARD</StorageClass></Contents>",
                k[i], 1024 * (i + 1));
    fprintf(f, "</ListBucketResult>");
    if (fclose(f) != 0)
        abort();
    add(c, name, glob, (const uint8_t *)p, len);
    free(p);
}

static void make_corpus(corpus *c)
{
    static const char *const plain[] = {"train-0000.tar", "train-0001.tar", "val-0000.tar",
                                        "data/shard-07.tar", "dir/x/y.tar"};
    static const char *const enc[] = {"train-%E2%82%AC+%2B.tar", "a/12/x-%25.tar", "train-%00.tar",
                                      "train-%zz.tar", "sp%20ace.tar"};
    static const char *const xml[] = {"train-&amp;&lt;&gt;&quot;&apos;.tar", "train-&#233;.tar",
                                      "train-&#x1F600;&#xD800;.tar", "a/9/x-&#0;.tar"};
    page(c, "plain", 0, plain, 5, 1, NULL);
    page(c, "plain-all", 1, plain, 5, 1, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
    page(c, "plain-globs", 2, plain, 5, 0, NULL);
    page(c, "encoded", 0, enc, 5, 1, "tok+en%2F==");
    page(c, "encoded-bad", 3, enc + 2, 2, 1, NULL);
    page(c, "xml-text", 0, xml, 4, 0, NULL);
    page(c, "xml-text-url", 3, xml, 4, 1, NULL);
    page(c, "truncated-no-token", 1, plain, 2, 0, "");
    page(c, "empty", 4, plain, 0, 0, NULL);
    static const char *const odd[] = {
        "<Contents><Key>train-1.tar</Key></Contents><Contents></Contents><Contents><Key>",
        "<Contents><Size>1</Size></Contents><Contents><Key>exact.tar</Key></Contents>",
        "<IsTruncated>true</IsTruncated><NextContinuationToken>&#x41;&amp;</NextContinuationToken>",
        "<Contents><Key>a</Key><Key>b</Key></Contents></Contents><Key>c</Key>"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        add(c, "odd", (uint8_t)(i * 3 + 1), (const uint8_t *)odd[i], strlen(odd[i]));
}

static const char dict[] = "\"<Contents>\"\n\"</Contents>\"\n\"<Key>\"\n\"</Key>\"\n"
                           "\"<IsTruncated>true</IsTruncated>\"\n\"<NextContinuationToken>\"\n"
                           "\"</NextContinuationToken>\"\n\"<EncodingType>url</EncodingType>\"\n"
                           "\"&amp;\"\n\"&#x\"\n\"&#\"\n\";\"\n\"%2F\"\n\"%00\"\n\"%\"\n"
                           "\"train-\"\n\".tar\"\n\"/\"\n";

int main(int argc, char **argv)
{
    return fz_main(argc, argv, PROG "_seeds", make_corpus, fz_mutate, dict, &fz_verbose);
}
#endif /* RF_FUZZ_STANDALONE */
