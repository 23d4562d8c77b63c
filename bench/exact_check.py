#!/usr/bin/python3
"""exact_check.py - how many pictures of a folder ringfeed's "center" output
matches torchvision's byte for byte, with exact=True and with exact=False.

    exact_check.py FOLDER [--image-size S] [--limit N] [--workers N]

FOLDER is an image folder (class subfolders of JPEGs, as ImageFolder reads).
The reference for each file is torchvision's Resize(round(S / 0.875)) +
CenterCrop(S) + PILToTensor on PIL.Image.open(path).convert("RGB"). For each
setting of exact it prints how many of the N files are identical, and the
lowest and mean PSNR of those that are not. Exits 0 when exact=True matched
every file, 1 otherwise (2 when torchvision does not import).

Run with the repository's binding on the path, e.g.
    PYTHONPATH=bindings/python RINGFEED_LIBRARY=build/libringfeed.so \\
        python3 bench/exact_check.py /path/to/folder
"""

import argparse
import os
import sys

import numpy as np


def reference(path, size):
    """torchvision's center pipeline on PIL's decode, uint8 [S, S, 3]."""
    import torchvision.transforms as T
    from PIL import Image
    t = T.Compose([T.Resize(int(round(size / 0.875))), T.CenterCrop(size), T.PILToTensor()])
    with Image.open(path) as im:
        return t(im.convert("RGB")).permute(1, 2, 0).numpy()


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def ringfeed_outputs(folder, size, exact, workers, limit):
    """{sample index: uint8 [S, S, 3]} and {sample index: path}."""
    import ringfeed
    out = {}
    with ringfeed.Loader(folder, batch_size=32, image_size=size, transform="center",
                         flip=False, shuffle=False, num_workers=workers, output="numpy",
                         exact=exact) as ld:
        for images, _, idx in ld.iter_with_indices():
            for k, s in enumerate(idx.tolist()):
                if limit is None or s < limit:
                    out[s] = images[k].copy()
            if limit is not None and len(out) >= limit:
                break
        paths = {s: ld.sample_path(s) for s in out}
    return out, paths


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--limit", type=int, default=None, help="only the first N samples")
    p.add_argument("--workers", type=int, default=0)
    a = p.parse_args(argv)
    try:
        import torchvision  # noqa: F401
    except Exception as e:
        print("exact_check: torchvision does not import: %s" % e, file=sys.stderr)
        return 2

    results = {}
    refs = None
    for exact in (True, False):
        out, paths = ringfeed_outputs(a.folder, a.image_size, exact, a.workers, a.limit)
        if refs is None:
            refs = {s: reference(paths[s], a.image_size) for s in out}
        same, scores, worst = 0, [], None
        for s in sorted(out):
            if np.array_equal(out[s], refs[s]):
                same += 1
                continue
            v = psnr(out[s], refs[s])
            scores.append(v)
            if worst is None or v < worst[0]:
                worst = (v, os.path.relpath(paths[s], a.folder))
        results[exact] = same
        line = "exact=%-5s S=%d: %d of %d identical to torchvision" % (exact, a.image_size, same,
                                                                       len(out))
        if scores:
            line += "; the other %d: PSNR min %.2f dB (%s), mean %.2f dB" % (
                len(scores), worst[0], worst[1], float(np.mean(scores)))
        print(line, flush=True)
    return 0 if results[True] == len(refs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
