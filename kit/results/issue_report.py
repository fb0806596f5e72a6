"""A finished run as a bug report's Markdown body, and as a JSON summary posted to a webhook.

A webhook URL holds its token (Slack-style, in its path or query): the kit shows it only as
``scheme://host/...`` (``redact``), in what it prints and in every error.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from kit.common import artifacts
from kit.common.errors import EXIT_MEANINGS, KitError, UsageError
from kit.common.record_schema import cell_id, verdict_counts
from kit.common.versions import sort_key
from kit.results import leaving, reports, runtime_report
from kit.results.markdown import md_code, md_fence, md_text
from kit.results.records import load_finished
from kit.results.runs import Run
from kit.results.signatures import line

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
        f"### MXNet compatibility: {md_text(EXIT_MEANINGS.get(code, 'a step broke'))} (run {md_code(run.id)})",
        "",
        f"Artifacts saved with {md_text(', '.join(req['save']))} were loaded in {md_text(', '.join(req['load']))} "
        f"by mxnet-compat-kit {md_text(manifest.get('kit_version'))}; exit code {md_text(code)}.",
        "",
        "| direction | verdict | cells |",
        "|---|---|---|",
    ]
    counts = verdict_counts(records)
    lines += [f"| {md_text(d)} | {md_text(v)} | {n} |" for d in sorted(counts) for v, n in sorted(counts[d].items())]
    groups = reports.groups_of(records, split)
    if groups:
        lines += ["", f"#### Incompatibilities ({len(groups)}, one line each)", ""]
        lines += [f"- {'**fails the run** ' if g.failing else ''}{md_code(line(g))}" for g in groups]
        fixes = reports.remedy_lines(groups, level="#####")
        if fixes:
            lines += ["", "#### Verified remedies (the cells still fail as they are; this is what makes them work)", ""]
            lines += fixes
    runtimes = runtime_report.markdown(manifest, records)
    if runtimes:
        lines += ["", "#### Runtimes (the release with what changes under it)", ""]
        lines += runtimes
    leaving_mxnet = leaving.markdown(records)
    if leaving_mxnet:
        lines += ["", "#### Leaving MXNet (exported to ONNX, run in ONNX Runtime)", ""]
        lines += leaving_mxnet
    lines += ["", f"#### Failing cells ({len(split['failures'])})", ""]
    if not split["failures"]:
        lines.append("None.")
    for rec in split["failures"]:
        error = (rec.get("error") or rec.get("reason") or "").strip().splitlines()
        reason = f": {md_text(rec['reason'])}" if rec.get("reason") else ""
        lines += [f"- **{md_code(cell_id(rec))}**: {md_text(rec['verdict'])}{reason}".rstrip(": ")]
        if error and rec.get("error"):
            lines += ["  " + x for x in md_fence(error[-1][:500])]
        bundle = _bundle_of(run, rec)
        if rec.get("remedy"):
            lines.append(f"  - remedy: {md_text(reports.remedy_cell(rec))}")
        lines.append(f"  - executed notebook: {md_code(reports.notebook_of(run.dir, rec))}")
        lines.append(
            f"  - bundle: {md_code(bundle)}"
            if bundle
            else f"  - bundle: {md_code(f'mxcompat bundle {run.id} --cell {cell_id(rec)}')} makes one to attach"
        )
    if split["expired"]:
        lines += ["", "#### Allow-list entries that expired", ""] + reports.expired_lines(split["expired"])
    broken = [i for i in manifest["order"] if manifest["steps"][i]["status"] == "failed"]
    if broken:
        lines += ["", "#### Steps that broke", ""]
        lines += [f"- {md_code(i)}: {md_text(reports.step_cause(manifest['steps'][i]))}" for i in broken]
    if manifest.get("skipped"):
        lines += ["", "#### Asked for, not checked", ""] + reports.skipped_markdown(manifest["skipped"])
    lines += ["", f"Run folder: {md_code(run.dir)} (summary.html, summary.md, junit.xml, records.csv)."]
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
        "runtimes": [
            dict(row, remedies=entry.get("remedies") or [], verified=entry.get("verified"), error=entry.get("error"))
            for row, entry in zip(
                runtime_report.rows(manifest, records),
                sorted(manifest.get("runtimes") or [], key=lambda e: sort_key(e["name"])),
            )
        ],
        "runtime_disagreements": runtime_report.disagreements(records),
        "run_dir": str(run.dir),
    }


def redact(url: str) -> str:
    """A webhook URL as the kit may print it: ``scheme://host[:port]/...``, without the path, query and user
    that hold its token."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    try:
        port = parts.port
    except ValueError:  # not a number: shown as no port
        port = None
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme or '?'}://{host}{f':{port}' if port else ''}/..."


def _scrub(text: str, url: str) -> str:
    """``text`` (an error's) with ``url`` and each part of it that may hold a token replaced by ``...``."""
    parts = urllib.parse.urlsplit(url)
    port = parts.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]  # "host:T000" is a typo'd path
    secrets = {url, parts.path, parts.query, parts.fragment, parts.username, parts.password}
    secrets |= {port} if not port.isdigit() else set()
    secrets |= {urllib.parse.unquote(x) for x in secrets if x}
    for secret in sorted((x for x in secrets if x and x != "/"), key=len, reverse=True):
        text = text.replace(secret, "...")
    return text


def _sendable(url: str) -> bool:
    """An http(s) URL with a host and no port that is not a number."""
    parts = urllib.parse.urlsplit(url)
    try:
        parts.port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is not followed: urllib would send a POST on as a GET without its body, and report that."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # the redirect reaches the caller as an HTTPError with its code and Location


def post_webhook(url: str, payload: dict, *, attempts: int = WEBHOOK_ATTEMPTS) -> int:
    """POST ``payload`` as JSON to ``url``; the HTTP status (2xx: the receiver took it).

    Connection errors, timeouts and 5xx are retried, so a receiver that answered too late may get the same summary
    twice (at least once, never lost silently). A redirect is refused, not followed: a summary counts as posted
    only where it was sent. Errors show the URL as ``redact`` does."""
    import http.client

    shown = redact(url)
    if not _sendable(url):
        raise UsageError(
            "--webhook needs an http(s):// URL with a host and, if it names one, a numeric port "
            "(the value given is not shown: it may hold a token)"
        )
    body = json.dumps(payload).encode()
    opener = urllib.request.build_opener(_RefuseRedirects)
    last = None
    for attempt in range(1, attempts + 1):
        request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
        try:
            with opener.open(request, timeout=WEBHOOK_TIMEOUT) as response:
                return response.status
        except urllib.error.HTTPError as e:
            e.close()
            reason = _scrub(str(e.reason), url)
            if 300 <= e.code < 400:
                target = e.headers.get("Location")
                where = f"a redirect to {redact(urllib.parse.urljoin(url, target))}" if target else "a redirect"
                raise KitError(
                    f"the webhook {shown} answered HTTP {e.code} {reason}, {where}: the summary was not posted "
                    "(a redirect is not followed)",
                    hint="give --webhook the URL it redirects to",
                ) from None
            if e.code < 500:
                raise KitError(f"the webhook {shown} refused the summary: HTTP {e.code} {reason}") from None
            last = f"HTTP {e.code} {reason}"
        except (ValueError, http.client.InvalidURL) as e:  # a URL urllib cannot send to
            raise UsageError(f"--webhook {shown} is not a URL the kit can post to: {_scrub(str(e), url)}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            last = _scrub(str(getattr(e, "reason", e)), url)
        if attempt < attempts:
            time.sleep(0.5 * attempt)
    raise KitError(f"the webhook {shown} could not be reached after {attempts} attempts: {last}")
