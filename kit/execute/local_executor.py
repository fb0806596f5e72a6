"""The local executor: a process pool on this machine, the default."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Callable, Iterable

from kit.execute import reaper
from kit.execute.executors import Executor
from kit.execute.quick_exit import freeze_heap_at_exit
from kit.execute.steps import Step, StepResult, execute_step, prestart_kernels, shutdown_prestarted_kernels
from kit.home import KitHome

#: with one job, how many of the next steps' kernels start (and import MXNet) while a step runs; with more,
#: each lane starts one: the kernel of a step no other lane holds, which it then takes when it is free
PRESTART_COUNT = 2


def _start_worker(parent_pid: int, record_dir: str, run_id: str) -> None:
    """A lane's worker dies with the run (kit.execute.reaper) and, done, exits without a last collection."""
    reaper.die_with_parent(parent_pid, record_dir, run_id)
    freeze_heap_at_exit()


class LocalExecutor(Executor):
    """Local worker processes, kept for the whole run, one per job (a lane: spawned, so no ZMQ state is
    forked; it runs one step at a time). A worker keeps a release's kernel, MXNet imported, from its train
    step for its reload step, and a free lane takes a step whose kernel it kept before any other: one kernel
    per release (``run(..., prestart=...)`` names the kernels of the steps that come after). With one job, the
    worker also starts the next steps' kernels while a step runs.

    Kernels read and write the store's working copy; an S3 store is pulled into it by
    :meth:`prepare` and what train steps saved is pushed back after them.
    """

    name = "local"
    remote = False
    follows_dependencies = True

    def __init__(
        self,
        jobs: int = 1,
        *,
        store_location: str | None = None,
        home: KitHome | None = None,
        run=None,
        on_event: Callable[[str], None] = print,
        **_,
    ):
        from kit import store as stores

        self.jobs = max(1, int(jobs))
        self.home = home or KitHome()
        self.log_dir = str(run.dir / "logs") if run is not None else None
        self.run_id = run.id if run is not None else ""
        self.on_event = on_event
        self.store = stores.open_store(store_location, home=self.home)
        self.working_copy = self.store.working_copy(self.home)
        self.releases: list[str] = []
        self.models: list[str] | None = None
        self.apis: list[str] | None = None
        self._lanes: list[ProcessPoolExecutor | None] = [None] * self.jobs
        self._kept: list[set[str]] = [set() for _ in range(self.jobs)]  # kernels each lane's worker keeps
        self._prestarted: list[set[str]] = [set() for _ in range(self.jobs)]  # of those, started for a step not yet run
        self._submitted: dict = {}  # future -> its step
        self._set_threads = False  # this executor set OMP_NUM_THREADS (and unsets it when it closes)

    def start(self, prestart: Iterable[str] = ()) -> None:
        """Spawn the workers now (and start the first steps' kernels) while the orchestrator does its checks."""
        self._share_cores()
        log = f"{self.log_dir}/kernels-prestarted.log" if self.log_dir else None
        first = list(dict.fromkeys(prestart))
        if self.jobs == 1:
            pool = self._lane(0)
            if first:
                pool.submit(prestart_kernels, first[:PRESTART_COUNT], str(self.home.root), log)
            return
        for lane, kernel in enumerate(first[: self.jobs]):
            self._lane(lane).submit(prestart_kernels, [kernel], str(self.home.root), log)
            self._kept[lane].add(kernel)
            self._prestarted[lane].add(kernel)

    def _share_cores(self) -> bool:
        """With more than one job, each kernel's OpenMP pool gets its share of the cores (unless the user set
        ``OMP_NUM_THREADS``): pools of all cores side by side would oversubscribe them. Kernels inherit it from
        the workers, so it is set before they spawn. True when this call set it."""
        if self.jobs > 1 and os.environ.get("OMP_NUM_THREADS") is None:
            os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // self.jobs))
            self._set_threads = True
            return True
        return False

    def _unshare_cores(self) -> None:
        if self._set_threads:
            os.environ.pop("OMP_NUM_THREADS", None)
            self._set_threads = False

    def close(self) -> None:
        """End the workers, and the kernels they kept or started for steps that did not come."""
        self._unshare_cores()
        for i, pool in enumerate(self._lanes):
            if pool is None:
                continue
            self._lanes[i] = None
            try:
                pool.submit(shutdown_prestarted_kernels).result(timeout=30)
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
                initializer=_start_worker,
                initargs=(os.getpid(), str(self.home.root / reaper.PIDS_DIR), self.run_id),
            )
        return self._lanes[i]

    def holdings(self) -> set[tuple[str, str, str]]:
        """(release, model, api) of every current artifact the steps can read: in the store or its working copy."""
        refs = self.store.refs() + (self.working_copy.refs() if self.store.remote else [])
        return {(r.release, r.model, r.api) for r in refs if r.version is None}

    def prepare(
        self, releases: list[str], models: list[str] | None, apis: list[str] | None, versions: bool = False
    ) -> None:
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

    def run(
        self, steps: Iterable[Step], on_done: Callable[[StepResult], None], prestart: Iterable[str] = ()
    ) -> list[StepResult]:
        """Each step on a lane once those it depends on have finished (see :meth:`_run`), then what train
        steps saved pushed to a remote store."""
        steps = list(steps)
        if not steps:
            return []
        set_here = self._share_cores()  # when start() did not
        try:
            results = self._run(steps, on_done, list(prestart))
        finally:
            if set_here:
                self._unshare_cores()
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

    def _run(self, steps: list[Step], on_done, prestart: list[str]) -> list[StepResult]:
        """Each lane takes a next step when it is free, of those whose dependencies have finished (ok or not):
        one whose kernel it kept if there is one (one kernel per release: a release's reload follows its train
        on the same kernel as soon as the older releases' trains are done), else the first waiting; with one
        job, in order, prestarting the next steps' kernels."""
        pending = list(steps)
        waiting_for = {s.id for s in steps}  # steps not finished: a dependency outside the run waits for nothing
        running: dict = {}
        results = []
        while pending or running:
            free = [lane for lane in range(self.jobs) if lane not in running.values()]
            ready = [s for s in pending if not waiting_for.intersection(s.depends_on)]
            # a lane that holds a ready step's kernel chooses first: no other lane takes that step from it
            free.sort(key=lambda lane: not any(s.kernel in self._kept[lane] for s in ready))
            for lane in free:
                ready = [s for s in pending if not waiting_for.intersection(s.depends_on)]
                if not ready and not running and pending:
                    ready = pending[:1]  # cannot happen with steps planned in order; never wait forever
                if ready:
                    step = self._next_for(lane, ready)
                    pending.remove(step)
                    running[self._submit(lane, step, pending, prestart)] = lane
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in done:
                lane = running.pop(fut)
                step = self._submitted.pop(fut)
                waiting_for.discard(step.id)
                try:
                    result = StepResult.from_dict(fut.result())
                except Exception as e:  # the worker process itself died
                    result = StepResult(step.id, "failed", 0.0, 1, f"worker died: {e}", type(e).__name__)
                    self._lanes[lane] = None  # a broken lane takes no more work: a new worker replaces it
                    self._kept[lane], self._prestarted[lane] = set(), set()
                results.append(result)
                on_done(result)
        return results

    def _next_for(self, lane: int, ready: list[Step]) -> Step:
        """Of the steps ready to run, the first on a kernel this lane kept from a step it ran (the release's
        reload after its train: the kernel then goes), else on one it prestarted, else on one no other lane
        holds, else the first."""
        mine, prestarted = self._kept[lane], self._prestarted[lane]
        others = set().union(*(k for i, k in enumerate(self._kept) if i != lane))
        for wanted in (
            lambda s: s.kernel in mine and s.kernel not in prestarted,
            lambda s: s.kernel in mine,
            lambda s: s.kernel not in others,
        ):
            found = next((s for s in ready if wanted(s)), None)
            if found is not None:
                return found
        return ready[0]

    def _submit(self, lane: int, step: Step, pending: list[Step], prestart: list[str]):
        later = [s.kernel for s in pending] + prestart
        done_before = self._kept[lane]
        # a kernel this lane keeps needs no start; the next others start while this runs (with more than one
        # job, one a lane: that of the first step no lane holds a kernel for, which this lane then takes)
        if self.jobs == 1:
            starting = [k for k in later if k not in done_before and k != step.kernel][:PRESTART_COUNT]
        else:
            held = set().union(*self._kept)
            starting = [k for k in [s.kernel for s in pending] if k not in held and k != step.kernel][:1]
        keep = not step.runs_on_host and step.kernel in later
        self._kept[lane].discard(step.kernel)
        self._prestarted[lane].discard(step.kernel)
        if keep:
            self._kept[lane].add(step.kernel)
        if self.jobs > 1:
            self._kept[lane].update(starting)
            self._prestarted[lane].update(starting)
        future = self._lane(lane).submit(
            execute_step, step.to_dict(), str(self.home.root), self._log_path(step), starting, keep
        )
        self._submitted[future] = step
        return future

    def _log_path(self, step: Step) -> str | None:
        return f"{self.log_dir}/{step.id.replace(':', '-')}.log" if self.log_dir else None
