"""ringfeed.Mix: several sources in one Loader (docs/mixing.md), from Python.

What is checked: a folder and tar shards mixed by proportion give the same
batches (images, labels, sources) for 1 and 3 workers; return_source's
third tensor agrees with sample_source and the label offset; each source's
share per epoch is its count; a state dict records the mixture, resumes
exactly on the same one and is refused by another mixture or a loader of
one source; the Python checks of Source and Mix. Resume across world sizes
with an s3:// source (moto, SigV4 checked): epoch 2 stopped at batch 3 on
4 ranks and resumed from their state dicts on 2 and on 3 ranks delivers
every sample as many times as the uninterrupted epoch. And the consumer's
wait in stats()["latency"] against the test's own clock, with shards whose
transfers a proxy holds a known time.
"""

import collections
import os
import tarfile
import time

import numpy as np
import pytest

import packhelpers
import rfhelpers
import rfservers
import ringfeed

NSHARDS, PER_SHARD, FOLDER_N = 4, 6, 24
OPTS = dict(batch_size=5, image_size=16, transform="center", seed=3)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """An image folder of 24 (3 classes) and 4 tar shards of 6 (labels 0..3)."""
    d = tmp_path_factory.mktemp("mix")
    folder = rfhelpers.tiny_jpeg_folder(str(d / "folder"), FOLDER_N, 3, seed=5)
    pics = rfhelpers.tiny_jpeg_folder(str(d / "pics"), NSHARDS * PER_SHARD, 1, seed=40)
    files = sorted(os.path.join(pics, "c0", f) for f in os.listdir(os.path.join(pics, "c0")))
    shards = []
    for s in range(NSHARDS):
        shards.append(str(d / ("t-%02d.tar" % s)))
        with tarfile.open(shards[-1], "w", format=tarfile.USTAR_FORMAT) as tf:
            for i, f in enumerate(files[s * PER_SHARD:(s + 1) * PER_SHARD]):
                with open(f, "rb") as pic:
                    rfhelpers.tar_add(tf, "k%02d%02d.jpg" % (s, i), pic.read())
                rfhelpers.tar_add(tf, "k%02d%02d.cls" % (s, i), b"%d" % ((s + i) % 4))
    return folder, str(d / "t-{00..03}.tar"), shards


def _mix(folder, shards, **kw):
    return ringfeed.Mix([ringfeed.Source(folder, proportion=0.5),
                         ringfeed.Source(shards, proportion=0.5, label_offset=100, **kw)],
                        epoch_size=120)


def _epoch(ld):
    """[(digest of images, labels and sources, indices)] of one epoch."""
    out = []
    for x, y, src, idx in ld.iter_with_indices():
        src, idx, y = (rfhelpers.as_numpy(v) for v in (src, idx, y))
        assert [ld.sample_source(int(i)) for i in idx] == src.tolist()
        assert all((100 <= v < 104) if s == 1 else (0 <= v < 3) for v, s in zip(y, src))
        out.append((rfhelpers.batch_digest(x, np.concatenate([y, src])), idx.tolist()))
    return out


def test_same_batches_for_1_and_3_workers(data):
    folder, shards, _ = data
    runs = []
    for workers in (1, 3):
        with ringfeed.Loader(_mix(folder, shards, shuffle_block=2), num_workers=workers,
                             return_source=True, **OPTS) as ld:
            assert ld.epoch_size == 120 and ld.num_samples == FOLDER_N + NSHARDS * PER_SHARD
            assert len(ld) == 24
            epochs = [_epoch(ld) for _ in range(2)]
            st = ld.stats()
        runs.append(epochs)
        assert [s["epoch_samples"] for s in st["sources"]] == [60, 60]
        assert [s["delivered"] for s in st["sources"]] == [120, 120]
        assert st["sources"][1]["shuffle_block"] == 2 and st["sources"][1]["label_offset"] == 100
    assert runs[0] == runs[1]
    assert runs[0][0] != runs[0][1]
    per = collections.Counter(i < FOLDER_N for _, idx in runs[0][0] for i in idx)
    assert per == {True: 60, False: 60}


def test_return_source_shapes(data):
    folder, shards, _ = data
    with ringfeed.Loader(folder, return_source=True, output="numpy", **OPTS) as ld:
        x, y, src = next(iter(ld))
        assert src.dtype == np.int64 and src.tolist() == [0] * len(y)
    with ringfeed.Loader(_mix(folder, shards), output="numpy", **OPTS) as ld:
        assert len(next(iter(ld))) == 2  # no sources unless asked


def test_state_dict_records_the_mixture(data):
    folder, shards, _ = data
    with ringfeed.Loader(_mix(folder, shards), num_workers=2, **OPTS) as ld:
        it = iter(ld)
        for _ in range(7):
            next(it)
        state = ld.state_dict()
        rest = [rfhelpers.batch_digest(x, y) for x, y in it]
    assert state["mixture"]["epoch_size"] == 120
    assert [s["epoch_samples"] for s in state["mixture"]["sources"]] == [60, 60]
    with ringfeed.Loader(_mix(folder, shards), num_workers=1, **OPTS) as ld:
        ld.load_state_dict(state)
        assert [rfhelpers.batch_digest(x, y) for x, y in ld] == rest
    other = ringfeed.Mix([ringfeed.Source(folder, proportion=0.6),
                          ringfeed.Source(shards, proportion=0.4, label_offset=100)],
                         epoch_size=120)
    with ringfeed.Loader(other, **OPTS) as ld:
        with pytest.raises(ValueError, match="mixture differs.*source 0 has epoch_samples=60"):
            ld.load_state_dict(state)
    with ringfeed.Loader(_mix(folder, shards, shuffle_block=2), **OPTS) as ld:
        with pytest.raises(ValueError, match="shuffle_block"):
            ld.load_state_dict(state)
    with ringfeed.Loader(folder, **OPTS) as ld:
        with pytest.raises(ValueError, match="a mixture of 2 sources"):
            ld.load_state_dict(state)
        single = ld.state_dict()
    with ringfeed.Loader(_mix(folder, shards), **OPTS) as ld:
        with pytest.raises(ValueError, match="one source"):
            ld.load_state_dict(single)


def test_source_and_mix_checks(data):
    folder, shards, _ = data
    with pytest.raises(ValueError, match="at most one of"):
        ringfeed.Source(folder, proportion=0.5, repeat=2)
    with pytest.raises(ValueError, match="choose"):
        ringfeed.Source(folder, choose=2.5)
    with pytest.raises(ValueError, match="> 0"):
        ringfeed.Source(folder, repeat=0)
    with pytest.raises(ValueError, match="label_offset"):
        ringfeed.Source(folder, label_offset=-1)
    with pytest.raises(ValueError, match="no sources"):
        ringfeed.Mix([])
    with pytest.raises(ValueError, match="cannot be mixed"):
        ringfeed.Loader(ringfeed.Mix([ringfeed.Source(folder, proportion=1),
                                      ringfeed.Source(shards, repeat=1)]), **OPTS)
    with pytest.raises(ValueError, match="source 1.*needs shards"):
        ringfeed.Loader(ringfeed.Mix([shards, ringfeed.Source(folder, shuffle_block=2)]), **OPTS)
    with pytest.raises(ValueError, match="buckets are not available with a mixture"):
        ringfeed.Loader(ringfeed.Mix([folder, shards]), buckets=2, **OPTS)
    with pytest.raises(ringfeed.RingfeedError, match="records and images"):
        ringfeed.Loader(ringfeed.Mix([folder]), record_size=8, batch_size=4)
    # a path alone is the whole source once; repeat and choose add up
    with ringfeed.Loader(ringfeed.Mix([folder, ringfeed.Source(shards, repeat=1.5),
                                       ringfeed.Source(shards, choose=5)]), **OPTS) as ld:
        assert ld.epoch_size == FOLDER_N + 36 + 5
        assert [s["epoch_samples"] for s in ld.stats()["sources"]] == [FOLDER_N, 36, 5]


# ---------------------------------------------------------------- over S3

needs_moto = pytest.mark.skipif(not rfservers.have_moto(),
                                reason="moto[server] and boto3 not importable (make deps)")


@pytest.fixture(scope="module")
def s3(data):
    """A moto server holding the shards under s3://data/mix/."""
    with rfservers.moto_s3(buckets=("data",)) as srv:
        srv.upload("data", "mix/", data[2])
        yield srv


def _use(monkeypatch, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)


def _counts(mix, world, ranks, take=None, states=None, cache=None):
    """Samples of epoch 2 taken by ranks `ranks` of `world` (take: that
    many batches each, from epoch 2's start; else all, from the states'
    position), counted; and each rank's state dict afterwards."""
    hits, out = collections.Counter(), []
    for r in ranks:
        with ringfeed.Loader(mix, rank=r, world_size=world, num_workers=1, cache_dir=cache,
                             **OPTS) as ld:
            if states is None:
                ld.set_epoch(2)
            else:
                ld.load_state_dict(states)
            it = ld.iter_with_indices()
            for k, (_, _, idx) in enumerate(it):
                hits.update(rfhelpers.as_numpy(idx).tolist())
                if take is not None and k + 1 == take:
                    break
            out.append(ld.state_dict())
    return hits, out


@needs_moto
def test_resume_with_an_s3_source_on_2_and_3_ranks(data, s3, tmp_path, monkeypatch):
    _use(monkeypatch, s3.env())
    folder = data[0]
    mix = _mix(folder, "s3://data/mix/t-{00..03}.tar")
    cache = str(tmp_path / "cache")
    want, _ = _counts(mix, 1, [0], cache=cache)
    assert sum(want.values()) == 120
    assert sum(v for i, v in want.items() if i < FOLDER_N) == 60
    assert sorted(collections.Counter(want.values()).items()) == [(2, 24), (3, 24)]
    _, states = _counts(mix, 4, range(4), take=3, cache=cache)
    assert {s["consumed"] for s in states} == {60}
    first, _ = _counts(mix, 4, range(4), take=3, cache=cache)
    for world in (2, 3):
        rest, _ = _counts(mix, world, range(world), states=states, cache=cache)
        assert first + rest == want, world


@needs_moto
@packhelpers.needs_pack
def test_latency_against_the_tests_clock(s3, tmp_path, monkeypatch):
    """One shard per batch, each shard's GET held 0.15 s by the proxy,
    fetched one at a time: the consumer waits about that long per batch,
    but after a sleep that let shards in. The stats' percentiles must be
    the waits the test measured around next(), to the histogram's 1.6 %,
    less what the binding adds outside the library's clock (10 ms + 10 %)."""
    src = rfhelpers.pil_folder(str(tmp_path / "src"), 2, 20, 60, 48, seed=3)
    out = str(tmp_path / "packed")
    man = packhelpers.pack(src, out, "--max-side", "48", "--shard-count", "4", "--workers", "1")
    names = sorted(s["name"] for s in man["shards"])
    s3.upload("data", "lat/", [os.path.join(out, n) for n in names] +
              [os.path.join(out, "manifest.json")])
    hold = 0.15
    with rfservers.fault_proxy(s3.endpoint, tmp_path / "log", hold_s=hold,
                               hold_match=r"^GET \S*shard-\S*\.tar") as px:
        _use(monkeypatch, s3.env(endpoint=px.url))
        t0 = time.monotonic()
        waits, first = [], None
        with ringfeed.Loader("s3://data/lat/shard-*.tar", batch_size=4, image_size=16,
                             transform="center", shuffle=False, num_workers=1, prefetch=2,
                             fetch_parallel=1, cache_dir=str(tmp_path / "c")) as ld:
            it = iter(ld)
            for k in range(len(names)):
                if k == 3:
                    time.sleep(0.4)
                ta = time.monotonic()
                next(it)
                waits.append(time.monotonic() - ta)
                if first is None:
                    first = time.monotonic() - t0
            st = ld.stats()
    lat = st["latency"]
    assert st["shards_from_manifest"] == len(names)  # no shard fetched to index it
    assert lat["batches"] == len(names)

    def rank(q):
        s = sorted(waits)
        return s[max(1, int(np.ceil(q * len(s)))) - 1] * 1e3

    for key, own in (("wait_p50_ms", rank(0.5)), ("wait_p90_ms", rank(0.9)),
                     ("wait_p99_ms", rank(0.99)), ("wait_max_ms", max(waits) * 1e3),
                     ("wait_mean_ms", sum(waits) / len(waits) * 1e3),
                     ("first_batch_seconds", None)):
        if own is None:
            lib, own = lat[key] * 1e3, first * 1e3
        else:
            lib = lat[key]
        print("%s: library %.2f ms, test's clock %.2f ms" % (key, lib, own))
        assert own * 0.9 - 10 <= lib <= own * (1 + 1 / 64) + 0.05, key
    assert rank(0.9) >= hold * 1e3 * 0.9  # the held transfers were waited for
    assert 1 <= lat["ring_empty"] <= len(names) - 1  # not the batch after the sleep


def test_a_sources_url_shows_no_secret():
    """A Source's repr and its messages show a URL as the library shows it:
    no user:password, no http(s) query (a presigned URL's signature)."""
    url = "https://user:pw@host/t-{00..03}.tar?X-Amz-Signature=abc"
    r = repr(ringfeed.Source(url, proportion=0.5))
    assert "pw" not in r and "abc" not in r and "***@host/t-{00..03}.tar?***" in r
    with pytest.raises(ValueError) as e:
        ringfeed.Source([url, "x/"], label_offset=-1)
    assert "pw" not in str(e.value) and "abc" not in str(e.value) and "label_offset" in str(e.value)
    assert "pw" not in repr(ringfeed.Mix([ringfeed.Source(url)]))
