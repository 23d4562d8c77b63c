/*
 * reader.c - whole-file and ranged reads with io_uring, or pread when
 * io_uring is refused.
 *
 * io_uring path: each request opens its file into a slot of a registered
 * (sparse) file table and, for a whole-file read, stats it by path, both
 * submitted together; once both complete, one read of the whole size goes
 * out on the fixed file, short reads are resubmitted for the rest,
 * EINTR/EAGAIN are retried, and the slot is closed with close_direct. A
 * ranged read (a tar member, a record) knows its length: no statx, the read
 * at its offset follows the open. The request completes when its bytes are
 * in; the slot returns to the free list when its close completes. The
 * completion queue is twice the submission queue, and at most three
 * operations per slot can be outstanding, so it cannot overrun (asserted).
 *
 * user_data encoding: pointer to the rf_read | op tag (0 open, 1 statx,
 * 2 read) for request operations; (slot << 3) | 7 for closes, which outlive
 * their request. rf_read is 8-byte aligned so the low 3 bits are free.
 *
 * pread path: submit queues, reap performs the queued reads in order with
 * open/fstat/pread/close. Both paths deliver identical bytes.
 *
 * Size limit: once a read knows how many bytes it wants (statx/fstat for a
 * whole file, the length for a range), a size above max_bytes fails with
 * EFBIG before the buffer is grown, so a huge or lying file costs nothing.
 */
#define _GNU_SOURCE
#include "reader.h"

#include "clock.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ringfeed.h"

#ifdef RF_HAVE_URING
#include <liburing.h>
#endif

enum { ST_IDLE = 0, ST_OPENING, ST_READING, ST_DONE };
enum { OP_OPEN = 0, OP_STATX = 1, OP_READ = 2, OP_LTIMEOUT = 6, OP_CLOSE = 7 };

/* One read operation asks for at most this much (io_uring takes an unsigned length). */
#define RF_READ_CHUNK ((size_t)1 << 30)

static const char *const eof_early_whole = "read (file shrank while reading)";
static const char *const eof_early_range = "read (end of file before the end of the range)";

struct rf_reader {
    int backend;
    unsigned depth;
    unsigned inflight;   /* requests submitted and not yet returned by reap */
    uint64_t max_bytes;  /* larger files and ranges fail with EFBIG */
    char note[160];
    /* pread: FIFO of queued requests */
    rf_read **queue;
    unsigned qhead, qlen;
#ifdef RF_HAVE_URING
    struct io_uring ring;
    int ring_ok;
    int *free_slots;     /* stack of free file-table slots */
    unsigned nfree, nslots;
    int timeout_on;      /* link a timeout to every open, statx and read */
    struct __kernel_timespec link_ts;
    unsigned ops;        /* operations submitted and not completed (CQ bound) */
    unsigned cq_entries;
    rf_read **ready;     /* completed requests not yet handed out */
    unsigned nready;
#endif
};

static int grow(rf_read *req, size_t need)
{
    if (req->cap >= need)
        return 0;
    size_t cap = req->cap ? req->cap : 64 * 1024;
    while (cap < need)
        cap *= 2;
    uint8_t *b = realloc(req->buf, cap);
    if (!b)
        return -1;
    req->buf = b;
    req->cap = cap;
    return 0;
}

static void fail(rf_read *req, int err, const char *what)
{
    if (!req->err) {
        req->err = err;
        req->what = what;
    }
}

/* Takes the size a read learned (a file's, or a range's length) and makes
 * room for it, unless the request already failed or the size is over the
 * limit: then nothing is allocated. */
static void prepare(rf_read *req, uint64_t size, uint64_t max_bytes)
{
    req->size = size;
    if (req->head > 0 && size > req->head)
        size = req->head; /* the first bytes alone: req->size still says how many there are */
    if (req->err)
        return;
    if (size > max_bytes)
        fail(req, EFBIG, "size");
    else if (size >= SIZE_MAX || grow(req, (size_t)size + 1) != 0)
        fail(req, ENOMEM, "allocate");
    else
        req->want = (size_t)size;
}

/* ---- pread backend ------------------------------------------------------ */

static void pread_one(rf_read *req, uint64_t max_bytes)
{
    int fd = req->fd;
    /* O_NONBLOCK: a FIFO must not block open() until a writer comes (it then
     * fails as "not a regular file"); regular files ignore the flag. */
    while (!req->use_fd && (fd = open(req->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0 &&
           (errno == EINTR || errno == EAGAIN))
        ;
    if (fd < 0) {
        fail(req, errno, "open");
        return;
    }
    struct stat st;
    req->want = 0;
    if (req->ranged) {
        /* The length is known: no stat. A directory fails its read (EISDIR). */
        req->base = req->offset;
        prepare(req, req->length, max_bytes);
    } else if (fstat(fd, &st) != 0) {
        fail(req, errno, "stat");
    } else if (!S_ISREG(st.st_mode)) {
        fail(req, S_ISDIR(st.st_mode) ? EISDIR : EINVAL, "not a regular file");
    } else {
        req->base = 0;
        prepare(req, (uint64_t)st.st_size, max_bytes);
    }
    while (!req->err && req->len < req->want) {
        size_t ask = req->want - req->len;
        ssize_t got = pread(fd, req->buf + req->len, ask < RF_READ_CHUNK ? ask : RF_READ_CHUNK,
                            (off_t)(req->base + req->len));
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got < 0) {
            fail(req, errno, "read");
            break;
        }
        if (got == 0) {
            fail(req, EIO, req->ranged ? eof_early_range : eof_early_whole);
            break;
        }
        req->len += (size_t)got;
    }
    if (!req->use_fd)
        close(fd);
}

/* ---- io_uring backend --------------------------------------------------- */

#ifdef RF_HAVE_URING

static struct io_uring_sqe *get_sqe(rf_reader *r)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    if (!sqe) {
        io_uring_submit(&r->ring);
        sqe = io_uring_get_sqe(&r->ring);
    }
    assert(sqe); /* SQ holds 4 entries per request: never more than that queued */
    r->ops++;
    assert(r->ops <= r->cq_entries);
    return sqe;
}

/* With a read timeout, sqe is linked to a timeout: if it fires first the
 * operation completes with -ECANCELED, reported as ETIMEDOUT. */
static void link_timeout(rf_reader *r, struct io_uring_sqe *sqe)
{
    if (!r->timeout_on)
        return;
    sqe->flags |= IOSQE_IO_LINK;
    struct io_uring_sqe *t = get_sqe(r);
    io_uring_prep_link_timeout(t, &r->link_ts, 0);
    io_uring_sqe_set_data64(t, OP_LTIMEOUT);
}

static void queue_read(rf_reader *r, rf_read *req)
{
    struct io_uring_sqe *sqe = get_sqe(r);
    size_t ask = req->want - req->len;
    io_uring_prep_read(sqe, req->use_fd ? req->fd : req->slot, req->buf + req->len,
                       (unsigned)(ask < RF_READ_CHUNK ? ask : RF_READ_CHUNK), req->base + req->len);
    if (!req->use_fd)
        sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)req | OP_READ);
    link_timeout(r, sqe);
}

/* Ends a request: closes its slot if it was opened (a request with its own
 * descriptor has none), moves it to `ready`. */
static void finish(rf_reader *r, rf_read *req, int opened)
{
    if (opened && req->slot >= 0) {
        struct io_uring_sqe *sqe = get_sqe(r);
        io_uring_prep_close_direct(sqe, (unsigned)req->slot);
        io_uring_sqe_set_data64(sqe, ((uint64_t)req->slot << 3) | OP_CLOSE);
    } else if (req->slot >= 0) {
        r->free_slots[r->nfree++] = req->slot;
    }
    req->slot = -1;
    req->state = ST_DONE;
    req->t_done_ns = rf__now_ns();
    r->ready[r->nready++] = req;
}

static void on_cqe(rf_reader *r, uint64_t ud, int res)
{
    unsigned op = (unsigned)(ud & 7);
    assert(r->ops > 0);
    r->ops--;
    if (op == OP_CLOSE) {
        r->free_slots[r->nfree++] = (int)(ud >> 3);
        return;
    }
    if (op == OP_LTIMEOUT)
        return; /* -ETIME when it fired (its operation then says -ECANCELED) */
    if (res == -ECANCELED && r->timeout_on)
        res = -ETIMEDOUT;
    rf_read *req = (rf_read *)(uintptr_t)(ud & ~(uint64_t)7);
    if (op == OP_OPEN || op == OP_STATX) {
        /* state counts the outstanding halves of the open+statx pair. The two
         * race: a failed open is the step reported, as with pread, whichever
         * completed first. */
        if (res < 0 && op == OP_OPEN) {
            req->err = -res;
            req->what = "open";
        } else if (res < 0) {
            fail(req, -res, "stat");
        }
        if (op == OP_OPEN && res >= 0)
            req->want = 1; /* marks the slot as opened */
        if (--req->state > ST_IDLE)
            return;
        int opened = req->want == 1;
        req->want = 0;
        uint64_t size;
        if (req->ranged) {
            /* no statx: the length is known; a directory fails its read (EISDIR) */
            size = req->length;
            req->base = req->offset;
        } else {
            size = req->stx.stx_size;
            req->base = 0;
            if (!req->err && !S_ISREG(req->stx.stx_mode))
                fail(req, S_ISDIR(req->stx.stx_mode) ? EISDIR : EINVAL, "not a regular file");
        }
        prepare(req, size, r->max_bytes);
        if (req->err || size == 0) {
            finish(r, req, opened);
            return;
        }
        req->state = ST_READING;
        queue_read(r, req);
        return;
    }
    assert(op == OP_READ && req->state == ST_READING);
    if (res == -EINTR || res == -EAGAIN) {
        queue_read(r, req);
        return;
    }
    if (res < 0)
        fail(req, -res, "read");
    else if (res == 0)
        fail(req, EIO, req->ranged ? eof_early_range : eof_early_whole);
    else
        req->len += (size_t)res;
    if (!req->err && req->len < req->want) {
        queue_read(r, req); /* short read: ask for the rest */
        return;
    }
    finish(r, req, 1);
}

static int uring_setup(rf_reader *r)
{
    unsigned entries = 4;
    while (entries < 8 * r->depth) /* open, statx, read, close and their timeouts */
        entries *= 2;
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    int rc = io_uring_queue_init_params(entries, &r->ring, &p);
    if (rc < 0) {
        snprintf(r->note, sizeof r->note, "io_uring_setup: %s", strerror(-rc));
        return -1;
    }
    r->ring_ok = 1;
    r->cq_entries = p.cq_entries;
    r->nslots = r->depth * 2; /* closes outlive requests: room for both */
    rc = io_uring_register_files_sparse(&r->ring, r->nslots);
    while (rc == -EMFILE && r->nslots > 8) {
        /* The file table counts against RLIMIT_NOFILE: fewer reads in flight
         * beat giving up io_uring. */
        r->nslots /= 2;
        r->depth = r->nslots / 2;
        rc = io_uring_register_files_sparse(&r->ring, r->nslots);
        if (rc == 0)
            snprintf(r->note, sizeof r->note,
                     "io_uring file table limited by RLIMIT_NOFILE: %u reads in flight",
                     r->depth);
    }
    if (rc < 0) {
        snprintf(r->note, sizeof r->note, "io_uring file table: %s", strerror(-rc));
        return -1;
    }
    struct io_uring_probe *probe = io_uring_get_probe_ring(&r->ring);
    int ok = probe && io_uring_opcode_supported(probe, IORING_OP_OPENAT) &&
             io_uring_opcode_supported(probe, IORING_OP_STATX) &&
             io_uring_opcode_supported(probe, IORING_OP_READ) &&
             io_uring_opcode_supported(probe, IORING_OP_CLOSE);
    if (probe)
        io_uring_free_probe(probe);
    if (!ok) {
        snprintf(r->note, sizeof r->note, "io_uring lacks openat/statx/read/close");
        return -1;
    }
    r->free_slots = malloc(r->nslots * sizeof *r->free_slots);
    r->ready = malloc(r->depth * sizeof *r->ready);
    if (!r->free_slots || !r->ready)
        return -1;
    for (unsigned i = 0; i < r->nslots; i++)
        r->free_slots[r->nfree++] = (int)(r->nslots - 1 - i);
    return 0;
}

/* Processes the completions already there; with wait, waits for one first.
 * -1 when that wait failed. */
static int uring_drain(rf_reader *r, int wait)
{
    struct io_uring_cqe *cqe;
    io_uring_submit(&r->ring);
    if (wait && io_uring_wait_cqe(&r->ring, &cqe) < 0)
        return -1;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&r->ring, head, cqe)
    {
        on_cqe(r, io_uring_cqe_get_data64(cqe), cqe->res);
        seen++;
    }
    io_uring_cq_advance(&r->ring, seen);
    io_uring_submit(&r->ring);
    return 0;
}

/* A request with its own descriptor: no file slot, no open or close; a
 * whole-file read learns the size with fstat (no wait: the file is open). */
static int uring_submit_fd(rf_reader *r, rf_read *req)
{
    req->slot = -1;
    req->want = 0;
    uint64_t size = req->length;
    req->base = req->ranged ? req->offset : 0;
    struct stat st;
    if (!req->ranged) {
        if (fstat(req->fd, &st) != 0)
            fail(req, errno, "stat");
        else if (!S_ISREG(st.st_mode))
            fail(req, S_ISDIR(st.st_mode) ? EISDIR : EINVAL, "not a regular file");
        size = req->err ? 0 : (uint64_t)st.st_size;
    }
    prepare(req, size, r->max_bytes);
    if (req->err || size == 0) {
        finish(r, req, 0);
        return 0;
    }
    req->state = ST_READING;
    queue_read(r, req);
    return 0;
}

static int uring_submit(rf_reader *r, rf_read *req)
{
    if (req->use_fd)
        return uring_submit_fd(r, req);
    if (r->nfree == 0 && r->ops > 0) {
        /* Every file slot waits for its close: collect the closes that are
         * done, and when nothing else is in flight (no reap would come to
         * collect them) wait for one. */
        uring_drain(r, 0);
        if (r->nfree == 0 && r->inflight == 0)
            uring_drain(r, 1);
    }
    if (r->nfree == 0)
        return RF_E_STATE;
    req->slot = r->free_slots[--r->nfree];
    req->state = req->ranged ? 1 : 2; /* open (and statx) outstanding */
    req->want = 0;
    struct io_uring_sqe *sqe = get_sqe(r);
    /* Direct descriptors refuse O_CLOEXEC (EINVAL); they are not inherited anyway. */
    io_uring_prep_openat_direct(sqe, AT_FDCWD, req->path, O_RDONLY, 0, (unsigned)req->slot);
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)req | OP_OPEN);
    link_timeout(r, sqe);
    if (req->ranged)
        return 0;
    sqe = get_sqe(r);
    io_uring_prep_statx(sqe, AT_FDCWD, req->path, 0, STATX_TYPE | STATX_SIZE, &req->stx);
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)req | OP_STATX);
    link_timeout(r, sqe);
    return 0;
}

static int uring_reap(rf_reader *r, rf_read **done, int max, int timeout_ms)
{
    while (r->nready == 0 && r->inflight > 0) {
        struct io_uring_cqe *cqe = NULL;
        int rc;
        io_uring_submit(&r->ring);
        if (timeout_ms < 0) {
            rc = io_uring_wait_cqe(&r->ring, &cqe);
        } else {
            struct __kernel_timespec ts = {.tv_sec = timeout_ms / 1000,
                                           .tv_nsec = (long long)(timeout_ms % 1000) * 1000000};
            rc = io_uring_wait_cqe_timeout(&r->ring, &cqe, &ts);
        }
        if (rc == -EINTR)
            continue;
        if (rc < 0)
            break; /* -ETIME: nothing yet */
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&r->ring, head, cqe)
        {
            on_cqe(r, io_uring_cqe_get_data64(cqe), cqe->res);
            seen++;
        }
        io_uring_cq_advance(&r->ring, seen);
        if (timeout_ms >= 0 && r->nready == 0)
            timeout_ms = 0; /* keep the deadline rough but bounded */
        if (timeout_ms == 0)
            break;
    }
    io_uring_submit(&r->ring); /* reads and closes queued by completions */
    int n = 0;
    while (n < max && r->nready > 0)
        done[n++] = r->ready[--r->nready];
    return n;
}

#endif /* RF_HAVE_URING */

/* ---- common ------------------------------------------------------------- */

int rf__reader_create(rf_reader **out, int backend, unsigned depth)
{
    *out = NULL;
    rf_reader *r = calloc(1, sizeof *r);
    if (!r)
        return RF_E_NOMEM;
    r->depth = depth ? depth : 64;
    r->max_bytes = RF__READ_MAX_BYTES;
    r->queue = calloc(r->depth, sizeof *r->queue);
    if (!r->queue) {
        free(r);
        return RF_E_NOMEM;
    }
    const char *env = getenv("RINGFEED_IO");
    if (backend == 0 && env && !strcmp(env, "pread")) {
        backend = RF__IO_PREAD;
        snprintf(r->note, sizeof r->note, "RINGFEED_IO=pread");
    }
    if (backend == 0 && env && !strcmp(env, "io_uring"))
        backend = RF__IO_URING;
    r->backend = RF__IO_PREAD;
#ifdef RF_HAVE_URING
    if (backend != RF__IO_PREAD) {
        if (uring_setup(r) == 0) {
            r->backend = RF__IO_URING;
        } else {
            if (r->ring_ok)
                io_uring_queue_exit(&r->ring);
            r->ring_ok = 0;
            free(r->free_slots);
            free(r->ready);
            r->free_slots = NULL;
            r->ready = NULL;
            r->nfree = 0;
        }
    }
#else
    if (backend != RF__IO_PREAD)
        snprintf(r->note, sizeof r->note, "built without liburing");
#endif
    *out = r;
    return 0;
}

void rf__reader_abandon(rf_reader *r)
{
    if (!r)
        return;
#ifdef RF_HAVE_URING
    if (r->ring_ok)
        io_uring_queue_exit(&r->ring); /* unmaps and closes this process's view only */
    free(r->free_slots);
    free(r->ready);
#endif
    free(r->queue);
    free(r);
}

void rf__reader_destroy(rf_reader *r)
{
    if (!r)
        return;
#ifdef RF_HAVE_URING
    if (r->ring_ok) {
        /* Wait for what is in flight: the kernel writes into request buffers. */
        while (r->ops > 0) {
            if (uring_drain(r, 1) < 0)
                break;
            r->nready = 0; /* finished requests are dropped */
        }
        io_uring_queue_exit(&r->ring);
    }
    free(r->free_slots);
    free(r->ready);
#endif
    free(r->queue);
    free(r);
}

void rf__reader_set_timeout(rf_reader *r, int64_t ms)
{
#ifdef RF_HAVE_URING
    r->timeout_on = ms > 0;
    r->link_ts.tv_sec = ms / 1000;
    r->link_ts.tv_nsec = (ms % 1000) * 1000000;
#else
    (void)r;
    (void)ms;
#endif
}

void rf__reader_set_max_bytes(rf_reader *r, uint64_t max_bytes)
{
    r->max_bytes = max_bytes;
}

int rf__reader_backend(const rf_reader *r)
{
    return r->backend;
}

const char *rf__reader_note(const rf_reader *r)
{
    return r->note;
}

unsigned rf__reader_depth(const rf_reader *r)
{
    return r->depth;
}

unsigned rf__reader_inflight(const rf_reader *r)
{
    return r->inflight;
}

/* A request's results cleared, its submission time stamped. */
static void read_begin(rf_read *req)
{
    req->map = NULL;
    req->len = 0;
    req->size = 0;
    req->err = 0;
    req->what = "";
    req->slot = -1;
    req->t_submit_ns = rf__now_ns();
}

int rf__reader_submit(rf_reader *r, rf_read *req)
{
    if (r->inflight >= r->depth)
        return RF_E_STATE;
    read_begin(req);
    int rc = 0;
#ifdef RF_HAVE_URING
    if (r->backend == RF__IO_URING)
        rc = uring_submit(r, req);
    else
#endif
        r->queue[(r->qhead + r->qlen++) % r->depth] = req;
    if (rc == 0)
        r->inflight++;
    return rc;
}

int rf__read_sync(rf_read *req, uint64_t max_bytes)
{
    read_begin(req);
    pread_one(req, max_bytes);
    req->t_done_ns = rf__now_ns();
    return req->err ? -1 : 0;
}

int rf__reader_reap(rf_reader *r, rf_read **done, int max, int timeout_ms)
{
    int n = 0;
#ifdef RF_HAVE_URING
    if (r->backend == RF__IO_URING)
        n = uring_reap(r, done, max, timeout_ms);
    else
#endif
    {
        (void)timeout_ms;
        while (n < max && r->qlen > 0) {
            rf_read *req = r->queue[r->qhead];
            r->qhead = (r->qhead + 1) % r->depth;
            r->qlen--;
            pread_one(req, r->max_bytes);
            req->t_done_ns = rf__now_ns();
            done[n++] = req;
        }
    }
    assert((unsigned)n <= r->inflight);
    r->inflight -= (unsigned)n;
    return n;
}
