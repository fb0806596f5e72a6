#!/usr/bin/env python
"""What an environment costs to build, and what its kernels then cost to start: two checkouts of the kit side
by side, in turns (A, B, A, B, ...), warm uv cache.

Each side builds RELEASES into a kit home of its own with ``env create --jobs 2`` (as ``make demo`` does), and
then starts each release's kernel three times the way a step does (the prestart imports, then the reload
notebook's imports and a figure), PYTHONDONTWRITEBYTECODE set as on CI: a build that skips bytecode the
kernels need would show here. Writes the walls, each environment's build seconds and the kernel starts'
medians to bench/results/env-build-STAMP.json.

    git worktree add /tmp/before HEAD~1
    .venv/bin/python bench/env_build_bench.py --baseline /tmp/before [--releases 1.0.0.post4,1.9.1] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from demo_bench import commit_of

REPO = Path(__file__).resolve().parent.parent

#: run by the host Python with a checkout's kit first on sys.path: one kernel start, as a step's, timed
KERNEL_START = """
import sys, time
from jupyter_core.utils import run_sync
from kit.envs import kernelspecs
try:
    from kit.envs.kernelspecs import prestart_arguments
except ImportError:  # a checkout from before it moved there
    from kit.execute.notebooks import prestart_arguments
from kit.home import KitHome
home, name = KitHome(sys.argv[1]), sys.argv[2]
started = time.monotonic()
km = kernelspecs.kernel_manager(home, name, None)
run_sync(km.start_kernel)(extra_arguments=prestart_arguments(name))
kc = km.client()
kc.start_channels()
run_sync(kc.wait_for_ready)(timeout=120)
code = "import kit.kernel.entry.reload_run, matplotlib.pyplot as plt; plt.figure()"
reply = run_sync(kc.execute_interactive)(code, timeout=120, output_hook=lambda msg: None)
assert reply["content"]["status"] == "ok", reply["content"]
print(round(time.monotonic() - started, 3))
kc.stop_channels()
run_sync(km.shutdown_kernel)(now=True)
"""


def build(checkout: Path, releases: list[str]) -> dict:
    home = Path(tempfile.mkdtemp(prefix="env-build-bench-"))
    env = dict(os.environ, MXCOMPAT_HOME=str(home), PYTHONPATH=str(checkout), PYTHONDONTWRITEBYTECODE="1")
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "kit", "env", "create", *releases, "--jobs", "2"],
        capture_output=True,
        text=True,
        env=env,
        cwd=checkout,
    )
    wall = round(time.monotonic() - started, 2)
    if proc.returncode != 0:
        raise SystemExit(f"env create failed in {checkout}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    built = {m[1]: float(m[2]) for m in re.finditer(r"\] (\S+): created in ([0-9.]+)s", proc.stdout)}
    starts = {}
    for release in releases:
        times = []
        for _ in range(3):
            out = subprocess.run(
                [sys.executable, "-c", KERNEL_START, str(home), f"mxnet-{release}"],
                capture_output=True,
                text=True,
                env=env,
                cwd=checkout,
                check=True,
            )
            times.append(float(out.stdout.strip().splitlines()[-1]))
        starts[release] = round(statistics.median(times), 3)
    shutil.rmtree(home, ignore_errors=True)
    return {"wall": wall, "built": built, "kernel_start_median": starts}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the checkout before the change")
    parser.add_argument("--candidate", default=str(REPO), help="the checkout after it (default: this one)")
    parser.add_argument("--releases", default="1.0.0.post4,1.9.1,2.0.0b1")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    releases = args.releases.split(",")
    sides = {"baseline": Path(args.baseline).resolve(), "candidate": Path(args.candidate).resolve()}
    rounds: dict = {side: [] for side in sides}
    for i in range(args.rounds):
        for side, checkout in sides.items():
            rounds[side].append(build(checkout, releases))
            print(f"round {i + 1} {side}: {rounds[side][-1]}", flush=True)
    commits = {side: commit_of(c) for side, c in sides.items()}
    median = {side: round(statistics.median(r["wall"] for r in runs), 2) for side, runs in rounds.items()}
    result = {
        "what": "env create RELEASES --jobs 2 (warm uv cache) and kernel starts in what it built, two checkouts",
        "releases": releases,
        "commits": commits,
        "cpus": os.cpu_count(),
        "rounds": rounds,
        "median_wall": median,
        "candidate_over_baseline": round(median["candidate"] / median["baseline"], 3),
    }
    target = REPO / "bench" / "results" / f"env-build-{time.strftime('%Y%m%d-%H%M%S')}.json"
    target.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({"median_wall": median, "ratio": result["candidate_over_baseline"]}), f"-> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
