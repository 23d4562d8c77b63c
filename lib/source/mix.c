/*
 * source_mix.c - a mixture's index: its sources opened one by one, and
 * global sample indexes mapped to a source and its own index (see
 * source_mix.h).
 *
 * A global index is found by a binary search over first[] (a mixture has
 * few sources: a handful of comparisons per lookup). A source is opened by
 * rf__source_open_ex exactly as a loader of that source alone opens it, so
 * the mixture adds no reading, walking or trusting of its own.
 */
#include "mix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"

static uint64_t mix_u64(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0x100000001b3ULL;
}

void rf__source_mix_close(rf_source *s)
{
    rf_source_mix *m = s->mix;
    if (!m)
        return;
    for (int c = 0; m->parts && c < m->n; c++)
        rf__source_close(&m->parts[c]);
    free(m->parts);
    free(m->first);
    free(m->label_offset);
    free((void *)m->errors);
    free(m);
    s->mix = NULL;
}

int rf__source_mix_of(const rf_source *s, int64_t i)
{
    const rf_source_mix *m = s->mix;
    int lo = 0, hi = m->n; /* the last c with first[c] <= i */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (m->first[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

const rf_source *rf__source_mix_part(const rf_source *s, int64_t *i)
{
    int c = rf__source_mix_of(s, *i);
    *i -= s->mix->first[c];
    return &s->mix->parts[c];
}

int64_t rf__source_mix_label(const rf_source *s, int64_t i)
{
    int c = rf__source_mix_of(s, i);
    int64_t v = rf__source_label(&s->mix->parts[c], i - s->mix->first[c]);
    return v >= 0 ? v + s->mix->label_offset[c] : v;
}

struct rf_remote *rf__source_remote_at(const rf_source *s, int k)
{
    if (s->kind != RF_SOURCE_MIX)
        return k == 0 ? s->remote : NULL;
    for (int c = 0; c < s->mix->n; c++)
        if (s->mix->parts[c].remote && k-- == 0)
            return s->mix->parts[c].remote;
    return NULL;
}

void rf__source_count_error(const rf_source *s, int64_t i)
{
    if (s->kind == RF_SOURCE_MIX)
        atomic_fetch_add_explicit(&s->mix->errors[rf__source_mix_of(s, i)], 1,
                                  memory_order_relaxed);
}

int64_t rf__source_tar_counts(const rf_source *s, int what)
{
    if (s->kind == RF_SOURCE_MIX) {
        int64_t sum = 0;
        for (int c = 0; c < s->mix->n; c++)
            sum += rf__source_tar_counts(&s->mix->parts[c], what);
        return sum;
    }
    if (s->kind != RF_SOURCE_TAR)
        return 0;
    return what == 0 ? s->nfiles : what == 1 ? s->nfiles_manifest : s->nfiles_mismatched;
}

uint64_t rf__source_mix_fingerprint(const rf_source *s)
{
    const rf_source_mix *m = s->mix;
    uint64_t h = mix_u64(0xcbf29ce484222325ULL, (uint64_t)m->n);
    for (int c = 0; c < m->n; c++) {
        h = mix_u64(h, rf__source_fingerprint(&m->parts[c]));
        h = mix_u64(h, (uint64_t)m->parts[c].n);
        h = mix_u64(h, (uint64_t)m->label_offset[c]);
    }
    return h;
}

size_t rf__source_mix_bytes(const rf_source *s)
{
    const rf_source_mix *m = s->mix;
    size_t b = (size_t)m->n * (2 * sizeof(int64_t) + sizeof *m->errors + sizeof *m->parts);
    for (int c = 0; c < m->n; c++)
        b += rf__source_bytes(&m->parts[c]);
    return b;
}

/* What every source of the mixture must share: records or pictures, and
 * (tar) the extras per sample. */
static int check_family(const rf_source_mix *m, const char *const *specs, char *err, size_t errcap)
{
    for (int c = 1; c < m->n; c++) {
        const rf_source *a = &m->parts[0], *b = &m->parts[c];
        if ((a->kind == RF_SOURCE_RECORDS) != (b->kind == RF_SOURCE_RECORDS)) {
            snprintf(err, errcap,
                     "mixture: source 0 (%s) is %s but source %d (%s) is %s: records and "
                     "images cannot be mixed in one loader",
                     specs[0], a->kind == RF_SOURCE_RECORDS ? "record files" : "images", c,
                     specs[c], b->kind == RF_SOURCE_RECORDS ? "record files" : "images");
            return RF_E_INVALID;
        }
        if (a->nextras != b->nextras) { /* the source kinds refuse extras but for tar */
            snprintf(err, errcap, "mixture: source %d (%s) has no extra members", c, specs[c]);
            return RF_E_INVALID;
        }
    }
    return 0;
}

int rf__source_open_mix(rf_source *s, int n, const char *const *specs, const int64_t *label_offset,
                        const rf_source_opts *o, char *err, size_t errcap)
{
    memset(s, 0, sizeof *s);
    s->kind = RF_SOURCE_MIX;
    rf_source_mix *m = calloc(1, sizeof *m);
    if (!m || n < 1) {
        free(m);
        snprintf(err, errcap, n < 1 ? "mixture: no sources" : "mixture: out of memory");
        return n < 1 ? RF_E_INVALID : RF_E_NOMEM;
    }
    s->mix = m;
    m->parts = calloc((size_t)n, sizeof *m->parts);
    m->first = calloc((size_t)n + 1, sizeof *m->first);
    m->label_offset = calloc((size_t)n, sizeof *m->label_offset);
    m->errors = calloc((size_t)n, sizeof *m->errors);
    if (!m->parts || !m->first || !m->label_offset || !m->errors) {
        rf__source_mix_close(s);
        snprintf(err, errcap, "mixture: out of memory");
        return RF_E_NOMEM;
    }
    int rc = 0;
    for (int c = 0; c < n && rc == 0; c++) {
        char perr[900];
        rc = rf__source_open_ex(&m->parts[c], specs[c], o, perr, sizeof perr);
        m->n = c + 1; /* closed on failure too: open_ex leaves a failed one empty */
        if (rc < 0) {
            snprintf(err, errcap, "mixture: source %d (%s): %s%s", c, specs[c], perr,
                     o && o->record_size > 0
                         ? "; with record_size set every source is record files: records and "
                           "images cannot be mixed in one loader"
                         : "");
            break;
        }
        m->label_offset[c] = label_offset ? label_offset[c] : 0;
        m->first[c + 1] = m->first[c] + m->parts[c].n;
        if (m->first[c + 1] > UINT32_MAX) {
            snprintf(err, errcap, "mixture: more than %lu samples in all",
                     (unsigned long)UINT32_MAX);
            rc = RF_E_INVALID;
        }
    }
    if (rc == 0)
        rc = check_family(m, specs, err, errcap);
    if (rc < 0) {
        rf__source_mix_close(s);
        memset(s, 0, sizeof *s);
        return rc;
    }
    s->n = m->first[n];
    s->nextras = m->parts[0].nextras;
    if (m->parts[0].kind == RF_SOURCE_RECORDS) {
        s->record_size = m->parts[0].record_size; /* rf__source_records */
        s->header_size = m->parts[0].header_size;
    }
    for (int c = 0; c < n; c++) { /* labels never below 0 but the unlabeled' -1 */
        int64_t top = m->parts[c].nclasses > 0 ? m->parts[c].nclasses + m->label_offset[c] : 0;
        s->nclasses = top > s->nclasses ? top : s->nclasses;
    }
    return 0;
}
