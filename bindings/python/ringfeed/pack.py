"""python -m ringfeed.pack: runs the ringfeed-pack program with the same arguments.

ringfeed-pack (tools/pack.c) writes any source the loader reads (an image
folder, a list file, tar shards) as WebDataset tar shards of bounded-size
JPEGs, and OUT/manifest.json: per shard its size, the SHA-256 of its bytes
("sha256", for checking copies) and the index the loader uses instead of
walking the shard (docs/remote.md says what it checks first);
`python -m ringfeed.pack --help` lists its options. The program is
looked for, in order: $RINGFEED_PACK; beside the libringfeed the package
loads (a build folder), or in the bin/ folder next to its lib/ folder (an
installed copy); the repository's build/; then $PATH.
"""

import os
import shutil
import subprocess
import sys

from . import _lib

EXE = "ringfeed-pack"
_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("RINGFEED_PACK")
    if env:
        yield env
    try:
        libdir = os.path.dirname(os.path.realpath(_lib.path()))
    except OSError:
        libdir = None
    if libdir:
        yield os.path.join(libdir, EXE)
        yield os.path.join(os.path.dirname(libdir), "bin", EXE)
    yield os.path.normpath(os.path.join(_HERE, "..", "..", "..", "build", EXE))
    found = shutil.which(EXE)
    if found:
        yield found


def executable():
    """Path of the ringfeed-pack program; OSError when there is none."""
    tried = []
    for p in _candidates():
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
        tried.append(p)
    raise OSError("ringfeed-pack not found (tried: %s); build it (cmake --build build) or set "
                  "RINGFEED_PACK to its path" % ", ".join(tried))


def run(args, **kwargs):
    """Runs ringfeed-pack with the argument list args; returns the
    subprocess.CompletedProcess (keyword arguments go to subprocess.run)."""
    return subprocess.run([executable()] + [str(a) for a in args], **kwargs)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        exe = executable()
    except OSError as e:
        print("ringfeed.pack: %s" % e, file=sys.stderr)
        return 1
    return subprocess.call([exe] + list(argv))


if __name__ == "__main__":
    sys.exit(main())
