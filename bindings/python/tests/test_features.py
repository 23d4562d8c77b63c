"""ringfeed.features(): what the loaded library was built with, and what a
build without an optional library does - it says so at import (a
BuildWarning naming the missing features and their -dev packages), and a
PNG, a WebP or an s3:// / http:// source then fails with an error that
names the missing feature. Each check follows the build it runs on: the
full build (CI) checks that the features are there and work; a build made
with -DRF_WITH_SPNG=OFF -DRF_WITH_WEBP=OFF -DRF_WITH_CURL=OFF checks the
messages (RINGFEED_LIBRARY pointing at it).
"""

import subprocess
import sys

import numpy as np
import pytest

import rfhelpers
import ringfeed


def test_features_list_what_was_built():
    f = ringfeed.features()
    assert isinstance(f, tuple) and f == tuple(ringfeed._lib.load().rf_features().decode().split())
    assert {"jpeg", "bmp", "pnm"} <= set(f)
    order = ["jpeg", "png", "deflate", "webp", "bmp", "pnm", "remote", "io_uring", "cuda"]
    assert set(f) <= set(order) and list(f) == [n for n in order if n in f]


def _import_warnings():
    r = subprocess.run([sys.executable, "-W", "always", "-c", "import ringfeed"],
                       env=rfhelpers.child_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stderr


def test_import_warns_of_what_is_missing():
    err = _import_warnings()
    missing = [n for n, what, deb in ringfeed._features.missing()]
    if not missing:
        assert "BuildWarning" not in err, err
        return
    assert "BuildWarning" in err, err
    for n, what, deb in ringfeed._features.missing():
        assert '"%s"' % n in err and deb in err, err


def _picture_folder(root, ext):
    from PIL import Image
    for i in range(2):
        arr = rfhelpers.photo_like(24, 20, seed=i)
        p = root / ("c%d" % i)
        p.mkdir(parents=True)
        Image.fromarray(arr).save(str(p / ("x." + ext)), **({"lossless": True} if ext == "webp"
                                                            else {}))
    return str(root)


@pytest.mark.parametrize("ext,name", [("png", "png"), ("webp", "webp")])
def test_a_picture_format(tmp_path, ext, name):
    pytest.importorskip("PIL")
    root = _picture_folder(tmp_path / "f", ext)
    with ringfeed.Loader(root, batch_size=2, image_size=16, shuffle=False) as ld:
        if name in ringfeed.features():
            images, labels = next(iter(ld))
            assert np.asarray(images).shape == (2, 16, 16, 3)
        else:
            with pytest.raises(ringfeed.RingfeedError, match='lack "%s"' % name):
                next(iter(ld))


def test_a_remote_source(tmp_path):
    if "remote" in ringfeed.features():
        pytest.skip("remote shards are read by test_remote*.py on this build")
    with pytest.raises(ringfeed.RingfeedError, match='lack "remote"'):
        ringfeed.Loader("http://127.0.0.1:9/t-{0..1}.tar", cache_dir=str(tmp_path / "c"))
