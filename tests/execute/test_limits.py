"""Bounds on real runs: a cell that hangs is recorded as timed out and the step goes on; a step that runs past its
time is broken with that cause and the run still ends with its reports; ``--resume`` plans again from what the
user asked and never follows the paths a copied or edited ``run.json`` spells."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from conftest import NEWEST, OLDEST, read_records, run_cli

pytestmark = pytest.mark.envs

CELLS = "lenet:export,mlp:export"
HANG = {"MXCOMPAT_FAULT": "hang:lenet/export:infer"}


def _run(trained_store, kit_home, runs, run_id, *more, env=None):
    return run_cli(
        "run", "--load", NEWEST, "--store", str(trained_store["_store"]), "--cells", CELLS, "--runs-dir", str(runs),
        "--run-id", run_id, *more, home=kit_home, env=env, timeout=600,
    )  # fmt: skip


def _env(extra):
    import os

    return dict(os.environ, **extra)


def test_a_hanging_cell_times_out_alone_and_the_step_goes_on(trained_store, kit_home, tmp_path):
    proc = _run(trained_store, kit_home, tmp_path, "cells", "--cell-timeout", "8", env=_env(HANG))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = read_records(tmp_path / "cells")
    for saved in (OLDEST, NEWEST):
        hung = records[(saved, "lenet", "export", NEWEST)]
        assert hung["verdict"] == "infer-error" and hung["error_type"] == "CellTimeout"
        assert hung["reason"].startswith("timed out: no result within 8s while inferring this artifact")
        assert hung["timed_out"] == 8
        assert records[(saved, "mlp", "export", NEWEST)]["verdict"] in ("identical", "close")
    manifest = json.loads((tmp_path / "cells" / "run.json").read_text())
    step = manifest["steps"][f"reload:{NEWEST}"]
    assert step["status"] == "ok" and step["deaths"] == 2  # one kernel stopped per hung cell, the step went on
    assert "BROKEN" not in proc.stdout


def test_a_step_past_its_time_is_broken_with_that_cause_and_the_run_reports(trained_store, kit_home, tmp_path):
    hang_later = {"MXCOMPAT_FAULT": "hang:mlp/export:infer"}  # lenet's cells come first and finish
    proc = _run(trained_store, kit_home, tmp_path, "step", "--step-timeout", "20", env=_env(hang_later))
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]
    cause = "the step ran past its time limit of 20s and its kernel was stopped (--step-timeout)"
    assert f"BROKEN step reload:{NEWEST}: {cause}" in proc.stdout
    manifest = json.loads((tmp_path / "step" / "run.json").read_text())
    step = manifest["steps"][f"reload:{NEWEST}"]
    assert (step["status"], step["error_type"], step["cause"]) == ("failed", "StepTimeout", cause)
    assert manifest["steps"]["summary"]["status"] == "ok" and (tmp_path / "step" / "summary.html").is_file()
    assert manifest["request"]["limits"]["step_timeout"] == 20
    assert read_records(tmp_path / "step")[(OLDEST, "lenet", "export", NEWEST)]["verdict"] in ("identical", "close")


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_resume_plans_again_and_never_follows_the_paths_run_json_spells(trained_store, kit_home, tmp_path):
    first = tmp_path / "first"
    proc = _run(trained_store, kit_home, first, "r")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    original = first / "r" / "reload" / f"mxnet-{NEWEST}.ipynb"
    before = _sha(original)
    moved = tmp_path / "moved"
    shutil.copytree(first, moved, symlinks=True)
    run_json = moved / "r" / "run.json"
    manifest = json.loads(run_json.read_text())
    evil = tmp_path / "evil"
    step = manifest["steps"][f"reload:{NEWEST}"]
    step.update(status="failed", output=str(evil / "out.ipynb"), notebook=str(evil / "nb.ipynb"), kernel="python3")
    step["parameters"]["run_dir"] = str(first / "r")  # the folder it was copied from
    manifest["steps"]["summary"]["status"] = "pending"
    run_json.write_text(json.dumps(manifest))
    shutil.rmtree(moved / "r" / "records")
    proc = run_cli("run", "--resume", "r", "--runs-dir", str(moved), home=kit_home, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "resuming run r: 0 of 2 steps already finished" in proc.stdout  # reload-only: no train step
    assert not evil.exists()
    assert _sha(original) == before  # the folder it was copied from is untouched
    again = json.loads(run_json.read_text())["steps"][f"reload:{NEWEST}"]
    assert again["output"] == str(moved / "r" / "reload" / f"mxnet-{NEWEST}.ipynb")
    assert again["kernel"] == f"mxnet-{NEWEST}" and again["parameters"]["run_dir"] == str(moved / "r")
    assert len(read_records(moved / "r")) == 4
