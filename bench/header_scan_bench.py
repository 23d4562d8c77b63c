#!/usr/bin/python3
"""header_scan_bench.py - the header scan that aspect-ratio buckets run at the
first start, and the second start that finds its sizes kept.

    python3 bench/header_scan_bench.py --make OUT [--files 100000]   (rf-gen-folder)
    PYTHONPATH=bindings/python RINGFEED_LIBRARY=build/libringfeed.so \\
        python3 bench/header_scan_bench.py OUT [--rounds 3] [--json FILE]

--make writes OUT with build/rf-gen-folder: 100 classes of --files / 100
generated JPEGs of about 64 x 48 (some portrait). Each measurement runs in a
fresh process: the loader's start (construction of ringfeed.Loader, which
indexes, and with buckets learns every picture's size, then starts the
threads), its peak resident memory (ru_maxrss) and the stats' "shapes".
Rounds alternate: a start without buckets (the index alone), a first start
with buckets=3 in an empty cache folder (the scan, which keeps the sizes),
a second start in that folder (the sizes kept, nothing scanned). The page
cache is warm (the files were just written or read): the scan's cost is the
reads' system calls and the parsing, not the disk.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[4])
import ringfeed
kw = json.loads(sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
ld = ringfeed.Loader(sys.argv[1], batch_size=64, image_size=224, num_workers=1, prefetch=2,
                     cache_dir=sys.argv[3], **kw)
start = time.perf_counter() - t0
st = ld.stats()
print(json.dumps({"start_seconds": start, "samples": ld.num_samples,
                  "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "maxrss_before_kb": before, "ring_bytes": st.get("ring_bytes"),
                  "sizes": st.get("shapes", {}).get("sizes")}))
ld.close()
"""


def child(folder, kw, cache):
    r = subprocess.run([sys.executable, "-c", CHILD, folder, json.dumps(kw), cache,
                        os.path.join(HERE, "..", "bindings", "python")],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--make", action="store_true")
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.make:
        gen = os.path.join(HERE, "..", "build", "rf-gen-folder")
        subprocess.run([gen, a.folder, "--classes", "100", "--per-class", str(a.files // 100),
                        "--width", "64", "--height", "48", "--seed", "3"], check=True)
        return
    rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                         text=True, cwd=HERE).stdout.strip()
    rows = {"index_only": [], "first_start_scan": [], "second_start_kept": []}
    for r in range(a.rounds):
        cache = tempfile.mkdtemp(prefix="rf-scan-cache-")
        try:
            for name, kw in (("index_only", {}), ("first_start_scan", {"buckets": 3}),
                             ("second_start_kept", {"buckets": 3})):
                m = child(a.folder, kw, cache)
                rows[name].append(m)
                z = m["sizes"] or {}
                print("round %d %-18s start %.3f s, peak RSS %.1f MB, scanned %s, kept %s, "
                      "scan %.3f s, %s bytes read" % (
                          r, name, m["start_seconds"], m["maxrss_kb"] / 1024,
                          z.get("scanned", "-"), z.get("from_kept", "-"),
                          z.get("seconds", 0.0), z.get("bytes_read", "-")))
                if a.json:
                    with open(a.json, "a") as f:
                        f.write(json.dumps({"bench": "header_scan", "git": rev,
                                            "data": a.folder, "round": r, "run": name,
                                            **m}) + "\n")
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    med = {k: statistics.median(x["start_seconds"] for x in v) for k, v in rows.items()}
    rss = {k: statistics.median(x["maxrss_kb"] for x in v) / 1024 for k, v in rows.items()}
    scan = statistics.median(x["sizes"]["seconds"] for x in rows["first_start_scan"])
    n = rows["index_only"][0]["samples"]
    print("medians over %d files: start %s; peak RSS MB %s; the scan alone %.3f s "
          "(%.0f files/s)" % (n, {k: round(v, 3) for k, v in med.items()},
                              {k: round(v, 1) for k, v in rss.items()}, scan, n / scan))


if __name__ == "__main__":
    main()
