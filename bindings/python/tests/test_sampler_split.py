"""sampler_drop_last=True: the split of torch's DistributedSampler(drop_last=True).

Each rank's sample indices (iter_with_indices) are compared with
DistributedSampler(range(n), num_replicas=W, rank=r, shuffle=False,
drop_last=True) when torch is installed, else with its arithmetic written out
as torch writes it; len(loader) with DataLoader(batch_size, drop_last) over
that sampler. Shuffled, the ranks are disjoint with n // W samples each. The
sampler does not depend on the source: records, an image folder, a list file
and tar shards are all checked. And the option travels with state_dict."""

import io
import math
import os
import tarfile

import numpy as np
import pytest

import ringfeed
from rfhelpers import tiny_jpeg_folder, walk_folder

try:
    import torch
except Exception:  # pragma: no cover - torch is optional
    torch = None


def reference(n, ws, r):
    """DistributedSampler(range(n), ws, r, shuffle=False, drop_last=True)'s indices."""
    if torch is not None:
        from torch.utils.data import DistributedSampler
        return list(DistributedSampler(range(n), num_replicas=ws, rank=r, shuffle=False,
                                       drop_last=True))
    if n % ws != 0:
        num = math.ceil((n - ws) / ws)
    else:
        num = math.ceil(n / ws)
    total = num * ws
    return list(range(n))[:total][r:total:ws]


def reference_len(n, ws, r, bs, drop_last):
    """len(DataLoader(batch_size=bs, drop_last=drop_last)) over that sampler."""
    num = len(reference(n, ws, r))
    want = num // bs if drop_last else math.ceil(num / bs)
    if torch is not None:
        from torch.utils.data import DataLoader, DistributedSampler
        dl = DataLoader(range(n), batch_size=bs, drop_last=drop_last,
                        sampler=DistributedSampler(range(n), num_replicas=ws, rank=r,
                                                   drop_last=True))
        assert len(dl) == want
    return want


def indices(ld, epoch=0):
    ld.set_epoch(epoch)
    out = []
    for batch in ld.iter_with_indices():
        out += batch[-1].tolist()
    return out


@pytest.fixture(scope="module")
def small_folder(tmp_path_factory):
    """23 tiny images in 3 classes (23 is a multiple of none of 2..5)."""
    return tiny_jpeg_folder(str(tmp_path_factory.mktemp("sdl") / "data"), 23, 3, 700)


def image_sources(folder, out_dir):
    """The folder, a list file and two tar shards over the same 23 images,
    each in ImageFolder order (so index i is the same image in all three)."""
    samples = walk_folder(folder)
    lst = os.path.join(out_dir, "train.txt")
    with open(lst, "w") as f:
        for p, label in samples:
            f.write("%s\t%d\n" % (p, label))
    shards = []
    for s in range(0, len(samples), 12):
        path = os.path.join(out_dir, "part-%d.tar" % len(shards))
        with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
            for p, label in samples[s:s + 12]:
                key = os.path.splitext(os.path.relpath(p, folder))[0]
                with open(p, "rb") as f:
                    jpg = f.read()
                for name, data in ((key + ".jpg", jpg), (key + ".cls", b"%d" % label)):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
        shards.append(path)
    return {"folder": folder, "list": lst, "tar": shards}


def open_images(src, **kw):
    kw.setdefault("image_size", 16)
    kw.setdefault("transform", "center")
    kw.setdefault("num_workers", 1)
    kw.setdefault("output", "numpy")
    return ringfeed.Loader(src, **kw)


# ----------------------------------------------------------------- records

@pytest.mark.parametrize("n", [1, 2, 5, 12, 23, 37])
def test_records_match_distributed_sampler(tmp_path, n):
    """Many (n, world_size, batch_size, drop_last): the indices, the data and
    len(loader) are DistributedSampler(drop_last=True)'s, DataLoader's."""
    recs = np.repeat(np.arange(n, dtype=np.int32)[:, None], 4, axis=1)
    path = str(tmp_path / "r.bin")
    recs.tofile(path)
    for ws in (1, 2, 3, 4, 5, 8):
        for bs in (1, 3, 4):
            for drop_last in (False, True):
                union = []
                for r in range(ws):
                    with ringfeed.Loader(path, record_size=16, dtype="int32", batch_size=bs,
                                         shuffle=False, drop_last=drop_last, rank=r,
                                         world_size=ws, sampler_drop_last=True,
                                         num_workers=1, output="numpy") as ld:
                        assert len(ld) == reference_len(n, ws, r, bs, drop_last)
                        got = []
                        for data, idx in ld.iter_with_indices():
                            assert np.array_equal(data[:, 0], idx)
                            got += idx.tolist()
                    want = reference(n, ws, r)
                    if drop_last:
                        want = want[:len(want) // bs * bs]
                    assert got == want, (n, ws, bs, drop_last, r)
                    union += got
                assert len(set(union)) == len(union), "a sample seen twice across ranks"
                if not drop_last:
                    assert len(union) == n // ws * ws


# ------------------------------------------------------------------ images

@pytest.fixture(scope="module")
def sources(small_folder, tmp_path_factory):
    return image_sources(small_folder, str(tmp_path_factory.mktemp("sdl-sources")))


@pytest.mark.parametrize("kind", ["folder", "list", "tar"])
def test_images_match_distributed_sampler(sources, kind):
    n = 23
    for ws in (2, 3, 4, 5):
        for r in range(ws):
            with open_images(sources[kind], batch_size=4, shuffle=False, rank=r, world_size=ws,
                             sampler_drop_last=True) as ld:
                assert ld.num_samples == n
                assert len(ld) == reference_len(n, ws, r, 4, False)
                got = []
                for _, labels, idx in ld.iter_with_indices():
                    assert [ld.sample_label(i) for i in idx.tolist()] == labels.tolist()
                    got += idx.tolist()
            assert got == reference(n, ws, r), (kind, ws, r)


@pytest.mark.parametrize("kind", ["folder", "list", "tar"])
def test_shuffled_ranks_are_disjoint(sources, kind):
    """Shuffled: every rank gets n // W samples, none shared, in every epoch;
    and each rank's list is its padded list (the default) less the tail."""
    n, ws = 23, 3
    per_rank = n // ws
    for epoch in (0, 4):
        ranks = []
        for r in range(ws):
            kw = dict(batch_size=3, shuffle=True, seed=8, rank=r, world_size=ws)
            with open_images(sources[kind], sampler_drop_last=True, **kw) as ld:
                assert len(ld) == math.ceil(per_rank / 3)
                got = indices(ld, epoch)
                assert indices(ld, epoch) == got, "an epoch's order is a function of its number"
            with open_images(sources[kind], **kw) as ld:
                padded = indices(ld, epoch)
            assert len(got) == per_rank and len(padded) == math.ceil(n / ws)
            assert got == padded[:per_rank]
            ranks.append(got)
        union = [s for got in ranks for s in got]
        assert len(set(union)) == per_rank * ws, "ranks share samples"
        assert all(0 <= s < n for s in union)
        # Interleaved, the ranks give the head of the one global order (world_size 1's).
        with open_images(sources[kind], batch_size=3, shuffle=True, seed=8,
                         sampler_drop_last=True) as ld:
            whole = indices(ld, epoch)
        assert sorted(whole) == list(range(n))
        assert [ranks[i % ws][i // ws] for i in range(per_rank * ws)] == whole[:per_rank * ws]


def test_drop_last_composes(small_folder):
    """drop_last drops each rank's short last batch after the trim: 23 over 4
    ranks is 5 each; batches of 2 give 3 batches, 2 with drop_last."""
    for drop_last, want_len, want_last in ((False, 3, 1), (True, 2, 2)):
        for r in range(4):
            with open_images(small_folder, batch_size=2, shuffle=True, seed=2, rank=r,
                             world_size=4, drop_last=drop_last, sampler_drop_last=True) as ld:
                assert len(ld) == want_len == reference_len(23, 4, r, 2, drop_last)
                sizes = [len(idx) for _, _, idx in ld.iter_with_indices()]
                assert len(sizes) == want_len and sizes[-1] == want_last


def test_more_ranks_than_samples(tmp_path):
    """n < world_size: every rank gets nothing (torch's num_samples is 0)."""
    path = str(tmp_path / "r.bin")
    np.arange(3, dtype=np.int32).tofile(path)
    for r in range(4):
        with ringfeed.Loader(path, record_size=4, dtype="int32", batch_size=2, rank=r,
                             world_size=4, sampler_drop_last=True, output="numpy") as ld:
            assert len(ld) == 0 == reference_len(3, 4, r, 2, False)
            assert list(ld) == []
            assert list(ld) == []


# ---------------------------------------------------- options, state dicts

def test_sent_only_when_set(small_folder):
    with open_images(small_folder) as ld:
        assert all(p != ringfeed._lib.RF_P_SAMPLER_DROP_LAST for p, _ in ld._opts.params)
        assert "sampler_drop_last" not in ld.state_dict()
    with open_images(small_folder, sampler_drop_last=True) as ld:
        assert (ringfeed._lib.RF_P_SAMPLER_DROP_LAST, 1) in ld._opts.params
        assert ld._handle.get(ringfeed._lib.RF_P_SAMPLER_DROP_LAST) == 1


def test_state_dict_carries_the_split(small_folder):
    kw = dict(batch_size=2, shuffle=True, seed=5, rank=1, world_size=3)
    with open_images(small_folder, sampler_drop_last=True, **kw) as ld:
        ref = indices(ld, 2)
        ld.set_epoch(2)
        it = ld.iter_with_indices()
        for _ in range(2):
            next(it)
        state = ld.state_dict()
    assert state["sampler_drop_last"] is True and (state["epoch"], state["batch"]) == (2, 2)
    with open_images(small_folder, sampler_drop_last=True, **kw) as ld:
        ld.load_state_dict(state)
        assert [s for _, _, idx in ld.iter_with_indices() for s in idx.tolist()] == ref[4:]
    # The other split has other batches at that position: refused both ways;
    # a dict without the key (from before the option) means False.
    with open_images(small_folder, **kw) as ld:
        with pytest.raises(ValueError, match="sampler_drop_last"):
            ld.load_state_dict(state)
        plain = ld.state_dict()
        ld.load_state_dict(dict(plain, sampler_drop_last=False))
    assert "sampler_drop_last" not in plain
    with open_images(small_folder, sampler_drop_last=True, **kw) as ld:
        with pytest.raises(ValueError, match="sampler_drop_last"):
            ld.load_state_dict(plain)
