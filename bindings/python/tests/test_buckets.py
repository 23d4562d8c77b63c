"""Aspect-ratio buckets through the binding: one shape per batch (the
batch's bucket), every sample once per epoch, the same batches for any
worker count, a center crop in a bucket as torchvision's Resize +
CenterCrop, the sizes kept for the second start, and state_dict resumes on
the same world size (exact) and on another (the rest of the epoch once)."""

import collections
import io
import os
import tarfile

import numpy as np
import pytest

import ringfeed
from packhelpers import needs_pack, pack
from rfhelpers import imagefolder_samples, write_jpeg

SHAPES = [(120, 90), (90, 120), (100, 100), (160, 70), (125, 88)]  # (w, h)
N = 60


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("buckets") / "data")
    for i in range(N):
        w, h = SHAPES[i % len(SHAPES)]
        write_jpeg(os.path.join(root, "c%d" % (i % 3), "p%02d.jpg" % i), w + i % 4, h, 7 + i)
    return root


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("bucket_cache"))


def make(folder, cache, **kw):
    base = dict(batch_size=4, image_size=64, transform="random_resized_crop", buckets=3,
                num_workers=2, output="numpy", seed=5, cache_dir=cache)
    base.update(kw)
    return ringfeed.Loader(folder, **base)


def epoch(ld, e=None):
    """[(bucket shape, sample indices, images)] of one epoch."""
    if e is not None:
        ld.set_epoch(e)
    out = []
    for images, labels, idx in ld.iter_with_indices():
        out.append((images.shape[1:3], idx.tolist(), images.copy()))
    return out


def test_one_shape_per_batch_every_sample_once(folder, cache):
    with make(folder, cache, num_workers=1) as ld:
        buckets = ld.buckets
        assert 2 <= len(buckets) <= 3
        one = epoch(ld, 0)
        assert len(one) == len(ld)
        seen = collections.Counter()
        for shape, idx, _ in one:
            bs = {ld.sample_bucket(s) for s in idx}
            assert len(bs) == 1 and shape == tuple(buckets[bs.pop()])
            seen.update(idx)
        assert sorted(seen) == list(range(N)) and set(seen.values()) == {1}
        shapes = ld.stats()["shapes"]
        assert sum(b["samples"] for b in shapes["buckets"]) == N
    with make(folder, cache, num_workers=3) as ld:
        three = epoch(ld, 0)
        assert ld.stats()["shapes"]["sizes"]["from_kept"] == N  # the second start
        assert ld.stats()["shapes"]["sizes"]["scanned"] == 0
    assert len(one) == len(three)
    for a, b in zip(one, three):
        assert a[0] == b[0] and a[1] == b[1] and np.array_equal(a[2], b[2])


def test_center_in_a_bucket_is_torchvision(folder, cache):
    T = pytest.importorskip("torchvision.transforms")
    from PIL import Image
    samples, _ = imagefolder_samples(folder)
    with make(folder, cache, transform="center", exact=True, shuffle=False,
              buckets=[(48, 64), (64, 48), (56, 56)]) as ld:
        got = {}
        for images, labels, idx in ld.iter_with_indices():
            for k, s in enumerate(idx.tolist()):
                got[s] = images[k]
        for s, (path, _) in enumerate(samples):
            ex = ld.explain(s, epoch=0)
            bh, bw = ld.buckets[ex["bucket"]]
            with Image.open(path) as im:
                ref = T.Compose([T.Resize(tuple(ex["resize"])), T.CenterCrop((bh, bw)),
                                 T.PILToTensor()])(im.convert("RGB"))
            assert got[s].shape == (bh, bw, 3)
            assert np.array_equal(got[s], ref.permute(1, 2, 0).numpy()), path
            w, h = ex["width"], ex["height"]
            # covered: one side exactly the bucket's, the other at least
            rh, rw = ex["resize"]
            assert (rh == bh and rw >= bw) or (rw == bw and rh >= bh)
            # the nearest bucket by aspect ratio
            d = [abs(np.log(w / h) - np.log(bw2 / bh2)) for bh2, bw2 in ld.buckets]
            assert ex["bucket"] == int(np.argmin(d))


def test_letterbox_in_buckets(folder, cache):
    with make(folder, cache, transform="letterbox", buckets=[(48, 64), (64, 48)],
              fill=100) as ld:
        for images, labels, sizes, scale in ld:
            hh, ww = images.shape[1:3]
            assert ((sizes[:, 0] == hh) | (sizes[:, 1] == ww)).all()
            assert (sizes[:, 0] <= hh).all() and (sizes[:, 1] <= ww).all()


def take(ld, n):
    out = []
    it = ld.iter_with_indices()
    for _ in range(n):
        images, labels, idx = next(it)
        out.append(idx.tolist())
    return out


@pytest.mark.parametrize("shared", [True, False])
def test_resume_same_and_other_world(folder, cache, shared):
    kw = dict(bucket_shared=shared, num_workers=1)
    # two ranks take 3 batches each of epoch 2
    ranks = [make(folder, cache, rank=r, world_size=2, **kw) for r in range(2)]
    first, states = [], []
    for ld in ranks:
        ld.set_epoch(2)
        first += take(ld, 3)
        states.append(ld.state_dict())
    assert all("unit" in s and s["buckets"] for s in states)
    # the same world size: exactly the uninterrupted run's next batches
    again = make(folder, cache, rank=1, world_size=2, **kw)
    again.load_state_dict(states[1])
    rest1 = [idx for _, idx, _ in epoch(again)]
    whole = make(folder, cache, rank=1, world_size=2, **kw)
    assert rest1 == [idx for _, idx, _ in epoch(whole, 2)][3:]
    # three ranks take the rest: every sample of the epoch at least once
    seen = collections.Counter(s for idx in first for s in idx)
    for r in range(3):
        ld = make(folder, cache, rank=r, world_size=3, batch_size=3, **kw)
        ld.load_state_dict(states)
        n_rest = len(ld)  # the rest's batches
        batches = epoch(ld)
        assert len(batches) == n_rest
        for shape, idx, _ in batches:
            assert len({ld.sample_bucket(s) for s in idx}) == 1
            seen.update(idx)
        ld.close()
    assert sorted(seen) == list(range(N))
    for ld in ranks + [again, whole]:
        ld.close()


def test_state_of_another_bucketing_refused(folder, cache):
    with make(folder, cache) as ld:
        state = ld.state_dict()
    with make(folder, cache, buckets=[(64, 64)]) as ld:
        with pytest.raises(ValueError, match="buckets"):
            ld.load_state_dict(state)
    with make(folder, cache, buckets=None) as ld:
        with pytest.raises(ValueError, match="buckets"):
            ld.load_state_dict(state)


@needs_pack
def test_sizes_from_the_packers_manifest(folder, cache, tmp_path):
    """ringfeed-pack states each sample's picture size in manifest.json; the
    buckets take them from there (no scan). A manifest whose sizes do not
    cover every sample of a shard is not used for them: they are scanned."""
    import json
    from PIL import Image
    out = str(tmp_path / "packed")
    man = pack(folder, out, "--shard-count", "25", "--max-side", "110")
    spec = os.path.join(out, "shard-{000000..000002}.tar")
    with ringfeed.Loader(spec, batch_size=4, image_size=64, buckets=3, cache_dir=cache) as ld:
        sizes = ld.stats()["shapes"]["sizes"]
        assert sizes["from_manifest"] == N and sizes["scanned"] == 0
        order = [ld.sample_bucket(i) for i in range(N)]
    k = 0
    for shard in man["shards"]:
        assert len(shard["sizes"]) == 2 * len(shard["index"])
        with tarfile.open(os.path.join(out, shard["name"])) as t:
            for sample, (w, h) in zip(shard["index"], zip(*[iter(shard["sizes"])] * 2)):
                data = t.extractfile(sample[0] + ".jpg").read()
                assert Image.open(io.BytesIO(data)).size == (w, h)
                k += 1
    assert k == N
    # one shard's sizes cut short: its samples scanned, the same buckets
    man["shards"][1]["sizes"] = man["shards"][1]["sizes"][:-2]
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(man, f)
    with ringfeed.Loader(spec, batch_size=4, image_size=64, buckets=3,
                         cache_dir=str(tmp_path / "c2")) as ld:
        sizes = ld.stats()["shapes"]["sizes"]
        assert sizes["from_manifest"] == N - len(man["shards"][1]["index"])
        assert sizes["scanned"] == len(man["shards"][1]["index"])
        assert [ld.sample_bucket(i) for i in range(N)] == order
