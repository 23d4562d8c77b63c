/*
 * list.c - the list-file source kind: one "path<TAB>label" line per
 * sample.
 *
 * Relative paths are resolved against the folder holding the list; blank
 * lines and lines starting with '#' are skipped; the label is the text after
 * the last tab (so paths may hold tabs), an integer >= 0. The sample files
 * themselves are not looked at: a missing one is the reader's error, with
 * its path.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"
#include "ringfeed.h"

int rf__source_index_list(rf_source *s, const rf_strlist *paths, const rf_source_opts *o, char *err,
                          size_t errcap)
{
    (void)o;
    assert(paths->n == 1);
    const char *list = rf__strlist_at(paths, 0);
    FILE *f = fopen(list, "r");
    if (!f) {
        snprintf(err, errcap, "source: open %s: %s", list, strerror(errno));
        return RF_E_SOURCE;
    }
    s->kind = RF_SOURCE_LIST;
    const char *slash = strrchr(list, '/');
    size_t base_len = slash ? (size_t)(slash - list) + 1 : 0;
    char *line = NULL, *path = NULL;
    size_t line_cap = 0, path_cap = 0;
    ssize_t got;
    int64_t lineno = 0, maxlabel = -1;
    int rc = 0;
    while (rc == 0 && (got = getline(&line, &line_cap, f)) >= 0) {
        lineno++;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = '\0';
        if (got == 0 || line[0] == '#')
            continue;
        char *tab = strrchr(line, '\t');
        char *end = NULL;
        errno = 0;
        long long label = tab ? strtoll(tab + 1, &end, 10) : -1;
        /* INT64_MAX is refused too: nclasses = max label + 1 must not overflow */
        if (!tab || tab == line || end == tab + 1 || *end != '\0' || label < 0 || errno == ERANGE ||
            label == INT64_MAX) {
            snprintf(err, errcap, "source: %s:%lld: expected \"path<TAB>label\" with label >= 0",
                     list, (long long)lineno);
            rc = RF_E_SOURCE;
            break;
        }
        size_t plen = (size_t)(tab - line);
        size_t need = (line[0] == '/' ? 0 : base_len) + plen + 1;
        if (need > path_cap) {
            char *np = realloc(path, need);
            if (!np) {
                rc = RF_E_NOMEM;
                break;
            }
            path = np;
            path_cap = need;
        }
        size_t at = 0;
        if (line[0] != '/') {
            memcpy(path, list, base_len);
            at = base_len;
        }
        memcpy(path + at, line, plen);
        path[at + plen] = '\0';
        rc = rf__source_add(s, path, at + plen, label);
        if (label > maxlabel)
            maxlabel = label;
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errcap, "source: read %s: %s", list, strerror(errno));
        rc = RF_E_SOURCE;
    }
    if (rc == 0 && s->n == 0) {
        snprintf(err, errcap, "source: %s: no samples", list);
        rc = RF_E_SOURCE;
    }
    s->nclasses = maxlabel + 1;
    free(line);
    free(path);
    fclose(f);
    return rc;
}
