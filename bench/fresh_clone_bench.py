#!/usr/bin/env python
"""The README's two commands on a fresh clone with empty package caches: ``make demo``, then ``make test``.

Clones this repository's HEAD into a temporary folder and runs the commands there with uv's, pip's and the
XDG caches (matplotlib's font list among them) pointed at empty folders inside it, so every wheel is fetched
and every environment built again. System packages and the browser (apt) are the machine's: they are
installed once per machine, and the JSON says whether they were there before. Writes each command's wall,
exit code and, for ``make test``, the seconds per test file (bench/test_durations.py's sums) to
bench/results/fresh-clone-STAMP.json.

    .venv/bin/python bench/fresh_clone_bench.py [--only demo|test] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from demo_bench import commit_of  # noqa: E402
from test_durations import per_file  # noqa: E402


def timed(argv: list[str], cwd: Path, env: dict, log: Path) -> dict:
    """Run ``argv`` in ``cwd``, its output to ``log``; wall seconds and exit code."""
    started = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    wall = round(time.monotonic() - started, 1)
    print(f"{' '.join(argv)}: exit {code} in {wall} s (log {log})", flush=True)
    return {"command": " ".join(argv), "wall_seconds": wall, "exit_code": code}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("demo", "test"), help="run one of the two commands")
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fresh-clone-"))
    clone, caches = work / "clone", work / "caches"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("MXCOMPAT_HOME", "MXCOMPAT_UV_CACHE", "VIRTUAL_ENV")}
    env.update(UV_CACHE_DIR=str(caches / "uv"), PIP_CACHE_DIR=str(caches / "pip"), XDG_CACHE_HOME=str(caches))
    result = {
        "what": "make demo and make test on a fresh clone, uv, pip and XDG caches empty",
        "commit": commit_of(clone),
        "cpus": os.cpu_count(),
        "system_packages_before": bool(shutil.which("chromium") or shutil.which("chromium-browser")),
        "commands": {},
    }
    try:
        if args.only in (None, "demo"):
            result["commands"]["demo"] = timed(["make", "demo"], clone, env, work / "demo.log")
        if args.only in (None, "test"):
            junit = work / "tests.xml"
            make_test = ["make", "test", f"PYTEST_ARGS=-q --junitxml={junit}"]
            result["commands"]["test"] = timed(make_test, clone, env, work / "test.log")
            if junit.is_file():
                result["commands"]["test"].update(per_file(junit))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")
    target = REPO / "bench" / "results" / f"fresh-clone-{time.strftime('%Y%m%d-%H%M%S')}.json"
    target.write_text(json.dumps(result, indent=1) + "\n")
    print(f"-> {target}")
    return 0 if all(c["exit_code"] == 0 for c in result["commands"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
