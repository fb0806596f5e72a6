"""A step on a machine that shares nothing with the client but the store.

``run_remote`` is what a Dask worker executes for one train or reload step:
provision the release's environment (as ``mxcompat env create`` would, same uv
cache and health checks), pull the step's inputs from the store into the worker's
mirror, run the step's notebook in a child process, push what a train step saved,
and upload the step's outputs (executed notebook, records, log) under
``.runs/<run-id>/<attempt>/`` of the store. The client downloads exactly the files
the returned listing names, verified by hash, so an attempt killed half-way
(its worker lost) leaves nothing the client would read twice.

A worker's kit home: ``MXCOMPAT_WORKER_HOME`` (``{name}`` is replaced by the worker's
name, so workers on one machine can act as separate machines), else
``MXCOMPAT_HOME``, else the default.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from kit import store as stores
from kit.common.capabilities import EXIT_APIS, EXIT_RUNTIMES, ONNX_SOURCES, split_pin
from kit.common.errors import KitError, UsageError
from kit.common.names import is_safe_name
from kit.envs import child_env, onnx_path
from kit.envs.manager import EnvBuildError, EnvManager
from kit.execute import progress
from kit.execute.notebook_parameters import PATH_PARAMETERS
from kit.execute.notebooks import NOTEBOOKS
from kit.execute.steps import Step, StepResult
from kit.home import KitHome

BUILD_WAIT_SECONDS = 1800


def worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return "local"


def worker_home(name: str | None = None) -> KitHome:
    template = os.environ.get("MXCOMPAT_WORKER_HOME")
    if template:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name or worker_name())
        return KitHome(template.replace("{name}", safe))
    return KitHome()


def ready_releases() -> list[str]:
    """Releases whose environment is ready in this worker's kit home (for routing)."""
    try:
        return sorted(e.name for e in EnvManager(worker_home()).list() if e.state == "ready")
    except KitError:
        return []


def ensure_env(home: KitHome, name: str, allow_fallback: bool = False) -> bool:
    """Create ``name``'s environment in ``home`` unless it is ready and healthy; True when it was built."""
    manager = EnvManager(home)
    release = manager.resolve(name)
    if release.is_runtime:  # verified against its release's canonical environment: that one first
        ensure_env(home, release.canonical, allow_fallback)
    try:
        env = manager.get(name)
        healthy = env.state == "ready" and manager.doctor([name], jobs=1)[0].ok
    except KitError:
        healthy = False
    if healthy:
        return False
    plan = manager.build_plan(release, allow_fallback=allow_fallback)
    deadline = time.monotonic() + BUILD_WAIT_SECONDS
    while True:
        try:
            [result] = manager.create([plan], jobs=1, force=True)
        except EnvBuildError as e:  # another task on this worker builds it: wait for it
            if "another process is building" not in e.message or time.monotonic() > deadline:
                raise
            time.sleep(2.0)
            if manager.doctor([name], jobs=1)[0].ok:
                return False
            continue
        if result.status == "failed":
            raise result.error or KitError(f"environment {name} could not be built on worker {worker_name()}")
        return True


def _die_with_parent() -> None:
    """In the child: be killed when the worker process dies (Linux), so a lost worker leaves no step running."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def run_step_process(step: Step, home: KitHome, log_path: Path) -> StepResult:
    """Run ``step`` with ``python -m kit.execute.steps`` in a child process (it crosses as JSON, one schema
    each way: :meth:`Step.to_dict`, :meth:`StepResult.from_dict`); its result."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(step.to_dict(), f)
    try:
        env = child_env.for_kernels()
        proc = subprocess.run(
            [sys.executable, "-m", "kit.execute.steps", f.name, str(home.root), str(log_path)],
            capture_output=True,
            text=True,
            env=env,
            preexec_fn=_die_with_parent,
        )
    finally:
        os.unlink(f.name)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return StepResult(
            step.id,
            "failed",
            0.0,
            error=f"step process exited {proc.returncode}: {proc.stderr.strip()[-2000:]}",
            error_type="StepProcessDied",
        )
    return StepResult.from_dict(json.loads(lines[-1]))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def upload_outputs(remote, scratch: Path, prefix: str) -> dict:
    """Every file under ``scratch`` into the store under ``prefix``; ``{relative path: sha256}``."""
    files = {}
    for path in sorted(p for p in scratch.rglob("*") if p.is_file()):
        rel = path.relative_to(scratch).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue  # in-flight markers, temporary files
        data = path.read_bytes()
        remote.write_blob(f"{prefix}/{rel}", data)
        files[rel] = _sha256(data)
    return files


def started_prefix(run_id: str, step_id: str) -> str:
    """Where each attempt of a step announces itself in the store."""
    return f"{stores.RUNS_PREFIX}/{run_id}/started/{step_id.replace(':', '-')}"


@contextlib.contextmanager
def _progress_to_client(path: str):
    """While the step runs, send its progress file's changes to the client as Dask events."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):  # not on a Dask worker (a test calling run_remote itself)
        yield
        return
    stop = threading.Event()
    thread = threading.Thread(
        target=progress.forward_file, args=(path, lambda state: worker.log_event(progress.TOPIC, state), stop)
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def run_remote(task: dict) -> dict:
    """Run one step where this function is called (a Dask worker); see the module's docstring."""
    started = time.monotonic()
    step = Step.from_dict(task["step"])
    kind, release = step.kind, step.release
    for name in (task["run_id"], step.id.replace(":", "-")):  # they name folders and keys on this worker
        if not is_safe_name(name):
            raise UsageError(f"refusing the task: {name!r} is not a plain name")
    home = worker_home()
    home.root.mkdir(parents=True, exist_ok=True)
    remote = stores.open_store(task["store_location"], endpoint_url=task.get("endpoint_url"))
    mirror = remote.working_copy(home)
    attempt = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
    step_key = step.id.replace(":", "-")
    scratch = home.root / "dask-runs" / task["run_id"] / f"{step_key}-{attempt}"
    scratch.mkdir(parents=True)
    # announced first: an attempt lost with its worker still counts in the step's attempts
    announce = {
        "worker": worker_name(),
        "home": str(home.root),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    remote.write_blob(f"{started_prefix(task['run_id'], step.id)}/{attempt}.json", json.dumps(announce).encode())
    built = ensure_env(home, release, task.get("allow_fallback", False))
    params = dict(step.parameters)
    exits = params.get("exit_runtimes") or {}
    for api in exits:  # an exit's step also runs its runtime: that runtime's environment, on this worker
        built = ensure_env(home, EXIT_RUNTIMES[api]) or built
    if exits:  # this worker's Pythons, not the planner's (a train step has no such parameter)
        params["exit_runtimes"] = {api: str(onnx_path.runtime_python(home, api)) for api in exits}
    places = {"store": str(mirror.root), "run": str(scratch)}
    for name, place in PATH_PARAMETERS[kind].items():
        params[name] = places[place]
    models = [split_pin(m)[0] for m in params.get("models") or []] or None  # the store has no pins
    apis = params.get("apis") or None
    if apis and set(apis) & set(EXIT_APIS):  # its cells read the graph artifacts
        apis = list(ONNX_SOURCES)
    pulled = 0
    if mirror is not remote:
        sources = [release] if kind == "train" else params["saved_with"]
        every = params.get("versions") == "all"
        pulled = stores.pull(remote, mirror, releases=sources, models=models, apis=apis, versions=every)["downloaded"]
    local = dataclasses.replace(
        step,
        parameters=params,
        output=str(scratch / task["output_rel"]),
        notebook=str(NOTEBOOKS / task["notebook_name"]),
        progress=progress.progress_path(scratch, step.id),  # a dot folder: never uploaded
    )
    with _progress_to_client(local.progress):
        result = run_step_process(local, home, scratch / "logs" / f"{step_key}.log")
    pushed = 0
    if kind == "train" and mirror is not remote:
        pushed = stores.push(mirror, remote, releases=[release], models=models, apis=apis, run_id=task["run_id"])[
            "uploaded"
        ]
    prefix = f"{stores.RUNS_PREFIX}/{task['run_id']}/{attempt}"
    files = upload_outputs(remote, scratch, prefix)
    return {
        "result": result.to_dict(),
        "prefix": prefix,
        "files": files,
        "worker": worker_name(),
        "home": str(home.root),
        "attempt": attempt,
        "built_env": built,
        "pulled": pulled,
        "pushed": pushed,
        "seconds": round(time.monotonic() - started, 2),
    }
