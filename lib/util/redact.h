/*
 * redact.h - what of a URL, or of text holding URLs and bytes from outside
 * (servers, shard member names), may be shown: in error messages, the stats
 * JSON, sample names and RINGFEED_TRACE lines.
 *
 * A URL's userinfo ("user:password@") and, for http(s), its query and
 * fragment (a presigned URL's signature, a "?token=") are secrets: each
 * becomes "***" (so "https://u:p@host/a.tar?t=1" is shown as https, "://",
 * then "***@host/a.tar?***"). An s3:// URL has neither (its '?' is a
 * character of the key, or a glob's). Text from outside may
 * hold bytes a terminal acts on or that are no UTF-8: control bytes, DEL
 * and bytes of invalid UTF-8 are shown as \xNN, the C1 controls, the
 * bidirectional overrides and the line and paragraph separators as \uNNNN.
 */
#ifndef RF_REDACT_H
#define RF_REDACT_H

#include <stddef.h>

/* Room for a shown URL in a message (longer ones are cut). */
#define RF__URL_SHOWN 1024

/* url as it may be shown (above) into out (cap bytes, NUL-terminated; cut
 * to fit). Returns out. */
const char *rf__redact_url(const char *url, char *out, size_t cap);

/* 1 when url holds something rf__redact_url hides. */
int rf__url_has_secret(const char *url);

/* The length of url's name: before the query or fragment of an http(s)
 * URL (a presigned URL's signature, "?token="), which is part of the
 * object's address but no pattern and no part of a file name (the part
 * rf__redact_url hides); the whole string otherwise. In util/ because the
 * source room's patterns and file names need it as the remote room does. */
size_t rf__url_name_len(const char *url);

/* text as it may be shown into out (cap bytes, NUL-terminated; cut at a
 * whole character or escape): every URL in it redacted (a URL starts at a
 * scheme's "://"; its authority ends at '/', '?', '#', a space or a quote;
 * an http(s) query runs to a space, a quote or the end: in free text
 * nothing else can tell where it ends, and a "?***" already shown is kept),
 * then escaped (above). Returns the length written. */
size_t rf__redact_text(const char *text, char *out, size_t cap);

/* The most bytes rf__redact_text may write for n bytes of text (each may
 * become a 6-byte escape), with the NUL. */
#define RF__REDACT_ROOM(n) ((n)*6 + 1)

#endif
