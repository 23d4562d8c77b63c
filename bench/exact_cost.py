#!/usr/bin/python3
"""exact_cost.py - what exact=True (full-resolution decode) costs: rf-profile
run with and without --exact, alternating, for each transform, and the
medians side by side.

    exact_cost.py DATA [--profile build/rf-profile] [--rounds 5] [--workers 1]
                  [--image-size 224] [--epochs 2]

Each round runs every (transform, exact) pair once, in turn, so that a
change in the machine's load hits both settings alike. Reported per pair:
the loader's CPU time per image (all threads; the steadier figure on a
shared machine), images/s over all epochs and over the later ones (crops
decoded only as far as they need, as after the first epoch of training),
and the decode stage's time per image.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data")
    p.add_argument("--profile", default=os.path.join(HERE, "..", "build", "rf-profile"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--epochs", type=int, default=2)
    a = p.parse_args(argv)

    pairs = [(t, e) for t in ("center", "random_resized_crop") for e in (False, True)]
    runs = {k: [] for k in pairs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for t, e in pairs:
                js = os.path.join(tmp, "run.json")
                cmd = [a.profile, a.data, "--transform", t, "--workers", str(a.workers),
                       "--image-size", str(a.image_size), "--epochs", str(a.epochs),
                       "--repeats", "1", "--json", js]
                if e:
                    cmd.append("--exact")
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                with open(js) as f:
                    rec = json.loads(f.read().splitlines()[-1])
                os.unlink(js)
                runs[(t, e)].append(rec)
                print("round %d %-19s exact=%-5s cpu %.3f ms/img, %.0f img/s (later %.0f)"
                      % (r + 1, t, e, rec["cpu_ms_per_image"], rec["loader_images_per_sec"],
                         rec["later_epochs_images_per_sec"]), file=sys.stderr, flush=True)

    def med(recs, key, sub=None):
        return statistics.median(r[key][sub] if sub else r[key] for r in recs)

    print("medians of %d alternating runs, %s, S=%d, %d worker(s), %d epochs"
          % (a.rounds, a.data, a.image_size, a.workers, a.epochs))
    print("%-20s %-6s %12s %10s %14s %14s" % ("transform", "exact", "CPU ms/img", "img/s",
                                              "later img/s", "decode ms/img"))
    for t, e in pairs:
        rs = runs[(t, e)]
        print("%-20s %-6s %12.3f %10.0f %14.0f %14.3f"
              % (t, e, med(rs, "cpu_ms_per_image"), med(rs, "loader_images_per_sec"),
                 med(rs, "later_epochs_images_per_sec"), med(rs, "per_image_ms", "decode")))
    for t in ("center", "random_resized_crop"):
        off, on = runs[(t, False)], runs[(t, True)]
        print("%s: exact=True costs %.2fx the CPU time per image, %.2fx the images/s"
              % (t, med(on, "cpu_ms_per_image") / med(off, "cpu_ms_per_image"),
                 med(on, "loader_images_per_sec") / med(off, "loader_images_per_sec")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
