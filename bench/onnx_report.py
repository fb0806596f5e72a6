#!/usr/bin/env python
"""Keep what a run measured about leaving MXNet through ONNX, so the docs' ONNX figures trace to a file.

Reads a finished run folder (``mxcompat run ... --load onnx[,onnx-RELEASE...]``) and writes
``bench/results/onnx-<run-id>.json``: the run's request, wall time and step times, and one row per ONNX
cell (model, saving release, exporting release, exports?, runs?, verdict, max abs, the blocking operator,
the remedy with its verdict, opset, onnx and ONNX Runtime versions), with the environments' pins.
Usage: .venv/bin/python bench/onnx_report.py runs/RUN-ID [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kit.envs import onnx_path  # noqa: E402
from kit.results import leaving  # noqa: E402
from kit.results.records import load_records  # noqa: E402


def report(run_dir: Path) -> dict:
    manifest = json.loads((run_dir / "run.json").read_text())
    rows = leaving.rows(load_records(run_dir))
    if not rows:
        raise SystemExit(f"{run_dir}: no onnx cell (run with --load onnx); nothing to keep")
    return {
        "run_id": manifest["run_id"],
        "request": manifest["request"],
        "wall_seconds": manifest.get("wall_seconds"),
        "exit_code": manifest.get("exit_code"),
        "steps": {i: {"status": s["status"], "seconds": s.get("seconds")} for i, s in manifest["steps"].items()},
        "pins": {
            "exporters": {
                onnx_path.env_name(r): list(onnx_path.exporter(r).requirements) for r in onnx_path.EXPORTER_PINS
            },
            "runtime": list(onnx_path.RUNTIME.requirements),
        },
        "rows": [{k: v for k, v in row.items() if k != "file"} for row in rows],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished run folder, e.g. runs/onnx-exporters")
    parser.add_argument("--out", type=Path, help="where to write (default bench/results/onnx-<run-id>.json)")
    args = parser.parse_args(argv)
    if not (args.run_dir / "run.json").is_file():
        parser.error(f"{args.run_dir} is not a run folder (no run.json)")
    data = report(args.run_dir)
    out = args.out or REPO / "bench" / "results" / f"onnx-{data['run_id']}.json"
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
