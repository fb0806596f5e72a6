"""Executing a notebook on a release's kernel with papermill."""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
import papermill

from kit import kernelspecs
from kit.home import REPO_ROOT, KitHome

NOTEBOOKS = REPO_ROOT / "notebooks"


def run_notebook(notebook: str | Path, output: str | Path, kernel_name: str, parameters: dict, *,
                 home: KitHome | None = None, cwd: str | Path | None = None, start_timeout: int = 180,
                 execution_timeout: int | None = None):
    """Run ``notebook`` into ``output`` on ``kernel_name`` with ``parameters`` (strings stay strings).

    The executed copy records the kernel it ran on, so opening it in Jupyter picks
    that release's kernel. papermill's error (``PapermillExecutionError``) is raised
    after the executed copy, with the failing cell, is written.
    """
    home = home or KitHome()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = kernelspecs.jupyter_path(home)
    try:
        return papermill.execute_notebook(
            str(notebook), str(output), parameters=parameters, kernel_name=kernel_name,
            cwd=str(cwd) if cwd else None, progress_bar=False, start_timeout=start_timeout,
            execution_timeout=execution_timeout,
        )
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old
        _record_kernel(output, home, kernel_name)


def _record_kernel(output: Path, home: KitHome, kernel_name: str) -> None:
    if not output.exists():
        return
    spec = kernelspecs.read_kernelspec(home, kernel_name) or {}
    nb = nbformat.read(output, as_version=4)
    nb.metadata["kernelspec"] = {"name": kernel_name, "display_name": spec.get("display_name", kernel_name),
                                 "language": "python"}
    nbformat.write(nb, output)
