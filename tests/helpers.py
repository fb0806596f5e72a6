"""Helpers the tests and the benchmarks share: starting the kit's CLI as a process.

Standard library only, so a benchmark (``python bench/x.py``) can import it without pytest:
``sys.path.insert(0, str(REPO / "tests"))`` then ``from helpers import start_kit``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def kit_env(home: Path | str | None = None, env: dict | None = None) -> dict:
    """``env`` (default: this process's environment) with MXCOMPAT_HOME set to ``home`` when one is given."""
    full_env = dict(os.environ if env is None else env)
    if home is not None:
        full_env["MXCOMPAT_HOME"] = str(home)
    return full_env


def start_kit(args, *, home: Path | str | None = None, env: dict | None = None, **popen_kwargs) -> subprocess.Popen:
    """``python -m kit ARGS`` started in the repository root and not waited for (``popen_kwargs`` go to Popen)."""
    return subprocess.Popen([sys.executable, "-m", "kit", *args], env=kit_env(home, env), cwd=REPO, **popen_kwargs)


def run_kit_in_terminal(*args, home: Path | str | None = None, env: dict | None = None, timeout: float = 900):
    """``python -m kit ARGS`` on a pseudo-terminal (200 columns); its exit code and everything it drew."""
    import fcntl
    import pty
    import select
    import struct
    import termios
    import time

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "kit", *args],
        env=kit_env(home, env),
        cwd=REPO,
        stdin=follower,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    out, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([leader], [], [], 1.0)[0]:
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the process ended and the terminal closed
                break
            if not chunk:
                break
            out += chunk
        else:
            proc.kill()
    finally:
        os.close(leader)
    return proc.wait(timeout=60), out.decode(errors="replace")
