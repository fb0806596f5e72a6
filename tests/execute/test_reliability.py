"""Fault injection: bad artifacts, dead kernels, interruptions, bad arguments. Nothing finished is lost."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import NEWEST, OLDEST, REPO, read_records, rehash, reload_in_newest, run_cli
from helpers import start_kit

from kit.common import artifacts
from kit.envs.kernelspecs import KERNEL_START


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_middle(path: Path) -> None:
    data = bytearray(path.read_bytes())
    mid = len(data) // 2  # inside the weights, far from the header and the names at the end
    data[mid : mid + 64] = b"\x7f" * 64  # whatever the alignment: floats near 3e38
    path.write_bytes(bytes(data))


# (model, api, what is done to it, verdict it must get, text the reason must hold)
FAULTS = [
    ("mlp", "export", "truncate", "corrupt", "model-0000.params"),
    ("mlp", "save_params", "flip", "corrupt", "model.params"),
    ("mlp", "module_checkpoint", "truncate+rehash", "corrupt", "declares shape"),  # from its header: nothing loads
    ("lenet", "export", "flip+rehash", ("drift", "mismatch"), ""),
    ("lenet", "save_params", "empty", "corrupt", "model.params"),
    ("lenet", "module_checkpoint", "empty+rehash", "load-error", ""),
    ("embedding", "export", "missing-node+rehash", "load-error", ""),
    ("embedding", "module_checkpoint", "unknown-op+rehash", "load-error", "NoSuchOp"),
    ("embedding", "save_params", "other-model+rehash", "load-error", ""),
    ("resnet_bn", "export", "manifest-not-json", "corrupt", "not JSON"),
    ("resnet_bn", "save_params", "intact", ("identical", "close"), ""),
]


def _apply(fault: str, folder: Path, trained: Path) -> None:
    params = next(p for p in folder.iterdir() if p.suffix == ".params")
    if fault.startswith("truncate"):
        _truncate(params)
    elif fault.startswith("flip"):
        _flip_middle(params)
    elif fault.startswith("empty"):
        params.write_bytes(b"")
    elif fault.startswith("missing-node"):
        sym = folder / "model-symbol.json"
        graph = json.loads(sym.read_text())
        del graph["nodes"][2]
        sym.write_text(json.dumps(graph))
    elif fault.startswith("unknown-op"):
        sym = folder / "model-symbol.json"
        graph = json.loads(sym.read_text())
        next(n for n in graph["nodes"] if n["op"] != "null")["op"] = "NoSuchOp"
        sym.write_text(json.dumps(graph))
    elif fault.startswith("other-model"):
        shutil.copy(trained / OLDEST / "lenet" / "save_params" / "model.params", params)
    elif fault == "manifest-not-json":
        (folder / "manifest.json").write_text("{this is not json")
    if fault.endswith("+rehash"):
        name = "model-symbol.json" if fault.startswith(("missing-node", "unknown-op")) else params.name
        rehash(folder, name)


@pytest.mark.envs
def test_each_bad_artifact_gets_its_verdict_and_the_rest_is_unaffected(trained_store, kit_home, tmp_path):
    store = tmp_path / "store"
    for model, api, fault, _, _ in FAULTS:
        folder = store / OLDEST / model / api
        shutil.copytree(trained_store["_store"] / OLDEST / model / api, folder)
        _apply(fault, folder, trained_store["_store"])
    reload_in_newest(kit_home, store, tmp_path)
    every = read_records(tmp_path)
    records = {k: r for k, r in every.items() if k[2] != "c_predict"}
    assert len(records) == len(FAULTS)
    # each model's C predict cell loads its Module checkpoint (else export): a corrupt source is corrupt there too
    c_pred = {k: r for k, r in every.items() if k[2] == "c_predict"}
    assert {k[1] for k in c_pred} == {m for m, api, *_ in FAULTS if api in ("export", "module_checkpoint")}
    for (saved, model, _, loaded), rec in c_pred.items():
        source = records[(saved, model, rec["source_api"], loaded)]
        if source["verdict"] == "corrupt":
            assert rec["verdict"] == "corrupt", (model, rec["reason"])
    for model, api, fault, verdict, text in FAULTS:
        rec = records[(OLDEST, model, api, NEWEST)]
        expected = verdict if isinstance(verdict, tuple) else (verdict,)
        assert rec["verdict"] in expected, (model, api, fault, rec["verdict"], rec["reason"])
        assert text in (rec["reason"] or ""), (fault, rec["reason"])
        if rec["verdict"] in ("corrupt", "load-error"):
            assert rec["reason"], fault


@pytest.mark.envs
@pytest.mark.parametrize(
    "fault,verdict", [("kill:lenet/export:load", "load-error"), ("abort:mlp/module_checkpoint:infer", "infer-error")]
)
def test_a_dying_kernel_loses_no_record(trained_store, kit_home, tmp_path, fault, verdict):
    runs = tmp_path / "runs"
    proc = run_cli(
        "run",
        "--runs-dir",
        str(runs),
        "--run-id",
        "dies",
        "--save",
        f"{OLDEST},{NEWEST}",
        "--load",
        NEWEST,
        "--models",
        "mlp,lenet",
        "--store",
        str(trained_store["_store"]),
        home=kit_home,
        env=dict(os.environ, MXCOMPAT_FAULT=fault),
        timeout=900,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "kernel(s) died and were restarted" in proc.stdout
    records = read_records(runs / "dies")
    assert len(records) == 20  # 2 saving releases x 2 models x (4 APIs + c_predict), every one present
    model, api = fault.split(":")[1].split("/")
    for saved in (OLDEST, NEWEST):
        rec = records[(saved, model, api, NEWEST)]
        if rec["verdict"] == "unsupported":
            continue
        assert rec["verdict"] == verdict and rec["kernel_died"] is True
        assert "kernel died while" in rec["reason"]
    others = [r for k, r in records.items() if (k[1], k[2]) != (model, api)]
    assert all(r["verdict"] in ("identical", "close", "unsupported") for r in others)
    assert list((runs / "dies" / "reload").glob("mxnet-*.died-*.ipynb"))
    assert not list((runs / "dies" / "records").glob(".inflight-*"))


@pytest.mark.envs
def test_ctrl_c_leaves_a_run_that_resume_completes(trained_store, kit_home, tmp_path):
    runs = tmp_path / "runs"
    args = [
        "run",
        "--runs-dir",
        str(runs),
        "--run-id",
        "ctrlc",
        "--save",
        f"{OLDEST},{NEWEST}",
        "--store",
        str(trained_store["_store"]),
    ]
    proc = start_kit(
        args,
        home=kit_home,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while not list((runs / "ctrlc" / "records").glob("[!.]*.json")):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=120)
    assert not list((runs / "ctrlc").rglob("*.tmp-*"))  # no half-written record or manifest
    resumed = run_cli("run", "--runs-dir", str(runs), "--resume", "ctrlc", home=kit_home, timeout=900)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    records = read_records(runs / "ctrlc")
    assert len(records) == 105 and len({json.dumps(k) for k in records}) == 105


@pytest.mark.envs
def test_a_store_that_cannot_be_written_and_a_missing_kernel_are_refused(built_envs, kit_home, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    proc = run_cli(
        "run", "--runs-dir", str(tmp_path / "runs"), "--save", NEWEST, "--store", str(blocker / "store"), home=kit_home
    )
    assert proc.returncode == 2 and "cannot be written" in proc.stderr
    home = tmp_path / "home"
    (home / "envs").mkdir(parents=True)
    (home / "envs" / NEWEST).symlink_to(kit_home / "envs" / NEWEST)
    proc = run_cli("run", "--runs-dir", str(tmp_path / "runs"), "--save", NEWEST, home=home)
    assert proc.returncode == 2 and f"kernel mxnet-{NEWEST} is not registered" in proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_full_disk_leaves_no_half_written_record(tmp_path, monkeypatch):
    path = tmp_path / "record.json"
    artifacts.write_json_atomic(str(path), {"verdict": "close"})

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(json, "dump", full)
    with pytest.raises(OSError):
        artifacts.write_json_atomic(str(path), {"verdict": "mismatch"})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"verdict": "close"}
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_nothing_unpickles():
    """Every np.load in the kit refuses pickles."""
    for path in (REPO / "kit").rglob("*.py"):
        for line in path.read_text().splitlines():
            if "np.load(" in line:
                assert "allow_pickle=False" in line, f"{path}: {line.strip()}"


def test_crafted_store_keys_cannot_escape(tmp_path):
    from kit.store import refs_from_manifest_paths

    refs = refs_from_manifest_paths(
        [
            "1.9.1/mlp/export/manifest.json",
            "../../etc/x/manifest.json",
            "1.9.1/../x/manifest.json",
            ".versions/1.9.1/mlp/export/1-ab/manifest.json",
            ".versions/../../a/b/manifest.json",
        ]
    )
    assert [r.rel for r in refs] == ["1.9.1/mlp/export", ".versions/1.9.1/mlp/export/1-ab"]


@pytest.mark.envs
def test_credentials_never_reach_notebooks_records_or_bundles(trained_store, kit_home, tmp_path):
    secret = "wJalrXUtnFEMI-kit-test-secret"
    runs = tmp_path / "runs"
    env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIAKITTEST", AWS_SECRET_ACCESS_KEY=secret)
    proc = run_cli(
        "run",
        "--runs-dir",
        str(runs),
        "--run-id",
        "creds",
        "--save",
        OLDEST,
        "--load",
        NEWEST,
        "--models",
        "mlp",
        "--store",
        str(trained_store["_store"]),
        home=kit_home,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    bundle = run_cli(
        "bundle", "creds", "--cell", f"mlp/export/{OLDEST}/{NEWEST}", "--runs-dir", str(runs), home=kit_home, env=env
    )
    assert bundle.returncode == 0
    for path in runs.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret.encode() not in data and b"AKIAKITTEST" not in data, path


@pytest.fixture
def small_filesystem(tmp_path, request):
    """A tmpfs of ``request.param`` (root may mount one; elsewhere the test is skipped with why)."""
    mount = tmp_path / "small"
    mount.mkdir()
    size = f"size={request.param}"
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {proc.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.envs
# 128 KiB: saving fails in the kernel's cell; 512 KiB: the artifacts fit, keeping the train notebook does not
@pytest.mark.parametrize("small_filesystem", ["128k", "512k"], indirect=True)
def test_a_full_or_read_only_store_is_named_with_its_cause(built_envs, kit_home, tmp_path, small_filesystem):
    runs = tmp_path / "runs"
    args = ("run", "--runs-dir", str(runs), "--save", NEWEST, "--models", "lenet", "--store", str(small_filesystem))
    proc = run_cli(*args, "--run-id", "full", home=kit_home)
    # said before any work: the filesystem is nearly full
    assert "MiB free (ENOSPC likely)" in proc.stdout.split(f"train:{NEWEST}")[0], proc.stdout[-2000:]
    assert proc.returncode == 3, proc.stdout[-2000:]
    cause = json.loads((runs / "full" / "run.json").read_text())["steps"][f"train:{NEWEST}"]["cause"]
    assert "OSError: [Errno 28 ENOSPC] No space left on device" in cause and str(small_filesystem) in cause
    assert f"    cause: {cause}" in proc.stdout  # with the step's line
    assert f"BROKEN step train:{NEWEST}: {cause}" in proc.stdout  # and with the outcome
    assert f"- `train:{NEWEST}`: {cause}" in (runs / "full" / "summary.md").read_text()
    junit = (runs / "full" / "junit.xml").read_text()
    assert 'type="step-failed"' in junit and "ENOSPC" in junit.split('type="step-failed"')[0].rsplit("<error", 1)[1]
    subprocess.run(["mount", "-o", "remount,ro", str(small_filesystem)], check=True)
    proc = run_cli(*args, "--run-id", "read-only", home=kit_home)
    assert proc.returncode == 2 and "Read-only file system (EROFS)" in proc.stderr and "read-only" in proc.stderr
    assert not (runs / "read-only").exists()  # refused before any work


def test_a_step_failure_is_one_line_naming_its_cause():
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    from kit.execute.steps import root_cause

    cell = PapermillExecutionError(
        cell_index=6, exec_count=5, source="save()", ename="OSError",
        evalue="[Errno 28] No space left on device: '/store/1.9.1'", traceback=["\x1b[0;31mOSError\x1b[0m", "..."],
    )  # fmt: skip
    assert root_cause(cell) == "OSError: [Errno 28 ENOSPC] No space left on device: '/store/1.9.1' (cell 5)"
    assert root_cause(PermissionError(errno.EACCES, "Permission denied", "/store")) == (
        "PermissionError: [Errno 13 EACCES] Permission denied: '/store'"
    )
    assert root_cause(DeadKernelError("Kernel died")) == "the kernel died (DeadKernelError: Kernel died)"
    assert "\n" not in root_cause(RuntimeError("first line\nsecond line"))


def _descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


@pytest.mark.envs
def test_sigkill_of_the_cli_takes_its_workers_and_kernels_with_it(built_envs, kit_home, tmp_path):
    import psutil

    runs = tmp_path / "runs"
    args = ["run", "--runs-dir", str(runs), "--run-id", "killed", "--save", f"{OLDEST},{NEWEST}",
            "--models", "lenet,lstm", "--store", str(tmp_path / "store")]  # fmt: skip
    proc = start_kit(args, home=kit_home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not any(KERNEL_START in " ".join(p.cmdline()) for p in _descendants(proc.pid)):
        assert time.monotonic() < deadline and proc.poll() is None, "no kernel started"
        time.sleep(0.2)
    time.sleep(1.0)  # the kernels prestarted for the next steps too
    started = _descendants(proc.pid)
    kernels = [p for p in started if KERNEL_START in " ".join(p.cmdline())]
    assert len(started) >= 3 and kernels  # the resource tracker, a worker, its kernels
    proc.kill()
    proc.wait()
    gone, alive = psutil.wait_procs(started, timeout=15)
    assert not alive, [" ".join(p.cmdline())[:120] for p in alive]
    assert not list((kit_home / "pids").glob("*.json")) or all(
        json.loads(p.read_text())["parent"]["pid"] != proc.pid for p in (kit_home / "pids").glob("*.json")
    )
    resumed = run_cli("run", "--runs-dir", str(runs), "--resume", "killed", home=kit_home, timeout=900)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert "ended stray process" not in resumed.stdout  # nothing was left to end


def test_strays_are_ended_by_their_recorded_pids_only(tmp_path):
    """A record whose parent is gone: its live processes end; a reused PID (another start time) is spared."""
    import psutil

    from kit.execute import reaper

    stray = subprocess.Popen(["sleep", "300"])
    bystander = subprocess.Popen(["sleep", "300"])
    try:
        deadline = time.monotonic() + 10  # an exec'd child's arguments show in /proc a moment after Popen returns
        while psutil.Process(stray.pid).cmdline() != ["sleep", "300"] and time.monotonic() < deadline:
            time.sleep(0.01)
        dead_parent = subprocess.Popen(["true"])
        dead_parent.wait()
        records = tmp_path / "home" / reaper.PIDS_DIR
        records.mkdir(parents=True)
        started = psutil.Process(stray.pid).create_time()
        (records / f"{stray.pid}.json").write_text(
            json.dumps({"pid": stray.pid, "started": started, "parent": {"pid": dead_parent.pid, "started": 1.0},
                        "run_id": "crashed", "children": [{"pid": bystander.pid, "started": started - 3600}]})
        )  # fmt: skip
        alive_parent = {"pid": os.getpid(), "started": psutil.Process().create_time()}
        (records / "running.json").write_text(
            json.dumps({"pid": bystander.pid, "started": psutil.Process(bystander.pid).create_time(),
                        "parent": alive_parent, "run_id": "running", "children": []})
        )  # fmt: skip
        said = reaper.end_strays(tmp_path / "home")
        assert said == [f"ended stray process {stray.pid} of run crashed: sleep 300"]
        assert not psutil.pid_exists(stray.pid)  # killed (and reaped: it is this test's child)
        assert bystander.poll() is None  # another start time than recorded, and a record whose parent lives
        assert [p.name for p in records.glob("*.json")] == ["running.json"]
    finally:
        for p in (stray, bystander):
            p.kill()
            p.wait()
