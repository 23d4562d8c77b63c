"""The samples torchvision's ImageFolder and the webdataset package see are
the samples ringfeed sees.

ImageFolder: a folder of JPEG, PNG, WebP and TIFF files (and files that are
not pictures) indexes as ImageFolder(root).samples, in its order; each file
is decoded or reported as an error with its path, never dropped.

WebDataset: shards written by webdataset.ShardWriter with jpg, png and webp
members, txt captions and cls labels give as many samples as
webdataset.WebDataset iterates, the same keys and labels, and each sample's
caption bytes exactly (extras=("txt",)); unlabeled shards load with
label=None. Counts, keys and labels come from the index and hold whatever
the build decodes; the pictures of formats this build has no decoder for
yet are errors under on_error="skip", and the checks that need them skip
with the reason (they run once the PNG and WebP decoders are in). Also:
compressed shards are refused with a clear message, record files and image
folders refuse tar-only options.
"""

import glob
import gzip
import io
import os
import tarfile

import numpy as np
import pytest

import ringfeed
from rfhelpers import photo_like

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402


def encode(arr, fmt, **kw):
    b = io.BytesIO()
    Image.fromarray(arr).save(b, fmt, **kw)
    return b.getvalue()


def errors_of(ld):
    return ld.stats()["errors"]


# -------------------------------------------------------------- ImageFolder

@pytest.fixture(scope="module")
def mixed_folder(tmp_path_factory):
    """gray.jpg p.webp x.png y.JPG z.tif a.txt b.gif in class "c", and a
    second class of JPEGs."""
    root = str(tmp_path_factory.mktemp("mixed") / "root")
    c, d = os.path.join(root, "c"), os.path.join(root, "d")
    os.makedirs(c)
    os.makedirs(d)
    rgb = photo_like(40, 30, 5)
    Image.fromarray(rgb).convert("L").save(os.path.join(c, "gray.jpg"), "JPEG", quality=90)
    Image.fromarray(rgb).save(os.path.join(c, "p.webp"), "WEBP", lossless=True)
    Image.fromarray(rgb).save(os.path.join(c, "x.png"), "PNG")
    Image.fromarray(rgb).save(os.path.join(c, "y.JPG"), "JPEG", quality=90)
    Image.fromarray(rgb).save(os.path.join(c, "z.tif"), "TIFF")
    Image.fromarray(rgb).save(os.path.join(c, "b.gif"), "GIF")
    with open(os.path.join(c, "a.txt"), "w") as f:
        f.write("not a picture\n")
    for i in range(3):
        Image.fromarray(photo_like(36, 28, 10 + i)).save(os.path.join(d, "%d.jpeg" % i), "JPEG")
    return root


def test_folder_indexes_what_imagefolder_indexes(mixed_folder):
    tv = pytest.importorskip("torchvision.datasets")
    want = tv.ImageFolder(mixed_folder).samples
    assert [os.path.basename(p) for p, _ in want][:5] == ["gray.jpg", "p.webp", "x.png", "y.JPG",
                                                          "z.tif"]
    with ringfeed.Loader(mixed_folder, batch_size=4, image_size=16, transform="center",
                         shuffle=False, num_workers=1, on_error="skip") as ld:
        assert ld.num_samples == len(want)
        got = [(ld.sample_path(i), ld.sample_label(i)) for i in range(ld.num_samples)]
        assert [(os.path.realpath(p), l) for p, l in got] == \
            [(os.path.realpath(p), l) for p, l in want]
        for _ in ld:
            pass
        bad = {os.path.basename(e["path"]): e["reason"] for e in errors_of(ld)}
    # TIFF has no decoder: an error with its path and reason, never dropped
    assert "z.tif" in bad and bad["z.tif"]
    assert "gray.jpg" not in bad and "y.JPG" not in bad
    assert set(bad) <= {"z.tif", "p.webp", "x.png"}  # PNG/WebP: errors only without decoders
    with ringfeed.Loader(mixed_folder, batch_size=8, image_size=16, transform="center",
                         shuffle=False, num_workers=1, on_error="raise") as ld:
        with pytest.raises(ringfeed.RingfeedError) as e:
            list(ld)
    assert os.path.join("c", "") in str(e.value)
    assert any(name in str(e.value) for name in ("z.tif", "p.webp", "x.png"))


# ------------------------------------------------------------- WebDataset

def picture(i):
    return photo_like(32, 32, 100 + i)


FORMATS = ("jpg", "png", "webp")


def member_bytes(i, fmt):
    arr = picture(i)
    if fmt == "jpg":
        return encode(arr, "JPEG", quality=92)
    if fmt == "png":
        return encode(arr, "PNG")
    return encode(arr, "WEBP", lossless=True)


def caption(i):
    if i % 9 == 4:
        return None  # no .txt member
    if i % 11 == 7:
        return ""  # an empty one
    return "caption %d: ünïcödé %s" % (i, "x" * (i * 5 % 37))


def write_wds(out_dir, n, formats, labeled=True, maxcount=7):
    """Shards out_dir/shard-%06d.tar written by webdataset.ShardWriter:
    sample i is key "s%05d", a picture member of formats[i % len], its
    caption (.txt, sometimes missing or empty), a .json, and its label
    (.cls, i % 5) when labeled. Returns the sorted shard paths."""
    wds = pytest.importorskip("webdataset")
    os.makedirs(out_dir, exist_ok=True)
    pattern = os.path.join(out_dir, "shard-%06d.tar")
    with wds.ShardWriter(pattern, maxcount=maxcount, verbose=0) as w:
        for i in range(n):
            fmt = formats[i % len(formats)]
            d = {"__key__": "s%05d" % i, fmt: member_bytes(i, fmt),
                 "json": {"i": i, "fmt": fmt}}
            if caption(i) is not None:
                d["txt"] = caption(i)
            if labeled:
                d["cls"] = i % 5
            w.write(d)
    return sorted(glob.glob(os.path.join(out_dir, "shard-*.tar")))


def wds_samples(urls):
    """What webdataset.WebDataset iterates: (url, key, cls, txt, json) per
    sample, the members' raw bytes (None when missing)."""
    wds = pytest.importorskip("webdataset")
    ds = wds.WebDataset(urls, shardshuffle=False)
    return [(s["__url__"], s["__key__"], s.get("cls"), s.get("txt"), s.get("json")) for s in ds]


def check_index(ld, want, labeled=True):
    """Counts, names and labels from the index: no decoding involved."""
    assert ld.num_samples == len(want)
    assert [ld.sample_path(i) for i in range(ld.num_samples)] == \
        ["%s:%s" % (w[0], w[1]) for w in want]
    labels = [ld.sample_label(i) for i in range(ld.num_samples)]
    assert labels == ([int(w[2]) for w in want] if labeled else [-1] * len(want))


@pytest.fixture(scope="module")
def jpeg_shards(tmp_path_factory):
    return write_wds(str(tmp_path_factory.mktemp("wds-jpeg")), 40, ("jpg",))


@pytest.fixture(scope="module")
def mixed_shards(tmp_path_factory):
    return write_wds(str(tmp_path_factory.mktemp("wds-mixed")), 24, FORMATS)


def test_jpeg_shards_match_webdataset(jpeg_shards):
    want = wds_samples(jpeg_shards)
    assert len(want) == 40
    spec = os.path.join(os.path.dirname(jpeg_shards[0]), "shard-*.tar")
    with ringfeed.Loader(spec, batch_size=6, image_size=24, transform="random_resized_crop",
                         seed=3, num_workers=3, extras=("txt", "json"), output="numpy") as ld:
        check_index(ld, want)
        seen = {}
        for images, labels, extras, idx in ld.iter_with_indices():
            assert images.shape == (len(idx), 24, 24, 3) and len(extras) == len(idx)
            for k, i in enumerate(idx.tolist()):
                assert i not in seen
                seen[i] = extras[k]
                assert labels[k] == int(want[i][2])
        assert sorted(seen) == list(range(40))
        assert sum(w[3] is None for w in want) > 0 and sum(w[3] == b"" for w in want) > 0
        for i, (_, key, _, txt, js) in enumerate(want):
            d = seen[i]
            if txt is None:
                assert "txt" not in d
            else:
                assert d["txt"] == txt  # the caption's bytes exactly
            assert d["json"] == js
        assert errors_of(ld) == []
    # the pixels are those of the same loader without extras
    kw = dict(batch_size=6, image_size=24, transform="random_resized_crop", seed=3,
              num_workers=2, output="numpy")
    with ringfeed.Loader(spec, **kw) as a, \
            ringfeed.Loader(spec, extras="txt,json", **kw) as b:
        for (ia, la), (ib, lb, _) in zip(a, b):
            assert np.array_equal(ia, ib) and np.array_equal(la, lb)


def test_mixed_format_shards(mixed_shards):
    """jpg, png and webp members: counts, keys, labels and captions as
    webdataset's whatever this build decodes; pixels once it decodes all."""
    want = wds_samples(mixed_shards)
    assert len(want) == 24
    with ringfeed.Loader(mixed_shards, batch_size=24, image_size=32, transform="none",
                         flip=False, shuffle=False, num_workers=2, on_error="skip",
                         extras=("txt",), output="numpy") as ld:
        check_index(ld, want)
        (images, labels, extras, idx), = list(ld.iter_with_indices())
        # under skip a replaced sample shows its substitute: captions and
        # labels still belong to the index they come with
        for k, i in enumerate(idx.tolist()):
            assert labels[k] == int(want[i][2])
            assert extras[k].get("txt") == want[i][3]
        errors = errors_of(ld)
    for e in errors:  # only what has no decoder in this build, named
        assert e["path"].endswith((".png", ".webp")), e
        assert ":s%05d." % e["sample"] in e["path"]
    delivered = {i for i in idx.tolist()}
    for k, i in enumerate(idx.tolist()):
        fmt = FORMATS[i % 3]
        ref = picture(i)
        got = images[k]
        if fmt == "jpg":
            ref = np.asarray(Image.open(io.BytesIO(member_bytes(i, fmt))).convert("RGB"))
            assert np.abs(got.astype(int) - ref.astype(int)).mean() < 1.0
        else:  # lossless: exact
            assert np.array_equal(got, ref), (i, fmt)
    if errors:
        pytest.skip("this build does not decode %s yet: %s"
                    % (sorted({e["path"].rsplit(".", 1)[1] for e in errors}), errors[0]["reason"]))
    assert delivered == set(range(24))


def test_unlabeled_shards(tmp_path):
    shards = write_wds(str(tmp_path / "unlabeled"), 10, ("jpg",), labeled=False, maxcount=4)
    want = wds_samples(shards)
    assert len(want) == 10 and all(w[2] is None for w in want)
    with pytest.raises(ringfeed.RingfeedError) as e:
        ringfeed.Loader(shards)
    assert '"s00000"' in str(e.value) and ".cls" in str(e.value) and "label=None" in str(e.value)
    kw = dict(batch_size=4, image_size=16, transform="center", shuffle=False, num_workers=2,
              output="numpy")
    with ringfeed.Loader(shards, label=None, **kw) as ld:
        check_index(ld, want, labeled=False)
        batches = list(ld)
        assert all(isinstance(b, np.ndarray) for b in batches)  # images alone
        assert sum(len(b) for b in batches) == 10
        with_idx = list(ld.iter_with_indices())
        assert [len(t) for t in with_idx] == [2, 2, 2]  # (images, indices)
    with ringfeed.Loader(shards, label="", extras=["TXT"], **kw) as ld:
        n = 0
        for images, extras in ld:
            for d in extras:
                assert d.get("txt") == want[n][3]
                n += 1
        assert n == 10


def test_label_member_named(tmp_path):
    """label= names another member; the default cls member is then ignored."""
    path = str(tmp_path / "lab.tar")
    jpg = member_bytes(1, "jpg")
    with tarfile.open(path, "w") as tf:
        for i in range(3):
            for ext, data in (("jpg", jpg), ("cls", b"99"), ("target", b"%d" % (i + 1))):
                info = tarfile.TarInfo("k%d.%s" % (i, ext))
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    with ringfeed.Loader(path, label="target", batch_size=3, image_size=8, shuffle=False,
                         output="numpy") as ld:
        (images, labels), = list(ld)
        assert labels.tolist() == [1, 2, 3]


def test_extras_bound_and_options(jpeg_shards, tmp_path):
    # a caption over extras_bytes: the error names the shard, the key and the member
    with ringfeed.Loader(jpeg_shards[0], extras=("txt",), extras_bytes=20, batch_size=7,
                         image_size=8, shuffle=False, num_workers=1) as ld:
        with pytest.raises(ringfeed.RingfeedError) as e:
            list(ld)
    msg = str(e.value)
    assert jpeg_shards[0] in msg and ".txt is" in msg and "extras_bytes=20" in msg
    # bad names, and sources that have no members
    with pytest.raises(ValueError):
        ringfeed.Loader(jpeg_shards, extras=("txt", "TXT"))
    with pytest.raises(ValueError):
        ringfeed.Loader(jpeg_shards, extras=("a,b",))
    with pytest.raises(TypeError):
        ringfeed.Loader(jpeg_shards, label=3)
    with pytest.raises(ValueError) as e:
        ringfeed.Loader(jpeg_shards, label="a/b")
    assert "label" in str(e.value)
    rec = str(tmp_path / "r.bin")
    open(rec, "wb").write(bytes(64))
    for kw in ({"label": None}, {"extras": ("txt",)}):
        with pytest.raises(ValueError) as e:
            ringfeed.Loader(rec, record_size=8, **kw)
        assert "record files have neither" in str(e.value)
    folder = os.path.join(str(tmp_path), "f")
    os.makedirs(os.path.join(folder, "c"))
    Image.fromarray(picture(0)).save(os.path.join(folder, "c", "a.jpg"))
    with pytest.raises(ValueError) as e:
        ringfeed.Loader(folder, extras=("txt",))
    assert "tar shards" in str(e.value) and "image folder" in str(e.value)
    with ringfeed.Loader(folder, label="cls", batch_size=1, image_size=8) as ld:
        assert ld.num_samples == 1


# ------------------------------------------------------ compressed shards

def test_compressed_shards_refused(jpeg_shards, tmp_path):
    raw = open(jpeg_shards[0], "rb").read()
    gz = str(tmp_path / "shards.tar.gz")
    with gzip.open(gz, "wb") as f:
        f.write(raw)
    for spec in (gz, [gz], str(tmp_path / "shards.tar.g*"), [jpeg_shards[0], gz]):
        with pytest.raises(ringfeed.RingfeedError) as e:
            ringfeed.Loader(spec)
        msg = str(e.value)
        assert "shards.tar.gz is compressed" in msg, msg
        assert "cannot be read at offsets" in msg and "gunzip" in msg
        assert e.value.status == ringfeed._lib.RF_E_SOURCE
    with tarfile.open(str(tmp_path / "t.tgz"), "w:gz") as tf:
        tf.add(jpeg_shards[0], arcname="x.tar")
    with pytest.raises(ringfeed.RingfeedError, match="t.tgz is compressed"):
        ringfeed.Loader(str(tmp_path / "t.tgz"))
    # by its first bytes, whatever the name
    disguised = str(tmp_path / "disguised.tar")
    os.rename(gz, disguised)
    with pytest.raises(ringfeed.RingfeedError, match=r"disguised.tar is compressed \(gzip\)"):
        ringfeed.Loader(disguised)
