"""Live progress of the steps that are running: cells done of total and the kernel's last line.

A step's notebook run writes its progress to a small JSON file (``runs/<id>/.progress/<step>.json``)
from papermill's own cell events and the kernel's stdout (papermill's ``stdout_file``); the
orchestrator draws one tqdm line per running step on a terminal, above which the finished-step
lines are printed. A Dask worker forwards its step's file as events to the client (see
:mod:`kit.execute.dask_executor`). Nothing is drawn when the output is not a terminal.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable

PROGRESS_DIR = ".progress"
TOPIC = "mxcompat-progress"  # the Dask event topic a worker sends its step's progress on
SAVE_EVERY = 0.25  # seconds between two writes of one step's file (a chatty kernel prints much faster)
POLL_EVERY = 0.5
LINE_WIDTH = 60


def progress_path(run_dir: str | Path, step_id: str) -> str:
    return str(Path(run_dir) / PROGRESS_DIR / f"{step_id.replace(':', '-')}.json")


def read(path: str | Path) -> dict | None:
    """A step's progress ``{"step", "cells_done", "cells", "line"}``, or None (not started, finished, half written)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


class StepProgress:
    """Written by one notebook run: ``cell_started`` from papermill's engine, ``write`` as its stdout file."""

    def __init__(self, path: str | Path, step_id: str):
        self.path, self.state = Path(path), {"step": step_id, "cells_done": 0, "cells": 0, "line": ""}
        self._saved_at = 0.0
        self._partial = ""

    def cell_started(self, index: int, total: int) -> None:
        self.state.update(cells_done=index, cells=total)
        self._save(force=True)

    def write(self, text: str) -> int:
        lines = (self._partial + text).split("\n")
        self._partial = lines[-1][-1000:]
        shown = [line.strip() for line in lines[:-1] if line.strip()]
        if shown:
            self.state["line"] = shown[-1][:LINE_WIDTH]
            self._save()
        return len(text)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        try:
            self.path.unlink()
        except OSError:
            pass

    def _save(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._saved_at < SAVE_EVERY:
            return
        self._saved_at = now
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
            tmp.write_text(json.dumps(self.state))
            os.replace(tmp, self.path)
        except OSError:  # progress is a courtesy: a full disk must not fail the step
            pass


def forward_file(path: str | Path, send: Callable[[dict], None], stop: threading.Event) -> None:
    """Until ``stop``: send the file's progress each time it changes (a Dask worker's side)."""
    last = None
    while not stop.wait(POLL_EVERY):
        state = read(path)
        if state is not None and state != last:
            send(state)
            last = state


class LiveProgress:
    """One tqdm line per running step on ``stream`` (a terminal only); fed by the steps' progress files
    in ``directory`` and by :meth:`update` (a Dask client's events). :meth:`echo` prints above the lines."""

    def __init__(self, directory: str | Path | None, echo: Callable[[str], None], stream=None, enabled=None):
        self.directory = Path(directory) if directory else None
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._echo = echo
        self._bars: dict = {}
        self._pushed: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def start(self) -> None:
        if self.enabled and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._poll, name="mxcompat-progress", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """End the drawing and clear the lines."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            for bar in self._bars.values():
                bar.close()
            self._bars.clear()

    def echo(self, line: str) -> None:
        if not self.enabled:
            self._echo(line)
            return
        from tqdm import tqdm

        with self._lock, tqdm.external_write_mode(file=self.stream):
            self._echo(line)

    def update(self, state: dict | None, step_id: str | None = None) -> None:
        """A step's progress from elsewhere (a Dask worker); None ends its line."""
        step_id = step_id or (state or {}).get("step")
        if step_id:
            with self._lock:
                if state is None:
                    self._pushed.pop(step_id, None)
                else:
                    self._pushed[step_id] = state

    def finished(self, step_id: str) -> None:
        """The step ended: its line goes now, before its closing line is printed above the others."""
        self.update(None, step_id)
        with self._lock:
            bar = self._bars.pop(step_id, None)
            if bar is not None:
                bar.close()
        if self.directory is not None:
            try:
                Path(progress_path(self.directory.parent, step_id)).unlink()
            except OSError:
                pass

    def states(self) -> dict[str, dict]:
        """Every running step's progress now: files first, pushed events over them."""
        out = {}
        if self.directory is not None and self.directory.is_dir():
            for path in sorted(self.directory.glob("*.json")):
                state = read(path)
                if state and state.get("step"):
                    out[state["step"]] = state
        with self._lock:
            out.update(self._pushed)
        return out

    def _poll(self) -> None:
        while not self._stop.wait(POLL_EVERY):
            self._draw(self.states())

    def _draw(self, states: dict[str, dict]) -> None:
        from tqdm import tqdm

        with self._lock:
            for step_id in [s for s in self._bars if s not in states]:
                self._bars.pop(step_id).close()
            for step_id, state in states.items():
                bar = self._bars.get(step_id)
                if bar is None:
                    bar = self._bars[step_id] = tqdm(
                        total=state.get("cells") or None,
                        desc=step_id,
                        unit="cell",
                        file=self.stream,
                        leave=False,
                        dynamic_ncols=True,
                        bar_format="{desc}: cell {n}/{total} {elapsed}{postfix}",
                    )
                bar.total = state.get("cells") or bar.total
                bar.n = state.get("cells_done", 0)
                bar.set_postfix_str(state.get("line", ""), refresh=False)
                bar.refresh()
