"""The nightly workflow file: scheduled, restores the uv cache, reloads from the store, keeps the evidence,
fails on exit 1/3, and calls only commands and flags the CLI has."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import yaml

from kit.cli import main
from kit.results.records import load_allow_list

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "nightly.yml"


def workflow() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def steps() -> list[dict]:
    [job] = workflow()["jobs"].values()
    return job["steps"]


def mxcompat_calls() -> list[list[str]]:
    """Every `.venv/bin/mxcompat ...` command line in the steps, split into words (continuations joined)."""
    calls = []
    for step in steps():
        script = step.get("run", "").replace("\\\n", " ")
        for line in script.splitlines():
            for part in re.split(r"\|\||&&|;|\$\(|\|", line):
                words = shlex.split(part.split(">")[0], comments=True) if "mxcompat" in part else []
                if words and words[0].endswith("bin/mxcompat"):
                    calls.append(words[1:])
    return calls


def test_it_runs_nightly_and_on_demand_with_a_candidate():
    on = workflow()["on"]
    assert on["schedule"][0]["cron"].count(" ") == 4
    assert {"candidate_name", "candidate_spec", "candidate_python"} <= set(on["workflow_dispatch"]["inputs"])


def test_it_restores_the_uv_cache_and_builds_only_the_loading_releases():
    cache = next(s for s in steps() if s.get("uses", "").startswith("actions/cache@"))
    assert cache["with"]["path"] == "${{ env.MXCOMPAT_UV_CACHE }}"
    assert workflow()["env"]["MXCOMPAT_UV_CACHE"].endswith(".uv-cache")
    creates = [c for c in mxcompat_calls() if c[:2] == ["env", "create"]]
    assert creates == [
        ["env", "create", "$NEWEST"],
        [
            "env",
            "create",
            "--name",
            "$CANDIDATE_NAME",
            "--spec",
            "$CANDIDATE_SPEC",
            "--python-version",
            "$CANDIDATE_PYTHON",
        ],
    ]
    [run] = [c for c in mxcompat_calls() if c[0] == "run"]
    assert "--save" not in run  # every stored release, from the store
    assert run[run.index("--load") + 1] == "$NEWEST,$CANDIDATE_NAME" and run[run.index("--store") + 1] == "$STORE"
    assert run[run.index("--allow-list") + 1] == "nightly/allow-list.yaml"
    assert load_allow_list(REPO / "nightly" / "allow-list.yaml") == []


def test_it_keeps_the_evidence_and_fails_on_1_or_3():
    upload = next(s for s in steps() if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "runs/${{ env.RUN_ID }}"
    reports = [c for c in mxcompat_calls() if c[0] == "report"]
    assert {"--issue", "--json", "--webhook"} <= {w for c in reports for w in c}
    assert any(c[0] == "bundle" for c in mxcompat_calls())
    last = steps()[-1]
    assert last["if"] == "always()" and '[ "$code" = "0" ]' in last["run"]
    run_step = next(s for s in steps() if s.get("id") == "run")
    assert "set +e" in run_step["run"] and 'echo "exit_code=$?"' in run_step["run"]


def test_every_command_and_flag_it_calls_exists():
    for call in mxcompat_calls():
        cmd: click.Command = main
        words = list(call)
        while isinstance(cmd, click.Group) and words and words[0] in cmd.commands:
            cmd = cmd.commands[words.pop(0)]
        assert not isinstance(cmd, click.Group), call
        flags = {o for p in cmd.params for o in getattr(p, "opts", [])}
        used = {w for w in words if w.startswith("--")}
        assert used <= flags, (call, used - flags)
