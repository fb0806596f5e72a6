"""The matrix: train once per saving release, reload once per loading release, then summarize.

``run_matrix`` checks every argument before any work starts, plans the steps,
runs them with an executor (train steps in parallel, then reload steps, then the
summary), records each step's outcome in the run's manifest as it finishes, and
writes the run's reports. ``resume`` redoes only the steps that did not finish.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import kit
from kit import kernelspecs, reports
from kit.envs import EnvManager
from kit.common.errors import KitError, UsageError
from kit.executors import REMOTE, get_executor
from kit.home import KitHome
from kit.common import tolerance as tolerance_mod
from kit.common.capabilities import APIS, CORE_MODELS, MODEL_GROUPS, MODEL_NAMES, expand_models
from kit.common.versions import direction
from kit.notebooks import NOTEBOOKS
from kit.records import cell_id, classify, load_allow_list, load_records
from kit.runs import Run, new_run_id, runs_dir
from kit.steps import Step, StepResult

EXIT_OK, EXIT_REGRESSIONS, EXIT_BROKEN = 0, 1, 3  # 2, a usage error, is UsageError.exit_code


@dataclass
class RunRequest:
    """What a run was asked to do; stored in the run manifest so ``--resume`` can redo it."""

    save: list[str]
    load: list[str]
    models: list[str] = field(default_factory=list)
    apis: list[str] = field(default_factory=list)
    forward: bool = False
    tolerance: dict = field(default_factory=dict)
    retrain: bool = False
    allow_list: str | None = None
    store: str | None = None
    foreign: bool = False  # the model is a checkpoint the kit did not train (mxcompat check-model)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class RunOutcome:
    run_id: str
    run_dir: Path
    exit_code: int
    counts: dict
    failed_steps: list[str]
    failures: list[str]
    allowed: list[str]


def validate(req: RunRequest, manager: EnvManager, local_envs: bool = True) -> None:
    """Refuse bad arguments before any work starts: releases, environments, models, APIs, tolerance.

    ``local_envs=False`` (steps run on workers, which build their own environments) skips
    the checks of this machine's environments and kernels.
    """
    if not req.save:
        raise UsageError("--save needs at least one release")
    if not req.load:
        raise UsageError("--load needs at least one release")
    missing = []
    for name in dict.fromkeys(req.save + req.load):
        manager.resolve(name)  # unknown release: error listing the known ones
        if not local_envs:
            continue
        try:
            env = manager.get(name)
        except KitError:
            missing.append(name)
            continue
        if env.state != "ready":
            missing.append(name)
    if missing:
        raise UsageError(
            f"no ready environment for {', '.join(missing)}",
            hint=f"create them first: mxcompat env create {' '.join(missing)}",
        )
    unregistered = [
        n
        for n in dict.fromkeys(req.save + req.load)
        if local_envs and kernelspecs.read_kernelspec(manager.home, f"mxnet-{n}") is None
    ]
    if unregistered:
        raise UsageError(
            f"kernel {', '.join('mxnet-' + n for n in unregistered)} is not registered",
            hint=f"register it again: mxcompat env create --force {' '.join(unregistered)}",
        )
    if not req.foreign:
        models, unknown = expand_models(req.models)
        if unknown:
            raise UsageError(
                f"unknown model(s): {', '.join(unknown)}",
                hint=f"known: {', '.join(MODEL_NAMES)}; groups: {', '.join(MODEL_GROUPS)}",
            )
        req.models = models
    checks = () if req.foreign else (("API", req.apis, APIS),)
    for what, given, known in checks:
        unknown = [x for x in given if x not in known]
        if unknown:
            raise UsageError(f"unknown {what}(s): {', '.join(unknown)}", hint="known: " + ", ".join(known))
    try:
        tolerance_mod.validate(req.tolerance)
    except tolerance_mod.ToleranceError as e:
        raise UsageError(f"bad --tolerance: {e}") from None
    load_allow_list(req.allow_list)


def _local_store(req: RunRequest, home: KitHome) -> Path:
    """The folder the kernels read and write: the store itself, or the local mirror of an S3 store."""
    from kit import store as store_mod

    opened = store_mod.open_store(req.store, home=home)
    if isinstance(opened, store_mod.S3Store):
        return store_mod.cache_for(opened, home).root
    return opened.root


def _check_writable(store: Path) -> None:
    """Refuse a store that cannot be written before any work starts."""
    try:
        store.mkdir(parents=True, exist_ok=True)
        probe = store / f".write-test-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise UsageError(
            f"the store {store} cannot be written: {e.strerror or e}",
            hint="pick another --store, or fix its permissions",
        ) from None


def _remote(req: RunRequest, home: KitHome):
    from kit import store as store_mod

    if req.store and str(req.store).startswith("s3://"):
        return store_mod.open_store(req.store, home=home)
    return None


def _artifacts_complete(store: Path, release: str, models: list[str], apis: list[str]) -> bool:
    return all((store / release / m / a / "manifest.json").is_file() for m in models for a in apis)


def plan(req: RunRequest, run: Run, store: Path, home: KitHome) -> list[Step]:
    """The steps of a run, in order: train per saving release, reload per loading release, summary."""
    models, apis = req.models or list(CORE_MODELS), req.apis or list(APIS)
    steps = []
    for release in req.save:
        steps.append(
            Step(
                id=f"train:{release}",
                kind="train",
                release=release,
                notebook=str(NOTEBOOKS / "train.ipynb"),
                output=str(run.dir / "train" / f"mxnet-{release}.ipynb"),
                kernel=f"mxnet-{release}",
                parameters={
                    "release": release,
                    "models": models,
                    "apis": apis,
                    "store": str(store),
                    "retrain": req.retrain,
                },
            )
        )
    for release in req.load:
        sources = [s for s in req.save if req.forward or _direction(s, release) != "forward"]
        if not sources:
            continue
        steps.append(
            Step(
                id=f"reload:{release}",
                kind="reload",
                release=release,
                notebook=str(NOTEBOOKS / "reload.ipynb"),
                output=str(run.dir / "reload" / f"mxnet-{release}.ipynb"),
                kernel=f"mxnet-{release}",
                parameters={
                    "release": release,
                    "store": str(store),
                    "saved_with": sources,
                    "models": models,
                    "apis": apis,
                    "run_dir": str(run.dir),
                    "tolerance": req.tolerance,
                    "forward": req.forward,
                },
                depends_on=[f"train:{s}" for s in sources],
            )
        )
    if not any(s.kind == "reload" for s in steps):
        raise UsageError(
            "nothing to check: every --load release is older than every --save release",
            hint="add --forward to check newer artifacts in older releases",
        )
    steps.append(
        Step(
            id="summary",
            kind="summary",
            release=None,
            notebook=str(NOTEBOOKS / "summary.ipynb"),
            output=str(run.dir / "summary.ipynb"),
            kernel=kernelspecs.HOST_KERNEL,
            parameters={"run_dir": str(run.dir)},
            depends_on=[s.id for s in steps],
        )
    )
    return steps


def _direction(saved: str, loaded: str) -> str:
    try:
        return direction(saved, loaded)
    except ValueError:  # a custom release name: compare everything with everything
        return "unknown"


def run_matrix(
    req: RunRequest,
    *,
    run_id: str | None = None,
    jobs: int = 1,
    runs_root: str | Path | None = None,
    executor: str = "local",
    scheduler: str | None = None,
    home: KitHome | None = None,
    on_event: Callable[[str], None] = print,
) -> RunOutcome:
    """Run the matrix of ``req``: with ``executor="dask"`` its steps run on the cluster at ``scheduler``."""
    home = home or KitHome()
    manager = EnvManager(home)
    validate(req, manager, local_envs=executor not in REMOTE)
    root = runs_root or runs_dir()
    run = Run(root, run_id or new_run_id(root))
    if run.exists():
        raise UsageError(
            f"run {run.id} already exists in {run.dir.parent}",
            hint=f"resume it with --resume {run.id}, or pick another --run-id",
        )
    runner = _executor(executor, jobs, scheduler, req, run, on_event)  # a cluster is reached before any work
    store = _local_store(req, home)
    if executor not in REMOTE:  # with workers, the store is theirs to write
        _check_writable(store)
    run.lock()
    try:
        steps = plan(req, run, store, home)
        manifest = {
            "run_id": run.id,
            "kit_version": kit.__version__,
            "created_at": _now(),
            "request": req.to_dict(),
            "store": str(store),
            "order": [s.id for s in steps],
            "executor": executor,
            "steps": {s.id: dict(s.to_dict(), status="pending") for s in steps},
        }
        run.write_manifest(manifest)
        return _execute(run, manifest, req, runner, home, on_event)
    finally:
        run.sweep_partial_writes()  # a kernel killed mid-write (Ctrl-C) leaves its temporary file
        run.unlock()


def _executor(name: str, jobs: int, scheduler: str | None, req: RunRequest, run: Run, on_event):
    options: dict = {"jobs": jobs}
    if name in REMOTE:
        options.update(scheduler=scheduler, store=req.store, run_id=run.id, run_dir=str(run.dir), on_event=on_event)
    return get_executor(name, **options)


def resume(
    run_id: str,
    *,
    jobs: int = 1,
    runs_root: str | Path | None = None,
    executor: str = "local",
    scheduler: str | None = None,
    home: KitHome | None = None,
    on_event: Callable[[str], None] = print,
) -> RunOutcome:
    """Redo what did not finish in run ``run_id``: steps not ``ok``, then the reports."""
    home = home or KitHome()
    run = Run(runs_root or runs_dir(), run_id)
    if not run.exists():
        raise UsageError(f"no run {run_id} in {run.dir.parent}")
    run.lock()
    try:
        manifest = run.read_manifest()
        req = RunRequest(**manifest["request"])
        validate(req, EnvManager(home), local_envs=executor not in REMOTE)
        runner = _executor(executor, jobs, scheduler, req, run, on_event)
        manifest["executor"] = executor
        done = [i for i in manifest["order"] if manifest["steps"][i]["status"] in ("ok", "cached")]
        on_event(f"resuming run {run_id}: {len(done)} of {len(manifest['order'])} steps already finished")
        return _execute(run, manifest, req, runner, home, on_event)
    finally:
        run.sweep_partial_writes()
        run.unlock()


def _execute(
    run: Run, manifest: dict, req: RunRequest, executor, home: KitHome, on_event: Callable[[str], None]
) -> RunOutcome:
    elsewhere = executor.name in REMOTE
    kernelspecs.ensure_host_kernel(home)
    store = Path(manifest["store"])
    steps = {
        i: Step(**{k: v for k, v in manifest["steps"][i].items() if k in Step.__dataclass_fields__})
        for i in manifest["order"]
    }
    total = len(steps)
    progress = {"done": sum(1 for i in steps if manifest["steps"][i]["status"] in ("ok", "cached"))}

    def record(result: StepResult) -> None:
        entry = manifest["steps"][result.id]
        entry.update(
            status=result.status,
            seconds=result.seconds,
            attempts=result.attempts,
            error=result.error,
            error_type=result.error_type,
            deaths=result.deaths,
            finished_at=_now(),
        )
        run.write_manifest(manifest)
        progress["done"] += 1
        failed = sum(1 for e in manifest["steps"].values() if e["status"] == "failed")
        line = f"[{progress['done']}/{total}] {result.id}: {result.status} in {result.seconds:.1f}s"
        if result.attempts > 1:
            line += f" after {result.attempts} attempts"
        if result.deaths:
            line += f", {result.deaths} kernel(s) died and were restarted"
        if failed:
            line += f" ({failed} failed so far)"
        on_event(line)
        if result.error:
            on_event("    " + result.error.strip().splitlines()[-1][:300])

    started = time.monotonic()
    remote = _remote(req, home)
    models, apis = req.models or list(CORE_MODELS), req.apis or list(APIS)
    in_remote = None
    if elsewhere:  # workers pull and push themselves; here only what the store already holds is asked
        from kit import store as store_mod

        in_remote = {(r.release, r.model, r.api) for r in store_mod.open_store(req.store).refs() if r.version is None}
        remote = None
    if remote is not None:
        from kit import store as store_mod

        counts = store_mod.pull(remote, store_mod.LocalStore(store), releases=req.save, models=models, apis=apis)
        on_event(f"pulled {counts['downloaded']} artifact(s) from {remote.url} ({counts['unchanged']} up to date)")
    for kind in ("train", "reload", "summary"):
        todo = [
            s for s in steps.values() if s.kind == kind and manifest["steps"][s.id]["status"] not in ("ok", "cached")
        ]
        if kind == "train":
            for s in list(todo):
                complete = (
                    all((s.release, m, a) in in_remote for m in models for a in apis)
                    if in_remote is not None
                    else _artifacts_complete(store, s.release, models, apis)
                )
                if not req.retrain and complete:
                    record(StepResult(s.id, "cached", 0.0))
                    todo.remove(s)
        if kind == "summary":
            _write_reports(run, req, manifest)  # the summary reads them; written again below with its outcome
        executor.run(todo, str(home.root), record, log_dir=str(run.dir / "logs"))
        if kind == "train" and remote is not None:
            from kit import store as store_mod

            counts = store_mod.push(store_mod.LocalStore(store), remote, releases=req.save, models=models, apis=apis)
            on_event(f"pushed {counts['uploaded']} artifact(s) to {remote.url} ({counts['unchanged']} already there)")
    manifest["wall_seconds"] = round(manifest.get("wall_seconds", 0) + time.monotonic() - started, 2)
    outcome = _write_reports(run, req, manifest)
    manifest.update(finished_at=_now(), exit_code=outcome.exit_code, counts=outcome.counts)
    run.write_manifest(manifest)
    return outcome


def _write_reports(run: Run, req: RunRequest, manifest: dict) -> RunOutcome:
    records = load_records(run.dir)
    allow = load_allow_list(req.allow_list)
    split = classify(records, allow)
    failed_steps = [i for i in manifest["order"] if manifest["steps"][i]["status"] == "failed"]
    counts: dict = {}
    for rec in records:
        per = counts.setdefault(rec["direction"], {})
        per[rec["verdict"]] = per.get(rec["verdict"], 0) + 1
    if failed_steps:
        code = EXIT_BROKEN
    elif split["failures"]:
        code = EXIT_REGRESSIONS
    else:
        code = EXIT_OK
    reports.write_all(run.dir, records, split, manifest, code)
    return RunOutcome(
        run.id,
        run.dir,
        code,
        counts,
        failed_steps,
        [cell_id(r) for r in split["failures"]],
        [cell_id(r) for r, _ in split["allowed"]],
    )


def parse_tolerance(text: str | None) -> dict:
    """``--tolerance``: JSON text or the path of a JSON/YAML file."""
    if not text:
        return {}
    import yaml

    path = Path(text)
    try:
        data = yaml.safe_load(path.read_text()) if path.is_file() else json.loads(text)
    except (ValueError, yaml.YAMLError) as e:
        raise UsageError(f"--tolerance is neither a readable file nor JSON: {e}") from None
    try:
        return tolerance_mod.validate(data)
    except tolerance_mod.ToleranceError as e:
        raise UsageError(f"bad --tolerance: {e}") from None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
