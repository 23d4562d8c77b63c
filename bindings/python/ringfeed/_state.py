"""Loader.state_dict / load_state_dict: the dict, its checks, and where a
resume starts, on the same world size or another.

The dict holds plain ints, bools and strings (JSON-serialisable):

  version       1; 2 when "start" is there (older bindings refuse it)
  seed, epoch, batch, world_size, rank, num_samples, batch_size
  consumed      entries of the epoch's global order that all ranks took, when
                every rank stands at this batch (lockstep, as under DDP):
                start + world_size * batch * batch_size, or num_samples once
                the epoch's batches were all taken (rf_loader_tell_rest)
  drop_last, shuffle
  fingerprint   16 hex digits: rf_loader_fingerprint of the index (sample
                count, names without directories, sizes, labels)
  start         only when not 0: the position is in the rest of an epoch
                resumed on another world size, split from this entry on
  sampler_drop_last   only when True
  shuffle_block       only when not 0
  buckets, unit       only with aspect-ratio buckets: the buckets ([height,
                width] pairs) and the unit of the position's split (the
                runs' size of the sequence it splits, rf_loader_rest_unit;
                0: a whole epoch's own), which a resume on any world size
                or batch size passes on (rf_loader_seek_rest_unit)
  mixture       only for a Mix: {"epoch_size", "sources": [{"samples",
                "epoch_samples", "label_offset", "shuffle_block"}, ...]}, the
                sources as the library resolved them; a Loader over another
                mixture (or over one source) refuses the dict, and a Loader
                over a Mix refuses a dict without one

The global order is a function of (seed, epoch, shuffle, shuffle_block) and
the index, so those must agree for any resume. On the same world size the
position (epoch, start, batch) is taken as it is: the exact batches that an
uninterrupted run gives (batch_size must agree). On another world size M, the
rest of the epoch after the first `consumed` entries is split across the M
ranks (rf_loader_seek_rest), and the epochs after it are whole M-rank epochs;
batch_size may differ there, since the position travels in samples.

Dicts written before "consumed" and "fingerprint" existed still load on
their own world size; they cannot move to another (they lack "consumed").
"""

import dataclasses
from typing import Callable, Optional

# A position in a whole epoch; _VERSION_REST: in the rest of a resumed one.
_VERSION = 1
_VERSION_REST = 2


@dataclasses.dataclass
class Identity:
    """What a state dict must agree with: this loader's run. The fingerprint
    is asked of read_fingerprint once, when first needed (it reads the whole
    index)."""

    seed: int
    world_size: int
    rank: int
    num_samples: int
    batch_size: int
    drop_last: bool
    shuffle: bool
    shuffle_block: int
    sampler_drop_last: bool
    read_fingerprint: Callable[[], int]
    # aspect-ratio buckets: a list of [height, width] (None: without)
    buckets: Optional[list] = None
    # a Mix: the sources as the library resolved them (None: one source)
    mixture: Optional[dict] = None
    _fp: Optional[str] = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self):
        self.buckets = [list(b) for b in self.buckets] if self.buckets else None

    @property
    def fingerprint(self):
        if self._fp is None:
            self._fp = "%016x" % self.read_fingerprint()
        return self._fp


def make(ident, epoch, batch, start, consumed, unit=0):
    """The state dict of position (epoch, start, batch) (with buckets, in
    the sequence of runs of `unit` samples)."""
    state = {
        "version": _VERSION_REST if start else _VERSION,
        "seed": ident.seed,
        "epoch": epoch,
        "batch": batch,
        "world_size": ident.world_size,
        "rank": ident.rank,
        "num_samples": ident.num_samples,
        "batch_size": ident.batch_size,
        "consumed": consumed,
        "drop_last": ident.drop_last,
        "shuffle": ident.shuffle,
        "fingerprint": ident.fingerprint,
    }
    if start:
        state["start"] = start
    if ident.sampler_drop_last:  # absent means False, as in dicts from before it
        state["sampler_drop_last"] = True
    if ident.shuffle_block:  # absent means 0, as in dicts from before it
        state["shuffle_block"] = ident.shuffle_block
    if ident.buckets:
        state["buckets"] = ident.buckets
        state["unit"] = unit
    if ident.mixture is not None:
        state["mixture"] = ident.mixture
    return state


def _check_mixture(ident, state):
    """Refuses a dict of another mixture, with what differs."""
    theirs, mine = state.get("mixture"), ident.mixture
    if theirs is None and mine is None:
        return
    if theirs is None or mine is None:
        raise ValueError("ringfeed: this state dict was saved by a loader of %s, but this loader "
                         "reads %s: a position is only valid in the same mixture"
                         % ("one source" if theirs is None else
                            "a mixture of %d sources" % len(theirs.get("sources", ())),
                            "one source" if mine is None else
                            "a mixture of %d sources" % len(mine["sources"])))
    try:
        srcs = list(theirs["sources"])
        items = [(i, k, s[k]) for i, s in enumerate(srcs) for k in mine["sources"][0]]
        size = theirs["epoch_size"]
    except (TypeError, KeyError, IndexError):
        raise ValueError("ringfeed: state dict has a malformed 'mixture': %r" % (theirs,)) from None
    if len(srcs) != len(mine["sources"]):
        raise ValueError("ringfeed: this state dict's mixture has %d sources, this loader's %d: "
                         "a position is only valid in the same mixture"
                         % (len(srcs), len(mine["sources"])))
    for i, k, v in items:
        if v != mine["sources"][i][k]:
            raise ValueError("ringfeed: this state dict's mixture differs from this loader's: "
                             "source %d has %s=%r there, %r here (the sources, their sizes, "
                             "shares, label offsets and shuffle blocks must be the same)"
                             % (i, k, v, mine["sources"][i][k]))
    if size != mine["epoch_size"]:
        raise ValueError("ringfeed: this state dict's mixture has epoch_size=%r, this loader's %r"
                         % (size, mine["epoch_size"]))


def _int(state, key, default=None):
    value = state.get(key, default)
    if value is None:
        raise ValueError("ringfeed: state dict lacks %r" % key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("ringfeed: state dict has %s=%r, not an integer" % (key, value))
    return value


def _check(ident, state):
    """Refuses a dict that is not one, or that belongs to another global
    order (seed, dataset, shuffle, shuffle_block, sampler_drop_last)."""
    try:
        version = state["version"]
    except (TypeError, KeyError):
        raise ValueError("ringfeed: not a ringfeed state dict: %r" % (state,)) from None
    if version not in (_VERSION, _VERSION_REST):
        raise ValueError("ringfeed: state dict version %r is not supported (expected %d or %d)"
                         % (version, _VERSION, _VERSION_REST))
    if version == _VERSION_REST and "start" not in state:
        raise ValueError("ringfeed: state dict version 2 lacks 'start'")
    for k in ("seed", "world_size", "num_samples", "batch_size", "epoch", "batch"):
        _int(state, k)
    _check_mixture(ident, state)
    if state["num_samples"] != ident.num_samples or (
            "fingerprint" in state and state["fingerprint"] != ident.fingerprint):
        raise ValueError(
            "ringfeed: the dataset changed since this state dict was saved: it has %d samples "
            "(fingerprint %s), this loader's source %d (fingerprint %s); a resume needs the "
            "same samples in the same index order (names, sizes and labels; folders may move)"
            % (state["num_samples"], state.get("fingerprint", "not recorded"),
               ident.num_samples, ident.fingerprint))
    theirs = {"seed": state["seed"],
              "shuffle": bool(state.get("shuffle", ident.shuffle)),
              "shuffle_block": _int(state, "shuffle_block", 0),
              # Another split gives other batches at the same position.
              "sampler_drop_last": bool(state.get("sampler_drop_last", False))}
    for k, v in theirs.items():
        mine = getattr(ident, k)
        if v != mine:
            raise ValueError("ringfeed: state dict has %s=%r but this loader has %s=%r"
                             % (k, v, k, mine))
    # Buckets make another order: both or neither, the same ones.
    theirs_b = state.get("buckets")
    if (theirs_b or None) != ident.buckets:
        raise ValueError("ringfeed: state dict has buckets=%r but this loader has buckets=%r"
                         % (theirs_b, ident.buckets))
    if ident.buckets:
        _int(state, "unit")


def resume_position(ident, state):
    """(epoch, start, batch, unit) to seek to (rf_loader_seek_rest_unit;
    unit 0 without buckets) for a state dict, or a list of every rank's, of
    one run.

    A list resumes from its slowest rank (the smallest position): ranks that
    were ahead of it see the samples of their extra batches again."""
    states = list(state) if isinstance(state, (list, tuple)) else [state]
    if not states:
        raise ValueError("ringfeed: an empty list of state dicts")
    for s in states:
        _check(ident, s)
    worlds = {s["world_size"] for s in states}
    if len(worlds) > 1:
        raise ValueError("ringfeed: the state dicts come from runs of world sizes %s; give the "
                         "dicts of one run" % sorted(worlds))
    world = worlds.pop()

    def where(s):
        return (_int(s, "epoch"), _int(s, "consumed", -1), _int(s, "batch"))

    slowest = min(states, key=where)
    epoch, consumed, batch = where(slowest)
    start = _int(slowest, "start", 0)
    unit = _int(slowest, "unit", 0)
    if epoch < 0:
        raise ValueError("ringfeed: state dict position epoch=%d is out of range" % epoch)
    if world == ident.world_size:
        if slowest["batch_size"] != ident.batch_size:
            raise ValueError("ringfeed: state dict has batch_size=%r but this loader has "
                             "batch_size=%r (on the same world size a resume is exact, batch "
                             "for batch)" % (slowest["batch_size"], ident.batch_size))
        return epoch, start, batch, unit
    if consumed < 0:
        raise ValueError("ringfeed: this state dict (world_size=%d) predates resuming on another "
                         "world size (it lacks 'consumed'): it loads only with world_size=%d"
                         % (world, world))
    return epoch, consumed, 0, unit
