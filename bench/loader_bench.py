#!/usr/bin/python3
"""loader_bench.py - images/s of ringfeed vs torchvision's DataLoader, side by side.

    loader_bench.py --gen build/rf-gen-folder --lib build/libringfeed.so --out build/bench
                    [--data DIR] [--images 3000] [--image-size 224] [--batch-size 64]
                    [--transform center|random_resized_crop] [--workers 1,2] [--repeats 3]
                    [--no-torch]

Without --data, an ImageNet-like folder (10 classes, ~500x375 photo-like JPEGs
at quality 90) is generated into OUT/sample by rf-gen-folder, or reused when it
is already there with the same parameters.

For each worker count, both systems run one short warm-up and then `repeats`
full epochs, alternating ringfeed and torch each repeat so that machine noise
hits both; the figure is the median epoch throughput. torch's side is
DataLoader(ImageFolder(root, Compose([Resize(round(S/0.875)), CenterCrop(S),
PILToTensor()])), batch_size, num_workers=N, persistent_workers=False, shuffle=True)
(RandomResizedCrop(S) + RandomHorizontalFlip() for random_resized_crop): worker
start-up is part of every torch epoch, as in a default training script.

Prints a table and appends one JSON line per worker count to
OUT/loader_bench.jsonl (machine, parameters, git revision, every repeat).
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
WARMUP_BATCHES = 5


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gen", help="path of rf-gen-folder (needed unless --data)")
    p.add_argument("--lib", help="path of libringfeed.so (else $RINGFEED_LIBRARY / the usual lookup)")
    p.add_argument("--out", required=True, help="output folder (sample data, JSON lines)")
    p.add_argument("--data", help="an existing image folder instead of a generated one")
    p.add_argument("--images", type=int, default=3000, help="images to generate (default 3000)")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--transform", default="center", choices=["center", "random_resized_crop"])
    p.add_argument("--layout", default="NHWC", choices=["NHWC", "NCHW"])
    p.add_argument("--workers", default="1,2",
                   help="comma-separated worker counts; 'max' = usable cores (default 1,2)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-torch", action="store_true", help="ringfeed only")
    a = p.parse_args(argv)
    if not a.data and not a.gen:
        p.error("--gen is needed to generate the sample folder (or pass --data)")
    if a.repeats < 1 or a.images < 10 or a.batch_size < 1 or a.image_size < 1:
        p.error("--repeats, --batch-size, --image-size must be >= 1 and --images >= 10")
    cores = usable_cores()
    workers = []
    for w in a.workers.split(","):
        w = w.strip()
        if not w:
            continue
        n = cores if w == "max" else int(w)
        if n < 1:
            p.error("--workers: counts must be >= 1")
        if n not in workers:
            workers.append(n)
    a.worker_list = workers
    return a


# ------------------------------------------------------------------ machine

def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_revision():
    try:
        r = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=10)
        if r.returncode == 0 and r.stdout.strip():
            rev = r.stdout.strip()
            d = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
            return rev + ("-dirty" if d.returncode == 0 and d.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def machine_info():
    info = {"cpu": cpu_model(), "cores": os.cpu_count(), "usable_cores": usable_cores(),
            "kernel": platform.release(), "python": platform.python_version()}
    try:
        with open("/proc/meminfo") as f:
            info["mem_kb"] = int(f.readline().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return info


# --------------------------------------------------------------------- data

def count_images(root):
    n = 0
    for dirpath, _, files in os.walk(root):
        n += sum(1 for f in files if f.endswith((".jpg", ".jpeg", ".JPEG")))
    return n


def prepare_data(a):
    if a.data:
        if not os.path.isdir(a.data):
            sys.exit("loader_bench: --data %s is not a folder" % a.data)
        return os.path.abspath(a.data), {"generated": False}
    classes = 10
    per_class = max(1, a.images // classes)
    spec = {"generated": True, "classes": classes, "per_class": per_class, "width": 500,
            "height": 375, "quality": 90, "seed": 0}
    root = os.path.join(a.out, "sample")
    marker = os.path.join(a.out, "sample.json")
    try:
        with open(marker) as f:
            old = json.load(f)
    except (OSError, ValueError):
        old = None
    if old == spec and os.path.isdir(root) and count_images(root) == classes * per_class:
        log("reusing %s (%d images)" % (root, classes * per_class))
        return root, spec
    if os.path.exists(root):
        import shutil
        shutil.rmtree(root)
    log("generating %d images into %s ..." % (classes * per_class, root))
    t = time.monotonic()
    cmd = [a.gen, root, "--classes", str(classes), "--per-class", str(per_class),
           "--width", "500", "--height", "375", "--quality", "90", "--seed", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("loader_bench: %s failed (%d):\n%s%s" % (" ".join(cmd), r.returncode,
                                                          r.stdout, r.stderr))
    log("  %s (%.1f s)" % (r.stdout.strip(), time.monotonic() - t))
    with open(marker, "w") as f:
        json.dump(spec, f)
    return root, spec


# ------------------------------------------------------------------ systems

class RingfeedRunner:
    name = "ringfeed"

    def __init__(self, ringfeed, root, a, workers):
        self.loader = ringfeed.Loader(root, batch_size=a.batch_size, image_size=a.image_size,
                                      transform=a.transform,
                                      flip=(a.transform == "random_resized_crop"),
                                      layout=a.layout, shuffle=True, seed=0, num_workers=workers,
                                      output="numpy")
        self.epoch = 0

    def warmup(self):
        self.loader.set_epoch(self.epoch)
        self.epoch += 1
        for k, _ in enumerate(self.loader):
            if k + 1 >= WARMUP_BATCHES:
                break

    def epoch_rate(self):
        self.loader.set_epoch(self.epoch)
        self.epoch += 1
        n = 0
        t = time.perf_counter()
        for images, labels in self.loader:
            n += len(labels)
        dt = time.perf_counter() - t
        return n / dt, n, dt

    def stats(self):
        s = self.loader.stats()
        keep = ("io_backend", "num_workers", "stall_seconds", "images", "errors")
        return {k: s[k] for k in keep if k in s}

    def close(self):
        self.loader.close()


class TorchRunner:
    name = "torch"

    def __init__(self, torch, root, a, workers):
        import torchvision.transforms as T
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder
        S = a.image_size
        if a.transform == "center":
            tf = T.Compose([T.Resize(round(S / 0.875)), T.CenterCrop(S), T.PILToTensor()])
        else:
            tf = T.Compose([T.RandomResizedCrop(S), T.RandomHorizontalFlip(), T.PILToTensor()])
        self.torch = torch
        self.dataset = ImageFolder(root, transform=tf)
        self.make = lambda: DataLoader(self.dataset, batch_size=a.batch_size, shuffle=True,
                                       num_workers=workers, persistent_workers=False)
        self.loader = self.make()

    def warmup(self):
        for k, _ in enumerate(self.loader):
            if k + 1 >= WARMUP_BATCHES:
                break

    def epoch_rate(self):
        n = 0
        t = time.perf_counter()
        for images, labels in self.loader:
            n += len(labels)
        dt = time.perf_counter() - t
        return n / dt, n, dt

    def stats(self):
        return {}

    def close(self):
        self.loader = None


def import_ringfeed(lib):
    if lib:
        if not os.path.exists(lib):
            sys.exit("loader_bench: --lib %s does not exist" % lib)
        os.environ["RINGFEED_LIBRARY"] = os.path.abspath(lib)
    sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
    import ringfeed
    return ringfeed


def import_torch(no_torch):
    if no_torch:
        return None, "disabled (--no-torch)"
    try:
        import torch
        import torchvision  # noqa: F401
        return torch, "torch %s, torchvision %s" % (torch.__version__, torchvision.__version__)
    except Exception as e:  # pragma: no cover
        return None, "unavailable (%s)" % e


def fmt(x):
    return "%10.1f" % x if x is not None else "%10s" % "-"


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    os.makedirs(a.out, exist_ok=True)
    ringfeed = import_ringfeed(a.lib)
    torch, torch_desc = import_torch(a.no_torch)
    root, data_spec = prepare_data(a)
    n_images = count_images(root)

    machine = machine_info()
    rev = git_revision()
    params = {"data": root, "images": n_images, "image_size": a.image_size,
              "batch_size": a.batch_size, "transform": a.transform, "layout": a.layout,
              "repeats": a.repeats, "warmup_batches": WARMUP_BATCHES, "torch": torch_desc,
              "library": ringfeed.library_path(), "dataset": data_spec}
    log("ringfeed %s (%s), %s" % (ringfeed.__version__, ringfeed.library_path(), torch_desc))
    log("machine: %s, %s usable cores, kernel %s; git %s"
        % (machine["cpu"], machine["usable_cores"], machine["kernel"], rev))
    log("%d images, %s at %d, batch %d, %d repeats" % (n_images, a.transform, a.image_size,
                                                      a.batch_size, a.repeats))

    rows = []
    jsonl = os.path.join(a.out, "loader_bench.jsonl")
    for w in a.worker_list:
        runners = [RingfeedRunner(ringfeed, root, a, w)]
        if torch is not None:
            runners.append(TorchRunner(torch, root, a, w))
        for r in runners:
            r.warmup()
        runs = {r.name: [] for r in runners}
        for rep in range(a.repeats):
            order = runners if rep % 2 == 0 else runners[::-1]
            for r in order:
                rate, n, dt = r.epoch_rate()
                runs[r.name].append(round(rate, 2))
                log("  workers %d repeat %d %-8s %8.1f img/s (%d images, %.2f s)"
                    % (w, rep, r.name, rate, n, dt))
        rf_stats = runners[0].stats()
        for r in runners:
            r.close()
        rf = statistics.median(runs["ringfeed"])
        th = statistics.median(runs["torch"]) if "torch" in runs else None
        ratio = rf / th if th else None
        rows.append((w, rf, th, ratio))
        rec = {"bench": "loader_bench", "time": datetime.datetime.now().astimezone().isoformat(),
               "git": rev, "machine": machine, "params": params, "workers": w,
               "ringfeed_img_s": round(rf, 2), "torch_img_s": round(th, 2) if th else None,
               "ratio": round(ratio, 3) if ratio else None, "runs": runs,
               "ringfeed_stats": rf_stats}
        with open(jsonl, "a") as f:
            f.write(json.dumps(rec) + "\n")

    print()
    print("ringfeed vs torchvision DataLoader: %d images, %s %d, batch %d, median of %d"
          % (n_images, a.transform, a.image_size, a.batch_size, a.repeats))
    print("%8s %10s %10s %8s" % ("workers", "ringfeed", "torch", "ratio"))
    print("%8s %10s %10s %8s" % ("", "img/s", "img/s", ""))
    for w, rf, th, ratio in rows:
        print("%8d %s %s %8s" % (w, fmt(rf), fmt(th), "%.2fx" % ratio if ratio else "-"))
    print("\nJSON lines appended to %s" % jsonl)
    return 0


if __name__ == "__main__":
    sys.exit(main())
