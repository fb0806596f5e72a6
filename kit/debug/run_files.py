"""A finished run's inputs for the commands that look into one cell (investigate, convert, bundle, bisect):
the store it read and a cell's record and artifact, found from what the user asked and the cell's names,
never from a path a file in the run folder spells (a copied or edited run folder points nowhere else)."""

from __future__ import annotations

from pathlib import Path

from kit.common import artifacts, run_layout
from kit.common.capabilities import LOAD_APIS
from kit.common.errors import UsageError
from kit.home import KitHome
from kit.results import records
from kit.results.cells import Cell
from kit.results.runs import Run


def run_store(run: Run, home: KitHome | None = None) -> Path:
    """The folder run ``run``'s kernels read: the working copy of the store its request named."""
    from kit import store as stores

    request = run.read_manifest().get("request") or {}
    location = request.get("store")
    if location is not None and not isinstance(location, str):
        raise UsageError(f"run {run.id}'s run.json names no store location: {location!r}")
    return stores.open_store(location, home=home).working_copy(home).root


def cell_artifact(store: Path, cell: Cell, api: str | None = None) -> Path:
    """The artifact folder of ``cell`` (``api``: the artifact's own API, where the cell's is derived from it)."""
    api = api or cell.api
    if api not in LOAD_APIS:
        raise UsageError(f"{cell}: its record names an unknown source API {api!r}")
    if cell.archived:
        return Path(artifacts.version_dir(str(store), cell.saved, cell.model, api, cell.archived))
    return Path(artifacts.artifact_dir(str(store), cell.saved, cell.model, api))


def record_path(run: Run, cell: Cell) -> Path:
    """Where ``cell``'s record in ``run`` lies (it may not exist)."""
    return Path(run_layout.record_path(run.dir, cell.saved, cell.model, cell.api, cell.loaded, cell.archived))


def read_record(run: Run, cell: Cell) -> dict:
    """``cell``'s record in ``run`` (a JSON object, or a usage error that says what is wrong with it)."""
    path = record_path(run, cell)
    if not path.is_file():
        raise UsageError(f"run {run.id} has no record of {cell}", hint=f"cells are listed in {run.dir}/records.csv")
    return records.read_record(path, UsageError)
