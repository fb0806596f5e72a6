"""Loading a run on the host (its manifest, its records and their split), and what the records mean for the
run's exit code."""

from __future__ import annotations

import datetime as dt
import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import yaml

from kit.common import artifacts, run_layout
from kit.common.capabilities import ONNX_DIRECTION
from kit.common.errors import KitError, UsageError
from kit.common.record_schema import cell_id
from kit.common.verdicts import FAILING, IDENTICAL, SEVERITY, UNSUPPORTED
from kit.common.versions import RUNTIME_DIRECTION
from kit.results.runs import RUN_MANIFEST, Run, read_manifest


def load_records(run_dir: str | Path) -> list[dict]:
    """Every record of a run, sorted by (saved, model, api, loaded)."""
    folder = run_layout.records_dir(run_dir)
    try:  # plain names and paths: a summary of 1,000 records spent a third of its loading in pathlib
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json") and not n.startswith("."))
    except FileNotFoundError:
        return []
    records = []
    for name in names:  # a name starting with "." is a kernel's in-flight marker, not a record
        path = os.path.join(folder, name)
        rec = read_record(path)
        rec["record_file"] = path
        records.append(rec)
    return records


def read_record(path: str | Path, error=KitError) -> dict:
    """The record at ``path``; ``error`` (the kit's) naming the file when it is not JSON, nested too deep to
    read, or not a record (a JSON object with a verdict)."""
    try:
        rec = artifacts.read_json(str(path))
    except ValueError as e:
        raise error(f"the record {path} is not readable JSON: {e}") from None
    if not isinstance(rec, dict) or not isinstance(rec.get("verdict", 0), (str, type(None))):  # key required
        raise error(f"{path} is not a record (a JSON object with a verdict)")
    return rec


class LoadedRun(NamedTuple):
    """A run as the reports read it: its manifest (``run.json``), its records and their split by the run's own
    allow-list and ``--strict-runtimes`` (:func:`classify`)."""

    manifest: dict
    records: list[dict]
    split: dict


def load_run(run_dir: str | Path, manifest: dict | None = None) -> LoadedRun:
    """The run in ``run_dir``, the one way a run is loaded; ``manifest``: the run's own, as the matrix holds it
    while the run is still writing it (else ``run.json`` is read)."""
    manifest = read_manifest(run_dir) if manifest is None else manifest
    request = manifest.get("request")
    if not isinstance(request, dict):
        raise UsageError(f"{Path(run_dir) / RUN_MANIFEST} holds no request")
    records = load_records(run_dir)
    allow = load_allow_list(request.get("allow_list"))
    return LoadedRun(manifest, records, classify(records, allow, strict_runtimes=request.get("strict_runtimes")))


def load_finished(run: Run) -> LoadedRun:
    """A finished run (:func:`load_run`); a usage error for a missing or unfinished run."""
    if not run.exists():
        raise UsageError(f"no run {run.id} in {run.dir.parent}")
    manifest = run.read_manifest()
    if "exit_code" not in manifest:
        raise UsageError(f"run {run.id} has not finished", hint=f"finish it: mxcompat run --resume {run.id}")
    return load_run(run.dir, manifest)


def is_failure(rec: dict, strict_runtimes: bool = False) -> bool:
    """A cell that fails the run: a failing backward verdict (or an ONNX one: a model that does not leave MXNet
    as it was asked to), or a same-release reload that is not identical; a failing runtime cell only with
    ``strict_runtimes`` (``run --strict-runtimes``)."""
    if rec["direction"] == RUNTIME_DIRECTION:
        return strict_runtimes and rec["verdict"] in FAILING
    if rec["direction"] == "same":
        return rec["verdict"] not in (IDENTICAL, UNSUPPORTED)
    return rec["direction"] in ("backward", "unknown", ONNX_DIRECTION) and rec["verdict"] in FAILING


@dataclass(frozen=True)
class Allowance:
    """A known incompatibility: cells matching ``pattern`` do not fail the run until ``expires``."""

    pattern: str
    reason: str
    expires: dt.date

    def matches(self, rec: dict, today: dt.date) -> bool:
        return today <= self.expires and fnmatch.fnmatchcase(cell_id(rec), self.pattern)


def load_allow_list(path: str | Path | None) -> list[Allowance]:
    """Read an allow-list (YAML or JSON): a list of {cell: MODEL/API/SAVED/LOADED glob, reason, expires}."""
    if not path:
        return []
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise UsageError(f"cannot read allow-list {path}: {e}") from None
    if not isinstance(data, list):
        raise UsageError(f"allow-list {path} must be a list of entries with cell, reason and expires")
    out = []
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or not {"cell", "reason", "expires"} <= set(entry):
            raise UsageError(f"allow-list {path} entry {i + 1} needs cell, reason and expires")
        expires = entry["expires"]
        if isinstance(expires, str):
            try:
                expires = dt.date.fromisoformat(expires)
            except ValueError:
                raise UsageError(f"allow-list {path} entry {i + 1}: expires must be YYYY-MM-DD") from None
        if not isinstance(expires, dt.date):
            raise UsageError(f"allow-list {path} entry {i + 1}: expires must be a date")
        if str(entry["cell"]).count("/") != 3:
            raise UsageError(f"allow-list {path} entry {i + 1}: cell must be MODEL/API/SAVED/LOADED (globs allowed)")
        out.append(Allowance(str(entry["cell"]), str(entry["reason"]), expires))
    return out


def classify(
    records: list[dict], allow: list[Allowance], today: dt.date | None = None, strict_runtimes: bool = False
) -> dict:
    """Split failing cells into ``failures`` and ``allowed`` (with the allowance that covers them);
    ``expired``: the failures an allowance would cover but for its date, with that allowance."""
    today = today or dt.date.today()
    failures, allowed, expired = [], [], []
    for rec in records:
        if not is_failure(rec, strict_runtimes):
            continue
        hit = next((a for a in allow if a.matches(rec, today)), None)
        (allowed if hit else failures).append((rec, hit))
        if hit is None:
            lapsed = next((a for a in allow if a.matches(rec, a.expires)), None)
            if lapsed is not None:
                expired.append((rec, lapsed))
    return {"failures": [r for r, _ in failures], "allowed": allowed, "expired": expired}


def worst(verdicts) -> str:
    return max(verdicts, key=SEVERITY.index)
