/*
 * loader_mix.c - the public face of mixtures (rf_loader_create_mix and the
 * calls after it in ringfeed.h) and the loader's side of them (see
 * loader_mix.h): the sources' indexes opened at start, their shares and the
 * epoch's order handed to the sampler, each lent batch's sources, the
 * counts per source in the stats.
 *
 * Everything after the index is the single-source pipeline's: the sampler
 * splits the mixture's order across ranks and resumes it (rf_loader_seek_rest)
 * as it does a permutation, and the dispatcher, the reader and the workers
 * read each sample through source.h's accessors, which find its source.
 */
#define _GNU_SOURCE
#include "loader_mix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "mix.h"

/* ---- before start ------------------------------------------------------------ */

rf_loader *rf_loader_create_mix(int64_t epoch_size)
{
    rf_loader *l = rf_loader_create("mixture");
    if (!l)
        return NULL;
    l->mix = calloc(1, sizeof *l->mix);
    if (!l->mix) {
        rf_loader_destroy(l);
        return NULL;
    }
    l->mix->epoch_size = epoch_size;
    return l;
}

void rf__loader_mix_free(rf_loader_mix *m)
{
    if (!m)
        return;
    rf__loader_mix_stop(m);
    for (int c = 0; c < m->n; c++)
        free(m->e[c].spec);
    free(m->e);
    free(m);
}

/* The loader may take mixture calls before start: 0, or an error, recorded. */
static int mix_settable(rf_loader *l, const char *call)
{
    if (!l)
        return RF_E_INVALID;
    if (!l->mix) {
        rf__loader_err(l,
                       "loader: %s: this loader reads one source (rf_loader_create); "
                       "make a mixture with rf_loader_create_mix",
                       call);
        return RF_E_INVALID;
    }
    if (l->started) {
        rf__loader_err(l,
                       "loader: %s: the sources of a mixture cannot change after "
                       "rf_loader_start",
                       call);
        return RF_E_STATE;
    }
    return 0;
}

int rf_loader_add_source(rf_loader *l, const char *source, int size, double amount)
{
    int rc = mix_settable(l, "rf_loader_add_source");
    if (rc)
        return rc;
    rf_loader_mix *m = l->mix;
    char err[300];
    if (!source || !*source) {
        rf__loader_err(l, "mixture: source %d: an empty source", m->n);
        return RF_E_INVALID;
    }
    if (rf__mix_check(m->n, size, amount, err, sizeof err) < 0) {
        rf__loader_err(l, "%s", err);
        return RF_E_INVALID;
    }
    if (m->n >= RF_MIX_MAX_SOURCES) {
        rf__loader_err(l, "mixture: more than %d sources", RF_MIX_MAX_SOURCES);
        return RF_E_INVALID;
    }
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 8;
        rf_mix_entry *e = realloc(m->e, (size_t)cap * sizeof *e);
        if (!e)
            return RF_E_NOMEM;
        m->e = e;
        m->cap = cap;
    }
    char *spec = strdup(source);
    if (!spec)
        return RF_E_NOMEM;
    m->e[m->n] = (rf_mix_entry){
        .spec = spec, .size = size, .amount = amount, .label_offset = 0, .shuffle_block = -1};
    return m->n++;
}

int rf_loader_set_source_param(rf_loader *l, int source, int param, int64_t value)
{
    int rc = mix_settable(l, "rf_loader_set_source_param");
    if (rc)
        return rc;
    rf_loader_mix *m = l->mix;
    if (source < 0 || source >= m->n) {
        rf__loader_err(l, "mixture: no source %d (%d added)", source, m->n);
        return RF_E_INVALID;
    }
    if (param == RF_SP_LABEL_OFFSET && value >= 0 && value <= RF_SOURCE_MAX_LABEL) {
        m->e[source].label_offset = value;
    } else if (param == RF_SP_SHUFFLE_BLOCK && value >= -1 && value <= UINT32_MAX) {
        m->e[source].shuffle_block = value;
    } else {
        rf__loader_err(l,
                       "mixture: source %d: source option %d = %lld is not valid (label offset: "
                       "0 to %lld; shuffle block: -1 to %lu)",
                       source, param, (long long)value, (long long)RF_SOURCE_MAX_LABEL,
                       (unsigned long)UINT32_MAX);
        return RF_E_INVALID;
    }
    return RF_OK;
}

/* ---- start ------------------------------------------------------------------- */

int rf__loader_mix_open(rf_loader *l, const rf_source_opts *so)
{
    rf_loader_mix *m = l->mix;
    const char **specs = malloc((size_t)(m->n ? m->n : 1) * sizeof *specs);
    int64_t *offsets = malloc((size_t)(m->n ? m->n : 1) * sizeof *offsets);
    if (!specs || !offsets) {
        free(specs);
        free(offsets);
        rf__loader_err(l, "mixture: out of memory");
        return RF_E_NOMEM;
    }
    for (int c = 0; c < m->n; c++) {
        specs[c] = m->e[c].spec;
        offsets[c] = m->e[c].label_offset;
    }
    char err[1200];
    int rc = rf__source_open_mix(&l->src, m->n, specs, offsets, so, err, sizeof err);
    free(specs);
    free(offsets);
    if (rc < 0)
        rf__loader_err(l, "%s", err);
    return rc;
}

static uint32_t part_shard(const void *part, int64_t i)
{
    return rf__source_shard(part, i);
}

/* The shuffle blocks of each source: its own, or the loader's for a source
 * of shards (a folder or a list file has none to group by). */
static int plan_streams(rf_loader *l, rf_mix_stream *st)
{
    rf_loader_mix *m = l->mix;
    const rf_source_mix *sm = l->src.mix;
    for (int c = 0; c < m->n; c++) {
        const rf_source *p = &sm->parts[c];
        int64_t nshards = rf__source_nshards(p), block = m->e[c].shuffle_block;
        if (block > 0 && nshards == 0) {
            rf__loader_err(l,
                           "mixture: source %d (%s): shuffle_block=%lld needs shards (tar "
                           "shards or record files); it is %s: use shuffle_block=0",
                           c, m->e[c].spec, (long long)block,
                           p->kind == RF_SOURCE_FOLDER ? "an image folder" : "a list file");
            return RF_E_INVALID;
        }
        if (block < 0)
            block = nshards > 0 ? l->cfg.shuffle_block : 0;
        st[c] = (rf_mix_stream){.first = sm->first[c],
                                .n = p->n,
                                .take = m->take[c],
                                .block = block,
                                .nshards = nshards,
                                .shard_of = part_shard,
                                .ctx = p};
    }
    return 0;
}

int rf__loader_mix_sampler(rf_loader *l)
{
    rf_loader_mix *m = l->mix;
    const rf_config *c = &l->cfg;
    int n = m->n;
    int *size = malloc((size_t)n * sizeof *size);
    double *amount = malloc((size_t)n * sizeof *amount);
    int64_t *samples = malloc((size_t)n * sizeof *samples);
    rf_mix_stream *st = malloc((size_t)n * sizeof *st);
    m->take = calloc((size_t)n, sizeof *m->take);
    m->delivered = calloc((size_t)n, sizeof *m->delivered);
    m->batch_size = c->batch_size;
    m->ids =
        calloc((size_t)(c->prefetch + RF_RING_MAX_GROW) * (size_t)c->batch_size, sizeof *m->ids);
    int rc = 0;
    char err[600];
    if (!size || !amount || !samples || !st || !m->take || !m->delivered || !m->ids) {
        rf__loader_err(l, "mixture: out of memory");
        rc = RF_E_NOMEM;
    }
    for (int k = 0; rc == 0 && k < n; k++) {
        size[k] = m->e[k].size;
        amount[k] = m->e[k].amount;
        samples[k] = l->src.mix->parts[k].n;
    }
    if (rc == 0 && (rc = rf__mix_plan(n, size, amount, samples, m->epoch_size, c->seed, m->take,
                                      err, sizeof err)) < 0)
        rf__loader_err(l, "%s", err);
    if (rc == 0)
        rc = plan_streams(l, st);
    if (rc == 0 && (rc = rf__mix_order_init(&m->order, st, n)) < 0)
        rf__loader_err(l, "mixture: cannot order an epoch of the %d sources", n);
    if (rc == 0 &&
        (rc = rf__sampler_init(&l->sampler, m->order.size, c->batch_size, c->shuffle, c->drop_last,
                               c->sampler_drop_last, c->seed, c->rank, c->world_size)) < 0)
        rf__loader_err(l, "sampler: cannot order an epoch of %lld samples",
                       (long long)m->order.size);
    if (rc == 0)
        rf__sampler_set_fill(&l->sampler, rf__mix_order_fill, &m->order);
    free(size);
    free(amount);
    free(samples);
    free(st);
    return rc;
}

void rf__loader_mix_stop(rf_loader_mix *m)
{
    if (!m)
        return;
    rf__mix_order_free(&m->order);
    free(m->take);
    free(m->delivered);
    free(m->ids);
    m->take = m->delivered = NULL;
    m->ids = NULL;
}

/* ---- batches and counts ------------------------------------------------------- */

void rf__loader_mix_lend(rf_loader *l, rf_slot *s)
{
    rf_loader_mix *m = l->mix;
    int32_t *ids = m->ids + (size_t)s->id * (size_t)m->batch_size;
    for (int64_t i = 0; i < s->count; i++) {
        int c = rf__source_mix_of(&l->src, s->view.samples[i]);
        ids[i] = c;
        m->delivered[c]++;
    }
}

const int32_t *rf_batch_sources(const rf_batch *b)
{
    if (!b || !rf__ring_lease_live(b) || !b->loader->mix)
        return NULL;
    const rf_loader_mix *m = b->loader->mix;
    return m->ids + (size_t)b->slot->id * (size_t)m->batch_size;
}

void rf__loader_mix_stats(rf_loader *l, rf_json *j)
{
    rf_loader_mix *m = l->mix;
    const rf_source_mix *sm = l->src.mix;
    rf__json_fmt(j, "\"epoch_size\": %lld, \"sources\": [", (long long)l->sampler.n);
    for (int c = 0; c < m->n; c++) {
        const rf_mix_part *p = &m->order.p[c];
        rf__json_fmt(j,
                     "%s{\"source\": %d, \"samples\": %lld, \"epoch_samples\": %lld, "
                     "\"delivered\": %lld, \"errors\": %lld, \"label_offset\": %lld, "
                     "\"shuffle_block\": %lld}",
                     c ? ", " : "", c, (long long)sm->parts[c].n, (long long)m->take[c],
                     (long long)m->delivered[c],
                     (long long)atomic_load_explicit(&sm->errors[c], memory_order_relaxed),
                     (long long)sm->label_offset[c], (long long)p->block);
    }
    rf__json_raw(j, "]");
}

/* ---- questions ---------------------------------------------------------------- */

int rf_loader_num_sources(const rf_loader *l)
{
    return !l ? 0 : l->mix ? l->mix->n : 1;
}

int rf_loader_source_counts(const rf_loader *l, int source, int64_t *samples, int64_t *per_epoch)
{
    if (!l || !l->started)
        return l ? RF_E_NOT_STARTED : RF_E_INVALID;
    if (source < 0 || source >= rf_loader_num_sources(l))
        return RF_E_INVALID;
    int64_t n = l->mix ? l->src.mix->parts[source].n : l->src.n;
    int64_t e = l->mix ? l->mix->take[source] : l->src.n;
    if (samples)
        *samples = n;
    if (per_epoch)
        *per_epoch = e;
    return RF_OK;
}

int64_t rf_loader_epoch_size(const rf_loader *l)
{
    return l && l->started ? l->sampler.n : 0;
}

int rf_loader_sample_source(const rf_loader *l, int64_t sample)
{
    if (!l || !l->started || sample < 0 || sample >= l->src.n)
        return -1;
    return l->mix ? rf__source_mix_of(&l->src, sample) : 0;
}
