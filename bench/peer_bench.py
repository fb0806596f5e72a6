#!/usr/bin/env python
"""The kit against a faithful peer of MXNet's nightly checker, side by side in one run.

Sections (all by default; pick with --sections):
  peer      MXNet's checker's four cases (--cells) over the releases: bench/peer_checker.py as the checker
            runs (train per release, then check per release, one interpreter each, one release at a time)
            and `mxcompat run --cells ...` with --jobs 1 and 2, each from an empty store; walls, the kit's
            ratio to the peer, time before the first step, the kit's orchestration overhead, and where a
            step's time goes (kernel start, imports, MXNet work)
  summary   the summary step on a run of --summary-records records (copies of the peer section's kit
            records under other model names, or of --records-from)
  vision    the vision group over the releases with --jobs 2 from an empty store

Timings on a shared 2-core machine are noisy: read the ratios measured within one run.
Usage: .venv/bin/python bench/peer_bench.py [--releases R,...] [--sections peer,summary] [--compare OLD.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kit.envs.manager import EnvManager  # noqa: E402
from kit.home import KitHome  # noqa: E402

PY = sys.executable
CHECKER_CELLS = "mlp:module_checkpoint,lenet:save_params,lenet:export,lstm:save_parameters"
TEN = "1.0.0.post4,1.1.0,1.2.1,1.3.1,1.4.1,1.5.1,1.6.0,1.7.0.post2,1.8.0.post0,1.9.1"
TARGETS = {
    "kit_over_peer": 1.3,  # --jobs 1
    "kit_over_peer_jobs2": 1.0,
    "summary_seconds_1000_records": 2.0,
    "before_first_step_seconds": 2.0,
    "jobs2_orchestration_overhead": 0.25,
    "vision_jobs2_minutes": 8.0,
}
WORK_MARKERS = {"train": "train_and_save(", "reload": "reload_all(", "summary": "summary.load("}


def _epoch(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


# -- the peer -----------------------------------------------------------------------------------
def peer(names, home, jobs=1):
    """bench/peer_checker.py as the checker runs it: every release trains (with MXNET_ENFORCE_DETERMINISM=1,
    as its train script exports), then every release checks; ``jobs`` at a time (the checker: one)."""
    manager = EnvManager(KitHome(home))
    out = home / f"peer-out-j{jobs}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)

    def one(phase, name):
        started = time.monotonic()
        env = dict(os.environ, OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // jobs)))
        if phase == "train":
            env["MXNET_ENFORCE_DETERMINISM"] = "1"
        proc = subprocess.run(
            [str(manager.get(name).python), str(REPO / "bench" / "peer_checker.py"), phase, str(out)],
            capture_output=True,
            text=True,
            cwd="/",
            env=env,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"peer {phase} {name} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]), wall=round(time.monotonic() - started, 2))

    started = time.monotonic()
    with ThreadPoolExecutor(jobs) as pool:
        trains = list(pool.map(lambda n: one("train", n), names))
        train_wall = time.monotonic() - started
        checks = list(pool.map(lambda n: one("check", n), names))
    wall = time.monotonic() - started
    counts: dict = {}
    for c in checks:
        for k in ("passed", "failed", "error"):
            counts[k] = counts.get(k, 0) + c[k]
    return {
        "jobs": jobs,
        "wall_seconds": round(wall, 2),
        "train_phase_seconds": round(train_wall, 2),
        "check_phase_seconds": round(wall - train_wall, 2),
        "process_seconds": round(sum(x["wall"] for x in trains + checks), 2),
        "in_process_work_seconds": round(sum(x["seconds"] for x in trains + checks), 2),
        "saved": sum(t["saved"] for t in trains),
        "checked": sum(counts.values()),
        "counts": counts,
    }


# -- the kit ------------------------------------------------------------------------------------
def _cell_seconds(path, marker):
    """(seconds of every cell, seconds of the cell holding ``marker``) from papermill's cell metadata."""
    nb = nbformat.read(path, as_version=4)
    total = work = 0.0
    for cell in nb.cells:
        d = (cell.get("metadata", {}).get("papermill") or {}).get("duration") or 0.0
        total += d
        if cell.cell_type == "code" and marker in cell.source:
            work += d
    setup = next(
        ((c.get("metadata", {}).get("papermill") or {}).get("duration") or 0.0)
        for c in nb.cells
        if c.cell_type == "code" and "import" in c.source and "parameters" not in c.get("metadata", {}).get("tags", [])
    )
    return total, work, setup


def kit_run(names, home, jobs, tag, cells=CHECKER_CELLS, models=None, timeout=3600, checkout=REPO):
    """``mxcompat run`` from an empty store; wall, steps by kind, and where the time outside steps went.

    ``checkout``: another checkout of the kit (``--baseline``) runs with its own virtualenv and kit home."""
    if checkout != REPO:
        home = checkout / ".kit"
    runs, store = home / "runs", home / f"store-{tag}"
    shutil.rmtree(store, ignore_errors=True)
    shutil.rmtree(runs / tag, ignore_errors=True)
    args = ["run", "--save", ",".join(names), "--runs-dir", str(runs), "--run-id", tag, "--store", str(store)]
    args += ["--jobs", str(jobs)] + (["--cells", cells] if cells else []) + (["--models", models] if models else [])
    env = dict(os.environ, MXCOMPAT_HOME=str(home))
    python = PY if checkout == REPO else str(checkout / ".venv" / "bin" / "python")
    t0 = time.time()
    proc = subprocess.run(
        [python, "-m", "kit", *args], capture_output=True, text=True, env=env, cwd=checkout, timeout=timeout
    )
    wall = time.time() - t0
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"mxcompat {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr}")
    manifest = json.loads((runs / tag / "run.json").read_text())
    steps = [s for s in manifest["steps"].values() if s["status"] == "ok"]
    by_kind: dict = {}
    for s in steps:
        total, work, setup = _cell_seconds(s["output"], WORK_MARKERS[s["kind"]])
        k = by_kind.setdefault(
            s["kind"], {"steps": 0, "seconds": 0.0, "in_notebook": 0.0, "setup_cell": 0.0, "work_cell": 0.0}
        )
        k["steps"] += 1
        k["seconds"] += s["seconds"]
        k["in_notebook"] += total
        k["setup_cell"] += setup
        k["work_cell"] += work
    for k in by_kind.values():
        k["outside_notebook"] = k["seconds"] - k["in_notebook"]  # kernel start, papermill, writing the copy
        for key in list(k):
            if key != "steps":
                k[key] = round(k[key], 2)
    starts = [_epoch(s["started_at"]) for s in steps if s.get("started_at")]
    ends = [_epoch(s["started_at"]) + s["seconds"] for s in steps if s.get("started_at")]
    step_seconds = sum(s["seconds"] for s in steps)
    slots = min(jobs, os.cpu_count() or 1)
    records = list((runs / tag / "records").glob("[!.]*.json"))
    return {
        "jobs": jobs,
        "wall_seconds": round(wall, 2),
        "exit_code": proc.returncode,
        "records": len(records),
        "counts": manifest.get("counts"),
        "by_kind": by_kind,
        "before_first_step_seconds": round(min(starts) - t0, 2) if starts else None,
        "after_last_step_seconds": round(t0 + wall - max(ends), 2) if ends else None,
        # the share of the wall (x job slots) in which no step ran: start-up, waits between waves, reports
        "orchestration_overhead": round(1 - step_seconds / (wall * slots), 3),
        "run_dir": str(runs / tag),
        "commit": subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
    }


# -- the summary on many records ----------------------------------------------------------------
def summary_on(records_from: Path, n: int, home: Path):
    """The summary notebook (the step a run ends with) on ``n`` records made from ``records_from``'s."""
    from kit.envs import kernelspecs
    from kit.execute.notebooks import NOTEBOOKS, prestart, run_notebook

    source = sorted(p for p in (records_from / "records").glob("[!.]*.json"))
    run_dir = home / "runs" / f"summary-{n}"
    shutil.rmtree(run_dir, ignore_errors=True)
    (run_dir / "records").mkdir(parents=True)
    shutil.copy(records_from / "run.json", run_dir / "run.json")
    for i in range(n):
        rec = json.loads(source[i % len(source)].read_text())
        rec["model"] = f"{rec['model']}{i // len(source)}" if i >= len(source) else rec["model"]
        (run_dir / "records" / f"r{i:05d}.json").write_text(json.dumps(rec))
    from kit.orchestrate.matrix import _write_reports
    from kit.orchestrate.request import RunRequest
    from kit.results.runs import Run

    manifest = json.loads((run_dir / "run.json").read_text())
    run, req = Run(run_dir.parent, run_dir.name), RunRequest(**manifest["request"])
    kernelspecs.ensure_host_kernel(KitHome(home))
    prestart(kernelspecs.HOST_KERNEL, KitHome(home))  # as a run does while its last reload steps run
    time.sleep(5)
    started = time.monotonic()
    _write_reports(run, req, manifest)  # what a run writes before its summary step: the notebook reads them
    before = time.monotonic()
    run_notebook(
        NOTEBOOKS / "summary.ipynb",
        run_dir / "summary.ipynb",
        kernelspecs.HOST_KERNEL,
        {"run_dir": str(run_dir)},
        home=KitHome(home),
    )
    after = time.monotonic()
    _write_reports(run, req, manifest)  # and after it, with the HTML
    done = time.monotonic()
    total, work, setup = _cell_seconds(run_dir / "summary.ipynb", "summary.load(")
    return {
        "records": n,
        "seconds": round(after - before, 2),
        "reports_before_seconds": round(before - started, 2),
        "reports_after_seconds": round(done - after, 2),
        "in_notebook": round(total, 2),
        "setup_cell": round(setup, 2),
        "notebook_kb": round((run_dir / "summary.ipynb").stat().st_size / 1024),
    }


def _median_run(runs: list[dict]) -> dict:
    """The run with the median wall of ``runs`` (an odd count; the lower middle of an even one), with every
    round's wall beside it."""
    ordered = sorted(runs, key=lambda r: r["wall_seconds"])
    return dict(ordered[(len(ordered) - 1) // 2], rounds=[r["wall_seconds"] for r in runs])


def peer_section(names, home, jobs, rounds, baseline=None):
    """The peer (one release at a time), then the kit with each --jobs (and a --baseline checkout's kit), in
    turns, ``rounds`` times: each figure is its median round, so the machine's noise falls on all alike."""
    runs: dict = {"peer": []}
    for i in range(rounds):
        print(f"round {i + 1}: peer script, one release at a time (as the checker runs)", flush=True)
        runs["peer"].append(peer(names, home, 1))
        for j in jobs:
            print(f"round {i + 1}: kit --cells, --jobs {j}", flush=True)
            runs.setdefault(f"kit{j}", []).append(kit_run(names, home, j, f"peer-kit-j{j}"))
            if baseline is not None:
                print(f"round {i + 1}: baseline kit ({baseline}) --cells, --jobs {j}", flush=True)
                b = kit_run(names, home, j, f"peer-baseline-j{j}", checkout=baseline)
                runs.setdefault(f"baseline{j}", []).append(b)
    p = _median_run(runs["peer"])
    out = {}
    for j in jobs:
        k = _median_run(runs[f"kit{j}"])
        out[f"jobs{j}"] = {"peer": p, "kit": k, "kit_over_peer": round(k["wall_seconds"] / p["wall_seconds"], 2)}
        if baseline is not None:
            b = _median_run(runs[f"baseline{j}"])
            out[f"jobs{j}"].update(
                baseline=b,
                baseline_over_peer=round(b["wall_seconds"] / p["wall_seconds"], 2),
                kit_over_baseline=round(k["wall_seconds"] / b["wall_seconds"], 2),
            )
        print(f"  --jobs {j}: peer {p['wall_seconds']}s, kit {k['wall_seconds']}s: x{out[f'jobs{j}']['kit_over_peer']}")
    return out


def _ready(manager, name):
    try:
        return manager.get(name).state == "ready"
    except Exception:  # noqa: BLE001 - not created
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--releases", default=TEN, help="comma-separated (default: the ten 1.x releases)")
    ap.add_argument("--sections", default="peer,summary")
    ap.add_argument("--jobs", default="1,2")
    ap.add_argument("--home", default=os.environ.get("MXCOMPAT_HOME", str(REPO / ".kit")))
    ap.add_argument("--summary-records", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=1, help="repeat the peer section, each figure its median round")
    ap.add_argument("--records-from", help="a run folder whose records the summary section copies")
    ap.add_argument("--out", help="JSON to write (default bench/results/peer-<timestamp>.json)")
    ap.add_argument("--compare", help="an earlier JSON to print ratios against")
    ap.add_argument("--table", metavar="JSON", help="print the README's cost table from a result file, and stop")
    ap.add_argument(
        "--baseline",
        metavar="CHECKOUT",
        help="another checkout of the kit (before a change): its kit runs too, in turn with this one's",
    )
    args = ap.parse_args()
    if args.table:
        print(cost_table(json.loads(Path(args.table).read_text()), Path(args.table).name))
        return
    names, home = args.releases.split(","), Path(args.home)
    sections, jobs = args.sections.split(","), [int(j) for j in args.jobs.split(",")]
    manager = EnvManager(KitHome(home))
    missing = [n for n in names if not _ready(manager, n)]
    if missing:
        sys.exit(f"no ready environment for {', '.join(missing)}: mxcompat env create {' '.join(missing)}")
    result = {
        "machine": {"cpus": os.cpu_count()},
        "releases": names,
        "cells": CHECKER_CELLS,
        "targets": TARGETS,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if "peer" in sections:
        result["peer"] = peer_section(
            names, home, jobs, args.rounds, Path(args.baseline).resolve() if args.baseline else None
        )
    if "summary" in sections:
        src = Path(args.records_from) if args.records_from else Path(result["peer"]["jobs1"]["kit"]["run_dir"])
        print(f"summary on {args.summary_records} records", flush=True)
        result["summary"] = summary_on(src, args.summary_records, home)
    if "vision" in sections:
        print("vision group, --jobs 2, empty store", flush=True)
        result["vision"] = kit_run(names, home, 2, "vision-j2", cells=None, models="vision", timeout=7200)
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result["verdicts"] = verdicts(result)
    out = Path(args.out) if args.out else REPO / "bench" / "results" / f"peer-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    for line in result["verdicts"]:
        print(line)
    if args.compare:
        old = json.loads(Path(args.compare).read_text())
        for key in ("jobs1", "jobs2"):
            if key in old.get("peer", {}) and key in result.get("peer", {}):
                was, now = old["peer"][key]["kit"]["wall_seconds"], result["peer"][key]["kit"]["wall_seconds"]
                print(f"kit {key}: {was}s before, {now}s now (x{now / was:.2f})")
    print(f"wrote {out}")


def cost_table(r, name):
    """The README's cost table (markdown) from one result file: every figure traces to ``name``."""
    rows = [f"| figure (`bench/results/{name}`) | measured | target |", "|---|---|---|"]
    for key, run in r.get("peer", {}).items():
        p, k = run["peer"], run["kit"]
        rows.append(
            f"| checker's four cases, {len(r['releases'])} releases, kit `--{key.replace('jobs', 'jobs ')}` / "
            f"the checker's peer, one release at a time | {k['wall_seconds']:.1f} s / {p['wall_seconds']:.1f} s = "
            f"**{run['kit_over_peer']}x** ({k['records']} records) | "
            f"<= {TARGETS['kit_over_peer_jobs2' if key == 'jobs2' else 'kit_over_peer']}x |"
        )
        if "baseline" in run:
            b = run["baseline"]
            rows.append(
                f"| the same, the kit before (`{b.get('commit') or b['run_dir'].split('/.kit/')[0]}`) / the peer | "
                f"{b['wall_seconds']:.1f} s / {p['wall_seconds']:.1f} s = {run['baseline_over_peer']}x "
                f"(now / before: {run['kit_over_baseline']}x) | |"
            )
        rows.append(
            f"| time before the first step, `--{key.replace('jobs', 'jobs ')}` | {k['before_first_step_seconds']} s | "
            f"<= {TARGETS['before_first_step_seconds']} s |"
        )
    if "jobs2" in r.get("peer", {}):
        rows.append(
            f"| `--jobs 2` orchestration overhead (job-slot time with no step running) | "
            f"{r['peer']['jobs2']['kit']['orchestration_overhead']:.0%} | "
            f"<= {TARGETS['jobs2_orchestration_overhead']:.0%} |"
        )
    if "summary" in r:
        s = r["summary"]
        target = TARGETS["summary_seconds_1000_records"]
        rows.append(f"| summary step on {s['records']} records | {s['seconds']} s | <= {target} s |")
    if "vision" in r:
        v = r["vision"]
        rows.append(
            f"| vision group, {len(r['releases'])} releases, `--jobs 2`, empty store | "
            f"{v['wall_seconds'] / 60:.1f} min ({v['records']} records) | "
            f"<= {TARGETS['vision_jobs2_minutes']} min over ten releases |"
        )
    return "\n".join(rows)


def verdicts(r):
    """One line per target: the measured value, the target, met or by how much it misses."""
    lines = []

    def line(name, value, target, unit=""):
        ok = value is not None and value <= target
        miss = "" if ok or value is None else f", misses by {value - target:.2f}{unit}"
        lines.append(f"{'MET ' if ok else 'MISS'} {name}: {value}{unit} (target <= {target}{unit}{miss})")

    for key, run in r.get("peer", {}).items():
        target = TARGETS["kit_over_peer_jobs2"] if key == "jobs2" else TARGETS["kit_over_peer"]
        line(f"kit / peer wall, {key}", run["kit_over_peer"], target, "x")
        line(
            f"before the first step, {key}",
            run["kit"]["before_first_step_seconds"],
            TARGETS["before_first_step_seconds"],
            " s",
        )
    if "jobs2" in r.get("peer", {}):
        line(
            "--jobs 2 orchestration overhead",
            r["peer"]["jobs2"]["kit"]["orchestration_overhead"],
            TARGETS["jobs2_orchestration_overhead"],
        )
    if "summary" in r:
        line(
            f"summary step on {r['summary']['records']} records",
            r["summary"]["seconds"],
            TARGETS["summary_seconds_1000_records"],
            " s",
        )
    if "vision" in r:
        minutes, n = round(r["vision"]["wall_seconds"] / 60, 2), len(r["releases"])
        if n >= 10:
            line("vision group, --jobs 2", minutes, TARGETS["vision_jobs2_minutes"], " min")
        else:  # the target is over ten releases: a smaller run meets nothing
            lines.append(f"N/A  vision group, {n} releases, --jobs 2: {minutes} min (target: ten releases in 8 min)")
    return lines


if __name__ == "__main__":
    main()
