"""The local executor: a process pool on this machine, the default."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Iterable

from kit.steps import Step, StepResult, execute_step


class LocalExecutor:
    """A local process pool: each step runs in its own process (spawned, so no ZMQ state is forked)."""

    name = "local"

    def __init__(self, jobs: int = 1):
        self.jobs = max(1, int(jobs))

    def run(
        self, steps: Iterable[Step], home_root: str, on_done: Callable[[StepResult], None], log_dir: str | None = None
    ) -> list[StepResult]:
        steps = list(steps)
        results = []
        if not steps:
            return results
        ctx = multiprocessing.get_context("spawn")
        threads = os.environ.get("OMP_NUM_THREADS")
        if threads is None and self.jobs > 1:
            # kernels side by side share the cores: one OpenMP pool each of all cores would oversubscribe them
            os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // self.jobs))
        try:
            return self._run(steps, home_root, on_done, log_dir, ctx, results)
        finally:
            if threads is None:
                os.environ.pop("OMP_NUM_THREADS", None)

    def _run(self, steps, home_root, on_done, log_dir, ctx, results):
        # one worker runs the steps in order: it can start each next step's kernel ahead of time
        nexts = [s.kernel for s in steps[1:]] + [None] if self.jobs == 1 else [None] * len(steps)
        with ProcessPoolExecutor(max_workers=min(self.jobs, len(steps)), mp_context=ctx) as pool:
            futures = {
                pool.submit(execute_step, s.to_dict(), home_root, _log_path(log_dir, s), nxt): s
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


def _log_path(log_dir: str | None, step: Step) -> str | None:
    return f"{log_dir}/{step.id.replace(':', '-')}.log" if log_dir else None
