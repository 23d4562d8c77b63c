"""Python semantics of ringfeed.Loader that a PyTorch user relies on without
reading the docs: copying or pickling is refused with a TypeError saying what
to do instead, and iterating again without set_epoch runs the next epoch (as a
DataLoader with shuffle=True reshuffles on every pass), on every rank alike and
across a state_dict() resume."""

import copy
import json
import math
import pickle

import pytest

import ringfeed
from rfhelpers import batch_digest, epoch_digests, run_python, tiny_jpeg_folder

DET = dict(transform="random_resized_crop", flip=True, image_size=40, batch_size=8, seed=1234,
           num_workers=2)


def make(src, **kw):
    return ringfeed.Loader(src, **dict(DET, **kw))


def digests(it):
    return [batch_digest(i, l) for i, l in it]


@pytest.fixture(scope="module")
def refs(folder):
    """Epochs 0..4 of an uninterrupted run, each placed with set_epoch."""
    with make(folder) as ld:
        return [epoch_digests(ld, e) for e in range(5)]


# ------------------------------------------------------------ copy / pickle

def test_copy_deepcopy_pickle_raise_and_the_loader_goes_on(folder, refs):
    with make(folder) as ld:
        it = iter(ld)
        first = batch_digest(*next(it))
        attempts = [("copy.copy", copy.copy), ("copy.deepcopy", copy.deepcopy),
                    ("pickle in a list", lambda x: pickle.dumps([x]))]
        attempts += [("pickle protocol %d" % p, lambda x, p=p: pickle.dumps(x, protocol=p))
                     for p in range(pickle.HIGHEST_PROTOCOL + 1)]
        for what, attempt in attempts:
            with pytest.raises(TypeError) as ei:
                attempt(ld)
            msg = str(ei.value)
            assert "ringfeed.Loader cannot be copied/pickled" in msg, (what, msg)
            assert "make a new Loader with the same arguments" in msg, (what, msg)
            assert "state_dict()/load_state_dict()" in msg, (what, msg)
        # Nothing was shared or stopped: the running iteration goes on...
        assert [first] + digests(it) == refs[0]
        assert not ld.closed and ld.stats()["batches"] >= len(ld)
        # ...and so do the next ones.
        assert digests(ld) == refs[1]


# ---------------------------------------------------- epochs without set_epoch

def test_iterating_again_runs_the_next_epoch(folder, refs):
    assert refs[0] != refs[1] and len(refs[0]) == len(refs[1])
    with make(folder) as ld:
        assert ld.epoch == 0
        it = iter(ld)
        assert ld.epoch == 0
        got0 = digests(it)
        assert ld.epoch == 1, "after an epoch, `epoch` names the next iteration's"
        got1 = [batch_digest(i, l) for i, l, _ in ld.iter_with_indices()]
        assert ld.epoch == 2
        got2 = digests(ld)
    assert (got0, got1, got2) == (refs[0], refs[1], refs[2])


def test_set_epoch_with_the_same_epoch_repeats_it(folder, refs):
    with make(folder) as ld:
        for _ in range(3):
            ld.set_epoch(3)
            assert ld.epoch == 3
            assert digests(ld) == refs[3]
            assert ld.epoch == 4
        # set_epoch wins over the advance, also after a `break`.
        for k, _ in enumerate(ld):  # epoch 4
            if k == 1:
                break
        ld.set_epoch(3)
        assert digests(ld) == refs[3]


def test_break_then_iterate_runs_the_next_epoch_from_batch_0(folder, refs):
    with make(folder) as ld:
        ld.set_epoch(1)
        for k, (images, labels) in enumerate(ld):
            if k == 2:
                break
        assert ld.epoch == 2, "a `break` ends the iteration"
        # A held zero-copy batch does not stop the move (nor is it recycled).
        assert digests(ld) == refs[2]
        assert batch_digest(images, labels) == refs[1][2]
        del images, labels
        # An iterator left alive mid-epoch: a new iteration is the next epoch
        # and invalidates it.
        old = iter(ld)  # epoch 3
        next(old)
        assert ld.epoch == 3
        assert digests(ld) == refs[4]
        with pytest.raises(ringfeed.RingfeedError, match="invalidated"):
            next(old)


# ------------------------------------------------------------ state_dict

def test_state_dict_at_an_epochs_end_resumes_at_the_next_epoch(folder, refs):
    nb = len(refs[0])
    with make(folder) as ld:
        assert (ld.state_dict()["epoch"], ld.state_dict()["batch"]) == (0, 0)
        assert digests(ld) == refs[0]
        in_loop = None
        for k, (i, l) in enumerate(ld):  # epoch 1
            if k == nb - 1:
                in_loop = ld.state_dict()  # the last batch was delivered
        after = ld.state_dict()
    assert in_loop == after
    assert (after["version"], after["epoch"], after["batch"]) == (1, 2, 0)
    # An old state dict placed at the end of epoch 1 keeps its old meaning:
    # one empty iteration, then the next epoch.
    old = dict(after, epoch=1, batch=nb)
    res = run_python("""
        import ringfeed, rfhelpers
        folder, kw, after, old = (json.loads(a) for a in sys.argv[1:5])
        out = {}
        with ringfeed.Loader(folder, **dict(kw, num_workers=3)) as ld:
            ld.load_state_dict(after)
            out["epochs"] = [ld.epoch]
            out["new"] = []
            for _ in range(2):
                out["new"].append([rfhelpers.batch_digest(i, l) for i, l in ld])
                out["epochs"].append(ld.epoch)
            ld.load_state_dict(old)
            out["old"] = [[rfhelpers.batch_digest(i, l) for i, l in ld] for _ in range(2)]
        print(json.dumps(out))
    """, args=[json.dumps(folder), json.dumps(DET), json.dumps(after), json.dumps(old)])
    assert res["new"] == [refs[2], refs[3]]
    assert res["epochs"] == [2, 3, 4]
    assert res["old"] == [[], refs[2]]


def test_mid_epoch_resume_is_exact_then_advances(folder, refs):
    k = 3
    with make(folder) as ld:
        digests(ld)  # epoch 0
        for j, _ in enumerate(ld):  # epoch 1, left after batch k - 1
            if j == k - 1:
                inside = ld.state_dict()
                break
        state = ld.state_dict()
        assert state == inside, "a checkpoint after `break` resumes mid-epoch"
        assert (state["epoch"], state["batch"]) == (1, k)
        assert ld.epoch == 2  # while the live loader's next iteration is epoch 2
    res = run_python("""
        import ringfeed, rfhelpers
        folder, kw, state = (json.loads(a) for a in sys.argv[1:4])
        with ringfeed.Loader(folder, **dict(kw, num_workers=1)) as ld:
            ld.load_state_dict(state)
            assert ld.epoch == 1
            out = [[rfhelpers.batch_digest(i, l) for i, l in ld] for _ in range(2)]
        print(json.dumps(out))
    """, args=[json.dumps(folder), json.dumps(DET), json.dumps(state)])
    assert res == [refs[1][k:], refs[2]]


# ------------------------------------------------------------ ranks in step

@pytest.fixture(scope="module")
def odd_folder(tmp_path_factory):
    """23 tiny images in 3 classes (23 is not a multiple of 2)."""
    return tiny_jpeg_folder(str(tmp_path_factory.mktemp("odd_sem") / "data"), 23, 3, 900)


@pytest.mark.parametrize("n_kind", ["even", "odd"])
def test_two_ranks_iterating_twice_stay_in_step(folder, odd_folder, n_kind):
    src, n = (folder, 48) if n_kind == "even" else (odd_folder, 23)
    ws, kw = 2, dict(image_size=16, batch_size=5, seed=8, transform="center", output="numpy")
    per_rank = math.ceil(n / ws)
    runs = []  # runs[r][e]: rank r's sample indices in its e-th iteration
    for r in range(ws):
        with ringfeed.Loader(src, rank=r, world_size=ws, **kw) as ld:
            epochs = []
            for e in range(2):
                assert ld.epoch == e
                epochs.append([s for _, _, idx in ld.iter_with_indices() for s in idx.tolist()])
            ld.set_epoch(1)
            assert [s for _, _, idx in ld.iter_with_indices() for s in idx.tolist()] == epochs[1]
        runs.append(epochs)
    for e in range(2):
        a, b = runs[0][e], runs[1][e]
        assert len(a) == len(b) == per_rank
        padded = [runs[i % ws][e][i // ws] for i in range(per_rank * ws)]
        assert sorted(padded[:n]) == list(range(n)), "epoch %d: ranks must cover the data" % e
        assert padded[n:] == padded[:per_rank * ws - n], "padding wraps like DistributedSampler"
        if n % ws == 0:
            assert not set(a) & set(b), "epoch %d: ranks share samples" % e
    assert runs[0][0] != runs[0][1], "the second iteration must be reshuffled"
