"""A finished process skips the collector's last passes at exit, and loses nothing it wrote."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import REPO

from kit.execute import local_executor
from kit.execute.local_executor import LocalExecutor
from kit.home import KitHome

PROGRAM = textwrap.dedent(
    """
    import atexit, gc, sys
    atexit.register(lambda: print("frozen at the end:", gc.get_freeze_count() > 0, flush=True))  # runs last
    from kit.execute.quick_exit import freeze_heap_at_exit
    freeze_heap_at_exit()
    atexit.register(lambda: print("frozen by the command's own handlers:", gc.get_freeze_count() > 0, flush=True))
    left_open = open(sys.argv[1], "w")  # never closed: freed (and flushed) by its reference count at exit
    left_open.write("every byte")
    """
)


def test_the_heap_is_frozen_after_every_later_handler_and_open_files_still_flush(tmp_path):
    out = tmp_path / "written.txt"
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(out)], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["frozen by the command's own handlers: False", "frozen at the end: True"]
    assert out.read_text() == "every byte"


def _frozen_at_exit(setup: str, tmp_path) -> str:
    """What a process that runs ``setup`` says, in its last exit handler, of the heap being frozen."""
    program = "import atexit, gc\natexit.register(lambda: print(gc.get_freeze_count() > 0, flush=True))\n" + setup
    proc = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_command_line_and_the_local_workers_exit_this_way(tmp_path):
    """``mxcompat`` registers the freeze when its CLI is imported; a lane's worker in the initializer it starts with."""
    assert _frozen_at_exit("import kit.cli", tmp_path) == "True"
    assert _frozen_at_exit("import gc\nimport kit.execute.local_executor", tmp_path) == "False"
    # a worker's parent is this test: it watches it as a lane's worker watches the run
    worker = "import os, sys\nfrom kit.execute import local_executor as le\n"
    worker += "le._start_worker(os.getppid(), sys.argv[1], '')"
    assert _frozen_at_exit(worker, tmp_path) == "True"
    lane = LocalExecutor(jobs=1, home=KitHome(tmp_path / "home"))._lane(0)
    try:
        assert lane._initializer is local_executor._start_worker
    finally:
        lane.shutdown()
