"""What the loaded libringfeed was built with, and the warning at import of
a build that lacks an optional library.

`pip install .` builds with every optional library whose -dev package is
installed and leaves out the others (CMake's RF_WITH_* = AUTO); such a build
refuses the pictures or URLs it cannot read only when it meets them.
features() lists what it has (rf_features in ringfeed.h), and importing the
package warns (BuildWarning) when a build lacks what the README's install
line asks for, naming the package that brings it.
"""

import warnings

from . import _lib

# feature -> (what is lost without it, the Debian package that brings it)
OPTIONAL = {
    "png": ("PNG pictures", "libspng-dev"),
    "webp": ("WebP pictures", "libwebp-dev"),
    "remote": ("s3:// and http(s):// shards", "libcurl4-openssl-dev"),
}


class BuildWarning(UserWarning):
    """The loaded libringfeed was built without an optional library."""


def features():
    """The names of what the loaded libringfeed can do, in the library's
    order: "jpeg", "png" (libspng), "deflate" (libdeflate: faster PNG),
    "webp" (libwebp), "bmp", "pnm", "remote" (libcurl: s3:// and http(s)://
    shards), "io_uring" (liburing), "cuda" (the CUDA paths; the runtime is
    loaded when a Loader asks for a device). See rf_features in ringfeed.h."""
    names = _lib.load().rf_features()
    return tuple(names.decode("ascii", "replace").split()) if names else ()


def missing():
    """[(feature, what is lost, Debian package)] of OPTIONAL this build lacks."""
    have = set(features())
    return [(n, what, deb) for n, (what, deb) in OPTIONAL.items() if n not in have]


def warn_missing():
    """The import's warning (see above); nothing when the library cannot be
    loaded: the first Loader then says why."""
    try:
        gone = missing()
    except OSError:
        return
    if not gone:
        return
    warnings.warn(
        "ringfeed: %s was built without %s, so %s fail; install %s and reinstall the package "
        "(pip install --force-reinstall .); ringfeed.features() lists what this build has"
        % (_lib.path(), _words('"%s"' % n for n, _, _ in gone),
           _words(what for _, what, _ in gone), " ".join(deb for _, _, deb in gone)),
        BuildWarning, stacklevel=3)


def _words(items):
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
