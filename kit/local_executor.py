"""The local executor: a process pool on this machine, the default."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Iterable

from kit.home import KitHome
from kit.steps import Step, StepResult, execute_step


class LocalExecutor:
    """A local process pool: each step runs in its own process (spawned, so no ZMQ state is forked).

    Kernels read and write the store's working copy; an S3 store is pulled into it by
    :meth:`prepare` and what train steps saved is pushed back after them.
    """

    name = "local"
    remote = False

    def __init__(self, jobs: int = 1, *, store=None, home: KitHome | None = None, run=None, on_event=print, **_):
        from kit import store as store_mod

        self.jobs = max(1, int(jobs))
        self.home = home or KitHome()
        self.log_dir = str(run.dir / "logs") if run is not None else None
        self.on_event = on_event
        self.store = store_mod.open_store(store, home=self.home)
        self.working_copy = self.store.working_copy(self.home)
        self.releases: list[str] = []
        self.models: list[str] | None = None
        self.apis: list[str] | None = None

    def holdings(self) -> set[tuple[str, str, str]]:
        """(release, model, api) of every current artifact the steps can read: in the store or its working copy."""
        refs = self.store.refs() + (self.working_copy.refs() if self.store.remote else [])
        return {(r.release, r.model, r.api) for r in refs if r.version is None}

    def prepare(self, releases: list[str], models: list[str] | None, apis: list[str] | None, versions=False) -> None:
        """Pull the artifacts of ``releases`` (of ``models`` and ``apis``; None: all; ``versions``: the replaced
        versions too) from a remote store."""
        from kit import store as store_mod

        self.releases, self.models, self.apis = releases, models, apis
        if self.store.remote:
            counts = store_mod.pull(
                self.store, self.working_copy, releases=releases, models=models, apis=apis, versions=versions
            )
            self.on_event(
                f"pulled {counts['downloaded']} artifact(s) from {self.store.url} ({counts['unchanged']} up to date)"
            )

    def run(self, steps: Iterable[Step], on_done: Callable[[StepResult], None]) -> list[StepResult]:
        steps = list(steps)
        if not steps:
            return []
        threads = os.environ.get("OMP_NUM_THREADS")
        if threads is None and self.jobs > 1:
            # kernels side by side share the cores: one OpenMP pool each of all cores would oversubscribe them
            os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // self.jobs))
        try:
            results = self._run(steps, on_done)
        finally:
            if threads is None:
                os.environ.pop("OMP_NUM_THREADS", None)
        if self.store.remote and any(s.kind == "train" for s in steps):
            self._push()
        return results

    def _push(self) -> None:
        """What the train steps saved, from the working copy to the remote store."""
        from kit import store as store_mod

        counts = store_mod.push(
            self.working_copy, self.store, releases=self.releases, models=self.models, apis=self.apis
        )
        self.on_event(
            f"pushed {counts['uploaded']} artifact(s) to {self.store.url} ({counts['unchanged']} already there)"
        )

    def _run(self, steps: list[Step], on_done) -> list[StepResult]:
        ctx = multiprocessing.get_context("spawn")
        # one worker runs the steps in order: it can start each next step's kernel ahead of time
        nexts = [s.kernel for s in steps[1:]] + [None] if self.jobs == 1 else [None] * len(steps)
        results = []
        with ProcessPoolExecutor(max_workers=min(self.jobs, len(steps)), mp_context=ctx) as pool:
            futures = {
                pool.submit(execute_step, s.to_dict(), str(self.home.root), self._log_path(s), nxt): s
                for s, nxt in zip(steps, nexts)
            }
            for fut in as_completed(futures):
                try:
                    result = StepResult(**fut.result())
                except Exception as e:  # the worker process itself died
                    result = StepResult(futures[fut].id, "failed", 0.0, 1, f"worker died: {e}", type(e).__name__)
                results.append(result)
                on_done(result)
        return results

    def _log_path(self, step: Step) -> str | None:
        return f"{self.log_dir}/{step.id.replace(':', '-')}.log" if self.log_dir else None
