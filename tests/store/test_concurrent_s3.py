"""Concurrent writers on one S3 store (a real moto server, real processes): one writer per artifact at a time
under its lease (kit.store.lease), the newer copy stays current and the other is kept under .versions/, a reader
never takes half an artifact, and a lease whose writer died is taken over."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time

import boto3
import pytest
from conftest import NEWEST, OLDEST, read_records, run_cli
from helpers import start_kit

from kit import store as stores
from kit.common import artifacts
from kit.store.lease import LEASES, LeaseBusy, S3Lease

RELEASE, MODEL, API = "1.9.1", "lenet", "export"
REF = stores.Ref(RELEASE, MODEL, API)
WRITES = 6  # versions each writer commits and pushes
READ_FOR = 8.0  # seconds the reader keeps pulling


def _bucket(name: str) -> str:
    boto3.client("s3").create_bucket(Bucket=name)
    return f"s3://{name}/b"


def _commit(local: str, pv: str, saved_at: str, size: int = 1) -> None:
    """A synthetic artifact version ``pv`` into the local store, the replaced one archived as a retrain does."""
    final = artifacts.artifact_dir(local, RELEASE, MODEL, API)
    tmp = artifacts.staging_dir(final) + "-" + pv
    os.makedirs(tmp)
    with open(os.path.join(tmp, "model.params"), "wb") as f:
        f.write(("%s " % pv).encode() * (size * 20000))
    manifest = {"status": "saved", "model_version": "m", "param_version": pv, "saved_at": saved_at}
    manifest["files"] = artifacts.hash_files(tmp, ["model.params"])
    artifacts.write_json_atomic(os.path.join(tmp, artifacts.MANIFEST), manifest)
    archive = os.path.dirname(artifacts.version_dir(local, RELEASE, MODEL, API, "-"))
    artifacts.commit_dir(tmp, final, archive=archive)


def _held(remote) -> dict:
    """``{identity: is current}`` of every version of the artifact the bucket holds, each verified."""
    held = {}
    for ref in remote.refs():
        assert remote.problems(ref) == [], ref
        held[artifacts.identity(remote.manifest(ref))] = ref.version is None
    return held


def _writer(url, local, name, env):
    os.environ.update(env)
    remote = stores.open_store(url)
    for i in range(WRITES):
        _commit(local, "%s%02d" % (name, i), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), size=10)
        stores.push(stores.LocalStore(local), remote, run_id=name)


def _reader(url, local, out, env):
    os.environ.update(env)
    remote = stores.open_store(url)
    dest = stores.LocalStore(local)
    pulls, torn, errors, seen = 0, 0, [], set()
    deadline = time.monotonic() + READ_FOR
    while time.monotonic() < deadline:
        try:
            stores.pull(remote, dest)
        except stores.StoreError as e:
            errors.append(e.message)
            continue
        for ref in dest.refs():
            if dest.problems(ref):
                torn += 1
        if REF in dest.refs():
            seen.add(dest.manifest(REF)["param_version"])
        pulls += 1
    with open(out, "w") as f:
        json.dump({"pulls": pulls, "torn": torn, "errors": errors, "seen": sorted(seen)}, f)


def test_two_pushers_and_a_puller_on_one_bucket_lose_nothing_and_tear_nothing(s3env, tmp_path):
    url = _bucket("kit-two-pushers")
    remote = stores.open_store(url)
    first = str(tmp_path / "first")
    _commit(first, "first00", "2026-01-01T00:00:00Z")
    stores.push(stores.LocalStore(first), remote, run_id="first")
    ctx = multiprocessing.get_context("spawn")
    env = dict(s3env["env"])
    writers = [ctx.Process(target=_writer, args=(url, str(tmp_path / n), n, env)) for n in ("a", "b")]
    reader = ctx.Process(target=_reader, args=(url, str(tmp_path / "reader"), str(tmp_path / "r.json"), env))
    for p in writers + [reader]:
        p.start()
    for p in writers + [reader]:
        p.join(timeout=300)
        assert p.exitcode == 0
    read = json.loads((tmp_path / "r.json").read_text())
    assert read["torn"] == 0 and read["errors"] == [], read
    assert read["pulls"] >= 3 and len(read["seen"]) >= 2, read  # it pulled while the writers replaced it
    held = _held(remote)
    pushed = {"m-first00"} | {"m-%s%02d" % (n, i) for n in ("a", "b") for i in range(WRITES)}
    assert set(held) == pushed  # every version pushed is current or kept under .versions
    assert sum(held.values()) == 1
    assert not remote.list_blobs(LEASES)  # every lease was given back
    index = json.loads(remote.read_blob(stores.INDEX))
    assert len(index["artifacts"]) == len(pushed)  # the index names every version, whoever pushed last


def test_a_stale_mirror_never_overwrites_a_newer_push(s3env, tmp_path):
    """Run B pulled v1; run A retrained to v2 and pushed; B's push keeps v2 current and loses none of v1, v3."""
    remote = stores.open_store(_bucket("kit-stale-mirror"))
    a, b = stores.LocalStore(tmp_path / "a"), stores.LocalStore(tmp_path / "b")
    _commit(str(a.root), "v1", "2026-01-01T00:00:00Z")
    stores.push(a, remote, run_id="a")
    stores.pull(remote, b)
    _commit(str(a.root), "v2", "2026-01-03T00:00:00Z")
    # v2 goes current; the bucket's v1 was copied to .versions/ first, so a's own copy of v1 is already there
    assert stores.push(a, remote, run_id="a") == {"uploaded": 1, "unchanged": 1, "superseded": 0}
    said = []
    assert stores.push(b, remote, run_id="b", on_event=said.append) == {
        "uploaded": 0, "unchanged": 0, "superseded": 1,
    }  # fmt: skip
    assert said and said[0].startswith(f"kept {remote.url}/{REF.rel} as it is: its copy is newer")
    assert _held(remote) == {"m-v2": True, "m-v1": False}
    _commit(str(b.root), "v3", "2026-01-02T00:00:00Z")  # b retrained, but before a did
    assert stores.push(b, remote, run_id="b")["superseded"] == 1
    assert _held(remote) == {"m-v2": True, "m-v1": False, "m-v3": False}  # v3 kept, not current
    stores.pull(remote, b)  # b catches up; its own v3 is kept locally, not dropped
    assert b.manifest(REF)["param_version"] == "v2"
    kept = {r.version for r in b.refs() if r.version}
    assert kept == {"m-v1", "m-v3"} and all(not b.problems(r) for r in b.refs())


def _hold_lease(url, run_id, env, ready):
    os.environ.update(env)
    with S3Lease(stores.open_store(url), REF.rel, run_id=run_id):
        open(ready, "w").close()
        time.sleep(300)


def test_a_held_lease_makes_others_wait_and_a_dead_holders_is_taken_over(s3env, tmp_path):
    url = _bucket("kit-lease")
    remote = stores.open_store(url)
    ready = tmp_path / "ready"
    code = (
        "import sys; sys.path.insert(0, '..'); import test_concurrent_s3 as t; "
        "t._hold_lease(sys.argv[1], 'holder', {}, sys.argv[2])"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, url, str(ready)], cwd=os.path.dirname(__file__), env=dict(os.environ)
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert holder.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        started = time.monotonic()
        with pytest.raises(LeaseBusy, match=r"being written by run holder \(pid %d on " % holder.pid):
            with S3Lease(remote, REF.rel, run_id="waiter", wait=1.5):
                pass
        assert time.monotonic() - started >= 1.5  # it waited, then said who holds it
        holder.send_signal(signal.SIGKILL)  # dies holding it: the lease object stays
        holder.wait()
        assert remote.list_blobs(LEASES)
        with S3Lease(remote, REF.rel, run_id="next", wait=5) as lease:
            assert lease.took_over["run_id"] == "holder"  # its holder on this host is gone: taken at once
        assert not remote.list_blobs(LEASES)
    finally:
        holder.kill()
        holder.wait()


def test_a_lease_from_another_host_is_taken_over_only_once_expired(s3env, tmp_path):
    remote = stores.open_store(_bucket("kit-lease-host"))
    key = remote.key(f"{LEASES}/{REF.rel}.json")
    elsewhere = {"host": socket.gethostname() + "-elsewhere", "pid": 1, "run_id": "far", "taken_at": time.time()}
    boto3.client("s3").put_object(
        Bucket=remote.bucket, Key=key, Body=json.dumps(dict(elsewhere, expires_at=time.time() + 600))
    )
    with pytest.raises(LeaseBusy, match="being written by run far"):
        with S3Lease(remote, REF.rel, wait=0.5):
            pass
    boto3.client("s3").put_object(Bucket=remote.bucket, Key=key, Body=json.dumps(dict(elsewhere, expires_at=1.0)))
    with S3Lease(remote, REF.rel, wait=0.5) as lease:
        assert lease.took_over["run_id"] == "far"


@pytest.mark.envs
def test_a_retraining_run_beside_a_reloading_run_on_one_bucket(built_envs, kit_home, s3env, tmp_path):
    """Two real runs from two kit homes (two machines' working copies) on one bucket, one --retrain: both
    finish, nothing is corrupt, every record names a param version the bucket still holds."""
    url = _bucket("kit-two-runs")
    other = tmp_path / "other-home"  # a second machine: its own working copy, the same environments
    other.mkdir()
    for shared in ("envs", "jupyter"):
        os.symlink(kit_home / shared, other / shared)
    runs = tmp_path / "runs"
    common = ["--runs-dir", str(runs), "--store", url, "--save", OLDEST, "--load", f"{OLDEST},{NEWEST}",
              "--models", "lenet,mlp"]  # fmt: skip
    env = dict(os.environ)
    first = run_cli("run", *common, "--run-id", "baseline", home=kit_home, env=env, timeout=900)
    assert first.returncode == 0, first.stdout[-2000:]
    # other epochs: other weights, so the retrain replaces the baseline's param versions
    retraining = start_kit(["run", *common, "--run-id", "retrain", "--retrain", "--epochs", "2"], home=other, env=env)
    reloading = start_kit(["run", *common, "--run-id", "reload"], home=kit_home, env=env)
    assert retraining.wait(timeout=900) == 0 and reloading.wait(timeout=900) == 0
    remote = stores.open_store(url)
    held = {remote.manifest(r)["param_version"] for r in remote.refs() if remote.manifest(r).get("status") == "saved"}
    assert len(held) > len({r["param_version"] for r in read_records(runs / "baseline").values()})  # both kept
    for run_id in ("baseline", "retrain", "reload"):
        records = read_records(runs / run_id)
        assert records and not [k for k, r in records.items() if r["verdict"] == "corrupt"], run_id
        named = {r["param_version"] for r in records.values() if r["verdict"] != "unsupported"}
        assert named <= held, (run_id, named - held)
    assert not remote.list_blobs(LEASES)
