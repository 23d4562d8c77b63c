"""ringfeed-pack reads every picture format the loader reads (JPEG, PNG,
WebP, BMP, PPM/PGM), sniffed from the bytes through the library's decode
seam: a mixed folder packs to JPEG members whose pixels are what
torchvision's Resize makes of the originals. With --keep-original-if-smaller
a picture needing no shrink keeps its own bytes and extension (<key>.png,
...) when they are fewer than the JPEG's (a JPEG always), and ringfeed and
webdataset read such shards with the same keys and labels.
"""

import glob
import io
import os

import numpy as np
import pytest

import ringfeed
import packhelpers
import ringfeed.pack
from packhelpers import needs_pack, pack
from rfhelpers import imagefolder_samples, photo_like

PIL = pytest.importorskip("PIL")
from PIL import Image, features  # noqa: E402

pytestmark = needs_pack

FORMATS = [("jpg", "JPEG"), ("png", "PNG"), ("bmp", "BMP"), ("ppm", "PPM"), ("pgm", "PPM")]
if features.check("webp"):
    FORMATS.append(("webp", "WEBP"))


def members(out):
    """[(key, ext, bytes)] of every member, in order."""
    return [r[1:] for r in packhelpers.members(out)]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """2 classes; each format twice per class: a photo-like picture of about
    90x70 and a flat one of 40x30 (a few bytes as PNG)."""
    root = str(tmp_path_factory.mktemp("mixed") / "root")
    i = 0
    for c in range(2):
        d = os.path.join(root, "c%d" % c)
        os.makedirs(d)
        for ext, fmt in FORMATS:
            for flat in (0, 1):
                w, h = (40, 30) if flat else (90 + i % 7, 70 - i % 5)
                arr = (np.full((h, w, 3), 40 + 9 * i, np.uint8) if flat
                       else photo_like(w, h, 100 + i))
                im = Image.fromarray(arr, "RGB")
                if ext == "pgm":
                    im = im.convert("L")
                kw = {"quality": 92} if fmt == "JPEG" else {}
                if fmt == "WEBP":
                    kw = {"lossless": True}
                im.save(os.path.join(d, "p%02d_%s.%s" % (i, "flat" if flat else "photo", ext)),
                        fmt, **kw)
                i += 1
    return root


def test_mixed_folder_packs_to_jpeg(mixed, tmp_path):
    out = str(tmp_path / "out")
    m = pack(mixed, out, "--max-side", 64, "--shard-count", 7)
    want, _ = imagefolder_samples(mixed)
    assert m["samples"] == len(want) == 4 * len(FORMATS) and m["skipped"] == 0
    rows = members(out)
    pics = [r for r in rows if r[1] != "cls"]
    assert [r[1] for r in pics] == ["jpg"] * len(want)
    assert [int(r[2]) for r in rows if r[1] == "cls"] == [lab for _, lab in want]
    for (path, _), r in zip(want, pics):
        w, h = Image.open(path).size
        pw, ph = Image.open(io.BytesIO(r[2])).size
        if max(w, h) > 64:
            assert max(pw, ph) == 64
        else:
            assert (pw, ph) == (w, h)
        # the resize is torchvision's (PIL's antialiased) on the decoded original;
        # the JPEG (q90, 4:2:0) of these small noisy pictures costs 28-35 dB, a
        # wrong decode (channels, rows, gray) far more
        ref = np.asarray(Image.open(path).convert("RGB").resize((pw, ph), Image.BILINEAR,
                                                                reducing_gap=None), np.float64)
        got = np.asarray(Image.open(io.BytesIO(r[2])).convert("RGB"), np.float64)
        mse = np.mean((ref - got) ** 2)
        assert mse == 0 or 10 * np.log10(255.0 ** 2 / mse) > 26, path


@pytest.fixture(scope="module")
def kept(mixed, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("kept") / "out")
    pack(mixed, out, "--max-side", 1000, "--keep-original-if-smaller")
    return out


def test_keep_original_own_extension(mixed, kept):
    out = kept
    want, _ = imagefolder_samples(mixed)
    pics = [r for r in members(out) if r[1] != "cls"]
    assert len(pics) == len(want)
    kept = 0
    for (path, _), (key, ext, data) in zip(want, pics):
        orig = open(path, "rb").read()
        own = os.path.splitext(path)[1][1:]
        if own == "jpg":
            assert ext == "jpg" and data == orig  # a JPEG is always kept
        elif ext == own:
            assert data == orig
            kept += 1
        else:
            assert ext == "jpg" and len(data) < len(orig)  # the JPEG was smaller
    assert kept >= 2  # the flat PNGs at least
    assert "png" in {r[1] for r in pics}

    # the loader reads them: the kept ones give the pixels of the original folder
    spec = os.path.join(out, "shard-*.tar")
    kw = dict(batch_size=len(want), image_size=24, transform="center", shuffle=False)
    with ringfeed.Loader(spec, **kw) as a, ringfeed.Loader(mixed, **kw) as b:
        (ia, la), (ib, lb) = next(iter(a)), next(iter(b))
        assert np.array_equal(np.asarray(la), np.asarray(lb))
        ia, ib = np.asarray(ia), np.asarray(ib)
        for i, ((path, _), r) in enumerate(zip(want, pics)):
            if r[2] == open(path, "rb").read():
                assert np.array_equal(ia[i], ib[i]), path


def test_webdataset_reads_kept_originals(mixed, kept):
    wds = pytest.importorskip("webdataset")
    want, _ = imagefolder_samples(mixed)
    pics = [r for r in members(kept) if r[1] != "cls"]
    spec = os.path.join(kept, "shard-*.tar")
    urls = sorted(glob.glob(spec))
    got = [(s["__key__"], int(s["cls"]), [k for k in s if k in ("jpg", "png", "bmp", "ppm",
                                                                 "pgm", "webp")])
           for s in wds.WebDataset(urls, shardshuffle=False)]
    assert [(k, lab) for k, lab, _ in got] == [("%06d" % i, lab)
                                               for i, (_, lab) in enumerate(want)]
    assert [e for _, _, e in got] == [[r[1]] for r in pics]
    dec = next(iter(wds.WebDataset(urls, shardshuffle=False).decode("pil")))
    assert any(isinstance(v, Image.Image) for v in dec.values())
