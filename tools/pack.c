/*
 * pack.c - ringfeed-pack: writes any source the loader reads (image folder,
 * list file, tar shards) or tables (Parquet, Arrow: the Hugging Face
 * layouts) as WebDataset tar shards of bounded-size pictures, JPEG or raw
 * pixels (.npy), with a manifest; `ringfeed-pack merge OUT` joins the parts
 * of a pack made on several machines (--part K/N).
 *
 * This file reads the options and hands over: pack_input.c opens what is
 * packed, pack_run.c writes it, pack_merge.c merges (pack.h lists the
 * parts).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pack.h"
#include "ringfeed.h"

/* ---- main ---- */

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: ringfeed-pack [options] SRC... OUT\n"
        "       ringfeed-pack merge [--without-shards] OUT\n"
        "Writes SRC (an image folder, a list file or tar shards: anything the loader reads;\n"
        "JPEG, PNG, WebP, BMP, PNM pictures; or tables: .parquet / .arrow files, or a folder\n"
        "written by datasets' save_to_disk, read with pyarrow) as WebDataset tar shards\n"
        "OUT/<prefix>-000000.tar, ... with members <key>.jpg (or <key>.npy: raw pixels)\n"
        "and <key>.cls (and a tar source's other members), and OUT/manifest.json, whose\n"
        "index lets the loader skip the shards' header walk (and which holds each shard's\n"
        "SHA-256, for checking copies, and each sample's source). OUT is made with its\n"
        "parents. A rerun skips the shards already complete. Several SRC are packed as one.\n"
        "  --max-side N        shrink so that the longer side is at most N (never enlarge;\n"
        "                      0, the default: keep the size)\n"
        "  --store jpeg|raw|auto  JPEG (default); raw uint8 pixels (H, W, 3) in NumPy's .npy\n"
        "                      format, read with no decode; auto: raw where its bytes are at\n"
        "                      most --raw-max-ratio times the JPEG's\n"
        "  --raw-max-ratio R   auto's ratio (default 4)\n"
        "  --raw-fraction F    instead: the smallest pictures raw, up to F times the samples,\n"
        "                      the others JPEG (reads every picture's header first)\n"
        "  --quality Q         JPEG quality 1..100 (default 90)\n"
        "  --shard-count N     samples per shard (default 1000)\n"
        "  --shard-size BYTES  instead: close each shard once it holds BYTES (suffixes k, M, G)\n"
        "  --workers N         encoding threads (default: the CPUs); output does not depend on it\n"
        "  --shuffle           write the samples in a shuffled order (seeded by --seed)\n"
        "  --seed S            seed of --shuffle (default 0)\n"
        "  --part K/N          write the K-th (0..N-1) of N contiguous slices of the order:\n"
        "                      shards <prefix>-pKofN-000000.tar, ... and manifest-pKofN.json;\n"
        "                      then `ringfeed-pack merge OUT` checks the parts and writes\n"
        "                      OUT/manifest.json (--without-shards: the shards are not in\n"
        "                      OUT, e.g. already in object storage: their manifests alone)\n"
        "  --keep-keys         keep the source's own keys (a file's path without extension,\n"
        "                      a tar sample's key) where unique and tar-safe\n"
        "  --keep-original-if-smaller  store a picture needing no shrink as it came, under\n"
        "                      its own extension (<key>.png, ...): a JPEG always, another\n"
        "                      format when its bytes are fewer than the JPEG's\n"
        "  --extras LIST       tar sources: the members besides the picture and the .cls\n"
        "                      label copied unchanged into each sample, by extension\n"
        "                      (\"txt,json\"); default: all of them; \"none\": none\n"
        "  --image-column C    tables: the picture column (binary, or a struct with bytes);\n"
        "                      default: found from the schema\n"
        "  --label-column C    tables: the integer label column; default: found\n"
        "  --extras-columns L  tables: other columns kept as each sample's .json (\"a,b\",\n"
        "                      or \"all\"); default: none\n"
        "  --prefix NAME       shard name prefix (default \"shard\")\n"
        "  --on-error raise|skip  a bad source file stops the run (default) or is left out\n"
        "                      and listed in the manifest\n"
        "  -h, --help          this text\n"
        "Tables are read by Python with pyarrow: $RINGFEED_PYTHON (default python3) must\n"
        "import ringfeed and pyarrow (python -m ringfeed.pack sees to the first).\n");
}

static int parse_int(const char *s, long long lo, long long hi, long long *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

/* A byte count with an optional k, M or G suffix (powers of 1024). */
static int parse_size(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    int shift = *end == 'k' || *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (shift)
        end++;
    if (errno || end == s || *end || *s == '-' || x == 0 || x > (UINT64_MAX >> shift))
        return -1;
    *v = (uint64_t)x << shift;
    return 0;
}

/* mkdir -p. 0, or -1 with errno set. */
static int mkdir_p(const char *path)
{
    char p[PACK_PATHCAP];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *c = p + 1; *c; c++) {
        if (*c != '/')
            continue;
        *c = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            return -1;
        *c = '/';
    }
    if (mkdir(p, 0777) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* --part K/N: 0 <= K < N. */
static int parse_part(const char *s, int64_t *k, int64_t *n)
{
    char *end;
    errno = 0;
    long long a = strtoll(s, &end, 10);
    if (errno || end == s || *end != '/' || *s == '-')
        return -1;
    const char *t = end + 1;
    long long b = strtoll(t, &end, 10);
    if (errno || end == t || *end || *t == '-' || b < 1 || b > (1 << 20) || a < 0 || a >= b)
        return -1;
    *k = a;
    *n = b;
    return 0;
}

static int parse_double(const char *s, double lo, double hi, double *v)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || end == s || *end || !(x >= lo && x <= hi))
        return -1;
    *v = x;
    return 0;
}

/* SRC... joined by '\n' (the source spec's list), malloc'ed. */
static char *join_sources(char **v, int n)
{
    size_t len = 1;
    for (int i = 0; i < n; i++)
        len += strlen(v[i]) + 1;
    char *s = malloc(len), *at = s;
    for (int i = 0; s && i < n; i++)
        at += sprintf(at, "%s%s", i ? "\n" : "", v[i]);
    return s;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "merge")) {
        int without = argc == 4 && !strcmp(argv[2], "--without-shards");
        if ((argc == 3 || without) && argv[argc - 1][0] != '-')
            return pack_merge(argv[argc - 1], !without);
        int help = argc == 3 && (!strcmp(argv[2], "-h") || !strcmp(argv[2], "--help"));
        usage(help ? stdout : stderr);
        return help ? 0 : 2;
    }
    pack_opts o = {.prefix = "shard",
                   .img = {.quality = 90, .store = PACK_STORE_JPEG, .raw_max_ratio = 4},
                   .raw_fraction = -1,
                   .shard_count = 1000};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    o.workers = cpus > 0 ? (int)cpus : 1;
    enum {
        O_MAX = 256,
        O_Q,
        O_SC,
        O_SS,
        O_W,
        O_SH,
        O_SEED,
        O_KEEP,
        O_PRE,
        O_ERR,
        O_STOP,
        O_EXTRAS,
        O_STORE,
        O_RATIO,
        O_FRAC,
        O_KEYS,
        O_PART,
        O_IMG,
        O_LAB,
        O_XCOL
    };
    static const struct option lo[] = {{"max-side", 1, 0, O_MAX},
                                       {"quality", 1, 0, O_Q},
                                       {"shard-count", 1, 0, O_SC},
                                       {"shard-size", 1, 0, O_SS},
                                       {"workers", 1, 0, O_W},
                                       {"shuffle", 0, 0, O_SH},
                                       {"seed", 1, 0, O_SEED},
                                       {"keep-original-if-smaller", 0, 0, O_KEEP},
                                       {"prefix", 1, 0, O_PRE},
                                       {"on-error", 1, 0, O_ERR},
                                       {"stop-after-shards", 1, 0, O_STOP},
                                       {"extras", 1, 0, O_EXTRAS},
                                       {"store", 1, 0, O_STORE},
                                       {"raw-max-ratio", 1, 0, O_RATIO},
                                       {"raw-fraction", 1, 0, O_FRAC},
                                       {"keep-keys", 0, 0, O_KEYS},
                                       {"part", 1, 0, O_PART},
                                       {"image-column", 1, 0, O_IMG},
                                       {"label-column", 1, 0, O_LAB},
                                       {"extras-columns", 1, 0, O_XCOL},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    int c, sc_given = 0, store_given = 0;
    long long v;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        int bad_arg = 0;
        switch (c) {
        case O_MAX:
            bad_arg = parse_int(optarg, 0, 1 << 16, &v);
            o.img.max_side = (int)v;
            break;
        case O_Q:
            bad_arg = parse_int(optarg, 1, 100, &v);
            o.img.quality = (int)v;
            break;
        case O_SC:
            sc_given = 1;
            bad_arg = parse_int(optarg, 1, INT64_MAX, &v);
            o.shard_count = v;
            break;
        case O_SS:
            bad_arg = parse_size(optarg, &o.shard_size);
            break;
        case O_W:
            bad_arg = parse_int(optarg, 1, 1024, &v);
            o.workers = (int)v;
            break;
        case O_SH:
            o.shuffle = 1;
            break;
        case O_SEED:
            bad_arg = parse_int(optarg, 0, INT64_MAX, &v);
            o.seed = (uint64_t)v;
            break;
        case O_KEEP:
            o.img.keep_original = 1;
            break;
        case O_PRE:
            o.prefix = optarg;
            bad_arg = !*optarg || strlen(optarg) > 128 || strchr(optarg, '/') != NULL;
            break;
        case O_ERR:
            bad_arg = strcmp(optarg, "raise") && strcmp(optarg, "skip");
            o.skip_errors = !strcmp(optarg, "skip");
            break;
        case O_STOP:
            bad_arg = parse_int(optarg, 1, INT32_MAX, &v);
            o.stop_after = (int)v;
            break;
        case O_EXTRAS:
            o.extras_arg = optarg;
            bad_arg = !*optarg;
            break;
        case O_STORE:
            store_given = 1;
            o.img.store = !strcmp(optarg, "raw")    ? PACK_STORE_RAW
                          : !strcmp(optarg, "auto") ? PACK_STORE_AUTO
                                                    : PACK_STORE_JPEG;
            bad_arg = strcmp(optarg, "raw") && strcmp(optarg, "auto") && strcmp(optarg, "jpeg");
            break;
        case O_RATIO:
            bad_arg = parse_double(optarg, 1e-9, 1e9, &o.img.raw_max_ratio);
            break;
        case O_FRAC:
            bad_arg = parse_double(optarg, 0, 1, &o.raw_fraction);
            break;
        case O_KEYS:
            o.keep_keys = 1;
            break;
        case O_PART:
            bad_arg = parse_part(optarg, &o.part, &o.parts);
            break;
        case O_IMG:
            o.image_column = optarg;
            bad_arg = !*optarg;
            break;
        case O_LAB:
            o.label_column = optarg;
            bad_arg = !*optarg;
            break;
        case O_XCOL:
            o.extras_columns = optarg;
            bad_arg = !*optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
        if (bad_arg) {
            fprintf(stderr, "ringfeed-pack: bad value '%s' for --%s\n", optarg, lo[c - O_MAX].name);
            return 2;
        }
    }
    if (sc_given && o.shard_size) {
        fprintf(stderr, "ringfeed-pack: --shard-count and --shard-size exclude each other\n");
        return 2;
    }
    if (o.raw_fraction >= 0) {
        if (store_given && o.img.store != PACK_STORE_AUTO) {
            fprintf(stderr, "ringfeed-pack: --raw-fraction chooses between raw and JPEG: it goes "
                            "with --store auto (or no --store)\n");
            return 2;
        }
        o.img.store = PACK_STORE_AUTO;
    }
    if (argc - optind < 2) {
        usage(stderr);
        return 2;
    }
    char *src = join_sources(argv + optind, argc - optind - 1);
    if (!src) {
        fprintf(stderr, "ringfeed-pack: out of memory\n");
        return 1;
    }
    o.src = src;
    o.out = argv[argc - 1];
    pack_input in;
    int rc = pack_input_open(&in, &o);
    if (rc == 0 && mkdir_p(o.out) != 0) {
        fprintf(stderr, "ringfeed-pack: cannot create %s: %s\n", o.out, strerror(errno));
        rc = 1;
    }
    if (rc == 0)
        rc = pack_run(&o, &in);
    pack_input_close(&in);
    free(src);
    return rc;
}
