"""ringfeed-pack: where each sample came from, and under which key.

The manifest records each sample's source beside the shard's index (a
folder's path relative to it, a list file's path, "shard.tar:key.ext");
--keep-keys keeps the source's own keys where they are unique and tar-safe
(numbered otherwise, with no two keys equal), also through a resume with
--shard-size. A run prints a progress line (rate, time left) and a summary;
a bad sample under --on-error raise stops the run with an error status
wherever it falls in its shard.
"""

import json
import os
import shutil

import numpy as np
import pytest

import ringfeed
from packhelpers import members, needs_pack, pack, run_pack
from rfhelpers import imagefolder_samples, pil_folder, write_jpeg

PIL = pytest.importorskip("PIL")

pytestmark = needs_pack


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("keysrc") / "root")
    pil_folder(root, 2, 5, 70, 50, seed=4)
    return root


def rel_keys(folder):
    want, _ = imagefolder_samples(folder)
    return [os.path.splitext(os.path.relpath(p, folder))[0] for p, _ in want]


def test_sources_recorded(folder, tmp_path):
    out = str(tmp_path / "o")
    m = pack(folder, out, "--max-side", 32, "--shard-count", 4, "--shuffle", "--seed", 3)
    want, _ = imagefolder_samples(folder)
    rel = [os.path.relpath(p, folder) for p, _ in want]
    got = sum((s["sources"] for s in m["shards"]), [])
    labels = [e[1] for s in m["shards"] for e in s["index"]]
    assert sorted(got) == sorted(rel) and got != rel  # shuffled, each once
    assert [want[rel.index(g)][1] for g in got] == labels
    assert all(len(s["sources"]) == len(s["index"]) for s in m["shards"])
    assert m["source_kind"] == "folder"
    # a tar source: "shard:member"
    again = str(tmp_path / "again")
    m2 = pack(os.path.join(out, "shard-*.tar"), again, "--max-side", 16)
    first = m2["shards"][0]["sources"][0]
    assert first == os.path.join(out, "shard-000000.tar") + ":000000.jpg"
    assert m2["source_kind"] == "tar"


def test_keep_keys_folder(folder, tmp_path):
    out = str(tmp_path / "k")
    r = run_pack(folder, out, "--max-side", 32, "--keep-keys", "--shard-count", 3)
    assert r.returncode == 0, r.stderr
    keys = rel_keys(folder)
    assert "keys: %d of the source's own kept, 0 numbered" % len(keys) in r.stderr
    jpg = [r[1] for r in members(out) if r[2] == "jpg"]
    assert jpg == keys  # class00/img0000, ...: folders in the key, as webdataset reads them
    wds = pytest.importorskip("webdataset")
    import glob
    urls = sorted(glob.glob(os.path.join(out, "shard-*.tar")))
    assert [s["__key__"] for s in wds.WebDataset(urls, shardshuffle=False)] == keys
    want, _ = imagefolder_samples(folder)
    with ringfeed.Loader(os.path.join(out, "*.tar"), batch_size=32, image_size=16,
                         shuffle=False) as ld:
        (_, y), = list(ld)
        assert list(np.asarray(y)) == [lab for _, lab in want]
        assert ld.stats()["shards_from_manifest"] == 4


def write_list(folder, paths):
    """A list file in folder naming paths (relative to it, or absolute), each
    a small JPEG made here, labels 0, 1, 2, ...; its path."""
    lines = []
    for i, p in enumerate(paths):
        full = p if os.path.isabs(p) else os.path.join(folder, p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if not os.path.exists(full):
            write_jpeg(full, 30, 20, i)
        lines.append("%s\t%d\n" % (p, i % 3))
    path = os.path.join(folder, "list.txt")
    with open(path, "w") as f:
        f.writelines(lines)
    return path


def test_keep_keys_falls_back_where_it_must(tmp_path):
    """Repeated keys, keys webdataset would split elsewhere, too long for a
    header, absolute, or equal to a numbered sample's key: those samples
    are numbered, the others keep theirs, and no two keys are equal."""
    outside = str(tmp_path / "elsewhere" / "z.jpg")
    paths = ["img/dup.jpg", "img/ok1.jpg", "img/we.ird.jpg", "000003.jpg",
             "d/" + "x" * 120 + ".jpg", "__meta.jpg", outside, "img/dup.jpg", "img/ok2.jpg",
             "sub/ok3.jpg", "000001.jpg"]
    lst = write_list(str(tmp_path / "l"), paths)
    out = str(tmp_path / "o")
    r = run_pack(lst, out, "--keep-keys", "--max-side", 16)
    assert r.returncode == 0, r.stderr
    keys = [r[1] for r in members(out) if r[2] == "jpg"]
    assert len(keys) == len(set(keys)) == 11
    assert keys[1] == "img/ok1" and keys[8] == "img/ok2" and keys[9] == "sub/ok3"
    for p in (0, 2, 4, 5, 6, 7):
        assert keys[p] == "%06d" % p, (p, keys[p])
    # "000003" is position 3's own number: kept; "000001" would be position
    # 1's number, but position 1 keeps "img/ok1", so it stays
    assert keys[3] == "000003" and keys[10] == "000001"
    assert "keys: 5 of the source's own kept, 6 numbered" in r.stderr
    m = json.load(open(os.path.join(out, "manifest.json")))
    srcs = m["shards"][0]["sources"]
    assert srcs[1] == "img/ok1.jpg" and srcs[6] == outside
    # a kept "000000" where position 0 falls back must fall back too
    lst = write_list(str(tmp_path / "c"), ["we.ird.jpg", "000000.jpg", "fine.jpg"])
    out2 = str(tmp_path / "o2")
    r = run_pack(lst, out2, "--keep-keys", "--max-side", 16)
    assert r.returncode == 0, r.stderr
    assert [r[1] for r in members(out2) if r[2] == "jpg"] == ["000000", "000001", "fine"]


def test_keep_keys_resume_with_shard_size(folder, tmp_path):
    one = str(tmp_path / "one")
    args = ("--max-side", 32, "--keep-keys", "--shard-size", "3k", "--workers", 2)
    pack(folder, one, *args)
    out = str(tmp_path / "two")
    r = run_pack(folder, out, *args, "--stop-after-shards", 2)
    assert r.returncode == 3, r.stderr
    pack(folder, out, *args)
    assert members(out) == members(one)
    a = json.load(open(os.path.join(one, "manifest.json")))
    b = json.load(open(os.path.join(out, "manifest.json")))
    assert a["shards"] == b["shards"] and len(a["shards"]) > 2


def test_progress_summary_and_last_sample_of_a_shard_bad(folder, tmp_path):
    r = run_pack(folder, str(tmp_path / "x" / "y"), "--max-side", 32)
    assert r.returncode == 0
    n = len(imagefolder_samples(folder)[0])
    assert "%d/%d images, " % (n, n) in r.stderr and " images/s, ETA " in r.stderr
    assert "%d samples in 1 shard, " % n in r.stderr and "0 errors skipped" in r.stderr
    # the bad picture closes its shard (position 3 of shards of 4): still an error
    src = str(tmp_path / "src")
    shutil.copytree(folder, src)
    want, _ = imagefolder_samples(src)
    bad = want[3][0]
    data = open(bad, "rb").read()
    with open(bad, "wb") as f:
        f.write(data[:len(data) // 2])
    out = str(tmp_path / "raise")
    r = run_pack(src, out, "--max-side", 32, "--shard-count", 4)
    assert r.returncode == 1, r.stderr
    assert bad in r.stderr
    assert not os.path.exists(os.path.join(out, "manifest.json"))
    assert not os.path.exists(os.path.join(out, "shard-000000.tar"))
    r = run_pack(src, str(tmp_path / "skip"), "--max-side", 32, "--shard-count", 4,
                 "--on-error", "skip")
    assert r.returncode == 0 and "1 errors skipped" in r.stderr



def test_remote_source_refused_with_a_reason(folder, tmp_path):
    """The packer reads samples from local files: shards behind a URL are
    refused at once, saying what to do, and the URL (which may hold a
    secret) is not repeated."""
    for src in ("s3://bucket/train-{000..009}.tar", "https://user:pw@host/t.tar?sig=abc",
                "http://127.0.0.1:9/x.tar"):
        r = run_pack(src, str(tmp_path / "o"))
        assert r.returncode == 2, r.stderr
        assert "the source is remote" in r.stderr and "copy the shards" in r.stderr
        assert "pw" not in r.stderr and "sig=" not in r.stderr and "bucket" not in r.stderr
        assert not os.path.exists(str(tmp_path / "o"))
