#!/usr/bin/python3
"""pack_index_bench.py - how long the loader takes to index packed shards
with the manifest's index and with the header walk.

    python3 bench/pack_index_bench.py WORKDIR [--samples 100000] [--per-shard 1000]
                                      [--side 0] [--repeats 5] [--json FILE]

Writes WORKDIR/src (64 tiny JPEGs and a list file naming them in turn,
--samples lines), packs it with ringfeed-pack (--shard-count --per-shard)
into WORKDIR/with, and links the same shards into WORKDIR/without (no
manifest.json). With --side S the JPEGs are S x S pictures of noise
(quality 90: some 90 KB at 320), kept as they are
(--keep-original-if-smaller): samples far apart in their shards, where the
tiny ones lie 2 KB apart. Then times ringfeed.Loader(...) creation (the index, the
sampler's order, the threads) on each, alternating, --repeats times, page
cache warm, and prints every repeat and the medians; --json appends them as
one JSON line (machine, parameters, git revision).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
import ringfeed  # noqa: E402
import ringfeed.pack  # noqa: E402


def make_source(d, n, side=0):
    from PIL import Image
    import numpy as np
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)
    shape, quality = ((side, side, 3), 90) if side else ((12, 16, 3), 80)
    paths = []
    for k in range(64):
        p = os.path.join(d, "p%02d.jpg" % k)
        Image.fromarray(rng.integers(0, 255, shape, dtype=np.uint8)).save(p, quality=quality)
        paths.append(p)
    lst = os.path.join(d, "list.txt")
    with open(lst, "w") as f:
        for i in range(n):
            f.write("%s\t%d\n" % (paths[i % 64], i % 10))
    return lst


def index_seconds(spec):
    t0 = time.perf_counter()
    ld = ringfeed.Loader(spec, batch_size=256, image_size=16, transform="center", num_workers=1)
    t = time.perf_counter() - t0
    st = ld.stats()
    n = ld.num_samples
    ld.close()
    return t, n, st["shards_from_manifest"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workdir")
    p.add_argument("--samples", type=int, default=100000)
    p.add_argument("--per-shard", type=int, default=1000)
    p.add_argument("--side", type=int, default=0)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json")
    a = p.parse_args()
    with_dir, bare = os.path.join(a.workdir, "with"), os.path.join(a.workdir, "without")
    if not os.path.exists(os.path.join(with_dir, "manifest.json")):
        lst = make_source(os.path.join(a.workdir, "src"), a.samples, a.side)
        size = ["--keep-original-if-smaller"] if a.side else ["--max-side", 16]
        r = ringfeed.pack.run(["--shard-count", a.per_shard] + size + [lst, with_dir],
                              capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("ringfeed-pack failed: " + r.stderr)
    os.makedirs(bare, exist_ok=True)
    for f in sorted(os.listdir(with_dir)):
        if f.endswith(".tar") and not os.path.exists(os.path.join(bare, f)):
            os.link(os.path.join(with_dir, f), os.path.join(bare, f))
    m = json.load(open(os.path.join(with_dir, "manifest.json")))
    nshards = len(m["shards"])
    spec = {"manifest": os.path.join(with_dir, "shard-*.tar"),
            "header walk": os.path.join(bare, "shard-*.tar")}
    runs = {k: [] for k in spec}
    index_seconds(spec["manifest"])  # warm the page cache
    index_seconds(spec["header walk"])
    for r in range(a.repeats):
        for k, s in spec.items():
            t, n, used = index_seconds(s)
            assert n == m["samples"], (n, m["samples"])
            assert used == (nshards if k == "manifest" else 0), used
            runs[k].append(t)
        print("repeat %d: %s" % (r + 1, ", ".join("%s %.3f s" % (k, v[-1])
                                                  for k, v in runs.items())), flush=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    print("%d samples in %d shards, medians of %d: manifest %.3f s, header walk %.3f s (%.1fx)"
          % (m["samples"], nshards, a.repeats, med["manifest"], med["header walk"],
             med["header walk"] / med["manifest"]))
    if a.json:
        rev = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip()
        with open(a.json, "a") as f:
            f.write(json.dumps({"bench": "pack_index", "machine": platform.node(),
                                "cpus": os.cpu_count(), "git": rev, "samples": m["samples"],
                                "shards": nshards, "side": a.side,
                                "library": os.environ.get("RINGFEED_LIBRARY", ""),
                                "load": os.getloadavg()[0], "runs": runs,
                                "medians": med}) + "\n")


if __name__ == "__main__":
    main()
