#!/usr/bin/env python3
"""gpu_scaling.py - how ringfeed's CPU pipeline scales with the worker count.

    gpu_scaling.py --data DIR --tiny DIR --out FILE.json [--workers 1,2,4,8,16]
                   [--batch-size 256] [--image-size 224] [--run-seconds 3]
                   [--deadline UNIX_TIME]

Three sweeps over --workers, each run one loader (device="cpu", numpy output,
fixed num_workers, shuffled) read for --run-seconds after its first batch
(start-up and the first batch left out, epochs repeated as needed):
  center               DIR (a photo-like set), transform="center" at --image-size
  random_resized_crop  DIR, transform="random_resized_crop"
  tiny_files           DIR --tiny (files of a few hundred bytes), 16 px: what the
                       reader and the dispatcher carry per file
Each run records images/s, the stage times per image (read, header, decode,
resize: time per image, summed over the threads) and how busy the workers were;
each sweep its scaling efficiency, images/s at the most workers over
(workers x images/s at one), and, where that is under 0.8, which stage limits
it: a stage whose time per image grows with the workers (the cores slow each
other: memory bandwidth, shared caches), or workers left waiting (the reader
or the dispatcher does not keep up). The JSON file is rewritten after every
run, so a timeout keeps what was done.
"""

import argparse
import json
import os
import platform
import sys
import time


def log(msg):
    print("[gpu_scaling] " + msg, file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--tiny", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--workers", default="1,2,4,8,16")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--run-seconds", type=float, default=3.0)
    p.add_argument("--deadline", type=float, default=0.0,
                   help="unix time after which no new run starts (0: none)")
    a = p.parse_args(argv)
    a.worker_list = [int(w) for w in a.workers.split(",") if w.strip()]
    return a


STAGES = ("read", "header", "decode", "resize")
WORKER_STAGES = ("header", "decode", "resize")  # on the decode pool; read: the reader's


def run_one(a, source, transform, size, workers):
    import ringfeed
    loader = ringfeed.Loader(source, batch_size=a.batch_size, image_size=size, transform=transform,
                             num_workers=workers, device="cpu", output="numpy", shuffle=True,
                             seed=0, prefetch=max(4, workers // 2))
    try:
        t_start = time.perf_counter()
        first = None
        images = 0
        epoch = 0
        done = False
        while not done:
            loader.set_epoch(epoch)
            for x, _ in loader:
                now = time.perf_counter()
                if first is None:
                    first = now
                    base = loader.stats()
                    continue
                images += int(x.shape[0])
                if now - first >= a.run_seconds:
                    done = True
                    break
            epoch += 1
        wall = time.perf_counter() - first
        st = loader.stats()
    finally:
        loader.close()
    n = max(1, st["images"] - base["images"])
    stage = {s: round(1000 * (st["stage_seconds"].get(s, 0) - base["stage_seconds"].get(s, 0)) / n, 4)
             for s in STAGES}
    busy = sum(st["stage_seconds"].get(s, 0) - base["stage_seconds"].get(s, 0)
               for s in WORKER_STAGES)
    return {"workers": workers, "transform": transform, "images": images,
            "seconds": round(wall, 3), "images_per_sec": round(images / wall, 1) if wall else 0.0,
            "first_batch_seconds": round(first - t_start, 3), "epochs_started": epoch,
            "per_image_ms": stage, "workers_busy": round(busy / (wall * workers), 3) if wall else None,
            "stall_seconds": round(st["stall_seconds"] - base["stall_seconds"], 3),
            "io_backend": st.get("io_backend"), "num_workers": st.get("num_workers")}


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except Exception:
        return os.cpu_count() or 1


def limit(one, most):
    """Which stage limits the scaling from the 1-worker run to the largest."""
    cores = usable_cores()
    if most["workers"] > cores:
        return ("%d workers on %d usable cores: at most %.2f of linear scaling"
                % (most["workers"], cores, cores / most["workers"]))
    total = sum(one["per_image_ms"].values()) or 1.0
    grown = {s: most["per_image_ms"][s] / one["per_image_ms"][s] for s in STAGES
             if one["per_image_ms"].get(s, 0) >= 0.05 * total}  # stages that matter
    stage, factor = max(grown.items(), key=lambda kv: kv[1]) if grown else (None, 1.0)
    busy = most.get("workers_busy") or 0
    if busy < 0.75:
        return ("workers busy %.0f%% of the time at %d: the reader and the dispatcher do not feed "
                "them fast enough" % (100 * busy, most["workers"]))
    if stage and factor > 1.15:
        return ("%s time per image x%.2f at %d workers: the cores slow each other (memory "
                "bandwidth, shared caches, SMT siblings)" % (stage, factor, most["workers"]))
    return "no single stage: per-image times and worker occupancy hold"


def summarize(doc):
    s = {}
    for name in ("center", "random_resized_crop", "tiny_files"):
        runs = [r for r in doc["runs"] if r.get("sweep") == name and "error" not in r]
        if not runs:
            continue
        by_w = {r["workers"]: r for r in runs}
        e = {"images_per_sec": {str(w): by_w[w]["images_per_sec"] for w in sorted(by_w)}}
        best = max(runs, key=lambda r: r["images_per_sec"])
        e["best_workers"] = best["workers"]
        if name == "tiny_files":
            e["best_files_per_sec"] = best["images_per_sec"]
        most = by_w[max(by_w)]
        if 1 in by_w and most["workers"] > 1 and by_w[1]["images_per_sec"]:
            eff = most["images_per_sec"] / (most["workers"] * by_w[1]["images_per_sec"])
            e["efficiency"] = round(eff, 3)
            e["at_workers"] = most["workers"]
            if eff < 0.8:
                e["limit"] = limit(by_w[1], most)
        s[name] = e
    doc["summary"] = s


def main(argv):
    a = parse_args(argv)
    doc = {"meta": {"python": sys.version.split()[0], "machine": platform.machine(),
                    "cpus": os.cpu_count(), "usable_cores": usable_cores(), "data": a.data,
                    "tiny": a.tiny,
                    "batch_size": a.batch_size, "image_size": a.image_size,
                    "workers": a.worker_list, "run_seconds": a.run_seconds},
           "runs": [], "skipped": [], "summary": {}}
    try:
        import ringfeed
        doc["meta"]["ringfeed_library"] = ringfeed.library_path()
    except Exception as e:
        doc["meta"]["ringfeed_error"] = str(e)

    def save():
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, a.out)

    save()
    sweeps = [("center", a.data, "center", a.image_size),
              ("random_resized_crop", a.data, "random_resized_crop", a.image_size),
              ("tiny_files", a.tiny, "center", 16)]
    failures = 0
    for name, source, transform, size in sweeps:
        for w in a.worker_list:
            what = "%s workers=%d" % (name, w)
            if a.deadline and time.time() + a.run_seconds + 3 > a.deadline:
                doc["skipped"].append({"run": what, "reason": "deadline"})
                log("skip %s: past the deadline" % what)
                continue
            try:
                r = run_one(a, source, transform, size, w)
            except Exception as e:
                failures += 1
                r = {"workers": w, "error": repr(e)}
            r["sweep"] = name
            log("%s -> %s img/s" % (what, r.get("images_per_sec", r.get("error"))))
            doc["runs"].append(r)
            summarize(doc)
            save()
    log("summary: %s" % json.dumps(doc["summary"]))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
