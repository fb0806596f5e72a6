"""Concurrent writers on one store: an artifact is replaced whole under its lock, never half old and half new,
and no replaced version is lost (kit.common.artifacts.locked). Real processes, a real filesystem."""

from __future__ import annotations

import json
import multiprocessing
import os
import time

import pytest
from conftest import NEWEST, OLDEST, read_records, run_cli
from helpers import start_kit

from kit.common import artifacts

RELEASE, MODEL, API = "1.9.1", "lenet", "export"
WRITES = 25  # versions each writer commits
READ_FOR = 6.0  # seconds the readers keep reading


def _final(store):
    return artifacts.artifact_dir(store, RELEASE, MODEL, API)


def _writer(store, name):
    final = _final(store)
    archive = os.path.dirname(artifacts.version_dir(store, RELEASE, MODEL, API, "x"))
    for i in range(WRITES):
        tmp = artifacts.staging_dir(final) + "-" + name  # each writer its own staging folder
        os.makedirs(tmp)
        payload = ("%s-%d " % (name, i)).encode() * 50000  # big enough that copying takes a while
        with open(os.path.join(tmp, "model.params"), "wb") as f:
            f.write(payload)
        manifest = {"status": "saved", "model_version": "m", "param_version": "%s%02d" % (name, i)}
        manifest["files"] = artifacts.hash_files(tmp, ["model.params"])
        artifacts.write_json_atomic(os.path.join(tmp, artifacts.MANIFEST), manifest)
        artifacts.commit_dir(tmp, final, archive=archive)


def _reader(store, out):
    final, seen, torn = _final(store), set(), 0
    open(out + ".ready", "w").close()  # the writers start once every reader is reading, however slow spawn is
    deadline = time.monotonic() + READ_FOR
    reads = 0
    while time.monotonic() < deadline:
        with artifacts.locked(final, exclusive=False):
            try:
                manifest = artifacts.read_json(os.path.join(final, artifacts.MANIFEST))
            except (IOError, OSError, ValueError):
                torn += 1  # a reader must never find the artifact missing once it exists
                continue
            if artifacts.verify(final, manifest):
                torn += 1
            seen.add(manifest["param_version"])
            reads += 1
    with open(out, "w") as f:
        json.dump({"torn": torn, "reads": reads, "seen": sorted(seen)}, f)


def test_two_writers_and_two_readers_never_see_half_an_artifact(tmp_path):
    store = str(tmp_path / "store")
    _writer(store, "first")  # the artifact exists before the readers start
    ctx = multiprocessing.get_context("spawn")
    readers = [ctx.Process(target=_reader, args=(store, str(tmp_path / ("r%d.json" % i)))) for i in range(2)]
    writers = [ctx.Process(target=_writer, args=(store, name)) for name in ("a", "b")]
    for p in readers:
        p.start()
    deadline = time.monotonic() + 60
    while not all((tmp_path / ("r%d.json.ready" % i)).exists() for i in range(2)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for p in writers:
        p.start()
    for p in readers + writers:
        p.join(timeout=120)
        assert p.exitcode == 0
    results = [json.loads((tmp_path / ("r%d.json" % i)).read_text()) for i in range(2)]
    assert all(r["torn"] == 0 for r in results), results
    assert all(r["reads"] > 20 for r in results)  # they did read while the writers replaced it
    assert len(set().union(*(r["seen"] for r in results))) > 3  # and saw it change, whole each time
    # every version ever committed is the current one or kept under .versions: none is lost
    current = artifacts.read_json(os.path.join(_final(store), artifacts.MANIFEST))["param_version"]
    archived = set(os.listdir(os.path.join(store, artifacts.VERSIONS, RELEASE, MODEL, API)))
    committed = {"m-%s%02d" % (name, i) for name in ("first", "a", "b") for i in range(WRITES)}
    assert archived | {"m-" + current} == committed
    for ident in archived:  # and each kept version is itself whole
        assert not artifacts.verify(artifacts.version_dir(store, RELEASE, MODEL, API, ident))


@pytest.mark.envs
def test_a_retraining_run_beside_a_reloading_run_on_one_store(built_envs, kit_home, tmp_path):
    """Two real runs on one store at once, one --retrain: neither sees a torn artifact, every record names a
    param version the store still holds (current or archived)."""
    store, runs = tmp_path / "store", tmp_path / "runs"
    common = ["--runs-dir", str(runs), "--store", str(store), "--save", OLDEST, "--load", f"{OLDEST},{NEWEST}",
              "--models", "lenet,mlp"]  # fmt: skip
    first = run_cli("run", *common, "--run-id", "baseline", home=kit_home, timeout=900)
    assert first.returncode == 0, first.stdout[-2000:]
    retraining = start_kit(["run", *common, "--run-id", "retrain", "--retrain"], home=kit_home)
    reloading = start_kit(["run", *common, "--run-id", "reload"], home=kit_home)
    assert retraining.wait(timeout=900) == 0 and reloading.wait(timeout=900) == 0
    held = set()
    for rel in [p.relative_to(store) for p in store.rglob(artifacts.MANIFEST)]:
        manifest = json.loads((store / rel).read_text())
        if manifest.get("status") == "saved":
            held.add(manifest["param_version"])
    for run_id in ("baseline", "retrain", "reload"):
        records = read_records(runs / run_id)
        assert records and not [k for k, r in records.items() if r["verdict"] == "corrupt"], run_id
        named = {r["param_version"] for r in records.values() if r["verdict"] != "unsupported"}
        assert named <= held, (run_id, named - held)
