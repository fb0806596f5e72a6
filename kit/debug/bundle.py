"""A bundle: one failing cell of a run, or a whole run, as a zip to attach to a bug report."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from kit.common import artifacts
from kit.common.artifacts import MANIFEST, TRAIN_NOTEBOOK
from kit.common.capabilities import EXIT_APIS, EXIT_ARTIFACTS, ONNX_API
from kit.common.errors import UsageError
from kit.common.names import is_safe_name
from kit.common.verdicts import PARAMS_AS_SAVED
from kit.debug.run_files import cell_artifact, read_record, record_path, run_store
from kit.envs import onnx_path
from kit.results.cells import Cell
from kit.results.markdown import md_code, md_fence, md_text
from kit.results.reports import reproduce_command
from kit.results.runs import Run, default_runs_dir, executed_notebook


def _fmt(x) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def remedy_markdown(record: dict) -> list[str]:
    """What the remedies did for this cell: each one tried, its verdict or error, and the code that works."""
    remedy = record.get("remedy")
    if not remedy:
        return []
    lines = ["", "## Remedies tried (the verdict above stays: this is what makes it work)", ""]
    for t in remedy.get("tried") or []:
        said = t.get("reason") or ""
        max_abs = (t.get("summary") or {}).get("max_abs")
        lines.append(
            f"- {md_code(t['name'])}: **{md_text(t['verdict'])}**"
            + (f", max abs {_fmt(max_abs)}" if max_abs is not None else "")
            + (f": {md_text(said)}" if said else "")
        )
    if remedy.get("fixed"):
        lines += ["", f"Fixed by {md_code(remedy['name'])}; the code that does the same:", ""]
        lines += md_fence(remedy["user_code"].strip(), "python")
    else:
        lines += ["", f"No known remedy: {md_text(remedy.get('why_none'))}"]
    return lines


def markdown(
    cell: Cell, record: dict, run_manifest: dict, investigation: dict | None, made_by: str | None = None
) -> str:
    """The bundle's README: releases, verdict, metrics, first diverging layer, how the artifact was made
    (``made_by``: the train step whose notebook the bundle holds), how to reproduce."""
    s = record.get("summary") or {}
    saved_fp, loaded_fp = record.get("saved_fingerprint") or {}, record.get("loaded_fingerprint") or {}
    lines = [
        f"# MXNet compatibility: `{cell}`",
        "",
        f"A `{cell.model}` model saved with MXNet **{cell.saved}** through `{cell.api}`, loaded with MXNet "
        f"**{cell.loaded}** ({md_text(record['direction'])} direction): **{md_text(record['verdict'])}**.",
        "",
    ]
    if record.get("reason"):
        lines += [f"> {md_text(record['reason'])}", ""]
    lines += ["| | saved with | loaded with |", "|---|---|---|"]
    for label, key in (("release", "release"), ("mx.__version__", "mxnet"), ("Python", "python"), ("numpy", "numpy")):
        lines.append(f"| {label} | {md_text(saved_fp.get(key, '-'))} | {md_text(loaded_fp.get(key, '-'))} |")
    feats = lambda fp: md_text(" ".join(fp.get("mxnet_features") or []) or "n/a")  # noqa: E731
    lines.append(f"| features | {feats(saved_fp)} | {feats(loaded_fp)} |")
    cpu = lambda fp: md_text((fp.get("cpu") or {}).get("model", "-"))  # noqa: E731
    lines.append(f"| CPU | {cpu(saved_fp)} | {cpu(loaded_fp)} |")
    if made_by:
        lines += ["", f"How the artifact was made: `notebooks/train-mxnet-{cell.saved}.ipynb`, executed as {made_by}."]
    for entry in run_manifest.get("runtimes") or []:  # a side of the cell that is a runtime: how it imports
        if entry["name"] in (cell.saved, cell.loaded):
            remedies = entry.get("remedies") or []
            lines += [
                "",
                f"Runtime {md_code(entry['name'])} ({md_text(entry.get('changes'))}): "
                f"{md_text(entry.get('verdict') or 'not built on this machine')}"
                + (f" {md_text(', '.join(r['name'] for r in remedies))}" if remedies else "")
                + ".",
            ]
            for remedy in remedies:
                lines += ["", f"{md_text(remedy['name'])}: {md_text(remedy['changes'])}", ""]
                lines += md_fence("\n".join(remedy["paste"]), "python")
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
        lines += ["", "## Error", ""] + md_fence((record.get("traceback") or record["error"]).strip())
    lines += remedy_markdown(record)
    if investigation:
        first = investigation.get("first_divergence")
        lines += ["", "## Where it starts", ""]
        under = investigation.get("compared_under")
        if under:  # an error cell: its layers were compared under the remedy that fixes it
            lines.append(
                f"Compared layer by layer under remedy {md_code(under['name'])} ({md_text(under.get('title'))}):"
            )
        if first:
            lines.append(
                f"The first node past tolerance is #{first['index']} {md_code(first['node'])} "
                f"(op {md_code(first['op'])}, "
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
                + (
                    ": " + ", ".join(f"{md_code(p['name'])} ({md_text(p['status'])})" for p in changed)
                    if changed
                    else "."
                )
            )
    again = reproduce_command(
        run_manifest.get("request", {}), save=[cell.saved], load=[cell.loaded], cells=[f"{cell.model}:{cell.api}"]
    )
    lines += [
        "",
        "## Reproduce",
        "",
        "```bash",
        f"mxcompat env create {cell.saved} {cell.loaded}",
        again,
        f"mxcompat investigate <run-id> --cell {cell}",
        "```",
        "",
        f"From run {md_code(run_manifest['run_id'])} of mxnet-compat-kit "
        f"{md_text(run_manifest.get('kit_version', ''))}.",
        "",
    ]
    return "\n".join(lines)


def _train_notebook(run: Run, artifact: Path, release: str) -> Path | None:
    """The executed notebook that made ``artifact``: kept with it in the store (also when an earlier run
    trained it), else this run's own train notebook of ``release``."""
    kept = artifact / TRAIN_NOTEBOOK
    if kept.is_file():
        return kept
    own = run.dir / executed_notebook("train", release)
    return own if own.is_file() else None


def _made_by(train_notebook: Path | None) -> str | None:
    if train_notebook is None:
        return None
    if train_notebook.name == TRAIN_NOTEBOOK:  # kept in the store: its manifest names the step
        try:
            saved_by = json.loads((train_notebook.parent / MANIFEST).read_text()).get("saved_by")
        except (OSError, ValueError):
            saved_by = None
        return f"step `{saved_by}`" if saved_by else "an earlier run"
    return "this run's train step"


def make_bundle(run_id: str, cell: Cell, *, runs_dir: str | Path | None = None, out: str | Path | None = None) -> Path:
    """Zip the evidence of ``cell``: notebooks and their HTML, record, manifests, fingerprints, README.md."""
    from kit.results.summary_html import write_html

    run = Run(runs_dir or default_runs_dir(), run_id)
    if not run.exists():
        raise UsageError(f"no run {run_id} in {run.dir.parent}")
    manifest = run.read_manifest()
    record = read_record(run, cell)
    investigation_path = run.dir / "investigate" / f"{cell.slug}.json"
    investigation = json.loads(investigation_path.read_text()) if investigation_path.is_file() else None
    source_api = record.get("source_api") or cell.api  # a c_predict or onnx cell loads another API's artifact
    artifact = cell_artifact(run_store(run), cell, source_api)
    artifact_manifest = artifact / MANIFEST
    # an exit's cell ran on its exporter's environment (onnx-RELEASE), with the files it wrote (the .onnx, and
    # OpenVINO's .xml/.bin or TorchScript's .pt)
    loaded_env = onnx_path.env_name(cell.loaded) if cell.api in EXIT_APIS else cell.loaded
    folder = run.dir / ONNX_API / cell.saved / cell.model / source_api
    suffixes = (".onnx",) + EXIT_ARTIFACTS[cell.api] if cell.api in EXIT_APIS else ()
    exported = sorted({p for suffix in suffixes for p in folder.glob("*" + suffix)})
    notebooks = [
        ("train", f"mxnet-{cell.saved}", _train_notebook(run, artifact, cell.saved)),
        ("reload", f"mxnet-{loaded_env}", run.dir / executed_notebook("reload", loaded_env)),
        ("investigate", cell.slug, run.dir / "investigate" / f"{cell.slug}.ipynb"),
    ]
    out = Path(out) if out else run.dir / "bundles" / f"{cell.slug}.zip"
    out.parent.mkdir(parents=True, exist_ok=True)
    html_dir = run.dir / "bundles" / ".html"
    html_dir.mkdir(parents=True, exist_ok=True)
    root = cell.slug  # every member lives under one folder named by the kit, never by a file's own path
    tmp = out.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{root}/README.md", markdown(cell, record, manifest, investigation, _made_by(notebooks[0][2])))
        z.write(record_path(run, cell), f"{root}/record.json")
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
        for path in exported:
            z.write(path, f"{root}/onnx/{path.name}")
        for kind, stem, nb in notebooks:
            if nb is not None and nb.is_file():
                name = f"{kind}-{stem}"
                z.write(nb, f"{root}/notebooks/{name}.ipynb")
                html = html_dir / f"{name}.html"
                write_html(nb, html)
                z.write(html, f"{root}/notebooks/{name}.html")
    tmp.replace(out)
    return out


RUN_BUNDLE_SKIPS = ("bundles", ".lock")


def make_run_bundle(run_id: str, *, runs_dir: str | Path | None = None, out: str | Path | None = None) -> Path:
    """Zip a whole run: its folder (notebooks, records, reports, logs) and, from the store, the manifest and
    the train notebook of every artifact its records checked, under ``store/RELEASE/MODEL/API/``."""
    from kit.results.records import load_records

    run = Run(runs_dir or default_runs_dir(), run_id)
    if not run.exists():
        raise UsageError(f"no run {run_id} in {run.dir.parent}")
    store = run_store(run)
    run_dir = run.dir.resolve()  # runs/latest is a link
    out = Path(out) if out else run_dir / "bundles" / f"run-{run_dir.name}.zip"
    out.parent.mkdir(parents=True, exist_ok=True)
    root = f"run-{run_dir.name}"
    # a c_predict cell loads another API's artifact (record field source_api)
    checked = {(r["saved_with"], r["model"], r.get("source_api") or r["api"]) for r in load_records(run_dir)}
    checked = sorted(a for a in checked if all(is_safe_name(n) for n in a))  # names a record spells, never a path
    tmp = out.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(run_dir.rglob("*")):
            rel = path.relative_to(run_dir)
            kept = rel.parts[0] not in RUN_BUNDLE_SKIPS and ".tmp" not in path.name  # a writer's temporary file
            if kept and path.is_file() and not path.is_symlink():
                z.write(path, f"{root}/{rel.as_posix()}")
        for saved, model, api in checked:
            folder = Path(artifacts.artifact_dir(store, saved, model, api))
            for name in (MANIFEST, TRAIN_NOTEBOOK):
                if (folder / name).is_file():
                    z.write(folder / name, f"{root}/store/{folder.relative_to(store).as_posix()}/{name}")
    tmp.replace(out)
    return out
