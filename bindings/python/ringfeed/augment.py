"""torchvision's augmentations, run in C on the loader's decode workers.

    loader = ringfeed.Loader("train/", transform="random_resized_crop",
                             augment=[ringfeed.RandAugment(2, 9), ringfeed.RandomErasing(0.25)])

The classes carry torchvision.transforms' names, arguments and defaults;
each only describes the transform (`spec()` is the text the C library
parses, rf_loader_set_augment in include/ringfeed.h). The ops are
torchvision 0.14's functional ops on uint8 tensors (the affine ones with
NEAREST sampling, fill as given), their draws torchvision's distributions
from a stream keyed on (seed, epoch, sample index).

apply() runs one op on one picture, so anyone can hold it against
torchvision; draws() gives the raw random draws of a list, for tests of the
distributions.
"""

import ctypes
import numbers

import numpy as np

from . import _lib

__all__ = ["RandAugment", "TrivialAugmentWide", "AutoAugment", "ColorJitter", "RandomGrayscale",
           "RandomErasing", "apply", "draws", "spec_of", "OPS"]


def _num(x):
    return repr(float(x))


def _fill(fill):
    if fill is None:
        return "None"
    if isinstance(fill, numbers.Number):
        return _num(fill)
    vals = [float(v) for v in fill]
    if len(vals) == 1:
        return _num(vals[0])
    return "(" + ", ".join(_num(v) for v in vals) + ")"


def _pair(x):
    if isinstance(x, numbers.Number):
        return _num(x)
    a, b = x
    return "(%s, %s)" % (_num(a), _num(b))


class _Transform:
    """A transform of the list: its spec() text, and repr as torchvision's."""

    def spec(self):
        raise NotImplementedError

    def __repr__(self):
        return self.spec()

    def __eq__(self, other):
        return type(self) is type(other) and self.spec() == other.spec()

    def __hash__(self):
        return hash(self.spec())


def _interp(interpolation):
    name = getattr(interpolation, "value", interpolation)
    if name is not None and str(name).lower() != "nearest":
        raise ValueError("ringfeed: the augmentations sample with NEAREST only, not %r"
                         % (interpolation,))


class RandAugment(_Transform):
    """torchvision.transforms.RandAugment(num_ops, magnitude, num_magnitude_bins, fill)."""

    def __init__(self, num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation=None,
                 fill=None):
        _interp(interpolation)
        self.num_ops, self.magnitude = int(num_ops), int(magnitude)
        self.num_magnitude_bins, self.fill = int(num_magnitude_bins), fill

    def spec(self):
        return "RandAugment(num_ops=%d, magnitude=%d, num_magnitude_bins=%d, fill=%s)" % (
            self.num_ops, self.magnitude, self.num_magnitude_bins, _fill(self.fill))


class TrivialAugmentWide(_Transform):
    """torchvision.transforms.TrivialAugmentWide(num_magnitude_bins, fill)."""

    def __init__(self, num_magnitude_bins=31, interpolation=None, fill=None):
        _interp(interpolation)
        self.num_magnitude_bins, self.fill = int(num_magnitude_bins), fill

    def spec(self):
        return "TrivialAugmentWide(num_magnitude_bins=%d, fill=%s)" % (
            self.num_magnitude_bins, _fill(self.fill))


class AutoAugment(_Transform):
    """torchvision.transforms.AutoAugment(policy, fill): policy "imagenet"
    (the default), "cifar10", "svhn" or an AutoAugmentPolicy."""

    def __init__(self, policy="imagenet", interpolation=None, fill=None):
        _interp(interpolation)
        self.policy = str(getattr(policy, "value", policy)).lower()
        self.fill = fill

    def spec(self):
        return "AutoAugment(policy=%s, fill=%s)" % (self.policy, _fill(self.fill))


class ColorJitter(_Transform):
    """torchvision.transforms.ColorJitter(brightness, contrast, saturation,
    hue), applied in a random order per sample."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        self.brightness, self.contrast = brightness, contrast
        self.saturation, self.hue = saturation, hue

    def spec(self):
        return "ColorJitter(brightness=%s, contrast=%s, saturation=%s, hue=%s)" % (
            _pair(self.brightness), _pair(self.contrast), _pair(self.saturation), _pair(self.hue))


class RandomGrayscale(_Transform):
    """torchvision.transforms.RandomGrayscale(p)."""

    def __init__(self, p=0.1):
        self.p = p

    def spec(self):
        return "RandomGrayscale(p=%s)" % _num(self.p)


class RandomErasing(_Transform):
    """torchvision.transforms.RandomErasing(p, scale, ratio, value): value a
    number, three numbers or "random". With a float output (dtype float32,
    float16, bfloat16, or a CUDA device's normalisation) trailing
    RandomErasing transforms run after Normalize and value is the normalised
    value, as in torchvision's recipes; with uint8 output it is a pixel
    value."""

    def __init__(self, p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace=False):
        self.p, self.scale, self.ratio, self.value = p, tuple(scale), tuple(ratio), value

    def spec(self):
        if isinstance(self.value, str):
            if self.value != "random":
                raise ValueError("ringfeed: RandomErasing value must be a number, 3 numbers "
                                 "or 'random', not %r" % (self.value,))
            v = "random"
        else:
            v = _fill(self.value)
        return "RandomErasing(p=%s, scale=%s, ratio=%s, value=%s)" % (
            _num(self.p), _pair(self.scale), _pair(self.ratio), v)


def spec_of(augment):
    """The C spec of an augmentation list: None or [] -> None, a string as it
    is, a transform or a list of transforms (or of spec strings) joined by
    '; '."""
    if augment is None:
        return None
    if isinstance(augment, str):
        return augment or None
    if isinstance(augment, _Transform):
        augment = [augment]
    parts = []
    for t in augment:
        if isinstance(t, _Transform):
            parts.append(t.spec())
        elif isinstance(t, str):
            parts.append(t)
        else:
            raise TypeError("ringfeed: augment takes ringfeed's transforms (ringfeed.RandAugment, "
                            "...) or their spec strings, not %r" % (t,))
    return "; ".join(parts) or None


# op -> the names of its arguments, in the order rf_augment_apply takes them.
OPS = {
    "Identity": (), "AutoContrast": (), "Equalize": (), "Invert": (), "Grayscale": (),
    "ShearX": ("magnitude", "fill"), "ShearY": ("magnitude", "fill"),
    "TranslateX": ("pixels", "fill"), "TranslateY": ("pixels", "fill"),
    "Rotate": ("angle", "fill"),
    "Brightness": ("factor",), "Color": ("factor",), "Contrast": ("factor",),
    "Sharpness": ("factor",), "Saturation": ("factor",), "Hue": ("factor",),
    "Posterize": ("bits",), "Solarize": ("threshold",),
    "Erase": ("top", "left", "height", "width", "value"),
}


def apply(image, op, **params):
    """One op on one picture: a new uint8 array [H, W, 3] (image: an array or
    tensor of that shape; unchanged). op and params as rf_augment_apply
    (include/ringfeed.h) and OPS: apply(img, "Rotate", angle=30, fill=0),
    apply(img, "Brightness", factor=1.5), apply(img, "ShearX", magnitude=0.3),
    apply(img, "Erase", top=4, left=8, height=10, width=12, value=0)."""
    lib = _lib.load()
    name = next((k for k in OPS if k.lower() == str(op).lower()), None)
    if name is None:
        raise ValueError("ringfeed: unknown op %r (one of %s)" % (op, ", ".join(OPS)))
    if hasattr(image, "numpy"):
        image = image.cpu().numpy()
    img = np.array(image, dtype=np.uint8, copy=True, order="C")
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError("ringfeed: apply takes an HWC RGB uint8 picture, not shape %r"
                         % (img.shape,))
    args = []
    for key in OPS[name]:
        if key == "magnitude" and key not in params and "pixels" in OPS[name]:
            continue
        v = params.pop(key, None)
        if key in ("fill",):
            if v is None:
                continue
            vals = [float(v)] if isinstance(v, numbers.Number) else [float(x) for x in v]
            args += vals
        elif key == "value":
            vals = [0.0] if v is None else \
                [float(v)] if isinstance(v, numbers.Number) else [float(x) for x in v]
            args += vals
        else:
            if v is None and name in ("TranslateX", "TranslateY") and key == "pixels":
                v = params.pop("magnitude", None)
            if v is None:
                raise TypeError("ringfeed: %s needs %s" % (name, key))
            args.append(float(v))
    if params:
        raise TypeError("ringfeed: %s got unexpected argument(s) %s" % (name, ", ".join(params)))
    arr = (ctypes.c_double * max(1, len(args)))(*args)
    err = ctypes.create_string_buffer(400)
    h, w = img.shape[:2]
    rc = lib.rf_augment_apply(img.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), h, w, w * 3,
                              name.encode(), arr, len(args), err, len(err))
    if rc < 0:
        raise ValueError("ringfeed: %s" % err.value.decode("utf-8", "replace"))
    return img


def draws(augment, n, height=224, width=224, seed=0, first=0, per_sample=64):
    """The random draws the augmentations make for samples first .. first +
    n - 1 (epoch 0, `seed`) on a height x width picture: float64 [n,
    per_sample], NaN past each sample's draws. The layout per transform is
    rf_augment_draws's (include/ringfeed.h)."""
    lib = _lib.load()
    spec = spec_of(augment)
    out = np.empty((int(n), int(per_sample)), np.float64)
    err = ctypes.create_string_buffer(400)
    rc = lib.rf_augment_draws((spec or "").encode(), int(height), int(width),
                              int(seed) & 0xFFFFFFFFFFFFFFFF, int(first), int(n),
                              out.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
                              int(per_sample), err, len(err))
    if rc < 0:
        raise ValueError("ringfeed: %s" % err.value.decode("utf-8", "replace"))
    return out
