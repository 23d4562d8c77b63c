"""Sources at scale through the Python binding: WebDataset tar shards (a list
of paths, brace and glob patterns), fixed-size record files (dtype, shape,
values), and exact resume across processes on both.

Shards are written here with Python's own tarfile module (GNU, pax and ustar
formats), an independent writer for the library's header walk."""

import hashlib
import io
import json
import os
import tarfile

import numpy as np
import pytest

import ringfeed
from rfhelpers import as_numpy, batch_digest, run_python, walk_folder

try:
    import torch
except Exception:  # pragma: no cover - torch is optional
    torch = None

DET = dict(image_size=32, batch_size=5, transform="random_resized_crop", flip=True, seed=99,
           shuffle=True)
FORMATS = (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT)


def add_member(tf, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 1700000000
    tf.addfile(info, io.BytesIO(data))


def write_shards(folder, out_dir, per_shard, name="train-%04d.tar"):
    """Copies an image folder into tar shards, in ImageFolder order: members
    classNN/imgNNNN.jpg and .cls (the label as text). Returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    samples = walk_folder(folder)
    paths = []
    for s in range(0, len(samples), per_shard):
        path = os.path.join(out_dir, name % (s // per_shard))
        with tarfile.open(path, "w", format=FORMATS[len(paths) % 3]) as tf:
            info = tarfile.TarInfo("metadata")  # a directory member: ignored
            info.type = tarfile.DIRTYPE
            tf.addfile(info)
            for p, label in samples[s:s + per_shard]:
                key = os.path.splitext(os.path.relpath(p, folder))[0]
                with open(p, "rb") as f:
                    add_member(tf, key + ".jpg", f.read())
                add_member(tf, key + ".cls", b"%d\n" % label)
                add_member(tf, key + ".json", b'{"source": "test"}')  # another modality
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def shards(folder, tmp_path_factory):
    """The session's image folder (48 images) as 5 shards of 10 (the last of 8)."""
    out = str(tmp_path_factory.mktemp("shards"))
    return write_shards(folder, out, 10)


def digests(ld, epoch=1):
    ld.set_epoch(epoch)
    return [batch_digest(i, l) for i, l in ld]


def data_digest(x):
    return hashlib.sha256(np.ascontiguousarray(as_numpy(x)).tobytes()).hexdigest()


# ------------------------------------------------------------------ shards

def test_shards_match_the_folder(folder, shards):
    d = os.path.dirname(shards[0])
    keys = [os.path.splitext(os.path.relpath(p, folder))[0] for p, _ in walk_folder(folder)]
    with ringfeed.Loader(folder, num_workers=2, **DET) as ld:
        want = digests(ld)
        labels = [ld.sample_label(i) for i in range(ld.num_samples)]
    specs = [shards,                                   # a list of paths
             tuple(shards),
             os.path.join(d, "train-{0000..0004}.tar"),  # a brace pattern
             os.path.join(d, "train-*.tar")]             # a glob
    for spec in specs:
        with ringfeed.Loader(spec, num_workers=3, **DET) as ld:
            assert ld.num_samples == 48
            assert [ld.sample_label(i) for i in range(48)] == labels
            # "shard.tar:key": webdataset's __url__ and __key__
            assert ld.sample_path(0) == shards[0] + ":" + keys[0]
            assert ld.sample_path(47) == shards[4] + ":" + keys[47]
            assert digests(ld) == want, spec


def test_shards_io_backends_identical(shards):
    got = []
    for io_backend in ("io_uring", "pread"):
        with ringfeed.Loader(shards, num_workers=2, io_backend=io_backend, **DET) as ld:
            got.append(digests(ld, 2))
    assert got[0] == got[1]


def test_single_shard_and_long_names(tmp_path):
    """A key past 100 bytes (pax and GNU long names) in a single .tar."""
    from rfhelpers import write_jpeg
    img = str(tmp_path / "x.jpg")
    write_jpeg(img, 40, 30, seed=1)
    data = open(img, "rb").read()
    for fmt in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT):
        path = str(tmp_path / ("long-%d.tar" % fmt))
        keys = ["d" * 80 + "/" + "k" * 120 + str(i) for i in range(3)]
        with tarfile.open(path, "w", format=fmt) as tf:
            for i, k in enumerate(keys):
                add_member(tf, k + ".cls", b"%d" % (i + 2))
                add_member(tf, k + ".jpeg", data)
        with ringfeed.Loader(path, image_size=16, batch_size=2, transform="center",
                             shuffle=False, num_workers=1, output="numpy") as ld:
            assert ld.num_samples == 3
            labels = np.concatenate([l for _, l in ld])
            assert labels.tolist() == [2, 3, 4]


def test_bad_shards_are_named(tmp_path):
    path = str(tmp_path / "nocls.tar")
    with tarfile.open(path, "w") as tf:
        add_member(tf, "a.jpg", b"x")
        add_member(tf, "a.cls", b"0")
        add_member(tf, "b.jpg", b"x")
    with pytest.raises(ringfeed.RingfeedError) as e:
        ringfeed.Loader(path)
    assert path in str(e.value) and '"b"' in str(e.value) and ".cls" in str(e.value)

    bad = str(tmp_path / "corrupt.tar")
    raw = bytearray(open(path, "rb").read())
    raw[1024 + 3] ^= 0x40  # the name of the second header
    open(bad, "wb").write(bytes(raw))
    with pytest.raises(ringfeed.RingfeedError) as e:
        ringfeed.Loader(bad)
    assert bad in str(e.value) and "checksum" in str(e.value) and "offset 1024" in str(e.value)
    assert e.value.status == ringfeed._lib.RF_E_SOURCE

    with pytest.raises(ringfeed.RingfeedError) as e:
        ringfeed.Loader(str(tmp_path / "none-*.tar"))
    assert "matches no files" in str(e.value)
    with pytest.raises(ValueError):
        ringfeed.Loader([])
    with pytest.raises(ValueError):
        ringfeed.Loader([path, "a\nb.tar"])


def test_bad_member_is_named_shard_and_key(tmp_path, folder):
    samples = walk_folder(folder)
    path = str(tmp_path / "one.tar")
    with tarfile.open(path, "w") as tf:
        for i, (p, label) in enumerate(samples[:4]):
            data = open(p, "rb").read()
            add_member(tf, "s%d.jpg" % i, data[: len(data) // 3] if i == 1 else data)
            add_member(tf, "s%d.cls" % i, b"%d" % label)
    with ringfeed.Loader(path, image_size=16, batch_size=4, shuffle=False, num_workers=1) as ld:
        with pytest.raises(ringfeed.RingfeedError) as e:
            next(iter(ld))
    assert path + ":s1.jpg" in str(e.value)
    with ringfeed.Loader(path, image_size=16, batch_size=4, num_workers=1, on_error="skip") as ld:
        list(ld)
        errors = ld.stats()["errors"]
    assert errors and errors[0]["path"] == path + ":s1.jpg"


# ----------------------------------------------------------------- records

def write_records(path, header, records, tail=b""):
    with open(path, "wb") as f:
        f.write(b"\xab" * header)
        f.write(records.tobytes())
        f.write(tail)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int32", "int64"])
def test_records_dtype_shape_values(tmp_path, dtype):
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    width = 24  # elements per record
    recs = rng.integers(info.min, info.max, size=(53, width), dtype=dtype, endpoint=True)
    path = str(tmp_path / ("tok-%s.bin" % dtype))
    write_records(path, 100, recs, tail=b"\x01" * 7)  # a partial trailing record
    rs = width * np.dtype(dtype).itemsize
    with ringfeed.Loader(path, record_size=rs, header_size=100, dtype=dtype, batch_size=8,
                         shuffle=False, num_workers=2, output="numpy") as ld:
        assert ld.num_samples == 53 and len(ld) == 7
        assert ld.dtype == np.dtype(dtype)
        batches = list(ld)
        assert all(isinstance(b, np.ndarray) and b.dtype == np.dtype(dtype) for b in batches)
        assert [b.shape for b in batches] == [(8, width)] * 6 + [(5, width)]
        assert np.array_equal(np.concatenate(batches), recs)
        assert ld.sample_label(5) == 0 and ld.sample_path(5) == path
    with ringfeed.Loader(path, record_size=rs, header_size=100, dtype=np.dtype(dtype),
                         batch_size=8, shuffle=True, seed=4, output="numpy") as ld:
        seen = []
        for data, idx in ld.iter_with_indices():
            assert np.array_equal(data, recs[idx])
            seen += idx.tolist()
        assert sorted(seen) == list(range(53))


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_records_as_torch(tmp_path):
    recs = np.arange(40 * 8, dtype=np.uint16).reshape(40, 8) * 1000
    path = str(tmp_path / "tok.bin")
    write_records(path, 0, recs)
    with ringfeed.Loader(path, record_size=16, dtype="uint16", batch_size=10, shuffle=False,
                         output="torch") as ld:
        x = next(iter(ld))
    assert isinstance(x, torch.Tensor) and x.shape == (10, 8)
    # uint16 when torch has it, else int32 with the same values
    assert x.dtype in (getattr(torch, "uint16", torch.int32), torch.int32)
    assert np.array_equal(x.numpy().astype(np.int64), recs[:10].astype(np.int64))
    write_records(path, 0, recs.astype(np.int64))
    with ringfeed.Loader(path, record_size=64, dtype="int64", batch_size=10, shuffle=False,
                         output="torch") as ld:
        x = next(iter(ld))
    assert x.dtype == torch.int64 and x.shape == (10, 8)


def test_records_several_files_and_patterns(tmp_path):
    parts = [np.full((n, 4), k, dtype=np.int32) for k, n in enumerate((5, 0, 7, 3))]
    paths = []
    for k, p in enumerate(parts):
        paths.append(str(tmp_path / ("part-%d.bin" % k)))
        write_records(paths[-1], 8, p)
    want = np.concatenate(parts)
    for spec in (paths, str(tmp_path / "part-{0..3}.bin"), str(tmp_path / "part-*.bin")):
        with ringfeed.Loader(spec, record_size=16, header_size=8, dtype="int32", batch_size=4,
                             shuffle=False, output="numpy") as ld:
            assert ld.num_samples == 15
            assert np.array_equal(np.concatenate(list(ld)), want)


def test_records_option_errors(tmp_path):
    path = str(tmp_path / "r.bin")
    write_records(path, 0, np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError):
        ringfeed.Loader(path, record_size=16, transform="center")
    with pytest.raises(ValueError):
        ringfeed.Loader(path, record_size=6, dtype="int32")
    with pytest.raises(ValueError):
        ringfeed.Loader(path, record_size=16, dtype="float32")
    with pytest.raises(ringfeed.RingfeedError) as e:
        ringfeed.Loader(path, record_size=32)  # no complete record
    assert "no complete record" in str(e.value)


# ------------------------------------------------------------------ resume

def _resume_case(kind, shards, tmp_path):
    if kind == "tar":
        return shards, dict(DET)
    path = str(tmp_path / "resume.bin")
    recs = np.random.default_rng(5).integers(0, 50000, size=(97, 32), dtype=np.uint16)
    write_records(path, 16, recs)
    return path, dict(record_size=64, header_size=16, dtype="uint16", batch_size=6, seed=3,
                      output="numpy")


@pytest.mark.parametrize("kind", ["tar", "records"])
def test_resume_in_new_process_any_workers(kind, shards, tmp_path):
    src, kw = _resume_case(kind, shards, tmp_path)
    digest = (lambda b: batch_digest(*b)) if kind == "tar" else data_digest
    with ringfeed.Loader(src, num_workers=1, **kw) as ld:
        ld.set_epoch(2)
        ref = [digest(b) for b in ld]
    k = 3
    with ringfeed.Loader(src, num_workers=2, **kw) as ld:
        ld.set_epoch(2)
        for j, _ in enumerate(ld):
            if j == k - 1:
                break
        state = ld.state_dict()
    assert (state["epoch"], state["batch"]) == (2, k)
    json.dumps(state)  # plain ints and strings
    res = run_python("""
        import hashlib, numpy as np, ringfeed, rfhelpers
        src, kw, state, kind = (json.loads(a) for a in sys.argv[1:5])
        with ringfeed.Loader(src, num_workers=4, **kw) as ld:
            ld.load_state_dict(state)
            if kind == "tar":
                out = [rfhelpers.batch_digest(i, l) for i, l in ld]
            else:
                out = [hashlib.sha256(np.ascontiguousarray(rfhelpers.as_numpy(x)).tobytes())
                       .hexdigest() for x in ld]
        print(json.dumps(out))
    """, args=[json.dumps(src), json.dumps(kw), json.dumps(state), json.dumps(kind)])
    assert res == ref[k:]
    assert len(res) > 0
