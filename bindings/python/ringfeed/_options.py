"""Loader's keyword arguments, turned into the C API's RF_P_* parameters.

Only what the library cannot see is checked here: Python types, names that
become enum values (transform, layout, dtype, ...), device strings, unknown
keywords, the source list, the RANK / WORLD_SIZE / LOCAL_WORLD_SIZE
environment defaults. Ranges and combinations (rank below world_size,
records need transform none, record_size a multiple of the dtype's size, ...)
are the library's to refuse, at rf_loader_set_param or rf_loader_start; the
binding raises its message as a ValueError (_errors._OptionError).

Parameters that newer libraries added are sent only when they differ from
their default, so the binding still runs on a library that predates them.
"""

import ctypes
import os

import numpy as np

from . import _lib
from ._mix import Mix
from ._redact import shown
from ._recipe import Recipe

# RF_P_MAX_FILE_BYTES's default in the library: larger sample files are errors.
MAX_FILE_BYTES = 512 << 20

# Options after local_world_size, accepted as keyword arguments.
_EXTRA_INT_OPTIONS = {
    "max_pixels": _lib.RF_P_MAX_PIXELS,
    "max_scans": _lib.RF_P_MAX_SCANS,
    "read_depth": _lib.RF_P_READ_DEPTH,
    "read_timeout_ms": _lib.RF_P_READ_TIMEOUT_MS,
    "max_errors": _lib.RF_P_MAX_ERRORS,
    "extras_bytes": _lib.RF_P_EXTRAS_BYTES,
    # remote shards (s3://, http(s)://); sent only when given
    "fetch_retries": _lib.RF_P_FETCH_RETRIES,
    "fetch_timeout_ms": _lib.RF_P_FETCH_TIMEOUT_MS,
    "fetch_parallel": _lib.RF_P_FETCH_PARALLEL,
}

# The label member's default extension (webdataset's ".cls").
DEFAULT_LABEL = "cls"


# RandomResizedCrop's defaults, torchvision's: scale (0.08, 1.0), ratio (3/4, 4/3).
SCALE = (0.08, 1.0)
RATIO = (3.0 / 4.0, 4.0 / 3.0)


def _ppm(x):
    return int(round(x * 1e6))


def _range_params(name, value, default, params):
    """(RF_P_*, millionths) pairs for a (min, max) pair of floats, only for
    the bounds that differ from the default once rounded to millionths (the
    library reads 0, and the default so rounded, as the default itself).
    A bound below 1e-6 is refused here (it would round to 0, which means
    "default" to the library). The rest (min > max, scale above 1, transform) is the
    library's to check."""
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise TypeError("ringfeed: %s must be a pair of numbers (min, max), not %r"
                        % (name, value)) from None
    out = []
    for v, d, p in zip((lo, hi), default, params):
        if not 0.5e-6 <= v <= 1e12:  # also NaN; larger ones the library refuses anyway
            raise ValueError("ringfeed: %s=(%r, %r): each bound must be a number from 1e-6 on"
                             % (name, lo, hi))
        if _ppm(v) != _ppm(d):
            out.append((p, _ppm(v)))
    return out


def _choice(name, value, table, fold=str.lower):
    if isinstance(value, str):
        key = fold(value)
        if key in table:
            return table[key]
    raise ValueError("ringfeed: %s must be one of %s, not %r" % (name, ", ".join(map(repr, table)), value))


def _int(name, value):
    if isinstance(value, bool):
        return int(value)
    try:
        return int(value.__index__())
    except (AttributeError, TypeError):
        raise TypeError("ringfeed: %s must be an integer, not %r" % (name, value)) from None


def _env_int(var, default):
    v = os.environ.get(var)
    if v is None or v.strip() == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise ValueError("ringfeed: environment %s=%r is not an integer" % (var, v)) from None


_shown = shown  # a source entry as the library shows it (_redact.py)


def _source_spec(source):
    """The C source string: a path, or a list of paths joined by newlines."""
    if isinstance(source, (list, tuple)):
        if not source:
            raise ValueError("ringfeed: the list of sources is empty")
        parts = []
        for s in source:
            try:
                p = os.fsdecode(s)
            except TypeError:
                raise TypeError("ringfeed: sources must be paths, not %r" % (s,)) from None
            if "\n" in p or not p:
                raise ValueError("ringfeed: bad source path %r in the list" % (p,))
            parts.append(p)
        return os.fsencode("\n".join(parts))
    try:
        return os.fsencode(source)
    except TypeError:
        raise TypeError("ringfeed: source must be a path or a list of paths, not %r"
                        % (source,)) from None


def _pair(name, value, lo=1):
    """(height, width) of an int (both sides) or a pair of ints."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ValueError("ringfeed: %s must be an int or a (height, width) pair, not %r"
                             % (name, value))
        h, w = (_int(name, v) for v in value)
    else:
        h = w = _int(name, value)
    if h < lo or w < lo:
        raise ValueError("ringfeed: %s=%r: sides must be >= %d" % (name, value, lo))
    return h, w


def _fill_value(fill):
    """RF_P_FILL's 0xRRGGBB of a fill given as one value or three (0..255)."""
    vals = tuple(fill) if isinstance(fill, (list, tuple)) else (fill,) * 3
    if len(vals) != 3:
        raise ValueError("ringfeed: fill must be one value or three (r, g, b), not %r" % (fill,))
    out = 0
    for v in vals:
        v = _int("fill", v)
        if not 0 <= v <= 255:
            raise ValueError("ringfeed: fill=%r: values are 0..255" % (fill,))
        out = out << 8 | v
    return out


def _bucket_list(buckets):
    """(count, None) for buckets=N, (0, [(h, w), ...]) for a list, (0, None)
    for None."""
    if buckets is None:
        return 0, None
    if isinstance(buckets, (list, tuple)):
        pairs = [_pair("buckets", b) for b in buckets]
        if not pairs:
            raise ValueError("ringfeed: buckets is an empty list")
        if len(set(pairs)) != len(pairs):
            raise ValueError("ringfeed: buckets name a shape twice: %r" % (buckets,))
        return 0, pairs
    n = _int("buckets", buckets)
    if n < 1:
        raise ValueError("ringfeed: buckets=%d: a count must be >= 1" % n)
    return n, None


def _dtype_value(dtype):
    """enum rf_dtype of a dtype given as a string or a numpy dtype."""
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in _lib.DTYPES:
        raise ValueError("ringfeed: dtype must be one of %s, not %r"
                         % (", ".join(_lib.DTYPES), dtype))
    return _lib.DTYPES[name], np.dtype(name)


def _picture_dtype(dtype):
    """The output type of pictures by name: uint8, float32, float16 or
    bfloat16 (a string, a numpy dtype or a torch dtype)."""
    name = str(dtype)
    if name.startswith("torch."):
        name = name[len("torch."):]
    if name != "bfloat16":
        try:
            name = np.dtype(dtype).name
        except TypeError:
            pass
    if name not in ("uint8", "float32", "float16", "bfloat16"):
        raise ValueError("ringfeed: dtype of pictures must be 'uint8', 'float32', 'float16' or "
                         "'bfloat16', not %r" % (dtype,))
    return name


def _ext_name(what, value):
    """A member extension as the library stores it: blanks and a leading '.'
    dropped, lowercase (the library checks the rest)."""
    if not isinstance(value, str):
        raise TypeError("ringfeed: %s must be a string (a member extension such as 'txt'), "
                        "not %r" % (what, value))
    name = value.strip()
    if name.startswith("."):
        name = name[1:]
    if not name or "," in name:
        raise ValueError("ringfeed: %s: %r is not a member extension" % (what, value))
    return name.lower()


def _member_names(label, extras):
    """(label or None, extras tuple), checked: label None or "" reads
    unlabeled shards; extras is a sequence of extensions or one string
    ("txt" or "txt,json")."""
    if label is not None and label != "":
        label = _ext_name("label", label)
    else:
        label = None
    if extras is None:
        extras = ()
    elif isinstance(extras, str):
        extras = tuple(e for e in extras.split(",")) if extras.strip() else ()
    else:
        try:
            extras = tuple(extras)
        except TypeError:
            raise TypeError("ringfeed: extras must be a sequence of member extensions such as "
                            "('txt', 'json'), not %r" % (extras,)) from None
    names = tuple(_ext_name("extras", e) for e in extras)
    if len(set(names)) != len(names):
        raise ValueError("ringfeed: extras name a member twice: %r" % (extras,))
    return label, names


def _parse_device(device):
    """('cpu', -1), ('cuda', index), or ('cuda', None) for a bare "cuda": torch's
    current device, resolved when the output is made (Options.resolve_device)."""
    s = "cpu" if device is None else str(device)
    if s == "cpu":
        return "cpu", -1
    if s == "cuda":
        return "cuda", None
    if s.startswith("cuda:"):
        try:
            idx = int(s.split(":", 1)[1])
        except ValueError:
            raise ValueError("ringfeed: bad device %r" % (device,)) from None
        if idx < 0:
            raise ValueError("ringfeed: bad device %r" % (device,))
        return "cuda", idx
    raise ValueError("ringfeed: device must be 'cpu', 'cuda' or 'cuda:N', not %r" % (device,))


class Options:
    """Loader's arguments, checked: the source (or `mix`, a Mix), the output's kind,
    `params`, the (RF_P_*, value) pairs to set before rf_loader_start, and
    `strings`, the (setter, bytes or None) calls for the tar member names
    (rf_loader_set_label, rf_loader_set_extras; only what differs from the
    defaults). `extra` holds the keyword options beyond Loader's named
    arguments."""

    def __init__(self, source, batch_size, image_size, transform, flip, layout, shuffle, seed,
                 drop_last, num_workers, device, pin_memory, prefetch, on_error, rank,
                 world_size, local_world_size, max_file_bytes, extra):
        self.mix = source if isinstance(source, Mix) else None
        if self.mix is not None:
            self.source = None
            self.source_str = repr(self.mix)
        else:
            self.source = _source_spec(source)
            self.source_str = ", ".join(_shown(p) for p in os.fsdecode(self.source).split("\n"))

        extra = dict(extra)
        record_size = _int("record_size", extra.pop("record_size", 0))
        header_size = _int("header_size", extra.pop("header_size", 0))
        dtype_arg = extra.pop("dtype", "uint8")
        self.records = record_size > 0
        self.record_size = record_size
        dtype_v, dtype = _dtype_value(dtype_arg) if self.records else (0, None)
        self.device_kind, self.device_index = _parse_device(device)
        # augment, dtype + mean/std, sample_fn: pictures' recipe (_recipe.py)
        self.recipe = Recipe(extra.pop("augment", None),
                             "uint8" if self.records else _picture_dtype(dtype_arg),
                             extra.pop("mean", None), extra.pop("std", None),
                             extra.pop("sample_fn", None), self.device_kind)
        # of the batches' elements (the ring's: uint8 where a CUDA device normalises)
        self.dtype = dtype if self.records else np.dtype(self.recipe.np_dtype)
        if transform is None:
            transform = "none" if self.records or extra.get("max_side") else "random_resized_crop"
        self.return_source = bool(extra.pop("return_source", False))
        self.output = extra.pop("output", "auto")
        self.copy_mode = extra.pop("copy_mode", "ring")
        io_backend = extra.pop("io_backend", "auto")
        verify = extra.pop("verify", "once")
        self.sampler_drop_last = bool(extra.pop("sampler_drop_last", False))
        self.shuffle = bool(shuffle)
        self.shuffle_block = _int("shuffle_block", extra.pop("shuffle_block", 0))
        label, extras = _member_names(extra.pop("label", DEFAULT_LABEL), extra.pop("extras", ()))
        if self.records and (label != DEFAULT_LABEL or extras):
            raise ValueError("ringfeed: label and extras name members of WebDataset tar shards; "
                             "record files have neither (leave label='cls' and extras=())")
        self.labeled = label is not None and not self.records  # batches carry labels
        self.extras = extras
        self.strings = []
        if label != DEFAULT_LABEL:
            self.strings.append(("rf_loader_set_label",
                                 None if label is None else label.encode("utf-8")))
        if extras:
            self.strings.append(("rf_loader_set_extras", ",".join(extras).encode("utf-8")))
        self.strings += self.recipe.calls
        cache_dir = extra.pop("cache_dir", None)
        if cache_dir is not None:
            self.strings.append(("rf_loader_set_cache_dir", os.fsencode(cache_dir)))
        cache_limit = extra.pop("cache_limit", None)
        # shapes: center's Resize, letterbox, native sizes, buckets
        resize_size = extra.pop("resize_size", None)
        fill = _fill_value(extra.pop("fill", 0))
        align = extra.pop("align", "center")
        self.max_side = _int("max_side", extra.pop("max_side", 0))
        self.pad = bool(extra.pop("pad", False))
        if self.pad and not self.max_side:
            raise ValueError("ringfeed: pad=True pads native sizes: it needs max_side")
        nbuckets, bucket_list = _bucket_list(extra.pop("buckets", None))
        self.bucketed = bool(nbuckets or bucket_list)
        bucket_shared = bool(extra.pop("bucket_shared", True))
        bucket_multiple = _int("bucket_multiple", extra.pop("bucket_multiple", 8))
        map_shards = bool(extra.pop("map_shards", True))
        exact = extra.pop("exact", False)
        scale = extra.pop("scale", SCALE)
        ratio = extra.pop("ratio", RATIO)
        ints = [(_EXTRA_INT_OPTIONS[k], _int(k, extra.pop(k)))
                for k in list(extra) if k in _EXTRA_INT_OPTIONS]
        if extra:
            raise TypeError("ringfeed.Loader() got unexpected keyword argument(s): %s"
                            % ", ".join(sorted(extra)))

        transform_v = _choice("transform", transform, _lib.TRANSFORMS)
        self.transform = transform_v
        align_v = _choice("align", align, _lib.ALIGNS)
        self.image_hw = _pair("image_size", image_size)
        # letterbox and native sizes: batches carry each picture's size and scale
        self.framed = transform_v == _lib.TRANSFORMS["letterbox"] or self.max_side > 0
        if flip is None:
            flip = transform_v == _lib.TRANSFORMS["random_resized_crop"]
        layout_v = _choice("layout", layout, _lib.LAYOUTS, fold=str.upper)
        on_error_v = _choice("on_error", on_error, _lib.ON_ERROR)
        io_v = _choice("io_backend", io_backend, _lib.IO_BACKENDS)
        verify_v = _choice("verify", verify, _lib.VERIFY)
        max_file_bytes = _int("max_file_bytes", max_file_bytes)

        if rank is None:
            rank = _env_int("RANK", 0)
        if world_size is None:
            world_size = _env_int("WORLD_SIZE", 1)
        if local_world_size is None:
            local_world_size = _env_int("LOCAL_WORLD_SIZE", 1)

        self.device = "cpu" if self.device_kind == "cpu" else (
            "cuda" if self.device_index is None else "cuda:%d" % self.device_index)

        P = _lib
        self.params = [
            (P.RF_P_BATCH_SIZE, _int("batch_size", batch_size)),
            (P.RF_P_TRANSFORM, transform_v),
            (P.RF_P_FLIP, 1 if flip else 0),
            (P.RF_P_LAYOUT, layout_v),
            (P.RF_P_SHUFFLE, 1 if shuffle else 0),
            (P.RF_P_SEED, _int("seed", seed)),
            (P.RF_P_DROP_LAST, 1 if drop_last else 0),
            (P.RF_P_NUM_WORKERS, _int("num_workers", num_workers)),
            (P.RF_P_PREFETCH, _int("prefetch", prefetch)),
            (P.RF_P_ON_ERROR, on_error_v),
            (P.RF_P_RANK, _int("rank", rank)),
            (P.RF_P_WORLD_SIZE, _int("world_size", world_size)),
            (P.RF_P_LOCAL_WORLD_SIZE, _int("local_world_size", local_world_size)),
            (P.RF_P_IO_BACKEND, io_v),
            (P.RF_P_PIN_MEMORY, 1 if pin_memory else 0),
        ]
        if self.device_index is not None:
            self.params.append((P.RF_P_DEVICE, self.device_index))
        # A square as before; a rectangle by its sides (libraries from 0.5 on).
        hh, ww = self.image_hw
        if hh == ww:
            self.params.insert(1, (P.RF_P_IMAGE_SIZE, hh))
        else:
            self.params[1:1] = [(P.RF_P_IMAGE_HEIGHT, hh), (P.RF_P_IMAGE_WIDTH, ww)]
        if resize_size is not None:
            if isinstance(resize_size, (list, tuple)):
                rh, rw = _pair("resize_size", resize_size)
                self.params += [(P.RF_P_RESIZE_HEIGHT, rh), (P.RF_P_RESIZE_WIDTH, rw)]
            else:
                self.params.append((P.RF_P_RESIZE_SIZE, _int("resize_size", resize_size)))
        if align_v:
            self.params.append((P.RF_P_ALIGN, align_v))
        if fill:
            self.params.append((P.RF_P_FILL, fill))
        if self.max_side:
            self.params.append((P.RF_P_MAX_SIDE, self.max_side))
        if nbuckets:
            self.params.append((P.RF_P_BUCKETS, nbuckets))
        self.bucket_list = bucket_list  # rf_loader_set_buckets (_handle)
        if bucket_list:
            flat = [v for hw in bucket_list for v in hw]
            self.strings.append(("rf_loader_set_buckets",
                                 ((ctypes.c_int32 * len(flat))(*flat), len(bucket_list))))
        if not bucket_shared:
            self.params.append((P.RF_P_BUCKET_SHARED, 0))
        if bucket_multiple != 8:
            self.params.append((P.RF_P_BUCKET_MULTIPLE, bucket_multiple))
        if not map_shards:  # the default is not sent: libraries before 0.5.1 lack it
            self.params.append((P.RF_P_MAP_SHARDS, 0))
        # Defaults not sent: libraries before 0.2 lack RF_P_VERIFY, and older
        # ones RF_P_MAX_FILE_BYTES.
        if verify_v != _lib.VERIFY["once"]:
            self.params.append((P.RF_P_VERIFY, verify_v))
        if max_file_bytes != MAX_FILE_BYTES:
            self.params.append((P.RF_P_MAX_FILE_BYTES, max_file_bytes))
        if self.sampler_drop_last:  # libraries before it lack RF_P_SAMPLER_DROP_LAST
            self.params.append((P.RF_P_SAMPLER_DROP_LAST, 1))
        if self.shuffle_block:  # nor RF_P_SHUFFLE_BLOCK (the library checks its range)
            self.params.append((P.RF_P_SHUFFLE_BLOCK, self.shuffle_block))
        # Sent only when set, for libraries before RF_P_EXACT and the ranges.
        if exact:
            self.params.append((P.RF_P_EXACT, 1))
        self.params += _range_params("scale", scale, SCALE, (P.RF_P_SCALE_MIN, P.RF_P_SCALE_MAX))
        self.params += _range_params("ratio", ratio, RATIO, (P.RF_P_RATIO_MIN, P.RF_P_RATIO_MAX))
        self.params += ints
        if cache_limit:  # None or 0: auto (libraries before it lack RF_P_CACHE_LIMIT)
            self.params.append((P.RF_P_CACHE_LIMIT, _int("cache_limit", cache_limit)))
        # Any record option that is not 0 goes to the library, which refuses
        # negative sizes; the dtype matters for records only.
        if record_size or header_size:
            self.params += [(P.RF_P_RECORD_SIZE, record_size), (P.RF_P_HEADER_SIZE, header_size),
                            (P.RF_P_DTYPE, dtype_v)]
        elif self.recipe.c_dtype:  # pictures in a float type (libraries from 0.5 on)
            self.params.append((P.RF_P_DTYPE, self.recipe.c_dtype))

    def resolve_device(self, index):
        """The device the output chose for a bare "cuda" (torch's current one)."""
        if self.device_kind == "cuda" and self.device_index is None:
            self.device_index = index
            self.device = "cuda:%d" % index
            self.params.append((_lib.RF_P_DEVICE, index))
