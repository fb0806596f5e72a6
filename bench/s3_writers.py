"""Two pushers and a puller on one S3 bucket (moto in server mode, real processes): versions lost, torn pulls.

Each pusher commits N versions of one artifact into its own local store and pushes after each; a puller
pulls for the whole time. ``--kit PATH`` measures another checkout of the kit (e.g. one before the S3
lease), so before and after come from the same script. Writes ``bench/results/s3-writers-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import s3_server  # bench/, beside this script

RELEASE, MODEL, API = "1.9.1", "lenet", "export"


def _commit(local, pv, saved_at):
    from kit.common import artifacts

    final = artifacts.artifact_dir(local, RELEASE, MODEL, API)
    tmp = artifacts.staging_dir(final) + "-" + pv
    os.makedirs(tmp)
    with open(os.path.join(tmp, "model.params"), "wb") as f:
        f.write(("%s " % pv).encode() * 200000)
    manifest = {"status": "saved", "model_version": "m", "param_version": pv, "saved_at": saved_at}
    manifest["files"] = artifacts.hash_files(tmp, ["model.params"])
    artifacts.write_json_atomic(os.path.join(tmp, artifacts.MANIFEST), manifest)
    archive = os.path.dirname(artifacts.version_dir(local, RELEASE, MODEL, API, "-"))
    artifacts.commit_dir(tmp, final, archive=archive)


def _pusher(kit, url, local, name, versions, out):
    sys.path.insert(0, kit)
    from kit import store as stores

    errors = []
    for i in range(versions):
        _commit(local, "%s%02d" % (name, i), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        try:
            stores.push(stores.LocalStore(local), stores.open_store(url))
        except Exception as e:  # noqa: BLE001 - counted: a push that fails is what is measured
            errors.append("%s: %s" % (type(e).__name__, str(e)[:160]))
    Path(out).write_text(json.dumps(errors))


def _puller(kit, url, local, seconds, out):
    sys.path.insert(0, kit)
    from kit import store as stores

    dest = stores.LocalStore(local)
    pulls, torn, errors = 0, 0, []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            stores.pull(stores.open_store(url), dest)
            pulls += 1
        except Exception as e:  # noqa: BLE001
            errors.append("%s: %s" % (type(e).__name__, str(e)[:160]))
            continue
        torn += sum(1 for ref in dest.refs() if dest.problems(ref))
    Path(out).write_text(json.dumps({"pulls": pulls, "torn": torn, "errors": errors}))


def trial(kit: str, versions: int, seconds: float, tmp: Path) -> dict:
    sys.path.insert(0, kit)
    import boto3

    from kit import store as stores
    from kit.common import artifacts

    proc, aws = s3_server.start()
    try:
        os.environ.update(aws)
        boto3.client("s3").create_bucket(Bucket="writers")
        url = "s3://writers/b"
        _commit(str(tmp / "first"), "first00", "2026-01-01T00:00:00Z")
        stores.push(stores.LocalStore(tmp / "first"), stores.open_store(url))
        ctx = multiprocessing.get_context("spawn")
        procs = [
            ctx.Process(target=_pusher, args=(kit, url, str(tmp / n), n, versions, str(tmp / f"{n}.json")))
            for n in ("a", "b")
        ]
        procs.append(ctx.Process(target=_puller, args=(kit, url, str(tmp / "r"), seconds, str(tmp / "r.json"))))
        started = time.monotonic()
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        wall = time.monotonic() - started
        remote = stores.open_store(url)
        held, not_verifying = set(), 0
        for ref in remote.refs():
            not_verifying += bool(remote.problems(ref))
            held.add(artifacts.identity(remote.manifest(ref)))
        pushed = {"m-first00"} | {"m-%s%02d" % (n, i) for n in ("a", "b") for i in range(versions)}
        push_errors = sum((json.loads((tmp / f"{n}.json").read_text()) for n in ("a", "b")), [])
        read = json.loads((tmp / "r.json").read_text())
        return {
            "versions_pushed": len(pushed),
            "versions_lost": len(pushed - held),
            "push_errors": len(push_errors),
            "pulls": read["pulls"],
            "pull_errors": len(read["errors"]),
            "torn_pulls": read["torn"],
            "bucket_artifacts_not_verifying": not_verifying,
            "error_examples": sorted(set(push_errors + read["errors"]))[:3],
            "wall_s": round(wall, 2),
        }
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kit", default=str(Path(__file__).resolve().parents[1]), help="checkout of the kit")
    parser.add_argument("--label", default="after", help="name of this measurement in the JSON")
    parser.add_argument("--versions", type=int, default=6, help="versions each pusher commits and pushes")
    parser.add_argument("--seconds", type=float, default=8.0, help="how long the puller pulls")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--out", help="JSON file to add this measurement to (default: a new one)")
    args = parser.parse_args()
    import tempfile

    trials = []
    for i in range(args.trials):
        with tempfile.TemporaryDirectory() as tmp:
            trials.append(trial(args.kit, args.versions, args.seconds, Path(tmp)))
        print(f"{args.label} trial {i + 1}/{args.trials}: {json.dumps(trials[-1])}", flush=True)
    commit = subprocess.run(["git", "-C", args.kit, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()  # fmt: skip
    out = Path(args.out) if args.out else (
        Path(__file__).parent / "results" / time.strftime("s3-writers-%Y%m%d-%H%M%S.json")
    )  # fmt: skip
    result = json.loads(out.read_text()) if out.exists() else {"benchmark": "s3_writers", "measurements": {}}
    result["measurements"][args.label] = {"kit_commit": commit, "versions_each": args.versions, "trials": trials}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(out)


if __name__ == "__main__":
    main()
