"""Running investigate.ipynb for one cell of a run, on the loading release's kernel."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kit.cells import Cell
from kit.envs import EnvManager
from kit.common.errors import EnvBuildError, UsageError
from kit.home import KitHome
from kit.notebooks import NOTEBOOKS, run_notebook
from kit.runs import Run, runs_dir


def investigate_cell(
    run_id: str,
    cell: Cell,
    *,
    runs_root: str | Path | None = None,
    home: KitHome | None = None,
    recompute: bool = False,
    tolerance: dict | None = None,
) -> dict:
    """Execute investigate.ipynb for ``cell`` of run ``run_id``; paths of the notebook and its JSON.

    ``recompute`` evaluates the saving release's internals now, in its own environment,
    instead of using those recorded at train time.
    """
    home = home or KitHome()
    run = Run(runs_root or runs_dir(), run_id)
    if not run.exists():
        raise UsageError(f"no run {run_id} in {run.dir.parent}")
    manifest = run.read_manifest()
    store = Path(manifest["store"])
    artifact = store / cell.saved / cell.model / cell.api
    if not (artifact / "manifest.json").is_file():
        raise UsageError(f"run {run_id}'s store {store} has no artifact {cell.saved}/{cell.model}/{cell.api}")
    manager = EnvManager(home)
    manager.ready_env(cell.loaded)
    out_dir = run.dir / "investigate"
    out_dir.mkdir(parents=True, exist_ok=True)
    reference = ""
    if recompute:
        saving = manager.ready_env(cell.saved)
        reference = str(out_dir / f"{cell.slug}.reference.npz")
        proc = subprocess.run(
            [str(saving.python), "-m", "kit.kernel.recompute", str(artifact), reference, cell.saved],
            capture_output=True,
            text=True,
            cwd=str(saving.path),
            timeout=600,
        )
        if proc.returncode != 0:
            raise EnvBuildError(
                f"computing {cell.saved}'s internals failed: " + (proc.stderr.strip().splitlines() or ["no output"])[-1]
            )
    notebook = out_dir / f"{cell.slug}.ipynb"
    out_json = out_dir / f"{cell.slug}.json"
    run_notebook(
        NOTEBOOKS / "investigate.ipynb",
        notebook,
        f"mxnet-{cell.loaded}",
        {
            "release": cell.loaded,
            "store": str(store),
            "model": cell.model,
            "api": cell.api,
            "saved_with": cell.saved,
            "tolerance": tolerance or manifest["request"].get("tolerance") or {},
            "reference": reference,
            "out_json": str(out_json),
        },
        home=home,
    )
    return {"notebook": notebook, "json": out_json}
