"""Executors run a run's steps: the :class:`Executor` type every executor subclasses, and a registry (as papermill
registers its engines) so others can be added by name.

Each entry names its class as ``module:Class`` and is imported when asked for (so Dask only then); this module
imports no executor. What the orchestrator asks of one, and the traits it declares, are :class:`Executor`'s.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Callable, ClassVar, Iterable

from kit.common.errors import UsageError
from kit.execute.steps import Step, StepResult


class Executor(ABC):
    """What the orchestrator (:mod:`kit.orchestrate.matrix`) asks of an executor; each one subclasses it.

    It is made with :data:`OPTIONS` (:func:`get_executor`; an executor takes the options it needs and ignores
    the rest) and declares its traits.
    """

    #: the name ``--executor`` gives it
    name: ClassVar[str]
    #: its steps run on other machines: environments live there (this machine needs none) and the store is
    #: theirs to read and write
    remote: ClassVar[bool] = False
    #: :meth:`run` may be given steps that depend on each other (``Step.depends_on``): it starts each only after
    #: those it depends on have finished. Otherwise the orchestrator gives it one wave at a time.
    follows_dependencies: ClassVar[bool] = False

    @abstractmethod
    def holdings(self) -> set[tuple[str, str, str]]:
        """(release, model, api) of every current artifact the steps can read."""

    @abstractmethod
    def prepare(
        self, releases: list[str], models: list[str] | None, apis: list[str] | None, versions: bool = False
    ) -> None:
        """Make the artifacts of ``releases`` (of ``models`` and ``apis``; None: all; ``versions``: the replaced
        versions too) available to the steps."""

    @abstractmethod
    def start(self, prestart: Iterable[str] = ()) -> None:
        """Get ready for steps on these kernels, in order (while the orchestrator does its checks)."""

    @abstractmethod
    def run(
        self, steps: Iterable[Step], on_done: Callable[[StepResult], None], prestart: Iterable[str] = ()
    ) -> list[StepResult]:
        """Run ``steps``, calling ``on_done`` with each one's result as it finishes; the results. ``prestart``: the
        kernels of the steps that come next."""

    @abstractmethod
    def close(self) -> None:
        """End whatever it started."""


EXECUTORS: dict[str, str] = {}


def register_executor(name: str, target: str) -> None:
    """Make ``--executor NAME`` run steps with ``target``, a ``"module:Class"``."""
    EXECUTORS[name] = target


register_executor("local", "kit.execute.local_executor:LocalExecutor")
register_executor("dask", "kit.execute.dask_executor:DaskExecutor")


def executor_class(name: str) -> type[Executor]:
    """The class registered as ``name`` (imported now), for its traits."""
    if name not in EXECUTORS:
        raise UsageError(f"unknown executor {name!r}", hint="known: " + ", ".join(EXECUTORS))
    module, _, cls = EXECUTORS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


#: what an executor is made with (each takes those it needs and ignores the rest)
OPTIONS = ("jobs", "store_location", "home", "run", "on_event", "on_progress", "scheduler", "endpoint_url")


def get_executor(name: str, **options) -> Executor:
    """An executor by name, made with :data:`OPTIONS`; a name outside them is refused, never silently ignored."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(f"get_executor got unknown option(s) {', '.join(unknown)}; known: {', '.join(OPTIONS)}")
    return executor_class(name)(**options)
