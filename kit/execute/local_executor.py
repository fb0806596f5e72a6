"""The local executor: a process pool on this machine, the default."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Iterable

from kit.execute import reaper
from kit.home import KitHome
from kit.execute.steps import Step, StepResult, execute_step, shutdown_warm_kernels, warm_kernels


#: with one job, how many of the next steps' kernels start (and import MXNet) while a step runs
LOOKAHEAD = 2


class LocalExecutor:
    """Local worker processes, kept for the whole run, one per job (a lane: spawned, so no ZMQ state is
    forked; it runs its steps in order). Every step of a release goes to the same lane, whose worker keeps
    the release's kernel, MXNet imported, from its train step for its reload step: one kernel per release
    (``run(..., then=...)`` names the kernels of the steps that come after). With one job, the worker also
    starts the next steps' kernels while a step runs.

    Kernels read and write the store's working copy; an S3 store is pulled into it by
    :meth:`prepare` and what train steps saved is pushed back after them.
    """

    name = "local"
    remote = False

    def __init__(self, jobs: int = 1, *, store=None, home: KitHome | None = None, run=None, on_event=print, **_):
        from kit import store as stores

        self.jobs = max(1, int(jobs))
        self.home = home or KitHome()
        self.log_dir = str(run.dir / "logs") if run is not None else None
        self.run_id = run.id if run is not None else ""
        self.on_event = on_event
        self.store = stores.open_store(store, home=self.home)
        self.working_copy = self.store.working_copy(self.home)
        self.releases: list[str] = []
        self.models: list[str] | None = None
        self.apis: list[str] | None = None
        self._lanes: list[ProcessPoolExecutor | None] = [None] * self.jobs
        self._lane_of: dict[str, int] = {}  # a release's kernel -> the lane that runs its steps
        self._assigned = [0] * self.jobs  # steps given to each lane so far

    def start(self, first_kernels: Iterable[str] = ()) -> None:
        """Spawn the workers now (and start the first steps' kernels) while the orchestrator does its checks."""
        pool = self._lane(0)
        if self.jobs == 1 and first_kernels:
            log = f"{self.log_dir}/kernels-started-ahead.log" if self.log_dir else None
            pool.submit(warm_kernels, list(first_kernels)[:LOOKAHEAD], str(self.home.root), log)

    def close(self) -> None:
        """End the workers, and the kernels they kept or started for steps that did not come."""
        for i, pool in enumerate(self._lanes):
            if pool is None:
                continue
            self._lanes[i] = None
            try:
                pool.submit(shutdown_warm_kernels).result(timeout=30)
            except Exception:  # noqa: BLE001 - a dead worker's kernels end with it (kit.execute.reaper)
                pass
            pool.shutdown(wait=True, cancel_futures=True)

    def _lane(self, i: int) -> ProcessPoolExecutor:
        if self._lanes[i] is None:
            ctx = multiprocessing.get_context("spawn")
            self._lanes[i] = ProcessPoolExecutor(
                max_workers=1,
                mp_context=ctx,
                # a worker and its kernels end with this process, however it ends (kit.execute.reaper)
                initializer=reaper.die_with_parent,
                initargs=(os.getpid(), str(self.home.root / reaper.PIDS_DIR), self.run_id),
            )
        return self._lanes[i]

    def _assign(self, step: Step) -> int:
        """The lane of ``step``: its release's, else the lane given the fewest steps so far."""
        lane = self._lane_of.get(step.kernel)
        if lane is None:
            lane = min(range(self.jobs), key=lambda i: self._assigned[i])
            if not step.runs_on_host:
                self._lane_of[step.kernel] = lane
        self._assigned[lane] += 1
        return lane

    def holdings(self) -> set[tuple[str, str, str]]:
        """(release, model, api) of every current artifact the steps can read: in the store or its working copy."""
        refs = self.store.refs() + (self.working_copy.refs() if self.store.remote else [])
        return {(r.release, r.model, r.api) for r in refs if r.version is None}

    def prepare(self, releases: list[str], models: list[str] | None, apis: list[str] | None, versions=False) -> None:
        """Pull the artifacts of ``releases`` (of ``models`` and ``apis``; None: all; ``versions``: the replaced
        versions too) from a remote store."""
        from kit import store as stores

        self.releases, self.models, self.apis = releases, models, apis
        if self.store.remote:
            counts = stores.pull(
                self.store, self.working_copy, releases=releases, models=models, apis=apis, versions=versions
            )
            self.on_event(
                f"pulled {counts['downloaded']} artifact(s) from {self.store.url} ({counts['unchanged']} up to date)"
            )

    def run(self, steps: Iterable[Step], on_done: Callable[[StepResult], None], then: Iterable[str] = ()) -> list:
        steps = list(steps)
        if not steps:
            return []
        threads = os.environ.get("OMP_NUM_THREADS")
        if threads is None and self.jobs > 1:
            # kernels side by side share the cores: one OpenMP pool each of all cores would oversubscribe them
            os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // self.jobs))
        try:
            results = self._run(steps, on_done, list(then))
        finally:
            if threads is None:
                os.environ.pop("OMP_NUM_THREADS", None)
        if self.store.remote and any(s.kind == "train" for s in steps):
            self._push()
        return results

    def _push(self) -> None:
        """What the train steps saved, from the working copy to the remote store."""
        from kit import store as stores

        counts = stores.push(
            self.working_copy, self.store, releases=self.releases, models=self.models, apis=self.apis,
            run_id=self.run_id,
        )  # fmt: skip
        self.on_event(
            f"pushed {counts['uploaded']} artifact(s) to {self.store.url} ({counts['unchanged']} already there"
            + (f", {counts['superseded']} newer there kept" if counts["superseded"] else "")
            + ")"
        )

    def _run(self, steps: list[Step], on_done, then: list[str]) -> list[StepResult]:
        lanes = [self._assign(s) for s in steps]
        kernels = [s.kernel for s in steps] + then
        futures = {}
        for i, (step, lane) in enumerate(zip(steps, lanes)):
            later = kernels[i + 1 :]
            # a kernel an earlier step keeps needs no start; with one job, the next others start while this runs
            ahead = [k for k in later if k not in kernels[: i + 1]][:LOOKAHEAD] if self.jobs == 1 else []
            keep = not step.runs_on_host and step.kernel in later  # its later steps run in this lane
            future = self._lane(lane).submit(
                execute_step, step.to_dict(), str(self.home.root), self._log_path(step), ahead, keep
            )
            futures[future] = (step, lane)
        results = []
        for fut in as_completed(futures):
            step, lane = futures[fut]
            try:
                result = StepResult(**fut.result())
            except Exception as e:  # the worker process itself died
                result = StepResult(step.id, "failed", 0.0, 1, f"worker died: {e}", type(e).__name__)
                self._lanes[lane] = None  # a broken lane takes no more work: the next wave spawns a new one
            results.append(result)
            on_done(result)
        return results

    def _log_path(self, step: Step) -> str | None:
        return f"{self.log_dir}/{step.id.replace(':', '-')}.log" if self.log_dir else None
