"""Synthetic data the kit generates deterministically: no downloads, same bytes on every release.

Everything is drawn from ``numpy.random.RandomState`` (whose legacy stream is
stable across numpy versions), so a data set is a pure function of its
arguments and the seed. Each generator returns ``(x, y)`` with labels as
float32 class indices, the form MXNet's losses take.
"""

import numpy as np


def _rng(seed, salt):
    return np.random.RandomState((int(seed) * 1000003 + salt) % (2**32))


def tabular(n, n_features=20, n_classes=4, seed=0):
    """Gaussian clusters around fixed class centres: ``x`` float32 (n, n_features)."""
    centres = _rng(0, 11).randn(n_classes, n_features).astype(np.float32) * 1.5
    rng = _rng(seed, 12)
    y = rng.randint(0, n_classes, size=n)
    x = centres[y] + rng.randn(n, n_features).astype(np.float32)
    return x.astype(np.float32), y.astype(np.float32)


def images(n, channels=1, size=28, n_classes=4, seed=0):
    """Class templates (smooth random blobs) plus noise: ``x`` float32 (n, channels, size, size) in [0, 1]."""
    trng = _rng(0, 21)
    templates = np.zeros((n_classes, channels, size, size), dtype=np.float64)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    for c in range(n_classes):
        for _ in range(3):
            cy, cx = trng.uniform(0, size, 2)
            radius = trng.uniform(size / 8.0, size / 4.0)
            blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * radius**2))
            templates[c] += blob[None, :, :] * trng.uniform(0.5, 1.0, (channels, 1, 1))
    # np.exp's last bit differs between numpy builds (SIMD paths): rounding keeps the bytes identical
    templates = np.round(templates / templates.max(), 6).astype(np.float32)
    rng = _rng(seed, 22)
    y = rng.randint(0, n_classes, size=n)
    x = templates[y] + rng.randn(n, channels, size, size).astype(np.float32) * 0.25
    return np.clip(x, 0, 1).astype(np.float32), y.astype(np.float32)


def raw_images(n, size=32, n_classes=4, seed=0):
    """Camera-like images: ``x`` uint8 (n, size, size, 3), HWC, each class a colour pattern."""
    x, y = images(n, channels=3, size=size, n_classes=n_classes, seed=seed)
    hwc = np.transpose(x, (0, 2, 3, 1))
    return np.round(hwc * 255).astype(np.uint8), y


def tokens(n, seq_len=16, vocab=40, n_classes=3, seed=0):
    """Token sequences whose class decides which part of the vocabulary dominates: float32 ids (n, seq_len)."""
    rng = _rng(seed, 31)
    y = rng.randint(0, n_classes, size=n)
    band = vocab // n_classes
    x = rng.randint(0, vocab, size=(n, seq_len))
    own = rng.rand(n, seq_len) < 0.6
    banded = y[:, None] * band + rng.randint(0, band, size=(n, seq_len))
    x = np.where(own, banded, x)
    return x.astype(np.float32), y.astype(np.float32)


def batches(x, y, batch_size, shuffle_seed=None):
    """Yield ``(xb, yb)`` numpy slices, shuffled by ``shuffle_seed`` when given."""
    order = np.arange(len(x))
    if shuffle_seed is not None:
        _rng(shuffle_seed, 41).shuffle(order)
    for start in range(0, len(x), batch_size):
        idx = order[start : start + batch_size]
        yield x[idx], y[idx]
