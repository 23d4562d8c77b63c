#!/usr/bin/env python3
"""mix_bench.py - what reading through a Mix costs: one epoch of a source
read alone and as Mix([source]) (the same samples, the same order's size,
each sample found through the mixture's index), and the source twice,
proportion 0.5 each (an epoch of twice the samples, the two interleaved),
alternating, several rounds; images/s and the consumer's wait tail from
stats()["latency"].

    python3 bench/mix_bench.py DATA [--rounds 3] [--workers 2] [--json FILE]

JSON lines: one per run, with the library, the machine's load average and
the git revision.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
import ringfeed  # noqa: E402


def git_rev():
    try:
        return subprocess.run(["git", "-C", HERE, "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


def one(kind, data, workers, batch):
    src = {"alone": data,
           "mix1": ringfeed.Mix([data]),
           "mix2": ringfeed.Mix([ringfeed.Source(data, proportion=0.5),
                                 ringfeed.Source(data, proportion=0.5)])}[kind]
    t0 = time.perf_counter()
    n = 0
    with ringfeed.Loader(src, batch_size=batch, image_size=224, transform="center",
                         num_workers=workers, output="numpy") as ld:
        for x, _ in ld:
            n += len(x)
        st = ld.stats()
    wall = time.perf_counter() - t0
    lat = st["latency"]
    return {"kind": kind, "images": n, "seconds": round(wall, 4),
            "images_per_sec": round(n / wall, 1), "wait_p50_ms": lat["wait_p50_ms"],
            "wait_p99_ms": lat["wait_p99_ms"], "ring_empty": lat["ring_empty"],
            "first_batch_seconds": lat["first_batch_seconds"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--json")
    a = ap.parse_args()
    common = {"bench": "mix_bench", "data": a.data, "workers": a.workers,
              "batch_size": a.batch_size, "library": ringfeed.library_path(),
              "version": ringfeed.library_version(), "git": git_rev(),
              "machine": {"cpu": platform.processor() or platform.machine(),
                          "cores": os.cpu_count()}}
    out = open(a.json, "a") if a.json else None
    runs = {}
    for r in range(a.rounds):
        order = ("alone", "mix1", "mix2") if r % 2 == 0 else ("mix2", "mix1", "alone")
        for kind in order:
            rec = dict(common, round=r, load=os.getloadavg()[0], **one(kind, a.data, a.workers,
                                                                        a.batch_size))
            runs.setdefault(kind, []).append(rec["images_per_sec"])
            print(json.dumps(rec), flush=True)
            if out:
                out.write(json.dumps(rec) + "\n")
    for kind, v in runs.items():
        print("%-6s images/s: %s, median %.1f" % (kind, v, sorted(v)[len(v) // 2]))


if __name__ == "__main__":
    main()
