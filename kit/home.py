"""Where the kit keeps its own state: environments, kernels, logs, the default store.

Default ``.kit/`` at the repository root; ``MXCOMPAT_HOME`` moves it.
"""

from __future__ import annotations

import os
from pathlib import Path

from kit.common.errors import UsageError
from kit.common.names import unsafe_reason

REPO_ROOT = Path(__file__).resolve().parent.parent


class KitHome:
    """The folders under one kit home."""

    def __init__(self, root: str | os.PathLike | None = None):
        if root is None:
            root = os.environ.get("MXCOMPAT_HOME") or REPO_ROOT / ".kit"
        self.root = Path(root).expanduser().resolve()

    @property
    def envs(self) -> Path:
        return self.root / "envs"

    @property
    def jupyter_path(self) -> Path:
        """The folder to put on JUPYTER_PATH: it holds ``kernels/``."""
        return self.root / "jupyter"

    @property
    def kernels(self) -> Path:
        return self.jupyter_path / "kernels"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def store(self) -> Path:
        """The default artifact store: where artifacts go when no store location is named."""
        return self.root / "store"

    def env_dir(self, name: str) -> Path:
        """The folder of environment ``name``: always a direct child of :attr:`envs` (``..``, ``""``, an absolute
        path or a name with a separator is refused, so no command reaches past it)."""
        problem = unsafe_reason(name, "environment name")
        if problem:
            raise UsageError(problem, hint="`mxcompat env list` shows the environments")
        return self.envs / name

    def __repr__(self) -> str:
        return f"KitHome({str(self.root)!r})"


def uv_cache_dir() -> str | None:
    """The uv cache shared by every environment (``MXCOMPAT_UV_CACHE``, else uv's own default)."""
    return os.environ.get("MXCOMPAT_UV_CACHE") or os.environ.get("UV_CACHE_DIR") or None
