"""The artifact store: a local folder or S3 (``s3://bucket/prefix``), with one layout for both.

``base`` says what a store is (the ``Store`` type), ``layout`` where artifacts live, ``local`` and ``s3`` are the
two kinds (S3 writers take turns under ``lease``), ``api`` opens a store by location and pushes, pulls and loads
artifacts. What callers use is re-exported here: ``from kit import store; store.open_store(...)``.
"""

from kit.common.errors import StoreError
from kit.store.api import (
    Artifact,
    load,
    newer,
    open_store,
    pull,
    push,
    read_checks,
    record_checks,
    register_store,
    same_artifact,
)
from kit.store.base import RemoteStore, Store
from kit.store.layout import CHECKS, INDEX, RUNS_PREFIX, Ref, build_index, check_rel_name, refs_from_manifest_paths
from kit.store.local import LocalStore

__all__ = [
    "CHECKS",
    "INDEX",
    "RUNS_PREFIX",
    "Artifact",
    "LocalStore",
    "Ref",
    "RemoteStore",
    "Store",
    "StoreError",
    "build_index",
    "check_rel_name",
    "load",
    "newer",
    "open_store",
    "pull",
    "push",
    "read_checks",
    "record_checks",
    "refs_from_manifest_paths",
    "register_store",
    "same_artifact",
]
