#!/usr/bin/python3
"""ringfeed's augmentations against torchvision 0.14 on real photographs.

    PYTHONPATH=bindings/python RINGFEED_LIBRARY=build/libringfeed.so \\
        python3 bench/augment_check.py /work/data/photos10 [--pictures 40] [--json OUT]

Two checks, on pictures of an image folder (never in the tree):
  ops:    every op of ringfeed.augment.apply at 5 magnitudes against
          torchvision's functional op on the same uint8 tensor (a 224 x 224
          RandomResizedCrop of each photograph): identical pictures, max |diff|,
          and the share of identical pixels.
  loader: a Loader with RandAugment, TrivialAugmentWide, AutoAugment,
          ColorJitter, RandomGrayscale and RandomErasing; for each sample,
          torchvision's ops applied with the parameters explain() reports to
          the same loader's output without augmentations (same seed: the crops
          do not change), against the augmented output.
Prints a table and, with --json, appends one JSON line per check.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode
from torchvision.transforms.autoaugment import _apply_op

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                "python"))
import ringfeed  # noqa: E402

NEAREST = InterpolationMode.NEAREST
MAGS = {
    "Identity": [0], "AutoContrast": [0], "Equalize": [0], "Invert": [0], "Grayscale": [0],
    "Posterize": [1, 2, 4, 6, 8], "Solarize": [0.0, 63.75, 127.5, 191.25, 255.0],
    "Brightness": [0.1, 0.5, 1.0, 1.5, 1.9], "Color": [0.1, 0.5, 1.0, 1.5, 1.9],
    "Contrast": [0.1, 0.5, 1.0, 1.5, 1.9], "Sharpness": [0.1, 0.5, 1.0, 1.5, 1.9],
    "Hue": [-0.5, -0.25, 0.0, 0.1, 0.5], "Saturation": [0.0, 0.5, 1.0, 1.5, 3.0],
    "ShearX": [-0.99, -0.3, 0.1, 0.3, 0.99], "ShearY": [-0.99, -0.3, 0.1, 0.3, 0.99],
    "TranslateX": [-101, -32, 5, 32, 101], "TranslateY": [-101, -32, 5, 32, 101],
    "Rotate": [-135, -30, 9, 30, 135], "Erase": [0, 1, 2, 3, 4],
}


def tv(img):
    return torch.from_numpy(np.array(img)).permute(2, 0, 1).contiguous()


def back(t):
    return t.permute(1, 2, 0).contiguous().numpy()


def reference(img, op, m):
    t = tv(img)
    if op in ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
              "Contrast", "Sharpness"):
        mag = m - 1.0 if op in ("Brightness", "Color", "Contrast", "Sharpness") else m
        return back(_apply_op(t, op, float(mag), NEAREST, [0.0, 0.0, 0.0]))
    if op in ("Identity", "AutoContrast", "Equalize", "Invert", "Posterize", "Solarize"):
        return back(_apply_op(t, op, float(m), NEAREST, None))
    if op == "Grayscale":
        return back(F.rgb_to_grayscale(t, num_output_channels=3))
    if op == "Hue":
        return back(F.adjust_hue(t, m))
    if op == "Saturation":
        return back(F.adjust_saturation(t, m))
    i, j = 10 * m, 20 * m
    v = torch.tensor([float(40 * m)] * 3)[:, None, None]
    return back(F.erase(t, i, j, 60, 50, v))


def ours(img, op, m):
    kw = {"Identity": {}, "AutoContrast": {}, "Equalize": {}, "Invert": {}, "Grayscale": {},
          "Posterize": {"bits": m}, "Solarize": {"threshold": m}, "Hue": {"factor": m},
          "Saturation": {"factor": m}, "Rotate": {"angle": m, "fill": 0},
          "ShearX": {"magnitude": m, "fill": 0}, "ShearY": {"magnitude": m, "fill": 0},
          "TranslateX": {"pixels": m, "fill": 0}, "TranslateY": {"pixels": m, "fill": 0},
          "Erase": {"top": 10 * m, "left": 20 * m, "height": 60, "width": 50, "value": 40 * m}}
    a = kw.get(op, {"factor": m})
    return ringfeed.augment.apply(img, op, **a)


def pictures(folder, n):
    from PIL import Image
    paths = []
    for root, _, files in sorted(os.walk(folder)):
        paths += [os.path.join(root, f) for f in sorted(files) if f.lower().endswith(".jpg")]
    step = max(1, len(paths) // n)
    out = []
    for p in paths[::step][:n]:
        im = Image.open(p).convert("RGB")
        w, h = im.size
        s = min(w, h)
        out.append(np.asarray(im.crop(((w - s) // 2, (h - s) // 2, (w + s) // 2, (h + s) // 2))
                              .resize((224, 224), Image.BILINEAR)))
    return out


def check_ops(imgs):
    rows = []
    for op, mags in MAGS.items():
        same_pics = 0
        worst = 0
        min_px = 1.0
        for m in mags:
            for img in imgs:
                a, b = ours(img, op, m), reference(img, op, m)
                d = np.abs(a.astype(int) - b.astype(int))
                same_pics += int(d.max() == 0)
                worst = max(worst, int(d.max()))
                min_px = min(min_px, float((d.max(axis=2) == 0).mean()))
        rows.append({"op": op, "magnitudes": len(mags), "pictures": len(imgs) * len(mags),
                     "identical_pictures": same_pics, "max_abs_diff": worst,
                     "min_identical_pixels": round(min_px, 6)})
    return rows


def replay(img, ops):
    t = tv(img)
    for o in ops:
        if o["transform"] in ("RandAugment", "TrivialAugmentWide", "AutoAugment"):
            t = _apply_op(t, o["op"], o["magnitude"], NEAREST, o.get("fill"))
        elif o["op"] == "Brightness":
            t = F.adjust_brightness(t, o["factor"])
        elif o["op"] == "Contrast":
            t = F.adjust_contrast(t, o["factor"])
        elif o["op"] == "Saturation":
            t = F.adjust_saturation(t, o["factor"])
        elif o["op"] == "Hue":
            t = F.adjust_hue(t, o["factor"])
        elif o["op"] == "Grayscale":
            t = F.rgb_to_grayscale(t, num_output_channels=3)
        elif o["op"] == "Erase":
            v = torch.tensor(o["value"], dtype=torch.float32)[:, None, None]
            t = F.erase(t, o["top"], o["left"], o["height"], o["width"], v)
    return back(t)


def check_loader(folder, batches):
    recipe = [ringfeed.RandAugment(2, 9), ringfeed.TrivialAugmentWide(),
              ringfeed.AutoAugment("imagenet"), ringfeed.ColorJitter(0.4, 0.4, 0.4, 0.1),
              ringfeed.RandomGrayscale(0.2), ringfeed.RandomErasing(0.5, value=(10, 200, 30))]
    kw = dict(batch_size=32, image_size=224, transform="random_resized_crop", flip=True, seed=7,
              num_workers=2, output="numpy")
    plain, aug = {}, {}
    for target, extra in ((plain, {}), (aug, {"augment": recipe})):
        ld = ringfeed.Loader(folder, **kw, **extra)
        for b, (x, _, idx) in enumerate(ld.iter_with_indices()):
            if b >= batches:
                break
            for k, i in enumerate(idx):
                target[int(i)] = np.array(x[k])
        if extra:
            ld.set_epoch(0)
            expl = {i: ld.explain(i) for i in target}
    n = same = 0
    worst = 0
    min_px = 1.0
    ops = 0
    for i, out in aug.items():
        want = replay(plain[i], expl[i]["augment"])
        d = np.abs(want.astype(int) - out.astype(int))
        n += 1
        same += int(d.max() == 0)
        worst = max(worst, int(d.max()))
        min_px = min(min_px, float((d.max(axis=2) == 0).mean()))
        ops += len(expl[i]["augment"])
    return {"samples": n, "ops": ops, "identical_samples": same, "max_abs_diff": worst,
            "min_identical_pixels": round(min_px, 6)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--pictures", type=int, default=40)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--json")
    a = ap.parse_args()
    imgs = pictures(a.folder, a.pictures)
    rows = check_ops(imgs)
    print("%-13s %9s %10s %8s %12s" % ("op", "pictures", "identical", "max|d|", "min same px"))
    for r in rows:
        print("%-13s %9d %10d %8d %12.4f" % (r["op"], r["pictures"], r["identical_pictures"],
                                             r["max_abs_diff"], r["min_identical_pixels"]))
    lo = check_loader(a.folder, a.batches)
    print("loader, explain() replayed with torchvision: %d samples (%d ops), %d identical, max "
          "|diff| %d, at least %.4f of the pixels identical" % (
              lo["samples"], lo["ops"], lo["identical_samples"], lo["max_abs_diff"],
              lo["min_identical_pixels"]))
    if a.json:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
        with open(a.json, "a") as f:
            for r in rows:
                f.write(json.dumps({"bench": "augment_check", "check": "ops", "git": rev,
                                    "data": a.folder, **r}) + "\n")
            f.write(json.dumps({"bench": "augment_check", "check": "loader", "git": rev,
                                "data": a.folder, **lo}) + "\n")


if __name__ == "__main__":
    main()
