"""The allow-list and what fails a run (kit.results.records), on hand-built records: no environment, no kernel."""

from __future__ import annotations

import datetime as dt

import pytest

from kit.common.errors import UsageError
from kit.results.records import Allowance, classify, is_failure, load_allow_list

OLD, NEW = "1.0.0.post4", "1.9.1"
TODAY = dt.date(2026, 6, 1)


def rec(model, api, verdict, direction="backward", saved=OLD, loaded=NEW):
    return {
        "model": model,
        "api": api,
        "saved_with": saved,
        "loaded_with": loaded,
        "direction": direction,
        "verdict": verdict,
    }


def write(tmp_path, text, name="allow.yml"):
    path = tmp_path / name
    path.write_text(text)
    return path


# -- reading ------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [None, ""])
def test_no_allow_list_allows_nothing(path):
    assert load_allow_list(path) == []


def test_yaml_entries_with_dates_and_date_strings(tmp_path):
    path = write(
        tmp_path,
        f"- cell: mlp/save_params/{OLD}/*\n"
        "  reason: known, tracked upstream\n"
        "  expires: 2999-01-01\n"  # YAML reads this as a date
        "- cell: '*/export/*/2.0.0b1'\n"
        "  reason: 2.0 drops SoftmaxOutput\n"
        "  expires: '2030-06-30'\n",  # a string, parsed as ISO
    )
    assert load_allow_list(path) == [
        Allowance(f"mlp/save_params/{OLD}/*", "known, tracked upstream", dt.date(2999, 1, 1)),
        Allowance("*/export/*/2.0.0b1", "2.0 drops SoftmaxOutput", dt.date(2030, 6, 30)),
    ]


def test_json_is_read_too_and_values_become_strings(tmp_path):
    path = write(
        tmp_path, '[{"cell": "lstm/export/1.9.1/2.0.0b1", "reason": 42, "expires": "2027-02-03"}]', "allow.json"
    )
    [entry] = load_allow_list(str(path))  # a str path works as well as a Path
    assert entry == Allowance("lstm/export/1.9.1/2.0.0b1", "42", dt.date(2027, 2, 3))


@pytest.mark.parametrize(
    "text,message",
    [
        ("cell: mlp/export/a/b\nreason: x\nexpires: 2030-01-01\n", "must be a list of entries with cell, reason"),
        ("", "must be a list of entries"),  # an empty file is no list
        ("- cell: [unclosed\n", "cannot read allow-list"),
        ("- cell: mlp/export/a/b\n  expires: 2030-01-01\n", "entry 1 needs cell, reason and expires"),
        ("- cell: mlp/export/a/b\n  reason: x\n  expires: 2030-01-01\n- just a string\n", "entry 2 needs cell"),
        ("- cell: mlp/export/a/b\n  reason: x\n  expires: next year\n", "entry 1: expires must be YYYY-MM-DD"),
        ("- cell: mlp/export/a/b\n  reason: x\n  expires: 2030\n", "entry 1: expires must be a date"),
        ("- cell: mlp/export/1.9.1\n  reason: x\n  expires: 2030-01-01\n", "cell must be MODEL/API/SAVED/LOADED"),
        ("- cell: a/b/c/d/e\n  reason: x\n  expires: 2030-01-01\n", "cell must be MODEL/API/SAVED/LOADED"),
    ],
)
def test_bad_allow_lists_are_usage_errors_that_name_the_problem(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as e:
        load_allow_list(path)
    assert message in str(e.value)
    assert str(path) in str(e.value)
    assert e.value.exit_code == 2


def test_a_missing_allow_list_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot read allow-list .*nope.yml"):
        load_allow_list(tmp_path / "nope.yml")


# -- matching -----------------------------------------------------------------------------------
def test_an_allowance_matches_by_glob_on_model_api_saved_loaded():
    a = Allowance(f"mlp/*/{OLD}/*", "r", dt.date(2030, 1, 1))
    assert a.matches(rec("mlp", "export", "mismatch"), TODAY)
    assert a.matches(rec("mlp", "save_params", "drift"), TODAY)
    assert not a.matches(rec("lenet", "export", "mismatch"), TODAY)
    assert not a.matches(rec("mlp", "export", "mismatch", saved="1.1.0"), TODAY)
    assert not Allowance(f"MLP/*/{OLD}/*", "r", dt.date(2030, 1, 1)).matches(rec("mlp", "export", "drift"), TODAY)
    exact = Allowance(f"lenet/export/{OLD}/{NEW}", "r", dt.date(2030, 1, 1))
    assert exact.matches(rec("lenet", "export", "drift"), TODAY)
    assert not exact.matches(rec("lenet", "export", "drift", loaded="2.0.0b1"), TODAY)


def test_an_allowance_holds_through_its_expiry_day_and_not_after():
    a = Allowance("*/*/*/*", "r", TODAY)
    assert a.matches(rec("mlp", "export", "drift"), TODAY)
    assert a.matches(rec("mlp", "export", "drift"), TODAY - dt.timedelta(days=1))
    assert not a.matches(rec("mlp", "export", "drift"), TODAY + dt.timedelta(days=1))


@pytest.mark.parametrize(
    "direction,verdict,fails",
    [
        ("backward", "identical", False),
        ("backward", "close", False),
        ("backward", "unsupported", False),
        ("backward", "drift", True),
        ("backward", "mismatch", True),
        ("backward", "load-error", True),
        ("backward", "infer-error", True),
        ("backward", "corrupt", True),
        ("unknown", "mismatch", True),
        ("unknown", "close", False),
        ("forward", "load-error", False),  # reported apart, never fails the run
        ("forward", "corrupt", False),
        ("same", "identical", False),
        ("same", "unsupported", False),
        ("same", "close", True),  # the noise floor must be exact
        ("same", "drift", True),
    ],
)
def test_what_fails_a_run(direction, verdict, fails):
    assert is_failure(rec("mlp", "export", verdict, direction=direction)) is fails


def split_of(records, allow, today=None):
    """classify's answer as (failures, allowed, expired)."""
    split = classify(records, allow, today=today)
    return split["failures"], split["allowed"], split["expired"]


def test_classify_splits_failures_from_allowed_and_ignores_passing_cells():
    records = [
        rec("mlp", "export", "close"),
        rec("mlp", "save_params", "mismatch"),
        rec("lenet", "export", "load-error"),
        rec("lenet", "export", "load-error", direction="forward", saved=NEW, loaded=OLD),
        rec("lstm", "export", "drift"),
        rec("mlp", "export", "close", direction="same", saved=NEW),
    ]
    first = Allowance(f"lenet/export/{OLD}/*", "first", dt.date(2030, 1, 1))
    second = Allowance("lenet/*/*/*", "second", dt.date(2030, 1, 1))
    lapsed = Allowance("lstm/*/*/*", "too late", dt.date(2026, 5, 31))
    failures, allowed, expired = split_of(records, [first, second, lapsed], today=TODAY)
    assert failures == [records[1], records[4], records[5]]
    assert allowed == [(records[2], first)]  # the first allowance that matches covers it
    assert expired == [(records[4], lapsed)]  # a failure its allowance would cover but for the date
    assert split_of(records, [], today=TODAY) == ([records[1], records[2], records[4], records[5]], [], [])


def test_classify_checks_expiry_against_today_by_default():
    record = rec("mlp", "export", "mismatch")
    future = Allowance("mlp/*/*/*", "r", dt.date.today() + dt.timedelta(days=1))
    past = Allowance("mlp/*/*/*", "r", dt.date.today() - dt.timedelta(days=1))
    assert split_of([record], [future]) == ([], [(record, future)], [])
    assert split_of([record], [past]) == ([record], [], [(record, past)])


def test_an_allow_list_file_drives_classify(tmp_path):
    path = write(tmp_path, f"- cell: mlp/*/{OLD}/{NEW}\n  reason: tracked\n  expires: 2026-06-01\n")
    records = [rec("mlp", "export", "drift"), rec("lenet", "export", "drift")]
    failures, allowed, expired = split_of(records, load_allow_list(path), today=TODAY)
    assert failures == [records[1]] and expired == []
    assert [(r["model"], a.reason) for r, a in allowed] == [("mlp", "tracked")]
    failures, allowed, expired = split_of(records, load_allow_list(path), today=dt.date(2026, 6, 2))
    assert failures == records and allowed == []
    assert [(r["model"], a.reason, a.expires) for r, a in expired] == [("mlp", "tracked", dt.date(2026, 6, 1))]
