"""Reference inputs: a realistic batch plus the edge cases where numerics move first."""

import os
from collections import OrderedDict

import numpy as np

BATCH = int(os.environ.get("MXCOMPAT_REFERENCE_BATCH", "8"))  # the benchmark doubles it to measure growth
EDGE = 2
LARGE_SCALE = 1000.0


def reference_cases(input_specs, heldout):
    """case -> {input name: array} for one model.

    ``heldout`` is a dict of input name to held-out samples (never trained on).
    Cases: ``batch`` (real samples), ``zeros``, ``large`` (magnitudes x1000, the
    largest token id, or white pixels), ``negative`` (float inputs only) and
    ``batch_of_one`` (the first real sample alone: the inference-only deployment, bound
    at batch size 1; models with a batch axis only).
    """
    cases = OrderedDict((name, {}) for name in ("batch", "zeros", "large", "negative", "batch_of_one"))
    for spec in input_specs:
        x = heldout[spec.name]
        single = spec.kind == "pixels_single"  # one image per call, no batch axis
        real = x[0] if single else x[:BATCH]
        edge = real if single else x[:EDGE]
        cases["batch"][spec.name] = real
        cases["zeros"][spec.name] = np.zeros_like(edge)
        if spec.kind == "float":
            cases["large"][spec.name] = (edge * LARGE_SCALE).astype(edge.dtype)
            cases["negative"][spec.name] = -np.abs(edge)
        elif spec.kind == "tokens":
            cases["large"][spec.name] = np.full_like(edge, spec.vocab - 1)
        else:
            cases["large"][spec.name] = np.full_like(edge, 255)
        if not single:
            cases["batch_of_one"][spec.name] = x[:1]
    return OrderedDict((k, v) for k, v in cases.items() if len(v) == len(input_specs))


CASE_NOTES = {
    "batch": "held-out samples from the model's generator",
    "zeros": "all zeros",
    "large": "float inputs x1000; token inputs at the largest id; pixels at 255",
    "negative": "minus the absolute value of held-out samples (float inputs only)",
    "batch_of_one": "the first held-out sample alone, bound at batch size 1 (inputs with a batch axis only)",
}
