"""Fixtures for the binding's tests.

The package is imported from this source tree. When libringfeed cannot be
loaded the tests are skipped, except under the CTest harness (RINGFEED_LIBRARY
set), where that is a failure.
"""

import faulthandler
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bindings/python: the package in this tree
sys.path.insert(0, HERE)

import rfhelpers  # noqa: E402


def _load_error():
    import ringfeed._lib
    try:
        ringfeed._lib.load()
        return None
    except OSError as e:
        return str(e)


LOAD_ERROR = _load_error()


def pytest_collection_modifyitems(config, items):
    if LOAD_ERROR is None:
        return
    if os.environ.get("RINGFEED_LIBRARY"):
        return  # the tests themselves fail: a set but unloadable library is an error
    skip = pytest.mark.skip(reason="libringfeed cannot be loaded (build it, or set "
                                   "RINGFEED_LIBRARY): " + " ".join(LOAD_ERROR.split()))
    for item in items:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def _watchdog():
    """A hang is a failure with stacks, not a stuck CI job."""
    faulthandler.dump_traceback_later(240, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session", autouse=True)
def lib_ok():
    if LOAD_ERROR is not None:
        pytest.fail("RINGFEED_LIBRARY is set but libringfeed cannot be loaded:\n" + LOAD_ERROR)


@pytest.fixture(scope="session")
def gen():
    return rfhelpers.find_gen()


@pytest.fixture(scope="session")
def folder(tmp_path_factory, gen, lib_ok):
    """A small image folder: 4 classes x 12 (48 images, ~120x90, varied).
    Made by rf-gen-folder when available, else by PIL."""
    root = str(tmp_path_factory.mktemp("folder") / "data")
    if gen:
        rfhelpers.gen_folder(gen, root, 4, 12, 120, 90, seed=3)
    else:
        rfhelpers.pil_folder(root, 4, 12, 120, 90, seed=3)
    with open(os.path.join(root, "README.txt"), "w") as f:  # not a sample
        f.write("not an image\n")
    return root


@pytest.fixture(scope="session")
def pil_small(tmp_path_factory, lib_ok):
    """3 classes x 5 PIL-made images with varied sizes and kinds (gray,
    portrait, progressive, 4:4:4): 15 samples (not a multiple of 2 or 4)."""
    root = str(tmp_path_factory.mktemp("pil") / "data")
    return rfhelpers.pil_folder(root, 3, 5, 100, 80, seed=7)
