"""Where artifacts live in a store: the layout shared by every store kind, and the refs that name them.

Layout, relative to the store root::

    <release>/<model>/<api>/                     the current artifact (what runs reload)
    .versions/<release>/<model>/<api>/<mv>-<pv>/ replaced versions, still loadable by version
    index.json                                   every artifact version: identity and file hashes
    .runs/<run-id>/<attempt>/                    what a step run on another machine produced (dask executor)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from kit.common.names import SAFE_NAME
from kit.common.errors import StoreError
from kit.common import artifacts

INDEX = "index.json"
CHECKS = "checks.json"  # when each artifact version was last checked, by which release, with which verdict
RUNS_PREFIX = ".runs"  # outputs of steps that ran on other machines (the dask executor), per run and attempt


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
