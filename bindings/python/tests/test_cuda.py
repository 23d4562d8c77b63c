"""device="cuda": CUDA tensors from the CUDA copier, and what the binding says
when there is no CUDA. The device tests skip without a GPU (torch with CUDA
and a libringfeed that sees a device); the rest run everywhere."""

import ctypes
import json
import os
import subprocess
import sys
import textwrap

import pytest

import ringfeed
from ringfeed import _lib

try:
    import torch
except Exception:  # pragma: no cover - torch is optional
    torch = None


def lib():
    return _lib.load()


def native_devices():
    return lib().rf_cuda_device_count()


HAVE_CUDA = (torch is not None and torch.cuda.is_available() and native_devices() > 0)
need_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device (torch.cuda.is_available() "
                               "and rf_cuda_device_count() > 0 needed)")

OPTS = dict(image_size=48, batch_size=8, num_workers=2, transform="random_resized_crop",
            seed=5, prefetch=3)


def make(src, **kw):
    o = dict(OPTS)
    o.update(kw)
    return ringfeed.Loader(src, **o)


# -------------------------------------------------------- everywhere

def test_cuda_entry_points_are_bound():
    l = lib()
    for name in ("rf_cuda_device_count", "rf_loader_next_device", "rf_loader_next_device_wait",
                 "rf_batch_device_data", "rf_batch_device_labels", "rf_batch_copy_to"):
        assert getattr(l, name) is not None
    assert native_devices() >= 0


@pytest.mark.parametrize("pin", [True, False])
def test_cpu_loader_memory_is_pageable_and_says_why(folder, pin):
    with make(folder, pin_memory=pin, output="numpy") as loader:
        st = loader.stats()
        assert st["memory"]["mode"] == "pageable"
        assert "device=cpu" in st["memory"]["note"]
        assert st["device"] == "cpu"
        assert st["cuda"]["available"] is False
        assert isinstance(st["cuda"]["built"], bool)
        assert st["cuda"]["requested_device"] == -1


def test_native_without_device_is_a_state_error(folder):
    """A loader asked for device 0 on a machine without one runs on the CPU;
    the device calls say RF_E_NO_DEVICE and why."""
    if native_devices() > 0:
        pytest.skip("this machine has a CUDA device")
    l = lib()
    ptr = l.rf_loader_create(folder.encode())
    try:
        assert l.rf_loader_set_param(ptr, _lib.RF_P_DEVICE, 0) == 0
        assert l.rf_loader_set_param(ptr, _lib.RF_P_NUM_WORKERS, 1) == 0
        assert l.rf_loader_set_param(ptr, _lib.RF_P_IMAGE_SIZE, 32) == 0
        assert l.rf_loader_start(ptr) == 0
        b = ctypes.c_void_p()
        assert l.rf_loader_next_device(ptr, None, ctypes.byref(b)) == _lib.RF_E_NO_DEVICE
        msg = l.rf_loader_errmsg(ptr).decode()
        assert "no CUDA" in msg, msg
        buf = ctypes.create_string_buffer(1 << 16)
        n = l.rf_loader_stats_json(ptr, buf, len(buf))
        st = json.loads(buf.raw[:n].decode())
        assert st["cuda"]["available"] is False
        assert st["cuda"]["requested_device"] == 0
        reason = st["cuda"]["reason"]
        if st["cuda"]["built"]:
            # which runtime and why no device, or every runtime that was tried
            assert (("cudart " in reason and "no CUDA device" in reason)
                    or "no CUDA runtime: tried libcudart.so" in reason), reason
        else:
            assert "built without" in reason, reason
        assert st["memory"]["mode"] == "pageable"
        assert st["device"] == "cpu"
        assert l.rf_loader_next(ptr, ctypes.byref(b)) == 0
        assert l.rf_batch_device_data(b) is None
        assert l.rf_batch_copy_to(b, None, None, None) == _lib.RF_E_NO_DEVICE
        l.rf_batch_release(b)
    finally:
        l.rf_loader_destroy(ptr)


def test_cuda_without_cuda_is_a_clear_error(folder):
    if HAVE_CUDA:
        pytest.skip("this machine has CUDA")
    if torch is None:
        with pytest.raises(ImportError, match="needs torch with CUDA"):
            make(folder, device="cuda")
    elif not torch.cuda.is_available():
        with pytest.raises(ringfeed.RingfeedError,
                           match=r"torch.cuda.is_available\(\) is False") as ei:
            make(folder, device="cuda:0")
        assert ei.value.status == _lib.RF_E_NO_DEVICE
    else:  # torch sees a GPU, the library does not
        with pytest.raises(ringfeed.RingfeedError, match="has no CUDA device"):
            make(folder, device="cuda")


def run_python(code):
    """Runs code in a fresh interpreter (this test environment: RINGFEED_LIBRARY,
    PYTHONPATH); returns its stdout."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


MAPPED_CUDART = """
def mapped_cudart():
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f
                       if "/" in line and line.split()[-1].rsplit("/", 1)[-1].startswith("libcudart")})
"""


def test_loading_the_library_does_not_load_cudart():
    """libringfeed does not link the CUDA runtime: loading it maps no libcudart;
    rf_cuda_device_count() may load one (then the only one in the process)."""
    out = run_python(MAPPED_CUDART + """
from ringfeed import _lib
lib = _lib.load()
assert mapped_cudart() == [], mapped_cudart()
n = lib.rf_cuda_device_count()
assert n >= 0
assert len(mapped_cudart()) <= 1, mapped_cudart()
print("ok", n, mapped_cudart())
""")
    assert out.startswith("ok"), out


def test_uses_the_cuda_runtime_torch_loaded():
    """After `import torch`, the library uses the libcudart torch brought in
    (found in the process), not a second runtime."""
    if torch is None or torch.version.cuda is None:
        pytest.skip("needs torch built with CUDA")
    out = run_python(MAPPED_CUDART + """
import torch
torch_rt = mapped_cudart()
if len(torch_rt) != 1:
    print("skip: torch did not load exactly one shared libcudart:", torch_rt)
    raise SystemExit(0)
from ringfeed import _lib
_lib.load().rf_cuda_device_count()
assert mapped_cudart() == torch_rt, (mapped_cudart(), torch_rt)
print("ok", torch_rt[0])
""")
    if out.startswith("skip:"):
        pytest.skip(out.strip())
    assert out.startswith("ok"), out


def test_cuda_option_errors(folder):
    with pytest.raises(ValueError, match="bad device"):
        make(folder, device="cuda:x")
    with pytest.raises(ValueError, match="output='numpy'"):
        make(folder, device="cuda", output="numpy")
    with pytest.raises(ValueError, match="copy_mode"):
        make(folder, device="cuda", copy_mode="teleport")


# -------------------------------------------------------- on a GPU

def cpu_epochs(folder, epochs, **kw):
    out = []
    with make(folder, device="cpu", output="torch", **kw) as loader:
        for e in range(epochs):
            loader.set_epoch(e)
            out.append([(i.clone(), l.clone()) for i, l in loader])
    return out


@need_cuda
@pytest.mark.parametrize("copy_mode", ["ring", "direct"])
@pytest.mark.parametrize("pin", [True, False])
def test_device_tensors_equal_cpu_output(folder, copy_mode, pin):
    ref = cpu_epochs(folder, 2)
    with make(folder, device="cuda", pin_memory=pin, copy_mode=copy_mode) as loader:
        for e in range(2):
            loader.set_epoch(e)
            got = list(loader)  # all kept: tensors never change under their user
            assert len(got) == len(ref[e])
            for (gi, gl), (ri, rl) in zip(got, ref[e]):
                assert gi.is_cuda and gl.is_cuda
                assert gi.device == torch.device("cuda", 0)
                assert gi.dtype == torch.uint8 and gl.dtype == torch.int64
                assert gi.shape == ri.shape
                assert torch.equal(gi.cpu(), ri), "images differ from the CPU loader's"
                assert torch.equal(gl.cpu(), rl)
        st = loader.stats()
        assert st["memory"]["mode"] == ("pinned" if pin else "pageable")
        if not pin:
            assert "pin_memory=0" in st["memory"]["note"]
        assert st["device"] == "cuda:0"
        assert st["cuda"]["available"] is True
        assert st["cuda"]["copies"] >= len(ref[0]) * 2
        assert st["cuda"]["errors"] == 0, st["cuda"]["last_error"]


@need_cuda
@pytest.mark.parametrize("copy_mode", ["ring", "direct"])
def test_ready_on_current_stream_while_it_is_busy(folder, copy_mode):
    """Batches are consumed on a side stream that is kept busy (torch.cuda._sleep)
    before each batch: the data must be complete for work ordered after it on
    that stream, with no host synchronisation by the caller."""
    ref = cpu_epochs(folder, 1)
    s = torch.cuda.Stream()
    sums = []
    with make(folder, device="cuda", copy_mode=copy_mode) as loader, torch.cuda.stream(s):
        assert torch.cuda.current_stream() == s
        it = iter(loader)
        while True:
            torch.cuda._sleep(2_000_000)  # ~1 ms of GPU time on the current stream
            try:
                images, labels = next(it)
            except StopIteration:
                break
            sums.append((images.to(torch.int64).sum(), labels.sum()))
    s.synchronize()
    assert len(sums) == len(ref[0])
    for (si, sl), (ri, rl) in zip(sums, ref[0]):
        assert int(si) == int(ri.to(torch.int64).sum())
        assert int(sl) == int(rl.sum())


@need_cuda
def test_layout_nchw_and_indices(folder):
    with make(folder, device="cpu", output="torch", layout="NCHW") as cpu:
        ref = [(i.clone(), l.clone(), x.clone()) for i, l, x in cpu.iter_with_indices()]
    with make(folder, device="cuda", layout="NCHW") as loader:
        got = list(loader.iter_with_indices())
    for (gi, gl, gx), (ri, rl, rx) in zip(got, ref):
        assert gi.shape == ri.shape and gi.shape[1] == 3
        assert torch.equal(gi.cpu(), ri) and torch.equal(gl.cpu(), rl)
        assert not gx.is_cuda and torch.equal(gx, rx)


@need_cuda
def test_resume_and_epochs_on_device(folder):
    with make(folder, device="cpu", output="torch") as cpu:
        cpu.set_epoch(3)
        ref = [(i.clone(), l.clone()) for i, l in cpu]
    with make(folder, device="cuda") as loader:
        loader.set_epoch(3)
        it = iter(loader)
        first = next(it)
        state = loader.state_dict()
    with make(folder, device="cuda") as again:
        again.load_state_dict(state)
        rest = list(again)
    got = [first] + rest
    assert len(got) == len(ref)
    for (gi, gl), (ri, rl) in zip(got, ref):
        assert torch.equal(gi.cpu(), ri) and torch.equal(gl.cpu(), rl)
