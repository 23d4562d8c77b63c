"""ringfeed-pack from WebDataset shards keeps what a webdataset user keeps:
the members besides the picture and the .cls label (captions, metadata) are
copied unchanged into the output sample, all of them by default, only those
named by --extras txt,json, none with --extras none. webdataset then sees the
caption bytes of the source under the new keys; the loader returns them as
extras, the same with the manifest's index as with the header walk.
"""

import glob
import io
import json
import os
import shutil
import tarfile

import numpy as np
import pytest

import ringfeed
import packhelpers
import ringfeed.pack
from packhelpers import needs_pack, run_pack as run
from rfhelpers import photo_like

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

pytestmark = needs_pack

N = 13


def add(t, name, data):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    t.addfile(ti, io.BytesIO(data))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """2 shards of captioned samples: dir/key.jpg, .cls, .txt (all but
    every fifth), .json; and the per-sample (label, txt, json) in order."""
    d = tmp_path_factory.mktemp("wdsrc")
    want = []
    for s in range(2):
        with tarfile.open(str(d / ("src-%d.tar" % s)), "w") as t:
            for i in range(s * 7, min(N, s * 7 + 7)):
                key = "pics/sample_%03d" % i
                buf = io.BytesIO()
                Image.fromarray(photo_like(70 + i, 50, i), "RGB").save(buf, "JPEG", quality=90)
                add(t, key + ".jpg", buf.getvalue())
                add(t, key + ".cls", b"%d" % (i % 3))
                txt = ("caption %d: \u00e9t\u00e9 \n" % i).encode() if i % 5 else None
                if txt:
                    add(t, key + ".txt", txt)
                meta = json.dumps({"id": i, "w": 70 + i}).encode()
                add(t, key + ".json", meta)
                want.append((i % 3, txt, meta))
    return os.path.join(str(d), "src-{0..1}.tar"), want


def members(out):
    """[(key, ext, bytes)] of every member, in order."""
    return [r[1:] for r in packhelpers.members(out)]


def by_key(rows):
    out = {}
    for key, ext, data in rows:
        out.setdefault(key, {})[ext] = data
    return [out[k] for k in sorted(out)]


def test_all_extras_by_default(source, tmp_path):
    src, want = source
    out = str(tmp_path / "all")
    r = run(src, out, "--max-side", 32, "--shard-count", 5)
    assert r.returncode == 0, r.stderr
    samples = by_key(members(out))
    assert len(samples) == N
    for s, (label, txt, meta) in zip(samples, want):
        assert set(s) == {"jpg", "cls", "json"} | ({"txt"} if txt else set())
        assert int(s["cls"]) == label and s["json"] == meta and s.get("txt") == txt
    m = json.load(open(os.path.join(out, "manifest.json")))
    assert m["options"]["extras"] == ["json", "txt"]


def test_named_extras_and_none(source, tmp_path):
    src, want = source
    out = str(tmp_path / "txt")
    assert run(src, out, "--extras", "TXT", "--shard-count", 100).returncode == 0
    samples = by_key(members(out))
    assert [s.get("txt") for s in samples] == [w[1] for w in want]
    assert not any("json" in s for s in samples)
    out = str(tmp_path / "none")
    assert run(src, out, "--extras", "none").returncode == 0
    assert all(set(s) == {"jpg", "cls"} for s in by_key(members(out)))
    for bad in ("jpg", "cls", "txt,txt", "a/b", ""):
        r = run(src, str(tmp_path / "bad"), "--extras", bad)
        assert r.returncode == 2 and "--extras" in r.stderr, (bad, r.stderr)


def test_extras_on_a_folder_refused(tmp_path):
    d = tmp_path / "f" / "c0"
    d.mkdir(parents=True)
    Image.fromarray(photo_like(20, 20, 1), "RGB").save(str(d / "a.jpg"))
    r = run(str(tmp_path / "f"), str(tmp_path / "o"), "--extras", "txt")
    assert r.returncode == 2 and "tar" in r.stderr
    assert run(str(tmp_path / "f"), str(tmp_path / "o2")).returncode == 0  # default: fine


def test_webdataset_sees_the_captions(source, tmp_path):
    wds = pytest.importorskip("webdataset")
    src, want = source
    out = str(tmp_path / "wds")
    assert run(src, out, "--shard-count", 4, "--shuffle", "--seed", 2).returncode == 0
    got = {int(s["__key__"]): s for s in
           wds.WebDataset(sorted(glob.glob(os.path.join(out, "shard-*.tar"))),
                          shardshuffle=False)}
    assert len(got) == N
    # shuffled: match each output sample to its source by its json metadata
    for s in got.values():
        label, txt, meta = want[json.loads(s["json"])["id"]]
        assert s["json"] == meta and s.get("txt") == txt and int(s["cls"]) == label


def test_loader_extras_with_and_without_manifest(source, tmp_path):
    src, want = source
    out = str(tmp_path / "ld")
    assert run(src, out, "--shard-count", 4).returncode == 0
    bare = str(tmp_path / "bare")
    os.makedirs(bare)
    for p in glob.glob(os.path.join(out, "*.tar")):
        shutil.copy(p, bare)
    res = []
    for d in (out, bare):
        kw = dict(batch_size=4, image_size=16, transform="center", shuffle=False,
                  extras=("txt", "json"), output="numpy")
        with ringfeed.Loader(os.path.join(d, "shard-*.tar"), **kw) as ld:
            rows = []
            for images, labels, extras in ld:
                rows += [(int(lab), x.get("txt"), x.get("json"), np.asarray(im).tobytes())
                         for im, lab, x in zip(images, labels, extras)]
            res.append((rows, ld.stats()["shards_from_manifest"]))
    assert res[0][0] == res[1][0]
    assert res[0][1] == 4 and res[1][1] == 0
    assert [r[:3] for r in res[0][0]] == want
