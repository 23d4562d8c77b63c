"""python -m ringfeed.pack: runs the ringfeed-pack program with the same arguments.

ringfeed-pack (tools/pack.c) writes any source the loader reads (an image
folder, a list file, tar shards), or tables (Parquet files in the Hugging
Face layout, Arrow files, a folder datasets' save_to_disk wrote: read with
pyarrow by ringfeed._pack_tables, which the program starts), as WebDataset
tar shards of bounded-size JPEGs or raw pixels (`--store raw|auto`: uint8
(H, W, 3) arrays in .npy members, which the loader reads with no decode and
webdataset decodes as they are), and OUT/manifest.json: per shard its size,
the SHA-256 of its bytes ("sha256", for checking copies), the kinds of
pictures it holds, each sample's source, and the index the loader uses
instead of walking the shard (docs/remote.md says what it checks first).
`--part K/N` packs one of N slices on one machine and `ringfeed-pack merge
OUT` joins them (docs/pack.md has the recipes for SLURM and Ray).
`python -m ringfeed.pack --help` lists its options. The program is looked
for, in order: $RINGFEED_PACK; beside the libringfeed the package loads (a
build folder), or in the bin/ folder next to its lib/ folder (an installed
copy); the repository's build/; then $PATH. It runs with RINGFEED_PYTHON set
to this interpreter, so its table reader has this Python's pyarrow.
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


def environment(env=None):
    """The environment ringfeed-pack runs in: env (default os.environ) with
    RINGFEED_PYTHON (this interpreter) and RINGFEED_PYTHONPATH (the folder
    holding this package) unless already set, so that the table reader it
    starts for Parquet and Arrow input (ringfeed._pack_tables) is this
    package under this Python, with its pyarrow."""
    env = dict(os.environ if env is None else env)
    env.setdefault("RINGFEED_PYTHON", sys.executable)
    env.setdefault("RINGFEED_PYTHONPATH", os.path.dirname(_HERE))
    return env


def run(args, **kwargs):
    """Runs ringfeed-pack with the argument list args; returns the
    subprocess.CompletedProcess (keyword arguments go to subprocess.run;
    env, if given, passes through environment())."""
    kwargs["env"] = environment(kwargs.get("env"))
    return subprocess.run([executable()] + [str(a) for a in args], **kwargs)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        exe = executable()
    except OSError as e:
        print("ringfeed.pack: %s" % e, file=sys.stderr)
        return 1
    return subprocess.call([exe] + list(argv), env=environment())


if __name__ == "__main__":
    sys.exit(main())
