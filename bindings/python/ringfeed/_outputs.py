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

import numpy as np

from ._errors import RingfeedError
from ._lib import RF_E_NO_DEVICE, RF_OK

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


class BatchForm:
    """What a loader's batches look like: element dtype, the shape and bytes
    of one sample, whether they are label-less records, whether they carry
    labels and which extra members; and what decides a copy on the CPU
    (prefetch, batches per epoch)."""

    __slots__ = ("dtype", "sample_shape", "sample_bytes", "records", "prefetch", "num_batches",
                 "labeled", "extras", "sources")

    def __init__(self, dtype, sample_shape, sample_bytes, records, prefetch, num_batches,
                 labeled=True, extras=(), sources=False):
        self.dtype = dtype
        self.sample_shape = sample_shape
        self.sample_bytes = sample_bytes
        self.records = records
        self.prefetch = prefetch
        self.num_batches = num_batches
        self.labeled = labeled and not records
        self.extras = tuple(extras)
        self.sources = sources  # return_source: each sample's source (int64 [B]) after labels


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
        out = self._arrays(h, lease, count, (count,) + form.sample_shape, labels, form)
        if not form.labeled:  # records, unlabeled shards: the images (data) alone
            out = out[:1]
        if sources is not None:
            out += (self.torch.from_numpy(sources) if self.torch is not None else sources,)
        if extras is not None:
            out += (extras,)
        if with_indices:
            out += (self.torch.from_numpy(indices) if self.torch is not None else indices,)
        return out[0] if len(out) == 1 else out

    def _arrays(self, h, lease, count, shape, labels, form):
        """(images, labels) of the batch; releases the lease or hands it to
        the arrays."""
        raise NotImplementedError


class _CpuOutput(_Output):
    """Hands out host arrays: torch tensors (sharing memory) or numpy arrays."""

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
        nbytes = count * form.sample_bytes
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
        if labels is None:
            return torch.from_numpy(images), None
        return torch.from_numpy(images), torch.from_numpy(labels)

    def _data_tensor(self, data):
        """Record data as a tensor. torch before 2.3 has no uint16: such data
        come as int32 tensors there (a copy; the values are kept)."""
        try:
            return self.torch.from_numpy(data)
        except TypeError:
            return self.torch.from_numpy(data.astype(np.int32))


class _CudaOutput(_Output):
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
                                  ", no usable GPU or driver"), RF_E_NO_DEVICE)
        n = torch.cuda.device_count()
        if not 0 <= index < n:
            raise ValueError("ringfeed: device=%r but torch sees %d CUDA device%s"
                             % (where, n, "" if n == 1 else "s"))
        self.torch = torch
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
        images = torch.empty((count * form.sample_bytes,), dtype=torch.uint8, device=self.device)
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
        return images.view(getattr(torch, form.dtype.name)).reshape(shape), dlabels


def make_output(kind, index, output, copy_mode="ring"):
    """The output for a parsed device ('cpu' or 'cuda', index)."""
    if kind == "cpu":
        return _CpuOutput(output)
    return _CudaOutput(index, output, copy_mode)
