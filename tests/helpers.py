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
