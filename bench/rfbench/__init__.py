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

The package (bench/ringfeed_bench.py runs it; so does `python3 -m rfbench`
from bench/):
  cli.py       arguments, imports of ringfeed and torch, main()
  session.py   one benchmark session: probe, plan, runs, pinned vs pageable, outputs
  runners.py   the ringfeed and DataLoader runners, the simulated step, one timed run
  analysis.py  medians, the knee, the recommendation
  report.py    progress line, JSON lines, the human report, the PNG chart
  machine.py   the machine (cores, cgroup quota, GPU, git revision) and /proc sampling
  data.py      the built-in sample dataset and page-cache warming
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))            # bench/rfbench
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD_DIR = os.environ.get("RINGFEED_BENCH_BUILD_DIR") or os.path.join(REPO, "build")


class BenchError(Exception):
    """A condition that ends the benchmark with a message (exit status 2)."""
