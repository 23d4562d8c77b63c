"""The data: ringfeed-bench's built-in sample dataset, and page-cache warming.

Without --data, an ImageNet-like sample folder is made with rf-gen-folder
under BUILD/bench/sample (sample-quick with --quick), or reused when the
marker file says it was made with the same options.
"""

import json
import os
import shutil
import subprocess
import time

from . import BUILD_DIR, BenchError
from .machine import mem_available_bytes

# The built-in sample dataset (rf-gen-folder options).
SAMPLE_SPEC = {"classes": 10, "per_class": 200, "width": 500, "height": 375, "quality": 90,
               "seed": 0}
QUICK_SAMPLE_SPEC = {"classes": 4, "per_class": 16, "width": 320, "height": 240, "quality": 90,
                     "seed": 0}


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
