"""The machine and the processes, as ringfeed-bench reports them.

machine_info() describes the machine for every JSON line (CPU, usable cores
from the affinity mask and the cgroup quota, kernel, GPU); git_revision()
the source tree. ProcSampler samples the RSS of this process and all its
descendants (DataLoader workers included) and their CPU time from /proc, on a
thread, every SAMPLE_PERIOD_S; machine_busy_seconds() says what the whole
machine did meanwhile, so that noise from other processes can be reported.
"""

import os
import platform
import resource
import shutil
import subprocess
import threading

from . import REPO

SAMPLE_PERIOD_S = 0.05    # memory / CPU sampling period


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
