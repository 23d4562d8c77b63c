"""The iterator of one epoch's batches (what iter(loader) returns).

A plain iterator object, not a generator: a generator that raises is
finished, so the first RingfeedError (a bad sample under on_error="raise",
a shard that cannot be fetched) would end the epoch, and the next next()
would raise StopIteration with the rest of the epoch silently skipped. The
library consumes a batch that failed (rf_loader_next in ringfeed.h) and
goes on with the next one; so does this iterator: after an error, next()
on the same iterator yields the batch after the failed one, in the same
epoch, and StopIteration comes only at the epoch's end.
"""

from ._errors import RingfeedError
from ._lib import RF_E_STATE


class EpochIterator:
    """Batches of one epoch of `loader` (see the module's docstring)."""

    __slots__ = ("_loader", "_generation", "_with_indices", "_next_stream", "_done",
                 "__weakref__")

    def __init__(self, loader, generation, with_indices):
        self._loader = loader
        self._generation = generation
        self._with_indices = with_indices
        self._next_stream = getattr(loader._output, "next_stream", None)
        self._done = False

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        loader = self._loader
        if loader._generation != self._generation:
            raise RingfeedError("ringfeed: this iterator was invalidated: the loader was "
                                "repositioned (set_epoch, load_state_dict, a new iteration) "
                                "or closed", RF_E_STATE)
        h = loader._live()
        lease = h.next_lease(self._next_stream)  # an error here consumed its batch
        if lease is None:
            self._done = True
            raise StopIteration
        # No explicit release on error: a view may already hold the lease;
        # it is released when the last reference dies.
        return loader._output.batch(h, lease, loader._form, self._with_indices)

    @property
    def running(self):
        """False once the epoch's end was reached."""
        return not self._done
