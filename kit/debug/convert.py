"""``mxcompat convert``: a failing cell's artifact written as its verified remedy makes it, reloaded natively.

The conversion runs in the loading release's environment (kit.kernel.convert); what it writes is an
artifact of its own beside a record that reloads it through that release's ordinary load path, with no
remedy, on the saving release's reference cases.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from kit.results.cells import Cell
from kit.common.capabilities import ONNX_API
from kit.common.record_schema import LOADING_MODE
from kit.common.errors import EnvBuildError, KitError, UsageError
from kit.envs.manager import EnvManager
from kit.home import KitHome
from kit.results.runs import Run, runs_dir


def read_record(run: Run, cell: Cell) -> dict:
    path = run.dir / "records" / f"{cell.slug}.json"
    if not path.is_file():
        raise UsageError(f"run {run.id} has no record of {cell}", hint=f"cells are listed in {run.dir}/records.csv")
    return json.loads(path.read_text())


def choose_remedy(record: dict, cell: Cell, asked: str | None = None) -> str:
    """The verified remedy to convert with: ``asked``, else the first that changes files (a loading mode
    changes how files load, not the files)."""
    remedy = record.get("remedy") or {}
    if record["verdict"] in ("identical", "close"):
        raise UsageError(f"{cell} is {record['verdict']}: it loads as it is, there is nothing to convert")
    if not remedy.get("fixed"):
        why = remedy.get("why_none") or "no remedy was tried for it"
        raise UsageError(f"{cell} has no verified remedy ({record['verdict']}): {why}")
    passing = {t["name"]: t for t in remedy.get("tried", []) if t.get("verdict") in ("identical", "close")}
    if asked:
        if asked not in passing:
            raise UsageError(
                f"remedy {asked!r} did not fix {cell}", hint="verified for this cell: " + ", ".join(passing)
            )
        if all(kind == LOADING_MODE for kind in passing[asked].get("changes") or [LOADING_MODE]):
            raise UsageError(
                f"{asked} changes how the files load, not the files: there is nothing to convert",
                hint="load it with this code instead:\n" + (passing[asked].get("user_code") or ""),
            )
        return asked
    for name, attempt in passing.items():
        if any(kind != LOADING_MODE for kind in attempt.get("changes") or []):
            return name
    only = next(iter(passing.values()))
    raise UsageError(
        f"{cell} is fixed only by {', '.join(passing)}, which changes how the files load, not the files: "
        "there is nothing to convert",
        hint="load it with this code instead:\n" + (only.get("user_code") or ""),
    )


def convert_cell(
    run_id: str,
    cell: Cell,
    *,
    remedy: str | None = None,
    out: str | Path | None = None,
    runs_root: str | Path | None = None,
    home: KitHome | None = None,
) -> dict:
    """Convert ``cell``'s artifact with its verified remedy; ``{"out", "remedy", "record"}``."""
    home = home or KitHome()
    run = Run(runs_root or runs_dir(), run_id)
    if not run.exists():
        raise UsageError(f"no run {run_id} in {run.dir.parent}")
    record = read_record(run, cell)
    if cell.api == ONNX_API:  # the remedied export is already a file of the run
        onnx_files = sorted(str(p) for p in (run.dir / ONNX_API / cell.saved / cell.model).rglob("*.onnx"))
        raise UsageError(
            f"{cell} is an ONNX cell: the run wrote its export, and a remedy's, as .onnx files",
            hint="; ".join(onnx_files) or "no .onnx file: no export or remedy succeeded",
        )
    name = choose_remedy(record, cell, remedy)
    target = Path(out) if out else run.dir / "converted" / cell.slug
    env = EnvManager(home).ready_env(cell.loaded)
    request = {
        "release": cell.loaded,
        "saved": cell.saved,
        "model": cell.model,
        "api": record.get("source_api") or cell.api,
        "check_api": cell.api,  # a c_predict cell converts its source artifact and is checked through c_predict
        "folder": record["artifact"],
        "out": str(target.resolve()),
        "remedy": name,
        "error": record.get("error") or record.get("reason") or "",
        "tolerance": run.read_manifest()["request"].get("tolerance") or {},
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(request, f)
    try:
        proc = subprocess.run(
            [str(env.python), "-m", "kit.kernel.convert", f.name],
            capture_output=True,
            text=True,
            cwd=str(env.path),
            timeout=900,
        )
    finally:
        Path(f.name).unlink()
    said = proc.stdout.strip().splitlines()
    if proc.returncode == 3 and said:
        problem = json.loads(said[-1])
        raise KitError(problem["error"], hint=problem.get("hint"))
    if proc.returncode != 0 or not said:
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        raise EnvBuildError(f"converting {cell} in MXNet {cell.loaded} failed:\n{tail}")
    return {"out": target, "remedy": name, "record": json.loads(said[-1])}
