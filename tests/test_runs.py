"""Run folders: partial writes of dead writers are swept, a live writer's are kept."""

import os
import subprocess
import sys

from kit.runs import Run


def test_sweep_removes_only_the_temporary_files_of_dead_writers(tmp_path):
    run = Run(tmp_path, "r1")
    (run.dir / "records").mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = run.dir / "records" / f"1.9.1__mlp__export__2.0.0b1.json.tmp-{dead.stdout.strip()}"
    live = run.dir / f"run.tmp-{os.getpid()}"
    record = run.dir / "records" / "1.9.1__mlp__export__2.0.0b1.json"
    for path in (stale, live, record):
        path.write_text("{}")
    assert run.sweep_partial_writes() == [stale]
    assert not stale.exists() and live.exists() and record.exists()
