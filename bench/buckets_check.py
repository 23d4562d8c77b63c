#!/usr/bin/python3
"""buckets_check.py - aspect-ratio buckets on real photographs of mixed
orientations: every sample once per epoch, one shape per batch, the same
batches for 1 and 3 workers, exact resumes on the same and another world
size.

    PYTHONPATH=bindings/python RINGFEED_LIBRARY=build/libringfeed.so \\
        python3 bench/buckets_check.py --make OUT /work/data/photos_big [--count 2000]
    ... python3 bench/buckets_check.py OUT [--buckets 4] [--json FILE]

--make writes OUT as an image folder of --count crops of the photographs in
SRC (an image folder), in turn 3:4 and 9:16 (portrait), 4:3 and 16:9
(landscape) and 1:1, at a random place, their larger side at most 800,
quality 90, keeping the source's class. Then, on OUT, with buckets=N
(automatic, 224 x 224 pixels each), random_resized_crop, batch 32:
  epochs:   two epochs of one loader: every sample once in each, every batch
            of one bucket and its shape;
  workers:  1 vs 3 workers: the same bytes (a hash of every batch);
  resume:   state_dict after 7 batches, a new loader load_state_dict: the
            rest of the epoch as the uninterrupted run gives it;
  world:    2 ranks stop after 5 batches each; 3 ranks (batch 24) take the
            rest: every sample of the epoch at least once over both runs,
            and only padding twice;
  shared:   the same with bucket_shared=False.
Prints each check's outcome and the time of one epoch; --json appends them.
"""

import argparse
import collections
import hashlib
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                "python"))
import ringfeed  # noqa: E402

RATIOS = [(3, 4), (4, 3), (9, 16), (16, 9), (1, 1)]  # (w, h)


def make(out, src, count, seed=0):
    from PIL import Image
    files = []
    for c in sorted(os.listdir(src)):
        d = os.path.join(src, c)
        if os.path.isdir(d):
            files += [(c, os.path.join(d, f)) for f in sorted(os.listdir(d))]
    rng = random.Random(seed)
    for i in range(count):
        cls, path = files[i % len(files)]
        rw, rh = RATIOS[i % len(RATIOS)]
        with Image.open(path) as im:
            im = im.convert("RGB")
            w, h = im.size
            s = min(w / rw, h / rh) * rng.uniform(0.7, 1.0)
            cw, ch = max(1, int(rw * s)), max(1, int(rh * s))
            x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
            crop = im.crop((x, y, x + cw, y + ch))
            if max(crop.size) > 800:
                k = 800 / max(crop.size)
                crop = crop.resize((max(1, round(cw * k)), max(1, round(ch * k))),
                                   Image.BILINEAR)
            os.makedirs(os.path.join(out, cls), exist_ok=True)
            crop.save(os.path.join(out, cls, "%05d.jpg" % i), quality=90)


def loader(folder, **kw):
    base = dict(batch_size=32, image_size=224, transform="random_resized_crop", seed=1,
                num_workers=2, output="numpy")
    base.update(kw)
    return ringfeed.Loader(folder, **base)


def epoch(ld, e=None):
    if e is not None:
        ld.set_epoch(e)
    out = []
    for images, labels, idx in ld.iter_with_indices():
        out.append((images.shape[1:3], idx.tolist(), hashlib.sha1(images.tobytes()).hexdigest()))
    return out


def check_epochs(folder, buckets):
    with loader(folder, buckets=buckets, num_workers=1) as ld:
        shapes = [tuple(b) for b in ld.buckets]
        bad, t = 0, []
        for e in range(2):
            t0 = time.perf_counter()
            b = epoch(ld, e)
            t.append(time.perf_counter() - t0)
            seen = collections.Counter(s for _, idx, _ in b for s in idx)
            once = sorted(seen) == list(range(ld.num_samples)) and set(seen.values()) == {1}
            for shape, idx, _ in b:
                ks = {ld.sample_bucket(s) for s in idx}
                bad += len(ks) != 1 or shape != shapes[ks.pop()]
        counts = [x["samples"] for x in ld.stats()["shapes"]["buckets"]]
        return {"check": "epochs", "samples": ld.num_samples, "buckets": shapes,
                "bucket_samples": counts, "batches": len(b), "every_sample_once": once,
                "batches_not_one_shape": bad, "epoch_seconds_1_worker": [round(x, 2) for x in t]}


def check_workers(folder, buckets):
    with loader(folder, buckets=buckets, num_workers=1) as a, \
            loader(folder, buckets=buckets, num_workers=3) as b:
        return {"check": "workers_1_vs_3", "identical": epoch(a, 3) == epoch(b, 3)}


def check_resume(folder, buckets, shared):
    with loader(folder, buckets=buckets, bucket_shared=shared) as ld:
        whole = epoch(ld, 2)
        ld.set_epoch(2)
        it = ld.iter_with_indices()
        for _ in range(7):
            next(it)
        state = ld.state_dict()
    with loader(folder, buckets=buckets, bucket_shared=shared, num_workers=3) as ld:
        ld.load_state_dict(state)
        rest = epoch(ld)
    same = rest == whole[7:]
    # 2 ranks -> 3 ranks
    first, states = [], []
    for r in range(2):
        with loader(folder, buckets=buckets, bucket_shared=shared, rank=r, world_size=2) as ld:
            ld.set_epoch(4)
            it = ld.iter_with_indices()
            for _ in range(5):
                first += next(it)[2].tolist()
            states.append(ld.state_dict())
    seen = collections.Counter(first)
    for r in range(3):
        with loader(folder, buckets=buckets, bucket_shared=shared, rank=r, world_size=3,
                    batch_size=24) as ld:
            ld.load_state_dict(states)
            for shape, idx, _ in epoch(ld):
                seen.update(idx)
        n = ld.num_samples
    twice = sum(v - 1 for v in seen.values())
    return {"check": "resume", "bucket_shared": shared, "same_world_exact": same,
            "other_world_every_sample": sorted(seen) == list(range(n)),
            "other_world_repeats": twice}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("src", nargs="?")
    ap.add_argument("--make", action="store_true")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--buckets", type=int, default=4)
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.make:
        make(a.folder, a.src, a.count)
        return
    rows = [check_epochs(a.folder, a.buckets), check_workers(a.folder, a.buckets),
            check_resume(a.folder, a.buckets, True), check_resume(a.folder, a.buckets, False)]
    for r in rows:
        print(json.dumps(r))
    if a.json:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
        with open(a.json, "a") as f:
            for r in rows:
                f.write(json.dumps({"bench": "buckets_check", "git": rev, "data": a.folder,
                                    **r}) + "\n")


if __name__ == "__main__":
    main()
