"""A run's reports: the records as CSV, JUnit XML (one case per cell), Markdown, the summary as HTML, each written
whole and renamed into place; text from records reaches Markdown only through ``md_text`` and ``md_code``."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

from kit.common.artifacts import write_atomic
from kit.common.errors import EXIT_BROKEN, EXIT_MEANINGS, EXIT_OK, EXIT_REGRESSIONS
from kit.common.record_schema import cell_id, flat_row, verdict_counts
from kit.common.verdicts import SEVERITY
from kit.envs import runtime_remedies
from kit.results import leaving, migration, runtime_report, signatures, summary_html
from kit.results.markdown import md_code, md_fence, md_link, md_text
from kit.results.records import is_failure
from kit.results.runs import SUMMARY_NOTEBOOK, executed_notebook
from kit.results.signatures import Group

COLUMNS = [
    "saved_with",
    "model",
    "api",
    "loaded_with",
    "direction",
    "verdict",
    "allowed",
    "reason",
    "load_path",
    "load_attempts",
    "max_abs",
    "max_rel",
    "ulp_max",
    "frac_out_of_tolerance",
    "top1_agreement",
    "cosine_min",
    "load_seconds",
    "infer_seconds",
    "error_type",
    "signature_id",
    "signature",
    "remedy",
    "remedy_verdict",
    "notebook",
    "record_file",
]


#: the directions whose failing cells are reported apart (JUnit: skipped) unless a run asks otherwise
APART = ("forward", "runtime")


def exit_code(manifest: dict, split: dict) -> int:
    """A run's exit code: 3 when a step broke, else 1 when a cell fails the run (or, with --strict-runtimes,
    a runtime does not import), else 0."""
    if any(manifest["steps"][i]["status"] == "failed" for i in manifest["order"]):
        return EXIT_BROKEN
    if manifest.get("request", {}).get("strict_runtimes") and any(
        r.get("verdict") in runtime_remedies.FAILING for r in manifest.get("runtimes") or []
    ):
        return EXIT_REGRESSIONS
    return EXIT_REGRESSIONS if split["failures"] else EXIT_OK


def notebook_in_run(rec: dict) -> str:
    """The executed notebook that produced a record, relative to the run folder (a link that opens from there)."""
    return executed_notebook("reload", rec["loaded_with"])


def notebook_of(run_dir: Path, rec: dict) -> str:
    """The executed notebook that produced a record."""
    return str(Path(run_dir) / notebook_in_run(rec))


def flat_rows(run_dir: Path, records: list[dict], allowed_ids: set) -> list[dict]:
    rows = []
    for rec in records:
        row = flat_row(rec)
        sig = signatures.signature(rec)
        row.update(
            allowed=cell_id(rec) in allowed_ids,
            load_path=rec.get("load_path"),
            load_attempts="; ".join(
                f"{a['path']}: {a.get('headline') or a.get('error')}" for a in rec.get("load_attempts") or []
            ),
            load_seconds=rec.get("load_seconds"),
            infer_seconds=rec.get("infer_seconds"),
            error_type=rec.get("error_type"),
            signature_id=signatures.signature_id(*sig) if sig else None,
            signature=sig[1] if sig else None,
            remedy=remedy_cell(rec),
            remedy_verdict=(rec.get("remedy") or {}).get("verdict"),
            notebook=notebook_of(run_dir, rec),
            record_file=rec.get("record_file"),
        )
        rows.append(row)
    return rows


def remedy_cell(rec: dict) -> str | None:
    """A record's remedy in a few words: ``legacy_shape_semantics: identical`` or ``none: <why>``."""
    remedy = rec.get("remedy")
    if not remedy:
        return None
    if remedy.get("fixed"):
        return f"{remedy['name']}: {remedy['verdict']}"
    return f"none: {remedy.get('why_none')}"


def expired_lines(expired: list) -> list[str]:
    """One Markdown line per (failing cell, lapsed allowance): the entry named, with its date and reason."""
    return [
        f"- {md_code(cell_id(r))} ({md_text(r['verdict'])}): allow-list entry {md_code(a.pattern)} expired "
        f"{a.expires} ({md_text(a.reason)})"
        for r, a in expired
    ]


def write_csv(path: Path, rows: list[dict]) -> None:
    def write(f):
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)

    write_atomic(path, write)


def write_junit(path: Path, rows: list[dict], records: list[dict], manifest: dict) -> None:
    """One testsuite per API, one testcase per cell; forward cells and allowed ones are skipped, not failed."""
    root = ET.Element("testsuites", name=f"mxnet-compat-kit run {manifest['run_id']}")
    by_api: dict = {}
    for row, rec in zip(rows, records):
        by_api.setdefault(row["api"], []).append((row, rec))
    for api, cells in sorted(by_api.items()):
        suite = ET.SubElement(root, "testsuite", name=api, tests=str(len(cells)))
        failures = skipped = 0
        for row, rec in cells:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"{api}.{row['model']}",
                name=f"{row['saved_with']} -> {row['loaded_with']}",
                time=str((row["load_seconds"] or 0) + (row["infer_seconds"] or 0)),
            )
            message = f"{row['verdict']}: {row['reason'] or ''}".strip()
            if row["signature_id"]:  # the group's reference: one message for every cell of an incompatibility
                message = f"[{row['signature_id']}] {row['verdict']}: {row['signature']}"
            if is_failure(rec, manifest.get("request", {}).get("strict_runtimes")) and not row["allowed"]:
                failures += 1
                node = ET.SubElement(case, "failure", message=message, type=row["verdict"])
                remedy = f"remedy: {row['remedy']}" if row["remedy"] else None  # informs; the case still fails
                node.text = "\n".join(t for t in (row["reason"], remedy, rec.get("traceback")) if t) or message
            elif row["verdict"] == "unsupported" or row["allowed"] or row["direction"] in APART:
                skipped += 1
                why = "allowed: " if row["allowed"] else (f"{row['direction']}: " if row["direction"] in APART else "")
                ET.SubElement(case, "skipped", message=why + message)
        suite.set("failures", str(failures))
        suite.set("skipped", str(skipped))
    for step_id in manifest["order"]:
        step = manifest["steps"][step_id]
        if step["status"] == "failed":
            suite = ET.SubElement(root, "testsuite", name="steps", tests="1", errors="1")
            case = ET.SubElement(suite, "testcase", classname="steps", name=step_id)
            node = ET.SubElement(case, "error", message=step_cause(step), type="step-failed")
            node.text = f"{step.get('error')}\nexecuted notebook: {step['output']}"
    for node in root.iter():  # a record's text may hold what XML 1.0 cannot (a control character in an error)
        node.text = _XML_INVALID.sub("\ufffd", node.text) if node.text else node.text
        for key, value in node.attrib.items():
            node.set(key, _XML_INVALID.sub("\ufffd", value))
    write_atomic(path, lambda f: ET.ElementTree(root).write(f, encoding="utf-8", xml_declaration=True), binary=True)


_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _fmt(x) -> str:
    if x is None:
        return ""
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def step_cause(entry: dict) -> str:
    """A broken step's root cause in one line, from its ``run.json`` entry (older runs: the error's last line)."""
    if entry.get("cause"):
        return entry["cause"]
    return ((entry.get("error") or "").strip().splitlines() or ["no error recorded"])[-1][:500]


def skipped_line(entry: dict) -> str:
    """One asked-for thing a run did not check (``run.json``'s ``skipped``), e.g. ``--load 1.2.1: older than ...``."""
    return f"--{entry['kind']} {entry['name']}: {entry['reason']}"


DIRECTION_TITLES = {
    "backward": "Backward (older artifacts in newer releases: these fail the run unless allowed)",
    "same": "Same release (reloaded in the release that saved it, not identical: these fail the run)",
    "unknown": "Checkpoints of unknown origin",
    "onnx": "Leaving MXNet (exported to ONNX, run in ONNX Runtime, OpenVINO or PyTorch: these fail the run unless "
    "allowed)",
    "runtime": "Runtimes (a release's artifacts in another runtime of it, and back: reported apart unless "
    "--strict-runtimes)",
    "forward": "Forward (newer artifacts in older releases, reported apart)",
}


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def starts(group: Group) -> str:
    """Where a group starts: the first release that saved it, or where a numeric error first jumps."""
    return signatures.jump_text(group) if group.first_jump else f"saved with {group.first_saved}"


def headline_lines(
    groups: list[Group], exit_code: int, skipped: list[dict] = (), runtime_line: str | None = None
) -> list[str]:
    """What a reader needs first: the exit code, how many distinct incompatibilities in each direction, and
    each one with where it starts."""
    counts = signatures.counts(groups)
    parts = [
        f"{_plural(counts[d]['signatures'], f'distinct {d} incompatibility', f'distinct {d} incompatibilities')} "
        f"({_plural(counts[d]['cells'], 'cell')}; {_remedy_count(counts[d])})"
        for d in signatures.DIRECTIONS
        if d in counts
    ]
    meaning = EXIT_MEANINGS.get(exit_code, "a step broke")
    lines = [f"**Exit code {exit_code} ({meaning})**: {'; '.join(parts) if parts else 'no incompatibility found'}."]
    if runtime_line:
        lines += ["", md_text(runtime_line) + "."]
    if skipped:
        lines += ["", f"**Asked for, not checked: {len(skipped)}** (listed below)."]
    for d in signatures.DIRECTIONS:
        mine = [g for g in groups if g.direction == d]
        if mine:
            lines += ["", f"{DIRECTION_TITLES[d]}:", ""]
            lines += [
                f"- {md_code(g.signature)}: {md_text(starts(g))}; {_plural(len(g.cells), 'cell')} "
                f"({md_text(', '.join(g.models))}; {md_text(', '.join(g.apis))}) {md_code(g.id)}; "
                f"**{md_text(signatures.remedy_text(g))}**"
                for g in mine
            ]
    return lines


def _remedy_count(count: dict) -> str:
    """``2 with a verified remedy, 1 in part, 0 without``."""
    none = count["signatures"] - count["remedied"] - count["partly"]
    partly = f", {count['partly']} in part" if count["partly"] else ""
    return f"{count['remedied']} with a verified remedy{partly}, {none} without"


def groups_table(groups: list[Group]) -> list[str]:
    """Every group in a Markdown table: the signature, where it starts, what it touches, one verbatim example."""
    out = [
        "| direction | signature | id | starts | saved with | loaded with | models | APIs | cells | remedy | example |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for g in groups:
        verdicts = ", ".join(f"{v} {n}" for v, n in g.verdicts.items())
        out.append(
            f"| {md_text(g.direction)} | {md_code(g.signature, table=True)} | {md_code(g.id, table=True)} "
            f"| {md_text(starts(g))} | {md_text(signatures.span(g.saved_with))} "
            f"| {md_text(signatures.span(g.loaded_with))} | {md_text(', '.join(g.models))} "
            f"| {md_text(', '.join(g.apis))} | {len(g.cells)} ({md_text(verdicts)}) "
            f"| {md_text(signatures.remedy_text(g))} | {md_text(g.example[:200])} |"
        )
    return out


def remedy_lines(groups: list[Group], level: str = "###") -> list[str]:
    """Each remedy that fixed a group, with what it changed and the user's code that does the same."""
    out = []
    for g in groups:
        fixes = (g.remedy or {}).get("by", [])
        if fixes:
            out += [f"{level} {md_code(g.id)} {md_text(g.direction)}: {md_text(g.signature)}", ""]
        for entry in fixes:
            verdicts = ", ".join(f"{v} {entry['verdicts'][v]}" for v in SEVERITY if v in entry["verdicts"])
            out += [
                f"**{md_text(entry['name'])}** ({md_text(entry.get('title'))}): {verdicts} of {g.remedy['cells']} "
                f"cells, max abs {md_text(_fmt(entry['max_abs']))} (e.g. {md_code(entry['example_cell'])}).",
                "",
                *md_fence((entry.get("user_code") or "").strip(), "python"),
                "",
            ]
    return out


def write_markdown(
    path: Path,
    rows: list[dict],
    split: dict,
    manifest: dict,
    exit_code: int,
    records: list[dict] = (),
    groups: list[Group] = (),
) -> None:
    req = manifest["request"]
    lines = [f"# MXNet compatibility run {md_code(manifest['run_id'])}", ""]
    lines += headline_lines(
        list(groups), exit_code, manifest.get("skipped") or [], runtime_report.headline(manifest, list(records))
    )
    lines += [
        "",
        f"- saved with: {md_text(', '.join(req['save']))}",
        f"- loaded with: {md_text(', '.join(req['load']))}",
        f"- models: {md_text(', '.join(req['models']) or 'all')}; APIs: {md_text(', '.join(req['apis']) or 'all')}",
    ]
    if manifest.get("skipped"):
        lines += ["", "## Asked for, not checked", ""] + skipped_markdown(manifest["skipped"])
    if groups:
        lines += ["", "## Incompatibilities, grouped by signature", ""] + groups_table(list(groups))
        fixes = remedy_lines(list(groups))
        if fixes:
            lines += [
                "",
                "## Verified remedies (what to change so that it works; the verdicts above stay as measured)",
                "",
            ] + fixes
    lines += [
        "",
        "## Verdicts",
        "",
        "| direction | verdict | cells |",
        "|---|---|---|",
    ]
    counts = verdict_counts(rows)
    lines += [f"| {md_text(d)} | {md_text(v)} | {n} |" for d in sorted(counts) for v, n in sorted(counts[d].items())]
    failing = [r for r in rows if not r["allowed"] and cell_id(r) in {cell_id(x) for x in split["failures"]}]
    lines += ["", "## Cells that fail the run", ""]
    lines += _cell_table(failing) if failing else ["None."]
    if split.get("expired"):
        lines += ["", "## Allow-list entries that expired (their cells fail again)", ""]
        lines += expired_lines(split["expired"])
    if split["allowed"]:
        lines += [
            "",
            "## Allowed (known incompatibilities)",
            "",
            "| cell | verdict | reason | expires |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {md_text(cell_id(r))} | {md_text(r['verdict'])} | {md_text(a.reason)} | {a.expires} |"
            for r, a in split["allowed"]
        ]
    e2e_split = [r for r in records if r.get("network_only")]
    if e2e_split:
        lines += [
            "",
            "## End-to-end models: transforms or network (the network alone, fed this release's eager transforms)",
            "",
            "| cell | full graph | network alone | fused vs eager transforms |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {md_text(cell_id(r))} | {md_text(r['verdict'])} | {md_text(r['network_only']['verdict'])} "
            f"| {md_text((r['network_only'].get('transforms') or {}).get('verdict', '-'))} |"
            for r in e2e_split
        ]
    runtimes = runtime_report.markdown(manifest, list(records))
    if runtimes:
        lines += [
            "",
            "## Runtimes (each release with what changes under it: Python, numpy, build flavour, MXNET_* switches)",
            "",
        ] + runtimes
    leaving_mxnet = leaving.markdown(list(records))
    if leaving_mxnet:
        lines += [
            "",
            "## Leaving MXNet (each graph exported to ONNX by an MXNet release, run in each exit's runtime)",
            "",
        ] + leaving_mxnet
    migrating = migration.markdown(list(records))
    if migrating:
        lines += [
            "",
            "## Migrating to MXNet 2.0 (1.x artifacts loaded in 2.0, verdicts over the models and the load path used)",
            "",
        ] + migrating
    forward = [
        r for r in rows if r["direction"] == "forward" and r["verdict"] not in ("identical", "close", "unsupported")
    ]
    if forward:
        lines += ["", "## Forward direction (newer artifacts in older releases, reported apart)", ""]
        lines += _cell_table(forward)
    broken = [i for i in manifest["order"] if manifest["steps"][i]["status"] == "failed"]
    if broken:
        lines += ["", "## Steps that broke", ""]
        for i in broken:
            notebook = _in_run(path.parent, manifest["steps"][i]["output"])
            log = f"logs/{i.replace(':', '-')}.log"
            lines.append(
                f"- {md_code(i)}: {md_text(step_cause(manifest['steps'][i]))} (executed notebook: "
                f"{md_link(notebook)}, log: {md_link(log)})"
            )
    lines += ["", f"Reproduce: {md_code(reproduce_command(req))}", ""]
    write_atomic(path, lambda f: f.write("\n".join(lines)))


def skipped_markdown(skipped: list[dict]) -> list[str]:
    """One Markdown line per asked-for thing a run did not check."""
    return [f"- {md_code('--%s %s' % (e['kind'], e['name']))}: {md_text(e['reason'])}" for e in skipped]


def _in_run(run_dir: Path, path: str) -> str:
    """``path`` relative to the run folder when it lies there (a link that opens from summary.md)."""
    try:
        return str(Path(path).relative_to(run_dir))
    except ValueError:
        return str(path)


def _cell_table(rows: list[dict]) -> list[str]:
    out = [
        "| model | api | saved | loaded | verdict | signature | max abs | reason | notebook |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {md_text(r['model'])} | {md_text(r['api'])} | {md_text(r['saved_with'])} | {md_text(r['loaded_with'])} "
            f"| {md_text(r['verdict'])} | {md_code(r['signature_id'], table=True)} | {md_text(_fmt(r['max_abs']))} "
            f"| {md_text(str(r['reason'] or '')[:160])} | {md_link(notebook_in_run(r))} |"
        )
    return out


def groups_of(records: list[dict], split: dict) -> list[Group]:
    """A run's incompatibility groups, counting the cells that fail it and those its allow-list excuses."""
    return signatures.group_records(
        records, {cell_id(r) for r in split["failures"]}, {cell_id(r) for r, _ in split["allowed"]}
    )


def write_all(run_dir: Path, records: list[dict], split: dict, manifest: dict, exit_code: int) -> list[Group]:
    """Every report of a run; returns its incompatibility groups."""
    allowed_ids = {cell_id(r) for r, _ in split["allowed"]}
    rows = flat_rows(run_dir, records, allowed_ids)
    groups = groups_of(records, split)
    write_csv(run_dir / "records.csv", rows)
    write_junit(run_dir / "junit.xml", rows, records, manifest)
    write_markdown(run_dir / "summary.md", rows, split, manifest, exit_code, records, groups)
    summary = run_dir / SUMMARY_NOTEBOOK
    if summary.exists() and manifest["steps"].get("summary", {}).get("status") in ("ok", "failed"):
        summary_html.write_html(summary, run_dir / "summary.html")
    return groups


def reproduce_command(request: dict, *, save=None, load=None, cells=None) -> str:
    """The ``mxcompat run`` line that asks again what ``request`` (a run manifest's) asked, with every option
    that can change a verdict (tolerance, allow-list, forward, store, epochs, versions); ``save``, ``load`` and
    ``cells`` narrow it, e.g. to one cell of a bundle."""
    import shlex

    named_save = save is not None
    save = request.get("save") if save is None else save
    load = request.get("load") if load is None else load
    parts = ["mxcompat", "run"]
    if save and (named_save or not request.get("reload_only")):
        parts += ["--save", ",".join(save)]
    parts += ["--load", ",".join(load)]
    if cells is not None:
        parts += ["--cells", ",".join(cells)]
    else:
        for flag, key in (("--models", "models"), ("--apis", "apis"), ("--cells", "cells")):
            if request.get(key):
                parts += [flag, ",".join(request[key])]
    if request.get("tolerance"):
        parts += ["--tolerance", json.dumps(request["tolerance"], sort_keys=True, separators=(",", ":"))]
    if request.get("allow_list"):
        parts += ["--allow-list", request["allow_list"]]
    if request.get("epochs"):
        parts += ["--epochs", str(request["epochs"])]
    if request.get("versions", "current") != "current":
        parts += ["--versions", request["versions"]]
    if request.get("store"):
        parts += ["--store", request["store"]]
    if request.get("forward"):
        parts.append("--forward")
    if request.get("strict_runtimes"):
        parts.append("--strict-runtimes")
    return " ".join(shlex.quote(p) for p in parts)
