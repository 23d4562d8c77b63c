#!/usr/bin/python3
"""remote_walk_bench.py - the cold start of remote shards that have neither
a kept index nor a manifest: every shard is fetched and walked before the
first batch (the index walks), by one library or several side by side.

    python3 bench/remote_walk_bench.py PHOTO_FOLDER [--shards 12] [--rounds 5]
        [--bps 8e6] [--hold 0.02] [--parallel 4]
        [--lib NAME=LIBRINGFEED[:PYTHONPATH]] ... [--out FILE.jsonl]

PHOTO_FOLDER (an ImageFolder, e.g. /work/data/photos10) is cut into SHARDS
WebDataset shards (KEY.jpg + KEY.cls, no manifest) in a temporary folder,
served by `python3 -m http.server` behind tests' rfproxy.py, which delays
each GET of a shard by HOLD seconds (a round trip to a far server) and sends
each answer at BPS bytes/s at most (an object store's per-connection rate).
Each round runs every library (alternating their order) in a fresh process
on an empty cache folder: `start` is the Loader's construction (HEADs, the
walks), `first` its first batch after that; and `transfer`, the floor of
any start, GETs every shard through the same proxy PARALLEL at once (urllib
threads, bytes thrown away). PYTHONPATH picks the binding
that goes with a library (the one of this tree by default). Prints every
round and the medians (JSON lines on stdout and in --out, the summary on
stderr).
"""

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "bindings", "python", "tests")
sys.path.insert(0, TESTS)
import rfservers  # noqa: E402

CHILD = r"""
import json, sys, time
import ringfeed
src, cache, parallel = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
with ringfeed.Loader(src, cache_dir=cache, batch_size=32, image_size=224,
                     transform="random_resized_crop", num_workers=2, shuffle=True, seed=1,
                     fetch_parallel=parallel, output="numpy") as ld:  # no torch import timed
    t1 = time.perf_counter()
    next(iter(ld))
    t2 = time.perf_counter()
    st = ld.stats()["remote"]
print(json.dumps({"start": t1 - t0, "first": t2 - t1, "samples": ld.num_samples,
                  "requests": st["requests"], "bytes": st["bytes_fetched"]}))
"""


def make_shards(photos, out, nshards):
    classes = sorted(d for d in os.listdir(photos) if os.path.isdir(os.path.join(photos, d)))
    items = [(os.path.join(photos, c, f), label) for label, c in enumerate(classes)
             for f in sorted(os.listdir(os.path.join(photos, c)))]
    n, total = len(items), 0
    for s in range(nshards):
        path = os.path.join(out, "train-%04d.tar" % s)
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
            for i, (p, label) in enumerate(items[s * n // nshards:(s + 1) * n // nshards]):
                key = "s%04d_%05d" % (s, i)
                tf.add(p, arcname=key + ".jpg")
                data = b"%d" % label
                info = tarfile.TarInfo(key + ".cls")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
        total += os.path.getsize(path)
    return len(items), total


def run_child(lib, pypath, src, cache, parallel):
    env = dict(os.environ, RINGFEED_LIBRARY=lib, PYTHONPATH=pypath, PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-c", CHILD, src, cache, str(parallel)], env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit("child failed (%s):\n%s" % (lib, r.stderr))
    return json.loads(r.stdout.strip().splitlines()[-1])


def transfer(urls, parallel):
    """Seconds to GET every URL, parallel at once."""
    def get(u):
        with urllib.request.urlopen(u) as r:
            while r.read(1 << 20):
                pass
    t0 = time.perf_counter()
    with ThreadPoolExecutor(parallel) as ex:
        list(ex.map(get, urls))
    return time.perf_counter() - t0


def git_rev():
    try:
        return subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("photos")
    p.add_argument("--shards", type=int, default=12)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--bps", type=float, default=8e6)
    p.add_argument("--hold", type=float, default=0.02)
    p.add_argument("--parallel", type=int, default=4)
    p.add_argument("--lib", action="append", default=[])
    p.add_argument("--out")
    a = p.parse_args()
    here_py = os.path.normpath(os.path.join(HERE, "..", "bindings", "python"))
    libs = []
    for spec in a.lib or ["this=" + os.path.join(HERE, "..", "build", "libringfeed.so")]:
        name, rest = spec.split("=", 1)
        lib, _, py = rest.partition(":")
        libs.append((name, os.path.abspath(lib), os.path.abspath(py) if py else here_py))
    out = open(a.out, "a") if a.out else None

    def emit(d):
        line = json.dumps(d)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    rows = {name: [] for name, _, _ in libs}
    rows["transfer"] = []
    with tempfile.TemporaryDirectory(prefix="rf-walk-bench-") as tmp:
        served = os.path.join(tmp, "served")
        os.mkdir(served)
        nimg, nbytes = make_shards(a.photos, served, a.shards)
        emit({"run": 1, "library": git_rev(), "machine": platform.node(), "cpus": os.cpu_count(),
              "folder": "%s: %d shards, %d pictures, %.1f MB" % (a.photos, a.shards, nimg,
                                                               nbytes / 1e6),
              "bps": a.bps, "hold": a.hold, "parallel": a.parallel,
              "libs": {n: l for n, l, _ in libs}})
        with rfservers.http_files(served) as url, \
                rfservers.fault_proxy(url, os.path.join(tmp, "proxy.log"), hold_s=a.hold,
                                      hold_match="^GET .*[.]tar", bps=a.bps) as px:
            src = px.url + "/train-{0000..%04d}.tar" % (a.shards - 1)
            urls = [px.url + "/train-%04d.tar" % s for s in range(a.shards)]
            for r in range(a.rounds):
                d = {"transfer": transfer(urls, a.parallel), "round": r}
                rows["transfer"].append({"start": d["transfer"], "first": 0.0})
                emit(d)
                order = libs if r % 2 == 0 else libs[::-1]
                for name, lib, py in order:
                    cache = os.path.join(tmp, "cache-%s-%d" % (name, r))
                    d = run_child(lib, py, src, cache, a.parallel)
                    d.update(lib=name, round=r)
                    rows[name].append(d)
                    emit(d)
    summary = {}
    for name, rs in rows.items():
        summary[name] = {k: round(statistics.median(x[k] for x in rs), 3)
                         for k in ("start", "first")}
    emit({"medians": summary, "rounds": a.rounds})
    for name, m in summary.items():
        print("%-8s start %.2f s, first batch %.3f s after (medians of %d)"
              % (name, m["start"], m["first"], a.rounds), file=sys.stderr)


if __name__ == "__main__":
    main()
