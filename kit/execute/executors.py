"""Executors run a run's steps; a registry, as papermill registers its engines, so others can be added by name.

Each entry names its class as ``module:Class`` and is imported when asked for (so Dask
only then); the executors themselves never import this module. Every executor takes the
same options and declares its traits:

``remote``
    its steps run on other machines: environments live there (this machine needs none)
    and the store is theirs to read and write.
``follows_dependencies``
    ``run`` may be given steps that depend on each other (``Step.depends_on``): it starts each only after
    those it depends on have finished. Otherwise the orchestrator gives it one wave at a time.

and answers the orchestrator: ``holdings()`` (the (release, model, api) of every artifact
the steps can read), ``prepare(releases, models, apis)`` (make those of ``releases``
available to the steps), ``start(kernels)`` (get ready for steps on these kernels, in order),
``run(steps, on_done, then=kernels)`` (``then``: the kernels of the steps that come next) and
``close()`` (end whatever it started).
"""

from __future__ import annotations

import importlib

from kit.common.errors import UsageError

EXECUTORS: dict[str, str] = {}


def register_executor(name: str, target: str) -> None:
    """Make ``--executor NAME`` run steps with ``target``, a ``"module:Class"``."""
    EXECUTORS[name] = target


register_executor("local", "kit.execute.local_executor:LocalExecutor")
register_executor("dask", "kit.execute.dask_executor:DaskExecutor")


def executor_class(name: str) -> type:
    """The class registered as ``name`` (imported now), for its traits."""
    if name not in EXECUTORS:
        raise UsageError(f"unknown executor {name!r}", hint="known: " + ", ".join(EXECUTORS))
    module, _, cls = EXECUTORS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def get_executor(name: str, **options):
    """An executor by name. ``options``: jobs, store (location), home, run, on_event, scheduler (dask's)."""
    return executor_class(name)(**options)
