"""Executing a notebook on a release's kernel with papermill."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable

from kit.envs import kernelspecs, limits
from kit.execute import kernel_log
from kit.execute.progress import StepProgress
from kit.home import REPO_ROOT, KitHome

NOTEBOOKS = REPO_ROOT / "notebooks"


_PRESTARTED: dict = {}  # kernel name -> a KernelManager whose kernel was prestarted for its step (this process only)
#: the most kernels a process keeps between their steps (one per release: its train step's, for its reload step)
MAX_KEPT = 12
#: and the most memory they may hold together, as a share of the machine's (a kernel that trained vision models
#: keeps MXNet's memory pool: it is shut down instead)
KEPT_MEMORY_SHARE = 0.25


def prestart(kernel_name: str, home: KitHome | None = None, memory: int | None = None) -> None:
    """Start a kernel now, for the next notebook that runs on ``kernel_name`` in this process.

    A kernel takes about 1.5 s to come up and its ``import mxnet`` as long again; starting it,
    imports included, while the previous step runs takes both off the wall time of sequential runs.
    """
    if kernel_name in _PRESTARTED:
        return
    from jupyter_core.utils import run_sync

    from kit.execute import warm_kernels

    km = warm_kernels.take(home or KitHome(), kernel_name, memory)  # one `mxcompat warm` keeps started
    if km is not None:
        _PRESTARTED[kernel_name] = km
        return
    km = kernelspecs.kernel_manager(home or KitHome(), kernel_name, memory)
    try:
        run_sync(km.start_kernel)(extra_arguments=kernelspecs.prestart_arguments(kernel_name))
    except Exception:  # noqa: BLE001 - a failed prestart only means the step starts its own kernel
        return
    _PRESTARTED[kernel_name] = km


def shutdown_prestarted() -> None:
    """End every kernel prestarted for a step that did not come."""
    while _PRESTARTED:
        _shutdown(_PRESTARTED.popitem()[1])


def _take_prestarted(kernel_name: str):
    from jupyter_core.utils import run_sync

    km = _PRESTARTED.pop(kernel_name, None)
    if km is not None and not run_sync(km.is_alive)():
        return None
    return km


def run_notebook(
    notebook: str | Path,
    output: str | Path,
    kernel_name: str,
    parameters: dict,
    *,
    home: KitHome | None = None,
    cwd: str | Path | None = None,
    start_timeout: int = 180,
    execution_timeout: int | None = None,
    progress: StepProgress | None = None,
    keep_kernel: bool = False,
    memory: int | None = None,
    on_kernel: Callable[[int], None] | None = None,
    atomic: bool = False,
    log: str | Path | None = None,
):
    """Run ``notebook`` into ``output`` on ``kernel_name`` with ``parameters`` (strings stay strings).

    The executed copy records the kernel it ran on, so opening it in Jupyter picks
    that release's kernel. papermill's error (``PapermillExecutionError``) is raised
    after the executed copy, with the failing cell, is written. ``progress`` learns each cell
    started and the kernel's printed lines. ``keep_kernel``: the kernel stays up for the next notebook on
    ``kernel_name`` in this process (a release's train step keeps its kernel, MXNet imported, for its reload
    step); that notebook's copy is numbered from 1 as if its kernel were new. ``memory``: the kernel's
    address-space limit in bytes (kit.envs.limits); ``on_kernel`` is told the PID of the kernel that runs it.
    ``atomic``: the copy is written beside ``output`` and renamed over it at the end (a report, such as the
    summary: a reader never finds half of one), also when the notebook fails. ``log``: the kernel's own output
    (a kernel started here) and the Jupyter libraries' warnings and log records go to this file, not the
    terminal (:mod:`kit.execute.kernel_log`).
    """
    import papermill  # here, not at import: a run's orchestrating process plans without it

    from kit.execute.progress_engine import ENGINE  # registers the engine with papermill

    home = home or KitHome()
    final = Path(output)
    final.parent.mkdir(parents=True, exist_ok=True)
    output = final.with_name(f".{final.name}.tmp-{os.getpid()}") if atomic else final
    km = None if cwd else _take_prestarted(kernel_name)  # a prestarted kernel runs in this process's folder
    if km is None:
        km = kernelspecs.kernel_manager(home, kernel_name, memory)  # nbclient starts it (in cwd)
        km.mxcompat_on_start = on_kernel
    else:  # prestarted, maybe under another limit: this step's, and this step's watchdog
        limits.limit_memory(km.provisioner.pid, memory)
        if on_kernel is not None:
            on_kernel(km.provisioner.pid)
    reused = bool(getattr(km, "mxcompat_ran", False))
    quiet = kernel_log.to_log(log, f"{Path(notebook).name} on {kernel_name}") if log else contextlib.nullcontext()
    with quiet as log_file:
        km.mxcompat_output = log_file
        try:
            return papermill.execute_notebook(
                str(notebook),
                str(output),
                parameters=parameters,
                kernel_name=kernel_name,
                cwd=str(cwd) if cwd else None,
                engine_name=ENGINE,
                progress_bar=False,
                start_timeout=start_timeout,
                execution_timeout=execution_timeout,
                km=km,
                progress=progress,
            )
        finally:
            if not (keep_kernel and not cwd and _keep(kernel_name, km)):
                _shutdown(km)  # nbclient leaves a kernel manager it was given running
            _record_kernel(output, home, kernel_name, renumber=reused, warm=bool(getattr(km, "mxcompat_warm", None)))
            if atomic and output.exists():
                os.replace(output, final)
            km.mxcompat_output = None


def _keep(kernel_name: str, km) -> bool:
    """Keep ``km``'s kernel for the next notebook on ``kernel_name`` in this process, if it is alive and the
    process keeps fewer than :data:`MAX_KEPT`."""
    from jupyter_core.utils import run_sync

    try:
        alive = run_sync(km.is_alive)()
    except Exception:  # noqa: BLE001 - a kernel in doubt is not kept
        alive = False
    if not alive or kernel_name in _PRESTARTED or len(_PRESTARTED) >= MAX_KEPT:
        return False
    if _rss(km) + sum(_rss(k) for k in _PRESTARTED.values()) > KEPT_MEMORY_SHARE * _total_memory():
        return False
    km.mxcompat_ran = True
    _PRESTARTED[kernel_name] = km
    return True


def _shutdown(km) -> None:
    from jupyter_core.utils import run_sync

    try:
        if run_sync(km.is_alive)():
            run_sync(_kill_now)(km)
            run_sync(km.shutdown_kernel)(now=True)  # finds it dead: only cleans up
    except Exception:  # noqa: BLE001 - it may have died already
        pass


async def _kill_now(km) -> None:
    """SIGKILL the kernel and wait for it in 5 ms polls (shutdown_kernel's are 100 ms: 0.1 s a step)."""
    import asyncio

    await km.provisioner.kill()
    for _ in range(1000):
        if await km.provisioner.poll() is not None:
            return
        await asyncio.sleep(0.005)


def _rss(km) -> int:
    """The resident memory of ``km``'s kernel process (0 when it cannot be read)."""
    import psutil

    try:
        return psutil.Process(km.provisioner.pid).memory_info().rss
    except Exception:  # noqa: BLE001 - gone, or no local process
        return 0


def _total_memory() -> int:
    import psutil

    return psutil.virtual_memory().total


def _record_kernel(output: Path, home: KitHome, kernel_name: str, renumber: bool = False, warm: bool = False) -> None:
    """The executed copy names its kernel; ``renumber``: its execution counts from 1 (a kept kernel counts on
    from its previous notebook); ``warm``: it says its kernel was started ahead by ``mxcompat warm``'s keeper."""
    import nbformat

    if not output.exists():
        return
    spec = kernelspecs.read_kernelspec(home, kernel_name) or {}
    nb = nbformat.read(output, as_version=4)
    if warm:
        nb.metadata["mxcompat"] = {"kernel": "started ahead by `mxcompat warm`, its imports done, and taken"}
    if renumber:
        nb.metadata["mxcompat"] = {"kernel": "kept from the previous step on it in this worker"}
        count = 0
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.get("execution_count") is not None:
                count += 1
                cell.execution_count = count
                for out in cell.get("outputs", []):
                    if "execution_count" in out:
                        out["execution_count"] = count
    nb.metadata["kernelspec"] = {
        "name": kernel_name,
        "display_name": spec.get("display_name", kernel_name),
        "language": "python",
    }
    nbformat.write(nb, output)
