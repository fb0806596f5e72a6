"""A step: one notebook run on one kernel with its parameters, the unit every executor runs.

A step's inputs and outputs live in the store and the run folder, so the same
step can run in a local process or on another machine.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from dataclasses import MISSING, asdict, dataclass, field, fields

from kit.common.errors import KitError
from kit.envs import child_env

RETRYABLE = (
    "Kernel died before replying",
    "Kernel didn't respond",
    "Address already in use",
    "Timeout waiting for kernel",
    "Kernel not responding",
    "Kernel died",
)
ATTEMPTS = 3


def _from_dict(cls, data: dict, *, beside: bool = False):
    """``cls`` from the dict its ``to_dict`` made: the one schema on both sides of the worker border. A field
    ``cls`` lacks is refused (a client and workers of different kits), unless the dict holds other things
    ``beside`` it (a run.json entry: the step and its outcome)."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown and not beside:
        raise KitError(
            f"a {cls.__name__} with field(s) this kit does not know: {', '.join(map(str, unknown))}",
            hint="the client and its workers must run the same mxnet-compat-kit",
        )
    required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
    missing = [name for name in required if name not in data]
    if missing:
        raise KitError(f"a {cls.__name__} without its field(s) {', '.join(missing)}")
    return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class Step:
    id: str  # train:1.4.1, reload:1.9.1, summary
    kind: str
    release: str | None
    notebook: str
    output: str
    kernel: str
    parameters: dict
    depends_on: list[str] = field(default_factory=list)
    progress: str | None = None  # the file its live progress goes to (kit.execute.progress)
    limits: dict = field(default_factory=dict)  # its time, its cells' time, its kernel's memory (kit.envs.limits)

    @property
    def runs_on_host(self) -> bool:
        """A step of no release (the summary) reads the run folder: it runs on this machine, whatever the executor."""
        return self.release is None

    def to_dict(self) -> dict:
        """What crosses the worker border (and is written in run.json): :meth:`from_dict` makes it a step again."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Step:
        """The step :meth:`to_dict` made; KitError for a field it does not have, or one missing."""
        return _from_dict(cls, data)

    @classmethod
    def from_manifest_entry(cls, entry: dict) -> Step:
        """The step of a run.json entry, which holds its outcome (status, seconds, ...) beside its fields."""
        return _from_dict(cls, entry, beside=True)


@dataclass
class StepResult:
    id: str
    status: str  # ok, failed, cached
    seconds: float
    attempts: int = 1
    error: str | None = None
    error_type: str | None = None
    deaths: int = 0  # kernels that died and were restarted after the artifact that killed them
    started_at: str | None = None  # UTC, to the millisecond
    cause: str | None = None  # a failure's root cause in one line (see root_cause)

    def to_dict(self) -> dict:
        """What crosses the worker border back: :meth:`from_dict` makes it a result again."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> StepResult:
        """The result :meth:`to_dict` made; KitError for a field it does not have, or one missing."""
        return _from_dict(cls, data)


def root_cause(exc: BaseException) -> str:
    """A step's failure in one line: the failing cell's exception type and message (errno named, e.g.
    ``OSError: [Errno 28 ENOSPC] No space left on device: '/store/x' (cell 5)``), or the kernel's death."""
    import errno
    import re

    from papermill.exceptions import PapermillExecutionError

    if isinstance(exc, PapermillExecutionError):
        text = f"{exc.ename}: {exc.evalue} (cell {exc.exec_count})"
    elif is_dead_kernel(exc):
        text = f"the kernel died ({type(exc).__name__}: {str(exc).strip() or 'no message'})"
    else:
        text = traceback.format_exception_only(type(exc), exc)[-1]
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # IPython's colours
    text = re.sub(
        r"\[Errno (\d+)\]", lambda m: f"[Errno {m.group(1)} {errno.errorcode.get(int(m.group(1)), '?')}]", text
    )
    return " ".join(text.split())[:500]


def is_retryable(exc: BaseException) -> bool:
    """Kernel start failures of parallel runs (port races, slow starts) are retried; cell errors are not."""
    from papermill.exceptions import PapermillExecutionError

    if isinstance(exc, PapermillExecutionError):
        return False
    text = f"{type(exc).__name__}: {exc}"
    return any(marker in text for marker in RETRYABLE) or type(exc).__name__ in ("ZMQError", "TimeoutError")


@contextlib.contextmanager
def _output_to(log_path: str):
    """Send this process's stdout and stderr, and so its kernels' (MXNet's native logs), to ``log_path``."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def execute_step(
    step: dict,
    home_root: str,
    log_path: str | None = None,
    kernels_to_prestart: list[str] = (),
    keep_kernel: bool = False,
) -> dict:
    """Run one step (in a worker process) from :meth:`Step.to_dict`'s dict; never raises, returns
    :meth:`StepResult.to_dict`'s.

    ``kernels_to_prestart``: the kernels the next steps in this process will need, started now so they
    are up when those steps begin. ``keep_kernel``: a later step in this process runs on the same kernel
    (the release's reload after its train): the kernel stays up, MXNet imported, for it.
    """
    try:
        Step.from_dict(step)  # the one schema, checked where the step arrives
    except KitError as e:
        return StepResult(
            str(step.get("id")), "failed", 0.0, error=str(e), error_type="KitError", cause=e.message
        ).to_dict()
    if log_path:
        with _output_to(log_path):
            return _execute(step, home_root, kernels_to_prestart, keep_kernel)
    return _execute(step, home_root, kernels_to_prestart, keep_kernel)


def prestart_kernels(kernels: list[str], home_root: str, log_path: str | None = None) -> None:
    """Start ``kernels`` in this worker for the steps it will run (see :func:`kit.execute.notebooks.prestart`);
    what they print natively goes to ``log_path``."""
    from kit.execute.notebooks import prestart
    from kit.home import KitHome

    child_env.scrub_for_kernels()
    with _output_to(log_path) if log_path else contextlib.nullcontext():
        for name in kernels:
            prestart(name, KitHome(home_root))


def shutdown_prestarted_kernels() -> None:
    """End the kernels this worker started for steps that did not come."""
    from kit.execute.notebooks import shutdown_prestarted

    shutdown_prestarted()


MAX_KERNEL_DEATHS = 50


def _execute(step: dict, home_root: str, kernels_to_prestart: list[str] = (), keep_kernel: bool = False) -> dict:
    result = _execute_notebook(step, home_root, kernels_to_prestart, keep_kernel)
    if step["kind"] == "train" and step["parameters"].get("saved_by") and os.path.isfile(step["output"]):
        try:
            keep_train_notebook(step)
        except (OSError, ValueError) as e:  # the artifacts are saved; the evidence of how must not vanish unsaid
            result.update(status="failed", error=f"could not keep {step['output']} with its artifacts: {e}")
            result.update(error_type=type(e).__name__, cause=root_cause(e))
    return result


def keep_train_notebook(step: dict) -> int:
    """Copy a train step's executed notebook into each artifact it saved (see LocalStore.keep_train_notebook)."""
    from kit.store import LocalStore

    params = step["parameters"]
    return LocalStore(params["store"]).keep_train_notebook(step["output"], params["saved_by"], step["release"])


def _execute_notebook(
    step: dict, home_root: str, kernels_to_prestart: list[str] = (), keep_kernel: bool = False
) -> dict:
    from kit.envs.limits import Limits
    from kit.execute.notebooks import prestart, run_notebook
    from kit.execute.progress import StepProgress
    from kit.execute.watchdog import Watchdog
    from kit.home import KitHome

    child_env.scrub_for_kernels()
    started, started_at = time.monotonic(), precise_now()
    limits = Limits.from_dict(step.get("limits"))
    prestart(step["kernel"], KitHome(home_root), limits.kernel_memory)  # no-op when the previous step started it
    for name in kernels_to_prestart:
        prestart(name, KitHome(home_root), limits.kernel_memory)
    step = dict(step, parameters=dict(step["parameters"]))
    attempt = deaths = 0
    last = None
    with Watchdog(limits.step_timeout, limits.cell_timeout, inflight_marker(step)) as watchdog:
        while True:
            attempt += 1
            progress = StepProgress(step["progress"], step["id"]) if step.get("progress") else None
            try:
                run_notebook(
                    step["notebook"],
                    step["output"],
                    step["kernel"],
                    step["parameters"],
                    home=KitHome(home_root),
                    progress=progress,
                    keep_kernel=keep_kernel,
                    memory=limits.kernel_memory,
                    on_kernel=watchdog.attach,
                    atomic=step["kind"] == "summary",  # a report: whole or the previous one
                )
                return StepResult(
                    step["id"],
                    "ok",
                    round(time.monotonic() - started, 2),
                    attempt,
                    deaths=deaths,
                    started_at=started_at,
                ).to_dict()
            except Exception as e:  # every failure is reported; kernel start races are retried
                last = e
                if watchdog.step_expired:
                    break
                timed_out = watchdog.cell_expired
                watchdog.handled()
                if (
                    step["kind"] == "reload"
                    and is_dead_kernel(e)
                    and deaths < MAX_KERNEL_DEATHS
                    and record_dead_kernel(step, e, deaths + 1, timed_out=timed_out)
                ):
                    deaths += 1
                    attempt -= 1
                    step["parameters"]["skip_recorded"] = True  # go on after the artifact that killed it
                    continue
                if not is_retryable(e) or attempt >= ATTEMPTS:
                    break
                time.sleep(1.0 * attempt)
            finally:
                if progress is not None:
                    progress.close()
    seconds = round(time.monotonic() - started, 2)
    if watchdog.step_expired:
        limit = watchdog.expired[1]
        message = f"the step ran past its time limit of {limit:.0f}s and its kernel was stopped (--step-timeout)"
        return StepResult(
            step["id"],
            "failed",
            seconds,
            attempt,
            error=message,
            error_type="StepTimeout",
            cause=message,
            deaths=deaths,
            started_at=started_at,
        ).to_dict()
    message = str(last).strip()
    if not message:
        message = traceback.format_exception_only(type(last), last)[-1].strip()
    return StepResult(
        step["id"],
        "failed",
        seconds,
        attempt,
        error=message[-4000:],
        error_type=type(last).__name__,
        cause=root_cause(last),
        deaths=deaths,
        started_at=started_at,
    ).to_dict()


def precise_now() -> str:
    """UTC now, to the millisecond: when a step started."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


def is_dead_kernel(exc: BaseException) -> bool:
    """nbclient's own word that the kernel died while a cell ran."""
    from nbclient.exceptions import DeadKernelError

    return isinstance(exc, DeadKernelError)


def inflight_marker(step: dict) -> str | None:
    """The file a reload step's kernel names its artifact in flight in (kit.kernel.entry.reload_run.InFlight)."""
    from kit.common import run_layout

    params = step["parameters"]
    if step["kind"] != "reload" or not params.get("run_dir"):
        return None
    return run_layout.inflight_path(params["run_dir"], params.get("release", step["release"]), params.get("apis"))


def record_dead_kernel(step: dict, exc: BaseException, death: int, timed_out: float | None = None) -> bool:
    """Record the artifact a dead kernel was working on; False when no artifact was in flight. ``timed_out``:
    the kernel was stopped because the cell ran past that many seconds (kit.execute.watchdog)."""
    import json
    from pathlib import Path

    from kit.common import artifacts, record_schema
    from kit.common.names import is_safe_name

    marker = Path(inflight_marker(step))
    if not marker.exists():
        return False
    info = json.loads(marker.read_text())
    cell = info["saved_with"], info["model"], info["api"], info["loaded_with"]
    if not all(is_safe_name(n) for n in cell + ((info["archived"],) if info.get("archived") else ())):
        return False  # not a marker this kit's kernel wrote: the step fails with the kernel's death as its cause
    inferring = info["phase"] in ("infer", "network_only")
    verdict = "infer-error" if inferring else "load-error"
    doing = "inferring" if inferring else "loading"
    cause = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
    if timed_out:
        message = f"timed out: no result within {timed_out:.0f}s while {doing} this artifact; its kernel was stopped"
        message += " (--cell-timeout)"
    else:
        message = f"kernel died while {doing} this artifact ({cause})"
    if info.get("record"):  # it died trying remedies: the cell's own verdict was known and stands
        rec = info["record"]
        if timed_out:
            died = f"trying remedies ran past the cell's time limit of {timed_out:.0f}s; its kernel was stopped"
        else:
            died = f"the kernel died while trying remedies ({cause})"
        rec["remedy"] = {"fixed": False, "name": None, "tried": [], "why_none": died, "kernel_died": True}
        rec.update(loaded_fingerprint=None, checked_at=record_schema.now())
    else:
        rec = record_schema.new_record(*cell, info["artifact"], info.get("archived"))
        rec.update(
            verdict=verdict,
            reason=message,
            error_type="CellTimeout" if timed_out else "KernelDied",
            error=message,
            kernel_died=True,
            loaded_fingerprint=None,
            checked_at=record_schema.now(),
        )
    if timed_out:
        rec["timed_out"] = timed_out
    artifacts.write_json_atomic(str(marker.parent / artifacts.record_name(*cell, info.get("archived"))), rec)
    marker.unlink()
    output = Path(step["output"])
    if output.exists():  # keep the executed notebook of the attempt the kernel died in
        output.replace(output.with_name(f"{output.stem}.died-{death}{output.suffix}"))
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m kit.execute.steps STEP.json HOME [LOG]``: run one step in this process, print its result as JSON.

    A Dask worker runs steps this way, in a child process: the step's environment
    (no AWS credentials, its own stdout) never touches the worker's.
    """
    import json

    args = sys.argv[1:] if argv is None else argv
    with open(args[0]) as f:
        step = json.load(f)
    result = execute_step(step, args[1], args[2] if len(args) > 2 else None)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    raise SystemExit(main())
