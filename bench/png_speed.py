#!/usr/bin/python3
"""png_speed.py - PNG (or WebP) decoding speed: ringfeed against torchvision's
DataLoader with PIL on the same folder, side by side, and the CPU time
per image of two ringfeed builds (before and after a change).

    bench/png_speed.py PHOTOS OUT [--rounds 5] [--workers 2] [--batch 64] [--size 224]
                       [--library build/libringfeed.so] [--old-library PATH]
                       [--profile build/rf-profile] [--old-profile PATH] [--verify once]
                       [--format png|webp] [--quality 85]

Writes every picture of the image folder PHOTOS (any format PIL reads) into
OUT as a PNG, with PIL's default save (compression level 6, adaptive
filters, as a PNG dataset made with PIL is), same classes and names; files
already there are kept. With --format webp, as lossy WebP at --quality
instead. Then, `rounds` times, alternating which goes first:
  ringfeed    a fresh Loader(OUT, center S, batch B, `workers` workers,
              verify) reads one epoch: images/s from constructing the loader to
              the last batch, and CPU time per image (all threads)
  old         the same with --old-library (when given)
  DataLoader  ImageFolder(OUT, Resize(round(S / 0.875)) + CenterCrop(S) +
              PILToTensor), DataLoader(batch B, num_workers=workers), one
              epoch: images/s, CPU time per image (process and workers)
  rf-profile  --profile and --old-profile (when given) with 1 worker, one
              epoch: the loader's CPU time per image
Each run is its own process (the library is loaded once per process, and
DataLoader's workers start fresh). Every round is printed, then the medians
and their ratios. The files are read once first so that all runs find them
in the page cache. On a shared machine compare figures from the same run.
"""

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..")


def cpu_seconds():
    """This process's CPU time (all threads) plus that of its reaped children."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def make_pictures(photos, out, fmt="png", quality=85):
    from PIL import Image
    save = {"png": {}, "webp": {"quality": quality}}[fmt]
    n = 0
    for cls in sorted(os.listdir(photos)):
        src = os.path.join(photos, cls)
        if not os.path.isdir(src):
            continue
        os.makedirs(os.path.join(out, cls), exist_ok=True)
        for name in sorted(os.listdir(src)):
            dst = os.path.join(out, cls, os.path.splitext(name)[0] + "." + fmt)
            if not os.path.exists(dst):
                with Image.open(os.path.join(src, name)) as im:
                    im.convert("RGB").save(dst + ".tmp", fmt.upper(), **save)
                os.replace(dst + ".tmp", dst)
            n += 1
    return n


def run_ringfeed(a):
    sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
    import ringfeed
    n, c0, t0 = 0, cpu_seconds(), time.perf_counter()
    with ringfeed.Loader(a.out, batch_size=a.batch, image_size=a.size, transform="center",
                         num_workers=a.workers, shuffle=False, output="numpy",
                         verify=a.verify) as ld:
        for images, labels in ld:
            n += len(labels)
        errors = len(ld.stats().get("errors", []))
    dt = time.perf_counter() - t0
    return {"images": n, "images_per_s": n / dt, "cpu_ms": (cpu_seconds() - c0) * 1000 / n,
            "errors": errors}


def run_torch(a):
    import torch
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    tf = T.Compose([T.Resize(round(a.size / 0.875)), T.CenterCrop(a.size), T.PILToTensor()])
    n, c0, t0 = 0, cpu_seconds(), time.perf_counter()
    dl = torch.utils.data.DataLoader(ImageFolder(a.out, transform=tf), batch_size=a.batch,
                                     shuffle=False, num_workers=a.workers)
    it = iter(dl)
    for images, labels in it:
        n += len(labels)
    dt = time.perf_counter() - t0
    del it  # the workers exit and are reaped: their CPU time is in RUSAGE_CHILDREN
    gc.collect()
    return {"images": n, "images_per_s": n / dt, "cpu_ms": (cpu_seconds() - c0) * 1000 / n}


def child(a, what, library=None):
    env = dict(os.environ)
    if library:
        env["RINGFEED_LIBRARY"] = os.path.abspath(library)
    cmd = [sys.executable, os.path.abspath(__file__), a.photos, a.out, "--one", what,
           "--workers", str(a.workers), "--batch", str(a.batch), "--size", str(a.size),
           "--verify", a.verify]
    r = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def profile(a, exe):
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "run.json")
        subprocess.run([exe, a.out, "--transform", "center", "--workers", "1", "--image-size",
                        str(a.size), "--batch-size", str(a.batch), "--epochs", "1", "--repeats",
                        "1", "--verify", a.verify, "--json", js],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(js) as f:
            line = f.read().splitlines()[-1]
    # rf-profile writes a ratio to a ceiling it did not measure as "inf"
    rec = json.loads(line.replace(": inf", ": Infinity"))
    return {"cpu_ms": rec["cpu_ms_per_image"]}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("photos")
    p.add_argument("out")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--verify", default="once", choices=("once", "always", "none"))
    p.add_argument("--format", default="png", choices=("png", "webp"))
    p.add_argument("--quality", type=int, default=85, help="WebP quality")
    p.add_argument("--library", default=os.path.join(REPO, "build", "libringfeed.so"))
    p.add_argument("--old-library")
    p.add_argument("--profile", default=os.path.join(REPO, "build", "rf-profile"))
    p.add_argument("--old-profile")
    p.add_argument("--one", choices=("ringfeed", "torch"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)

    if a.one:  # one run, in its own process: a JSON line
        print(json.dumps(run_ringfeed(a) if a.one == "ringfeed" else run_torch(a)))
        return 0

    n = make_pictures(a.photos, a.out, a.format, a.quality)
    size = 0
    for root, _, names in os.walk(a.out):
        for name in names:
            with open(os.path.join(root, name), "rb") as f:
                size += len(f.read())
    print("%s: %d %s files, %.0f MB; center %d, batch %d, %d workers, verify %s; load %s"
          % (a.out, n, a.format.upper(), size / 1e6, a.size, a.batch, a.workers, a.verify,
             " ".join("%.2f" % x for x in os.getloadavg())), flush=True)

    runs = {"ringfeed": lambda: child(a, "ringfeed", a.library),
            "DataLoader": lambda: child(a, "torch")}
    if a.old_library:
        runs["ringfeed old"] = lambda: child(a, "ringfeed", a.old_library)
    if a.profile and os.path.exists(a.profile):
        runs["rf-profile 1 worker"] = lambda: profile(a, a.profile)
    if a.old_profile:
        runs["rf-profile old 1 worker"] = lambda: profile(a, a.old_profile)
    res = {k: [] for k in runs}
    order = list(runs)
    for r in range(a.rounds):
        for k in (order if r % 2 == 0 else order[::-1]):
            res[k].append(runs[k]())
            if res[k][-1].get("errors"):
                sys.exit("%s: %d decode errors" % (k, res[k][-1]["errors"]))
        print("round %d: %s" % (r + 1, "; ".join(
            "%s %s%.2f ms CPU/img" % (k, "%.0f img/s, " % v[-1]["images_per_s"]
                                      if "images_per_s" in v[-1] else "", v[-1]["cpu_ms"])
            for k, v in res.items())), flush=True)

    med = {k: {f: statistics.median(x[f] for x in v) for f in v[0] if f != "images"}
           for k, v in res.items()}
    print("medians of %d rounds (load now %s):" % (a.rounds,
                                                    " ".join("%.2f" % x for x in os.getloadavg())))
    for k, m in med.items():
        print("  %-24s %s%.2f ms CPU per image"
              % (k, "%7.0f images/s  " % m["images_per_s"] if "images_per_s" in m else "",
                 m["cpu_ms"]))
    rf, tv = med["ringfeed"], med["DataLoader"]
    print("ringfeed / DataLoader: %.2fx the images/s, %.2fx less CPU per image"
          % (rf["images_per_s"] / tv["images_per_s"], tv["cpu_ms"] / rf["cpu_ms"]))
    rounds = [x["images_per_s"] / y["images_per_s"]
              for x, y in zip(res["ringfeed"], res["DataLoader"])]
    print("  per round: %s" % ", ".join("%.2fx" % x for x in rounds))
    if "ringfeed old" in med:
        old = med["ringfeed old"]
        print("ringfeed / old: %.2fx the images/s, %.2fx less CPU per image; old / DataLoader: "
              "%.2fx the images/s" % (rf["images_per_s"] / old["images_per_s"],
                                      old["cpu_ms"] / rf["cpu_ms"],
                                      old["images_per_s"] / tv["images_per_s"]))
    if "rf-profile 1 worker" in med and "rf-profile old 1 worker" in med:
        print("1 worker CPU per image: %.2f ms before, %.2f ms after (%.2fx less)"
              % (med["rf-profile old 1 worker"]["cpu_ms"], med["rf-profile 1 worker"]["cpu_ms"],
                 med["rf-profile old 1 worker"]["cpu_ms"] / med["rf-profile 1 worker"]["cpu_ms"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
