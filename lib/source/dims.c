/*
 * dims.c - the pictures' sizes a ringfeed-pack manifest.json states,
 * kept beside the index of the samples indexed from it (source.h: dims),
 * for the aspect-ratio buckets (sizes.h), which then need not read the
 * pictures' headers.
 */
#include <stdlib.h>
#include <string.h>

#include "source.h"
#include "manifest.h"

void rf__source_manifest_dims(rf_source *s, int64_t first, const rf_manifest *m,
                              const rf_manifest_shard *ms)
{
    size_t n = (size_t)(s->n - first);
    if (n == 0 || ms->sizes_stop == 0 || ms->samples != n)
        return; /* none stated, or not one per sample: the scan reads them */
    if (!s->dims) {
        /* as long as the other per-sample arrays (rf__source_reserve grows
         * it with them); the samples before this shard's state no size */
        s->dims = calloc((size_t)s->cap * 2, sizeof *s->dims);
        if (!s->dims)
            return;
    }
    if (rf__manifest_sizes(m, ms, s->dims + 2 * first, n) != 0)
        memset(s->dims + 2 * first, 0, n * 2 * sizeof *s->dims);
}
