"""ringfeed-pack --part K/N and `ringfeed-pack merge OUT`: a pack made on N
machines is the pack one machine makes (the same samples under the same
keys, labels and pictures, in the same order, unshuffled or shuffled), and
loads the same, from the merged manifest's index. merge refuses a pack
that is not whole (a part missing, named with its command; a shard missing
or of another size; a part made with other options). A part stopped and run
again resumes as the one-machine packer does.
"""

import glob
import json
import os

import numpy as np
import pytest

import ringfeed
from packhelpers import needs_pack, pack, run_pack
from rfhelpers import pil_folder

PIL = pytest.importorskip("PIL")

pytestmark = needs_pack

ARGS = ("--max-side", 40, "--shard-count", 3)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("partsrc") / "root")
    pil_folder(root, 3, 6, 80, 60, seed=21)
    return root


def samples(out):
    """[(key, ext, picture bytes, label)] of every sample of the .tar shards
    in name order."""
    import tarfile
    rows = []
    for p in sorted(glob.glob(os.path.join(out, "*.tar"))):
        with tarfile.open(p) as t:
            got = {}
            for m in t.getmembers():
                key, ext = m.name.split(".", 1)
                got.setdefault(key, {})[ext] = t.extractfile(m).read()
                if ext == "cls":
                    pic = [e for e in got[key] if e != "cls"][0]
                    rows.append((key, pic, got[key][pic], int(got[key]["cls"])))
    return rows


def pack_parts(folder, out, n, *args):
    for k in range(n):
        r = run_pack(folder, out, "--part", "%d/%d" % (k, n), *args)
        assert r.returncode == 0, r.stderr
        assert "part %d of %d: " % (k, n) in r.stderr
    r = run_pack_merge(out)
    assert r.returncode == 0, r.stderr
    return json.load(open(os.path.join(out, "manifest.json")))


def run_pack_merge(out, *args):
    import ringfeed.pack
    return ringfeed.pack.run(["merge", *args, out], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("extra", [(), ("--shuffle", "--seed", "5", "--store", "auto")])
def test_parts_then_merge_is_the_one_machine_pack(folder, tmp_path, extra):
    one = str(tmp_path / "one")
    m1 = pack(folder, one, *ARGS, *extra)
    parts = str(tmp_path / "parts")
    m3 = pack_parts(folder, parts, 3, *ARGS, *extra)
    assert samples(parts) == samples(one)
    for k in ("samples", "source_samples", "skipped", "classes", "nclasses", "stored", "options"):
        assert m3[k] == m1[k], k
    assert m3["parts"] == 3
    names = [s["name"] for s in m3["shards"]]
    assert names == sorted(os.path.basename(p) for p in glob.glob(os.path.join(parts, "*.tar")))
    assert names[0] == "shard-p0of3-000000.tar"
    # per shard the sources of its samples, in order: the one-machine pack's, concatenated
    assert sum((s["sources"] for s in m3["shards"]), []) == \
        sum((s["sources"] for s in m1["shards"]), [])
    kw = dict(batch_size=4, image_size=24, transform="random_resized_crop", flip=True, seed=2,
              num_workers=2, shuffle=True)
    with ringfeed.Loader(os.path.join(parts, "*.tar"), **kw) as a, \
            ringfeed.Loader(os.path.join(one, "*.tar"), **kw) as b:
        for (xa, ya), (xb, yb) in zip(a, b):
            assert np.array_equal(np.asarray(ya), np.asarray(yb))
            assert np.array_equal(np.asarray(xa), np.asarray(xb))
        assert a.stats()["shards_from_manifest"] == len(m3["shards"])


def test_merge_names_the_missing_part(folder, tmp_path):
    out = str(tmp_path / "p")
    for k in (0, 2):
        assert run_pack(folder, out, "--part", "%d/3" % k, *ARGS).returncode == 0
    r = run_pack_merge(out)
    assert r.returncode == 1
    assert "part 1 of 3 is missing" in r.stderr and "manifest-p1of3.json" in r.stderr
    assert "--part 1/3" in r.stderr
    assert not os.path.exists(os.path.join(out, "manifest.json"))
    r = run_pack_merge(str(tmp_path / "nothing"))
    assert r.returncode == 1 and "cannot open" in r.stderr


def test_merge_refuses_a_pack_that_is_not_whole(folder, tmp_path):
    out = str(tmp_path / "p")
    for k in range(3):
        assert run_pack(folder, out, "--part", "%d/3" % k, *ARGS).returncode == 0
    shard = os.path.join(out, "shard-p1of3-000001.tar")
    data = open(shard, "rb").read()
    with open(shard, "ab") as f:
        f.write(b"\0" * 512)
    r = run_pack_merge(out)
    assert r.returncode == 1 and "shard-p1of3-000001.tar" in r.stderr and "stated" in r.stderr
    os.remove(shard)
    r = run_pack_merge(out)
    assert r.returncode == 1 and "shard-p1of3-000001.tar" in r.stderr and "missing" in r.stderr
    with open(shard, "wb") as f:
        f.write(data)
    assert run_pack_merge(out).returncode == 0
    # part 2 again, with another quality: not the same pack
    os.remove(os.path.join(out, "manifest-p2of3.json"))
    for p in glob.glob(os.path.join(out, "shard-p2of3-*")):
        os.remove(p)
    assert run_pack(folder, out, "--part", "2/3", *ARGS, "--quality", 50).returncode == 0
    r = run_pack_merge(out)
    assert r.returncode == 1 and "manifest-p2of3.json" in r.stderr and "options" in r.stderr
    # a part manifest of another count
    os.rename(os.path.join(out, "manifest-p2of3.json"), os.path.join(out, "manifest-p2of4.json"))
    r = run_pack_merge(out)
    assert r.returncode == 1 and "different counts" in r.stderr
    # a manifest that is not JSON
    os.remove(os.path.join(out, "manifest-p2of4.json"))
    with open(os.path.join(out, "manifest-p2of3.json"), "w") as f:
        f.write('{"format": "ringfeed-pack 1", "shards": [')
    r = run_pack_merge(out)
    assert r.returncode == 1 and "manifest-p2of3.json" in r.stderr


def test_merge_without_shards(folder, tmp_path):
    """The shards already in object storage: the part manifests alone are
    merged into the manifest a merge beside the shards writes."""
    out = str(tmp_path / "p")
    for k in range(2):
        assert run_pack(folder, out, "--part", "%d/2" % k, *ARGS).returncode == 0
    only = tmp_path / "manifests"
    only.mkdir()
    for k in range(2):
        name = "manifest-p%dof2.json" % k
        (only / name).write_bytes(open(os.path.join(out, name), "rb").read())
    r = run_pack_merge(str(only))
    assert r.returncode == 1 and "shard-p0of2-000000.tar" in r.stderr and "missing" in r.stderr
    r = run_pack_merge(str(only), "--without-shards")
    assert r.returncode == 0, r.stderr
    assert run_pack_merge(out).returncode == 0
    assert (only / "manifest.json").read_bytes() == open(os.path.join(out, "manifest.json"),
                                                         "rb").read()


def test_a_part_run_again_resumes(folder, tmp_path):
    whole = str(tmp_path / "whole")
    assert run_pack(folder, whole, "--part", "1/3", *ARGS).returncode == 0
    out = str(tmp_path / "resumed")
    r = run_pack(folder, out, "--part", "1/3", *ARGS, "--stop-after-shards", 1)
    assert r.returncode == 3, r.stderr
    assert sorted(os.listdir(out)) == ["shard-p1of3-000000.tar"]
    before = os.path.getmtime(os.path.join(out, "shard-p1of3-000000.tar"))
    r = run_pack(folder, out, "--part", "1/3", *ARGS)
    assert r.returncode == 0, r.stderr
    assert os.path.getmtime(os.path.join(out, "shard-p1of3-000000.tar")) == before  # kept
    for p in glob.glob(os.path.join(whole, "*.tar")):
        assert open(p, "rb").read() == open(os.path.join(out, os.path.basename(p)), "rb").read()
    a = json.load(open(os.path.join(whole, "manifest-p1of3.json")))
    b = json.load(open(os.path.join(out, "manifest-p1of3.json")))
    del a["source"], b["source"]
    assert a == b


def test_part_usage(folder, tmp_path):
    for bad in ("3/3", "-1/3", "1/0", "a/3", "1/3x", "2"):
        r = run_pack(folder, str(tmp_path / "x"), "--part", bad)
        assert r.returncode == 2 and "--part" in r.stderr, bad
    # more parts than samples: the empty parts merge too
    out = str(tmp_path / "many")
    n = 20
    m = pack_parts(folder, out, n, "--max-side", 16)
    assert m["samples"] == 18 and m["parts"] == n


def test_links_planted_in_out_are_not_written_through(folder, tmp_path):
    """The packer's files in OUT are made without following a link: one
    planted at the name of a shard being written, of the manifest being
    written or of the merged manifest fails the run, and the file it points
    to is untouched."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = str(tmp_path / "links")
    os.makedirs(out)
    os.symlink(str(victim), os.path.join(out, ".shard-000000.tar.tmp"))
    r = run_pack(folder, out, *ARGS)
    assert r.returncode == 1 and ".shard-000000.tar.tmp" in r.stderr, r.stderr
    assert victim.read_text() == "keep me"
    os.unlink(os.path.join(out, ".shard-000000.tar.tmp"))
    os.symlink(str(victim), os.path.join(out, ".manifest.json.tmp"))
    r = run_pack(folder, out, *ARGS)
    assert r.returncode == 1 and "cannot write" in r.stderr, r.stderr
    assert victim.read_text() == "keep me"
    assert not os.path.exists(os.path.join(out, "manifest.json"))

    parts = str(tmp_path / "parts")
    merged = pack_parts(folder, parts, 3)
    os.remove(os.path.join(parts, "manifest.json"))
    os.symlink(str(victim), os.path.join(parts, ".manifest.json.tmp"))
    r = run_pack_merge(parts)
    assert r.returncode == 1 and "cannot write" in r.stderr, r.stderr
    assert victim.read_text() == "keep me"
    os.unlink(os.path.join(parts, ".manifest.json.tmp"))
    assert not os.path.exists(os.path.join(parts, "manifest.json"))
    assert run_pack_merge(parts).returncode == 0
    with open(os.path.join(parts, "manifest.json")) as f:
        assert json.load(f) == merged
