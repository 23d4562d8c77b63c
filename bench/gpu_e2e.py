#!/usr/bin/env python3
"""gpu_e2e.py - end to end into the GPU: ringfeed vs torchvision's DataLoader.

    gpu_e2e.py --data DIR --out FILE.json [--workers 16] [--batch-size 256]
               [--image-size 224] [--device cuda|cpu] [--epochs 2] [--run-limit 60]
               [--deadline UNIX_TIME] [--no-torchvision] [--extras]

For each worker count, in turn: ringfeed.Loader(DIR, transform="center",
num_workers=N, device="cuda", pin_memory=True) yielding CUDA tensors, then
torchvision's DataLoader(ImageFolder(DIR, Resize(round(S/0.875)) +
CenterCrop(S) + PILToTensor()), num_workers=N, pin_memory=True, shuffle=True)
with .cuda(non_blocking=True) on images and labels: the same decoded bytes
land on the same GPU. Each run covers --epochs whole epochs (fewer if it
passes --run-limit seconds), from the construction of the dataset/loader
(indexing and worker start-up count, as in a training script; torch's
workers start again each epoch, its default persistent_workers=False) to a
torch.cuda.synchronize() after the last batch. Figures: images/s over the
whole run ("images_per_sec", the one compared), and per epoch (the first
with start-up, the later ones without ringfeed's, with torch's worker
restart). With --extras, ringfeed also runs with pin_memory=False and with
copy_mode="direct" at the largest worker count. A torch-level reference of
batch-sized pinned .cuda(non_blocking=True) copies is measured first.

--device cpu runs the same control flow without a GPU (batches stay on the
host; torchvision without pin_memory), for testing the script itself.
The JSON file is rewritten after every run, so a timeout keeps what was done.
"""

import argparse
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def log(msg):
    print("[gpu_e2e] " + msg, file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--workers", default="16")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--run-limit", type=float, default=60.0, help="seconds per run, at most")
    p.add_argument("--deadline", type=float, default=0.0,
                   help="unix time after which no new run starts (0: none)")
    p.add_argument("--no-torchvision", action="store_true")
    p.add_argument("--extras", action="store_true")
    a = p.parse_args(argv)
    a.worker_list = [int(w) for w in a.workers.split(",") if w.strip()]
    return a


class Result:
    def __init__(self, path, meta):
        self.path = path
        self.doc = {"meta": meta, "runs": [], "skipped": [], "summary": {}}

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)


def sync(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed_epochs(a, torch, make_iter, per_batch):
    """Runs a.epochs epochs of make_iter(epoch) (fewer past a.run_limit).
    Returns the figures."""
    t0 = time.perf_counter()
    images = batches = 0
    t_first = None
    truncated = False
    per_epoch = []
    for epoch in range(a.epochs):
        te, ne = time.perf_counter(), 0
        for x, y in make_iter(epoch):
            per_batch(x, y)
            n = int(y.shape[0])
            images += n
            ne += n
            batches += 1
            if t_first is None:
                sync(torch, a.device)
                t_first = time.perf_counter()
            if time.perf_counter() - t0 > a.run_limit:
                truncated = True
                break
        sync(torch, a.device)
        dt = time.perf_counter() - (t0 if epoch == 0 else te)
        per_epoch.append({"images": ne, "seconds": round(dt, 4),
                          "images_per_sec": round(ne / dt, 1) if dt > 0 else 0.0})
        if truncated:
            break
    t_end = time.perf_counter()
    r = {"images": images, "batches": batches, "epochs": len(per_epoch), "truncated": truncated,
         "seconds": round(t_end - t0, 4),
         "images_per_sec": round(images / (t_end - t0), 1) if images else 0.0,
         "first_batch_seconds": round(t_first - t0, 4) if t_first else None,
         "per_epoch": per_epoch}
    if len(per_epoch) > 1 and not truncated:
        later = per_epoch[1:]
        r["later_epochs_images_per_sec"] = round(
            sum(e["images"] for e in later) / sum(e["seconds"] for e in later), 1)
    return r


def run_ringfeed(a, torch, workers, pin=True, copy_mode="ring"):
    import ringfeed
    kw = dict(batch_size=a.batch_size, image_size=a.image_size, transform="center",
              num_workers=workers, shuffle=True, seed=0, prefetch=4)
    if a.device == "cuda":
        kw.update(device="cuda", pin_memory=pin, copy_mode=copy_mode)
    else:
        kw.update(device="cpu", output="torch" if torch else "numpy")
    holder = {}

    def make_iter(epoch):
        if "loader" not in holder:
            holder["loader"] = ringfeed.Loader(a.data, **kw)
        holder["loader"].set_epoch(epoch)
        return iter(holder["loader"])

    def per_batch(x, y):
        if a.device == "cuda":
            assert x.is_cuda and y.is_cuda

    r = timed_epochs(a, torch, make_iter, per_batch)
    st = holder["loader"].stats()
    holder["loader"].close()
    r.update(system="ringfeed", workers=workers, pin_memory=pin, copy_mode=copy_mode,
             stall_seconds=st.get("stall_seconds"), io_backend=st.get("io_backend"),
             memory_mode=st.get("memory", {}).get("mode"), device=st.get("device"),
             num_workers=st.get("num_workers"), cuda=st.get("cuda"))
    return r


def run_torchvision(a, torch, workers):
    from torch.utils.data import DataLoader
    from torchvision import transforms as T
    from torchvision.datasets import ImageFolder
    holder = {}
    cuda = a.device == "cuda"

    def make_iter(epoch):
        if "dl" not in holder:
            tf = T.Compose([T.Resize(int(round(a.image_size / 0.875))), T.CenterCrop(a.image_size),
                            T.PILToTensor()])
            ds = ImageFolder(a.data, transform=tf)
            holder["dl"] = DataLoader(ds, batch_size=a.batch_size, shuffle=True,
                                      num_workers=workers, pin_memory=cuda,
                                      persistent_workers=False, drop_last=False)
        torch.manual_seed(epoch)
        return iter(holder["dl"])

    def per_batch(x, y):
        if cuda:
            x.cuda(non_blocking=True)
            y.cuda(non_blocking=True)

    r = timed_epochs(a, torch, make_iter, per_batch)
    r.update(system="torchvision", workers=workers, pin_memory=cuda)
    return r


def torch_h2d_reference(a, torch):
    """Batch-sized pinned host tensor .cuda(non_blocking=True), best of 3 x 20."""
    n = a.batch_size * a.image_size * a.image_size * 3
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    best = 0.0
    for r in range(4):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            dev.copy_(host, non_blocking=True)
        torch.cuda.synchronize()
        gbps = n * 20 / (time.perf_counter() - t0) / 1e9
        if r:
            best = max(best, gbps)
    return {"bytes": n, "torch_pinned_h2d_gbps": round(best, 3)}


def main(argv):
    a = parse_args(argv)
    try:
        import torch
    except Exception as e:
        torch = None
        log("torch cannot be imported (%s): ringfeed only, numpy output" % e)
        if a.device == "cuda":
            log("device cuda needs torch")
            return 2
    meta = {"python": sys.version.split()[0], "machine": platform.machine(),
            "cpus": os.cpu_count(), "data": a.data, "device": a.device,
            "batch_size": a.batch_size, "image_size": a.image_size, "workers": a.worker_list,
            "epochs": a.epochs, "run_limit": a.run_limit,
            "torch": getattr(torch, "__version__", None)}
    try:
        import ringfeed
        meta["ringfeed_library"] = ringfeed.library_path()
    except Exception as e:
        meta["ringfeed_error"] = str(e)
    try:
        import torchvision
        meta["torchvision"] = torchvision.__version__
    except Exception as e:
        meta["torchvision"] = None
        if not a.no_torchvision:
            log("torchvision cannot be imported (%s): ringfeed only" % e)
            a.no_torchvision = True
    if a.device == "cuda":
        meta["gpu"] = torch.cuda.get_device_name(0)
        meta["cuda"] = torch.version.cuda
    res = Result(a.out, meta)
    res.save()
    if a.device == "cuda":
        try:
            res.doc["torch_reference"] = torch_h2d_reference(a, torch)
            log("torch pinned .cuda(non_blocking) reference: %s" % res.doc["torch_reference"])
        except Exception as e:
            res.doc["torch_reference"] = {"error": repr(e)}
        res.save()

    plan = []
    for w in a.worker_list:
        plan.append(("ringfeed", w, {}))
        if not a.no_torchvision:
            plan.append(("torchvision", w, {}))
    if a.extras and a.device == "cuda" and a.worker_list:
        w = max(a.worker_list)
        plan.append(("ringfeed", w, {"pin": False}))
        plan.append(("ringfeed", w, {"copy_mode": "direct"}))
    failures = 0
    for system, w, kw in plan:
        what = "%s workers=%d %s" % (system, w, kw or "")
        if a.deadline and time.time() > a.deadline:
            log("skip %s: past the deadline" % what)
            res.doc["skipped"].append({"run": what, "reason": "deadline"})
            res.save()
            continue
        log("run %s" % what)
        try:
            r = (run_ringfeed(a, torch, w, **kw) if system == "ringfeed"
                 else run_torchvision(a, torch, w))
        except Exception as e:
            failures += 1
            log("FAILED %s: %r" % (what, e))
            r = {"system": system, "workers": w, "error": repr(e)}
            r.update(kw)
        log("  -> %s" % json.dumps({k: r.get(k) for k in ("images", "seconds", "images_per_sec",
                                                           "later_epochs_images_per_sec", "error")}))
        res.doc["runs"].append(r)
        summarize(res.doc)
        res.save()
    return 1 if failures else 0


def summarize(doc):
    """summary.workers[N] = ringfeed vs torchvision images/s (default options)."""
    s = {}
    for r in doc["runs"]:
        if "error" in r or r.get("pin_memory") is False and r["system"] == "ringfeed" \
                or r.get("copy_mode", "ring") != "ring":
            continue
        e = s.setdefault(str(r["workers"]), {})
        e[r["system"]] = r.get("images_per_sec")
        e[r["system"] + "_later_epochs"] = r.get("later_epochs_images_per_sec")
    for e in s.values():
        if e.get("ringfeed") and e.get("torchvision"):
            e["ratio"] = round(e["ringfeed"] / e["torchvision"], 3)
        if e.get("ringfeed_later_epochs") and e.get("torchvision_later_epochs"):
            e["ratio_later_epochs"] = round(e["ringfeed_later_epochs"] / e["torchvision_later_epochs"], 3)
    doc["summary"] = {"workers": s}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
