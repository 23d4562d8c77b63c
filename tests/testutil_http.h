/*
 * testutil_http.h - a small HTTP/1.1 file server for the remote tests, in a
 * process of its own (forked while the test is single-threaded, so that the
 * sanitizers allow it; its threads are its own), on 127.0.0.1 and a free
 * port. HEAD and GET of the files under a folder (Content-Length, an ETag of
 * size and mtime), 404 for anything else, one request per connection, each
 * connection on its own thread. What the tests need of a server that
 * misbehaves: a delay before each GET of a .tar answers, GETs of .tar never
 * answered (a server that stalls mid-start), or no answer at all. Counts
 * (shared with the test's process): requests, and GETs of .tar in progress
 * now and at most. The server dies with the test (PR_SET_PDEATHSIG).
 */
#ifndef RF_TESTUTIL_HTTP_H
#define RF_TESTUTIL_HTTP_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

enum {
    TU_HTTP_STALL = 1,     /* accept, read the request, never answer */
    TU_HTTP_STALL_TAR = 2, /* answer all but GETs of .tar, which never answer */
};

typedef struct tu_http_counts {
    _Atomic int requests;
    _Atomic int tar_gets_now, tar_gets_max; /* GETs of .tar being answered */
} tu_http_counts;

typedef struct tu_http {
    pid_t pid;
    int port;
    tu_http_counts *counts; /* shared memory, written by the server */
} tu_http;

/* Serves root; delay_ms before each GET of a .tar answers; flags TU_HTTP_*.
 * 0 once it runs, or -1. */
int tu_http_start(tu_http *h, const char *root, int delay_ms, int flags);
/* Kills the server and frees the counts. A zeroed or stopped h: no-op. */
void tu_http_stop(tu_http *h);

/* Writes all n bytes of p to the socket fd (no SIGPIPE), again after EINTR:
 * 0, or -1 when the client went away. Also testhttp.h's servers' writer. */
int tu_send_all(int fd, const void *p, size_t n);

#endif
