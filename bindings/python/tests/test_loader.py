"""End-to-end tests of the Python binding (ringfeed.Loader) over real JPEG folders."""

import ctypes
import gc
import json
import math
import os
import re

import numpy as np
import pytest

import ringfeed
from rfhelpers import (as_numpy, batch_digest, epoch_digests, gen_folder, imagefolder_samples,
                       pil_folder, psnr, reference_center, run_python, wait_child, write_jpeg)

try:
    import torch
except Exception:  # pragma: no cover - torch is optional
    torch = None


def make(src, **kw):
    kw.setdefault("image_size", 32)
    kw.setdefault("batch_size", 8)
    kw.setdefault("num_workers", 2)
    return ringfeed.Loader(src, **kw)


def resolve(root, p):
    return p if os.path.isabs(p) else os.path.join(root, p)


def is_zero_copy(arr):
    """True when a numpy array is a view of a ring slot (not a copy)."""
    base = arr
    while base is not None:
        if isinstance(base, ctypes.Array):
            return getattr(base, "_rf_lease", None) is not None
        base = getattr(base, "base", None)
    return False


@pytest.fixture(scope="module")
def odd_folder(tmp_path_factory):
    """23 tiny images in 3 classes (23 is not a multiple of 2 or 3)."""
    root = str(tmp_path_factory.mktemp("odd") / "data")
    i = 0
    for c, n in enumerate((8, 8, 7)):
        for k in range(n):
            write_jpeg(os.path.join(root, "c%d" % c, "i%02d.jpg" % k), 40 + i % 5, 36, 500 + i)
            i += 1
    return root


# ----------------------------------------------------------------- basics

def test_library_loads():
    assert os.path.basename(ringfeed.library_path()).startswith("libringfeed")
    # one version: the package's (from include/ringfeed.h) is the loaded library's rf_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", ringfeed.__version__), ringfeed.__version__
    assert ringfeed.library_version() == ringfeed.__version__
    assert issubclass(ringfeed.RingfeedError, RuntimeError)


def test_every_image_once_with_imagefolder_label(folder):
    samples, how = imagefolder_samples(folder)
    n = len(samples)
    assert n == 48, how
    S = 32
    with make(folder, transform="center", image_size=S, batch_size=7, shuffle=True, seed=5,
              output="numpy") as ld:
        assert ld.num_samples == n
        for i, (p, label) in enumerate(samples):
            assert os.path.samefile(resolve(folder, ld.sample_path(i)), p), (i, ld.sample_path(i), p)
            assert ld.sample_label(i) == label
        seen, out = [], {}
        for images, labels, idx in ld.iter_with_indices():
            assert images.shape == (len(idx), S, S, 3)
            for k, s in enumerate(idx.tolist()):
                assert labels[k] == samples[s][1], (s, samples[s])
                out[s] = images[k].copy()
            seen.extend(idx.tolist())
        assert sorted(seen) == list(range(n)), "not every image exactly once"
    # The pixels belong to the file the index names: each output's nearest
    # reference (torchvision's pipeline on that file) is that very file.
    refs = [reference_center(p, S) for p, _ in samples]
    for s, img in out.items():
        scores = [psnr(img, r) for r in refs]
        best = int(np.argmax(scores))
        assert best == s, "sample %d looks like %d (%.1f vs %.1f dB)" % (s, best, scores[best], scores[s])
        assert scores[s] > 28


def test_output_numpy(folder):
    with make(folder, output="numpy", batch_size=5) as ld:
        images, labels = next(iter(ld))
    assert isinstance(images, np.ndarray) and isinstance(labels, np.ndarray)
    assert images.dtype == np.uint8 and images.shape == (5, 32, 32, 3)
    assert labels.dtype == np.int64 and labels.shape == (5,)


@pytest.mark.skipif(torch is None, reason="torch does not import")
def test_output_torch(folder):
    with make(folder, batch_size=5) as ld:  # output="auto": torch when it imports
        images, labels = next(iter(ld))
    assert isinstance(images, torch.Tensor) and isinstance(labels, torch.Tensor)
    assert images.dtype == torch.uint8 and tuple(images.shape) == (5, 32, 32, 3)
    assert labels.dtype == torch.int64 and tuple(labels.shape) == (5,)


def test_output_numpy_when_torch_missing(folder):
    res = run_python("""
        sys.modules["torch"] = None          # import torch -> ImportError
        import ringfeed
        with ringfeed.Loader(sys.argv[1], batch_size=4, image_size=24, num_workers=1) as ld:
            images, labels = next(iter(ld))
            print(json.dumps([type(images).__module__, str(images.dtype), list(images.shape),
                              type(labels).__module__, str(labels.dtype)]))
    """, args=[folder])
    assert res == ["numpy", "uint8", [4, 24, 24, 3], "numpy", "int64"]


def test_layouts_nchw_is_nhwc_transposed(folder):
    kw = dict(transform="random_resized_crop", flip=True, image_size=40, batch_size=8, seed=11,
              output="numpy")
    with make(folder, layout="NHWC", **kw) as a, make(folder, layout="NCHW", **kw) as b:
        assert a.layout == "NHWC" and b.layout == "NCHW"
        nb = 0
        for (ia, la), (ib, lb) in zip(a, b):
            assert ia.shape == (len(la), 40, 40, 3) and ib.shape == (len(lb), 3, 40, 40)
            assert ia.dtype == np.uint8 and ib.dtype == np.uint8
            assert np.array_equal(la, lb)
            assert np.array_equal(ia.transpose(0, 3, 1, 2), ib)
            nb += 1
        assert nb == len(a) == 6


# ------------------------------------------------------------ determinism

DET = dict(transform="random_resized_crop", flip=True, image_size=40, batch_size=8, seed=1234)


def test_determinism_across_workers_and_io_backend(folder):
    ref = None
    for workers in (1, 2, 4):
        with make(folder, num_workers=workers, **DET) as ld:
            got = epoch_digests(ld, 1)
        if ref is None:
            ref = got
        assert got == ref, "num_workers=%d differs" % workers
    assert len(ref) == 6
    res = run_python("""
        import ringfeed, rfhelpers
        kw = json.loads(sys.argv[2])
        with ringfeed.Loader(sys.argv[1], num_workers=3, prefetch=2, **kw) as ld:
            d = rfhelpers.epoch_digests(ld, 1)
            print(json.dumps({"digests": d, "io": ld.stats()["io_backend"]}))
    """, env_extra={"RINGFEED_IO": "pread"}, args=[folder, json.dumps(DET)])
    assert res["io"] == "pread"
    assert res["digests"] == ref, "RINGFEED_IO=pread gives different batches"


def test_different_epochs_differ_same_epoch_repeats(folder):
    with make(folder, **DET) as ld:
        e0 = epoch_digests(ld, 0)
        e1 = epoch_digests(ld, 1)
        e0b = epoch_digests(ld, 0)
    assert e0 == e0b
    assert len(e0) == len(e1)
    assert not set(e0) & set(e1), "epochs 0 and 1 share a batch"


def test_different_seeds_differ(folder):
    with make(folder, **DET) as a, make(folder, **dict(DET, seed=99)) as b:
        assert epoch_digests(a, 0) != epoch_digests(b, 0)


# ------------------------------------------------------------ epoch logic

@pytest.mark.parametrize("bs", [4, 10])
def test_len_and_drop_last(pil_small, bs):
    n = 15
    for drop_last in (False, True):
        with make(pil_small, batch_size=bs, drop_last=drop_last, output="numpy") as ld:
            want = n // bs if drop_last else math.ceil(n / bs)
            assert len(ld) == want
            sizes = [len(l) for _, l in ld]
            assert len(sizes) == want
            assert all(s == bs for s in sizes[:-1])
            if drop_last:
                assert sizes[-1] == bs
            else:
                assert sizes[-1] == n - bs * (want - 1)


def test_set_epoch_mid_epoch_restart(folder):
    with make(folder, **DET) as fresh:
        ref = epoch_digests(fresh, 1)
        ref2, ref4 = epoch_digests(fresh, 2), epoch_digests(fresh, 4)
    with make(folder, **DET) as ld:
        ld.set_epoch(1)
        for k, (images, labels) in enumerate(ld):
            if k == 2:
                break
        # `images` still holds a zero-copy batch: set_epoch must still work,
        # and the held batch must stay intact.
        held = batch_digest(images, labels)
        assert held == ref[2]
        assert epoch_digests(ld, 1) == ref
        assert batch_digest(images, labels) == ref[2]
        del images, labels

        # A second `for` without set_epoch runs the next epoch from batch 0...
        assert [batch_digest(i, l) for i, l in ld] == ref2
        # ...also after a break (epoch 3 left at its batch 3).
        for k, _ in enumerate(ld):
            if k == 3:
                break
        assert [batch_digest(i, l) for i, l in ld] == ref4


def test_reposition_with_a_batch_held_keeps_the_native_loader(folder):
    """rf_loader_seek moves the native loader while batches are lent (they
    stay valid until released): set_epoch keeps the same native loader, the
    held batch stays intact, and the epoch is the reference one."""
    with make(folder, **DET) as fresh:
        ref = epoch_digests(fresh, 1)
    with make(folder, **DET) as ld:
        ld.set_epoch(1)
        it = iter(ld)
        images, labels = next(it)
        assert is_zero_copy(as_numpy(images)) or torch is not None
        old = ld._handle
        assert old.outstanding() >= 1
        ld.set_epoch(1)
        assert ld._handle is old, "the native loader should move, not be replaced"
        assert batch_digest(images, labels) == ref[0]
        assert epoch_digests(ld, 1) == ref
        assert batch_digest(images, labels) == ref[0]
        del images, labels, it, old
        gc.collect()


def test_repositioning_invalidates_a_running_iterator(folder):
    with make(folder, **DET) as ld:
        it = iter(ld)
        next(it)
        ld.set_epoch(2)
        with pytest.raises(ringfeed.RingfeedError, match="invalidated"):
            next(it)
        it2 = iter(ld)
        next(it2)
        it3 = iter(ld)
        with pytest.raises(ringfeed.RingfeedError):
            next(it2)
        assert len(list(it3)) == len(ld)


def test_state_dict_resume_in_new_process(folder):
    k = 3
    with make(folder, num_workers=1, **DET) as ref_ld:
        ref = epoch_digests(ref_ld, 1)
    with make(folder, num_workers=1, **DET) as ld:
        ld.set_epoch(1)
        for j, _ in enumerate(ld):
            if j == k - 1:
                break
        state = ld.state_dict()
    fingerprint = state.pop("fingerprint")
    assert isinstance(fingerprint, str) and len(fingerprint) == 16
    int(fingerprint, 16)
    assert state == {"version": 1, "seed": 1234, "epoch": 1, "batch": k, "world_size": 1,
                     "rank": 0, "num_samples": 48, "batch_size": 8, "consumed": k * 8,
                     "drop_last": False, "shuffle": True}
    state["fingerprint"] = fingerprint
    res = run_python("""
        import ringfeed, rfhelpers
        kw = json.loads(sys.argv[2])
        with ringfeed.Loader(sys.argv[1], num_workers=4, **kw) as ld:
            ld.load_state_dict(json.loads(sys.argv[3]))
            print(json.dumps([rfhelpers.batch_digest(i, l) for i, l in ld]))
    """, args=[folder, json.dumps(DET), json.dumps(state)])
    assert res == ref[k:]


def test_load_state_dict_validates(folder):
    with make(folder, **DET) as ld:
        st = ld.state_dict()
        for key, bad in (("seed", 1), ("batch_size", 4), ("num_samples", 47), ("version", 2),
                         ("fingerprint", "0" * 16), ("shuffle", False), ("shuffle_block", 2)):
            with pytest.raises(ValueError):
                ld.load_state_dict(dict(st, **{key: bad}))
        # Another world size is a resume of the epoch's rest (test_resume.py),
        # but not from a dict that predates it (no "consumed").
        ld.load_state_dict(dict(st, world_size=2))
        old = {k: v for k, v in st.items() if k not in ("consumed", "fingerprint")}
        with pytest.raises(ValueError, match="predates"):
            ld.load_state_dict(dict(old, world_size=2))
        ld.load_state_dict(old)
        with pytest.raises(ValueError):
            ld.load_state_dict(dict(st, batch=len(ld) + 1))
        with pytest.raises(ValueError):
            ld.load_state_dict({"seed": 1234})
        ld.load_state_dict(dict(st, epoch=1, batch=4))
        assert ld.state_dict()["epoch"] == 1 and ld.state_dict()["batch"] == 4
        assert len(list(ld)) == len(ld) - 4


# ------------------------------------------------------------ correctness

@pytest.fixture(scope="module")
def psnr_folder(tmp_path_factory, gen):
    """ImageNet-like images from rf-gen-folder (when available) plus PIL-made
    portrait, gray, odd-sized, progressive, 4:4:4 and small (upscaled) ones."""
    base = tmp_path_factory.mktemp("psnr")
    root = str(base / "data")
    if gen:
        gen_folder(gen, str(base / "gen"), 2, 5, 500, 375, quality=90, seed=21)
        os.rename(str(base / "gen"), root)
    extra = [(375, 500, {}), (500, 333, {"gray": True}), (257, 193, {}), (193, 301, {"gray": True}),
             (480, 360, {"progressive": True}), (400, 300, {"subsampling": 0}), (150, 120, {}),
             (640, 427, {"quality": 75})]
    if not gen:
        extra += [(500, 375, {}), (500, 375, {"progressive": True})]
    for i, (w, h, kw) in enumerate(extra):
        write_jpeg(os.path.join(root, "zz_pil", "p%02d.jpg" % i), w, h, 900 + i, **kw)
    return root


@pytest.mark.parametrize("S", [224, 96])
def test_center_matches_torchvision(psnr_folder, S):
    samples, _ = imagefolder_samples(psnr_folder)
    scores = {}
    with make(psnr_folder, transform="center", image_size=S, batch_size=4, shuffle=True,
              output="numpy") as ld:
        for images, labels, idx in ld.iter_with_indices():
            for k, s in enumerate(idx.tolist()):
                scores[samples[s][0]] = psnr(images[k], reference_center(samples[s][0], S))
    assert len(scores) == len(samples)
    vals = np.array(list(scores.values()))
    worst = min(scores, key=scores.get)
    report = "mean %.2f dB, min %.2f dB (%s)" % (vals.mean(), vals.min(), os.path.basename(worst))
    print("center S=%d vs torchvision: %s" % (S, report))
    assert vals.mean() >= 40, report
    assert vals.min() >= 30, report


def test_corrupt_jpeg_raises_naming_file(tmp_path):
    root = str(tmp_path / "data")
    pil_folder(root, 2, 3, 90, 70, seed=4, variety=False)
    good = os.path.join(root, "class01", "img0000.jpg")
    data = open(good, "rb").read()
    with open(os.path.join(root, "class01", "broken.jpg"), "wb") as f:
        f.write(data[: len(data) * 6 // 10])
    with make(root, batch_size=2, shuffle=False, transform="center") as ld:
        with pytest.raises(ringfeed.RingfeedError, match="broken.jpg") as ei:
            for _ in ld:
                pass
        assert ei.value.status is not None and ei.value.status < 0
        # The loader stays usable: the next epoch reports the file again.
        ld.set_epoch(1)
        with pytest.raises(ringfeed.RingfeedError, match="broken.jpg"):
            list(ld)


def test_stats_keys(folder):
    with make(folder, num_workers=2, batch_size=8) as ld:
        n = sum(len(l) for _, l in ld)
        st = ld.stats()
    json.dumps(st)
    for key in ("images", "batches", "images_per_sec", "stall_seconds", "num_workers",
                "io_backend", "errors"):
        assert key in st, key
    assert n == 48
    assert st["images"] == 48
    assert st["batches"] == 6
    assert st["io_backend"] in ("io_uring", "pread")
    assert st["num_workers"] == 2
    assert st["images_per_sec"] >= 0 and st["stall_seconds"] >= 0
    assert st["errors"] == []


def test_list_file_source(pil_small, tmp_path, monkeypatch):
    samples, _ = imagefolder_samples(pil_small)
    lists = tmp_path / "lists"
    lists.mkdir()
    lines = []
    for i, (p, _) in enumerate(samples):
        path = p if i == 0 else os.path.relpath(p, str(lists))  # first absolute, rest relative
        lines.append("%s\t%d" % (path, 100 + i * 3))
    lf = lists / "train.txt"
    lf.write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(str(tmp_path))  # relative paths resolve against the list, not the cwd
    kw = dict(transform="center", image_size=32, batch_size=4, shuffle=False, output="numpy")
    with make(str(lf), **kw) as lst, make(pil_small, **kw) as fold:
        assert lst.num_samples == len(samples) == 15
        got_labels = []
        for (ia, la), (ib, lb) in zip(lst, fold):
            assert np.array_equal(ia, ib)
            got_labels.extend(la.tolist())
        assert got_labels == [100 + i * 3 for i in range(15)]


# ------------------------------------------------------- lifetime / memory

def test_context_manager_and_close(folder):
    with make(folder) as ld:
        assert not ld.closed
        next(iter(ld))
    assert ld.closed
    ld.close()
    ld.close()
    with pytest.raises(ringfeed.RingfeedError, match="closed"):
        iter(ld)
    with pytest.raises(ringfeed.RingfeedError):
        ld.stats()
    with pytest.raises(ringfeed.RingfeedError):
        ld.state_dict()
    del ld
    gc.collect()


def test_close_while_iterating(folder):
    ld = make(folder, batch_size=4)
    it = iter(ld)
    next(it)
    ld.close()
    with pytest.raises(ringfeed.RingfeedError):
        next(it)


def test_close_from_another_thread_while_waiting(folder):
    import threading
    ld = make(folder, batch_size=48, image_size=448, num_workers=1, transform="random_resized_crop")
    threading.Timer(0.05, ld.close).start()
    with pytest.raises(ringfeed.RingfeedError):
        for epoch in range(100):
            ld.set_epoch(epoch)
            for _ in ld:
                pass
    assert ld.closed


@pytest.mark.parametrize("output", ["numpy", "torch"])
def test_leases_survive_close(folder, output):
    if output == "torch" and torch is None:
        pytest.skip("torch does not import")
    ld = make(folder, batch_size=4, prefetch=4, output=output, transform="random_resized_crop")
    it = iter(ld)
    images, labels = next(it)
    if output == "numpy":
        assert is_zero_copy(images), "the first batch should be a view of the ring"
    keep = as_numpy(images).copy()
    keep_labels = as_numpy(labels).copy()
    del it
    ld.close()
    del ld
    gc.collect()
    # Churn: another loader allocates and fills its own ring.
    with make(folder, batch_size=4, prefetch=4, output="numpy") as other:
        for _ in other:
            pass
    junk = [np.full(4 * 32 * 32 * 3, 255, np.uint8) for _ in range(64)]
    assert np.array_equal(as_numpy(images), keep)
    assert np.array_equal(as_numpy(labels), keep_labels)
    del images, labels, junk
    gc.collect()


@pytest.mark.parametrize("prefetch", [2, 3, 4])
def test_holding_many_batches_does_not_deadlock(folder, prefetch):
    kw = dict(DET, batch_size=4, prefetch=prefetch, output="numpy")
    with make(folder, **kw) as ld:
        ref = epoch_digests(ld, 0)
    with make(folder, **kw) as ld:
        held = list(ld)  # keeps all 12 batches
        assert len(held) == 12
        views = sum(is_zero_copy(i) for i, _ in held)
        assert views <= prefetch - 1
        assert [batch_digest(i, l) for i, l in held] == ref
        # Holding them across another epoch is fine too.
        assert epoch_digests(ld, 0) == ref
        assert [batch_digest(i, l) for i, l in held] == ref


# ------------------------------------------------------------ distributed

def _sampler_reference(n, ws, r, shuffle):
    if torch is not None and not shuffle:
        from torch.utils.data import DistributedSampler
        return list(DistributedSampler(range(n), num_replicas=ws, rank=r, shuffle=False))
    idx = list(range(n))
    total = math.ceil(n / ws) * ws
    idx += idx[: total - n]
    return idx[r::ws]


def _torch_len(n, ws, r, bs, drop_last):
    per_rank = math.ceil(n / ws)
    want = per_rank // bs if drop_last else math.ceil(per_rank / bs)
    if torch is not None:
        from torch.utils.data import DataLoader, DistributedSampler
        dl = DataLoader(range(n), batch_size=bs, drop_last=drop_last,
                        sampler=DistributedSampler(range(n), num_replicas=ws, rank=r))
        assert len(dl) == want
    return want


@pytest.mark.parametrize("ws", [2, 3])
@pytest.mark.parametrize("shuffle", [False, True])
def test_distributed_split(odd_folder, ws, shuffle):
    n, bs = 23, 3
    per_rank = math.ceil(n / ws)
    ranks = []
    for r in range(ws):
        with make(odd_folder, image_size=16, batch_size=bs, rank=r, world_size=ws,
                  shuffle=shuffle, seed=8, transform="center", output="numpy") as ld:
            assert ld.num_samples == n
            assert len(ld) == _torch_len(n, ws, r, bs, False)
            ld.set_epoch(3)
            got = []
            for _, labels, idx in ld.iter_with_indices():
                assert [ld.sample_label(i) for i in idx.tolist()] == labels.tolist()
                got.extend(idx.tolist())
            assert len(got) == per_rank
            ranks.append(got)
        with make(odd_folder, image_size=16, batch_size=bs, rank=r, world_size=ws,
                  shuffle=shuffle, drop_last=True, transform="center") as ld:
            assert len(ld) == _torch_len(n, ws, r, bs, True)
    if not shuffle:
        for r in range(ws):
            assert ranks[r] == _sampler_reference(n, ws, r, False)
    # Rebuild the padded global order: padded[i*ws + r] = ranks[r][i].
    padded = [ranks[i % ws][i // ws] for i in range(per_rank * ws)]
    assert sorted(padded[:n]) == list(range(n)), "ranks must cover the dataset"
    assert padded[n:] == padded[: per_rank * ws - n], "padding must wrap like DistributedSampler"


def test_rank_defaults_from_environment(odd_folder, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    with make(odd_folder, image_size=16, batch_size=4) as ld:
        st = ld.state_dict()
        assert (st["rank"], st["world_size"]) == (1, 3)
        assert len(ld) == math.ceil(8 / 4)
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    with make(odd_folder, image_size=16, batch_size=4) as ld:
        st = ld.state_dict()
        assert (st["rank"], st["world_size"]) == (0, 1)


# --------------------------------------------------------- processes/errors

def test_forked_child_gets_clear_error(folder):
    ld = make(folder, batch_size=4)
    it = iter(ld)
    images, _ = next(it)
    pid = os.fork()
    if pid == 0:  # child: must never return into pytest
        code = 10
        try:
            try:
                next(iter(ld))
                code = 11
            except ringfeed.RingfeedError as e:
                code = 0 if "fork" in str(e) else 12
            try:
                ld.stats()
                code = code or 13
            except ringfeed.RingfeedError:
                pass
            _ = np.asarray(images).sum() if not hasattr(images, "numpy") else images.sum()
            ld.close()
            del images, it, ld
            gc.collect()
        except BaseException:
            code = 14
        finally:
            os._exit(code)
    status = wait_child(pid)
    if status is None:
        pytest.fail("forked child hung using the parent's loader")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    # The parent's loader is unaffected.
    assert len(list(it)) == len(ld) - 1
    ld.close()


def test_cuda_device_needs_cuda(folder):
    """device='cuda' yields CUDA tensors (test_cuda.py); without CUDA it is a
    clear error, never a silent fallback to the CPU."""
    have_cuda = (torch is not None and torch.cuda.is_available()
                 and ringfeed._lib.load().rf_cuda_device_count() > 0)
    if not have_cuda:
        with pytest.raises((ImportError, ringfeed.RingfeedError), match="cuda"):
            ringfeed.Loader(folder, device="cuda")
        with pytest.raises((ImportError, ringfeed.RingfeedError)):
            ringfeed.Loader(folder, device="cuda:1")
    with pytest.raises(ValueError):
        ringfeed.Loader(folder, device="tpu")


def test_bad_options(folder, tmp_path):
    with pytest.raises(ValueError, match="transform"):
        ringfeed.Loader(folder, transform="bogus")
    with pytest.raises(ValueError, match="layout"):
        ringfeed.Loader(folder, layout="NHCW")
    with pytest.raises(ValueError, match="on_error"):
        ringfeed.Loader(folder, on_error="ignore")
    with pytest.raises(TypeError):
        ringfeed.Loader(folder, batchsize=4)
    with pytest.raises(ringfeed.RingfeedError, match="batch_size"):
        ringfeed.Loader(folder, batch_size=0)
    with pytest.raises(ValueError):
        ringfeed.Loader(folder, rank=2, world_size=2)
    with pytest.raises(ringfeed.RingfeedError):
        ringfeed.Loader(str(tmp_path / "does-not-exist"))


def test_ctrl_c_interrupts_a_wait(folder):
    """SIGINT while the consumer waits for a batch raises KeyboardInterrupt promptly."""
    res = run_python("""
        import os, signal, threading, time, ringfeed
        ld = ringfeed.Loader(sys.argv[1], batch_size=48, image_size=448, num_workers=1,
                             transform="random_resized_crop", output="numpy")
        t0 = [None]
        def fire():
            time.sleep(0.02)
            t0[0] = time.monotonic()
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=fire).start()
        out = "no interrupt"
        try:
            for epoch in range(50):
                ld.set_epoch(epoch)
                for _ in ld:
                    pass
        except KeyboardInterrupt:
            out = time.monotonic() - t0[0]
        ld.close()
        print(json.dumps(out))
    """, args=[folder])
    assert isinstance(res, float), res
    print("KeyboardInterrupt after %.3f s" % res)
    assert res < 1.0
