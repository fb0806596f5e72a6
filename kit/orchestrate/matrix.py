"""The matrix, orchestrated: train once per saving release, reload once per loading release, then summarize.

``run_matrix`` normalizes and checks the request (:mod:`kit.orchestrate.request`) before any work starts,
plans its steps (:mod:`kit.orchestrate.plan`) and runs them with an executor (:mod:`kit.execute.executors`):
in one batch where the executor follows the steps' declared dependencies (a release's reload starts as soon
as its inputs are trained), else wave by wave; a host-only step such as the summary always runs here. It
records each step's outcome in the run's manifest as it finishes, and writes the run's reports. ``resume``
redoes only the steps that did not finish.
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import kit
from kit.common.capabilities import split_pin
from kit.common.errors import KitError, UsageError
from kit.common.record_schema import now, verdict_counts
from kit.envs import kernelspecs
from kit.envs.manager import EnvManager
from kit.execute import reaper
from kit.execute.executors import Executor, executor_class, get_executor
from kit.execute.progress import PROGRESS_DIR, LiveProgress
from kit.execute.steps import Step, StepResult
from kit.home import KitHome
from kit.orchestrate.plan import plan, runtime_entries, unchecked, unusable, waves
from kit.orchestrate.request import RunRequest, check_environments, check_writable, store_space_warning, validate
from kit.results import reports, summary_html
from kit.results.records import load_records, load_run
from kit.results.reports import skipped_line, step_cause
from kit.results.runs import LATEST, Run, default_runs_dir, new_run_id
from kit.results.signatures import Group

FINISHED = ("ok", "cached")


@dataclass
class RunOutcome:
    run_id: str
    run_dir: Path
    exit_code: int
    counts: dict
    failed_steps: list[str]
    expired: list[str] = field(default_factory=list)  # failing cells whose allow-list entry expired, entry named
    skipped: list[dict] = field(default_factory=list)  # asked for, not checked: {"kind", "name", "reason"}
    causes: dict[str, str] = field(default_factory=dict)  # a broken step's root cause in one line
    groups: list[Group] = field(default_factory=list)  # the incompatibilities, one per signature and direction


@dataclass
class Execution:
    """Where and how a run's steps run: the options :func:`run_matrix` and :func:`resume` share."""

    jobs: int = 1
    runs_dir: str | Path | None = None
    executor: str = "local"
    scheduler: str | None = None  # the Dask scheduler's address, for executor="dask"
    home: KitHome | None = None
    on_event: Callable[[str], None] = print
    progress_line: bool | None = False  # a live line per running step; None: when stdout is a terminal

    def __post_init__(self):
        self.home = self.home or KitHome()
        self.remote = executor_class(self.executor).remote
        self.live = LiveProgress(None, self.on_event, stream=sys.stdout, enabled=self.progress_line)
        self.on_event = self.live.echo  # lines print above the live ones

    def executor_for(self, req: RunRequest, run: Run) -> Executor:
        """The executor, reached now (an unreachable cluster fails before any work)."""
        return get_executor(
            self.executor,
            jobs=self.jobs,
            store_location=req.store,
            home=self.home,
            run=run,
            on_event=self.on_event,
            on_progress=self.live.update,
            scheduler=self.scheduler,
        )


def run_matrix(
    req: RunRequest, *, run_id: str | None = None, meanwhile: Callable[[], None] | None = None, **options
) -> RunOutcome:
    """Run the matrix of ``req``; ``options`` are :class:`Execution`'s (``executor="dask"``: on a cluster).

    ``meanwhile``: work the steps need done first (check-model's reference in the saving release), done while
    the executor starts its workers and takes or starts the kernels of the steps after training; if it fails,
    no run is left.
    """
    how = Execution(**options)
    req = req.normalized()
    validate(req, EnvManager(how.home), local_envs=False)  # this machine's environments: once holdings are known
    root = how.runs_dir or default_runs_dir()
    run = Run(root, run_id or new_run_id(root))
    if run.id == LATEST:
        raise UsageError(f"{LATEST} names the link to the newest run", hint="pick another --run-id")
    if run.exists():
        raise UsageError(
            f"run {run.id} already exists in {run.dir.parent}",
            hint=f"resume it with --resume {run.id}, or pick another --run-id",
        )
    runner = how.executor_for(req, run)
    if req.reload_only:
        req = req.with_stored_releases(runner.holdings(), req.store or "in the kit home")
        how.on_event(f"reloading what the store holds of {len(req.save)} release(s): {', '.join(req.save)}")
    _check_here(req, runner, how)
    store = _working_copy(req, how.home)
    if not how.remote:  # with workers, the store is theirs to write
        check_writable(store)
        warning = store_space_warning(store) if not req.reload_only else None
        if warning:
            how.on_event(warning)
    made = not run.dir.exists()
    run.lock()
    begun = False  # a run.json is written: the run is the user's, whatever happens next
    try:
        _end_strays(how)
        runtimes = runtime_entries(req, EnvManager(how.home))
        steps = plan(req, run, store, unusable(runtimes), home=how.home)
        if meanwhile is not None:
            runner.start([s.kernel for s in steps if s.kind != "train" and not (how.remote and s.runs_on_host)])
            meanwhile()
        skipped = unchecked(req, runtimes)
        for entry in skipped:
            how.on_event(f"not checked: {skipped_line(entry)}")
        manifest = {
            "run_id": run.id,
            "kit_version": kit.__version__,
            "created_at": now(),
            "request": req.to_dict(),
            "store": str(store),
            "order": [s.id for s in steps],
            "executor": how.executor,
            "steps": {s.id: dict(s.to_dict(), status="pending") for s in steps},
            "skipped": skipped,
            "runtimes": runtimes,
        }
        run.write_manifest(manifest)
        begun = True
        run.mark_latest()
        return _execute(run, manifest, req, runner, how)
    finally:
        runner.close()
        run.sweep_partial_writes()  # a kernel killed mid-write (Ctrl-C) leaves its temporary file
        run.unlock()
        if made and not begun:  # a folder this call made, holding only its lock and the kernels' log
            shutil.rmtree(run.dir, ignore_errors=True)


def _end_strays(how: Execution) -> None:
    """End what an earlier crash of this kit left running (recorded PIDs only, see kit.execute.reaper)."""
    for line in reaper.end_strays(how.home.root):
        how.on_event(line)


def _check_here(req: RunRequest, runner: Executor, how: Execution) -> None:
    """This machine has what its steps need: environments for the loading releases and for the saving
    releases whose artifacts the store lacks (a remote executor's workers build their own)."""
    if not how.remote:
        check_environments(req, EnvManager(how.home), req.held_releases(runner.holdings()))


def _working_copy(req: RunRequest, home: KitHome) -> Path:
    """The folder the kernels read and write: the store itself, or the local mirror of a remote store."""
    from kit import store as stores

    return stores.open_store(req.store, home=home).working_copy(home).root


def resume(run_id: str, *, limits: dict | None = None, **options) -> RunOutcome:
    """Redo what did not finish in run ``run_id``: steps not ``ok``, then the reports (``options``: as run_matrix's;
    ``limits``: replace the run's own).

    Of ``run.json`` only what the user asked (its request) and which steps finished are read: the steps are
    planned again, so their notebooks, kernels, outputs and parameters are this kit's and this run folder's
    wherever the folder now is, never paths the file spells.
    """
    how = Execution(**options)
    run = Run(how.runs_dir or default_runs_dir(), run_id)
    if not run.exists():
        raise UsageError(f"no run {run_id} in {run.dir.parent}")
    run.lock()
    try:
        _end_strays(how)  # the crash that interrupted this run may have left its kernels running
        manifest = run.read_manifest()
        req = _request_of(run, manifest)
        if limits:
            req.limits = limits
        req = req.normalized()
        validate(req, EnvManager(how.home), local_envs=False)
        runner = how.executor_for(req, run)
        _check_here(req, runner, how)
        store = _working_copy(req, how.home)
        runtimes = manifest.get("runtimes") if isinstance(manifest.get("runtimes"), list) else []
        _replan(manifest, req, plan(req, run, store, unusable(runtimes), home=how.home), store, how.on_event)
        manifest["executor"] = how.executor
        done = [i for i in manifest["order"] if manifest["steps"][i]["status"] in FINISHED]
        how.on_event(f"resuming run {run_id}: {len(done)} of {len(manifest['order'])} steps already finished")
        try:
            return _execute(run, manifest, req, runner, how)
        finally:
            runner.close()
    finally:
        run.sweep_partial_writes()
        run.unlock()


def _request_of(run: Run, manifest: dict) -> RunRequest:
    """The request ``run.json`` recorded, as a :class:`RunRequest` (a usage error when it is not one)."""
    asked = manifest.get("request") if isinstance(manifest, dict) else None
    try:
        return RunRequest(**asked)
    except TypeError as e:
        raise UsageError(f"run {run.id}'s run.json holds no request this kit can resume: {e}") from None


def _replan(manifest: dict, req: RunRequest, steps: list[Step], store: Path, on_event) -> None:
    """``manifest``'s steps made ``steps`` (planned again), each keeping the outcome it had if it finished."""
    before = manifest.get("steps") if isinstance(manifest.get("steps"), dict) else {}
    entries = {}
    for s in steps:
        old = before.get(s.id)
        finished = isinstance(old, dict) and old.get("status") in FINISHED
        outcome = {k: v for k, v in old.items() if k not in s.to_dict()} if finished else {}
        entries[s.id] = dict(outcome, **s.to_dict(), status=old["status"] if finished else "pending")
    dropped = sorted(set(before) - set(entries))
    if dropped:
        on_event(f"ignored in run.json: step(s) this run's request does not plan: {', '.join(map(str, dropped))}")
    manifest.update(request=req.to_dict(), store=str(store), order=[s.id for s in steps], steps=entries)


class _Progress:
    """Writes each finished step into the manifest at once and says it in one line."""

    def __init__(self, run: Run, manifest: dict, on_event: Callable[[str], None], live: LiveProgress):
        self.run, self.manifest, self.on_event, self.live = run, manifest, on_event, live
        self.total = len(manifest["order"])
        self.done = sum(1 for e in manifest["steps"].values() if e["status"] in FINISHED)

    def __call__(self, result: StepResult) -> None:
        self.live.finished(result.id)
        entry = self.manifest["steps"][result.id]
        entry.update(
            status=result.status,
            seconds=result.seconds,
            attempts=result.attempts,
            error=result.error,
            error_type=result.error_type,
            cause=result.cause,
            deaths=result.deaths,
            started_at=result.started_at,
            finished_at=now(),
        )
        self.run.write_manifest(self.manifest)
        self.done += 1
        failed = sum(1 for e in self.manifest["steps"].values() if e["status"] == "failed")
        line = f"[{self.done}/{self.total}] {result.id}: {result.status} in {result.seconds:.1f}s"
        if result.attempts > 1:
            line += f" after {result.attempts} attempts"
        if result.deaths:
            line += f", {result.deaths} kernel(s) died and were restarted"
        if failed:
            line += f" ({failed} failed so far)"
        self.on_event(line)
        if result.error:
            self.on_event("    cause: " + step_cause(entry))


def _execute(run: Run, manifest: dict, req: RunRequest, executor: Executor, how: Execution) -> RunOutcome:
    kernelspecs.ensure_host_kernel(how.home)
    steps = [Step.from_manifest_entry(manifest["steps"][i]) for i in manifest["order"]]
    how.live.directory = run.dir / PROGRESS_DIR
    progress = _Progress(run, manifest, how.on_event, how.live)
    here = executor
    if how.remote:  # host-only steps (the summary) run on this machine
        here = get_executor("local", jobs=1, store_location=req.store, home=how.home, run=run)
    started = time.monotonic()
    models, apis = (req.models or None, req.apis or None) if req.reload_only else req.stored_scope
    models = [split_pin(m)[0] for m in models] if models else None
    executor.prepare(req.save, models, apis, versions=req.versions == "all")  # a remote store is pulled here
    held = req.held_releases(executor.holdings())
    todos = []
    for wave in waves(steps):
        todo = [s for s in wave if manifest["steps"][s.id]["status"] not in FINISHED]
        for s in [s for s in todo if s.kind == "train" and not req.needs_training(s.release, held)]:
            progress(StepResult(s.id, "cached", 0.0))
            todo.remove(s)
        todos.append(todo)
    executor.start([s.kernel for todo in todos for s in todo if not (how.remote and s.runs_on_host)])
    host_ids = {s.id for todo in todos for s in todo if s.runs_on_host}
    batched = [s for todo in todos for s in todo if not s.runs_on_host]
    if executor.follows_dependencies and not any(host_ids.intersection(s.depends_on) for s in batched):
        # one batch for the executor (a release's reload starts as soon as it can), then the summary here
        todos = [batched, [s for todo in todos for s in todo if s.runs_on_host]]
    if any(s.kind == "summary" for todo in todos for s in todo):
        summary_html.prepare_html()  # nbconvert imported and its templates compiled while the steps run
    try:
        how.live.start()
        for i, todo in enumerate(todos):
            later = [s.kernel for s in (todos[i + 1] if i + 1 < len(todos) else [])]
            on_host = [s for s in todo if s.runs_on_host]
            executor.run(
                [s for s in todo if not s.runs_on_host], progress, prestart=[s.kernel for s in on_host] + later
            )
            here.run(on_host, progress, prestart=later)
    finally:
        how.live.stop()
        if here is not executor:
            here.close()
    manifest["wall_seconds"] = round(manifest.get("wall_seconds", 0) + time.monotonic() - started, 2)
    outcome = _write_reports(run, manifest)
    manifest.update(finished_at=now(), exit_code=outcome.exit_code, counts=outcome.counts)
    run.write_manifest(manifest)
    _log_checks(req, run, how)
    return outcome


def _log_checks(req: RunRequest, run: Run, how: Execution) -> None:
    """The store's check log learns this run's verdicts (``store ls`` shows when each version was checked)."""
    from kit import store as stores

    try:
        stores.record_checks(
            stores.open_store(req.store, home=how.home), load_records(run.dir), run.id, on_event=how.on_event
        )
    except KitError as e:  # the verdicts are in the run folder; only the store's log missed them
        how.on_event(f"warning: the store's check log was not updated: {e}")


def _write_reports(run: Run, manifest: dict) -> RunOutcome:
    """The run's reports from its records, split by the request ``manifest`` holds (``req``'s)."""
    _, records, split = load_run(run.dir, manifest)
    failed_steps = [i for i in manifest["order"] if manifest["steps"][i]["status"] == "failed"]
    code = reports.exit_code(manifest, split)
    groups = reports.write_all(run.dir, records, split, manifest, code)
    return RunOutcome(
        run.id,
        run.dir,
        code,
        verdict_counts(records),
        failed_steps,
        reports.expired_lines(split["expired"]),
        manifest.get("skipped", []),
        {i: step_cause(manifest["steps"][i]) for i in failed_steps},
        groups,
    )
