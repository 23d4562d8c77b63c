"""Members of local shards read in place (map_shards, RF_P_MAP_SHARDS).

Shards just written are in the page cache, so with map_shards=True (the
default) their members are decoded straight from a read-only mapping: the
stats count them, and the batches are the ones map_shards=False makes by
reading every member, for raw (.npy) and JPEG shards, tar extras and record
files. A shard cut short while the loader runs sends its lost members to the
reader, which names them and says why, as without the mapping.
"""

import io
import json
import os
import tarfile

import numpy as np
import pytest

import ringfeed
from packhelpers import needs_pack, pack
from rfhelpers import pil_folder

pytest.importorskip("PIL")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("mapsrc") / "root")
    pil_folder(root, 3, 7, 80, 60, seed=5)
    return root


def batches(spec, map_shards, epochs=2, **kw):
    """Every batch of `epochs` epochs (arrays), and the loader's stats."""
    out = []
    with ringfeed.Loader(spec, map_shards=map_shards, **kw) as ld:
        for epoch in range(epochs):
            ld.set_epoch(epoch)
            for b in ld:
                b = b if isinstance(b, (tuple, list)) else (b,)  # records: the array
                # extras: a list of {ext: bytes}, one per sample
                out.append([x if isinstance(x, list) else np.asarray(x).copy() for x in b])
        return out, ld.stats()


def same(a, b):
    assert len(a) == len(b)
    for ba, bb in zip(a, b):
        assert len(ba) == len(bb)
        for xa, xb in zip(ba, bb):
            if isinstance(xa, list):
                assert xa == xb
            else:
                assert np.array_equal(xa, xb)


@needs_pack
@pytest.mark.parametrize("store", ["raw", "jpeg"])
def test_in_place_gives_the_read_batches(folder, tmp_path, store):
    out = str(tmp_path / store)
    pack(folder, out, "--store", store, "--max-side", 64, "--shard-count", 3)
    spec = os.path.join(out, "shard-*.tar")
    kw = dict(batch_size=4, image_size=32, transform="random_resized_crop", flip=True,
              shuffle=True, seed=9, num_workers=2)
    mapped, st = batches(spec, True, **kw)
    read, st_read = batches(spec, False, **kw)
    same(mapped, read)
    n = 3 * 7  # two epochs, and what was ahead of the consumer at the end
    assert st["members_in_place"] >= 2 * n and st["members_read"] == 0, st
    assert st_read["members_in_place"] == 0 and st_read["members_read"] == 0, st_read


def test_extras_and_records_in_place(tmp_path):
    shard = str(tmp_path / "extras.tar")
    rng = np.random.default_rng(3)
    with tarfile.open(shard, "w") as t:
        for i in range(10):
            a = rng.integers(0, 256, (20 + i, 30, 3), dtype=np.uint8)
            buf = io.BytesIO()
            np.save(buf, a)
            for ext, data in (("npy", buf.getvalue()), ("cls", b"%d" % (i % 3)),
                              ("json", json.dumps({"i": i, "pad": "x" * (i * 500)}).encode())):
                ti = tarfile.TarInfo("s%03d.%s" % (i, ext))
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
    kw = dict(batch_size=3, image_size=16, transform="center", shuffle=True, seed=1,
              extras=("json",))
    mapped, st = batches(shard, True, **kw)
    read, _ = batches(shard, False, **kw)
    same(mapped, read)
    assert st["members_in_place"] >= 20
    assert any(b"x" * 4000 in d["json"] for b in mapped for d in b[2])

    rec = str(tmp_path / "records.bin")
    data = rng.integers(0, 2**31, (50, 7), dtype=np.int32)
    with open(rec, "wb") as f:
        f.write(b"h" * 12 + data.tobytes())
    kw = dict(record_size=28, header_size=12, dtype="int32", batch_size=8, shuffle=True, seed=2)
    mapped, st = batches(rec, True, **kw)
    read, _ = batches(rec, False, **kw)
    same(mapped, read)
    assert st["members_in_place"] >= 100
    got = np.concatenate([b[0].reshape(-1, 7) for b in mapped[:7]])
    assert sorted(map(tuple, got)) == sorted(map(tuple, data))


@needs_pack
def test_a_shard_cut_short_is_named_by_the_reader(folder, tmp_path):
    out = str(tmp_path / "cut")
    pack(folder, out, "--store", "raw")  # one shard
    shard = os.path.join(out, "shard-000000.tar")
    with tarfile.open(shard) as t:
        last = [ti for ti in t.getmembers() if ti.name.endswith(".npy")][-1]
    cut = last.offset_data + last.size - 100  # into the last picture
    with ringfeed.Loader(shard, batch_size=2, image_size=16, transform="center", shuffle=False,
                         prefetch=2, num_workers=1) as ld:
        it = iter(ld)
        next(it)  # mapped and read in place
        # the last picture loses its end; the loader is two batches ahead,
        # far from it
        os.truncate(shard, cut)
        with pytest.raises(Exception) as e:
            for _ in it:
                pass
        assert "end of file before the end of the range" in str(e.value), str(e.value)
        assert "shard-000000.tar:" in str(e.value) and last.name in str(e.value)
        st = ld.stats()
    assert st["members_in_place"] >= 2
