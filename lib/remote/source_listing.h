/*
 * source_listing.h - globs over s3:// (source_listing.c): the bucket listed
 * with ListObjectsV2, page by page, each page's XML parsed in one linear
 * pass, the listing bounded whatever the server answers.
 *
 * The bounds, each named in the error that a listing past it ends with:
 * a page of at most RF__FETCH_MEM_MAX bytes (fetch.h), at most
 * RF__LIST_MAX_PAGES pages (S3 gives 1,000 keys a page: 20 million keys
 * under the prefix before the first glob character), at most
 * RF__LIST_MAX_KEYS keys matching the pattern (what a pattern may expand to
 * at all: pattern.c), a continuation token of fewer than
 * RF__LIST_TOKEN bytes, and no token twice (a server that would send the
 * listing round in a circle).
 */
#ifndef RF_SOURCE_LISTING_H
#define RF_SOURCE_LISTING_H

#include <stddef.h>
#include <stdint.h>

#include "fetch.h"
#include "kinds.h"

#define RF__LIST_MAX_PAGES 20000
#define RF__LIST_MAX_KEYS (1 << 20)
#define RF__LIST_TOKEN 2048

typedef struct rf_list_caps {
    uint64_t max_pages, max_keys;
} rf_list_caps;

/* What one page says besides its keys. */
typedef struct rf_list_page {
    int truncated;              /* <IsTruncated>true</IsTruncated> */
    int url_encoded;            /* <EncodingType>url</EncodingType>: keys are %XX-encoded */
    char token[RF__LIST_TOKEN]; /* <NextContinuationToken>, or "" */
    int token_long;             /* the token did not fit in token */
    uint64_t scanned;           /* bytes the parse searched through: at most a few times the
                                   * page's, whatever it holds (the tests check it) */
} rf_list_page;

/* Parses the page body[0, len): key(k, ctx) for each <Contents>'s <Key>,
 * decoded (XML's references; %XX too when the page says url), in order; a
 * <Contents> without a <Key> is passed over. 0, what a key call returned
 * when nonzero, or RF_E_SOURCE (err) for a key that is not URL-encoded
 * right. */
int rf__source_list_page(const char *body, size_t len, rf_list_page *pg,
                         int (*key)(const char *k, void *ctx), void *ctx, char *err, size_t errcap);

/* The keys of the listing of s3://BUCKET/PATTERN (word) that fnmatch
 * accepts ('/' matched only by '/'), as s3:// URLs appended to out, in the
 * order listed; caps: the bounds above (NULL: the defaults). 0, or a
 * negative RF_E_* with the reason (and the cap) in err. */
int rf__source_list_s3(rf_fetch *f, const char *word, const rf_list_caps *caps, rf_strlist *out,
                       char *err, size_t errcap);

#endif
