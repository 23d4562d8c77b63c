"""The binding's exceptions, and how a library status becomes one.

RingfeedError carries the RF_E_* status. An option the library refuses
(RF_E_INVALID from rf_loader_set_param or rf_loader_start: a bound, rank not
below world_size, records with a transform, ...) raises _OptionError, which
is a RingfeedError *and* a ValueError: the same type as the checks only
Python can make (an unknown transform name, a bad device string), so that a
caller catches every option error one way, wherever it was found.
"""

from . import _lib


class RingfeedError(RuntimeError):
    """An error reported by libringfeed; `status` is the RF_E_* code (or None)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class _OptionError(RingfeedError, ValueError):
    """An option value the library refused (RF_E_INVALID)."""


def status_error(rc, detail, what, option=False):
    """The exception for status `rc`: the library's own message (`detail`,
    from rf_loader_errmsg) when there is one, with the status's name unless
    it already says it; else `what` failed with the status's name."""
    name = _lib.strerror(rc)
    if not detail:
        msg = "ringfeed: %s: %s" % (what, name)
    elif name in detail:
        msg = detail
    else:
        msg = "%s [%s]" % (detail, name)
    cls = _OptionError if option and rc == _lib.RF_E_INVALID else RingfeedError
    return cls(msg, rc)
