"""The artifact store's API: a local folder or S3 (``s3://bucket/prefix``), with one layout for both.

Layout, relative to the store root::

    <release>/<model>/<api>/                     the current artifact (what runs reload)
    .versions/<release>/<model>/<api>/<mv>-<pv>/ replaced versions, still loadable by version
    index.json                                   every artifact version: identity and file hashes
    .runs/<run-id>/<attempt>/                    what a step run on another machine produced (dask executor)

An artifact is complete only when its ``manifest.json`` is present and every file
hashes as the manifest says: uploads write the manifest last (and remove an old one
first), downloads are verified in a staging folder before they are renamed into
place, so an interrupted transfer never leaves a half artifact that looks complete.
"""

from __future__ import annotations

import importlib
import json
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kit.common import artifacts
from kit.common.errors import StoreError, UsageError
from kit.home import KitHome
from kit.store.base import RemoteStore, Store
from kit.store.layout import CHECKS, CorruptBlob, Ref, loads_json
from kit.store.local import LocalStore


def _parse_checks(data: bytes, where: str) -> dict:
    checks = loads_json(data, where)
    if not isinstance(checks, dict) or not all(isinstance(v, dict) for v in checks.values()):
        raise CorruptBlob(f"{where} is corrupt: not a check log")
    return checks


def read_checks(store: Store) -> dict:
    """``{artifact rel path: {loaded_with: {"checked_at", "verdict", "run"}}}`` from the store's check log; {}
    when there is none yet. StoreError when it cannot be read, :class:`CorruptBlob` when it is no check log."""
    data = store.read_blob_or_none(CHECKS, json_blob=True)
    return {} if data is None else _parse_checks(data, f"{store.url}/{CHECKS}")


def record_checks(store: Store, records: list[dict], run_id: str, on_event: Callable[[str], None] | None = None) -> int:
    """Add a run's verdicts to the store's check log (the newest check per artifact version and release),
    under the log's lock: concurrent runs each add theirs. A log that cannot be read is left as it is
    (StoreError); a corrupt one is kept aside as ``checks.json.corrupt-<UTC time>`` and a new log started, which
    ``on_event`` (else a warning) is told."""
    with store.exclusive(CHECKS, run_id) as held:
        data = store.read_blob_or_none(CHECKS, json_blob=True)
        try:
            checks = {} if data is None else _parse_checks(data, f"{store.url}/{CHECKS}")
        except CorruptBlob as e:
            aside = f"{CHECKS}.corrupt-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
            store.write_blob(aside, data)
            said = f"{e.message}: kept it as {store.url}/{aside} and started a new check log"
            if on_event is None:
                warnings.warn(said, RuntimeWarning, stacklevel=2)
            else:
                on_event(f"warning: {said}")
            checks = {}
        for rec in records:
            ref = Ref(rec["saved_with"], rec["model"], rec["api"], rec.get("archived"))
            entry = {"checked_at": rec.get("checked_at"), "verdict": rec["verdict"], "run": run_id}
            checks.setdefault(ref.rel, {})[rec["loaded_with"]] = entry
        if hasattr(held, "check"):
            held.check()  # an S3 lease: still ours, or LeaseLost and nothing is written
        store.write_blob(CHECKS, json.dumps(checks, indent=1, sort_keys=True).encode())
    return len(records)


#: store kinds by URL scheme (``s3://bucket/prefix``); a location without a scheme is a folder (LocalStore)
STORES: dict[str, Callable[..., Store] | str] = {}


def register_store(scheme: str, factory: Callable[..., Store] | str) -> None:
    """Make ``scheme://...`` locations open with ``factory(url, endpoint_url=, anonymous=, public_read=)``;
    ``"module:name"`` names one imported when first used (a backend imports this module, not the reverse)."""
    STORES[scheme] = factory


def _factory(scheme: str) -> Callable[..., Store]:
    factory = STORES[scheme]
    if isinstance(factory, str):
        module, _, name = factory.partition(":")
        factory = STORES[scheme] = getattr(importlib.import_module(module), name)
    return factory


register_store("s3", "kit.store.s3:S3Store")


def open_store(
    location: str | os.PathLike | None,
    *,
    home: KitHome | None = None,
    endpoint_url: str | None = None,
    anonymous: bool | None = None,
    public_read: bool = False,
) -> Store:
    """A store by location: ``s3://bucket/prefix``, a folder, or (None) the kit home's ``store/``."""
    if location is None:
        return LocalStore((home or KitHome()).store)
    text = str(location)
    scheme, sep, _ = text.partition("://")
    if not sep:
        return LocalStore(text)
    if scheme not in STORES:
        raise UsageError(
            f"unsupported store {text!r}", hint="use a folder or " + ", ".join(f"{s}://..." for s in STORES)
        )
    return _factory(scheme)(text, endpoint_url=endpoint_url, anonymous=anonymous, public_read=public_read)


def _select(refs: list[Ref], releases=None, models=None, apis=None, versions=False) -> list[Ref]:
    return [
        r
        for r in refs
        if (versions or r.version is None)
        and (not releases or r.release in releases)
        and (not models or r.model in models)
        and (not apis or r.api in apis)
    ]


def same_artifact(a: dict, b: dict) -> bool:
    return a.get("files") == b.get("files") and a.get("status") == b.get("status")


def newer(mine: dict, theirs: dict) -> bool:
    """Whether the artifact of manifest ``mine`` should replace ``theirs``: saved later (``saved_at``), or as
    late with at least as many files (a train notebook attached since); a tie goes to ``mine``."""
    return (str(mine.get("saved_at") or ""), len(mine.get("files") or {})) >= (
        str(theirs.get("saved_at") or ""),
        len(theirs.get("files") or {}),
    )


def _manifest(store: Store, ref: Ref) -> dict:
    """``ref``'s manifest, {} while it is absent (being replaced by another run: the copy retries)."""
    return store.manifest_or_none(ref) or {}


def _copy_missing(refs, up_to_date, copy, counted: str, said: str, on_event) -> dict:
    """``copy`` each ref that is not ``up_to_date``: ``{counted: n, "unchanged": m}``."""
    counts = {counted: 0, "unchanged": 0}
    for ref in refs:
        if up_to_date(ref):
            counts["unchanged"] += 1
            continue
        copy(ref)
        counts[counted] += 1
        on_event(f"{said} {ref.rel}")
    return counts


def push(
    src: LocalStore,
    dest: RemoteStore,
    *,
    releases=None,
    models=None,
    apis=None,
    versions=True,
    run_id: str | None = None,
    on_event: Callable[[str], None] = lambda m: None,
) -> dict:
    """Upload artifacts of ``src`` that ``dest`` (an S3 store) lacks or holds differently, each under its
    lease; then its index. Verified first. ``{"uploaded", "unchanged", "superseded"}``: superseded ones
    stayed as the bucket holds them, because its copy is newer (``src``'s is kept under ``.versions/``). What
    uploads that died midway left in ``dest`` is swept first (``dest.sweep``)."""
    refs = _select(src.refs(), releases, models, apis, versions)
    for ref in refs:
        bad = src.problems(ref)
        if bad:
            raise StoreError(
                f"not pushing {src.url}/{ref.rel}: {', '.join(bad)} do not verify",
                hint="run `mxcompat store verify` and retrain or remove it",
            )
    dest.sweep(run_id=run_id, on_event=on_event)
    there = set(dest.refs())
    counts = {"uploaded": 0, "unchanged": 0, "superseded": 0}
    for ref in refs:
        if ref in there and same_artifact(_manifest(dest, ref), src.manifest(ref)):
            counts["unchanged"] += 1
            continue
        outcome = dest.put(ref, src.path(ref), run_id=run_id)
        counts[outcome] += 1
        if outcome == "uploaded":
            on_event(f"pushed {ref.rel}")
        elif outcome == "superseded":
            on_event(
                f"kept {dest.url}/{ref.rel} as it is: its copy is newer than {src.url}'s, which is kept "
                f"under {artifacts.VERSIONS}/ if it holds other weights"
            )
    dest.write_index(run_id)
    return counts


def pull(
    src: RemoteStore,
    dest: LocalStore,
    *,
    releases=None,
    models=None,
    apis=None,
    versions=False,
    on_event: Callable[[str], None] = lambda m: None,
) -> dict:
    """Download artifacts of ``src`` that ``dest`` lacks or holds differently, each verified before use."""
    here = set(dest.refs())
    counts = _copy_missing(
        _select(src.refs(), releases, models, apis, versions),
        lambda ref: ref in here and not dest.problems(ref) and same_artifact(dest.manifest(ref), _manifest(src, ref)),
        lambda ref: src.download(ref, dest),
        "downloaded",
        "pulled",
        on_event,
    )
    dest.write_index()
    return counts


@dataclass
class Artifact:
    path: Path
    manifest: dict


def load(
    model: str,
    api: str,
    *,
    release: str | None = None,
    model_version: int | None = None,
    param_version: str | None = None,
    store: str | None = None,
    home: KitHome | None = None,
) -> Artifact:
    """An artifact by identity (the saving ``release``), hashes verified before anything is returned.

    Without versions: the current artifact. With them: the current one if it matches,
    else the kept version. An S3 store is pulled into the local cache first.
    """
    if release is None:
        raise UsageError("kit.store.load needs the release that saved the artifact: release='1.9.1'")
    opened = open_store(store, home=home)
    local = opened.working_copy(home)
    if opened.remote:
        pull(opened, local, releases=[release], models=[model], apis=[api], versions=True)
    candidates = [r for r in local.refs() if (r.release, r.model, r.api) == (release, model, api)]
    for ref in sorted(candidates, key=lambda r: r.version is not None):
        m = local.manifest(ref)
        if model_version is not None and m.get("model_version") != model_version:
            continue
        if param_version is not None and m.get("param_version") != param_version:
            continue
        bad = local.problems(ref)
        if bad:
            raise StoreError(f"artifact {local.url}/{ref.rel} does not verify: {', '.join(bad)}")
        return Artifact(local.path(ref), m)
    have = [f"{local.manifest(r).get('model_version')}-{local.manifest(r).get('param_version')}" for r in candidates]
    raise StoreError(
        f"no artifact {release}/{model}/{api} with model_version={model_version}, "
        f"param_version={param_version} in {opened.url}",
        hint="versions there: " + (", ".join(have) or "none"),
    )
