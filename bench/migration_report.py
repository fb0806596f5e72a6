#!/usr/bin/env python
"""Keep what a run measured about migrating to MXNet 2.0, so the README's migration figures trace to a file.

Reads a finished run folder (``mxcompat run ... --save 1.x,...,2.0.0b1``) and writes
``bench/results/migration-<run-id>.json``: the run's request and wall time, its verdict
counts by direction, the migration table (1.x API x saving release against each 2.0
release) and the per-model detail with load paths and the naive path's error.
Usage: .venv/bin/python bench/migration_report.py runs/RUN-ID [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kit.results import migration  # noqa: E402
from kit.results.records import load_records  # noqa: E402


def report(run_dir: Path) -> dict:
    manifest = json.loads((run_dir / "run.json").read_text())
    records = load_records(run_dir)
    if not migration.table(records).shape[0]:
        raise SystemExit(f"{run_dir}: no 1.x artifact was loaded in a 2.0 release; nothing to keep")

    def rows(detail):
        df = migration.table(records, detail=detail)
        return [
            dict(zip(df.index.names, key if isinstance(key, tuple) else (key,)), **row)
            for key, row in df.to_dict(orient="index").items()
        ]

    return {
        "run_id": manifest["run_id"],
        "request": manifest["request"],
        "wall_seconds": manifest.get("wall_seconds"),
        "exit_code": manifest.get("exit_code"),
        "counts": manifest.get("counts"),
        "steps": {i: {"status": s["status"], "seconds": s.get("seconds")} for i, s in manifest["steps"].items()},
        "migration": rows(False),
        "migration_detail": rows(True),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished run folder, e.g. runs/m20-all")
    parser.add_argument("--out", type=Path, help="where to write (default bench/results/migration-<run-id>.json)")
    args = parser.parse_args(argv)
    if not (args.run_dir / "run.json").is_file():
        parser.error(f"{args.run_dir} is not a run folder (no run.json)")
    data = report(args.run_dir)
    out = args.out or REPO / "bench" / "results" / f"migration-{data['run_id']}.json"
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
