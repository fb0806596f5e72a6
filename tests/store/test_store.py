"""The artifact store against a real S3 protocol server (moto in server mode on loopback)."""

from __future__ import annotations

import json
import os
import time

import boto3
import pytest
from conftest import NEWEST, OLDEST, read_records, run_cli

from kit import store as stores
from kit.execute.notebooks import NOTEBOOKS, run_notebook
from kit.home import KitHome
from kit.store.s3 import S3Store


def make_bucket(name: str) -> str:
    boto3.client("s3").create_bucket(Bucket=name)
    return name


def local_snapshot(st: stores.LocalStore) -> dict:
    return {r.rel: st.manifest(r)["files"] for r in st.refs()}


@pytest.mark.envs
def test_push_pull_round_trip(trained_store, s3env, tmp_path):
    src = stores.LocalStore(trained_store["_store"])
    bucket = make_bucket("kit-roundtrip")
    remote = stores.open_store(f"s3://{bucket}/baselines")
    counts = stores.push(src, remote)
    assert counts == {"uploaded": 56, "unchanged": 0, "superseded": 0}
    assert stores.push(src, remote) == {"uploaded": 0, "unchanged": 56, "superseded": 0}  # nothing moves twice
    dest = stores.LocalStore(tmp_path / "pulled")
    assert stores.pull(remote, dest)["downloaded"] == 56
    assert local_snapshot(dest) == local_snapshot(src)
    assert all(not dest.problems(r) for r in dest.refs())
    index = json.loads(boto3.client("s3").get_object(Bucket=bucket, Key="baselines/index.json")["Body"].read())
    assert len(index["artifacts"]) == 56 and {"model_version", "param_version", "files"} <= set(index["artifacts"][0])
    listing = run_cli("store", "ls", f"s3://{bucket}/baselines", home=tmp_path, env=dict(os.environ), check=True)
    assert "1.0.0.post4" in listing.stdout and "module_checkpoint" in listing.stdout
    verify = run_cli("store", "verify", f"s3://{bucket}/baselines", home=tmp_path, env=dict(os.environ))
    assert verify.returncode == 0 and "56 of 56 artifacts verify" in verify.stdout


@pytest.mark.envs
def test_anonymous_read_of_a_public_read_push(trained_store, s3env, tmp_path, monkeypatch):
    bucket = make_bucket("kit-public")
    src = stores.LocalStore(trained_store["_store"])
    stores.push(src, stores.open_store(f"s3://{bucket}/pub", public_read=True), releases=[OLDEST], models=["mlp"])
    stores.push(src, stores.open_store(f"s3://{bucket}/private"), releases=[OLDEST], models=["mlp"])
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    anon = stores.open_store(f"s3://{bucket}/pub")
    assert anon.anonymous
    dest = stores.LocalStore(tmp_path / "anon")
    assert stores.pull(anon, dest)["downloaded"] == 4
    assert not any(dest.problems(r) for r in dest.refs())
    with pytest.raises(stores.StoreError):  # private objects stay private
        stores.pull(stores.open_store(f"s3://{bucket}/private"), stores.LocalStore(tmp_path / "no"))


@pytest.mark.envs
def test_tampered_object_is_refused_and_nothing_is_written(trained_store, s3env, tmp_path):
    bucket = make_bucket("kit-tamper")
    remote = stores.open_store(f"s3://{bucket}/b")
    stores.push(
        stores.LocalStore(trained_store["_store"]), remote, releases=[OLDEST], models=["lenet"], apis=["export"]
    )
    boto3.client("s3").put_object(Bucket=bucket, Key=f"b/{OLDEST}/lenet/export/model-0000.params", Body=b"evil")
    dest = stores.LocalStore(tmp_path / "local")
    with pytest.raises(stores.StoreError, match="sha256 mismatch in model-0000.params"):
        stores.pull(remote, dest)
    assert dest.refs() == []
    assert not [p for p in (tmp_path / "local").rglob("*") if p.is_file()]
    assert remote.problems(stores.Ref(OLDEST, "lenet", "export")) == ["model-0000.params"]
    verify = run_cli("store", "verify", f"s3://{bucket}/b", home=tmp_path, env=dict(os.environ))
    assert verify.returncode == 1 and "CORRUPT" in verify.stdout


@pytest.mark.envs
def test_interrupted_upload_never_looks_complete(trained_store, s3env, monkeypatch):
    bucket = make_bucket("kit-interrupt")
    remote = stores.open_store(f"s3://{bucket}/b")
    src = stores.LocalStore(trained_store["_store"])
    ref = stores.Ref(NEWEST, "mlp", "export")
    real_call = remote._call
    calls = {"n": 0}

    def failing(what, fn, *args, **kwargs):
        calls["n"] += 1
        if what.startswith("commit") and calls["n"] > 5:
            raise stores.StoreError("connection lost (simulated)")
        return real_call(what, fn, *args, **kwargs)

    monkeypatch.setattr(remote, "_call", failing)
    with pytest.raises(stores.StoreError, match="simulated"):
        remote.upload(ref, src.path(ref))
    monkeypatch.setattr(remote, "_call", real_call)
    assert ref not in remote.refs()  # files may be there, but without a manifest it is not an artifact
    remote.upload(ref, src.path(ref))
    assert ref in remote.refs() and remote.problems(ref) == []


def test_server_down_is_a_clear_error_after_bounded_retries(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    remote = S3Store("s3://kit-down/b", endpoint_url=f"http://127.0.0.1:{port}", attempts=2)
    dest = stores.LocalStore(tmp_path / "local")
    started = time.monotonic()
    with pytest.raises(stores.StoreError) as e:
        stores.pull(remote, dest)
    assert time.monotonic() - started < 30
    assert "failed for s3://kit-down/b" in str(e.value) and f"127.0.0.1:{port}" in str(e.value)
    assert not (tmp_path / "local").exists() or not any((tmp_path / "local").rglob("*"))
    proc = run_cli(
        "store",
        "pull",
        "s3://kit-down/b",
        "--to",
        str(tmp_path / "cli"),
        "--endpoint-url",
        f"http://127.0.0.1:{port}",
        home=tmp_path,
    )
    assert proc.returncode == 3 and "is the endpoint up" in proc.stderr


@pytest.mark.envs
def test_versioned_weights_stay_loadable(trained_store, kit_home, tmp_path):
    import shutil

    store = tmp_path / "store"
    shutil.copytree(trained_store["_store"] / NEWEST / "mlp", store / NEWEST / "mlp")
    first = stores.load("mlp", "export", release=NEWEST, store=str(store))
    old_pv = first.manifest["param_version"]
    mv = first.manifest["model_version"]
    run_notebook(
        NOTEBOOKS / "train.ipynb",
        tmp_path / "retrain.ipynb",
        f"mxnet-{NEWEST}",
        {
            "release": NEWEST,
            "store": str(store),
            "models": ["mlp"],
            "apis": ["export"],
            "seed": 7,
            "retrain": True,
        },
        home=KitHome(kit_home),
    )
    current = stores.load("mlp", "export", release=NEWEST, store=str(store))
    assert current.manifest["param_version"] != old_pv and current.path == store / NEWEST / "mlp" / "export"
    kept = stores.load("mlp", "export", release=NEWEST, param_version=old_pv, store=str(store))
    assert kept.path == store / ".versions" / NEWEST / "mlp" / "export" / f"{mv}-{old_pv}"
    assert kept.manifest["files"] == first.manifest["files"]
    (kept.path / "model-0000.params").write_bytes(b"tampered")
    with pytest.raises(stores.StoreError, match="does not verify"):
        stores.load("mlp", "export", release=NEWEST, param_version=old_pv, store=str(store))
    with pytest.raises(stores.StoreError, match="versions there"):
        stores.load("mlp", "export", release=NEWEST, param_version="0" * 16, store=str(store))
    listing = run_cli("store", "ls", str(store), "--versions", home=kit_home, check=True).stdout
    assert f"{mv}-{old_pv}" in listing


@pytest.mark.envs
def test_a_run_pushes_to_s3_and_a_second_run_reloads_from_an_empty_local_store(built_envs, kit_home, s3env, tmp_path):
    bucket = make_bucket("kit-runs")
    url = f"s3://{bucket}/matrix"
    env = dict(os.environ)
    runs = tmp_path / "runs"
    args = ("run", "--runs-dir", str(runs), "--save", f"{OLDEST},{NEWEST}", "--models", "mlp,lenet,e2e", "--store", url)
    first = run_cli(*args, "--run-id", "pusher", home=kit_home, env=env, timeout=900)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    assert "pushed 24 artifact(s)" in first.stdout
    cache = stores.open_store(url).working_copy(KitHome(kit_home)).root
    import shutil

    shutil.rmtree(cache)
    second = run_cli(*args, "--run-id", "puller", home=kit_home, env=env, timeout=900)
    assert second.returncode == 0, second.stdout[-2000:]
    assert "pulled 24 artifact(s)" in second.stdout and f"train:{OLDEST}: cached" in second.stdout
    a, b = read_records(runs / "pusher"), read_records(runs / "puller")
    assert {k: r["verdict"] for k, r in a.items()} == {k: r["verdict"] for k, r in b.items()}
    assert len(a) == 45
    manifest = json.loads((runs / "puller" / "run.json").read_text())
    assert manifest["request"]["store"] == url
    text = "".join(p.read_text() for p in (runs / "puller").rglob("*.ipynb"))
    assert "testing" not in text  # credentials never reach the executed notebooks


@pytest.mark.envs
def test_versions_all_reloads_every_kept_weights_version_as_its_own_cell(trained_store, kit_home, tmp_path):
    import shutil

    store = tmp_path / "store"
    shutil.copytree(trained_store["_store"] / NEWEST / "mlp", store / NEWEST / "mlp")
    first = stores.load("mlp", "export", release=NEWEST, store=str(store)).manifest
    old_pv, mv = first["param_version"], first["model_version"]
    run_notebook(
        NOTEBOOKS / "train.ipynb",
        tmp_path / "retrain.ipynb",
        f"mxnet-{NEWEST}",
        {"release": NEWEST, "store": str(store), "models": ["mlp"], "apis": ["export"], "seed": 7, "retrain": True},
        home=KitHome(kit_home),
    )
    new_pv = stores.load("mlp", "export", release=NEWEST, store=str(store)).manifest["param_version"]
    args = ["run", "--save", NEWEST, "--models", "mlp", "--apis", "export", "--store", str(store)]
    args += ["--runs-dir", str(tmp_path / "runs"), "--run-id", "all", "--versions", "all"]
    proc = run_cli(*args, home=kit_home, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = {
        (r["saved_with"], r["archived"]): r
        for r in (json.loads(p.read_text()) for p in (tmp_path / "runs" / "all" / "records").glob("[!.]*.json"))
    }
    assert set(records) == {(NEWEST, None), (NEWEST, f"{mv}-{old_pv}")}
    assert records[(NEWEST, None)]["param_version"] == new_pv
    assert records[(NEWEST, f"{mv}-{old_pv}")]["param_version"] == old_pv
    assert {r["verdict"] for r in records.values()} == {"identical"}
    csv_text = (tmp_path / "runs" / "all" / "records.csv").read_text()
    assert (
        f"mlp,export,{NEWEST}," in csv_text
        and (tmp_path / "runs" / "all" / "records")
        .joinpath(f"{NEWEST}__mlp__export__{NEWEST}__v{mv}-{old_pv}.json")
        .is_file()
    )
    listing = run_cli("store", "ls", str(store), "--versions", home=kit_home, check=True).stdout
    kept = next(line for line in listing.splitlines() if f"{mv}-{old_pv}" in line)
    assert f"in {NEWEST}: identical" in kept and "never" not in kept


@pytest.mark.envs
def test_models_pinned_to_an_architecture_check_only_that_architecture(trained_store, kit_home, tmp_path):
    import shutil

    store = tmp_path / "store"
    shutil.copytree(trained_store["_store"] / NEWEST / "lenet", store / NEWEST / "lenet")
    fp = stores.load("lenet", "export", release=NEWEST, store=str(store)).manifest["model_version"]
    verdicts = {}
    for pin in (fp[:8], "ffffffff"):
        args = ["run", "--save", NEWEST, "--models", f"lenet@{pin}", "--apis", "export", "--store", str(store)]
        proc = run_cli(*args, "--runs-dir", str(tmp_path / "runs"), "--run-id", pin, home=kit_home, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert f"train:{NEWEST}: cached" in proc.stdout  # the store holds lenet: the pin does not retrain it
        rec = read_records(tmp_path / "runs" / pin)[(NEWEST, "lenet", "export", NEWEST)]
        verdicts[pin] = (rec["verdict"], rec["reason"])
    assert verdicts[fp[:8]][0] == "identical"
    assert verdicts["ffffffff"] == (
        "unsupported",
        f"the run pins lenet's architecture ffffffff; this artifact's is {fp}",
    )
