#!/usr/bin/env python3
"""gpu_check_report.py - the machine's description and the one JSON file of
bench/gpu_check.sh.

    gpu_check_report.py --sysinfo          # prints the machine as JSON
    gpu_check_report.py --json FILE        # assembles $WORK's files into FILE

The assembly reads what the steps left in $WORK (steps.tsv, tools.tsv,
sysinfo.json, cuda_tests.out, pytest.out, bandwidth.json, data.json, e2e.json,
normalize.json, scaling.json, ctest_all.out) and the run's parameters from the
environment gpu_check.sh sets, and sets each figure beside its target (the
GPU check's: copier >= 0.8x plain pinned copies, ringfeed >= 2x DataLoader at
16 workers, float16 within 1 ulp of torch, RandomResizedCrop scaling >= 0.8,
reader >= 100k tiny files/s). A run on the stand-in runtime says so at the
top: its CUDA figures are a fake's, not a GPU's. Only the standard library.
"""

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time


def sysinfo():
    d = {"hostname": platform.node(), "kernel": platform.release(), "machine": platform.machine(),
         "cpus": os.cpu_count(), "python": platform.python_version()}
    try:
        d["affinity_cpus"] = len(os.sched_getaffinity(0))
    except Exception:
        pass
    try:
        with open("/etc/os-release") as f:
            d["os"] = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l).get(
                "PRETTY_NAME", "").strip('"')
    except Exception:
        pass
    try:
        with open("/proc/meminfo") as f:
            d["mem_total_kb"] = int(f.readline().split()[1])
    except Exception:
        pass
    if shutil.which("nvidia-smi"):
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                            "pcie.link.gen.max,pcie.link.width.max", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        d["nvidia_smi"] = r.stdout.strip() or r.stderr.strip()
    try:
        import torch
        d["torch"] = torch.__version__
        d["torch_cuda"] = torch.version.cuda
        d["cuda_available"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            d["gpu"] = torch.cuda.get_device_name(0)
            d["gpu_count"] = torch.cuda.device_count()
    except Exception as e:
        d["torch"] = None
        d["torch_error"] = repr(e)
    try:
        import torchvision
        d["torchvision"] = torchvision.__version__
    except Exception:
        d["torchvision"] = None
    if os.path.isdir("/dev/shm"):
        st = os.statvfs("/dev/shm")
        d["dev_shm_free_bytes"] = st.f_bavail * st.f_frsize
    return d


def _load(work, name):
    try:
        with open(os.path.join(work, name)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except Exception as e:
        return {"error": "cannot read %s: %r" % (name, e)}


def _text(work, name):
    try:
        with open(os.path.join(work, name), errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def ctest_results(out):
    res = {}
    for m in re.finditer(r"Test\s+#\d+: (\S+) \.+\s*(\*\*\*)?(Passed|Failed|Skipped|Not Run|Timeout|"
                         r"Exception)?(.*?)\s+[\d.]+ sec", out):
        res[m.group(1)] = (m.group(3) or (m.group(4) or "").strip() or "?").lower()
    m = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", out)
    return {"tests": res, **({"line": m.group(0)} if m else {})}


def pytest_summary(out):
    lines = [l.strip("= ") for l in out.splitlines()
             if re.search(r"\d+ (passed|failed|skipped|error)", l)]
    last = lines[-1] if lines else ""
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed)", last)}
    return {"line": last, **counts}


def _target(value, target, more_is_better=True, **extra):
    met = value is not None and (value >= target if more_is_better else value <= target)
    return {"value": value, "target": target, "met": met, **extra}


def targets(doc):
    t = {}
    bw = doc.get("bandwidth") or {}
    if bw.get("plain_pinned_gbps"):
        t["copier_pinned_vs_plain_pinned"] = _target(
            round(bw["copier_pinned_gbps"] / bw["plain_pinned_gbps"], 3), 0.8,
            copier_gbps=bw["copier_pinned_gbps"], plain_gbps=bw["plain_pinned_gbps"],
            pageable_plain_gbps=bw.get("plain_pageable_gbps"),
            pageable_copier_gbps=bw.get("copier_pageable_gbps"))
    e2e = ((doc.get("e2e") or {}).get("summary") or {}).get("workers") or {}
    for w, e in sorted(e2e.items(), key=lambda kv: int(kv[0])):
        if "ratio" in e:
            t["e2e_vs_dataloader_pin_memory_workers_%s" % w] = _target(
                e["ratio"], 2.0, ringfeed_images_per_sec=e.get("ringfeed"),
                dataloader_images_per_sec=e.get("torchvision"),
                later_epochs_value=e.get("ratio_later_epochs"))
    norm = doc.get("normalize") or {}
    if "max_ulp" in norm:
        t["normalize_float16_max_ulp"] = _target(norm["max_ulp"], 1, more_is_better=False)
    sc = (doc.get("scaling") or {}).get("summary") or {}
    for name, s in sorted(sc.items()):
        if "efficiency" in s:
            goal = 0.8 if name == "random_resized_crop" else None
            if goal is not None:
                t["scaling_%s" % name] = _target(s["efficiency"], goal, **{
                    k: v for k, v in s.items() if k != "efficiency"})
            else:
                t["scaling_%s" % name] = {"value": s["efficiency"], **s}
        if name == "tiny_files" and "best_files_per_sec" in s:
            t["reader_tiny_files_per_sec"] = _target(s["best_files_per_sec"], 100000,
                                                     workers=s.get("best_workers"))
    return t


def assemble(path):
    e = os.environ
    work = e["WORK"]
    steps = []
    for line in _text(work, "steps.tsv").splitlines():
        p = line.split("\t")
        if len(p) >= 5:
            steps.append({"step": p[0], "status": p[1], "seconds": float(p[2] or 0),
                          "rc": int(p[3] or 0), "note": p[4]})
    tools = [dict(zip(("tool", "status", "detail"), l.split("\t", 2)))
             for l in _text(work, "tools.tsv").splitlines() if l]
    git = {}
    try:
        rev = subprocess.run(["git", "-C", e["REPO"], "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        if rev.returncode == 0:
            git["revision"] = rev.stdout.strip()
            st = subprocess.run(["git", "-C", e["REPO"], "status", "--porcelain",
                                 "--untracked-files=no"], capture_output=True, text=True, timeout=10)
            git["dirty"] = bool(st.stdout.strip())
    except Exception as ex:
        git["error"] = repr(ex)
    if "revision" not in git and e.get("RINGFEED_GIT_REV"):  # a copy without .git
        git = {"revision": e["RINGFEED_GIT_REV"], "from": "RINGFEED_GIT_REV"}
    mode = e["MODE"]
    runtime = {"gpu": "the CUDA runtime torch loaded", "standin":
               "STAND-IN: tests/fake_cudart.c, no GPU; every CUDA figure is the stand-in's",
               "cpu": "none (--no-gpu)"}[mode]
    doc = {
        "what": "ringfeed gpu_check (bench/gpu_check.sh)",
        "mode": mode,
        "runtime": {"kind": runtime, "path": e.get("RUNTIME") or None},
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(e["START"]))),
        "seconds": round(time.time() - int(e["START"]), 1),
        "budget_seconds": int(e["BUDGET"]),
        "git": git,
        "params": {"images": int(e["IMAGES"]), "tiny_files": int(e["TINY_FILES"]),
                   "e2e_workers": e["E2E_WORKERS"], "scaling_workers": e["SCALING_WORKERS"],
                   "batch_size": int(e["BATCH"]), "image_size": int(e["SIZE"])},
        "steps": steps,
        "tools": tools,
        "system": _load(work, "sysinfo.json"),
        "tests": {"cuda": ctest_results(_text(work, "cuda_tests.out")) or None,
                  "pytest_cuda": pytest_summary(_text(work, "pytest.out")),
                  "ctest_all": ctest_results(_text(work, "ctest_all.out"))},
        "bandwidth": _load(work, "bandwidth.json"),
        "data": _load(work, "data.json"),
        "e2e": _load(work, "e2e.json"),
        "normalize": _load(work, "normalize.json"),
        "scaling": _load(work, "scaling.json"),
    }
    if mode == "standin":
        doc["NOTE"] = ("Stand-in figures: this run used tests/fake_cudart.c as the CUDA runtime on "
                       "a machine without a GPU. Bandwidths and CUDA timings are the stand-in's "
                       "modelled delays, not a GPU's; the CPU figures are this machine's.")
    doc["targets"] = targets(doc)
    doc["ok"] = all(s["status"] in ("ok", "skipped", "dry-run") for s in steps)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)
    print(json.dumps({"steps": {s["step"]: s["status"] for s in steps},
                      "targets": doc["targets"]}, indent=1))


def main(argv):
    if argv[:1] == ["--sysinfo"]:
        print(json.dumps(sysinfo()))
        return 0
    if len(argv) == 2 and argv[0] == "--json":
        assemble(argv[1])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
