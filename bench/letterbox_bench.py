#!/usr/bin/python3
"""letterbox_bench.py - ringfeed's letterbox against a DataLoader doing the same
with PIL and torchvision, on the same cores.

    PYTHONPATH=bindings/python RINGFEED_LIBRARY=build/libringfeed.so \\
        python3 bench/letterbox_bench.py /work/data/photos_big [--size 640] [--rounds 3]
        [--workers 2] [--batch 32] [--json OUT]

Both read the image folder FOLDER (ImageFolder's files) and yield uint8
batches [B, S, S, 3] of each picture resized to fit inside S x S keeping
its aspect ratio, centred, padded with 114 (YOLO's gray), plus each
picture's valid size and scale:
  ringfeed:   Loader(transform="letterbox", image_size=S, fill=114,
              num_workers=W), its default (exact=False: DCT scaling);
  DataLoader: DataLoader(ImageFolder(transform=...), num_workers=W) whose
              transform is PIL's decode, torchvision's Resize((h, w)) to the
              fitted size and F.pad to S x S (fill 114), PILToTensor and a
              permute to HWC, the sizes and scale beside.
One epoch each, from construction to the last batch, alternating for
--rounds rounds; the medians and their ratio are printed, and with --json
each round is appended as a JSON line.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                "python"))
import ringfeed  # noqa: E402

FILL = 114


class Letterbox:
    """The letterbox of ringfeed's rule (lib/letterbox.c) with PIL + torchvision."""

    def __init__(self, size):
        self.size = size

    def __call__(self, im):
        s = self.size
        w, h = im.size
        if w * s <= s * h:
            nh, nw, r = s, round(w * s / h), s / h
        else:
            nh, nw, r = round(h * s / w), s, s / w
        im = T.Resize((nh, nw))(im)
        top, left = (s - nh) // 2, (s - nw) // 2
        im = F.pad(im, [left, top, s - nw - left, s - nh - top], fill=FILL)
        return (T.PILToTensor()(im).permute(1, 2, 0), torch.tensor([nh, nw], dtype=torch.int32),
                torch.tensor(r, dtype=torch.float32))


def run_ringfeed(folder, size, workers, batch):
    t0 = time.perf_counter()
    n = 0
    with ringfeed.Loader(folder, batch_size=batch, image_size=size, transform="letterbox",
                         fill=FILL, num_workers=workers, shuffle=True, flip=False) as ld:
        for images, labels, sizes, scale in ld:
            n += len(labels)
    return n, time.perf_counter() - t0


def run_torch(folder, size, workers, batch):
    t0 = time.perf_counter()
    n = 0
    ds = ImageFolder(folder, transform=Letterbox(size))
    dl = DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers)
    for (images, sizes, scale), labels in dl:
        n += len(labels)
    return n, time.perf_counter() - t0


def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                       "")
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "kernel": platform.release()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--size", type=int, default=640)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    rates = {"ringfeed": [], "dataloader": []}
    for r in range(a.rounds):
        for name, fn in (("ringfeed", run_ringfeed), ("dataloader", run_torch)):
            n, s = fn(a.folder, a.size, a.workers, a.batch)
            rates[name].append(n / s)
            print("round %d %-10s %5d images %7.2f s %8.1f img/s" % (r, name, n, s, n / s))
            if a.json:
                with open(a.json, "a") as f:
                    f.write(json.dumps({"bench": "letterbox", "git": rev, "machine": machine(),
                                        "data": a.folder, "size": a.size,
                                        "workers": a.workers, "batch": a.batch, "round": r,
                                        "loader": name, "images": n, "seconds": round(s, 4),
                                        "images_per_sec": round(n / s, 1)}) + "\n")
    m = {k: statistics.median(v) for k, v in rates.items()}
    print("median: ringfeed %.1f img/s, DataLoader %.1f img/s: %.2fx" % (
        m["ringfeed"], m["dataloader"], m["ringfeed"] / m["dataloader"]))


if __name__ == "__main__":
    main()
