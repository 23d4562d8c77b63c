/*
 * test_listing.c - the text of an S3 listing's XML elements
 * (rf__source_xml_text, source_remote.c), as a glob over s3:// reads its
 * keys: XML's five named entities and its numeric character references
 * (which S3 writes for characters XML 1.0 cannot hold, a carriage return
 * as &#13;) decoded, the latter as UTF-8; anything that is not one of them
 * taken as it is. A whole page (rf__source_list_page, source_listing.c):
 * its keys, URL-decoded when it says so, and a parse linear in its size
 * (the bytes it searched through, counted) even when no <Contents> has a
 * <Key>. Keys asked with encoding-type=url against a real S3 server
 * (moto): bindings/python/tests/test_remote.py; listings that never end,
 * or are too large: test_listing_pages.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "source_listing.h"
#include "source_remote.h"

/* The text of <Key> in xml, decoded into a buffer of cap bytes. */
static const char *key_of(const char *xml, char *out, size_t cap)
{
    const char *after = rf__source_xml_text(xml, xml + strlen(xml), "Key", out, cap);
    assert_non_null(after);
    assert_string_equal(after, "</x>");
    return out;
}

static void test_named_and_numeric_references(void **state)
{
    (void)state;
    char k[256];
    assert_string_equal(key_of("<x><Key>a&amp;b &lt;c&gt; &quot;d&apos;+e</Key></x>", k, sizeof k),
                        "a&b <c> \"d'+e");
    assert_string_equal(key_of("<x><Key>cr&#13;.tar</Key></x>", k, sizeof k), "cr\r.tar");
    assert_string_equal(key_of("<x><Key>us&#x1F;&#X1f;.tar</Key></x>", k, sizeof k),
                        "us\x1f\x1f.tar");
    /* é, € and U+1F600 as UTF-8: two, three and four bytes */
    assert_string_equal(key_of("<x><Key>caf&#233;&#x20AC;&#x1F600;</Key></x>", k, sizeof k),
                        "caf\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
}

static void test_what_is_no_reference_stays(void **state)
{
    (void)state;
    char k[256];
    /* no digits, no ';', a NUL, a surrogate, past U+10FFFF, an unknown name */
    assert_string_equal(key_of("<x><Key>&#;&#x;&#12&#0;&#xD800;&#x110000;&nbsp;&</Key></x>", k,
                               sizeof k),
                        "&#;&#x;&#12&#0;&#xD800;&#x110000;&nbsp;&");
    /* a reference at the very end of the text still decodes */
    assert_string_equal(key_of("<x><Key>&#65;</Key></x>", k, sizeof k), "A");
}

static void test_short_buffer_is_cut_whole(void **state)
{
    (void)state;
    char k[8];
    /* never a character cut in two, always NUL-terminated */
    key_of("<x><Key>ab&#x1F600;cdefgh</Key></x>", k, sizeof k);
    assert_true(strlen(k) < sizeof k);
    assert_true(!strcmp(k, "ab\xf0\x9f\x98\x80") || !strcmp(k, "ab"));
    char one[1];
    key_of("<x><Key>abc</Key></x>", one, sizeof one);
    assert_string_equal(one, "");
}

static void test_missing_element(void **state)
{
    (void)state;
    char k[16];
    const char *xml = "<x><Other>a</Other></x>";
    assert_null(rf__source_xml_text(xml, xml + strlen(xml), "Key", k, sizeof k));
    const char *open = "<x><Key>never closed";
    assert_null(rf__source_xml_text(open, open + strlen(open), "Key", k, sizeof k));
}

/* ---- whole pages ------------------------------------------------------------------ */

typedef struct keys {
    char got[4][64];
    int n;
} keys;

static int take_key(const char *k, void *ctx)
{
    keys *x = ctx;
    if (x->n < 4)
        snprintf(x->got[x->n], sizeof x->got[0], "%s", k);
    x->n++;
    return 0;
}

static void test_page_keys_and_fields(void **state)
{
    (void)state;
    const char *page = "<ListBucketResult><IsTruncated>true</IsTruncated>"
                       "<Contents><Key>a%2Fb+c.tar</Key><Size>1</Size></Contents>"
                       "<Contents><Size>2</Size></Contents>"
                       "<Contents><Key>%C3%A9.tar</Key></Contents>"
                       "<EncodingType>url</EncodingType>"
                       "<NextContinuationToken>tok&amp;1</NextContinuationToken>"
                       "</ListBucketResult>";
    rf_list_page *pg = calloc(1, sizeof *pg);
    assert_non_null(pg);
    keys x = {0};
    char err[256] = "";
    assert_int_equal(rf__source_list_page(page, strlen(page), pg, take_key, &x, err, sizeof err),
                     0);
    assert_int_equal(x.n, 2); /* the entry without a key is passed over */
    assert_string_equal(x.got[0], "a/b c.tar");
    assert_string_equal(x.got[1], "\xc3\xa9.tar");
    assert_true(pg->truncated);
    assert_true(pg->url_encoded);
    assert_string_equal(pg->token, "tok&1");
    assert_false(pg->token_long);
    /* a key that is not URL-encoded right: an error that shows it */
    const char *bad = "<EncodingType>url</EncodingType><Contents><Key>x%4</Key></Contents>";
    x.n = 0;
    assert_int_equal(rf__source_list_page(bad, strlen(bad), pg, take_key, &x, err, sizeof err),
                     RF_E_SOURCE);
    assert_non_null(strstr(err, "is not URL-encoded right"));
    free(pg);
}

/* 20,000 entries without a <Key>, then one with: each entry's search for
 * its key ends with the entry, so the parse looks at each byte a few
 * times, not at the rest of the page once per entry (which would count
 * about 20,000 / 2 times the page). */
static void test_page_parse_is_linear(void **state)
{
    (void)state;
    const char *entry = "<Contents><Size>1</Size><ETag>x</ETag></Contents>";
    const char *last = "<Contents><Key>last.tar</Key></Contents></ListBucketResult>";
    size_t n = 20000, el = strlen(entry), len = n * el + strlen(last) + 64;
    char *page = malloc(len + 1);
    assert_non_null(page);
    size_t at = (size_t)snprintf(page, len, "<ListBucketResult>");
    for (size_t i = 0; i < n; i++, at += el)
        memcpy(page + at, entry, el);
    at += (size_t)snprintf(page + at, len - at, "%s", last);
    rf_list_page *pg = calloc(1, sizeof *pg);
    assert_non_null(pg);
    keys x = {0};
    char err[256];
    assert_int_equal(rf__source_list_page(page, at, pg, take_key, &x, err, sizeof err), 0);
    assert_int_equal(x.n, 1);
    assert_string_equal(x.got[0], "last.tar");
    assert_false(pg->truncated);
    print_message("page of %zu bytes: %llu searched\n", at, (unsigned long long)pg->scanned);
    if (pg->scanned > 6 * (uint64_t)at)
        fail_msg("%llu bytes searched for a page of %zu", (unsigned long long)pg->scanned, at);
    free(pg);
    free(page);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_named_and_numeric_references),
        cmocka_unit_test(test_what_is_no_reference_stays),
        cmocka_unit_test(test_short_buffer_is_cut_whole),
        cmocka_unit_test(test_missing_element),
        cmocka_unit_test(test_page_keys_and_fields),
        cmocka_unit_test(test_page_parse_is_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
