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
  _options.py  keyword arguments -> RF_P_* parameters, environment defaults
  _handle.py   the native rf_loader and its batch leases; fork safety
  _outputs.py  a lent batch -> numpy arrays, torch tensors, CUDA tensors
  _errors.py   RingfeedError; library statuses -> exceptions
  _lib.py      finds libringfeed and declares its C API for ctypes

Nothing here is compiled; the library is found through $RINGFEED_LIBRARY, the
package folder, the repository's build/ folder, then the system.
"""

from . import _lib
from ._errors import RingfeedError
from .loader import Loader

__version__ = "0.2.0"
__all__ = ["Loader", "RingfeedError", "library_path", "library_version", "__version__"]


def library_path():
    """Path of the libringfeed that this package uses."""
    return _lib.path()


def library_version():
    """Version of the loaded library as (major, minor, patch)."""
    v = _lib.load().rf_version()
    return (v // 10000, (v // 100) % 100, v % 100)
