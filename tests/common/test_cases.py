import numpy as np

from kit.common import cases


class _Spec(object):
    def __init__(self, kind, shape, dtype, vocab=None):
        self.name, self.kind, self.shape, self.dtype, self.vocab = "data", kind, shape, dtype, vocab


def test_float_inputs_get_every_edge_case():
    x = np.random.RandomState(0).randn(10, 3).astype(np.float32)
    got = cases.reference_cases([_Spec("float", (3,), "float32")], {"data": x})
    assert list(got) == ["batch", "zeros", "large", "negative", "batch_of_one"]
    assert got["batch_of_one"]["data"].shape == (1, 3) and np.array_equal(got["batch_of_one"]["data"][0], x[0])
    assert got["batch"]["data"].shape == (8, 3) and got["zeros"]["data"].shape == (2, 3)
    assert np.allclose(got["large"]["data"], x[:2] * 1000) and (got["negative"]["data"] <= 0).all()


def test_tokens_and_pixels_skip_negative():
    toks = np.ones((10, 5), np.float32)
    got = cases.reference_cases([_Spec("tokens", (5,), "float32", vocab=40)], {"data": toks})
    assert list(got) == ["batch", "zeros", "large", "batch_of_one"] and (got["large"]["data"] == 39).all()
    pix = np.ones((3, 4, 4, 3), np.uint8)
    got = cases.reference_cases([_Spec("pixels_single", (4, 4, 3), "uint8")], {"data": pix})
    assert got["batch"]["data"].shape == (4, 4, 3) and (got["large"]["data"] == 255).all()
    assert got["large"]["data"].dtype == np.uint8
    assert "batch_of_one" not in got  # one image per call: there is no batch axis to shrink
