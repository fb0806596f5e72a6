"""Executors run steps; a registry so other engines (Dask, a CI matrix) can be added by name.

The registry names each executor's module and imports it when asked for (Dask only then); the
executors themselves never import this module.
"""

from __future__ import annotations

from typing import Callable

from kit.common.errors import UsageError
from kit.local_executor import LocalExecutor


def _dask(**options):
    from kit.dask_executor import DaskExecutor  # distributed is imported only when asked for

    return DaskExecutor(**options)


EXECUTORS: dict[str, Callable] = {"local": LocalExecutor, "dask": _dask}
#: executors whose steps run elsewhere: environments live on the workers, not here
REMOTE = {"dask"}


def get_executor(name: str, **options):
    """An executor by name; ``options`` are its own (``jobs`` for local; scheduler, store, ... for dask)."""
    if name not in EXECUTORS:
        raise UsageError(f"unknown executor {name!r}", hint="known: " + ", ".join(EXECUTORS))
    return EXECUTORS[name](**options)
