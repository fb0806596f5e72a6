"""train.ipynb through papermill in the oldest and newest environments: artifacts, manifests, references."""

from __future__ import annotations

import base64
import json
import math
import re

import nbformat
import numpy as np
import papermill
import pytest
import scales
from conftest import NEWEST, OLDEST

from kit.common import artifacts
from kit.execute.notebooks import NOTEBOOKS, run_notebook
from kit.home import KitHome

pytestmark = pytest.mark.envs

MODELS = ["mlp", "lenet", "resnet_bn", "lstm", "embedding", "symbolic", "e2e"]
APIS = ["export", "save_parameters", "save_params", "module_checkpoint"]
ALL = set(APIS)
EXPECTED_SAVED = {
    OLDEST: {
        "mlp": {"export", "save_params", "module_checkpoint"},
        "lenet": {"export", "save_params", "module_checkpoint"},
        "resnet_bn": {"export", "save_params", "module_checkpoint"},
        "lstm": {"save_params"},
        "embedding": {"export", "save_params", "module_checkpoint"},
        "symbolic": {"module_checkpoint"},
        "e2e": set(),
    },
    NEWEST: {
        "mlp": ALL,
        "lenet": ALL,
        "resnet_bn": ALL,
        "lstm": ALL,
        "embedding": ALL,
        "symbolic": {"module_checkpoint"},
        "e2e": ALL,
    },
}
N_CLASSES = {"lstm": 3, "embedding": 3}


def manifest(store, release, model, api) -> dict:
    return json.loads((store / release / model / api / "manifest.json").read_text())


@pytest.mark.parametrize("release", [OLDEST, NEWEST])
def test_every_model_and_api_is_saved_or_unsupported_with_a_reason(trained_store, release):
    store = trained_store["_store"]
    for model in MODELS:
        for api in APIS:
            m = manifest(store, release, model, api)
            assert m["release"] == release and m["model"] == model and m["api"] == api
            if api in EXPECTED_SAVED[release][model]:
                assert m["status"] == "saved", (model, api, m.get("reason"))
            else:
                assert m["status"] == "unsupported", (model, api)
                assert m["reason"] and m["files"] == {}


@pytest.mark.parametrize("release", [OLDEST, NEWEST])
def test_saved_artifacts_verify_and_carry_their_identity(trained_store, release):
    store = trained_store["_store"]
    for model in MODELS:
        versions = set()
        for api in EXPECTED_SAVED[release][model]:
            folder = store / release / model / api
            m = manifest(store, release, model, api)
            assert artifacts.verify(str(folder), m) == []
            assert set(m["files"]) >= {"reference.npz"} and len(m["files"]) >= 2
            assert re.fullmatch(r"[0-9a-f]{16}", m["param_version"])
            if m.get("architecture"):  # the model version is the architecture the release built
                assert re.fullmatch(r"[0-9a-f]{16}", m["model_version"]) and m["architecture"]["code_version"] == 1
                assert "architecture.json" in m["files"]
            else:  # a model without a graph in this release (the LSTM before 1.3): the code version
                assert m["model_version"] == 1
            versions.add(m["param_version"])
            fp = m["fingerprint"]
            assert fp["release"] == release and fp["kit_env"]["release"] == release
            assert fp["kit_env"]["fallback"] is False
            assert fp["mxnet"] == ("1.0.0" if release == OLDEST else "1.9.1")
            assert fp["python"].startswith("3.6." if release == OLDEST else "3.11.")
            assert fp["cpu"]["model"] and isinstance(fp["env"], dict)
            t = m["training"]
            # trained, wherever training lands: the loss below a uniform guess's cross-entropy, ln(classes), and
            # held-out accuracy above chance by more than 4 standard deviations of a guesser's accuracy on as
            # many samples (an untrained or broken model fails both; no fixed level that a good run might miss)
            chance = t["chance_accuracy"]
            assert t["epochs"] >= 4 and t["final_loss"] < math.log(1 / chance), (model, t)
            assert t["heldout_accuracy"] > chance + 4 * math.sqrt(chance * (1 - chance) / t["n_heldout"]), (model, t)
        assert len(versions) <= 1, f"{model} was trained once, so every API saved the same weights"


@pytest.mark.parametrize("release", [OLDEST, NEWEST])
def test_references_have_the_right_shapes_and_match_memory(trained_store, release):
    store = trained_store["_store"]
    for model in MODELS:
        for api in EXPECTED_SAVED[release][model]:
            m = manifest(store, release, model, api)
            ref = artifacts.load_reference(str(store / release / model / api / "reference.npz"))
            expected_cases = {"batch", "zeros", "large"} | (
                {"negative"} if m["inputs"][0]["kind"] == "float" else set()
            )
            if m["inputs"][0]["kind"] != "pixels_single":
                expected_cases.add("batch_of_one")  # the inference-only deployment, at batch size 1
                assert ref["batch_of_one"]["output"][0].shape[0] == 1
            assert set(ref) == expected_cases
            out = ref["batch"]["output"][0]
            assert out.shape == (8, N_CLASSES.get(model, 4)) and out.dtype == np.float32
            assert np.isfinite(out).all()
            assert ref["batch"]["input"]["data"].dtype == np.dtype(m["inputs"][0]["dtype"])
            roundtrip = m["reference"]["roundtrip_max_abs_error"]
            # the loaded artifact equals the in-memory model, except where 1.7+ fuse ops on the Module path
            if api == "module_checkpoint" and release == NEWEST:
                # fused ops round otherwise: each case's outputs within 1e-4 of their own size (the large case's
                # are 1000 times the batch's, and trained outputs have no fixed size anyway)
                errors = {
                    f"{case}/{i}": (float(np.abs(loaded.astype(np.float64) - memory).max()), scales.scale(memory))
                    for case, entry in ref.items()
                    for i, (loaded, memory) in enumerate(zip(entry["output"], entry["memory"]))
                }
                assert roundtrip == max(err for err, _ in errors.values()), (model, api, roundtrip, errors)
                moved = {k: scales.relative(err, size) for k, (err, size) in errors.items()}
                assert max(moved.values()) <= 1e-4, (model, api, roundtrip, moved)
            else:
                assert roundtrip == 0.0, (model, api, roundtrip)


def test_end_to_end_model_takes_raw_uint8_pixels(trained_store):
    m = manifest(trained_store["_store"], NEWEST, "e2e", "export")
    assert m["inputs"][0]["dtype"] == "uint8" and m["inputs"][0]["shape"] == [36, 36, 3]
    assert m["variant"] == {"transforms": ["Resize", "ToTensor", "Normalize"], "batched": True}
    graph = (trained_store["_store"] / NEWEST / "e2e" / "export" / "model-symbol.json").read_text()
    assert "_image_resize" in graph and "_image_to_tensor" in graph and "_image_normalize" in graph
    unsupported = manifest(trained_store["_store"], OLDEST, "e2e", "export")
    assert "transforms arrived in MXNet 1.1" in unsupported["reason"]


@pytest.mark.parametrize("release", [OLDEST, NEWEST])
def test_executed_notebook_shows_table_and_loss_plot(trained_store, release):
    nb = nbformat.read(trained_store["_runs"] / f"train-{release}.ipynb", as_version=4)
    assert nb.metadata["kernelspec"]["name"] == f"mxnet-{release}"
    assert nb.metadata["papermill"]["parameters"]["release"] == release
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    pngs = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    assert len(html) == 1 and 'class="dataframe"' in html[0]  # a pandas DataFrame, in 0.25.3 as in 2.2.3
    assert "<td>module_checkpoint</td>" in html[0] and "<td>unsupported</td>" in html[0]
    assert len(pngs) == 1 and base64.b64decode(pngs[0])[:8] == b"\x89PNG\r\n\x1a\n"  # the loss curves
    assert not any(o.output_type == "error" for o in outputs)


def test_baselines_are_frozen_unless_overwritten(trained_store, kit_home, tmp_path):
    store = trained_store["_store"]
    path = store / NEWEST / "mlp" / "export" / "manifest.json"
    before = path.read_text()
    out = tmp_path / "again.ipynb"
    run_notebook(
        NOTEBOOKS / "train.ipynb",
        out,
        f"mxnet-{NEWEST}",
        {"release": NEWEST, "store": str(store), "models": ["mlp"]},
        home=KitHome(kit_home),
    )
    assert path.read_text() == before
    text = "".join(
        o.get("data", {}).get("text/html", "")
        for c in nbformat.read(out, 4).cells
        if c.cell_type == "code"
        for o in c.outputs
    )
    assert text.count(">exists<") == 4


def test_wrong_kernel_fails_loudly_with_the_cell_visible(built_envs, kit_home, tmp_path):
    out = tmp_path / "wrong.ipynb"
    with pytest.raises(papermill.PapermillExecutionError) as e:
        run_notebook(
            NOTEBOOKS / "train.ipynb",
            out,
            f"mxnet-{OLDEST}",
            {"release": NEWEST, "store": str(tmp_path / "store")},
            home=KitHome(kit_home),
        )
    assert "this kernel runs MXNet 1.0.0, but release is '1.9.1'" in str(e.value)
    nb = nbformat.read(out, 4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors and errors[0]["ename"] == "KitError"
    assert not (tmp_path / "store").exists()
