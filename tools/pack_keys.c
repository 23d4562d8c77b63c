/*
 * pack_keys.c - the key each packed sample is written under, and back from
 * a key to its position (resume reads keys from shards already written; the
 * manifest maps them to the samples' sources).
 *
 * By default a sample's key is its position in the write order, zero-padded
 * to the width of the largest (6 digits at least), as webdataset's writers
 * number samples. With --keep-keys the source's own key is kept (a folder's
 * path without its extension, a tar sample's key, a table row's image path
 * without its extension) where it can name a tar sample (pack_key_safe) and
 * no other sample of the source has it; every other sample falls back to
 * its position's key. A kept key that is itself all digits could be some
 * fallen-back sample's position key: such a key falls back too, and so on
 * until no two keys are equal (each round turns kept keys into position
 * keys, which are distinct, so it ends).
 *
 * Memory: nothing without --keep-keys; with it, per sample 8 bytes, its key,
 * and 16 bytes of hash table (open addressing, FNV-1a).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pack.h"
#include "ringfeed.h"

struct pack_keys {
    int64_t n;
    int width; /* digits of the position keys */
    /* with --keep-keys, per position: its source key's offset in arena when
     * it is in the table (else -1), and whether it is the key written */
    int64_t *off;
    unsigned char *use;
    char *arena;
    size_t alen, acap;
    int64_t *table; /* tcap slots: a position whose source key hashes there, or -1 */
    size_t tcap;
    int64_t nkept;
};

int pack_key_safe(const char *key, size_t len, size_t maxext)
{
    if (len == 0 || key[0] == '/' || (len >= 2 && key[0] == '_' && key[1] == '_'))
        return 0;
    size_t part = 0; /* start of the current path part */
    for (size_t i = 0; i <= len; i++) {
        if (i < len && (key[i] < 0x20 || key[i] > 0x7e || key[i] == '\\'))
            return 0;
        if (i < len && key[i] != '/')
            continue;
        size_t pl = i - part;
        if (pl == 0 || (pl == 1 && key[part] == '.') ||
            (pl == 2 && key[part] == '.' && key[part + 1] == '.'))
            return 0;
        if (i == len && memchr(key + part, '.', pl))
            return 0; /* webdataset's key ends at the base name's first '.' */
        part = i + 1;
    }
    /* "<key>.<ext>" with the longest extension written must fit a header */
    char name[PACK_PATHCAP];
    if (len + 1 + maxext >= sizeof name)
        return 0;
    memcpy(name, key, len);
    name[len] = '.';
    memset(name + len + 1, 'x', maxext);
    return pack_tar_name_fits(name, len + 1 + maxext);
}

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    return h;
}

/* The slot holding the position whose source key is key[0..len) (kept or
 * not), or the empty slot where it would go. */
static size_t slot_of(const pack_keys *k, const char *key, size_t len)
{
    size_t m = k->tcap - 1, i = (size_t)fnv(key, len) & m;
    while (k->table[i] >= 0) {
        const char *s = k->arena + k->off[k->table[i]];
        if (!strncmp(s, key, len) && s[len] == '\0')
            return i;
        i = (i + 1) & m;
    }
    return i;
}

/* The value of a position key (width digits) or -1. */
static int64_t digits_value(const pack_keys *k, const char *key, size_t len)
{
    if (len != (size_t)k->width)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (key[i] < '0' || key[i] > '9')
            return -1;
        v = v * 10 + (key[i] - '0');
        if (v > k->n)
            return -1;
    }
    return v < k->n ? v : -1;
}

int pack_key(const pack_keys *k, int64_t pos, char *buf, size_t cap)
{
    if (k->use && k->use[pos])
        return snprintf(buf, cap, "%s", k->arena + k->off[pos]);
    return snprintf(buf, cap, "%0*lld", k->width, (long long)pos);
}

int64_t pack_key_pos(const pack_keys *k, const char *key, size_t len)
{
    if (k->use) {
        int64_t p = k->table[slot_of(k, key, len)];
        if (p >= 0 && k->use[p])
            return p;
    }
    int64_t q = digits_value(k, key, len);
    return q >= 0 && (!k->use || !k->use[q]) ? q : -1;
}

int64_t pack_keys_kept(const pack_keys *k)
{
    return k->nkept;
}

void pack_keys_free(pack_keys *k)
{
    if (!k)
        return;
    free(k->off);
    free(k->use);
    free(k->arena);
    free(k->table);
    free(k);
}

/* The kept keys of positions [0, n): read, checked, duplicates and keys
 * that a fallen-back position's key equals turned into position keys. */
static int keep_keys(pack_keys *k, const pack_input *in, const int64_t *order)
{
    size_t maxext = 4; /* "webp" */
    for (int e = 0; e < in->nextras; e++)
        maxext = strlen(in->extras[e]) > maxext ? strlen(in->extras[e]) : maxext;
    k->tcap = 16;
    while (k->tcap < 2 * (size_t)k->n)
        k->tcap *= 2;
    int64_t *work = malloc(((size_t)k->n + 1) * sizeof *work);
    k->off = malloc(((size_t)k->n + 1) * sizeof *k->off);
    k->use = calloc((size_t)k->n + 1, 1);
    k->table = malloc(k->tcap * sizeof *k->table);
    if (!work || !k->off || !k->use || !k->table)
        goto nomem;
    memset(k->table, 0xff, k->tcap * sizeof *k->table); /* all -1 */
    for (int64_t p = 0; p < k->n; p++) {
        char key[PACK_PATHCAP];
        int kl = pack_input_key(in, order[p], key, sizeof key);
        k->off[p] = -1;
        if (kl <= 0 || (size_t)kl >= sizeof key || !pack_key_safe(key, (size_t)kl, maxext))
            continue;
        size_t at = slot_of(k, key, (size_t)kl);
        if (k->table[at] >= 0) { /* the source has this key twice: neither keeps it */
            k->use[k->table[at]] = 0;
            continue;
        }
        if (k->alen + (size_t)kl + 1 > k->acap) {
            size_t nc = k->acap ? 2 * k->acap : 1 << 16;
            while (nc < k->alen + (size_t)kl + 1)
                nc *= 2;
            char *a = realloc(k->arena, nc);
            if (!a)
                goto nomem;
            k->arena = a;
            k->acap = nc;
        }
        memcpy(k->arena + k->alen, key, (size_t)kl + 1);
        k->off[p] = (int64_t)k->alen;
        k->alen += (size_t)kl + 1;
        k->table[at] = p;
        k->use[p] = 1;
    }
    size_t nwork = 0;
    for (int64_t p = 0; p < k->n; p++)
        if (!k->use[p])
            work[nwork++] = p;
    /* position keys taken: a kept key equal to one falls back as well */
    while (nwork > 0) {
        int64_t q = work[--nwork];
        char key[32];
        int kl = snprintf(key, sizeof key, "%0*lld", k->width, (long long)q);
        int64_t p = k->table[slot_of(k, key, (size_t)kl)];
        if (p >= 0 && p != q && k->use[p]) {
            k->use[p] = 0;
            work[nwork++] = p;
        }
    }
    for (int64_t p = 0; p < k->n; p++)
        k->nkept += k->use[p];
    free(work);
    return 0;
nomem:
    free(work);
    fprintf(stderr, "ringfeed-pack: out of memory for the keys of %lld samples\n", (long long)k->n);
    return -1;
}

pack_keys *pack_keys_make(const pack_input *in, const int64_t *order, int64_t n, int keep)
{
    pack_keys *k = calloc(1, sizeof *k);
    if (!k) {
        fprintf(stderr, "ringfeed-pack: out of memory\n");
        return NULL;
    }
    k->n = n;
    k->width = 6;
    for (int64_t m = n; m >= 1000000; m /= 10)
        k->width++;
    if (keep && n > 0 && keep_keys(k, in, order) != 0) {
        pack_keys_free(k);
        return NULL;
    }
    return k;
}
