/*
 * fetch_none.c - the fetch layer of a build without libcurl (RF_WITH_CURL=OFF,
 * or libcurl4-openssl-dev absent): rf__fetch_create fails saying so, naming
 * the "remote" feature rf_features lacks; nothing else is ever reached.
 */
#include "fetch.h"

#include <stdio.h>
#include <string.h>

#include "ringfeed.h"

#ifndef RF_HAVE_CURL

int rf__fetch_create(rf_fetch **out, const rf_fetch_opts *o, char *err, size_t errcap)
{
    *out = NULL;
    snprintf(err, errcap,
             "fetch: remote shards (s3://, http://) need libcurl, and this build of ringfeed has "
             "none: its features (rf_features) lack \"remote\" (install libcurl4-openssl-dev "
             "and rebuild)");
    return RF_E_SOURCE;
}
void rf__fetch_destroy(rf_fetch *f, int forked) {}
void rf__fetch_set_tick(rf_fetch *f, rf_fetch_tick_fn *fn, void *ctx, int ms) {}
void rf__fetch_submit(rf_fetch *f, rf_fetch_req *req) {}
int rf__fetch_wait(rf_fetch *f, rf_fetch_req *req)
{
    return 0;
}
int rf__fetch_halted(rf_fetch *f)
{
    return 0;
}
void rf__fetch_wake(rf_fetch *f) {}
void rf__fetch_totals(rf_fetch *f, rf_fetch_totals *t)
{
    memset(t, 0, sizeof *t);
}

#endif
