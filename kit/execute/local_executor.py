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
    """A local process pool, kept for the whole run: each step runs in a worker process (spawned, so no
    ZMQ state is forked). With one job, the worker starts the next steps' kernels while a step runs,
    across waves too (``run(..., then=...)`` names the kernels of the steps that come after).

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
        self._pool: ProcessPoolExecutor | None = None

    def start(self, first_kernels: Iterable[str] = ()) -> None:
        """Spawn the workers now (and start the first steps' kernels) while the orchestrator does its checks."""
        pool = self._workers()
        if self.jobs == 1 and first_kernels:
            log = f"{self.log_dir}/kernels-started-ahead.log" if self.log_dir else None
            pool.submit(warm_kernels, list(first_kernels)[:LOOKAHEAD], str(self.home.root), log)

    def close(self) -> None:
        """End the workers, and the kernels they started for steps that did not come."""
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        try:
            pool.submit(shutdown_warm_kernels).result(timeout=30)
        except Exception:  # noqa: BLE001 - a dead worker's kernels end with it (kit.execute.reaper)
            pass
        pool.shutdown(wait=True, cancel_futures=True)

    def _workers(self) -> ProcessPoolExecutor:
        if self._pool is None:
            ctx = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(
                max_workers=self.jobs,
                mp_context=ctx,
                # a worker and its kernels end with this process, however it ends (kit.execute.reaper)
                initializer=reaper.die_with_parent,
                initargs=(os.getpid(), str(self.home.root / reaper.PIDS_DIR), self.run_id),
            )
        return self._pool

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
        # one worker runs the steps in order: it can start the next steps' kernels ahead of time
        kernels = [s.kernel for s in steps] + then
        ahead = [kernels[i + 1 : i + 1 + LOOKAHEAD] if self.jobs == 1 else [] for i in range(len(steps))]
        results = []
        pool = self._workers()
        futures = {
            pool.submit(execute_step, s.to_dict(), str(self.home.root), self._log_path(s), nxt): s
            for s, nxt in zip(steps, ahead)
        }
        for fut in as_completed(futures):
            try:
                result = StepResult(**fut.result())
            except Exception as e:  # the worker process itself died
                result = StepResult(futures[fut].id, "failed", 0.0, 1, f"worker died: {e}", type(e).__name__)
                self._pool = None  # a broken pool takes no more work: the next wave spawns a new one
            results.append(result)
            on_done(result)
        return results

    def _log_path(self, step: Step) -> str | None:
        return f"{self.log_dir}/{step.id.replace(':', '-')}.log" if self.log_dir else None
