"""A custom per-sample transform in Numba, run by ringfeed's decode workers
without the GIL.

    python examples/numba_sample_fn.py data/train --batches 20

invert_patch below is compiled by Numba's @cfunc into a C function with
ringfeed's callback signature (rf_sample_fn in include/ringfeed.h):

    int fn(void *user, uint8_t *pixels, int h, int w, int c, ptrdiff_t stride,
           uint64_t seed, const rf_sample_info *info)

ringfeed calls it on every sample after the built-in augmentations and
before the conversion to the output type, on several worker threads at once
(it must not touch shared state). It inverts a square of a quarter of the
picture's side at a place drawn from the sample's own seed, so the output is
the same for any num_workers and after a resume. A nonzero return fails the
sample (on_error decides what follows); info holds the sample's index,
epoch, label and worker (int64, int64, int64, int32).

A plain Python function works too (sample_fn=lambda pixels, seed, info: 0,
pixels a writable [h, w, 3] array), but it runs under the GIL: the workers
then take turns.
"""

import argparse

import numba
from numba import types

import ringfeed

SIGNATURE = types.int32(types.voidptr, types.CPointer(types.uint8), types.int32, types.int32,
                        types.int32, types.intp, types.uint64, types.CPointer(types.int64))


def patch_place(seed, h, w):
    """Top, left and side of the square for a sample's seed (also used by the test)."""
    side = max(1, min(h, w) // 4)
    top = int(seed % (h - side + 1))
    left = int((seed >> 32) % (w - side + 1))
    return top, left, side


@numba.cfunc(SIGNATURE, nopython=True, nogil=True)
def invert_patch(user, pixels, h, w, c, stride, seed, info):
    side = max(1, min(h, w) // 4)
    top = seed % numba.uint64(h - side + 1)
    left = (seed >> numba.uint64(32)) % numba.uint64(w - side + 1)
    for y in range(top, top + side):
        row = y * stride
        for x in range(left * c, (left + side) * c):
            pixels[row + x] = 255 - pixels[row + x]
    return 0


@numba.cfunc(SIGNATURE, nopython=True, nogil=True)
def fail_every_fifth(user, pixels, h, w, c, stride, seed, info):
    """Fails samples whose index is a multiple of 5 (info[0] is the sample)."""
    if info[0] % 5 == 0:
        return 7
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    loader = ringfeed.Loader(a.source, batch_size=64, image_size=224, num_workers=a.workers,
                             augment=[ringfeed.RandAugment(2, 9)], sample_fn=invert_patch,
                             dtype="float16", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    for i, (images, labels) in enumerate(loader):
        if i + 1 >= a.batches:
            break
    st = loader.stats()
    print("images/s %.1f; per image: decode %.3f ms, augment %.3f ms, sample_fn %.3f ms, "
          "convert %.3f ms" % (st["images_per_sec"], st["per_image_ms"]["decode"],
                               st["per_image_ms"]["augment"], st["per_image_ms"]["sample_fn"],
                               st["per_image_ms"]["convert"]))


if __name__ == "__main__":
    main()
