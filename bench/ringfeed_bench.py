#!/usr/bin/python3
"""ringfeed-bench: how many workers does my training job need, what does pinned
memory gain, and how does ringfeed compare with torch's DataLoader, on my data.

    ringfeed-bench [--data PATH] [--batch-size 64] [--image-size 224]
                   [--transform center|random_resized_crop] [--workers 1,2,4|auto|all]
                   [--device cpu|cuda] [--pinned|--pageable|--both] [--step-ms MS]
                   [--epochs 3] [--batches 100] [--verify once|always|none]
                   [--compare-torch] [--json FILE] [--plot FILE.png] [--quick]

Without --data, an ImageNet-like sample folder (2000 photo-like JPEGs of about
500x375, 10 classes) is generated with rf-gen-folder into BUILD/bench/sample,
or reused when it is there. --data takes anything ringfeed.Loader reads: an
image folder, a list file, tar shards (a path, glob or brace pattern), or
record files (with --record-size).

What is measured. --epochs rounds; in each round every worker count runs
once on each system, ringfeed and DataLoader in alternating order (so that
machine noise hits both). Each run builds a fresh loader and reads one epoch,
or its first --batches batches: a fresh loader decodes each file to its end
(--verify once), as the first epoch of a training run does; --verify none
measures what its later epochs decode. Figures are medians over the rounds (peak
memory: the largest). Before the first run the dataset is read once into the
page cache when it takes less than a quarter of the available memory.
  images/s      from constructing the loader to the last batch in hand
  first batch   seconds from constructing the loader (and its iterator) to the first batch
  stall %       time the training loop waited for data / wall time after the first batch
  CPU cores     process CPU time (all threads, all DataLoader worker processes) / wall time
  peak RSS      VmRSS of the process plus all its child processes, summed, sampled every
                50 ms; "+N" is the part above the process's RSS just before the loader
With --step-ms, each configuration also runs with a simulated training step
per batch (a sleep, or on --device cuda a calibrated matmul loop followed by a
stream synchronize): the stall % of those runs says whether the step is fed,
and the epoch estimate is steps x max(step, data time per batch).

The DataLoader side is torchvision's DataLoader(ImageFolder(PATH, transform),
batch_size, shuffle=True, num_workers=N) with Resize(round(S/0.875)) +
CenterCrop(S) (or RandomResizedCrop(S) + RandomHorizontalFlip()) +
PILToTensor(); on CUDA pin_memory=True and .cuda(non_blocking=True). ringfeed
runs with layout NCHW (the DataLoader's layout) unless --layout says otherwise.

Pinned vs pageable needs CUDA in torch and a ringfeed built with CUDA that sees
the device: batch-sized host-to-device copies from pinned and pageable torch
tensors (GB/s), then ringfeed device="cuda" with pin_memory True and False.

Output: a progress line on stderr, the report on stdout, JSON lines (--json:
one object per measurement and a summary, each with the machine, the
parameters and the git revision) and a PNG chart (--plot).
"""

import argparse
import datetime
import gc
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD_DIR = os.environ.get("RINGFEED_BENCH_BUILD_DIR") or os.path.join(REPO, "build")

STALL_OK_PCT = 5.0        # a step is "fed" when the loop waits less than this
KNEE_FRACTION = 0.95      # the knee: fewest workers reaching this share of the best
SAMPLE_PERIOD_S = 0.05    # memory / CPU sampling period

# The built-in sample dataset (rf-gen-folder options).
SAMPLE_SPEC = {"classes": 10, "per_class": 200, "width": 500, "height": 375, "quality": 90,
               "seed": 0}
QUICK_SAMPLE_SPEC = {"classes": 4, "per_class": 16, "width": 320, "height": 240, "quality": 90,
                     "seed": 0}


class BenchError(Exception):
    pass


# --------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="ringfeed-bench", description=__doc__.split("\n\n")[0],
        epilog="See the module docstring (bench/ringfeed_bench.py) and README.md, "
               "'Reading the benchmark'.")
    p.add_argument("--data", help="image folder, list file, tar shards or record file "
                   "(default: the built-in sample, generated when missing)")
    p.add_argument("--batch-size", type=int, help="default 64 (16 with --quick)")
    p.add_argument("--image-size", type=int, help="output side in pixels (default 224; "
                   "112 with --quick)")
    p.add_argument("--transform", default="center", choices=["center", "random_resized_crop"])
    p.add_argument("--layout", default="NCHW", choices=["NCHW", "NHWC"],
                   help="ringfeed's layout (default NCHW, as PILToTensor)")
    p.add_argument("--workers", default="all",
                   help="comma-separated worker counts, 'auto' (ringfeed's tuner, "
                        "num_workers=0) and 'all' (1..usable cores); default all")
    p.add_argument("--device", choices=["cpu", "cuda"],
                   help="where batches go (default: cuda when torch and ringfeed both see "
                        "a GPU, else cpu)")
    mem = p.add_mutually_exclusive_group()
    mem.add_argument("--pinned", dest="memory", action="store_const", const="pinned",
                     help="CUDA: pinned host memory only")
    mem.add_argument("--pageable", dest="memory", action="store_const", const="pageable",
                     help="CUDA: pageable host memory only (sizing runs too)")
    mem.add_argument("--both", dest="memory", action="store_const", const="both",
                     help="CUDA: size with pinned memory and compare both (default)")
    p.add_argument("--step-ms", type=float, default=0.0,
                   help="simulated training step per batch in ms (sleep on cpu, a timed "
                        "matmul loop on cuda); 0 = none (default)")
    p.add_argument("--epochs", type=int, help="measured runs per configuration (default 3; "
                   "1 with --quick)")
    p.add_argument("--batches", type=int, help="at most this many batches per run "
                   "(default 100; 8 with --quick); 0 = whole epochs")
    p.add_argument("--verify", default="once", choices=["once", "always", "none"],
                   help="ringfeed's check of the rows below each crop (default once: each "
                   "file to its end on its first decode, which a fresh loader's one epoch "
                   "always is; none: what the later epochs of a training run decode)")
    p.add_argument("--compare-torch", action="store_true",
                   help="also run torchvision's DataLoader on the same data")
    p.add_argument("--json", metavar="FILE", help="write JSON lines here (replaced)")
    p.add_argument("--plot", metavar="FILE.png", help="write a PNG chart here")
    p.add_argument("--quick", action="store_true", help="small and short, for CI")
    p.add_argument("--record-size", type=int, default=0,
                   help="--data is a fixed-size record file: bytes per record")
    p.add_argument("--header-size", type=int, default=0, help="record file header bytes")
    p.add_argument("--dtype", default="uint8", help="record element type")
    p.add_argument("--lib", help="libringfeed.so to use (else $RINGFEED_LIBRARY, then the "
                   "binding's lookup)")
    p.add_argument("--gen", help="rf-gen-folder to make the sample (else $RINGFEED_GEN, "
                   "BUILD/rf-gen-folder, PATH)")
    p.add_argument("--sample-dir", help="where the built-in sample lives "
                   "(default BUILD/bench/sample)")
    p.add_argument("--no-warm", action="store_true",
                   help="do not read the dataset once into the page cache first")
    a = p.parse_args(argv)

    q = a.quick
    a.batch_size = a.batch_size or (16 if q else 64)
    a.image_size = a.image_size or (112 if q else 224)
    a.epochs = a.epochs if a.epochs is not None else (1 if q else 3)
    a.batches = a.batches if a.batches is not None else (8 if q else 100)
    a.memory = a.memory or "both"
    if a.batch_size < 1 or a.image_size < 8 or a.epochs < 1 or a.batches < 0:
        p.error("need --batch-size >= 1, --image-size >= 8, --epochs >= 1, --batches >= 0")
    if a.step_ms < 0 or a.step_ms > 60000:
        p.error("--step-ms must be within 0..60000")
    if a.record_size < 0 or a.header_size < 0:
        p.error("--record-size and --header-size must be >= 0")

    cores = usable_cores()[0]
    workers = []
    for w in a.workers.split(","):
        w = w.strip().lower()
        if not w:
            continue
        if w == "all":
            items = list(range(1, cores + 1))
        elif w == "auto":
            items = ["auto"]
        else:
            try:
                items = [int(w)]
            except ValueError:
                p.error("--workers: %r is not a count, 'auto' or 'all'" % w)
            if items[0] < 1 or items[0] > 1024:
                p.error("--workers: counts must be within 1..1024")
        for i in items:
            if i not in workers:
                workers.append(i)
    if not workers:
        p.error("--workers: nothing to measure")
    fixed = sorted(w for w in workers if w != "auto")
    a.worker_list = fixed + (["auto"] if "auto" in workers else [])
    return a


# --------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------

def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def cgroup_cpu_limit():
    """CPU quota of this process's cgroup in cores (float), or None."""
    # cgroup v2: cpu.max = "max 100000" or "QUOTA PERIOD", at our cgroup or above.
    rel = None
    for line in (_read("/proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] == "0":
            rel = parts[2]
    best = None
    if rel is not None:
        d = "/sys/fs/cgroup" + rel.rstrip("/")
        while True:
            s = _read(os.path.join(d, "cpu.max"))
            if s:
                q = s.split()
                if len(q) == 2 and q[0] != "max":
                    lim = int(q[0]) / int(q[1])
                    best = lim if best is None else min(best, lim)
            if d in ("/sys/fs/cgroup", "/sys/fs/cgroup/", "") or d == "/":
                break
            d = os.path.dirname(d)
    # cgroup v1
    q = _read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
    per = _read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
    if q and per and int(q) > 0 and int(per) > 0:
        lim = int(q) / int(per)
        best = lim if best is None else min(best, lim)
    return best


def usable_cores():
    """(usable cores, how): the smaller of the affinity mask and the cgroup quota."""
    try:
        aff = len(os.sched_getaffinity(0))
    except AttributeError:
        aff = os.cpu_count() or 1
    lim = cgroup_cpu_limit()
    if lim is not None and lim < aff:
        return max(1, int(lim)), "cgroup quota %.2f cores (affinity %d)" % (lim, aff)
    return aff, "affinity mask"


def cpu_model():
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


def git_revision():
    try:
        r = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"],
                           capture_output=True, text=True, timeout=10)
        if r.returncode == 0 and r.stdout.strip():
            rev = r.stdout.strip()
            d = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
            return rev + ("-dirty" if d.returncode == 0 and d.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def gpu_name(torch):
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return torch.cuda.get_device_name(0)
        except Exception:
            pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            r = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=10)
            if r.returncode == 0 and r.stdout.strip():
                return r.stdout.strip().splitlines()[0] + " (nvidia-smi)"
        except (OSError, subprocess.SubprocessError):
            pass
    return None


def machine_info(torch):
    cores, how = usable_cores()
    info = {"cpu": cpu_model(), "cores": os.cpu_count(), "usable_cores": cores,
            "usable_cores_from": how, "kernel": platform.release(),
            "os": platform.platform(), "python": platform.python_version(),
            "hostname": platform.node(), "gpu": gpu_name(torch)}
    m = _read("/proc/meminfo")
    if m:
        for line in m.splitlines():
            if line.startswith("MemTotal:"):
                info["mem_gib"] = round(int(line.split()[1]) / 2**20, 1)
    return info


def mem_available_bytes():
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


# --------------------------------------------------------------------------
# Process memory and CPU, from /proc
# --------------------------------------------------------------------------

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _children(pid):
    kids = []
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return kids
    found = False
    for tid in tids:
        s = _read("/proc/%d/task/%s/children" % (pid, tid))
        if s is None:
            continue
        found = True
        kids.extend(int(x) for x in s.split())
    if not found:  # kernel without CONFIG_PROC_CHILDREN: scan for our children
        for d in os.listdir("/proc"):
            if d.isdigit():
                st = _read("/proc/%s/stat" % d)
                if st:
                    f = st.rsplit(")", 1)[-1].split()
                    if len(f) > 2 and int(f[1]) == pid:
                        kids.append(int(d))
    return kids


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        for c in _children(todo.pop()):
            if c not in out and c != pid:
                out.append(c)
                todo.append(c)
    return out


def vm_rss_bytes(pid):
    s = _read("/proc/%d/status" % pid)
    if s:
        for line in s.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def proc_cpu_seconds(pid):
    """utime + stime of a process (all its threads), or None when gone."""
    st = _read("/proc/%d/stat" % pid)
    if not st:
        return None
    f = st.rsplit(")", 1)[-1].split()
    try:
        return (int(f[11]) + int(f[12])) / _CLK_TCK
    except (IndexError, ValueError):
        return None


class ProcSampler(threading.Thread):
    """Samples the RSS of this process plus all its descendants (summed) and
    the CPU time of the descendants every SAMPLE_PERIOD_S; keeps the peak sum
    and each child's last CPU time."""

    def __init__(self):
        super().__init__(daemon=True, name="ringfeed-bench-sampler")
        self.pid = os.getpid()
        self.stop_event = threading.Event()
        self.peak = 0
        self.child_cpu = {}
        self.max_children = 0
        self.baseline = vm_rss_bytes(self.pid) + sum(vm_rss_bytes(c) for c in descendants(self.pid))

    def sample(self):
        kids = descendants(self.pid)
        total = vm_rss_bytes(self.pid)
        for c in kids:
            total += vm_rss_bytes(c)
            cpu = proc_cpu_seconds(c)
            if cpu is not None:
                self.child_cpu[c] = max(cpu, self.child_cpu.get(c, 0.0))
        self.max_children = max(self.max_children, len(kids))
        self.peak = max(self.peak, total)

    def run(self):
        self.sample()
        while not self.stop_event.wait(SAMPLE_PERIOD_S):
            self.sample()

    def finish(self):
        self.stop_event.set()
        self.join()
        self.sample()
        return self.peak


def machine_busy_seconds():
    """CPU seconds (all cores) the whole machine spent busy since boot, from
    /proc/stat: user + nice + system + irq + softirq + steal (not idle, iowait)."""
    for line in (_read("/proc/stat") or "").splitlines():
        if line.startswith("cpu "):
            f = [int(x) for x in line.split()[1:]]
            f += [0] * (8 - len(f))
            return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) / _CLK_TCK
    return None


def self_cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def reaped_children_cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# --------------------------------------------------------------------------
# Progress and output
# --------------------------------------------------------------------------

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


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------

def find_gen(a):
    for c in (a.gen, os.environ.get("RINGFEED_GEN"), os.path.join(BUILD_DIR, "rf-gen-folder"),
              shutil.which("rf-gen-folder")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def count_jpegs(root):
    n = 0
    for _, _, files in os.walk(root):
        n += sum(1 for f in files if f.lower().endswith((".jpg", ".jpeg")))
    return n


def prepare_sample(a, progress):
    spec = dict(QUICK_SAMPLE_SPEC if a.quick else SAMPLE_SPEC)
    root = a.sample_dir or os.path.join(BUILD_DIR, "bench", "sample-quick" if a.quick else "sample")
    root = os.path.abspath(root)
    marker = os.path.join(root, ".ringfeed-bench-sample.json")
    want = spec["classes"] * spec["per_class"]
    try:
        with open(marker) as f:
            old = json.load(f)
    except (OSError, ValueError):
        old = None
    if old == spec and count_jpegs(root) == want:
        progress.note("data: reusing the sample in %s (%d images)" % (root, want))
        return root, dict(spec, generated=False, reused=True)
    gen = find_gen(a)
    if not gen:
        raise BenchError("no --data, and rf-gen-folder to make the sample was not found "
                         "(build it: make build; or pass --gen PATH or --data PATH)")
    if os.path.exists(root):
        if old is None and os.listdir(root):
            raise BenchError("%s exists and is not a ringfeed-bench sample: not touching it "
                             "(pass --sample-dir or --data)" % root)
        shutil.rmtree(root)
    progress.note("data: generating %d images into %s with %s ..." % (want, root, gen))
    t = time.monotonic()
    cmd = [gen, root, "--classes", str(spec["classes"]), "--per-class", str(spec["per_class"]),
           "--width", str(spec["width"]), "--height", str(spec["height"]),
           "--quality", str(spec["quality"]), "--seed", str(spec["seed"])]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError("%s failed (%d):\n%s%s" % (" ".join(cmd), r.returncode, r.stdout,
                                                    r.stderr))
    with open(marker, "w") as f:
        json.dump(spec, f)
    progress.note("data: %s (%.1f s)" % (r.stdout.strip(), time.monotonic() - t))
    return root, dict(spec, generated=True, reused=False)


def warm_page_cache(paths, progress):
    """Reads the files once, so that every system meets the same (cached) storage,
    when they fit comfortably in memory. Returns a note for the report."""
    sizes = {}
    for p in paths:
        try:
            sizes[p] = os.stat(p).st_size
        except OSError:
            pass
    total = sum(sizes.values())
    avail = mem_available_bytes()
    if avail and total > avail // 4:
        return "not warmed: %.0f MB of data vs %.0f MB available memory (figures include " \
               "storage reads)" % (total / 1e6, avail / 1e6)
    t = time.monotonic()
    buf = bytearray(1 << 20)
    for p in sizes:
        try:
            with open(p, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass
        except OSError:
            pass
    return "page cache warmed: %.0f MB read in %.1f s" % (total / 1e6, time.monotonic() - t)


# --------------------------------------------------------------------------
# Training-step simulation
# --------------------------------------------------------------------------

class SleepStep:
    def __init__(self, ms):
        self.ms = ms
        self.s = ms / 1000.0
        self.kind = "sleep %.3g ms" % ms

    def __call__(self):
        time.sleep(self.s)


class GpuStep:
    """A calibrated loop of 2048x2048 fp32 matmuls, then a stream synchronize
    (as a training loop that reads its loss every step)."""

    def __init__(self, torch, ms):
        self.torch = torch
        self.ms = ms
        n = 2048
        dev = torch.device("cuda", torch.cuda.current_device())
        g = torch.Generator(device=dev)
        g.manual_seed(0)
        self.a = torch.randn(n, n, device=dev, generator=g) / math.sqrt(n)
        self.b = torch.randn(n, n, device=dev, generator=g) / math.sqrt(n)
        self.c = torch.empty(n, n, device=dev)
        self.k = 1
        for _ in range(3):
            self._mm(3)
        torch.cuda.synchronize()
        t = time.perf_counter()
        self._mm(10)
        torch.cuda.synchronize()
        per = (time.perf_counter() - t) / 10
        self.k = max(1, int(round(ms / 1000.0 / per)))
        for _ in range(2):  # correct once or twice for launch overhead and clocks
            t = time.perf_counter()
            self()
            dt = time.perf_counter() - t
            self.k = max(1, int(round(self.k * (ms / 1000.0) / dt)))
        t = time.perf_counter()
        self()
        self.calibrated_ms = (time.perf_counter() - t) * 1000
        self.kind = "GPU matmul loop: %d x %dx%d fp32 matmul + synchronize = %.1f ms (%s)" % (
            self.k, n, n, self.calibrated_ms, torch.cuda.get_device_name(dev))

    def _mm(self, k):
        for _ in range(k):
            self.torch.mm(self.a, self.b, out=self.c)

    def __call__(self):
        self._mm(self.k)
        self.torch.cuda.current_stream().synchronize()


# --------------------------------------------------------------------------
# The two systems
# --------------------------------------------------------------------------

class RingfeedRunner:
    system = "ringfeed"

    def __init__(self, rf, a, source, workers, device, pin, seed):
        self.rf = rf
        self.source = source
        self.records = a.record_size > 0
        kw = dict(batch_size=a.batch_size, shuffle=True, seed=seed,
                  num_workers=0 if workers == "auto" else workers, device=device,
                  pin_memory=pin)
        if self.records:
            kw.update(record_size=a.record_size, header_size=a.header_size, dtype=a.dtype,
                      transform="none")
        else:
            kw.update(image_size=a.image_size, transform=a.transform,
                      flip=a.transform == "random_resized_crop", layout=a.layout,
                      verify=a.verify)
        self.kw = kw
        self.loader = None
        self.it = None

    def start(self):
        self.loader = self.rf.Loader(self.source, **self.kw)
        self.it = iter(self.loader)
        return self.it

    def count(self, batch):
        x = batch if self.records else batch[1]
        return int(x.shape[0])

    def to_device(self, batch):
        return batch  # device="cuda" yields CUDA tensors already

    def finish(self):
        st = self.loader.stats()
        self.it = None
        self.loader.close()
        self.loader = None
        return {"num_workers": st.get("num_workers"), "auto_workers": st.get("auto_workers"),
                "tuner": st.get("tuner"), "io_backend": st.get("io_backend"),
                "memory_mode": (st.get("memory") or {}).get("mode"),
                "ring_bytes": (st.get("memory") or {}).get("ring_bytes"),
                "library_stall_seconds": st.get("stall_seconds"),
                "library_images_per_sec": st.get("images_per_sec"),
                "errors_count": st.get("errors_count"), "worker_budget": st.get("worker_budget")}

    def abort(self):
        self.it = None
        if self.loader is not None:
            self.loader.close()
            self.loader = None


class TorchRunner:
    system = "dataloader"

    def __init__(self, torch, a, root, workers, cuda, pin, seed):
        import torchvision.transforms as T
        S = a.image_size
        if a.transform == "center":
            self.tf = T.Compose([T.Resize(int(round(S / 0.875))), T.CenterCrop(S),
                                 T.PILToTensor()])
        else:
            self.tf = T.Compose([T.RandomResizedCrop(S), T.RandomHorizontalFlip(),
                                 T.PILToTensor()])
        self.torch = torch
        self.root = root
        self.workers = workers
        self.batch_size = a.batch_size
        self.cuda = cuda
        self.pin = bool(cuda and pin)
        self.seed = seed
        self.dl = None
        self.it = None

    def start(self):
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder
        self.torch.manual_seed(self.seed)
        ds = ImageFolder(self.root, transform=self.tf)
        self.dl = DataLoader(ds, batch_size=self.batch_size, shuffle=True,
                             num_workers=self.workers, pin_memory=self.pin,
                             persistent_workers=False, drop_last=False)
        self.it = iter(self.dl)
        return self.it

    def count(self, batch):
        return int(batch[1].shape[0])

    def to_device(self, batch):
        if self.cuda:
            x, y = batch
            return x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        return batch

    def _shutdown(self):
        it, self.it = self.it, None
        if it is not None:
            stop = getattr(it, "_shutdown_workers", None)
            if stop is not None:
                try:
                    stop()  # joins (and so reaps) the worker processes now
                except Exception:
                    pass
        self.dl = None

    def finish(self):
        self._shutdown()
        return {"num_workers": self.workers, "pin_memory": self.pin}

    abort = _shutdown


# --------------------------------------------------------------------------
# One measured run
# --------------------------------------------------------------------------

def timed_run(runner, max_batches, step, sync, progress, label):
    """Builds the loader, reads up to max_batches batches (0: the epoch), and
    returns the figures of the run."""
    gc.collect()
    sampler = ProcSampler()
    sampler.start()
    cpu0, reaped0 = self_cpu_seconds(), reaped_children_cpu_seconds()
    busy0 = machine_busy_seconds()
    t0 = time.perf_counter()
    images = batches = 0
    stall = 0.0
    t_first = None
    first_n = 0
    try:
        it = runner.start()
        while not max_batches or batches < max_batches:
            ta = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            tb = time.perf_counter()
            if t_first is None:
                t_first = tb
            else:
                stall += tb - ta
            batch = runner.to_device(batch)
            n = runner.count(batch)
            if t_first == tb:
                first_n = n
            images += n
            batches += 1
            if step is not None:
                step()
            del batch
            progress.update("%s: batch %d, %.0f img/s" % (label, batches,
                                                          images / (time.perf_counter() - t0)))
        if sync is not None:
            sync()
        t_end = time.perf_counter()
        cpu_self = self_cpu_seconds() - cpu0
        busy1 = machine_busy_seconds()
        del it
        extra = runner.finish()
    except BaseException:
        runner.abort()
        sampler.finish()
        raise
    gc.collect()
    reaped = reaped_children_cpu_seconds() - reaped0
    peak = sampler.finish()
    cpu_children = max(reaped, sum(sampler.child_cpu.values()))
    wall = t_end - t0
    after_first = t_end - t_first if t_first is not None else 0.0
    r = {"images": images, "batches": batches, "seconds": round(wall, 4),
         "images_per_sec": round(images / wall, 2) if wall > 0 and images else 0.0,
         "steady_images_per_sec": round((images - first_n) / after_first, 2)
         if after_first > 0 and images > first_n else None,
         "first_batch_seconds": round(t_first - t0, 4) if t_first is not None else None,
         "stall_seconds": round(stall, 4),
         "stall_pct": round(100.0 * stall / after_first, 2) if after_first > 0 else None,
         "cpu_seconds": round(cpu_self + cpu_children, 3),
         "cpu_seconds_children": round(cpu_children, 3),
         "cpu_cores": round((cpu_self + cpu_children) / wall, 3) if wall > 0 else None,
         "rss_baseline_mb": round(sampler.baseline / 2**20, 1),
         "rss_peak_mb": round(peak / 2**20, 1),
         "rss_added_mb": round(max(0, peak - sampler.baseline) / 2**20, 1),
         "child_processes": sampler.max_children}
    if busy0 is not None and busy1 is not None and wall > 0:
        # What the rest of the machine used meanwhile: noise on a shared machine.
        r["machine_busy_cores"] = round((busy1 - busy0) / wall, 3)
        r["other_cpu_cores"] = round(max(0.0, (busy1 - busy0 - cpu_self - cpu_children) / wall), 3)
    r.update(extra)
    return r


# --------------------------------------------------------------------------
# Pinned vs pageable
# --------------------------------------------------------------------------

def h2d_gbps(torch, nbytes, pinned, min_seconds=0.3, min_copies=10):
    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
    src.fill_(7)
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    best = 0.0
    for _ in range(3):
        n = 0
        t0 = time.perf_counter()
        while n < min_copies or time.perf_counter() - t0 < min_seconds / 3:
            dst.copy_(src, non_blocking=True)
            n += 1
            if n % 4 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        best = max(best, nbytes * n / (time.perf_counter() - t0) / 1e9)
    return best


# --------------------------------------------------------------------------
# Aggregation and the report
# --------------------------------------------------------------------------

def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def aggregate(runs):
    """runs: list of run dicts for one (system, workers, pass)."""
    if not runs:
        return None
    keys = ("images_per_sec", "steady_images_per_sec", "first_batch_seconds", "stall_pct",
            "cpu_cores", "rss_added_mb")
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
    widths = [max(len(r[i]) for r in table) for i in range(len(hdr))]
    for i, r in enumerate(table):
        cells = [r[0].rjust(widths[0]), r[1].ljust(widths[1])] + \
            [c.rjust(widths[j + 2]) for j, c in enumerate(r[2:])]
        P("  " + "  ".join(cells))
        if i == 0:
            P("  " + "-" * (sum(widths) + 2 * (len(widths) - 1)))
    if "auto" in a.worker_list:
        P("  (auto->N: the workers the tuner had at the end of the run without%s)"
          % (" / with the step" if step else " a step"))
    if not step:
        P("  (stall without --step-ms: the loop does nothing but wait, so this is near 100 %)")
    P("")
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


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

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


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    progress = Progress(1)
    try:
        return run(a, progress)
    except BenchError as e:
        progress.clear()
        print("ringfeed-bench: %s" % e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        progress.clear()
        print("ringfeed-bench: interrupted", file=sys.stderr)
        return 130


def run(a, progress):
    rf = import_ringfeed(a)
    # torch: for the comparison, for CUDA, and (when importable) for the binding's tensors.
    torch, torchvision, torch_desc = import_torch(True)
    cuda_torch = False
    cuda_reason = None
    if torch is None:
        cuda_reason = torch_desc
    else:
        try:
            cuda_torch = bool(torch.cuda.is_available())
        except Exception as e:
            cuda_reason = "torch.cuda.is_available() failed: %s" % e
        if not cuda_torch and cuda_reason is None:
            cuda_reason = "torch %s %s" % (torch.__version__,
                                           "is a build without CUDA" if not torch.version.cuda
                                           else "sees no usable GPU (torch.cuda.is_available() "
                                           "is False)")

    # The data.
    if a.data:
        source = a.data
        data_spec = {"generated": False, "path": a.data}
    else:
        if a.record_size:
            raise BenchError("--record-size needs --data")
        source, data_spec = prepare_sample(a, progress)

    # A probe loader: the source's size, the io backend, CUDA support of the library.
    probe_kw = dict(batch_size=a.batch_size, num_workers=1, shuffle=False, output="numpy")
    if a.record_size:
        probe_kw.update(record_size=a.record_size, header_size=a.header_size, dtype=a.dtype,
                        transform="none")
    else:
        probe_kw.update(image_size=a.image_size, transform=a.transform)
    try:
        probe = rf.Loader(source, **probe_kw)
    except Exception as e:
        raise BenchError("ringfeed cannot read %s: %s" % (source, e))
    n_samples, batches_per_epoch = probe.num_samples, len(probe)
    pst = probe.stats()
    io_backend = pst.get("io_backend")
    rf_cuda = pst.get("cuda") or {}
    paths = []
    if not a.no_warm:
        seen = set()
        for i in range(min(n_samples, 2000000)):
            p = probe.sample_path(i)
            if p not in seen:
                seen.add(p)
                paths.append(p)
    probe.close()
    del probe

    is_folder = os.path.isdir(source)
    if is_folder:
        classes = sorted(d for d in os.listdir(source) if os.path.isdir(os.path.join(source, d)))
        data_desc = "%d images in %s (image folder, %d classes)" % (n_samples, source, len(classes))
    else:
        data_desc = "%d samples in %s" % (n_samples, source)
    if data_spec.get("generated") is not None and not a.data:
        data_desc += " [built-in sample]"
    data_name = os.path.basename(os.path.normpath(source)) if is_folder else os.path.basename(source)

    # CUDA: the device and the pinned vs pageable section.
    cuda_ok = False
    if cuda_torch:
        if not rf_cuda.get("built"):
            cuda_reason = "libringfeed was built without CUDA (%s)" % rf.library_path()
        else:
            try:
                t = rf.Loader(source, **dict(probe_kw, output="auto", device="cuda"))
                t.close()
                del t
                cuda_ok = True
            except Exception as e:
                cuda_reason = "ringfeed reports no CUDA device: %s" % e
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

    # The plan: per worker count, each repeat alternates the systems' order.
    systems = ["ringfeed"] + (["dataloader"] if torch_ok else [])
    # Repeats are the outer loop, so that a noisy spell on a shared machine is
    # spread over every worker count instead of hitting one.
    plan = []
    for rep in range(a.epochs):
        for w in a.worker_list:
            sys_w = [s for s in systems if not (s == "dataloader" and w == "auto")]
            order = sys_w if rep % 2 == 0 else sys_w[::-1]
            for npass in (("max", "step") if step else ("max",)):
                for s in order:
                    plan.append((s, w, npass, rep, sizing_memory))
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
    others = [r["other_cpu_cores"] for r in b.runs if r.get("other_cpu_cores") is not None]
    noise = None
    if others:
        noise = {"other_cpu_cores_mean": round(sum(others) / len(others), 3),
                 "other_cpu_cores_max": round(max(others), 3)}
        if noise["other_cpu_cores_mean"] > 0.2 * machine["usable_cores"]:
            b.notes.append("other processes used %.2f cores on average (up to %.2f) during "
                           "the runs: the machine was busy, figures are noisy; rerun on a quiet "
                           "machine" % (noise["other_cpu_cores_mean"],
                                        noise["other_cpu_cores_max"]))

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
        fixed = [w for w in a.worker_list if w != "auto"]
        pw = per_system["ringfeed"].get("knee_workers") or (max(fixed) if fixed else "auto")
        nbytes = a.batch_size * (a.record_size or 3 * a.image_size * a.image_size)
        pn = {"workers": pw, "batch_bytes": nbytes, "h2d_gbps": {}, "e2e": {}}
        for mode in pinned_modes:
            pn["h2d_gbps"][mode] = round(h2d_gbps(torch, nbytes, mode == "pinned"), 3)
            jout.write("h2d", {"memory": mode, "bytes": nbytes, "gbps": pn["h2d_gbps"][mode]})
        e2e_runs = {m: [] for m in pinned_modes}
        for rep in range(a.epochs):
            order = pinned_modes if rep % 2 == 0 else pinned_modes[::-1]
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
        b.pinned = pn
        jout.write("pinned_vs_pageable", dict(pn, skipped=False))

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
    summary_rows = []
    for key, e in rows.items():
        d = {"system": e["system"], "workers": e["workers"]}
        for k in ("data_seconds_per_batch", "epoch_seconds_estimate"):
            if k in e:
                d[k] = e[k]
        for npass in ("max", "step"):
            if e.get(npass):
                d[npass] = e[npass]
        summary_rows.append(d)
    jout.write("summary", {
        "rows": summary_rows, "systems": per_system, "pinned_vs_pageable": b.pinned,
        "compare_torch": {"ran": torch_ok, "skipped": torch_skip},
        "warm": warm_note, "machine_noise": noise, "notes": b.notes, "recommendation": rec_lines,
        "plot": a.plot if a.plot and a.plot in ctx["outputs"] else None})
    jout.close()
    print_report(b, ctx, rows, per_system, rec_lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
