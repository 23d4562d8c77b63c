"""The augmentations' random draws follow torchvision's distributions.

100k draws per transform come from the C entry point (ringfeed.augment.draws,
rf_augment_draws: the loader's own drawing code, without pixels). Each is
tested with a chi-square test at p > 0.001: against the distribution
torchvision's code defines (uniform op choice, magnitude bins and signs,
Bernoulli probabilities, uniform orders and factors), and, two-sample,
against torchvision's own transforms run here with their ops recorded
instead of applied (5k draws of theirs).
"""

import collections

import numpy as np
import pytest

import ringfeed

stats = pytest.importorskip("scipy.stats")
torch = pytest.importorskip("torch")
T = pytest.importorskip("torchvision.transforms")
AA = pytest.importorskip("torchvision.transforms.autoaugment")

N = 100_000
N_TV = 5_000
P_MIN = 0.001
RA_OPS = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness",
          "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize"]
SIGNED = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
          "Contrast", "Sharpness"}


def uniform_ok(values, k):
    counts = np.bincount(np.asarray(values, dtype=np.int64), minlength=k)
    assert len(counts) == k, counts
    p = stats.chisquare(counts).pvalue
    assert p > P_MIN, (p, counts)


def same_distribution(ours, theirs, min_count=20):
    """Two-sample chi-square over the categories (rare ones pooled)."""
    a, b = collections.Counter(ours), collections.Counter(theirs)
    keys = sorted(set(a) | set(b), key=repr)
    rows, pool = [], [0, 0]
    for k in keys:
        if a[k] + b[k] < min_count:
            pool[0] += a[k]
            pool[1] += b[k]
        else:
            rows.append([a[k], b[k]])
    if sum(pool) >= min_count:
        rows.append(pool)
    assert len(rows) >= 2, (a, b)
    p = stats.chi2_contingency(np.array(rows).T)[1]
    assert p > P_MIN, (p, rows)


def bernoulli_ok(hits, n, p):
    k = int(np.sum(hits))
    pv = stats.binomtest(k, n, p).pvalue
    assert pv > P_MIN, (k, n, p, pv)


def recorded(transform, n, size=(3, 16, 16)):
    """torchvision's transform run n times with _apply_op recording (op, sign
    of a signed op's magnitude, else 0) instead of changing the picture."""
    seen = []

    def rec(img, op_name, magnitude, interpolation, fill):
        seen[-1].append((op_name, int(np.sign(magnitude)) if op_name in SIGNED else 0))
        return img

    orig = AA._apply_op
    AA._apply_op = rec
    try:
        torch.manual_seed(0)
        img = torch.zeros(size, dtype=torch.uint8)
        for _ in range(n):
            seen.append([])
            transform(img)
    finally:
        AA._apply_op = orig
    return [tuple(s) for s in seen]


def test_randaugment():
    d = ringfeed.augment.draws([ringfeed.RandAugment(2, 9)], N, per_sample=4)
    for k in (0, 2):
        uniform_ok(d[:, k], 14)
    uniform_ok(d[:, 0] * 14 + d[:, 2], 196)  # the two ops independent
    for k in (0, 2):
        signed = np.isin(d[:, k], [RA_OPS.index(o) for o in SIGNED])
        assert np.all(d[~signed, k + 1] == 0) and np.all(np.abs(d[signed, k + 1]) == 1)
        uniform_ok(d[signed, k + 1] > 0, 2)
    ours = [((RA_OPS[int(a)], int(b)), (RA_OPS[int(c)], int(e))) for a, b, c, e in d[:N_TV * 2]]
    same_distribution([o[0] for o in ours], [t[0] for t in recorded(T.RandAugment(2, 9), N_TV)])


def test_trivialaugmentwide():
    d = ringfeed.augment.draws([ringfeed.TrivialAugmentWide()], N, per_sample=3)
    uniform_ok(d[:, 0], 14)
    has_bins = ~np.isin(d[:, 0], [0, 12, 13])
    assert np.all(d[~has_bins, 1] == -1)
    uniform_ok(d[has_bins, 1], 31)
    signed = np.isin(d[:, 0], [RA_OPS.index(o) for o in SIGNED])
    uniform_ok(d[signed, 2] > 0, 2)
    # against torchvision: (op, sign of the magnitude; bin 0 has magnitude 0)
    ours = [(RA_OPS[int(a)], 0 if b <= 0 else int(c)) for a, b, c in d[:N_TV * 2]]
    theirs = [t[0] for t in recorded(T.TrivialAugmentWide(), N_TV)]
    same_distribution(ours, theirs)


def test_autoaugment_imagenet():
    d = ringfeed.augment.draws([ringfeed.AutoAugment("imagenet")], N, per_sample=5)
    uniform_ok(d[:, 0], 25)
    uniform_ok(d[:, 3], 2)
    uniform_ok(d[:, 4], 2)
    pol = T.AutoAugment(T.AutoAugmentPolicy.IMAGENET).policies
    stat, dof = 0.0, 0
    for pid in range(25):
        rows = d[d[:, 0] == pid]
        for i in range(2):
            p = pol[pid][i][1]
            hits = rows[:, 1 + i]
            if p in (0.0, 1.0):
                assert np.all(hits == p), (pid, i)
                continue
            n = len(rows)
            stat += (hits.sum() - n * p) ** 2 / (n * p * (1 - p))
            dof += 1
    assert stats.chi2.sf(stat, dof) > P_MIN, (stat, dof)
    # against torchvision: the sequence of applied (op, sign) pairs
    ours = []
    for row in d[:N_TV * 2]:
        pid = int(row[0])
        seq = []
        for i in range(2):
            name, _, mag = pol[pid][i]
            if row[1 + i]:
                signed = name in SIGNED and mag not in (None, 0)
                seq.append((name, (1 if row[3 + i] else -1) if signed else 0))
        ours.append(tuple(seq))
    same_distribution(ours, recorded(T.AutoAugment(), N_TV))


def test_colorjitter():
    d = ringfeed.augment.draws([ringfeed.ColorJitter(0.4, (0.5, 1.5), 0.3, 0.1)], N,
                               per_sample=8)
    perms = d[:, :4].astype(int)
    assert np.all(np.sort(perms, axis=1) == np.arange(4))
    code = perms[:, 0] * 64 + perms[:, 1] * 16 + perms[:, 2] * 4 + perms[:, 3]
    _, counts = np.unique(code, return_counts=True)
    assert len(counts) == 24 and stats.chisquare(counts).pvalue > P_MIN
    for k, (lo, hi) in enumerate([(0.6, 1.4), (0.5, 1.5), (0.7, 1.3), (-0.1, 0.1)]):
        f = d[:, 4 + k]
        assert f.min() >= lo - 1e-6 and f.max() < hi + 1e-6
        uniform_ok(np.minimum(((f - lo) / (hi - lo) * 10).astype(int), 9), 10)
    off = ringfeed.augment.draws([ringfeed.ColorJitter(brightness=0.2)], 10, per_sample=8)
    assert np.all(np.isnan(off[:, 5:8])) and not np.any(np.isnan(off[:, 4]))


def test_randomgrayscale():
    d = ringfeed.augment.draws([ringfeed.RandomGrayscale(0.2)], N, per_sample=1)
    bernoulli_ok(d[:, 0], N, 0.2)


def test_randomerasing_against_torchvision():
    H, W = 224, 160
    d = ringfeed.augment.draws([ringfeed.RandomErasing(0.5)], N, height=H, width=W, per_sample=5)
    bernoulli_ok(d[:, 0], N, 0.5)
    boxes = d[(d[:, 0] == 1) & (d[:, 3] >= 0)][:, 1:5]
    assert np.all(boxes[:, 0] + boxes[:, 2] <= H) and np.all(boxes[:, 1] + boxes[:, 3] <= W)
    torch.manual_seed(1)
    img = torch.zeros((3, H, W))
    theirs = np.array([T.RandomErasing.get_params(img, (0.02, 0.33), (0.3, 3.3), [0.0])[:4]
                       for _ in range(N_TV)])
    theirs = theirs[theirs[:, 2] < H]  # their "no box fitted" return is the whole picture
    for col, edges in [(2, np.arange(0, H + 16, 16)), (3, np.arange(0, W + 16, 16)),
                       (0, np.arange(0, H + 16, 16)), (1, np.arange(0, W + 16, 16))]:
        a = np.digitize(boxes[:, col], edges)
        b = np.digitize(theirs[:, col], edges)
        same_distribution(a.tolist(), b.tolist())


def test_draws_are_a_function_of_the_sample():
    a = ringfeed.augment.draws([ringfeed.RandAugment(2, 9)], 50, first=10, per_sample=4)
    b = ringfeed.augment.draws([ringfeed.RandAugment(2, 9)], 60, first=0, per_sample=4)
    assert np.array_equal(a, b[10:])
    c = ringfeed.augment.draws([ringfeed.RandAugment(2, 9)], 60, seed=1, per_sample=4)
    assert not np.array_equal(b, c)
