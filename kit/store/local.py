"""A store in a local folder (the default: the kit home's ``store/``).

An artifact is complete only when its ``manifest.json`` is present and every file
hashes as the manifest says: downloads are verified in a staging folder before they are
renamed into place, so an interrupted transfer never leaves a half artifact that looks complete.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from kit.common import artifacts
from kit.common.errors import StoreError
from kit.home import KitHome
from kit.store.base import Store
from kit.store.layout import (
    INDEX,
    MAX_JSON_VAR,
    Ref,
    build_index,
    byte_cap,
    local_path,
    refs_from_manifest_paths,
    too_big,
)


class LocalStore(Store):
    """A store folder on this machine; also the working copy of every store (kernels read and write it where
    it is): :meth:`path`, :meth:`staging` and :meth:`commit` are its own."""

    remote = False

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).expanduser().resolve()
        self.url = str(self.root)

    def working_copy(self, home: KitHome | None = None) -> LocalStore:
        """The folder kernels read and write for this store: the store itself."""
        return self

    def refs(self) -> list[Ref]:
        if not self.root.is_dir():
            return []
        for folder in {p.parent for p in self.root.glob("*/*/.*.old-*")}:  # what a crashed commit hid
            artifacts.recover(str(folder))
        rels = (
            str(p.relative_to(self.root))
            for p in self.root.rglob(artifacts.MANIFEST)
            if not any(part.startswith(".") and part != artifacts.VERSIONS for part in p.relative_to(self.root).parts)
        )
        return refs_from_manifest_paths(rels)

    def path(self, ref: Ref) -> Path:
        return self.root / ref.rel

    def manifest(self, ref: Ref) -> dict:
        """``ref``'s manifest; ValueError for one that is not JSON, nested too deep, or not an object."""
        manifest = artifacts.read_json(str(self.path(ref) / artifacts.MANIFEST))
        if not isinstance(manifest, dict):
            raise ValueError(f"{self.path(ref) / artifacts.MANIFEST} is not a JSON object")
        return manifest

    def manifest_or_none(self, ref: Ref) -> dict | None:
        try:
            return self.manifest(ref)
        except (OSError, ValueError):
            return None

    def problems(self, ref: Ref) -> list[str]:
        """Files of ``ref`` that are missing or do not hash as its manifest says."""
        try:
            manifest = self.manifest(ref)
        except (OSError, ValueError) as e:
            return [f"manifest.json: {e}"]
        return artifacts.verify(str(self.path(ref)), manifest)

    def keep_train_notebook(self, notebook: str | os.PathLike, saved_by: str, release: str) -> int:
        """Copy the executed train notebook into every artifact of ``release`` its step saved (manifest
        ``saved_by``), hashed in the manifest, so it is pushed, pulled and bundled with them; how many."""
        kept = 0
        for ref in self.refs():
            if ref.release != release or ref.version is not None:
                continue
            try:
                manifest = self.manifest(ref)
            except (OSError, ValueError):
                continue  # a broken artifact is reported as corrupt by the reload, not here
            if manifest.get("saved_by") == saved_by:
                artifacts.attach_file(str(self.path(ref)), artifacts.TRAIN_NOTEBOOK, str(notebook))
                kept += 1
        return kept

    def write_index(self, run_id: str | None = None) -> dict:
        """Rebuild ``index.json``, written atomically (``run_id`` is the S3 lease's: no other writer waits here)."""
        index = build_index(self)
        self.root.mkdir(parents=True, exist_ok=True)
        artifacts.write_json_atomic(str(self.root / INDEX), index)
        return index

    def commit(self, ref: Ref, staged: Path) -> None:
        """Move a verified download into place; a current artifact it replaces that holds other weights is
        kept under ``.versions/``, as a retrain keeps it (a local retrain not yet pushed is never lost)."""
        final = self.path(ref)
        final.parent.mkdir(parents=True, exist_ok=True)
        archive = None
        if ref.version is None:
            archive = artifacts.archive_dir(str(self.root), ref.release, ref.model, ref.api)
        artifacts.commit_dir(str(staged), str(final), archive=archive)

    def exclusive(self, rel: str, run_id: str | None = None):
        """Hold ``rel``'s lock: one writer at a time across processes on this machine."""
        self.root.mkdir(parents=True, exist_ok=True)
        return artifacts.locked(str(self.root / rel))

    def staging(self, ref: Ref) -> Path:
        return Path(artifacts.staging_dir(str(self.path(ref))))

    def write_blob(self, rel: str, data: bytes) -> None:
        """A file that is not an artifact (a remote step's outputs under ``.runs/``), written atomically."""
        path = local_path(self.root, rel)  # a remote step's file names: never a path out of the store
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError as e:
            tmp.unlink(missing_ok=True)  # a full disk leaves no half-written file behind
            raise StoreError(f"cannot write {self.url}/{rel}: {e}") from None

    def read_blob(self, rel: str) -> bytes:
        data = self.read_blob_or_none(rel)
        if data is None:
            raise StoreError(f"cannot read {self.url}/{rel}: no such file")
        return data

    def read_blob_or_none(self, rel: str, *, json_blob: bool = False) -> bytes | None:
        """``rel``'s bytes (a ``json_blob`` under the JSON cap, as S3's), None when there is no such file."""
        try:
            with open(local_path(self.root, rel), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if json_blob and size > byte_cap(MAX_JSON_VAR):
                    raise too_big(f"{self.url}/{rel}", size, MAX_JSON_VAR)
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StoreError(f"cannot read {self.url}/{rel}: {e}") from None

    def list_blobs(self, prefix: str) -> list[str]:
        """Paths of the files under ``prefix`` (relative to the store root)."""
        base = self.root / prefix
        return (
            sorted(p.relative_to(self.root).as_posix() for p in base.rglob("*") if p.is_file()) if base.is_dir() else []
        )
