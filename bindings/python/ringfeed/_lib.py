"""Finds libringfeed, declares the C API for ctypes, and says which versions are in use.

Lookup order: the package's own copy (ringfeed/libringfeed.so, which
`pip install .` puts there), $RINGFEED_LIBRARY, the repository's build/
folder (when the package is used from the source tree), then the system
(ctypes.util.find_library). The own copy comes first so that an installed
package always runs the library it was built with, whatever the environment
says. ctypes.CDLL releases the GIL around every call, so the blocking waits
in the library never freeze other Python threads.

Versions: __version__ is the package's (ringfeed/_version.py, written by the
wheel build from include/ringfeed.h; in the source tree, read from that header
directly); library_version() is the loaded library's rf_version(). Both are
"MAJOR.MINOR.PATCH" strings and agree when the package runs its own copy.
"""

import ctypes
import ctypes.util
import os
import re
import threading

# Values mirror include/ringfeed.h; they are permanent there.
RF_OK = 0
RF_END_OF_EPOCH = 1
RF_AGAIN = 2
RF_E_INVALID = -1
RF_E_NOMEM = -2
RF_E_IO = -3
RF_E_DECODE = -4
RF_E_STATE = -5
RF_E_SOURCE = -6
RF_E_SYSTEM = -7
RF_E_CUDA = -8
RF_E_TIMEOUT = -9
RF_E_LIMIT = -10
RF_E_STOPPED = -11
RF_E_FORKED = -12
RF_E_NO_DEVICE = -13
RF_E_RELEASED = -14
RF_E_NOT_STARTED = -15
RF_E_RING_FULL = -16

RF_P_BATCH_SIZE = 1
RF_P_IMAGE_SIZE = 2
RF_P_TRANSFORM = 3
RF_P_FLIP = 4
RF_P_LAYOUT = 5
RF_P_SHUFFLE = 6
RF_P_SEED = 7
RF_P_DROP_LAST = 8
RF_P_NUM_WORKERS = 9
RF_P_PREFETCH = 10
RF_P_ON_ERROR = 11
RF_P_RANK = 12
RF_P_WORLD_SIZE = 13
RF_P_LOCAL_WORLD_SIZE = 14
RF_P_IO_BACKEND = 15
RF_P_PIN_MEMORY = 16
RF_P_DEVICE = 17
RF_P_MAX_PIXELS = 18
RF_P_MAX_SCANS = 19
RF_P_READ_DEPTH = 20
RF_P_READ_TIMEOUT_MS = 21
RF_P_MAX_ERRORS = 22
RF_P_RECORD_SIZE = 23
RF_P_HEADER_SIZE = 24
RF_P_DTYPE = 25
RF_P_VERIFY = 26
RF_P_MAX_FILE_BYTES = 27
RF_P_EXACT = 28
RF_P_SCALE_MIN = 29   # RandomResizedCrop's scale and ratio, in millionths; 0: default
RF_P_SCALE_MAX = 30
RF_P_RATIO_MIN = 31
RF_P_RATIO_MAX = 32
RF_P_SAMPLER_DROP_LAST = 33
RF_P_EXTRAS_BYTES = 35
RF_P_SHUFFLE_BLOCK = 36
RF_P_CACHE_LIMIT = 37
RF_P_FETCH_RETRIES = 40
RF_P_FETCH_TIMEOUT_MS = 41
RF_P_FETCH_PARALLEL = 42
# Shapes (0.5): rectangles, center's Resize, letterbox, native sizes, buckets.
RF_P_IMAGE_HEIGHT = 43
RF_P_IMAGE_WIDTH = 44
RF_P_RESIZE_SIZE = 45
RF_P_RESIZE_HEIGHT = 46
RF_P_RESIZE_WIDTH = 47
RF_P_ALIGN = 48
RF_P_FILL = 49
RF_P_MAX_SIDE = 50
RF_P_BUCKETS = 51
RF_P_BUCKET_SHARED = 52
RF_P_BUCKET_MULTIPLE = 53
RF_P_MAP_SHARDS = 54

PARAM_NAMES = {
    RF_P_BATCH_SIZE: "batch_size",
    RF_P_IMAGE_SIZE: "image_size",
    RF_P_TRANSFORM: "transform",
    RF_P_FLIP: "flip",
    RF_P_LAYOUT: "layout",
    RF_P_SHUFFLE: "shuffle",
    RF_P_SEED: "seed",
    RF_P_DROP_LAST: "drop_last",
    RF_P_NUM_WORKERS: "num_workers",
    RF_P_PREFETCH: "prefetch",
    RF_P_ON_ERROR: "on_error",
    RF_P_RANK: "rank",
    RF_P_WORLD_SIZE: "world_size",
    RF_P_LOCAL_WORLD_SIZE: "local_world_size",
    RF_P_IO_BACKEND: "io_backend",
    RF_P_PIN_MEMORY: "pin_memory",
    RF_P_DEVICE: "device",
    RF_P_MAX_PIXELS: "max_pixels",
    RF_P_MAX_SCANS: "max_scans",
    RF_P_READ_DEPTH: "read_depth",
    RF_P_READ_TIMEOUT_MS: "read_timeout_ms",
    RF_P_MAX_ERRORS: "max_errors",
    RF_P_RECORD_SIZE: "record_size",
    RF_P_HEADER_SIZE: "header_size",
    RF_P_DTYPE: "dtype",
    RF_P_VERIFY: "verify",
    RF_P_MAX_FILE_BYTES: "max_file_bytes",
    RF_P_EXACT: "exact",
    RF_P_SCALE_MIN: "scale[0] (millionths)",
    RF_P_SCALE_MAX: "scale[1] (millionths)",
    RF_P_RATIO_MIN: "ratio[0] (millionths)",
    RF_P_RATIO_MAX: "ratio[1] (millionths)",
    RF_P_SAMPLER_DROP_LAST: "sampler_drop_last",
    RF_P_EXTRAS_BYTES: "extras_bytes",
    RF_P_SHUFFLE_BLOCK: "shuffle_block",
    RF_P_CACHE_LIMIT: "cache_limit",
    RF_P_FETCH_RETRIES: "fetch_retries",
    RF_P_FETCH_TIMEOUT_MS: "fetch_timeout_ms",
    RF_P_FETCH_PARALLEL: "fetch_parallel",
    RF_P_IMAGE_HEIGHT: "image_size[0] (height)",
    RF_P_IMAGE_WIDTH: "image_size[1] (width)",
    RF_P_RESIZE_SIZE: "resize_size",
    RF_P_RESIZE_HEIGHT: "resize_size[0] (height)",
    RF_P_RESIZE_WIDTH: "resize_size[1] (width)",
    RF_P_ALIGN: "align",
    RF_P_FILL: "fill (0xRRGGBB)",
    RF_P_MAX_SIDE: "max_side",
    RF_P_BUCKETS: "buckets",
    RF_P_BUCKET_SHARED: "bucket_shared",
    RF_P_BUCKET_MULTIPLE: "bucket_multiple",
    RF_P_MAP_SHARDS: "map_shards",
}

# Mixtures (enum rf_mix_size, enum rf_source_param).
RF_MIX_WHOLE = 0
RF_MIX_PROPORTION = 1
RF_MIX_REPEAT = 2
RF_MIX_CHOOSE = 3
RF_SP_LABEL_OFFSET = 1
RF_SP_SHUFFLE_BLOCK = 2

TRANSFORMS = {"none": 0, "center": 1, "random_resized_crop": 2, "resize": 3, "letterbox": 4}
ALIGNS = {"center": 0, "top_left": 1}  # enum rf_align
LAYOUTS = {"NHWC": 0, "NCHW": 1}
ON_ERROR = {"raise": 0, "skip": 1}
IO_BACKENDS = {"auto": 0, "io_uring": 1, "pread": 2}
VERIFY = {"none": 0, "once": 1, "always": 2}  # enum rf_verify
DTYPES = {"uint8": 0, "uint16": 1, "int32": 2, "int64": 3,  # enum rf_dtype
          "float32": 4, "float16": 5, "bfloat16": 6}
RF_E_CALLBACK = -17

LIBNAME = "libringfeed.so"

_c_loader_p = ctypes.c_void_p
_c_batch_p = ctypes.c_void_p
_i64 = ctypes.c_int64
_i64_p = ctypes.POINTER(ctypes.c_int64)

# (name, restype, argtypes): every exported function of include/ringfeed.h.
_SIGNATURES = [
    ("rf_version", ctypes.c_int, []),
    ("rf_strerror", ctypes.c_char_p, [ctypes.c_int]),
    ("rf_param_bounds", ctypes.c_int, [ctypes.c_int, _i64_p, _i64_p]),
    ("rf_loader_create", _c_loader_p, [ctypes.c_char_p]),
    ("rf_loader_destroy", None, [_c_loader_p]),
    ("rf_loader_set_param", ctypes.c_int, [_c_loader_p, ctypes.c_int, _i64]),
    ("rf_loader_get_param", ctypes.c_int, [_c_loader_p, ctypes.c_int, _i64_p]),
    ("rf_loader_start", ctypes.c_int, [_c_loader_p]),
    ("rf_loader_num_samples", _i64, [_c_loader_p]),
    ("rf_loader_num_batches", _i64, [_c_loader_p]),
    ("rf_loader_set_epoch", ctypes.c_int, [_c_loader_p, _i64]),
    ("rf_loader_seek", ctypes.c_int, [_c_loader_p, _i64, _i64]),
    ("rf_loader_tell", ctypes.c_int, [_c_loader_p, _i64_p, _i64_p]),
    # The rest of an epoch, resumed on another world size; the index's fingerprint.
    ("rf_loader_seek_rest", ctypes.c_int, [_c_loader_p, _i64, _i64, _i64]),
    ("rf_loader_tell_rest", ctypes.c_int, [_c_loader_p, _i64_p, _i64_p]),
    ("rf_loader_epoch_batches", _i64, [_c_loader_p]),
    ("rf_loader_fingerprint", ctypes.c_uint64, [_c_loader_p]),
    ("rf_loader_next", ctypes.c_int, [_c_loader_p, ctypes.POINTER(_c_batch_p)]),
    ("rf_loader_next_wait", ctypes.c_int, [_c_loader_p, ctypes.POINTER(_c_batch_p), _i64]),
    ("rf_loader_stop", None, [_c_loader_p]),
    # A start interrupted from another thread; what the build can do.
    ("rf_loader_cancel", None, [_c_loader_p]),
    ("rf_features", ctypes.c_char_p, []),
    ("rf_batch_release", ctypes.c_int, [_c_batch_p]),
    ("rf_loader_active_workers", ctypes.c_int, [_c_loader_p]),
    ("rf_batch_data", ctypes.c_void_p, [_c_batch_p]),
    ("rf_batch_labels", _i64_p, [_c_batch_p]),
    ("rf_batch_count", _i64, [_c_batch_p]),
    ("rf_batch_index", _i64, [_c_batch_p]),
    ("rf_batch_epoch", _i64, [_c_batch_p]),
    ("rf_batch_samples", _i64_p, [_c_batch_p]),
    ("rf_batch_nbytes", ctypes.c_size_t, [_c_batch_p]),
    ("rf_loader_errmsg", ctypes.c_char_p, [_c_loader_p]),
    ("rf_loader_stats_json", _i64, [_c_loader_p, ctypes.c_char_p, ctypes.c_size_t]),
    ("rf_loader_sample_path", ctypes.c_char_p, [_c_loader_p, _i64]),
    ("rf_loader_sample_label", _i64, [_c_loader_p, _i64]),
    ("rf_loader_sample_name", _i64, [_c_loader_p, _i64, ctypes.c_char_p, ctypes.c_size_t]),
    # Tar member names (label, extras) and a sample's extra members.
    ("rf_loader_set_label", ctypes.c_int, [_c_loader_p, ctypes.c_char_p]),
    ("rf_loader_set_extras", ctypes.c_int, [_c_loader_p, ctypes.c_char_p]),
    # Remote shards: the local cache's folder.
    ("rf_loader_set_cache_dir", ctypes.c_int, [_c_loader_p, ctypes.c_char_p]),
    ("rf_batch_field", ctypes.c_void_p,
     [_c_batch_p, _i64, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t)]),
    # Mixtures of sources (0.5).
    ("rf_loader_create_mix", _c_loader_p, [_i64]),
    ("rf_loader_add_source", ctypes.c_int,
     [_c_loader_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_double]),
    ("rf_loader_set_source_param", ctypes.c_int, [_c_loader_p, ctypes.c_int, ctypes.c_int, _i64]),
    ("rf_loader_num_sources", ctypes.c_int, [_c_loader_p]),
    ("rf_loader_source_counts", ctypes.c_int, [_c_loader_p, ctypes.c_int, _i64_p, _i64_p]),
    ("rf_loader_epoch_size", _i64, [_c_loader_p]),
    ("rf_loader_sample_source", ctypes.c_int, [_c_loader_p, _i64]),
    ("rf_batch_sources", ctypes.POINTER(ctypes.c_int32), [_c_batch_p]),
    # CUDA (present in every build; RF_E_NO_DEVICE / 0 without a device). Streams
    # and device pointers travel as integers (cudaStream_t, data_ptr()).
    ("rf_cuda_device_count", ctypes.c_int, []),
    ("rf_loader_next_device", ctypes.c_int,
     [_c_loader_p, ctypes.c_void_p, ctypes.POINTER(_c_batch_p)]),
    ("rf_loader_next_device_wait", ctypes.c_int,
     [_c_loader_p, ctypes.c_void_p, ctypes.POINTER(_c_batch_p), _i64]),
    ("rf_batch_device_data", ctypes.c_void_p, [_c_batch_p]),
    ("rf_batch_device_labels", ctypes.c_void_p, [_c_batch_p]),
    ("rf_batch_copy_to", ctypes.c_int,
     [_c_batch_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
]

# 0.5: augmentations, normalised output, per-sample callbacks, explain. Declared
# where the library has them, so that the binding still loads an older one.
_SIGNATURES_0_5 = [
    ("rf_loader_set_augment", ctypes.c_int, [_c_loader_p, ctypes.c_char_p]),
    ("rf_loader_set_normalize", ctypes.c_int,
     [_c_loader_p, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double)]),
    ("rf_loader_set_sample_fn", ctypes.c_int, [_c_loader_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("rf_loader_explain", _i64, [_c_loader_p, _i64, _i64, ctypes.c_char_p, ctypes.c_size_t]),
    ("rf_augment_apply", ctypes.c_int,
     [ctypes.POINTER(ctypes.c_uint8), ctypes.c_int, ctypes.c_int, ctypes.c_ssize_t,
      ctypes.c_char_p, ctypes.POINTER(ctypes.c_double), ctypes.c_int, ctypes.c_char_p,
      ctypes.c_size_t]),
    ("rf_augment_draws", _i64,
     [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, _i64, _i64,
      ctypes.POINTER(ctypes.c_double), _i64, ctypes.c_char_p, ctypes.c_size_t]),
    # shapes: buckets, a batch's shape, letterbox and native sizes
    ("rf_loader_set_buckets", ctypes.c_int,
     [_c_loader_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_int]),
    ("rf_loader_buckets", ctypes.c_int, [_c_loader_p, ctypes.POINTER(ctypes.c_int32),
                                         ctypes.c_int]),
    ("rf_loader_sample_bucket", ctypes.c_int, [_c_loader_p, _i64]),
    ("rf_batch_shape", ctypes.c_int,
     [_c_batch_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]),
    ("rf_batch_sizes", ctypes.POINTER(ctypes.c_int32), [_c_batch_p]),
    ("rf_batch_scales", ctypes.POINTER(ctypes.c_float), [_c_batch_p]),
    ("rf_batch_bucket", ctypes.c_int, [_c_batch_p]),
    ("rf_loader_rest_unit", _i64, [_c_loader_p]),
    ("rf_loader_seek_rest_unit", ctypes.c_int, [_c_loader_p, _i64, _i64, _i64, _i64]),
]

# int (*)(void *user, uint8_t *pixels, int h, int w, int c, ptrdiff_t stride,
#         uint64_t seed, const rf_sample_info *info)
SAMPLE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint8),
                             ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_ssize_t,
                             ctypes.c_uint64, ctypes.c_void_p)


class SampleInfo(ctypes.Structure):
    """rf_sample_info."""
    _fields_ = [("sample", ctypes.c_int64), ("epoch", ctypes.c_int64), ("label", ctypes.c_int64),
                ("worker", ctypes.c_int32), ("reserved", ctypes.c_int32)]


_HERE = os.path.dirname(os.path.abspath(__file__))


def _package_version():
    """The package's version: the generated _version.py of an installed wheel,
    else the RF_VERSION_* lines of the repository's include/ringfeed.h."""
    try:
        from ._version import version
        return version
    except ImportError:
        pass
    header = os.path.join(_HERE, "..", "..", "..", "include", "ringfeed.h")
    try:
        with open(header, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return "0+unknown"
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"^#define\s+RF_VERSION_%s\s+(\d+)\s*$" % part, text, re.MULTILINE)
        if not m:
            return "0+unknown"
        parts.append(m.group(1))
    return ".".join(parts)


__version__ = _package_version()


def _candidates():
    """Paths (or names) to try, in order, with where each came from."""
    yield os.path.join(_HERE, LIBNAME), "package folder"
    env = os.environ.get("RINGFEED_LIBRARY")
    if env:
        yield env, "RINGFEED_LIBRARY"
    repo_build = os.path.normpath(os.path.join(_HERE, "..", "..", "..", "build", LIBNAME))
    yield repo_build, "repository build/"
    found = ctypes.util.find_library("ringfeed")
    if found:
        yield found, "system"


def _declare(lib):
    for name, restype, argtypes in _SIGNATURES:
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    for name, restype, argtypes in _SIGNATURES_0_5:
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = restype
            fn.argtypes = argtypes
    return lib


_lock = threading.Lock()
_lib = None
_lib_path = None


def load():
    """Returns the loaded, declared library (loads it on first use).

    Raises OSError naming every place that was tried. When RINGFEED_LIBRARY
    is set (and the package has no copy of its own), only that path is tried:
    a wrong setting is an error, never a silent fall-through to some other
    copy of the library.
    """
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path, origin in _candidates():
            if origin != "RINGFEED_LIBRARY" and origin != "system" and not os.path.exists(path):
                tried.append("%s (%s): not found" % (path, origin))
                continue
            try:
                lib = ctypes.CDLL(path)
                _declare(lib)
            except (OSError, AttributeError) as e:
                tried.append("%s (%s): %s" % (path, origin, e))
                if origin == "RINGFEED_LIBRARY":
                    break
                continue
            _lib, _lib_path = lib, path
            return lib
        raise OSError("ringfeed: cannot load libringfeed; tried:\n  " + "\n  ".join(tried)
                      + "\nset RINGFEED_LIBRARY to the path of libringfeed.so")


def path():
    """Path of the loaded library (loads it if needed)."""
    load()
    return _lib_path


def library_path():
    """Path of the libringfeed that this package uses (loads it if needed)."""
    return path()


def library_version():
    """Version of the loaded library, from its rf_version(): "MAJOR.MINOR.PATCH"."""
    v = load().rf_version()
    return "%d.%d.%d" % (v // 10000, (v // 100) % 100, v % 100)


def strerror(status):
    s = load().rf_strerror(int(status))
    return s.decode("utf-8", "replace") if s else "status %d" % status


def param_bounds(param):
    lo, hi = ctypes.c_int64(), ctypes.c_int64()
    rc = load().rf_param_bounds(int(param), ctypes.byref(lo), ctypes.byref(hi))
    if rc < 0:
        return None
    return lo.value, hi.value
