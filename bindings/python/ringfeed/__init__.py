"""ringfeed: a native data loader for deep-learning training (ctypes binding).

    import ringfeed
    with ringfeed.Loader("data/train", batch_size=256, image_size=224) as loader:
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            for images, labels in loader:   # uint8 [B,S,S,3] (NHWC), int64 [B]
                ...

Batches are zero-copy views of the library's ring slots: a slot goes back to
the library only when the last array or tensor that looks at it dies. So that
a caller who keeps batches cannot starve the ring, a batch is copied (and its
slot returned at once) whenever prefetch - 1 batches are already held, and the
last batch of an epoch is always a copy (the loop variable still holds it when
the next epoch is positioned). Memory handed out is never recycled under the
caller: the native loader is destroyed only after its last batch died.

Nothing here is compiled; the library is found in the package folder (where
`pip install .` puts it), through $RINGFEED_LIBRARY, in the repository's build/
folder, then in the system (see _lib.py).
"""

import ctypes
import gc
import json
import os
import threading

import numpy as np

from . import _lib
from ._lib import (
    RF_AGAIN,
    RF_END_OF_EPOCH,
    RF_E_STATE,
    RF_OK,
)
from ._lib import __version__, library_path, library_version  # noqa: F401 (public API)

__all__ = ["Loader", "RingfeedError", "library_path", "library_version", "__version__"]

# Captured once: __del__ may run during interpreter shutdown, when module
# globals can already be gone.
_getpid = os.getpid

# rf_loader_next_wait timeout: short enough that Ctrl-C is honoured quickly
# (Python runs signal handlers between our calls), long enough to cost nothing.
_WAIT_MS = 100

_STATE_VERSION = 1


class RingfeedError(RuntimeError):
    """An error reported by libringfeed; `status` is the RF_E_* code (or None)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


# --------------------------------------------------------------------------
# Native handle and batch leases
# --------------------------------------------------------------------------

class _Handle:
    """Owns one native rf_loader. Leases keep a reference to it, so
    rf_loader_destroy runs only after the Loader let go (close) *and* every
    batch view died. In a forked child nothing native is ever called: the
    library's threads do not exist there and its locks may be held."""

    __slots__ = ("lib", "ptr", "pid", "lock", "leases", "__weakref__")

    def __init__(self, lib, ptr):
        self.lib = lib
        self.ptr = ptr
        self.pid = _getpid()
        self.lock = threading.Lock()  # protects leases (__del__ may run on any thread)
        self.leases = 0               # batches lent and not yet released

    def outstanding(self):
        with self.lock:
            return self.leases

    def errmsg(self):
        if not self.ptr:
            return ""
        m = self.lib.rf_loader_errmsg(self.ptr)
        return m.decode("utf-8", "replace") if m else ""

    def stop(self):
        if self.ptr and self.pid == _getpid():
            self.lib.rf_loader_stop(self.ptr)

    def __del__(self):
        ptr, self.ptr = self.ptr, None
        try:
            if ptr and self.pid == _getpid():
                self.lib.rf_loader_destroy(ptr)
        except Exception:  # interpreter shutdown
            pass


class _Lease:
    """One lent rf_batch; released when the object dies (or explicitly)."""

    __slots__ = ("handle", "batch")

    def __init__(self, handle, batch):
        self.handle = handle
        self.batch = batch
        with handle.lock:
            handle.leases += 1

    def release(self):
        b, self.batch = self.batch, None
        if not b:
            return
        h = self.handle
        try:
            if h.pid == _getpid():
                h.lib.rf_batch_release(b)
            with h.lock:
                h.leases -= 1
        except Exception:  # interpreter shutdown
            pass

    __del__ = release


def _view(lease, ptr, nbytes):
    """uint8 numpy array over nbytes at ptr that keeps `lease` alive."""
    buf = (ctypes.c_uint8 * nbytes).from_address(ptr)
    buf._rf_lease = lease  # the array's base chain holds buf, buf holds the lease
    return np.frombuffer(buf, dtype=np.uint8)


# --------------------------------------------------------------------------
# Output: where batches go (CPU arrays now; CUDA is a later issue)
# --------------------------------------------------------------------------

_torch_mod = None
_torch_tried = False


def _import_torch():
    global _torch_mod, _torch_tried
    if not _torch_tried:
        _torch_tried = True
        try:
            import torch  # noqa: F401
            _torch_mod = torch
        except Exception:
            _torch_mod = None
    return _torch_mod


class _CpuOutput:
    """Hands out host arrays: torch tensors (sharing memory) or numpy arrays."""

    native_device = -1  # RF_P_DEVICE

    def __init__(self, output):
        if output == "auto":
            self.torch = _import_torch()
        elif output == "torch":
            self.torch = _import_torch()
            if self.torch is None:
                raise ImportError("ringfeed: output='torch' but torch cannot be imported")
        elif output == "numpy":
            self.torch = None
        else:
            raise ValueError("ringfeed: output must be 'auto', 'torch' or 'numpy', not %r" % (output,))

    def wrap(self, images, labels):
        if self.torch is not None:
            return self.torch.from_numpy(images), self.torch.from_numpy(labels)
        return images, labels

    def wrap_data(self, data):
        """Record data alone. torch before 2.3 has no uint16: such data come
        as int32 tensors there (a copy; the values are kept)."""
        if self.torch is None:
            return data
        try:
            return self.torch.from_numpy(data)
        except TypeError:
            return self.torch.from_numpy(data.astype(np.int32))


def _parse_device(device):
    """('cpu', -1) or ('cuda', index)."""
    s = "cpu" if device is None else str(device)
    if s == "cpu":
        return "cpu", -1
    if s == "cuda" or s.startswith("cuda:"):
        idx = 0
        if ":" in s:
            try:
                idx = int(s.split(":", 1)[1])
            except ValueError:
                raise ValueError("ringfeed: bad device %r" % (device,)) from None
        return "cuda", idx
    raise ValueError("ringfeed: device must be 'cpu', 'cuda' or 'cuda:N', not %r" % (device,))


class _CudaOutput:
    """Hands out CUDA torch tensors on device `index`, ready on
    torch.cuda.current_stream(device) at the time the batch was asked for.

    The tensors come from torch's allocator (torch.empty), and the library
    copies into their data_ptr() on the current stream (rf_batch_copy_to);
    the batch is then released at once, and its ring slot is refilled only
    after the copy completed (enforced in C). So a tensor never changes under
    its user, whatever the user keeps. copy_mode "ring" (the default): the
    batch first goes to one of the loader's device buffers on the library's
    own copy stream (rf_loader_next_device), overlapping the work already
    queued on the current stream, then a device-to-device copy fills the
    tensors; "direct": one host-to-device copy into the tensors, ordered after
    the work already queued on the current stream (as .cuda(non_blocking=True)).
    """

    def __init__(self, index, output, copy_mode):
        where = "cuda:%d" % index
        if output not in ("auto", "torch"):
            raise ValueError("ringfeed: device=%r yields torch tensors; output=%r is not possible"
                             % (where, output))
        if copy_mode not in ("ring", "direct"):
            raise ValueError("ringfeed: copy_mode must be 'ring' or 'direct', not %r" % (copy_mode,))
        torch = _import_torch()
        if torch is None:
            raise ImportError("ringfeed: device=%r needs torch with CUDA, and torch cannot be "
                              "imported" % where)
        if not torch.cuda.is_available():
            raise RingfeedError(
                "ringfeed: device=%r but torch.cuda.is_available() is False (torch %s%s): use "
                "device='cpu'" % (where, torch.__version__,
                                  ", a build without CUDA" if not torch.version.cuda else
                                  ", no usable GPU or driver"), RF_E_STATE)
        n = torch.cuda.device_count()
        if not 0 <= index < n:
            raise ValueError("ringfeed: device=%r but torch sees %d CUDA device%s"
                             % (where, n, "" if n == 1 else "s"))
        self.torch = torch
        self.device = torch.device("cuda", index)
        self.native_device = index
        self.ring = copy_mode == "ring"

    def stream(self):
        """The current stream of the loader's device, as an integer (cudaStream_t)."""
        return self.torch.cuda.current_stream(self.device).cuda_stream

    def next_stream(self):
        """Stream for rf_loader_next_device, or None to take host batches."""
        return self.stream() if self.ring else None

    def deliver(self, lib, lease, count, nbytes, shape, dtype, records):
        """Copies the lent batch into new tensors and releases it. Returns
        (images, labels or None, status)."""
        torch = self.torch
        tdtype = getattr(torch, np.dtype(dtype).name)
        images = torch.empty((nbytes,), dtype=torch.uint8, device=self.device)
        labels = None if records else torch.empty((count,), dtype=torch.int64, device=self.device)
        rc = RF_OK
        if count:
            rc = lib.rf_batch_copy_to(lease.batch, images.data_ptr(),
                                      labels.data_ptr() if labels is not None else None,
                                      self.stream())
        lease.release()  # the slot waits in C for the copy; the tensors are torch's
        return images.view(tdtype).reshape(shape), labels, rc

    def wrap(self, images, labels):
        return images, labels

    def wrap_data(self, data):
        return data


def _make_output(kind, index, output, pin_memory, copy_mode="ring"):
    if kind == "cpu":
        return _CpuOutput(output)
    return _CudaOutput(index, output, copy_mode)


# --------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------

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


# Options after local_world_size, accepted as keyword arguments.
_EXTRA_INT_OPTIONS = {
    "max_pixels": _lib.RF_P_MAX_PIXELS,
    "max_scans": _lib.RF_P_MAX_SCANS,
    "read_depth": _lib.RF_P_READ_DEPTH,
    "read_timeout_ms": _lib.RF_P_READ_TIMEOUT_MS,
    "max_errors": _lib.RF_P_MAX_ERRORS,
}


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


# --------------------------------------------------------------------------
# Loader
# --------------------------------------------------------------------------

class Loader:
    """Iterable of (images, labels) batches from an image folder, a list file
    or WebDataset tar shards; or of data batches alone from record files.

    source: a folder, a list file, a .tar shard, a brace pattern
    ("shards/train-{0000..0099}.tar"), a glob ("shards/*.tar"), or a list of
    these. record_size > 0 reads fixed-size records instead (token shards):
    header_size bytes are skipped at the start of each file, dtype ("uint8",
    "uint16", "int32", "int64") types the output, transform must be "none"
    (the default for records); each batch is the data array alone, shape
    [B, record_size // itemsize] (torch before 2.3 has no uint16: int32 there).

    See DESIGN.md, "Python surface". Options map one to one to the C API's
    RF_P_* parameters; rank/world_size default to torchrun's RANK/WORLD_SIZE
    and local_world_size to LOCAL_WORLD_SIZE. flip=None (the default) means
    "flip when transform is random_resized_crop". Extra keyword options:
    io_backend ("auto", "io_uring", "pread"), verify ("once", the default:
    each JPEG is decoded to its end the first time, to find damage below its
    crop, and only as far as its crop needs after it passed; "always";
    "none"; see rf_verify in ringfeed.h), max_pixels, max_scans,
    read_depth, read_timeout_ms, max_errors, and output ("auto": torch tensors
    when torch imports, else numpy; or "torch", "numpy").

    device="cuda" / "cuda:N" yields CUDA tensors (images and labels) ready on
    torch.cuda.current_stream(); they belong to torch's allocator, so keeping
    them is always safe. The ring is then page-locked (pin_memory=False keeps
    it pageable, for comparison); stats()["memory"]["mode"] and
    stats()["cuda"] say what is in use. copy_mode="ring" (default) or
    "direct": see _CudaOutput.
    """

    def __init__(self, source, batch_size=256, image_size=224, transform=None,
                 flip=None, layout="NHWC", shuffle=True, seed=0, drop_last=False, num_workers=0,
                 device="cpu", pin_memory=True, prefetch=4, on_error="raise", rank=None,
                 world_size=None, local_world_size=None, **options):
        self._handle = None
        self._pid = _getpid()
        self._closed = False
        self._generation = 0

        self._source = _source_spec(source)
        self._source_str = os.fsdecode(self._source).replace("\n", ", ")

        record_size = _int("record_size", options.pop("record_size", 0))
        header_size = _int("header_size", options.pop("header_size", 0))
        dtype_v, self._dtype = _dtype_value(options.pop("dtype", "uint8"))
        self._records = record_size > 0
        if record_size < 0 or header_size < 0:
            raise ValueError("ringfeed: record_size and header_size must be >= 0")
        if self._records and record_size % self._dtype.itemsize:
            raise ValueError("ringfeed: record_size %d is not a multiple of %s's size %d"
                             % (record_size, self._dtype.name, self._dtype.itemsize))
        if transform is None:
            transform = "none" if self._records else "random_resized_crop"
        if self._records and transform != "none":
            raise ValueError("ringfeed: record files need transform='none' (their bytes are "
                             "passed through), not %r" % (transform,))
        output = options.pop("output", "auto")
        copy_mode = options.pop("copy_mode", "ring")
        io_backend = options.pop("io_backend", "auto")
        verify = options.pop("verify", "once")
        extra = {}
        for k in list(options):
            if k in _EXTRA_INT_OPTIONS:
                extra[k] = options.pop(k)
        if options:
            raise TypeError("ringfeed.Loader() got unexpected keyword argument(s): %s"
                            % ", ".join(sorted(options)))

        transform_v = _choice("transform", transform, _lib.TRANSFORMS)
        if flip is None:
            flip = transform_v == _lib.TRANSFORMS["random_resized_crop"]
        layout_v = _choice("layout", layout, _lib.LAYOUTS, fold=str.upper)
        on_error_v = _choice("on_error", on_error, _lib.ON_ERROR)
        io_v = _choice("io_backend", io_backend, _lib.IO_BACKENDS)
        verify_v = _choice("verify", verify, _lib.VERIFY)

        if rank is None:
            rank = _env_int("RANK", 0)
        if world_size is None:
            world_size = _env_int("WORLD_SIZE", 1)
        if local_world_size is None:
            local_world_size = _env_int("LOCAL_WORLD_SIZE", 1)
        rank = _int("rank", rank)
        world_size = _int("world_size", world_size)
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError("ringfeed: need 0 <= rank < world_size, got rank=%d world_size=%d"
                             % (rank, world_size))

        kind, index = _parse_device(device)
        self._output = _make_output(kind, index, output, bool(pin_memory), copy_mode)
        self._device = "cpu" if kind == "cpu" else "%s:%d" % (kind, index)

        P = _lib
        self._params = [
            (P.RF_P_BATCH_SIZE, _int("batch_size", batch_size)),
            (P.RF_P_IMAGE_SIZE, _int("image_size", image_size)),
            (P.RF_P_TRANSFORM, transform_v),
            (P.RF_P_FLIP, 1 if flip else 0),
            (P.RF_P_LAYOUT, layout_v),
            (P.RF_P_SHUFFLE, 1 if shuffle else 0),
            (P.RF_P_SEED, _int("seed", seed)),
            (P.RF_P_DROP_LAST, 1 if drop_last else 0),
            (P.RF_P_NUM_WORKERS, _int("num_workers", num_workers)),
            (P.RF_P_PREFETCH, _int("prefetch", prefetch)),
            (P.RF_P_ON_ERROR, on_error_v),
            (P.RF_P_RANK, rank),
            (P.RF_P_WORLD_SIZE, world_size),
            (P.RF_P_LOCAL_WORLD_SIZE, _int("local_world_size", local_world_size)),
            (P.RF_P_IO_BACKEND, io_v),
            (P.RF_P_PIN_MEMORY, 1 if pin_memory else 0),
            (P.RF_P_DEVICE, self._output.native_device if kind == "cpu" else index),
        ]
        if verify_v != _lib.VERIFY["once"]:  # the default: not sent, for libraries before 0.2
            self._params.append((P.RF_P_VERIFY, verify_v))
        for k, v in extra.items():
            self._params.append((_EXTRA_INT_OPTIONS[k], _int(k, v)))
        if self._records:
            self._params += [(P.RF_P_RECORD_SIZE, record_size), (P.RF_P_HEADER_SIZE, header_size),
                             (P.RF_P_DTYPE, dtype_v)]

        self._lib = _lib.load()
        self._handle = self._new_handle()
        if kind == "cuda":
            cuda = self.stats().get("cuda", {})
            if not cuda.get("available"):
                self.close()
                raise RingfeedError("ringfeed: device=%r but libringfeed (%s) has no CUDA "
                                    "device: %s" % (self._device, _lib.path(),
                                                    cuda.get("reason", "no 'cuda' in its stats")),
                                    RF_E_STATE)

        h = self._handle
        self._batch_size = self._get(h, P.RF_P_BATCH_SIZE)
        self._image_size = self._get(h, P.RF_P_IMAGE_SIZE)
        self._layout = "NCHW" if self._get(h, P.RF_P_LAYOUT) == _lib.LAYOUTS["NCHW"] else "NHWC"
        self._seed = self._get(h, P.RF_P_SEED)
        self._rank = self._get(h, P.RF_P_RANK)
        self._world_size = self._get(h, P.RF_P_WORLD_SIZE)
        self._prefetch = max(2, self._get(h, P.RF_P_PREFETCH))
        self._num_samples = int(self._lib.rf_loader_num_samples(h.ptr))
        self._num_batches = int(self._lib.rf_loader_num_batches(h.ptr))
        s = self._image_size
        self._sample_shape = (3, s, s) if self._layout == "NCHW" else (s, s, 3)
        self._sample_bytes = 3 * s * s
        if self._records:
            self._sample_shape = (record_size // self._dtype.itemsize,)
            self._sample_bytes = record_size

        # _positioned: the next iteration starts where the loader stands
        # (just started, set_epoch, load_state_dict); otherwise it restarts
        # the current epoch at batch 0. _generation invalidates iterators
        # whose position was moved under them.
        self._positioned = True
        self._generation = 0

    # -- native plumbing ---------------------------------------------------

    def _new_handle(self):
        lib = self._lib
        ptr = lib.rf_loader_create(self._source)
        if not ptr:
            raise MemoryError("ringfeed: rf_loader_create failed")
        h = _Handle(lib, ptr)
        for param, value in self._params:
            rc = lib.rf_loader_set_param(ptr, param, value)
            if rc < 0:
                name = _lib.PARAM_NAMES.get(param, str(param))
                bounds = _lib.param_bounds(param)
                detail = h.errmsg()
                msg = "ringfeed: %s=%d rejected: %s" % (name, value, _lib.strerror(rc))
                if bounds:
                    msg += " (valid range %d..%d)" % bounds
                if detail:
                    msg += ": " + detail
                raise RingfeedError(msg, rc)
        rc = lib.rf_loader_start(ptr)
        if rc < 0:
            raise self._error(h, rc, "start %s" % self._source_str)
        return h

    def _get(self, h, param):
        out = ctypes.c_int64()
        rc = self._lib.rf_loader_get_param(h.ptr, param, ctypes.byref(out))
        if rc < 0:
            raise self._error(h, rc, "get_param %s" % _lib.PARAM_NAMES.get(param, param))
        return out.value

    def _error(self, h, rc, what):
        detail = h.errmsg() if h is not None else ""
        msg = detail if detail else "ringfeed: %s: %s" % (what, _lib.strerror(rc))
        if detail and _lib.strerror(rc) not in detail:
            msg = "%s [%s]" % (detail, _lib.strerror(rc))
        return RingfeedError(msg, rc)

    def _live(self):
        """The native handle, after checking that this process may use it."""
        if self._pid != _getpid():
            raise RingfeedError(
                "ringfeed: this Loader was created in process %d and cannot be used in the "
                "forked process %d (its threads do not exist here); create a new Loader in "
                "the child" % (self._pid, _getpid()), RF_E_STATE)
        h = self._handle
        if h is None:
            raise RingfeedError("ringfeed: the loader is closed", RF_E_STATE)
        return h

    def _respawn(self):
        """Replaces the native loader with a fresh one on the same options.

        Used when the position must move while batches are still held: the
        old loader is stopped (its lent batches stay readable) and destroyed
        when its last batch dies."""
        old = self._handle
        new = self._new_handle()
        self._handle = new
        old.stop()
        return new

    def _reposition(self, epoch, batch):
        h = self._live()
        self._generation += 1
        self._positioned = False
        rc = self._lib.rf_loader_seek(h.ptr, epoch, batch)
        # A lent batch stays valid until released (rf_loader_next's contract),
        # so a seek that succeeds leaves the caller's views intact. A library
        # that refuses to move while batches are lent says RF_E_STATE: free
        # what reference cycles hold, then fall back to a fresh native loader.
        if rc == RF_E_STATE and h.outstanding():
            gc.collect()
            rc = self._lib.rf_loader_seek(h.ptr, epoch, batch)
        if rc == RF_E_STATE:
            h = self._respawn()
            rc = self._lib.rf_loader_seek(h.ptr, epoch, batch)
        if rc < 0:
            raise self._error(h, rc, "seek to epoch %d batch %d" % (epoch, batch))
        self._positioned = True

    def _tell(self, h):
        e, b = ctypes.c_int64(), ctypes.c_int64()
        rc = self._lib.rf_loader_tell(h.ptr, ctypes.byref(e), ctypes.byref(b))
        if rc < 0:
            raise self._error(h, rc, "tell")
        return e.value, b.value

    def _next_lease(self, h):
        """The next batch as a _Lease, or None at the end of the epoch."""
        lib = self._lib
        out = ctypes.c_void_p()
        next_stream = getattr(self._output, "next_stream", None)
        while True:
            stream = next_stream() if next_stream else None
            if stream is not None:  # CUDA, copy_mode "ring": onto the device buffers
                rc = lib.rf_loader_next_device_wait(h.ptr, stream, ctypes.byref(out), _WAIT_MS)
            else:
                rc = lib.rf_loader_next_wait(h.ptr, ctypes.byref(out), _WAIT_MS)
            if rc == RF_OK:
                return _Lease(h, out.value)
            if rc == RF_AGAIN:
                continue
            if rc == RF_END_OF_EPOCH:
                return None
            if self._handle is not h:
                raise RingfeedError("ringfeed: the loader was closed while waiting for a batch", rc)
            raise self._error(h, rc, "next")

    def _wrap(self, h, lease, with_indices):
        lib = self._lib
        b = lease.batch
        count = int(lib.rf_batch_count(b))
        index = int(lib.rf_batch_index(b))
        labels = np.ctypeslib.as_array(lib.rf_batch_labels(b), shape=(count,)).copy() \
            if count else np.empty(0, np.int64)
        indices = None
        if with_indices:
            indices = np.ctypeslib.as_array(lib.rf_batch_samples(b), shape=(count,)).copy() \
                if count else np.empty(0, np.int64)
        nbytes = count * self._sample_bytes
        shape = (count,) + self._sample_shape
        deliver = getattr(self._output, "deliver", None)
        if deliver is not None:  # CUDA: copied into torch's tensors, released at once
            images, dlabels, rc = deliver(lib, lease, count, nbytes, shape,
                                          self._dtype if self._records else np.uint8,
                                          self._records)
            del lease
            if rc < 0:
                raise self._error(h, rc, "copy to %s" % self._device)
            out = (images,) if self._records else (images, dlabels)
            if with_indices:
                out = out + (self._output.torch.from_numpy(indices),)
            return out[0] if self._records and not with_indices else out
        # Copy when a zero-copy view could starve the ring (the caller holds
        # prefetch - 1 batches besides this one), and for the epoch's last
        # batch, which the loop variable still holds when the next epoch is
        # positioned.
        held = h.outstanding() - 1
        dtype = self._dtype if self._records else np.uint8
        if count == 0:
            images = np.empty(shape, dtype)
            lease.release()
        elif held >= self._prefetch - 1 or index == self._num_batches - 1:
            images = np.array(_view(None, lib.rf_batch_data(b), nbytes)).view(dtype).reshape(shape)
            lease.release()
        else:
            images = _view(lease, lib.rf_batch_data(b), nbytes).view(dtype).reshape(shape)
        del lease
        if self._records:
            # Records are label-less: the data alone (with the indices when asked).
            wrap_data = getattr(self._output, "wrap_data", None)
            out = (wrap_data(images) if wrap_data else self._output.wrap(images, labels)[0],)
        else:
            out = self._output.wrap(images, labels)
        if with_indices:
            idx = self._output.torch.from_numpy(indices) if self._output.torch is not None else indices
            return out + (idx,)
        return out[0] if self._records else out

    def _iterate(self, generation, with_indices):
        while True:
            if self._generation != generation:
                raise RingfeedError("ringfeed: this iterator was invalidated: the loader was "
                                    "repositioned (set_epoch, load_state_dict, a new iteration) "
                                    "or closed", RF_E_STATE)
            h = self._live()
            lease = self._next_lease(h)
            if lease is None:
                return
            # No explicit release on error: a view may already hold the lease;
            # it is released when the last reference dies.
            batch = self._wrap(h, lease, with_indices)
            del lease, h
            yield batch

    def _start_iteration(self, with_indices):
        h = self._live()
        if not self._positioned:
            epoch, _ = self._tell(h)
            self._reposition(epoch, 0)
        self._positioned = False
        self._generation += 1
        return self._iterate(self._generation, with_indices)

    # -- public surface ----------------------------------------------------

    def __iter__(self):
        """Batches of the current epoch: (images, labels); for records, data."""
        return self._start_iteration(False)

    def iter_with_indices(self):
        """As iter(loader), yielding (images, labels, sample_indices) (for
        records, (data, sample_indices)); the indices (int64 [B]) point into
        the source's index (sample_path)."""
        return self._start_iteration(True)

    def __len__(self):
        """Batches per epoch for this rank."""
        return self._num_batches

    def set_epoch(self, epoch):
        """Positions the loader at batch 0 of `epoch`; the next iteration starts there."""
        epoch = _int("epoch", epoch)
        if epoch < 0:
            raise ValueError("ringfeed: epoch must be >= 0, got %d" % epoch)
        self._reposition(epoch, 0)

    @property
    def epoch(self):
        return self._tell(self._live())[0]

    @property
    def num_samples(self):
        """Samples in the source's index (all ranks)."""
        return self._num_samples

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def image_size(self):
        return self._image_size

    @property
    def dtype(self):
        """Element type of the batches: numpy uint8 for images, the records' dtype."""
        return self._dtype if self._records else np.dtype(np.uint8)

    @property
    def layout(self):
        return self._layout

    @property
    def device(self):
        return self._device

    def sample_path(self, index):
        """Path of the sample with global index `index`."""
        h = self._live()
        p = self._lib.rf_loader_sample_path(h.ptr, _int("index", index))
        if p is None:
            raise IndexError("ringfeed: no sample %d" % index)
        return os.fsdecode(p)

    def sample_label(self, index):
        """Label of the sample with global index `index`."""
        h = self._live()
        v = self._lib.rf_loader_sample_label(h.ptr, _int("index", index))
        if v < 0 and not 0 <= index < self._num_samples:
            raise IndexError("ringfeed: no sample %d" % index)
        return int(v)

    def stats(self):
        """The loader's statistics as a dict (see rf_loader_stats_json)."""
        h = self._live()
        cap = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = self._lib.rf_loader_stats_json(h.ptr, buf, cap)
            if n < 0:
                raise self._error(h, n, "stats")
            if n < cap:
                return json.loads(buf.raw[:n].decode("utf-8", "replace"))
            cap = n + 1

    def state_dict(self):
        """Position and identity of the run: plain ints, JSON-serialisable."""
        h = self._live()
        epoch, batch = self._tell(h)
        return {
            "version": _STATE_VERSION,
            "seed": self._seed,
            "epoch": epoch,
            "batch": batch,
            "world_size": self._world_size,
            "rank": self._rank,
            "num_samples": self._num_samples,
            "batch_size": self._batch_size,
        }

    def load_state_dict(self, state):
        """Resumes exactly where state_dict() was taken (any num_workers)."""
        self._live()
        try:
            version = state["version"]
        except (TypeError, KeyError):
            raise ValueError("ringfeed: not a ringfeed state dict: %r" % (state,)) from None
        if version != _STATE_VERSION:
            raise ValueError("ringfeed: state dict version %r is not supported (expected %d)"
                             % (version, _STATE_VERSION))
        mine = {"seed": self._seed, "world_size": self._world_size,
                "num_samples": self._num_samples, "batch_size": self._batch_size}
        for k, v in mine.items():
            if k not in state:
                raise ValueError("ringfeed: state dict lacks %r" % k)
            if state[k] != v:
                raise ValueError("ringfeed: state dict has %s=%r but this loader has %s=%r"
                                 % (k, state[k], k, v))
        for k in ("epoch", "batch"):
            if k not in state:
                raise ValueError("ringfeed: state dict lacks %r" % k)
        epoch, batch = _int("epoch", state["epoch"]), _int("batch", state["batch"])
        if epoch < 0 or not 0 <= batch <= self._num_batches:
            raise ValueError("ringfeed: state dict position epoch=%d batch=%d is out of range "
                             "(%d batches per epoch)" % (epoch, batch, self._num_batches))
        self._reposition(epoch, batch)

    def close(self):
        """Stops the loader. Batches already handed out stay valid; the native
        loader is freed when the last of them dies. Idempotent."""
        h, self._handle = getattr(self, "_handle", None), None
        self._closed = True
        if h is None:
            return
        self._generation += 1
        try:
            h.stop()  # no-op in a forked child
        except Exception:
            pass

    @property
    def closed(self):
        return self._handle is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return ("ringfeed.Loader(%r, batch_size=%d, image_size=%d, layout=%r, device=%r%s)"
                % (self._source_str, self._batch_size, self._image_size, self._layout,
                   self._device, ", closed" if self.closed else ""))
