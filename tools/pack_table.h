/*
 * pack_table.h - tables (Parquet, Arrow) for ringfeed-pack, read by a Python
 * process with pyarrow (bindings/python/ringfeed/_pack_tables.py) that
 * serves their rows over a pipe; pack_table.c starts it, reads what it
 * says and asks it for rows. The protocol (little-endian):
 *
 *   reader -> packer, once:
 *     "RFTABLE1"  u64 rows  i64 nclasses  u32 names, each (u32 len, bytes)
 *     u32 files, each (u32 len, path, u64 rows)
 *     3 x (u32 len, bytes): the image, label and extras columns used ("" none)
 *     u8 keys; with 1, per row (u16 len, bytes): its own key ("" none)
 *   packer -> reader: u32 n (0: the end), n x u64 row (global, in file order)
 *   reader -> packer, per row asked, in the order asked:
 *     u8 0, i64 label, u32 len, picture bytes, u32 len (UINT32_MAX: none), extras JSON
 *     u8 1, u32 len, the reason the row has no sample (a bad row)
 *
 * Every length is bounded before anything is allocated for it; a reader
 * that says something else, or nothing for PACK_TABLE_TIMEOUT_S seconds, or
 * exits, stops the run with a message.
 */
#ifndef RF_PACK_TABLE_H
#define RF_PACK_TABLE_H

#include <stdint.h>

#include "pack.h"

#define PACK_TABLE_TIMEOUT_S 600

typedef struct pack_table pack_table;

/* Starts the reader on o->src's tables (o->image_column, ... as given);
 * with keys, it sends every row's own key. NULL with the message printed. */
pack_table *pack_table_open(const pack_opts *o, int keys);
/* Asks the reader to end, waits for it (a deadline, then SIGKILL). NULL-safe. */
void pack_table_close(pack_table *t);

int64_t pack_table_rows(const pack_table *t);
int64_t pack_table_nclasses(const pack_table *t);
int64_t pack_table_nnames(const pack_table *t);
const char *pack_table_name(const pack_table *t, int64_t c);
int pack_table_has_extras(const pack_table *t);
/* The columns used: 0 image, 1 label, 2 extras (comma-separated; "" none). */
const char *pack_table_column(const pack_table *t, int which);
/* Row i's source "file:row" and own key, as snprintf. */
int pack_table_source(const pack_table *t, int64_t i, char *buf, size_t cap);
int pack_table_key(const pack_table *t, int64_t i, char *buf, size_t cap);
/* Asks for rows idx[0..n) (n <= PACK_TABLE_MAX_ASK), then receives them
 * into items (the picture at data[0..img_len), the extras JSON after it as
 * extra 0). 0, or -1 with the message printed. */
#define PACK_TABLE_MAX_ASK 65536
int pack_table_ask(pack_table *t, const int64_t *idx, int64_t n);
int pack_table_fetch(pack_table *t, const int64_t *idx, int64_t n, pack_item *items);

#endif
