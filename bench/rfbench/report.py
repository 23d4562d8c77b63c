"""What ringfeed-bench writes: the progress line (stderr), JSON lines, the
human report (stdout) and the PNG chart.

JSON lines are written as they come, each with the run's id, the machine, the
parameters and the git revision (JsonOut's `common`), so that a run cut short
keeps what was measured.
"""

import datetime
import json
import os
import shutil
import sys
import time

from .analysis import KNEE_FRACTION, STALL_OK_PCT, fmt_num, fmt_time, plural


class Progress:
    """One line on stderr: rewritten in place (\\r) on a terminal, plain lines otherwise."""

    def __init__(self, total):
        self.tty = sys.stderr.isatty()
        self.total = total
        self.done = 0
        self.width = 0
        self.last = 0.0

    def _put(self, msg):
        try:
            cols = shutil.get_terminal_size((100, 20)).columns - 1
        except Exception:
            cols = 99
        msg = msg[:cols]
        sys.stderr.write("\r" + msg + " " * max(0, self.width - len(msg)))
        sys.stderr.flush()
        self.width = len(msg)

    def update(self, msg):
        """A live update (terminals only, at most 10 per second)."""
        if not self.tty:
            return
        now = time.monotonic()
        if now - self.last >= 0.1:
            self.last = now
            self._put("[%d/%d] %s" % (self.done + 1, self.total, msg))

    def run_done(self, msg):
        self.done += 1
        line = "[%d/%d] %s" % (self.done, self.total, msg)
        if self.tty:
            self._put(line)
        else:
            print(line, file=sys.stderr, flush=True)

    def note(self, msg):
        if self.tty:
            self.clear()
        print(msg, file=sys.stderr, flush=True)

    def clear(self):
        if self.tty and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()
            self.width = 0


class JsonOut:
    """JSON lines, written as they come (a run cut short keeps what was measured)."""

    def __init__(self, path, common):
        self.path = path
        self.common = common
        self.f = None
        if path:
            d = os.path.dirname(os.path.abspath(path))
            os.makedirs(d, exist_ok=True)
            self.f = open(path, "w")

    def write(self, kind, rec):
        if not self.f:
            return
        doc = {"bench": "ringfeed-bench", "type": kind}
        doc.update(self.common)
        doc["time"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        doc.update(rec)
        self.f.write(json.dumps(doc, sort_keys=False, default=str) + "\n")
        self.f.flush()

    def close(self):
        if self.f:
            self.f.close()
            self.f = None


def _table(P, table):
    """Rows of cells, the first two left-aligned, a rule under the header."""
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for i, r in enumerate(table):
        cells = [r[0].rjust(widths[0]), r[1].ljust(widths[1])] + \
            [c.rjust(widths[j + 2]) for j, c in enumerate(r[2:])]
        P("  " + "  ".join(cells))
        if i == 0:
            P("  " + "-" * (sum(widths) + 2 * (len(widths) - 1)))


def latency_table(P, a, ctx, rows):
    """The consumer's wait per batch, per worker count: its tail (a loader is
    picked by it, not by its mean), the batches that found ringfeed's ring
    empty, and the time to the first batch."""
    step = a.step_ms > 0
    npass = "step" if step else "max"
    table = [["workers", "system", "wait p50", "p90", "p99", "max", "ring empty", "1st batch"]]
    systems = ["ringfeed"] + (["dataloader"] if ctx["torch_ok"] else [])
    for w in a.worker_list:
        for s in systems:
            e = (rows.get("%s/%s" % (s, w)) or {}).get(npass)
            if not e:
                continue
            table.append([str(w) if s == "ringfeed" or w == "auto" else "",
                          "ringfeed" if s == "ringfeed" else "DataLoader"] +
                         [fmt_num(e.get(k), "%.1f ms") for k in ("wait_p50_ms", "wait_p90_ms",
                                                                 "wait_p99_ms", "wait_max_ms")] +
                         [fmt_num(e.get("ring_empty"), "%.0f") if s == "ringfeed" else "-",
                          fmt_num(e.get("first_batch_seconds"), "%.2f s")])
    if len(table) == 1:
        return
    P("consumer wait per batch%s (medians over runs; the first batch apart):"
      % (" with the %g ms step" % a.step_ms if step else ""))
    _table(P, table)
    P("  (ring empty: batches not ready when asked for, from ringfeed's stats()[\"latency\"])")
    P("")


def print_report(b, ctx, rows, per_system, rec_lines):
    a = b.a
    out = []
    P = out.append
    m = ctx["machine"]
    P("")
    P("ringfeed-bench: %s" % ctx["data_desc"])
    P("  %s, %s%s, %s, device %s%s" % (
        "records of %d bytes" % a.record_size if a.record_size else
        "%s %dpx%s" % (a.transform, a.image_size,
                       "" if a.verify == "once" else ", verify " + a.verify),
        "batch %d" % a.batch_size, "" if a.record_size else ", " + a.layout,
        "%d batches per epoch" % ctx["batches_per_epoch"], ctx["device"],
        ", %s host memory" % ctx["sizing_memory"] if ctx["device"] == "cuda" else ""))
    P("  machine: %s, %d cores (%d usable), kernel %s%s" % (
        m["cpu"], m["cores"], m["usable_cores"], m["kernel"],
        ", GPU %s" % m["gpu"] if m.get("gpu") else ""))
    P("  ringfeed %s (%s, io %s); %s; git %s" % (
        ctx["ringfeed_version"], ctx["library"], ctx["io_backend"], ctx["torch_desc"], ctx["git"]))
    P("  each figure: median of %s of %s%s" % (
        plural(a.epochs, "run"), "one epoch" if not a.batches or
        a.batches >= ctx["batches_per_epoch"] else "the first %d batches" % a.batches,
        "; step %g ms = %s" % (a.step_ms, ctx["step_kind"]) if a.step_ms > 0 else
        "; no training step (--step-ms 0): the loop only waits for data"))
    P("  %s" % ctx["warm_note"])
    P("")
    step = a.step_ms > 0
    hdr = ["workers", "system", "img/s", "vs DL", "CPU cores", "1st batch", "peak RSS MB"]
    hdr += ["stall @%gms" % a.step_ms, "epoch @%gms" % a.step_ms] if step else \
        ["stall", "epoch"]
    table = [hdr]
    systems = ["ringfeed"] + (["dataloader"] if ctx["torch_ok"] else [])
    for w in a.worker_list:
        for s in systems:
            e = rows.get("%s/%s" % (s, w))
            if not e or not e["max"]:
                continue
            mx = e["max"]
            st = e.get("step") or {}
            vs = "-"
            if s == "ringfeed" and w != "auto" and rows.get("dataloader/%s" % w):
                d = rows["dataloader/%s" % w]["max"]
                if d and d["images_per_sec"]:
                    vs = "%.2fx" % (mx["images_per_sec"] / d["images_per_sec"])
            wl = str(w) if s == "ringfeed" or w == "auto" else ""
            if w == "auto":
                wl = "auto"
                tw = [x for x in (mx.get("num_workers"), st.get("num_workers")) if x is not None]
                if tw:
                    wl += "->" + "/".join(str(x) for x in tw)
            table.append([
                wl, "ringfeed" if s == "ringfeed" else "DataLoader",
                fmt_num(mx["images_per_sec"]), vs, fmt_num(mx["cpu_cores"], "%.2f"),
                fmt_num(mx["first_batch_seconds"], "%.2f s"),
                "%s (+%s)" % (fmt_num(mx["rss_peak_mb"]), fmt_num(mx["rss_added_mb_max"])),
                fmt_num(st.get("stall_pct") if step else mx["stall_pct"], "%.1f %%"),
                fmt_time(e.get("epoch_seconds_estimate"))])
    _table(P, table)
    if "auto" in a.worker_list:
        P("  (auto->N: the workers the tuner had at the end of the run without%s)"
          % (" / with the step" if step else " a step"))
    if not step:
        P("  (stall without --step-ms: the loop does nothing but wait, so this is near 100 %)")
    P("")
    latency_table(P, a, ctx, rows)
    rf = per_system["ringfeed"]
    kn = ["%s %s (best %.0f img/s at %d)" % ("ringfeed" if s == "ringfeed" else "DataLoader",
                                            plural(v["knee_workers"], "worker"),
                                            v["best_images_per_sec"], v["best_workers"])
          for s, v in per_system.items() if v.get("knee_workers")]
    if kn:
        P("knee (fewest workers reaching %d%% of the best images/s): %s"
          % (round(100 * KNEE_FRACTION), "; ".join(kn)))
    if step:
        parts = []
        for s, v in per_system.items():
            k = v.get("fewest_workers_stall_under_5pct")
            parts.append("%s %s" % ("ringfeed" if s == "ringfeed" else "DataLoader",
                                    plural(k, "worker") if k else "none measured"))
        P("step %g ms needs %.0f images/s; fewest workers with stall < %g%%: %s"
          % (a.step_ms, rf["images_per_sec_needed"], STALL_OK_PCT, "; ".join(parts)))
        P("epoch estimate = %d steps x max(step %g ms, data time per batch); %s if data never "
          "stalled" % (ctx["batches_per_epoch"], a.step_ms,
                       fmt_time(rf["epoch_seconds_if_never_stalled"])))
    if "auto" in a.worker_list:
        au = rows.get("ringfeed/auto") or {}
        for npass in ("max", "step"):
            e = au.get(npass)
            if not e:
                continue
            dec = e.get("tuner") or []
            shown = "; ".join("batch %s: %s (%s)" % (d.get("batch"), d.get("workers"),
                                                   d.get("reason")) for d in dec[-3:])
            P("tuner (num_workers=0, %s): stats()[\"num_workers\"] = %s; %s%s" % (
                "no step" if npass == "max" else "step %g ms" % a.step_ms,
                e.get("num_workers"), plural(len(dec), "decision"),
                (", last: " + shown) if shown else ""))
    P("")
    pn = b.pinned
    if pn.get("skipped"):
        P(pn["skipped"])
    elif pn:
        P("pinned vs pageable (%s, batch of %.1f MB):" % (ctx["machine"].get("gpu"),
                                                        pn["batch_bytes"] / 1e6))
        h = pn.get("h2d_gbps", {})
        if h:
            t = "  host-to-device copy, torch tensors: " + ", ".join(
                "%s %.1f GB/s" % (k, v) for k, v in h.items())
            if "pinned" in h and "pageable" in h and h["pageable"]:
                t += " (pinned %.2fx)" % (h["pinned"] / h["pageable"])
            P(t)
        e2e = pn.get("e2e", {})
        if e2e:
            t = "  ringfeed device=cuda at %s, end to end: " % plural(pn["workers"], "worker") + \
                ", ".join("%s %.0f img/s" % (k, v["images_per_sec"]) for k, v in e2e.items())
            if pn.get("gain_pct") is not None:
                t += ": pinned gains %+.1f%%" % pn["gain_pct"]
            P(t)
    if b.notes:
        P("")
        for n in b.notes:
            P("note: " + n)
    P("")
    P("Recommendation: " + rec_lines[0])
    for ln in rec_lines[1:]:
        P("  " + ln)
    if ctx.get("outputs"):
        P("")
        P("written: " + ", ".join(ctx["outputs"]))
    print("\n".join(out), flush=True)


def plot(path, b, ctx, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    a = b.a
    fixed = [w for w in a.worker_list if w != "auto"]
    step = a.step_ms > 0
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    styles = {"ringfeed": ("tab:blue", "o", "ringfeed"),
              "dataloader": ("tab:orange", "s", "torchvision DataLoader")}
    systems = ["ringfeed"] + (["dataloader"] if ctx["torch_ok"] else [])
    for s in systems:
        color, marker, name = styles[s]
        xs, ips, stall = [], [], []
        for w in fixed:
            e = rows.get("%s/%s" % (s, w))
            if not e or not e["max"]:
                continue
            xs.append(w)
            ips.append(e["max"]["images_per_sec"])
            stall.append((e.get("step") or {}).get("stall_pct") if step else e["max"]["stall_pct"])
        if xs:
            ax1.plot(xs, ips, marker=marker, color=color, label=name, linewidth=2)
            ax2.plot(xs, stall, marker=marker, color=color, label=name, linewidth=2)
    au = rows.get("ringfeed/auto")
    if au and au["max"]:
        nw = au["max"].get("num_workers") or 1
        ax1.scatter([nw], [au["max"]["images_per_sec"]], marker="*", s=220, color="tab:green",
                    zorder=5, label="ringfeed auto (tuner: %s)" % plural(nw, "worker"))
        st = (au.get("step") or {}) if step else au["max"]
        if st and st.get("stall_pct") is not None:
            ax2.scatter([st.get("num_workers") or nw], [st["stall_pct"]], marker="*", s=220,
                        color="tab:green", zorder=5,
                        label="ringfeed auto (tuner: %s)" % plural(st.get("num_workers") or nw,
                                                                   "worker"))
    if step:
        need = a.batch_size / (a.step_ms / 1000.0)
        ax1.axhline(need, color="gray", linestyle="--", linewidth=1,
                    label="needed by a %g ms step (%.0f img/s)" % (a.step_ms, need))
        ax2.axhline(STALL_OK_PCT, color="gray", linestyle="--", linewidth=1,
                    label="%g %% stall" % STALL_OK_PCT)
    ax1.set_xlabel("decode workers (num_workers)")
    ax1.set_ylabel("throughput (images / s)")
    ax1.set_title("throughput (higher is better)")
    ax1.set_ylim(bottom=0)
    ax2.set_xlabel("decode workers (num_workers)")
    ax2.set_ylabel("consumer stall (% of wall time)")
    ax2.set_title(("stall with a %g ms training step" % a.step_ms) if step else
                  "stall with no training step (loop only waits)")
    ax2.set_ylim(0, 105)
    for ax in (ax1, ax2):
        if fixed:
            ax.set_xticks(fixed)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    m = ctx["machine"]
    what = ("records of %d B" % a.record_size) if a.record_size else \
        "%s %dpx" % (a.transform, a.image_size)
    fig.suptitle("%s (%d %s): %s, batch %d, device %s\n%s, %d usable cores%s" % (
        ctx["data_name"], ctx["samples"], "records" if a.record_size else "images", what,
        a.batch_size, ctx["device"], m["cpu"], m["usable_cores"],
        ", " + m["gpu"] if m.get("gpu") else ""), fontsize=11)
    fig.tight_layout()
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
