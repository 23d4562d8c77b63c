/*
 * loader_mix.h - a loader over a mixture of sources (rf_loader_create_mix):
 * the sources as added, and what a start makes of them: the index
 * (source_mix.h), each source's share of an epoch and the order
 * (sampler_mix.h), each batch's sources, the counts per source.
 *
 * loader.c calls in at three places (start: the index; the sampler; stats),
 * consume.c at each lend. Lock rules: loader.h; the fields marked (mu) are
 * the loader's mutex's.
 */
#ifndef RF_LOADER_MIX_H
#define RF_LOADER_MIX_H

#include <stdint.h>

#include "sampler_mix.h"
#include "source.h"

struct rf_loader;
struct rf_slot;
struct rf_json;

/* One source as rf_loader_add_source and rf_loader_set_source_param gave it. */
typedef struct rf_mix_entry {
    char *spec;
    int size; /* enum rf_mix_size */
    double amount;
    int64_t label_offset;  /* RF_SP_LABEL_OFFSET */
    int64_t shuffle_block; /* RF_SP_SHUFFLE_BLOCK; -1: the loader's RF_P_SHUFFLE_BLOCK */
} rf_mix_entry;

typedef struct rf_loader_mix {
    int64_t epoch_size; /* rf_loader_create_mix's; 0: the default */
    int n, cap;
    rf_mix_entry *e;
    /* made by a start (freed by rf__loader_mix_stop) */
    int64_t *take;      /* n: entries per epoch */
    rf_mix_order order; /* the sampler's fill */
    int64_t *delivered; /* (mu) n: samples lent per source */
    int32_t *ids;       /* ring slots x batch_size: each lent batch's sources, by slot id */
    int64_t batch_size;
} rf_loader_mix;

/* rf_loader_start's index of a mixture: its sources opened with so, into
 * l->src. 0 or an error, recorded. */
int rf__loader_mix_open(struct rf_loader *l, const rf_source_opts *so);

/* The sampler of a mixture: the shares, the order, the sampler over it
 * (the epoch's entries split across ranks), the batches' source arrays.
 * 0 or an error, recorded. */
int rf__loader_mix_sampler(struct rf_loader *l);

/* Frees what a start made (after the sampler is freed). */
void rf__loader_mix_stop(rf_loader_mix *m);
void rf__loader_mix_free(rf_loader_mix *m);

/* Under mu: slot s is lent: its sources written, the counts updated. */
void rf__loader_mix_lend(struct rf_loader *l, struct rf_slot *s);

/* The stats' "epoch_size" and "sources" fields (no braces), under mu. */
void rf__loader_mix_stats(struct rf_loader *l, struct rf_json *j);

#endif
