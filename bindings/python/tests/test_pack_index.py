"""The shard index in ringfeed-pack's manifest.json: it states where every
member of every shard lies (as tarfile reads them), and the loader that uses
it instead of walking the shards' headers sees exactly what the walk gives:
the same length, sample names, labels and batches over an epoch, for ranks,
after a resume and without labels. A shard that is no longer the one the
manifest describes (bytes appended) is walked again.
"""

import glob
import json
import os
import shutil
import tarfile

import numpy as np
import pytest

import ringfeed
import ringfeed.pack
from packhelpers import needs_pack, pack
from rfhelpers import batch_digest, pil_folder

pytestmark = needs_pack


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """Two copies of the same shards: with the manifest and without it."""
    base = tmp_path_factory.mktemp("packidx")
    src = pil_folder(str(base / "src"), 4, 9, 80, 60, seed=11)
    out = str(base / "with")
    pack(src, out, "--max-side", 48, "--shard-count", 7, "--workers", 2)
    bare = str(base / "without")
    os.makedirs(bare)
    for p in glob.glob(os.path.join(out, "*.tar")):
        shutil.copy(p, bare)
    return out, bare


def spec(d):
    return os.path.join(d, "shard-*.tar")


def summary(d, **kw):
    """len, sample names (shard file name and key), labels, batch hashes of
    one epoch, and the stats' shard counts."""
    kw = dict(dict(batch_size=5, image_size=24, transform="random_resized_crop", seed=3), **kw)
    with ringfeed.Loader(spec(d), **kw) as ld:
        n = ld.num_samples
        names = [os.path.basename(ld.sample_path(i)) for i in range(n)]
        labels = [ld.sample_label(i) for i in range(n)]
        digests = [batch_digest(b[0], b[1]) if isinstance(b, (tuple, list))
                   else batch_digest(b, np.zeros(0)) for b in ld]
        st = ld.stats()
        return (len(ld), names, labels, digests), (st["shards"], st["shards_from_manifest"])


def test_index_matches_the_shards(packed):
    out, _ = packed
    m = json.load(open(os.path.join(out, "manifest.json")))
    assert len(m["shards"]) == 6
    for s in m["shards"]:
        path = os.path.join(out, s["name"])
        assert os.path.getsize(path) == s["bytes"]
        got = [(row[0] + "." + row[i], row[i + 1], row[i + 2])
               for row in s["index"] for i in range(2, len(row), 3)]
        with tarfile.open(path) as t:
            want = [(x.name, x.offset_data, x.size) for x in t.getmembers()]
            labels = [int(t.extractfile(x).read()) for x in t.getmembers()
                      if x.name.endswith(".cls")]
        assert got == want
        assert [row[1] for row in s["index"]] == labels
        assert len(s["index"]) == s["samples"]


@pytest.mark.parametrize("kw", [
    {},
    {"shuffle": False, "transform": "center"},
    {"rank": 0, "world_size": 2},
    {"rank": 1, "world_size": 2, "drop_last": True},
])
def test_same_as_the_header_walk(packed, kw):
    out, bare = packed
    a, sa = summary(out, **kw)
    b, sb = summary(bare, **kw)
    assert a == b
    assert sa == (6, 6) and sb == (6, 0)


def test_unlabeled_same_as_the_header_walk(packed):
    out, bare = packed
    a, sa = summary(out, label=None)
    b, _ = summary(bare, label=None)
    assert a == b and sa == (6, 6)
    assert set(a[2]) == {-1}


def test_resume_same_as_the_header_walk(packed):
    out, bare = packed
    rest = []
    for d in (out, bare):
        kw = dict(batch_size=4, image_size=24, transform="random_resized_crop", seed=5)
        with ringfeed.Loader(spec(d), **kw) as ld:
            it = iter(ld)
            next(it)
            next(it)
            state = ld.state_dict()
        with ringfeed.Loader(spec(d), **kw) as ld:
            ld.load_state_dict(state)
            rest.append([batch_digest(i, l) for i, l in ld])
    assert rest[0] == rest[1] and len(rest[0]) == len(range(0, 36, 4)) - 2


def test_changed_shard_is_walked(packed, tmp_path):
    out, _ = packed
    d = str(tmp_path / "changed")
    shutil.copytree(out, d)
    ref, st = summary(d)
    assert st == (6, 6)
    with open(os.path.join(d, "shard-000002.tar"), "ab") as f:
        f.write(b"\0" * 1024)  # appended: a valid tar still, but not the one described
    got, st = summary(d)
    assert st == (6, 5)
    assert got == ref
    os.remove(os.path.join(d, "manifest.json"))
    got, st = summary(d)
    assert st == (6, 0) and got == ref

