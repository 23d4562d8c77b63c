"""What the ringfeed-pack tests share: the skip when the packer is not built,
running it, and reading back the shards it wrote."""
import glob
import json
import os
import tarfile

import pytest

import ringfeed.pack


def _have_pack():
    try:
        ringfeed.pack.executable()
        return True
    except OSError:
        return False


# With RINGFEED_LIBRARY set (CTest's python test), a missing packer is a failure.
needs_pack = pytest.mark.skipif(not _have_pack() and not os.environ.get("RINGFEED_LIBRARY"),
                                reason="ringfeed-pack is not built")


def run_pack(src, out, *args):
    """ringfeed-pack [args] src out; the CompletedProcess (text output)."""
    return ringfeed.pack.run(list(args) + [src, out], capture_output=True, text=True,
                             timeout=300)


def pack(src, out, *args):
    """run_pack that must succeed; the manifest it wrote."""
    r = run_pack(src, out, *args)
    if r.returncode != 0:
        raise AssertionError("ringfeed-pack failed (%d): %s" % (r.returncode, r.stderr))
    with open(os.path.join(out, "manifest.json")) as f:
        return json.load(f)


def members(out):
    """[(shard name, key, ext, bytes)] of every member of every shard, in order."""
    rows = []
    for p in sorted(glob.glob(os.path.join(out, "shard-*.tar"))):
        with tarfile.open(p) as t:
            for m in t.getmembers():
                key, ext = m.name.split(".", 1)
                rows.append((os.path.basename(p), key, ext, t.extractfile(m).read()))
    return rows
