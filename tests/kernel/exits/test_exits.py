"""Leaving MXNet for OpenVINO and PyTorch, on real environments: 1.9.1's graphs exported by its exporter, then read
by OpenVINO (its IR) and converted by onnx2torch (TorchScript), each in its own environment; the operator families
third-party checkpoints carry (PReLU, SoftmaxActivation, LSTM, a bidirectional GRU) through their remedies; the
files a user leaves with (.pt, .xml/.bin) run outside the kit with MXNet's reference outputs.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import scales
from conftest import matrix_run, run_cli

pytestmark = pytest.mark.envs

#: how each model leaves by each exit: the cell's remedy (None: it runs as exported)
EXPECTED = {
    ("lenet", "openvino"): None,
    ("lenet", "torch"): None,
    ("resnet_bn", "openvino"): None,
    ("resnet_bn", "torch"): None,
    ("lstm", "openvino"): "onnx_opset_13",
    ("lstm", "torch"): "onnx_opset_13+onnx2torch_kit_converters",
    ("bigru", "openvino"): "bidirectional_rnn_as_two+onnx_opset_13",
    ("bigru", "torch"): "bidirectional_rnn_as_two+onnx_opset_13+onnx2torch_kit_converters",
    ("bigru", "onnx"): "bidirectional_rnn_as_two+onnx_opset_13",
    ("face_prelu", "openvino"): "softmax_output_as_softmax",
    ("face_prelu", "torch"): "softmax_output_as_softmax+onnx_opset_13",
    ("face_prelu", "onnx"): "softmax_output_as_softmax+prelu_slope_broadcast",
    ("detect_softmax", "openvino"): "softmax_activation_as_softmax+softmax_output_as_softmax",
    ("detect_softmax", "torch"): "softmax_activation_as_softmax+softmax_output_as_softmax+onnx_opset_13",
    ("detect_softmax", "onnx"): "softmax_activation_as_softmax+softmax_output_as_softmax",
    # the exporter mixes up the first head's label, then misreads FullyConnected's flatten and LRN's knorm left at
    # their defaults, and writes the BatchNorm gamma MXNet ignores (fix_gamma): the order each runtime meets them
    ("converted_heads", "onnx"): "softmax_output_as_softmax+mxnet_defaults_spelled_out+fix_gamma_as_stored_ones",
    ("converted_heads", "openvino"): "softmax_output_as_softmax+fix_gamma_as_stored_ones+mxnet_defaults_spelled_out",
    ("converted_heads", "torch"): (
        "softmax_output_as_softmax+onnx_opset_13+mxnet_defaults_spelled_out+fix_gamma_as_stored_ones"
    ),
    ("lrn_net", "onnx"): "mxnet_defaults_spelled_out",
    ("lrn_net", "openvino"): "mxnet_defaults_spelled_out",
    ("lrn_net", "torch"): "mxnet_defaults_spelled_out",
}
#: files that run and give wrong numbers as exported (their remedy found by the numbers, not by an error)
WRONG_NUMBERS = {"lrn_net"}

#: run by a runtime environment's Python, outside the kit: the file a user leaves with, on the reference's case
OUTSIDE = """
import json, sys
import numpy as np
runtime, model, reference, case = sys.argv[1], sys.argv[2], np.load(sys.argv[3]), sys.argv[4]
x = reference[case + ".input.data"].astype(np.float32)
if runtime == "torch":
    import torch
    with torch.no_grad():
        got = torch.jit.load(model)(torch.from_numpy(x)).numpy()
else:
    import openvino as ov
    got = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})([x])[0]
expected = reference[case + ".output.0"]
print(json.dumps({"max_abs": float(np.abs(got - expected).max()), "scale": float(np.abs(expected).max()),
                  "shape": list(got.shape)}))
"""

#: a third-party Module checkpoint of the kinds the issue names: conv, BatchNorm, PReLU, SoftmaxActivation
CHECKPOINT = """
import mxnet as mx, sys
x = mx.sym.Convolution(mx.sym.var("data"), num_filter=6, kernel=(3, 3), pad=(1, 1), name="conv")
x = mx.sym.BatchNorm(x, name="bn")
x = mx.sym.LeakyReLU(x, gamma=mx.sym.var("prelu_gamma"), act_type="prelu", name="prelu")
x = mx.sym.SoftmaxActivation(x, mode="channel", name="attn")
x = mx.sym.FullyConnected(mx.sym.Flatten(mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="avg")),
                          num_hidden=3, name="fc")
mod = mx.mod.Module(x, data_names=["data"], label_names=None)
mod.bind(data_shapes=[("data", (2, 3, 12, 12))], for_training=False)
mx.random.seed(5)
mod.init_params(initializer=mx.init.Xavier())
args, auxs = mod.get_params()
args["prelu_gamma"] = mx.nd.array([0.05, 0.1, 0.2, 0.3, 0.4, 0.5])  # a slope per channel, each its own
mod.set_params(args, auxs)
mod.save_checkpoint(sys.argv[1], 3)
"""


def outside(kit_home, runtime, model, reference, case="batch") -> dict:
    python = kit_home / "envs" / runtime / "bin" / "python"
    proc = subprocess.run(
        [str(python), "-c", OUTSIDE, runtime, str(model), str(reference), case],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def exits_run(kit_home, tmp_path_factory):
    """`env create openvino torch` (with 1.9.1's exporter), then 1.9.1's graphs out through all three exits."""
    run = matrix_run(
        kit_home,
        tmp_path_factory,
        "exits",
        save="1.9.1",
        load="onnx,openvino,torch",
        models="lenet,resnet_bn,lstm,families",
        more=("--apis", "export,module_checkpoint"),
        create=("1.9.1", "onnx", "openvino", "torch"),
        timeout=1200,
    )
    return dict(run, records={(r["model"], r["api"]): r for r in run["records"].values()})


def test_env_create_builds_each_runtime_beside_the_exporter(exits_run, kit_home):
    for name, package, version in (("openvino", "openvino", "2026.4.1"), ("torch", "torch", "2.15.0")):
        marker = json.loads((kit_home / "envs" / name / "mxcompat-env.json").read_text())
        assert marker["probe"]["runtime"] == name and marker["probe"]["versions"][package].startswith(version)
        assert "mxnet" not in marker["probe"] and not (kit_home / "jupyter" / "kernels" / f"mxnet-{name}").exists()
    listed = run_cli("env", "list", home=kit_home, check=True).stdout
    assert "- (torch worker)" in listed and "onnx2torch 1.5.15" in listed


def test_every_model_leaves_by_every_exit_as_exported_or_through_its_remedies(exits_run):
    proc, records = exits_run["proc"], exits_run["records"]
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # cells that need a remedy fail the run
    for (model, api), remedy in EXPECTED.items():
        rec = records[(model, api)]
        assert rec["direction"] == "onnx" and rec["loaded_with"] == "1.9.1", (model, api)
        if remedy is None:
            assert rec["verdict"] in ("identical", "close"), (model, api, rec["reason"])
            assert max(scales.relative_errors(rec).values()) <= 1e-3, (model, api)
            continue
        failed = "mismatch" if model in WRONG_NUMBERS else "load-error"
        assert rec["verdict"] == failed and rec["remedy"]["fixed"], (model, api, rec["verdict"], rec.get("remedy"))
        assert rec["remedy"]["name"] == remedy and rec["remedy"]["verdict"] in ("identical", "close"), (model, api)
        worst, size = rec["remedy"]["summary"]["max_abs"], scales.reference_scale(scales.reference(rec))
        assert scales.relative(worst, size) <= 1e-4 and rec["remedy"]["summary"]["top1_agreement"] == 1.0
    lrn = records[("lrn_net", "onnx")]  # LRN's bias read as 1, not MXNet's 2: wrong by far more than noise
    assert (
        lrn["summary"]["top1_agreement"] < 0.95
        and scales.relative(lrn["summary"]["max_abs"], scales.reference_scale(scales.reference(lrn))) > 0.05
    ), lrn["summary"]
    gamma = records[("converted_heads", "openvino")]["remedy"]["changed"]
    assert "stored gamma as ones with fix_gamma=False in BatchNorm 'bn1' (MXNet ignored the stored gamma)" in gamma
    assert "wrote MXNet's defaults: lrn1 knorm=2.0, fc1 flatten=True, fc1 no_bias=False" in gamma
    torch_lstm = records[("lstm", "torch")]
    assert [t["name"] for t in torch_lstm["remedy"]["tried"]] == [EXPECTED[("lstm", "torch")]]
    assert "torch_converters.use(True)" in torch_lstm["remedy"]["user_code"]
    assert records[("lenet", "torch")]["onnx"]["runtime"]["versions"]["onnx2torch"] == "1.5.15"
    # a cell whose export failed (only a remedy gets it out) still names the runtime it would run in
    assert records[("lstm", "torch")]["onnx"]["runtime"]["versions"]["torch"] == "2.15.0"


def test_the_files_a_user_leaves_with_run_outside_the_kit(exits_run, kit_home):
    """The TorchScript .pt (torch.jit.load: no kit, no onnx2torch) and OpenVINO's .xml/.bin give MXNet's reference
    outputs on the batch case, and the .pt any batch size (the trace keeps its shapes dynamic)."""
    for model in ("lenet", "resnet_bn"):
        reference = exits_run["store"] / "1.9.1" / model / "export" / "reference.npz"
        for api, runtime, suffix in (("torch", "torch", ".pt"), ("openvino", "openvino", ".xml")):
            rec = exits_run["records"][(model, api)]
            artifact = rec["onnx"]["artifact"]
            assert artifact.endswith(suffix), artifact
            found = outside(kit_home, runtime, artifact, reference)
            measured = rec["cases"]["batch"][0]["max_abs"]
            assert found["max_abs"] <= measured + 1e-6 * found["scale"], (model, api, found, measured)
        single = outside(
            kit_home, "torch", exits_run["records"][(model, "torch")]["onnx"]["artifact"], reference, "batch_of_one"
        )
        assert single["shape"][0] == 1 and scales.relative(single["max_abs"], single["scale"]) <= 1e-4


def test_investigate_names_the_first_node_an_exported_file_computes_wrongly(exits_run, kit_home):
    """lrn_net's exported file runs in OpenVINO with wrong numbers: investigate runs the file with its nodes as
    outputs and names the LRN node, with every node before it close; under the remedy an LSTM's file is close
    node by node."""
    runs = exits_run["dir"].parent
    proc = run_cli(
        "investigate", "exits", "--cell", "lrn_net/openvino/1.9.1/1.9.1", "--runs-dir", str(runs), home=kit_home
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "first node past tolerance: #2 lrnnet_lrn0 (op LRN, max abs " in proc.stdout
    found = json.loads((exits_run["dir"] / "investigate" / "1.9.1__lrn_net__openvino__1.9.1.json").read_text())
    rows = found["rows"]
    assert [r["ok"] for r in rows[:2]] == [True, True], rows[:2]
    assert found["first_divergence"]["node"] == "lrnnet_lrn0" and found["first_divergence"]["max_abs"] > 0.1
    assert found["exported"]["runtime"]["name"] == "openvino" and found["exported"]["layers"].endswith(".layers.onnx")
    assert found["exported"]["file"].startswith(str(exits_run["dir"] / "investigate"))  # not into the store
    proc = run_cli("investigate", "exits", "--cell", "lstm/torch/1.9.1/1.9.1", "--runs-dir", str(runs), home=kit_home)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Compared layer by layer under remedy onnx_opset_13+onnx2torch_kit_converters" in proc.stdout
    assert "no node past tolerance under remedy onnx_opset_13+onnx2torch_kit_converters" in proc.stdout


def test_the_summary_shows_every_exit_per_model(exits_run):
    md = (exits_run["dir"] / "summary.md").read_text()
    assert "| lenet | 1.9.1 | PyTorch | 1.9.1 (export) | yes | yes | close |" in md
    assert "| lenet | 1.9.1 | OpenVINO | 1.9.1 (export) | yes | yes | close |" in md
    assert "| lstm | 1.9.1 | PyTorch | 1.9.1 (export) | no | - | load-error | - | ReduceMean | " in md
    assert "torch 2.15.0" in md and "openvino 2026.4.1" in md


def test_check_model_to_torch_and_openvino_writes_the_files_beside_the_checkpoint(exits_run, kit_home, tmp_path):
    """A third-party 1.9.1 checkpoint with a per-channel PReLU and a channel SoftmaxActivation: --to
    torch,openvino writes PREFIX.pt and PREFIX.xml/.bin (each verified close, through the remedies it needs) with
    their records; both run outside the kit with the reference outputs."""
    prefix = tmp_path / "faceattr"
    python = kit_home / "envs" / "1.9.1" / "bin" / "python"
    subprocess.run([str(python), "-c", CHECKPOINT, str(prefix)], check=True, capture_output=True, timeout=300)
    common = ["--epoch", "3", "--input", "data:2,3,12,12", "--saved-with", "1.9.1", "--store", str(tmp_path / "store")]
    first = run_cli("check-model", str(prefix), *common, "--to", "onnx,torch", "--preflight", home=kit_home)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "no converter for SoftmaxActivation" in first.stdout
    assert "  LeakyReLU x1 (act_type=prelu)" in first.stdout
    assert (
        "blocks in onnx, torch: attn (SoftmaxActivation): the exporter has no converter -> remedy "
        "softmax_activation_as_softmax" in first.stdout
    )
    assert "blocks in onnx: prelu (LeakyReLU): a per-channel PReLU slope" in first.stdout
    assert not list(tmp_path.glob("faceattr.*.json")) and not (tmp_path / "faceattr.onnx").exists()  # nothing ran
    proc = run_cli(
        "check-model",
        str(prefix),
        "--epoch",
        "3",
        "--input",
        "data:2,3,12,12",
        "--saved-with",
        "1.9.1",
        "--to",
        "torch,openvino",
        "--store",
        str(tmp_path / "store"),
        "--runs-dir",
        str(tmp_path / "runs"),
        home=kit_home,
        timeout=900,
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # SoftmaxActivation: remedied only
    reference = tmp_path / "store" / "1.9.1" / "faceattr" / "checkpoint" / "reference.npz"
    for api, suffix in (("torch", ".pt"), ("openvino", ".xml")):
        rec = json.loads((tmp_path / f"faceattr.{api}.json").read_text())
        assert rec["remedy"]["fixed"] and "softmax_activation_as_softmax" in rec["remedy"]["name"], rec["remedy"]
        assert f"{prefix}{suffix}: the export with remedy {rec['remedy']['name']}" in proc.stdout
        found = outside(kit_home, api, tmp_path / f"faceattr{suffix}", reference)
        assert scales.relative(found["max_abs"], found["scale"]) <= 1e-4 and found["shape"] == [2, 3], (api, found)
    assert (tmp_path / "faceattr.bin").is_file()
