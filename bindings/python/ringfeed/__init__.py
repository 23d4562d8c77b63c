"""ringfeed: a native data loader for deep-learning training (ctypes binding).

    import ringfeed
    with ringfeed.Loader("data/train", batch_size=256, image_size=224) as loader:
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            for images, labels in loader:   # uint8 [B,S,S,3] (NHWC), int64 [B]
                ...

Batches are zero-copy views of the library's ring slots, returned to the
library when the last array or tensor that looks at them dies (_outputs);
the native loader is destroyed only after its last batch died (_handle).

The package, a module per concern:
  loader.py    Loader: iteration, position (set_epoch, state_dict), stats
  _mix.py      Mix, Source: several sources in one Loader, each with its share
  _options.py  keyword arguments -> RF_P_* parameters, environment defaults
  _handle.py   the native rf_loader and its batch leases; fork safety
  _outputs.py  a lent batch -> numpy arrays, torch tensors, CUDA tensors
  _errors.py   RingfeedError; library statuses -> exceptions
  _lib.py      finds libringfeed and declares its C API for ctypes

Nothing here is compiled; the library is found in the package folder (where
`pip install .` puts it), then through $RINGFEED_LIBRARY, the repository's
build/ folder, then the system.
"""

from ._errors import RingfeedError
from ._lib import __version__, library_path, library_version  # noqa: F401 (public API)
from ._mix import Mix, Source
from .loader import Loader

__all__ = ["Loader", "Mix", "RingfeedError", "Source", "library_path", "library_version",
           "__version__"]
