#!/usr/bin/python3
"""make_photo_set.py: an ImageNet-like image folder cut from real photographs.

    bench/make_photo_set.py OUT PHOTO [PHOTO ...] [--count 1500] [--classes 10]
                            [--seed 0] [--quality 75-95] [--side 400-640] [--area 0.3-1.0]

Synthetic pictures decode differently from photographs (less texture, fewer
coefficients for the entropy decoder), so performance figures are quoted on
pictures cut from real photographs: each output is a random crop (--area of
the photograph's area, default 30-100%, aspect 3:4 to 4:3) resized with
Lanczos so that its longer side is drawn from --side (default 400-640 pixels:
ImageNet's pictures are mostly about 500x375; training photographs straight
from cameras and the web are larger, e.g. --side 800-1200), encoded as a
baseline 4:2:0 JPEG at a quality drawn from --quality. Output i
comes from photograph i mod n (n photographs) and goes to class (i div n) mod
--classes, so that every class mixes the photographs. The same arguments give
the same files. A PHOTO may also be scipy 1.9's misc/face.dat (a 1024x768
photograph of a raccoon, stored as bz2-compressed RGB bytes).

The figures in bench/results/ used matplotlib's sample grace_hopper.jpg and
the photographs shipped in scikit-image's wheel (astronaut, chelsea, coffee,
rocket, motorcycle_left/right, hubble_deep_field, retina, ihc):
    pip download --no-deps scikit-image && unzip -j scikit_image-*.whl 'skimage/data/*' -d photos

The larger set of bench/results/ (1,500 JPEGs of 800-1200 px, q90-95) used
the ten colour photographs of 600 px or more among them and in two other
wheels: scipy 1.9.3's misc/face.dat and scikit-learn's datasets/images
(china.jpg, flower.jpg):
    bench/make_photo_set.py OUT face.dat hubble_deep_field.jpg retina.jpg \
        motorcycle_left.png motorcycle_right.png coffee.png rocket.jpg \
        astronaut.png china.jpg flower.jpg --side 800-1200 --area 0.6-1.0 --quality 90-95
Crops of the smaller photographs are enlarged (up to about 2.7x): smoother
than a camera's pixels, so they decode a little faster than real photographs
of that size, which favours the original folder in a comparison.
"""

import argparse
import os
import random
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="folder to write (class folders c00, c01, ...)")
    p.add_argument("photos", nargs="+", help="source photographs (any format PIL reads)")
    p.add_argument("--count", type=int, default=1500)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quality", default="75-95", help="JPEG quality range LO-HI")
    p.add_argument("--side", default="400-640", help="longer side range LO-HI (pixels)")
    p.add_argument("--area", default="0.3-1.0", help="crop area range LO-HI (fractions)")
    a = p.parse_args()
    try:
        qlo, qhi = (int(x) for x in a.quality.split("-"))
        slo, shi = (int(x) for x in a.side.split("-"))
        alo, ahi = (float(x) for x in a.area.split("-"))
    except ValueError:
        p.error("--quality, --side, --area: expected LO-HI, e.g. 75-95, 400-640, 0.3-1.0")
    if (not (1 <= qlo <= qhi <= 100) or not (1 <= slo <= shi) or not (0 < alo <= ahi <= 1)
            or a.count < 1 or a.classes < 1):
        p.error("need 1 <= LO <= HI <= 100 (quality), 1 <= LO <= HI (side), "
                "0 < LO <= HI <= 1 (area), --count >= 1, --classes >= 1")

    from PIL import Image
    sources = []
    for path in a.photos:
        if path.endswith(".dat"):  # scipy.misc's face.dat
            import bz2
            raw = bz2.decompress(open(path, "rb").read())
            im = Image.frombytes("RGB", (1024, 768), raw)
        else:
            im = Image.open(path)
            im.load()
        sources.append((os.path.basename(path), im.convert("RGB")))
    rng = random.Random(a.seed)
    total = 0
    for i in range(a.count):
        name, im = sources[i % len(sources)]
        w, h = im.size
        for _ in range(20):  # a crop of the wanted area and aspect that fits
            area = w * h * rng.uniform(alo, ahi)
            aspect = rng.uniform(3 / 4, 4 / 3)
            cw, ch = round((area * aspect) ** 0.5), round((area / aspect) ** 0.5)
            if cw <= w and ch <= h:
                break
        else:
            cw, ch = w, h
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        longer = rng.randint(slo, shi)
        s = longer / max(cw, ch)
        size = (max(1, round(cw * s)), max(1, round(ch * s)))
        pic = im.crop((x, y, x + cw, y + ch)).resize(size, Image.LANCZOS)
        d = os.path.join(a.out, "c%02d" % (i // len(sources) % a.classes))
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "%05d_%s.jpg" % (i, os.path.splitext(name)[0]))
        pic.save(path, "JPEG", quality=rng.randint(qlo, qhi), subsampling="4:2:0")
        total += os.path.getsize(path)
    print("%s: %d JPEGs from %d photographs, %.1f MB" % (a.out, a.count, len(sources), total / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
