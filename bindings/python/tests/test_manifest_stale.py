"""A manifest.json left beside shards rewritten since it was written.

Shards packed by ringfeed-pack, then one relabelled at the same size (the
text of one .cls member, one digit for another: same size, same headers,
same first and last member), the old manifest.json kept:
- local: the loader gives the shard's labels (the header walk's index, in
  the batches too), stats count the shard in shards_manifest_mismatched,
  and the other shards still come from the manifest;
- remote (s3:// on moto through the counting proxy): the relabelled shard's
  samples are never delivered with the manifest's labels: they fail with
  an error naming the URL and manifest.json once the shard lands, stats
  count it in remote.manifest.mismatched, and the batches before it come
  with the right labels.
The packer writes each shard's SHA-256 into the manifest (hashlib's).
"""

import hashlib
import json
import os
import shutil

import pytest

import packhelpers
import rfhelpers
import rfservers
import ringfeed

pytestmark = packhelpers.needs_pack

PER_SHARD = 10
OPTS = dict(batch_size=5, image_size=24, transform="center", num_workers=2)


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """40 pictures of 4 classes packed into 4 shards of 10; one more copy
    of them with shard 1 relabelled (the manifest left as it was)."""
    base = tmp_path_factory.mktemp("stale")
    src = rfhelpers.pil_folder(str(base / "src"), 4, 10, 80, 60, seed=5)
    out = str(base / "out")
    man = packhelpers.pack(src, out, "--max-side", "40", "--shard-count", str(PER_SHARD),
                           "--workers", "2")
    names = [s["name"] for s in man["shards"]]
    stale = str(base / "stale")
    shutil.copytree(out, stale)
    i, old, new = _relabel(os.path.join(stale, names[1]), man["shards"][1])
    return out, stale, names, PER_SHARD + i, old, new


def _relabel(path, entry):
    """The .cls member of the shard's third sample: its digit changed.
    (sample, old label, new label)."""
    row = entry["index"][2]
    off = [row[k + 1] for k in range(2, len(row), 3) if row[k] == "cls"][0]
    with open(path, "r+b") as f:
        f.seek(off)
        old = int(f.read(1))
        new = (old + 1) % 4
        f.seek(off)
        f.write(b"%d" % new)
    assert row[1] == old
    return 2, old, new


def _labels(ld):
    """Each sample's label as the batches deliver it, by sample index."""
    out = {}
    for _, labels, idx in ld.iter_with_indices():
        out.update(zip(idx.tolist(), rfhelpers.as_numpy(labels).tolist()))
    return out


def test_packer_writes_each_shards_digest(packed):
    out, _, names, _, _, _ = packed
    man = json.load(open(os.path.join(out, "manifest.json")))
    for s in man["shards"]:
        with open(os.path.join(out, s["name"]), "rb") as f:
            assert s["sha256"] == hashlib.sha256(f.read()).hexdigest()


def test_local_relabelled_shard_is_walked(packed, tmp_path):
    _, stale, names, i, old, new = packed
    bare = tmp_path / "bare"
    bare.mkdir()
    for n in names:
        shutil.copy(os.path.join(stale, n), bare / n)
    with ringfeed.Loader(str(bare / "shard-*.tar"), shuffle=False, **OPTS) as ld:
        walked = _labels(ld)
    assert walked[i] == new
    with ringfeed.Loader(os.path.join(stale, "shard-*.tar"), shuffle=False, **OPTS) as ld:
        assert ld.sample_label(i) == new
        got = _labels(ld)
        st = ld.stats()
    assert got == walked
    assert st["shards_from_manifest"] == 3
    assert st.get("shards_manifest_mismatched") == 1


@pytest.mark.skipif(not rfservers.have_moto(),
                    reason="moto[server] and boto3 not importable (make deps)")
def test_remote_relabelled_shard_never_gives_the_manifests_labels(packed, tmp_path,
                                                                   monkeypatch):
    out, stale, names, i, old, new = packed
    with ringfeed.Loader(os.path.join(out, "shard-*.tar"), shuffle=False, **OPTS) as ld:
        right = _labels(ld)
    right[i] = new
    with rfservers.moto_s3(buckets=("data",)) as srv:
        srv.upload("data", "stale/", [os.path.join(stale, n) for n in names] +
                   [os.path.join(stale, "manifest.json")])
        with rfservers.fault_proxy(srv.endpoint, tmp_path / "log") as px:
            for k, v in srv.env(endpoint=px.url).items():
                monkeypatch.setenv(k, v)
            url = "s3://data/stale/" + names[1]
            got = {}
            with ringfeed.Loader("s3://data/stale/shard-*.tar", shuffle=False,
                                 cache_dir=str(tmp_path / "c"), **OPTS) as ld:
                with pytest.raises(ringfeed.RingfeedError) as e:
                    for _, labels, idx in ld.iter_with_indices():
                        got.update(zip(idx.tolist(), rfhelpers.as_numpy(labels).tolist()))
                st = ld.stats()
    assert url in str(e.value) and "does not match manifest.json" in str(e.value), e.value
    # shard 0 came, with its labels; nothing of shard 1
    assert got == {s: right[s] for s in range(PER_SHARD)}
    m = st["remote"]["manifest"]
    assert st["shards_from_manifest"] == 4 and m["mismatched"] == 1, m
