#!/usr/bin/env python
"""Where ``make test``'s time goes: a JUnit file of a full run (pytest's durations: setup, call and teardown
together) summed per test file, slowest first, with the run's wall; JSON in bench/results/ for a later run to
compare with.

    make test PYTEST_ARGS="-q --junitxml=/tmp/tests.xml"
    .venv/bin/python bench/test_durations.py /tmp/tests.xml [--wall SECONDS]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from xml.etree import ElementTree as ET

from demo_bench import commit_of

REPO = Path(__file__).resolve().parent.parent


def per_file(junit: str | Path) -> dict:
    """A JUnit file's test seconds and tests in all, and per test file, slowest first."""
    files: dict = defaultdict(lambda: {"tests": 0, "seconds": 0.0})
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("classname", "").split(".")
        path = "/".join(name[: next((i for i, p in enumerate(name) if p.startswith("test_")), len(name) - 1) + 1])
        files[path + ".py"]["tests"] += 1
        files[path + ".py"]["seconds"] += float(case.get("time") or 0)
    ordered = sorted(files.items(), key=lambda kv: -kv[1]["seconds"])
    return {
        "test_seconds": round(sum(v["seconds"] for v in files.values()), 1),
        "tests": sum(v["tests"] for v in files.values()),
        "files": {k: {"tests": v["tests"], "seconds": round(v["seconds"], 1)} for k, v in ordered},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", help="the JUnit XML of a full test run")
    parser.add_argument("--wall", type=float, help="the run's wall in seconds, as its log says")
    parser.add_argument("--commit", help="the commit the run tested (default: this checkout's)")
    parser.add_argument("--note", help="how it ran: caches, workers, machine")
    args = parser.parse_args(argv)
    sums = per_file(args.junit)
    result = {
        "what": "make test: seconds per test file (setup, call and teardown), slowest first",
        "commit": args.commit or commit_of(REPO),
        "wall_seconds": args.wall,
        **({"note": args.note} if args.note else {}),
        **sums,
    }
    target = REPO / "bench" / "results" / f"test-durations-{time.strftime('%Y%m%d-%H%M%S')}.json"
    target.write_text(json.dumps(result, indent=1) + "\n")
    for path, v in list(sums["files"].items())[:15]:
        print(f"{v['seconds']:8.1f} s  {v['tests']:3d} tests  {path}")
    print(f"{sums['test_seconds']} test seconds in {len(sums['files'])} files -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
