"""Where artifacts live in a store: the layout shared by every store kind, and the refs that name them.

Layout, relative to the store root::

    <release>/<model>/<api>/                     the current artifact (what runs reload)
    .versions/<release>/<model>/<api>/<mv>-<pv>/ replaced versions, still loadable by version
    index.json                                   every artifact version: identity and file hashes
    .runs/<run-id>/<attempt>/                    what a step run on another machine produced (dask executor)
    .uploads/<release>/<model>/<api>/<id>/       an S3 upload's staging keys, swept when its writer died
    .leases/                                     S3 writers' leases (kit.store.lease)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from kit.common import artifacts
from kit.common.errors import StoreError, UsageError
from kit.common.names import SAFE_NAME

INDEX = "index.json"
CHECKS = "checks.json"  # when each artifact version was last checked, by which release, with which verdict
RUNS_PREFIX = ".runs"  # outputs of steps that ran on other machines (the dask executor), per run and attempt

#: the most bytes one object of a store may have to be read (an artifact's file, a step's output) ...
MAX_OBJECT_VAR, MAX_OBJECT_BYTES = "MXCOMPAT_STORE_MAX_OBJECT_BYTES", 4 << 30
#: ... and a JSON blob (a manifest, index.json, the check log, a lease), parsed whole in memory
MAX_JSON_VAR, MAX_JSON_BYTES = "MXCOMPAT_STORE_MAX_JSON_BYTES", 16 << 20


class CorruptBlob(StoreError):
    """An object of the store is not what the kit wrote there: not JSON, nested too deep, not a manifest, or
    over its size cap."""


def byte_cap(var: str) -> int:
    """The size cap ``var`` names (:data:`MAX_OBJECT_VAR` or :data:`MAX_JSON_VAR`): from the environment, else
    its default."""
    default = MAX_OBJECT_BYTES if var == MAX_OBJECT_VAR else MAX_JSON_BYTES
    text = os.environ.get(var, "").strip()
    if not text:
        return default
    try:
        cap = int(text)
    except ValueError:
        cap = 0
    if cap <= 0:
        raise UsageError(f"{var}={text!r} is not a positive number of bytes", hint=f"unset it (default {default})")
    return cap


def too_big(where: str, size: int | str, var: str) -> CorruptBlob:
    return CorruptBlob(
        f"refusing {where}: {size} bytes, over the cap of {byte_cap(var)} bytes",
        hint=f"set {var} to a larger number of bytes if it is meant to be this big",
    )


def loads_json(data: bytes, where: str):
    """``data`` parsed as JSON; :class:`CorruptBlob` naming ``where`` when it is not JSON or nested too deep."""
    try:
        return json.loads(data)
    except RecursionError:
        raise CorruptBlob(f"{where} is corrupt: JSON nested too deep to read") from None
    except ValueError as e:  # UnicodeDecodeError included
        raise CorruptBlob(f"{where} is corrupt: not JSON ({str(e)[:200]})") from None


def check_manifest(manifest, where: str) -> dict:
    """``manifest`` when it looks like an artifact's manifest (an object whose ``files`` map names to hashes)."""
    files = manifest.get("files", {}) if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise CorruptBlob(f"{where} is corrupt: not an artifact manifest")
    return manifest


def is_safe_key(rel: str) -> bool:
    """Whether the store-relative key ``rel`` can name a file inside a folder: relative, no empty, '.' or '..'
    part, no backslash or NUL (the kit writes no other)."""
    parts = rel.split("/")
    return bool(rel) and all(p not in ("", ".", "..") and "\\" not in p and "\0" not in p for p in parts)


def local_path(root: str | os.PathLike, rel: str) -> Path:
    """Where the store-relative key ``rel`` goes under the folder ``root``; :class:`StoreError` for a key that
    could land anywhere else ('a/../../etc/x', '/x', or a path through a link that leaves ``root``)."""
    base = Path(root).resolve()
    path = base.joinpath(*rel.split("/")) if is_safe_key(rel) else None
    if path is None or base not in path.resolve().parents:
        raise StoreError(f"refusing the key {rel!r}: it names no path inside {base} (path traversal)")
    return path


@dataclass(frozen=True)
class Ref:
    """Where one artifact version lives, relative to a store root."""

    release: str
    model: str
    api: str
    version: str | None = None  # None: the current artifact; else "<model_version>-<param_version>"

    @property
    def rel(self) -> str:
        if self.version is None:
            return f"{self.release}/{self.model}/{self.api}"
        return f"{artifacts.VERSIONS}/{self.release}/{self.model}/{self.api}/{self.version}"


def refs_from_manifest_paths(rel_paths: Iterable[str]) -> list[Ref]:
    """Artifact refs from store-relative manifest paths; a path with an unsafe part ('..', '/x') is ignored,
    so a crafted key can never make a download write outside the local store."""
    refs = []
    for rel in rel_paths:
        parts = rel.split("/")
        if parts[-1] != artifacts.MANIFEST:
            continue
        parts = parts[:-1]
        if not all(SAFE_NAME.match(p) for p in parts if p != artifacts.VERSIONS):
            continue
        if len(parts) == 3 and not parts[0].startswith("."):
            refs.append(Ref(*parts))
        elif len(parts) == 5 and parts[0] == artifacts.VERSIONS:
            refs.append(Ref(parts[1], parts[2], parts[3], parts[4]))
    return sorted(refs, key=lambda r: (r.release, r.model, r.api, r.version or ""))


def check_rel_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise StoreError(f"refusing a path component {name!r} from a manifest (path traversal)")


def build_index(store) -> dict:
    """Identity and file hashes of every artifact version in ``store``."""
    entries = []
    for ref in store.refs():
        m = store.manifest_or_none(ref)
        if m is None:
            continue  # replaced at this moment by another writer: the index it writes next names it
        entries.append(
            {
                "release": ref.release,
                "model": ref.model,
                "api": ref.api,
                "path": ref.rel,
                "current": ref.version is None,
                "status": m.get("status"),
                "model_version": m.get("model_version"),
                "param_version": m.get("param_version"),
                "files": m.get("files", {}),
            }
        )
    return {"schema": 1, "artifacts": entries}


# -- where an upload stages its files, and which artifact a key belongs to (kit.store.sweep) -----------------

#: where an upload stages its files: ``.uploads/<release>/<model>/<api>/<id>/``, under the artifact's lease
UPLOADS = ".uploads"


def staging_prefix(ref: Ref) -> str:
    return f"{UPLOADS}/{ref.release}/{ref.model}/{ref.api}"


def artifact_folder(rel: str) -> tuple[tuple[str, str, str], str, str] | None:
    """``((release, model, api), folder, name)`` for a file of an artifact folder (current or kept version)."""
    parts = rel.split("/")
    if len(parts) == 4 and not parts[0].startswith("."):
        group = tuple(parts[:3])
    elif len(parts) == 6 and parts[0] == artifacts.VERSIONS and SAFE_NAME.match(parts[4]):
        group = tuple(parts[1:4])
    else:
        return None
    return (group, rel.rsplit("/", 1)[0], parts[-1]) if all(SAFE_NAME.match(p) for p in group) else None
