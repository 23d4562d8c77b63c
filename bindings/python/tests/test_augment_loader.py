"""Augmentations in the loader, end to end: explain() against torchvision's ops
applied with the parameters it reports, the same bytes for 1 and 3 workers
and after an exact resume, normalised float outputs against T.Normalize, and
the bad-argument errors.
"""

import json

import numpy as np
import pytest

import ringfeed
from rfhelpers import pil_folder

torch = pytest.importorskip("torch")
F = pytest.importorskip("torchvision.transforms.functional")
from PIL import Image  # noqa: E402
from torchvision.transforms import InterpolationMode  # noqa: E402
from torchvision.transforms.autoaugment import _apply_op  # noqa: E402

S = 64
RECIPE = [ringfeed.RandAugment(2, 9), ringfeed.TrivialAugmentWide(),
          ringfeed.AutoAugment("imagenet"), ringfeed.ColorJitter(0.4, 0.4, 0.4, 0.1),
          ringfeed.RandomGrayscale(0.2), ringfeed.RandomErasing(0.5, value=(10, 200, 30))]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return pil_folder(str(tmp_path_factory.mktemp("aug") / "train"), 3, 8, 120, 90, seed=5)


def make(folder, **kw):
    args = dict(batch_size=6, image_size=S, transform="random_resized_crop", flip=True,
                seed=11, num_workers=2, output="numpy", exact=True)
    args.update(kw)
    return ringfeed.Loader(folder, **args)


def epoch(ld, e=None):
    if e is not None:
        ld.set_epoch(e)
    out = {}
    for images, labels, idx in ld.iter_with_indices():
        for k, i in enumerate(idx):
            out[int(i)] = np.array(images[k])
    return out


def tv(img):
    return torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).contiguous()


def back(t):
    return t.permute(1, 2, 0).contiguous().numpy()


def replay(img, ops):
    """torchvision's ops with the parameters explain() reports."""
    t = tv(img)
    for o in ops:
        name = o["op"]
        if o["transform"] in ("RandAugment", "TrivialAugmentWide", "AutoAugment"):
            t = _apply_op(t, name, o["magnitude"], InterpolationMode.NEAREST, o.get("fill"))
        elif name == "Brightness":
            t = F.adjust_brightness(t, o["factor"])
        elif name == "Contrast":
            t = F.adjust_contrast(t, o["factor"])
        elif name == "Saturation":
            t = F.adjust_saturation(t, o["factor"])
        elif name == "Hue":
            t = F.adjust_hue(t, o["factor"])
        elif name == "Grayscale":
            t = F.rgb_to_grayscale(t, num_output_channels=3)
        elif name == "Erase":
            v = torch.tensor(o["value"], dtype=torch.float32)[:, None, None]
            t = F.erase(t, o["top"], o["left"], o["height"], o["width"], v)
        else:
            raise AssertionError("unexpected op %r" % name)
    return back(t)


def test_explain_reproduces_the_loader_with_torchvision(folder):
    plain = epoch(make(folder))
    ld = make(folder, augment=RECIPE)
    aug = epoch(ld, 0)
    ld.set_epoch(0)
    kinds, n_ops = set(), 0
    for i, out in aug.items():
        ex = ld.explain(i)
        assert ex["sample"] == i and ex["epoch"] == 0 and ex["path"].endswith(".jpg")
        # the geometry: torchvision's resized_crop (+ hflip) of the box explain names, on PIL
        pil = Image.open(ex["path"]).convert("RGB")
        assert (ex["width"], ex["height"]) == pil.size
        c = ex["crop"]
        ref = F.resized_crop(pil, c["top"], c["left"], c["height"], c["width"], [S, S],
                             InterpolationMode.BILINEAR)
        if ex["flip"]:
            ref = F.hflip(ref)
        assert np.array_equal(np.asarray(ref), plain[i]), i
        # the augmentations: torchvision's ops with the reported parameters
        want = replay(plain[i], ex["augment"])
        diff = np.abs(want.astype(int) - out.astype(int))
        assert (diff.max(axis=2) == 0).mean() >= 0.99 and diff.max() <= 255, (i, ex["augment"])
        kinds.update(o["op"] for o in ex["augment"])
        n_ops += len(ex["augment"])
    assert n_ops > 3 * len(aug) and len(kinds) >= 8, kinds  # the recipe did draw things


def test_augment_changes_no_crop_and_keeps_count(folder):
    a = epoch(make(folder))
    b = epoch(make(folder, augment=[ringfeed.RandomErasing(1.0, value=7)]))
    assert a.keys() == b.keys()
    changed = sum(not np.array_equal(a[i], b[i]) for i in a)
    assert changed >= len(a) * 0.9


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_same_bytes_for_1_and_3_workers(folder, layout):
    r = [epoch(make(folder, augment=RECIPE, num_workers=w, layout=layout), 2) for w in (1, 3)]
    assert r[0].keys() == r[1].keys()
    assert all(np.array_equal(r[0][i], r[1][i]) for i in r[0])


def test_exact_resume_identical(folder):
    ld = make(folder, augment=RECIPE, batch_size=4)
    ld.set_epoch(1)
    it = ld.iter_with_indices()
    next(it)
    next(it)
    state = ld.state_dict()
    rest = [(np.array(x), np.array(i)) for x, _, i in it]
    ld2 = make(folder, augment=RECIPE, batch_size=4, num_workers=3)
    ld2.load_state_dict(json.loads(json.dumps(state)))
    again = [(np.array(x), np.array(i)) for x, _, i in ld2.iter_with_indices()]
    assert len(rest) == len(again) > 0
    for (x1, i1), (x2, i2) in zip(rest, again):
        assert np.array_equal(i1, i2) and np.array_equal(x1, x2)


MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_normalised_output_against_torchvision(folder, dtype, layout):
    u8 = make(folder, augment=[ringfeed.RandAugment(2, 9)], layout=layout, output="torch")
    fl = make(folder, augment=[ringfeed.RandAugment(2, 9)], layout=layout, output="torch",
              dtype=dtype, mean=MEAN, std=STD)
    from ringfeed._normalize import normalize
    for (a, _), (b, _) in zip(u8, fl):
        x = a if layout == "NCHW" else a.permute(0, 3, 1, 2)
        ref = F.normalize(x.to(torch.float32) / 255, MEAN, STD)
        if layout == "NHWC":
            ref = ref.permute(0, 2, 3, 1)
        assert b.dtype == getattr(torch, dtype) and b.shape == a.shape
        if dtype == "float32":
            assert (b - ref).abs().max().item() <= 1e-6
        else:  # within one unit in the last place of the 16-bit type
            r16 = ref.to(b.dtype)
            ulp = (r16.to(torch.float32).abs() * (2.0 ** -10 if dtype == "float16" else 2.0 ** -7))
            assert ((b.to(torch.float32) - r16.to(torch.float32)).abs() <= ulp + 1e-12).all()
        # the CUDA path's normalisation (torch, after the copy), here on the CPU: same values
        dev = normalize(a, MEAN, STD, dtype, layout, torch)
        assert torch.equal(dev.view(torch.int16) if dtype != "float32" else dev,
                           b.view(torch.int16) if dtype != "float32" else b)


def test_erasing_after_normalize_in_float_outputs(folder):
    er = ringfeed.RandomErasing(1.0, value=0)
    ld = make(folder, augment=[ringfeed.RandAugment(1, 5), er], dtype="float32", mean=MEAN,
              std=STD, batch_size=4)
    images, _, idx = next(ld.iter_with_indices())
    ld.set_epoch(0)
    for k, i in enumerate(idx):
        ops = ld.explain(int(i))["augment"]
        e = [o for o in ops if o["op"] == "Erase"]
        if not e:
            continue  # no box fitted in ten tries
        e = e[0]
        assert e["deferred"] is True
        box = images[k][e["top"]:e["top"] + e["height"], e["left"]:e["left"] + e["width"]]
        assert np.all(box == 0.0)  # 0 in the normalised space, as after T.Normalize


def test_bad_specs_name_the_transform_and_argument(folder):
    with pytest.raises(ValueError, match="RandAugment.*magnitude"):
        make(folder, augment="RandAugment(2, 40)")
    with pytest.raises(ValueError, match="ColorJitter.*hue"):
        make(folder, augment=[ringfeed.ColorJitter(hue=0.7)])
    with pytest.raises(ValueError, match="unknown transform"):
        make(folder, augment="RandomBlur(3)")
    with pytest.raises(ValueError, match="RandomErasing.*scale"):
        make(folder, augment=[ringfeed.RandomErasing(0.5, scale=(0.5, 0.1))])
    with pytest.raises(ValueError, match="std"):
        make(folder, dtype="float32", mean=MEAN, std=(0.2, 0.0, 0.2))
    with pytest.raises(ValueError, match="dtype"):
        make(folder, dtype="int32")


def test_stats_report_the_augment_stage(folder):
    ld = make(folder, augment=RECIPE, dtype="float16", mean=MEAN, std=STD)
    epoch(ld)
    st = ld.stats()
    assert st["stage_seconds"]["augment"] > 0 and st["stage_seconds"]["convert"] > 0
    assert st["per_image_ms"]["augment"] > 0
