"""What is measured: the two systems, the simulated training step, one timed run.

RingfeedRunner and TorchRunner share one shape (start() gives the iterator,
count(), to_device(), finish() gives the run's extra figures, abort()), so
that timed_run() measures both the same way: from constructing the loader to
the last batch in hand, the time the loop waited for data (and its tail:
the wait per batch at p50 / p90 / p99 / max), CPU time of the
process and all its children, and peak RSS sampled from /proc. h2d_gbps()
measures plain host-to-device copies for the pinned vs pageable section.
"""

import gc
import math
import time

from .machine import (ProcSampler, machine_busy_seconds, reaped_children_cpu_seconds,
                      self_cpu_seconds)


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

# --augment: (ringfeed's list, torchvision's transforms on PIL) of each recipe;
# RandomErasing(0.25) ends each, on the uint8 tensor on torchvision's side.
AUGMENTS = {"randaugment": "RandAugment", "trivialaugment": "TrivialAugmentWide",
            "autoaugment": "AutoAugment"}
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def ringfeed_augment(rf, name):
    first = {"randaugment": lambda: rf.RandAugment(2, 9),
             "trivialaugment": lambda: rf.TrivialAugmentWide(),
             "autoaugment": lambda: rf.AutoAugment("imagenet")}[name]()
    return [first, rf.RandomErasing(0.25)]


def torchvision_augment(T, name):
    return {"randaugment": lambda: T.RandAugment(2, 9),
            "trivialaugment": lambda: T.TrivialAugmentWide(),
            "autoaugment": lambda: T.AutoAugment(T.AutoAugmentPolicy.IMAGENET)}[name]()

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
            if getattr(a, "augment", "none") != "none":
                kw["augment"] = ringfeed_augment(rf, a.augment)
            if getattr(a, "out_dtype", "uint8") != "uint8":
                kw.update(dtype=a.out_dtype, mean=MEAN, std=STD)
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
        per = st.get("per_image_ms") or {}
        self.it = None
        self.loader.close()
        self.loader = None
        lat = st.get("latency") or {}
        return {"num_workers": st.get("num_workers"), "auto_workers": st.get("auto_workers"),
                "ring_empty": lat.get("ring_empty"),
                "library_wait_p99_ms": lat.get("wait_p99_ms"),
                "library_first_batch_seconds": lat.get("first_batch_seconds"),
                "tuner": st.get("tuner"), "io_backend": st.get("io_backend"),
                "memory_mode": (st.get("memory") or {}).get("mode"),
                "ring_bytes": (st.get("memory") or {}).get("ring_bytes"),
                "library_stall_seconds": st.get("stall_seconds"),
                "library_images_per_sec": st.get("images_per_sec"),
                "errors_count": st.get("errors_count"), "worker_budget": st.get("worker_budget"),
                "per_image_ms": per}

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
            tf = [T.RandomResizedCrop(S), T.RandomHorizontalFlip()]
            aug = getattr(a, "augment", "none")
            if aug != "none":
                tf.append(torchvision_augment(T, aug))
            tf.append(T.PILToTensor())
            out = getattr(a, "out_dtype", "uint8")
            if out != "uint8":
                tf += [T.ConvertImageDtype(getattr(torch, out)), T.Normalize(MEAN, STD)]
            if aug != "none":
                tf.append(T.RandomErasing(0.25))
            self.tf = T.Compose(tf)
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

def wait_ms(waits, q):
    """The q-quantile of waits (seconds) in ms by nearest rank, or None."""
    if not waits:
        return None
    s = sorted(waits)
    return round(s[max(1, math.ceil(q * len(s))) - 1] * 1e3, 3)


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
    waits = []  # each batch's wait after the first (the first is first_batch_seconds)
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
                waits.append(tb - ta)
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
         # the tail of the consumer's wait per batch (this clock, nearest rank)
         "wait_p50_ms": wait_ms(waits, 0.50), "wait_p90_ms": wait_ms(waits, 0.90),
         "wait_p99_ms": wait_ms(waits, 0.99), "wait_max_ms": wait_ms(waits, 1.0),
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
# Pinned vs pageable: plain copies
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
