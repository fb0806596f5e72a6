"""Errors as a fraction of the outputs' own size: bounds that hold wherever training lands.

A trained model's outputs have no fixed size. Training is deterministic per release, yet another machine
(its BLAS, its thread count) lands on other weights, and logits near 1 on one machine are in the hundreds on
another; the ``large`` reference case multiplies the inputs by 1000 besides. An absolute bound on an error
(``max_abs < 0.01``) then fails on a model that is right. These helpers divide an error by the largest
magnitude of the output it was measured on, so that a bound reads "off by at most this fraction of the
output's scale": float noise passes, an output 1% off or another model's output does not.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from kit.common import artifacts


def scale(array) -> float:
    """The largest finite magnitude in ``array`` (0.0 when it has none)."""
    a = np.asarray(array, dtype=np.float64)
    finite = a[np.isfinite(a)]
    return float(np.abs(finite).max()) if finite.size else 0.0


def relative(error, magnitude: float) -> float:
    """``error`` as a fraction of ``magnitude``: no error is 0, and an all-zero output tolerates none
    (any error is infinitely far). A missing error (outputs of another shape) is infinitely far too."""
    if error is None:
        return math.inf
    if error == 0:
        return 0.0
    return error / magnitude if magnitude > 0 else math.inf


def reference(rec: dict) -> dict:
    """The saving release's reference cases of a record's artifact: ``<artifact>/reference.npz``."""
    return artifacts.load_reference(str(Path(rec["artifact"]) / artifacts.REFERENCE))


def reference_scale(ref: dict) -> float:
    """The largest magnitude of any reference output, over every case: the scale of a summary's ``max_abs``
    (the worst over every case)."""
    return max(scale(out) for case in ref.values() for out in case["output"])


def relative_errors(rec: dict, cases=None, ref: dict | None = None) -> dict:
    """``{"case/i": max_abs / max|reference output i of case|}`` for every output of every case of ``rec``
    (only ``cases`` when given)."""
    ref = reference(rec) if ref is None else ref
    return {
        f"{case}/{i}": relative(m.get("max_abs"), scale(ref[case]["output"][i]))
        for case, outputs in rec["cases"].items()
        if cases is None or case in cases
        for i, m in enumerate(outputs)
    }


def worst_relative_error(rec: dict, cases=None, ref: dict | None = None) -> float:
    """The largest of :func:`relative_errors`: how far the record's outputs moved, for the output that moved
    most relative to its own size."""
    return max(relative_errors(rec, cases, ref).values())


def internals_scales(path) -> dict:
    """``{node output: max|value|}`` of an internals file (``internals.npz``: what the saving release computed
    at every node of the graph), the scale of an investigation's per-node ``max_abs``."""
    with np.load(path, allow_pickle=False) as z:
        return {k[len("node.") :]: scale(z[k]) for k in z.files if k.startswith("node.")}
