"""Run folders: partial writes of dead writers are swept, a live writer's are kept."""

import os
import subprocess
import sys

from kit.results.runs import Run


def test_sweep_removes_only_the_temporary_files_of_dead_writers(tmp_path):
    run = Run(tmp_path, "r1")
    (run.dir / "records").mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = run.dir / "records" / f"1.9.1__mlp__export__2.0.0b1.json.tmp-{dead.stdout.strip()}"
    live = run.dir / f"run.tmp-{os.getpid()}"
    record = run.dir / "records" / "1.9.1__mlp__export__2.0.0b1.json"
    for path in (stale, live, record):
        path.write_text("{}")
    assert run.sweep_partial_writes() == [stale]
    assert not stale.exists() and live.exists() and record.exists()


def test_latest_links_the_newest_run_and_the_summary_finds_it_from_anywhere(tmp_path, monkeypatch):
    import pytest

    from kit.common.errors import UsageError
    from kit.results import summary

    for run_id in ("r1", "r2"):
        run = Run(tmp_path / "runs", run_id)
        run.dir.mkdir(parents=True)
        (run.dir / "run.json").write_text("{}")
        run.mark_latest()
    assert os.readlink(tmp_path / "runs" / "latest") == "r2"
    assert Run(tmp_path / "runs", "latest").exists()
    monkeypatch.setenv("MXCOMPAT_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path / "runs" / "r1")  # as a notebook opened in notebooks/ would be
    assert summary.find_run("runs/latest").resolve() == (tmp_path / "runs" / "r2").resolve()
    assert summary.find_run("latest").resolve() == (tmp_path / "runs" / "r2").resolve()
    with pytest.raises(ValueError, match="runs/latest appears with the first"):
        summary.find_run("runs/nope")
    (tmp_path / "runs" / "latest").unlink()
    (tmp_path / "runs" / "latest").mkdir()
    with pytest.raises(UsageError, match="is a folder, not the link"):
        run.mark_latest()


def test_reproduce_commands_carry_every_option_that_changes_a_verdict():
    import shlex

    from kit.results.reports import reproduce_command

    request = {
        "save": ["1.0.0.post4", "1.9.1"],
        "load": ["1.9.1", "2.0.0b1"],
        "models": ["lenet"],
        "apis": [],
        "cells": [],
        "tolerance": {"float32": {"rtol": 0.001}, "models": {"lstm": {"atol": 1e-4}}},
        "allow_list": "known issues.yml",
        "epochs": 2,
        "versions": "all",
        "store": "s3://bucket/kit",
        "forward": True,
        "reload_only": False,
    }
    words = shlex.split(reproduce_command(request))
    assert words[:6] == ["mxcompat", "run", "--save", "1.0.0.post4,1.9.1", "--load", "1.9.1,2.0.0b1"]
    assert words[words.index("--tolerance") + 1] == '{"float32":{"rtol":0.001},"models":{"lstm":{"atol":0.0001}}}'
    assert words[words.index("--allow-list") + 1] == "known issues.yml"
    for flag, value in (
        ("--models", "lenet"),
        ("--epochs", "2"),
        ("--versions", "all"),
        ("--store", "s3://bucket/kit"),
    ):
        assert words[words.index(flag) + 1] == value
    assert "--forward" in words and "--apis" not in words
    one = shlex.split(
        reproduce_command(dict(request, reload_only=True), save=["1.9.1"], load=["2.0.0b1"], cells=["lenet:export"])
    )
    assert one[2:8] == ["--save", "1.9.1", "--load", "2.0.0b1", "--cells", "lenet:export"] and "--models" not in one
    assert "--save" not in shlex.split(reproduce_command(dict(request, reload_only=True)))
