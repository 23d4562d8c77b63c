/*
 * shardset.h - the shards and record files the source tests write, and the
 * loaders they read them with (test_shards*.c, test_records.c,
 * test_tar_fields.c, test_tar_extras.c): tar members written through
 * tarwrite.h, WebDataset samples with captions and JSON beside the picture,
 * record files of a known byte pattern, and the hashes of an epoch's
 * batches. Each helper fails the running cmocka test itself.
 */
#ifndef RF_SHARDSET_H
#define RF_SHARDSET_H

#include <stddef.h>
#include <stdint.h>

#include "ringfeed.h"
#include "tarwrite.h"

/* key.ext into t. */
void ss_put_member(tw *t, const char *key, const char *ext, const void *data, size_t len);

/* A small JPEG of its own content per seed; malloc'd. */
uint8_t *ss_jpeg(uint32_t seed, size_t *len);

/* The caption of sample k into buf: its length; "" for k % 7 == 3, absent
 * (-1) for k % 5 == 4. */
int ss_caption_of(int k, char *buf, size_t cap);

/* A shard of n samples sNNN: .jpg, .cls (k % 3) unless unlabeled, .txt
 * (ss_caption_of) and, for even k, .json; members in varied orders. */
void ss_write_caption_shard(const char *path, int first, int n, int labeled);

/* Writes members (name, text) pairs into path, NULL-ended. */
void ss_write_members(const char *path, ...);

/* A record file: header bytes, n records of rec bytes, tail bytes, all of a
 * pattern seeded by seed. */
void ss_write_records(const char *path, size_t header, size_t rec, int n, size_t tail, int seed);

/* A loader over record files (transform none, seed 5; not started). */
rf_loader *ss_records_loader(const char *src, int64_t rec, int64_t header, int dtype, int workers,
                             int batch);

/* Hashes of each batch of an epoch from batch `from` on (data, labels,
 * samples) into out (cap entries); returns the number of batches. */
int64_t ss_batch_hashes(rf_loader *l, int64_t epoch, int64_t from, uint64_t *out, int cap);

#endif
