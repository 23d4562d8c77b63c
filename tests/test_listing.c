/*
 * test_listing.c - the text of an S3 listing's XML elements
 * (rf__source_xml_text, source_remote.c), as a glob over s3:// reads its
 * keys: XML's five named entities and its numeric character references
 * (which S3 writes for characters XML 1.0 cannot hold, a carriage return
 * as &#13;) decoded, the latter as UTF-8; anything that is not one of them
 * taken as it is. Keys asked with encoding-type=url against a real S3
 * server (moto): bindings/python/tests/test_remote.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_named_and_numeric_references),
        cmocka_unit_test(test_what_is_no_reference_stays),
        cmocka_unit_test(test_short_buffer_is_cut_whole),
        cmocka_unit_test(test_missing_element),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
