"""What S3 uploads that died midway left in a bucket, swept by the next push under each artifact's lease.

An upload stages its files under ``.uploads/<release>/<model>/<api>/<id>/`` (:func:`kit.store.layout.staging_prefix`),
removes the old manifest, copies the files into place and the manifest last; a writer that dies on the way
leaves staging keys, or an artifact folder without a manifest, or files its manifest does not list.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Callable

from kit.common import artifacts
from kit.common.errors import StoreError
from kit.common.names import SAFE_NAME
from kit.store.layout import UPLOADS, CorruptBlob, Ref, artifact_folder, check_manifest, loads_json, staging_prefix
from kit.store.lease import LeaseBusy, S3Lease

#: staging keys of the old layout (``.uploads/<id>/``, no artifact named) are swept once they are this old
LEGACY_STAGING_AGE = 24 * 3600


def sweep(store, run_id: str | None = None, on_event: Callable[[str], None] = lambda m: None) -> list[str]:
    """Remove what uploads to ``store`` (an S3 store) that died midway left, and nothing else: staging keys and
    files of artifact folders that have no manifest or that their manifest does not list, each artifact's under
    its lease (one being written now is left for later); staging keys of the old layout once a day old. The
    keys removed."""
    groups, folders, legacy = set(), {}, []
    old = time.time() - LEGACY_STAGING_AGE
    for rel, obj in store.objects(""):
        parts, where = rel.split("/"), artifact_folder(rel)
        if parts[0] == UPLOADS and len(parts) >= 6 and all(SAFE_NAME.match(p) for p in parts[1:4]):
            groups.add(tuple(parts[1:4]))
        elif parts[0] == UPLOADS and len(parts) == 3:
            when = obj.get("LastModified")
            if isinstance(when, datetime) and when.timestamp() < old:
                legacy.append(rel)
        elif where is not None:
            group, folder, name = where
            folders[folder] = (group, folders.get(folder, (group, False))[1] or name == artifacts.MANIFEST)
    groups |= {group for group, has_manifest in folders.values() if not has_manifest}
    removed = []
    for group in sorted(groups):
        try:
            with S3Lease(store, "/".join(group), run_id=run_id, wait=0) as lease:
                removed += _sweep_artifact(store, group, lease)
        except LeaseBusy:
            continue  # being written: its writer finishes it, or the next push sweeps it
        except StoreError as e:
            on_event(f"warning: could not sweep the leftovers of {'/'.join(group)}: {e.message}")
    for rel in legacy:
        try:
            store.delete(rel)
            removed.append(rel)
        except StoreError as e:
            on_event(f"warning: could not remove {rel}: {e.message}")
    if removed:
        on_event(f"swept {len(removed)} object(s) left by uploads that died midway from {store.url}")
    return removed


def _sweep_artifact(store, group: tuple[str, str, str], lease) -> list[str]:
    """Under ``group``'s lease: its staging keys, and files of its folders that no manifest lists (a folder
    whose manifest is corrupt is left as it is, for ``store verify`` to report)."""
    ref = Ref(*group)
    leftovers = list(store.iter_blobs(staging_prefix(ref)))
    folders: dict[str, list[str]] = {}
    for prefix in (ref.rel, f"{artifacts.VERSIONS}/{ref.rel}"):
        for rel in store.iter_blobs(prefix):
            where = artifact_folder(rel)
            if where is not None and where[0] == group:
                folders.setdefault(where[1], []).append(where[2])
    for folder, names in sorted(folders.items()):
        data = store.read_blob_or_none(f"{folder}/{artifacts.MANIFEST}", json_blob=True)
        try:
            manifest = {} if data is None else check_manifest(loads_json(data, folder), folder)
        except CorruptBlob:
            continue
        listed = set() if data is None else {artifacts.MANIFEST, *manifest.get("files", {})}
        leftovers += [f"{folder}/{n}" for n in names if n not in listed]
    for i, rel in enumerate(leftovers):
        if i % 100 == 0:
            lease.check()  # still ours, or LeaseLost and nothing more is removed
        store.delete(rel)
    return leftovers
