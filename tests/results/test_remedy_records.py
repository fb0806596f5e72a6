"""Remedies as the reader sees them (kit.results.signatures, kit.results.reports), from hand-built records in the shape
kit.kernel.remedies.attempts writes: a group says which remedy fixed how many of its cells, the headline counts
incompatibilities with and without one, and the cell's own verdict (exit code, JUnit) does not move."""

from __future__ import annotations

import csv
from xml.etree import ElementTree as ET

from kit.common.record_schema import new_record
from kit.results import reports
from kit.results.records import classify
from kit.results.signatures import PARTIAL, VERIFIED, group_records, line, remedy_text

SHAPE = (
    "case 'batch': MXNetError: MXNetError: Error in operator lstm_lstm0_rnn0: Shape inconsistent, "
    "Provided = [1,0,24], inferred shape=(1,8,24)"
)
NPI = "MXNetError: Failed loading Op node_1071 of type _npi_add: Operator _npi_add is not registered"
NDARRAY = "MXNetError: Check failed: header == kMXAPINDArrayListMagic: Invalid NDArray file format"


def fixed(name, verdict, max_abs, code="mx.npx.reset_np()"):
    return {
        "fixed": True,
        "name": name,
        "title": "a title",
        "verdict": verdict,
        "summary": {"max_abs": max_abs},
        "changed": ["something"],
        "user_code": code,
        "tried": [{"name": name, "verdict": verdict}],
        "why_none": None,
    }


def unfixed(why, tried=()):
    return {"fixed": False, "name": None, "verdict": None, "tried": list(tried), "why_none": why}


def rec(model, api, saved, loaded, verdict, error, remedy):
    r = new_record(saved, model, api, loaded, f"/store/{saved}/{model}/{api}")
    r.update(verdict=verdict, reason=error, error=error, remedy=remedy)
    return r


RECORDS = [
    rec("lstm", "export", "1.9.1", "2.0.0b1", "infer-error", SHAPE, fixed("legacy_shape_semantics", "identical", 0.0)),
    rec(
        "lstm",
        "module_checkpoint",
        "1.4.1",
        "2.0.0b1",
        "infer-error",
        SHAPE,
        fixed("legacy_shape_semantics", "close", 2e-7),
    ),
    rec("mlp", "export", "2.0.0b1", "1.9.1", "load-error", NDARRAY, fixed("legacy_params_format", "identical", 0.0)),
    rec(
        "resnet_bn",
        "export",
        "2.0.0b1",
        "1.2.1",
        "load-error",
        NDARRAY,
        unfixed("tried legacy_params_format: _npi_add", [{"name": "legacy_params_format", "verdict": "load-error"}]),
    ),
    rec(
        "resnet_bn",
        "export",
        "2.0.0b1",
        "1.4.1",
        "load-error",
        NPI,
        unfixed("operator _npi_add is one of MXNet's numpy operators"),
    ),
]


def test_a_group_says_which_remedy_fixed_how_many_of_its_cells():
    shape, ndarray, npi = group_records(RECORDS)
    assert shape.remedy["status"] == VERIFIED and (shape.remedy["fixed"], shape.remedy["cells"]) == (2, 2)
    [by] = shape.remedy["by"]
    assert by["name"] == "legacy_shape_semantics" and by["verdicts"] == {"identical": 1, "close": 1}
    assert by["max_abs"] == 2e-7 and by["user_code"] == "mx.npx.reset_np()"
    assert remedy_text(shape) == "fixed by legacy_shape_semantics: identical in 1 and close in 1 of 2 cells"
    assert ndarray.remedy["status"] == PARTIAL
    assert remedy_text(ndarray) == (
        "fixed by legacy_params_format: identical in 1 of 2 cells; 1 left: tried legacy_params_format: _npi_add"
    )
    assert remedy_text(npi) == "no known remedy: operator _npi_add is one of MXNet's numpy operators"
    assert line(shape).endswith("; fixed by legacy_shape_semantics: identical in 1 and close in 1 of 2 cells")


def test_a_record_written_before_remedies_existed_is_said_so():
    old = rec("lstm", "export", "1.9.1", "2.0.0b1", "infer-error", SHAPE, None)
    del old["remedy"]  # its schema had no such field
    [group] = group_records([old])
    assert group.remedy["status"] == "none" and "before remedies existed" in remedy_text(group)
    moved = rec("mlp", "export", "1.4.1", "1.9.1", "drift", "past tolerance", None)
    [numeric] = group_records([moved])
    assert "no remedy changes numbers" in remedy_text(numeric)


def test_the_headline_counts_incompatibilities_with_and_without_a_verified_remedy():
    lines = reports.headline_lines(group_records(RECORDS), 1)
    assert lines[0] == (
        "**Exit code 1 (regressions found)**: 1 distinct backward incompatibility (2 cells; 1 with a verified "
        "remedy, 0 without); 2 distinct forward incompatibilities (3 cells; 0 with a verified remedy, 1 in part, 1 "
        "without)."
    )
    text = "\n".join(lines)
    assert "**fixed by legacy_shape_semantics: identical in 1 and close in 1 of 2 cells**" in text


def test_a_remedy_informs_and_never_turns_a_failing_cell_green(tmp_path):
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    split = classify(RECORDS, [])
    manifest = {
        "run_id": "r",
        "request": {"save": ["1.9.1"], "load": ["2.0.0b1"], "models": [], "apis": [], "allow_list": None},
        "order": ["summary"],
        "steps": {"summary": {"status": "ok", "output": str(run_dir / "summary.ipynb")}},
    }
    code = reports.exit_code(manifest, split)
    assert code == 1 and len(split["failures"]) == 2  # both backward LSTM cells still fail the run
    reports.write_all(run_dir, RECORDS, split, manifest, code)
    md = (run_dir / "summary.md").read_text()
    assert (
        "## Verified remedies" in md and "**legacy_shape_semantics** (a title): identical 1, close 1 of 2 cells" in md
    )
    assert "```python\nmx.npx.reset_np()\n```" in md
    assert "| fixed by legacy_shape_semantics: identical in 1 and close in 1 of 2 cells |" in md
    suite = ET.parse(run_dir / "junit.xml").getroot()
    failures = suite.findall(".//failure")
    assert len(failures) == 2 and all("remedy: legacy_shape_semantics: " in f.text for f in failures)
    with open(run_dir / "records.csv") as f:
        rows = {(r["model"], r["api"], r["saved_with"], r["loaded_with"]): r for r in csv.DictReader(f)}
    row = rows[("lstm", "export", "1.9.1", "2.0.0b1")]
    assert (row["verdict"], row["remedy"], row["remedy_verdict"]) == (
        "infer-error",
        "legacy_shape_semantics: identical",
        "identical",
    )
    assert rows[("resnet_bn", "export", "2.0.0b1", "1.4.1")]["remedy"].startswith("none: operator _npi_add")


def test_a_bundle_says_what_each_remedy_did():
    from kit.debug.bundle import remedy_markdown

    text = "\n".join(remedy_markdown(RECORDS[0]))
    assert "- `legacy_shape_semantics`: **identical**" in text
    assert "Fixed by `legacy_shape_semantics`" in text and "```python\nmx.npx.reset_np()\n```" in text
    assert "No known remedy: operator _npi_add" in "\n".join(remedy_markdown(RECORDS[4]))
    assert remedy_markdown(new_record("1.9.1", "mlp", "export", "2.0.0b1", "/a")) == []
