"""A run's folder under runs/: executed notebooks, records, reports and the run's own manifest."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

from kit.common.artifacts import write_json_atomic
from kit.common.errors import UsageError
from kit.common.names import is_safe_name
from kit.home import REPO_ROOT

RUN_MANIFEST = "run.json"
LATEST = "latest"  # runs/latest: a link to the newest run's folder
SUMMARY_NOTEBOOK = "summary.ipynb"  # the executed summary notebook, at the top of the run folder


def executed_notebook(kind: str, release: str) -> str:
    """Where a release step's executed notebook lies, relative to its run folder: ``<kind>/mxnet-<release>.ipynb``
    (a link that opens from the run folder, and the path under it)."""
    return f"{kind}/mxnet-{release}.ipynb"


def read_manifest(run_dir: str | Path) -> dict:
    """The run manifest (``run.json``) of the run folder ``run_dir``: a JSON object, or a usage error saying why
    not."""
    name = Path(run_dir).name
    try:
        manifest = json.loads((Path(run_dir) / RUN_MANIFEST).read_text())
    except (OSError, ValueError, RecursionError) as e:
        raise UsageError(f"run {name} has no readable {RUN_MANIFEST}: {e or type(e).__name__}") from None
    if not isinstance(manifest, dict):
        raise UsageError(f"run {name}'s {RUN_MANIFEST} is not a JSON object")
    return manifest


def default_runs_dir() -> Path:
    return Path(os.environ.get("MXCOMPAT_RUNS_DIR") or REPO_ROOT / "runs")


def new_run_id(root: str | Path | None = None) -> str:
    """A timestamp; with ``-2``, ``-3``... when a run of that second already exists under ``root``."""
    base = time.strftime("%Y%m%d-%H%M%S")
    if root is None:
        return base
    candidate, n = base, 1
    while (Path(root) / candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def check_run_id(run_id) -> str:
    """``run_id`` if it is a plain name (``SAFE_NAME``: no separator, ``..``, ``;``, backtick or newline), as a run
    folder's name must be; else a usage error naming it."""
    if not is_safe_name(run_id):
        raise UsageError(
            f"invalid run id {run_id!r}",
            hint="a run id is a plain name: letters, digits, '.', '_', '+', '=' and '-', "
            "starting with a letter or digit",
        )
    return run_id


class Run:
    """One run folder; holds an exclusive lock while a process works on it."""

    def __init__(self, root: str | Path, run_id: str):
        check_run_id(run_id)
        self.id = run_id
        self.dir = Path(root) / run_id
        self._lock_file = None

    @property
    def manifest_path(self) -> Path:
        return self.dir / RUN_MANIFEST

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def lock(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self.dir / ".lock", "w")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            self._lock_file = None
            raise UsageError(
                f"run {self.id} is in progress in another process", hint="wait for it, or pick another --run-id"
            ) from None

    def unlock(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    def mark_latest(self) -> None:
        """Point ``<runs>/latest`` at this run's folder (a relative link, replaced atomically)."""
        link = self.dir.parent / LATEST
        if link.exists() and not link.is_symlink():
            raise UsageError(f"{link} is a folder, not the link to the newest run", hint="rename it")
        tmp = self.dir.parent / f".{LATEST}.tmp-{os.getpid()}"
        if tmp.is_symlink():
            tmp.unlink()
        os.symlink(self.id, tmp)
        os.replace(tmp, link)

    def read_manifest(self) -> dict:
        return read_manifest(self.dir)

    def sweep_partial_writes(self) -> list[Path]:
        """Remove the temporary files (``NAME.tmp-PID``) of writers that died mid-write; returns them.

        Records and manifests are written to such a file and renamed into place; a kernel killed
        in between (Ctrl-C, a crash) leaves the temporary file, never a half record.
        """
        removed = []
        for path in self.dir.rglob("*.tmp-*"):
            pid = path.name.rsplit(".tmp-", 1)[-1]
            if pid.isdigit() and not _alive(int(pid)) and path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path)
        return removed

    def write_manifest(self, data: dict) -> None:
        write_json_atomic(str(self.manifest_path), data)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True
