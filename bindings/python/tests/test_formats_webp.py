"""WebP through the Python binding (issue 14): lossy and lossless pictures,
with and without alpha, written by PIL, and animations (PIL opens their first
frame), read through a list-file source, come out byte-identical to
torchvision's Resize + CenterCrop + PILToTensor on PIL's
Image.open(p).convert("RGB"); truncated, corrupt and lying WebP files are
errors with their reason under on_error="skip" and "raise"."""

import os
import struct

import numpy as np
import pytest

import ringfeed
from rfhelpers import epoch_under_raise, photo_like, reference_center

pytest.importorskip("PIL.WebPImagePlugin")


def _have_webp():
    from PIL import features
    return features.check("webp")


pytestmark = pytest.mark.skipif(not _have_webp(), reason="PIL without WebP support")

# (name, width, height, lossless, alpha, quality)
KINDS = [
    ("lossy_rgb", 300, 200, False, False, 85),
    ("lossy_rgba", 257, 181, False, True, 90),
    ("lossless_rgb", 181, 257, True, False, 80),
    ("lossless_rgba", 230, 230, True, True, 80),
    ("lossy_small", 64, 48, False, False, 80),       # upscaled to every output size
    ("lossless_small_rgba", 45, 71, True, True, 80),
    ("lossy_q100", 199, 133, False, False, 100),
]


def _rgba(w, h, seed):
    rgb = photo_like(w, h, seed)
    y, x = np.mgrid[0:h, 0:w]
    a = ((x + y) * 255 // max(w + h - 2, 1)).astype(np.uint8)
    a[:, w // 3:w // 2] = 0  # fully transparent band: its colour must survive as PIL keeps it
    return np.dstack([rgb, a])


def _riff(chunks):
    body = b"WEBP" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _chunk(tag, payload):
    return tag + struct.pack("<I", len(payload)) + payload + (b"\0" if len(payload) % 2 else b"")


def _le24(v):
    return struct.pack("<I", v)[:3]


def _animation(path, seed):
    """A two-frame animation assembled by hand: frame 1 is 50x40 at (12, 8)
    on an 80x60 canvas (PIL shows it on transparent black), frame 2 covers
    the canvas."""
    from PIL import Image
    import io
    frames = []
    for w, h, s in ((50, 40, seed), (80, 60, seed + 1)):
        buf = io.BytesIO()
        Image.fromarray(photo_like(w, h, s), "RGB").save(buf, "WEBP", quality=85)
        frames.append(buf.getvalue()[12:])  # the "VP8 " chunk of a simple file
    anmf = [_chunk(b"ANMF", _le24(6) + _le24(4) + _le24(49) + _le24(39) + _le24(100)
                   + b"\x02" + frames[0]),
            _chunk(b"ANMF", _le24(0) + _le24(0) + _le24(79) + _le24(59) + _le24(100)
                   + b"\x02" + frames[1])]
    vp8x = _chunk(b"VP8X", bytes([0x12, 0, 0, 0]) + _le24(79) + _le24(59))
    anim = _chunk(b"ANIM", struct.pack("<IH", 0xff336699, 0))
    with open(path, "wb") as f:
        f.write(_riff([vp8x, anim] + anmf))


@pytest.fixture(scope="module")
def webp_set(tmp_path_factory):
    """root/*.webp of every kind plus two animations; [(path, label)]."""
    from PIL import Image
    root = tmp_path_factory.mktemp("webp")
    items = []
    for i, (name, w, h, lossless, alpha, q) in enumerate(KINDS):
        p = str(root / ("%s.webp" % name))
        arr = _rgba(w, h, 30 + i) if alpha else photo_like(w, h, 30 + i)
        Image.fromarray(arr, "RGBA" if alpha else "RGB").save(p, "WEBP", lossless=lossless,
                                                              quality=q)
        items.append((p, i))
    p = str(root / "anim_pil.webp")  # PIL's own animation writer
    frames = [Image.fromarray(photo_like(120, 90, 70 + k), "RGB") for k in range(3)]
    frames[0].save(p, "WEBP", save_all=True, append_images=frames[1:], duration=50, quality=80)
    items.append((p, len(items)))
    p = str(root / "anim_offset.webp")
    _animation(p, 80)
    items.append((p, len(items)))
    for p, _ in items:
        with Image.open(p) as im:
            assert im.format == "WEBP", p
    # A library built without libwebp refuses WebP files, saying so: skip then.
    lf = _list_file(root, items[:1], "probe.txt")
    try:
        with ringfeed.Loader(lf, batch_size=1, image_size=8, transform="center",
                             num_workers=1, output="numpy") as ld:
            next(iter(ld))
    except ringfeed.RingfeedError as e:
        if "this build has no libwebp" in str(e):
            pytest.skip("libringfeed built without libwebp: " + str(e))
        raise
    return root, items


def _list_file(root, items, name="list.txt"):
    lf = os.path.join(str(root), name)
    with open(lf, "w") as f:
        for p, label in items:
            f.write("%s\t%d\n" % (p, label))
    return lf


@pytest.mark.parametrize("size", [224, 320])
def test_webp_center_equals_torchvision(webp_set, size):
    """Every picture, at 224 (mostly downscaling) and 320 (upscaling): the
    same bytes as torchvision on PIL's decode; any decoding difference fails."""
    root, items = webp_set
    lf = _list_file(root, items)
    with ringfeed.Loader(lf, batch_size=4, image_size=size, transform="center",
                         shuffle=False, num_workers=2, output="numpy") as ld:
        assert ld.num_samples == len(items)
        got, labels = [], []
        for images, lab in ld:
            got.extend(images[k].copy() for k in range(images.shape[0]))
            labels.extend(lab.tolist())
        assert ld.stats()["errors"] == []
    assert labels == [l for _, l in items]
    for (p, _), img in zip(items, got):
        ref = reference_center(p, size)
        assert img.shape == ref.shape
        if not np.array_equal(img, ref):
            diff = np.argwhere(img != ref)[0]
            pytest.fail("%s at %d: first difference at %s: %s vs torchvision %s"
                        % (os.path.basename(p), size, tuple(diff), img[tuple(diff[:2])],
                           ref[tuple(diff[:2])]))


def test_animation_is_first_frame(webp_set):
    """PIL opens an animation's first frame: the hand-made one shows black
    (its transparent canvas) around frame 1."""
    from PIL import Image
    root, items = webp_set
    p = [p for p, _ in items if p.endswith("anim_offset.webp")][0]
    with Image.open(p) as im:
        assert im.n_frames == 2
        rgb = np.asarray(im.convert("RGB"))
    assert rgb.shape == (60, 80, 3)
    assert not rgb[:8].any() and not rgb[:, :12].any() and rgb[8:48, 12:62].any()


def _bad_files(root, items):
    """name -> (bytes, text the reason must contain)."""
    src = dict((os.path.basename(p), open(p, "rb").read()) for p, _ in items)
    lossy, lossless = src["lossy_rgb.webp"], src["lossless_rgb.webp"]
    bad = {}
    bad["cut_half.webp"] = (lossy[:len(lossy) // 2], "truncated")
    bad["cut_header.webp"] = (lossless[:20], "VP8_STATUS_NOT_ENOUGH_DATA")
    bad["cut_anim.webp"] = (src["anim_offset.webp"][:-40], "truncated")
    b = bytearray(lossy)
    b[12 + 8 + 3] ^= 0xFF  # the VP8 key frame's start code
    bad["start_code.webp"] = (bytes(b), "VP8_STATUS_BITSTREAM_ERROR")
    b = bytearray(lossless)
    b[12 + 8 + 1:12 + 8 + 5] = b"\xff\xff\xff\x0f"  # VP8L header: 16384 x 16384
    bad["huge.webp"] = (bytes(b), "exceeds the limit")
    bad["riff_only.webp"] = (b"RIFF\x04\x00\x00\x00WEBP", "VP8_STATUS_")
    return bad


@pytest.fixture(scope="module")
def bad_set(webp_set, tmp_path_factory):
    root, items = webp_set
    bad_root = tmp_path_factory.mktemp("webp_bad")
    bad = _bad_files(root, items)
    good = items[:3]
    entries = list(good)
    for i, (name, (data, _)) in enumerate(sorted(bad.items())):
        p = str(bad_root / name)
        with open(p, "wb") as f:
            f.write(data)
        entries.append((p, 100 + i))
    return _list_file(bad_root, entries), entries, bad


def test_bad_webp_skipped_with_reasons(bad_set):
    lf, entries, bad = bad_set
    with ringfeed.Loader(lf, batch_size=2, image_size=32, transform="center", shuffle=False,
                         num_workers=2, on_error="skip", output="numpy") as ld:
        assert ld.num_samples == len(entries)
        n = sum(images.shape[0] for images, _ in ld)
        st = ld.stats()
    assert n == len(entries)  # skipped samples are substituted, batches stay full
    reasons = {os.path.basename(e["path"]): e["reason"] for e in st["errors"]}
    assert set(reasons) == set(bad), reasons
    for name, (_, want) in bad.items():
        assert want in reasons[name], "%s: %r lacks %r" % (name, reasons[name], want)


def test_bad_webp_raise_names_path_and_reason(bad_set):
    lf, entries, bad = bad_set
    seen = {}
    ld = ringfeed.Loader(lf, batch_size=1, image_size=32, transform="center", shuffle=False,
                         num_workers=1, on_error="raise", output="numpy")
    try:
        ok, errors, _ = epoch_under_raise(ld)
    finally:
        ld.close()
    for e in errors:
        msg = str(e)
        hits = [n for n in bad if n in msg]
        assert len(hits) == 1, msg
        assert bad[hits[0]][1] in msg, msg
        assert hits[0] not in seen, "reported twice: " + msg
        seen[hits[0]] = msg
    assert set(seen) == set(bad)
    assert ok == len(entries) - len(bad)
