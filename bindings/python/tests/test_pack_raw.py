"""ringfeed-pack --store raw|auto, --raw-fraction: raw pixels in .npy members.

A raw member is exactly what np.save writes for the uint8 (H, W, 3) picture
shrunk to --max-side (PIL's resize of the original, byte for byte); np.load
and webdataset's decoder read it as is; the loader reads it with no decode,
so that from raw shards packed at full size its center crops and
random_resized_crop + flip are the pixels it makes from the original folder
at full resolution (exact=True). auto stores raw exactly where the raw bytes
are at most --raw-max-ratio times the JPEG's; --raw-fraction F stores the
floor(F * n) smallest raw. The manifest counts the kinds stored, per shard
and in all; the summary line says them.
"""

import glob
import io
import json
import os
import tarfile

import numpy as np
import pytest

import ringfeed
from packhelpers import members, needs_pack, pack, run_pack
from rfhelpers import imagefolder_samples, pil_folder, write_jpeg

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

pytestmark = needs_pack

MAX_SIDE = 48


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """3 classes x 6 JPEGs of about 90x70 (gray, portrait, progressive among
    them) and two pictures smaller than MAX_SIDE."""
    root = str(tmp_path_factory.mktemp("rawsrc") / "root")
    pil_folder(root, 3, 6, 90, 70, seed=11)
    write_jpeg(os.path.join(root, "class00", "small.jpg"), 40, 30, 5)
    write_jpeg(os.path.join(root, "class02", "tiny.jpg"), 20, 33, 6, gray=True)
    return root


def npy_members(out):
    return [r for r in members(out) if r[2] == "npy"]


def shrunk(path, max_side):
    """PIL's resize of the original to the packer's size (bilinear, antialiased)."""
    im = Image.open(path).convert("RGB")
    w, h = im.size
    if max(w, h) > max_side:
        if w >= h:
            size = (max_side, int(h * max_side / w + 0.5))
        else:
            size = (int(w * max_side / h + 0.5), max_side)
        im = im.resize(size, Image.BILINEAR)
    return np.asarray(im)


def test_raw_members_are_np_save_of_the_shrunk_picture(folder, tmp_path):
    out = str(tmp_path / "deeper" / "raw")  # parents made
    m = pack(folder, out, "--store", "raw", "--max-side", MAX_SIDE, "--shard-count", 7,
             "--workers", 3)
    want, _ = imagefolder_samples(folder)
    rows = npy_members(out)
    assert len(rows) == len(want)
    for (path, label), r in zip(want, rows):
        a = np.load(io.BytesIO(r[3]))
        assert a.dtype == np.uint8 and a.ndim == 3 and a.shape[2] == 3
        buf = io.BytesIO()
        np.save(buf, a)
        assert buf.getvalue() == r[3], "not np.save's bytes"
        ref = shrunk(path, MAX_SIDE)
        assert a.shape == ref.shape
        assert np.array_equal(a, ref), path
    assert m["stored"] == {"npy": len(want)}
    assert sum(s["stored"]["npy"] for s in m["shards"]) == len(want)
    assert all(all(e[2] == "npy" for e in s["index"]) for s in m["shards"])
    assert m["options"]["store"] == "raw"


def test_webdataset_decodes_raw_members_as_arrays(folder, tmp_path):
    wds = pytest.importorskip("webdataset")
    out = str(tmp_path / "raw")
    pack(folder, out, "--store", "raw", "--max-side", MAX_SIDE)
    want, _ = imagefolder_samples(folder)
    ds = wds.WebDataset(sorted(glob.glob(os.path.join(out, "shard-*.tar"))),
                        shardshuffle=False).decode()
    got = [(s["npy"], int(s["cls"])) for s in ds]
    assert [lab for _, lab in got] == [lab for _, lab in want]
    for (path, _), (a, _) in zip(want, got):
        assert isinstance(a, np.ndarray) and a.dtype == np.uint8
        assert np.array_equal(a, shrunk(path, MAX_SIDE))


@pytest.mark.parametrize("transform", ["center", "random_resized_crop"])
def test_loader_reads_raw_shards_as_the_originals(folder, tmp_path, transform):
    """Packed raw at full size: the loader's output is the folder's at full
    resolution, crops and flips included (the same per-sample geometry), in
    either layout."""
    out = str(tmp_path / "raw")
    pack(folder, out, "--store", "raw")
    kw = dict(batch_size=5, image_size=32, transform=transform, flip=True, shuffle=True, seed=3,
              num_workers=2)
    with ringfeed.Loader(os.path.join(out, "shard-*.tar"), **kw) as a, \
            ringfeed.Loader(folder, exact=True, **kw) as b:
        for epoch in range(2):
            a.set_epoch(epoch)
            b.set_epoch(epoch)
            n = 0
            for (xa, ya), (xb, yb) in zip(a, b):
                assert np.array_equal(np.asarray(ya), np.asarray(yb))
                assert np.array_equal(np.asarray(xa), np.asarray(xb))
                n += len(np.asarray(ya))
            assert n == len(imagefolder_samples(folder)[0])
    kw.update(layout="NCHW", image_size=24)
    with ringfeed.Loader(os.path.join(out, "shard-*.tar"), **kw) as a, \
            ringfeed.Loader(folder, exact=True, **kw) as b:
        for (xa, _), (xb, _) in zip(a, b):
            assert np.asarray(xa).shape[1:] == (3, 24, 24)
            assert np.array_equal(np.asarray(xa), np.asarray(xb))


def test_auto_stores_raw_where_the_ratio_allows(folder, tmp_path):
    jpeg = str(tmp_path / "jpeg")
    raw = str(tmp_path / "raw")
    pack(folder, jpeg, "--max-side", MAX_SIDE)
    pack(folder, raw, "--store", "raw", "--max-side", MAX_SIDE)
    jb = [len(r[3]) for r in members(jpeg) if r[2] == "jpg"]
    rb = [len(r[3]) for r in npy_members(raw)]
    ratios = sorted(r / j for r, j in zip(rb, jb))
    # a ratio between two samples' own: some raw, some JPEG
    cut = (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
    auto = str(tmp_path / "auto")
    m = pack(folder, auto, "--store", "auto", "--raw-max-ratio", "%.6f" % cut,
             "--max-side", MAX_SIDE)
    rows = [r for r in members(auto) if r[2] in ("npy", "jpg")]
    assert len(rows) == len(jb)
    for r, j, k in zip(rb, jb, rows):
        assert k[2] == ("npy" if r <= cut * j else "jpg")
        assert len(k[3]) == (r if k[2] == "npy" else j)  # the same bytes as either pack
    nraw = sum(1 for k in rows if k[2] == "npy")
    assert 0 < nraw < len(rows)
    assert m["stored"] == {"npy": nraw, "jpg": len(rows) - nraw} or \
        m["stored"] == {"jpg": len(rows) - nraw, "npy": nraw}
    r = run_pack(folder, str(tmp_path / "auto2"), "--store", "auto", "--raw-max-ratio",
                 "%.6f" % cut, "--max-side", MAX_SIDE)
    assert r.returncode == 0
    assert "%d raw .npy, %d JPEG" % (nraw, len(rows) - nraw) in r.stderr


def test_raw_fraction_stores_the_smallest(folder, tmp_path):
    raw = str(tmp_path / "raw")
    pack(folder, raw, "--store", "raw", "--max-side", MAX_SIDE)
    rb = [len(r[3]) for r in npy_members(raw)]
    n = len(rb)
    frac = 0.4
    order = sorted(range(n), key=lambda i: (rb[i], i))
    want_raw = set(order[:int(frac * n)])
    out = str(tmp_path / "frac")
    m = pack(folder, out, "--raw-fraction", frac, "--max-side", MAX_SIDE, "--workers", 2)
    rows = [r for r in members(out) if r[2] in ("npy", "jpg")]
    assert {i for i, r in enumerate(rows) if r[2] == "npy"} == want_raw
    assert m["options"]["raw_fraction"] == frac and m["options"]["store"] == "auto"
    r = run_pack(folder, str(tmp_path / "x"), "--raw-fraction", "0.5", "--store", "raw")
    assert r.returncode == 2 and "--raw-fraction" in r.stderr


def test_summary_and_usage_errors(folder, tmp_path):
    r = run_pack(folder, str(tmp_path / "a" / "b" / "c"), "--store", "raw", "--max-side", 32)
    assert r.returncode == 0, r.stderr
    n = len(imagefolder_samples(folder)[0])
    assert "%d samples in 1 shard, " % n in r.stderr
    assert "(%d raw .npy, 0 JPEG, 0 kept as they came); 0 errors skipped" % n in r.stderr
    for bad in (["--store", "png"], ["--raw-max-ratio", "0"], ["--raw-fraction", "1.5"]):
        r = run_pack(folder, str(tmp_path / "bad"), *bad)
        assert r.returncode == 2 and bad[0] in r.stderr, (bad, r.stderr)
    # a file where OUT's parent should be: a clear error
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run_pack(folder, str(blocker / "out"), "--max-side", 32)
    assert r.returncode == 1 and "cannot create" in r.stderr and str(blocker) in r.stderr


def test_repack_of_raw_shards_and_npy_extras(folder, tmp_path):
    """Raw shards are a source like any (their .npy pictures decoded as
    pixels); a tar source's .npy beside a picture is an extra, which --store
    raw refuses to mix with raw pictures."""
    raw = str(tmp_path / "raw")
    pack(folder, raw, "--store", "raw")
    again = str(tmp_path / "again")
    pack(os.path.join(raw, "shard-*.tar"), again, "--store", "raw")
    assert [r[3] for r in npy_members(raw)] == [r[3] for r in npy_members(again)]
    # a source whose samples carry an embedding .npy beside the JPEG
    src = str(tmp_path / "emb.tar")
    want, _ = imagefolder_samples(folder)
    with tarfile.open(src, "w") as t:
        for i, (path, label) in enumerate(want[:4]):
            for ext, data in (("jpg", open(path, "rb").read()), ("cls", b"%d" % label)):
                ti = tarfile.TarInfo("k%02d.%s" % (i, ext))
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            buf = io.BytesIO()
            np.save(buf, np.arange(8, dtype=np.float32))
            ti = tarfile.TarInfo("k%02d.npy" % i)
            ti.size = len(buf.getvalue())
            t.addfile(ti, io.BytesIO(buf.getvalue()))
    out = str(tmp_path / "emb")
    pack(src, out, "--extras", "npy", "--max-side", 32)
    rows = members(out)
    assert [r[2] for r in rows[:3]] == ["jpg", "cls", "npy"]
    assert np.load(io.BytesIO(rows[2][3])).dtype == np.float32
    r = run_pack(src, str(tmp_path / "emb2"), "--extras", "npy", "--store", "raw")
    assert r.returncode == 2 and "--extras npy" in r.stderr
    # not named: the embedding is neither the picture nor a default extra
    out3 = str(tmp_path / "emb3")
    pack(src, out3, "--store", "raw", "--max-side", 32)
    assert [r[2] for r in members(out3)[:2]] == ["npy", "cls"]
    assert np.load(io.BytesIO(members(out3)[0][3])).dtype == np.uint8


def test_bad_npy_member_in_a_source_is_named(folder, tmp_path):
    src = str(tmp_path / "bad.tar")
    good = io.BytesIO()
    np.save(good, np.zeros((8, 8, 3), np.uint8))
    bad = io.BytesIO()
    np.save(bad, np.asfortranarray(np.zeros((8, 8, 3), np.uint8)))
    with tarfile.open(src, "w") as t:
        for key, data in (("a", good.getvalue()), ("b", bad.getvalue())):
            for ext, d in (("npy", data), ("cls", b"0")):
                ti = tarfile.TarInfo("%s.%s" % (key, ext))
                ti.size = len(d)
                t.addfile(ti, io.BytesIO(d))
    r = run_pack(src, str(tmp_path / "out"))
    assert r.returncode == 1
    assert "b.npy" in r.stderr and "Fortran order" in r.stderr, r.stderr
    with ringfeed.Loader(src, batch_size=2, image_size=8, shuffle=False) as ld:
        with pytest.raises(Exception) as e:
            for _ in ld:
                pass
        assert "b.npy" in str(e.value) and "Fortran order" in str(e.value)
