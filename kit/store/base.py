"""What a store is: the :class:`Store` type every kind subclasses, and :class:`RemoteStore` for one whose kernels
work on a local copy. ``tests/execute/test_contracts.py`` checks each kind against them, method by method.

A store's *location* (``s3://bucket/prefix``, a folder) is what a user types; :func:`kit.store.open_store`
makes it a store. Paths inside a store (``rel``) are relative to its root, ``/``-separated, as in
:mod:`kit.store.layout`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable, ClassVar, ContextManager

from kit.home import KitHome
from kit.store.layout import Ref


def quiet(message: str) -> None:
    """An ``on_event`` that says nothing."""


class Store(ABC):
    """An artifact store: its artifacts (by :class:`~kit.store.layout.Ref`), their manifests, and other files
    (blobs: a run's remote outputs, the check log, the index)."""

    #: kernels cannot work on it where it is: they work on its :meth:`working_copy`, pulled before, pushed after
    remote: ClassVar[bool] = False
    #: where it is, as messages name it
    url: str

    @abstractmethod
    def working_copy(self, home: KitHome | None = None) -> Store:
        """The local store (a :class:`~kit.store.local.LocalStore`) kernels read and write for this one."""

    @abstractmethod
    def refs(self) -> list[Ref]:
        """Every complete artifact version it holds (its manifest present), current and kept."""

    @abstractmethod
    def manifest(self, ref: Ref) -> dict:
        """``ref``'s manifest; an error when it is missing or is not one."""

    @abstractmethod
    def manifest_or_none(self, ref: Ref) -> dict | None:
        """``ref``'s manifest, None when it is missing or is not one (being replaced, or corrupt)."""

    @abstractmethod
    def problems(self, ref: Ref) -> list[str]:
        """The files of ``ref`` that are missing or do not hash as its manifest says; [] when it verifies."""

    @abstractmethod
    def exclusive(self, rel: str, run_id: str | None = None) -> ContextManager:
        """Held while one writer (of run ``run_id``) writes ``rel``: writers take turns."""

    @abstractmethod
    def write_index(self, run_id: str | None = None) -> dict:
        """Rebuild ``index.json`` from what it holds (:func:`~kit.store.layout.build_index`); the index."""

    @abstractmethod
    def write_blob(self, rel: str, data: bytes) -> None:
        """Write a file that is not an artifact, whole or not at all."""

    @abstractmethod
    def read_blob(self, rel: str) -> bytes:
        """A file's bytes; StoreError when there is none."""

    @abstractmethod
    def read_blob_or_none(self, rel: str, *, json_blob: bool = False) -> bytes | None:
        """A file's bytes (a ``json_blob`` under the smaller JSON size cap), None when there is none."""

    @abstractmethod
    def list_blobs(self, prefix: str) -> list[str]:
        """The files under ``prefix``, sorted, relative to the store's root."""


class RemoteStore(Store):
    """A store on other machines: pushed to and pulled from its local :meth:`working_copy`, one artifact at a time."""

    remote: ClassVar[bool] = True

    @abstractmethod
    def put(self, ref: Ref, folder: Path, run_id: str | None = None) -> str:
        """Upload the artifact in ``folder`` as ``ref``: ``"uploaded"``, ``"unchanged"``, or ``"superseded"`` (the
        store's copy is newer and stays)."""

    @abstractmethod
    def download(self, ref: Ref, dest: Store) -> None:
        """Copy ``ref`` into the local store ``dest``, verified before it takes its place there."""

    @abstractmethod
    def sweep(self, run_id: str | None = None, on_event: Callable[[str], None] = quiet) -> list[str]:
        """Remove what uploads that died midway left; what it removed."""
