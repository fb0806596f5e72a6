"""A finished run as a bug report's Markdown body, and as a JSON summary posted to a webhook."""

from __future__ import annotations

import json
import time
from pathlib import Path

from kit.common.errors import EXIT_MEANINGS
from kit.results import leaving, reports
from kit.common import artifacts
from kit.common.errors import KitError, UsageError
from kit.common.record_schema import cell_id, verdict_counts
from kit.results.records import load_finished
from kit.results.signatures import line
from kit.results.runs import Run

WEBHOOK_TIMEOUT = 10
WEBHOOK_ATTEMPTS = 3


def _bundle_of(run: Run, rec: dict) -> Path | None:
    """The bundle ``mxcompat bundle`` made of a cell (its default place), if there is one."""
    path = (
        run.dir
        / "bundles"
        / f"{artifacts.cell_stem(rec['saved_with'], rec['model'], rec['api'], rec['loaded_with'])}.zip"
    )
    return path if path.is_file() else None


def issue_markdown(run: Run) -> str:
    """A Markdown body for a bug report: releases, verdict table, failing cells with their errors, bundles."""
    manifest, records, split = load_finished(run)
    req = manifest["request"]
    code = manifest["exit_code"]
    lines = [
        f"### MXNet compatibility: {EXIT_MEANINGS.get(code, 'a step broke')} (run `{run.id}`)",
        "",
        f"Artifacts saved with {', '.join(req['save'])} were loaded in {', '.join(req['load'])} "
        f"by mxnet-compat-kit {manifest.get('kit_version')}; exit code {code}.",
        "",
        "| direction | verdict | cells |",
        "|---|---|---|",
    ]
    counts = verdict_counts(records)
    lines += [f"| {d} | {v} | {n} |" for d in sorted(counts) for v, n in sorted(counts[d].items())]
    groups = reports.groups_of(records, split)
    if groups:
        lines += ["", f"#### Incompatibilities ({len(groups)}, one line each)", ""]
        lines += [f"- {'**fails the run** ' if g.failing else ''}`{line(g)}`" for g in groups]
        fixes = reports.remedy_lines(groups, level="#####")
        if fixes:
            lines += ["", "#### Verified remedies (the cells still fail as they are; this is what makes them work)", ""]
            lines += fixes
    leaving_mxnet = leaving.markdown(records)
    if leaving_mxnet:
        lines += ["", "#### Leaving MXNet (exported to ONNX, run in ONNX Runtime)", ""] + leaving_mxnet
    lines += ["", f"#### Failing cells ({len(split['failures'])})", ""]
    if not split["failures"]:
        lines.append("None.")
    for rec in split["failures"]:
        error = (rec.get("error") or rec.get("reason") or "").strip().splitlines()
        lines += [f"- **`{cell_id(rec)}`**: {rec['verdict']}: {rec.get('reason') or ''}".rstrip(": ")]
        if error and rec.get("error"):
            lines += ["  ```", f"  {error[-1][:500]}", "  ```"]
        bundle = _bundle_of(run, rec)
        if rec.get("remedy"):
            lines.append(f"  - remedy: {reports.remedy_cell(rec)}")
        lines.append(f"  - executed notebook: `{reports.notebook_of(run.dir, rec)}`")
        lines.append(
            f"  - bundle: `{bundle}`"
            if bundle
            else f"  - bundle: `mxcompat bundle {run.id} --cell {cell_id(rec)}` makes one to attach"
        )
    if split["expired"]:
        lines += ["", "#### Allow-list entries that expired", ""] + reports.expired_lines(split["expired"])
    broken = [i for i in manifest["order"] if manifest["steps"][i]["status"] == "failed"]
    if broken:
        lines += ["", "#### Steps that broke", ""]
        lines += [f"- `{i}`: {reports.step_cause(manifest['steps'][i])}" for i in broken]
    if manifest.get("skipped"):
        lines += ["", "#### Asked for, not checked", ""]
        lines += [f"- `--{e['kind']} {e['name']}`: {e['reason']}" for e in manifest["skipped"]]
    lines += ["", f"Run folder: `{run.dir}` (summary.html, summary.md, junit.xml, records.csv)."]
    return "\n".join(lines) + "\n"


def summary_payload(run: Run) -> dict:
    """The run's outcome as JSON for a webhook: counts, incompatibility groups, failing cells, expired
    allowances, broken steps."""
    manifest, records, split = load_finished(run)
    return {
        "kind": "mxnet-compat-kit.run",
        "run_id": run.id,
        "kit_version": manifest.get("kit_version"),
        "exit_code": manifest["exit_code"],
        "outcome": EXIT_MEANINGS.get(manifest["exit_code"], "a step broke"),
        "save": manifest["request"]["save"],
        "load": manifest["request"]["load"],
        "counts": verdict_counts(records),
        "signatures": [g.as_dict() for g in reports.groups_of(records, split)],
        "failures": [
            {"cell": cell_id(r), "verdict": r["verdict"], "reason": r.get("reason")} for r in split["failures"]
        ],
        "expired_allowances": [
            {"cell": cell_id(r), "entry": a.pattern, "expired": str(a.expires), "reason": a.reason}
            for r, a in split["expired"]
        ],
        "broken_steps": [i for i in manifest["order"] if manifest["steps"][i]["status"] == "failed"],
        "broken_step_causes": {
            i: reports.step_cause(e) for i, e in manifest["steps"].items() if e["status"] == "failed"
        },
        "skipped": manifest.get("skipped", []),
        "leaving_mxnet": leaving.rows(records),
        "run_dir": str(run.dir),
    }


def post_webhook(url: str, payload: dict, *, attempts: int = WEBHOOK_ATTEMPTS) -> int:
    """POST ``payload`` as JSON to ``url``; the HTTP status. Connection errors, timeouts and 5xx are retried, so
    a receiver that answered too late may get the same summary twice (at least once, never lost silently)."""
    import urllib.error
    import urllib.request

    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--webhook needs an http(s):// URL, got {url!r}")
    body = json.dumps(payload).encode()
    last = None
    for attempt in range(1, attempts + 1):
        request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT) as response:
                return response.status
        except urllib.error.HTTPError as e:
            if e.code < 500:
                raise KitError(f"the webhook {url} refused the summary: HTTP {e.code} {e.reason}") from None
            last = f"HTTP {e.code} {e.reason}"
        except (urllib.error.URLError, OSError) as e:
            last = str(getattr(e, "reason", e))
        if attempt < attempts:
            time.sleep(0.5 * attempt)
    raise KitError(f"the webhook {url} could not be reached after {attempts} attempts: {last}")
