"""Shapes other than a square: image_size=(H, W) for center (with
resize_size) and resize, byte for byte torchvision's with exact=True;
RandomResizedCrop((H, W))'s draws against torchvision's (chi-square); the
letterbox's sizes, scales and padding; native sizes as a list or a padded
tensor; the options' checks."""

import os

import numpy as np
import pytest

import ringfeed
from rfhelpers import imagefolder_samples, rrc_draw_table, write_jpeg

T = pytest.importorskip("torchvision.transforms")
torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")

# landscape, portrait, square, wide, tall: (w, h)
SIZES = [(230, 170), (160, 240), (190, 190), (300, 110), (100, 260), (201, 149)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("shapes") / "data")
    for i, (w, h) in enumerate(SIZES * 2):
        write_jpeg(os.path.join(root, "c%d" % (i % 2), "p%02d.jpg" % i), w, h, 40 + i,
                   gray=(i == 5), progressive=(i == 7))
    return root


def make(src, **kw):
    base = dict(batch_size=5, shuffle=False, num_workers=2, output="numpy", flip=False)
    base.update(kw)
    return ringfeed.Loader(src, **base)


def by_index(ld):
    """{sample index: the batch's fields for it} over one epoch."""
    out = {}
    for batch in ld.iter_with_indices():
        idx = batch[-1]
        for k, s in enumerate(idx.tolist()):
            out[s] = tuple(x[k] for x in batch[:-1])
    return out


def pil(path):
    with Image.open(path) as im:
        return im.convert("RGB")


@pytest.mark.parametrize("hw,resize", [((60, 100), None), ((100, 60), None), ((64, 96), 80),
                                       ((50, 70), (90, 120)), ((224, 320), None)])
def test_center_rectangle_is_torchvision(folder, hw, resize):
    H, W = hw
    r = int(round(max(H, W) / 0.875)) if resize is None else resize
    ref = T.Compose([T.Resize(r if isinstance(r, int) else tuple(r)), T.CenterCrop((H, W)),
                     T.PILToTensor()])
    kw = {} if resize is None else {"resize_size": resize}
    with make(folder, image_size=hw, transform="center", exact=True, **kw) as ld:
        assert ld.image_size == hw
        got = by_index(ld)
    samples, _ = imagefolder_samples(folder)
    for s, (path, _) in enumerate(samples):
        want = ref(pil(path)).permute(1, 2, 0).numpy()
        assert got[s][0].shape == (H, W, 3)
        assert np.array_equal(got[s][0], want), path


def test_resize_is_torchvision(folder):
    samples, _ = imagefolder_samples(folder)
    for layout in ("NHWC", "NCHW"):
        with make(folder, image_size=(48, 80), transform="resize", exact=True,
                  layout=layout) as ld:
            got = by_index(ld)
        for s, (path, _) in enumerate(samples):
            want = T.PILToTensor()(T.Resize((48, 80))(pil(path))).numpy()
            if layout == "NHWC":
                want = want.transpose(1, 2, 0)
            assert np.array_equal(got[s][0], want), path


def test_rrc_rectangle_draws_like_torchvision(folder):
    """RandomResizedCrop((H, W)): the boxes (explain) drawn as torchvision's
    get_params draws them: a two-sample chi-square over (width, height,
    top, left) bins, 20k draws each (bench/shapes_check.py: 100k)."""
    stats = pytest.importorskip("scipy.stats")
    n = 20_000
    with make(folder, image_size=(64, 112), transform="random_resized_crop") as ld:
        ours = []
        for e in range(n):
            c = ld.explain(0, epoch=e)["crop"]
            ours.append((c["width"], c["height"], c["top"], c["left"]))
        w, h = ld.explain(0)["width"], ld.explain(0)["height"]
    table = rrc_draw_table(ours, w, h, 6, 3)
    assert table.shape[1] > 10
    p = stats.chi2_contingency(table)[1]
    assert p > 0.001, (p, table)


@pytest.mark.parametrize("align", ["center", "top_left"])
def test_letterbox_sizes_scale_padding(folder, align):
    fill = (114, 3, 250)
    H, W = 96, 128
    samples, _ = imagefolder_samples(folder)
    with make(folder, image_size=(H, W), transform="letterbox", exact=True, fill=fill,
              align=align, flip=True, output="torch") as ld:
        got = by_index(ld)
        flips = {s: ld.explain(s, epoch=0)["flip"] for s in got}
    kinds = set()
    for s, (path, _) in enumerate(samples):
        image, _, size, scale = got[s]
        im = pil(path)
        w, h = im.size
        r = min(H / h, W / w)
        assert float(scale) == np.float32(r)
        nh, nw = int(size[0]), int(size[1])
        assert (nh, nw) == ((H, round(w * H / h)) if w * H <= W * h else (round(h * W / w), W))
        kinds.add("portrait" if nh == H and nw < W else "landscape" if nw == W and nh < H
                  else "fills")
        y0, x0 = ((H - nh) // 2, (W - nw) // 2) if align == "center" else (0, 0)
        want = np.asarray(T.Resize((nh, nw))(im))
        if flips[s]:
            want = want[:, ::-1]
        arr = image.numpy()
        assert np.array_equal(arr[y0:y0 + nh, x0:x0 + nw], want), path
        pad = np.ones((H, W), bool)
        pad[y0:y0 + nh, x0:x0 + nw] = False
        assert (arr[pad] == np.array(fill, np.uint8)).all()
    assert {"portrait", "landscape"} <= kinds


def test_native_sizes_list_and_padded(folder):
    M = 200
    samples, _ = imagefolder_samples(folder)
    with make(folder, max_side=M) as ld:
        assert ld.stats()["shapes"]["max_side"] == M
        for images, labels, sizes, scale, idx in ld.iter_with_indices():
            assert isinstance(images, list) and len(images) == len(idx)
            for img, sz, sc, s in zip(images, sizes, scale, idx.tolist()):
                w, h = pil(samples[s][0]).size
                if max(w, h) <= M:
                    assert img.shape == (h, w, 3) and sc == 1.0
                    assert np.array_equal(img, np.asarray(pil(samples[s][0])))
                else:
                    assert max(img.shape[:2]) == M
                assert tuple(sz) == img.shape[:2]
    with make(folder, max_side=M, pad=True, layout="NCHW", fill=7) as ld:
        for images, labels, sizes, scale in ld:
            mh, mw = sizes.max(axis=0)
            assert images.shape == (len(sizes), 3, mh, mw)
            for img, (hh, ww) in zip(images, sizes):
                assert (img[:, hh:, :] == 7).all() and (img[:, :, ww:] == 7).all()


def test_float_output_rectangle(folder):
    """dtype float32 with a rectangle: the uint8 output normalised."""
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    kw = dict(image_size=(40, 72), transform="letterbox", fill=9)
    with make(folder, **kw) as ld:
        u8 = by_index(ld)
    with make(folder, dtype="float32", mean=mean, std=std, **kw) as ld:
        f32 = by_index(ld)
    for s in u8:
        want = (u8[s][0].astype(np.float32) / np.float32(255) - np.float32(mean)) / \
            np.float32(std)
        assert np.array_equal(f32[s][0], want.astype(np.float32))


def test_shape_options_refused(folder):
    with pytest.raises(ValueError, match="max_side"):
        make(folder, pad=True)
    with pytest.raises(ValueError, match="fill"):
        make(folder, transform="letterbox", fill=(1, 2))
    with pytest.raises(ValueError, match="fill"):
        make(folder, transform="letterbox", fill=300)
    with pytest.raises(ValueError, match="resize_size"):
        make(folder, transform="resize", resize_size=100)
    with pytest.raises(ValueError, match="align"):
        make(folder, transform="center", align="top_left")
    with pytest.raises(ValueError, match="image_size"):
        make(folder, image_size=(10, 20, 30))
    with pytest.raises(ValueError, match="twice"):
        make(folder, buckets=[(8, 8), (8, 8)])
