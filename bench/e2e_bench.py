#!/usr/bin/env python
"""The end-to-end design's performance claim, per release: fused graph against separate transforms.

For each release: ``e2e_resnet18`` (Resize(224, 224), ToTensor, Normalize fused in
front of ResNet-18 v1) exported and imported as one graph, against the same
transforms run eagerly followed by the hybridized network; a single request
(1x300x300x3 uint8, uniform 0-255) and a batch of 25, mean prediction time per
sample over --runs runs after --warmup warm-up runs, the two modes alternating.
Releases run one after another (never in parallel: they would slow each other).
Releases before 1.5 cannot fuse Resize into a graph and are recorded as unsupported.

Writes JSON a later run can compare with (--compare OLD.json) and prints a Markdown
table; notebooks/e2e_speed.ipynb plots a results file across releases (--plot runs it
into runs/e2e-speed-<timestamp>.ipynb).
Usage: .venv/bin/python bench/e2e_bench.py [--releases 1.5.1,1.9.1] [--runs 20] [--reduced] [--compare OLD.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kit.common.errors import KitError  # noqa: E402
from kit.envs import releases as release_table  # noqa: E402
from kit.envs.manager import EnvManager  # noqa: E402
from kit.home import KitHome  # noqa: E402

SCHEMA = 1
DEFAULTS = {"runs": 20, "warmup": 3, "batch": 25}
REDUCED = {"runs": 2, "warmup": 1, "batch": 25}


def measure_release(python: Path, release: str, settings: dict, timeout: float = 1800) -> dict:
    """Run kit.kernel.entry.e2e_timing in one release's environment; its JSON result."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("MPLBACKEND", None)
    started = time.monotonic()
    proc = subprocess.run(
        [str(python), "-m", "kit.kernel.entry.e2e_timing", json.dumps(dict(settings, release=release))],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=timeout,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"release": release, "error": f"exit {proc.returncode}: {proc.stderr.strip()[-2000:]}"}
    result = json.loads(lines[-1])
    result["wall_seconds"] = round(time.monotonic() - started, 2)
    return result


def run(releases: list[str], settings: dict, home: KitHome, progress=print) -> dict:
    manager = EnvManager(home)
    out = {
        "schema": SCHEMA,
        "benchmark": "e2e_fused_vs_separate",
        "settings": settings,
        "machine": {"cpus": os.cpu_count()},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "releases": [],
    }
    for i, name in enumerate(releases, 1):
        try:
            env = manager.ready_env(name)
        except KitError as e:
            result = {"release": name, "error": f"{e}"}
        else:
            result = measure_release(env.python, name, settings)
        out["releases"].append(result)
        progress(f"[{i}/{len(releases)}] {name}: {summary_line(result)}")
    out["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return out


def summary_line(r: dict) -> str:
    if "error" in r:
        return "error: " + r["error"].splitlines()[-1][:200]
    if "unsupported" in r:
        return "unsupported: " + r["unsupported"]
    return ", ".join(
        f"{case} fused {r[case]['fused']['per_sample_ms']:.1f} ms/sample, separate "
        f"{r[case]['separate']['per_sample_ms']:.1f} (x{r[case]['separate_over_fused']:.2f})"
        for case in ("single", "batch")
    )


def table(result: dict, old: dict | None = None) -> str:
    """The Markdown table of the README: ms per sample, fused and separate, single request and batch."""
    s = result["settings"]
    lines = [
        f"Mean prediction time per sample in ms over {s['runs']} runs after {s['warmup']} warm-up runs "
        f"(single request 1x300x300x3; batch of {s['batch']}); separate / fused > 1 means fusing is faster.",
        "",
        "| release | MKLDNN | single fused | single separate | separate / fused | batch fused | batch separate "
        "| separate / fused |",
        "|---|---|---|---|---|---|---|---|",
    ]
    previous = {r["release"]: r for r in (old or {}).get("releases", [])}
    for r in result["releases"]:
        if "error" in r or "unsupported" in r:
            lines.append(
                f"| {r['release']} | | {('unsupported: ' + r['unsupported']) if 'unsupported' in r else 'error'}"
                " | | | | | |"
            )
            continue
        cells = []
        for case in ("single", "batch"):
            c = r[case]
            ratio = f"{c['separate_over_fused']:.2f}"
            was = previous.get(r["release"], {}).get(case)
            if was:
                ratio += f" (was {was['separate_over_fused']:.2f})"
            cells += [f"{c['fused']['per_sample_ms']:.1f}", f"{c['separate']['per_sample_ms']:.1f}", ratio]
        lines.append(f"| {r['release']} | {'yes' if r.get('mkldnn') else 'no'} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results: Path, home: KitHome) -> Path:
    """Execute notebooks/e2e_speed.ipynb on the host kernel for ``results``; the executed copy's path."""
    from kit.envs import kernelspecs
    from kit.execute.notebooks import NOTEBOOKS, run_notebook

    kernel = kernelspecs.ensure_host_kernel(home)
    output = REPO / "runs" / f"e2e-speed-{time.strftime('%Y%m%d-%H%M%S')}.ipynb"
    run_notebook(NOTEBOOKS / "e2e_speed.ipynb", output, kernel, {"results": str(results)}, home=home)
    return output


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--releases", default="all", help="comma-separated, or 'all' (default: every known release)")
    ap.add_argument("--runs", type=int, default=DEFAULTS["runs"], help="timed runs per mode and case")
    ap.add_argument("--warmup", type=int, default=DEFAULTS["warmup"], help="untimed runs first")
    ap.add_argument("--batch", type=int, default=DEFAULTS["batch"], help="batch size of the batch case")
    ap.add_argument("--reduced", action="store_true", help=f"a quick check: {REDUCED}")
    ap.add_argument("--home", help="kit home whose environments to use (default: MXCOMPAT_HOME or .kit)")
    ap.add_argument("--create", action="store_true", help="create missing environments first")
    ap.add_argument("--out", help="JSON to write (default bench/results/e2e-<timestamp>.json)")
    ap.add_argument("--compare", help="an earlier JSON: its ratios are shown beside the new ones")
    ap.add_argument("--plot", action="store_true", help="run notebooks/e2e_speed.ipynb on the result (papermill)")
    args = ap.parse_args(argv)
    settings = dict(REDUCED) if args.reduced else {"runs": args.runs, "warmup": args.warmup, "batch": args.batch}
    if min(settings.values()) < 0 or settings["runs"] < 1 or settings["batch"] < 1:
        ap.error("--runs and --batch must be at least 1, --warmup at least 0")
    names = release_table.known_names() if args.releases == "all" else [n for n in args.releases.split(",") if n]
    home = KitHome(Path(args.home)) if args.home else KitHome()
    if args.create:
        manager = EnvManager(home)
        manager.create([manager.build_plan(manager.resolve(n), allow_fallback=True) for n in names], jobs=2)
    result = run(names, settings, home)
    out = Path(args.out) if args.out else REPO / "bench" / "results" / f"e2e-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(table(result, json.loads(Path(args.compare).read_text()) if args.compare else None))
    print(f"wrote {out}")
    if args.plot:
        print(f"plotted in {plot(out, home)}")
    return 1 if any("error" in r for r in result["releases"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
