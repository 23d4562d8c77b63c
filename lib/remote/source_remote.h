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

#endif
