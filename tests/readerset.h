/*
 * readerset.h - the files the reader's tests read (test_reader.c,
 * test_reader_extent.c), and the loops that drive a reader through them.
 *
 * rs_setup (a cmocka group set-up; rs_teardown undoes it) arms a 300 s
 * alarm (a hung read fails the run), clears RINGFEED_IO, and writes
 * RS_NFILES files of a seeded byte pattern into the test's temporary folder
 * (tu_tmp): first the sizes on the edges (empty, a byte, a page either side,
 * the reader's first 64 KiB buffer either side, a few megabytes: file 9 is
 * 3 MiB), then small and medium sizes mixed; and beside them a missing
 * path, a folder, a file without read permission and a FIFO, all named
 * like pictures.
 */
#ifndef RF_READERSET_H
#define RF_READERSET_H

#include <stddef.h>
#include <stdint.h>

#include "reader.h"

enum { RS_NFILES = 48 };

typedef struct {
    char path[4096];
    uint8_t *data; /* expected contents */
    size_t len;
} rs_file;

extern rs_file rs_files[RS_NFILES];
extern char rs_missing[4096], rs_dir[4096], rs_noperm[4096], rs_fifo[4096];

int rs_setup(void **state);
int rs_teardown(void **state);

/* len bytes of the pattern of seed (malloc'd, one byte more). */
uint8_t *rs_pattern(size_t len, uint32_t seed);

/* Reads reqs[0..n) through r: submits until RF_E_STATE, reaps (up to
 * reap_max at a time), submits more. Checks every request comes back exactly
 * once and in-flight never exceeds the depth. Returns how many submissions
 * were refused with RF_E_STATE. */
int rs_read_all(rf_reader *r, rf_read *reqs, int n, int reap_max);

/* Frees the requests' buffers and the array. */
void rs_free_reqs(rf_read *reqs, int n);

/* Reads every test file `copies` times (n = RS_NFILES * copies requests)
 * through a reader of backend with depth, each checked against the file. */
rf_read *rs_read_files(int backend, unsigned depth, int copies, int reap_max);

/* One request through a fresh reader; returns it completed. */
void rs_read_one(int backend, rf_read *req, const char *path);

#endif
