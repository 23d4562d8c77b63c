/*
 * reader.h - file reads, many in flight, with io_uring or pread: whole files
 * (size learned at read time), or a known range of a file (a tar member, a
 * record).
 *
 * A request names its file by path, opened for the read and closed after,
 * or hands an open descriptor (use_fd): a remote shard is read through its
 * pin in the cache, never by its name again (cache.h).
 *
 * The caller owns rf_read requests (and their buffers, which the reader grows
 * as needed and which are reused from one sample to the next). It submits
 * them, then reaps completed ones; a completed request has either len bytes
 * in buf or err != 0 with the failing step in `what`. A ranged read that
 * meets the end of the file early fails with EIO. A file (or range) larger
 * than the reader's max_bytes fails with EFBIG, what = "size" and its size
 * in `size`, before its buffer is grown. One reader is used by one thread.
 */
#ifndef RF_READER_H
#define RF_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

typedef struct rf_read {
    /* set by the caller */
    const char *path;  /* what is opened, or with use_fd only named in messages */
    int use_fd;        /* 1: read the open file fd instead (the caller keeps it open
                        * until the request completes); 0: open path */
    int fd;
    int ranged;        /* 1: read exactly [offset, offset + length) (no statx); 0: the whole file */
    uint64_t offset;
    uint64_t length;
    uint64_t head;     /* > 0: at most this many bytes from the start (of the file, or of the
                        * range): a shorter file is no error (a header scan) */
    int64_t sample;    /* caller's tag */
    void *user;        /* caller's tag */
    /* buffer: owned by the request, grown with realloc by the reader */
    uint8_t *buf;
    size_t cap;
    /* set by the caller instead of a read: the bytes are already in memory
     * (mapped.h), len of them; the reader clears it when it reads */
    const uint8_t *map;
    /* results */
    size_t len;
    uint64_t size;     /* the file's size (whole) or the range's length, once learned; else 0 */
    int err;           /* errno-style code, 0 on success */
    const char *what;  /* step that failed: "open", "stat", "read", ... */
    int64_t t_submit_ns, t_done_ns;
    /* reader's private state */
    int state, slot;
    size_t want;
    uint64_t base;     /* file offset of buf[0] */
    struct statx stx;
} rf_read;

/* The bytes a completed request holds: the mapping it was handed, or its
 * buffer. */
static inline const uint8_t *rf__read_bytes(const rf_read *req)
{
    return req->map ? req->map : req->buf;
}

typedef struct rf_reader rf_reader;

enum { RF__IO_URING = 1, RF__IO_PREAD = 2 };

/* A new reader's max_bytes (the default of RF_P_MAX_FILE_BYTES): 512 MiB. */
#define RF__READ_MAX_BYTES ((uint64_t)512 << 20)

/* backend: 0 = auto (io_uring if it can be set up, unless RINGFEED_IO=pread),
 * RF__IO_URING, RF__IO_PREAD. depth: reads in flight at most. Falls back to
 * pread when io_uring is asked for but refused, with the reason kept in
 * rf__reader_note. 0 or a negative RF_E_*. */
int rf__reader_create(rf_reader **out, int backend, unsigned depth);
void rf__reader_destroy(rf_reader *r);
/* Frees the reader without waiting for reads in flight: for a forked child,
 * whose io_uring is shared with the parent that submitted them. */
void rf__reader_abandon(rf_reader *r);

/* Reads (open, stat, read) taking longer than ms fail with err ETIMEDOUT
 * instead of hanging; 0: no limit. io_uring only: the pread backend blocks
 * in the kernel and cannot be interrupted. */
void rf__reader_set_timeout(rf_reader *r, int64_t ms);

/* Files (or ranges) larger than max_bytes fail with EFBIG before anything is
 * allocated for them. Applies to reads submitted afterwards. */
void rf__reader_set_max_bytes(rf_reader *r, uint64_t max_bytes);

int rf__reader_backend(const rf_reader *r);
const char *rf__reader_note(const rf_reader *r); /* why io_uring is not used, or "" */
unsigned rf__reader_depth(const rf_reader *r);
unsigned rf__reader_inflight(const rf_reader *r);

/* Queues a read. Returns 0, or RF_E_STATE when depth requests are in flight. */
int rf__reader_submit(rf_reader *r, rf_read *req);

/* Waits up to timeout_ms (0: poll, <0: until one completes) for completions
 * and stores up to max finished requests in done. Returns their count. */
int rf__reader_reap(rf_reader *r, rf_read **done, int max, int timeout_ms);

/* Performs one request synchronously on the calling thread (the pread path;
 * for rare reads outside the pipeline), with the size limit max_bytes as a
 * reader applies it. 0, or -1 with err and what set. */
int rf__read_sync(rf_read *req, uint64_t max_bytes);

#endif
