"""Per-sample callbacks (sample_fn): a Numba @cfunc from examples/ and plain
Python callables run on the decode workers; their effect is in the output,
the same for 1 and 3 workers; a nonzero return fails the sample under
on_error, never the process; stats() counts their time.
"""

import importlib.util
import os

import numpy as np
import pytest

import ringfeed
from rfhelpers import REPO, pil_folder

S = 48


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return pil_folder(str(tmp_path_factory.mktemp("fn") / "train"), 2, 10, 80, 60, seed=9)


@pytest.fixture(scope="module")
def example():
    pytest.importorskip("numba")
    path = os.path.join(REPO, "examples", "numba_sample_fn.py")
    spec = importlib.util.spec_from_file_location("numba_sample_fn", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make(folder, **kw):
    args = dict(batch_size=5, image_size=S, seed=3, num_workers=2, output="numpy",
                augment=[ringfeed.RandAugment(1, 5)])
    args.update(kw)
    return ringfeed.Loader(folder, **args)


def epoch(ld):
    out = {}
    for images, _, idx in ld.iter_with_indices():
        for k, i in enumerate(idx):
            out[int(i)] = np.array(images[k])
    return out


def test_numba_cfunc_effect_and_seed(folder, example):
    plain = epoch(make(folder))
    ld = make(folder, sample_fn=example.invert_patch)
    got = epoch(ld)
    ld.set_epoch(0)
    for i, img in got.items():
        ex = ld.explain(i)
        assert ex["sample_fn"] is True
        top, left, side = example.patch_place(ex["sample_fn_seed"], S, S)
        want = plain[i].copy()
        want[top:top + side, left:left + side] = 255 - want[top:top + side, left:left + side]
        assert np.array_equal(img, want), i
    st = ld.stats()
    assert st["stage_seconds"]["sample_fn"] > 0


def test_numba_cfunc_same_for_1_and_3_workers(folder, example):
    a = epoch(make(folder, sample_fn=example.invert_patch, num_workers=1))
    b = epoch(make(folder, sample_fn=example.invert_patch, num_workers=3))
    assert a.keys() == b.keys() and all(np.array_equal(a[i], b[i]) for i in a)


def test_nonzero_return_is_a_sample_error(folder, example):
    ld = make(folder, sample_fn=example.fail_every_fifth)
    with pytest.raises(ringfeed.RingfeedError, match="sample_fn returned 7"):
        for _ in ld:
            pass
    skip = make(folder, sample_fn=example.fail_every_fifth, on_error="skip")
    got = epoch(skip)
    assert len(got) > 0 and all(i % 5 != 0 for i in got)
    st = skip.stats()
    assert st["errors_count"] >= 4 and "sample_fn returned 7" in st["errors"][0]["reason"]


def test_python_callable(folder):
    calls = []

    def brighten_red(pixels, seed, info):
        calls.append(info["worker"])
        pixels[..., 0] = np.minimum(pixels[..., 0].astype(np.int32) + 10, 255)
        return 0

    plain = epoch(make(folder))
    got = epoch(make(folder, sample_fn=brighten_red))
    for i in plain:
        want = plain[i].copy()
        want[..., 0] = np.minimum(want[..., 0].astype(np.int32) + 10, 255)
        assert np.array_equal(got[i], want)
    assert len(calls) == len(plain)

    def broken(pixels, seed, info):
        raise RuntimeError("boom")

    with pytest.raises(ringfeed.RingfeedError, match="sample_fn returned -1"):
        for _ in make(folder, sample_fn=broken):
            pass


def test_bad_sample_fn_is_refused(folder):
    with pytest.raises(TypeError, match="sample_fn"):
        make(folder, sample_fn="not a function")
