"""The one door to kernel-side programs: ``python -m kit.kernel.X REQUEST.json`` in an environment.

Every host command that starts one (``investigate --recompute``, ``check-model``, ``convert``,
``store import-mbcc``, the ``env create``/``doctor`` probes) goes through :func:`run_kernel_main`: the child
gets the kernels' environment (no AWS credentials, no other interpreter's settings), its own session (a
timeout ends it and everything it started), an address-space limit, and answers by
:mod:`kit.common.main_protocol`'s convention, which this turns into a value or the kit's errors.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from kit.common.errors import EXIT_BROKEN, EXIT_USAGE, EnvBuildError, KitError, UsageError
from kit.common.main_protocol import ANSWER
from kit.envs import child_env, limits


class KernelProgramError(EnvBuildError):
    """A kernel-side program crashed, did not answer, or ran past its time."""


def kernel_env() -> dict:
    """The process environment of every kernel-side program: the kernels' rule, applied to a foreign Python."""
    return child_env.for_kernels(child_env.for_interpreter())


def run_kernel_main(
    python: str | os.PathLike,
    module: str,
    request: dict,
    *,
    what: str,
    cwd: str | os.PathLike | None = None,
    timeout: float = 900,
    memory: int | None = None,
    log: Path | None = None,
    extra_env: dict | None = None,
) -> dict:
    """Run ``python -m module REQUEST.json`` on ``request``; its answer.

    Raises :class:`~kit.common.errors.UsageError` (exit 2) or :class:`~kit.common.errors.KitError` (exit 3)
    with the program's own ``error`` and ``hint``, and :class:`KernelProgramError` when it crashed, gave no
    answer or ran past ``timeout`` seconds (then it and its children are killed). ``memory``: the
    address-space limit in bytes (default :func:`kit.envs.limits.kernel_memory`). ``log``: the command and
    everything it printed are appended there; what it prints never reaches the terminal, and a failure's error
    names the log and shows the last lines printed. ``extra_env``: variables set for it on top of the kernels'
    rule.
    """
    with tempfile.TemporaryDirectory(prefix="mxcompat-request-") as tmp:
        request_file = Path(tmp) / "request.json"
        request_file.write_text(json.dumps(request))
        argv = [str(python), "-m", module, str(request_file)]
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**kernel_env(), **(extra_env or {})},
            cwd=str(cwd) if cwd else None,
            start_new_session=True,  # a timeout ends the whole group: MXNet's and ONNX Runtime's children too
        )
        limits.limit_memory(proc.pid, memory)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            _log(log, argv, out, err, f"killed: no answer within {timeout:.0f}s")
            raise KernelProgramError(
                f"{what}: no answer within {timeout:.0f}s; it was stopped" + _indented(_tail(out, err)),
                hint=f"full log: {log}" if log else None,
            ) from None
    _log(log, argv, out, err, f"exit {proc.returncode} after {time.monotonic() - started:.1f}s")
    answers = [line[len(ANSWER) :] for line in out.splitlines() if line.startswith(ANSWER)]
    try:
        answer = json.loads(answers[-1]) if answers else None
    except ValueError:
        answer = None
    if proc.returncode == 0 and isinstance(answer, dict):
        return answer
    if proc.returncode in (EXIT_USAGE, EXIT_BROKEN) and isinstance(answer, dict) and "error" in answer:
        if proc.returncode == EXIT_USAGE:  # the request was wrong: the program said why
            raise UsageError(answer["error"], hint=answer.get("hint"))
        hint = "\n".join(h for h in (answer.get("hint"), f"full log: {log}" if log else None) if h)
        raise KitError(answer["error"], hint=hint or None)
    raise KernelProgramError(
        f"{what} failed (exit {_exit_text(proc.returncode)}):\n{_tail(out, err) or 'no output'}",
        hint=f"full log: {log}" if log else None,
    )


def _tail(out: str | None, err: str | None, lines: int = 8) -> str:
    """The last ``lines`` lines a program printed: its stderr's, else its stdout's."""
    return "\n".join((err or out or "").strip().splitlines()[-lines:])


def _indented(text: str) -> str:
    return "".join(f"\n  {line}" for line in text.splitlines())


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"{code}, {signal.Signals(-code).name}"
        except ValueError:
            pass
    return str(code)


def _log(log: Path | None, argv: list[str], out: str, err: str, outcome: str) -> None:
    if log is None:
        return
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(argv)}\n{out}{err}[{outcome}]\n")
