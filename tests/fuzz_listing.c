/*
 * fuzz_listing.c - fuzz target over the S3 listing parser: one page of a
 * ListObjectsV2 answer -> rf__source_list_page (source_listing.c: the keys
 * of <Contents>, XML entities and numeric references, URL-decoding, the
 * truncation flag and the continuation token), as a glob over s3:// reads
 * each page a server sends; the keys then go through the glob as
 * rf__source_list_s3 puts them.
 *
 * Input: byte 0 picks the glob (fz_globs); the rest is the page's body.
 *
 * Oracles beyond "no crash, no UB, no leak" (ASan, UBSan): a failure is
 * RF_E_SOURCE with a terminated reason; a success gives no more keys than
 * the page has <Contents>, each a terminated string; the continuation token
 * is terminated and empty unless the page names one; the parse searches at
 * most a few times the page's bytes (a page of a server's choosing must not
 * cost quadratic time).
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
#include "source_listing.h"

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

/* Occurrences of needle in s[0..len) (a page may hold NULs). */
static size_t count(const char *s, size_t len, const char *needle)
{
    size_t n = 0, k = strlen(needle);
    for (const char *p = s, *end = s + len; (p = memmem(p, (size_t)(end - p), needle, k)) != NULL;
         p += k)
        n++;
    return n;
}

typedef struct fz_keys {
    const char *glob;
    size_t seen;   /* keys the parser handed over */
    rf_strlist in; /* those the glob takes, as URLs */
} fz_keys;

static int take_key(const char *k, void *ctx)
{
    fz_keys *x = ctx;
    x->seen++;
    if (fnmatch(x->glob, k, FNM_PATHNAME) != 0)
        return 0;
    return rf__strlist_add(&x->in, FZ_BUCKET, k);
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
    fz_keys x = {.glob = fz_globs[ctl % 8]};
    rf_list_page *pg = malloc(sizeof *pg);
    char err[512];
    if (!pg)
        abort();
    memset(pg->token, 'x', sizeof pg->token);
    memset(err, 'x', sizeof err);
    err[0] = '\0';
    int rc = rf__source_list_page(body, len, pg, take_key, &x, err, sizeof err);
    if (!memchr(pg->token, '\0', sizeof pg->token))
        finding("continuation token not terminated", "");
    if (pg->scanned > 8 * (uint64_t)len + 4096)
        finding("the parse searched far more than the page's bytes", "");
    if (rc != 0) {
        if (rc != RF_E_SOURCE && rc != RF_E_NOMEM)
            finding("unexpected status", "");
        if (!memchr(err, '\0', sizeof err) || (rc == RF_E_SOURCE && !err[0]))
            finding("a failure without a terminated reason", "");
    } else {
        if (pg->token[0] && !count(body, len, "<NextContinuationToken>"))
            finding("a continuation token the page does not hold", pg->token);
        if (x.seen > count(body, len, "<Contents>"))
            finding("more keys than <Contents>", "");
        for (size_t i = 0; i < x.in.n; i++) {
            const char *k = rf__strlist_at(&x.in, i);
            if (strncmp(k, FZ_BUCKET "/", sizeof FZ_BUCKET) ||
                fnmatch(x.glob, k + sizeof FZ_BUCKET, FNM_PATHNAME))
                finding("a key outside the bucket or the glob", k);
        }
    }
    err[sizeof err - 1] = '\0';
    if (fz_verbose)
        printf("  %s: %s (%zu keys, %zu matched, token \"%.40s\")\n", x.glob, rc ? err : "ok",
               x.seen, x.in.n, rc ? "" : pg->token);
    rf__strlist_free(&x.in);
    free(pg);
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
