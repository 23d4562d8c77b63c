"""The native loader handle and the batch leases it lends.

A _Handle owns one rf_loader: it creates, configures and starts it, asks it
for batches, and destroys it. Each lent rf_batch is a _Lease that holds a
reference to its _Handle, so rf_loader_destroy runs only after the Loader let
go of the handle (close) *and* every lease died: memory handed
out is never recycled under the caller.

Fork safety: a handle remembers the process that made it. In a forked child
nothing native is ever called through it (not even destroy or release): the
library's threads do not exist there and its locks may be held.

The start (rf_loader_start) runs on a thread of its own while the calling
thread waits in short steps, so that Ctrl-C (KeyboardInterrupt), or any
exception raised there, is taken at once: the start is then cancelled
(rf_loader_cancel: the library's threads joined, transfers abandoned with
their temporary files, the cache's locks let go), the native loader
destroyed, and the exception goes on. A start that fails destroys its
loader too.
"""

import ctypes
import os
import threading

from ._errors import RingfeedError, _OptionError, status_error
from ._lib import (PARAM_NAMES, RF_AGAIN, RF_E_INVALID, RF_END_OF_EPOCH, RF_OK, param_bounds,
                   strerror)

# Captured once: __del__ may run during interpreter shutdown, when module
# globals can already be gone.
_getpid = os.getpid

# rf_loader_next_wait timeout: short enough that Ctrl-C is honoured quickly
# (Python runs signal handlers between our calls), long enough to cost nothing.
_WAIT_MS = 100
# The step of the wait for the start's thread: a signal interrupts it anyway
# (a lock's acquire is interruptible), this bounds it where one does not.
_START_STEP_S = 0.05


def _start(lib, ptr):
    """rf_loader_start(ptr) on a thread of its own (see the module's
    docstring); its status, or the exception that interrupted the wait,
    after cancelling the start and waiting for it to end. The wait is on an
    Event the thread sets once the call returned, not on Thread.join: a
    join that KeyboardInterrupt interrupts may take the thread for ended
    (bpo-45274) while the library still works in it."""
    out, done = [], threading.Event()

    def run():
        try:
            out.append(lib.rf_loader_start(ptr))
        finally:
            done.set()

    t = threading.Thread(target=run, name="ringfeed-start", daemon=True)
    try:
        t.start()
        while not done.wait(_START_STEP_S):
            pass
    except BaseException:
        lib.rf_loader_cancel(ptr)  # also when t.start() was interrupted: a cancel is for good
        while t.ident is not None and not done.is_set():  # a cancel ends it within tens of ms
            try:
                done.wait(_START_STEP_S)
            except BaseException:  # a second Ctrl-C waits too
                pass
        _join(t)
        raise
    _join(t)
    return out[0]


def _join(t):
    """Joins t, whose work is done, whatever interrupts the join."""
    while t.ident is not None:
        try:
            t.join()
            return
        except BaseException:
            pass


class _Handle:
    """Owns one native rf_loader (see the module's docstring)."""

    __slots__ = ("lib", "ptr", "pid", "lock", "leases", "stopped", "__weakref__")

    def __init__(self, lib, ptr):
        self.lib = lib
        self.ptr = ptr
        self.pid = _getpid()
        self.lock = threading.Lock()  # protects leases (__del__ may run on any thread)
        self.leases = 0               # batches lent and not yet released
        self.stopped = False          # stop() was called: a failing wait means "closed"

    @classmethod
    def open(cls, lib, source, params, source_str, strings=(), mix=None):
        """A started loader on `source` (bytes), or on the sources of `mix`
        (a ringfeed.Mix; source is then None), with `params`, a list of
        (RF_P_*, value), and `strings`, a list of (setter name, bytes or None)
        such as ("rf_loader_set_extras", b"txt,json"). An option the library
        refuses raises _OptionError."""
        ptr = lib.rf_loader_create_mix(mix.epoch_size) if mix else lib.rf_loader_create(source)
        if not ptr:
            raise MemoryError("ringfeed: rf_loader_create failed")
        h = cls(lib, ptr)
        for what, rc in (mix.add_to(lib, ptr) if mix else ()):
            msg = "ringfeed: %s rejected: %s" % (what, strerror(rc))
            detail = h.errmsg()
            if detail:
                msg += ": " + detail
            raise (_OptionError if rc == RF_E_INVALID else RingfeedError)(msg, rc)
        for setter, value in strings:
            # a tuple holds several arguments (rf_loader_set_normalize, _set_sample_fn)
            rc = getattr(lib, setter)(ptr, *(value if isinstance(value, tuple) else (value,)))
            if rc < 0:
                what = setter[len("rf_loader_set_"):]
                msg = "ringfeed: %s=%r rejected: %s" % (what, value, strerror(rc))
                detail = h.errmsg()
                if detail:
                    msg += ": " + detail
                raise (_OptionError if rc == RF_E_INVALID else RingfeedError)(msg, rc)
        for param, value in params:
            rc = lib.rf_loader_set_param(ptr, param, value)
            if rc < 0:
                msg = "ringfeed: %s=%d rejected: %s" % (PARAM_NAMES.get(param, str(param)), value,
                                                        strerror(rc))
                bounds = param_bounds(param)
                if bounds:
                    msg += " (valid range %d..%d)" % bounds
                detail = h.errmsg()
                if detail:
                    msg += ": " + detail
                raise (_OptionError if rc == RF_E_INVALID else RingfeedError)(msg, rc)
        try:
            rc = _start(lib, ptr)
            if rc < 0:
                raise h.error(rc, "start %s" % source_str, option=True)
        except BaseException:
            h.destroy()  # now, not when the traceback lets go of it
            raise
        return h

    def outstanding(self):
        with self.lock:
            return self.leases

    def errmsg(self):
        if not self.ptr:
            return ""
        m = self.lib.rf_loader_errmsg(self.ptr)
        return m.decode("utf-8", "replace") if m else ""

    def error(self, rc, what, option=False):
        """The exception for status rc of the call `what` on this loader."""
        return status_error(rc, self.errmsg(), what, option)

    def get(self, param):
        out = ctypes.c_int64()
        rc = self.lib.rf_loader_get_param(self.ptr, param, ctypes.byref(out))
        if rc < 0:
            raise self.error(rc, "get_param %s" % PARAM_NAMES.get(param, param))
        return out.value

    def tell(self):
        """(epoch, batch) of the next batch."""
        e, b = ctypes.c_int64(), ctypes.c_int64()
        rc = self.lib.rf_loader_tell(self.ptr, ctypes.byref(e), ctypes.byref(b))
        if rc < 0:
            raise self.error(rc, "tell")
        return e.value, b.value

    def tell_rest(self):
        """(start, consumed): where the current split begins in the epoch's
        global order, and the entries of it all ranks took (rf_loader_tell_rest)."""
        s, c = ctypes.c_int64(), ctypes.c_int64()
        rc = self.lib.rf_loader_tell_rest(self.ptr, ctypes.byref(s), ctypes.byref(c))
        if rc < 0:
            raise self.error(rc, "tell_rest")
        return s.value, c.value

    def next_lease(self, next_stream=None):
        """The next batch as a _Lease, or None at the end of the epoch.
        next_stream: None, or a function giving the CUDA stream to take the
        batch onto the loader's device buffers (rf_loader_next_device), or
        None from it to take a host batch; asked again at each wait."""
        lib = self.lib
        out = ctypes.c_void_p()
        while True:
            stream = next_stream() if next_stream else None
            if stream is not None:
                rc = lib.rf_loader_next_device_wait(self.ptr, stream, ctypes.byref(out), _WAIT_MS)
            else:
                rc = lib.rf_loader_next_wait(self.ptr, ctypes.byref(out), _WAIT_MS)
            if rc == RF_OK:
                return _Lease(self, out.value)
            if rc == RF_AGAIN:
                continue
            if rc == RF_END_OF_EPOCH:
                return None
            if self.stopped:
                raise RingfeedError("ringfeed: the loader was closed while waiting for a batch", rc)
            raise self.error(rc, "next")

    def stop(self):
        """Stops the loader's threads; lent batches stay readable. No-op in a
        forked child."""
        self.stopped = True  # before rf_loader_stop: a wait it ends must see it
        if self.ptr and self.pid == _getpid():
            self.lib.rf_loader_stop(self.ptr)

    def destroy(self):
        """Destroys the native loader (a handle no lease holds: a failed
        start's). No-op in a forked child, or when done already."""
        ptr, self.ptr = self.ptr, None
        try:
            if ptr and self.pid == _getpid():
                self.lib.rf_loader_destroy(ptr)
        except Exception:  # interpreter shutdown
            pass

    __del__ = destroy


class _Lease:
    """One lent rf_batch; released when the object dies (or explicitly)."""

    __slots__ = ("handle", "batch")

    def __init__(self, handle, batch):
        self.handle = handle
        self.batch = batch
        with handle.lock:
            handle.leases += 1

    def release(self):
        b, self.batch = self.batch, None
        if not b:
            return
        h = self.handle
        try:
            if h.pid == _getpid():
                h.lib.rf_batch_release(b)
            with h.lock:
                h.leases -= 1
        except Exception:  # interpreter shutdown
            pass

    __del__ = release
