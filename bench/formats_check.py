#!/usr/bin/python3
"""formats_check.py: ringfeed against torchvision on pictures of every format.

    bench/formats_check.py PHOTOS OUT [--count 100] [--size 224]

Re-encodes the first --count pictures of the image folder PHOTOS (any format
PIL reads) into OUT/<format>/, one class per format: PNG as RGB, RGBA,
palette (with and without transparency), gray, gray+alpha and 16-bit gray
and RGB; WebP lossy and lossless; BMP; PPM and PGM. Then it checks that
ringfeed indexes as many samples as torchvision's ImageFolder(OUT), and that
`center` at --size gives the bytes of torchvision's Resize(round(S/0.875)) +
CenterCrop(S) + PILToTensor on PIL's decode, for every file, and prints a
line per format (identical files / files). Exit status 1 on any difference.
"""

import argparse
import os
import sys

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))


def variants(img):
    """(class, extension, save function) for each format variant of img (RGB)."""
    rgb = np.asarray(img)
    def save16(path, gray):
        # PIL writes 16-bit PNG only for gray ("I;16"); 16-bit RGB is written here
        # the high byte is the picture, the low byte varies: the 16-to-8 reduction shows
        low = (np.arange(rgb.shape[1], dtype=np.uint16)[None, :, None] * 37) % 256
        a = rgb.astype(np.uint16) * 256 + low
        if gray:
            Image.fromarray(a[:, :, 1], mode="I;16").save(path)
        else:
            write_png16_rgb(path, a)
    return [
        ("png_rgb", "png", lambda p: img.save(p)),
        ("png_rgba", "png", lambda p: _rgba(img).save(p)),
        ("png_palette", "png", lambda p: img.convert("P", palette=Image.ADAPTIVE).save(p)),
        ("png_palette_trns", "png", lambda p: _ptrns(img).save(p, transparency=0)),
        ("png_gray", "png", lambda p: img.convert("L").save(p)),
        ("png_gray_alpha", "png", lambda p: img.convert("LA").save(p)),
        ("png_gray16", "png", lambda p: save16(p, True)),
        ("png_rgb16", "png", lambda p: save16(p, False)),
        ("webp_lossy", "webp", lambda p: img.save(p, "WEBP", quality=85)),
        ("webp_lossless", "webp", lambda p: img.save(p, "WEBP", lossless=True)),
        ("bmp", "bmp", lambda p: img.save(p)),
        ("ppm", "ppm", lambda p: img.save(p)),
        ("pgm", "pgm", lambda p: img.convert("L").save(p)),
    ]


def _rgba(img):
    a = img.convert("RGBA")
    alpha = Image.linear_gradient("L").resize(img.size)
    a.putalpha(alpha)
    return a


def _ptrns(img):
    return img.convert("P", palette=Image.ADAPTIVE, colors=64)


def write_png16_rgb(path, a):
    import struct
    import zlib
    h, w, _ = a.shape
    raw = b"".join(b"\0" + a[y].astype(">u2").tobytes() for y in range(h))
    def chunk(t, d):
        c = struct.pack(">I", len(d)) + t + d
        return c + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("photos")
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--size", type=int, default=224)
    a = ap.parse_args()

    import torch
    import torchvision
    import torchvision.transforms as T
    import ringfeed

    files = []
    for root, _, names in sorted(os.walk(a.photos)):
        for n in sorted(names):
            files.append(os.path.join(root, n))
    files = files[:a.count]
    for i, f in enumerate(files):
        img = Image.open(f).convert("RGB")
        for cls, ext, save in variants(img):
            d = os.path.join(a.out, cls)
            os.makedirs(d, exist_ok=True)
            p = os.path.join(d, "%05d.%s" % (i, ext))
            if not os.path.exists(p):
                save(p)

    ref = torchvision.datasets.ImageFolder(a.out)
    S = a.size
    tf = T.Compose([T.Resize(round(S / 0.875)), T.CenterCrop(S), T.PILToTensor()])
    ld = ringfeed.Loader(a.out, batch_size=64, image_size=S, transform="center", layout="NCHW",
                         shuffle=False, num_workers=2, output="numpy")
    print("ImageFolder: %d samples; ringfeed: %d" % (len(ref), ld.num_samples))
    got = {}
    for images, _, idx in ld.iter_with_indices():
        for k, i in enumerate(idx):
            got[int(i)] = images[k]
    assert len(got) == len(ref), (len(got), len(ref))
    per = {}
    bad = 0
    for i, (path, label) in enumerate(ref.samples):
        want = tf(Image.open(path).convert("RGB")).numpy()
        same = np.array_equal(want, got[i])
        cls = ref.classes[label]
        n, s = per.get(cls, (0, 0))
        per[cls] = (n + 1, s + same)
        bad += not same
    for cls in sorted(per):
        print("  %-18s %d / %d identical" % (cls, per[cls][1], per[cls][0]))
    print("samples: ImageFolder %d, ringfeed %d; %d differ" % (len(ref), len(got), bad))
    ld.close()
    return 1 if bad or len(got) != len(ref) else 0


if __name__ == "__main__":
    sys.exit(main())
