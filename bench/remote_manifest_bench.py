#!/usr/bin/python3
"""remote_manifest_bench.py - the cold start of remote shards that
ringfeed-pack wrote, with its manifest.json beside them and without it,
beside its parts (one shard's transfer, one batch's decoding).

    python3 bench/remote_manifest_bench.py PACKED_FOLDER [--rounds 5] [--batch 32]
                                           [--size 224] [--workers 2] [--parallel 4]

PACKED_FOLDER is ringfeed-pack's OUT (shard-*.tar and manifest.json), e.g.
`ringfeed-pack --keep-original-if-smaller --shard-count 300 /work/data/photos10 OUT`.
It is served by `python3 -m http.server` on 127.0.0.1, once as it is and
once without the manifest (a folder of links to the shards). Each round, in
this order:
  transfer       one shard GET into a file with urllib (the first batch's
                 shard)
  local_first    a loader on the local shards: construction to first batch
  decode         one batch's decoding on the local shards, steady state
  cold_manifest  a loader on the http:// shards with an empty cache folder:
                 construction to first batch (the index from the manifest)
  cold_bare      the same without the manifest: every shard is fetched and
                 walked before the first batch
Loader settings as in remote_bench.py (whose helpers this reuses):
random_resized_crop SIZE, shuffle=True, shuffle_block=1, seed 1.
"""

import glob
import json
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import remote_bench as rb  # noqa: E402  (also puts the binding and rfservers on the path)
import rfservers  # noqa: E402


def main():
    a = rb.parse_args()
    names = sorted(os.path.basename(x) for x in glob.glob(os.path.join(a.folder, "*.tar")))
    if not names or not os.path.exists(os.path.join(a.folder, "manifest.json")):
        sys.exit("%s: no shards and manifest.json (ringfeed-pack's OUT)" % a.folder)
    rb.warm_page_cache(a.folder, names)
    tmp = tempfile.mkdtemp(prefix="remote_manifest_bench_")
    bare = os.path.join(tmp, "bare")
    os.makedirs(bare)
    for n in names:
        os.symlink(os.path.join(os.path.abspath(a.folder), n), os.path.join(bare, n))
    spec = list
    local = spec(os.path.join(a.folder, n) for n in names)
    res = {k: [] for k in ("transfer", "local_first", "decode", "cold_manifest", "cold_bare")}
    try:
        with rfservers.http_files(a.folder) as base, rfservers.http_files(bare) as base_bare:
            for r in range(a.rounds):
                with rb.loader(local, a) as ld:
                    first = ld.sample_path(int(next(ld.iter_with_indices())[2][0]))
                one = base + "/" + os.path.basename(first.split(":")[0])
                res["transfer"].append(rb.transfer(one, os.path.join(tmp, "t.tar")))
                res["local_first"].append(rb.first_batch(local, a)[0])
                res["decode"].append(rb.epoch_rate(local, a)[1])
                row = {}
                for key, b in (("cold_manifest", base), ("cold_bare", base_bare)):
                    cache = os.path.join(tmp, "cache")
                    shutil.rmtree(cache, ignore_errors=True)
                    dt, st = rb.first_batch(spec(b + "/" + n for n in names), a, cache_dir=cache,
                                            fetch_parallel=a.parallel)
                    res[key].append(dt)
                    row[key + "_from_manifest"] = st["shards_from_manifest"]
                    row[key + "_bytes"] = st["remote"]["bytes_fetched"]
                row.update({k: round(v[-1], 4) for k, v in res.items()})
                row["round"] = r
                print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    print(json.dumps({"medians": {k: round(v, 4) for k, v in med.items()}}), flush=True)
    sys.stderr.write(
        "one shard transfer %.3f s; one batch of %d decoded %.3f s (local first batch %.3f s)\n"
        "cold first batch, empty cache: with manifest.json %.3f s (transfer + batch = %.3f s), "
        "without %.3f s\n" % (med["transfer"], a.batch, med["decode"], med["local_first"],
                              med["cold_manifest"], med["transfer"] + med["decode"],
                              med["cold_bare"]))


if __name__ == "__main__":
    main()
