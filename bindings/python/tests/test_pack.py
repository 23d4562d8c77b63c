"""ringfeed-pack (tools/pack.c, through ringfeed.pack) writes WebDataset
shards that ringfeed and the webdataset package read back as the source's
samples: the same count, labels and order (keys = write positions), every
picture's longer side at most --max-side and never enlarged. The bytes do not
depend on the worker count; a run stopped after some shards and run again
gives the bytes of an uninterrupted run; bad source files stop the run
(raise) or are left out and listed in the manifest (skip).
"""

import glob
import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import ringfeed
import ringfeed.pack
from packhelpers import members, needs_pack, pack, run_pack
from rfhelpers import PKG_DIR, child_env, imagefolder_samples, pil_folder

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

pytestmark = needs_pack

MAX_SIDE = 64


def shard_bytes(out):
    return {os.path.basename(p): open(p, "rb").read()
            for p in sorted(glob.glob(os.path.join(out, "*.tar")))}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """3 classes x 7 JPEGs of about 120x90 (portrait, gray, progressive,
    4:4:4 among them) and one 40x30 picture smaller than MAX_SIDE."""
    root = str(tmp_path_factory.mktemp("packsrc") / "root")
    pil_folder(root, 3, 7, 120, 90, seed=3)
    from rfhelpers import write_jpeg
    write_jpeg(os.path.join(root, "class01", "small.jpg"), 40, 30, 99)
    return root


@pytest.fixture(scope="module")
def packed(folder, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("packed") / "out")
    pack(folder, out, "--max-side", MAX_SIDE, "--shard-count", 5, "--workers", 2)
    return out


def test_counts_labels_keys_sizes(folder, packed):
    want, _ = imagefolder_samples(folder)
    rows = members(packed)
    jpgs = [r for r in rows if r[2] == "jpg"]
    clss = [r for r in rows if r[2] == "cls"]
    assert len(jpgs) == len(clss) == len(want) == 22
    assert [r[1] for r in jpgs] == ["%06d" % i for i in range(len(want))]
    assert [r[1] for r in clss] == [r[1] for r in jpgs]
    assert [int(r[3]) for r in clss] == [lab for _, lab in want]
    for (path, _), r in zip(want, jpgs):
        w, h = Image.open(path).size
        im = Image.open(io.BytesIO(r[3]))
        assert im.format == "JPEG"
        pw, ph = im.size
        assert max(pw, ph) <= MAX_SIDE
        assert pw <= w and ph <= h  # never enlarged
        if max(w, h) > MAX_SIDE:
            assert max(pw, ph) == MAX_SIDE
            assert abs(pw / ph - w / h) < 0.05
        else:
            assert (pw, ph) == (w, h)
    m = json.load(open(os.path.join(packed, "manifest.json")))
    assert m["samples"] == m["source_samples"] == len(want) and m["skipped"] == 0
    assert m["classes"] == ["class00", "class01", "class02"]
    assert [s["samples"] for s in m["shards"]] == [5, 5, 5, 5, 2]
    for s in m["shards"]:
        assert os.path.getsize(os.path.join(packed, s["name"])) == s["bytes"]
    assert m["options"]["max_side"] == MAX_SIDE and m["options"]["quality"] == 90
    assert not glob.glob(os.path.join(packed, ".*"))  # no temporary files left


def test_ringfeed_reads_the_shards(folder, packed):
    want, _ = imagefolder_samples(folder)
    spec = os.path.join(packed, "shard-*.tar")
    labels = []
    with ringfeed.Loader(spec, batch_size=4, image_size=32, transform="center",
                         shuffle=False) as ld:
        assert len(ld) == 6
        for batch in ld:
            labels += [int(x) for x in np.asarray(batch[1])]
    assert labels == [lab for _, lab in want]


def test_webdataset_reads_the_shards(folder, packed):
    wds = pytest.importorskip("webdataset")
    want, _ = imagefolder_samples(folder)
    urls = sorted(glob.glob(os.path.join(packed, "shard-*.tar")))
    got = [(s["__key__"], int(s["cls"])) for s in wds.WebDataset(urls, shardshuffle=False)]
    assert got == [("%06d" % i, lab) for i, (_, lab) in enumerate(want)]


def test_worker_count_and_shuffle_do_not_change_bytes(folder, packed, tmp_path):
    pack(folder, str(tmp_path / "w1"), "--max-side", MAX_SIDE, "--shard-count", 5,
         "--workers", 1)
    assert shard_bytes(str(tmp_path / "w1")) == shard_bytes(packed)
    a, b = str(tmp_path / "s1"), str(tmp_path / "s3")
    pack(folder, a, "--max-side", MAX_SIDE, "--shard-count", 4, "--shuffle", "--seed", 7,
         "--workers", 1)
    pack(folder, b, "--max-side", MAX_SIDE, "--shard-count", 4, "--shuffle", "--seed", 7,
         "--workers", 3)
    assert shard_bytes(a) == shard_bytes(b)
    want, _ = imagefolder_samples(folder)
    labs = [int(r[3]) for r in members(a) if r[2] == "cls"]
    assert sorted(labs) == sorted(lab for _, lab in want)
    assert labs != [lab for _, lab in want]  # shuffled


def test_resume_gives_the_bytes_of_an_uninterrupted_run(folder, packed, tmp_path):
    out = str(tmp_path / "r")
    args = ("--max-side", MAX_SIDE, "--shard-count", 5, "--workers", 2)
    r = run_pack(folder, out, *args, "--stop-after-shards", 2)
    assert r.returncode == 3, r.stderr
    assert sorted(os.listdir(out)) == ["shard-000000.tar", "shard-000001.tar"]
    # a half-written shard of the interrupted run is replaced
    with open(os.path.join(out, ".shard-000002.tar.tmp"), "wb") as f:
        f.write(b"partial")
    before = os.path.getmtime(os.path.join(out, "shard-000000.tar"))
    pack(folder, out, *args)
    assert os.path.getmtime(os.path.join(out, "shard-000000.tar")) == before  # skipped
    assert shard_bytes(out) == shard_bytes(packed)
    assert open(os.path.join(out, "manifest.json")).read().replace(out, "") == \
        open(os.path.join(packed, "manifest.json")).read().replace(packed, "")
    assert not glob.glob(os.path.join(out, ".*"))


def test_bad_source_file_raise_and_skip(folder, tmp_path):
    src = str(tmp_path / "src")
    shutil.copytree(folder, src)
    bad = os.path.join(src, "class01", "img0003.jpg")
    data = open(bad, "rb").read()
    with open(bad, "wb") as f:
        f.write(data[:len(data) // 3])  # truncated
    r = run_pack(src, str(tmp_path / "raise"), "--max-side", MAX_SIDE)
    assert r.returncode == 1
    assert bad in r.stderr
    assert not os.path.exists(os.path.join(str(tmp_path / "raise"), "manifest.json"))

    out = str(tmp_path / "skip")
    r = run_pack(src, out, "--max-side", MAX_SIDE, "--on-error", "skip", "--shard-count", 100)
    assert r.returncode == 0 and bad in r.stderr
    m = json.load(open(os.path.join(out, "manifest.json")))
    want, _ = imagefolder_samples(src)
    pos = [p for p, _ in want].index(bad)
    assert m["skipped"] == 1 and m["samples"] == len(want) - 1
    assert m["skipped_samples"][0]["key"] == pos
    assert m["skipped_samples"][0]["source"] == bad and m["skipped_samples"][0]["reason"]
    keys = [r[1] for r in members(out) if r[2] == "jpg"]
    assert keys == ["%06d" % i for i in range(len(want)) if i != pos]


def test_keep_original_if_smaller(folder, tmp_path):
    out = str(tmp_path / "keep")
    pack(folder, out, "--max-side", 1000, "--keep-original-if-smaller")
    want, _ = imagefolder_samples(folder)
    jpgs = [r[3] for r in members(out) if r[2] == "jpg"]
    assert jpgs == [open(p, "rb").read() for p, _ in want]


def test_tar_source(packed, tmp_path):
    out = str(tmp_path / "again")
    pack(os.path.join(packed, "shard-*.tar"), out, "--max-side", 32, "--shard-count", 100)
    rows = members(out)
    assert [r[3] for r in rows if r[2] == "cls"] == \
        [r[3] for r in members(packed) if r[2] == "cls"]
    assert all(max(Image.open(io.BytesIO(r[3])).size) <= 32 for r in rows if r[2] == "jpg")


def test_python_module_help():
    r = subprocess.run([sys.executable, "-m", "ringfeed.pack", "--help"], capture_output=True,
                       text=True, env=child_env(), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "usage: ringfeed-pack" in r.stdout and "--max-side" in r.stdout
    assert PKG_DIR


def test_shard_size_resume_with_skipped_samples(folder, tmp_path):
    """--shard-size: every shard but the last holds at least that many bytes;
    a stopped run resumed gives the bytes and manifest of an uninterrupted
    one, bad samples (skipped) included."""
    src = str(tmp_path / "src")
    shutil.copytree(folder, src)
    want, _ = imagefolder_samples(src)
    for i in (4, 9, len(want) - 1):  # bad ones, among them the last sample
        with open(want[i][0], "wb") as f:
            f.write(b"not a picture")
    args = ("--max-side", MAX_SIDE, "--shard-size", "8k", "--on-error", "skip")
    full, part = str(tmp_path / "full"), str(tmp_path / "part")
    pack(src, full, *args, "--workers", 2)
    m = json.load(open(os.path.join(full, "manifest.json")))
    assert len(m["shards"]) >= 3
    assert all(s["bytes"] >= 8192 for s in m["shards"][:-1])
    assert m["skipped"] == 3 and m["samples"] == len(want) - 3
    assert [s["key"] for s in m["skipped_samples"]] == [4, 9, len(want) - 1]
    r = run_pack(src, part, *args, "--workers", 1, "--stop-after-shards", 2)
    assert r.returncode == 3, r.stderr
    pack(src, part, *args, "--workers", 3)
    assert shard_bytes(part) == shard_bytes(full)
    mp = json.load(open(os.path.join(part, "manifest.json")))
    for s in mp["skipped_samples"]:
        s["reason"] = None
    for s in m["skipped_samples"]:
        s["reason"] = None
    del mp["source"], m["source"]
    assert mp == m
    labs = [int(r[3]) for r in members(full) if r[2] == "cls"]
    assert labs == [lab for i, (_, lab) in enumerate(want) if i not in (4, 9, len(want) - 1)]
    r = run_pack(src, str(tmp_path / "x"), "--shard-size", "8k", "--shard-count", 3)
    assert r.returncode == 2
