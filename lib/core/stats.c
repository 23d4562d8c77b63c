/*
 * stats.c - counters, the error log and the tuner log, rendered as JSON with
 * the sections the stages render themselves (stats.h: rf_stats_section).
 */
#define _GNU_SOURCE
#include "stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mapped.h"

void rf__stats_free(rf_stats *s)
{
    for (int i = 0; i < s->nerrors; i++) {
        free(s->errors[i].path);
        free(s->errors[i].reason);
    }
    s->nerrors = 0;
}

void rf__stats_add_error(rf_stats *s, int64_t sample, int64_t epoch, const char *path,
                         const char *reason)
{
    s->errors_total++;
    if (s->nerrors >= RF_STATS_MAX_ERRORS)
        return;
    rf_error_entry *e = &s->errors[s->nerrors];
    e->sample = sample;
    e->epoch = epoch;
    e->path = strdup(path ? path : "");
    e->reason = strdup(reason ? reason : "");
    if (!e->path || !e->reason) {
        free(e->path);
        free(e->reason);
        return;
    }
    s->nerrors++;
}

void rf__stats_add_decision(rf_stats *s, int64_t batch, int workers, const char *reason)
{
    if (s->ndecisions >= RF_STATS_MAX_DECISIONS) {
        /* Keep the first half (start-up) and the most recent ones. */
        memmove(&s->decisions[RF_STATS_MAX_DECISIONS / 2],
                &s->decisions[RF_STATS_MAX_DECISIONS / 2 + 1],
                (RF_STATS_MAX_DECISIONS / 2 - 1) * sizeof s->decisions[0]);
        s->ndecisions--;
    }
    rf_decision *d = &s->decisions[s->ndecisions++];
    d->batch = batch;
    d->workers = workers;
    snprintf(d->reason, sizeof d->reason, "%s", reason);
}

/* "latency": the consumer's wait per batch (percentiles, nearest rank, to
 * 1.6 %), the batches that found the ring empty, the time to first batch. */
static void latency_json(const rf_stats *s, rf_json *j)
{
    const rf_latency *w = &s->wait;
    rf__json_fmt(j,
                 "\"latency\": {\"batches\": %lld, \"wait_p50_ms\": %.3f, \"wait_p90_ms\": %.3f, "
                 "\"wait_p99_ms\": %.3f, \"wait_max_ms\": %.3f, \"wait_mean_ms\": %.3f, ",
                 (long long)w->n, (double)rf__latency_quantile(w, 0.50) / 1e6,
                 (double)rf__latency_quantile(w, 0.90) / 1e6,
                 (double)rf__latency_quantile(w, 0.99) / 1e6, (double)w->max_ns / 1e6,
                 w->n ? (double)w->sum_ns / (double)w->n / 1e6 : 0.0);
    rf__json_fmt(j, "\"ring_empty\": %lld, \"first_batch_seconds\": ", (long long)s->ring_empty);
    if (s->t_first_batch_ns && s->t_start_ns)
        rf__json_fmt(j, "%.6f}", (double)(s->t_first_batch_ns - s->t_start_ns) / 1e9);
    else
        rf__json_raw(j, "null}");
}

void rf__stats_json(const rf_stats *s, int64_t now_ns, rf_json *j)
{
    double wall = s->t_first_ns ? (double)((s->t_last_ns ? s->t_last_ns : now_ns) - s->t_first_ns) / 1e9 : 0;
    double n = s->samples_decoded ? (double)s->samples_decoded : 1;
    rf__json_fmt(j, "\"images\": %lld, \"batches\": %lld, ", (long long)s->images,
                 (long long)s->batches);
    rf__json_fmt(j, "\"images_per_sec\": %.3f, \"wall_seconds\": %.6f, \"stall_seconds\": %.6f, ",
                 wall > 0 ? (double)s->images / wall : 0.0, wall, (double)s->stall_ns / 1e9);
    rf__json_fmt(j, "\"stall_fraction\": %.4f, ", wall > 0 ? (double)s->stall_ns / 1e9 / wall : 0.0);
    rf__json_fmt(j, "\"samples_decoded\": %lld, \"dct_scaled\": %lld, \"verified\": %lld, ",
                 (long long)s->samples_decoded, (long long)s->dct_scaled,
                 (long long)s->verified);
    rf__json_fmt(j,
                 "\"stage_seconds\": {\"read\": %.6f, \"header\": %.6f, \"decode\": %.6f, "
                 "\"resize\": %.6f, \"augment\": %.6f, \"sample_fn\": %.6f, \"convert\": %.6f}, ",
                 (double)s->read_ns / 1e9, (double)s->header_ns / 1e9, (double)s->decode_ns / 1e9,
                 (double)s->resize_ns / 1e9, (double)s->augment_ns / 1e9,
                 (double)s->sample_fn_ns / 1e9, (double)s->convert_ns / 1e9);
    rf__json_fmt(j,
                 "\"per_image_ms\": {\"read\": %.4f, \"header\": %.4f, \"decode\": %.4f, "
                 "\"resize\": %.4f, \"augment\": %.4f, \"sample_fn\": %.4f, \"convert\": %.4f}, ",
                 (double)s->read_ns / 1e6 / n, (double)s->header_ns / 1e6 / n,
                 (double)s->decode_ns / 1e6 / n, (double)s->resize_ns / 1e6 / n,
                 (double)s->augment_ns / 1e6 / n, (double)s->sample_fn_ns / 1e6 / n,
                 (double)s->convert_ns / 1e6 / n);
    rf__json_fmt(j,
                 "\"per_image_cpu_ms\": {\"decode\": %.4f, \"augment\": %.4f, \"sample_fn\": "
                 "%.4f, \"convert\": %.4f}, ",
                 (double)s->decode_cpu_ns / 1e6 / n, (double)s->augment_cpu_ns / 1e6 / n,
                 (double)s->sample_fn_cpu_ns / 1e6 / n, (double)s->convert_cpu_ns / 1e6 / n);
    rf__json_fmt(j, "\"errors_count\": %lld, \"skipped\": %lld, \"errors\": [",
                 (long long)s->errors_total, (long long)s->skipped);
    for (int i = 0; i < s->nerrors; i++) {
        const rf_error_entry *e = &s->errors[i];
        rf__json_raw(j, i ? ", {\"path\": " : "{\"path\": ");
        rf__json_str(j, e->path);
        rf__json_raw(j, ", \"reason\": ");
        rf__json_str(j, e->reason);
        rf__json_fmt(j, ", \"sample\": %lld, \"epoch\": %lld}", (long long)e->sample,
                     (long long)e->epoch);
    }
    rf__json_raw(j, "], ");
    latency_json(s, j);
    rf__json_raw(j, ", \"tuner\": [");
    for (int i = 0; i < s->ndecisions; i++) {
        const rf_decision *d = &s->decisions[i];
        rf__json_fmt(j, "%s{\"batch\": %lld, \"workers\": %d, \"reason\": ", i ? ", " : "",
                     (long long)d->batch, d->workers);
        rf__json_str(j, d->reason);
        rf__json_raw(j, "}");
    }
    rf__json_raw(j, "]");
}

void rf__stats_render(const rf_stats_snapshot *v, rf_json *j)
{
    rf__json_raw(j, "{");
    rf__stats_json(v->stats, v->now_ns, j);
    rf__json_fmt(j, ", \"num_workers\": %d, \"worker_threads\": %d, \"auto_workers\": %s, ",
                 v->active_workers, v->worker_threads, v->auto_workers ? "true" : "false");
    rf__json_fmt(j, "\"epoch\": %lld, ", (long long)v->epoch);
    rf__json_fmt(j, "\"num_samples\": %lld, \"num_batches\": %lld, \"batch_size\": %lld, ",
                 (long long)v->num_samples, (long long)v->num_batches,
                 (long long)v->batch_size);
    rf__json_fmt(j, "\"shards\": %lld, \"shards_from_manifest\": %lld, ",
                 (long long)v->shards, (long long)v->shards_from_manifest);
    rf__json_fmt(j, "\"shards_manifest_mismatched\": %lld, ", (long long)v->shards_mismatched);
    rf__json_raw(j, "\"io_backend\": ");
    rf__json_str(j, v->io_backend);
    rf__json_raw(j, ", \"io_note\": ");
    rf__json_str(j, v->io_note);
    uint64_t in_place, read;
    rf__maps_counts(v->maps, &in_place, &read);
    rf__json_fmt(j, ", \"members_in_place\": %llu, \"members_read\": %llu",
                 (unsigned long long)in_place, (unsigned long long)read);
    rf__json_fmt(j,
                 ", \"memory\": {\"mode\": \"%s\", \"ring_bytes\": %zu, \"index_bytes\": %zu, "
                 "\"prefetch\": %d, \"note\": ",
                 v->pinned ? "pinned" : "pageable", v->ring_bytes, v->index_bytes, v->prefetch);
    char why[300];
    if (v->ring_note[0] || v->pinned || !v->started)
        snprintf(why, sizeof why, "%s", v->ring_note);
    else if (!v->has_copier)
        snprintf(why, sizeof why, "pageable: %s", v->cuda_note);
    else
        snprintf(why, sizeof why, "pageable on purpose: pin_memory=0");
    rf__json_str(j, why);
    char dev[32];
    if (v->has_copier)
        snprintf(dev, sizeof dev, "cuda:%lld", (long long)v->device);
    else
        snprintf(dev, sizeof dev, "cpu");
    rf__json_raw(j, "}, \"device\": ");
    rf__json_str(j, dev);
    rf__json_raw(j, v->cuda_built ? ", \"cuda\": {\"built\": true" : ", \"cuda\": {\"built\": false");
    rf__json_fmt(j,
                 ", \"available\": %s, \"requested_device\": %lld, \"copies\": %lld, "
                 "\"copy_bytes\": %lld, \"d2d_copies\": %lld, \"device_buffer_bytes\": %lld, "
                 "\"errors\": %lld, \"last_error\": ",
                 v->has_copier ? "true" : "false", (long long)v->device, (long long)v->copies,
                 (long long)v->copy_bytes, (long long)v->d2d_copies,
                 (long long)v->device_buffer_bytes, (long long)v->cuda_errors);
    rf__json_str(j, v->cuda_last_error);
    rf__json_fmt(j, ", \"direct_copies\": %lld, \"buffer_note\": ", (long long)v->direct_copies);
    rf__json_str(j, v->buffer_note ? v->buffer_note : "");
    rf__json_raw(j, ", \"reason\": ");
    rf__json_str(j, v->cuda_note);
    rf__json_raw(j, "}");
    rf__json_raw(j, ", \"worker_budget\": ");
    rf__json_str(j, v->worker_budget);
    for (int i = 0; i < v->nsections; i++) {
        const rf_stats_section *sec = &v->sections[i];
        rf__json_raw(j, ", ");
        rf__json_str(j, sec->name);
        rf__json_raw(j, ": {");
        sec->render(sec->ctx, j);
        rf__json_raw(j, "}");
    }
    if (v->more) {
        rf__json_raw(j, ", ");
        v->more(v->more_ctx, j);
    }
    rf__json_raw(j, "}");
}
