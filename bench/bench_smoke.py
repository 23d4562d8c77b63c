#!/usr/bin/python3
"""bench_smoke.py - the CTest smoke test of ringfeed-bench (test name: bench_smoke).

    bench_smoke.py --bench BUILD/ringfeed-bench --gen BUILD/rf-gen-folder --work DIR

Generates a tiny image folder (2 classes x 12 JPEGs of about 160x120), runs
ringfeed-bench on it for one epoch with --compare-torch, a step and auto
workers, and checks what comes out: the report (sizing table, pinned vs
pageable verdict, recommendation), the JSON lines (every line parses; runs of
ringfeed and, when torch and torchvision import, of the DataLoader, each with
its wait per batch at p50 / p99 / max; a summary with the machine, the parameters, the git revision and a recommendation) and
the PNG (signature, header, a plausible size). Performance is not asserted.
Exits 0 on success, 1 with the reasons otherwise, 77 (skipped) when numpy or
matplotlib cannot be imported and $CI is not set.
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import time


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--bench", required=True)
    p.add_argument("--gen", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args(argv)

    # numpy (the binding) and matplotlib (the PNG) are required; without them
    # the test skips (77), unless $CI is set, where it fails.
    for mod in ("numpy", "matplotlib"):
        try:
            __import__(mod)
        except Exception as e:
            ci = os.environ.get("CI", "").lower() not in ("", "0", "false", "no", "off")
            print("bench_smoke: %s cannot be imported (%s): %s" % (mod, e, "FAILED ($CI is set)"
                                                                    if ci else "skipped"))
            return 1 if ci else 77

    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    data = os.path.join(a.work, "data")
    r = subprocess.run([a.gen, data, "--classes", "2", "--per-class", "12", "--width", "160",
                        "--height", "120", "--seed", "5"], capture_output=True, text=True)
    if r.returncode != 0:
        print("rf-gen-folder failed:", r.stdout, r.stderr)
        return 1

    jpath = os.path.join(a.work, "bench.jsonl")
    ppath = os.path.join(a.work, "bench.png")
    cmd = [a.bench, "--data", data, "--quick", "--epochs", "1", "--workers", "1,2,auto",
           "--batch-size", "8", "--image-size", "64", "--step-ms", "2", "--compare-torch",
           "--json", jpath, "--plot", ppath]
    print("+ " + " ".join(cmd), flush=True)
    t = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    print(r.stdout)
    print(r.stderr, file=sys.stderr)
    print("ringfeed-bench took %.1f s, exit %d" % (time.monotonic() - t, r.returncode))
    problems = []
    if r.returncode != 0:
        problems.append("exit status %d" % r.returncode)

    for needle in ("workers", "img/s", "stall", "first", "peak RSS", "knee", "Recommendation:",
                   "pinned vs pageable", "consumer wait per batch", "p99", "ring empty"):
        if needle not in r.stdout:
            problems.append("report lacks %r" % needle)

    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        have_torch = True
    except Exception:
        have_torch = False

    recs = []
    try:
        with open(jpath) as f:
            for n, line in enumerate(f, 1):
                try:
                    recs.append(json.loads(line))
                except ValueError as e:
                    problems.append("%s:%d is not JSON: %s" % (jpath, n, e))
    except OSError as e:
        problems.append("no JSON lines: %s" % e)
    runs = [x for x in recs if x.get("type") == "run"]
    summ = [x for x in recs if x.get("type") == "summary"]
    if len(summ) != 1:
        problems.append("%d summary lines, expected 1" % len(summ))
    for x in recs:
        for k in ("machine", "params", "git", "run_id"):
            if k not in x:
                problems.append("a %s line lacks %r" % (x.get("type"), k))
                break
    if recs:
        m = recs[0].get("machine", {})
        for k in ("cpu", "cores", "usable_cores", "kernel"):
            if k not in m:
                problems.append("machine lacks %r" % k)
    systems = {x.get("system") for x in runs}
    if "ringfeed" not in systems:
        problems.append("no ringfeed runs")
    if have_torch and "dataloader" not in systems:
        problems.append("torch imports but there are no DataLoader runs")
    for x in runs:
        for k in ("images_per_sec", "first_batch_seconds", "rss_peak_mb", "stall_pct",
                  "cpu_cores", "workers", "pass", "wait_p50_ms", "wait_p99_ms", "wait_max_ms"):
            if x.get(k) is None:
                problems.append("run %s/%s/%s lacks %r" % (x.get("system"), x.get("workers"),
                                                          x.get("pass"), k))
        if x.get("images", 0) <= 0:
            problems.append("run %s/%s read no images" % (x.get("system"), x.get("workers")))
    if any(x.get("system") == "ringfeed" and not isinstance(x.get("ring_empty"), int)
           for x in runs):
        problems.append("a ringfeed run lacks the library's ring_empty count")
    auto = [x for x in runs if x.get("workers") == "auto"]
    if not auto or not all(isinstance(x.get("num_workers"), int) and x.get("tuner") is not None
                           for x in auto):
        problems.append("auto runs lack the tuner's num_workers / decisions")
    if summ:
        s = summ[0]
        if not s.get("recommendation"):
            problems.append("summary has no recommendation")
        if "ringfeed" not in s.get("systems", {}):
            problems.append("summary lacks the ringfeed sizing")
        pn = s.get("pinned_vs_pageable") or {}
        if not pn.get("skipped") and not pn.get("h2d_gbps"):
            problems.append("summary: pinned vs pageable neither measured nor skipped")

    try:
        with open(ppath, "rb") as f:
            png = f.read()
        if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
            problems.append("%s is not a PNG" % ppath)
        else:
            w, h = struct.unpack(">II", png[16:24])
            if w < 400 or h < 300 or len(png) < 10000:
                problems.append("PNG looks empty: %dx%d, %d bytes" % (w, h, len(png)))
    except OSError as e:
        problems.append("no PNG: %s" % e)

    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        return 1
    print("bench_smoke: OK (%d JSON lines, systems: %s)" % (len(recs), ", ".join(sorted(systems))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
