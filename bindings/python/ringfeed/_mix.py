"""ringfeed.Mix and ringfeed.Source: several sources read by one Loader,
each with its share of an epoch (docs/mixing.md).

    loader = ringfeed.Loader(ringfeed.Mix([ringfeed.Source("a/", proportion=0.7),
                                           ringfeed.Source("s3://b/t-{00..99}.tar",
                                                           proportion=0.3)]),
                             batch_size=256, return_source=True)

The sizing is MosaicML streaming's: proportion (relative, of the epoch),
repeat (times over the source) or choose (a sample count); the library
(lib/sampler_mix.c) turns them into each source's entries per epoch and
the epoch's order. Nothing here touches the data: these objects only hold
what the Loader hands to rf_loader_add_source and rf_loader_set_source_param.
"""

import numbers
import os

from . import _lib
from ._redact import shown_repr

_SIZES = {"whole": _lib.RF_MIX_WHOLE, "proportion": _lib.RF_MIX_PROPORTION,
          "repeat": _lib.RF_MIX_REPEAT, "choose": _lib.RF_MIX_CHOOSE}


def _spec(source):
    """What rf_loader_add_source takes: a path, or a list of paths joined by newlines."""
    if isinstance(source, (list, tuple)):
        if not source:
            raise ValueError("ringfeed.Source: the list of paths is empty")
        parts = [os.fsdecode(p) for p in source]
        if any("\n" in p or not p for p in parts):
            raise ValueError("ringfeed.Source: bad path in %s" % shown_repr(source))
        return os.fsencode("\n".join(parts))
    try:
        spec = os.fsencode(source)
    except TypeError:
        raise TypeError("ringfeed.Source: a source is a path, a pattern or a list of them, "
                        "not %s" % shown_repr(source)) from None
    if not spec:
        raise ValueError("ringfeed.Source: an empty path")
    return spec


class Source:
    """One source of a Mix: anything Loader reads (an image folder, a list
    file, local or remote tar shards as a path, pattern or list; or record
    files, when the Loader has record_size: records and images are not mixed
    in one Loader), and its share of an epoch, MosaicML streaming's way (at
    most one of):

    proportion  a relative weight: the source's share of the epoch (the
                Mix's epoch_size, by default the sources' sizes summed) is
                floor(epoch_size * proportion / sum of proportions), the
                rounding's shortfall one sample each to distinct sources
                drawn from the seed. Either every source of a Mix has a
                proportion, or none has.
    repeat      times over the source, fractional allowed:
                floor(repeat * samples) (2.5: twice, then half of it).
    choose      a number of samples.
    (none)      the source once; with the Mix's epoch_size and no source
                sized, all sources are taken in proportion to their sizes.

    Within a source an epoch draws without replacement while it can: a
    share of q full passes and r more samples reads every sample q times,
    each pass in its own shuffle, then r distinct samples; no sample comes
    twice before a full pass. The draw is keyed on (seed, epoch, source),
    so every epoch takes other samples of a down-sampled source.

    label_offset (default 0) is added to the source's labels (unlabeled
    shards' -1 stays), so that sources can keep disjoint class ranges.
    shuffle_block (default None: the Loader's shuffle_block for a source
    of tar shards or record files, 0 for a folder or a list file) is the
    shard-aware shuffle of this source alone (see Loader).
    """

    __slots__ = ("source", "size", "amount", "label_offset", "shuffle_block", "spec")

    def __init__(self, source, proportion=None, repeat=None, choose=None, label_offset=0,
                 shuffle_block=None):
        given = [(k, v) for k, v in (("proportion", proportion), ("repeat", repeat),
                                     ("choose", choose)) if v is not None]
        if len(given) > 1:
            raise ValueError("ringfeed.Source(%s): give at most one of proportion, repeat, "
                             "choose (got %s)"
                             % (shown_repr(source), ", ".join(k for k, _ in given)))
        self.source = source
        self.spec = _spec(source)
        self.size, self.amount = "whole", 0.0
        if given:
            key, value = given[0]
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError("ringfeed.Source(%s): %s must be a number, not %r"
                                % (shown_repr(source), key, value))
            if key == "choose" and (not float(value).is_integer() or value < 0):
                raise ValueError("ringfeed.Source(%s): choose must be a whole number >= 0, "
                                 "not %r" % (shown_repr(source), value))
            if key != "choose" and not value > 0:
                raise ValueError("ringfeed.Source(%s): %s must be > 0, not %r"
                                 % (shown_repr(source), key, value))
            self.size, self.amount = key, float(value)
        if isinstance(label_offset, bool) or not isinstance(label_offset, numbers.Integral) \
                or label_offset < 0:
            raise ValueError("ringfeed.Source(%s): label_offset must be an integer >= 0, not %r"
                             % (shown_repr(source), label_offset))
        self.label_offset = int(label_offset)
        if shuffle_block is not None and (isinstance(shuffle_block, bool) or not isinstance(
                shuffle_block, numbers.Integral) or shuffle_block < 0):
            raise ValueError("ringfeed.Source(%s): shuffle_block must be None or an integer "
                             ">= 0, not %r" % (shown_repr(source), shuffle_block))
        self.shuffle_block = None if shuffle_block is None else int(shuffle_block)

    def __repr__(self):
        extra = "" if self.size == "whole" else ", %s=%r" % (
            self.size, int(self.amount) if self.size == "choose" else self.amount)
        if self.label_offset:
            extra += ", label_offset=%d" % self.label_offset
        if self.shuffle_block is not None:
            extra += ", shuffle_block=%d" % self.shuffle_block
        return "ringfeed.Source(%s%s)" % (shown_repr(self.source), extra)


class Mix:
    """Several sources read by one Loader: ringfeed.Loader(ringfeed.Mix([...]), ...).

    sources: Source objects (a plain path is Source(path): the whole source
    once). epoch_size: the entries of an epoch when the sources have
    proportions (default: the sources' sizes summed); with repeat, choose or
    none, leave it None (the epoch is their sum).

    The epoch's order is a pure function of (seed, epoch): the sources'
    shares interleaved at random (shuffle=True) or evenly, then split
    across ranks, batched and resumed exactly as a single source's order,
    byte-identical for any num_workers; a state dict records the mixture and
    a Loader of another mixture refuses it. Sample indices are global
    (source 0's samples first, then source 1's, ...); return_source=True
    adds each sample's source number to every batch, and stats()["sources"]
    counts samples delivered and bad samples per source.
    """

    __slots__ = ("sources", "epoch_size")

    def __init__(self, sources, epoch_size=None):
        try:
            items = list(sources)
        except TypeError:
            raise TypeError("ringfeed.Mix: sources must be a list of ringfeed.Source, not %r"
                            % (sources,)) from None
        if not items:
            raise ValueError("ringfeed.Mix: no sources")
        self.sources = tuple(s if isinstance(s, Source) else Source(s) for s in items)
        if epoch_size is not None and (isinstance(epoch_size, bool) or not isinstance(
                epoch_size, numbers.Integral) or epoch_size < 1):
            raise ValueError("ringfeed.Mix: epoch_size must be None or an integer >= 1, not %r"
                             % (epoch_size,))
        self.epoch_size = 0 if epoch_size is None else int(epoch_size)

    def add_to(self, lib, ptr):
        """Adds the sources to the native mixture loader ptr; yields
        (what, status) for each call that failed (the caller raises)."""
        for i, s in enumerate(self.sources):
            rc = lib.rf_loader_add_source(ptr, s.spec, _SIZES[s.size], s.amount)
            if rc < 0:
                yield "source %d (%s)" % (i, shown_repr(s.source)), rc
                return
            for param, value in ((_lib.RF_SP_LABEL_OFFSET, s.label_offset),
                                 (_lib.RF_SP_SHUFFLE_BLOCK, s.shuffle_block)):
                if value is not None and (value or param == _lib.RF_SP_SHUFFLE_BLOCK):
                    rc = lib.rf_loader_set_source_param(ptr, i, param, value)
                    if rc < 0:
                        yield "source %d (%s)" % (i, shown_repr(s.source)), rc
                        return

    def __repr__(self):
        return "ringfeed.Mix([%s]%s)" % (", ".join(map(repr, self.sources)),
                                         ", epoch_size=%d" % self.epoch_size
                                         if self.epoch_size else "")
