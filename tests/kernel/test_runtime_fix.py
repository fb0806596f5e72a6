"""The runtime remedy's kernel side, in every environment the kernel tests run in (Python 3.6 / numpy 1.13 to
MXNet 2.0): reading NumPy's errors, resolving an equivalent against this environment's numpy, giving a name back."""

import numpy as np

from kit.common import numpy_names
from kit.kernel.runtime import fix as runtime_fix

NUMPY_2_NINF = "AttributeError: `np.NINF` was removed in the NumPy 2.0 release. Use `-np.inf` instead."
NUMPY_126_BOOL = (
    "AttributeError: module 'numpy' has no attribute 'bool'.\n"
    "`np.bool` was a deprecated alias for the builtin `bool`. To avoid this error in existing code, use `bool`"
)


def test_the_error_names_what_was_removed_and_what_replaces_it():
    assert numpy_names.missing_name(NUMPY_2_NINF) == "NINF"
    assert numpy_names.equivalent_for("NINF", NUMPY_2_NINF) == "-np.inf"
    assert numpy_names.equivalent_for("bool", NUMPY_126_BOOL) == "builtins.bool"
    assert numpy_names.equivalent_for("npv", "module 'numpy' has no attribute 'npv'") == numpy_names.REMOVED


def test_equivalents_resolve_against_this_numpy():
    assert runtime_fix.resolve(np, "NINF", "-np.inf") == -np.inf
    assert runtime_fix.resolve(np, "PZERO", "0.0") == 0.0
    assert runtime_fix.resolve(np, "bool", "builtins.bool") is bool
    assert runtime_fix.resolve(np, "float_", "np.float64") is np.float64
    msort = runtime_fix.resolve(np, "msort", numpy_names.SORT_AXIS_0)
    assert msort(np.array([[2, 1], [1, 2]])).tolist() == [[1, 1], [2, 2]]
    removed = runtime_fix.resolve(np, "npv", numpy_names.REMOVED)
    try:
        removed(0.1, [1, 2])
        raise AssertionError("a removed function's stand-in must raise when called")
    except NotImplementedError as e:
        assert "numpy_financial" in str(e)


def test_a_name_numpy_has_is_left_as_it_is_and_one_it_lacks_is_given_back():
    name = "mxcompat_test_alias"
    try:
        assert runtime_fix.give_back({name: "np.float64", "inf": "0.0"}) == [name]
        assert getattr(np, name) is np.float64 and np.inf != 0.0
    finally:
        if name in np.__dict__:
            delattr(np, name)


def test_outside_a_runtime_there_is_nothing_to_apply():
    assert runtime_fix.config("/nonexistent") is None
    assert runtime_fix.config() is None  # the kernel tests run in release environments and on the host
    assert runtime_fix.apply() == []
