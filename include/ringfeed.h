/*
 * ringfeed.h - the whole public contract of libringfeed.
 *
 * ringfeed loads training data for deep-learning jobs: an index of samples
 * (image folder, list file, ...), a seeded sampler, an io_uring reader, a pool
 * of libjpeg-turbo decode threads and a ring of batch slots that the trainer
 * borrows one batch at a time.
 *
 * Life of a loader:
 *
 *     rf_loader *l = rf_loader_create("data/train");     // NULL only on OOM
 *     rf_loader_set_param(l, RF_P_BATCH_SIZE, 256);
 *     rf_loader_set_param(l, RF_P_TRANSFORM, RF_TRANSFORM_CENTER);
 *     if (rf_loader_start(l) < 0) puts(rf_loader_errmsg(l));
 *     for (int64_t epoch = 0; epoch < 90; epoch++) {
 *         rf_loader_set_epoch(l, epoch);
 *         rf_batch *b;
 *         int rc;
 *         while ((rc = rf_loader_next(l, &b)) == RF_OK) {
 *             train(rf_batch_data(b), rf_batch_labels(b), rf_batch_count(b));
 *             rf_batch_release(b);
 *         }
 *         if (rc < 0) puts(rf_loader_errmsg(l));
 *     }
 *     rf_loader_destroy(l);
 *
 * Options are integers set with rf_loader_set_param() before rf_loader_start()
 * (the zstd model: no struct crosses the ABI, adding an option never changes a
 * layout). 0 means "auto" wherever that makes sense. Every function's comment
 * ends with a Thread-safety line.
 *
 * Errors: functions returning int give RF_OK (0) on success, a positive value
 * for an outcome that is not an error (RF_END_OF_EPOCH, RF_AGAIN) and a
 * negative RF_E_* value on error. The detail of the last error (component,
 * path, cause) is kept per loader: rf_loader_errmsg(), whose comment says
 * which calls write it.
 */
#ifndef RINGFEED_H
#define RINGFEED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RF_BUILDING_LIBRARY)
#define RF_API __attribute__((visibility("default")))
#else
#define RF_API
#endif

/* The project's one version: CMake's project version, the pip package's version and
 * ringfeed.__version__ are all read from these three lines (bump them, nothing else). */
#define RF_VERSION_MAJOR 0
#define RF_VERSION_MINOR 5
#define RF_VERSION_PATCH 1
#define RF_VERSION_NUMBER (RF_VERSION_MAJOR * 10000 + RF_VERSION_MINOR * 100 + RF_VERSION_PATCH)

/* Status codes. Values are permanent. */
enum rf_status {
    RF_OK = 0,
    RF_END_OF_EPOCH = 1,   /* rf_loader_next: the epoch has no more batches */
    RF_AGAIN = 2,          /* rf_loader_next_wait: timed out, nothing is wrong */
    RF_E_INVALID = -1,     /* bad argument or option value */
    RF_E_NOMEM = -2,       /* allocation failed */
    RF_E_IO = -3,          /* a sample could not be read */
    RF_E_DECODE = -4,      /* a sample could not be decoded (corrupt, truncated, unsupported) */
    RF_E_STATE = -5,       /* call not valid in this state: already started, a fixed option
                            * after rf_loader_start (the states below have codes of their own) */
    RF_E_SOURCE = -6,      /* the source could not be indexed */
    RF_E_SYSTEM = -7,      /* a system resource failed (threads, io_uring, ...) */
    RF_E_CUDA = -8,        /* CUDA error */
    RF_E_TIMEOUT = -9,     /* a read did not complete within RF_P_READ_TIMEOUT_MS */
    RF_E_LIMIT = -10,      /* input exceeds a configured limit (pixels, scans, errors) */
    RF_E_STOPPED = -11,    /* the loader was stopped (rf_loader_stop) */
    RF_E_FORKED = -12,     /* the loader was created in another process (used after fork) */
    RF_E_NO_DEVICE = -13,  /* the loader has no CUDA device (RF_P_DEVICE = -1, no device, no
                            * driver, or a library built without CUDA) */
    RF_E_RELEASED = -14,   /* the batch handle was already released (double or stale release) */
    RF_E_NOT_STARTED = -15,/* the loader was not started (rf_loader_start) */
    RF_E_RING_FULL = -16,  /* every ring slot is lent: release a batch before asking for more */
    RF_E_CALLBACK = -17,   /* the per-sample callback (rf_loader_set_sample_fn) returned nonzero */
};

/* Option identifiers for rf_loader_set_param / rf_loader_get_param. Values are
 * permanent. "Fixed" options are read at rf_loader_start and cannot change
 * afterwards (set_param returns RF_E_STATE). */
enum rf_param {
    RF_P_BATCH_SIZE = 1,       /* samples per batch; default 256. Fixed. */
    RF_P_IMAGE_SIZE = 2,       /* output height = width in pixels; default 224. Fixed. */
    RF_P_TRANSFORM = 3,        /* enum rf_transform; default RF_TRANSFORM_CENTER. Fixed. */
    RF_P_FLIP = 4,             /* 1: random horizontal flip, p = 0.5; default 0. Fixed. */
    RF_P_LAYOUT = 5,           /* enum rf_layout; default RF_LAYOUT_NHWC. Fixed. */
    RF_P_SHUFFLE = 6,          /* 1: seeded permutation per epoch; default 1. Fixed. */
    RF_P_SEED = 7,             /* seed of the order and of augmentations; default 0. Fixed. */
    RF_P_DROP_LAST = 8,        /* 1: drop the last incomplete batch; default 0. Fixed. */
    RF_P_NUM_WORKERS = 9,      /* decode threads; 0 = auto (usable cores); default 0. Fixed. */
    RF_P_PREFETCH = 10,        /* ring slots (batches in flight); default 4, at least 2. Fixed. */
    RF_P_ON_ERROR = 11,        /* enum rf_on_error; default RF_ON_ERROR_RAISE. Fixed. */
    RF_P_RANK = 12,            /* this process's rank; default 0. Fixed. */
    RF_P_WORLD_SIZE = 13,      /* number of ranks; default 1. Fixed. */
    RF_P_LOCAL_WORLD_SIZE = 14,/* training processes on this node (splits the cores); default 1. Fixed. */
    RF_P_IO_BACKEND = 15,      /* enum rf_io_backend; default AUTO (RINGFEED_IO=pread forces pread). Fixed. */
    RF_P_PIN_MEMORY = 16,      /* 1: page-locked ring when CUDA is usable; default 1. Fixed. */
    RF_P_DEVICE = 17,          /* -1: CPU; N >= 0: CUDA device N; default -1. Fixed. */
    RF_P_MAX_PIXELS = 18,      /* largest width*height accepted; default 178956970 (PIL's limit). Fixed. */
    RF_P_MAX_SCANS = 19,       /* most progressive scans accepted; default 1000. Fixed. */
    RF_P_READ_DEPTH = 20,      /* reads in flight; 0 = auto; default 0. Fixed. */
    RF_P_READ_TIMEOUT_MS = 21, /* an open/read taking longer fails with RF_E_TIMEOUT; 0 = none.
                                * io_uring only (pread cannot be interrupted). Fixed. */
    RF_P_MAX_ERRORS = 22,      /* with RF_ON_ERROR_SKIP: skips allowed before raising; -1 = no cap. Fixed. */
    /* Record files (fixed-size binary records, e.g. token shards). record_size > 0
     * makes the source a record source: the spec names one file, a pattern or a
     * '\n'-separated list of files, and sample i is record i of their concatenation,
     * bytes [header_size + j * record_size, + record_size) of its file (a trailing
     * partial record is ignored). Requires RF_TRANSFORM_NONE; the bytes are copied
     * to the batch unchanged (record_size bytes per sample, the file's byte order;
     * image_size, flip and layout are ignored); labels are 0. */
    RF_P_RECORD_SIZE = 23,     /* bytes per record; 0 = not a record source; default 0. Fixed. */
    RF_P_HEADER_SIZE = 24,     /* bytes skipped at the start of each record file; default 0. Fixed. */
    RF_P_DTYPE = 25,           /* enum rf_dtype. Records: the type of their elements
                                  (RF_DTYPE_UINT8 .. RF_DTYPE_INT64); record_size must be a
                                  multiple of its size. Pictures: the output's type, RF_DTYPE_UINT8
                                  or a float type, normalised as rf_loader_set_normalize says;
                                  default RF_DTYPE_UINT8. Fixed. */
    RF_P_VERIFY = 26,          /* enum rf_verify; default RF_VERIFY_ONCE. Fixed. */
    RF_P_MAX_FILE_BYTES = 27,  /* largest sample file (or ranged member) read; larger ones are errors,
                                  refused before allocation; default 536870912 (512 MiB). Fixed. */
    RF_P_EXACT = 28,           /* 1: decode every picture at full resolution, so that the output
                                  equals torchvision's on PIL's decode byte for byte (center:
                                  Resize + CenterCrop + PILToTensor); 0: a picture much larger
                                  than the output is decoded at 1/2, 1/4 or 1/8 scale (libjpeg's
                                  DCT scaling), faster and close but not byte-equal; default 0.
                                  Fixed. */
    /* RandomResizedCrop's ranges, torchvision's scale=(min, max) (the crop's area as
     * a fraction of the picture's) and ratio=(min, max) (its width / height), in
     * millionths: 500000 is 0.5. 0, the default, is torchvision's default exactly
     * (0.08, 1.0, 3/4, 4/3 as doubles), and so is a value equal to that default
     * rounded to millionths (80000, 1000000, 750000, 1333333). rf_loader_start
     * refuses min > max (torchvision only warns) and any of them set to a value
     * other than 0 unless RF_P_TRANSFORM is RF_TRANSFORM_RANDOM_RESIZED_CROP. */
    RF_P_SCALE_MIN = 29,       /* 0 or 1..1000000 (area fraction in (0, 1]); default 0 (0.08). Fixed. */
    RF_P_SCALE_MAX = 30,       /* 0 or 1..1000000; default 0 (1.0). Fixed. */
    RF_P_RATIO_MIN = 31,       /* 0 or 1..1000000000 (width / height in (0, 1000]); default 0 (3/4). Fixed. */
    RF_P_RATIO_MAX = 32,       /* 0 or 1..1000000000; default 0 (4/3). Fixed. */
    RF_P_SAMPLER_DROP_LAST = 33, /* 1: split as DistributedSampler(drop_last=True): the epoch's
                                  order is cut to floor(n / world_size) * world_size samples
                                  and each rank takes floor(n / world_size) of them, none
                                  shared (validation); 0: pad by wrapping so every sample is
                                  seen, some twice. Independent of RF_P_DROP_LAST; default 0.
                                  Fixed. */
    /* 34: not used (the label member is a name: rf_loader_set_label). */
    RF_P_EXTRAS_BYTES = 35,    /* tar extras (rf_loader_set_extras): bytes of all extra members of one
                                  sample; each ring slot holds batch_size times this; a sample whose
                                  extras need more is an error (under RF_P_ON_ERROR) naming the shard,
                                  the key and the member; default 65536. Fixed. */
    /* Shard-aware shuffle, for shards that do not all fit a local cache (remote
     * shards) or the page cache. 0, the default: the epoch's global order is a
     * permutation of all samples. K > 0: a seeded permutation of the shards (tar
     * shards, or record files: each file is a shard), cut into consecutive
     * blocks of K shards; each block's samples are shuffled together (a stream
     * keyed on seed, epoch and block) and the blocks follow each other. The
     * split across ranks, padding and batching are the same as with 0, so all
     * ranks read from the same block at the same time: about K shards are live
     * at once (2K across a block boundary), on every rank. Two samples can
     * share a batch only when their shards share a block (or neighbouring
     * blocks, at a boundary). Without RF_P_SHUFFLE the order is the shards' own
     * order, as with 0. Deterministic for any worker count. An image folder or
     * a list file has no shards: rf_loader_start refuses K > 0 (RF_E_INVALID).
     * When the whole dataset is local, 0 mixes best. Fixed. */
    RF_P_SHUFFLE_BLOCK = 36,   /* shards per block; 0 = global shuffle; default 0. Fixed. */
    RF_P_CACHE_LIMIT = 37,     /* remote shards (s3://, http(s)://): bytes the local cache folder
                                  (rf_loader_set_cache_dir) may hold, shards, their indexes,
                                  transfers in progress and every other file in it together (the
                                  sizes of its regular files); unpinned shards are evicted, least
                                  recently used first; files the cache did not make are never
                                  deleted, and when they (with the indexes live loaders use) leave
                                  no room for a shard, that is an error naming them, at
                                  rf_loader_start when the largest shard could never fit. The
                                  limit is the folder's, shared by
                                  every loader on the node that uses it: give them all the same
                                  value, one that covers them all (at least two shards per loader).
                                  A loader wants at most cache_limit / (largest shard) shards at
                                  once and waits when pinned shards (its own and other loaders')
                                  fill the folder; when the shard of its next sample finds no room
                                  for 0.2 s, the loaders on the node give up the pins they hold
                                  for later samples and fetch those shards again when they come up
                                  (stats "releases", "refetches": the global shuffle over data
                                  larger than the cache; RF_P_SHUFFLE_BLOCK avoids them; with
                                  fewer than two shards per loader a warning says so once, on
                                  stderr and in the stats). A
                                  shard larger than the limit fails rf_loader_start. A loader also
                                  wants no more shards at once than its descriptors allow: each
                                  pinned shard holds one open file (a transfer two, and a lock), so
                                  the first remote loader of a process raises the soft
                                  RLIMIT_NOFILE to the hard one (65536 at most), and a loader
                                  wants at most a third of what that limit leaves beside the files
                                  open at its start and 2 * RF_P_FETCH_PARALLEL + 32 for the rest
                                  of the process (a shard whose open still fails for want of
                                  descriptors waits up to 10 s for some to close): 80 shards
                                  start and read under `ulimit -n 64`, a shard or a few at a time.
                                  0 = auto: what the folder holds plus half the free space of its
                                  file system, at start; default 0. Fixed. */
    /* 38, 39: not used. */
    RF_P_FETCH_RETRIES = 40,   /* remote shards: tries after the first on a connection error, a
                                  timeout (RF_P_FETCH_TIMEOUT_MS), HTTP 408, 429 or 5xx
                                  (exponential backoff: 0.1 s doubling to 3.2 s at most, each
                                  x [0.5, 1.5) at random); then the shard's samples fail naming
                                  the URL (without user:password or query), the HTTP status,
                                  S3's error code and message, and for s3:// whether and with
                                  which key the request was signed. Other HTTP errors fail at
                                  once, an object whose size or ETag changed since indexing
                                  without a retry; an S3 credential error (ExpiredToken, ...)
                                  reads the credentials again and, when they changed, tries
                                  once more at once (not counted here). Under
                                  RF_ON_ERROR_SKIP a bad sample of a remote shard is replaced by
                                  a sample of the same shard (the one sure to be in the cache),
                                  drawn from (seed, epoch, sample); the samples of a shard that
                                  cannot be fetched have no readable substitute and fail.
                                  Default 5. Fixed. */
    RF_P_FETCH_TIMEOUT_MS = 41,/* remote shards: a try (connect, TLS, answer and transfer) that
                                  receives fewer than max(1, 1024 x this / 1000) bytes in any
                                  span of this long from its start times out and is retried: a
                                  server that does not answer fails the try after this long, one
                                  that stalls or trickles under 1 KiB/s within this long and a
                                  sixteenth. A request that keeps timing out thus gives up after
                                  at most (RF_P_FETCH_RETRIES + 1) x 17/16 x this, plus the
                                  backoffs (the k-th at most 0.15 x 2^(k-1) s, 4.8 s from the
                                  sixth on): with the defaults 196 s; with 2000 and 2 retries,
                                  6.4 s and at most 0.45 s of backoff. Default 30000. Fixed. */
    RF_P_FETCH_PARALLEL = 42,  /* remote shards: transfers in flight at most, also at start, where
                                  the shards with neither a kept index nor a manifest entry are
                                  fetched this many at once while one is walked; default 4.
                                  Fixed. */
    /* ---- shapes: rectangles, resize, letterbox, buckets, native sizes ----
     * The output is image_height x image_width (every transform: a crop's
     * size, or the frame a picture is fitted into), torchvision's (H, W)
     * order. RF_P_IMAGE_SIZE sets both; reading it back gives the last
     * value set through it. */
    RF_P_IMAGE_HEIGHT = 43,    /* output height; default 224. Fixed. */
    RF_P_IMAGE_WIDTH = 44,     /* output width; default 224. Fixed. */
    /* RF_TRANSFORM_CENTER's Resize before its CenterCrop((H, W)): 0, the
     * default, is Resize(round(max(H, W) / 0.875)) (the shorter side); a
     * value R is Resize(R); RF_P_RESIZE_HEIGHT and _WIDTH (both, instead)
     * Resize((h, w)). Other transforms refuse them. */
    RF_P_RESIZE_SIZE = 45,     /* shorter side; 0 = default. Fixed. */
    RF_P_RESIZE_HEIGHT = 46,   /* 0 = not set. Fixed. */
    RF_P_RESIZE_WIDTH = 47,    /* 0 = not set. Fixed. */
    RF_P_ALIGN = 48,           /* enum rf_align: where RF_TRANSFORM_LETTERBOX puts the picture in
                                  its frame; default RF_ALIGN_CENTER. Fixed. */
    RF_P_FILL = 49,            /* the frame's padding (letterbox, native sizes) as 0xRRGGBB;
                                  default 0 (black). Fixed. */
    /* Native sizes: RF_TRANSFORM_NONE with max_side M > 0 returns each
     * picture at its own size, shrunk (never enlarged) so that its larger
     * side is at most M (Resize as letterbox's arithmetic does it), written
     * at the top-left corner of an M x M frame padded with RF_P_FILL:
     * every image of a batch is M x M in memory (slot bytes batch_size x M x
     * M x 3), and rf_batch_sizes gives each one's height and width.
     * image_height and image_width are then ignored. */
    RF_P_MAX_SIDE = 50,        /* 0 = not native; default 0. Fixed. */
    /* Aspect-ratio buckets (also rf_loader_set_buckets): each sample goes to
     * the bucket nearest its aspect ratio (|log(w / h) - log(W / H)| least;
     * ties to the lower bucket), and every batch holds samples of one
     * bucket, their images in its H x W: see "Aspect-ratio buckets" below.
     * N > 0 makes N buckets from the dataset's aspect ratios: the ratios of
     * the N quantiles of log(w / h) (the ((2k + 1) / 2N)-th), each bucket
     * of about image_height x image_width pixels with sides multiples of
     * RF_P_BUCKET_MULTIPLE (repeats merged). */
    RF_P_BUCKETS = 51,         /* N automatic buckets; 0 = none (or rf_loader_set_buckets's);
                                  default 0. Fixed. */
    RF_P_BUCKET_SHARED = 52,   /* 1: the ranks of a step all take batches of one bucket (equal
                                  shapes across ranks, as compiled models need); 0: each rank's
                                  batch has a bucket of its own; default 1. Fixed. */
    RF_P_BUCKET_MULTIPLE = 53, /* automatic buckets: sides are multiples of this; default 8.
                                  Fixed. */
    /* Local shards (tar, record files) are mapped read-only, and a member
     * whose pages are all in memory (the page cache) is decoded in place,
     * without being copied; one that is not is read as before. The mapping
     * counts in the process's resident memory as the shards' cached pages
     * (shared, and the kernel's to reclaim). A shard shortened by another
     * process at the moment its member is decoded can end the process with
     * SIGBUS; 0 reads every member through the reader. */
    RF_P_MAP_SHARDS = 54,      /* 1: read resident members of local shards in place; default 1.
                                  Fixed. */
};

/* Where a letterboxed picture lies in its frame (RF_P_ALIGN). */
enum rf_align { RF_ALIGN_CENTER = 0, RF_ALIGN_TOP_LEFT = 1 };

/* How much of a JPEG is decoded beyond the rows its crop needs (RF_P_VERIFY).
 * Rows below a crop are not needed for its pixels, but damage there (a
 * truncated file, a flipped bit) is found only by entropy-decoding them to
 * the end marker. ONCE decodes a file to its end the first time this loader
 * decodes it, and only down to the crop's last row once it passed; a file
 * that failed is decoded to its end every time, so it fails every time.
 * ALWAYS decodes every file to its end every time; NONE never does (damage
 * below a crop goes unnoticed until a crop reaches it). A file replaced on
 * disk while the loader lives is not checked again under ONCE. */
enum rf_verify { RF_VERIFY_NONE = 0, RF_VERIFY_ONCE = 1, RF_VERIFY_ALWAYS = 2 };

/* Element type (RF_P_DTYPE): of record data, how bindings view the bytes; of
 * pictures, the output's type. The float types hold torchvision's
 * Normalize(mean, std) of ConvertImageDtype(float)'s x / 255, computed in
 * float32 as ((float)x / 255 - mean) / std and rounded to nearest even into
 * the 16-bit types; they are for pictures only, the integer types but uint8
 * for records only. */
enum rf_dtype {
    RF_DTYPE_UINT8 = 0,
    RF_DTYPE_UINT16 = 1,
    RF_DTYPE_INT32 = 2,
    RF_DTYPE_INT64 = 3,
    RF_DTYPE_FLOAT32 = 4,
    RF_DTYPE_FLOAT16 = 5,  /* IEEE binary16 */
    RF_DTYPE_BFLOAT16 = 6, /* the top half of a float32 */
};

enum rf_transform {
    RF_TRANSFORM_NONE = 0,                /* decode only: image must already be H x W; with
                                             RF_P_MAX_SIDE, native sizes */
    RF_TRANSFORM_CENTER = 1,              /* Resize(R) + CenterCrop((H, W)), as torchvision (byte for
                                             byte with RF_P_EXACT); R: RF_P_RESIZE_SIZE */
    RF_TRANSFORM_RANDOM_RESIZED_CROP = 2, /* RandomResizedCrop((H, W), scale, ratio): scale and ratio
                                             from RF_P_SCALE_* / RF_P_RATIO_*, by default (0.08, 1)
                                             and (3/4, 4/3) */
    RF_TRANSFORM_RESIZE = 3,              /* Resize((H, W)): the whole picture, its aspect ratio not
                                             kept (byte for byte with RF_P_EXACT) */
    RF_TRANSFORM_LETTERBOX = 4,           /* fit inside H x W keeping the aspect ratio, placed as
                                             RF_P_ALIGN says, the rest RF_P_FILL; rf_batch_sizes and
                                             rf_batch_scales say where each picture lies */
};

enum rf_layout { RF_LAYOUT_NHWC = 0, RF_LAYOUT_NCHW = 1 };
enum rf_on_error { RF_ON_ERROR_RAISE = 0, RF_ON_ERROR_SKIP = 1 };
enum rf_io_backend { RF_IO_AUTO = 0, RF_IO_URING = 1, RF_IO_PREAD = 2 };

typedef struct rf_loader rf_loader;
typedef struct rf_batch rf_batch;

/* Version of the library that is loaded, as RF_VERSION_NUMBER.
 * Thread-safety: any thread. */
RF_API int rf_version(void);

/* Static description of a status code; never NULL.
 * Thread-safety: any thread. */
RF_API const char *rf_strerror(int status);

/* What this build of the library can do: a static string of the names
 * below, separated by single spaces, in this order, never NULL. A name is
 * there when its library was found at build time (CMake's RF_WITH_*
 * options; `pip install .` builds with every one whose -dev package is
 * installed):
 *   jpeg      JPEG decoding (libjpeg-turbo; always)
 *   png       PNG decoding (libspng, libspng-dev; without it a PNG is an
 *             "unsupported format" error naming "png")
 *   deflate   faster PNG image data (libdeflate, libdeflate-dev)
 *   webp      WebP decoding (libwebp, libwebp-dev; without it the same)
 *   bmp pnm   BMP and PBM/PGM/PPM (no library; always)
 *   remote    s3:// and http(s):// shards (libcurl, libcurl4-openssl-dev;
 *             without it such a source fails rf_loader_start naming "remote")
 *   io_uring  the io_uring reader (liburing, liburing-dev; without it pread)
 *   cuda      the CUDA paths (the toolkit's headers at build time; the runtime
 *             is loaded when a loader asks for a device: rf_cuda_device_count)
 * Thread-safety: any thread. */
RF_API const char *rf_features(void);

/* Valid range of an option. Returns RF_E_INVALID for an unknown option.
 * Thread-safety: any thread. */
RF_API int rf_param_bounds(int param, int64_t *lo, int64_t *hi);

/* New loader over `source`: an image folder (root/<class>/<file>: exactly
 * the files torchvision's ImageFolder indexes, names ending in .jpg .jpeg
 * .png .ppm .bmp .pgm .tif .tiff .webp in any case, in its order; each is
 * decoded or reported as an error with its path), a list file
 * ("path<TAB>label" lines), WebDataset tar shards (a .tar path, a brace
 * pattern "shards/train-{0000..0099}.tar", a glob "shards/train-*.tar" whose
 * matches are sorted, or several of these separated by '\n'; a sample is a
 * key's one picture member, of any of the extensions above or .npy (raw
 * uint8 pixels in NumPy's format, shape (H, W, 3), (H, W, 1) or (H, W), C
 * order, as ringfeed-pack --store raw writes them: read with no decode; a
 * .npy beside another picture member is not the picture), its label the
 * integer text of the key's .cls member: see rf_loader_set_label and
 * rf_loader_set_extras), or record files (with RF_P_RECORD_SIZE).
 * Compressed shards (.tar.gz, .tgz, .tar.zst, .tar.bz2, .tar.xz) cannot be
 * read at offsets: rf_loader_start refuses them (RF_E_SOURCE). Shards may be
 * remote, every entry then an s3:// or http(s):// URL or brace pattern (a
 * glob lists s3://; http(s):// cannot be listed): they are fetched whole
 * into a local cache (rf_loader_set_cache_dir, RF_P_CACHE_LIMIT) and read
 * there; S3 credentials come from AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else from the profile
 * AWS_PROFILE (else "default") of the shared credentials file
 * (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials), and are read
 * again when S3 says they expired; region and endpoint from AWS_REGION and
 * AWS_ENDPOINT_URL (http:// or https:// only; requests signed with SigV4
 * follow no redirect); the CA bundle from AWS_CA_BUNDLE, else
 * CURL_CA_BUNDLE, else SSL_CERT_FILE, and SSL_CERT_DIR (docs/remote.md).
 * An http(s) URL may hold a query (a presigned URL, "?token="): it is part
 * of the object's name, never a glob, and like a URL's user:password never
 * shown (messages, stats, sample paths and names, RINGFEED_TRACE show it as
 * ***). The string is
 * copied. Nothing is read until rf_loader_start. Returns NULL only when
 * memory is exhausted or source is NULL.
 * Thread-safety: any thread. */
RF_API rf_loader *rf_loader_create(const char *source);

/* Stops the threads, frees everything. Every batch lent by this loader becomes
 * invalid. NULL is a no-op.
 * Thread-safety: not with any other call on the same loader. */
RF_API void rf_loader_destroy(rf_loader *l);

/* Sets / reads an option (enum rf_param). Out-of-range values give
 * RF_E_INVALID; fixed options after rf_loader_start give RF_E_STATE.
 * get_param reads back the value that was set (RF_P_NUM_WORKERS: 0 under
 * auto; rf_loader_active_workers gives the count running now).
 * Thread-safety: one thread at a time per loader. */
RF_API int rf_loader_set_param(rf_loader *l, int param, int64_t value);
RF_API int rf_loader_get_param(const rf_loader *l, int param, int64_t *out);

/* Tar shards: the extension of the member holding each sample's label, the
 * integer text webdataset's ".cls" holds (default "cls"; any case; a leading
 * '.' is ignored). NULL or "" reads unlabeled shards: no label member is
 * looked for and every label is -1 (rf_batch_labels, rf_loader_sample_label).
 * A labeled source whose sample lacks the member fails rf_loader_start,
 * naming the shard and the key. Other sources refuse a label other than
 * "cls" at rf_loader_start (RF_E_INVALID). The string is copied. Returns
 * RF_OK, RF_E_INVALID (a name longer than 63 bytes or holding '/', ','), or
 * RF_E_STATE after rf_loader_start. Fixed.
 * Thread-safety: one thread at a time per loader. */
RF_API int rf_loader_set_label(rf_loader *l, const char *ext);

/* Tar shards: extra members returned with each sample, as raw bytes:
 * extensions separated by ',' ("txt,json"; any case, blanks and a leading
 * '.' ignored; at most 16, distinct). NULL or "" returns none (the default).
 * With extras, one read fetches a sample's picture and extras together
 * (webdataset writes a key's members back to back), and rf_batch_field gives
 * them; a member named here is never taken as the sample's picture. All
 * extras of one sample must fit RF_P_EXTRAS_BYTES. Other sources refuse
 * extras at rf_loader_start (RF_E_INVALID). The string is copied. Returns
 * RF_OK, RF_E_INVALID (a malformed list) or RF_E_STATE after
 * rf_loader_start. Fixed.
 * Thread-safety: one thread at a time per loader. */
RF_API int rf_loader_set_extras(rf_loader *l, const char *exts);

/* Remote shards (s3://BUCKET/KEY, http(s)://HOST/PATH): the folder of the
 * local shard cache, created if needed (0700, its files 0600); NULL or ""
 * for the default, $XDG_CACHE_HOME/ringfeed, else $HOME/.cache/ringfeed,
 * else .cache/ringfeed in the user's home from the password database
 * (never /tmp). The folder must be private: rf_loader_start refuses one
 * owned by another user or writable by its group or others, saying why,
 * since a file at a shard's name is read as the shard; its files are
 * opened without following links or waiting on FIFOs, and used only as
 * regular files of this user's (a shard: with one link and mode 0600, the
 * size the server gives; anything else there is fetched anew); a pinned
 * shard is read through its descriptor, never reopened. Give it a folder of
 * its own: the cache touches only names of its own exact form and never
 * deletes another file, though every file counts against RF_P_CACHE_LIMIT
 * (docs/remote.md, "Cache folder", lists the names and when each goes).
 * Loaders of one node and user (processes or threads) share a folder
 * safely: each shard is fetched once, renamed into place only complete, and
 * never evicted while a loader reads it; RF_P_CACHE_LIMIT bounds the folder
 * as a whole. For each shard version (URL, size, ETag) it holds BASE.tar,
 * BASE.idx (its index, reused by later runs), BASE.lock and, during a
 * transfer, BASE.tmp.PID.N, with BASE 32 hex digits of a SHA-256 of the
 * version and of the folder's format; .lock, .starved and each live
 * loader's .use.PID.N (the versions it uses, whose indexes are then never
 * evicted) coordinate the loaders. A shard is read before it is synced to disk; until then it
 * carries the attribute user.ringfeed.unsynced (the boot id), and one left
 * so by a machine crash is fetched again, never read
 * (RINGFEED_CACHE_SYNC_FIRST=1 syncs first). To clear the folder, stop the
 * loaders that use it and delete it. The string is copied. Returns RF_OK,
 * RF_E_INVALID (NULL loader, a path of 4000 bytes or more) or RF_E_STATE
 * after rf_loader_start. Fixed.
 * Thread-safety: one thread at a time per loader. */
RF_API int rf_loader_set_cache_dir(rf_loader *l, const char *dir);

/* Indexes the source, allocates the ring, starts the reader and the decode
 * threads, and positions the loader at batch 0 of epoch 0. A remote source's
 * start waits for the network (the HEADs, manifests, listings, and without
 * a kept index or a manifest the shards themselves): rf_loader_cancel, from
 * another thread, interrupts it. A start that fails undoes all it did (no
 * thread, transfer, temporary file or lock is left) and may be tried again,
 * unless it was cancelled.
 * Thread-safety: one thread at a time per loader; rf_loader_cancel may run
 * beside it. */
RF_API int rf_loader_start(rf_loader *l);

/* Cancels the loader, from any thread. An rf_loader_start running on
 * another thread returns RF_E_STOPPED ("the start was cancelled") within
 * about 50 ms of a network wait (the fetch thread and every wait of the
 * remote stage look at the cancel at least every 20 ms; a local index, or a
 * shard's walk already begun, ends first), with everything it made undone:
 * threads joined, transfers abandoned and their temporary files removed,
 * the cache folder's locks let go. A cancel is for good: a later
 * rf_loader_start returns RF_E_STOPPED at once (destroy the loader and make
 * a new one). After a start that succeeded it is rf_loader_stop. NULL is a
 * no-op. This is how a caller makes a start interruptible: run
 * rf_loader_start on a thread of its own and call this on a signal (the
 * Python binding does so for Ctrl-C).
 * Thread-safety: any thread, beside any call on the same loader but
 * rf_loader_destroy. */
RF_API void rf_loader_cancel(rf_loader *l);

/* Decode workers running now: under RF_P_NUM_WORKERS = 0 the tuner's current
 * choice, else the count that was set. 0 before rf_loader_start.
 * Thread-safety: any thread after rf_loader_start (a relaxed read). */
RF_API int rf_loader_active_workers(const rf_loader *l);

/* Number of samples in the index, and batches per (whole) epoch for this
 * rank. Both are 0 before rf_loader_start.
 * Thread-safety: any thread. */
RF_API int64_t rf_loader_num_samples(const rf_loader *l);
RF_API int64_t rf_loader_num_batches(const rf_loader *l);

/* Positions the loader at batch 0 of `epoch` (order and augmentations derive
 * from seed and epoch). Work in flight for the previous position is dropped.
 * Batches still lent stay valid until released; they only shrink the
 * prefetch meanwhile.
 * Thread-safety: the consumer thread. */
RF_API int rf_loader_set_epoch(rf_loader *l, int64_t epoch);

/* Positions the loader at batch `batch` of `epoch`: exact resume. The batches
 * that follow are byte-identical to an uninterrupted run, for any worker count.
 * Thread-safety: the consumer thread. */
RF_API int rf_loader_seek(rf_loader *l, int64_t epoch, int64_t batch);

/* Current position: the epoch and the index of the batch the next call to
 * rf_loader_next will return.
 * Thread-safety: the consumer thread. */
RF_API int rf_loader_tell(const rf_loader *l, int64_t *epoch, int64_t *batch);

/* ---- resuming on another number of ranks ---------------------------------
 * An epoch's global order is the permutation that every rank draws from
 * (seed, epoch) before taking its share (rank r: positions r, r + W, ...).
 * Ranks that advance in lockstep (DDP: each takes one batch per step) have,
 * after b batches of batch_size B each, consumed exactly the first W * b * B
 * positions of that order together. A run of M ranks resumes a run of N by
 * splitting the rest of the epoch across its M ranks: every sample of the
 * epoch is then taken once across both runs, padding aside (the rest is
 * padded by wrapping to a multiple of M, or trimmed under
 * RF_P_SAMPLER_DROP_LAST, as a whole epoch's order is). Both runs need the
 * same source, RF_P_SEED, RF_P_SHUFFLE and RF_P_SHUFFLE_BLOCK (they make the
 * global order); batch_size and drop_last may differ (the position travels
 * in samples). rf_loader_fingerprint tells whether the source is the same. */

/* Positions the loader in `epoch` on the rest of the epoch's global order
 * from position `start` on (0 <= start <= rf_loader_epoch_size), split
 * across this loader's ranks as a whole epoch's order is, at batch `batch`
 * of this rank's part (0 <= batch <= rf_loader_epoch_batches after the
 * call). start = 0 is rf_loader_seek. Later epochs (rf_loader_set_epoch) are
 * whole again. To resume N ranks on M: start = the `consumed` of
 * rf_loader_tell_rest on the N-rank run, batch = 0; to resume on N ranks
 * again, exactly: the same start and the batch of rf_loader_tell. Returns
 * RF_OK or RF_E_INVALID (out of range; nothing moves).
 * Thread-safety: the consumer thread. */
RF_API int rf_loader_seek_rest(rf_loader *l, int64_t epoch, int64_t start, int64_t batch);

/* The current position's place in the epoch's global order: *start, where
 * the current split begins (0 but after rf_loader_seek_rest), and
 * *consumed, the positions all ranks have taken when every rank stands
 * where this one does (lockstep): start + world_size * batch * batch_size,
 * or rf_loader_epoch_size once this split's last batch was taken (its
 * padding, trimmed tail and dropped short batch then count as consumed).
 * Either pointer may be NULL.
 * Thread-safety: the consumer thread. */
RF_API int rf_loader_tell_rest(const rf_loader *l, int64_t *start, int64_t *consumed);

/* Batches of the current epoch for this rank: rf_loader_num_batches, but
 * fewer in the rest of an epoch (rf_loader_seek_rest). 0 before
 * rf_loader_start.
 * Thread-safety: the consumer thread. */
RF_API int64_t rf_loader_epoch_batches(const rf_loader *l);

/* A 64-bit hash of the index, to tell whether a saved position belongs to
 * this dataset: the sample count and, for each sample in index order, its
 * file's base name (directories left out, so that moving the dataset keeps
 * it), its tar member name or record offset, its byte length where the
 * index holds one (tar members, records) and its label; of a mixture,
 * each source's, its share of an epoch, its shuffle blocks and its label
 * offset. 0 before rf_loader_start. O(samples).
 * Thread-safety: any thread after rf_loader_start. */
RF_API uint64_t rf_loader_fingerprint(const rf_loader *l);

/* ---- mixtures of sources -------------------------------------------------
 * One loader over several sources (any kinds the loader reads: folders,
 * list files, local or remote tar shards; or record files alone: records
 * and images are not mixed in one loader), each with its share of an
 * epoch, sized MosaicML streaming's three ways: a proportion of the epoch
 * (all sources then have one; they are normalised, of epoch_size or by
 * default of the sources' sizes summed; each source gets floor(epoch_size *
 * p), the rounding shortfall going one sample each to distinct sources
 * drawn from the seed), a repeat (times over the source, fractional
 * allowed: floor(repeat * samples)) or a choose (a sample count); a
 * source given none (RF_MIX_WHOLE) is read once, or with epoch_size and
 * no source sized, all are taken in proportion to their sizes. Proportions
 * and repeat / choose / whole cannot be mixed (rf_loader_start says so).
 *
 *     rf_loader *l = rf_loader_create_mix(0);
 *     rf_loader_add_source(l, "a/", RF_MIX_PROPORTION, 0.7);
 *     int b = rf_loader_add_source(l, "s3://b/t-{00..99}.tar", RF_MIX_PROPORTION, 0.3);
 *     rf_loader_set_source_param(l, b, RF_SP_LABEL_OFFSET, 1000);
 *
 * Within a source an epoch draws without replacement while it can: a
 * share of q * samples + r entries is q full passes over the source (each
 * its own shuffle) and then r distinct samples, drawn from (seed, epoch,
 * source); no sample repeats before a full pass. The sources' entries are
 * interleaved at random (with RF_P_SHUFFLE) or evenly (without), and that
 * order of the epoch's rf_loader_epoch_size entries takes the place of a
 * single source's permutation: it is split across ranks, batched, resumed
 * (rf_loader_seek, rf_loader_seek_rest, also on another world size) and is
 * byte-identical for any worker count, exactly as a single source's. The
 * sample indexes of rf_batch_samples and rf_loader_sample_* are global:
 * source 0's samples first, then source 1's, ... The shares, each
 * source's shuffle blocks and its label offset are fixed at
 * rf_loader_start; rf_loader_fingerprint covers the sources, their shares
 * and offsets, so a position saved on one mixture is not taken for
 * another's. docs/mixing.md says more. */

/* How a source's share of an epoch is sized (rf_loader_add_source). */
enum rf_mix_size {
    RF_MIX_WHOLE = 0,      /* the source once (amount ignored) */
    RF_MIX_PROPORTION = 1, /* amount > 0: relative weight of the epoch */
    RF_MIX_REPEAT = 2,     /* amount > 0: times over the source (2.5: twice, then half) */
    RF_MIX_CHOOSE = 3,     /* amount: a whole number >= 0 of samples */
};

/* Options of one source of a mixture (rf_loader_set_source_param). */
enum rf_source_param {
    RF_SP_LABEL_OFFSET = 1,  /* added to the source's labels (those >= 0), so that sources can
                                have disjoint class ranges; 0 to 999999999999999999; default 0 */
    RF_SP_SHUFFLE_BLOCK = 2, /* RF_P_SHUFFLE_BLOCK for this source alone: 0 shuffles it whole,
                                K > 0 by blocks of K of its shards (tar shards, local or remote,
                                or record files; other sources refuse K > 0 at start); -1, the
                                default: the loader's RF_P_SHUFFLE_BLOCK for a source of shards,
                                0 for a folder or a list file */
};

/* New loader over a mixture of sources, added next with
 * rf_loader_add_source. epoch_size: the entries of an epoch when the
 * sources have proportions (0: the sum of the sources' sizes; with
 * repeat / choose / whole it must be 0, the epoch being their sum; at most
 * 4294967295). Options are set as for rf_loader_create's loaders and apply
 * to every source. Returns NULL only when memory is exhausted.
 * Thread-safety: any thread. */
RF_API rf_loader *rf_loader_create_mix(int64_t epoch_size);

/* Adds a source to a mixture (before rf_loader_start): `source` as
 * rf_loader_create takes it (copied), its share sized by `size` (enum
 * rf_mix_size) and `amount`. Returns the source's number (0, 1, ...: the
 * order added), or RF_E_INVALID (not a mixture, an empty source, a bad
 * amount, more than 4096 sources), RF_E_STATE after rf_loader_start,
 * RF_E_NOMEM. Nothing is read until rf_loader_start.
 * Thread-safety: one thread at a time per loader. */
RF_API int rf_loader_add_source(rf_loader *l, const char *source, int size, double amount);

/* Sets an option (enum rf_source_param) of source `source` of a mixture,
 * before rf_loader_start. RF_OK, RF_E_INVALID (no such source or option, a
 * value out of range, not a mixture) or RF_E_STATE after rf_loader_start.
 * Thread-safety: one thread at a time per loader. */
RF_API int rf_loader_set_source_param(rf_loader *l, int source, int param, int64_t value);

/* Sources of the loader: those added to a mixture, 1 for any other loader.
 * Thread-safety: any thread. */
RF_API int rf_loader_num_sources(const rf_loader *l);

/* Source `source`'s samples (*samples: the size of its index) and its
 * entries per epoch (*per_epoch: its share); for a loader of one source,
 * source 0: both rf_loader_num_samples. Either pointer may be NULL.
 * RF_OK, RF_E_NOT_STARTED, RF_E_INVALID (no such source).
 * Thread-safety: any thread after rf_loader_start. */
RF_API int rf_loader_source_counts(const rf_loader *l, int source, int64_t *samples,
                                   int64_t *per_epoch);

/* Entries of an epoch's global order: the sum of a mixture's shares,
 * rf_loader_num_samples for any other loader (what rf_loader_seek_rest's
 * start and rf_loader_tell_rest's consumed count). 0 before
 * rf_loader_start.
 * Thread-safety: any thread after rf_loader_start. */
RF_API int64_t rf_loader_epoch_size(const rf_loader *l);

/* The source (0, 1, ...) of the sample with global index `sample`; 0 for
 * a loader of one source; -1 for no such sample or before rf_loader_start.
 * Thread-safety: any thread after rf_loader_start. */
RF_API int rf_loader_sample_source(const rf_loader *l, int64_t sample);

/* Lends the next batch of the epoch, in order, waiting until it is ready.
 * Returns RF_OK with *out set, RF_END_OF_EPOCH after the last batch, or an
 * error. An error of the batch itself - a bad sample under
 * RF_ON_ERROR_RAISE (RF_E_DECODE, RF_E_IO, RF_E_LIMIT, RF_E_TIMEOUT), a
 * remote shard that cannot be fetched (RF_E_SOURCE); path and reason in
 * rf_loader_errmsg - consumes the batch: the position moves past it and the
 * next call returns the batch after it, so a caller that goes on after an
 * error gets the rest of the epoch (every batch but the failed ones). The
 * errors that say the call could not run move nothing: RF_E_RING_FULL when
 * every ring slot is already lent, RF_E_STOPPED after rf_loader_stop,
 * RF_E_NOT_STARTED before rf_loader_start, RF_E_FORKED in a forked child.
 * The batch stays valid until rf_batch_release.
 * Thread-safety: the consumer thread; rf_loader_stats_json may run beside it. */
RF_API int rf_loader_next(rf_loader *l, rf_batch **out);

/* As rf_loader_next, but returns RF_AGAIN when the batch is not ready within
 * timeout_ms (lets a caller poll for signals). The position does not move on
 * RF_AGAIN.
 * Thread-safety: the consumer thread. */
RF_API int rf_loader_next_wait(rf_loader *l, rf_batch **out, int64_t timeout_ms);

/* Stops the threads without freeing the loader: a thread waiting in
 * rf_loader_next returns RF_E_STOPPED, and so do later calls. Lent batches
 * stay readable until rf_loader_destroy (and can be released). Idempotent;
 * before rf_loader_start, a no-op.
 * Thread-safety: any thread. */
RF_API void rf_loader_stop(rf_loader *l);

/* Returns a lent batch to its loader; the slot is refilled (once the copies
 * out of it completed). A batch lent by rf_loader_next_device gives its device
 * buffer back for work ordered after this call on its stream. Returns RF_OK;
 * NULL is a no-op returning RF_OK. Each lend is a lease with a handle of its
 * own: releasing a handle twice, or a handle whose lease ended, returns
 * RF_E_RELEASED (with the detail in rf_loader_errmsg) and changes nothing;
 * it never returns a batch lent later to another caller. This is guaranteed
 * while the handle's ring slot was lent fewer than 16 times since the handle
 * was released; older handles must not be used. RF_E_FORKED in a forked
 * child (the batch stays with the parent). A failure's message does not
 * replace an error of the consumer's calls not yet read (rf_loader_errmsg).
 * Thread-safety: any thread. */
RF_API int rf_batch_release(rf_batch *b);

/* The batch's images ([count, H, W, 3] for NHWC or [count, 3, H, W] for
 * NCHW, of RF_P_DTYPE's type; H x W: rf_batch_shape, the same for every
 * batch but with aspect-ratio buckets; count are filled), or for a record
 * source the records (count x record_size bytes).
 * Valid until rf_batch_release. This accessor and the ones below answer a
 * released handle (within the bound given at rf_batch_release) with NULL,
 * 0 or -1.
 * Thread-safety: any thread holding the batch. */
RF_API void *rf_batch_data(const rf_batch *b);

/* The batch's labels: count int64 values (-1 for unlabeled tar shards, 0
 * for records). Valid until rf_batch_release.
 * Thread-safety: any thread holding the batch. */
RF_API const int64_t *rf_batch_labels(const rf_batch *b);

/* The raw bytes of extra member `ext` (one of rf_loader_set_extras's, any
 * case, a leading '.' ignored) of sample i (0 <= i < count) of the batch,
 * with their length in *len (may be NULL). NULL, with *len = 0, when the
 * sample has no such member, ext was not asked for, i is out of range, or
 * the handle is released (as the accessors below); a member present but
 * empty gives a non-NULL pointer and 0. Under on_error = skip a replaced
 * sample shows its substitute's members. Valid until rf_batch_release.
 * Thread-safety: any thread holding the batch. */
RF_API const void *rf_batch_field(const rf_batch *b, int64_t i, const char *ext, size_t *len);

/* Samples in the batch (batch_size but for a short last batch).
 * Thread-safety: any thread holding the batch. */
RF_API int64_t rf_batch_count(const rf_batch *b);
/* Index of the batch within its epoch.
 * Thread-safety: any thread holding the batch. */
RF_API int64_t rf_batch_index(const rf_batch *b);
/* Epoch of the batch.
 * Thread-safety: any thread holding the batch. */
RF_API int64_t rf_batch_epoch(const rf_batch *b);
/* Global sample indices of the batch (count values, into the source's index;
 * under on_error = skip a replaced sample shows its substitute). Valid until
 * rf_batch_release.
 * Thread-safety: any thread holding the batch. */
RF_API const int64_t *rf_batch_samples(const rf_batch *b);
/* The source of each sample of the batch (count values: 0, 1, ... in the
 * order rf_loader_add_source added them), or NULL when the loader is not a
 * mixture. Valid until rf_batch_release.
 * Thread-safety: any thread holding the batch. */
RF_API const int32_t *rf_batch_sources(const rf_batch *b);
/* Bytes of the image data of this batch (count * per-sample bytes: count x
 * H x W x 3 elements, H x W its rf_batch_shape): what a copy of the batch
 * copies (rf_batch_copy_to, rf_loader_next_device).
 * Thread-safety: any thread holding the batch. */
RF_API size_t rf_batch_nbytes(const rf_batch *b);

/* ---- CUDA -----------------------------------------------------------------
 * With RF_P_DEVICE = N >= 0 and a usable CUDA device N, each ring slot is
 * page-locked (unless RF_P_PIN_MEMORY = 0; a slot that cannot be pinned is
 * pageable, the stats' memory.note says which) and has a device buffer on
 * device N, both made at rf_loader_start or when the tuner adds the slot,
 * never while batches flow; the loader owns a non-blocking copy stream on
 * device N. Streams travel as `void *` (a cudaStream_t; NULL is the legacy
 * default stream of device N). Nothing here makes the host wait for the
 * device (but pageable memory, which the CUDA runtime stages on the host):
 * the copies are ordered on the caller's stream by events. A host slot is
 * refilled only after its copy completed, a device buffer only after the
 * release recorded on the consumer's stream. Every call makes device N's
 * context current for its duration and puts back the calling thread's own
 * (or none: a thread that never chose a device gets no context on device 0).
 * Failed CUDA calls return RF_E_CUDA, and rf_loader_errmsg names the call and
 * the CUDA error; RF_E_NO_DEVICE means the loader has no CUDA device
 * (RF_P_DEVICE = -1, no device, no driver, or a library built without CUDA:
 * the stats say why). rf_loader_destroy waits for the copies and for the work
 * queued on the device buffers of batches still lent, at most 10 s; past it
 * it leaves that memory allocated, with a message on stderr. These functions
 * exist in every build. */

/* Number of usable CUDA devices: 0 without a device, a driver, a CUDA
 * runtime, or CUDA support in this build. The library does not link the CUDA
 * runtime: the first call that needs it loads libcudart, the copy already in
 * the process (torch's) if there is one, else $RINGFEED_CUDART (a path), else
 * libcudart.so.<major> by the usual search; the stats' cuda.reason says which,
 * or what was tried.
 * Thread-safety: any thread. */
RF_API int rf_cuda_device_count(void);

/* As rf_loader_next, and the batch's images and labels are copied (two
 * copies, from the slot's page-locked memory) into the slot's device buffer:
 * complete for work ordered after this call on `stream`, valid until
 * rf_batch_release (which records the release on `stream`; the stream, of
 * device N, must outlive the batch). rf_batch_device_data and
 * rf_batch_device_labels point at them; rf_batch_data still holds the host
 * copy. When the device had no room for the slot's buffer (the stats' cuda
 * buffer_note says so) the batch is lent with both NULL: copy it with
 * rf_batch_copy_to. Returns what rf_loader_next returns, RF_E_NO_DEVICE
 * without a CUDA device (nothing moves), or RF_E_CUDA (the batch is then
 * not lent, and consumed as rf_loader_next's errors of a batch are).
 * Thread-safety: the consumer thread. */
RF_API int rf_loader_next_device(rf_loader *l, void *stream, rf_batch **out);

/* As rf_loader_next_device, but returns RF_AGAIN when the batch is not ready
 * within timeout_ms (see rf_loader_next_wait).
 * Thread-safety: the consumer thread. */
RF_API int rf_loader_next_device_wait(rf_loader *l, void *stream, rf_batch **out,
                                      int64_t timeout_ms);

/* Device copy of the batch's images (layout as rf_batch_data) and labels
 * (count int64 values), or NULL when the batch was not lent by
 * rf_loader_next_device (or its slot has no device buffer). Valid until
 * rf_batch_release.
 * Thread-safety: any thread holding the batch. */
RF_API void *rf_batch_device_data(const rf_batch *b);
RF_API const int64_t *rf_batch_device_labels(const rf_batch *b);

/* Copies the batch into caller memory on the loader's device:
 * rf_batch_nbytes(b) bytes of images to dst_images and count int64 labels to
 * dst_labels (either may be NULL to skip it; device, page-locked host or
 * managed memory: the copies are cudaMemcpyDefault). The destination may be
 * written by work ordered after this call on `stream` (memory from a
 * stream-ordered allocator, such as torch's, is safe), and holds the batch for
 * work ordered after it on `stream`. A batch lent by rf_loader_next_device is
 * copied from its device buffer, any other through the loader's copy stream
 * from host memory. The batch may be released right after the call, even by
 * another thread during it: its host slot is reused only once the copy
 * completed. Returns 0, RF_E_INVALID, RF_E_RELEASED
 * (the batch was released), RF_E_NO_DEVICE, RF_E_CUDA, or RF_E_FORKED in a
 * forked child (nothing is copied). A failure's message does not replace an
 * error of the consumer's calls not yet read (rf_loader_errmsg).
 * Thread-safety: any thread holding the batch, one call at a time per batch. */
RF_API int rf_batch_copy_to(rf_batch *b, void *dst_images, void *dst_labels, void *stream);

/* Detail of the last error on this loader ("" if none): component, path and
 * cause, e.g. "decode: cls1/x.jpg (sample 12): Premature end of JPEG file".
 * URLs in it are shown without user:password or query (***), and control
 * bytes and invalid UTF-8 (from servers, shard member names) as \xNN.
 * Who writes it: every failing call records its message, with one rule for
 * the two calls that may run on any thread, rf_batch_release and
 * rf_batch_copy_to: their message does not replace an error of the consumer's
 * calls (create, set_param, start, next, next_device, seek, ...) that this
 * function has not returned yet. So after a failed rf_loader_next the
 * consumer reads that failure's detail, even while another thread's stale
 * releases fail; once read, the next error of any call replaces it (the
 * status code always says what failed). A copy taken for the consumer: valid
 * until its next call to rf_loader_errmsg.
 * Thread-safety: the consumer thread (other threads: rf_loader_errmsg_copy). */
RF_API const char *rf_loader_errmsg(const rf_loader *l);

/* The message rf_loader_errmsg would return, copied into buf (at most cap
 * bytes, NUL-terminated; buf may be NULL when cap is 0). Returns the length
 * of the whole message, not counting the NUL (as snprintf): a value >= cap
 * means it was cut. Unlike rf_loader_errmsg it does not count as reading the
 * message: a consumer error stays protected as said there. NULL loader: "no
 * loader".
 * Thread-safety: any thread. */
RF_API int64_t rf_loader_errmsg_copy(const rf_loader *l, char *buf, size_t cap);

/* Writes the loader's statistics as one JSON object into buf (at most cap
 * bytes, NUL-terminated) and returns the length the full text needs, not
 * counting the NUL (as snprintf). Its strings are shown as messages are:
 * URLs without user:password or query, and control bytes and invalid UTF-8
 * (from servers, shard member names) as the text \xNN. Fields: images, batches, images_per_sec,
 * stall_seconds, num_workers, shards and shards_from_manifest (tar sources,
 * local or remote: the shards, and those indexed from the ringfeed-pack
 * manifest.json beside them instead of a header walk; a remote one so
 * indexed is not fetched to be indexed), shards_manifest_mismatched (local
 * shards the manifest.json named but did not describe - another size, other
 * first or last member headers, or label members not as stated: rewritten
 * since it was written - and so walked), io_backend, members_in_place and
 * members_read (members of local shards and records decoded in place from
 * the page cache, RF_P_MAP_SHARDS, and those of mapped shards that were not
 * in memory and so were read), memory {mode: "pinned"
 * | "pageable", note}, device ("cpu" | "cuda:N"), cuda {built, available,
 * reason, copies, ...}, errors [{path, reason, sample}] (at most 16 bad
 * samples per batch and 1,000 in all; errors_count counts every one),
 * stage_seconds and per_image_ms (wall time summed over workers: read,
 * header, decode, resize, augment, sample_fn, convert), per_image_cpu_ms (the
 * workers' CPU time per image: decode (header + decode + resize), augment,
 * sample_fn, convert), latency {batches, wait_p50_ms, wait_p90_ms,
 * wait_p99_ms, wait_max_ms, wait_mean_ms (the consumer's wait for each batch
 * lent, over the rf_loader_next* calls that asked for it; percentiles by
 * nearest rank, to 1.6 %, the first and last exact), ring_empty (batches not
 * ready when first asked for), first_batch_seconds (from rf_loader_start's
 * call to the first batch lent; null before)}; a mixture adds epoch_size and
 * sources [{source, samples, epoch_samples (its share), delivered (samples
 * lent so far), errors (bad samples of it the decode workers met),
 * label_offset, shuffle_block}] (remote: the first remote source's); remote
 * shards add remote {cache_dir, cache_limit,
 * cache_hits, cache_misses, bytes_fetched, requests, retries, evictions,
 * releases, refetches, foreign_bytes (files in the cache folder it did not
 * make, at the last count), loaders (live loaders on the folder), warning
 * (only once cache_limit proved to hold fewer than two shards per loader:
 * with the refetches so far), ...,
 * manifest {folders, found, absent (404 or 403), failed (fetch, size or
 * parse), shards (indexed from one), mismatched (shards whose headers or
 * labels were not as their entry said once fetched: their samples fail),
 * notes (per
 * folder, at most 16: "URL: found, N shards indexed from it", "URL: none
 * (...)", "URL: not used (...)", "URL: not fetched (...)")}}.
 * Thread-safety: any thread. */
RF_API int64_t rf_loader_stats_json(rf_loader *l, char *buf, size_t cap);

/* The file holding the sample with global index `sample` (its path; for tar
 * shards and record files, the shard or record file; a remote shard's URL
 * without user:password or query, which show as ***), or NULL.
 * Valid while the loader exists.
 * Thread-safety: any thread after rf_loader_start. */
RF_API const char *rf_loader_sample_path(const rf_loader *l, int64_t sample);

/* Label of the sample with global index `sample` (0 for records, -1 for
 * unlabeled tar shards), or -1.
 * Thread-safety: any thread after rf_loader_start. */
RF_API int64_t rf_loader_sample_label(const rf_loader *l, int64_t sample);

/* Name of the sample with global index `sample`, as snprintf writes it
 * into buf (at most cap bytes, NUL-terminated; buf may be NULL when cap is
 * 0): its path (image folder, list file), "shard.tar:key" (tar shards:
 * webdataset's __url__ and __key__) or "file.bin@offset" (records: the file
 * and the record's byte offset). Returns the length the full name needs, not
 * counting the NUL, or -1 (no such sample, not started).
 * Thread-safety: any thread after rf_loader_start. */
RF_API int64_t rf_loader_sample_name(const rf_loader *l, int64_t sample, char *buf, size_t cap);

/* ---- shapes: rectangles, letterbox, aspect-ratio buckets, native sizes -----
 * The images of a batch are H x W: image_height x image_width, or the
 * frame of native sizes (max_side x max_side), or with aspect-ratio
 * buckets the shape of the batch's bucket (every sample of a batch is of
 * one bucket). A letterboxed or native picture lies in its frame at
 * rf_batch_sizes' size: at the top-left corner, or for a centred letterbox
 * at ((H - h) / 2, (W - w) / 2) (rounded down); rf_batch_scales gives the
 * factor it was resized by, so that a box (x, y) in the frame is
 * ((x - left) / scale, (y - top) / scale) in the picture.
 *
 * Aspect-ratio buckets (RF_P_BUCKETS, rf_loader_set_buckets): the
 * pictures' sizes come from the ringfeed-pack manifest.json beside tar
 * shards when it states them, else from the sizes an earlier start kept
 * in the cache folder (rf_loader_set_cache_dir; not kept with
 * RINGFEED_SIZES_KEEP=0 in the environment), else from a header scan at
 * rf_loader_start (the first bytes of each picture: a remote shard is
 * fetched for it); the stats' "shapes" say which, and how long it took. A
 * picture whose size cannot be read goes to the bucket nearest a square
 * (its decode then fails, or replaces it, as without buckets). In each
 * bucket a picture is resized to cover the bucket and centre-cropped
 * (RF_TRANSFORM_CENTER: Resize((h', w')) + CenterCrop((H, W)), explain's
 * "resize"), given a RandomResizedCrop((H, W)) whose ratio range is
 * multiplied by the bucket's W / H, resized to it or letterboxed into it.
 * The epoch: the global order (the seeded permutation) split by bucket,
 * each bucket's samples cut into runs (batch_size x world_size samples
 * with RF_P_BUCKET_SHARED, else batch_size), the runs in a seeded order
 * (without shuffle: the order of their first samples). Every sample is in
 * one run; a bucket's last run is short (its batches short, or dropped
 * with RF_P_DROP_LAST on every rank alike). With RF_P_BUCKET_SHARED each
 * run is split across the ranks as DistributedSampler splits an epoch
 * (padded by wrapping to a multiple of world_size, or trimmed with
 * RF_P_SAMPLER_DROP_LAST): every rank's batch k has the same shape. Without
 * it the runs are batches, dealt to the ranks in turn (the list padded by
 * wrapping whole batches): each rank's batch has a shape of its own. The
 * output is the same for any worker count. A bad sample's substitute
 * (RF_ON_ERROR_SKIP) is of the batch's bucket (and, for remote shards, of
 * the same shard when it has one of that bucket). Resuming: as without
 * buckets (rf_loader_seek_rest), with the runs' size, the "unit", carried
 * beside the position: rf_loader_rest_unit and rf_loader_seek_rest_unit;
 * any world size and batch size then takes the rest of the epoch once. */

/* The buckets as (height, width) pairs, hw[2 k], hw[2 k + 1] for bucket k
 * (1..16384 each, distinct; at most 256), n of them; NULL or n = 0: none
 * (RF_P_BUCKETS may make them). The values are copied. Returns RF_OK,
 * RF_E_INVALID (a size out of range, a repeat) or RF_E_STATE after
 * rf_loader_start. Fixed.
 * Thread-safety: one thread at a time per loader. */
RF_API int rf_loader_set_buckets(rf_loader *l, const int32_t *hw, int n);

/* The buckets in use after rf_loader_start (those given, or those
 * RF_P_BUCKETS made): their number, and the first cap of them written to
 * hw as rf_loader_set_buckets takes them (hw may be NULL when cap is 0).
 * 0 without buckets or before start; RF_E_INVALID for a NULL loader or a
 * bad hw/cap.
 * Thread-safety: any thread after rf_loader_start. */
RF_API int rf_loader_buckets(const rf_loader *l, int32_t *hw, int cap);

/* The bucket of the sample with global index `sample`, or -1 (no buckets,
 * no such sample, not started).
 * Thread-safety: any thread after rf_loader_start. */
RF_API int rf_loader_sample_bucket(const rf_loader *l, int64_t sample);

/* The height and width of the batch's images (either pointer may be NULL).
 * RF_OK, RF_E_INVALID (NULL batch) or RF_E_RELEASED.
 * Thread-safety: any thread holding the batch. */
RF_API int rf_batch_shape(const rf_batch *b, int *height, int *width);

/* Letterbox and native sizes: count (height, width) pairs, the size of
 * each picture in its frame (0, 0 for a sample that failed); NULL for the
 * other transforms and a released batch. Valid until rf_batch_release.
 * Thread-safety: any thread holding the batch. */
RF_API const int32_t *rf_batch_sizes(const rf_batch *b);

/* Letterbox and native sizes: count factors each picture was resized by
 * (letterbox: min(H / h, W / w); native: min(1, max_side / max(h, w)), of
 * the picture's own h x w); NULL as rf_batch_sizes.
 * Thread-safety: any thread holding the batch. */
RF_API const float *rf_batch_scales(const rf_batch *b);

/* The batch's bucket (an index into rf_loader_buckets), or -1 without
 * buckets or for a released batch.
 * Thread-safety: any thread holding the batch. */
RF_API int rf_batch_bucket(const rf_batch *b);

/* The unit of the current split (the runs' size, in samples, of the
 * sequence it splits: rf_loader_seek_rest_unit), 0 without buckets.
 * Thread-safety: the consumer thread. */
RF_API int64_t rf_loader_rest_unit(const rf_loader *l);

/* rf_loader_seek_rest for a loader with buckets, in the sequence cut into
 * runs of `unit` samples (0: this loader's own, batch_size x world_size
 * with RF_P_BUCKET_SHARED, else batch_size): to resume a run, the unit
 * rf_loader_rest_unit gave there, with its start and consumed as
 * rf_loader_seek_rest says. Later epochs use this loader's own unit.
 * Without buckets unit must be 0 (then it is rf_loader_seek_rest).
 * Returns RF_OK, RF_E_INVALID (out of range; nothing moves) or RF_E_NOMEM.
 * Thread-safety: the consumer thread. */
RF_API int rf_loader_seek_rest_unit(rf_loader *l, int64_t epoch, int64_t start, int64_t unit,
                                    int64_t batch);

/* ---- augmentations, normalised output, per-sample callbacks ----------------
 * After the geometry (crop, resize, flip) each picture goes, on its decode
 * worker, through the augmentations in the order given, then the per-sample
 * callback if one is set, then the conversion to the output type
 * (RF_P_DTYPE). Every random choice is drawn from a stream keyed on (seed,
 * epoch, sample index), apart from the crop's, so a sample's output is the
 * same for any worker count and after an exact resume, and adding
 * augmentations never changes the crops. */

/* The augmentations, as a spec string: torchvision's transforms separated
 * by ';', each its class name with its arguments in parentheses, positional
 * in torchvision's order or by name, numbers, (a, b) pairs, words or quoted
 * words (names in any case; blanks ignored):
 *
 *   RandAugment(num_ops=2, magnitude=9, num_magnitude_bins=31, fill=0)
 *   TrivialAugmentWide(num_magnitude_bins=31, fill=0)
 *   AutoAugment(policy=imagenet | cifar10 | svhn, fill=0)
 *   ColorJitter(brightness=0, contrast=0, saturation=0, hue=0)   each a number or (min, max)
 *   RandomGrayscale(p=0.1)
 *   RandomErasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0 | (r, g, b) | random)
 *
 * e.g. "RandAugment(2, 9); RandomErasing(p=0.25)". The defaults are
 * torchvision's; fill is 0 (torchvision's None), one number or three, in
 * [0, 255]; interpolation=nearest may be written, no other mode exists. The
 * op lists, magnitude tables (float32 linspace), sign rules and
 * probabilities are torchvision 0.14's, and the ops its functional ops on a
 * uint8 tensor (the affine ones NEAREST, sampled as grid_sample does). Bounds:
 * at most 16 transforms; num_ops 0..16; num_magnitude_bins 2..256;
 * magnitude below num_magnitude_bins; p in [0, 1]; ColorJitter's ranges as
 * torchvision checks them; RandomErasing's scale within [0, 1], ratio > 0,
 * min <= max for both (torchvision only warns). RandomErasing's value: with
 * a uint8 output, a pixel value (stored as torch stores a float in a uint8
 * tensor: truncated); with a float output, trailing RandomErasing
 * transforms (those after every other op) run after the normalisation and
 * value is the normalised value itself, as in torchvision's recipes, where
 * RandomErasing follows Normalize ("random": N(0, 1) per element).
 * NULL or "" clears the list. The string is copied. Returns RF_OK,
 * RF_E_INVALID (the message names the transform and the argument) or
 * RF_E_STATE after rf_loader_start. Fixed.
 * Thread-safety: one thread at a time per loader. */
RF_API int rf_loader_set_augment(rf_loader *l, const char *spec);

/* Mean and std per channel (R, G, B) of the float outputs (RF_P_DTYPE
 * RF_DTYPE_FLOAT32, _FLOAT16, _BFLOAT16): element = ((float)x / 255 -
 * mean[c]) / std[c]. Default mean 0, std 1 (x / 255). With RF_DTYPE_UINT8
 * they say that the output is normalised later (the Python binding does it
 * on a CUDA device, after the copy, on the loader's stream): trailing
 * RandomErasing transforms then write the byte nearest to their value's
 * preimage, round((value * std + mean) * 255), clamped. Both arrays are
 * copied; NULL for both restores the default. Returns RF_OK, RF_E_INVALID (a
 * value not finite, a std that is 0 in float32) or RF_E_STATE after
 * rf_loader_start. Fixed.
 * Thread-safety: one thread at a time per loader. */
RF_API int rf_loader_set_normalize(rf_loader *l, const double mean[3], const double std[3]);

/* What a per-sample callback is told besides the pixels. */
typedef struct rf_sample_info {
    int64_t sample; /* global index of the sample (a substitute's under on_error = skip) */
    int64_t epoch;
    int64_t label;
    int32_t worker; /* the decode worker running the callback, 0 .. workers - 1 */
    int32_t reserved;
} rf_sample_info;

/* A per-sample callback: runs on the decode workers, after the
 * augmentations and before the conversion to the output type, on the
 * picture's h x w x c uint8 pixels (c = 3, RGB, rows `stride` bytes apart),
 * which it may change in place. seed is the sample's own, a function of the
 * loader's seed, the epoch and the sample index (the same for any worker
 * count). Return 0; anything else fails the sample (RF_E_CALLBACK, the
 * value in the message) under RF_P_ON_ERROR. Runs on several threads at
 * once: it must be thread-safe. */
typedef int (*rf_sample_fn)(void *user, uint8_t *pixels, int h, int w, int c, ptrdiff_t stride,
                            uint64_t seed, const rf_sample_info *info);

/* Sets the per-sample callback (NULL: none) and its user pointer, kept until
 * rf_loader_destroy. Returns RF_OK, RF_E_INVALID (NULL loader) or RF_E_STATE
 * after rf_loader_start. Fixed.
 * Thread-safety: one thread at a time per loader. */
RF_API int rf_loader_set_sample_fn(rf_loader *l, rf_sample_fn fn, void *user);

/* What sample `sample` (global index) gets in epoch `epoch` (-1: the epoch
 * of the current position, rf_loader_tell), as one JSON object written into
 * buf (at most cap bytes, NUL-terminated) as rf_loader_stats_json does:
 * sample, epoch, name (rf_loader_sample_name), path, label, the picture's
 * width and height, "crop" {top, left, height, width} (the box
 * RandomResizedCrop drew, or the whole picture), "resize" [height, width]
 * (the size the box is resized to; the center transform then crops
 * "center_crop" {top, left, height, width} of it), flip, "augment" (each op
 * the augmentations chose, in order: {op, transform, index, and its
 * parameters: magnitude and bin for the auto-augment ops, factor, angle,
 * shear (degrees), pixels, bits, threshold, fill, or Erase's top, left,
 * height, width, value and deferred}), dtype, and sample_fn_seed. Reads the
 * picture's header (a synchronous read). Returns the length the full text
 * needs, or a negative RF_E_* (the detail in rf_loader_errmsg):
 * RF_E_INVALID (no such sample), RF_E_NOT_STARTED, RF_E_IO / RF_E_DECODE
 * (the picture cannot be read), RF_E_NOMEM.
 * Thread-safety: the consumer thread. */
RF_API int64_t rf_loader_explain(rf_loader *l, int64_t epoch, int64_t sample, char *buf,
                                 size_t cap);

/* Runs one augmentation op on a height x width RGB uint8 picture in place
 * (rows `stride` bytes apart), with the arguments of torchvision's
 * functional op on a uint8 tensor, so that anyone can hold it against
 * torchvision. op (any case) and args:
 *   Identity, AutoContrast, Equalize, Invert, Grayscale: none
 *   ShearX, ShearY: magnitude m (shear = degrees(atan(m)), as _apply_op), [fill r, g, b]
 *   TranslateX, TranslateY: pixels (truncated), [fill r, g, b]
 *   Rotate: angle in degrees (counter-clockwise), [fill r, g, b]
 *   Brightness, Color (= Saturation), Contrast, Sharpness, Saturation, Hue: factor
 *   Posterize: bits; Solarize: threshold
 *   Erase: top, left, height, width, value (1 or 3 numbers)
 * err (may be NULL when errcap is 0) gets the reason of a failure. Returns
 * RF_OK, RF_E_INVALID (an unknown op, a wrong argument count, an argument
 * the functional op refuses) or RF_E_NOMEM.
 * Thread-safety: any thread (on distinct pictures). */
RF_API int rf_augment_apply(uint8_t *pixels, int height, int width, ptrdiff_t stride,
                            const char *op, const double *args, int nargs, char *err,
                            size_t errcap);

/* The random draws of the augmentations in spec (rf_loader_set_augment's
 * grammar) for samples first .. first + n - 1 of epoch 0 under `seed`, on a
 * height x width picture, as the loader would draw them: for each sample,
 * per_sample doubles at out + k * per_sample (the draws of its transforms
 * one after the other, the rest NaN; a draw that does not fit is dropped).
 * Per transform: RandAugment, per op: op index (0..13, torchvision's order
 * Identity, ShearX, ShearY, TranslateX, TranslateY, Rotate, Brightness,
 * Color, Contrast, Sharpness, Posterize, Solarize, AutoContrast, Equalize),
 * sign (-1, 1, or 0 for an unsigned op); TrivialAugmentWide: op index, bin
 * (-1 when the op has none), sign; AutoAugment: policy (0..24), applied
 * (0/1) of each of its two ops, the two sign draws (0 negates); ColorJitter:
 * the order (4 indexes: 0 brightness, 1 contrast, 2 saturation, 3 hue),
 * then the four factors (NaN when off); RandomGrayscale: applied;
 * RandomErasing: applied, top, left, height, width (-1 when not applied or
 * no box fitted). For distribution tests. Returns n, or RF_E_INVALID (err
 * says why; a bad spec, n < 0, per_sample < 1, a picture under 1 pixel).
 * Thread-safety: any thread. */
RF_API int64_t rf_augment_draws(const char *spec, int height, int width, uint64_t seed,
                                int64_t first, int64_t n, double *out, int64_t per_sample,
                                char *err, size_t errcap);

#ifdef __cplusplus
}
#endif
#endif /* RINGFEED_H */
