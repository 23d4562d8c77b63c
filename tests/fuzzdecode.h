/*
 * fuzzdecode.h - what the decoders' fuzz targets share (fuzz_decode.c,
 * fuzz_formats.c, fuzz_webp.c): the options an input's control byte picks,
 * and the oracle that decodes an input twice, NHWC into a buffer of 0x00 and
 * NCHW into one of 0xff, each exactly one sample's size (an overrun is an
 * ASan report), and checks that both agree on success or failure and on the
 * reason, that a success writes every byte and NCHW is NHWC transposed, and
 * that a failure is RF_E_DECODE / RF_E_LIMIT / RF_E_NOMEM with a non-empty
 * terminated reason. The includer defines FZ_NAME (its name in a finding's
 * message) and includes it after <stdio.h>, <stdlib.h>, <string.h> and
 * "decode.h"; all static.
 */
#ifndef RF_TESTS_FUZZDECODE_H
#define RF_TESTS_FUZZDECODE_H

/* 1 Mpixel: the limit paths are the same at any value, and a lying header
 * that claims the maximum still decodes in well under a second under ASan
 * (at 4096 x 4096 an arithmetic-coded one takes over a second: libFuzzer
 * would spend its time there). */
#define FZ_MAX_PIXELS (1024 * 1024)
#define FZ_MAX_SCANS 64
#define FZ_NONE_MAX_SIDE 512

static const int fz_sizes[8] = {1, 2, 7, 16, 31, 32, 57, 64};

/* The control byte ctl of an input of len file bytes: transform = ctl % 3,
 * flip = bit 2, epoch = bits 3-4, output side = fz_sizes[ctl >> 5]. The
 * caller sets check_tail, the layout and, for "none", the picture's side. */
static void fz_opts(rf_decode_opts *o, uint8_t ctl, size_t len)
{
    memset(o, 0, sizeof *o);
    o->transform = ctl % 3;
    o->flip = (ctl >> 2) & 1;
    o->size = fz_sizes[ctl >> 5 & 7];
    o->max_pixels = FZ_MAX_PIXELS;
    o->max_scans = FZ_MAX_SCANS;
    o->seed = (uint64_t)ctl * 0x9e3779b97f4a7c15ULL;
    o->epoch = (ctl >> 3) & 3;
    o->sample = (int64_t)len;
}

/* "none" at the picture's own side (control bits 3-4 both set), when the
 * picture is square and at most FZ_NONE_MAX_SIDE. */
static int fz_none_at_side(const rf_decode_opts *o, uint8_t ctl, int w, int h)
{
    return o->transform == RF_TRANSFORM_NONE && (ctl & 0x18) == 0x18 && w == h && w >= 1 &&
           w <= FZ_NONE_MAX_SIDE;
}

/* The control byte of a seed: transform t (0 none, 1 center, 2 rrc), size
 * index k, flip. t must stay c % 3: adjust with the epoch bits (3..4), which
 * carry no meaning beyond the RNG key. Inline, as the next: seeds are made
 * by the standalone driver only. */
static inline uint8_t ctl_of(int t, int k, int flip)
{
    uint8_t c = (uint8_t)(t | (flip ? 4 : 0) | (k << 5));
    for (int e = 0; e < 4 && c % 3 != t; e++)
        c = (uint8_t)((c & ~0x18) | (e << 3));
    return c;
}

/* A control byte for "none" at the picture's own side (0x18). */
static inline uint8_t ctl_none_own_side(void)
{
    for (int c = 0; c < 256; c++)
        if (c % 3 == 0 && (c & 0x18) == 0x18)
            return (uint8_t)c;
    abort();
}

static void finding(const char *what, int rc1, int rc2, const char *e1, const char *e2)
{
    fprintf(stderr, FZ_NAME ": FINDING: %s (rc %d / %d; \"%s\" / \"%s\")\n", what, rc1, rc2, e1,
            e2);
    abort(); /* libFuzzer saves the input as a crash artifact */
}

static void check_failure(int rc, const char *err, size_t cap)
{
    if (rc != RF_E_DECODE && rc != RF_E_LIMIT && rc != RF_E_NOMEM)
        finding("unexpected status", rc, rc, "", "");
    if (memchr(err, '\0', cap) == NULL)
        finding("reason not NUL-terminated", rc, rc, "", "");
    if (err[0] == '\0')
        finding("failure without a reason", rc, rc, "", "");
}

/* The oracle: file (len bytes) decoded by d with *o in both layouts; verbose
 * prints the outcome (standalone --list). Inline: fuzz_webp.c has its own oracle. */
static inline void fz_decode_both_layouts(rf_decoder *d, const uint8_t *file, size_t len,
                                          rf_decode_opts *o, int verbose)
{
    size_t n = (size_t)o->size * (size_t)o->size * 3;
    uint8_t *a = malloc(n), *b = malloc(n); /* exactly one sample's place */
    if (!a || !b)
        abort();
    memset(a, 0x00, n);
    memset(b, 0xff, n);
    char ea[512], eb[512];
    memset(ea, 'x', sizeof ea); /* no NUL: a failure must write a terminated reason */
    memset(eb, 'x', sizeof eb);
    rf_decode_times t;
    o->layout = RF_LAYOUT_NHWC;
    int ra = rf__decode_sample(d, file, len, o, a, ea, sizeof ea, &t);
    o->layout = RF_LAYOUT_NCHW;
    int rb = rf__decode_sample(d, file, len, o, b, eb, sizeof eb, &t);
    if (ra != 0)
        check_failure(ra, ea, sizeof ea);
    if (rb != 0)
        check_failure(rb, eb, sizeof eb);
    ea[sizeof ea - 1] = eb[sizeof eb - 1] = '\0'; /* printable from here on */
    if (verbose)
        printf("  t=%d S=%d flip=%d len=%zu: %s\n", o->transform, o->size, o->flip, len,
               ra ? ea : "ok");
    if ((ra == 0) != (rb == 0))
        finding("NHWC and NCHW disagree on success", ra, rb, ra ? ea : "", rb ? eb : "");
    if (ra != 0) {
        if (ra != rb || strcmp(ea, eb) != 0)
            finding("the same input failed differently", ra, rb, ea, eb);
    } else {
        /* NCHW is NHWC transposed, and every byte was written (the buffers
         * started as 0x00 and 0xff). */
        size_t S = (size_t)o->size;
        for (size_t y = 0; y < S; y++)
            for (size_t x = 0; x < S; x++)
                for (size_t c = 0; c < 3; c++)
                    if (a[(y * S + x) * 3 + c] != b[(c * S + y) * S + x])
                        finding("NCHW is not NHWC transposed, or a byte was not written", ra, rb,
                                ea, eb);
    }
    free(a);
    free(b);
}

#endif /* RF_TESTS_FUZZDECODE_H */
