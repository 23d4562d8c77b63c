"""ringfeed.Loader: the iterable that training code holds.

It checks its arguments (_options), starts a native loader (_handle), and
turns each lent batch into arrays or tensors (_outputs). What it adds itself
is the position. An iteration starts where set_epoch or load_state_dict put
the loader (or at epoch 0 after construction); any later iteration starts at
batch 0 of the epoch after the previous iteration's, as a DataLoader with
shuffle=True reshuffles on every pass. Every rank follows that rule, so
ranks stay in step without set_epoch. Moving the position invalidates
running iterators; batches still held stay valid (the native loader moves
while they are lent).

A Loader owns native threads and memory: copying or pickling it is refused
with a TypeError that says what to do instead.
"""

import ctypes
import json
import operator
import os
import weakref

from . import _lib
from ._errors import RingfeedError
from ._handle import _Handle, _getpid
from ._iterator import EpochIterator
from ._lib import RF_E_FORKED, RF_E_NO_DEVICE, RF_E_STOPPED
from ._options import MAX_FILE_BYTES, Options, _int
from ._outputs import BatchForm, make_output
from ._state import Identity, make as _make_state, resume_position

_NO_COPY = ("ringfeed.Loader cannot be copied/pickled: it owns native threads and memory; make "
            "a new Loader with the same arguments, and use state_dict()/load_state_dict() to "
            "carry its position")


def _readonly(attr, doc):
    """A read-only property giving self.<attr> (a dotted path)."""
    return property(operator.attrgetter(attr), doc=doc)


class Loader:
    """Iterable of (images, labels) batches from an image folder, a list file
    or WebDataset tar shards; or of data batches alone from record files.

    source: a folder, a list file, a .tar shard, a brace pattern
    ("shards/train-{0000..0099}.tar"), a glob ("shards/*.tar"), or a list of
    these; or a ringfeed.Mix of several such sources, each with its share of
    an epoch (ringfeed.Source(..., proportion= | repeat= | choose=,
    label_offset=); docs/mixing.md). return_source=True adds each sample's
    source number (int64 [B], 0 for a loader of one source) right after the
    labels: (images, labels, sources). A folder holds exactly the samples torchvision's ImageFolder
    indexes (.jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp, any case); a
    tar sample is a key's one picture member of those formats, or a .npy
    member of raw uint8 pixels, shape (H, W, 3), (H, W, 1) or (H, W), C order
    (as `ringfeed-pack --store raw` writes them), read with no decode; a .npy
    beside another picture is not the picture. Compressed shards (.tar.gz,
    ...) are refused: they cannot be read at offsets.

    Tar shards only: label="cls" names the member holding each sample's
    integer label; label=None reads unlabeled shards, whose batches are the
    images alone. extras=("txt", "json") returns those members' raw bytes:
    each batch gains a last element, a list (one per sample) of dicts
    {ext: bytes} keyed by the extension as given, lowercase and without a
    leading '.'; a member the sample lacks is absent from its dict.
    extras_bytes (default 65536) bounds all extras of one sample; a sample
    over it is an error under on_error. So a batch is (images, labels),
    (images, labels, extras), images or (images, extras).

    record_size > 0 reads fixed-size records instead (token shards):
    header_size bytes are skipped at the start of each file, dtype ("uint8",
    "uint16", "int32", "int64") types the output, transform must be "none"
    (the default for records); each batch is the data array alone, shape
    [B, record_size // itemsize] (torch before 2.3 has no uint16: int32 there).

    Remote shards: "s3://bucket/train-{0000..0099}.tar" (a brace pattern, a
    glob, which lists the bucket, or a list) or "http(s)://host/...": whole
    shards are fetched into a local cache, cache_dir (default
    $XDG_CACHE_HOME/ringfeed or ~/.cache/ringfeed), of at most cache_limit
    bytes (None or 0: what it holds plus half the free space of its file
    system), least recently used shards evicted; loaders of one node share
    it, and cache_limit bounds the folder for all of them (give them the
    same value, at least two shards per loader: below that a warning says
    so once). The folder must be private (yours, writable by nobody else:
    else RingfeedError says why) and should be the cache's alone: it never
    deletes files it did not make, but they count against cache_limit, and
    an error names them when they leave no room (docs/remote.md, "Cache
    folder"). Data larger than the cache
    want shuffle_block: the global shuffle then refetches shards
    (stats()["remote"]["refetches"]). fetch_retries (5), fetch_timeout_ms
    (30000: a try with under 1 KiB/s over that long, or no answer in it,
    times out; a request that keeps timing out gives up after at most
    (fetch_retries + 1) x 17/16 x fetch_timeout_ms plus backoffs of 0.15 s
    doubling to 4.8 s) and fetch_parallel (4) tune the transfers;
    stats()["remote"] counts them. S3 credentials come from AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else the shared credentials
    file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, profile
    AWS_PROFILE), read again when S3 says they expired; region and endpoint
    from AWS_REGION and AWS_ENDPOINT_URL; a CA bundle from AWS_CA_BUNDLE,
    CURL_CA_BUNDLE or SSL_CERT_FILE. A URL's user:password and an http(s)
    query (a presigned URL) are never shown: *** in errors, stats,
    sample_path and repr. See docs/remote.md.
    fetch_parallel also applies at start, where shards with neither a kept
    index nor a manifest are fetched and walked. The construction waits for
    the network (HEADs, manifests, those walks); Ctrl-C interrupts it at once
    (KeyboardInterrupt, the start cancelled and undone: no thread, temporary
    file or lock left). The pins a loader holds are bounded by the
    descriptors (the soft RLIMIT_NOFILE is raised to the hard one):
    docs/remote.md, "Starting and stopping".

    See DESIGN.md, "Python surface". Options map one to one to the C API's
    RF_P_* parameters; rank/world_size default to torchrun's RANK/WORLD_SIZE
    and local_world_size to LOCAL_WORLD_SIZE. flip=None (the default) means
    "flip when transform is random_resized_crop". max_file_bytes: a sample
    file larger than this is an error, refused before any allocation.
    sampler_drop_last=True splits the epoch's order as
    DistributedSampler(drop_last=True): its tail is cut to a multiple of
    world_size, so each rank gets num_samples // world_size samples and no
    sample is seen twice across ranks (validation); the default pads by
    wrapping, as DistributedSampler(drop_last=False), so every sample is seen
    and some twice. drop_last drops each rank's short last batch, as
    DataLoader's; the two combine as in torch, and len(loader) counts both.
    shuffle_block=K > 0 (tar shards or record files) shuffles shard-aware,
    for shards that do not all fit a cache: the shards in a seeded order,
    K at a time, each block's samples shuffled together; about K shards are
    read at once, the same on every rank (docs/resume.md, RF_P_SHUFFLE_BLOCK); in a
    Mix it applies to each source of shards, and Source(shuffle_block=)
    sets it per source.
    Extra keyword options:
    exact (False by default; True decodes every picture at full resolution,
    so that transform="center" gives torchvision's Resize + CenterCrop +
    PILToTensor on PIL's decode byte for byte; False lets a picture much
    larger than the output be decoded at 1/2, 1/4 or 1/8 scale, faster and
    close but not equal; see RF_P_EXACT in ringfeed.h), scale and ratio
    (random_resized_crop's ranges as torchvision's RandomResizedCrop takes
    them, by default (0.08, 1.0) and (3/4, 4/3); used to 1e-6),
    io_backend ("auto", "io_uring", "pread"), verify ("once", the default:
    each JPEG is decoded to its end the first time, to find damage below its
    crop, and only as far as its crop needs after it passed; "always";
    "none"; see rf_verify in ringfeed.h), max_pixels, max_scans,
    read_depth, read_timeout_ms, max_errors, map_shards (True, the default:
    a member of a local shard whose pages the page cache holds is decoded in
    place, from a read-only mapping, without a copy; False reads every
    member; see RF_P_MAP_SHARDS in ringfeed.h), and output ("auto": torch tensors
    when torch imports, else numpy; or "torch", "numpy").

    Recipes (README, "Recipes"): augment=[ringfeed.RandAugment(2, 9),
    ringfeed.RandomErasing(0.25)] (torchvision's RandAugment,
    TrivialAugmentWide, AutoAugment, ColorJitter, RandomGrayscale,
    RandomErasing, with their arguments; or rf_loader_set_augment's spec
    string) runs them in C on the workers after the crop and flip, each
    sample's draws from (seed, epoch, index); dtype="float32" | "float16" |
    "bfloat16" with mean=(r, g, b) and std=(r, g, b) gives Normalize(mean,
    std) of x / 255 (on a CUDA device the ring stays uint8 and torch
    normalises after the copy, on the same stream; numpy has no bfloat16:
    uint16 bits there, torch.bfloat16 tensors); sample_fn= a C function's
    address, a Numba @cfunc or a ctypes function (rf_sample_fn), or a Python
    callable f(pixels, seed, info) that runs under the GIL, on each sample
    after the augmentations. explain(i) says what sample i got.

    Shapes (docs/shapes.md): image_size is an int (a square) or (height,
    width), torchvision's order. transform="center" is Resize(R) +
    CenterCrop((H, W)) with R = resize_size (default round(max(H, W) /
    0.875); an int is the shorter side, (h, w) an exact size);
    "random_resized_crop" is RandomResizedCrop((H, W), scale, ratio);
    "resize" is Resize((H, W)); "letterbox" fits each picture inside H x W
    keeping its aspect ratio, placed by align ("center" or "top_left") in a
    frame padded with fill (one value or (r, g, b)); batches then gain
    sizes (int32 [B, 2]: each picture's height and width in the frame) and
    scale (float32 [B]: the factor it was resized by), after labels (and
    extras). transform="none" with max_side=M gives each picture at its own
    size, shrunk to M at most: images is a list of [h, w, 3] arrays, or
    with pad=True one array cut to the batch's largest picture (the rest
    fill), then labels, sizes and scale. flip works with all of them (a
    letterboxed picture is mirrored within its place). buckets=[(H, W),
    ...] or buckets=N (N buckets from the dataset's aspect ratios, each
    about image_size pixels, sides multiples of bucket_multiple=8) puts
    each sample in the bucket nearest its aspect ratio and makes every
    batch one bucket's, images of its shape (loader.buckets,
    loader.sample_bucket(i)); bucket_shared=True (the default) gives every
    rank the same bucket at each step (equal shapes across ranks), False
    lets each rank's batch have its own. The pictures' sizes come from the
    packer's manifest.json, or a header scan at the first start, kept in
    cache_dir for the next (stats()["shapes"]["sizes"]); state_dict()
    resumes on any world size and batch size.

    device="cuda" / "cuda:N" yields CUDA tensors (images and labels) ready on
    torch.cuda.current_stream(); "cuda" is torch's current device
    (torch.cuda.current_device(), what a DDP rank chose with
    torch.cuda.set_device(local_rank)). They belong to torch's allocator, so keeping
    them is always safe. The ring is then page-locked (pin_memory=False keeps
    it pageable, for comparison); stats()["memory"]["mode"] and
    stats()["cuda"] say what is in use. copy_mode="ring" (default) or
    "direct": see _outputs._CudaOutput.

    Epochs: each iteration runs one epoch. Iterating again runs the next
    epoch, reshuffled, as a DataLoader(shuffle=True) does on every pass;
    set_epoch(e) makes the next iteration epoch e instead (the
    DistributedSampler idiom), and load_state_dict resumes a saved position.
    A Loader cannot be copied or pickled (TypeError): make a new one with the
    same arguments and carry the position with state_dict().
    """

    def __init__(self, source, batch_size=256, image_size=224, transform=None,
                 flip=None, layout="NHWC", shuffle=True, seed=0, drop_last=False, num_workers=0,
                 device="cpu", pin_memory=True, prefetch=4, on_error="raise", rank=None,
                 world_size=None, local_world_size=None, *, max_file_bytes=MAX_FILE_BYTES,
                 sampler_drop_last=False, **options):
        self._handle = None
        self._pid = _getpid()
        self._closed = False
        self._generation = 0

        opts = Options(source, batch_size, image_size, transform, flip, layout, shuffle, seed,
                       drop_last, num_workers, device, pin_memory, prefetch, on_error, rank,
                       world_size, local_world_size, max_file_bytes,
                       dict(options, sampler_drop_last=sampler_drop_last))
        self._opts = opts
        self._source_str = opts.source_str
        self._records = opts.records
        self._output = make_output(opts.device_kind, opts.device_index, opts.output,
                                   opts.copy_mode)
        opts.resolve_device(self._output.index)  # "cuda": torch's current device
        self._device = opts.device

        self._lib = _lib.load()
        self._handle = h = self._new_handle()
        if opts.device_kind == "cuda":
            cuda = self.stats().get("cuda", {})
            if not cuda.get("available"):
                self.close()
                raise RingfeedError("ringfeed: device=%r but libringfeed (%s) has no CUDA "
                                    "device: %s" % (self._device, _lib.path(),
                                                    cuda.get("reason", "no 'cuda' in its stats")),
                                    RF_E_NO_DEVICE)

        # What the library resolved, not what was asked.
        P = _lib
        self._batch_size = h.get(P.RF_P_BATCH_SIZE)
        hh, ww = opts.image_hw
        self._image_size = hh if hh == ww else (hh, ww)
        self._layout = "NCHW" if h.get(P.RF_P_LAYOUT) == _lib.LAYOUTS["NCHW"] else "NHWC"
        self._seed = h.get(P.RF_P_SEED)
        self._rank = h.get(P.RF_P_RANK)
        self._world_size = h.get(P.RF_P_WORLD_SIZE)
        self._num_samples = int(self._lib.rf_loader_num_samples(h.ptr))
        self._num_batches = int(self._lib.rf_loader_num_batches(h.ptr))
        self._ident = Identity(self._seed, self._world_size, self._rank, self._num_samples,
                               self._batch_size, bool(h.get(P.RF_P_DROP_LAST)), opts.shuffle,
                               opts.shuffle_block, opts.sampler_drop_last,
                               lambda: self._lib.rf_loader_fingerprint(self._live().ptr),
                               self.buckets if opts.bucketed else None,
                               self._mixture() if opts.mix else None)
        if self._records:
            shape, nbytes = (opts.record_size // opts.dtype.itemsize,), opts.record_size
        else:
            if opts.max_side:
                hh = ww = opts.max_side
            shape = (3, hh, ww) if self._layout == "NCHW" else (hh, ww, 3)
            nbytes = 3 * hh * ww * opts.dtype.itemsize
        rec = opts.recipe
        self._keep = rec.keep  # a sample_fn's callable lives as long as the loader
        self._form = BatchForm(opts.dtype, shape, nbytes, self._records,
                               max(2, h.get(P.RF_P_PREFETCH)), self._num_batches,
                               labeled=opts.labeled, extras=opts.extras,
                               torch_dtype=rec.torch_dtype,
                               normalize=(rec.mean, rec.std, rec.dtype, self._layout)
                               if rec.device_normalize else None,
                               shaped=not self._records and opts.bucketed,
                               framed=opts.framed, native=bool(opts.max_side), pad=opts.pad,
                               layout=self._layout, sources=opts.return_source)

        # _positioned: the next iteration starts where the loader stands
        # (just started, set_epoch, load_state_dict); otherwise it starts at
        # batch 0 of epoch _last_epoch + 1. _generation invalidates iterators
        # whose position was moved under them; _current is (generation, weak
        # reference) of the latest iterator, to tell whether it still runs.
        self._positioned = True
        self._last_epoch = -1
        self._generation = 0
        self._current = None

    # -- native plumbing ---------------------------------------------------

    def _new_handle(self):
        return _Handle.open(self._lib, self._opts.source, self._opts.params, self._source_str,
                            self._opts.strings, mix=self._opts.mix)

    def _mixture(self):
        """What a state dict records of a mixture (ringfeed._state): the
        epoch's size and each source's samples, share, label offset and
        shuffle block, as the library resolved them."""
        st = self.stats()
        return {"epoch_size": st["epoch_size"],
                "sources": [{k: s[k] for k in ("samples", "epoch_samples", "label_offset",
                                               "shuffle_block")} for s in st["sources"]]}

    def _live(self):
        """The native handle, after checking that this process may use it."""
        if self._pid != _getpid():
            raise RingfeedError(
                "ringfeed: this Loader was created in process %d and cannot be used in the "
                "forked process %d (its threads do not exist here); create a new Loader in "
                "the child" % (self._pid, _getpid()), RF_E_FORKED)
        h = self._handle
        if h is None:
            raise RingfeedError("ringfeed: the loader is closed", RF_E_STOPPED)
        return h

    def _reposition(self, epoch, batch, start=0, unit=0):
        h = self._live()
        # The seek moves the native loader while batches are lent: they stay
        # valid until released (rf_loader_set_epoch's contract), so the
        # caller's views stay intact. It fails only on a position outside the
        # epoch (RF_E_INVALID), and then moves nothing: neither does this
        # object. _live() already refused a forked child.
        rc = (self._lib.rf_loader_seek_rest_unit(h.ptr, epoch, start, unit, batch) if unit
              else self._lib.rf_loader_seek_rest(h.ptr, epoch, start, batch))
        if rc < 0:
            raise h.error(rc, "seek to epoch %d batch %d" % (epoch, batch))
        self._generation += 1
        self._positioned = True
        # The last batch of this epoch (a resumed rest may be shorter) is
        # copied rather than viewed: _outputs.
        self._form.num_batches = int(self._lib.rf_loader_epoch_batches(h.ptr))

    def _start_iteration(self, with_indices):
        self._live()
        if not self._positioned:
            # Like a new DataLoader pass: the next epoch, even when the last
            # iteration was abandoned mid-epoch.
            self._reposition(self._last_epoch + 1, 0)
        self._last_epoch = self._handle.tell()[0]  # _reposition may have replaced the handle
        self._positioned = False
        self._generation += 1
        it = EpochIterator(self, self._generation, with_indices)
        self._current = (self._generation, weakref.ref(it))
        return it

    def _iterating(self):
        """True while the latest iterator can still yield: not invalidated,
        not exhausted or dropped (a `break` in a for loop drops it)."""
        if self._current is None:
            return False
        generation, ref = self._current
        it = ref()
        return generation == self._generation and it is not None and it.running

    # -- public surface ----------------------------------------------------

    def __iter__(self):
        """Batches of one epoch: (images, labels); for records, data; with
        return_source=True each sample's source (int64 [B]) follows.

        The first iteration starts where the loader stands: epoch 0 after
        construction, batch 0 of the epoch given to set_epoch, or the batch
        that load_state_dict resumes at. Each later iteration starts at batch
        0 of the next epoch (also after a `break`), unless set_epoch or
        load_state_dict moved the loader in between. Starting an iteration
        invalidates the previous iterator.

        An error of a batch (RingfeedError: a bad sample under
        on_error="raise", a remote shard that cannot be fetched) consumes
        that batch, and the same iterator goes on: next(it) after the error
        yields the batch after the failed one, in the same epoch. To get the
        rest of the epoch after an error, keep the iterator:

            it = iter(loader)
            while True:
                try:
                    for images, labels in it:
                        ...
                    break                   # the epoch's end
                except ringfeed.RingfeedError as e:
                    log(e)                  # that batch is lost; the loop goes on

        A new `for x in loader` instead starts the next epoch (see above)."""
        return self._start_iteration(False)

    def iter_with_indices(self):
        """As iter(loader), with the sample indices (int64 [B]) added last:
        (images, labels, sample_indices), (images, labels, extras,
        sample_indices), (images, sample_indices) when unlabeled, and for
        records (data, sample_indices). The indices point into the source's
        index (sample_path)."""
        return self._start_iteration(True)

    def __len__(self):
        """Batches per epoch for this rank; in the rest of an epoch resumed on
        another world size (load_state_dict), the batches of that rest, until
        the next epoch begins."""
        h = self._handle
        if h is not None and self._pid == _getpid() and (self._positioned or self._iterating()):
            return int(self._lib.rf_loader_epoch_batches(h.ptr))
        return self._num_batches

    def set_epoch(self, epoch):
        """Positions the loader at batch 0 of `epoch`; the next iteration starts
        there. Optional: without it each iteration runs the next epoch. Calling
        it with the same epoch repeats that epoch's batches exactly."""
        epoch = _int("epoch", epoch)
        if epoch < 0:
            raise ValueError("ringfeed: epoch must be >= 0, got %d" % epoch)
        self._reposition(epoch, 0)

    @property
    def epoch(self):
        """The epoch of the iteration in progress; when none is (before the
        first, after one ended or was left with `break`), the epoch the next
        iteration will run."""
        h = self._live()
        if self._positioned or self._iterating():
            return h.tell()[0]
        return self._last_epoch + 1

    num_samples = _readonly("_num_samples", "Samples in the source's index (all ranks; of a "
                            "Mix, its sources' together).")

    @property
    def epoch_size(self):
        """Entries of an epoch's global order (all ranks): num_samples, or
        for a Mix the sum of its sources' shares."""
        return int(self._lib.rf_loader_epoch_size(self._live().ptr))

    def sample_source(self, index):
        """The source (its number in the Mix, 0 for a loader of one source)
        of the sample with global index `index`."""
        v = self._lib.rf_loader_sample_source(self._live().ptr, _int("index", index))
        if v < 0:
            raise IndexError("ringfeed: no sample %d" % index)
        return int(v)
    batch_size = _readonly("_batch_size", "Samples per batch (the last may have fewer).")
    image_size = _readonly("_image_size", "Side of the output images in pixels, or their "
                           "(height, width) when they are not square (with buckets: the pixel "
                           "budget's; each batch has its bucket's shape).")

    @property
    def buckets(self):
        """The aspect-ratio buckets as a list of (height, width), [] without."""
        h = self._live()
        n = self._lib.rf_loader_buckets(h.ptr, None, 0)
        if n <= 0:
            return []
        arr = (ctypes.c_int32 * (2 * n))()
        self._lib.rf_loader_buckets(h.ptr, arr, n)
        return [(arr[2 * k], arr[2 * k + 1]) for k in range(n)]

    def sample_bucket(self, index):
        """The bucket (an index into buckets) of the sample with global index
        `index`, or -1 without buckets."""
        h = self._live()
        index = _int("index", index)
        if not 0 <= index < self._num_samples:
            raise IndexError("ringfeed: no sample %d" % index)
        return int(self._lib.rf_loader_sample_bucket(h.ptr, index))
    dtype = _readonly("_form.dtype", "Element type of the batches' host arrays: numpy uint8 "
                      "for images (float32, float16, or uint16 holding bfloat16, under dtype=), "
                      "the records' dtype.")
    layout = _readonly("_layout", "'NHWC' or 'NCHW'.")
    device = _readonly("_device", "'cpu' or 'cuda:N'.")

    def sample_path(self, index):
        """Where the sample with global index `index` is: its file (image
        folder, list file), "shard.tar:key" (tar shards: webdataset's
        __url__ and __key__), or for records the record file."""
        h = self._live()
        index = _int("index", index)
        if self._records:
            p = self._lib.rf_loader_sample_path(h.ptr, index)
            if p is None:
                raise IndexError("ringfeed: no sample %d" % index)
            return os.fsdecode(p)
        n = self._lib.rf_loader_sample_name(h.ptr, index, None, 0)
        if n < 0:
            raise IndexError("ringfeed: no sample %d" % index)
        buf = ctypes.create_string_buffer(n + 1)
        self._lib.rf_loader_sample_name(h.ptr, index, buf, n + 1)
        return os.fsdecode(buf.raw[:n])

    def sample_label(self, index):
        """Label of the sample with global index `index`."""
        h = self._live()
        v = self._lib.rf_loader_sample_label(h.ptr, _int("index", index))
        if v < 0 and not 0 <= index < self._num_samples:
            raise IndexError("ringfeed: no sample %d" % index)
        return int(v)

    def explain(self, index, epoch=None):
        """What sample `index` (global index, as iter_with_indices gives)
        gets in `epoch` (default: self.epoch, the epoch of the iteration in
        progress or the next): a dict with its path and name, label, the
        picture's width and height, crop {top, left, height, width}, resize
        [h, w], center_crop (transform "center"), flip, augment (each op
        with its drawn parameters, in order: op, transform, magnitude and
        bin for the auto-augment ops, factor, angle, shear, pixels, bits,
        threshold, fill; Erase's box, value and deferred), dtype and
        sample_fn_seed (rf_loader_explain). The picture's header is read."""
        h = self._live()
        index = _int("index", index)
        epoch = self.epoch if epoch is None else _int("epoch", epoch)
        cap = 1 << 14
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = self._lib.rf_loader_explain(h.ptr, epoch, index, buf, cap)
            if n < 0:
                raise h.error(n, "explain sample %d" % index)
            if n < cap:
                return json.loads(buf.value.decode("utf-8", "replace"))
            cap = n + 1

    def stats(self):
        """The loader's statistics as a dict (see rf_loader_stats_json).
        "errors" lists at most 16 bad samples per batch and 1,000 in all;
        "errors_count" counts every one. "latency" holds the consumer's wait
        for each batch: wait_p50_ms, wait_p90_ms, wait_p99_ms, wait_max_ms,
        wait_mean_ms (a loader is judged by its tail), ring_empty (batches
        not ready when asked for) and first_batch_seconds (from the start of
        the native loader, index included, to the first batch). A Mix adds
        "epoch_size" and "sources": per source, its samples, epoch_samples
        (its share), delivered (samples lent so far), errors (bad samples
        its decode met), label_offset and shuffle_block."""
        h = self._live()
        cap = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = self._lib.rf_loader_stats_json(h.ptr, buf, cap)
            if n < 0:
                raise h.error(n, "stats")
            if n < cap:
                return json.loads(buf.raw[:n].decode("utf-8", "replace"))
            cap = n + 1

    def state_dict(self):
        """Position and identity of the run: plain ints, bools and strings,
        JSON-serialisable (the fields: ringfeed._state).

        "epoch" and "batch" name the next batch not yet delivered, which a
        Loader given this dict by load_state_dict delivers first. Taken
        mid-epoch (in the loop, or after leaving it with `break`), that is the
        batch after the last one delivered; once an epoch's last batch was
        delivered, it is batch 0 of the next epoch. "consumed" says how much
        of the epoch's global order all ranks took, for a resume on another
        world size; "fingerprint" identifies the dataset; "mixture" (a Mix
        only) its sources' sizes and shares, which a Loader of another
        mixture refuses."""
        h = self._live()
        epoch, batch = h.tell()
        start, consumed = h.tell_rest()
        unit = int(self._lib.rf_loader_rest_unit(h.ptr)) if self._ident.buckets else 0
        if not self._positioned and batch >= self._lib.rf_loader_epoch_batches(h.ptr):
            # An iteration delivered the epoch's last batch: what follows is
            # the next epoch. A loader *placed* at the end (a dict from before
            # this rule) keeps its meaning: one empty iteration, then the next.
            epoch, batch, start, consumed, unit = epoch + 1, 0, 0, 0, 0
        return _make_state(self._ident, epoch, batch, start, consumed, unit)

    def load_state_dict(self, state):
        """Resumes where state_dict() was taken: the next iteration starts at
        the dict's position, and those after it at the following epochs. Any
        num_workers.

        Same world_size: exactly the batches an uninterrupted run gives.
        Another world_size (a dict saved with N ranks, loaded with M): the rest
        of that epoch (its global order without the entries all N ranks
        consumed) is split across the M ranks as an epoch is (padded by
        wrapping to a multiple of M, or trimmed under sampler_drop_last), so
        that in that epoch no sample is seen twice or skipped but for that
        padding (and what drop_last drops); len(loader) counts that rest's
        batches, and later epochs are whole M-rank epochs. This assumes the N
        ranks stepped in lockstep (DDP: every rank took the same number of
        batches); `state` may also be the list of every rank's dicts, and
        then the slowest rank's position counts: samples that faster ranks
        took beyond it are seen again. seed, shuffle, shuffle_block,
        sampler_drop_last and the dataset (its fingerprint; of a Mix, its
        sources and their shares, label offsets and shuffle blocks) must be
        the same;
        on another world size batch_size and drop_last may differ. A dict of
        another dataset, order or version raises ValueError."""
        self._live()
        epoch, start, batch, unit = resume_position(self._ident, state)
        try:
            self._reposition(epoch, batch, start, unit)
        except RingfeedError as e:
            raise ValueError("ringfeed: state dict position epoch=%d batch=%d is out of range: %s"
                             % (epoch, batch, e)) from None

    def close(self):
        """Stops the loader. Batches already handed out stay valid; the native
        loader is freed when the last of them dies. Idempotent."""
        h, self._handle = getattr(self, "_handle", None), None
        self._closed = True
        if h is None:
            return
        self._generation += 1
        try:
            h.stop()  # no-op in a forked child
        except Exception:
            pass

    @property
    def closed(self):
        return self._handle is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # A copy would share (copy.copy) or duplicate (pickle) the native loader,
    # whose threads and ring cannot travel; say what to do instead.
    def __copy__(self):
        raise TypeError(_NO_COPY)

    def __deepcopy__(self, memo):
        raise TypeError(_NO_COPY)

    def __reduce_ex__(self, protocol):
        raise TypeError(_NO_COPY)

    def __reduce__(self):
        raise TypeError(_NO_COPY)

    def __getstate__(self):
        raise TypeError(_NO_COPY)

    def __repr__(self):
        return ("ringfeed.Loader(%r, batch_size=%d, image_size=%r, layout=%r, device=%r%s)"
                % (self._source_str, self._batch_size, self._image_size, self._layout,
                   self._device, ", closed" if self.closed else ""))
