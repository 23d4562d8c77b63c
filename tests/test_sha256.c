/*
 * test_sha256.c - lib/util/sha256.c against FIPS 180-4's examples and NIST's
 * long-message vector, fed whole and in every split, so that the block
 * buffering is checked at each fill level.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sha256.h"

static void hex_of(const void *p, size_t n, char *hex)
{
    uint8_t d[32];
    rf__sha256(p, n, d);
    rf__sha256_hex(d, 32, hex);
}

static void test_vectors(void **state)
{
    (void)state;
    char hex[65];
    hex_of("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(two, strlen(two), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    uint8_t d[32] = {0x01, 0xab};
    rf__sha256_hex(d, 2, hex);
    assert_string_equal(hex, "01ab");
}

/* One million 'a': fed in pieces of every length from 1 to 130 in turn. */
static void test_million_a_in_pieces(void **state)
{
    (void)state;
    static char a[130];
    memset(a, 'a', sizeof a);
    rf_sha256 s;
    rf__sha256_init(&s);
    size_t left = 1000000, k = 1;
    while (left) {
        size_t n = k < left ? k : left;
        rf__sha256_update(&s, a, n);
        left -= n;
        k = k % 130 + 1;
    }
    uint8_t d[32];
    char hex[65];
    rf__sha256_final(&s, d);
    rf__sha256_hex(d, 32, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Every split of a 200-byte message gives the one-shot digest. */
static void test_splits(void **state)
{
    (void)state;
    uint8_t msg[200], whole[32], part[32];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 131 + 7);
    rf__sha256(msg, sizeof msg, whole);
    for (size_t cut = 0; cut <= sizeof msg; cut++) {
        rf_sha256 s;
        rf__sha256_init(&s);
        rf__sha256_update(&s, msg, cut);
        rf__sha256_update(&s, msg + cut, sizeof msg - cut);
        rf__sha256_final(&s, part);
        assert_memory_equal(whole, part, 32);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_million_a_in_pieces),
        cmocka_unit_test(test_splits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
