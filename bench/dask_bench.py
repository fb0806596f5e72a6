#!/usr/bin/env python
"""The matrix on a 2-worker Dask LocalCluster with an S3 store (moto in server mode), against a local run.

Three runs of one matrix, all on the same S3 store: on Dask from an empty store
(workers build their environments, train, push), locally with --jobs 2 (pulls,
trains nothing), and on Dask again while one worker is killed with SIGKILL in the
middle of a reload step. Writes JSON a later run can compare with: wall times,
which worker ran and built what, whether the records and summaries are equal, and
what happened to the killed step.

Usage: .venv/bin/python bench/dask_bench.py [--releases 1.0.0.post4,1.9.1] [--models mlp,lenet,resnet_bn]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import s3_server  # noqa: E402  (bench/, beside this script)
from helpers import start_kit  # noqa: E402

BUCKET = "kit-bench"


def records(run_dir: Path) -> dict:
    out = {}
    for p in sorted((run_dir / "records").glob("[!.]*.json")):
        r = json.loads(p.read_text())
        out[p.name] = (
            r["verdict"],
            r["reason"],
            json.dumps(r.get("summary"), sort_keys=True),
            json.dumps(r.get("cases"), sort_keys=True),
        )
    return out


def summary(run_dir: Path) -> str:
    return re.sub(r"run `[^`]+`", "run `X`", (run_dir / "summary.md").read_text())


def mxcompat(args: list[str], env: dict) -> tuple[subprocess.Popen, float]:
    return start_kit(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), time.monotonic()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--releases", default="1.0.0.post4,1.9.1")
    ap.add_argument("--models", default="mlp,lenet,resnet_bn")
    ap.add_argument("--client-home", default=str(REPO / ".kit"), help="kit home of the local run (its envs)")
    ap.add_argument("--out", help="JSON to write (default bench/results/dask-<timestamp>.json)")
    args = ap.parse_args(argv)
    import boto3
    from distributed import Client, LocalCluster

    base = Path(tempfile.mkdtemp(prefix="mxcompat-dask-bench-"))
    server, aws = s3_server.start(log=base / "moto.log")
    os.environ.update(aws)
    boto3.client("s3", endpoint_url=aws["AWS_ENDPOINT_URL_S3"]).create_bucket(Bucket=BUCKET)
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        env=dict(aws, MXCOMPAT_WORKER_HOME=str(base / "workers" / "{name}")),
    )
    client = Client(cluster)
    runs = base / "runs"
    common = [
        "run",
        "--runs-dir",
        str(runs),
        "--save",
        args.releases,
        "--models",
        args.models,
        "--store",
        f"s3://{BUCKET}/m",
    ]
    on_dask = common + ["--executor", "dask", "--scheduler", cluster.scheduler_address]
    env = dict(os.environ, MXCOMPAT_HOME=str(base / "client"))
    result = {
        "benchmark": "dask_matrix",
        "releases": args.releases.split(","),
        "models": args.models.split(","),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": {},
    }
    try:
        for name, argv_, run_env in (
            ("dask", on_dask + ["--run-id", "dask"], env),
            ("local", common + ["--run-id", "local", "--jobs", "2"], dict(os.environ, MXCOMPAT_HOME=args.client_home)),
        ):
            proc, started = mxcompat(argv_, run_env)
            out, _ = proc.communicate()
            result["runs"][name] = {
                "exit_code": proc.returncode,
                "wall_seconds": round(time.monotonic() - started, 1),
                "records": len(records(runs / name)),
                "output": out.splitlines()[-40:],
            }
            print(f"{name}: exit {proc.returncode} in {result['runs'][name]['wall_seconds']}s", flush=True)
        result["records_equal"] = records(runs / "dask") == records(runs / "local")
        result["summary_equal"] = summary(runs / "dask") == summary(runs / "local")
        proc, started = mxcompat(on_dask + ["--run-id", "killed"], env)
        killed = None
        while killed is None and proc.poll() is None:
            for folder in (base / "workers").glob("*/dask-runs/killed/reload-*/records"):
                written = [p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".")]
                if written:
                    info = client.scheduler_info()["workers"]
                    pids = {str(info[a]["name"]): pid for a, pid in client.run(os.getpid).items()}
                    worker = folder.parents[3].name
                    os.kill(pids[worker], signal.SIGKILL)
                    killed = {
                        "worker": worker,
                        "attempt": folder.parent.name,
                        "records_written_before_kill": len(written),
                    }
                    break
            time.sleep(0.05)
        out, _ = proc.communicate()
        step = "reload-" + killed["attempt"].split("-")[1] if killed else None
        result["runs"]["killed"] = {
            "exit_code": proc.returncode,
            "wall_seconds": round(time.monotonic() - started, 1),
            "killed": killed,
            "attempt_folders": sorted(
                str(p.relative_to(base / "workers")) for p in (base / "workers").glob(f"*/dask-runs/killed/{step}-*")
            )
            if step
            else [],
            "records": len(records(runs / "killed")),
            "records_equal": records(runs / "killed") == records(runs / "dask"),
            "output": out.splitlines()[-40:],
        }
        print(f"killed: {json.dumps({k: v for k, v in result['runs']['killed'].items() if k != 'output'})}")
    finally:
        client.close()
        cluster.close()
        server.terminate()
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out_path = (
        Path(args.out) if args.out else REPO / "bench" / "results" / f"dask-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    out_path.write_text(json.dumps(result, indent=1))
    print(f"records equal: {result['records_equal']}, summary equal: {result['summary_equal']}; wrote {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
