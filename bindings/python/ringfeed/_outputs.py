"""Where batches go: a lent batch becomes numpy arrays, torch tensors, or
CUDA tensors.

On the CPU a batch is a zero-copy view of the library's ring slot: the
array's base chain holds the _Lease, so the slot goes back to the library
only when the last array or tensor that looks at it dies. So that a caller
who keeps batches cannot starve the ring, a batch is copied (and its slot
returned at once) whenever prefetch - 1 batches are already held, and the
last batch of an epoch is always a copy (the loop variable still holds it
when the next epoch is positioned).

On CUDA the batch is copied into tensors from torch's allocator and released
at once (see _CudaOutput).
"""

import ctypes
import dataclasses

import numpy as np

from ._errors import RingfeedError
from ._lib import RF_E_NO_DEVICE, RF_OK
from ._normalize import normalize

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


def _view(lease, ptr, nbytes):
    """uint8 numpy array over nbytes at ptr that keeps `lease` alive."""
    buf = (ctypes.c_uint8 * nbytes).from_address(ptr)
    buf._rf_lease = lease  # the array's base chain holds buf, buf holds the lease
    return np.frombuffer(buf, dtype=np.uint8)


def _int64s(ptr, count):
    """A copy of count int64 values at ptr (labels, sample indices)."""
    return np.ctypeslib.as_array(ptr, shape=(count,)).copy() if count else np.empty(0, np.int64)


def _sources(lib, b, count):
    """Each sample's source number (int64 [count]): rf_batch_sources, 0
    for a loader of one source (which has no such array)."""
    p = lib.rf_batch_sources(b)
    if not p or not count:
        return np.zeros(count, np.int64)
    return np.ctypeslib.as_array(p, shape=(count,)).astype(np.int64)


def _fields(lib, b, count, names):
    """The extra members of each of the batch's count samples: a list of
    dicts {ext: bytes} (copies; a member the sample lacks is absent)."""
    n = ctypes.c_size_t()
    keys = [(name, name.encode("utf-8")) for name in names]
    out = []
    for i in range(count):
        d = {}
        for name, key in keys:
            p = lib.rf_batch_field(b, i, key, ctypes.byref(n))
            if p is not None:
                d[name] = ctypes.string_at(p, n.value)
        out.append(d)
    return out


@dataclasses.dataclass
class BatchForm:
    """What a loader's batches look like: element dtype, the shape and bytes
    of one sample, whether they are label-less records, whether they carry
    labels and which extra members; and what decides a copy on the CPU
    (prefetch, batches per epoch)."""

    dtype: np.dtype
    sample_shape: tuple
    sample_bytes: int
    records: bool
    prefetch: int
    num_batches: int
    labeled: bool = True
    extras: tuple = ()
    # "bfloat16": the uint16 bits become torch.bfloat16 tensors; None: dtype's own
    torch_dtype: str = None
    # (mean, std, dtype name, layout): uint8 batches normalised on their
    # device after the copy (_normalize.py); None: as they are
    normalize: tuple = None
    # shaped: each batch has a shape of its own (aspect-ratio buckets:
    # rf_batch_shape); framed: letterbox or native sizes, whose batches carry
    # each picture's size and scale; native: pictures at their own size in
    # max_side frames, handed out as a list (or, pad, one tensor cut to the
    # batch's largest)
    shaped: bool = False
    framed: bool = False
    native: bool = False
    pad: bool = False
    layout: str = "NHWC"
    sources: bool = False  # return_source: each sample's source (int64 [B]) after labels

    def __post_init__(self):
        self.labeled = self.labeled and not self.records  # records carry no labels
        self.extras = tuple(self.extras)


class _Output:
    torch = None  # the torch module when batches are tensors

    def batch(self, h, lease, form, with_indices):
        """The lent batch as (images, labels), images alone (unlabeled tar
        shards) or, for records, data alone; form.sources adds each
        sample's source (int64 [B]) after them, extras the list of each
        sample's {ext: bytes}, with_indices the sample indices (int64 [B])
        at the end."""
        lib = h.lib
        b = lease.batch
        count = int(lib.rf_batch_count(b))
        labels = _int64s(lib.rf_batch_labels(b), count) if form.labeled else None
        indices = _int64s(lib.rf_batch_samples(b), count) if with_indices else None
        sources = _sources(lib, b, count) if form.sources else None
        # before _arrays, which may release the lease
        extras = _fields(lib, b, count, form.extras) if form.extras else None
        shape = form.sample_shape
        if form.shaped:  # this batch's bucket
            hh, ww = ctypes.c_int(), ctypes.c_int()
            lib.rf_batch_shape(b, ctypes.byref(hh), ctypes.byref(ww))
            shape = (3, hh.value, ww.value) if form.layout == "NCHW" else (hh.value, ww.value, 3)
        sizes = scales = None
        if form.framed:
            sizes = np.ctypeslib.as_array(lib.rf_batch_sizes(b), shape=(count, 2)).copy() \
                if count else np.empty((0, 2), np.int32)
            scales = np.ctypeslib.as_array(lib.rf_batch_scales(b), shape=(count,)).copy() \
                if count else np.empty(0, np.float32)
        out = self._arrays(h, lease, count, (count,) + shape, labels, form)
        if form.native:
            out = (self._native(out[0], sizes, form),) + out[1:]
        if not form.labeled:  # records, unlabeled shards: the images (data) alone
            out = out[:1]
        if sources is not None:
            out += (self.torch.from_numpy(sources) if self.torch is not None else sources,)
        if extras is not None:
            out += (extras,)
        if form.framed:
            out += (self._small(sizes), self._small(scales))
        if with_indices:
            out += (self.torch.from_numpy(indices) if self.torch is not None else indices,)
        return out[0] if len(out) == 1 else out

    def _arrays(self, h, lease, count, shape, labels, form):
        """(images, labels) of the batch; releases the lease or hands it to
        the arrays."""
        raise NotImplementedError

    def _small(self, arr):
        """A small per-sample array (sizes, scales) as the batch's other
        arrays are: numpy, a tensor, or a tensor on the batch's device."""
        if self.torch is None:
            return arr
        t = self.torch.from_numpy(arr)
        device = getattr(self, "device", None)
        return t.to(device) if device is not None else t

    @staticmethod
    def _native(images, sizes, form):
        """Native sizes: the batch's frames as one tensor cut to the largest
        picture (pad) or as a list of each picture's own view."""
        nchw = form.layout == "NCHW"
        if form.pad:
            mh = int(sizes[:, 0].max()) if len(sizes) else 0
            mw = int(sizes[:, 1].max()) if len(sizes) else 0
            return images[:, :, :mh, :mw] if nchw else images[:, :mh, :mw]
        return [images[i, :, :hh, :ww] if nchw else images[i, :hh, :ww]
                for i, (hh, ww) in enumerate(sizes.tolist())]


class _CpuOutput(_Output):
    """Hands out host arrays: torch tensors (sharing memory) or numpy arrays."""

    index = -1  # the device: none

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

    def _arrays(self, h, lease, count, shape, labels, form):
        lib = h.lib
        b = lease.batch
        nbytes = int(np.prod(shape)) * form.dtype.itemsize
        # Copy when a zero-copy view could starve the ring (the caller holds
        # prefetch - 1 batches besides this one), and for the epoch's last
        # batch, which the loop variable still holds when the next epoch is
        # positioned.
        held = h.outstanding() - 1
        if count == 0:
            images = np.empty(shape, form.dtype)
            lease.release()
        elif held >= form.prefetch - 1 or int(lib.rf_batch_index(b)) == form.num_batches - 1:
            images = np.array(_view(None, lib.rf_batch_data(b), nbytes))
            images = images.view(form.dtype).reshape(shape)
            lease.release()
        else:
            images = _view(lease, lib.rf_batch_data(b), nbytes).view(form.dtype).reshape(shape)
        torch = self.torch
        if torch is None:
            return images, labels
        if form.records:
            return self._data_tensor(images), None
        if form.torch_dtype == "bfloat16":  # numpy has no bfloat16: the bits, viewed
            t = torch.from_numpy(images.view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(images)
        return t, None if labels is None else torch.from_numpy(labels)

    def _data_tensor(self, data):
        """Record data as a tensor. torch before 2.3 has no uint16: such data
        come as int32 tensors there (a copy; the values are kept)."""
        try:
            return self.torch.from_numpy(data)
        except TypeError:
            return self.torch.from_numpy(data.astype(np.int32))


def _device_dtype(torch, images, dtype):
    """The uint8 device tensor `images` as `dtype` (a numpy dtype). torch before
    2.3 has no uint16: such data come as int32 there (the values kept), as on
    the CPU (_CpuOutput._data_tensor)."""
    t = getattr(torch, dtype.name, None)
    if t is not None:
        return images.view(t)
    if dtype.name == "uint16":
        return images.view(torch.int16).to(torch.int32) & 0xFFFF
    raise TypeError("ringfeed: torch %s has no %s" % (torch.__version__, dtype.name))


class _CudaOutput(_Output):
    """Hands out CUDA torch tensors on device `index` (None: torch's current
    device, torch.cuda.current_device(), as torch's own "cuda" means; a DDP
    rank that called torch.cuda.set_device(local_rank) gets its own GPU),
    ready on torch.cuda.current_stream(device) at the time the batch was
    asked for.

    torch.cuda.init() runs first, before the library makes its context: torch
    then knows CUDA is initialised in this process (its fork guard refuses
    CUDA in a forked child, which would otherwise hang or crash), and its CUDA
    runtime is loaded, so the library finds and shares it.

    The tensors come from torch's allocator (torch.empty), and the library
    copies into their data_ptr() on the current stream (rf_batch_copy_to);
    the batch is then released at once, and its ring slot is refilled only
    after the copy completed (enforced in C). So a tensor never changes under
    its user, whatever the user keeps. copy_mode "ring" (the default): the
    batch first goes to one of the loader's device buffers on the library's
    own copy stream (rf_loader_next_device), overlapping the work already
    queued on the current stream, then a device-to-device copy fills the
    tensors (a slot without a device buffer, the device having been out of
    memory, is copied as "direct"); "direct": one host-to-device copy into the
    tensors, ordered after the work already queued on the current stream (as
    .cuda(non_blocking=True)).
    """

    def __init__(self, index, output, copy_mode):
        where = "cuda" if index is None else "cuda:%d" % index
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
                                  ", no usable GPU or driver"), RF_E_NO_DEVICE)
        torch.cuda.init()
        if index is None:
            index = torch.cuda.current_device()
            where = "cuda:%d" % index
        n = torch.cuda.device_count()
        if not 0 <= index < n:
            raise ValueError("ringfeed: device=%r but torch sees %d CUDA device%s"
                             % (where, n, "" if n == 1 else "s"))
        self.torch = torch
        self.index = index
        self.where = where
        self.device = torch.device("cuda", index)
        self.ring = copy_mode == "ring"

    def stream(self):
        """The current stream of the loader's device, as an integer (cudaStream_t)."""
        return self.torch.cuda.current_stream(self.device).cuda_stream

    def next_stream(self):
        """Stream for rf_loader_next_device, or None to take host batches."""
        return self.stream() if self.ring else None

    def _arrays(self, h, lease, count, shape, labels, form):
        torch = self.torch
        nbytes = int(np.prod(shape)) * form.dtype.itemsize  # this batch's (buckets: its own)
        images = torch.empty((nbytes,), dtype=torch.uint8, device=self.device)
        dlabels = None if not form.labeled else torch.empty((count,), dtype=torch.int64,
                                                            device=self.device)
        rc = RF_OK
        if count:
            rc = h.lib.rf_batch_copy_to(lease.batch, images.data_ptr(),
                                        dlabels.data_ptr() if dlabels is not None else None,
                                        self.stream())
        lease.release()  # the slot waits in C for the copy; the tensors are torch's
        if rc < 0:
            raise h.error(rc, "copy to %s" % self.where)
        images = _device_dtype(torch, images, form.dtype).reshape(shape)
        if form.normalize is not None:
            # queued on the current stream, after the copy (_normalize.py)
            mean, std, dtype, layout = form.normalize
            images = normalize(images, mean, std, dtype, layout, torch)
        return images, dlabels


def make_output(kind, index, output, copy_mode="ring"):
    """The output for a parsed device ('cpu' or 'cuda', index or None); its
    .index is the device it chose (-1: the CPU)."""
    if kind == "cpu":
        return _CpuOutput(output)
    return _CudaOutput(index, output, copy_mode)
