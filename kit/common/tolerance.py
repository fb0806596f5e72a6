"""Tolerance policy: when two outputs are ``close``.

An element passes when ``|a - b| <= atol + rtol * |b| + scaled_atol * max|b|``:
``rtol`` for ordinary values, ``atol`` so that float noise on values near zero
does not fail, and ``scaled_atol`` for elements near zero in an output whose
other elements are large (their rounding error scales with the big terms that
cancelled). Per-dtype defaults; overridable per run and per model.
"""

import numpy as np

DEFAULTS = {
    "float16": {"rtol": 1e-2, "atol": 1e-3, "scaled_atol": 1e-3},
    "float32": {"rtol": 1e-4, "atol": 1e-5, "scaled_atol": 1e-5},
    "float64": {"rtol": 1e-9, "atol": 1e-12, "scaled_atol": 1e-11},
    "integer": {"rtol": 0.0, "atol": 0.0, "scaled_atol": 0.0},
}
_KEYS = ("rtol", "atol", "scaled_atol")


class ToleranceError(ValueError):
    """A tolerance override that is not of the documented form."""


def _dtype_key(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in "iub":
        return "integer"
    if dtype.kind == "f" and dtype.name in DEFAULTS:
        return dtype.name
    raise ToleranceError("no tolerance for outputs of dtype %s" % dtype)


def _check(values, where):
    if not isinstance(values, dict):
        raise ToleranceError("%s must be a mapping of rtol/atol/scaled_atol, got %r" % (where, values))
    for k, v in values.items():
        if k not in _KEYS:
            raise ToleranceError("%s: unknown key %r (use %s)" % (where, k, ", ".join(_KEYS)))
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or v != v:
            raise ToleranceError("%s: %s must be a non-negative number, got %r" % (where, k, v))


def validate(overrides):
    """Check an override mapping; returns it. Form: ``{"float32": {...}, "models": {"mlp": {...}}}``.

    A per-model entry may be flat (``{"rtol": 1e-3}``, for every dtype) or keyed by dtype.
    """
    overrides = overrides or {}
    if not isinstance(overrides, dict):
        raise ToleranceError("tolerance must be a mapping, got %r" % (overrides,))
    for key, value in overrides.items():
        if key == "models":
            if not isinstance(value, dict):
                raise ToleranceError("tolerance['models'] must map model names to tolerances")
            for model, entry in value.items():
                if isinstance(entry, dict) and set(entry) & set(DEFAULTS):
                    for dt, vals in entry.items():
                        if dt not in DEFAULTS:
                            raise ToleranceError("tolerance['models'][%r]: unknown dtype %r" % (model, dt))
                        _check(vals, "tolerance['models'][%r][%r]" % (model, dt))
                else:
                    _check(entry, "tolerance['models'][%r]" % model)
        elif key in DEFAULTS:
            _check(value, "tolerance[%r]" % key)
        else:
            raise ToleranceError(
                "unknown tolerance key %r (use a dtype: %s, or 'models')" % (key, ", ".join(sorted(DEFAULTS)))
            )
    return overrides


def _entry_for(entry, key):
    """A per-model entry, flat (every dtype) or keyed by dtype, for dtype ``key``."""
    return entry.get(key, {}) if set(entry) & set(DEFAULTS) else entry


def resolve(dtype, model=None, overrides=None, model_defaults=None):
    """The tolerance ``{"rtol", "atol", "scaled_atol"}`` for an output of ``dtype`` from ``model``.

    Precedence, lowest first: the dtype's defaults, the model's own defaults (``model_defaults``,
    from its zoo spec), the run's per-dtype overrides, the run's per-model overrides.
    """
    key = _dtype_key(dtype)
    tol = dict(DEFAULTS[key])
    if model_defaults and key != "integer":
        tol.update(_entry_for(model_defaults, key))
    overrides = validate(overrides)
    tol.update(overrides.get(key, {}))
    entry = (overrides.get("models") or {}).get(model)
    if entry:
        tol.update(_entry_for(entry, key))
    return tol


def within(actual, expected, tol):
    """Boolean array: which elements of ``actual`` are within ``tol`` of ``expected`` (NaN == NaN)."""
    a = actual.astype(np.float64)
    b = expected.astype(np.float64)
    finite_b = b[np.isfinite(b)]
    scale = float(np.abs(finite_b).max()) if finite_b.size else 0.0
    finite = np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore"):
        ok = np.abs(a - b) <= tol["atol"] + tol["rtol"] * np.abs(b) + tol["scaled_atol"] * scale
    # a NaN or an infinity passes only where the reference has the very same value
    same_nonfinite = (np.isnan(a) & np.isnan(b)) | (a == b)
    return np.where(finite, ok, same_nonfinite)
