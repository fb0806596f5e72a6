"""MXNet 2.0 in the matrix: 1.x artifacts loaded in a real 2.0.0b1 environment, 2.0's own artifacts, both ways."""

from __future__ import annotations

import json
import os
import re
import subprocess

import nbformat
import pytest
import scales
from conftest import NEWEST, OLDEST, kernel_unit_tests, matrix_run, read_records, run_cli
from helpers import REPO

pytestmark = pytest.mark.envs

GLUON2 = "2.0.0b1"
MODELS = ["mlp", "lenet", "lstm", "symbolic", "e2e"]
NP_SHAPE_ERROR = "ndarray was not saved in np shape semantics, but being loaded in np shape semantics"


@pytest.fixture(scope="module")
def migration_run(built_envs, kit_home, tmp_path_factory):
    """1.0.0.post4, 1.9.1 and 2.0.0b1 train; 1.9.1 and 2.0.0b1 reload everything, forward cells too."""
    return matrix_run(
        kit_home,
        tmp_path_factory,
        "m2",
        save=f"{OLDEST},{NEWEST},{GLUON2}",
        load=f"{NEWEST},{GLUON2}",
        models=",".join(MODELS),
        more=("--forward", "--jobs", "2"),
        create=(GLUON2,),
        timeout=1800,
    )


def _rec(run, saved, model, api, loaded=GLUON2):
    return run["records"][(saved, model, api, loaded)]


def test_the_run_finishes_and_names_the_lstm_as_the_only_regression(migration_run):
    proc = migration_run["proc"]
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    failing = {
        (s, m, a)
        for (s, m, a, _), r in migration_run["records"].items()
        if r["direction"] == "backward" and r["verdict"] not in ("identical", "close", "unsupported")
    }
    assert failing == {
        (NEWEST, "lstm", "export"),
        (NEWEST, "lstm", "module_checkpoint"),
        (NEWEST, "lstm", "save_parameters"),
    }


def test_a_1x_export_is_close_in_2_0_through_symbolblock_imports(migration_run):
    for saved in (OLDEST, NEWEST):
        for model in ("mlp", "lenet"):
            rec = _rec(migration_run, saved, model, "export")
            assert rec["verdict"] in ("identical", "close"), (saved, model, rec["reason"])
            assert rec["load_path"] == "SymbolBlock.imports" and rec["load_attempts"] == []
            # the held-out batch (the large case scales inputs x1000) moved by float noise only: 1e-5 of the
            # outputs' size (about 80 float32 ulps at the largest), wherever training put the logits
            moved = scales.relative_errors(rec, cases=("batch",))
            assert max(moved.values()) <= 1e-5, (saved, model, moved)
    rec = _rec(migration_run, NEWEST, "e2e", "export")  # transforms fused into the graph survive the move
    assert rec["verdict"] in ("identical", "close"), rec["reason"]


def test_a_module_checkpoint_loads_through_the_migration_path_and_the_naive_error_is_kept(migration_run):
    for saved in (OLDEST, NEWEST):
        for model in ("mlp", "symbolic"):
            rec = _rec(migration_run, saved, model, "module_checkpoint")
            assert rec["verdict"] in ("identical", "close"), (saved, model, rec["reason"])
            assert rec["load_path"] == "SymbolBlock.imports"
            [naive] = rec["load_attempts"]
            assert naive["path"] == "mx.model.load_checkpoint" and NP_SHAPE_ERROR in naive["error"]


def test_module_api_and_save_params_cells_are_unsupported_with_their_reason(migration_run):
    own = _rec(migration_run, GLUON2, "mlp", "module_checkpoint")  # 2.0 itself cannot write one
    assert own["verdict"] == "unsupported"
    assert own["reason"] == "saving release: the Module API (mx.mod) was removed in MXNet 2.0"
    legacy = _rec(migration_run, NEWEST, "lenet", "save_params")  # 1.9.1 wrote it; 2.0 has no load_params
    assert legacy["verdict"] == "unsupported" and legacy["load_path"] is None
    assert legacy["reason"].startswith("loading release: Block.save_params/load_params were removed in MXNet 2.0")
    assert "workaround" in legacy["reason"]


def test_save_parameters_load_into_the_gluon2_port(migration_run):
    for model in ("mlp", "lenet", "e2e"):
        rec = _rec(migration_run, NEWEST, model, "save_parameters")
        assert rec["verdict"] in ("identical", "close"), (model, rec["reason"])
        assert rec["load_path"] == "Gluon 2.0 port + load_parameters"
    # 1.0 had no save_parameters: nothing to migrate, said as the saving release's gap
    rec = _rec(migration_run, OLDEST, "mlp", "save_parameters")
    assert rec["verdict"] == "unsupported" and "1.2" in rec["reason"]


def test_the_lstm_fails_naively_and_a_verified_remedy_makes_it_identical(migration_run):
    fused = _rec(migration_run, NEWEST, "lstm", "save_parameters")
    assert fused["verdict"] == "load-error"  # the cell's own verdict stays: remedies inform
    assert "rnn_param" in fused["error"]  # 2.0's LSTM keeps one flat parameter; 1.x saved one per gate
    remedy = fused["remedy"]
    assert remedy["fixed"] and remedy["name"] == "rnn_flat_params" and remedy["verdict"] == "identical"
    assert remedy["summary"]["max_abs"] == 0.0
    assert remedy["changed"] == ["4 per-gate arrays -> lstm.rnn_param [4032]"]
    assert "lstm.rnn_param" in remedy["user_code"]
    for api in ("export", "module_checkpoint"):
        graph = _rec(migration_run, NEWEST, "lstm", api)
        assert graph["verdict"] == "infer-error" and "Shape inconsistent" in graph["error"]
        remedy = graph["remedy"]
        assert (remedy["name"], remedy["verdict"], remedy["summary"]["max_abs"]) == (
            "legacy_shape_semantics",
            "identical",
            0.0,
        ), remedy
        assert remedy["alternatives"] == ["np_shape_unknown_dims"]  # the graph edit that makes it native
        assert "mx.npx.reset_np()" in remedy["user_code"]


def test_a_save_params_file_is_unsupported_in_2_0_and_its_names_map_by_structure(migration_run):
    for saved in (OLDEST, NEWEST):
        for model in ("mlp", "lenet", "lstm"):
            rec = _rec(migration_run, saved, model, "save_params")
            assert rec["verdict"] == "unsupported", (saved, model)
            remedy = rec["remedy"]
            assert remedy["name"] == "save_params_name_map", (saved, model, remedy)
            assert remedy["verdict"] in ("identical", "close"), (saved, model, remedy)
    lstm = _rec(migration_run, NEWEST, "lstm", "save_params")["remedy"]
    assert "lstm0_rnn_param -> lstm.rnn_param" in lstm["changed"][0]


def test_forward_2_0_files_are_re_saved_for_1_x_and_numpy_operators_have_no_remedy(migration_run):
    forward = _rec(migration_run, GLUON2, "mlp", "export", NEWEST)
    assert forward["verdict"] == "load-error" and forward["remedy"]["name"] == "legacy_params_format"
    assert forward["remedy"]["verdict"] == "identical"
    lenet = _rec(migration_run, GLUON2, "lenet", "export", NEWEST)["remedy"]  # 2.0 writes output_size too
    assert lenet["name"] == "drop_default_attributes+legacy_params_format" and lenet["verdict"] == "identical"
    lstm = _rec(migration_run, GLUON2, "lstm", "save_parameters", NEWEST)["remedy"]
    assert lstm["name"] == "legacy_params_format+rnn_per_gate_params" and lstm["verdict"] == "identical"


def test_the_summary_counts_both_lstm_incompatibilities_as_remedied_and_the_exit_code_stays(migration_run):
    assert migration_run["proc"].returncode == 1
    md = (migration_run["dir"] / "summary.md").read_text()
    assert "2 distinct backward incompatibilities (" in md and "; 2 with a verified remedy, 0 without)" in md
    assert "**fixed by rnn_flat_params: identical in " in md
    assert "## Verified remedies" in md and "mx.npx.reset_np()" in md
    out = migration_run["proc"].stdout
    assert re.search(r"FAIL \[S-5f6ec12d\] backward: .*fixed by rnn_flat_params: identical in \d+", out)


def test_convert_writes_a_native_2_0_artifact_and_proves_it(migration_run, kit_home):
    for api, remedy in (("save_parameters", "rnn_flat_params"), ("export", "np_shape_unknown_dims")):
        cell = f"lstm/{api}/{NEWEST}/{GLUON2}"
        proc = run_cli("convert", "m2", "--cell", cell, "--runs-dir", str(migration_run["runs"]), home=kit_home)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert f"with {remedy}:" in proc.stdout and "reloaded natively in 2.0.0b1" in proc.stdout
        assert "Loading symbol saved by previous version" not in proc.stdout + proc.stderr
        folder = migration_run["dir"] / "converted" / f"{NEWEST}__lstm__{api}__{GLUON2}"
        rec = json.loads((folder / "record.json").read_text())
        assert rec["verdict"] == "identical" and rec["native"] and rec["remedy"] is None
        assert rec["converted"]["remedy"] == remedy
    refused = run_cli(
        "convert",
        "m2",
        "--cell",
        f"lstm/export/{NEWEST}/{GLUON2}",
        "--remedy",
        "legacy_shape_semantics",
        "--runs-dir",
        str(migration_run["runs"]),
        home=kit_home,
    )
    assert refused.returncode == 2 and "not the files" in refused.stderr and "reset_np" in refused.stderr


def test_convert_out_writes_beside_what_is_there_and_never_over_a_users_folder(migration_run, kit_home, tmp_path):
    """``--out DIR`` takes DIR/<cell>/ for each cell: a user's file in DIR stays, two cells sit side by side, a
    conversion is replaced by the next of its cell, and a folder of the user's is refused with nothing removed.
    The artifact comes from the run's store, not from the path its record spells."""
    out = tmp_path / "converted"
    out.mkdir()
    (out / "keep.txt").write_text("the user's")
    record = migration_run["dir"] / "records" / f"{NEWEST}__lstm__save_parameters__{GLUON2}.json"
    original = record.read_text()
    rec = json.loads(original)
    rec["artifact"] = str(tmp_path / "elsewhere")  # a record edited by hand must not choose what is read
    record.write_text(json.dumps(rec))
    runs = str(migration_run["runs"])
    try:
        for api in ("save_parameters", "export", "save_parameters"):
            cell = f"lstm/{api}/{NEWEST}/{GLUON2}"
            proc = run_cli("convert", "m2", "--cell", cell, "--out", str(out), "--runs-dir", runs, home=kit_home)
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    finally:
        record.write_text(original)
    assert (out / "keep.txt").read_text() == "the user's"
    converted = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert converted == [f"{NEWEST}__lstm__export__{GLUON2}", f"{NEWEST}__lstm__save_parameters__{GLUON2}"]
    assert not any(p.name.startswith(".") for p in out.iterdir())  # no staging folder left behind
    for name in converted:
        assert json.loads((out / name / "record.json").read_text())["verdict"] == "identical"
    users = tmp_path / "mine"
    (users / f"{NEWEST}__lstm__export__{GLUON2}").mkdir(parents=True)
    (users / f"{NEWEST}__lstm__export__{GLUON2}" / "notes.txt").write_text("mine")
    cell = f"lstm/export/{NEWEST}/{GLUON2}"
    refused = run_cli("convert", "m2", "--cell", cell, "--out", str(users), "--runs-dir", runs, home=kit_home)
    assert refused.returncode == 2 and "holds files convert did not write" in refused.stderr
    assert [p.name for p in (users / f"{NEWEST}__lstm__export__{GLUON2}").iterdir()] == ["notes.txt"]


def test_2_0_artifacts_reload_identical_in_2_0_and_fail_visibly_in_1x(migration_run):
    for model in MODELS:
        for api in ("export", "save_parameters"):
            rec = _rec(migration_run, GLUON2, model, api)
            assert rec["verdict"] == "identical", (model, api, rec["reason"])
            assert rec["remedy"] is None  # nothing failed: nothing tried
    forward = _rec(migration_run, GLUON2, "mlp", "export", NEWEST)
    assert forward["direction"] == "forward" and forward["verdict"] == "load-error"
    assert "Invalid NDArray file format" in forward["error"]


def test_summary_has_the_migration_table(migration_run):
    md = (migration_run["dir"] / "summary.md").read_text()
    assert "## Migrating to MXNet 2.0" in md
    assert re.search(r"\| module_checkpoint \| 1\.0\.0\.post4 \| (close|identical) \d+ via SymbolBlock\.imports \|", md)
    assert re.search(
        r"\| module_checkpoint \| 1\.9\.1 \| infer-error 1 \(lstm\), [a-z0-9 ,]+ via SymbolBlock\.imports; "
        r"remedied: lstm by legacy_shape_semantics \(identical 1\) \|",
        md,
    )
    assert re.search(
        r"\| save_parameters \| 1\.9\.1 \| load-error 1 \(lstm\), [a-z0-9 ,]+ via Gluon 2\.0 port \+ "
        r"load_parameters; remedied: lstm by rnn_flat_params \(identical 1\) \|",
        md,
    )
    # mlp, lenet, lstm and e2e: the symbolic model never had save_params
    assert re.search(
        r"\| save_params \| 1\.9\.1 \| unsupported 4: Block\.save_params/load_params were removed.*; "
        r"remedied: e2e, lenet, lstm, mlp by save_params_name_map \(",
        md,
    )
    nb = nbformat.read(migration_run["dir"] / "summary.ipynb", as_version=4)
    shown = "".join(
        o.get("data", {}).get("text/html", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert f"in {GLUON2}" in shown and "mx.model.load_checkpoint: MXNetError" in shown


def test_kernel_side_unit_tests_pass_inside_2_0(migration_run, kit_home):
    proc, result = kernel_unit_tests(kit_home, GLUON2)
    assert proc.returncode == 0, result["failed"]
    assert "test_mx_adapters.py::test_every_model_builds_and_runs_in_this_release" in result["passed"]


def test_check_model_takes_a_1x_checkpoint_into_2_0(migration_run, kit_home, tmp_path):
    source = migration_run["store"] / NEWEST / "lenet" / "module_checkpoint"
    for suffix in ("-symbol.json", "-0000.params"):
        (tmp_path / f"mine{suffix}").write_bytes((source / f"model{suffix}").read_bytes())
    proc = run_cli(
        "check-model",
        str(tmp_path / "mine"),
        "--name",
        "mine",
        "--epoch",
        "0",
        "--input",
        "data:1,1,28,28",
        "--saved-with",
        NEWEST,
        "--load",
        GLUON2,
        "--run-id",
        "cm2",
        "--runs-dir",
        str(migration_run["runs"]),
        home=kit_home,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rec = read_records(migration_run["runs"] / "cm2")[(NEWEST, "mine", "checkpoint", GLUON2)]
    assert rec["verdict"] == "identical" and rec["load_path"] == "SymbolBlock + load_dict"


def test_investigate_pairs_a_1x_graph_with_its_gluon2_port(migration_run, kit_home):
    proc = run_cli(
        "investigate",
        "m2",
        "--cell",
        f"lenet/save_parameters/{NEWEST}/{GLUON2}",
        "--runs-dir",
        str(migration_run["runs"]),
        home=kit_home,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "no node past tolerance" in proc.stdout
    assert "nodes matched by position" in proc.stdout  # lenet_conv0_fwd ... against the port's node_0 ...
    assert "0 parameter(s) not loaded as saved" in proc.stdout  # lenet_conv0_weight is 0.weight, same values


def test_check_model_of_a_third_party_lstm_into_2_0_is_remedied_and_converts(migration_run, kit_home, tmp_path):
    source = migration_run["store"] / NEWEST / "lstm" / "module_checkpoint"
    for suffix in ("-symbol.json", "-0000.params"):
        (tmp_path / f"seq{suffix}").write_bytes((source / f"model{suffix}").read_bytes())
    runs = str(migration_run["runs"])
    common = ("--runs-dir", runs)
    proc = run_cli(
        "check-model",
        str(tmp_path / "seq"),
        "--name",
        "seq",
        "--epoch",
        "0",
        "--input",
        "data:4,16",
        "--saved-with",
        NEWEST,
        "--load",
        GLUON2,
        "--run-id",
        "cm-lstm",
        *common,
        home=kit_home,
        timeout=900,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]  # it fails as it is: said so
    rec = read_records(migration_run["runs"] / "cm-lstm")[(NEWEST, "seq", "checkpoint", GLUON2)]
    assert rec["verdict"] == "infer-error" and "Shape inconsistent" in rec["error"]
    assert rec["remedy"]["name"] == "legacy_shape_semantics" and rec["remedy"]["verdict"] == "identical"
    assert "fixed by legacy_shape_semantics" in proc.stdout
    done = run_cli("convert", "cm-lstm", "--cell", f"seq/checkpoint/{NEWEST}/{GLUON2}", *common, home=kit_home)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    folder = migration_run["runs"] / "cm-lstm" / "converted" / f"{NEWEST}__seq__checkpoint__{GLUON2}"
    native = json.loads((folder / "record.json").read_text())
    assert native["verdict"] == "identical" and native["remedy"] is None
    assert (folder / "model-symbol.json").read_text().count("(1, -1, 24)") == 2  # the two begin states


def test_report_issue_and_json_carry_the_remedies(migration_run, kit_home):
    runs = str(migration_run["runs"])
    issue = run_cli("report", "m2", "--issue", "--runs-dir", runs, home=kit_home)
    assert issue.returncode == 0, issue.stderr[-2000:]
    assert "#### Verified remedies" in issue.stdout and "fixed by rnn_flat_params: identical in " in issue.stdout
    assert "  - remedy: legacy_shape_semantics: identical" in issue.stdout
    payload = json.loads(run_cli("report", "m2", "--json", "--runs-dir", runs, home=kit_home).stdout)
    rnn = next(
        s for s in payload["signatures"] if s["signature"] == "Parameter 'lstm.rnn_param' is missing in the file"
    )
    assert rnn["remedy"]["status"] == "verified" and rnn["remedy"]["by"][0]["name"] == "rnn_flat_params"


@pytest.mark.parametrize(
    "model, api",
    [("lstm", "export"), ("lstm", "module_checkpoint"), ("lstm", "save_parameters"), ("lenet", "save_params")],
)
def test_the_remedy_code_a_reader_copies_runs_and_gives_the_reference(migration_run, kit_home, model, api):
    record = migration_run["dir"] / "records" / f"{NEWEST}__{model}__{api}__{GLUON2}.json"
    python = kit_home / "envs" / GLUON2 / "bin" / "python"
    artifact = migration_run["store"] / NEWEST / model / api
    proc = subprocess.run(
        [str(python), str(REPO / "tests" / "remedy_code_runner.py"), str(artifact), str(record)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    # the reference, to float noise: 1e-5 of the held-out outputs' largest magnitude (their size is training's)
    assert scales.relative(found["max_abs"], found["scale"]) <= 1e-5, found


def test_a_kernel_that_dies_trying_remedies_keeps_the_cells_own_verdict(migration_run, kit_home):
    runs = migration_run["runs"]
    proc = run_cli(
        "run",
        "--save",
        NEWEST,
        "--load",
        GLUON2,
        "--models",
        "lstm,mlp",
        "--apis",
        "export",
        "--store",
        str(migration_run["store"]),
        "--runs-dir",
        str(runs),
        "--run-id",
        "dies-in-remedy",
        home=kit_home,
        env=dict(os.environ, MXCOMPAT_FAULT="kill:lstm/export:remedy"),
        timeout=900,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = read_records(runs / "dies-in-remedy")
    lstm = records[(NEWEST, "lstm", "export", GLUON2)]
    assert lstm["verdict"] == "infer-error" and "Shape inconsistent" in lstm["error"]  # measured before it died
    assert lstm["remedy"]["kernel_died"] and "kernel died while trying remedies" in lstm["remedy"]["why_none"]
    assert records[(NEWEST, "mlp", "export", GLUON2)]["verdict"] in ("identical", "close")
