"""ringfeed.augment.apply against torchvision 0.14's functional ops on the same
uint8 tensor, every op at 5 magnitudes on photo-like pictures made here
(rfhelpers.photo_like: gradients, hard-edged shapes, texture, noise).

The bars are the issue's: identical bytes for Identity, Posterize, Solarize,
Equalize, AutoContrast, Invert, Grayscale and Erase with a value; max |diff|
<= 1 for Brightness, Color, Contrast, Sharpness, Hue and Saturation; >= 99%
identical pixels for the NEAREST affine ops (shear, translate, rotate) with
the same fill.
"""

import numpy as np
import pytest

import ringfeed
from rfhelpers import photo_like

torch = pytest.importorskip("torch")
F = pytest.importorskip("torchvision.transforms.functional")
from torchvision.transforms import InterpolationMode  # noqa: E402
from torchvision.transforms.autoaugment import _apply_op  # noqa: E402

apply = ringfeed.augment.apply

SIZES = [(224, 224, 1), (97, 61, 2), (160, 120, 3)]  # (w, h, seed): odd, tall, wide


def pictures():
    return [photo_like(w, h, s) for w, h, s in SIZES]


def tv(img):
    return torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).contiguous()


def back(t):
    return t.permute(1, 2, 0).contiguous().numpy()


def tv_op(img, name, magnitude, fill=None):
    """torchvision's _apply_op on the picture, as its auto-augment transforms call it."""
    return back(_apply_op(tv(img), name, magnitude, InterpolationMode.NEAREST, fill))


def maxdiff(a, b):
    return int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max())


@pytest.mark.parametrize("name", ["Identity", "AutoContrast", "Equalize", "Invert"])
def test_parameterless_ops_are_identical(name):
    for img in pictures() + [np.full((20, 30, 3), 77, np.uint8)]:  # a flat one too
        assert np.array_equal(apply(img, name), tv_op(img, name, 0.0)), name


def test_autocontrast_on_narrow_ranges():
    """Channels spanning less than 0..255, where the scale is not 1 (torch
    takes 255 / (max - min) as a reciprocal times 255)."""
    for s, (lo, span) in enumerate([(3, 250), (40, 97), (100, 13), (7, 181), (60, 3)]):
        img = (photo_like(71, 53, 20 + s).astype(np.int32) * span // 255 + lo).astype(np.uint8)
        assert np.array_equal(apply(img, "AutoContrast"), back(F.autocontrast(tv(img)))), (lo, span)


def test_equalize_on_low_contrast_pictures():
    for s in range(5):
        img = (photo_like(64, 48, 10 + s) // 16 + 100).astype(np.uint8)  # a few levels
        img[0, 0] = [0, 255, 3]
        assert np.array_equal(apply(img, "Equalize"), back(F.equalize(tv(img))))


@pytest.mark.parametrize("bits", [0, 1, 4, 6, 8])
def test_posterize_identical(bits):
    for img in pictures():
        assert np.array_equal(apply(img, "Posterize", bits=bits), back(F.posterize(tv(img), bits)))


@pytest.mark.parametrize("threshold", [0.0, 8.5, 127.5, 200.0, 255.0])
def test_solarize_identical(threshold):
    for img in pictures():
        assert np.array_equal(apply(img, "Solarize", threshold=threshold),
                              back(F.solarize(tv(img), threshold)))


def test_grayscale_identical():
    for img in pictures():
        ref = back(F.rgb_to_grayscale(tv(img), num_output_channels=3))
        assert np.array_equal(apply(img, "Grayscale"), ref)


def test_erase_with_a_value_identical():
    for img in pictures():
        h, w = img.shape[:2]
        for (i, j, eh, ew, v) in [(0, 0, h // 2, w // 3, 0), (5, 7, 10, 12, (10, 200, 33)),
                                  (h - 9, w - 4, 9, 4, 255)]:
            vt = torch.tensor([float(v)] if np.isscalar(v) else [float(x) for x in v])[:, None, None]
            ref = back(F.erase(tv(img), i, j, eh, ew, vt))
            assert np.array_equal(apply(img, "Erase", top=i, left=j, height=eh, width=ew, value=v),
                                  ref)


MAGS = [0.0, 0.1, 0.45, 0.9, 0.99]


@pytest.mark.parametrize("name", ["Brightness", "Color", "Contrast", "Sharpness"])
@pytest.mark.parametrize("sign", [1, -1])
def test_blend_ops_within_one(name, sign):
    for img in pictures():
        for m in MAGS:
            ours = apply(img, name, factor=1.0 + sign * m)
            assert maxdiff(ours, tv_op(img, name, sign * m)) <= 1, (name, sign * m)


@pytest.mark.parametrize("factor", [-0.5, -0.2, 0.0, 0.05, 0.5])
def test_hue_within_one(factor):
    for img in pictures():
        assert maxdiff(apply(img, "Hue", factor=factor), back(F.adjust_hue(tv(img), factor))) <= 1


@pytest.mark.parametrize("factor", [0.0, 0.3, 1.0, 1.7, 3.0])
def test_saturation_within_one(factor):
    for img in pictures():
        ref = back(F.adjust_saturation(tv(img), factor))
        assert maxdiff(apply(img, "Saturation", factor=factor), ref) <= 1


AFFINE = {
    "ShearX": [0.0, 0.1, -0.3, 0.6, -0.99],
    "ShearY": [0.0, -0.1, 0.3, -0.6, 0.99],
    "TranslateX": [0.0, 3.7, -20.0, 45.0, -101.0],
    "TranslateY": [0.0, -3.7, 20.0, -45.0, 101.0],
    "Rotate": [0.0, 9.0, -30.0, 90.0, -135.0],
}


@pytest.mark.parametrize("name", sorted(AFFINE))
@pytest.mark.parametrize("fill", [None, (128, 10, 250)])
def test_affine_ops_nearest_99_percent(name, fill):
    for img in pictures():
        for m in AFFINE[name]:
            key = {"Rotate": "angle"}.get(name, "pixels" if "Translate" in name else "magnitude")
            ours = apply(img, name, fill=fill, **{key: m})
            ref = tv_op(img, name, m, None if fill is None else [float(v) for v in fill])
            same = np.all(ours == ref, axis=2).mean()
            assert same >= 0.99, (name, m, fill, same)


def test_bad_arguments_are_errors():
    img = photo_like(16, 16, 0)
    with pytest.raises(ValueError, match="unknown op"):
        apply(img, "Blur")
    with pytest.raises(ValueError, match="negative"):
        apply(img, "Brightness", factor=-1)
    with pytest.raises(ValueError, match="Posterize"):
        apply(img, "Posterize", bits=9)
    with pytest.raises(ValueError, match="not inside"):
        apply(img, "Erase", top=10, left=0, height=10, width=3, value=0)
    with pytest.raises(ValueError, match="Hue"):
        apply(img, "Hue", factor=0.6)
    with pytest.raises(TypeError):
        apply(img, "Rotate")
