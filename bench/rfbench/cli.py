"""ringfeed-bench's command line: the arguments (with the defaults --quick
changes and the worker list resolved), and main(): exit status 0, 2 on a
BenchError, 130 on Ctrl-C."""

import argparse
import sys

from . import BenchError
from . import __doc__ as USAGE
from .machine import usable_cores
from .report import Progress
from .runners import AUGMENTS
from .session import run


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="ringfeed-bench", description=USAGE.split("\n\n")[0],
        epilog="See the package's docstring (bench/rfbench/__init__.py) and docs/performance.md, "
               "'Reading the benchmark'.")
    p.add_argument("--data", help="image folder, list file, tar shards or record file "
                   "(default: the built-in sample, generated when missing)")
    p.add_argument("--batch-size", type=int, help="default 64 (16 with --quick)")
    p.add_argument("--image-size", type=int, help="output side in pixels (default 224; "
                   "112 with --quick)")
    p.add_argument("--transform", default="center", choices=["center", "random_resized_crop"])
    p.add_argument("--augment", default="none", choices=["none"] + sorted(AUGMENTS),
                   help="augmentations after the crop, the same on both sides (implies "
                        "--transform random_resized_crop): randaugment is RandAugment(2, 9) + "
                        "RandomErasing(0.25); trivialaugment TrivialAugmentWide() + "
                        "RandomErasing(0.25); autoaugment AutoAugment(imagenet) + "
                        "RandomErasing(0.25); torchvision runs them on PIL pictures, "
                        "RandomErasing on the uint8 tensor")
    p.add_argument("--out-dtype", default="uint8", choices=["uint8", "float32", "float16",
                                                           "bfloat16"],
                   help="ringfeed's output type, normalised with ImageNet's mean and std "
                        "(torchvision's side then ends in ConvertImageDtype + Normalize)")
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

    if a.augment != "none":
        a.transform = "random_resized_crop"
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
