"""Helpers for the binding's tests: test images (rf-gen-folder or PIL), the
torchvision reference pipeline, batch hashing, subprocess runs."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_DIR = os.path.dirname(HERE)                       # bindings/python
REPO = os.path.normpath(os.path.join(PKG_DIR, "..", ".."))
IMG_EXT = (".jpg", ".jpeg", ".JPEG")


# ------------------------------------------------------------------ images

def photo_like(width, height, seed):
    """A deterministic RGB picture with gradients, shapes, texture and noise
    (so resizing behaves as on photos), uint8 [h, w, 3]."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    u, v = x / max(width - 1, 1), y / max(height - 1, 1)
    base = rng.uniform(40, 200, size=3).astype(np.float32)
    slope = rng.uniform(-80, 80, size=(2, 3)).astype(np.float32)
    img = base + u[..., None] * slope[0] + v[..., None] * slope[1]
    for _ in range(4):  # shaded ellipses with hard edges
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        rx, ry = rng.uniform(width / 10, width / 3), rng.uniform(height / 10, height / 3)
        mask = ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 < 1
        img[mask] = rng.uniform(0, 255, size=3) + 20 * np.sin(x[mask, None] / 7.0)
    # low-frequency texture: upsampled noise
    gh, gw = max(2, height // 16), max(2, width // 16)
    coarse = rng.normal(0, 18, size=(gh, gw, 3)).astype(np.float32)
    yi = np.minimum((y / height * gh).astype(int), gh - 1)
    xi = np.minimum((x / width * gw).astype(int), gw - 1)
    img += coarse[yi, xi]
    img += 12 * np.sin(x[..., None] / 3.1 + y[..., None] / 5.3 + rng.uniform(0, 6, 3))
    img += rng.normal(0, 4, size=img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def write_jpeg(path, width, height, seed, gray=False, quality=90, progressive=False,
               subsampling=None):
    from PIL import Image
    arr = photo_like(width, height, seed)
    im = Image.fromarray(arr, "RGB")
    if gray:
        im = im.convert("L")
    kw = {"quality": quality}
    if progressive:
        kw["progressive"] = True
    if subsampling is not None and not gray:
        kw["subsampling"] = subsampling
    os.makedirs(os.path.dirname(path), exist_ok=True)
    im.save(path, "JPEG", **kw)


def pil_folder(root, classes, per_class, width, height, seed=0, variety=True):
    """root/classNN/imgNNNN.jpg made with PIL; sizes and kinds vary when variety."""
    i = 0
    for c in range(classes):
        for k in range(per_class):
            w, h = width, height
            kind = i % 5 if variety else 0
            if variety:
                w += (i * 7) % 23 - 11
                h += (i * 5) % 17 - 8
                if kind == 1:
                    w, h = h, w  # portrait
            write_jpeg(os.path.join(root, "class%02d" % c, "img%04d.jpg" % k), w, h, seed * 1000 + i,
                       gray=(kind == 2), progressive=(kind == 3),
                       subsampling=(0 if kind == 4 else None))
            i += 1
    return root


def find_gen():
    """Path of rf-gen-folder: $RINGFEED_GEN, else the repository's build/."""
    env = os.environ.get("RINGFEED_GEN")
    if env:
        return env
    p = os.path.join(REPO, "build", "rf-gen-folder")
    return p if os.access(p, os.X_OK) else None


def gen_folder(gen, out, classes, per_class, width, height, quality=90, seed=1):
    """Runs rf-gen-folder OUT --classes N --per-class N --width W --height H ..."""
    if os.path.exists(out):
        shutil.rmtree(out)
    cmd = [gen, out, "--classes", str(classes), "--per-class", str(per_class),
           "--width", str(width), "--height", str(height), "--quality", str(quality),
           "--seed", str(seed)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError("rf-gen-folder failed (%d): %s\n%s%s"
                           % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return out


def walk_folder(root):
    """ImageFolder semantics: sorted class dirs -> labels, sorted files."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    samples = []
    for label, c in enumerate(classes):
        d = os.path.join(root, c)
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if name.endswith(IMG_EXT) and os.path.isfile(p):
                samples.append((p, label))
    return samples


def imagefolder_samples(root):
    """(path, label) list from torchvision's ImageFolder when it imports, else walk_folder."""
    try:
        from torchvision.datasets import ImageFolder
    except Exception:
        return walk_folder(root), "walk"
    ds = ImageFolder(root)
    return [(p, int(t)) for p, t in ds.samples], "torchvision"


# --------------------------------------------------------------- reference

def reference_center(path, size):
    """torchvision Resize(round(S/0.875)) + CenterCrop(S) + PILToTensor on
    PIL's RGB decode, as uint8 [S, S, 3] (PIL-only fallback with the same
    arithmetic when torchvision does not import)."""
    from PIL import Image
    with Image.open(path) as im:
        im = im.convert("RGB")
        resize = int(round(size / 0.875))
        try:
            import torchvision.transforms as T
            t = T.Compose([T.Resize(resize), T.CenterCrop(size), T.PILToTensor()])
            return t(im).permute(1, 2, 0).numpy().copy()
        except ImportError:
            pass
        w, h = im.size
        if w <= h:
            nw, nh = resize, int(resize * h / w)
        else:
            nw, nh = int(resize * w / h), resize
        im = im.resize((nw, nh), Image.BILINEAR)
        top = int(round((nh - size) / 2.0))
        left = int(round((nw - size) / 2.0))
        return np.asarray(im.crop((left, top, left + size, top + size))).copy()


def psnr(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    mse = np.mean((a - b) ** 2)
    return 100.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


# ------------------------------------------------------------------ batches

def as_numpy(x):
    return x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else np.asarray(x)


def batch_digest(images, labels):
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(as_numpy(images)).tobytes())
    h.update(np.ascontiguousarray(as_numpy(labels)).astype(np.int64).tobytes())
    return h.hexdigest()


def epoch_digests(loader, epoch=None):
    if epoch is not None:
        loader.set_epoch(epoch)
    return [batch_digest(i, l) for i, l in loader]


# --------------------------------------------------------------- processes

def child_env(extra=None):
    import ringfeed
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["RINGFEED_LIBRARY"] = os.path.abspath(ringfeed.library_path()) \
        if os.path.exists(ringfeed.library_path()) else ringfeed.library_path()
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if extra:
        env.update(extra)
    return env


def run_python(code, env_extra=None, args=(), timeout=300):
    """Runs code in a fresh interpreter; returns the JSON it prints last."""
    code = "import sys, json\nsys.path.insert(0, %r)\n" % HERE + textwrap.dedent(code)
    r = subprocess.run([sys.executable, "-c", code] + list(args), env=child_env(env_extra),
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError("child failed (%d):\nstdout:\n%s\nstderr:\n%s"
                             % (r.returncode, r.stdout, r.stderr))
    lines = [l for l in r.stdout.splitlines() if l.strip()]
    return json.loads(lines[-1])


def wait_child(pid, timeout=60):
    """The wait status of forked child pid, or None when it did not end
    within timeout seconds (it is killed and reaped then)."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.02)


def tar_add(tf, name, data):
    """Adds a member `name` holding the bytes `data` to the open tarfile tf."""
    import io
    import tarfile
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def tiny_jpeg_folder(root, n, classes, seed):
    """n small JPEGs (40..44 x 36) in `classes` class folders, image i in class
    i % classes: an image folder whose size divides by few world sizes."""
    for i in range(n):
        write_jpeg(os.path.join(root, "c%d" % (i % classes), "i%02d.jpg" % i), 40 + i % 5, 36,
                   seed + i)
    return root


def epoch_under_raise(ld):
    """Iterates epoch 0 of ld (on_error="raise"), resuming after each batch
    that raised (it was consumed): returns (batches delivered, the errors in
    order, the state dict after the last error). Ends when an iteration
    finishes or a resume would start the next epoch."""
    import ringfeed
    ok, errors, state = 0, [], None
    while True:
        try:
            for _ in ld:
                ok += 1
            return ok, errors, state
        except ringfeed.RingfeedError as e:
            errors.append(e)
            state = ld.state_dict()
            if state["epoch"] != 0:
                return ok, errors, state
            ld.load_state_dict(state)


def write_cls_shard(path, keys, width, height, seed, labels):
    """A WebDataset shard at path: for each key a JPEG member KEY.jpg
    (width x height, content seed + i) and KEY.cls holding labels[i]."""
    import io
    import tarfile
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for i, key in enumerate(keys):
            jp = path + ".member.jpg"
            write_jpeg(jp, width, height, seed=seed + i)
            tf.add(jp, arcname=key + ".jpg")
            os.remove(jp)
            info = tarfile.TarInfo(key + ".cls")
            data = b"%d" % labels[i]
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path



def rrc_draw_table(ours, w, h, size_bins, place_bins):
    """A 2 x K contingency table of RandomResizedCrop boxes of a w x h
    picture: `ours` [(width, height, top, left)] against as many of
    torchvision's get_params draws (seeded), binned by size (size_bins per
    side) and place (place_bins per axis); bins with fewer than 20 draws in
    all pooled into one. For scipy.stats.chi2_contingency."""
    import collections

    import torch
    import torchvision.transforms as T
    torch.manual_seed(0)
    img = torch.zeros((3, h, w), dtype=torch.uint8)
    theirs = []
    for _ in range(len(ours)):
        i, j, ch, cw = T.RandomResizedCrop.get_params(img, (0.08, 1.0), (3 / 4, 4 / 3))
        theirs.append((cw, ch, i, j))

    def binned(d):
        return [(cw * size_bins // (w + 1), ch * size_bins // (h + 1),
                 (t * place_bins) // (h - ch + 1), (lf * place_bins) // (w - cw + 1))
                for cw, ch, t, lf in d]
    a, b = collections.Counter(binned(ours)), collections.Counter(binned(theirs))
    rows, pool = [], [0, 0]
    for k in set(a) | set(b):
        if a[k] + b[k] < 20:
            pool[0] += a[k]
            pool[1] += b[k]
        else:
            rows.append([a[k], b[k]])
    if sum(pool) >= 20:
        rows.append(pool)
    return np.array(rows).T
