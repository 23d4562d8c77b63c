#!/usr/bin/python3
"""shapes_check.py - ringfeed's rectangular outputs against torchvision on real
photographs, and RandomResizedCrop((H, W))'s draws against torchvision's.

    PYTHONPATH=bindings/python RINGFEED_LIBRARY=build/libringfeed.so \\
        python3 bench/shapes_check.py FOLDER [--limit N] [--draws 100000] [--json OUT]

For each picture of the image folder FOLDER (at most --limit):
  center 224x320, center 384x640:  Loader(transform="center", image_size=(H, W),
      exact=True) against Resize(round(max(H, W) / 0.875)) + CenterCrop((H, W)) +
      PILToTensor on PIL's RGB decode: identical pictures;
  resize 384x640:  transform="resize" against Resize((H, W));
  letterbox 640x640:  transform="letterbox", fill 114, against Resize((h, w))
      of the size the batch reports, the padding all 114, the scale
      min(H / h0, W / w0).
Then --draws RandomResizedCrop((224, 320)) boxes of one picture (explain() in
as many epochs) against as many of torchvision's RandomResizedCrop.get_params:
a two-sample chi-square over (width, height, top, left) bins.
Prints a table; with --json appends one JSON line per check.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torchvision.transforms as T
from PIL import Image
from scipy import stats

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                "python"))
import ringfeed  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                "python", "tests"))
from rfhelpers import rrc_draw_table  # noqa: E402  (the tests' table, the same bins)


def outputs(folder, limit, **kw):
    """{sample: (image, sizes or None, scale or None)} and {sample: path}."""
    out, paths = {}, {}
    with ringfeed.Loader(folder, batch_size=16, shuffle=False, flip=False, num_workers=2,
                         output="numpy", exact=True, **kw) as ld:
        for batch in ld.iter_with_indices():
            idx = batch[-1]
            for k, s in enumerate(idx.tolist()):
                out[s] = (batch[0][k].copy(),) + (
                    (batch[2][k].copy(), float(batch[3][k])) if len(batch) == 5 else (None, None))
            if len(out) >= limit:
                break
        for s in out:
            paths[s] = ld.sample_path(s)
    return {s: v for s, v in out.items() if s < limit}, paths


def check(folder, limit, name, **kw):
    got, paths = outputs(folder, limit, **kw)
    H, W = kw["image_size"]
    same = worst = 0
    for s, (img, size, scale) in got.items():
        with Image.open(paths[s]) as im:
            im = im.convert("RGB")
        if kw["transform"] == "center":
            t = T.Compose([T.Resize(int(round(max(H, W) / 0.875))), T.CenterCrop((H, W))])
            want, ok = np.asarray(t(im)), True
        elif kw["transform"] == "resize":
            want, ok = np.asarray(T.Resize((H, W))(im)), True
        else:
            w0, h0 = im.size
            nh, nw = int(size[0]), int(size[1])
            y0, x0 = (H - nh) // 2, (W - nw) // 2
            pad = np.ones((H, W), bool)
            pad[y0:y0 + nh, x0:x0 + nw] = False
            ok = bool((img[pad] == kw["fill"]).all()) and scale == np.float32(min(H / h0,
                                                                                   W / w0))
            img = img[y0:y0 + nh, x0:x0 + nw]
            want = np.asarray(T.Resize((nh, nw))(im))
        d = int(np.abs(img.astype(int) - want.astype(int)).max())
        same += int(d == 0 and ok)
        worst = max(worst, d)
    return {"check": name, "pictures": len(got), "identical": same, "max_abs_diff": worst}


def draws(folder, n, hw):
    H, W = hw
    ours = []
    t0 = time.perf_counter()
    with ringfeed.Loader(folder, batch_size=1, image_size=hw, transform="random_resized_crop",
                         num_workers=1) as ld:
        e0 = ld.explain(0)
        w, h = e0["width"], e0["height"]
        for e in range(n):
            c = ld.explain(0, epoch=e)["crop"]
            ours.append((c["width"], c["height"], c["top"], c["left"]))
    secs = time.perf_counter() - t0
    table = rrc_draw_table(ours, w, h, 8, 4)
    chi2, p, dof, _ = stats.chi2_contingency(table)
    return {"check": "rrc_draws_%dx%d" % hw, "draws": n, "picture": [w, h], "bins": table.shape[1],
            "chi2": round(float(chi2), 2), "dof": int(dof), "p": round(float(p), 4),
            "explain_seconds": round(secs, 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--draws", type=int, default=100_000)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = [check(a.folder, a.limit, "center_224x320", transform="center", image_size=(224, 320)),
            check(a.folder, a.limit, "center_384x640", transform="center", image_size=(384, 640)),
            check(a.folder, a.limit, "resize_384x640", transform="resize", image_size=(384, 640)),
            check(a.folder, a.limit, "letterbox_640x640", transform="letterbox",
                  image_size=(640, 640), fill=114)]
    for r in rows:
        print("%-18s %4d pictures, %4d identical, max |diff| %d" % (
            r["check"], r["pictures"], r["identical"], r["max_abs_diff"]))
    if a.draws:
        d = draws(a.folder, a.draws, (224, 320))
        print("%s: %d draws each, chi2 %.1f on %d dof, p = %.3f" % (
            d["check"], d["draws"], d["chi2"], d["dof"], d["p"]))
        rows.append(d)
    if a.json:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
        with open(a.json, "a") as f:
            for r in rows:
                f.write(json.dumps({"bench": "shapes_check", "git": rev, "data": a.folder, **r})
                        + "\n")


if __name__ == "__main__":
    main()
