/*
 * test_features.c - rf_features says what the build has: each optional
 * library's name is there exactly when CMake found the library (the same
 * RF_HAVE_* definitions the library was compiled with reach the tests
 * through ringfeed_internal), in the documented order, one space apart;
 * and a build without libcurl refuses a remote source naming the feature.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ringfeed.h"

/* 1 when name is one of the space-separated words of list. */
static int has_word(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

static void test_names_match_the_build(void **state)
{
    (void)state;
    const char *f = rf_features();
    assert_non_null(f);
    static const struct {
        const char *name;
        int have;
    } want[] = {
        {"jpeg", 1},
#ifdef RF_HAVE_SPNG
        {"png", 1},
#else
        {"png", 0},
#endif
#ifdef RF_HAVE_DEFLATE
        {"deflate", 1},
#else
        {"deflate", 0},
#endif
#ifdef RF_HAVE_WEBP
        {"webp", 1},
#else
        {"webp", 0},
#endif
        {"bmp", 1},
        {"pnm", 1},
#ifdef RF_HAVE_CURL
        {"remote", 1},
#else
        {"remote", 0},
#endif
#ifdef RF_HAVE_URING
        {"io_uring", 1},
#else
        {"io_uring", 0},
#endif
#ifdef RF_HAVE_CUDA
        {"cuda", 1},
#else
        {"cuda", 0},
#endif
    };
    /* rebuilt from the table: the same words, in the same order, nothing else */
    char expect[200] = "";
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        if (has_word(f, want[i].name) != want[i].have)
            fail_msg("rf_features() = \"%s\": \"%s\" should %sbe there", f, want[i].name,
                     want[i].have ? "" : "not ");
        if (want[i].have)
            snprintf(expect + strlen(expect), sizeof expect - strlen(expect), "%s%s",
                     expect[0] ? " " : "", want[i].name);
    }
    assert_string_equal(f, expect);
}

static void test_a_remote_source_without_libcurl_names_the_feature(void **state)
{
    (void)state;
#ifdef RF_HAVE_CURL
    skip(); /* the full build: test_remote and test_remote_start read remote sources */
#else
    rf_loader *l = rf_loader_create("http://127.0.0.1:9/a-{0..1}.tar");
    assert_int_equal(rf_loader_start(l), RF_E_SOURCE);
    assert_non_null(strstr(rf_loader_errmsg(l), "lack \"remote\""));
    rf_loader_destroy(l);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_match_the_build),
        cmocka_unit_test(test_a_remote_source_without_libcurl_names_the_feature),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
