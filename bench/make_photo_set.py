#!/usr/bin/python3
"""make_photo_set.py: an ImageNet-like image folder cut from real photographs.

    bench/make_photo_set.py OUT PHOTO [PHOTO ...] [--count 1500] [--classes 10]
                            [--seed 0] [--quality 75-95]

Synthetic pictures decode differently from photographs (less texture, fewer
coefficients for the entropy decoder), so performance figures are quoted on
pictures cut from real photographs: each output is a random crop (30-100% of
the photograph's area, aspect 3:4 to 4:3) resized with Lanczos so that its
longer side is 400-640 pixels (ImageNet's pictures are mostly about 500x375),
encoded as a baseline 4:2:0 JPEG at a quality drawn from --quality. Output i
comes from photograph i mod n (n photographs) and goes to class (i div n) mod
--classes, so that every class mixes the photographs. The same arguments give
the same files.

The figures in bench/results/ used matplotlib's sample grace_hopper.jpg and
the photographs shipped in scikit-image's wheel (astronaut, chelsea, coffee,
rocket, motorcycle_left/right, hubble_deep_field, retina, ihc):
    pip download --no-deps scikit-image && unzip -j scikit_image-*.whl 'skimage/data/*' -d photos
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
    a = p.parse_args()
    try:
        qlo, qhi = (int(x) for x in a.quality.split("-"))
    except ValueError:
        p.error("--quality: expected LO-HI, e.g. 75-95")
    if not (1 <= qlo <= qhi <= 100) or a.count < 1 or a.classes < 1:
        p.error("need 1 <= LO <= HI <= 100, --count >= 1, --classes >= 1")

    from PIL import Image
    sources = []
    for path in a.photos:
        im = Image.open(path)
        im.load()
        sources.append((os.path.basename(path), im.convert("RGB")))
    rng = random.Random(a.seed)
    total = 0
    for i in range(a.count):
        name, im = sources[i % len(sources)]
        w, h = im.size
        for _ in range(20):  # a crop of the wanted area and aspect that fits
            area = w * h * rng.uniform(0.3, 1.0)
            aspect = rng.uniform(3 / 4, 4 / 3)
            cw, ch = round((area * aspect) ** 0.5), round((area / aspect) ** 0.5)
            if cw <= w and ch <= h:
                break
        else:
            cw, ch = w, h
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        longer = rng.randint(400, 640)
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
