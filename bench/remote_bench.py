#!/usr/bin/python3
"""remote_bench.py - remote shards over http:// against local disk: the
cold start (time to the first batch with the index kept and the shards not
in the cache) beside its parts (one shard's transfer, one batch's decoding),
and the warm-cache rate against local disk.

    python3 bench/remote_bench.py SHARD_FOLDER [--rounds 5] [--batch 32] [--size 224]
                                  [--workers 2] [--parallel 4]

SHARD_FOLDER holds train-*.tar (e.g. /work/data/shards); it is served by
`python3 -m http.server` on 127.0.0.1 (bindings/python/tests/rfservers.py).
Each round measures, in this order:
  transfer     one shard GET into a file with urllib (the bytes a cold start
               must move before its first batch), and with the curl program
  local_first  a loader on the local shards: construction to first batch
  decode       one batch's decoding on the local shards, steady state (an
               epoch's time over its batches)
  cold_first   a loader on the http:// shards, construction to first batch,
               the cache holding the shards' indexes (BASE.idx) but no shard
  warm / local images/s of one epoch after a warm-up epoch, from the cache
               (every shard in it) and from local disk, alternating
All loaders: random_resized_crop SIZE, shuffle=True, shuffle_block=1 (the
first batch comes from one shard), seed 1. Prints every round and the
medians (JSON lines on stdout, the summary on stderr).
"""

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python", "tests"))
import ringfeed  # noqa: E402
import rfservers  # noqa: E402


def loader(spec, a, **kw):
    return ringfeed.Loader(spec, batch_size=a.batch, image_size=a.size,
                           transform="random_resized_crop", num_workers=a.workers,
                           shuffle=True, shuffle_block=1, seed=1, **kw)


def first_batch(spec, a, **kw):
    t0 = time.perf_counter()
    with loader(spec, a, **kw) as ld:
        next(iter(ld))
        dt = time.perf_counter() - t0
        st = ld.stats()
    return dt, st


def epoch_rate(spec, a, **kw):
    """images/s of the second epoch, and that epoch's seconds per batch."""
    with loader(spec, a, **kw) as ld:
        for _ in ld:  # warm-up epoch
            pass
        n = 0
        t0 = time.perf_counter()
        batches = 0
        for images, _ in ld:
            n += len(images)
            batches += 1
        dt = time.perf_counter() - t0
    return n / dt, dt / batches


def transfer(url, dst):
    t0 = time.perf_counter()
    with urllib.request.urlopen(url) as r, open(dst, "wb") as f:
        shutil.copyfileobj(r, f, 1 << 20)
    return time.perf_counter() - t0


def curl_transfer(url, dst):
    out = subprocess.run(["curl", "-s", "-o", dst, "-w", "%{time_total}", url],
                         capture_output=True, text=True, check=True).stdout
    return float(out)


def parse_args():
    """The options of this bench and of remote_manifest_bench.py."""
    p = argparse.ArgumentParser()
    p.add_argument("folder")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--parallel", type=int, default=4)
    return p.parse_args()


def warm_page_cache(folder, names):
    """Reads the shards once: into the page cache, for the server and the
    local runs alike."""
    for n in names:
        with open(os.path.join(folder, n), "rb") as f:
            while f.read(1 << 24):
                pass


def main():
    a = parse_args()
    names = sorted(os.path.basename(x) for x in glob.glob(os.path.join(a.folder, "train-*.tar")))
    if not names:
        sys.exit("no train-*.tar in %s" % a.folder)
    last = int(names[-1][6:10])
    local = os.path.join(a.folder, "train-{0000..%04d}.tar" % last)
    warm_page_cache(a.folder, names)
    tmp = tempfile.mkdtemp(prefix="remote_bench_")
    cache = os.path.join(tmp, "cache")
    res = {k: [] for k in ("transfer", "curl", "local_first", "decode", "cold_first", "warm",
                           "local")}
    try:
        with rfservers.http_files(a.folder) as base:
            url = base + "/train-{0000..%04d}.tar" % last
            kw = dict(cache_dir=cache, fetch_parallel=a.parallel)
            with loader(url, a, **kw) as ld:  # fetches every shard, keeps their indexes
                for _ in ld:
                    pass
            for r in range(a.rounds):
                # the first shard of epoch 0 (shuffle_block=1: a permutation of the shards)
                with loader(local, a) as ld:
                    first_shard = ld.sample_path(int(next(ld.iter_with_indices())[2][0]))
                one = base + "/" + os.path.basename(first_shard.split(":")[0])
                res["transfer"].append(transfer(one, os.path.join(tmp, "t.tar")))
                res["curl"].append(curl_transfer(one, os.path.join(tmp, "t.tar")))
                res["local_first"].append(first_batch(local, a)[0])
                rate, per_batch = epoch_rate(local, a)
                res["decode"].append(per_batch)
                for f in glob.glob(os.path.join(cache, "*.tar")):
                    os.remove(f)  # cold: the indexes stay
                dt, st = first_batch(url, a, **kw)
                res["cold_first"].append(dt)
                with loader(url, a, **kw) as ld:  # the cache full again
                    for _ in ld:
                        pass
                res["warm"].append(epoch_rate(url, a, **kw)[0])
                res["local"].append(epoch_rate(local, a)[0])
                row = {k: round(v[-1], 4) for k, v in res.items()}
                row["round"] = r
                row["cold_requests"] = st["remote"]["requests"]
                print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    ratio = [w / l for w, l in zip(res["warm"], res["local"])]
    print(json.dumps({"medians": {k: round(v, 4) for k, v in med.items()},
                      "warm_over_local": round(statistics.median(ratio), 3)}), flush=True)
    sys.stderr.write(
        "one shard transfer %.3f s (curl %.3f s); one batch of %d decoded %.3f s "
        "(local first batch %.3f s)\ncold first batch, index kept: %.3f s  (transfer + "
        "batch = %.3f s)\nwarm cache %.0f img/s vs local disk %.0f img/s: %.3fx (median of "
        "per-round ratios)\n" % (med["transfer"], med["curl"], a.batch, med["decode"],
                                 med["local_first"], med["cold_first"],
                                 med["transfer"] + med["decode"], med["warm"], med["local"],
                                 statistics.median(ratio)))


if __name__ == "__main__":
    main()
