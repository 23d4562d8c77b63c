"""Loader's recipe arguments: augment, dtype with mean and std, sample_fn.

They become calls on the native loader before it starts
(rf_loader_set_augment, rf_loader_set_normalize, rf_loader_set_sample_fn)
and say what the batches hold: the element type (numpy has no bfloat16: its
bits come as uint16 arrays, or torch.bfloat16 tensors) and whether the
normalisation happens on a CUDA device after the copy (_normalize.py), in
which case the library's ring stays uint8.
"""

import ctypes
import numbers

import numpy as np

from . import _lib
from .augment import spec_of

# dtype name -> (numpy dtype of the batch array, torch dtype name)
_FLOATS = {"float32": (np.float32, "float32"), "float16": (np.float16, "float16"),
           "bfloat16": (np.uint16, "bfloat16")}


def _triple(name, v, default):
    if v is None:
        return default
    vals = [float(v)] * 3 if isinstance(v, numbers.Number) else [float(x) for x in v]
    if len(vals) == 1:
        vals *= 3
    if len(vals) != 3:
        raise ValueError("ringfeed: %s must be one number or three (R, G, B), not %r" % (name, v))
    return tuple(vals)


def _python_sample_fn(fn):
    """A ctypes callback running the Python callable fn(pixels, seed, info):
    pixels a writable uint8 array [h, w, 3] over the sample's picture, info
    a dict (sample, epoch, label, worker); a nonzero int or an exception
    fails the sample. It takes the GIL on every sample: the workers run it
    one at a time."""

    def trampoline(user, pixels, h, w, c, stride, seed, info):
        try:
            rows = np.ctypeslib.as_array(pixels, shape=(h, stride))
            arr = rows[:, : w * c].reshape(h, w, c)
            i = _lib.SampleInfo.from_address(info)
            rc = fn(arr, int(seed), {"sample": i.sample, "epoch": i.epoch, "label": i.label,
                                     "worker": i.worker})
            return int(rc or 0)
        except Exception:  # the sample fails under on_error; the loader goes on
            return -1

    return _lib.SAMPLE_FN(trampoline)


def sample_fn_address(fn):
    """(address, object to keep alive) of a sample_fn: an integer address, a
    Numba @cfunc (its .address), a ctypes function pointer, or a Python
    callable (wrapped; GIL-bound)."""
    if fn is None:
        return None, None
    if isinstance(fn, numbers.Integral) and not isinstance(fn, bool):
        return int(fn), None
    addr = getattr(fn, "address", None)  # numba.core.ccallback.CFunc
    if isinstance(addr, numbers.Integral):
        return int(addr), fn
    if isinstance(fn, ctypes._CFuncPtr):
        return ctypes.cast(fn, ctypes.c_void_p).value, fn
    if callable(fn):
        cb = _python_sample_fn(fn)
        return ctypes.cast(cb, ctypes.c_void_p).value, cb
    raise TypeError("ringfeed: sample_fn must be a C function's address, a Numba @cfunc, a "
                    "ctypes function pointer or a Python callable, not %r" % (fn,))


class Recipe:
    """The recipe options of one Loader. `calls`: (setter, argument or tuple)
    for _handle.open; `c_dtype`: RF_P_DTYPE's value for pictures; `np_dtype`,
    `torch_dtype`: the batches' element; `device_normalize`: normalise after
    the copy on the CUDA device."""

    def __init__(self, augment, dtype, mean, std, sample_fn, device_kind):
        self.spec = spec_of(augment)
        self.dtype = dtype
        float_out = dtype in _FLOATS
        if not float_out and (mean is not None or std is not None):
            raise ValueError("ringfeed: mean and std normalise a float output: give dtype="
                             "'float32', 'float16' or 'bfloat16'")
        self.mean = _triple("mean", mean, (0.0, 0.0, 0.0))
        self.std = _triple("std", std, (1.0, 1.0, 1.0))
        self.device_normalize = float_out and device_kind == "cuda"
        self.c_dtype = _lib.DTYPES["uint8" if self.device_normalize else dtype]
        self.np_dtype, self.torch_dtype = _FLOATS.get(dtype, (np.uint8, "uint8"))
        if self.device_normalize:
            self.np_dtype = np.uint8  # the ring's; torch_dtype is what the batches become
        self.calls = []
        if self.spec:
            self.calls.append(("rf_loader_set_augment", self.spec.encode("utf-8")))
        if float_out:
            d3 = ctypes.c_double * 3
            self.calls.append(("rf_loader_set_normalize", (d3(*self.mean), d3(*self.std))))
        addr, self.keep = sample_fn_address(sample_fn)
        if addr is not None:
            self.calls.append(("rf_loader_set_sample_fn", (ctypes.c_void_p(addr), None)))
