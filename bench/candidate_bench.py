#!/usr/bin/env python
"""The nightly candidate check: one build checked against the baselines already stored, against the faithful peer
of MXNet's checker doing the same (its inference script for that release).

Setup, not timed: the releases' environments (created where missing), the peer's files of every release
(``bench/peer_checker.py train``) and the kit's store of the checker's four cases saved by every release
(``mxcompat run --save ALL --cells FOUR``). Timed, in turns, ``--rounds`` times: the peer's check in the
candidate's interpreter (every stored release at or below it), then ``mxcompat run --load CANDIDATE --cells FOUR
--store S`` (reload only: nothing is trained, the summary notebook is executed as always). Median walls and their
ratio, and where the kit's wall went: before its first step (the command's start, store, plan, kernel start),
each step, after its last (reports).

    .venv/bin/python bench/candidate_bench.py [--releases R,...] [--candidate 1.9.1] [--rounds 3] [--warm]
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
PY = sys.executable
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from demo_bench import commit_of  # noqa: E402
from peer_bench import CHECKER_CELLS, TEN, _epoch  # noqa: E402

from kit.envs.manager import EnvManager  # noqa: E402
from kit.home import KitHome  # noqa: E402


def _cli(home: Path, *args: str, timeout: int = 3600) -> subprocess.CompletedProcess:
    env = dict(os.environ, MXCOMPAT_HOME=str(home))
    return subprocess.run([PY, "-m", "kit", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout)


def peer_check(python: str, out: Path) -> dict:
    started = time.monotonic()
    proc = subprocess.run([python, str(REPO / "bench" / "peer_checker.py"), "check", str(out)], capture_output=True,
                          text=True, cwd="/")  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"peer check exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]), wall=round(time.monotonic() - started, 3))


def kit_check(home: Path, candidate: str, store: Path, runs: Path, tag: str) -> dict:
    """The reload-only run; its wall and where it went (from run.json's steps)."""
    shutil.rmtree(runs / tag, ignore_errors=True)
    t0 = time.time()
    proc = _cli(home, "run", "--load", candidate, "--cells", CHECKER_CELLS, "--store", str(store),
                "--runs-dir", str(runs), "--run-id", tag, "--jobs", "1")  # fmt: skip
    wall = time.time() - t0
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"mxcompat run exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    manifest = json.loads((runs / tag / "run.json").read_text())
    steps = sorted(
        (s for s in manifest["steps"].values() if s.get("started_at")), key=lambda s: _epoch(s["started_at"])
    )
    first, last = _epoch(steps[0]["started_at"]), max(_epoch(s["started_at"]) + s["seconds"] for s in steps)
    notebooks = [runs / tag / "reload" / f"mxnet-{candidate}.ipynb", runs / tag / "summary.ipynb"]
    return {
        "wall": round(wall, 3),
        "warm_kernels": sum(_warm(p) for p in notebooks if p.is_file()),
        "exit_code": proc.returncode,
        "records": len(list((runs / tag / "records").glob("[!.]*.json"))),
        "before_first_step": round(first - t0, 3),
        "steps": {s["kind"]: round(s["seconds"], 3) for s in steps},
        "after_last_step": round(t0 + wall - last, 3),
        "outside_steps": round(wall - sum(s["seconds"] for s in steps), 3),
    }


def _warm(notebook: Path) -> bool:
    """The executed copy says its kernel came from ``mxcompat warm``'s keeper."""
    return "mxcompat warm" in json.loads(notebook.read_text())["metadata"].get("mxcompat", {}).get("kernel", "")


def _warm_figures(warms: list[dict], peer_wall: float) -> dict:
    wall = statistics.median(w["wall"] for w in warms)
    median = sorted(warms, key=lambda w: w["wall"])[len(warms) // 2]
    return {"kit_warm": {"median_wall": wall, "median_round": median, "rounds": warms},
            "kit_warm_over_peer": round(wall / peer_wall, 2)}  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", default=TEN, help="the releases whose baselines are stored (comma-separated)")
    parser.add_argument("--candidate", default="1.9.1", help="the build checked (one of --releases, the newest)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--home", default=str(REPO / ".kit"), help="the kit home with the environments")
    parser.add_argument("--work", help="keep the baselines here and reuse them when they are there (default: fresh)")
    parser.add_argument(
        "--warm",
        action="store_true",
        help="also time the kit with `mxcompat warm` keeping the candidate's and the summary's kernels started (the "
        "keeper is started before that round and stopped after it, untimed, as a nightly host would keep one)",
    )
    args = parser.parse_args(argv)
    names = args.releases.split(",")
    home = Path(args.home)
    manager = EnvManager(KitHome(home))
    missing = [n for n in names if manager.state_of(n) != "ready"]
    if missing:
        proc = _cli(home, "env", "create", *missing)
        if proc.returncode != 0:
            sys.exit(f"env create {' '.join(missing)} failed:\n{proc.stderr[-2000:]}")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="candidate-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    reuse = (work / "baselines.done").is_file()
    try:
        out, store, runs = work / "peer", work / "store", work / "runs"
        for name in [] if reuse else names:  # the peer's baselines: what its train script leaves in the bucket
            subprocess.run([str(manager.get(name).python), str(REPO / "bench" / "peer_checker.py"), "train", str(out)],
                           check=True, capture_output=True, cwd="/",
                           env=dict(os.environ, MXNET_ENFORCE_DETERMINISM="1"))  # fmt: skip
        if not reuse:
            saved = _cli(home, "run", "--save", ",".join(names), "--load", names[0], "--cells", CHECKER_CELLS,
                         "--store", str(store), "--runs-dir", str(runs), "--run-id", "base", "--jobs", "2")  # fmt: skip
            if saved.returncode not in (0, 1):
                sys.exit(f"the baselines' run failed:\n{saved.stdout[-2000:]}\n{saved.stderr[-2000:]}")
            (work / "baselines.done").write_text(",".join(names))
        candidate = str(manager.get(args.candidate).python)
        peers, kits, warms = [], [], []
        for i in range(args.rounds):  # in turns: the machine's noise falls on both alike
            peers.append(peer_check(candidate, out))
            kits.append(kit_check(home, args.candidate, store, runs, f"candidate-{i}"))
            if args.warm:
                _cli(home, "warm", "start", args.candidate, "--idle", "10m", timeout=600).check_returncode()
                try:
                    warms.append(kit_check(home, args.candidate, store, runs, f"warm-{i}"))
                finally:
                    _cli(home, "warm", "stop", timeout=60)
            warm = f", kit with warm kernels {warms[-1]['wall']} s" if warms else ""
            print(f"round {i + 1}: peer {peers[-1]['wall']} s, kit {kits[-1]['wall']} s{warm}", flush=True)
        peer_wall = statistics.median(p["wall"] for p in peers)
        kit_wall = statistics.median(k["wall"] for k in kits)
        median_kit = sorted(kits, key=lambda k: k["wall"])[len(kits) // 2]
        result = {
            "what": "candidate check: reload only, one release, the checker's four cases over the stored releases",
            "releases": names,
            "candidate": args.candidate,
            "rounds": args.rounds,
            "baselines_reused": reuse,
            "commit": commit_of(REPO),
            "cpus": os.cpu_count(),
            "peer": {"median_wall": peer_wall, "rounds": peers},
            "kit": {"median_wall": kit_wall, "median_round": median_kit, "rounds": kits},
            "kit_over_peer": round(kit_wall / peer_wall, 2),
            **(_warm_figures(warms, peer_wall) if warms else {}),
            "targets": {"kit_over_peer": 1.0, "outside_steps_seconds": 1.0},
        }
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    target = REPO / "bench" / "results" / f"candidate-{time.strftime('%Y%m%d-%H%M%S')}.json"
    target.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("peer", "kit")}, indent=1))
    print(f"kit median round: {json.dumps(median_kit)}")
    print(f"-> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
