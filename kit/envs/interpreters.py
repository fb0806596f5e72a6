"""Finding a Python interpreter of a given version.

Looked for in order: an explicit path, ``python3.X`` on PATH, pyenv's versions
folder, conda environments. Every candidate is run once to confirm its version,
so a pyenv shim that only prints "command not found" is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kit.common.errors import InterpreterNotFoundError, UsageError
from kit.envs import child_env

_PROBE = "import sys, json; print(json.dumps([sys.executable, list(sys.version_info[:3])]))"


@dataclass(frozen=True)
class Interpreter:
    path: str
    version: tuple[int, int, int]
    source: str  # explicit, PATH, pyenv, conda, host

    @property
    def minor(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


def probe(executable: str | os.PathLike, source: str) -> Interpreter | None:
    """Run ``executable`` once; its real path and version, or None when it does not run."""
    try:
        out = subprocess.run(
            [str(executable), "-c", _PROBE], capture_output=True, text=True, timeout=30, env=child_env.for_interpreter()
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    try:
        path, version = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return Interpreter(path=path or str(executable), version=tuple(version), source=source)


class InterpreterFinder:
    """Finds interpreters; every search location can be overridden (tests, odd setups)."""

    def __init__(
        self,
        path: str | None = None,
        pyenv_root: str | os.PathLike | None = None,
        conda_roots: list[str | os.PathLike] | None = None,
    ):
        self.path = os.environ.get("PATH", "") if path is None else path
        if pyenv_root is None:
            pyenv_root = os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv"
        self.pyenv_root = Path(pyenv_root)
        self.conda_roots = [Path(r) for r in (conda_roots if conda_roots is not None else _default_conda_roots())]

    def candidates(self, minor: str):
        """Yield ``(executable, source)`` pairs for Python ``minor`` (e.g. "3.6"), best first."""
        exe = f"python{minor}"
        found = shutil.which(exe, path=self.path)
        if found:
            yield found, "PATH"
        versions = self.pyenv_root / "versions"
        if versions.is_dir():
            matches = [d for d in versions.iterdir() if d.name == minor or d.name.startswith(minor + ".")]
            for d in sorted(matches, key=_patch_key, reverse=True):
                yield d / "bin" / exe, "pyenv"
        for root in self.conda_roots:
            for env in _conda_envs(root):
                yield env / "bin" / exe, "conda"

    def find(self, minor: str) -> Interpreter | None:
        """The first working interpreter of Python ``minor``, or None."""
        for exe, source in self.candidates(minor):
            if not Path(exe).exists():
                continue
            interp = probe(exe, source)
            if interp is not None and interp.minor == minor:
                return interp
        return None

    def require(self, minor: str, *, explicit: str | None = None, needed_by: str = "") -> Interpreter:
        """Like :meth:`find`, but an explicit path wins and absence is a clear error."""
        if explicit:
            interp = probe(explicit, "explicit")
            if interp is None:
                raise UsageError(f"--python {explicit} does not run")
            if interp.minor != minor:
                raise UsageError(
                    f"--python {explicit} is Python {interp.minor}, but {needed_by or 'this'} needs Python {minor}"
                )
            return interp
        interp = self.find(minor)
        if interp is None:
            raise self.not_found(minor, needed_by)
        return interp

    def not_found(self, minor: str, needed_by: str = "") -> InterpreterNotFoundError:
        """The error for a missing Python ``minor``: where it was looked for and how to get one."""
        who = f"MXNet {needed_by}" if needed_by else "this release"
        return InterpreterNotFoundError(
            f"{who} needs Python {minor}, and none was found "
            f"(looked for python{minor} on PATH, in {self.pyenv_root / 'versions'}, and in conda environments)",
            hint=f"install it (e.g. `pyenv install {minor}` or "
            f"`conda create -n py{minor.replace('.', '')} python={minor}`), "
            f"or pass --python /path/to/python{minor}",
        )


def _patch_key(path: Path):
    parts = []
    for p in path.name.split("."):
        parts.append(int(p) if p.isdigit() else -1)
    return parts


def _default_conda_roots() -> list[Path]:
    roots = []
    for var in ("CONDA_PREFIX", "CONDA_ROOT"):
        if os.environ.get(var):
            roots.append(Path(os.environ[var]))
    home = Path.home()
    for name in ("miniconda3", "anaconda3", "miniforge3", "mambaforge", ".conda"):
        roots.append(home / name)
    envs_file = home / ".conda" / "environments.txt"
    if envs_file.is_file():
        roots.extend(Path(line.strip()) for line in envs_file.read_text().splitlines() if line.strip())
    return roots


def _conda_envs(root: Path):
    """A conda root itself and the environments under its ``envs/``."""
    if (root / "bin").is_dir():
        yield root
    envs = root / "envs"
    if envs.is_dir():
        for env in sorted(envs.iterdir()):
            yield env
