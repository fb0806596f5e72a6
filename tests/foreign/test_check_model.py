"""mxcompat check-model on checkpoints the kit did not train: old releases' files, legacy formats, detectors."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess

import numpy as np
import pytest
from conftest import NEWEST, OLDEST, read_records, run_cli

pytestmark = pytest.mark.envs

DETECTOR = """
import mxnet as mx, sys
data = mx.sym.var("data")
body = mx.sym.Activation(
    mx.sym.Convolution(data, num_filter=8, kernel=(3, 3), pad=(1, 1), name="conv"), act_type="relu"
)
pooled = mx.sym.Pooling(body, global_pool=True, kernel=(1, 1), pool_type="avg", name="gap")
cls = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(pooled, num_hidden=3, name="cls_fc"), name="cls")
bbox = mx.sym.FullyConnected(pooled, num_hidden=4, name="bbox_pred")
net = mx.sym.Group([cls, bbox])
mod = mx.mod.Module(net, data_names=["data"], label_names=["cls_label"])
mod.bind(data_shapes=[("data", (2, 3, 32, 32))], label_shapes=[("cls_label", (2,))], for_training=False)
mx.random.seed(3)
mod.init_params(initializer=mx.init.Xavier())
mod.save_checkpoint(sys.argv[1], 7)
"""


#: the arguments that fit the hand-written legacy checkpoint (tmp_path / "old") and the detector
LEGACY_ARGS = ("--epoch", "3", "--input", "data:2,6", "--label-names", "softmax_label")
DETECTOR_ARGS = ("--epoch", "7", "--input", "data:2,3,32,32")


def check(kit_home, tmp_path, prefix, *args, run_id):
    """check-model on the checkpoint at ``prefix`` with ARGS: reference computed in the oldest release, loaded
    in the newest, into tmp_path's store and runs folder."""
    return run_cli(
        "check-model",
        str(prefix),
        *args,
        "--saved-with",
        OLDEST,
        "--load",
        NEWEST,
        "--store",
        str(tmp_path / "store"),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--run-id",
        run_id,
        home=kit_home,
        timeout=900,
    )


def legacy_checkpoint(prefix):
    """Hand-written pre-1.0 files: a symbol JSON with 'param' keys and an NDArray list with bare names."""
    rng = np.random.RandomState(0)
    w, b = rng.randn(4, 6).astype(np.float32), rng.randn(4).astype(np.float32)

    def node(op, name, param, inputs):
        return {"op": op, "param": param, "name": name, "inputs": inputs, "backward_source_id": -1}

    sym = {
        "nodes": [
            node("null", "data", {}, []),
            node("null", "fc1_weight", {}, []),
            node("null", "fc1_bias", {}, []),
            node("FullyConnected", "fc1", {"no_bias": "False", "num_hidden": "4"}, [[0, 0], [1, 0], [2, 0]]),
            node("null", "softmax_label", {}, []),
            node("SoftmaxOutput", "softmax", {"grad_scale": "1"}, [[3, 0], [4, 0]]),
        ],
        "arg_nodes": [0, 1, 2, 4],
        "heads": [[5, 0]],
    }
    (prefix.parent / f"{prefix.name}-symbol.json").write_text(json.dumps(sym))

    def legacy_ndarray(a):  # uint32 ndim, uint32 dims, context (dev_type, dev_id), dtype flag, raw data
        return (
            struct.pack("<I", a.ndim)
            + struct.pack(f"<{a.ndim}I", *a.shape)
            + struct.pack("<iii", 1, 0, 0)
            + a.tobytes()
        )

    names = [b"fc1_weight", b"fc1_bias"]
    blob = struct.pack("<QQQ", 0x112, 0, 2) + legacy_ndarray(w) + legacy_ndarray(b)
    blob += struct.pack("<Q", 2) + b"".join(struct.pack("<Q", len(n)) + n for n in names)
    (prefix.parent / f"{prefix.name}-0003.params").write_bytes(blob)
    return w, b


def test_a_module_checkpoint_saved_by_the_oldest_release(trained_store, kit_home, tmp_path):
    src = trained_store["_store"] / OLDEST / "symbolic" / "module_checkpoint"
    shutil.copy(src / "model-symbol.json", tmp_path / "prod-symbol.json")
    shutil.copy(src / "model-0000.params", tmp_path / "prod-0000.params")
    prod_args = ("--input", "data:4,1,28,28", "--label-names", "softmax_label")
    proc = check(kit_home, tmp_path, tmp_path / "prod", *prod_args, run_id="prod")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"prod: symbol saved by MXNet 1.0.0; reference computed in {OLDEST} (1 output(s)" in proc.stdout
    records = read_records(tmp_path / "runs" / "prod")
    rec = records[(OLDEST, "prod", "checkpoint", NEWEST)]
    assert rec["verdict"] in ("identical", "close") and rec["direction"] == "backward"
    assert set(rec["cases"]) == {"batch", "zeros"} and rec["cases"]["batch"][0]["shape"] == [4, 4]
    assert (tmp_path / "runs" / "prod" / "summary.html").is_file()
    manifest = json.loads((tmp_path / "store" / OLDEST / "prod" / "checkpoint" / "manifest.json").read_text())
    assert manifest["foreign"] is True and manifest["symbol_mxnet_version"] == "1.0.0"
    assert manifest["source"]["prefix"] == str(tmp_path / "prod") and "internals" in manifest
    bundle = run_cli(
        "bundle",
        "prod",
        "--cell",
        f"prod/checkpoint/{OLDEST}/{NEWEST}",
        "--runs-dir",
        str(tmp_path / "runs"),
        home=kit_home,
    )
    assert bundle.returncode == 0, bundle.stderr


def test_a_multi_output_detector_with_a_label_head(built_envs, kit_home, tmp_path):
    python = kit_home / "envs" / OLDEST / "bin" / "python"
    subprocess.run([str(python), "-c", DETECTOR, str(tmp_path / "det")], check=True, capture_output=True)
    missing = check(kit_home, tmp_path, tmp_path / "det", *DETECTOR_ARGS, run_id="nolabel")
    assert missing.returncode == 2 and "--label-names cls_label" in missing.stderr
    proc = check(kit_home, tmp_path, tmp_path / "det", *DETECTOR_ARGS, "--label-names", "cls_label", run_id="det")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "(2 output(s)" in proc.stdout
    rec = read_records(tmp_path / "runs" / "det")[(OLDEST, "det", "checkpoint", NEWEST)]
    assert [m["shape"] for m in rec["cases"]["batch"]] == [[2, 3], [2, 4]]
    assert rec["verdict"] in ("identical", "close")


def test_hand_written_legacy_files(built_envs, kit_home, tmp_path):
    w, b = legacy_checkpoint(tmp_path / "old")
    proc = check(kit_home, tmp_path, tmp_path / "old", *LEGACY_ARGS, run_id="legacy")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "unrecorded (a legacy symbol file)" in proc.stdout
    rec = read_records(tmp_path / "runs" / "legacy")[(OLDEST, "old", "checkpoint", NEWEST)]
    assert rec["verdict"] in ("identical", "close")
    # the reference is a real forward pass over the hand-written weights: softmax(x W^T + b)
    from kit.common import artifacts

    ref = artifacts.load_reference(str(tmp_path / "store" / OLDEST / "old" / "checkpoint" / "reference.npz"))
    x = ref["batch"]["input"]["data"]
    logits = x.astype(np.float64) @ w.T.astype(np.float64) + b
    expected = np.exp(logits - logits.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    assert np.allclose(ref["batch"]["output"][0], expected, atol=1e-5)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--input", "data:2,5", "--label-names", "softmax_label"], "the graph expects data (?, 6)"),
        (["--label-names", "softmax_label", "--input", "x:2,6"], "add --input data:N,6"),
        (["--input", "data:2,6"], "add --label-names softmax_label"),
        (["--input", "data:two,6"], "the shape must be integers"),
        (["--input", "data:2,6:complex", "--label-names", "softmax_label"], "is not one of"),
        (["--epoch", "9", "--input", "data:2,6"], "checkpoint files not found"),
        (["--input", "data:2,6", "--name", "mlp"], "is not usable"),
        (["--input", "data:2,6", "--preflight"], "--preflight checks the exits: name them with --to"),
    ],
)
def test_input_problems_are_named_before_any_run(built_envs, kit_home, tmp_path, args, message):
    legacy_checkpoint(tmp_path / "old")
    args = list(args)
    if "--epoch" not in args:
        args = ["--epoch", "3"] + args
    proc = check(kit_home, tmp_path, tmp_path / "old", *args, run_id="bad")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert not (tmp_path / "runs" / "bad").exists()


def test_a_failed_reference_leaves_a_folder_the_user_made_as_it_was(built_envs, kit_home, tmp_path):
    """The reference is computed while the run starts its kernels, in a run folder: one check-model made goes
    when the reference fails (above), one the user made stays, with what it held."""
    legacy_checkpoint(tmp_path / "old")
    mine = tmp_path / "runs" / "mine"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("kept")
    bad = ["--epoch", "3", "--input", "data:2,5", "--label-names", "softmax_label"]
    proc = check(kit_home, tmp_path, tmp_path / "old", *bad, run_id="mine")
    assert proc.returncode == 2 and "the graph expects data (?, 6)" in proc.stderr, proc.stdout + proc.stderr
    assert (mine / "notes.txt").read_text() == "kept" and not (mine / "run.json").exists()


def test_params_of_another_model_are_refused(trained_store, kit_home, tmp_path):
    legacy_checkpoint(tmp_path / "old")
    shutil.copy(
        trained_store["_store"] / OLDEST / "mlp" / "module_checkpoint" / "model-0000.params",
        tmp_path / "old-0003.params",
    )
    proc = check(kit_home, tmp_path, tmp_path / "old", *LEGACY_ARGS, run_id="other")
    assert proc.returncode == 2 and "parameters not used by the graph" in proc.stderr


def test_loading_releases_older_than_the_reference_are_named_everywhere(trained_store, kit_home, tmp_path):
    """Nothing asked for disappears: --load releases older than the reference are listed, with why."""
    src = trained_store["_store"] / OLDEST / "symbolic" / "module_checkpoint"
    shutil.copy(src / "model-symbol.json", tmp_path / "prod-symbol.json")
    shutil.copy(src / "model-0000.params", tmp_path / "prod-0000.params")
    runs = tmp_path / "runs"
    proc = run_cli(
        "check-model", str(tmp_path / "prod"), "--input", "data:4,1,28,28", "--label-names", "softmax_label",
        "--saved-with", NEWEST, "--load", f"{OLDEST},{NEWEST}", "--store", str(tmp_path / "store"),
        "--runs-dir", str(runs), "--run-id", "older", home=kit_home, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    why = (
        f"older than every saving release ({NEWEST}); newer releases' artifacts load in older ones only with --forward"
    )
    assert f"not checked: --load {OLDEST}: {why}" in proc.stdout  # said before any work
    assert f"NOT CHECKED --load {OLDEST}: {why}" in proc.stdout  # and again with the outcome
    assert {k[3] for k in read_records(runs / "older")} == {NEWEST}
    run = json.loads((runs / "older" / "run.json").read_text())
    assert run["request"]["load"] == [OLDEST, NEWEST]
    assert run["skipped"] == [{"kind": "load", "name": OLDEST, "reason": why}]
    assert f"## Asked for, not checked\n\n- `--load {OLDEST}`: {why}" in (runs / "older" / "summary.md").read_text()
    import nbformat

    summary = nbformat.read(runs / "older" / "summary.ipynb", as_version=4)
    table = next(c for c in summary.cells if "skipped_table" in c.source)
    assert (
        OLDEST in table.outputs[0]["data"]["text/plain"]
        and "older than every" in table.outputs[0]["data"]["text/plain"]
    )
    report = run_cli("report", "older", "--json", "--runs-dir", str(runs), home=kit_home, check=True)
    assert json.loads(report.stdout)["skipped"] == run["skipped"]
    issue = run_cli("report", "older", "--issue", "--runs-dir", str(runs), home=kit_home, check=True)
    assert f"- `--load {OLDEST}`: {why}" in issue.stdout
