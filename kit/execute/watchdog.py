"""The clock of one step: its kernel is stopped when the step runs past its time, or when the artifact its kernel
has in flight (the reload notebook's marker, kit.kernel.entry.reload_run.InFlight) runs past a cell's time.

Stopping the kernel is all it does: the step sees a dead kernel, as when a kernel dies by itself, and asks
:attr:`Watchdog.expired` why (kit.execute.steps records a cell that timed out and goes on with a new kernel,
or fails a step that timed out with that cause).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time


class Watchdog:
    """``with Watchdog(step_timeout, cell_timeout, marker) as dog``: ``dog.attach(pid)`` names the kernel; it is
    killed (SIGKILL) when a limit passes, and :attr:`expired` says which: ``("step", seconds)`` or
    ``("cell", seconds)`` (cleared by :meth:`handled` once the step has recorded the cell)."""

    def __init__(self, step_timeout: float, cell_timeout: float, marker: str | None = None, poll: float = 1.0):
        self.step_timeout, self.cell_timeout, self.marker, self.poll = step_timeout, cell_timeout, marker, poll
        self.started = time.monotonic()
        self.expired: tuple[str, float] | None = None
        self._pid: int | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="mxcompat-watchdog", daemon=True)

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> bool:
        self._stop.set()
        self._thread.join()
        return False

    def attach(self, pid: int | None) -> None:
        """``pid`` is the kernel running the step's notebook now."""
        with self._lock:
            self._pid = pid

    def handled(self) -> None:
        """The step recorded the cell that timed out: watch the next one."""
        with self._lock:
            if self.expired and self.expired[0] == "cell":
                self.expired = None

    @property
    def step_expired(self) -> bool:
        return bool(self.expired and self.expired[0] == "step")

    @property
    def cell_expired(self) -> float | None:
        """The cell limit that passed (seconds), if the kernel was stopped for a cell."""
        return self.expired[1] if self.expired and self.expired[0] == "cell" else None

    def _watch(self) -> None:
        while not self._stop.wait(self.poll):
            with self._lock:
                if self.expired or self._pid is None:
                    continue
                if time.monotonic() - self.started > self.step_timeout:
                    self._kill(("step", self.step_timeout))
                elif self._cell_seconds() > self.cell_timeout:
                    self._kill(("cell", self.cell_timeout))

    def _cell_seconds(self) -> float:
        """How long the artifact in flight has been worked on (0 when none is)."""
        if not self.marker:
            return 0.0
        try:
            with open(self.marker) as f:
                started = json.load(f).get("started_at")
        except (OSError, ValueError, AttributeError):
            return 0.0  # none in flight, or being rewritten this instant
        return time.time() - started if isinstance(started, (int, float)) else 0.0

    def _kill(self, why: tuple[str, float]) -> None:
        self.expired = why
        try:
            os.kill(self._pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
