"""The Dask distributed executor: the matrix's steps on a cluster, with the store as the only thing shared.

Train and reload steps run on workers through :func:`kit.execute.remote_step.run_remote`;
the summary (it reads the run folder) runs here. Each release is routed to one
worker (one that already has its environment when there is one, else the least
loaded), so a worker builds each release at most once; the routing is loose, so
when that worker is lost Dask runs the step elsewhere. A finished step's outputs
are downloaded from the store into the run folder, verified by hash, from the one
attempt that finished: a retried step never adds records twice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from functools import cached_property
from pathlib import Path
from typing import Callable, Iterable

from kit.common.errors import KitError, UsageError
from kit.execute import progress
from kit.execute.executors import Executor
from kit.execute.steps import Step, StepResult

CONNECT_TIMEOUT = "10s"


def _client(scheduler: str):
    try:
        from distributed import Client
    except ImportError:
        raise UsageError(
            "the dask executor needs the distributed package",
            hint="pip install 'mxnet-compat-kit[dask]' (or: pip install distributed)",
        ) from None
    try:
        return Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError) as e:
        raise KitError(
            f"cannot reach the Dask scheduler at {scheduler}: {e}",
            hint="start one with `dask scheduler` and workers with `dask worker ADDRESS`",
        ) from None


def route(releases: list[str], ready: dict[str, list[str]], names: dict[str, str]) -> dict[str, str]:
    """release -> worker address: a worker that has the release's environment, else the least loaded one.

    ``ready`` maps worker address to the releases ready there, ``names`` address to worker name
    (ties go by name, so the same cluster routes the same way every time).
    """
    if not ready:
        raise KitError("the Dask cluster has no workers", hint="start workers with `dask worker SCHEDULER-ADDRESS`")
    load = {addr: 0 for addr in ready}
    out = {}
    for release in releases:
        having = [a for a in ready if release in ready[a]]
        pool = having or list(ready)
        addr = min(pool, key=lambda a: (load[a], names.get(a, a)))
        out[release] = addr
        load[addr] += 1
    return out


class DaskExecutor(Executor):
    """Runs steps on a Dask cluster at ``scheduler``; ``store_location`` is the store every worker reads and
    writes."""

    name = "dask"
    remote = True

    def __init__(
        self,
        jobs: int = 1,
        *,
        scheduler: str | None = None,
        store_location: str | None = None,
        run=None,
        endpoint_url: str | None = None,
        on_event: Callable[[str], None] = print,
        on_progress: Callable[[dict], None] | None = None,
        **_,
    ):
        if not scheduler:
            raise UsageError("--executor dask needs --scheduler ADDRESS (e.g. tcp://10.0.0.5:8786)")
        if not store_location:
            raise UsageError(
                "--executor dask needs --store: s3://bucket/prefix, or a folder every worker sees",
                hint="workers share nothing but the store",
            )
        self.scheduler, self.store_location = scheduler, str(store_location)
        self.run_id, self.run_dir = run.id, Path(run.dir)
        self.endpoint_url, self.on_event, self.on_progress = endpoint_url, on_event, on_progress
        _client(scheduler).close()  # unreachable: say so now, before the run starts

    def holdings(self) -> set[tuple[str, str, str]]:
        """(release, model, api) of every current artifact in the shared store."""
        return {(r.release, r.model, r.api) for r in self.store.refs() if r.version is None}

    def prepare(
        self, releases: list[str], models: list[str] | None, apis: list[str] | None, versions: bool = False
    ) -> None:
        """Nothing to do here: workers pull and push themselves."""

    def start(self, prestart: Iterable[str] = ()) -> None:
        """Nothing to start: workers start their own kernels."""

    def close(self) -> None:
        """Nothing to end: each :meth:`run` closes its client."""

    def run(
        self, steps: Iterable[Step], on_done: Callable[[StepResult], None], prestart: Iterable[str] = ()
    ) -> list[StepResult]:
        """Each step on the worker its release is routed to, all at once: Dask keeps each worker's queue."""
        steps = list(steps)
        return self._run_remote(steps, on_done) if steps else []

    def _run_remote(self, steps: list[Step], on_done) -> list[StepResult]:
        from distributed import as_completed

        from kit.execute import remote_step

        client = _client(self.scheduler)
        if self.on_progress is not None:  # the workers' step progress (kit.execute.progress), as Dask events
            client.subscribe_topic(progress.TOPIC, lambda event: self.on_progress(event[1]))
        try:
            info = client.scheduler_info()["workers"]
            names = {addr: str(w.get("name", addr)) for addr, w in info.items()}
            ready = client.run(remote_step.ready_releases)
            routes = route(sorted({s.release for s in steps}), ready, names)
            futures = {}
            for s in steps:
                addr = routes[s.release]
                task = {
                    "step": s.to_dict(),
                    "store_location": self.store_location,
                    "run_id": self.run_id,
                    "endpoint_url": self.endpoint_url,
                    "notebook_name": Path(s.notebook).name,
                    "output_rel": Path(s.output).relative_to(self.run_dir).as_posix(),
                }
                fut = client.submit(
                    remote_step.run_remote,
                    task,
                    key=f"{self.run_id}-{s.id}-{os.urandom(4).hex()}",
                    pure=False,
                    workers=[addr],
                    allow_other_workers=True,
                )
                futures[fut] = s
                self.on_event(f"    {s.id} -> worker {names.get(addr, addr)}")
            results = []
            for fut in as_completed(list(futures), loop=client.loop):
                s = futures[fut]
                try:
                    out = fut.result()
                    self._fetch(out)
                    # its time with the environment's build and the transfers
                    result = dataclasses.replace(StepResult.from_dict(out["result"]), seconds=out["seconds"])
                    lost = self._lost_attempts(s, out["attempt"])
                    result.attempts += len(lost)
                    note = f"    {s.id} ran on worker {out['worker']}"
                    if out["built_env"]:
                        note += f" (built {s.release}'s environment there)"
                    if lost:
                        note += f"; {len(lost)} earlier attempt(s) lost with their worker ({', '.join(lost)})"
                    self.on_event(note)
                except Exception as e:  # noqa: BLE001 - a lost worker past Dask's retries, a build error, ...
                    result = StepResult(s.id, "failed", 0.0, 1, f"{type(e).__name__}: {e}", type(e).__name__)
                results.append(result)
                on_done(result)
            return results
        finally:
            client.close()

    @cached_property
    def store(self):
        """The shared store, opened when first asked for."""
        from kit import store as stores

        return stores.open_store(self.store_location, endpoint_url=self.endpoint_url)

    def _lost_attempts(self, step: Step, finished: str) -> list[str]:
        """Workers of the attempts of ``step`` that started but uploaded nothing (their worker was lost)."""
        import json

        from kit import store as stores
        from kit.execute import remote_step

        remote = self.store
        lost = []
        for key in remote.list_blobs(remote_step.started_prefix(self.run_id, step.id)):
            attempt = key.rsplit("/", 1)[-1][: -len(".json")]
            if attempt != finished and not remote.list_blobs(f"{stores.RUNS_PREFIX}/{self.run_id}/{attempt}"):
                lost.append(f"worker {json.loads(remote.read_blob(key))['worker']}")
        return lost

    def _fetch(self, out: dict) -> None:
        """The attempt's files, from the store into the run folder, each verified by its hash."""
        from kit import store as stores

        run_folder = stores.LocalStore(self.run_dir)
        for rel, digest in sorted(out["files"].items()):
            data = self.store.read_blob(f"{out['prefix']}/{rel}")
            if hashlib.sha256(data).hexdigest() != digest:
                raise KitError(f"{out['prefix']}/{rel} in {self.store_location} does not match its hash")
            run_folder.write_blob(rel, data)
