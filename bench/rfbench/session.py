"""One ringfeed-bench session, from the arguments to the report.

A probe loader learns the source (size, io backend, whether the library has
CUDA); then the plan runs: repeats are the outer loop, and in each repeat
every worker count runs once per system, the systems' order alternating, so
that a noisy spell on a shared machine is spread over every configuration.
Then the pinned vs pageable section (CUDA only), the summary and the outputs.
"""

import datetime
import os
import sys

from . import REPO, BenchError
from .analysis import Bench, aggregate, build_summary, fmt_num, recommendation
from .data import prepare_sample, warm_page_cache
from .machine import git_revision, machine_info
from .report import JsonOut, plot, print_report
from .runners import GpuStep, RingfeedRunner, SleepStep, TorchRunner, h2d_gbps, timed_run


def import_ringfeed(a):
    if a.lib:
        if not os.path.isfile(a.lib):
            raise BenchError("--lib %s does not exist" % a.lib)
        os.environ["RINGFEED_LIBRARY"] = os.path.abspath(a.lib)
    try:
        import ringfeed  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
        import ringfeed  # noqa: F401
    return ringfeed


def import_torch(want):
    if not want:
        return None, None, "torch not needed"
    try:
        import torch
    except Exception as e:
        return None, None, "torch cannot be imported (%s)" % e
    try:
        import torchvision
    except Exception as e:
        return torch, None, "torch %s; torchvision cannot be imported (%s)" % (torch.__version__, e)
    return torch, torchvision, "torch %s, torchvision %s" % (torch.__version__,
                                                            torchvision.__version__)


def torch_cuda(torch, torch_desc):
    """(torch sees a GPU, why not or None)."""
    if torch is None:
        return False, torch_desc
    try:
        if torch.cuda.is_available():
            return True, None
    except Exception as e:
        return False, "torch.cuda.is_available() failed: %s" % e
    return False, "torch %s %s" % (torch.__version__,
                                   "is a build without CUDA" if not torch.version.cuda
                                   else "sees no usable GPU (torch.cuda.is_available() "
                                   "is False)")


def probe(rf, a, source):
    """A probe loader: (its options, the source's size, batches per epoch, the io
    backend, the library's CUDA stats, the paths to warm)."""
    probe_kw = dict(batch_size=a.batch_size, num_workers=1, shuffle=False, output="numpy")
    if a.record_size:
        probe_kw.update(record_size=a.record_size, header_size=a.header_size, dtype=a.dtype,
                        transform="none")
    else:
        probe_kw.update(image_size=a.image_size, transform=a.transform)
    try:
        ld = rf.Loader(source, **probe_kw)
    except Exception as e:
        raise BenchError("ringfeed cannot read %s: %s" % (source, e))
    n_samples, batches_per_epoch = ld.num_samples, len(ld)
    pst = ld.stats()
    paths = []
    if not a.no_warm:
        seen = set()
        for i in range(min(n_samples, 2000000)):
            p = ld.sample_path(i)
            if p not in seen:
                seen.add(p)
                paths.append(p)
    ld.close()
    return (probe_kw, n_samples, batches_per_epoch, pst.get("io_backend"),
            pst.get("cuda") or {}, paths)


def describe_data(a, source, data_spec, n_samples):
    """(the report's line about the data, the chart's name for it)."""
    if os.path.isdir(source):
        classes = sorted(d for d in os.listdir(source) if os.path.isdir(os.path.join(source, d)))
        data_desc = "%d images in %s (image folder, %d classes)" % (n_samples, source, len(classes))
        data_name = os.path.basename(os.path.normpath(source))
    else:
        data_desc = "%d samples in %s" % (n_samples, source)
        data_name = os.path.basename(source)
    if data_spec.get("generated") is not None and not a.data:
        data_desc += " [built-in sample]"
    return data_desc, data_name


def ringfeed_cuda(rf, source, probe_kw, rf_cuda):
    """(ringfeed can put batches on the GPU, why not or None)."""
    if not rf_cuda.get("built"):
        return False, "libringfeed was built without CUDA (%s)" % rf.library_path()
    try:
        rf.Loader(source, **dict(probe_kw, output="auto", device="cuda")).close()
    except Exception as e:
        return False, "ringfeed reports no CUDA device: %s" % e
    return True, None


def make_plan(a, systems, with_step, memory):
    """The runs, as (system, workers, pass, rep, memory): per worker count,
    each repeat alternates the systems' order. Repeats are the outer loop, so
    that a noisy spell on a shared machine is spread over every worker count
    instead of hitting one."""
    plan = []
    for rep in range(a.epochs):
        for w in a.worker_list:
            sys_w = [s for s in systems if not (s == "dataloader" and w == "auto")]
            order = sys_w if rep % 2 == 0 else sys_w[::-1]
            for npass in (("max", "step") if with_step else ("max",)):
                for s in order:
                    plan.append((s, w, npass, rep, memory))
    return plan


def machine_noise(b, machine):
    """What other processes used during the runs (None when unknown); a
    note when it was much."""
    others = [r["other_cpu_cores"] for r in b.runs if r.get("other_cpu_cores") is not None]
    if not others:
        return None
    noise = {"other_cpu_cores_mean": round(sum(others) / len(others), 3),
             "other_cpu_cores_max": round(max(others), 3)}
    if noise["other_cpu_cores_mean"] > 0.2 * machine["usable_cores"]:
        b.notes.append("other processes used %.2f cores on average (up to %.2f) during "
                       "the runs: the machine was busy, figures are noisy; rerun on a quiet "
                       "machine" % (noise["other_cpu_cores_mean"],
                                    noise["other_cpu_cores_max"]))
    return noise


def pinned_vs_pageable(a, torch, per_system, modes, one, jout):
    """The pinned vs pageable section: plain host-to-device copies per memory
    mode, then ringfeed end to end at the knee in each mode (`one` runs one
    measured run)."""
    fixed = [w for w in a.worker_list if w != "auto"]
    pw = per_system["ringfeed"].get("knee_workers") or (max(fixed) if fixed else "auto")
    nbytes = a.batch_size * (a.record_size or 3 * a.image_size * a.image_size)
    pn = {"workers": pw, "batch_bytes": nbytes, "h2d_gbps": {}, "e2e": {}}
    for mode in modes:
        pn["h2d_gbps"][mode] = round(h2d_gbps(torch, nbytes, mode == "pinned"), 3)
        jout.write("h2d", {"memory": mode, "bytes": nbytes, "gbps": pn["h2d_gbps"][mode]})
    e2e_runs = {m: [] for m in modes}
    for rep in range(a.epochs):
        order = modes if rep % 2 == 0 else modes[::-1]
        for mode in order:
            r = one("ringfeed", pw, "max", rep, mode, mode == "pinned", "pinned_vs_pageable")
            e2e_runs[mode].append(r)
    for mode, rs in e2e_runs.items():
        ag = aggregate(rs)
        pn["e2e"][mode] = {"images_per_sec": ag["images_per_sec"],
                           "memory_mode_reported": rs[-1].get("memory_mode")}
    if "pinned" in pn["e2e"] and "pageable" in pn["e2e"]:
        p1 = pn["e2e"]["pinned"]["images_per_sec"]
        p2 = pn["e2e"]["pageable"]["images_per_sec"]
        pn["gain_pct"] = round(100.0 * (p1 / p2 - 1), 1) if p2 else None
    return pn


def summary_rows(rows):
    """The summary line's rows: per (system, workers), the estimates and the
    aggregates of each pass."""
    out = []
    for e in rows.values():
        d = {"system": e["system"], "workers": e["workers"]}
        for k in ("data_seconds_per_batch", "epoch_seconds_estimate"):
            if k in e:
                d[k] = e[k]
        for npass in ("max", "step"):
            if e.get(npass):
                d[npass] = e[npass]
        out.append(d)
    return out


def run(a, progress):
    rf = import_ringfeed(a)
    # torch: for the comparison, for CUDA, and (when importable) for the binding's tensors.
    torch, torchvision, torch_desc = import_torch(True)
    cuda_torch, cuda_reason = torch_cuda(torch, torch_desc)

    # The data.
    if a.data:
        source = a.data
        data_spec = {"generated": False, "path": a.data}
    else:
        if a.record_size:
            raise BenchError("--record-size needs --data")
        source, data_spec = prepare_sample(a, progress)

    probe_kw, n_samples, batches_per_epoch, io_backend, rf_cuda, paths = probe(rf, a, source)
    is_folder = os.path.isdir(source)
    data_desc, data_name = describe_data(a, source, data_spec, n_samples)

    # CUDA: the device and the pinned vs pageable section.
    cuda_ok = False
    if cuda_torch:
        cuda_ok, cuda_reason = ringfeed_cuda(rf, source, probe_kw, rf_cuda)
    device = a.device or ("cuda" if cuda_ok else "cpu")
    if device == "cuda" and not cuda_ok:
        raise BenchError("--device cuda: %s" % cuda_reason)
    sizing_memory = "pageable" if a.memory == "pageable" else "pinned"
    pin = sizing_memory == "pinned"
    if device != "cuda":
        sizing_memory = "host"  # batches stay on the host: nothing to pin for

    torch_ok = False
    torch_skip = None
    if a.compare_torch:
        if torch is None or torchvision is None:
            torch_skip = "--compare-torch: %s: DataLoader comparison skipped" % torch_desc
        elif not is_folder or a.record_size:
            torch_skip = ("--compare-torch: the DataLoader side uses ImageFolder, which needs an "
                          "image folder; %s is not one: skipped" % source)
        else:
            torch_ok = True

    machine = machine_info(torch)
    rev = git_revision()
    step_kind = None
    step = None
    if a.step_ms > 0:
        if device == "cuda":
            step = GpuStep(torch, a.step_ms)
        else:
            step = SleepStep(a.step_ms)
        step_kind = step.kind
    sync = (lambda: torch.cuda.synchronize()) if device == "cuda" else None

    params = {"data": os.path.abspath(source) if os.path.exists(source) else source,
              "samples": n_samples, "batches_per_epoch": batches_per_epoch,
              "batch_size": a.batch_size, "image_size": None if a.record_size else a.image_size,
              "transform": None if a.record_size else a.transform,
              "layout": None if a.record_size else a.layout,
              "augment": getattr(a, "augment", "none"), "out_dtype": getattr(a, "out_dtype", "uint8"),
              "verify": None if a.record_size else a.verify,
              "record_size": a.record_size or None, "workers": a.worker_list, "device": device,
              "memory": a.memory, "sizing_memory": sizing_memory, "step_ms": a.step_ms,
              "step": step_kind, "epochs": a.epochs, "batches": a.batches,
              "compare_torch": a.compare_torch, "quick": a.quick, "dataset": data_spec,
              "ringfeed": rf.__version__, "library": rf.library_path(), "io_backend": io_backend,
              "torch": torch_desc, "argv": sys.argv[1:]}
    run_id = "%s-%d" % (datetime.datetime.now().strftime("%Y%m%dT%H%M%S"), os.getpid())
    jout = JsonOut(a.json, {"run_id": run_id, "git": rev, "machine": machine, "params": params})

    b = Bench(a)
    if torch_skip:
        b.notes.append(torch_skip)
    cal = getattr(step, "calibrated_ms", None)
    if cal is not None and abs(cal - a.step_ms) > 0.2 * a.step_ms:
        b.notes.append("the GPU step takes %.1f ms, not the %g ms asked (one matmul is the "
                       "smallest unit); stall figures are for %.1f ms, estimates for %g ms"
                       % (cal, a.step_ms, cal, a.step_ms))
    warm_note = "page cache not warmed (--no-warm)"
    if not a.no_warm:
        warm_note = warm_page_cache(paths, progress)

    plan = make_plan(a, ["ringfeed"] + (["dataloader"] if torch_ok else []), step is not None,
                     sizing_memory)
    do_pinned = device == "cuda" and cuda_ok
    pinned_modes = {"both": ["pinned", "pageable"], "pinned": ["pinned"],
                    "pageable": ["pageable"]}[a.memory]
    pinned_plan_len = a.epochs * len(pinned_modes) if do_pinned else 0
    progress.total = len(plan) + pinned_plan_len
    progress.note("ringfeed-bench: %d runs; %s; %s, %s usable cores"
                  % (progress.total, data_desc, machine["cpu"], machine["usable_cores"]))

    max_batches = a.batches

    def one(s, w, npass, rep, mode, pin_flag, extra_tag=None):
        seed = rep
        if s == "ringfeed":
            runner = RingfeedRunner(rf, a, source, w, device, pin_flag, seed)
        else:
            runner = TorchRunner(torch, a, source, w, device == "cuda", pin_flag, seed)
        label = "%s %s w=%s%s rep %d/%d" % (
            "ringfeed" if s == "ringfeed" else "DataLoader", npass, w,
            " " + mode if device == "cuda" else "", rep + 1, a.epochs)
        r = timed_run(runner, max_batches, step if npass == "step" else None, sync, progress,
                      label)
        r.update({"system": s, "workers": w, "pass": npass, "rep": rep, "memory": mode,
                  "device": device})
        if extra_tag:
            r["section"] = extra_tag
        progress.run_done("%s: %.0f img/s, first batch %.2f s, stall %s, %.2f CPU cores, "
                          "peak RSS %.0f MB%s" % (
                              label, r["images_per_sec"], r["first_batch_seconds"] or 0,
                              fmt_num(r["stall_pct"], "%.1f%%"), r["cpu_cores"] or 0,
                              r["rss_peak_mb"],
                              ", tuner %s" % r["num_workers"] if w == "auto" else ""))
        jout.write("run", r)
        return r

    for s, w, npass, rep, mode in plan:
        b.runs.append(one(s, w, npass, rep, mode, pin))

    rows, per_system = build_summary(b, {"torch_ok": torch_ok, "sizing_memory": sizing_memory,
                                         "batches_per_epoch": batches_per_epoch})
    noise = machine_noise(b, machine)

    # Pinned vs pageable.
    if not do_pinned:
        if cuda_ok:
            b.pinned = {"skipped": "pinned vs pageable: skipped (--device cpu; pass --device "
                                   "cuda to measure it)"}
        else:
            b.pinned = {"skipped": "pinned vs pageable needs a CUDA GPU: skipped (%s)"
                                   % cuda_reason}
        jout.write("pinned_vs_pageable", {"skipped": True, "reason": b.pinned["skipped"]})
    else:
        b.pinned = pinned_vs_pageable(a, torch, per_system, pinned_modes, one, jout)
        jout.write("pinned_vs_pageable", dict(b.pinned, skipped=False))

    progress.clear()
    rec_lines = recommendation(b, {"machine": machine, "batches_per_epoch": batches_per_epoch},
                               rows, per_system)
    ctx = {"machine": machine, "data_desc": data_desc, "data_name": data_name,
           "samples": n_samples,
           "batches_per_epoch": batches_per_epoch, "device": device,
           "sizing_memory": sizing_memory, "ringfeed_version": rf.__version__,
           "library": rf.library_path(), "io_backend": io_backend, "torch_desc": torch_desc,
           "git": rev, "step_kind": step_kind, "warm_note": warm_note, "torch_ok": torch_ok,
           "outputs": []}
    if a.plot:
        try:
            plot(a.plot, b, ctx, rows)
            ctx["outputs"].append(a.plot)
        except Exception as e:  # a missing matplotlib must not lose the measurements
            b.notes.append("plot not written: %s" % e)
    if a.json:
        ctx["outputs"].append(a.json)
    jout.write("summary", {
        "rows": summary_rows(rows), "systems": per_system, "pinned_vs_pageable": b.pinned,
        "compare_torch": {"ran": torch_ok, "skipped": torch_skip},
        "warm": warm_note, "machine_noise": noise, "notes": b.notes, "recommendation": rec_lines,
        "plot": a.plot if a.plot and a.plot in ctx["outputs"] else None})
    jout.close()
    print_report(b, ctx, rows, per_system, rec_lines)
    return 0
