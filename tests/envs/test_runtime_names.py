"""Runtimes on the host, without building one: the names and what they refuse, their place in release order and
direction, their kernel names, the NumPy errors the remedy reads, the operator comparison, and how runtime
cells count towards a run's verdict and show in its reports. tests/envs/test_runtimes.py builds real ones."""

from __future__ import annotations

import re

import pytest

from kit.common import numpy_names, versions
from kit.common.errors import UsageError
from kit.common.names import is_safe_name
from kit.envs import kernelspecs, runtimes
from kit.envs.runtime_remedies import NUMPY_NAMES, verify
from kit.orchestrate.plan import unchecked, unusable
from kit.orchestrate.request import RunRequest
from kit.results import reports, runtime_report
from kit.results.records import classify, is_failure

# verbatim from `import mxnet` (1.9.1) on NumPy 1.26.4 and 2.1.3, and from its array-function registration
NUMPY_126_BOOL = (
    "AttributeError: module 'numpy' has no attribute 'bool'.\n"
    "`np.bool` was a deprecated alias for the builtin `bool`. To avoid this error in existing code, use `bool` by "
    "itself. Doing this will not modify any behavior and is safe."
)
NUMPY_2_PZERO = "AttributeError: `np.PZERO` was removed in the NumPy 2.0 release. Use `0.0` instead."
NUMPY_2_NINF = "AttributeError: `np.NINF` was removed in the NumPy 2.0 release. Use `-np.inf` instead."
WRAPPED = (
    "RuntimeError: Running function _register_array_function with NumPy array function protocol failed with "
    "exception `np.round_` was removed in the NumPy 2.0 release. Use `np.round` instead."
)
UNADVISED = "AttributeError: module 'numpy' has no attribute 'product'"
FINANCIAL = "AttributeError: module 'numpy' has no attribute 'pv'. Did you mean: 'npv'?"
DISTUTILS = "ModuleNotFoundError: No module named 'distutils'"


# -- names ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, release, python, numpy, flavour, switches, requirement",
    [
        ("1.9.1+py3.12+numpy1.26.4", "1.9.1", "3.12", "1.26.4", None, (), "mxnet==1.9.1"),
        ("1.9.1+py3.13+numpy2.1.3", "1.9.1", "3.13", "2.1.3", None, (), "mxnet==1.9.1"),
        ("1.6.0+mkl", "1.6.0", None, None, "mkl", (), "mxnet-mkl==1.6.0"),
        ("1.7.0.post2+native", "1.7.0.post2", None, None, "native", (), "mxnet-native==1.7.0"),
        ("1.9.1+MXNET_MKLDNN_ENABLED=0", "1.9.1", None, None, None, ("MXNET_MKLDNN_ENABLED=0",), "mxnet==1.9.1"),
    ],
)
def test_a_runtime_name_says_its_release_and_what_changes_under_it(
    name, release, python, numpy, flavour, switches, requirement
):
    spec = runtimes.parse(name)
    assert (spec.release, spec.python, spec.numpy, spec.flavour, spec.switches) == (
        release,
        python,
        numpy,
        flavour,
        switches,
    )
    built = runtimes.release_for(name)
    assert built.name == name and built.canonical == release and built.is_runtime
    assert built.requirements[0] == requirement
    assert built.python == (python or "3.11")
    assert built.expected_version == release  # the kernel checks MXNet against the release it runs
    assert built.switches == switches
    assert built.overrides == ((f"numpy=={numpy}",) if numpy else ())  # installed past mxnet's own numpy pin
    assert built.fallback is None
    assert is_safe_name(name)


@pytest.mark.parametrize(
    "name, error, hint",
    [
        ("1.9.1+native", "mxnet-native was never published for MXNet 1.9.1", "exists for 1.7.0, 1.8.0.post0"),
        ("1.7.0.post2+mkl", "mxnet-mkl was never published for MXNet 1.7.0.post2", "1.5.1.post0, 1.6.0"),
        ("1.9.1+py3", "'py3' is not a tag the kit knows", "pyX.Y"),
        ("1.9.1+mkl+native", "names two build flavours", "mkl, native"),
        ("1.9.1+py3.12+py3.13", "names python twice", "RELEASE+TAG"),
        ("9.9.9+py3.12", "'9.9.9' is not a release in the table", "1.9.1"),
        ("1.9.1+OMP_NUM_THREADS=1", "'OMP_NUM_THREADS=1' is not a tag", "MXNET_NAME=VALUE"),
        ("1.9.1+py3.12/../x", "not a plain name", "RELEASE+TAG"),
    ],
)
def test_what_does_not_exist_is_refused_with_what_does(name, error, hint):
    with pytest.raises(UsageError) as caught:
        runtimes.release_for(name)
    assert error in str(caught.value) and hint in caught.value.hint


def test_a_release_is_not_a_runtime():
    with pytest.raises(UsageError, match="is a release, not a runtime"):
        runtimes.parse("1.9.1")


def test_runtimes_stand_beside_their_release_in_order_and_direction():
    names = ["1.9.1+py3.13+numpy2.1.3", "1.7.0.post2+native", "1.9.1", "1.6.0", "1.7.0.post2", "1.6.0+mkl"]
    assert sorted(names, key=versions.sort_key) == [
        "1.6.0",
        "1.6.0+mkl",
        "1.7.0.post2",
        "1.7.0.post2+native",
        "1.9.1",
        "1.9.1+py3.13+numpy2.1.3",
    ]
    assert versions.direction("1.9.1", "1.9.1+py3.12+numpy1.26.4") == "runtime"
    assert versions.direction("1.9.1+py3.13+numpy2.1.3", "1.9.1") == "runtime"  # saved under NumPy 2, read under 1.23
    assert versions.direction("1.9.1+py3.12", "1.9.1+py3.12") == "same"
    assert versions.direction("1.6.0", "1.7.0.post2+native") == "backward"
    assert versions.direction("1.9.1+py3.12", "1.6.0+mkl") == "forward"
    assert versions.same_release("1.7.0.post2+native", "1.7.0")  # what the kernel's MXNet reports
    assert versions.at_least("1.7.0.post2+native", "1.7.0")


def test_a_runtimes_kernel_has_a_name_jupyter_accepts():
    valid = re.compile(r"^[a-z0-9._-]+\Z")
    names = {kernelspecs.kernel_name(n) for n in ("1.9.1+py3.12+numpy1.26.4", "1.9.1+MXNET_MKLDNN_ENABLED=0")}
    assert all(valid.match(n) for n in names) and len(names) == 2
    assert kernelspecs.kernel_name("1.9.1") == "mxnet-1.9.1"  # a release's own kernel keeps its name
    assert kernelspecs.kernel_name("1.9.1+py3.12+numpy1.26.4").startswith("mxnet-1.9.1_py3.12_numpy1.26.4-")


# -- the NumPy names remedy reads the errors --------------------------------------------------------
@pytest.mark.parametrize(
    "text, name, equivalent",
    [
        (NUMPY_126_BOOL, "bool", "builtins.bool"),
        (NUMPY_2_PZERO, "PZERO", "0.0"),
        (NUMPY_2_NINF, "NINF", "-np.inf"),
        (WRAPPED, "round_", "np.round"),
        (UNADVISED, "product", "np.prod"),
        (FINANCIAL, "pv", numpy_names.REMOVED),
    ],
)
def test_the_missing_name_and_its_equivalent_come_from_the_error(text, name, equivalent):
    assert numpy_names.missing_name(text) == name
    assert numpy_names.equivalent_for(name, text) == equivalent


def test_an_error_about_something_else_names_no_numpy_name():
    assert numpy_names.missing_name(DISTUTILS) is None
    assert numpy_names.missing_module(DISTUTILS) == "distutils"
    assert numpy_names.missing_name("SyntaxError: invalid syntax") is None


def test_the_lines_a_user_pastes_do_what_the_remedy_does():
    found = {"bool": "builtins.bool", "NINF": "-np.inf", "msort": numpy_names.SORT_AXIS_0, "pv": "removed"}
    lines = NUMPY_NAMES.paste(found)
    assert lines[0] == "import numpy as np" and lines[-1] == "import mxnet as mx"
    assert "np.bool = bool" in lines and "np.NINF = -np.inf" in lines
    assert "np.msort = lambda a: np.sort(a, axis=0)" in lines
    import types

    import numpy

    np = types.SimpleNamespace(inf=numpy.inf, sort=numpy.sort)  # a stand-in: the host's numpy stays as it is
    exec("\n".join(lines[1:-1]), {"np": np})  # the pasted lines run (without importing numpy or mxnet)
    assert np.NINF == -numpy.inf and np.bool is bool and np.pv.__name__ == "pv"
    with pytest.raises(NotImplementedError, match="np.pv was removed"):
        np.pv(0.1, 1)
    assert np.msort(numpy.array([[2, 1], [1, 2]])).tolist() == [[1, 1], [2, 2]]


# -- the operator comparison ------------------------------------------------------------------------
def test_a_runtime_that_computes_what_its_release_computes_is_verified():
    canonical = {"dense": {"values": [1.0, 2.0]}, "lstm": {"values": [0.5]}, "old_op": {"error": "no such op"}}
    same = verify({"dense": {"values": [1.0, 2.0]}, "lstm": {"values": [0.5]}}, canonical, "1.9.1")
    assert same["ok"] and same["max_abs"] == 0.0 and same["against"] == "1.9.1" and same["operators"] == 3
    skewed = verify({"dense": {"values": [1.01, 2.01]}, "lstm": {"error": "TypeError: x"}}, canonical, "1.9.1")
    assert not skewed["ok"]
    assert skewed["differ"] == {"dense": pytest.approx(0.01)}
    assert skewed["fails"] == {"lstm": "TypeError: x"}


# -- runtime cells in a run's verdict and reports ------------------------------------------------------
def _rec(saved, loaded, verdict, model="lenet", api="export", max_abs=0.0):
    return {
        "saved_with": saved,
        "loaded_with": loaded,
        "model": model,
        "api": api,
        "direction": versions.direction(saved, loaded),
        "verdict": verdict,
        "summary": {"max_abs": max_abs},
    }


def test_a_failing_runtime_cell_fails_the_run_only_when_asked():
    rec = _rec("1.9.1", "1.9.1+py3.13+numpy2.1.3", "mismatch", max_abs=0.5)
    assert rec["direction"] == "runtime"
    assert not is_failure(rec) and is_failure(rec, strict_runtimes=True)
    assert classify([rec], [])["failures"] == []
    assert classify([rec], [], strict_runtimes=True)["failures"] == [rec]


def test_a_runtime_that_does_not_import_runs_nothing_and_says_why():
    entries = [
        {"name": "1.2.1+py3.11+numpy1.23.5", "verdict": "does not import", "last_headline": "SyntaxError: bad"},
        {"name": "1.9.1+py3.12+numpy1.26.4", "verdict": "imports under remedy"},
    ]
    req = RunRequest(save=["1.9.1"], load=["1.9.1", "1.2.1+py3.11+numpy1.23.5", "1.9.1+py3.12+numpy1.26.4"])
    assert unusable(entries) == {"1.2.1+py3.11+numpy1.23.5"}
    skipped = unchecked(req, entries)
    assert skipped == [
        {
            "kind": "runtime",
            "name": "1.2.1+py3.11+numpy1.23.5",
            "reason": "runtime does not import: SyntaxError: bad",
        }
    ]
    manifest = {"order": [], "steps": {}, "request": {"strict_runtimes": False}, "runtimes": entries}
    split = {"failures": []}
    assert reports.exit_code(manifest, split) == 0
    manifest["request"]["strict_runtimes"] = True
    assert reports.exit_code(manifest, split) == 1


def test_the_report_says_where_a_build_flavour_explains_a_release_difference():
    records = [
        _rec("1.6.0", "1.7.0.post2", "close", max_abs=0.0039),
        _rec("1.6.0", "1.7.0.post2+native", "identical", max_abs=0.0),
        _rec("1.6.0", "1.7.0.post2", "close", model="mlp", max_abs=0.001),
        _rec("1.6.0", "1.7.0.post2+native", "identical", model="mlp", max_abs=0.0),
        _rec("1.7.0.post2", "1.7.0.post2", "identical"),
        _rec("1.7.0.post2", "1.7.0.post2+native", "close", max_abs=0.0078),
        _rec("2.0.0b1", "1.7.0.post2+native", "load-error"),  # forward: reported apart, not in the row's verdicts
    ]
    manifest = {
        "runtimes": [
            {
                "name": "1.7.0.post2+native",
                "release": "1.7.0.post2",
                "changes": "mxnet-native",
                "verdict": "imports",
                "mxnet_features": ["BLAS_OPEN", "OPENMP"],
                "verified": {"against": "1.7.0.post2", "ok": True, "operators": 14, "max_abs": 9.5e-07},
            }
        ]
    }
    groups = runtime_report.disagreements(records)
    assert [
        (g["saved_with"], g["runtime_verdict"], g["release_verdict"], len(g["cells"]), g["better"]) for g in groups
    ] == [
        ("1.6.0", "identical", "close", 2, True),
        ("1.7.0.post2", "close", "identical", 1, False),
    ]
    assert groups[0]["release_max_abs"] == 0.0039 and groups[0]["models"] == ["lenet", "mlp"]
    line = runtime_report.headline(manifest, records)
    assert "1.7.0.post2+native imports (reproduces 1.7.0.post2)" in line
    assert (
        "1.7.0.post2+native (mxnet-native, MKLDNN off) gives identical where 1.7.0.post2 gives close on what 1.6.0 "
        "saved (2 cells, 1.7.0.post2's max abs up to 0.0039)"
    ) in line
    row = runtime_report.rows(manifest, records)[0]
    assert row["MKLDNN"] == "off" and row["cells"] == 3 and row["max abs"] == 0.0078 and row["forward cells"] == 1
    assert row["verdicts"] == "identical 2, close 1"


def test_bisect_takes_a_runtime_for_either_end():
    from kit.debug.bisect import releases_between

    assert releases_between("1.9.1", "1.9.1+py3.13+numpy2.1.3") == ["1.9.1", "1.9.1+py3.13+numpy2.1.3"]
    assert releases_between("1.6.0", "1.8.0.post0+native") == ["1.6.0", "1.7.0.post2", "1.8.0.post0+native"]
    with pytest.raises(UsageError, match="never published"):
        releases_between("1.6.0", "1.9.1+native")
