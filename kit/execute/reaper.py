"""The processes a run starts die with it; strays an earlier crash left are found by their recorded PIDs.

Each worker process of the local executor (the steps' notebooks and their kernels run under it):

- asks Linux to send it SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), and also watches its
  parent every second (other systems, or a parent that died before the request was made);
- on SIGTERM or its parent's death, kills every process it started (kernels run in sessions of
  their own, so each kernel's process group) and exits;
- keeps a record ``<kit home>/pids/<pid>.json``: itself, its parent and its children, each with its
  start time, so that a process whose number was reused is never taken for it.

:func:`end_strays` (``mxcompat run``, ``run --resume`` and ``env doctor`` call it) ends the recorded
processes whose parent is gone, and only those.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

PIDS_DIR = "pids"
WATCH_EVERY = 1.0  # seconds between two looks at the parent (and two updates of the record)
_PR_SET_PDEATHSIG = 1


def _started(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, OSError):
        return None


def _set_parent_death_signal(sig: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watchdog thread covers it


def end_children() -> int:
    """Kill every process this one started (and each one's process group); how many."""
    import psutil

    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return 0
    for child in children:
        try:
            if os.getpgid(child.pid) == child.pid:  # a kernel leads a session of its own
                os.killpg(child.pid, signal.SIGKILL)
            else:
                child.kill()
        except (OSError, psutil.Error):
            pass
    psutil.wait_procs(children, timeout=5)
    return len(children)


class _Worker:
    def __init__(self, parent_pid: int, record_dir: str, run_id: str):
        self.parent_pid, self.run_id = parent_pid, run_id
        self.parent_started = _started(parent_pid)
        self.record = Path(record_dir) / f"{os.getpid()}.json"
        self._ending = threading.Lock()

    def orphaned(self) -> bool:
        return os.getppid() != self.parent_pid

    def end(self, *_args) -> None:
        """Kill what this worker started, drop its record, exit."""
        if not self._ending.acquire(blocking=False):
            return
        end_children()
        try:
            self.record.unlink()
        except OSError:
            pass
        os._exit(1)

    def write_record(self) -> None:
        import psutil

        try:
            children = [{"pid": c.pid, "started": c.create_time()} for c in psutil.Process().children(recursive=True)]
        except psutil.Error:
            children = []
        entry = {
            "pid": os.getpid(),
            "started": _started(os.getpid()),
            "parent": {"pid": self.parent_pid, "started": self.parent_started},
            "run_id": self.run_id,
            "children": children,
        }
        try:
            self.record.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.record.with_name(f".{self.record.name}.tmp")
            tmp.write_text(json.dumps(entry))
            os.replace(tmp, self.record)
        except OSError:
            pass  # the record only helps a later clean-up; the run goes on without it

    def watch(self) -> None:
        while True:
            if self.orphaned():
                self.end()
            self.write_record()
            threading.Event().wait(WATCH_EVERY)


def die_with_parent(parent_pid: int, record_dir: str, run_id: str = "") -> None:
    """A worker process's initializer: it and every process it starts end when ``parent_pid`` does."""
    worker = _Worker(parent_pid, record_dir, run_id)
    _set_parent_death_signal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, worker.end)
    if worker.orphaned():  # the parent died before the request was made
        worker.end()
    worker.write_record()
    threading.Thread(target=worker.watch, name="mxcompat-watchdog", daemon=True).start()


def end_strays(home_root: str | Path) -> list[str]:
    """End the processes recorded under ``<home>/pids`` whose recorded parent is gone; one line per process."""
    import psutil

    said = []
    for path in sorted((Path(home_root) / PIDS_DIR).glob("*.json")):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        parent = entry.get("parent") or {}
        if parent.get("pid") and _same(parent["pid"], parent.get("started")):
            continue  # its run is still going
        alive = []
        for proc in [{"pid": entry["pid"], "started": entry.get("started")}] + list(entry.get("children") or []):
            if _same(proc["pid"], proc.get("started")):
                try:
                    alive.append(psutil.Process(proc["pid"]))
                except psutil.Error:
                    pass
        for proc in alive:
            try:
                cmd = (" ".join(proc.cmdline()) or proc.name())[:120]
                proc.kill()
                said.append(f"ended stray process {proc.pid} of run {entry.get('run_id') or '?'}: {cmd}")
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=5)
        try:
            path.unlink()
        except OSError:
            pass
    return said


def _same(pid: int, started: float | None) -> bool:
    """``pid`` is alive and is the process recorded (the same start time), not a later one given its number."""
    now = _started(pid)
    return now is not None and started is not None and abs(now - started) < 0.5
