"""The process environments the kit gives what it starts: one rule per kind of child, in one place."""

from __future__ import annotations

import os

#: another interpreter's settings: an old Python started with them may import the host's packages, or fail
FOREIGN_PYTHON = ("PYTHON", "VIRTUAL_ENV", "CONDA_PREFIX")
#: what kernels must not see: S3 credentials (the host moves artifacts), a figure-less matplotlib backend
KERNEL_UNWANTED = ("AWS_", "MPLBACKEND")


def without(prefixes: tuple[str, ...], base: dict | None = None) -> dict:
    """A copy of ``base`` (default: this process's environment) without the variables starting with ``prefixes``."""
    return {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith(prefixes)}


def for_interpreter(base: dict | None = None) -> dict:
    """For a foreign interpreter (probing one, building or checking an environment with it)."""
    return without(FOREIGN_PYTHON, base)


def for_kernels(base: dict | None = None) -> dict:
    """For a process whose kernels run steps."""
    return without(KERNEL_UNWANTED, base)


def scrub_for_kernels() -> None:
    """Make this process's environment :func:`for_kernels`, for the kernels it is about to start."""
    for name in [k for k in os.environ if k.startswith(KERNEL_UNWANTED)]:
        del os.environ[name]
