"""The ONNX path's kernel side without ONNX (needs mxnet: runs inside the environments, 1.0 to 2.0): what a
kernel with no exporter says, the cells it derives, the worker's greeting where onnxruntime is missing."""

import json
import os
import subprocess
import sys
import tempfile

import mxnet as mx

from kit.common import artifacts
from kit.common.versions import at_least
from kit.kernel.entry import reload_run
from kit.kernel.exits import runtime_client
from kit.kernel.remedies import attempts  # noqa: F401 - registers the remedies
from kit.kernel.remedies.base import Target, Work, by_name
from kit.kernel.saving import adapters


def test_a_kernel_without_an_exporter_says_which_command_builds_one():
    release = mx.__version__.replace("beta", "b")
    path, reason = adapters.ADAPTERS["onnx"].load_support(release, None)
    assert path is None
    if not at_least(release, "1.3.0"):
        assert "arrived in 1.3" in reason
    elif at_least(release, "2.0.0a0"):
        assert "2.0's is not measured" in reason
    else:  # a release with an exporter, in an environment without the onnx package
        assert "mxcompat env create onnx-RELEASE" in reason


def test_exit_cells_prefer_the_export_and_fall_back_to_the_module_checkpoint():
    store = tempfile.mkdtemp()
    found = []
    for model, api, status in (
        ("lenet", "export", "saved"),
        ("lenet", "module_checkpoint", "saved"),
        ("symbolic", "export", "unsupported"),
        ("symbolic", "module_checkpoint", "saved"),
        ("lenet", "save_parameters", "saved"),
    ):
        path = os.path.join(store, "1.4.1", model, api)
        os.makedirs(path)
        artifacts.write_json_atomic(os.path.join(path, artifacts.MANIFEST), {"status": status})
        found.append(("1.4.1", model, api, path, None))
    cells = reload_run.exit_cells(found, ["onnx", "torch"])
    assert [(c[1], c[2], os.path.basename(c[3])) for c in cells] == [
        ("lenet", "onnx", "export"),
        ("symbolic", "onnx", "module_checkpoint"),
        ("lenet", "torch", "export"),
        ("symbolic", "torch", "module_checkpoint"),
    ]
    assert reload_run.exit_cells(found, ["export"]) == []


def test_the_worker_says_so_when_its_runtime_is_missing():
    for runtime, module in (("onnxruntime", "onnxruntime"), ("openvino", "openvino"), ("torch", "torch")):
        proc = subprocess.Popen(
            [sys.executable, runtime_client.WORKER, runtime],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            universal_newlines=True,
        )
        out, _ = proc.communicate("", timeout=120)
        hello = json.loads(out.strip().splitlines()[0])
        assert hello["ready"] is False and module in hello["error"], hello


def test_a_runtime_that_is_not_there_names_the_command_that_builds_it():
    for runtime in ("onnxruntime", "openvino", "torch"):
        runtime_client.configure(runtime, "/nonexistent/bin/python")
        try:
            runtime_client.session(runtime, "model.onnx", ["data"]).run({})
            raise AssertionError("ran without a runtime")
        except runtime_client.RuntimeUnavailable as e:
            assert "mxcompat env create %s" % runtime in str(e)
        finally:
            runtime_client.configure(runtime, None)


def test_the_opset_remedy_answers_1_9s_exporter_only_and_its_code_compiles():
    opset = by_name("onnx_opset_13")
    error = "ValidationError: Unrecognized attribute: axes for operator ReduceMean"
    assert opset.matches(Target("1.9.1", "1.4.1", "onnx"), error, "load-error")
    assert not opset.matches(Target("1.5.1", "1.4.1", "onnx"), error, "load-error")
    assert not opset.matches(Target("1.9.1", "1.4.1", "export"), error, "load-error")
    folder = tempfile.mkdtemp()
    manifest = {
        "load": {"symbol_file": "model-symbol.json", "param_file": "model-0000.params"},
        "inputs": [{"name": "data", "shape": [1, 28, 28], "dtype": "float32", "kind": "float"}],
    }
    work = Work(None, None, "1.9.1", "1.4.1", "onnx", folder, manifest)
    try:
        code = opset.code(work)
    finally:
        work.close()
    compile(code, "<onnx_opset_13>", "exec")
    assert "[(1, 1, 28, 28)], [np.float32]" in code and "dynamic_input_shapes=[(None, 1, 28, 28)]" in code
    softmax = by_name("softmax_output_as_softmax")
    assert softmax.matches(Target("1.9.1", "1.4.1", "onnx"), "(raised in the exporter's convert_softmax_output)", 0)
