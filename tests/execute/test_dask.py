"""The matrix on a Dask cluster (LocalCluster, 2 worker processes) with an S3 store (moto in server mode)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import NEWEST, OLDEST, read_records, require_python, run_cli
from helpers import run_kit_in_terminal, start_kit

pytestmark = pytest.mark.envs

SAVE = f"{OLDEST},{NEWEST}"
MODELS = "mlp,lenet,resnet_bn"
BUCKET = "kit-dask"


def comparable(records: dict) -> dict:
    """What two runs of the same matrix on the same artifacts must agree on (not timings or paths)."""
    return {
        k: (
            r["verdict"],
            r["reason"],
            json.dumps(r.get("summary"), sort_keys=True),
            json.dumps(r.get("cases"), sort_keys=True),
        )
        for k, r in records.items()
    }


def summary_text(run_dir: Path) -> str:
    """summary.md without the run's own name."""
    return re.sub(r"run `[^`]+`", "run `X`", (run_dir / "summary.md").read_text())


@pytest.fixture(scope="module")
def cluster(s3_server, tmp_path_factory):
    """Two worker processes, each with its own kit home (as if on two machines), and an S3 bucket."""
    pytest.importorskip("distributed")
    require_python("3.6")
    import boto3
    from distributed import Client, LocalCluster

    boto3.client(
        "s3",
        endpoint_url=s3_server["endpoint"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=BUCKET)
    workers = tmp_path_factory.mktemp("workers")
    env = dict(s3_server["env"], MXCOMPAT_WORKER_HOME=str(workers / "{name}"))
    lc = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, env=env)
    client = Client(lc)
    yield {
        "address": lc.scheduler_address,
        "workers": workers,
        "client": client,
        "s3": s3_server,
        "runs": tmp_path_factory.mktemp("dask-runs"),
        "home": tmp_path_factory.mktemp("dask-client"),
    }
    client.close()
    lc.close()


def cli_env(cluster) -> dict:
    return dict(os.environ, **cluster["s3"]["env"])


def run_args(cluster, run_id: str, prefix: str = "m") -> list[str]:
    """The matrix every run here computes, into the cluster's runs folder, on the S3 store under ``prefix``."""
    return [
        "run",
        "--runs-dir",
        str(cluster["runs"]),
        "--save",
        SAVE,
        "--models",
        MODELS,
        "--run-id",
        run_id,
        "--store",
        f"s3://{BUCKET}/{prefix}",
    ]


def dask_args(cluster, run_id: str, prefix: str = "m") -> list[str]:
    return run_args(cluster, run_id, prefix) + ["--executor", "dask", "--scheduler", cluster["address"]]


@pytest.fixture(scope="module")
def dask_run(cluster):
    proc = run_cli(*dask_args(cluster, "on-dask"), home=cluster["home"], env=cli_env(cluster), timeout=1800)
    return {"proc": proc, "dir": cluster["runs"] / "on-dask", "records": read_records(cluster["runs"] / "on-dask")}


def test_matrix_runs_on_two_workers_through_the_store(dask_run, cluster):
    proc, d = dask_run["proc"], dask_run["dir"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    manifest = json.loads((d / "run.json").read_text())
    assert manifest["executor"] == "dask"
    assert [manifest["steps"][i]["status"] for i in manifest["order"]] == ["ok"] * 5
    # 2 releases x 3 models x (4 APIs + c_predict); the newest reloads both, the oldest its own
    assert len(dask_run["records"]) == 45
    for rel in (
        f"train/mxnet-{OLDEST}.ipynb",
        f"reload/mxnet-{NEWEST}.ipynb",
        f"logs/reload-{NEWEST}.log",
        "summary.html",
        "junit.xml",
    ):
        assert (d / rel).is_file(), rel
    # each release went to one worker, which built it; the client built no environment at all
    ran = dict(re.findall(r"(\S+:\S+) ran on worker (\S+)", proc.stdout))
    assert ran[f"train:{OLDEST}"] == ran[f"reload:{OLDEST}"] and ran[f"train:{NEWEST}"] == ran[f"reload:{NEWEST}"]
    assert ran[f"train:{OLDEST}"] != ran[f"train:{NEWEST}"]
    assert proc.stdout.count("s environment there)") == 2
    built = sorted(
        p.parent.parent.name + "/" + p.parent.name for p in cluster["workers"].glob("*/envs/*/mxcompat-env.json")
    )
    assert len(built) == 2 and {b.split("/")[1] for b in built} == {OLDEST, NEWEST}, built
    assert not (cluster["home"] / "envs").exists() or not any((cluster["home"] / "envs").iterdir())


def test_artifacts_and_step_outputs_live_in_the_store(dask_run, cluster):
    from kit import store as stores

    os.environ.update(cluster["s3"]["env"])
    remote = stores.open_store(f"s3://{BUCKET}/m")
    refs = {(r.release, r.model, r.api) for r in remote.refs()}
    assert len(refs) == 24
    keys = [o["Key"] for o in remote.client.list_objects_v2(Bucket=BUCKET, Prefix="m/.runs/on-dask/")["Contents"]]
    attempts = {k.split("/")[3] for k in keys} - {"started"}
    assert len(attempts) == 4  # one per train and reload step
    assert len([k for k in keys if "/started/" in k]) == 4  # each announced itself once
    assert any(k.endswith(f"records/{OLDEST}__lenet__export__{NEWEST}.json") for k in keys)


def test_records_and_summary_equal_a_local_run(dask_run, cluster, kit_home, built_envs):
    """The same matrix with the local executor on the same store: identical records and summary."""
    proc = run_cli(*run_args(cluster, "local"), "--jobs", "2", home=kit_home, env=cli_env(cluster), timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    local = read_records(cluster["runs"] / "local")
    assert comparable(local) == comparable(dask_run["records"])
    assert summary_text(cluster["runs"] / "local") == summary_text(dask_run["dir"])


def _worker_pids(client) -> dict:
    info = client.scheduler_info()["workers"]
    pids = client.run(os.getpid)
    return {str(info[a]["name"]): pid for a, pid in pids.items()}


def test_a_worker_killed_mid_step_loses_and_duplicates_nothing(dask_run, cluster):
    """Kill the worker running a reload step once it has written records; Dask runs the step again."""
    proc = start_kit(
        dask_args(cluster, "killed"),
        home=cluster["home"],
        env=cli_env(cluster),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    killed = None
    deadline = time.monotonic() + 600
    while killed is None and proc.poll() is None and time.monotonic() < deadline:
        for records in cluster["workers"].glob("*/dask-runs/killed/reload-*/records"):
            if any(p.suffix == ".json" and not p.name.startswith(".") for p in records.iterdir()):
                worker = records.parents[3].name
                os.kill(_worker_pids(cluster["client"])[worker], signal.SIGKILL)
                killed = (worker, records.parent.name)
                break
        time.sleep(0.05)
    out, _ = proc.communicate(timeout=1200)
    assert killed is not None, "no reload step was caught mid-run\n" + out[-3000:]
    assert proc.returncode == 0, out[-4000:]
    step = "reload-" + killed[1].split("-")[1]  # reload-<release>-<attempt>
    attempts = list(cluster["workers"].glob(f"*/dask-runs/killed/{step}-*"))
    assert len(attempts) == 2, attempts  # the killed attempt and the one that finished
    records = read_records(cluster["runs"] / "killed")
    assert comparable(records) == comparable(dask_run["records"])  # nothing lost, nothing twice
    names = [p.name for p in (cluster["runs"] / "killed" / "records").iterdir()]
    assert len(names) == len(set(names)) == 45
    from kit import store as stores

    os.environ.update(cluster["s3"]["env"])
    remote = stores.open_store(f"s3://{BUCKET}/m")
    keys = [o["Key"] for o in remote.client.list_objects_v2(Bucket=BUCKET, Prefix="m/.runs/killed/")["Contents"]]
    # only the attempt that finished uploaded anything: the killed one never reached the store
    assert len({k.split("/")[3] for k in keys} - {"started"}) == 2  # the two reload steps, once each
    assert len([k for k in keys if f"/started/{step}/" in k]) == 2  # the killed step started twice
    manifest = json.loads((cluster["runs"] / "killed" / "run.json").read_text())
    assert manifest["steps"][step.replace("-", ":", 1)]["attempts"] == 2
    assert re.search(
        # the worker that takes it over may build the release's environment first (it had no step of it yet)
        rf"{step.replace('-', ':', 1)} ran on worker \S+( \(built \S+ environment there\))?; "
        r"1 earlier attempt\(s\) lost with their worker "
        rf"\(worker {killed[0]}\)",
        out,
    ), out[-3000:]
    assert [manifest["steps"][f"train:{r}"]["status"] for r in (OLDEST, NEWEST)] == ["cached", "cached"]


def test_load_alone_reloads_what_the_shared_store_holds_on_a_worker(dask_run, cluster):
    """A reload-only run on the cluster: no train step, the stored releases found in the S3 store."""
    args = ["run", "--runs-dir", str(cluster["runs"]), "--load", NEWEST, "--store", f"s3://{BUCKET}/m"]
    args += ["--run-id", "load-only", "--executor", "dask", "--scheduler", cluster["address"]]
    code, text = run_kit_in_terminal(*args, home=cluster["home"], env=cli_env(cluster), timeout=1200)
    assert code == 0, text[-3000:]
    assert f"reloading what the store holds of 2 release(s): {OLDEST}, {NEWEST}" in text
    assert f"reload:{NEWEST}: cell " in text  # the worker's progress, sent to the client as Dask events
    manifest = json.loads((cluster["runs"] / "load-only" / "run.json").read_text())
    assert manifest["order"] == [f"reload:{NEWEST}", "summary"]
    records = read_records(cluster["runs"] / "load-only")
    assert len(records) == 30
    expected = {k: v for k, v in comparable(dask_run["records"]).items() if k[3] == NEWEST}
    assert comparable(records) == expected


def test_dask_executor_refuses_what_it_cannot_do(kit_home, built_envs, tmp_path):
    on_dask = ("run", "--save", OLDEST, "--executor", "dask")
    unreachable = ("--scheduler", "tcp://127.0.0.1:9")
    proc = run_cli(
        *on_dask,
        "--store",
        str(tmp_path),
        home=kit_home,
        env={k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"},
    )
    assert proc.returncode == 2 and "--scheduler" in proc.stderr
    proc = run_cli(*on_dask, *unreachable, home=kit_home)
    assert proc.returncode == 2 and "needs --store" in proc.stderr
    proc = run_cli(
        *on_dask, *unreachable, "--store", str(tmp_path), "--runs-dir", str(tmp_path / "runs"), home=kit_home
    )
    assert proc.returncode == 3 and "cannot reach the Dask scheduler" in proc.stderr
