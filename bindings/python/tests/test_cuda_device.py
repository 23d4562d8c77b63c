"""device="cuda" and torch, without a GPU: which device a bare "cuda" is,
torch's CUDA initialised before the library makes a context, and uint16
records on the device with a torch before 2.3.

The device selection runs in a fresh interpreter on the stand-in CUDA runtime
(tests/fake_cudart.c, named by RINGFEED_TEST_FAKE_CUDART: CTest's python test
sets it) with two devices, and a torch whose CUDA face is replaced by one that
says what a DDP rank's torch says after torch.cuda.set_device(1): the loader's
batches must go to device 1, and torch.cuda.init() must have run before the
library made any context (torch's fork guard knows CUDA is in use only if it
initialised it)."""

import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

try:
    import torch
except Exception:  # pragma: no cover - torch is optional
    torch = None

from ringfeed import _outputs

FAKE = os.environ.get("RINGFEED_TEST_FAKE_CUDART")


def run_python(code, **env):
    e = dict(os.environ)
    e.update(env)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=120, env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


# torch.cuda as a DDP rank's torch has it after set_device(1), on the stand-in.
RANK_TORCH = """
import ctypes, json, os, sys
import torch
fake = ctypes.CDLL(os.environ["RINGFEED_CUDART"])
fake.fake_cudart_get.restype = ctypes.c_longlong
fake.fake_cudart_get.argtypes = [ctypes.c_char_p, ctypes.c_int]
def contexts():
    return [fake.fake_cudart_get(b"contexts", d) for d in range(2)]
events = []
def init():
    events.append(("init", contexts()))
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 2
torch.cuda.current_device = lambda: events.append(("current_device", contexts())) or 1
torch.cuda.init = init
"""


@pytest.mark.skipif(FAKE is None or torch is None,
                    reason="needs the stand-in runtime (RINGFEED_TEST_FAKE_CUDART) and torch")
def test_bare_cuda_is_torchs_current_device_and_torch_initialises_first(folder):
    out = run_python(RANK_TORCH + """
import ringfeed
loader = ringfeed.Loader(sys.argv[1] if len(sys.argv) > 1 else %r, device="cuda",
                         batch_size=4, image_size=32, num_workers=1)
st = loader.stats()
print(json.dumps({"device": loader.device, "stats_device": st["device"],
                  "available": st["cuda"]["available"], "events": events,
                  "contexts": contexts()}))
loader.close()
""" % (folder,), RINGFEED_CUDART=FAKE, FAKE_CUDART_DEVICES="2")
    import json
    d = json.loads(out.strip().splitlines()[-1])
    assert d["available"] is True
    assert d["device"] == "cuda:1"
    assert d["stats_device"] == "cuda:1"
    names = [e[0] for e in d["events"]]
    assert "init" in names, d
    assert names.index("init") < names.index("current_device"), d
    assert d["events"][0][1] == [0, 0], d  # init ran before any context existed
    assert d["contexts"] == [0, 1], d  # the loader's device only


@pytest.mark.skipif(FAKE is None or torch is None,
                    reason="needs the stand-in runtime (RINGFEED_TEST_FAKE_CUDART) and torch")
def test_explicit_index_wins(folder):
    out = run_python(RANK_TORCH + """
import ringfeed
loader = ringfeed.Loader(%r, device="cuda:0", batch_size=4, image_size=32, num_workers=1)
print(loader.device, loader.stats()["device"], [e[0] for e in events])
loader.close()
""" % (folder,), RINGFEED_CUDART=FAKE, FAKE_CUDART_DEVICES="2")
    dev, stats_dev, names = out.strip().split(" ", 2)
    assert dev == "cuda:0" and stats_dev == "cuda:0"
    assert "init" in names and "current_device" not in names


def test_bad_device_strings():
    from ringfeed._options import _parse_device
    assert _parse_device("cuda") == ("cuda", None)
    assert _parse_device("cuda:3") == ("cuda", 3)
    assert _parse_device(None) == ("cpu", -1)
    for bad in ("cuda:-1", "cuda:x", "gpu", "cuda0"):
        with pytest.raises(ValueError):
            _parse_device(bad)


class _Lib:
    """rf_batch_copy_to as the library does it, into host memory here."""

    def __init__(self, data):
        self.data = data

    def rf_batch_copy_to(self, batch, dst, dst_labels, stream):
        ctypes.memmove(dst, self.data.ctypes.data, self.data.nbytes)
        return 0


class _Handle:
    def __init__(self, lib):
        self.lib = lib


class _Lease:
    batch = 1
    released = False

    def release(self):
        self.released = True


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_uint16_records_on_the_device_with_any_torch():
    """_CudaOutput's uint16 records: torch before 2.3 has no torch.uint16; the
    data come as int32 with their values, as on the CPU. The device is the
    CPU here (the view and conversion are the same ops on CUDA)."""
    out = object.__new__(_outputs._CudaOutput)
    out.torch = torch
    out.where = "cuda:0"
    out.device = torch.device("cpu")
    out.index = 0
    out.ring = False
    out.stream = lambda: 0
    data = np.array([[0, 1, 40000, 65535], [7, 65534, 32768, 2]], dtype=np.uint16)
    form = _outputs.BatchForm(np.dtype(np.uint16), (4,), 8, True, 2, 1)
    lease = _Lease()
    images, labels = out._arrays(_Handle(_Lib(data)), lease, 2, (2, 4), None, form)
    assert lease.released and labels is None
    assert tuple(images.shape) == (2, 4)
    assert images.dtype in (getattr(torch, "uint16", None), torch.int32)
    assert images.to(torch.int64).tolist() == data.astype(np.int64).tolist()
