"""``mxcompat convert``: a failing cell's artifact written as its verified remedy makes it, reloaded natively.

The conversion runs in the loading release's environment (kit.kernel.entry.convert); what it writes is an
artifact of its own beside a record that reloads it through that release's ordinary load path, with no
remedy, on the saving release's reference cases.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from kit.common.capabilities import EXIT_APIS, EXIT_ARTIFACTS, ONNX_API
from kit.common.errors import UsageError
from kit.common.record_schema import LOADING_MODE
from kit.debug.run_files import cell_artifact, read_record, run_store
from kit.envs.manager import EnvManager
from kit.home import KitHome
from kit.results.cells import Cell
from kit.results.runs import Run, default_runs_dir


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
    runs_dir: str | Path | None = None,
    home: KitHome | None = None,
) -> dict:
    """Convert ``cell``'s artifact with its verified remedy into ``<out>/<cell>/`` (``out`` default
    ``RUN/converted``); ``{"out", "remedy", "record"}``.

    Nothing but that one folder is written, and it is replaced only when it holds an earlier conversion (its
    :data:`OWNED` file says so): what else ``out`` holds stays, and a folder of someone else's is refused
    before any work. The conversion is built beside it and moved in only when it succeeded. What MXNet prints
    goes to ``RUN/logs/convert-<cell>.log`` (a failure names it and shows its tail).
    """
    home = home or KitHome()
    run = Run(runs_dir or default_runs_dir(), run_id)
    if not run.exists():
        raise UsageError(f"no run {run_id} in {run.dir.parent}")
    record = read_record(run, cell)
    if cell.api in EXIT_APIS:  # the remedied export is already a file of the run
        suffix = EXIT_ARTIFACTS[cell.api][0]
        written = sorted(str(p) for p in (run.dir / ONNX_API / cell.saved / cell.model).rglob("*" + suffix))
        raise UsageError(
            f"{cell} is an exit's cell: the run wrote its export, and a remedy's, as {suffix} files",
            hint="; ".join(written) or f"no {suffix} file: no export or remedy succeeded",
        )
    name = choose_remedy(record, cell, remedy)
    target = (Path(out) if out else run.dir / "converted").resolve() / cell.slug
    check_replaceable(target)
    env = EnvManager(home).ready_env(cell.loaded)
    api = record.get("source_api") or cell.api
    folder = cell_artifact(run_store(run, home), cell, api)
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    log = run.dir / "logs" / f"convert-{cell.slug}.log"  # what MXNet prints: not the terminal
    log.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(staged, ignore_errors=True)
    request = {
        "release": cell.loaded,
        "saved": cell.saved,
        "model": cell.model,
        "api": api,
        "check_api": cell.api,  # a c_predict cell converts its source artifact and is checked through c_predict
        "folder": str(folder),
        "out": str(staged),
        "remedy": name,
        "error": record.get("error") or record.get("reason") or "",
        "tolerance": run.read_manifest()["request"].get("tolerance") or {},
    }
    try:
        answer = env.run_main("kit.kernel.entry.convert", request, f"converting {cell} in MXNet {cell.loaded}", log=log)
        (staged / OWNED).write_text(json.dumps({"cell": str(cell), "remedy": name, "run": run.id}) + "\n")
        _move_into_place(staged, target)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
        staged.with_name(f".{staged.name}.lock").unlink(missing_ok=True)  # the reload's lock beside the staging
    return {"out": target, "remedy": name, "record": answer}


#: the file that marks a folder as a conversion ``mxcompat convert`` wrote (and may replace)
OWNED = ".mxcompat-converted.json"


def check_replaceable(target: Path) -> None:
    """Refuse ``target`` unless it is absent, empty, or an earlier conversion (it holds :data:`OWNED`)."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise UsageError(f"{target} exists and is not a folder convert wrote: nothing was written")
    if target.is_dir() and any(target.iterdir()) and not (target / OWNED).is_file():
        raise UsageError(
            f"{target} holds files convert did not write: nothing was written or removed",
            hint="give --out another folder (the conversion goes into --out/<cell>/)",
        )


def _move_into_place(staged: Path, target: Path) -> None:
    """``staged`` becomes ``target``; an earlier conversion there goes only once the new one is in place."""
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists():
        target.rename(old)
    staged.rename(target)
    shutil.rmtree(old, ignore_errors=True)
