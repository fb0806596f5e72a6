"""mxcompat store import-mbcc: the layout MXNet's nightly backwards-compatibility checker writes, as kit artifacts.

The layout is written by tests/mbcc_layout.py (the checker's 1.x training script, re-implemented) in the
oldest and the newest release, imported into a store, then reloaded by a run like any model group.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import boto3
import pytest
from conftest import NEWEST, OLDEST, read_records, run_cli
from helpers import REPO

from kit import store as stores
from kit.common import artifacts
from kit.common.capabilities import APIS, MBCC_MODELS
from kit.common.errors import UsageError
from kit.envs.manager import EnvManager
from kit.foreign.mbcc import CHECKER_MODELS, converter_env, import_mbcc, read_layout, release_for
from kit.home import KitHome

envs = pytest.mark.envs  # the tests that build environments and run MXNet; the layout rules need neither

#: what the checker saves in each MXNet version folder, as (kit model, kit API); the LSTM from 1.2.1 on
CHECKER_1_0 = [("mbcc_lenet", "export"), ("mbcc_lenet", "save_params"), ("mbcc_mlp", "module_checkpoint")]
CHECKER_1_9 = sorted(CHECKER_1_0 + [("mbcc_lstm", "save_parameters")])
#: a version folder of a release that has no environment here: read in the newest ready 1.x one
NO_ENV = "1.1.0"


@pytest.fixture(scope="module")
def source(built_envs, kit_home, tmp_path_factory) -> Path:
    """The checker's models/ folder: written by the oldest and the newest release, plus what it never writes."""
    src = tmp_path_factory.mktemp("mbcc-source") / "models"
    for release in (OLDEST, NEWEST):
        python = kit_home / "envs" / release / "bin" / "python"
        subprocess.run([str(python), str(REPO / "tests" / "mbcc_layout.py"), str(src)], check=True, timeout=120)
    # 1.0.0's files under another version's folder: a release without an environment on this machine
    shutil.copytree(src / "1.0.0", src / NO_ENV)
    (src / "README.md").write_text("what the bucket holds\n")
    (src / "mxnet-model-backwards-compatibility-data").mkdir()
    (src / "mxnet-model-backwards-compatibility-data" / "mnist.zip").write_bytes(b"PK")
    (src / "1.9.1" / "resnet_gluon_api").mkdir()
    (src / "1.9.1" / "resnet_gluon_api" / "resnet_gluon_api-params").write_bytes(b"?")
    (src / "1.9.1" / "lenet_gluon_save_params_api" / "lenet_gluon_save_params_api-params.bak").write_bytes(b"?")
    shutil.copytree(src / "1.0.0" / "module_checkpoint_api", src / "1.2.0" / "module_checkpoint_api")
    (src / NO_ENV / "lenet_gluon_save_params_api" / "lenet_gluon_save_params_api-inference").unlink()
    return src


@pytest.fixture(scope="module")
def imported(source, kit_home, tmp_path_factory) -> dict:
    store = tmp_path_factory.mktemp("mbcc-store")
    events: list[str] = []
    started = time.monotonic()
    result = import_mbcc(str(source), str(store), home=KitHome(kit_home), on_event=events.append)
    return {"result": result, "store": store, "events": events, "seconds": time.monotonic() - started}


def manifest(store: Path, release: str, model: str, api: str) -> dict:
    return json.loads((store / release / model / api / "manifest.json").read_text())


@envs
def test_each_model_folder_becomes_an_artifact_of_its_saving_release(imported, kit_home):
    result, store = imported["result"], imported["store"]
    want = sorted(
        [(OLDEST, *c) for c in CHECKER_1_0]
        + [(NEWEST, *c) for c in CHECKER_1_9]
        + [(NO_ENV, *c) for c in CHECKER_1_0 if c != ("mbcc_lenet", "save_params")]  # its -inference is gone
    )
    converted_no_env = converter_env(EnvManager(KitHome(kit_home)), NO_ENV).name
    assert sorted(result["imported"]) == want
    assert imported["seconds"] < 90
    for release, model, api in want:
        m = manifest(store, release, model, api)
        assert (m["release"], m["model"], m["api"], m["status"]) == (release, model, api, "saved")
        assert artifacts.verify(str(store / release / model / api), m) == []
        assert m["mbcc"]["mx_version"] == {OLDEST: "1.0.0", NEWEST: "1.9.1", NO_ENV: NO_ENV}[release]
        assert m["model_version"] == 1 and m["fingerprint"]["mxnet"] == m["mbcc"]["mx_version"]
        reference = artifacts.load_reference(str(store / release / model / api / artifacts.REFERENCE))
        if model == "mbcc_lstm":
            assert list(reference) == ["batch"] and reference["batch"]["input"]["data"].shape == (10, 30)
            assert "model.0.weight" in m["parameters"] and m["load"]["param_file"].endswith("-params")
        elif model == "mbcc_mlp":  # the checker predicts through NDArrayIter(batch_size=10): one case per batch
            assert m["load"] == {"prefix": "module_checkpoint_api", "epoch": 1, "label_names": ["softmax_label"]}
            assert sorted(reference) == ["batch", "batch_2"]
            assert [reference[c]["output"][0].shape for c in sorted(reference)] == [(10, 2), (10, 2)]
            assert m["inputs"][0]["shape"] == [1]
        else:
            assert list(reference) == ["batch"] and reference["batch"]["output"][0].shape == (20, 2)
            assert reference["batch"]["input"]["data"].shape == (20, 1, 30, 30)
        if release == NO_ENV and converted_no_env != NO_ENV:  # read in another release: no round trip claimed
            assert m["mbcc"]["converted_in"] == converted_no_env
            assert "unavailable" in m["mbcc"]["roundtrip"] and m["reference"]["roundtrip_max_abs_error"] is None
        elif release == NO_ENV:
            assert m["mbcc"]["converted_in"] == NO_ENV
        else:  # reloaded in the saving release by the kit's adapter: the checker's outputs, bit for bit
            assert m["mbcc"]["converted_in"] == release
            assert m["reference"]["roundtrip_max_abs_error"] == 0.0, m["mbcc"]["roundtrip"]
    # the kit's model code names parameters as the checker's does, so its files load by name
    lenet = manifest(store, NEWEST, "mbcc_lenet", "save_params")
    assert set(lenet["parameters"]) == {
        f"{layer}_{p}" for layer in ("conv0", "conv1", "dense0", "dense1") for p in ("weight", "bias")
    }
    assert lenet["variant"] == {"block": "Net"} and lenet["load"] == {
        "param_file": "lenet_gluon_save_params_api-params"
    }
    assert manifest(store, NEWEST, "mbcc_lenet", "export")["internals"]["nodes"] > 0
    index = json.loads((store / "index.json").read_text())
    assert {(e["release"], e["model"], e["api"]) for e in index["artifacts"] if e["status"] == "saved"} == set(want)


@envs
def test_every_other_cell_of_an_imported_release_says_why_it_is_unsupported(imported):
    result, store = imported["result"], imported["store"]
    cells = {(r, m, a) for r, m, a, _ in result["unsupported"]} | set(result["imported"])
    assert cells == {(r, m, a) for r in (OLDEST, NEWEST, NO_ENV) for m in MBCC_MODELS for a in APIS}
    reasons = {(r, m, a): why for r, m, a, why in result["unsupported"]}
    assert "from MXNet 1.2.1 on" not in reasons[(OLDEST, "mbcc_lstm", "save_params")]
    assert "saves mbcc_lstm with save_parameters" in reasons[(OLDEST, "mbcc_lstm", "save_params")]
    assert "arrived in MXNet 1.2" in reasons[(OLDEST, "mbcc_lenet", "save_parameters")]
    assert "saves mbcc_mlp with module_checkpoint" in reasons[(NEWEST, "mbcc_mlp", "export")]
    broken = reasons[(NO_ENV, "mbcc_lenet", "save_params")]
    assert "was not imported: incomplete" in broken and "lenet_gluon_save_params_api-inference" in broken
    placeholder = manifest(store, OLDEST, "mbcc_lstm", "module_checkpoint")
    assert (
        placeholder["status"] == "unsupported"
        and placeholder["reason"] == reasons[(OLDEST, "mbcc_lstm", "module_checkpoint")]
    )


@envs
def test_what_is_not_imported_is_reported_with_the_reason(imported):
    skipped = dict(imported["result"]["skipped"])
    assert "not in a <mx.__version__>/<model_name>/ folder" in skipped["README.md"]
    assert "data folder" in skipped["mxnet-model-backwards-compatibility-data/"]
    assert "unknown checker model 'resnet_gluon_api'" in skipped["1.9.1/resnet_gluon_api/"]
    bak = "1.9.1/lenet_gluon_save_params_api/lenet_gluon_save_params_api-params.bak"
    assert "not a file the checker writes" in skipped[bak]
    assert "no release the kit knows" in skipped["1.2.0/module_checkpoint_api/"]
    incomplete = skipped[f"{NO_ENV}/lenet_gluon_save_params_api/"]
    assert "incomplete" in incomplete and "lenet_gluon_save_params_api-inference" in incomplete
    assert len(skipped) == 6, skipped
    for path in skipped:
        assert any(e.startswith(f"skipped {path}: ") for e in imported["events"]), path


@envs
def test_a_source_that_is_not_the_checkers_layout_is_refused(kit_home, tmp_path):
    kit_store = tmp_path / "kit-store" / "1.9.1" / "mlp" / "export"
    kit_store.mkdir(parents=True)
    (kit_store / "manifest.json").write_text("{}")
    for src in (tmp_path / "kit-store", tmp_path / "missing"):
        with pytest.raises(UsageError) as err:
            import_mbcc(str(src), str(tmp_path / "store"), home=KitHome(kit_home), on_event=lambda m: None)
        assert "checker" in str(err.value) or "not a folder" in str(err.value)
    assert not (tmp_path / "store").exists()


@envs
def test_imported_artifacts_are_reloaded_by_a_run_like_any_other(imported, kit_home, tmp_path):
    store, result = imported["store"], imported["result"]
    before = {c: manifest(store, *c)["param_version"] for c in result["imported"]}
    proc = run_cli(
        "run",
        "--save",
        f"{OLDEST},{NEWEST}",
        "--load",
        NEWEST,
        "--models",
        "mbcc",
        "--store",
        str(store),
        "--runs-dir",
        str(tmp_path),
        "--run-id",
        "mbcc",
        home=kit_home,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = read_records(tmp_path / "mbcc")
    assert len(records) == 2 * len(MBCC_MODELS) * (len(APIS) + 1)  # and a c_predict cell each
    for release, model, api in result["imported"]:
        if release == NO_ENV:
            continue
        rec = records[(release, model, api, NEWEST)]
        want = ("identical",) if release == NEWEST else ("identical", "close")
        assert rec["verdict"] in want, rec
        assert rec["load_path"] and rec["model_version"] == 1
    for release, model, api, reason in result["unsupported"]:
        if release != NO_ENV:
            rec = records[(release, model, api, NEWEST)]
            assert rec["verdict"] == "unsupported" and reason in rec["reason"]
    # the train steps found every cell in the store: nothing was trained over the imported files
    assert {c: manifest(store, *c)["param_version"] for c in result["imported"]} == before
    assert not (store / artifacts.VERSIONS).exists()


@envs
def test_the_checkers_bucket_imports_into_an_s3_store(source, s3env, kit_home):
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="mbcc-models")
    for path in sorted(p for p in (source / NEWEST).rglob("*") if p.is_file()):
        s3.upload_file(str(path), "mbcc-models", f"ci/{path.relative_to(source).as_posix()}")
    result = import_mbcc("s3://mbcc-models/ci", "s3://mbcc-models/kit", home=KitHome(kit_home), on_event=lambda m: None)
    assert sorted(c[1:] for c in result["imported"]) == CHECKER_1_9
    remote = stores.open_store("s3://mbcc-models/kit")
    refs = [r for r in remote.refs() if r.version is None]
    assert len(refs) == len(MBCC_MODELS) * len(APIS)
    saved = [r for r in refs if remote.manifest(r)["status"] == "saved"]
    assert len(saved) == 4 and all(remote.problems(r) == [] for r in saved)
    assert any("resnet_gluon_api" in path for path, _ in result["skipped"])


def test_version_folders_are_the_kits_releases():
    assert release_for("1.7.0") == "1.7.0.post2" and release_for("1.0.0") == "1.0.0.post4"
    assert release_for("1.9.1") == "1.9.1" and release_for("2.0.0") == "2.0.0a0"
    assert release_for("2.0.0beta1") == "2.0.0b1"
    assert release_for("1.2.0") is None and release_for("0.12.1") is None


def test_the_layout_rules_without_mxnet():
    files = ["a-data", "a-inference"]
    paths = [f"models/1.9.1/{n}/{n}-{f}" for n in CHECKER_MODELS for f in ("data", "inference")]
    paths += [
        "models/1.9.1/module_checkpoint_api/module_checkpoint_api-symbol.json",
        "models/1.9.1/module_checkpoint_api/module_checkpoint_api-0001.params",
        "models/1.9.1/module_checkpoint_api/module_checkpoint_api-0002.params",
        "models/1.9.1/lenet_gluon_hybrid_export_api/lenet_gluon_hybrid_export_api-symbol.json",
        "models/1.9.1/lenet_gluon_save_params_api/lenet_gluon_save_params_api-params",
        "models/1.9.1/lstm_gluon_save_parameters_api/lstm_gluon_save_parameters_api-params",
        "models/2.0.0/lenet_gluon_save_params_api/lenet_gluon_save_params_api-params",
        "models/1.9.1/deep/er/file",
        "models/1.9.1/.hidden/x",
        "train.log",
    ] + files
    layout = read_layout(paths)
    assert layout.root == "models"
    assert sorted(m.checker.name for m in layout.models["1.9.1"]) == [
        "lenet_gluon_save_params_api",
        "lstm_gluon_save_parameters_api",
        "module_checkpoint_api",
    ]
    mlp = next(m for m in layout.models["1.9.1"] if m.checker.model == "mbcc_mlp")
    assert mlp.files["params"].endswith("-0001.params")  # the epoch the checker saves; the other is reported
    skipped = dict(layout.skipped)
    assert (
        "not a file the checker writes"
        in skipped["models/1.9.1/module_checkpoint_api/module_checkpoint_api-0002.params"]
    )
    assert "no lenet_gluon_hybrid_export_api-0000.params" in skipped["models/1.9.1/lenet_gluon_hybrid_export_api/"]
    assert "MXNet 2 checker" in skipped["models/2.0.0/lenet_gluon_save_params_api/"]
    assert "nested deeper" in skipped["models/1.9.1/deep/er/file"]
    assert "not a plain name" in skipped["models/1.9.1/.hidden/x"]
    assert all("outside models/" in skipped[p] for p in ["train.log"] + files)
    with pytest.raises(UsageError, match="not the layout"):
        read_layout(["1.9.1/mlp/export/manifest.json", "index.json"])


@envs
def test_the_cli_imports_and_a_load_only_run_checks_every_artifact_it_holds(source, kit_home, tmp_path):
    store = tmp_path / "store"
    proc = run_cli("store", "import-mbcc", str(source), "--store", str(store), home=kit_home, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # 1.0.0, its copy as 1.1.0 (less the LeNet whose -inference file was removed), and 1.9.1
    imported = len(CHECKER_1_0) * 2 - 1 + len(CHECKER_1_9)
    assert f"{imported} artifact(s) imported into {store}" in proc.stdout
    assert "resnet_gluon_api" in proc.stdout  # what is not imported is listed
    proc = run_cli(
        "run", "--load", NEWEST, "--store", str(store), "--runs-dir", str(tmp_path / "runs"), "--run-id", "rc",
        home=kit_home, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"reloading what the store holds of 3 release(s): {OLDEST}, {NO_ENV}, {NEWEST}" in proc.stdout
    records = read_records(tmp_path / "runs" / "rc")
    saved = {(k[0], k[1], k[2]) for k, r in records.items() if r["verdict"] != "unsupported" and k[2] != "c_predict"}
    assert len(saved) == imported
    assert {r["verdict"] for k, r in records.items() if k[0] == NEWEST and r["verdict"] != "unsupported"} == {
        "identical"
    }
