#!/usr/bin/env bash
# pip_install test: what a Python user does first. In a fresh virtualenv (no
# system site packages), `pip install` a clean copy of the repository - pip
# fetches scikit-build-core and numpy from PyPI, scikit-build-core builds
# libringfeed with CMake - then, outside the source tree:
#   - ringfeed and its libringfeed.so come from the virtualenv's site-packages,
#     the .so has no RPATH/RUNPATH and does not need the CUDA runtime;
#   - ringfeed.__version__ == ringfeed.library_version() == pip's metadata
#     version == the project version (include/ringfeed.h);
#   - the package's own copy wins over a RINGFEED_LIBRARY that points elsewhere;
#   - one epoch of a generated JPEG folder comes out as numpy arrays (no torch there);
#   - ringfeed-pack is installed next to the library: `python -m ringfeed.pack`
#     packs that folder, and the loader reads the shards through the manifest.
#
# Usage: test_pip_install.sh PYTHON SOURCE_DIR WORK_DIR RF_GEN_FOLDER VERSION
# PYTHON must have the venv module (Debian: python3-venv). The work folder is
# removed when the test passes and kept for a look when it fails.
set -euo pipefail

if [ $# -ne 5 ]; then
    echo "usage: $0 PYTHON SOURCE_DIR WORK_DIR RF_GEN_FOLDER VERSION" >&2
    exit 2
fi
PY=$1 SRC=$2 WORK=$3 GEN=$4 EXPECT=$5

fail() {
    echo "pip_install: FAILED: $*" >&2
    echo "pip_install: work folder kept: $WORK" >&2
    exit 1
}
step() { echo "pip_install: $* ($SECONDS s)"; }

# Nothing from the developer's environment may decide what gets loaded.
unset RINGFEED_LIBRARY PYTHONPATH PYTHONHOME VIRTUAL_ENV PIP_REQUIRE_VIRTUALENV
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1

rm -rf "$WORK"
mkdir -p "$WORK/src"

# 1. a clean copy: the files a commit would hold (tracked, plus new files that
# are not ignored), so no build/, virtualenv or stray library comes along.
step "copying the repository"
if git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
        tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$WORK/src"
else
    tar -C "$SRC" --exclude='./build*' --exclude='./.venv*' --exclude='./.git' -cf - . |
        tar -xf - -C "$WORK/src"
fi
[ -f "$WORK/src/pyproject.toml" ] || fail "no pyproject.toml in the copy of $SRC"

# 2. a fresh virtualenv that sees nothing of the system's Python packages
step "creating a virtualenv with $PY"
"$PY" -m venv "$WORK/venv" >"$WORK/venv.log" 2>&1 ||
    fail "$PY -m venv failed (Debian: apt-get install python3-venv):
$(cat "$WORK/venv.log")"
VPY=$WORK/venv/bin/python
if "$VPY" -c "import numpy" 2>/dev/null; then
    fail "the fresh virtualenv already imports numpy: it is not isolated from the system"
fi

# 3. PyPI must answer: say so plainly rather than as a build failure
step "checking that PyPI answers"
if ! timeout 180 "$VPY" -m pip download --no-deps -q -d "$WORK/probe" scikit-build-core \
        >"$WORK/probe.log" 2>&1; then
    fail "cannot reach PyPI (pip install . fetches scikit-build-core and numpy from it):
$(tail -n 20 "$WORK/probe.log")"
fi

# 4. pip install . (from the copy)
step "pip install (builds libringfeed with CMake; a minute or two on 2 cores)"
if ! (cd "$WORK" && "$VPY" -m pip install -v "$WORK/src") >"$WORK/pip.log" 2>&1; then
    tail -n 80 "$WORK/pip.log" >&2
    fail "pip install failed (full log: $WORK/pip.log)"
fi
grep -E "^Successfully installed|Created wheel" "$WORK/pip.log" || true

# 5. the installed library: no RPATH/RUNPATH, no CUDA runtime needed
SITE=$("$VPY" -c "import sysconfig; print(sysconfig.get_paths()['platlib'])")
SO=$SITE/ringfeed/libringfeed.so
[ -f "$SO" ] || fail "$SO was not installed"
if command -v readelf >/dev/null 2>&1; then
    dyn=$(readelf -d "$SO")
    echo "$dyn" | grep -E "NEEDED|SONAME|RPATH|RUNPATH" || true
    if echo "$dyn" | grep -qE "\((RPATH|RUNPATH)\)"; then
        fail "$SO has an RPATH/RUNPATH"
    fi
    if echo "$dyn" | grep -q "libcudart"; then
        fail "$SO needs the CUDA runtime: the wheel would not load on a machine without it"
    fi
fi

# 6. a small real image folder
step "generating a JPEG folder"
"$GEN" "$WORK/data" --classes 3 --per-class 7 --width 96 --height 72 --seed 5 >/dev/null ||
    fail "$GEN failed"

# 7. use it as a user would, from outside the source tree
step "importing ringfeed and loading one epoch"
cat >"$WORK/check.py" <<'PY'
import importlib.metadata
import os
import sys
import sysconfig

expect, data, samples = sys.argv[1], sys.argv[2], int(sys.argv[3])

import numpy as np
import ringfeed

site = os.path.realpath(sysconfig.get_paths()["platlib"])


def inside_site(p):
    return os.path.realpath(p).startswith(site + os.sep)


assert inside_site(ringfeed.__file__), "ringfeed imported from %s, not %s" % (
    ringfeed.__file__, site)
lib = ringfeed.library_path()
assert inside_site(lib), "libringfeed loaded from %s, not from %s" % (lib, site)
assert os.path.dirname(os.path.realpath(lib)) == os.path.dirname(
    os.path.realpath(ringfeed.__file__)), lib
versions = {"ringfeed.__version__": ringfeed.__version__,
            "ringfeed.library_version()": ringfeed.library_version(),
            "importlib.metadata.version": importlib.metadata.version("ringfeed")}
assert set(versions.values()) == {expect}, "expected %s everywhere: %s" % (expect, versions)

files = [str(f) for f in importlib.metadata.files("ringfeed")]
assert "ringfeed/libringfeed.so" in files, files
assert "ringfeed/ringfeed-pack" in files, files
assert not [f for f in files if "test" in os.path.basename(f)], files

try:
    import torch  # noqa: F401
    raise AssertionError("torch is importable in the fresh virtualenv")
except ImportError:
    pass

batch = 4
seen, labels = 0, []
with ringfeed.Loader(data, batch_size=batch, image_size=32, transform="center",
                     shuffle=False, num_workers=2) as loader:
    batches = len(loader)
    assert batches == (samples + batch - 1) // batch, batches
    for images, lbl in loader:
        assert isinstance(images, np.ndarray) and images.dtype == np.uint8, type(images)
        assert images.shape[1:] == (32, 32, 3) and images.shape[0] == len(lbl), images.shape
        assert isinstance(lbl, np.ndarray) and lbl.dtype == np.int64, type(lbl)
        assert images.std() > 0, "a blank batch"
        seen += len(lbl)
        labels.extend(int(x) for x in lbl)
    stats = loader.stats()
assert seen == samples, (seen, samples)
assert sorted(set(labels)) == [0, 1, 2], labels
print("pip_install: %d images in %d batches, io %s; %s; library %s" % (
    seen, batches, stats.get("io_backend"), versions, lib))
PY
(cd "$WORK" && "$VPY" check.py "$EXPECT" "$WORK/data" 21) || fail "the installed package does not work"

# 8. ringfeed-pack from the wheel, as a user runs it
step "python -m ringfeed.pack"
(cd "$WORK" && "$VPY" -m ringfeed.pack --help | grep -q "usage: ringfeed-pack") ||
    fail "python -m ringfeed.pack --help failed"
PACKER=$(cd "$WORK" && "$VPY" -c "import ringfeed.pack; print(ringfeed.pack.executable())") ||
    fail "ringfeed.pack.executable() failed"
[ "$(dirname "$(realpath "$PACKER")")" = "$(dirname "$(realpath "$SO")")" ] ||
    fail "ringfeed-pack found at $PACKER, not next to $SO"
(cd "$WORK" && "$VPY" -m ringfeed.pack --max-side 48 --shard-count 8 --workers 2 \
    "$WORK/data" "$WORK/packed") || fail "python -m ringfeed.pack failed"
(cd "$WORK" && "$VPY" - "$WORK/packed" <<'PY'
import sys
import ringfeed
with ringfeed.Loader(sys.argv[1] + "/shard-*.tar", batch_size=4, image_size=32,
                     transform="center", shuffle=False) as ld:
    n = sum(len(lbl) for _, lbl in ld)
    st = ld.stats()
assert n == 21, n
assert st["shards"] == st["shards_from_manifest"] == 3, st
print("pip_install: ringfeed-pack wrote 21 samples in 3 shards, indexed from the manifest")
PY
) || fail "the packed shards do not load"

# 9. the package's own copy comes first, even when RINGFEED_LIBRARY says otherwise
got=$(cd "$WORK" && RINGFEED_LIBRARY=/nonexistent/libringfeed.so "$VPY" -c \
    "import ringfeed; print(ringfeed.library_path())") ||
    fail "import with RINGFEED_LIBRARY set elsewhere failed"
[ "$(realpath "$got")" = "$(realpath "$SO")" ] ||
    fail "with RINGFEED_LIBRARY set, the package loaded $got instead of its own $SO"

rm -rf "$WORK"
step "passed"
