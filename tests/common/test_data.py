import hashlib

import numpy as np

from kit.common import data

# sha256 prefixes measured once; the same on numpy 1.13 (MXNet 1.0's env), 1.23 and 2.x
EXPECTED = {
    "tabular": "95cf06a8aeba6578",
    "images": "9241d0c83a443706",
    "raw_images": "97b2b0ac08953e9d",
    "tokens": "caf9208a5d9d8cd2",
}


def _digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def test_generators_give_the_same_bytes_on_every_numpy():
    assert _digest(*data.tabular(64, seed=3)) == EXPECTED["tabular"]
    assert _digest(*data.images(16, channels=3, size=16, seed=3)) == EXPECTED["images"]
    assert _digest(*data.raw_images(8, size=36, seed=3)) == EXPECTED["raw_images"]
    assert _digest(*data.tokens(32, seed=3)) == EXPECTED["tokens"]


def test_seeds_change_samples_not_classes():
    x1, y1 = data.tabular(32, seed=1)
    x2, y2 = data.tabular(32, seed=2)
    assert not np.array_equal(x1, x2)
    assert set(y1.astype(int)) <= set(range(4)) and set(y2.astype(int)) <= set(range(4))


def test_shapes_dtypes_and_ranges():
    x, y = data.images(5, channels=1, size=28)
    assert x.shape == (5, 1, 28, 28) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1
    x, y = data.raw_images(3, size=36)
    assert x.shape == (3, 36, 36, 3) and x.dtype == np.uint8
    x, y = data.tokens(4, seq_len=16, vocab=40)
    assert x.shape == (4, 16) and x.min() >= 0 and x.max() < 40 and y.dtype == np.float32


def test_batches_cover_every_sample_once():
    x, y = data.tabular(70, seed=0)
    seen = np.concatenate([xb for xb, _ in data.batches(x, y, 32, shuffle_seed=5)])
    assert seen.shape == x.shape
    assert np.array_equal(np.sort(seen[:, 0]), np.sort(x[:, 0]))
