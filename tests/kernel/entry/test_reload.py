"""reload.ipynb across real releases: verdicts measured on 1.0.0.post4 and 1.9.1 artifacts."""

from __future__ import annotations

import shutil

import nbformat
import pytest
from conftest import NEWEST, OLDEST, read_records, reload_in_newest, scale_weight

pytestmark = pytest.mark.envs

PASS = {"identical", "close"}


def test_old_artifacts_load_in_the_newest_release(reloaded, trained_store):
    records = reloaded[NEWEST]["records"]
    backward = {k: r for k, r in records.items() if r["saved_with"] == OLDEST and r["api"] != "c_predict"}
    assert len(backward) == 28  # 7 models x 4 APIs, every one accounted for
    saved = {k for k, r in backward.items() if r["verdict"] != "unsupported"}
    assert len(saved) == 14
    for key in saved:
        rec = backward[key]
        assert rec["direction"] == "backward"
        assert rec["verdict"] in PASS, (key, rec["verdict"], rec["reason"])
        assert rec["summary"]["top1_agreement"] == 1.0
    for key in set(backward) - saved:
        assert backward[key]["reason"].startswith("saving release:")


def test_noise_floor_is_identical(reloaded):
    same = [r for r in reloaded[NEWEST]["records"].values() if r["saved_with"] == NEWEST]
    assert len(same) == 28 + 7  # and each model's c_predict cell
    for rec in same:
        assert rec["direction"] == "same" and rec["noise_floor"] is True
        assert rec["verdict"] in ("identical", "unsupported"), (rec["model"], rec["api"], rec["reason"])
        assert rec["nondeterministic"] is False
    oldest_same = [r for r in reloaded[OLDEST]["records"].values() if r["saved_with"] == OLDEST]
    assert {r["verdict"] for r in oldest_same} == {"identical", "unsupported"}


def test_the_c_predict_api_agrees_with_the_module_checkpoint_it_loads(reloaded):
    """lenet and resnet_bn through MXPredCreate in 1.0.0.post4 and 1.9.1: the verdict of the Module path."""
    for loaded in (OLDEST, NEWEST):
        records = reloaded[loaded]["records"]
        for saved in (OLDEST, NEWEST) if loaded == NEWEST else (OLDEST,):
            for model in ("lenet", "resnet_bn", "symbolic"):
                c_pred = records[(saved, model, "c_predict", loaded)]
                module = records[(saved, model, "module_checkpoint", loaded)]
                assert c_pred["source_api"] == "module_checkpoint" and c_pred["artifact"] == module["artifact"]
                assert c_pred["load_path"] == "MXPredCreate (C predict API, ctypes)"
                assert c_pred["verdict"] == module["verdict"] and c_pred["verdict"] in PASS, (saved, model, loaded)
                assert set(c_pred["cases"]) == set(module["cases"]) and "batch_of_one" in c_pred["cases"]
                if saved == loaded:
                    assert c_pred["verdict"] == "identical"
        e2e = records.get((NEWEST, "e2e", "c_predict", loaded))
        if e2e is not None:  # uint8 pixels: the C predict API feeds float32 only
            assert e2e["verdict"] == "unsupported" and "float32 inputs only" in e2e["reason"]


def test_end_to_end_artifacts_are_also_checked_with_the_network_alone(reloaded):
    records = reloaded[NEWEST]["records"]
    for api in ("export", "module_checkpoint"):
        split = records[(NEWEST, "e2e", api, NEWEST)]["network_only"]
        assert split["verdict"] == "identical" and split["transforms"]["verdict"] == "identical", split
        assert split["input_name"] == "transformed_data" and "normalize" in split["cut_after"]
        assert "_image_normalize" in split["front_ops"] and "batch" in split["cases"]
    assert records[(NEWEST, "lenet", "export", NEWEST)].get("network_only") is None  # no fused transforms
    assert records[(NEWEST, "e2e", "save_parameters", NEWEST)].get("network_only") is None  # no graph saved


def test_forward_direction_captures_the_real_errors(reloaded):
    records = reloaded[OLDEST]["records"]
    fwd = {(k[1], k[2]): r for k, r in records.items() if r["saved_with"] == NEWEST}
    assert all(r["direction"] == "forward" for r in fwd.values())
    assert fwd[("e2e", "export")]["verdict"] == "load-error"
    assert "_image_resize" in fwd[("e2e", "export")]["error"]
    assert "not registered" in fwd[("e2e", "module_checkpoint")]["error"]
    for model in ("lenet", "resnet_bn"):
        assert fwd[(model, "export")]["verdict"] == "load-error"
        assert "Cannot find argument 'layout'" in fwd[(model, "export")]["error"]
    assert "sparse_grad" in fwd[("embedding", "export")]["error"]
    assert "_rnn_param_concat" in fwd[("lstm", "module_checkpoint")]["error"]
    assert fwd[("lstm", "export")]["traceback"]
    assert fwd[("mlp", "export")]["verdict"] in PASS
    for model in ("mlp", "lenet", "resnet_bn", "lstm", "embedding"):
        assert fwd[(model, "save_params")]["verdict"] in PASS, model
        assert fwd[(model, "save_parameters")]["verdict"] == "unsupported"
        assert "loading release" in fwd[(model, "save_parameters")]["reason"]


def test_records_carry_tolerance_timing_and_fingerprints(reloaded):
    for release in (NEWEST, OLDEST):
        for rec in reloaded[release]["records"].values():
            assert rec["loaded_fingerprint"]["release"] == release
            if rec["verdict"] in PASS:
                first = rec["cases"]["batch"][0]
                assert first["tolerance"] == {"rtol": 1e-4, "atol": 1e-5, "scaled_atol": 1e-5}
                assert rec["load_seconds"] >= 0 and rec["infer_seconds"] >= 0
                assert rec["saved_fingerprint"]["release"] == rec["saved_with"]


def test_notebook_ends_with_verdict_tables(reloaded):
    nb = nbformat.read(reloaded[OLDEST]["dir"] / "reload.ipynb", 4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    headings = [o["data"]["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {})]
    assert headings == ["### backward and same release", "### forward"]
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
    assert html.count('class="dataframe"') == 2 and "<td>load-error</td>" in html
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 1  # errors by saving release


def _copy_artifact(store, release, model, api, dest):
    target = dest / release / model / api
    shutil.copytree(store / release / model / api, target)
    return target


def test_tampered_params_is_corrupt_and_nothing_loads(trained_store, kit_home, tmp_path):
    store = tmp_path / "store"
    folder = _copy_artifact(trained_store["_store"], OLDEST, "mlp", "export", store)
    params = folder / "model-0000.params"
    data = bytearray(params.read_bytes())
    data[len(data) // 2] ^= 0xFF
    params.write_bytes(bytes(data))
    reload_in_newest(kit_home, store, tmp_path)
    rec = read_records(tmp_path)[(OLDEST, "mlp", "export", NEWEST)]
    assert rec["verdict"] == "corrupt"
    assert "model-0000.params" in rec["reason"] and "nothing was loaded" in rec["reason"]
    assert rec["load_seconds"] is None


def test_perturbed_weight_with_a_valid_hash_is_caught_by_the_diff(trained_store, kit_home, tmp_path):
    store = tmp_path / "store"
    folder = _copy_artifact(trained_store["_store"], OLDEST, "lenet", "save_params", store)
    scale_weight(kit_home, folder / "model.params", "dense1_weight", "w * 1.05")
    reload_in_newest(kit_home, store, tmp_path)
    rec = read_records(tmp_path)[(OLDEST, "lenet", "save_params", NEWEST)]
    assert rec["verdict"] in ("drift", "mismatch"), rec["reason"]
    assert rec["summary"]["frac_out_of_tolerance"] > 0.5


def test_nothing_to_compare_is_an_error_not_a_pass(built_envs, kit_home, tmp_path):
    import papermill

    with pytest.raises(papermill.PapermillExecutionError) as e:
        reload_in_newest(kit_home, tmp_path / "empty", tmp_path)
    assert "no artifacts to check" in str(e.value)
    assert not (tmp_path / "records").exists()
