"""An error mid-epoch ends nothing but its batch: next() on the same
iterator yields the batch after the failed one, in the same epoch, until the
epoch's end (the C side consumes a failed batch: rf_loader_next in
ringfeed.h). Two ways a batch fails: a corrupt picture under
on_error="raise", and a remote shard whose server stops answering mid-epoch
(an outage for that shard: its samples fail, the shards before and after it
are read). Every good sample is counted, once.
"""

import glob
import os

import pytest

import packhelpers
import rfhelpers
import rfservers
import ringfeed

BATCH = 4


def _drain(it):
    """(sample indices delivered, errors) of the rest of iterator it, going
    on after each RingfeedError with the same iterator."""
    got, errors = [], []
    while True:
        try:
            for _, _, idx in it:
                got.extend(rfhelpers.as_numpy(idx).tolist())
            return got, errors
        except ringfeed.RingfeedError as e:
            errors.append(str(e))


def test_corrupt_picture_mid_epoch(tmp_path):
    root = rfhelpers.tiny_jpeg_folder(str(tmp_path / "f"), 16, 2, seed=3)
    files = sorted(glob.glob(os.path.join(root, "*", "*.jpg")))
    with open(files[9], "r+b") as f:  # sample 9: batch 2 of 4 (no shuffle)
        f.truncate(60)
    with ringfeed.Loader(root, batch_size=BATCH, image_size=16, shuffle=False,
                         on_error="raise", num_workers=1) as ld:
        it = ld.iter_with_indices()
        first = next(it)
        got, errors = _drain(it)
        got = rfhelpers.as_numpy(first[2]).tolist() + got
        assert len(errors) == 1 and os.path.basename(files[9]) in errors[0], errors
        assert got == [i for i in range(16) if not 8 <= i < 12]
        with pytest.raises(StopIteration):  # the epoch is over, and stays over
            next(it)
        assert ld.epoch == 1  # a new iteration is the next epoch, from its start
        assert rfhelpers.as_numpy(next(ld.iter_with_indices())[2]).tolist() == [0, 1, 2, 3]


@packhelpers.needs_pack
def test_remote_shard_outage_mid_epoch(tmp_path):
    """5 packed shards of 4 behind a proxy that answers the GET of shard 2
    with 503 (an outage of that shard; no retry): the start indexes from
    the packer's manifest (no transfer), the epoch then fails shard 2's
    batch alone, and every other sample comes."""
    src = rfhelpers.pil_folder(str(tmp_path / "src"), 2, 10, 40, 32, seed=5)
    out = str(tmp_path / "out")
    packhelpers.pack(src, out, "--shard-count", str(BATCH), "--workers", "1")
    with rfservers.http_files(out) as url, \
            rfservers.fault_proxy(url, str(tmp_path / "proxy.log"),
                                  fail_match="^GET .*shard-000002[.]tar") as px:
        with ringfeed.Loader(px.url + "/shard-{000000..000004}.tar", batch_size=BATCH,
                             image_size=16, shuffle=False, on_error="raise", num_workers=1,
                             fetch_retries=0, cache_dir=str(tmp_path / "cache")) as ld:
            n = ld.num_samples
            assert n == 20 and ld.stats()["shards_from_manifest"] == 5
            lost = [i for i in range(n) if "shard-000002.tar" in ld.sample_path(i)]
            assert lost == list(range(2 * BATCH, 3 * BATCH))  # batch 2, exactly
            got, errors = _drain(ld.iter_with_indices())
            assert len(errors) == 1 and "shard-000002.tar" in errors[0], errors
            assert "503" in errors[0], errors
            assert got == [i for i in range(n) if i not in lost]
            assert ld.epoch == 1
