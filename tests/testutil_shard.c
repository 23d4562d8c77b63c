/*
 * testutil_shard.c - a WebDataset tar shard of generated JPEGs with .cls
 * labels (declared in testutil.h), for the tests of tar and remote sources.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tarwrite.h"

int tu_write_jpeg_shard(const char *path, const tu_shard_opts *o, uint64_t *bytes)
{
    tw t;
    if (tw_open(&t, path, TW_USTAR) != 0)
        return -1;
    int rc = 0;
    for (int i = 0; i < o->n && rc == 0; i++) {
        tu_jpeg_opts j = {o->width, o->height, 85, 0, 0, 0, 0, o->seed + (uint32_t)i, 0, 0};
        uint8_t *jpg;
        size_t len;
        char name[160], cls[24];
        if (tu_make_jpeg(&j, &jpg, &len) != 0)
            return -1; /* the writer's file stays: the caller's test fails anyway */
        snprintf(name, sizeof name, "%s%02d.jpg", o->prefix, i);
        rc = tw_file(&t, name, jpg, len);
        free(jpg);
        snprintf(name, sizeof name, "%s%02d.cls", o->prefix, i);
        snprintf(cls, sizeof cls, "%d", (o->label + i) % o->labels);
        rc = rc ? rc : tw_file(&t, name, cls, strlen(cls));
    }
    if (bytes)
        *bytes = t.pos + 1024;
    return tw_close(&t) || rc ? -1 : 0;
}
