"""Live progress inside steps: papermill's cell events and the kernel's lines, drawn on a terminal only."""

from __future__ import annotations

import io
import json
import time

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from kit.envs import kernelspecs
from kit.execute.notebooks import run_notebook
from kit.execute.progress import LiveProgress, StepProgress, progress_path, read
from kit.home import KitHome


class Recorder(StepProgress):
    """Keeps every state it would write."""

    def __init__(self, path):
        super().__init__(path, "train:1.9.1")
        self.cells, self.lines = [], []

    def cell_started(self, index, total):
        self.cells.append((index, total))
        super().cell_started(index, total)

    def write(self, text):
        n = super().write(text)
        self.lines.append(self.state["line"])
        return n


def test_cell_events_and_kernel_lines_reach_the_step_progress(tmp_path):
    home = KitHome(tmp_path / "home")
    kernelspecs.ensure_host_kernel(home)
    source = tmp_path / "three.ipynb"
    cells = [
        new_code_cell("print('warming up')"),
        new_code_cell("print('mlp: trained 3 epochs')\nprint('lenet: training (model 2 of 2)')"),
        new_code_cell("x = 1"),
    ]
    nbformat.write(new_notebook(cells=cells), source)
    recorder = Recorder(progress_path(tmp_path / "run", "train:1.9.1"))
    run_notebook(source, tmp_path / "out.ipynb", kernelspecs.HOST_KERNEL, {}, home=home, progress=recorder)
    assert recorder.cells == [(0, 3), (1, 3), (2, 3)]  # papermill's cell events, each cell as it starts
    assert "warming up" in recorder.lines and recorder.lines[-1] == "lenet: training (model 2 of 2)"
    assert read(recorder.path) == {
        "step": "train:1.9.1",
        "cells_done": 2,
        "cells": 3,
        "line": "lenet: training (model 2 of 2)",
    }
    recorder.close()
    assert not recorder.path.exists()


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_one_line_per_running_step_and_events_above_them(tmp_path):
    run_dir = tmp_path / "run"
    path = progress_path(run_dir, "train:1.9.1")
    writer = StepProgress(path, "train:1.9.1")
    writer.cell_started(2, 5)
    writer.write("vgg11_bn: training (model 6 of 8)\n")
    writer._save(force=True)
    assert read(path) == {
        "step": "train:1.9.1",
        "cells_done": 2,
        "cells": 5,
        "line": "vgg11_bn: training (model 6 of 8)",
    }
    terminal, printed = FakeTerminal(), []
    live = LiveProgress(
        run_dir / ".progress", lambda line: (printed.append(line), terminal.write(line + "\n")), terminal
    )
    assert live.enabled
    live.update({"step": "reload:2.0.0b1", "cells_done": 4, "cells": 9, "line": "[3/40] 1.9.1 lstm/export -> 2.0.0b1"})
    live.start()
    time.sleep(1.3)
    live.echo("[1/3] train:1.0.0.post4: ok in 4.0s")
    live.finished("train:1.9.1")
    time.sleep(1.0)
    live.stop()
    shown = terminal.getvalue()
    assert "train:1.9.1: cell 2/5" in shown and "vgg11_bn: training (model 6 of 8)" in shown
    assert "reload:2.0.0b1: cell 4/9" in shown and "[3/40] 1.9.1 lstm/export -> 2.0.0b1" in shown
    assert printed == ["[1/3] train:1.0.0.post4: ok in 4.0s"]
    assert not (run_dir / ".progress" / "train-1.9.1.json").exists()  # a finished step's file goes
    assert set(live.states()) == {"reload:2.0.0b1"}


def test_nothing_is_drawn_when_the_output_is_not_a_terminal(tmp_path):
    path = progress_path(tmp_path, "summary")
    StepProgress(path, "summary").cell_started(1, 4)
    plain, printed = io.StringIO(), []
    live = LiveProgress(tmp_path / ".progress", printed.append, plain)
    assert not live.enabled
    live.start()
    time.sleep(0.8)
    live.echo("[3/3] summary: ok")
    live.stop()
    assert plain.getvalue() == "" and printed == ["[3/3] summary: ok"]
    assert json.loads(open(path).read())["cells"] == 4
