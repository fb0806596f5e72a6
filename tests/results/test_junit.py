"""The JUnit XML a run writes (kit.results.reports), from hand-built records: no environment, no kernel."""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET

import pytest

from kit.results.records import Allowance, classify
from kit.results.reports import flat_rows, write_junit
from kit.results.signatures import signature_id

OLD, NEW = "1.0.0.post4", "1.9.1"


def rec(model, api, saved, loaded, direction, verdict, reason=None, load=None, infer=None, traceback=None):
    return {
        "saved_with": saved,
        "model": model,
        "api": api,
        "loaded_with": loaded,
        "direction": direction,
        "verdict": verdict,
        "reason": reason,
        "summary": {"max_abs": 0.5} if verdict in ("close", "drift", "mismatch") else None,
        "load_seconds": load,
        "infer_seconds": infer,
        "traceback": traceback,
    }


RECORDS = [
    rec("mlp", "export", OLD, NEW, "backward", "close", load=0.5, infer=0.25),
    rec("lenet", "export", OLD, NEW, "backward", "mismatch", "top-1 predictions changed for 50% of samples", 1, 2),
    rec("lenet", "export", NEW, OLD, "forward", "load-error", "Cannot find argument 'layout'"),
    rec("mlp", "save_parameters", OLD, NEW, "backward", "unsupported", "saving release: arrived in MXNet 1.2"),
    rec("lstm", "save_parameters", OLD, NEW, "backward", "load-error", "rnn_param"),
    rec("mlp", "save_parameters", NEW, NEW, "same", "close", traceback="Traceback (most recent call last): ..."),
    rec("lenet", "save_parameters", NEW, NEW, "same", "identical", load=0.125, infer=0.125),
]
ALLOW = [Allowance(f"lstm/save_parameters/{OLD}/*", "known", dt.date(2999, 1, 1))]


def manifest(steps=None, order=None):
    steps = steps or {"summary": {"status": "ok", "output": "summary.ipynb"}}
    return {"run_id": "r1", "order": order or list(steps), "steps": steps}


def junit(tmp_path, records=RECORDS, allow=ALLOW, man=None):
    split = classify(records, allow, today=dt.date(2026, 6, 1))
    allowed_ids = {f"{r['model']}/{r['api']}/{r['saved_with']}/{r['loaded_with']}" for r, _ in split["allowed"]}
    rows = flat_rows(tmp_path, records, allowed_ids)
    path = tmp_path / "junit.xml"
    write_junit(path, rows, records, man or manifest())
    return path, ET.parse(path).getroot()


def cases(suite):
    return {(c.get("classname"), c.get("name")): c for c in suite.findall("testcase")}


def test_one_suite_per_api_sorted_with_counts(tmp_path):
    path, root = junit(tmp_path)
    assert path.read_bytes().startswith(b"<?xml version='1.0' encoding='utf-8'?>")
    assert root.tag == "testsuites" and root.get("name") == "mxnet-compat-kit run r1"
    suites = root.findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures"), s.get("skipped")) for s in suites] == [
        ("export", "3", "1", "1"),
        ("save_parameters", "4", "1", "2"),
    ]
    assert sum(len(s.findall("testcase")) for s in suites) == len(RECORDS)


def test_testcases_are_named_by_model_and_releases_and_timed(tmp_path):
    _, root = junit(tmp_path)
    export, save_parameters = root.findall("testsuite")
    assert list(cases(export)) == [  # in the records' order
        ("export.mlp", f"{OLD} -> {NEW}"),
        ("export.lenet", f"{OLD} -> {NEW}"),
        ("export.lenet", f"{NEW} -> {OLD}"),
    ]
    assert cases(export)[("export.mlp", f"{OLD} -> {NEW}")].get("time") == "0.75"
    assert cases(export)[("export.lenet", f"{OLD} -> {NEW}")].get("time") == "3"
    assert cases(export)[("export.lenet", f"{NEW} -> {OLD}")].get("time") == "0"  # no timings: 0
    assert cases(save_parameters)[("save_parameters.lenet", f"{NEW} -> {NEW}")].get("time") == "0.25"


def test_a_failing_backward_cell_is_a_failure_with_its_verdict_and_reason(tmp_path):
    _, root = junit(tmp_path)
    case = cases(root.findall("testsuite")[0])[("export.lenet", f"{OLD} -> {NEW}")]
    [failure] = case.findall("failure")
    assert failure.get("type") == "mismatch"
    # the message names the cell's group (one message for every cell of one incompatibility), the text its reason
    group = signature_id("numeric", "outputs of lenet moved past tolerance")
    assert failure.get("message") == f"[{group}] mismatch: outputs of lenet moved past tolerance"
    assert failure.text == "top-1 predictions changed for 50% of samples"  # no traceback: the reason alone
    assert not case.findall("skipped")
    passing = cases(root.findall("testsuite")[0])[("export.mlp", f"{OLD} -> {NEW}")]
    assert list(passing) == []  # a close backward cell: neither failed nor skipped


def test_a_same_release_cell_that_is_not_identical_fails_with_its_traceback(tmp_path):
    _, root = junit(tmp_path)
    by_name = cases(root.findall("testsuite")[1])
    [failure] = by_name[("save_parameters.mlp", f"{NEW} -> {NEW}")].findall("failure")
    group = signature_id("numeric", "outputs of mlp moved past tolerance")
    assert (
        failure.get("type") == "close"
        and failure.get("message") == f"[{group}] close: outputs of mlp moved past tolerance"
    )
    assert failure.text == "Traceback (most recent call last): ..."
    assert list(by_name[("save_parameters.lenet", f"{NEW} -> {NEW}")]) == []


def test_forward_unsupported_and_allowed_cells_are_skipped_with_why(tmp_path):
    _, root = junit(tmp_path)
    export, save_parameters = root.findall("testsuite")
    skipped = {
        key: [s.get("message") for s in c.findall("skipped")]
        for suite in (export, save_parameters)
        for key, c in cases(suite).items()
        if c.findall("skipped")
    }
    layout, rnn = signature_id("error", "Cannot find argument 'layout'"), signature_id("error", "rnn_param")
    assert skipped == {
        ("export.lenet", f"{NEW} -> {OLD}"): [f"forward: [{layout}] load-error: Cannot find argument 'layout'"],
        ("save_parameters.mlp", f"{OLD} -> {NEW}"): ["unsupported: saving release: arrived in MXNet 1.2"],
        ("save_parameters.lstm", f"{OLD} -> {NEW}"): [f"allowed: [{rnn}] load-error: rnn_param"],
    }


def test_without_the_allow_list_the_allowed_cell_fails(tmp_path):
    _, root = junit(tmp_path, allow=[])
    save_parameters = root.findall("testsuite")[1]
    assert (save_parameters.get("failures"), save_parameters.get("skipped")) == ("2", "1")
    [failure] = cases(save_parameters)[("save_parameters.lstm", f"{OLD} -> {NEW}")].findall("failure")
    rnn = signature_id("error", "rnn_param")
    assert failure.get("type") == "load-error" and failure.get("message") == f"[{rnn}] load-error: rnn_param"


def test_a_failed_step_becomes_an_error_in_a_steps_suite(tmp_path):
    steps = {
        "train:1.9.1": {"status": "ok", "output": "train/mxnet-1.9.1.ipynb"},
        "reload:1.9.1": {"status": "failed", "output": "reload/mxnet-1.9.1.ipynb", "error": "E" * 600},
        "summary": {"status": "failed", "output": "summary.ipynb", "error": None},
        "reload:2.0.0b1": {
            "status": "failed",
            "output": "reload/mxnet-2.0.0b1.ipynb",
            "error": "a long traceback ...\nOSError: [Errno 28] No space left on device",
            "cause": "OSError: [Errno 28 ENOSPC] No space left on device: '/store/x' (cell 5)",
        },
    }
    order = ["train:1.9.1", "reload:1.9.1", "summary", "reload:2.0.0b1"]
    _, root = junit(tmp_path, man=manifest(steps, order))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["export", "save_parameters", "steps", "steps", "steps"]
    reload_suite, summary_suite, caused_suite = suites[2:]
    assert (reload_suite.get("tests"), reload_suite.get("errors")) == ("1", "1")
    [case] = reload_suite.findall("testcase")
    assert (case.get("classname"), case.get("name")) == ("steps", "reload:1.9.1")
    [error] = case.findall("error")
    assert error.get("type") == "step-failed" and error.get("message") == "E" * 500  # cut at 500 characters
    assert error.text == "E" * 600 + "\nexecuted notebook: reload/mxnet-1.9.1.ipynb"
    [error] = summary_suite.find("testcase").findall("error")
    assert error.get("message") == "no error recorded" and error.text.endswith("\nexecuted notebook: summary.ipynb")
    [error] = caused_suite.find("testcase").findall("error")  # the one-line root cause is the message
    assert error.get("message") == steps["reload:2.0.0b1"]["cause"] and "long traceback" in error.text


@pytest.mark.parametrize("records", [[], RECORDS[:1]])
def test_a_run_without_failures_has_no_failure_elements(tmp_path, records):
    path, root = junit(tmp_path, records=records)
    assert "<failure" not in path.read_text()
    assert [s.get("failures") for s in root.findall("testsuite")] == (["0"] if records else [])


def test_control_characters_in_a_record_still_give_valid_xml(tmp_path):
    """An error that quotes a name with a control character in it (a symbol file someone else wrote) must not
    make junit.xml unreadable for the CI that parses it."""
    from xml.etree import ElementTree as ET

    rec = {
        "saved_with": "1.4.1", "model": "det", "api": "checkpoint", "loaded_with": "1.9.1", "direction": "backward",
        "verdict": "load-error", "reason": "Cannot find op 'bad\x00op\x1b[31m'", "error": "bad\x07op", "summary": None,
        "cases": {}, "load_seconds": 0.1,
    }  # fmt: skip
    manifest = {"run_id": "r", "order": [], "steps": {}}
    rows = flat_rows(tmp_path, [rec], set())
    write_junit(tmp_path / "junit.xml", rows, [rec], manifest)
    root = ET.parse(tmp_path / "junit.xml").getroot()  # parses: no character XML 1.0 forbids
    failure = root.find(".//failure")
    assert "Cannot find op 'bad\ufffdop\ufffd[31m'" in failure.get("message")
