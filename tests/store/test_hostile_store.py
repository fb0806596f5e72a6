"""A store someone else wrote, reloaded by a real run: every hostile artifact is a ``corrupt`` cell that quotes
what is wrong, nothing outside the artifacts is read or written, the good artifact beside them still loads."""

from __future__ import annotations

import shutil

import hostile
import pytest
from conftest import NEWEST, read_records, run_cli

pytestmark = pytest.mark.envs


@pytest.fixture(scope="module")
def hostile_run(trained_store, kit_home, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    store, outside, runs = root / "store", root / "outside", root / "runs"
    shutil.copytree(trained_store["_store"] / NEWEST / "lenet" / "export", store / NEWEST / "lenet" / "export")
    expected = hostile.build(store / NEWEST / "lenet" / "export", store, NEWEST, outside)
    before = hostile.snapshot(outside)
    proc = run_cli(
        "run", "--load", NEWEST, "--store", str(store), "--runs-dir", str(runs), "--run-id", "h", home=kit_home
    )
    return {"proc": proc, "records": read_records(runs / "h"), "expected": expected, "outside": outside,
            "before": before, "root": root}  # fmt: skip


def test_every_hostile_artifact_is_corrupt_with_its_name_quoted(hostile_run):
    proc, records = hostile_run["proc"], hostile_run["records"]
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    for model, words in hostile_run["expected"].items():
        rec = records[(NEWEST, model, "export", NEWEST)]
        assert rec["verdict"] == "corrupt", (model, rec["verdict"], rec["reason"])
        assert words in rec["reason"], (model, rec["reason"])
        assert rec.get("load_seconds") is None  # refused before any load
    good = records[(NEWEST, "lenet", "export", NEWEST)]
    assert good["verdict"] == "identical"  # the honest artifact beside them loads as ever


def test_nothing_outside_the_artifacts_was_read_into_a_result_or_written(hostile_run):
    assert hostile.snapshot(hostile_run["outside"]) == hostile_run["before"]
    assert sorted(p.name for p in hostile_run["root"].iterdir()) == ["outside", "runs", "store"]
    assert "Traceback" not in hostile_run["proc"].stderr
