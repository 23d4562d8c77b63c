"""Resuming an epoch on another world size, and the shard-aware shuffle, on
real WebDataset tar shards (written here with tarfile: tiny JPEGs, .cls
labels, shards of uneven sizes).

Ranks are Loaders in one process, advanced in lockstep as DDP ranks are.
The must-show: a run stopped mid-epoch at 4 ranks and resumed at 2 sees
every sample of that epoch exactly once across all ranks, the padding aside;
also 2 -> 3, a list of every rank's dicts, a changed dataset refused, and
shuffle_block's batches the same for 1 and 3 workers."""

import hashlib
import io
import json
import os
import shutil
import tarfile

import numpy as np
import pytest

import ringfeed
from rfhelpers import photo_like

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

SIZES = (7, 5, 9, 6)  # 27 samples in 4 shards


def jpeg(i):
    out = io.BytesIO()
    Image.fromarray(photo_like(24, 20, 500 + i), "RGB").save(out, "JPEG", quality=90)
    return out.getvalue()


def write_shards(out_dir, sizes=SIZES):
    """Shards out_dir/part-N.tar; sample i (over all shards) is key "sNNN"
    with a .jpg and a .cls (i % 3). Returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths, i = [], 0
    for s, size in enumerate(sizes):
        path = os.path.join(out_dir, "part-%d.tar" % s)
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
            for _ in range(size):
                for ext, data in (("jpg", jpeg(i)), ("cls", b"%d" % (i % 3))):
                    info = tarfile.TarInfo("s%03d.%s" % (i, ext))
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
                i += 1
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return write_shards(str(tmp_path_factory.mktemp("resume") / "shards"))


def open_rank(src, rank, world, **kw):
    kw.setdefault("batch_size", 2)
    kw.setdefault("image_size", 8)
    kw.setdefault("transform", "center")
    kw.setdefault("num_workers", 1)
    kw.setdefault("output", "numpy")
    kw.setdefault("seed", 3)
    return ringfeed.Loader(src, rank=rank, world_size=world, **kw)


def take(it, k, hits):
    """k batches from the iterator (all when k is None), counted in hits."""
    n = 0
    for batch in it:
        for i in batch[-1].tolist():
            hits[i] = hits.get(i, 0) + 1
        n += 1
        if k is not None and n == k:
            break
    return n


def stop_and_resume(src, n_world, m_world, stop_after, epoch=1, as_list=False, **kw):
    """n_world ranks take stop_after batches of `epoch`, their dicts go to
    m_world ranks which take the rest. Returns (hits, the dicts, lens)."""
    hits, states = {}, []
    for r in range(n_world):
        with open_rank(src, r, n_world, **kw) as ld:
            ld.set_epoch(epoch)
            assert take(ld.iter_with_indices(), stop_after, hits) == stop_after
            states.append(json.loads(json.dumps(ld.state_dict())))  # travels as JSON
    lens = []
    for m in range(m_world):
        with open_rank(src, m, m_world, num_workers=1 + m % 3,
                       **{k: v for k, v in kw.items() if k != "num_workers"}) as ld:
            ld.load_state_dict(states if as_list else states[m % n_world])
            lens.append(len(ld))
            assert ld.epoch == epoch
            assert take(ld.iter_with_indices(), None, hits) == lens[-1]
            # the next epoch is a whole m_world-rank epoch
            nxt = []
            for batch in ld.iter_with_indices():
                nxt += batch[-1].tolist()
            with open_rank(src, m, m_world, **kw) as fresh:
                fresh.set_epoch(epoch + 1)
                assert nxt == [i for b in fresh.iter_with_indices() for i in b[-1].tolist()]
                assert len(ld) == len(fresh)
    return hits, states, lens


def ceil(a, b):
    return -(-a // b)


def check_once(hits, n, rest, m_world, trim=False):
    """Every sample once; the padding repeats the rest's first samples to a
    multiple of m_world (trimmed: leaves out fewer than m_world)."""
    extra = sum(c - 1 for c in hits.values() if c > 1)
    missing = n - len(hits)
    if trim:
        assert extra == 0 and missing == rest % m_world
    else:
        assert missing == 0 and extra == -rest % m_world


@pytest.mark.parametrize("shuffle_block", [0, 2])
@pytest.mark.parametrize("trim", [False, True])
def test_stop_at_4_resume_at_2(shards, shuffle_block, trim):
    n = sum(SIZES)
    hits, states, lens = stop_and_resume(shards, 4, 2, 2, shuffle_block=shuffle_block,
                                         sampler_drop_last=trim)
    consumed = 4 * 2 * 2
    assert {s["consumed"] for s in states} == {consumed}
    assert all((s["epoch"], s["batch"], s["world_size"]) == (1, 2, 4) for s in states)
    rest = n - consumed
    per = rest // 2 if trim else ceil(rest, 2)
    assert lens == [ceil(per, 2)] * 2
    check_once(hits, n, rest, 2, trim)


def test_stop_at_2_resume_at_3(shards):
    n = sum(SIZES)
    hits, states, lens = stop_and_resume(shards, 2, 3, 3, shuffle_block=1)
    rest = n - 2 * 3 * 2
    assert lens == [ceil(ceil(rest, 3), 2)] * 3
    check_once(hits, n, rest, 3)


def test_every_ranks_dicts_resume_from_the_slowest(shards):
    """A list of all ranks' dicts: the slowest rank's position counts; what
    faster ranks took beyond it is seen again (here: rank 0 took one batch
    more, its 2 samples come twice)."""
    n = sum(SIZES)
    hits, states = {}, []
    for r in range(3):
        with open_rank(shards, r, 3) as ld:
            take(ld.iter_with_indices(), 3 if r == 0 else 2, hits)
            states.append(ld.state_dict())
    with open_rank(shards, 0, 2) as ld0, open_rank(shards, 1, 2) as ld1:
        for ld in (ld0, ld1):
            ld.load_state_dict(states)
            take(ld.iter_with_indices(), None, hits)
    rest = n - 3 * 2 * 2
    extra = sum(c - 1 for c in hits.values() if c > 1)
    assert len(hits) == n
    assert extra == 2 + (-rest % 2)
    # on the same world size, the list resumes every rank at the slowest batch
    with open_rank(shards, 0, 3) as ld:
        ld.load_state_dict(states)
        assert ld.state_dict()["batch"] == 2


def test_same_world_size_stays_exact(shards):
    """Same world size: the batches an uninterrupted run gives, padding
    included, also in the rest of a resumed epoch."""
    with open_rank(shards, 1, 3, shuffle_block=2) as ld:
        ref = [b[-1].tolist() for b in ld.iter_with_indices()]
    with open_rank(shards, 1, 3, shuffle_block=2) as ld:
        take(ld.iter_with_indices(), 2, {})
        state = ld.state_dict()
    with open_rank(shards, 1, 3, shuffle_block=2, num_workers=3) as ld:
        ld.load_state_dict(state)
        assert [b[-1].tolist() for b in ld.iter_with_indices()] == ref[2:]
    # stop inside a resumed rest, save, and resume that at the same size
    with open_rank(shards, 0, 4) as ld:
        take(ld.iter_with_indices(), 1, {})
        four = ld.state_dict()
    with open_rank(shards, 1, 3) as ld:
        ld.load_state_dict(four)
        rest = [b[-1].tolist() for b in ld.iter_with_indices()]
        ld.load_state_dict(four)
        take(ld.iter_with_indices(), 1, {})
        inside = ld.state_dict()
    assert inside["version"] == 2 and inside["start"] == 4 * 1 * 2
    with open_rank(shards, 1, 3) as ld:
        ld.load_state_dict(json.loads(json.dumps(inside)))
        assert len(ld) == len(rest)
        assert [b[-1].tolist() for b in ld.iter_with_indices()] == rest[1:]


def test_changed_dataset_is_refused(shards, tmp_path):
    with open_rank(shards, 0, 4) as ld:
        take(ld.iter_with_indices(), 1, {})
        state = ld.state_dict()
    # The same shards in another folder: the same dataset.
    moved = [shutil.copy(p, str(tmp_path)) for p in shards]
    with open_rank(moved, 0, 2) as ld:
        ld.load_state_dict(state)
    # One sample more in the last shard, or the same count with one key
    # renamed: another dataset, on any world size.
    for sizes, rename in ((SIZES[:-1] + (SIZES[-1] + 1,), False), (SIZES, True)):
        d = str(tmp_path / ("more" if not rename else "renamed"))
        paths = write_shards(d, sizes)
        if rename:
            with tarfile.open(paths[0], "w", format=tarfile.USTAR_FORMAT) as tf:
                for i in range(SIZES[0]):
                    for ext, data in (("jpg", jpeg(i)), ("cls", b"%d" % (i % 3))):
                        info = tarfile.TarInfo("%s%03d.%s" % ("t" if i == 3 else "s", i, ext))
                        info.size = len(data)
                        tf.addfile(info, io.BytesIO(data))
        for world in (2, 4):
            with open_rank(paths, 0, world) as ld:
                with pytest.raises(ValueError, match="dataset changed"):
                    ld.load_state_dict(state)


def test_order_options_must_agree(shards):
    with open_rank(shards, 0, 4, shuffle_block=2) as ld:
        take(ld.iter_with_indices(), 1, {})
        state = ld.state_dict()
    assert state["shuffle_block"] == 2
    for kw, word in ((dict(shuffle_block=3), "shuffle_block"), (dict(shuffle_block=0),
                     "shuffle_block"), (dict(shuffle_block=2, seed=4), "seed"),
                     (dict(shuffle_block=2, shuffle=False), "shuffle")):
        with open_rank(shards, 0, 2, **kw) as ld:
            with pytest.raises(ValueError, match=word):
                ld.load_state_dict(state)
    # another batch size on another world size is fine: the position is in samples
    with open_rank(shards, 0, 2, shuffle_block=2, batch_size=3) as ld:
        ld.load_state_dict(state)
        assert len(ld) == ceil(ceil(sum(SIZES) - 8, 2), 3)


def epoch_digest(src, workers, **kw):
    with open_rank(src, kw.pop("rank"), kw.pop("world"), num_workers=workers, **kw) as ld:
        ld.set_epoch(kw.get("seed", 0) % 3)
        h = hashlib.sha256()
        for images, labels, idx in ld.iter_with_indices():
            h.update(np.ascontiguousarray(images).tobytes())
            h.update(np.asarray(labels).tobytes())
            h.update(np.asarray(idx).tobytes())
        return h.hexdigest()


@pytest.mark.parametrize("seed,rank,world,block", [(0, 0, 1, 1), (5, 1, 3, 2), (7, 2, 4, 3),
                                                   (9, 0, 2, 9)])
def test_blocks_same_for_any_worker_count(shards, seed, rank, world, block):
    kw = dict(seed=seed, rank=rank, world=world, shuffle_block=block,
              transform="random_resized_crop")
    assert epoch_digest(shards, 1, **dict(kw)) == epoch_digest(shards, 3, **dict(kw))


def test_one_shard_block_reads_shard_by_shard(shards):
    """shuffle_block=1 on one rank: each shard's samples in one run; the
    runs' order changes with the epoch. Without shuffle: the index order."""
    firsts = set()
    with open_rank(shards, 0, 1, shuffle_block=1, batch_size=5) as ld:
        for epoch in range(6):
            ld.set_epoch(epoch)
            order = [i for b in ld.iter_with_indices() for i in b[-1].tolist()]
            shard_of = [ld.sample_path(i).split(":")[0] for i in order]
            runs = [s for k, s in enumerate(shard_of) if k == 0 or s != shard_of[k - 1]]
            assert sorted(runs) == sorted(shards)
            firsts.add(runs[0])
    assert len(firsts) > 1
    with open_rank(shards, 0, 1, shuffle_block=2, shuffle=False, batch_size=5) as ld:
        assert [i for b in ld.iter_with_indices() for i in b[-1].tolist()] == \
            list(range(sum(SIZES)))


def test_blocks_need_shards(tmp_path):
    folder = tmp_path / "f" / "c0"
    folder.mkdir(parents=True)
    (folder / "a.jpg").write_bytes(jpeg(0))
    with pytest.raises(ValueError, match="shuffle_block=2 needs a source made of shards"):
        open_rank(str(tmp_path / "f"), 0, 1, shuffle_block=2)
