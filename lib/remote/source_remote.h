/*
 * source_remote.h - the remote-shard source kind (source_remote.c): WebDataset
 * tar shards behind s3:// or http(s):// URLs, indexed from copies in the
 * local cache.
 *
 * The source room (lib/source/) stands below this one and never calls it by
 * name: the loader hands it rf__source_remote in rf_source_opts.remote, and
 * source.c calls the kind through that table (source/kinds.h).
 */
#ifndef RF_SOURCE_REMOTE_H
#define RF_SOURCE_REMOTE_H

#include <stddef.h>

#include "kinds.h"

/* The kind as source.c calls it. */
extern const rf_source_remote rf__source_remote;

/* paths are s3:// or http(s):// URLs of tar shards; s->remote is made */
rf_source_index_fn rf__source_index_remote;
/* source_listing.c: globs over s3:// (a listing); gctx is the rf_remote */
rf_source_glob_fn rf__source_glob_remote;
/* source_listing.c: the text of the first <tag>...</tag> in [p, end) into
 * out (cap bytes, NUL-terminated, cut short if need be), XML's five named
 * entities and its numeric character references (&#13;, &#x1F;, as UTF-8)
 * decoded; the position after it, or NULL when there is none. */
const char *rf__source_xml_text(const char *p, const char *end, const char *tag, char *out,
                                size_t cap);
/* The index kept beside a remote shard in the cache (BASE.idx): samples
 * [from, s->n) of one shard, for that URL, size, validator etag and options
 * key okey, as bytes (malloc'd, *len of them; NULL without memory). */
void *rf__source_kept_make(const rf_source *s, int64_t from, const char *url, uint64_t size,
                           const char *etag, const char *okey, size_t *len);
/* The samples of such bytes p[0..len) (borrowed, from a file anyone could
 * have written) appended to s as shard k's, *maxlabel grown to their largest
 * label: 1; 0 when they are not an index for that URL, size (every sample
 * inside the shard), etag and okey, or damaged (s as before: the shard is
 * walked instead); RF_E_NOMEM. */
int rf__source_kept_load(rf_source *s, uint32_t k, const void *p, size_t len, const char *url,
                         uint64_t size, const char *etag, const char *okey, int64_t *maxlabel);

#endif
