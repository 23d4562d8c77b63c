"""PNG, BMP and PBM/PGM/PPM through the Loader, byte for byte against PIL.

Every variant PIL reads (PNG: gray 1/2/4/8/16-bit, gray+alpha 8/16, RGB and
RGBA 8/16, palettes of 1/2/4/8 bits with and without tRNS and with indices
past the palette, tRNS on gray and RGB, gAMA/sBIT/iCCP/tEXt chunks, Adam7;
BMP: 1/4/8-bit palettes, gray ramps, 16-bit 5-5-5 and 5-6-5, 24, 32 with
every bit-field layout PIL takes, top-down, OS/2 and V5 headers, RLE8, RLE4;
PNM: P1..P6, maxvals 1..65535, comments) is written to a folder (by PIL where
it writes it, by fmtwriters otherwise) and read through a list file:
  - transform "none" on square pictures: exactly np.asarray(PIL's
    Image.open(p).convert("RGB"));
  - center 224 and a larger size (upscaling): exactly torchvision's
    Resize + CenterCrop + PILToTensor on that decode.
Broken files (truncated, corrupt, huge dimensions) are reported with their
path and reason under on_error="skip" and "raise".
"""

import io
import os
import struct
import zlib

import numpy as np
import pytest

import ringfeed
from fmtwriters import (bmp_bytes, bmp_rows, png_bytes, pnm_binary, pnm_plain, rle4,
                        rle8)
from rfhelpers import epoch_under_raise, photo_like, reference_center

PIL = pytest.importorskip("PIL.Image")


def _have_png(lib_probe_dir):
    """False when this libringfeed was built without libspng."""
    p = os.path.join(lib_probe_dir, "probe.png")
    with open(p, "wb") as f:
        f.write(png_bytes(np.zeros((4, 4, 3), np.uint8), 8, 2))
    lst = os.path.join(lib_probe_dir, "probe.txt")
    with open(lst, "w") as f:
        f.write("%s\t0\n" % p)
    try:
        with ringfeed.Loader(lst, batch_size=1, image_size=4, transform="none", shuffle=False,
                             output="numpy") as ld:
            list(ld)
        return True
    except ringfeed.RingfeedError as e:
        assert "this build has no libspng" in str(e), str(e)
        return False


def _quantized(rgb, colors):
    """(indices [h, w], palette [n, 3]) of an RGB picture, n <= colors."""
    im = PIL.fromarray(rgb).quantize(colors)
    pal = np.array(im.getpalette()[:3 * colors], np.uint8).reshape(-1, 3)
    return np.asarray(im), pal


def _pil_png(mode_of, rgb, **save):
    buf = io.BytesIO()
    mode_of(PIL.fromarray(rgb)).save(buf, "PNG", **save)
    return buf.getvalue()


def png_variants(w, h, seed):
    rgb = photo_like(w, h, seed)
    rng = np.random.default_rng(seed)
    gray = rgb[..., 1]
    alpha = rng.integers(0, 256, (h, w), dtype=np.uint8)
    g16 = (gray.astype(np.uint32) * 257 // rng.integers(1, 300)).astype(np.uint16)
    g16[::3] = rng.integers(0, 300, g16[::3].shape)  # some values below 256, most above
    c16 = rgb.astype(np.uint16) * 257 + rng.integers(0, 256, rgb.shape).astype(np.uint16)
    a16 = rng.integers(0, 65536, (h, w), dtype=np.uint16)
    idx, pal = _quantized(rgb, 200)
    v = {
        "rgb8": _pil_png(lambda im: im, rgb),
        "rgba8": _pil_png(lambda im: im.convert("RGBA"), rgb),
        "rgba8-alpha": png_bytes(np.dstack([rgb, alpha]), 8, 6),
        "l8": _pil_png(lambda im: im.convert("L"), rgb),
        "la8": png_bytes(np.dstack([gray, alpha]), 8, 4),
        "bw1-pil": _pil_png(lambda im: im.convert("1"), rgb),
        "p8-pil": _pil_png(lambda im: im.quantize(256), rgb),
        "p8-pil-trns": _pil_png(lambda im: im.quantize(64), rgb, transparency=3),
        "p4-pil": _pil_png(lambda im: im.quantize(16), rgb, bits=4),
        "p2-pil": _pil_png(lambda im: im.quantize(4), rgb, bits=2),
        "i16-pil": _pil_png(lambda im: PIL.fromarray(g16.astype(np.int32)).convert("I"), rgb),
        "g16": png_bytes(g16, 16, 0),
        "g16-trns": png_bytes(g16, 16, 0, trns=struct.pack(">H", 1000)),
        "la16": png_bytes(np.dstack([g16, a16]), 16, 4),
        "rgb16": png_bytes(c16, 16, 2),
        "rgb16-trns": png_bytes(c16, 16, 2, trns=struct.pack(">HHH", 1, 2, 3)),
        "rgba16": png_bytes(np.dstack([c16, a16]), 16, 6),
        "rgb8-trns": png_bytes(rgb, 8, 2, trns=struct.pack(">HHH", 10, 20, 30)),
        "g8-trns": png_bytes(gray, 8, 0, trns=struct.pack(">H", 7)),
        "g8-gama-chunks": png_bytes(gray, 8, 0, chunks=[
            (b"gAMA", struct.pack(">I", 45455)), (b"sBIT", b"\x05"),
            (b"tEXt", b"Comment\0ringfeed"),
            (b"iCCP", b"fake\0\0" + zlib.compress(b"not really a profile"))]),
        "rgb8-gama": png_bytes(rgb, 8, 2, chunks=[(b"gAMA", struct.pack(">I", 100000)),
                                                   (b"cHRM", struct.pack(">8I", *range(8)))]),
        "p8-trns-alpha": png_bytes(idx, 8, 3, plte=pal, trns=bytes(range(0, 250, 3))),
        "p8-short-plte": png_bytes(idx, 8, 3, plte=pal[:50]),  # indices past the palette: gray
    }
    for d in (1, 2, 4):
        q = (gray >> (8 - d)).astype(np.uint8)
        v["g%d" % d] = png_bytes(q, d, 0)
        v["g%d-trns" % d] = png_bytes(q, d, 0, trns=struct.pack(">H", 1))
        pi, pp = _quantized(rgb, 1 << d)
        v["p%d" % d] = png_bytes(pi, d, 3, plte=pp)
        v["p%d-trns" % d] = png_bytes(pi, d, 3, plte=pp, trns=b"\x00\x80")
        v["p%d-short-plte" % d] = png_bytes(pi, d, 3, plte=pp[:1])
        v["g%d-adam7" % d] = png_bytes(q, d, 0, interlace=True)
        v["p%d-adam7" % d] = png_bytes(pi, d, 3, plte=pp, interlace=True)
    v["rgb8-adam7"] = png_bytes(rgb, 8, 2, interlace=True)
    v["rgba16-adam7"] = png_bytes(np.dstack([c16, a16]), 16, 6, interlace=True)
    v["g16-adam7"] = png_bytes(g16, 16, 0, interlace=True)
    v["la8-adam7"] = png_bytes(np.dstack([gray, alpha]), 8, 4, interlace=True)
    v["p8-adam7-short-plte"] = png_bytes(idx, 8, 3, plte=pal[:20], interlace=True)
    return {k + ".png": b for k, b in v.items()}


def _pil_bmp(mode_of, rgb):
    buf = io.BytesIO()
    mode_of(PIL.fromarray(rgb)).save(buf, "BMP")
    return buf.getvalue()


def bmp_variants(w, h, seed):
    rgb = photo_like(w, h, seed)
    rng = np.random.default_rng(seed)
    bgr = rgb[..., ::-1]
    alpha = rng.integers(0, 256, (h, w, 1), dtype=np.uint8)
    idx8, pal8 = _quantized(rgb, 256)
    idx4, pal4 = _quantized(rgb, 16)
    idx1, pal1 = _quantized(rgb, 2)
    c16 = rng.integers(0, 65536, (h, w), dtype=np.uint16).astype("<u2").view(np.uint8)
    c16 = c16.reshape(h, 2 * w)
    v = {
        "rgb24-pil": _pil_bmp(lambda im: im, rgb),
        "l8-pil": _pil_bmp(lambda im: im.convert("L"), rgb),
        "p8-pil": _pil_bmp(lambda im: im.quantize(200), rgb),
        "bw1-pil": _pil_bmp(lambda im: im.convert("1"), rgb),
        "rgba32-pil": _pil_bmp(lambda im: im.convert("RGBA"), rgb),
        "p1": bmp_bytes(w, h, 1, bmp_rows(idx1, 1), palette=pal1),
        "p4": bmp_bytes(w, h, 4, bmp_rows(idx4, 4), palette=pal4),
        "p4-short-pal": bmp_bytes(w, h, 4, bmp_rows(idx4, 4), palette=pal4[:5], colors=5),
        "p8-short-pal": bmp_bytes(w, h, 8, bmp_rows(idx8, 8), palette=pal8[:100], colors=100),
        "bw8": bmp_bytes(w, h, 8, bmp_rows(idx8, 8), palette=[(0, 0, 0), (255, 255, 255)],
                         colors=2),
        "p8-topdown": bmp_bytes(w, h, 8, bmp_rows(idx8, 8, topdown=True), palette=pal8,
                                topdown=True),
        "p8-os2": bmp_bytes(w, h, 8, bmp_rows(idx8, 8), palette=pal8, header=12),
        "rgb24-os2": bmp_bytes(w, h, 24, bmp_rows(bgr.reshape(h, -1), 24), header=12),
        "rgb24-v5-topdown": bmp_bytes(w, h, 24, bmp_rows(bgr.reshape(h, -1), 24, True),
                                      header=124, topdown=True),
        "rgb555": bmp_bytes(w, h, 16, bmp_rows(c16, 16)),
        "rgb555-bf": bmp_bytes(w, h, 16, bmp_rows(c16, 16), comp=3,
                               masks=(0x7C00, 0x3E0, 0x1F)),
        "rgb565-bf": bmp_bytes(w, h, 16, bmp_rows(c16, 16), comp=3,
                               masks=(0xF800, 0x7E0, 0x1F)),
        "rgb565-bf-v4": bmp_bytes(w, h, 16, bmp_rows(c16, 16), comp=3, header=108,
                                  masks=(0xF800, 0x7E0, 0x1F, 0)),
        "rgb24-bf": bmp_bytes(w, h, 24, bmp_rows(bgr.reshape(h, -1), 24), comp=3,
                              masks=(0xFF0000, 0xFF00, 0xFF)),
        "bgrx32": bmp_bytes(w, h, 32, bmp_rows(np.dstack([bgr, alpha]).reshape(h, -1), 32)),
        "rle8": bmp_bytes(w, h, 8, rle8(idx8), comp=1, palette=pal8),
        "rle8-gray": bmp_bytes(w, h, 8, rle8(rgb[..., 0]), comp=1,
                               palette=[(i, i, i) for i in range(256)]),
        "rle4": bmp_bytes(w, h, 4, rle4(idx4), comp=2, palette=pal4),
    }
    layouts = {  # 32-bit bit fields PIL takes: masks, and the bytes of a pixel
        "bgrx": ((0xFF0000, 0xFF00, 0xFF, 0), [bgr, alpha]),
        "xbgr": ((0xFF000000, 0xFF0000, 0xFF00, 0), [alpha, bgr]),
        "abgr": ((0xFF000000, 0xFF0000, 0xFF00, 0xFF), [alpha, bgr]),
        "rgba": ((0xFF, 0xFF00, 0xFF0000, 0xFF000000), [rgb, alpha]),
        "bgra": ((0xFF0000, 0xFF00, 0xFF, 0xFF000000), [bgr, alpha]),
        "zero": ((0, 0, 0, 0), [bgr, alpha]),
    }
    for name, (masks, parts) in layouts.items():
        raster = bmp_rows(np.dstack(parts).reshape(h, -1), 32)
        v["bf32-" + name] = bmp_bytes(w, h, 32, raster, comp=3, header=108, masks=masks)
    v["bf32-bgrx-hdr40"] = bmp_bytes(w, h, 32, bmp_rows(np.dstack([bgr, alpha]).reshape(h, -1),
                                                         32), comp=3, masks=(0xFF0000, 0xFF00,
                                                                             0xFF))
    return {k + ".bmp": b for k, b in v.items()}


def pnm_variants(w, h, seed):
    rgb = photo_like(w, h, seed)
    rng = np.random.default_rng(seed)
    gray = rgb[..., 2]
    bits = (gray > 128).astype(np.uint8)
    v = {}
    for mode, ext in (("1", "pbm"), ("L", "pgm"), ("RGB", "ppm")):
        buf = io.BytesIO()
        PIL.fromarray(rgb).convert(mode).save(buf, "PPM")
        v["pil-%s.%s" % (mode, ext)] = buf.getvalue()
    g16 = (gray.astype(np.int32) * 3 + rng.integers(0, 200, gray.shape)).astype(np.int32)
    buf = io.BytesIO()
    PIL.fromarray(g16).save(buf, "PPM")  # mode "I": P5 at maxval 65535
    v["pil-I.pgm"] = buf.getvalue()
    v["p1.pbm"] = pnm_plain(1, bits, w, h)
    for mx in (1, 15, 255, 1000, 65535):
        s = (gray.astype(np.int64) * mx // 255)
        c = (rgb.astype(np.int64) * mx // 255)
        v["p2-max%d.pgm" % mx] = pnm_plain(2, s, w, h, mx)
        v["p3-max%d.ppm" % mx] = pnm_plain(3, c, w, h, mx)
        v["p5-max%d.pgm" % mx] = pnm_binary(5, s, w, h, mx)
        v["p6-max%d.ppm" % mx] = pnm_binary(6, c, w, h, mx)
    over = gray.copy()  # binary samples over maxval are clipped by PIL
    v["p5-max100-over.pgm"] = pnm_binary(5, over, w, h, 100)
    v["p4-comment.pbm"] = (b"P4 # width then height\n%d\n%d\n" % (w, h) +
                           np.packbits(bits, axis=1).tobytes())
    return v


def _write(folder, files):
    paths = []
    for name, data in sorted(files.items()):
        p = os.path.join(folder, name)
        with open(p, "wb") as f:
            f.write(data)
        paths.append(p)
    return paths


def _pil_rgb(path):
    with PIL.open(path) as im:
        return np.asarray(im.convert("RGB"))


def _loader_outputs(paths, tmp, **kw):
    """Loader outputs, in list order, for paths read through a list file."""
    lst = os.path.join(tmp, "list-%d.txt" % len(os.listdir(tmp)))
    with open(lst, "w") as f:
        for i, p in enumerate(paths):
            f.write("%s\t%d\n" % (p, i))
    out = []
    args = dict(batch_size=8, shuffle=False, output="numpy", num_workers=2)
    args.update(kw)
    with ringfeed.Loader(lst, **args) as ld:
        for images, labels in ld:
            out.extend(images[k].copy() for k in range(len(labels)))
        assert ld.stats()["errors"] == []
    assert len(out) == len(paths)
    return out


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("formats"))
    has_png = _have_png(tmp)
    files = {}
    for side, (w, h) in (("sq", (41, 41)), ("land", (97, 61)), ("port", (50, 77))):
        for group in ((png_variants,) if has_png else ()) + (bmp_variants, pnm_variants):
            for name, data in group(w, h, w * 7 + h).items():
                files["%s-%s" % (side, name)] = data
    folder = os.path.join(tmp, "pics")
    os.mkdir(folder)
    paths = _write(folder, files)
    for p in paths:  # every file is one PIL reads: a file PIL refuses tests nothing here
        _pil_rgb(p)
    return tmp, paths, has_png


def test_exact_pixels_against_pil(variants):
    tmp, paths, has_png = variants
    square = [p for p in paths if os.path.basename(p).startswith("sq-")]
    got = _loader_outputs(square, tmp, transform="none", image_size=41)
    bad = [os.path.basename(p) for p, g in zip(square, got) if not np.array_equal(g, _pil_rgb(p))]
    assert not bad, "decoded differently from PIL: %s" % bad
    assert len(square) >= (100 if has_png else 55)  # the variants above, all there


@pytest.mark.parametrize("size", [224, 300])
def test_center_matches_torchvision(variants, size):
    """224: 97x61 and friends are enlarged to 256; 300 enlarges more."""
    tmp, paths, _ = variants
    got = _loader_outputs(paths, tmp, transform="center", image_size=size)
    bad = [os.path.basename(p) for p, g in zip(paths, got)
           if not np.array_equal(g, reference_center(p, size))]
    assert not bad, "differs from torchvision Resize + CenterCrop on PIL: %s" % bad


def test_png_without_libspng_is_a_clear_error(variants):
    tmp, paths, has_png = variants
    if has_png:
        pytest.skip("this libringfeed has libspng (the reason is tested by test_formats.c)")
    # _have_png already checked the reason


# ------------------------------------------------------------- bad files

def _bad_files(has_png):
    rgb = photo_like(120, 90, 5)
    good_png = png_bytes(rgb, 8, 2)
    good_bmp = bmp_bytes(120, 90, 24, bmp_rows(rgb[..., ::-1].reshape(90, -1), 24))
    good_ppm = pnm_binary(6, rgb, 120, 90)
    bad = {
        "trunc.bmp": (good_bmp[:len(good_bmp) // 2], "truncated"),
        "huge.bmp": (bmp_bytes(60000, 60000, 24, b""), "exceeds the limit"),
        "depth.bmp": (bmp_bytes(4, 4, 2, bytes(16), palette=[(1, 2, 3)] * 4), "depth"),
        "trunc.ppm": (good_ppm[:len(good_ppm) - 7], "truncated"),
        "huge.ppm": (b"P6\n60000 60000\n255\n" + bytes(100), "exceeds the limit"),
        "word.pgm": (b"P2 2 1 255\n1 x\n", "not a plain decimal"),
    }
    if has_png:
        corrupt = bytearray(good_png)
        corrupt[len(corrupt) // 2] ^= 0x55
        huge = bytearray(good_png)
        huge[16:24] = struct.pack(">II", 70000, 70000)
        huge[29:33] = struct.pack(">I", zlib.crc32(bytes(huge[12:29])) & 0xFFFFFFFF)
        bad.update({
            "trunc.png": (good_png[:len(good_png) * 2 // 3], "PNG"),
            "corrupt.png": (bytes(corrupt), "PNG"),
            "huge.png": (bytes(huge), "exceeds the limit"),
        })
    else:
        bad["nolib.png"] = (good_png, "this build has no libspng")
    return bad


@pytest.fixture(scope="module")
def bad_folder(tmp_path_factory, variants):
    tmp = str(tmp_path_factory.mktemp("badformats"))
    bad = _bad_files(variants[2])
    paths = _write(tmp, {k: v[0] for k, v in bad.items()})
    # enough good files that a skipped sample finds a substitute
    good = _write(tmp, {"zz-good%02d.ppm" % i: pnm_binary(6, photo_like(30, 20, i), 30, 20)
                        for i in range(24)})
    lst = os.path.join(tmp, "list.txt")
    with open(lst, "w") as f:
        for i, p in enumerate(paths + good):
            f.write("%s\t%d\n" % (p, i))
    return lst, {os.path.basename(k): v[1] for k, v in bad.items()}, good


def test_bad_files_are_recorded_skips(bad_folder):
    lst, bad, good = bad_folder
    with ringfeed.Loader(lst, batch_size=4, image_size=32, shuffle=False, output="numpy",
                         on_error="skip", verify="always") as ld:
        n = sum(len(labels) for _, labels in ld)
        assert n == ld.num_samples == len(bad) + len(good)  # skipped ones are replaced
        errors = ld.stats()["errors"]
    reasons = {os.path.basename(e["path"]): e["reason"] for e in errors}
    assert set(reasons) == set(bad), reasons
    for name, want in bad.items():
        assert want in reasons[name], "%s: %r lacks %r" % (name, reasons[name], want)


def test_bad_files_raise_with_path_and_reason(bad_folder):
    lst, bad, good = bad_folder
    seen = set()
    ld = ringfeed.Loader(lst, batch_size=1, image_size=32, shuffle=False, output="numpy",
                         on_error="raise")
    try:
        ok, errors, _ = epoch_under_raise(ld)  # one error per bad file, then the epoch's end
    finally:
        ld.close()
    for e in errors:
        hits = [n for n in bad if n in str(e)]
        assert len(hits) == 1, str(e)
        assert bad[hits[0]] in str(e), str(e)
        seen.add(hits[0])
    assert seen == set(bad)
    assert ok == len(good)
