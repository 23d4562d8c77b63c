"""exact=True (full-resolution decode: torchvision's pixels byte for byte)
and random_resized_crop's scale / ratio keywords, as torchvision's
RandomResizedCrop takes them."""

import os

import numpy as np
import pytest

import ringfeed
from ringfeed import _lib
from ringfeed._options import Options
from rfhelpers import gen_folder, imagefolder_samples, pil_folder, psnr, reference_center

S = 224


def make(src, **kw):
    base = dict(batch_size=6, image_size=S, transform="center", flip=False, shuffle=False,
                num_workers=2, output="numpy")
    base.update(kw)
    return ringfeed.Loader(src, **base)


def outputs(ld):
    """{sample index: uint8 [S, S, 3]} over one epoch."""
    out = {}
    for images, _, idx in ld.iter_with_indices():
        for k, s in enumerate(idx.tolist()):
            out[s] = np.array(images[k])
    return out


@pytest.fixture(scope="module", params=["gen", "pil"])
def big_folder(request, tmp_path_factory, gen, lib_ok):
    """Pictures of about 1200 x 900, large enough that exact=False decodes
    them at 1/2 scale for S = 224: by rf-gen-folder (photo-like, 4:2:0), and
    by PIL (varied: portrait, gray, progressive, 4:4:4)."""
    root = str(tmp_path_factory.mktemp("exact_" + request.param) / "data")
    if request.param == "gen":
        if not gen:
            pytest.skip("rf-gen-folder is not built")
        gen_folder(gen, root, 2, 4, 1200, 900, quality=90, seed=5)
    else:
        pil_folder(root, 2, 5, 1200, 900, seed=8)
    return root


def test_exact_center_is_torchvision_byte_for_byte(big_folder):
    samples, _ = imagefolder_samples(big_folder)
    refs = [reference_center(p, S) for p, _ in samples]
    with make(big_folder, exact=True) as ld:
        exact = outputs(ld)
        assert ld.stats()["dct_scaled"] == 0
    with make(big_folder) as ld:
        scaled = outputs(ld)
        assert ld.stats()["dct_scaled"] > 0
    assert sorted(exact) == list(range(len(samples)))
    for s, (path, _) in enumerate(samples):
        if not np.array_equal(exact[s], refs[s]):
            pytest.fail("%s: exact=True differs from torchvision (PSNR %.2f dB)"
                        % (os.path.basename(path), psnr(exact[s], refs[s])))
    # Without exact the same pictures are decoded at a reduced scale: close,
    # not equal (else this test could not tell the two apart).
    differ = [s for s in range(len(samples)) if not np.array_equal(scaled[s], refs[s])]
    assert differ
    assert min(psnr(scaled[s], refs[s]) for s in differ) > 30


def test_exact_sent_only_when_set():
    def params(**kw):
        return dict(Options("x", 8, 32, "center", False, "NHWC", False, 0, False, 1, "cpu", False,
                            4, "raise", 0, 1, 1, 512 << 20, kw).params)
    assert _lib.RF_P_EXACT not in params()
    assert _lib.RF_P_EXACT not in params(exact=False)
    assert params(exact=True)[_lib.RF_P_EXACT] == 1


# ------------------------------------------------------------- scale / ratio

RRC = dict(transform="random_resized_crop", image_size=48, flip=True, shuffle=True, seed=17)


def rrc_params(**kw):
    o = Options("x", 8, 48, "random_resized_crop", True, "NHWC", True, 0, False, 1, "cpu", False,
                4, "raise", 0, 1, 1, 512 << 20, kw)
    return {p: v for p, v in o.params
            if p in (_lib.RF_P_SCALE_MIN, _lib.RF_P_SCALE_MAX, _lib.RF_P_RATIO_MIN,
                     _lib.RF_P_RATIO_MAX)}


def test_scale_ratio_to_params():
    # The defaults, however spelled, are not sent: the library's own doubles apply.
    assert rrc_params() == {}
    assert rrc_params(scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)) == {}
    assert rrc_params(scale=[0.08, 1], ratio=(0.75, 1.3333333)) == {}
    # Others in millionths, each bound on its own.
    assert rrc_params(scale=(0.5, 1.0)) == {_lib.RF_P_SCALE_MIN: 500000}
    assert rrc_params(scale=(0.25, 0.75), ratio=(1, 2.5)) == {
        _lib.RF_P_SCALE_MIN: 250000, _lib.RF_P_SCALE_MAX: 750000,
        _lib.RF_P_RATIO_MIN: 1000000, _lib.RF_P_RATIO_MAX: 2500000}
    for bad in [(0, 1), (-0.1, 1), (1e-9, 0.5), (float("nan"), 1)]:
        with pytest.raises(ValueError, match="scale"):
            rrc_params(scale=bad)
    for bad in [0.5, (0.5,), (0.1, 0.2, 0.3), "ab", None]:
        with pytest.raises(TypeError, match="ratio must be a pair"):
            rrc_params(ratio=bad)


def test_scale_ratio_refused_by_the_library(folder):
    with pytest.raises(ValueError, match="scale \\(0.6, 0.5\\) has min > max"):
        make(folder, **dict(RRC, scale=(0.6, 0.5)))
    with pytest.raises(ValueError, match="ratio \\(2, 1.33333\\) has min > max"):
        make(folder, **dict(RRC, ratio=(2.0, 4 / 3)))
    with pytest.raises(ValueError, match="rejected"):
        make(folder, **dict(RRC, scale=(0.5, 1.5)))  # scale above 1
    with pytest.raises(ValueError, match="random_resized_crop only"):
        make(folder, transform="center", scale=(0.5, 1.0))


def test_scale_ratio_change_the_crops_deterministically(folder):
    with make(folder, **RRC) as ld:
        base = outputs(ld)
    with make(folder, **dict(RRC, scale=(0.08, 1.0), ratio=(0.75, 4 / 3))) as ld:
        assert all(np.array_equal(base[s], v) for s, v in outputs(ld).items())
    runs = []
    for _ in range(2):
        with make(folder, **dict(RRC, scale=(0.3, 0.4), ratio=(1.0, 1.0))) as ld:
            runs.append(outputs(ld))
    assert sorted(runs[0]) == sorted(base)
    assert all(np.array_equal(runs[0][s], runs[1][s]) for s in base)  # same seed, same crops
    assert sum(not np.array_equal(runs[0][s], base[s]) for s in base) > len(base) // 2


def test_scale_one_ratio_of_picture_is_whole_picture_resized(tmp_path):
    """scale=(1, 1), ratio=(w/h, w/h): every crop is the whole picture, so
    the output is torchvision's Resize((S, S)) (byte for byte, with exact)."""
    from PIL import Image
    root = str(tmp_path / "data")
    pil_folder(root, 2, 4, 300, 200, seed=12, variety=False)
    samples, _ = imagefolder_samples(root)
    size = 64

    def ref(path):
        with Image.open(path) as im:
            im = im.convert("RGB")
            try:
                import torchvision.transforms as T
                t = T.Compose([T.Resize((size, size)), T.PILToTensor()])
                return t(im).permute(1, 2, 0).numpy()
            except ImportError:
                return np.asarray(im.resize((size, size), Image.BILINEAR))

    with make(root, transform="random_resized_crop", image_size=size, flip=False,
              scale=(1.0, 1.0), ratio=(1.5, 1.5), exact=True) as ld:
        out = outputs(ld)
    assert len(out) == len(samples)
    for s, (path, _) in enumerate(samples):
        assert np.array_equal(out[s], ref(path)), path


def _coordinate_picture(path, n=256):
    """A picture whose red is its column and green its row (0..255)."""
    from PIL import Image
    y, x = np.mgrid[0:n, 0:n]
    arr = np.stack([x, y, np.full_like(x, 128)], axis=-1).astype(np.uint8)
    Image.fromarray(arr, "RGB").save(path, "JPEG", quality=98, subsampling=0)


def _crop_extent(img, size):
    """The crop's width and height in source pixels, read off the output of
    a coordinate picture: the first and last output columns sample source
    columns (size - 1) / size of the crop apart."""
    img = img.astype(np.float64)
    span_x = np.median(img[:, -1, 0] - img[:, 0, 0])
    span_y = np.median(img[-1, :, 1] - img[0, :, 1])
    return span_x * size / (size - 1), span_y * size / (size - 1)


def test_scale_ratio_statistics(tmp_path):
    """The crops' area fraction and ratio, measured on the pixels: fixed at
    scale=(0.5, 0.5), ratio=(1, 1); spread over (0.08, 1) by default."""
    root = tmp_path / "data"
    (root / "c").mkdir(parents=True)
    for i in range(40):
        _coordinate_picture(str(root / "c" / ("p%03d.jpg" % i)))
    size = 32
    n = 256.0
    with make(str(root), transform="random_resized_crop", image_size=size, flip=False,
              shuffle=False, exact=True, scale=(0.5, 0.5), ratio=(1.0, 1.0), seed=3) as ld:
        fixed = [_crop_extent(v, size) for v in outputs(ld).values()]
    fractions = [w * h / (n * n) for w, h in fixed]
    # round(sqrt(0.5 * 256^2)) = 181 on each side: 0.4999 of the area
    assert all(abs(f - 0.5) < 0.03 for f in fractions), fractions
    assert all(abs(w / h - 1) < 0.03 for w, h in fixed), fixed
    with make(str(root), transform="random_resized_crop", image_size=size, flip=False,
              shuffle=False, exact=True, seed=3) as ld:
        free = [_crop_extent(v, size) for v in outputs(ld).values()]
    fractions = np.array([w * h / (n * n) for w, h in free])
    ratios = np.array([w / h for w, h in free])
    assert fractions.min() < 0.3 and fractions.max() > 0.7
    assert fractions.min() > 0.08 - 0.02 and fractions.max() < 1.02
    assert ratios.min() > 0.75 - 0.04 and ratios.max() < 4 / 3 + 0.06
