"""The release engineer's workflow: a candidate checked on a machine that has only the candidate.

Another machine pushed its baselines to S3 (moto in server mode); this machine has a fresh kit
home with one environment, a custom candidate (MXNet 1.9.1's wheel under another name).
"""

from __future__ import annotations

import json
import os

import boto3
import pytest
from conftest import NEWEST, OLDEST, read_records, run_cli

CANDIDATE = "1.9.2rc0"
MODELS = ("mlp", "lenet")


@pytest.fixture(scope="module")
def baselines(trained_store, kit_home, s3_server):
    """The trained store's mlp and lenet artifacts of both releases, pushed to s3://rel-eng/baselines."""
    env = dict(os.environ, **s3_server["env"])
    keys = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
    boto3.client("s3", endpoint_url=s3_server["endpoint"], **keys).create_bucket(Bucket="rel-eng")
    url = "s3://rel-eng/baselines"
    models = [a for m in MODELS for a in ("--model", m)]
    run_cli("store", "push", url, "--from", str(trained_store["_store"]), *models, home=kit_home, env=env, check=True)
    return {"url": url, "env": env}


@pytest.fixture(scope="module")
def candidate_home(tmp_path_factory, built_envs):
    """A fresh kit home with the candidate environment only (uv's cache is warm from the session's builds)."""
    home = tmp_path_factory.mktemp("rel-eng-home")
    run_cli(
        "env", "create", "--name", CANDIDATE, "--spec", "mxnet==1.9.1", "--expect-version", "1.9.1",
        "--python-version", "3.11", home=home, check=True, timeout=900,
    )  # fmt: skip
    return home


@pytest.mark.envs
def test_load_only_checks_every_stored_release_without_building_another_environment(
    baselines, candidate_home, tmp_path
):
    runs = tmp_path / "runs"
    proc = run_cli(
        "run", "--load", CANDIDATE, "--store", baselines["url"], "--runs-dir", str(runs), "--run-id", "rc",
        home=candidate_home, env=baselines["env"], timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert f"reloading what the store holds of 2 release(s): {OLDEST}, {NEWEST}" in proc.stdout
    assert "pulled 16 artifact(s)" in proc.stdout
    manifest = json.loads((runs / "rc" / "run.json").read_text())
    assert manifest["order"] == [f"reload:{CANDIDATE}", "summary"]  # nothing trains
    assert manifest["request"]["save"] == [OLDEST, NEWEST] and manifest["request"]["reload_only"]
    records = read_records(runs / "rc")
    assert len(records) == 2 * len(MODELS) * 5  # 4 APIs and c_predict
    assert {(s, m) for s, m, _, _ in records} == {(r, m) for r in (OLDEST, NEWEST) for m in MODELS}
    verdicts = {k: r["verdict"] for k, r in records.items()}
    assert set(verdicts.values()) <= {"identical", "close", "unsupported"}, verdicts
    # 1.9.1's own artifacts reload identically in its wheel under another name
    assert all(v == "identical" for (s, _, _, _), v in verdicts.items() if s == NEWEST)
    assert sorted(p.name for p in (candidate_home / "envs").iterdir() if not p.name.startswith(".")) == [CANDIDATE]


@pytest.mark.envs
def test_a_release_the_store_lacks_and_no_environment_can_train_is_a_usage_error_naming_both_ways_out(
    baselines, candidate_home, tmp_path
):
    proc = run_cli(
        "run", "--save", f"{NEWEST},1.4.1", "--load", CANDIDATE, "--models", ",".join(MODELS),
        "--store", baselines["url"], "--runs-dir", str(tmp_path / "runs"),
        home=candidate_home, env=baselines["env"],
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "1.4.1 must train (the store lacks some of their artifacts)" in proc.stderr
    assert "mxcompat env create 1.4.1" in proc.stderr and "mxcompat store pull" in proc.stderr
    assert NEWEST + "," not in proc.stderr.split("must train")[0]  # 1.9.1's artifacts are there: no env needed
