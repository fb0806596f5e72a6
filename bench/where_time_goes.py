#!/usr/bin/env python
"""Where a run's time goes: the checker's four cases over the releases, sampled with py-spy, in one run.

Runs the faithful peer of MXNet's checker (``bench/peer_checker.py``, one release at a time) and
``mxcompat run --cells <the checker's four cases>`` with each ``--jobs`` from an empty store, each under
``py-spy record --subprocesses --idle --nonblocking`` (no process is paused to be sampled), and sorts every
sample of a thread that was not waiting for work
(a thread waiting for MXNet's engine to compute counts: its work runs in threads py-spy does not see) by
what it was doing:

  kernel      kernel start (ipykernel), imports (MXNet, the kit, matplotlib, pandas), MXNet work (training;
              saving and references; reloading and comparing), records and artifacts written, plots and
              tables, the summary, and the rest (messaging, output)
  worker      the executed copy's writes (papermill, nbformat), the kernel's launch, papermill and nbclient
  orchestrator  the CLI's imports, the reports, orchestration
  peer        imports, the rest (its MXNet work)

Thread seconds, not wall: with --jobs 2 the lanes add up. Writes JSON with the walls beside.

    .venv/bin/pip install -e '.[bench]'        # py-spy
    .venv/bin/python bench/where_time_goes.py [--releases R,...] [--jobs 1,2] [--rate 100]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from demo_bench import commit_of  # noqa: E402
from peer_bench import CHECKER_CELLS, PY, TEN  # noqa: E402

#: a sample whose innermost frame is one of these waits for work to come: not counted
IDLE = re.compile(
    r"^(?:(?:wait|_wait|select|poll|_poll|sleep|recv|recv_into|accept|acquire|_wait_for_tstate_lock|_watch_pipe_fd|"
    r"device|_recv|_recv_bytes) \(|run \(.*(?:heartbeat|parentpoller)|get \(.*queue|main \(.*resource_tracker)"
)
#: per process kind, (category, regex on the sample's stack): the first that matches
RULES = {
    "kernel": [
        ("records and artifacts written", r"write_json_atomic|commit_dir|hash_files|save_reference"),
        ("MXNet work: training", r"train_and_save.*kernel/training\.py"),
        ("MXNet work: saving, references", r"train_and_save"),
        ("MXNet work: reloading, comparing", r"reload_all"),
        ("summary notebook", r"kit/results/"),
        ("imports", r"_find_and_load"),
        ("plots and tables", r"plots\.py|matplotlib/|pandas/io/formats"),
        ("kernel start (ipykernel)", r"launch_instance|ipykernel/kernelapp"),
        ("messaging, output", r""),
    ],
    "worker": [
        ("executed copy written", r"write_ipynb|_record_kernel|nbformat/__init__\.py"),
        ("kernel launch", r"start_kernel|prestart|launch_kernel"),
        ("imports", r"_find_and_load"),
        ("papermill and nbclient", r""),
    ],
    "orchestrator": [
        ("reports", r"_write_reports|write_all"),
        ("imports", r"_find_and_load"),
        ("orchestration", r""),
    ],
    "peer": [
        ("imports", r"_find_and_load"),
        ("MXNet work", r""),
    ],
}


def process_kind(command: str) -> str:
    if "ipykernel" in command:
        return "kernel"
    if "spawn_main" in command:
        return "worker"
    if "peer_checker.py" in command:
        return "peer"
    return "orchestrator"


def classify(raw: str, rate: int) -> dict:
    """Busy thread seconds by process kind and category, from py-spy's raw output (``frame;frame;... count``)."""
    out: dict = collections.defaultdict(lambda: collections.defaultdict(float))
    idle = 0.0
    for stack, count in re.findall(r"(.*?) (\d+)\n", raw, re.S):
        frames = stack.split(";")
        processes = [f for f in frames if f.startswith("process ")]
        code = [f for f in frames if not f.startswith("process ")]
        seconds = int(count) / rate
        if not code or IDLE.match(re.sub(r"^\S+\.", "", code[-1])):
            idle += seconds
            continue
        kind = process_kind(processes[-1] if processes else "")
        if kind == "orchestrator" and processes and "kit" not in processes[-1]:
            kind = "peer" if "peer" in processes[-1] else kind
        text = ";".join(code)
        category = next(name for name, pattern in RULES[kind] if re.search(pattern, text))
        out[kind][category] += seconds
    result = {k: {c: round(s, 2) for c, s in sorted(v.items(), key=lambda x: -x[1])} for k, v in out.items()}
    return {"thread_seconds": result, "idle_samples_seconds": round(idle, 2)}


def sampled(command: list[str], rate: int, env: dict) -> tuple[float, dict]:
    raw = Path(tempfile.mkstemp(suffix=".txt")[1])
    spy = shutil.which("py-spy", path=str(Path(PY).parent)) or shutil.which("py-spy")
    if not spy:
        raise SystemExit("py-spy is not installed: .venv/bin/pip install -e '.[bench]'")
    started = time.monotonic()
    proc = subprocess.run(
        [
            spy,
            "record",
            "--subprocesses",
            "--idle",
            "--rate",
            str(rate),
            "--format",
            "raw",
            "-o",
            str(raw),
            "--",
            *command,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    wall = time.monotonic() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    found = classify(raw.read_text(), rate)
    raw.unlink()
    return wall, found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--releases", default=TEN, help="comma-separated (default: the ten 1.x releases)")
    ap.add_argument("--jobs", default="1,2")
    ap.add_argument("--rate", type=int, default=20, help="samples a second per process")
    ap.add_argument("--home", default=os.environ.get("MXCOMPAT_HOME", str(REPO / ".kit")))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    home = Path(args.home)
    env = dict(os.environ, MXCOMPAT_HOME=str(home))
    names = args.releases.split(",")
    result = {
        "machine": {"cpus": os.cpu_count()},
        "releases": args.releases,
        "cells": CHECKER_CELLS,
        "rate": args.rate,
        "commit": commit_of(REPO),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "runs": {},
    }
    print("peer: one release at a time, sampled", flush=True)
    code = f"import sys; sys.path.insert(0, {str(REPO / 'bench')!r}); import peer_bench, pathlib; "
    code += f"peer_bench.peer({names!r}, pathlib.Path({str(home)!r}), 1)"
    wall, found = sampled([PY, "-c", code], args.rate, env)
    result["runs"]["peer"] = dict(wall_seconds=round(wall, 2), **found)
    for jobs in [int(j) for j in args.jobs.split(",")]:
        print(f"kit --jobs {jobs}, sampled", flush=True)
        work = Path(tempfile.mkdtemp(prefix="where-time-goes-"))
        command = [PY, "-m", "kit", "run", "--save", args.releases, "--cells", CHECKER_CELLS, "--jobs", str(jobs)]
        command += ["--store", str(work / "store"), "--runs-dir", str(work / "runs"), "--run-id", f"j{jobs}"]
        wall, found = sampled(command, args.rate, env)
        manifest = json.loads((work / "runs" / f"j{jobs}" / "run.json").read_text())
        result["runs"][f"kit_jobs{jobs}"] = dict(
            wall_seconds=round(wall, 2), exit_code=manifest.get("exit_code"), **found
        )
        shutil.rmtree(work, ignore_errors=True)
    for name, run in result["runs"].items():
        total = sum(sum(v.values()) for v in run["thread_seconds"].values())
        print(f"\n{name}: wall {run['wall_seconds']} s, busy threads {total:.1f} s")
        for kind, categories in run["thread_seconds"].items():
            for category, seconds in categories.items():
                print(f"  {kind:13} {category:36} {seconds:6.2f} s")
    out = args.out or REPO / "bench" / "results" / f"where-time-goes-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
