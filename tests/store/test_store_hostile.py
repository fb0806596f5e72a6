"""The store when things go wrong and the bucket is not to be trusted (a real moto server): containers that share
a hostname, leases that outlive their ttl or are lost, uploads that died midway, check logs that cannot be read
or are corrupt, and a bucket with deep JSON, huge objects, traversing keys and many keys."""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from botocore.exceptions import ClientError

from kit import store as stores
from kit.common import artifacts
from kit.store import s3
from kit.store.layout import MAX_JSON_VAR, MAX_OBJECT_VAR, local_path
from kit.store.lease import LEASES, LeaseBusy, LeaseLost, S3Lease, host_identity

RELEASE = "1.9.1"
LENET = stores.Ref(RELEASE, "lenet", "export")
MLP = stores.Ref(RELEASE, "mlp", "export")


def _bucket(name: str) -> s3.S3Store:
    boto3.client("s3").create_bucket(Bucket=name)
    return stores.open_store(f"s3://{name}/b")


def _commit(local, ref: stores.Ref, pv: str, saved_at: str = "2026-01-01T00:00:00Z", size: int = 100) -> None:
    """A synthetic artifact version ``pv`` of ``ref`` into the local store ``local``."""
    final = artifacts.artifact_dir(str(local), ref.release, ref.model, ref.api)
    tmp = artifacts.staging_dir(final) + "-" + pv
    os.makedirs(tmp)
    with open(os.path.join(tmp, "model.params"), "wb") as f:
        f.write(pv.encode().ljust(size, b"."))
    manifest = {"status": "saved", "model_version": "m", "param_version": pv, "saved_at": saved_at}
    manifest["files"] = artifacts.hash_files(tmp, ["model.params"])
    artifacts.write_json_atomic(os.path.join(tmp, artifacts.MANIFEST), manifest)
    artifacts.commit_dir(tmp, final, archive=artifacts.archive_dir(str(local), ref.release, ref.model, ref.api))


def _objects(remote) -> dict:
    """``{key: ETag}`` of everything under the store's prefix."""
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=remote.bucket, Prefix="b/")
    return {o["Key"][2:]: o["ETag"] for page in pages for o in page.get("Contents", [])}


def _put(remote, rel: str, body) -> None:
    boto3.client("s3").put_object(Bucket=remote.bucket, Key=remote.key(rel), Body=body)


def _lease(remote, rel: str, **holder) -> None:
    _put(remote, f"{LEASES}/{rel}.json", json.dumps({"run_id": "other", "taken_at": time.time(), **holder}))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# -- 1. who holds a lease: containers sharing a hostname are not one machine --------------------------------


def test_a_lease_of_another_container_with_our_hostname_waits_for_its_expiry(s3env):
    remote = _bucket("kit-hostile-container")
    me, dead = host_identity(), _dead_pid()
    assert None not in me.values()  # Linux: hostname, boot id and PID namespace are all readable here
    fresh = time.time() + 600
    others = {
        "another PID namespace": dict(host_id=dict(me, pid_ns=me["pid_ns"] + 1), pid=dead),
        "another boot": dict(host_id=dict(me, boot_id="0" * 36), pid=dead),
        "a PID reused there": dict(host_id=dict(me, pid_ns=me["pid_ns"] + 1), pid=os.getpid(), started=1.0),
        "a lease with a hostname only": dict(pid=dead),
    }
    for what, holder in others.items():
        _lease(remote, LENET.rel, host=socket.gethostname(), expires_at=fresh, **holder)
        with pytest.raises(LeaseBusy, match="being written by run other"):
            with S3Lease(remote, LENET.rel, wait=0.3):
                pytest.fail(f"took a live lease of {what}")
    # the same PID space in full, its process gone: taken at once; expired: taken from anyone
    for holder in (dict(host_id=me, pid=dead, expires_at=fresh), dict(host_id={"hostname": "far"}, expires_at=1.0)):
        _lease(remote, LENET.rel, host=socket.gethostname(), **holder)
        with S3Lease(remote, LENET.rel, wait=0.3) as lease:
            assert lease.took_over["run_id"] == "other"
    assert not remote.list_blobs(LEASES)


# -- 2. a lease is renewed while held and re-checked before each write -------------------------------------


def test_a_renewed_lease_outlives_its_ttl_and_is_not_taken_over(s3env):
    remote = _bucket("kit-hostile-renew")
    with S3Lease(remote, LENET.rel, run_id="long", ttl=1.5) as held:
        time.sleep(3.5)  # past its ttl twice: renewed every 0.5 s meanwhile
        with pytest.raises(LeaseBusy, match="being written by run long"):
            with S3Lease(remote, LENET.rel, run_id="other", wait=0.3):
                pass
        holder, _ = held.holder()
        assert holder["owner"] == held.owner and holder["expires_at"] > time.time() + 0.5
        held.check()  # still ours
    assert not remote.list_blobs(LEASES)


def test_a_writer_whose_lease_was_taken_over_writes_no_manifest(s3env, tmp_path, monkeypatch):
    remote = _bucket("kit-hostile-lost")
    local = stores.LocalStore(tmp_path / "local")
    _commit(local.root, LENET, "v1")
    stores.push(local, remote, run_id="first")
    before = {k: v for k, v in _objects(remote).items() if k.startswith(LENET.rel + "/")}
    _commit(local.root, LENET, "v2", saved_at="2026-01-02T00:00:00Z")
    real_call = remote._call

    def slow_upload(what, fn, *args, **kwargs):  # the lease expires mid-upload and another run takes it over
        if what.startswith("upload of .uploads/"):
            _lease(remote, LENET.rel, run_id="thief", host="elsewhere", pid=7, expires_at=time.time() + 600)
        return real_call(what, fn, *args, **kwargs)

    monkeypatch.setattr(remote, "_call", slow_upload)
    with pytest.raises(LeaseLost, match=r"now held by run thief \(pid 7 on elsewhere\); stopped before writing"):
        stores.push(local, remote, run_id="loser")
    monkeypatch.setattr(remote, "_call", real_call)
    after = {k: v for k, v in _objects(remote).items() if k.startswith(LENET.rel + "/")}
    assert after == before  # its manifest, and every file, as the first push left them
    assert remote.manifest(LENET)["param_version"] == "v1" and remote.problems(LENET) == []
    assert json.loads(remote.read_blob(f"{LEASES}/{LENET.rel}.json"))["run_id"] == "thief"  # not ours to delete
    assert not [k for k in _objects(remote) if k.startswith(".uploads/")]


# -- 3. what uploads that died midway left is swept by the next push -----------------------------------------


def _crash_push(url: str, local: str, env: dict) -> None:
    """Push ``local`` and die (os._exit, no clean-up) just before the manifest's commit."""
    os.environ.update(env)
    remote = stores.open_store(url)
    real_call = remote._call

    def dying(what, fn, *args, **kwargs):
        if what.startswith("commit of") and what.endswith(artifacts.MANIFEST):
            os._exit(9)
        return real_call(what, fn, *args, **kwargs)

    remote._call = dying
    stores.push(stores.LocalStore(local), remote, run_id="crashed")


def test_a_later_push_sweeps_what_a_crashed_upload_left_and_nothing_else(s3env, tmp_path):
    remote = _bucket("kit-hostile-sweep")
    url = remote.url
    done, crashing = stores.LocalStore(tmp_path / "done"), tmp_path / "crashing"
    _commit(done.root, LENET, "a1")
    stores.push(done, remote, run_id="first")
    _commit(crashing, MLP, "b1")
    code = (
        "import sys, json; sys.path.insert(0, '..'); import test_store_hostile as t; "
        "t._crash_push(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))"
    )
    crash = subprocess.run(
        [sys.executable, "-c", code, url, str(crashing), json.dumps(s3env["env"])], cwd=os.path.dirname(__file__)
    )
    assert crash.returncode == 9
    left = set(_objects(remote))
    crashed = {k for k in left if k.startswith((MLP.rel + "/", ".uploads/"))}
    assert f"{MLP.rel}/model.params" in crashed and f"{MLP.rel}/manifest.json" not in crashed
    assert len([k for k in crashed if k.startswith(".uploads/")]) == 2  # its staged file and manifest
    assert f"{LEASES}/{MLP.rel}.json" in left  # its writer died holding it
    # the leftovers of other kinds: a kept version whose copy died, a file no manifest lists, a live writer's
    # half-written folder, a corrupt artifact, a fresh staging key of the old layout
    resnet, vgg = stores.Ref(RELEASE, "resnet", "export"), stores.Ref(RELEASE, "vgg", "export")
    extra = {
        f".versions/{MLP.rel}/m-a0/model.params": b"a0",
        f"{LENET.rel}/stray.params": b"x",
        f"{resnet.rel}/model.params": b"being written",
        f"{vgg.rel}/model.params": b"v",
        f"{vgg.rel}/manifest.json": b"{not json",
        f".uploads/{vgg.rel}/0123/model.params": b"v",
        ".uploads/" + "f" * 32 + "/model.params": b"old layout",
    }
    for rel, body in extra.items():
        _put(remote, rel, body)
    complete = {k: v for k, v in _objects(remote).items() if k.startswith(LENET.rel + "/") and "stray" not in k}
    said = []
    with S3Lease(remote, resnet.rel, run_id="live"):  # a writer at work now: its folder is not touched
        assert stores.push(done, remote, run_id="later", on_event=said.append) == {
            "uploaded": 0, "unchanged": 1, "superseded": 0,
        }  # fmt: skip
    swept = crashed | {f".versions/{MLP.rel}/m-a0/model.params", f".uploads/{vgg.rel}/0123/model.params"}
    now = _objects(remote)
    assert set(now) == (left | set(extra)) - swept - {f"{LEASES}/{MLP.rel}.json"}
    assert f"{LENET.rel}/stray.params" in now  # beside a complete artifact: left for its next upload
    assert {k: v for k, v in now.items() if k in complete} == complete and remote.problems(LENET) == []
    assert f"swept {len(swept)} object(s) left by uploads that died midway" in " ".join(said)
    # a new version replaces every file of the old one, the unlisted ones too; the old one is kept whole
    _commit(done.root, LENET, "a2", saved_at="2026-01-02T00:00:00Z")
    stores.push(done, remote, run_id="newer")
    assert sorted(k for k in _objects(remote) if k.startswith(LENET.rel + "/")) == [
        f"{LENET.rel}/manifest.json", f"{LENET.rel}/model.params",
    ]  # fmt: skip
    assert remote.manifest(stores.Ref(*LENET.rel.split("/"), "m-a1"))["param_version"] == "a1"
    assert remote.problems(LENET) == [] and MLP not in remote.refs()
    stores.push(stores.LocalStore(crashing), remote, run_id="again")  # the crashed artifact, pushed whole
    assert remote.problems(MLP) == [] and not [k for k in _objects(remote) if k.startswith(f".uploads/{MLP.rel}")]


# -- 4. the check log: missing, unreadable, corrupt ------------------------------------------------------------


_BUCKETS = itertools.count()


@pytest.fixture(params=["local", "s3"])
def any_store(request, tmp_path):
    if request.param == "local":
        return stores.LocalStore(tmp_path / "store")
    request.getfixturevalue("s3env")
    return _bucket(f"kit-hostile-checks-{next(_BUCKETS)}")


def _record(model: str, verdict: str) -> dict:
    return {"saved_with": RELEASE, "model": model, "api": "export", "loaded_with": "2.0.0b1", "verdict": verdict}


def _log(st) -> dict:
    return json.loads(st.read_blob(stores.CHECKS))


def test_a_check_log_that_cannot_be_read_is_never_rewritten(any_store, monkeypatch):
    st = any_store
    assert stores.read_checks(st) == {}  # no log yet
    stores.record_checks(st, [_record("lenet", "identical"), _record("mlp", "close")], "first")
    logged = _log(st)
    if isinstance(st, stores.LocalStore):
        real_open = open

        def failing_open(path, *args, **kwargs):
            if str(path).endswith(stores.CHECKS):
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr("builtins.open", failing_open)
    else:
        real_get = st.client.get_object

        def failing_get(**kw):
            if kw["Key"].endswith(stores.CHECKS):
                raise ClientError(
                    {"Error": {"Code": "InternalError"}, "ResponseMetadata": {"HTTPStatusCode": 500}}, "Get"
                )
            return real_get(**kw)

        monkeypatch.setattr(st.client, "get_object", failing_get)
    with pytest.raises(stores.StoreError, match=r"checks\.json"):
        stores.read_checks(st)
    with pytest.raises(stores.StoreError):
        stores.record_checks(st, [_record("resnet", "drift")], "second")
    monkeypatch.undo()
    assert _log(st) == logged  # both earlier verdicts kept, nothing rewritten


@pytest.mark.parametrize(
    "corrupt", [b'{"1.9.1/lenet/export": {"2.0', b"[" * 100000, b'["a list"]'], ids=["truncated", "deep", "not-a-log"]
)
def test_a_corrupt_check_log_is_kept_aside_and_a_new_one_started(any_store, corrupt):
    st = any_store
    st.write_blob(stores.CHECKS, corrupt)
    with pytest.raises(stores.StoreError, match=r"checks\.json is corrupt"):
        stores.read_checks(st)
    said = []
    assert stores.record_checks(st, [_record("mlp", "close")], "next", on_event=said.append) == 1
    assert _log(st) == {f"{RELEASE}/mlp/export": {"2.0.0b1": {"checked_at": None, "verdict": "close", "run": "next"}}}
    aside = [r for r in st.list_blobs("") if r.startswith(f"{stores.CHECKS}.corrupt-")]
    assert len(aside) == 1 and st.read_blob(aside[0]) == corrupt  # nothing of it lost
    assert len(said) == 1 and f"kept it as {st.url}/{aside[0]} and started a new check log" in said[0]


# -- 5. a hostile bucket ------------------------------------------------------------------------------------------


def test_deep_or_broken_json_in_a_bucket_is_refused_as_corrupt_not_a_traceback(s3env, tmp_path):
    remote = _bucket("kit-hostile-json")
    local = stores.LocalStore(tmp_path / "local")
    _commit(local.root, LENET, "v1")
    _commit(local.root, MLP, "v1")
    stores.push(local, remote)
    _put(remote, f"{LENET.rel}/manifest.json", b'{"files": ' + b'{"a": ' * 100000)
    _put(remote, f"{MLP.rel}/manifest.json", b'{"files": ["not", "a", "map"]}')
    dest = stores.LocalStore(tmp_path / "pulled")
    for ref in (LENET, MLP):
        with pytest.raises(stores.StoreError, match=f"refusing {remote.url}/{ref.rel} as corrupt"):
            remote.download(ref, dest)
        assert remote.manifest_or_none(ref) is None
    assert "nested too deep" in remote.problems(LENET)[0] and "not an artifact manifest" in remote.problems(MLP)[0]
    with pytest.raises(stores.StoreError, match="nested too deep"):
        stores.pull(remote, dest)
    assert not [p for p in dest.root.rglob("*") if p.is_file()]
    assert remote.write_index()["artifacts"] == []  # neither is listed as complete
    _put(remote, stores.INDEX, b"[" * 100000)
    with pytest.raises(stores.StoreError, match="index.json is corrupt: JSON nested too deep"):
        remote.read_json(stores.INDEX)
    _put(remote, f"{LEASES}/{LENET.rel}.json", b"[" * 100000)  # not a lease: taken over
    with S3Lease(remote, LENET.rel, wait=0.3) as lease:
        assert lease.took_over == {}


def test_an_object_over_its_cap_is_refused_naming_the_key_and_sizes(s3env, tmp_path, monkeypatch):
    remote = _bucket("kit-hostile-big")
    local = stores.LocalStore(tmp_path / "local")
    _commit(local.root, LENET, "v1", size=5000)
    stores.push(local, remote)
    dest = stores.LocalStore(tmp_path / "pulled")
    monkeypatch.setenv(MAX_OBJECT_VAR, "1000")
    refused = f"refusing {remote.url}/{LENET.rel}/model.params: 5000 bytes, over the cap of 1000 bytes"
    with pytest.raises(stores.StoreError, match=refused) as e:
        stores.pull(remote, dest)
    assert MAX_OBJECT_VAR in str(e.value)  # the hint names the setting
    assert not [p for p in dest.root.rglob("*") if p.is_file()]
    assert remote.problems(LENET) == [f"model.params ({refused})"]
    with pytest.raises(stores.StoreError, match="5000 bytes, over the cap"):
        remote.read_blob(f"{LENET.rel}/model.params")
    # a server that sends more than it announced is cut off at the cap too
    monkeypatch.delenv(MAX_OBJECT_VAR)
    answer = remote._get(f"{LENET.rel}/model.params", MAX_OBJECT_VAR, False)
    monkeypatch.setenv(MAX_OBJECT_VAR, "1000")
    with pytest.raises(stores.StoreError, match="more than 1000 bytes, over the cap"):
        b"".join(remote._stream(f"{LENET.rel}/model.params", answer, MAX_OBJECT_VAR))
    # JSON blobs have their own, smaller cap
    monkeypatch.delenv(MAX_OBJECT_VAR)
    monkeypatch.setenv(MAX_JSON_VAR, "50")
    with pytest.raises(stores.StoreError, match=rf"{LENET.rel}/manifest.json: \d+ bytes, over the cap of 50 bytes"):
        remote.manifest(LENET)
    monkeypatch.delenv(MAX_JSON_VAR)
    assert stores.pull(remote, dest)["downloaded"] == 1 and not dest.problems(LENET)


def test_keys_that_leave_the_store_are_never_listed_or_written_locally(s3env, tmp_path):
    remote = _bucket("kit-hostile-keys")
    local = stores.LocalStore(tmp_path / "local")
    _commit(local.root, LENET, "v1")
    stores.push(local, remote)
    hostile = ["a/../../escaped", "/abs", "x//y", "./dot", "1.9.1/../../../escaped/x/manifest.json", "w\\..\\x"]
    for rel in hostile:
        _put(remote, rel, b'{"files": {}}')
    keys = remote.list_blobs("")
    assert keys and not set(hostile) & set(keys) and all(".." not in k.split("/") for k in keys)
    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    for rel in hostile + ["out/escaped"]:
        with pytest.raises(stores.StoreError, match="path traversal"):
            remote.download_blob(rel, root)
    assert not list(tmp_path.rglob("escaped")) and sorted(p.name for p in root.iterdir()) == ["out"]
    assert remote.download_blob(f"{LENET.rel}/model.params", root) == root / LENET.rel / "model.params"
    assert local_path(root, "a/b.json") == root.resolve() / "a" / "b.json"
    # a manifest that names a file outside its folder: the artifact is refused, nothing written
    _put(remote, f"{MLP.rel}/manifest.json", json.dumps({"files": {"../../../escaped": "0" * 64}}))
    dest = stores.LocalStore(tmp_path / "pulled")
    with pytest.raises(stores.StoreError, match=f"refusing {remote.url}/{MLP.rel} as corrupt.*path traversal"):
        remote.download(MLP, dest)
    assert not list(tmp_path.rglob("escaped")) and not dest.refs()


def test_a_listing_of_many_keys_streams_page_by_page(s3env, monkeypatch):
    remote = _bucket("kit-hostile-many")
    monkeypatch.setattr(s3, "PAGE_SIZE", 50)
    rels = [f"{RELEASE}/m{i:03d}/export/{name}" for i in range(140) for name in ("manifest.json", "model.params")]
    rels += [f".runs/r/{i:03d}.json" for i in range(140)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda rel: _put(remote, rel, b"{}"), rels))
    requests = []
    remote.client.meta.events.register("before-call.s3.ListObjectsV2", lambda **kw: requests.append(1))
    keys = remote.iter_blobs("")
    assert next(keys) == ".runs/r/000.json" and len(requests) == 1  # one page fetched, not the whole bucket
    assert 1 + sum(1 for _ in keys) == len(rels) and len(requests) == -(-len(rels) // 50)
    refs = remote.refs()
    assert len(refs) == 140 and refs[0] == stores.Ref(RELEASE, "m000", "export")
    assert remote.list_blobs(".runs/r") == sorted(r for r in rels if r.startswith(".runs/"))
