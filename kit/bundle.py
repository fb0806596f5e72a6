"""A bundle: one failing cell of a run as a zip to attach to a bug report."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from kit.cells import Cell
from kit.common.errors import UsageError
from kit.common.verdicts import PARAMS_AS_SAVED
from kit.runs import Run, runs_dir


def _fmt(x) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def markdown(cell: Cell, record: dict, run_manifest: dict, investigation: dict | None) -> str:
    """The bundle's README: releases, verdict, metrics, first diverging layer, how to reproduce."""
    s = record.get("summary") or {}
    saved_fp, loaded_fp = record.get("saved_fingerprint") or {}, record.get("loaded_fingerprint") or {}
    lines = [
        f"# MXNet compatibility: `{cell}`",
        "",
        f"A `{cell.model}` model saved with MXNet **{cell.saved}** through `{cell.api}`, loaded with MXNet "
        f"**{cell.loaded}** ({record['direction']} direction): **{record['verdict']}**.",
        "",
    ]
    if record.get("reason"):
        lines += [f"> {record['reason']}", ""]
    lines += ["| | saved with | loaded with |", "|---|---|---|"]
    for label, key in (("release", "release"), ("mx.__version__", "mxnet"), ("Python", "python"), ("numpy", "numpy")):
        lines.append(f"| {label} | {saved_fp.get(key, '-')} | {loaded_fp.get(key, '-')} |")
    feats = lambda fp: " ".join(fp.get("mxnet_features") or []) or "n/a"  # noqa: E731
    lines.append(f"| features | {feats(saved_fp)} | {feats(loaded_fp)} |")
    lines.append(
        f"| CPU | {(saved_fp.get('cpu') or {}).get('model', '-')} | {(loaded_fp.get('cpu') or {}).get('model', '-')} |"
    )
    lines += [
        "",
        "## Metrics",
        "",
        "| case | output | max abs | max rel | ULP | out of tolerance | top-1 agreement |",
        "|---|---|---|---|---|---|---|",
    ]
    for case, outs in sorted((record.get("cases") or {}).items()):
        for i, m in enumerate(outs):
            lines.append(
                f"| {case} | {i} | {_fmt(m.get('max_abs'))} | {_fmt(m.get('max_rel'))} | "
                f"{_fmt(m.get('ulp_max'))} | {_fmt(m.get('frac_out_of_tolerance'))} | "
                f"{_fmt(m.get('top1_agreement'))} |"
            )
    if not record.get("cases"):
        lines.append(f"| - | - | {_fmt(s.get('max_abs'))} | - | - | - | - |")
    if record.get("error"):
        lines += ["", "## Error", "", "```", (record.get("traceback") or record["error"]).strip(), "```"]
    if investigation:
        first = investigation.get("first_divergence")
        lines += ["", "## Where it starts", ""]
        if first:
            lines.append(
                f"The first node past tolerance is #{first['index']} `{first['node']}` (op `{first['op']}`, "
                f"max abs error {_fmt(first.get('max_abs'))})."
            )
        else:
            lines.append(f"No node is past tolerance ({len(investigation.get('rows', []))} nodes compared).")
        params = investigation.get("parameters")
        if params is None:
            lines.append("The artifact records no table of its saved parameters.")
        else:
            changed = [p for p in params if p["status"] not in PARAMS_AS_SAVED]
            lines.append(
                f"{len(changed)} of {len(params)} parameter(s) did not load as saved"
                + (": " + ", ".join(f"`{p['name']}` ({p['status']})" for p in changed) if changed else ".")
            )
    req = run_manifest.get("request", {})
    forward = " --forward" if record["direction"] == "forward" else ""
    store = f" --store {req['store']}" if req.get("store") else ""
    lines += [
        "",
        "## Reproduce",
        "",
        "```bash",
        f"mxcompat env create {cell.saved} {cell.loaded}",
        f"mxcompat run --save {cell.saved} --load {cell.loaded} --models {cell.model} --apis {cell.api}"
        f"{forward}{store}",
        f"mxcompat investigate <run-id> --cell {cell}",
        "```",
        "",
        f"From run `{run_manifest['run_id']}` of mxnet-compat-kit {run_manifest.get('kit_version', '')}.",
        "",
    ]
    return "\n".join(lines)


def make_bundle(run_id: str, cell: Cell, *, runs_root: str | Path | None = None, out: str | Path | None = None) -> Path:
    """Zip the evidence of ``cell``: notebooks and their HTML, record, manifests, fingerprints, README.md."""
    from kit.reports import write_html

    run = Run(runs_root or runs_dir(), run_id)
    if not run.exists():
        raise UsageError(f"no run {run_id} in {run.dir.parent}")
    manifest = run.read_manifest()
    record_path = run.dir / "records" / f"{cell.slug}.json"
    if not record_path.is_file():
        raise UsageError(
            f"run {run_id} has no record for {cell}",
            hint="cells look like MODEL/API/SAVED/LOADED; see records.csv in the run folder",
        )
    record = json.loads(record_path.read_text())
    investigation_path = run.dir / "investigate" / f"{cell.slug}.json"
    investigation = json.loads(investigation_path.read_text()) if investigation_path.is_file() else None
    notebooks = [
        run.dir / "train" / f"mxnet-{cell.saved}.ipynb",
        run.dir / "reload" / f"mxnet-{cell.loaded}.ipynb",
        run.dir / "investigate" / f"{cell.slug}.ipynb",
    ]
    artifact_manifest = Path(manifest["store"]) / cell.saved / cell.model / cell.api / "manifest.json"
    out = Path(out) if out else run.dir / "bundles" / f"{cell.slug}.zip"
    out.parent.mkdir(parents=True, exist_ok=True)
    html_dir = run.dir / "bundles" / ".html"
    html_dir.mkdir(parents=True, exist_ok=True)
    root = cell.slug  # every member lives under one folder named by the kit, never by a file's own path
    tmp = out.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{root}/README.md", markdown(cell, record, manifest, investigation))
        z.write(record_path, f"{root}/record.json")
        z.writestr(
            f"{root}/fingerprints.json",
            json.dumps(
                {"saved": record.get("saved_fingerprint"), "loaded": record.get("loaded_fingerprint")}, indent=1
            ),
        )
        z.writestr(f"{root}/run.json", json.dumps(manifest, indent=1))
        if artifact_manifest.is_file():
            z.write(artifact_manifest, f"{root}/artifact-manifest.json")
        if investigation is not None:
            z.write(investigation_path, f"{root}/investigation.json")
        for nb in notebooks:
            if nb.is_file():
                name = f"{nb.parent.name}-{nb.stem}"
                z.write(nb, f"{root}/notebooks/{name}.ipynb")
                html = html_dir / f"{name}.html"
                write_html(nb, html)
                z.write(html, f"{root}/notebooks/{name}.html")
    tmp.replace(out)
    return out
