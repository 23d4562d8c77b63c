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
  _features.py features(): what the library was built with; the import's BuildWarning
  _lib.py      finds libringfeed and declares its C API for ctypes
  augment.py   torchvision's augmentations (RandAugment, ...), apply(), draws()
  _recipe.py   augment, dtype + mean/std, sample_fn -> the native loader's calls
  _normalize.py  uint8 batches normalised with torch on their device (CUDA path)

Nothing here is compiled; the library is found in the package folder (where
`pip install .` puts it), then through $RINGFEED_LIBRARY, the repository's
build/ folder, then the system. Importing the package loads it and warns
(BuildWarning) when it was built without libspng, libwebp or libcurl.
"""

from . import augment  # noqa: F401 (ringfeed.augment.apply, .draws)
from ._errors import RingfeedError
from ._features import BuildWarning, features, warn_missing
from ._lib import __version__, library_path, library_version  # noqa: F401 (public API)
from ._mix import Mix, Source
from .augment import (AutoAugment, ColorJitter, RandAugment, RandomErasing, RandomGrayscale,
                      TrivialAugmentWide)
from .loader import Loader

__all__ = ["Loader", "Mix", "Source", "RingfeedError", "BuildWarning", "features",
           "library_path", "library_version", "__version__", "RandAugment", "TrivialAugmentWide",
           "AutoAugment", "ColorJitter", "RandomGrayscale", "RandomErasing", "augment"]

warn_missing()  # a build without libspng, libwebp or libcurl says so now, not at its first PNG
