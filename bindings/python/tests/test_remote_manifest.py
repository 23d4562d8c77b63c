"""Remote shards with ringfeed-pack's manifest.json beside them (s3:// on a
moto server checking SigV4, through the counting proxy of rfproxy.py).

What is checked: with an empty cache the index comes from the manifest
(stats: every shard from it) and is the local walk's (sample names,
labels, batches; also unlabeled); no shard is fetched to build it, and the
first batch waits for the shards it needs only; a shard whose headers are
not where the manifest says (its samples swapped, same size) fails its
samples with an error naming the URL and manifest.json, the others are
delivered as from local disk (never a byte read at the manifest's
offsets), and it is not fetched again at the next epoch; without a manifest (404), or with one that does not parse, the
shards are indexed as before, and stats say why.
"""

import os
import shutil
import time

import numpy as np
import pytest

import packhelpers
import rfhelpers
import rfservers
import ringfeed

pytestmark = [
    pytest.mark.skipif(not rfservers.have_moto(),
                       reason="moto[server] and boto3 not importable (make deps)"),
    packhelpers.needs_pack,
]

PER_SHARD = 10
OPTS = dict(batch_size=4, image_size=24, transform="center", num_workers=2)


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """40 pictures packed into 4 shards of 10, and the manifest."""
    base = tmp_path_factory.mktemp("rman")
    src = rfhelpers.pil_folder(str(base / "src"), 4, 10, 80, 60, seed=21)
    out = str(base / "out")
    man = packhelpers.pack(src, out, "--max-side", "48", "--shard-count", str(PER_SHARD),
                           "--workers", "2")
    names = [s["name"] for s in man["shards"]]
    assert len(names) == 4
    return out, names, man


@pytest.fixture(scope="module")
def s3(packed):
    out, names, _ = packed
    with rfservers.moto_s3(buckets=("data",)) as srv:
        paths = [os.path.join(out, n) for n in names]
        srv.upload("data", "with/", paths + [os.path.join(out, "manifest.json")])
        srv.upload("data", "bare/", paths)
        yield srv


@pytest.fixture
def proxied(s3, tmp_path, monkeypatch):
    """The loader's S3 requests go through a counting proxy."""
    with rfservers.fault_proxy(s3.endpoint, tmp_path / "log") as px:
        for k, v in s3.env(endpoint=px.url).items():
            monkeypatch.setenv(k, v)
        yield px


def _summary(ld):
    """Sample names (shard file name and key), labels, batch digests and
    sample indices of one epoch."""
    n = ld.num_samples
    names = [os.path.basename(ld.sample_path(i)) for i in range(n)]
    labels = [ld.sample_label(i) for i in range(n)]
    batches = [(rfhelpers.batch_digest(x, l), i.tolist()) for x, l, i in ld.iter_with_indices()]
    return names, labels, batches


def _shard_gets(px):
    return [p for m, p, _ in px.requests() if m == "GET" and p.endswith(".tar")]


def test_cold_index_from_the_manifest_matches_local(packed, proxied, tmp_path):
    out, names, _ = packed
    with ringfeed.Loader(os.path.join(out, "shard-*.tar"), shuffle=True, seed=4, **OPTS) as ld:
        local = _summary(ld)
        assert ld.stats()["shards_from_manifest"] == 4
    src = "s3://data/with/shard-*.tar"
    with ringfeed.Loader(src, shuffle=True, seed=4, cache_dir=str(tmp_path / "c"),
                         **OPTS) as ld:
        got = _summary(ld)
        st = ld.stats()
    assert got == local
    assert st["shards"] == 4 and st["shards_from_manifest"] == 4
    m = st["remote"]["manifest"]
    assert (m["folders"], m["found"], m["absent"], m["failed"], m["shards"],
            m["mismatched"]) == (1, 1, 0, 0, 4, 0), m
    assert m["notes"] == ["s3://data/with/manifest.json: found, 4 shards indexed from it"]
    # the listing (a glob), the shards' HEADs and the manifest's one GET (no
    # HEAD before it; beside the HEADs, the cache holding no kept index),
    # and only then the shards, each once
    log = [(m_, p) for m_, p, _ in proxied.requests()]
    assert log[0] == ("GET", "/data/?encoding-type=url&list-type=2&prefix=with%2Fshard-"), log
    assert sorted(log[1:6]) == sorted([("HEAD", "/data/with/" + n) for n in names] +
                                      [("GET", "/data/with/manifest.json")]), log
    assert sorted(log[6:]) == [("GET", "/data/with/" + n) for n in names], log
    # warm: the shards are in the cache; the manifest indexes them again
    # (its index is not kept), and nothing else is fetched
    with ringfeed.Loader(src, shuffle=True, seed=4, cache_dir=str(tmp_path / "c"),
                         **OPTS) as ld:
        assert _summary(ld) == local
        st = ld.stats()
    assert st["shards_from_manifest"] == 4 and st["remote"]["cache_misses"] == 0
    assert len(_shard_gets(proxied)) == 4


def test_manifest_fetched_beside_the_heads(packed, s3, tmp_path, monkeypatch):
    """From a cache folder without a kept index, the manifest's GET runs
    beside the shards' HEADs: with each of those round trips held 0.5 s by
    the proxy, the GET arrives while the HEADs are held, not after them."""
    hold = 0.5
    with rfservers.fault_proxy(s3.endpoint, tmp_path / "log", hold_s=hold,
                               hold_match=r"^HEAD |/manifest\.json$") as px:
        for k, v in s3.env(endpoint=px.url).items():
            monkeypatch.setenv(k, v)
        with ringfeed.Loader("s3://data/with/shard-{000000..000003}.tar",
                             cache_dir=str(tmp_path / "c"), **OPTS) as ld:
            next(iter(ld))
            st = ld.stats()
        seen = px.arrivals()
    assert st["shards_from_manifest"] == 4
    heads = [t for t, m, _ in seen if m == "HEAD"]
    man = [t for t, m, p in seen if p.endswith("/manifest.json")]
    assert len(heads) == 4 and len(man) == 1, seen
    assert abs(man[0] - min(heads)) < hold / 2, seen


def test_unlabeled_from_the_manifest_matches_local(packed, s3, tmp_path, monkeypatch):
    out, _, _ = packed
    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    kw = dict(OPTS, label=None, shuffle=True, seed=8)
    with ringfeed.Loader(os.path.join(out, "shard-*.tar"), **kw) as ld:
        local = [rfhelpers.batch_digest(x, np.zeros(0)) for x in ld]
    with ringfeed.Loader("s3://data/with/shard-*.tar", cache_dir=str(tmp_path / "c"), **kw) as ld:
        assert [ld.sample_label(i) for i in range(ld.num_samples)] == [-1] * 4 * PER_SHARD
        got = [rfhelpers.batch_digest(x, np.zeros(0)) for x in ld]
        assert ld.stats()["shards_from_manifest"] == 4
    assert got == local


def test_first_batch_fetches_only_its_shard(packed, proxied, tmp_path):
    """A cache that holds one shard: the first batch (in shard 0, unshuffled)
    needs shard 0, and nothing else was fetched before it (before the
    manifest, every shard was fetched to be indexed). While the first batch
    is held, the ring's other slot holds the second (shard 0 too), so the
    shard stays in use and no other is fetched."""
    out, names, _ = packed
    size = max(os.path.getsize(os.path.join(out, n)) for n in names)
    with ringfeed.Loader("s3://data/with/shard-*.tar", shuffle=False, prefetch=2,
                         cache_dir=str(tmp_path / "c"), cache_limit=size + size // 2,
                         **OPTS) as ld:
        it = ld.iter_with_indices()
        first = next(it)
        assert first[2].tolist() == [0, 1, 2, 3]
        assert _shard_gets(proxied) == ["/data/with/" + names[0]]
        del first
        rest = [i.tolist() for _, _, i in it]
    assert sum(rest, []) == list(range(4, 4 * PER_SHARD))
    assert sorted(_shard_gets(proxied)) == ["/data/with/" + n for n in names]


def _swap_first_two_samples(path, entry):
    """The shard with its first two samples' members swapped: same size,
    valid tar, every offset after the first sample's moved."""
    rows = entry["index"]

    def span(row):
        offs = [(row[i + 1], row[i + 2]) for i in range(2, len(row), 3)]
        a = offs[0][0] - 512
        b = offs[-1][0] + (offs[-1][1] + 511) // 512 * 512
        return a, b

    (a0, b0), (a1, b1) = span(rows[0]), span(rows[1])
    assert b0 == a1 and a0 == 0
    data = open(path, "rb").read()
    out = data[a1:b1] + data[a0:b0] + data[b1:]
    assert len(out) == len(data) and out != data
    return out


def _epoch_with_errors(ld, epoch, ref):
    """One epoch under on_error="skip": the samples delivered (each checked
    against ref) and the errors of the batches that failed."""
    seen, errors = [], []
    while True:
        try:
            for x, _, i in ld.iter_with_indices():
                for k, s in enumerate(i.tolist()):
                    assert np.array_equal(rfhelpers.as_numpy(x)[k], ref[s]), s
                    seen.append(s)
            break
        except ringfeed.RingfeedError as e:
            errors.append(str(e))
            state = ld.state_dict()
            if state["epoch"] != epoch:
                break
            ld.load_state_dict(state)
    return seen, errors


def test_shard_not_as_the_manifest_says_fails_its_samples(packed, s3, proxied, tmp_path):
    out, names, man = packed
    bad = 2
    d = tmp_path / "swapped"
    d.mkdir()
    for n in names:
        shutil.copy(os.path.join(out, n), d / n)
    (d / names[bad]).write_bytes(_swap_first_two_samples(os.path.join(out, names[bad]),
                                                         man["shards"][bad]))
    s3.upload("data", "swapped/", [str(d / n) for n in names] + [os.path.join(out,
                                                                              "manifest.json")])
    url = "s3://data/swapped/" + names[bad]
    want = r"%s does not match manifest.json" % url.replace(".", r"\.")
    # raise: the error names the shard's URL and the manifest
    with ringfeed.Loader("s3://data/swapped/shard-*.tar", shuffle=False,
                         cache_dir=str(tmp_path / "c1"), **OPTS) as ld:
        with pytest.raises(ringfeed.RingfeedError, match=want):
            for _ in ld:
                pass
    # skip: a shard that failed has no substitute (they come from the same
    # shard, README), so the batches holding its samples fail, each with
    # that error; every other batch is delivered as from local disk
    with ringfeed.Loader(os.path.join(out, "shard-*.tar"), shuffle=False, **OPTS) as ld:
        ref = {int(s): rfhelpers.as_numpy(x)[k].copy() for x, _, i in ld.iter_with_indices()
               for k, s in enumerate(i.tolist())}
    # two epochs: the shard that failed its check is not fetched again for
    # the second (the same version has the same bytes), which fails alike
    n = len(proxied.requests())
    with ringfeed.Loader("s3://data/swapped/shard-*.tar", shuffle=False, on_error="skip",
                         cache_dir=str(tmp_path / "c2"), **OPTS) as ld:
        epochs = [_epoch_with_errors(ld, 0, ref)]
        ld.set_epoch(1)
        epochs.append(_epoch_with_errors(ld, 1, ref))
        st = ld.stats()
    b = OPTS["batch_size"]
    failed = {s // b for s in range(bad * PER_SHARD, (bad + 1) * PER_SHARD)}
    for seen, errors in epochs:
        assert seen == [s for s in range(4 * PER_SHARD) if s // b not in failed]
        assert len(errors) == len(failed)
        for e in errors:
            assert url in e and "does not match manifest.json" in e, e
    assert st["shards_from_manifest"] == 4 and st["remote"]["manifest"]["mismatched"] == 1
    gets = [p for m, p, _ in proxied.requests()[n:] if m == "GET"]
    assert gets.count("/data/swapped/" + names[bad]) == 1, gets


def test_no_manifest_indexes_as_before(packed, proxied, tmp_path):
    out, names, _ = packed
    with ringfeed.Loader(os.path.join(out, "shard-*.tar"), shuffle=True, seed=6, **OPTS) as ld:
        local = _summary(ld)
    with ringfeed.Loader("s3://data/bare/shard-*.tar", shuffle=True, seed=6,
                         cache_dir=str(tmp_path / "c"), **OPTS) as ld:
        assert sorted(_shard_gets(proxied)) == ["/data/bare/" + n for n in names]
        got = _summary(ld)
        st = ld.stats()
    assert got == local
    assert st["shards_from_manifest"] == 0
    m = st["remote"]["manifest"]
    assert (m["folders"], m["found"], m["absent"], m["shards"]) == (1, 0, 1, 0), m
    assert "404" in m["notes"][0] and m["notes"][0].startswith(
        "s3://data/bare/manifest.json: none"), m
    # a warm cache holds every shard's index: the manifest is not asked for
    n = len(proxied.requests())
    with ringfeed.Loader("s3://data/bare/shard-*.tar", shuffle=True, seed=6,
                         cache_dir=str(tmp_path / "c"), **OPTS) as ld:
        assert _summary(ld) == local
        m = ld.stats()["remote"]["manifest"]
    assert [p for _, p, _ in proxied.requests()[n:] if "manifest" in p] == []
    assert m["notes"] == ["s3://data/bare/manifest.json: not fetched (every shard's index "
                          "was kept)"]


def test_manifest_not_json_indexes_as_before(packed, s3, tmp_path, monkeypatch):
    out, names, _ = packed
    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    junk = tmp_path / "manifest.json"
    junk.write_text('{"format": "ringfeed-pack 1", "shards": [')
    s3.upload("data", "junk/", [os.path.join(out, n) for n in names] + [str(junk)])
    with ringfeed.Loader(os.path.join(out, "shard-*.tar"), shuffle=False, **OPTS) as ld:
        local = _summary(ld)
    with ringfeed.Loader("s3://data/junk/shard-*.tar", shuffle=False,
                         cache_dir=str(tmp_path / "c"), **OPTS) as ld:
        assert _summary(ld) == local
        st = ld.stats()
    m = st["remote"]["manifest"]
    assert st["shards_from_manifest"] == 0 and (m["found"], m["failed"]) == (0, 1), m
    assert m["notes"][0].startswith("s3://data/junk/manifest.json: not used (") and \
        "malformed JSON" in m["notes"][0], m


def test_cold_first_batch_time(packed, s3, tmp_path, monkeypatch):
    """Measured, not asserted: cold time to the first batch with the
    manifest, and without it (every shard fetched to be indexed)."""
    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    for prefix in ("with", "bare"):
        t0 = time.perf_counter()
        with ringfeed.Loader("s3://data/%s/shard-*.tar" % prefix, shuffle=True, seed=1,
                             cache_dir=str(tmp_path / prefix), **OPTS) as ld:
            next(iter(ld))
            print("%s manifest: cold first batch %.3f s" % (prefix, time.perf_counter() - t0))
