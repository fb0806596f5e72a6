"""Verdicts of one (artifact, loading release) cell, from its metrics."""

IDENTICAL, CLOSE, DRIFT, MISMATCH = "identical", "close", "drift", "mismatch"
LOAD_ERROR, INFER_ERROR, CORRUPT, UNSUPPORTED = "load-error", "infer-error", "corrupt", "unsupported"
#: every verdict, from best to worst (a cell shows its worst)
SEVERITY = (IDENTICAL, CLOSE, UNSUPPORTED, DRIFT, MISMATCH, INFER_ERROR, LOAD_ERROR, CORRUPT)
PASSING = (IDENTICAL, CLOSE)
FAILING = (DRIFT, MISMATCH, LOAD_ERROR, INFER_ERROR, CORRUPT)
#: a parameter's status in an investigation: loaded exactly as saved, under its own name or another (1.x prefix vs
#: 2.0 structure); "same" is a direction, never a parameter status
PARAM_UNCHANGED, PARAM_RENAMED = "unchanged", "renamed, unchanged"
PARAMS_AS_SAVED = (PARAM_UNCHANGED, PARAM_RENAMED)


def from_metrics(metrics):
    """``(verdict, reason)`` from a list of per-output metrics (every case, every output).

    identical: bitwise equal everywhere; close: every element within tolerance;
    drift: past tolerance but every top-1 prediction agrees; mismatch: anything else
    (shape or dtype changed, NaN/Inf appeared, predictions changed, no outputs at all).
    """
    if not metrics:
        return MISMATCH, "no outputs were compared"
    for m in metrics:
        if not m["shape_match"]:
            return MISMATCH, "output shape %s, reference %s" % (m["shape"], m["expected_shape"])
        if not m["dtype_match"]:
            return MISMATCH, "output dtype %s, reference %s" % (m["dtype"], m["expected_dtype"])
        if m["nan"] != m["expected_nan"] or m["inf"] != m["expected_inf"]:
            return MISMATCH, "%d NaN / %d Inf in the output, %d / %d in the reference" % (
                m["nan"],
                m["inf"],
                m["expected_nan"],
                m["expected_inf"],
            )
    if all(m["identical"] for m in metrics):
        return IDENTICAL, None
    if all(m["within_tolerance"] for m in metrics):
        return CLOSE, None
    worst = max(metrics, key=lambda m: m["frac_out_of_tolerance"])
    agreements = [m.get("top1_agreement") for m in metrics]
    if all(a is not None for a in agreements) and min(agreements) == 1.0:
        return DRIFT, "%.2g%% of elements past tolerance (max abs %.3g), every top-1 prediction agrees" % (
            100 * worst["frac_out_of_tolerance"],
            worst["max_abs"],
        )
    if any(a is not None and a < 1.0 for a in agreements):
        return MISMATCH, "top-1 predictions changed for %.0f%% of samples" % (
            100 * (1 - min(a for a in agreements if a is not None))
        )
    return MISMATCH, "%.2g%% of elements past tolerance (max abs %.3g)" % (
        100 * worst["frac_out_of_tolerance"],
        worst["max_abs"],
    )


def headline(exc):
    """The line of an error that says what went wrong: 2.0's MXNetError text opens with a C++ traceback."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith("Traceback"):
        said = [line for line in lines if line.startswith("MXNetError")]
        return (said[0] if said else lines[-1])[:500]
    return lines[0]
