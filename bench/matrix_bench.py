#!/usr/bin/env python
"""What a matrix costs, and where the time goes. Writes JSON a later run can compare with.

Sections (all by default; pick with --sections):
  provisioning  per release: env creation with a cold uv cache, with a warm one, and plain pip (warm)
  matrix        every release x model x API: wall time per phase, kernel starts, kernel start+import
                against MXNet work, orchestration overhead, --jobs 2 against --jobs 1
  growth        wall time and peak memory as releases, models and the reference batch double
  baseline      the same train+reload work as plain scripts in each env, no notebooks

Timings on a shared 2-core machine are noisy: compare ratios measured within one run.
Usage: .venv/bin/python bench/matrix_bench.py [--releases 1.0.0.post4,1.9.1] [--quick] [--compare OLD.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kit.envs import releases as release_table  # noqa: E402
from kit.envs.manager import EnvManager  # noqa: E402
from kit.home import KitHome  # noqa: E402

PY = sys.executable
TARGETS = {"warm_env_seconds": 10.0, "full_matrix_minutes": 15.0, "overhead_fraction": 0.25, "notebook_ratio": 1.3}


def cli(args, home, env_extra=None, timeout=3600):
    env = dict(os.environ, MXCOMPAT_HOME=str(home), **(env_extra or {}))
    return subprocess.run([PY, "-m", "kit", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout)


class PeakRSS:
    """Peak resident memory of a process and all its children, sampled every 0.2 s."""

    def __init__(self, pid):
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                root = psutil.Process(self.pid)
                procs = [root] + root.children(recursive=True)
                total = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total)
            except psutil.Error:
                return
            time.sleep(0.2)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.peak


def timed_run(args, home, env_extra=None):
    env = dict(os.environ, MXCOMPAT_HOME=str(home), **(env_extra or {}))
    started = time.monotonic()
    proc = subprocess.Popen(
        [PY, "-m", "kit", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO
    )
    mem = PeakRSS(proc.pid)
    out, err = proc.communicate()
    peak = mem.stop()
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"mxcompat {' '.join(args)} exited {proc.returncode}:\n{out[-2000:]}\n{err[-2000:]}")
    return time.monotonic() - started, peak, out


# -- provisioning -------------------------------------------------------------------------------
def provisioning(names, home, pip_sample):
    manager = EnvManager(KitHome(home))
    cold_cache = home / "uv-cold"
    rows = []
    for name in names:
        row = {"release": name}
        for label in ("cold", "warm"):
            if label == "cold":
                shutil.rmtree(cold_cache, ignore_errors=True)
            os.environ["MXCOMPAT_UV_CACHE"] = str(cold_cache)
            env_dir = manager.home.env_dir(name)
            if env_dir.exists():
                manager.remove(name)
            plan = manager.build_plan(manager.resolve(name), allow_fallback=True)
            result = manager.create([plan], jobs=1)[0]
            if result.error:
                raise RuntimeError(str(result.error))
            row[f"uv_{label}_seconds"] = round(result.seconds, 2)
        row["size_mb"] = round(manager.get(name).size_bytes() / 2**20, 1)
        if name in pip_sample:
            try:
                row["pip_warm_seconds"] = pip_install(name, home, plan)
                row["pip_over_uv_warm"] = round(row["pip_warm_seconds"] / row["uv_warm_seconds"], 2)
            except subprocess.CalledProcessError as e:  # e.g. Python 3.6's pip and this machine's pip config
                row["pip_error"] = ((e.stderr or b"").decode(errors="replace").strip().splitlines() or ["?"])[-1][:300]
        rows.append(row)
        print(
            f"  {name}: uv cold {row['uv_cold_seconds']}s, warm {row['uv_warm_seconds']}s"
            + (f", pip warm {row['pip_warm_seconds']}s" if "pip_warm_seconds" in row else ""),
            flush=True,
        )
    os.environ.pop("MXCOMPAT_UV_CACHE", None)
    return rows


def pip_install(name, home, plan):
    """The same requirements with python -m venv + pip (second of two runs, so pip's cache is warm)."""
    target = home / "pip-env"
    reqs = [r for step in plan.install_steps() for r in step.requirements]
    seconds = None
    for _ in range(2):
        shutil.rmtree(target, ignore_errors=True)
        started = time.monotonic()
        subprocess.run([plan.interpreter.path, "-m", "venv", str(target)], check=True, capture_output=True)
        subprocess.run(
            [str(target / "bin" / "python"), "-m", "pip", "install", "-q", *reqs], check=True, capture_output=True
        )
        seconds = round(time.monotonic() - started, 2)
    shutil.rmtree(target, ignore_errors=True)
    return seconds


# -- matrix -------------------------------------------------------------------------------------
WORK_MARKERS = ("train_and_save(", "reload_all(", "summary.load(")


def notebook_times(path):
    """(in-kernel seconds of all cells, seconds of the MXNet work cell) from papermill's cell metadata."""
    nb = nbformat.read(path, as_version=4)
    total = work = 0.0
    for cell in nb.cells:
        d = (cell.get("metadata", {}).get("papermill") or {}).get("duration") or 0.0
        total += d
        if cell.cell_type == "code" and any(m in cell.source for m in WORK_MARKERS):
            work += d
    return total, work


def matrix(names, home, jobs, tag, models=None, extra_env=None):
    runs, store = home / "runs", home / f"store-{tag}"
    shutil.rmtree(store, ignore_errors=True)
    args = [
        "run",
        "--save",
        ",".join(names),
        "--runs-dir",
        str(runs),
        "--run-id",
        tag,
        "--store",
        str(store),
        "--jobs",
        str(jobs),
    ]
    if models:
        args += ["--models", ",".join(models)]
    shutil.rmtree(runs / tag, ignore_errors=True)
    wall, peak, _ = timed_run(args, home, extra_env)
    manifest = json.loads((runs / tag / "run.json").read_text())
    phases, starts, in_kernel, work = {}, 0, 0.0, 0.0
    for step in manifest["steps"].values():
        if step["status"] != "ok":
            continue
        starts += 1
        phases[step["kind"]] = phases.get(step["kind"], 0.0) + step["seconds"]
        total, w = notebook_times(step["output"])
        in_kernel += total
        work += w
    step_seconds = sum(phases.values())
    return {
        "releases": len(names),
        "models": len(models) if models else 7,
        "jobs": jobs,
        "wall_seconds": round(wall, 1),
        "peak_rss_mb": round(peak / 2**20),
        "step_seconds_by_phase": {k: round(v, 1) for k, v in phases.items()},
        "kernel_starts": starts,
        "kernel_start_and_import_seconds": round(step_seconds - in_kernel, 1),
        "in_kernel_seconds": round(in_kernel, 1),
        "mxnet_work_seconds": round(work, 1),
        "wall_over_mxnet_work": round(wall / work, 2) if work else None,
        "overhead_fraction": round(1 - work / (wall * min(jobs, os.cpu_count() or 1)), 3) if wall else None,
        "records": len(list((runs / tag / "records").glob("*.json"))),
    }


# -- plain-script baseline ----------------------------------------------------------------------
def baseline(names, home, store_tag="store-baseline"):
    """train_and_save then reload_all per release as plain `python -c` scripts in each env."""
    manager = EnvManager(KitHome(home))
    store, out = home / store_tag, home / "baseline-out"
    shutil.rmtree(store, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)

    def in_env(name, code):
        env = manager.get(name)
        subprocess.run([str(env.python), "-c", code], check=True, capture_output=True, cwd=str(env.path))

    started = time.monotonic()
    for name in names:
        in_env(
            name,
            "from kit.kernel.entry import train_run; "
            f"train_run.train_and_save({name!r}, {str(store)!r}, log=lambda m: None)",
        )
    train = time.monotonic() - started
    for name in names:
        in_env(
            name,
            f"from kit.kernel.entry import reload_run; reload_run.reload_all({name!r}, {str(store)!r}, {str(out)!r}, "
            f"saved_with={names!r}, log=lambda m: None)",
        )
    total = time.monotonic() - started
    return {
        "train_seconds": round(train, 1),
        "reload_seconds": round(total - train, 1),
        "total_seconds": round(total, 1),
    }


# -- main ---------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--releases", default="all", help="comma-separated, or 'all' (default)")
    ap.add_argument("--sections", default="provisioning,matrix,growth,baseline")
    ap.add_argument("--home", default="/tmp/mxcompat-bench", help="kit home the benchmark builds in")
    ap.add_argument("--quick", action="store_true", help="fewer releases in growth and pip comparisons")
    ap.add_argument("--out", help="JSON to write (default bench/results/matrix-<timestamp>.json)")
    ap.add_argument("--compare", help="an earlier JSON to print ratios against")
    args = ap.parse_args()
    names = release_table.known_names() if args.releases == "all" else args.releases.split(",")
    home = Path(args.home)
    home.mkdir(parents=True, exist_ok=True)
    sections = args.sections.split(",")
    result = {
        "machine": {"cpus": os.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30, 1)},
        "releases": names,
        "targets": TARGETS,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if "provisioning" in sections:
        print("provisioning", flush=True)
        sample = [names[0], names[len(names) // 2], names[-1]] if not args.quick else [names[-1]]
        result["provisioning"] = provisioning(names, home, sample)
    else:
        manager = EnvManager(KitHome(home))
        manager.create([manager.build_plan(manager.resolve(n), allow_fallback=True) for n in names], jobs=2)
    if "matrix" in sections:
        print("matrix, --jobs 1 and --jobs 2", flush=True)
        result["matrix"] = {"jobs1": matrix(names, home, 1, "full-j1"), "jobs2": matrix(names, home, 2, "full-j2")}
        m = result["matrix"]
        m["speedup_jobs2"] = round(m["jobs1"]["wall_seconds"] / m["jobs2"]["wall_seconds"], 2)
        print(f"  jobs1 {m['jobs1']['wall_seconds']}s, jobs2 {m['jobs2']['wall_seconds']}s", flush=True)
    if "baseline" in sections:
        print("plain-script baseline", flush=True)
        result["baseline"] = baseline(names, home)
        if "matrix" in result:
            j1 = result["matrix"]["jobs1"]["step_seconds_by_phase"]
            notebooks = j1.get("train", 0) + j1.get("reload", 0)
            result["baseline"]["notebook_train_reload_seconds"] = round(notebooks, 1)
            result["baseline"]["notebook_ratio"] = round(notebooks / result["baseline"]["total_seconds"], 2)
    if "growth" in sections:
        print("growth", flush=True)
        base = [names[0], names[-1]]
        grow = {"releases": [], "models": [], "batch": []}
        counts = [1, 2, 4] if args.quick else [1, 2, 4, 8]
        for n in counts:
            if n <= len(names):
                pick = [names[round(i * (len(names) - 1) / max(1, n - 1))] for i in range(n)] if n > 1 else [names[-1]]
                grow["releases"].append(
                    dict(matrix(sorted(set(pick), key=names.index), home, 1, f"g-rel{n}", models=["mlp", "lenet"]), n=n)
                )
        for n, models in ((1, ["mlp"]), (2, ["mlp", "lenet"]), (4, ["mlp", "lenet", "embedding", "resnet_bn"])):
            grow["models"].append(dict(matrix(base, home, 1, f"g-mod{n}", models=models), n=n))
        for batch in (8, 16, 32):
            grow["batch"].append(
                dict(
                    matrix(
                        base,
                        home,
                        1,
                        f"g-batch{batch}",
                        models=["mlp", "lenet"],
                        extra_env={"MXCOMPAT_REFERENCE_BATCH": str(batch)},
                    ),
                    n=batch,
                )
            )
        result["growth"] = grow
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out = Path(args.out) if args.out else REPO / "bench" / "results" / f"matrix-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(report(result, json.loads(Path(args.compare).read_text()) if args.compare else None))
    print(f"wrote {out}")


def report(r, old=None):
    lines = []
    if "provisioning" in r:
        warm = [p["uv_warm_seconds"] for p in r["provisioning"]]
        lines.append(
            f"warm env creation: max {max(warm)}s, mean {sum(warm) / len(warm):.1f}s "
            f"(target < {TARGETS['warm_env_seconds']}s)"
        )
        ratios = [p["pip_over_uv_warm"] for p in r["provisioning"] if "pip_over_uv_warm" in p]
        if ratios:
            lines.append(f"pip / uv (warm): {', '.join(map(str, ratios))}")
    if "matrix" in r:
        m = r["matrix"]
        for k in ("jobs1", "jobs2"):
            x = m[k]
            lines.append(
                f"matrix {k}: wall {x['wall_seconds']}s ({x['wall_seconds'] / 60:.1f} min, target < "
                f"{TARGETS['full_matrix_minutes']} min), {x['kernel_starts']} kernel starts, start+import "
                f"{x['kernel_start_and_import_seconds']}s, MXNet work {x['mxnet_work_seconds']}s, overhead "
                f"{x['overhead_fraction']:.0%} (target < {TARGETS['overhead_fraction']:.0%}), peak "
                f"{x['peak_rss_mb']} MB"
            )
        lines.append(f"speedup of --jobs 2: {m['speedup_jobs2']}x")
    if "baseline" in r and "notebook_ratio" in r["baseline"]:
        b = r["baseline"]
        lines.append(
            f"notebooks / plain scripts: {b['notebook_ratio']}x ({b['notebook_train_reload_seconds']}s vs "
            f"{b['total_seconds']}s; target <= {TARGETS['notebook_ratio']}x)"
        )
    if "growth" in r:
        for dim, rows in r["growth"].items():
            lines.append(
                f"growth by {dim}: " + ", ".join(f"{x['n']}: {x['wall_seconds']}s/{x['peak_rss_mb']}MB" for x in rows)
            )
    if old and "matrix" in old and "matrix" in r:
        lines.append(
            f"vs earlier run: jobs1 wall x{r['matrix']['jobs1']['wall_seconds'] / old['matrix']['jobs1']['wall_seconds']:.2f}"  # noqa: E501
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
