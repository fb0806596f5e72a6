"""Incompatibility signatures (kit.results.signatures), their reports and `mxcompat compare`, from built records."""

from __future__ import annotations

import csv
import json

import pytest
from conftest import run_cli

from kit.common import artifacts
from kit.common.record_schema import new_record
from kit.results import reports
from kit.results.compare import compare_groups, lines
from kit.results.signatures import group_records, normalize, signature, signature_id

# verbatim reasons of the demo run (1.0.0.post4 ... 2.0.0b1), one per fact, in the forms each load path words them
LAYOUT_EXPORT = "MXNetError: Cannot find argument 'layout', Possible Arguments:"
LAYOUT_C_PREDICT = (
    "case 'batch': CPredictError: MXPredCreate failed (MXNet 1.2.1): Cannot find argument 'layout', Possible Arguments:"
)
RESIZE_19 = (
    "MXNetError: Failed loading Op e2e_hybridsequential0_resize0_resize0 of type _image_resize: [08:07:39] "
    "src/core/op.cc:55: Check failed: op != nullptr: Operator _image_resize is not registered"
)
RESIZE_10 = (
    "MXNetError: Failed loading Op node_2936 of type _image_resize: [08:07:34] src/core/op.cc:55: "
    "Check failed: op != nullptr Operator _image_resize is not registered"
)
NDARRAY_OLD = (
    "MXNetError: [08:07:35] src/ndarray/ndarray.cc:1812: Check failed: header == kMXAPINDArrayListMagic "
    "Invalid NDArray file format"
)
NDARRAY_NEW = "MXNetError: MXNetError: Check failed: header == kMXAPINDArrayListMagic: Invalid NDArray file format"
RNN_PARAM = (
    "AssertionError: Parameter 'lstm.rnn_param' is missing in 'file: /work/main/.kit/store/1.9.1/lstm/"
    "save_parameters/model.params', which contains parameters: 'embedding.weight'. Set allow_missing=True"
)
SHAPE = (
    "case 'batch': MXNetError: MXNetError: Error in operator lstm_lstm0_rnn0: Shape inconsistent, "
    "Provided = [1,0,24], inferred shape=(1,8,24)"
)


@pytest.mark.parametrize(
    "messages, expected",
    [
        ((LAYOUT_EXPORT, LAYOUT_C_PREDICT), "Cannot find argument 'layout'"),
        ((RESIZE_19, RESIZE_10), "Operator _image_resize is not registered"),
        ((NDARRAY_OLD, NDARRAY_NEW), "Invalid NDArray file format"),
        ((RNN_PARAM,), "Parameter 'lstm.rnn_param' is missing in the file"),
        ((SHAPE, SHAPE.replace("lstm_lstm0_rnn0", "rnn_rnn1_rnn0")), None),
        (
            ("sha256 mismatch or missing: model.params (nothing was loaded)",),
            "sha256 mismatch or missing: model.params",
        ),
    ],
)
def test_one_fact_worded_by_different_releases_and_load_paths_is_one_signature(messages, expected):
    normalized = {normalize(m) for m in messages}
    assert len(normalized) == 1, normalized
    if expected:
        assert normalized == {expected}


def test_what_varies_goes_and_what_names_the_incompatibility_stays():
    text = normalize(SHAPE)
    assert text == "Error in operator <node>: Shape inconsistent, Provided = [1,0,24], inferred shape=(1,8,24)"
    generic = normalize(
        "ValueError: [12:01:02] src/io/x.cc:7: cannot open /tmp/abc/model-0000.params at 0x7f00dead, node_12 failed"
    )
    assert generic == "cannot open <path> at <address>, <node> failed"
    assert normalize("") == "no error message"
    assert normalize("shapes (4, 3) and 5/7 of the outputs") == "shapes (4, 3) and 5/7 of the outputs"
    assert normalize("Cannot find argument 'layout'") != normalize("Cannot find argument 'sparse_grad'")
    assert normalize("Operator _npi_add is not registered") != normalize("Operator _npi_mean is not registered")


def rec(model, api, saved, loaded, verdict, reason=None, max_abs=None, code_change=None):
    r = new_record(saved, model, api, loaded, f"/store/{saved}/{model}/{api}")
    r.update(verdict=verdict, reason=reason, model_code_change=code_change)
    if max_abs is not None:
        r["summary"] = {"max_abs": max_abs}
    return r


def test_numeric_regressions_group_by_model_and_say_where_the_error_first_jumps():
    records = [
        rec("mobilenet_v2", "save_parameters", "1.2.1", "1.2.1", "identical", max_abs=0.0),
        rec("mobilenet_v2", "save_parameters", "1.2.1", "1.3.1", "mismatch", "top-1 changed", 5.1, {"diff": []}),
        rec("mobilenet_v2", "save_params", "1.2.1", "1.9.1", "mismatch", "top-1 changed", 4.0, {"diff": []}),
        rec("mlp", "export", "1.4.1", "1.5.1", "close", max_abs=1e-7),
        rec("mlp", "export", "1.4.1", "1.7.0.post2", "drift", "past tolerance", 8e-5),
        rec("mlp", "export", "1.5.1", "1.9.1", "drift", "past tolerance", 9e-5),
        rec("mlp", "export", "1.9.1", "1.9.1", "close", max_abs=1e-9),  # the same release: not identical
    ]
    groups = {(g.direction, g.signature): g for g in group_records(records)}
    assert set(groups) == {
        ("backward", "model code changed: mobilenet_v2 rebuilt as another architecture"),
        ("backward", "outputs of mlp moved past tolerance"),
        ("same", "outputs of mlp moved past tolerance"),
    }
    code = groups[("backward", "model code changed: mobilenet_v2 rebuilt as another architecture")]
    assert code.cells == ["mobilenet_v2/save_parameters/1.2.1/1.3.1", "mobilenet_v2/save_params/1.2.1/1.9.1"]
    assert code.first_jump == {
        "saved_with": "1.2.1",
        "loaded_with": "1.3.1",
        "api": "save_parameters",
        "max_abs": 5.1,
        "before_loaded_with": "1.2.1",
        "before_max_abs": 0.0,
    }
    drift = groups[("backward", "outputs of mlp moved past tolerance")]
    assert drift.verdicts == {"drift": 2} and drift.first_saved == "1.4.1"
    assert reports.starts(drift) == "1.4.1 -> 1.7.0.post2 (export): max abs 8e-05, 1e-07 in 1.5.1"
    same = groups[("same", "outputs of mlp moved past tolerance")]
    assert same.id == drift.id  # one fact, one id, whichever direction shows it


DEMO_LIKE = [
    rec("lstm", "save_parameters", "1.4.1", "2.0.0b1", "load-error", RNN_PARAM),
    rec("lstm", "save_parameters", "1.9.1", "2.0.0b1", "load-error", RNN_PARAM.replace("1.9.1", "1.4.1")),
    rec("lenet", "export", "1.5.1", "1.4.1", "load-error", LAYOUT_EXPORT),
    rec("resnet_bn", "module_checkpoint", "1.9.1", "1.0.0.post4", "load-error", LAYOUT_EXPORT),
    rec("lenet", "c_predict", "1.9.1", "1.2.1", "infer-error", LAYOUT_C_PREDICT),
    rec("e2e", "export", "2.0.0b1", "1.0.0.post4", "load-error", RESIZE_10),
    rec("e2e", "export", "1.5.1", "1.4.1", "load-error", RESIZE_19),
    rec("mlp", "export", "1.4.1", "1.9.1", "close", max_abs=1e-6),
    rec("mlp", "save_params", "1.0.0.post4", "2.0.0b1", "unsupported", "removed in 2.0"),
]


def test_groups_name_their_cells_models_apis_and_first_saving_release():
    failing = {"lstm/save_parameters/1.4.1/2.0.0b1"}
    allowed = {"lstm/save_parameters/1.9.1/2.0.0b1"}
    groups = group_records(DEMO_LIKE, failing, allowed)
    assert [(g.direction, g.signature, len(g.cells)) for g in groups] == [
        ("backward", "Parameter 'lstm.rnn_param' is missing in the file", 2),
        ("forward", "Cannot find argument 'layout'", 3),
        ("forward", "Operator _image_resize is not registered", 2),
    ]
    rnn, layout, resize = groups
    assert (rnn.failing, rnn.allowed) == (1, 1)
    assert layout.cells == [  # in release order: saved with, then loaded with
        "lenet/export/1.5.1/1.4.1",
        "resnet_bn/module_checkpoint/1.9.1/1.0.0.post4",
        "lenet/c_predict/1.9.1/1.2.1",
    ]
    assert layout.models == ["lenet", "resnet_bn"] and layout.apis == ["c_predict", "export", "module_checkpoint"]
    assert layout.saved_with == ["1.5.1", "1.9.1"] and layout.first_saved == "1.5.1"
    assert layout.loaded_with == ["1.0.0.post4", "1.2.1", "1.4.1"]
    assert layout.example == LAYOUT_EXPORT  # verbatim, from the Python API rather than the C wrapper
    assert layout.verdicts == {"infer-error": 1, "load-error": 2} and layout.failing == 0
    assert resize.first_saved == "1.5.1" and resize.saved_with == ["1.5.1", "2.0.0b1"]
    assert signature(DEMO_LIKE[-1]) is None and signature(DEMO_LIKE[-2]) is None  # unsupported, close backward
    assert layout.id == signature_id("error", "Cannot find argument 'layout'") == "S-103e0d08"  # stable across runs


def test_the_headline_counts_distinct_incompatibilities_and_names_where_each_starts():
    lines_ = reports.headline_lines(group_records(DEMO_LIKE), 1, [{"kind": "load", "name": "1.0.0", "reason": "x"}])
    text = "\n".join(lines_)
    assert lines_[0] == (
        "**Exit code 1 (regressions found)**: 1 distinct backward incompatibility (2 cells; 0 with a verified "
        "remedy, 1 without); 2 distinct forward incompatibilities (5 cells; 0 with a verified remedy, 2 without)."
    )
    assert "**Asked for, not checked: 1**" in text
    assert "- `Cannot find argument 'layout'`: saved with 1.5.1; 3 cells (lenet, resnet_bn; " in text
    assert "- `Operator _image_resize is not registered`: saved with 1.5.1; 2 cells (e2e; export)" in text
    assert text.index("Backward") < text.index("Forward")
    assert reports.headline_lines([], 0)[0] == "**Exit code 0 (compatible)**: no incompatibility found."


def test_compare_reports_what_appeared_disappeared_and_changed():
    before = group_records(DEMO_LIKE[:5], {"lstm/save_parameters/1.4.1/2.0.0b1"})
    new_fact = rec("lenet", "save_params", "1.0.0.post4", "1.9.1", "mismatch", "top-1 changed", 3.0)
    after_records = [DEMO_LIKE[0], DEMO_LIKE[2], DEMO_LIKE[5], new_fact]  # layout lost cells, rnn_param kept one
    after = group_records(after_records, {"lstm/save_parameters/1.4.1/2.0.0b1", "lenet/save_params/1.0.0.post4/1.9.1"})
    c = compare_groups(before, after, ("mon", "tue"))
    assert [g.signature for g in c.appeared] == [
        "outputs of lenet moved past tolerance",
        "Operator _image_resize is not registered",
    ]
    assert [g.signature for g in c.new_regressions] == ["outputs of lenet moved past tolerance"]
    assert c.disappeared == [] and c.exit_code == 1
    changed = {a.signature: (b.cells, a.cells) for b, a in c.changed}
    assert set(changed) == {"Parameter 'lstm.rnn_param' is missing in the file", "Cannot find argument 'layout'"}
    out = c.as_dict()
    layout = next(x for x in out["changed"] if x["signature"] == "Cannot find argument 'layout'")
    assert layout["cells_removed"] == ["lenet/c_predict/1.9.1/1.2.1", "resnet_bn/module_checkpoint/1.9.1/1.0.0.post4"]
    assert layout["cells_added"] == []
    text = lines(c)
    assert text[0] == "mon -> tue: 2 appeared, 0 disappeared, 2 changed cells, 0 unchanged"
    assert text[1].startswith("APPEARED (fails the run) [S-") and "outputs of lenet moved" in text[1]
    back = compare_groups(after, before, ("tue", "mon"))
    assert back.exit_code == 0 and len(back.disappeared) == 2 and back.appeared == []


def _finished_run(root, run_id, records, exit_code=1):
    run_dir = root / run_id
    (run_dir / "records").mkdir(parents=True)
    for r in records:
        name = artifacts.record_name(r["saved_with"], r["model"], r["api"], r["loaded_with"])
        (run_dir / "records" / name).write_text(json.dumps(r))
    manifest = {
        "run_id": run_id,
        "request": {"save": ["1.4.1"], "load": ["2.0.0b1"], "allow_list": None},
        "order": ["summary"],
        "steps": {"summary": {"status": "ok"}},
        "exit_code": exit_code,
    }
    (run_dir / "run.json").write_text(json.dumps(manifest))


def test_the_compare_command_exits_1_on_a_new_backward_signature_and_2_on_a_missing_run(tmp_path):
    runs = tmp_path / "runs"
    _finished_run(runs, "a", DEMO_LIKE[2:5])
    _finished_run(runs, "b", DEMO_LIKE[:5])
    proc = run_cli("compare", "a", "b", "--runs-dir", str(runs), home=tmp_path / "home")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0] == "a -> b: 1 appeared, 0 disappeared, 0 changed cells, 1 unchanged"
    assert "APPEARED (fails the run) [S-5f6ec12d] backward: Parameter 'lstm.rnn_param' is missing" in proc.stdout
    as_json = json.loads(run_cli("compare", "b", "a", "--runs-dir", str(runs), "--json", home=tmp_path / "h").stdout)
    assert [g["signature"] for g in as_json["disappeared"]] == ["Parameter 'lstm.rnn_param' is missing in the file"]
    assert as_json["appeared"] == [] and as_json["exit_code"] == 0
    missing = run_cli("compare", "a", "nope", "--runs-dir", str(runs), home=tmp_path / "home")
    assert missing.returncode == 2 and "no run nope" in missing.stderr


def test_summary_md_opens_with_the_headline_and_links_notebooks_from_the_run_folder(tmp_path):
    from kit.results.records import classify

    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    split = classify(DEMO_LIKE, [])
    manifest = {
        "run_id": "r1",
        "request": {"save": ["1.4.1"], "load": ["2.0.0b1"], "models": [], "apis": [], "allow_list": None},
        "order": ["reload:2.0.0b1", "summary"],
        "steps": {
            "reload:2.0.0b1": {"status": "failed", "output": str(run_dir / "reload" / "mxnet-2.0.0b1.ipynb")},
            "summary": {"status": "ok", "output": str(run_dir / "summary.ipynb")},
        },
    }
    groups = reports.write_all(run_dir, DEMO_LIKE, split, manifest, reports.exit_code(manifest, split))
    md = (run_dir / "summary.md").read_text()
    assert md.splitlines()[2].startswith("**Exit code 3 (a step broke)**: 1 distinct backward incompatibility")
    assert md.index("## Incompatibilities, grouped by signature") < md.index("## Verdicts")
    assert "| forward | `Cannot find argument 'layout'` | `S-103e0d08` | saved with 1.5.1 | 1.5.1..1.9.1 (2) |" in md
    cell_row = "| lstm | save_parameters | 1.4.1 | 2.0.0b1 | load-error | `S-5f6ec12d` |"
    assert cell_row in md and "[reload/mxnet-2.0.0b1.ipynb](reload/mxnet-2.0.0b1.ipynb) |" in md
    assert "(executed notebook: [reload/mxnet-2.0.0b1.ipynb](reload/mxnet-2.0.0b1.ipynb), log:" in md
    with open(run_dir / "records.csv") as f:
        rows = list(csv.DictReader(f))
    signed = [r["signature_id"] for r in rows if r["signature_id"]]
    assert len(signed) == 7 and set(signed) == {g.id for g in groups}
