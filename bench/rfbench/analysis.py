"""From runs to figures and advice: medians per configuration, the knee, and
the recommendation's sentences.

build_summary() groups the runs by (system, workers, pass), takes medians,
and per system finds the knee (the fewest workers reaching KNEE_FRACTION of
the best images/s) and, with a step, the fewest workers that keep the loop
fed (stall below STALL_OK_PCT). recommendation() turns them into words.
"""

import statistics

STALL_OK_PCT = 5.0        # a step is "fed" when the loop waits less than this
KNEE_FRACTION = 0.95      # the knee: fewest workers reaching this share of the best


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def aggregate(runs):
    """runs: list of run dicts for one (system, workers, pass)."""
    if not runs:
        return None
    keys = ("images_per_sec", "steady_images_per_sec", "first_batch_seconds", "stall_pct",
            "cpu_cores", "rss_added_mb", "wait_p50_ms", "wait_p90_ms", "wait_p99_ms",
            "wait_max_ms", "ring_empty")
    agg = {k: median([r.get(k) for r in runs]) for k in keys}
    agg["rss_peak_mb"] = max(r["rss_peak_mb"] for r in runs)
    agg["rss_added_mb_max"] = max(r["rss_added_mb"] for r in runs)
    agg["runs"] = len(runs)
    agg["num_workers"] = runs[-1].get("num_workers")
    if runs[-1].get("tuner") is not None:
        agg["tuner"] = runs[-1]["tuner"]
        agg["tuner_workers_per_run"] = [r.get("num_workers") for r in runs]
    return agg


def knee(rows):
    """rows: {workers: images_per_sec}. The fewest workers reaching KNEE_FRACTION of the best."""
    if not rows:
        return None, None
    best = max(rows.values())
    for w in sorted(rows):
        if rows[w] >= KNEE_FRACTION * best:
            return w, best
    return None, best


def fmt_num(x, spec="%.0f", none="-"):
    return spec % x if x is not None else none


def fmt_time(s):
    if s is None:
        return "-"
    if s < 120:
        return "%.1f s" % s
    if s < 7200:
        return "%.1f min" % (s / 60)
    return "%.1f h" % (s / 3600)


def plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


class Bench:
    def __init__(self, a):
        self.a = a
        self.runs = []          # every run dict (with system/workers/pass/rep)
        self.pinned = {}        # the pinned vs pageable section
        self.notes = []

    def key_runs(self, system, workers, npass, mode=None):
        return [r for r in self.runs if r["system"] == system and r["workers"] == workers
                and r["pass"] == npass and (mode is None or r.get("memory") == mode)]


def build_summary(b, ctx):
    a = b.a
    systems = ["ringfeed"] + (["dataloader"] if ctx["torch_ok"] else [])
    sizing_mode = ctx["sizing_memory"]
    rows = {}
    for s in systems:
        for w in a.worker_list:
            if s == "dataloader" and w == "auto":
                continue
            e = {"system": s, "workers": w}
            e["max"] = aggregate(b.key_runs(s, w, "max", sizing_mode))
            if a.step_ms > 0:
                e["step"] = aggregate(b.key_runs(s, w, "step", sizing_mode))
            rows["%s/%s" % (s, w)] = e
    steps = ctx["batches_per_epoch"]
    bsz = a.batch_size
    step_s = a.step_ms / 1000.0
    per_system = {}
    for s in systems:
        fixed = {w: rows["%s/%s" % (s, w)]["max"]["images_per_sec"]
                 for w in a.worker_list if w != "auto" and rows.get("%s/%s" % (s, w))
                 and rows["%s/%s" % (s, w)]["max"] and rows["%s/%s" % (s, w)]["max"]["images_per_sec"]}
        k, best = knee(fixed)
        info = {"knee_workers": k, "best_images_per_sec": best,
                "best_workers": max(fixed, key=fixed.get) if fixed else None}
        for w in a.worker_list:
            e = rows.get("%s/%s" % (s, w))
            if not e or not e["max"] or not e["max"]["images_per_sec"]:
                continue
            ips = e["max"]["images_per_sec"]
            data_per_batch = bsz / ips
            e["data_seconds_per_batch"] = round(data_per_batch, 5)
            e["epoch_seconds_estimate"] = round(steps * max(step_s, data_per_batch), 2)
        if a.step_ms > 0:
            fed = [w for w in a.worker_list if w != "auto"
                   and rows.get("%s/%s" % (s, w)) and rows["%s/%s" % (s, w)].get("step")
                   and rows["%s/%s" % (s, w)]["step"]["stall_pct"] is not None
                   and rows["%s/%s" % (s, w)]["step"]["stall_pct"] < STALL_OK_PCT]
            info["fewest_workers_stall_under_5pct"] = min(fed) if fed else None
            info["images_per_sec_needed"] = round(bsz / step_s, 1)
            info["epoch_seconds_if_never_stalled"] = round(steps * step_s, 2)
        per_system[s] = info
    return rows, per_system


def recommendation(b, ctx, rows, per_system):
    a = b.a
    rf = per_system["ringfeed"]
    fixed = [w for w in a.worker_list if w != "auto"]
    lines = []

    def row(w, s="ringfeed"):
        return rows.get("%s/%s" % (s, w)) or {}

    cores = ctx["machine"]["usable_cores"]
    steps = ctx["batches_per_epoch"]
    if a.step_ms > 0 and fixed:
        k = rf.get("fewest_workers_stall_under_5pct")
        need = rf["images_per_sec_needed"]
        if k is not None:
            st = row(k)["step"]["stall_pct"]
            est = row(k).get("epoch_seconds_estimate")
            if k == 1:
                main = ("data loading is not your bottleneck at step %g ms: 1 worker keeps up "
                        "(stall %.1f%%; the step needs %.0f images/s, 1 worker delivers %.0f). "
                        "Use num_workers=1 and leave the other cores to the rest of the job."
                        % (a.step_ms, st, need, row(1)["max"]["images_per_sec"]))
            else:
                prev = [w for w in fixed if w < k]
                why = ""
                if prev:
                    p = prev[-1]
                    why = ", %s stall %.0f%%" % (plural(p, "worker"), row(p)["step"]["stall_pct"])
                main = ("use num_workers=%d: the fewest workers that keep the training loop fed "
                        "at step %g ms (stall %.1f%%%s); an epoch of %d steps then takes about %s."
                        % (k, a.step_ms, st, why, steps, fmt_time(est)))
                if k == min(fixed) and k > 1:
                    main += " (Fewer workers were not measured.)"
        else:
            kn = rf["knee_workers"] or max(fixed)
            r = row(kn)
            main = ("data loading IS your bottleneck at step %g ms: the step needs %.0f images/s "
                    "and the best measured, %s, delivers %.0f (stall %.0f%%). Use "
                    "num_workers=%d; an epoch of %d steps takes about %s instead of %s. %s"
                    % (a.step_ms, need, plural(rf["best_workers"], "worker"),
                       rf["best_images_per_sec"],
                       (row(rf["best_workers"]).get("step") or {}).get("stall_pct") or 0,
                       kn, steps, fmt_time(r.get("epoch_seconds_estimate")),
                       fmt_time(rf["epoch_seconds_if_never_stalled"]),
                       "More cores or smaller stored images would help."))
        lines.append(main)
    elif fixed:
        kn = rf["knee_workers"]
        best_w = rf["best_workers"]
        r = row(kn)["max"]
        if len(fixed) == 1:
            main = ("%s gives %.0f images/s; only this count was measured: pass --workers all "
                    "to find the knee." % (plural(kn, "worker"), r["images_per_sec"]))
        elif kn == max(fixed):
            if kn >= cores:
                main = ("use num_workers=%d (all usable cores): throughput still grows with every "
                        "worker (%.0f images/s at %d); this machine's cores limit data loading."
                        % (kn, r["images_per_sec"], kn))
            else:
                main = ("use num_workers=%d, the most measured: throughput still grows (%.0f "
                        "images/s); measure more workers (--workers all) to find the knee."
                        % (kn, r["images_per_sec"]))
        else:
            main = ("use num_workers=%d: it reaches %.0f%% of the best throughput (%.0f of %.0f "
                    "images/s at %s): more workers buy little."
                    % (kn, 100 * r["images_per_sec"] / rf["best_images_per_sec"],
                       r["images_per_sec"], rf["best_images_per_sec"], plural(best_w, "worker")))
        main += (" Pass --step-ms with your model's step time to size for it.")
        lines.append(main)
    else:
        lines.append("only auto was measured: see what the tuner chose above.")

    if "auto" in a.worker_list:
        au = row("auto")
        m = au.get("max") or {}
        s = au.get("step") or {}
        def nw(e):
            n = e.get("num_workers")
            return plural(n, "worker") if isinstance(n, int) else "? workers"
        t = "num_workers=0 (auto): the tuner ended with %s with nothing to wait for (%.0f " \
            "images/s)" % (nw(m), m.get("images_per_sec") or 0)
        if s:
            t += " and %s at step %g ms (stall %.1f%%)" % (nw(s), a.step_ms,
                                                          s.get("stall_pct") or 0)
        lines.append(t + ".")

    if "dataloader" in per_system and fixed:
        dl = per_system["dataloader"]
        cmp_w = (rf.get("fewest_workers_stall_under_5pct") if a.step_ms > 0 else None) \
            or rf["knee_workers"] or max(fixed)
        r1, r2 = row(cmp_w)["max"], row(cmp_w, "dataloader")["max"]
        if r1 and r2 and r2["images_per_sec"]:
            t = ("vs torchvision's DataLoader at %s: %.2fx the images/s (%.0f vs %.0f), first "
                 "batch in %.2f s vs %.2f s, peak memory %.0f MB vs %.0f MB"
                 % (plural(cmp_w, "worker"), r1["images_per_sec"] / r2["images_per_sec"],
                    r1["images_per_sec"], r2["images_per_sec"], r1["first_batch_seconds"],
                    r2["first_batch_seconds"], r1["rss_peak_mb"], r2["rss_peak_mb"]))
            if a.step_ms > 0:
                k2 = dl.get("fewest_workers_stall_under_5pct")
                t += "; the DataLoader needs %s" % (
                    "%s to keep up" % plural(k2, "worker") if k2 else
                    "more than %s to keep up (none measured did)" % plural(max(fixed), "worker"))
            lines.append(t + ".")
    return lines
