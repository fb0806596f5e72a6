"""The vision group: gluon model-zoo architectures through every API, across releases; the e2e benchmark."""

from __future__ import annotations

import json
import sys

import nbformat
import pytest
import scales
from conftest import NEWEST, OLDEST, REPO, group_line, matrix_run, read_records, run_cli

pytestmark = pytest.mark.envs

MIDDLE = "1.5.1"  # the oldest release with MobileNetV2 and a fusable Resize whose env the tests build anyway
BEFORE_CHANGE = "1.2.1"  # MobileNetV2 in 1.2 used relu and other strides; 1.3 changed the model-zoo code
CLASSIC = ["resnet18_v1", "resnet18_v2", "mobilenet_v1", "squeezenet1_1", "densenet121", "vgg11_bn"]
NEW_IN_LATER = {"mobilenet_v2": "mobilenet_v2_* arrived in MXNet 1.2", "e2e_resnet18": "Resize is not a HybridBlock"}
APIS = ["export", "save_parameters", "save_params", "module_checkpoint"]


@pytest.fixture(scope="module")
def vision_run(built_envs, kit_home, tmp_path_factory):
    """Oldest and 1.5.1 train the vision group; 1.5.1 and newest reload it."""
    return matrix_run(
        kit_home,
        tmp_path_factory,
        "vision",
        save=f"{OLDEST},{MIDDLE}",
        load=f"{MIDDLE},{NEWEST}",
        models="vision",
        more=("--jobs", "2"),
        create=(MIDDLE, BEFORE_CHANGE),
        timeout=2400,
    )


def _metrics(rec):
    """Every output's metrics of every case of a record."""
    return [m for outputs in rec["cases"].values() for m in outputs]


def _verdict(records, saved, model, api, loaded):
    return records[(saved, model, api, loaded)]["verdict"]


def test_vision_matrix_passes(vision_run):
    proc = vision_run["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    models = {key[1] for key in vision_run["records"]}
    assert models == set(CLASSIC) | set(NEW_IN_LATER)


def test_each_architecture_reloads_identical_in_its_own_release(vision_run):
    records = vision_run["records"]
    for model in CLASSIC + list(NEW_IN_LATER):
        for api in APIS:
            rec = records[(MIDDLE, model, api, MIDDLE)]
            assert rec["verdict"] == "identical", (model, api, rec["reason"], rec["error"])
            assert all(m["max_abs"] == 0.0 for m in _metrics(rec)), (model, api)


def test_each_architecture_is_close_across_releases(vision_run):
    records = vision_run["records"]
    for model in CLASSIC:
        for api in ("export", "save_params", "module_checkpoint"):
            rec = records[(OLDEST, model, api, NEWEST)]
            assert rec["verdict"] in ("close", "identical"), (model, api, rec["reason"], rec["error"])
            for m in _metrics(rec):
                assert m["within_tolerance"] and m["cosine"] > 0.9999, (model, api, m)
                assert m["tolerance"] == {"rtol": 1e-4, "atol": 1e-5, "scaled_atol": 1e-4}  # the deep-network default
            # and the held-out batch within 0.1% of its own size: deep networks' outputs have no fixed size
            moved = scales.relative_errors(rec, cases=("batch",))
            assert max(moved.values()) <= 1e-3, (model, api, moved)
        rec = records[(OLDEST, model, "save_parameters", NEWEST)]
        assert rec["verdict"] == "unsupported" and "arrived in MXNet 1.2" in rec["reason"]
    for model, why in NEW_IN_LATER.items():
        for api in APIS:
            assert _verdict(records, MIDDLE, model, api, NEWEST) in ("close", "identical"), (model, api)
            if model == "mobilenet_v2":  # its own, measured on the noise of 1.9.1's backends
                for m in _metrics(records[(MIDDLE, model, api, NEWEST)]):
                    assert m["tolerance"] == {"rtol": 1e-4, "atol": 1e-5, "scaled_atol": 5e-4}, (api, m["tolerance"])
            rec = records[(OLDEST, model, api, NEWEST)]
            assert rec["verdict"] == "unsupported" and why in rec["reason"], (model, api, rec["reason"])


def test_artifacts_record_what_was_built(vision_run):
    store = vision_run["store"]
    manifest = json.loads((store / MIDDLE / "e2e_resnet18" / "export" / "manifest.json").read_text())
    assert manifest["variant"] == {"transforms": ["Resize", "ToTensor", "Normalize"], "batched": True}
    assert manifest["inputs"][0]["shape"] == [300, 300, 3] and manifest["inputs"][0]["dtype"] == "uint8"
    assert manifest["internals"]["samples"] == 1 and manifest["training"]["n_train"] == 32
    nodes = json.loads((store / MIDDLE / "e2e_resnet18" / "export" / "model-symbol.json").read_text())["nodes"]
    ops = [n["op"] for n in nodes]
    # the transforms are in the exported graph, before the first convolution
    assert (
        ops.index("_image_resize")
        < ops.index("_image_to_tensor")
        < ops.index("_image_normalize")
        < ops.index("Convolution")
    )
    params = json.loads((store / OLDEST / "resnet18_v1" / "save_params" / "manifest.json").read_text())["parameters"]
    assert "resnet18_v1_conv0_weight" in params and params["resnet18_v1_conv0_weight"]["shape"] == [64, 3, 7, 7]


def test_every_architecture_answers_differently_for_different_inputs(vision_run):
    """A network that gives every input the same output could not show a regression: none of them may."""
    import numpy as np

    for model in CLASSIC + list(NEW_IN_LATER):
        with np.load(vision_run["store"] / MIDDLE / model / "export" / "reference.npz") as z:
            outputs = [z[k] for k in z.files if k.startswith("batch") and "output" in k]
        assert outputs, model
        # the spread over inputs at least 1e-3 of the outputs' size (ten times the deep-network tolerance's
        # rtol and scaled_atol, 1e-4), whatever size training gave them: a constant network's is float noise or 0
        spread, size = outputs[0].std(axis=0).max(), scales.scale(outputs[0])
        assert spread > 1e-3 * size, (model, spread, size, outputs[0])


def test_fixed_head_pools_become_global_and_nothing_else_changes(vision_run):
    for model, fixed in (("squeezenet1_1", "13"), ("densenet121", "7")):
        path = vision_run["store"] / MIDDLE / model / "export" / "model-symbol.json"
        pools = [n for n in json.loads(path.read_text())["nodes"] if n["op"] == "Pooling"]
        attrs = [n.get("attrs", {}) for n in pools]
        assert attrs[-1]["global_pool"] == "True" and attrs[-1]["pool_type"] == "avg", model
        assert all(a.get("global_pool") in (None, "False") for a in attrs[:-1]), model
        assert not any(a["kernel"] == f"({fixed}, {fixed})" for a in attrs), model


def test_model_zoo_code_change_shows_as_a_verdict(vision_run, kit_home, tmp_path):
    """MobileNetV2 saved by 1.2 (relu, old strides) and rebuilt by 1.9's model-zoo code (relu6, new strides):
    the parameters load, the outputs differ. The graph-carrying APIs are unaffected."""
    proc = run_cli(
        "run",
        "--runs-dir",
        str(tmp_path),
        "--save",
        BEFORE_CHANGE,
        "--load",
        NEWEST,
        "--models",
        "mobilenet_v2",
        "--apis",
        "export,save_parameters",
        "--run-id",
        "v2",
        "--store",
        str(tmp_path / "store"),
        home=kit_home,
        timeout=1200,
    )
    records = read_records(tmp_path / "v2")
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert records[(BEFORE_CHANGE, "mobilenet_v2", "export", NEWEST)]["verdict"] in ("close", "identical")
    rec = records[(BEFORE_CHANGE, "mobilenet_v2", "save_parameters", NEWEST)]
    assert rec["verdict"] in ("mismatch", "drift"), rec
    # another architecture's outputs: off by more than 1% of their size somewhere, not by float noise
    moved = scales.relative_errors(rec)
    assert rec["load_seconds"] is not None and max(moved.values()) > 1e-2, moved
    fail = group_line(proc.stdout, "FAIL", "model code changed: mobilenet_v2 rebuilt as another architecture")
    assert "save_parameters" in fail and f"saved with {BEFORE_CHANGE}" in fail
    # explained: the architecture 1.9.1's model code builds is not the one 1.2.1 saved the weights of
    change = rec["model_code_change"]
    assert change["saved_with"] != change["loaded_with"] == rec_model_version(vision_run["records"], MIDDLE)
    assert any("clip(a_min=0, a_max=6)" in line for line in change["diff"]), change["diff"]
    assert any("stride" in line for line in change["diff"]), change["diff"]
    assert rec["reason"].startswith("model code changed between releases (")
    assert records[(BEFORE_CHANGE, "mobilenet_v2", "export", NEWEST)]["model_code_change"] is None  # its own graph
    assert "model code changed between releases" in (tmp_path / "v2" / "summary.md").read_text()


def rec_model_version(records, release):
    """The model version (architecture fingerprint) ``release`` saved MobileNetV2 with, from any of its records."""
    found = {r["model_version"] for k, r in records.items() if k[0] == release and k[1] == "mobilenet_v2"}
    return found.pop() if len(found) == 1 else None


def test_unknown_model_group_is_refused(kit_home, built_envs):
    proc = run_cli("run", "--save", OLDEST, "--models", "vision,resnet99", home=kit_home)
    assert proc.returncode == 2
    assert "resnet99" in proc.stderr and "groups: core, vision, all" in proc.stderr


def test_e2e_benchmark_reduced_writes_every_field(built_envs, kit_home, tmp_path):
    import subprocess

    out = tmp_path / "e2e.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "e2e_bench.py"),
            "--releases",
            f"{OLDEST},{NEWEST}",
            "--reduced",
            "--home",
            str(kit_home),
            "--out",
            str(out),
            "--plot",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["benchmark"] == "e2e_fused_vs_separate" and result["settings"] == {
        "runs": 2,
        "warmup": 1,
        "batch": 25,
    }
    old, new = result["releases"]
    assert old["release"] == OLDEST and "Resize is not a HybridBlock" in old["unsupported"]
    assert new["mxnet_version"] == NEWEST and new["batch_size"] == 25
    for case, n in (("single", 1), ("batch", 25)):
        c = new[case]
        assert c["input_shape"] == [n, 300, 300, 3]
        assert c["max_abs_output_difference"] < 1e-3  # the same weights and transforms, fused or not
        for mode in ("fused", "separate"):
            t = c[mode]
            assert set(t) == {
                "runs",
                "mean_seconds",
                "median_seconds",
                "std_seconds",
                "min_seconds",
                "per_sample_ms",
                "per_sample_ms_median",
            }
            assert t["runs"] == 2 and 0 < t["min_seconds"] <= t["mean_seconds"]
            assert t["per_sample_ms"] == pytest.approx(t["mean_seconds"] / n * 1000)
        assert c["separate_over_fused"] == pytest.approx(c["separate"]["mean_seconds"] / c["fused"]["mean_seconds"])
    assert f"| {NEWEST} | yes |" in proc.stdout and "unsupported" in proc.stdout
    plotted = proc.stdout.strip().splitlines()[-1].split("plotted in ")[-1]
    nb = nbformat.read(plotted, as_version=4)
    assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
