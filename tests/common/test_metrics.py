import numpy as np

from kit.common import metrics, tolerance, verdicts

F32 = tolerance.resolve("float32")


def _verdict(actual, expected, tol=F32):
    return verdicts.from_metrics([metrics.compare(np.asarray(actual), np.asarray(expected), tol)])


def test_mxnet_nightly_false_alarm_is_close():
    # "Error 1.969787 exceeds tolerance rtol=0.000010, atol=0.000000 ... a=0.003014, b=0.003014"
    b = np.array([[0.003014, 0.5, -0.25]], dtype=np.float32)
    a = b.copy()
    a[0, 0] = np.float32(0.003014 * (1 + 1.969787e-5))
    assert a[0, 0] != b[0, 0]
    m = metrics.compare(a, b, F32)
    assert m["within_tolerance"] and not m["identical"]
    assert 1.5e-5 < m["max_rel"] < 2.5e-5
    assert _verdict(a, b)[0] == verdicts.CLOSE


def test_float_noise_on_near_zero_values_is_close():
    rng = np.random.RandomState(0)
    b = (rng.randn(4, 10) * 1e-3).astype(np.float32)
    b[0, 0] = 1e-9
    a = b + np.float32(3e-7) * np.sign(rng.randn(4, 10)).astype(np.float32)
    assert _verdict(a, b)[0] == verdicts.CLOSE


def test_cancellation_noise_in_a_large_output_is_close():
    b = np.array([[1000.0, -2000.0, 0.0001, 3000.0]], dtype=np.float32)
    a = b.copy()
    a[0, 2] = 0.01  # an element near zero off by 1e-2 while others are 3e3: rounding of the big terms
    assert _verdict(a, b)[0] == verdicts.CLOSE


def test_a_real_change_is_not_close():
    rng = np.random.RandomState(1)
    b = rng.randn(8, 4).astype(np.float32)
    perturbed = b * np.float32(1.01)  # a 1% perturbed weight scales the scores
    verdict, reason = _verdict(perturbed, b)
    assert verdict == verdicts.DRIFT and "top-1 prediction agrees" in reason
    changed = b.copy()
    changed[:, [0, 1]] = changed[:, [1, 0]]  # a changed operator: classes swapped
    verdict, reason = _verdict(changed, b)
    assert verdict == verdicts.MISMATCH and "top-1" in reason


def test_identical_is_bitwise():
    b = np.array([[0.0, 1.0]], np.float32)
    assert _verdict(b.copy(), b)[0] == verdicts.IDENTICAL
    neg_zero = np.array([[-0.0, 1.0]], np.float32)
    assert _verdict(neg_zero, b)[0] == verdicts.CLOSE  # equal values, different bits


def test_nans_and_infs():
    b = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    a = b.copy()
    a[1, 1] = np.nan
    m = metrics.compare(a, b, F32)
    assert m["nan"] == 1 and m["expected_nan"] == 0
    verdict, reason = verdicts.from_metrics([m])
    assert verdict == verdicts.MISMATCH and "NaN" in reason
    both = b.copy()
    both[0, 0] = np.inf
    assert _verdict(both, both.copy())[0] == verdicts.IDENTICAL
    a = both.copy()
    a[0, 0] = -np.inf
    assert _verdict(a, both)[0] == verdicts.MISMATCH


def test_shape_and_dtype_mismatch():
    b = np.zeros((2, 4), np.float32)
    verdict, reason = _verdict(np.zeros((2, 3), np.float32), b)
    assert verdict == verdicts.MISMATCH and "shape [2, 3]" in reason
    verdict, reason = _verdict(np.zeros((2, 4), np.float64), b)
    assert verdict == verdicts.MISMATCH and "dtype float64" in reason


def test_integer_outputs_are_exact():
    tol = tolerance.resolve("int32")
    assert tol == {"rtol": 0.0, "atol": 0.0, "scaled_atol": 0.0}
    b = np.array([[1, 2, 3]], np.int32)
    assert _verdict(b.copy(), b, tol)[0] == verdicts.IDENTICAL
    m = metrics.compare(np.array([[1, 2, 4]], np.int32), b, tol)
    assert m["ulp_max"] == 1 and not m["within_tolerance"] and m["max_abs"] == 1.0


def test_metrics_report_worst_element_quantiles_ulps_and_cosine():
    b = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    a = b.copy()
    a[0, 2] = np.nextafter(np.float32(3.0), np.float32(10.0))
    a[0, 3] = np.float32(4.5)
    m = metrics.compare(a, b, F32)
    assert m["worst"] == {"index": [0, 3], "actual": 4.5, "expected": 4.0}
    assert m["max_abs"] == 0.5 and abs(m["max_rel"] - 0.125) < 1e-9
    assert m["ulp_max"] == 1048576  # 0.5 at 4.0 in float32 is 2**20 ulps
    assert m["abs_error_quantiles"]["max"] == 0.5 and m["abs_error_quantiles"]["median"] < 1e-6
    assert m["frac_out_of_tolerance"] == 0.25 and m["top1_agreement"] == 1.0
    assert 0.99 < m["cosine"] < 1.0


def test_ulp_distance_crosses_zero():
    a = np.array([np.float32(1e-45)], np.float32)  # smallest positive subnormal
    b = np.array([np.float32(-1e-45)], np.float32)
    assert metrics.ulp_distance(a, b)[0] == 2
    assert metrics.ulp_distance(np.array([0.0], np.float32), np.array([-0.0], np.float32))[0] == 0


def test_no_outputs_is_never_a_pass():
    assert verdicts.from_metrics([]) == (verdicts.MISMATCH, "no outputs were compared")


def test_tolerance_overrides_per_run_and_per_model():
    over = {"float32": {"rtol": 1e-3}, "models": {"lstm": {"atol": 0.5}, "mlp": {"float32": {"rtol": 0.1}}}}
    assert tolerance.resolve("float32", "resnet_bn", over)["rtol"] == 1e-3
    assert tolerance.resolve("float32", "lstm", over) == {"rtol": 1e-3, "atol": 0.5, "scaled_atol": 1e-5}
    assert tolerance.resolve("float32", "mlp", over)["rtol"] == 0.1


def test_a_models_own_defaults_sit_between_the_dtypes_and_the_runs():
    own = {"float32": {"scaled_atol": 1e-4}}
    assert tolerance.resolve("float32", "densenet121", None, own) == {"rtol": 1e-4, "atol": 1e-5, "scaled_atol": 1e-4}
    assert tolerance.resolve("float32", "densenet121", {"float32": {"scaled_atol": 1e-6}}, own)["scaled_atol"] == 1e-6
    over = {"models": {"densenet121": {"rtol": 1e-3}}}
    assert tolerance.resolve("float32", "densenet121", over, own) == {"rtol": 1e-3, "atol": 1e-5, "scaled_atol": 1e-4}
    assert tolerance.resolve("float64", "densenet121", None, own) == tolerance.DEFAULTS["float64"]
    assert tolerance.resolve("int32", "densenet121", None, {"scaled_atol": 1.0})["scaled_atol"] == 0.0
    # a case the core default fails and the deep-network default passes: 8.2e-5 off on 0.075, largest output 3
    a, b = np.array([0.0750261 + 8.2e-5, 3.0], np.float32), np.array([0.0750261, 3.0], np.float32)
    assert not tolerance.within(a, b, tolerance.resolve("float32")).all()
    assert tolerance.within(a, b, tolerance.resolve("float32", "densenet121", None, own)).all()


def test_malformed_tolerances_are_refused():
    for bad in (
        {"float32": {"rtol": -1}},
        {"float32": {"rtl": 1e-3}},
        {"floaty": {}},
        {"float32": 1e-3},
        {"models": {"mlp": {"rtol": "big"}}},
        [1, 2],
    ):
        try:
            tolerance.validate(bad)
        except tolerance.ToleranceError:
            continue
        raise AssertionError("accepted %r" % (bad,))
