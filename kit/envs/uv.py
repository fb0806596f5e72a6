"""Running uv, the installer every environment is built with."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from kit.common.errors import EnvBuildError, UsageError
from kit.envs import child_env
from kit.home import uv_cache_dir


def uv_binary() -> str:
    """The uv that ships with the host environment (a PyPI dependency), else one on PATH."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise UsageError(
        "uv is not installed in the kit's host environment",
        hint="run `make setup` (or `pip install uv`) in the host environment",
    )


def uv_env() -> dict:
    env = child_env.for_interpreter()
    env["UV_PYTHON_DOWNLOADS"] = "never"  # interpreters come from discovery, never from the network
    env["UV_NO_PROGRESS"] = "1"
    cache = uv_cache_dir()
    if cache:
        env["UV_CACHE_DIR"] = cache
    return env


def run_logged(
    argv: list[str], log: Path, *, what: str, timeout: float = 1800, env: dict | None = None, cwd: str | None = None
) -> str:
    """Run ``argv``, appending the command and its output to ``log``; its stdout, or an error with the tail."""
    started = time.monotonic()
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(argv)}\n")
        f.flush()
        try:
            proc = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout,
                env=uv_env() if env is None else env,
                cwd=cwd,
            )
        except subprocess.TimeoutExpired:
            f.write(f"[timed out after {timeout:.0f}s]\n")
            raise EnvBuildError(f"{what} timed out after {timeout:.0f}s", hint=f"see {log}") from None
        f.write(proc.stdout)
        f.write(f"[exit {proc.returncode} after {time.monotonic() - started:.1f}s]\n")
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-12:])
        raise EnvBuildError(f"{what} failed (exit {proc.returncode}):\n{tail}", hint=f"full log: {log}")
    return proc.stdout
