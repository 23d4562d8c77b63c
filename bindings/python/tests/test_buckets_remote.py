"""Aspect-ratio buckets over remote shards (http:// on 127.0.0.1): the same
batches as the same shards on local disk; the pictures' sizes scanned
through the cache once (each shard fetched and read through its pin), then
kept beside the indexes in the cache folder for the next start; or taken
from ringfeed-pack's manifest.json beside the shards, without a scan."""

import io
import os
import tarfile

import pytest

import rfhelpers
import rfservers
import ringfeed
from packhelpers import needs_pack, pack

NSHARDS, PER_SHARD = 3, 8
SHAPES = [(64, 48), (44, 66), (90, 40)]  # (w, h)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("remote_bucket_shards")
    for s in range(NSHARDS):
        with tarfile.open(str(d / ("b-%04d.tar" % s)), "w", format=tarfile.USTAR_FORMAT) as tf:
            for i in range(PER_SHARD):
                k = s * PER_SHARD + i
                w, h = SHAPES[k % len(SHAPES)]
                jp = str(d / "x.jpg")
                rfhelpers.write_jpeg(jp, w + k % 2, h, seed=300 + k)
                tf.add(jp, arcname="k%03d.jpg" % k)
                info = tarfile.TarInfo("k%03d.cls" % k)
                info.size = 1
                tf.addfile(info, io.BytesIO(b"%d" % (k % 2)))
        os.remove(str(d / "x.jpg"))
    return str(d)


def epoch(src, **kw):
    opts = dict(batch_size=4, image_size=48, transform="center", buckets=3, num_workers=2,
                seed=2)
    opts.update(kw)
    with ringfeed.Loader(src, **opts) as ld:
        batches = [(tuple(images.shape), idx.tolist(), rfhelpers.as_numpy(images).tobytes())
                   for images, _, idx in ld.iter_with_indices()]
        return batches, ld.stats()["shapes"]["sizes"]


def test_remote_buckets_scan_keep_and_match_local(shards, tmp_path):
    spec = "/b-{0000..%04d}.tar" % (NSHARDS - 1)
    local, _ = epoch(shards + spec, cache_dir=str(tmp_path / "lc"))
    cache = str(tmp_path / "c")
    with rfservers.http_files(shards) as url:
        got, sizes = epoch(url + spec, cache_dir=cache)
        assert sizes["scanned"] == NSHARDS * PER_SHARD and sizes["kept_written"]
        assert sizes["kept"].startswith(cache)
        assert got == local
        again, sizes = epoch(url + spec, cache_dir=cache)
        assert sizes["from_kept"] == NSHARDS * PER_SHARD and sizes["scanned"] == 0
        assert again == local


@needs_pack
def test_remote_buckets_from_the_manifest(shards, tmp_path):
    out = str(tmp_path / "packed")
    pack(os.path.join(shards, "b-{0000..%04d}.tar" % (NSHARDS - 1)), out, "--shard-count", "8")
    spec = "/shard-{000000..000002}.tar"
    local, _ = epoch(out + spec, cache_dir=str(tmp_path / "lc"))
    with rfservers.http_files(out) as url:
        got, sizes = epoch(url + spec, cache_dir=str(tmp_path / "c"))
    assert sizes["from_manifest"] == NSHARDS * PER_SHARD and sizes["scanned"] == 0
    assert got == local
