#!/usr/bin/env python
"""The `make demo` matrix run by two checkouts of the kit, side by side in one run: before and after a change.

Each checkout runs with its own virtualenv and kit home (``<checkout>/.venv``, ``<checkout>/.kit``: its
environments import that checkout's kernel side), the demo's request (``--save`` the demo releases,
``--load`` them and onnx, ``--forward``, ``--jobs 2``) from an empty store, in turns (A, B, A, B, ...), so the
machine's noise falls on both alike. Writes the walls, their medians, the ratio and each run's steps
(seconds by kind, kernels kept) to JSON.

    .venv/bin/python bench/demo_bench.py --baseline /tmp/old-checkout [--candidate .] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO = "1.0.0.post4,1.2.1,1.4.1,1.5.1,1.7.0.post2,1.9.1,2.0.0b1"


def run_demo(checkout: Path, tag: str, releases: str, load_extra: str, jobs: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"demo-bench-{tag}-"))
    args = ["run", "--save", releases, "--load", ",".join(filter(None, [releases, load_extra]))]
    args += ["--forward", "--jobs", str(jobs), "--store", str(work / "store"), "--runs-dir", str(work / "runs")]
    args += ["--run-id", tag]
    env = dict(os.environ, MXCOMPAT_HOME=str(checkout / ".kit"))
    started = time.monotonic()
    proc = subprocess.run(
        [str(checkout / ".venv" / "bin" / "python"), "-m", "kit", *args],
        capture_output=True,
        text=True,
        cwd=checkout,
        env=env,
        timeout=3600,
    )
    wall = time.monotonic() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{checkout}: mxcompat {' '.join(args)} exited {proc.returncode}\n{proc.stderr[-3000:]}")
    manifest = json.loads((work / "runs" / tag / "run.json").read_text())
    by_kind: dict = {}
    kept = 0
    for step_id, step in manifest["steps"].items():
        kind = step_id.split(":")[0]
        by_kind[kind] = round(by_kind.get(kind, 0.0) + (step.get("seconds") or 0.0), 2)
        output = Path(step.get("output") or "")
        if output.is_file() and '"mxcompat": {' in output.read_text():
            kept += 1
    records = len(list((work / "runs" / tag / "records").glob("[!.]*.json")))
    shutil.rmtree(work, ignore_errors=True)
    return {
        "wall_seconds": round(wall, 2),
        "run_wall_seconds": manifest.get("wall_seconds"),
        "exit_code": proc.returncode,
        "records": records,
        "counts": manifest.get("counts"),
        "step_seconds_by_kind": by_kind,
        "steps_on_a_kept_kernel": kept,
    }


def commit_of(checkout: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, type=Path, help="a checkout of the kit before the change")
    ap.add_argument("--candidate", type=Path, default=REPO, help="a checkout after it (default: this one)")
    ap.add_argument("--releases", default=DEMO)
    ap.add_argument("--load-extra", default="onnx", help="load targets beyond the releases (default: onnx)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    for checkout in (args.baseline, args.candidate):
        if not (checkout / ".venv" / "bin" / "python").is_file():
            ap.error(f"{checkout} has no .venv: run make setup (and mxcompat env create) there first")
    result = {
        "machine": {"cpus": os.cpu_count()},
        "releases": args.releases,
        "load_extra": args.load_extra,
        "jobs": args.jobs,
        "baseline": {"checkout": str(args.baseline), "commit": commit_of(args.baseline), "runs": []},
        "candidate": {"checkout": str(args.candidate), "commit": commit_of(args.candidate), "runs": []},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    for i in range(args.rounds):
        for side in ("baseline", "candidate"):
            checkout = args.baseline if side == "baseline" else args.candidate
            print(f"round {i + 1}: {side} ({result[side]['commit']})", flush=True)
            run = run_demo(checkout, f"{side}-{i}", args.releases, args.load_extra, args.jobs)
            result[side]["runs"].append(run)
            print(f"  {run['wall_seconds']} s, {run['records']} records", flush=True)
    for side in ("baseline", "candidate"):
        result[side]["median_wall_seconds"] = statistics.median(r["wall_seconds"] for r in result[side]["runs"])
    before, after = result["baseline"]["median_wall_seconds"], result["candidate"]["median_wall_seconds"]
    result["candidate_over_baseline"] = round(after / before, 3)
    result["faster_by"] = round(1 - after / before, 3)
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out = args.out or REPO / "bench" / "results" / f"demo-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"baseline {before} s, candidate {after} s: {result['faster_by']:.0%} faster; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
