"""The ONNX load path's host side, no environments: load targets, environments, the plan, the Leaving MXNet
rows, what blocks a model and why no remedy applies."""

from __future__ import annotations

import pytest

from kit.common import artifacts
from kit.common.errors import UsageError
from kit.common.remedy_reasons import no_remedy_reason
from kit.envs import onnx_path
from kit.envs.build_plan import BuildPlan
from kit.envs.interpreters import Interpreter
from kit.envs.manager import EnvManager
from kit.home import KitHome
from kit.orchestrate.plan import plan
from kit.orchestrate.request import RunRequest, validate
from kit.results import leaving
from kit.results.records import is_failure
from kit.results.runs import Run


def test_load_targets_name_an_exporter_and_default_to_1_9_1():
    assert onnx_path.exporter_of("onnx") == "1.9.1" and onnx_path.exporter_of("onnx-1.5.1") == "1.5.1"
    assert onnx_path.exporter_of("1.9.1") is None and onnx_path.exporter_of("onnxruntime") is None
    assert onnx_path.target("onnx") == "onnx-1.9.1" and onnx_path.target("2.0.0b1") == "2.0.0b1"
    assert [r.name for r in onnx_path.environments("onnx")] == ["onnx-1.9.1", "onnxruntime"]
    assert [r.name for r in onnx_path.environments("onnxruntime")] == ["onnxruntime"]
    assert onnx_path.environments("1.9.1") == []


def test_an_exporter_is_its_release_plus_the_measured_onnx_pins():
    exporter = onnx_path.exporter("1.9.1")
    assert exporter.requirements == ("mxnet==1.9.1", "numpy==1.23.5", "onnx==1.14.1", "protobuf==3.20.3")
    assert exporter.kind == "onnx-exporter" and exporter.has_mxnet and exporter.kernel_name == "mxnet-onnx-1.9.1"
    assert onnx_path.exporter("1.4.1").python == "3.7" and "onnx==1.5.0" in onnx_path.exporter("1.4.1").requirements
    with pytest.raises(UsageError, match="no measured ONNX exporter for MXNet 1.2.1") as e:
        onnx_path.exporter("1.2.1")
    assert "onnx-1.9.1" in e.value.hint
    assert EnvManager(KitHome("/nonexistent")).resolve("onnx-1.5.1").kind == "onnx-exporter"


def test_the_runtime_has_no_mxnet_no_kernel_and_only_its_own_requirements():
    runtime = onnx_path.RUNTIME
    assert not runtime.has_mxnet and runtime.requirements == ("onnxruntime==1.32.0", "numpy==1.26.4")
    steps = BuildPlan(runtime, Interpreter("/usr/bin/python3.11", (3, 11, 7), "PATH"), False).install_steps()
    assert [s.requirements for s in steps] == [["onnxruntime==1.32.0", "numpy==1.26.4"]]


def test_the_plan_runs_the_onnx_step_on_the_exporters_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("MXCOMPAT_HOME", str(tmp_path / "elsewhere"))  # the caller's home, not the default one
    run = Run(tmp_path / "runs", "r1")
    req = RunRequest(save=["1.4.1", "1.9.1", "2.0.0b1"], load=["onnx-1.9.1", "2.0.0b1"], apis=["export"])
    home = KitHome(tmp_path / "home")
    steps = {s.id: s for s in plan(req, run, tmp_path / "store", home=home)}
    step = steps["reload:onnx-1.9.1"]
    assert step.kernel == "mxnet-onnx-1.9.1" and step.release == "onnx-1.9.1"
    assert step.parameters["release"] == "1.9.1" and step.parameters["apis"] == ["onnx"]
    runtime = tmp_path / "home" / "envs" / "onnxruntime" / "bin" / "python"
    assert step.parameters["exit_runtimes"] == {"onnx": str(runtime)}
    assert step.parameters["saved_with"] == ["1.4.1", "1.9.1"]  # 2.0's graphs are forward for 1.9.1's exporter
    assert step.depends_on == ["train:1.4.1", "train:1.9.1"]
    assert steps["reload:2.0.0b1"].parameters["apis"] == ["export"]
    req = RunRequest(save=["1.9.1", "2.0.0b1"], load=["onnx-1.9.1"], forward=True)
    step = {s.id: s for s in plan(req, run, tmp_path / "store", home=home)}["reload:onnx-1.9.1"]
    assert step.parameters["saved_with"] == ["1.9.1"]  # --forward is the MXNet matrix's: no newer exports


def test_onnx_with_no_api_that_saves_a_graph_is_refused_before_any_work(tmp_path):
    req = RunRequest(save=["1.9.1"], load=["onnx"], apis=["save_parameters"])
    with pytest.raises(UsageError, match="--load onnx exports graphs"):
        validate(req.normalized(), EnvManager(KitHome(tmp_path)), local_envs=False)
    asked = RunRequest(save=["1.9.1"], load=["onnx", "1.9.1"], apis=["export"])
    req = asked.normalized()
    validate(req, EnvManager(KitHome(tmp_path)), local_envs=False)
    assert req.load == ["onnx-1.9.1", "1.9.1"] and asked.load == ["onnx", "1.9.1"]


def test_the_onnx_steps_inflight_marker_is_its_own():
    assert artifacts.inflight_name("1.9.1") == ".inflight-1.9.1.json"
    assert artifacts.inflight_name("1.9.1", ["onnx"]) == ".inflight-1.9.1-onnx.json"


def _rec(model, verdict, error=None, **extra):
    rec = {
        "model": model,
        "api": "onnx",
        "saved_with": "1.4.1",
        "loaded_with": "1.9.1",
        "direction": "onnx",
        "verdict": verdict,
        "error": error,
        "source_api": "export",
        "summary": None,
    }
    rec.update(extra)
    return rec


@pytest.mark.parametrize(
    "error, operator",
    [
        ("No conversion function registered for op type _image_resize yet.", "_image_resize"),
        ("No conversion function registered for op type Embedding yet.\n(raised in ...)", "Embedding"),
        ("Unrecognized attribute: axes for operator ReduceMean\n\n==> Context: Bad node spec", "ReduceMean"),
        ("list index out of range\n(raised in the exporter's convert_softmax_output)", "softmax_output"),
        ("[ONNXRuntimeError] : 1 : FAIL : Node () Op (Split) [ShapeInferenceError] Neither", "Split"),
        (
            "NotImplementedError: Converter is not implemented (OperationDescription(domain='', operation_type='LSTM', "
            "version=7))",
            "LSTM",
        ),
    ],
)
def test_the_blocking_operator_is_read_from_the_error(error, operator):
    assert leaving.blocker(_rec("m", "load-error", error)) == operator


def test_a_leaving_row_says_whether_it_exports_and_runs():
    runtime = {"name": "onnxruntime", "versions": {"onnxruntime": "1.32.0"}}
    info = {"opset": 19, "onnx": "1.14.1", "runtime": runtime, "file": "/r/onnx/m.onnx"}
    ran = leaving.row(_rec("lenet", "close", onnx=info, summary={"max_abs": 0.004}))
    assert (ran["exports"], ran["runs"], ran["max abs"], ran["blocked by"]) == ("yes", "yes", 0.004, None)
    assert (ran["exit"], ran["opset"], ran["runtime"]) == ("ONNX Runtime", 19, "onnxruntime 1.32.0")
    torch = dict(info, runtime={"name": "torch", "versions": {"torch": "2.15.0"}}, artifact="/r/onnx/m.pt")
    converted = leaving.row(_rec("lenet", "close", api="torch", onnx=torch))
    assert (converted["exit"], converted["runtime"], converted["file"]) == ("PyTorch", "torch 2.15.0", "/r/onnx/m.pt")
    old = leaving.row(_rec("lenet", "close", onnx=dict(info, runtime=None, onnxruntime={"onnxruntime": "1.31.0"})))
    assert old["runtime"] == "onnxruntime 1.31.0"  # a record written before the exits were three
    refused = leaving.row(_rec("lenet", "infer-error", "[ONNXRuntimeError] : Op (Split) bad", onnx=info))
    assert (refused["exports"], refused["runs"], refused["blocked by"]) == ("yes", "no", "Split")
    fixed = {"fixed": True, "name": "onnx_opset_13", "verdict": "close", "summary": {"max_abs": 9.5e-07}}
    failed = leaving.row(_rec("lstm", "load-error", "Unrecognized attribute: axes for operator X", remedy=fixed))
    assert (failed["exports"], failed["runs"]) == ("no", "-")
    assert failed["remedy"] == "onnx_opset_13: close (max abs 9.5e-07)"
    lines = leaving.markdown([_rec("lenet", "close", onnx=info, summary={"max_abs": 0.004}), {"api": "export"}])
    assert lines[2] == (
        "| lenet | 1.4.1 | ONNX Runtime | 1.9.1 (export) | yes | yes | close | 0.004 | - |  | 19 | 1.14.1 | "
        "onnxruntime 1.32.0 |"
    )
    assert leaving.markdown([{"api": "export"}]) == []


def test_an_onnx_cell_that_does_not_leave_fails_the_run():
    assert is_failure(_rec("lstm", "load-error")) and is_failure(_rec("lenet", "infer-error"))
    assert not is_failure(_rec("lenet", "close")) and not is_failure(_rec("e2e", "unsupported"))


def test_the_reason_no_remedy_applies_names_the_missing_converter():
    assert "converter for operator Embedding" in no_remedy_reason(
        "No conversion function registered for op type Embedding yet.\n(raised in ...)"
    )
    assert "export the network without its transforms" in no_remedy_reason(
        "No conversion function registered for op type _image_resize yet."
    )
    assert no_remedy_reason("list index out of range\n(raised in the exporter's convert_softmax_output)") == (
        "MXNet's ONNX exporter fails in its converter convert_softmax_output"
    )


def test_the_old_exporters_batchnorm_failure_points_at_1_9s_exporter():
    why = no_remedy_reason("ValidationError: Unrecognized attribute: spatial for operator BatchNormalization")
    assert why.endswith("export with 1.9's exporter (--load onnx)")
