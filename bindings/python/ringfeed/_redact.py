"""What a source may show of itself in messages and reprs, as the library
shows it (lib/util/redact.h): a URL's user:password and an http(s) query or
fragment become ***. Nothing else is changed."""

import os
import re

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)(.*)$", re.S)


def shown(path):
    """One path or URL (str) as it may be shown."""
    m = _URL.match(path)
    if not m:
        return path
    scheme, auth, rest = m.groups()
    if "@" in auth:
        auth = "***@" + auth.rsplit("@", 1)[1]
    if scheme.lower() in ("http://", "https://"):
        cut = min([i for i in (rest.find("?"), rest.find("#")) if i >= 0], default=-1)
        if cut >= 0:
            rest = rest[:cut + 1] + "***"
    return scheme + auth + rest


def shown_repr(source):
    """repr() of a source as a user gave it (a path, bytes, a list of them),
    each URL in it shown as above."""
    try:
        if isinstance(source, (list, tuple)):
            return "[%s]" % ", ".join(repr(shown(os.fsdecode(p))) for p in source)
        return repr(shown(os.fsdecode(source)))
    except TypeError:
        return "<%s>" % type(source).__name__
