"""Comparing a loaded model's outputs with the saving release's reference outputs."""

import numpy as np

from kit.common import tolerance as tolerance_mod


def _ordered(x):
    """Float bit patterns mapped to integers in the same order as the floats (-0.0 and 0.0 both 0)."""
    itype = {2: np.int16, 4: np.int32, 8: np.int64}[x.dtype.itemsize]
    i = x.view(itype).astype(np.int64)
    return np.where(i < 0, np.int64(np.iinfo(itype).min) - i, i)


def ulp_distance(a, b):
    """Units in the last place between float arrays of one dtype (absolute difference for integers)."""
    if a.dtype.kind in "iub":
        return np.abs(a.astype(np.int64) - b.astype(np.int64))
    return np.abs(_ordered(a) - _ordered(b))


def compare(actual, expected, tol):
    """Metrics of one output against its reference. Never raises on bad input: it reports it.

    Keys: shape/dtype match, identical, max_abs, max_rel, ulp_max, quantiles of the
    absolute error, fraction out of tolerance, the worst element with both values,
    top-1 agreement (for (batch, classes) scores), cosine similarity, NaN/Inf counts.
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    m = {
        "shape": list(actual.shape),
        "expected_shape": list(expected.shape),
        "dtype": str(actual.dtype),
        "expected_dtype": str(expected.dtype),
        "tolerance": tol,
    }
    m["shape_match"] = actual.shape == expected.shape
    m["dtype_match"] = actual.dtype == expected.dtype
    m["nan"] = int(np.isnan(actual).sum()) if actual.dtype.kind == "f" else 0
    m["inf"] = int(np.isinf(actual).sum()) if actual.dtype.kind == "f" else 0
    m["expected_nan"] = int(np.isnan(expected).sum()) if expected.dtype.kind == "f" else 0
    m["expected_inf"] = int(np.isinf(expected).sum()) if expected.dtype.kind == "f" else 0
    if not m["shape_match"]:
        m["identical"] = False
        return m
    m["identical"] = bool(m["dtype_match"] and _bitwise_equal(actual, expected))
    if actual.size == 0:
        m.update(max_abs=0.0, max_rel=0.0, ulp_max=0, frac_out_of_tolerance=0.0, within_tolerance=True)
        return m
    a = actual.astype(np.float64)
    b = expected.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(a - b)
    finite = np.isfinite(err)
    err_f = np.where(finite, err, 0.0)
    # safe denominator: |b|, but never below the tolerance's atol (or a tiny floor) so zeros do not explode
    denom = np.maximum(np.abs(b), max(tol["atol"], 1e-30))
    rel = np.where(finite, err_f / denom, np.inf)
    ok = tolerance_mod.within(actual, expected, tol)
    worst = int(np.argmax(np.where(finite, err_f, np.inf)))
    idx = np.unravel_index(worst, actual.shape)
    m.update(
        {
            "max_abs": float(err_f.max()) if finite.all() else float("inf"),
            "max_rel": float(rel.max()),
            "abs_error_quantiles": {
                "median": float(np.percentile(err_f, 50)),
                "p99": float(np.percentile(err_f, 99)),
                "max": float(err_f.max()),
            },
            "frac_out_of_tolerance": float(1.0 - ok.mean()),
            "within_tolerance": bool(ok.all()),
            "worst": {"index": [int(i) for i in idx], "actual": _num(actual[idx]), "expected": _num(expected[idx])},
            "cosine": _cosine(a, b),
        }
    )
    if m["dtype_match"] and actual.dtype.kind in "fiub":
        ulps = ulp_distance(actual, expected)
        m["ulp_max"] = int(ulps[finite].max()) if finite.any() else None
    if actual.ndim == 2 and actual.shape[1] > 1:
        m["top1_agreement"] = float((np.argmax(a, axis=1) == np.argmax(b, axis=1)).mean())
    return m


def _bitwise_equal(a, b):
    if a.dtype.kind == "f":
        return bool(np.array_equal(a.view(np.uint8), b.view(np.uint8)))
    return bool(np.array_equal(a, b))


def _num(x):
    x = float(x)
    return x if np.isfinite(x) else repr(x)


def _cosine(a, b):
    fa, fb = a.ravel(), b.ravel()
    keep = np.isfinite(fa) & np.isfinite(fb)
    fa, fb = fa[keep], fb[keep]
    na, nb = np.linalg.norm(fa), np.linalg.norm(fb)
    if na == 0 and nb == 0:
        return 1.0
    if na == 0 or nb == 0:
        return 0.0
    return float(np.dot(fa, fb) / (na * nb))


def summarize(all_metrics):
    """The worst of every metric over a record's outputs: its summary."""

    def worst(key):
        vals = [m[key] for m in all_metrics if m.get(key) is not None]
        return max(vals) if vals else None

    agreements = [m["top1_agreement"] for m in all_metrics if "top1_agreement" in m]
    return {
        "max_abs": worst("max_abs"),
        "max_rel": worst("max_rel"),
        "ulp_max": worst("ulp_max"),
        "frac_out_of_tolerance": worst("frac_out_of_tolerance"),
        "top1_agreement": min(agreements) if agreements else None,
        "cosine_min": min(m["cosine"] for m in all_metrics if "cosine" in m) if all_metrics else None,
    }
