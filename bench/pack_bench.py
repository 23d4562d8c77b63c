#!/usr/bin/python3
"""pack_bench.py - what ringfeed-pack buys: images/s of random_resized_crop
from packed shards (JPEG, and with --raw raw pixels) vs ringfeed and
torchvision on the original folder, and the pixels it changes (PSNR of
center crops against torchvision on the originals).

    python3 bench/pack_bench.py FOLDER [--max-side 320] [--quality 90] [--rounds 3]
                                [--epochs 2] [--min-seconds 0] [--raw [--unmapped]] [--no-folder]
                                [--json FILE]

Packs FOLDER into a temporary folder with ringfeed-pack (--max-side,
--quality; with --raw also --store raw at the same max side), then runs,
alternating, `rounds` times: ringfeed on the raw shards (--raw; with
--unmapped also with map_shards=False, each member read into a buffer
instead of decoded in place from the page cache), ringfeed on the JPEG shards, ringfeed on the folder (unless --no-folder), torchvision's
DataLoader(ImageFolder, RandomResizedCrop + RandomHorizontalFlip +
PILToTensor, num_workers) on the folder; each run builds its loader, runs
one warm-up epoch and times the next `epochs` epochs (more while under
--min-seconds, so that fast loaders are timed over as long as slow ones).
Prints the medians and their ratios, the bytes on disk of each pack, then
the mean PSNR of center 224 (Resize(256) + CenterCrop(224)) from the
shards, and from the folder by ringfeed, against torchvision on the
originals. Each round also prints its own ratios (the runs of a round share
the machine's load); the originals' sizes and the load average are printed,
and --json appends everything (every round) as one JSON line. Needs the
build's libringfeed and ringfeed-pack (found as ringfeed.pack does).
"""

import argparse
import json
import os
import platform
import subprocess
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
import ringfeed  # noqa: E402
import ringfeed.pack  # noqa: E402


def rf_rate(spec, a, **kw):
    ld = ringfeed.Loader(spec, batch_size=a.batch, image_size=a.size,
                         transform="random_resized_crop", flip=True, num_workers=a.workers,
                         shuffle=True, seed=1, **kw)
    with ld:
        for _ in ld:  # warm-up epoch
            pass
        n, e, t0 = 0, 0, time.perf_counter()
        while e < a.epochs or time.perf_counter() - t0 < a.min_seconds:
            for batch in ld:
                n += len(batch[1])
            e += 1
        return n / (time.perf_counter() - t0)


def torch_rate(folder, a):
    import torch
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    tf = T.Compose([T.RandomResizedCrop(a.size), T.RandomHorizontalFlip(), T.PILToTensor()])
    dl = torch.utils.data.DataLoader(ImageFolder(folder, transform=tf), batch_size=a.batch,
                                     shuffle=True, num_workers=a.workers,
                                     persistent_workers=True)
    for _ in dl:
        pass
    n, e, t0 = 0, 0, time.perf_counter()
    while e < a.epochs or time.perf_counter() - t0 < a.min_seconds:
        for x, y in dl:
            n += len(y)
        e += 1
    r = n / (time.perf_counter() - t0)
    del dl
    return r


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 100.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def center_psnr(spec, refs, a):
    got = []
    with ringfeed.Loader(spec, batch_size=a.batch, image_size=a.size, transform="center",
                         layout="NHWC", shuffle=False, num_workers=a.workers) as ld:
        for batch in ld:
            got.extend(np.asarray(batch[0]))
    assert len(got) == len(refs), (len(got), len(refs))
    return float(np.mean([psnr(g, r) for g, r in zip(got, refs)]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder")
    p.add_argument("--max-side", type=int, default=320)
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--min-seconds", type=float, default=0.0,
                   help="time each run over at least this long (more epochs)")
    p.add_argument("--raw", action="store_true", help="also pack --store raw and time it")
    p.add_argument("--no-folder", action="store_true", help="leave out ringfeed on the folder")
    p.add_argument("--unmapped", action="store_true",
                   help="with --raw, also time the raw shards with map_shards=False (every "
                        "member read into a buffer, not decoded in place)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--out", help="pack here (kept) instead of a temporary folder")
    p.add_argument("--json", help="append the results as one JSON line to this file")
    a = p.parse_args()
    from PIL import Image
    from torchvision.datasets import ImageFolder
    sizes = np.array([Image.open(path).size for path, _ in ImageFolder(a.folder).samples])
    longer = sizes.max(axis=1)
    dims = {"files": len(sizes), "median_w": float(np.median(sizes[:, 0])),
            "median_h": float(np.median(sizes[:, 1])), "longer_min": int(longer.min()),
            "longer_max": int(longer.max()),
            "mean_megapixels": float((sizes[:, 0] * sizes[:, 1]).mean() / 1e6)}
    print("%s: %d pictures, median %dx%d, longer side %d-%d, %.2f MP on average; load %s"
          % (a.folder, dims["files"], dims["median_w"], dims["median_h"], dims["longer_min"],
             dims["longer_max"], dims["mean_megapixels"], os.getloadavg()))

    tmp = None
    out = a.out
    if not out:
        tmp = tempfile.mkdtemp(prefix="rfpack")
        out = os.path.join(tmp, "packed")
    src_bytes = sum(os.path.getsize(os.path.join(d, f))
                    for d, _, fs in os.walk(a.folder) for f in fs)

    def pack(store):
        dst = out + ("-raw" if store == "raw" else "")
        t0 = time.perf_counter()
        r = ringfeed.pack.run(["--max-side", a.max_side, "--quality", a.quality, "--store", store,
                               "--workers", a.workers, a.folder, dst],
                              capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("ringfeed-pack failed: " + r.stderr)
        secs = time.perf_counter() - t0
        m = json.load(open(os.path.join(dst, "manifest.json")))
        nbytes = sum(s["bytes"] for s in m["shards"])
        print("packed %d samples (%s) into %d shards in %.1f s (%.0f images/s); %.1f MB -> %.1f MB"
              % (m["samples"], store, len(m["shards"]), secs, m["samples"] / secs,
                 src_bytes / 1e6, nbytes / 1e6))
        return os.path.join(dst, "shard-*.tar"), secs, nbytes

    spec, pack_s, packed_bytes = pack("jpeg")
    raw_spec, raw_pack_s, raw_bytes = pack("raw") if a.raw else (None, 0.0, 0)
    if a.raw:
        print("bytes on disk: raw %.1f MB = %.2fx the JPEG shards' %.1f MB (originals %.1f MB)"
              % (raw_bytes / 1e6, raw_bytes / packed_bytes, packed_bytes / 1e6, src_bytes / 1e6))

    runs = {}
    if a.raw:
        runs["ringfeed raw shards"] = []
    if a.raw and a.unmapped:
        runs["raw shards, read"] = []
    runs["ringfeed shards"] = []
    if not a.no_folder:
        runs["ringfeed folder"] = []
    runs["torchvision folder"] = []
    loads = []
    for k in range(a.rounds):
        if a.raw:
            runs["ringfeed raw shards"].append(rf_rate(raw_spec, a))
        if a.raw and a.unmapped:
            runs["raw shards, read"].append(rf_rate(raw_spec, a, map_shards=False))
        runs["ringfeed shards"].append(rf_rate(spec, a))
        if not a.no_folder:
            runs["ringfeed folder"].append(rf_rate(a.folder, a))
        runs["torchvision folder"].append(torch_rate(a.folder, a))
        loads.append(os.getloadavg()[0])
        v = {n: x[-1] for n, x in runs.items()}
        print("round %d: %s; %s (load %.1f)"
              % (k + 1, ", ".join("%s %.0f" % (n, x) for n, x in v.items()),
                 ", ".join("%s %.2fx" % (n, v[x] / v[y]) for n, x, y in ratio_names(a)),
                 loads[-1]), flush=True)
    med = {n: statistics.median(v) for n, v in runs.items()}
    print("random_resized_crop %d, flip, %d workers, batch %d, medians of %d rounds (images/s):"
          % (a.size, a.workers, a.batch, a.rounds))
    for n, v in med.items():
        print("  %-22s %8.0f" % (n, v))
    ratios = {}
    for n, x, y in ratio_names(a):
        ratios[n] = med[x] / med[y]
        print("  %-28s %.2fx (median of the rounds' own: %.2fx)"
              % (n + ":", ratios[n], statistics.median(p / q for p, q in zip(runs[x], runs[y]))))

    sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python", "tests"))
    from rfhelpers import reference_center
    refs = [reference_center(path, a.size) for path, _ in ImageFolder(a.folder).samples]
    psnr_shards, psnr_folder = center_psnr(spec, refs, a), center_psnr(a.folder, refs, a)
    psnr_raw = center_psnr(raw_spec, refs, a) if a.raw else None
    print("center %d mean PSNR vs torchvision on the originals: packed shards %.2f dB, %s"
          "ringfeed on the folder %.2f dB" % (a.size, psnr_shards, "raw shards %.2f dB, " % psnr_raw
                                              if a.raw else "", psnr_folder))
    if a.json:
        rev = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip()
        with open(a.json, "a") as f:
            f.write(json.dumps({
                "bench": "pack", "machine": platform.node(), "cpus": os.cpu_count(), "git": rev,
                "folder": a.folder, "dims": dims, "max_side": a.max_side, "quality": a.quality,
                "workers": a.workers, "batch": a.batch, "size": a.size, "epochs": a.epochs,
                "min_seconds": a.min_seconds, "pack_seconds": pack_s,
                "source_mb": src_bytes / 1e6, "packed_mb": packed_bytes / 1e6,
                "raw_pack_seconds": raw_pack_s if a.raw else None,
                "raw_packed_mb": raw_bytes / 1e6 if a.raw else None, "runs": runs,
                "loads": loads, "medians": med, "ratios": ratios,
                "psnr_center_shards": psnr_shards, "psnr_center_raw": psnr_raw,
                "psnr_center_folder": psnr_folder}) + "\n")
    if tmp:
        shutil.rmtree(tmp)


def ratio_names(a):
    """(name, numerator run, denominator run) of the ratios printed."""
    r = []
    if a.raw:
        r += [("raw / JPEG shards", "ringfeed raw shards", "ringfeed shards"),
              ("raw shards / torchvision", "ringfeed raw shards", "torchvision folder")]
        if a.unmapped:
            r += [("raw in place / read", "ringfeed raw shards", "raw shards, read"),
                  ("raw read / JPEG shards", "raw shards, read", "ringfeed shards")]
    if not a.no_folder:
        r.append(("shards / ringfeed folder", "ringfeed shards", "ringfeed folder"))
    r.append(("shards / torchvision", "ringfeed shards", "torchvision folder"))
    return r


if __name__ == "__main__":
    main()
