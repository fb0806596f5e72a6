"""Layout facts with one home each (the run folder's records, executed notebooks, the default store) and the one
way a run is loaded."""

from __future__ import annotations

import json

import pytest

from kit import store as stores
from kit.common import run_layout
from kit.common.errors import UsageError
from kit.common.record_schema import new_record
from kit.debug import run_files
from kit.execute.steps import inflight_marker
from kit.home import KitHome
from kit.orchestrate.plan import plan
from kit.orchestrate.request import RunRequest
from kit.results import reports, summary
from kit.results.cells import Cell
from kit.results.records import load_finished, load_records, load_run
from kit.results.runs import Run, executed_notebook


def _record(saved, model, api, loaded, verdict):
    rec = new_record(saved, model, api, loaded, f"/store/{saved}/{model}/{api}")
    rec["verdict"] = verdict
    return rec


def test_a_cells_record_lies_in_the_records_folder_under_the_cells_name(tmp_path):
    path = run_layout.record_path(tmp_path, "1.4.1", "lenet", "export", "1.9.1")
    assert path == str(tmp_path / "records" / "1.4.1__lenet__export__1.9.1.json")
    archived = run_layout.record_path(tmp_path, "1.4.1", "lenet", "export", "1.9.1", "m1-p2")
    assert archived == str(tmp_path / "records" / "1.4.1__lenet__export__1.9.1__vm1-p2.json")
    cell = Cell.parse("lenet/export/1.4.1@m1-p2/1.9.1")
    assert str(run_files.record_path(Run(tmp_path, "r"), cell)) == run_layout.record_path(
        tmp_path / "r", "1.4.1", "lenet", "export", "1.9.1", "m1-p2"
    )


def test_the_host_reads_the_kernels_in_flight_marker_where_the_kernel_writes_it(tmp_path):
    step = {"kind": "reload", "release": "onnx-1.9.1", "parameters": {"run_dir": str(tmp_path), "release": "1.9.1"}}
    assert inflight_marker(step) == run_layout.inflight_path(tmp_path, "1.9.1")
    assert inflight_marker(step) == str(tmp_path / "records" / ".inflight-1.9.1.json")
    step["parameters"]["apis"] = ["onnx"]
    assert inflight_marker(step) == str(tmp_path / "records" / ".inflight-1.9.1-onnx.json")


def test_a_steps_executed_notebook_is_where_the_reports_link_it(tmp_path):
    run = Run(tmp_path / "runs", "r1")
    steps = plan(RunRequest(save=["1.4.1"], load=["1.9.1"]), run, tmp_path / "store", home=KitHome(tmp_path / "h"))
    outputs = {s.id: s.output for s in steps}
    assert outputs["train:1.4.1"] == str(run.dir / "train" / "mxnet-1.4.1.ipynb")
    assert outputs["reload:1.9.1"] == str(run.dir / executed_notebook("reload", "1.9.1"))
    assert outputs["summary"] == str(run.dir / "summary.ipynb")
    assert reports.notebook_of(run.dir, {"loaded_with": "1.9.1"}) == outputs["reload:1.9.1"]


def test_the_default_store_is_the_kit_homes(tmp_path):
    home = KitHome(tmp_path / "home")
    assert home.store == tmp_path / "home" / "store"
    assert stores.open_store(None, home=home).root == home.store


@pytest.fixture
def run_dir(tmp_path):
    run_dir = tmp_path / "runs" / "r1"
    records = [
        _record("1.4.1", "mlp", "export", "2.0.0b1", "identical"),
        _record("1.4.1", "lenet", "export", "2.0.0b1", "load-error"),
    ]
    for rec in records:
        path = run_layout.record_path(run_dir, rec["saved_with"], rec["model"], rec["api"], rec["loaded_with"])
        (run_dir / "records").mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            json.dump(rec, f)
    manifest = {
        "run_id": "r1",
        "request": {"save": ["1.4.1"], "load": ["2.0.0b1"], "allow_list": None, "strict_runtimes": False},
        "order": ["reload:2.0.0b1"],
        "steps": {"reload:2.0.0b1": {"status": "ok"}},
    }
    (run_dir / "run.json").write_text(json.dumps(manifest))
    return run_dir


def test_a_run_is_loaded_one_way_by_the_reports_the_summary_and_the_commands(run_dir):
    loaded = load_run(run_dir)
    assert [r["model"] for r in loaded.records] == ["lenet", "mlp"]
    assert [r["model"] for r in loaded.split["failures"]] == ["lenet"]
    assert loaded.records == load_records(run_dir) and loaded.manifest["run_id"] == "r1"
    data = summary.RunData(run_dir)
    assert (data.manifest, data.records, data.split) == tuple(loaded)
    with pytest.raises(UsageError, match="run r1 has not finished"):
        load_finished(Run(run_dir.parent, "r1"))
    manifest = dict(loaded.manifest, exit_code=1)
    (run_dir / "run.json").write_text(json.dumps(manifest))
    assert load_finished(Run(run_dir.parent, "r1")) == (manifest, loaded.records, loaded.split)


def test_a_run_held_in_memory_is_split_by_its_own_request(run_dir):
    manifest = json.loads((run_dir / "run.json").read_text())
    allow = run_dir.parent / "allow.yaml"
    allow.write_text('- {cell: "lenet/export/1.4.1/2.0.0b1", reason: known, expires: "2099-01-01"}\n')
    manifest["request"]["allow_list"] = str(allow)
    split = load_run(run_dir, manifest).split
    assert split["failures"] == [] and [r["model"] for r, _ in split["allowed"]] == ["lenet"]
    (run_dir / "run.json").write_text("[]")
    with pytest.raises(UsageError, match="run r1's run.json is not a JSON object"):
        load_run(run_dir)
