"""An artifact store in an S3 bucket (or any S3-compatible server), with the layout of :mod:`kit.store.local`.

Writers of one artifact go one at a time under its lease (:mod:`kit.store.lease`); under it a push decides:
the newer of the bucket's copy and this one (by the manifest's ``saved_at``) becomes or stays current and
the other, if it holds other weights, is kept under ``.versions/``, so no pushed version is ever lost and
a stale mirror never overwrites a newer retrain. Readers take no lease: a download that finds the
artifact changing under it reads it again.

The bucket is not trusted: listings stream a page at a time, objects stream to disk under a size cap
(:func:`kit.store.layout.byte_cap`), JSON that is not JSON or nested too deep is refused as corrupt, and no key
becomes a local path outside the folder it belongs in. What an upload that died midway left (staging keys,
files of an artifact without its manifest) is swept by the next push, under each artifact's lease.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

from kit.common import artifacts
from kit.common.errors import StoreError, UsageError
from kit.home import KitHome
from kit.store.api import newer, same_artifact
from kit.store.base import RemoteStore, quiet
from kit.store.layout import (
    INDEX,
    MAX_JSON_VAR,
    MAX_OBJECT_VAR,
    RUNS_PREFIX,
    UPLOADS,
    CorruptBlob,
    Ref,
    build_index,
    byte_cap,
    check_manifest,
    check_rel_name,
    is_safe_key,
    loads_json,
    local_path,
    refs_from_manifest_paths,
    staging_prefix,
    too_big,
)
from kit.store.lease import LEASES, S3Lease
from kit.store.local import LocalStore
from kit.store.sweep import sweep

#: reads of an artifact that another run is replacing, before giving up
READ_ATTEMPTS = 5
#: keys per listing request (S3's most)
PAGE_SIZE = 1000
#: bytes per read of a streamed download
CHUNK = 1 << 20


def _check(lease: S3Lease | None) -> None:
    """Confirm ``lease`` is still held (renewing it) before a write: :class:`LeaseLost` when it is not."""
    if lease is not None:
        lease.check()


class _Changed(Exception):
    """The artifact changed (or vanished) while it was being downloaded."""


class _Refused:
    def __init__(self, code):
        self.code = code


class S3Store(RemoteStore):
    """A store in an S3 bucket (or any S3-compatible server), read anonymously when no credentials exist; kernels
    work on a local mirror (:meth:`working_copy`), pulled before and pushed after."""

    def __init__(
        self,
        url: str,
        *,
        endpoint_url: str | None = None,
        anonymous: bool | None = None,
        public_read: bool = False,
        attempts: int = 3,
    ):
        bucket, _, prefix = url[len("s3://") :].partition("/")
        if not bucket:
            raise UsageError(f"not an S3 store URL: {url!r}", hint="use s3://bucket/prefix")
        self.url, self.bucket, self.prefix = url, bucket, prefix.strip("/")
        self.public_read = public_read
        self.endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        self.client = self._client(anonymous, attempts)

    def _client(self, anonymous, attempts):
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config

        session = boto3.session.Session()
        if anonymous is None:
            anonymous = session.get_credentials() is None
        self.anonymous = anonymous
        config = Config(
            retries={"max_attempts": attempts, "mode": "standard"},
            connect_timeout=3,
            read_timeout=30,
            signature_version=UNSIGNED if anonymous else None,
        )
        return session.client("s3", endpoint_url=self.endpoint_url, config=config)

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def _call(self, what: str, fn, *args, **kwargs):
        from boto3.exceptions import Boto3Error
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(*args, **kwargs)
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code")
            raise StoreError(
                f"S3 {what} refused for {self.url} ({code}): {e}",
                hint="check the bucket name, the credentials (none: anonymous), and --public-read",
            ) from None
        except (BotoCoreError, Boto3Error) as e:  # Boto3Error: a managed transfer (S3UploadFailedError)
            raise StoreError(
                f"S3 {what} failed for {self.url} at {self.endpoint_url or 'AWS'}: {e}",
                hint="is the endpoint up and reachable? (retried with bounded attempts)",
            ) from None

    def call_or_code(self, what: str, codes: tuple, fn, *args, **kwargs):
        """``fn``'s answer, or the error code (a str) when S3 refused with one of ``codes`` (or HTTP status)."""
        from botocore.exceptions import ClientError

        def attempt():
            try:
                return fn(*args, **kwargs)
            except ClientError as e:
                code = str(e.response.get("Error", {}).get("Code"))
                status = str(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode"))
                if code in codes or status in codes:
                    return _Refused(code)
                raise

        answer = self._call(what, attempt)
        return answer.code if isinstance(answer, _Refused) else answer

    def exclusive(self, rel: str, run_id: str | None = None) -> S3Lease:
        """Hold ``rel``'s lease: one writer at a time across processes and machines."""
        return S3Lease(self, rel, run_id=run_id)

    def refs(self) -> list[Ref]:
        """Artifacts in the bucket: by listing, or from ``index.json`` when an anonymous reader may not list."""
        try:
            return self._listed_refs()
        except StoreError:
            if not self.anonymous:
                raise
        try:
            index = self.read_json(INDEX)
            paths = [f"{e['path']}/{artifacts.MANIFEST}" for e in index.get("artifacts", [])]
        except (StoreError, AttributeError, KeyError, TypeError):
            raise StoreError(
                f"{self.url} can neither be listed nor has a readable {INDEX} for anonymous readers",
                hint="push with --public-read (it uploads a public index), or use credentials",
            ) from None
        return refs_from_manifest_paths(p for p in paths if isinstance(p, str))

    def _listed_refs(self) -> list[Ref]:
        return refs_from_manifest_paths(
            r for r in self.iter_blobs("") if not r.startswith((UPLOADS + "/", LEASES + "/", RUNS_PREFIX + "/"))
        )

    # -- reading: every object under a size cap, streamed ----------------------------------------------------

    def _get(self, rel: str, var: str, missing_ok: bool):
        """GET ``rel``; None when it is missing (``missing_ok``); refused before a byte is read when it says it
        is bigger than the cap ``var`` names."""
        codes = ("NoSuchKey", "404") if missing_ok else ()
        answer = self.call_or_code(
            f"download of {rel}", codes, self.client.get_object, Bucket=self.bucket, Key=self.key(rel)
        )
        if isinstance(answer, str):
            return None
        size = answer.get("ContentLength")
        if size is not None and size > byte_cap(var):
            answer["Body"].close()
            raise too_big(f"{self.url}/{rel}", size, var)
        return answer

    def _stream(self, rel: str, answer: dict, var: str) -> Iterator[bytes]:
        """The body of ``answer`` in chunks, cut off (CorruptBlob) once it passes its cap, whatever it said."""
        body, read, cap = answer["Body"], 0, byte_cap(var)
        chunks = body.iter_chunks(CHUNK)
        try:
            while True:
                chunk = self._call(f"download of {rel}", next, chunks, None)
                if chunk is None:
                    return
                read += len(chunk)
                if read > cap:
                    raise too_big(f"{self.url}/{rel}", f"more than {cap}", var)
                yield chunk
        finally:
            body.close()

    def read_object(self, rel: str, *, json_blob: bool = False, missing_ok: bool = False):
        """``(bytes, ETag)`` of ``rel`` (None when missing and ``missing_ok``), under the object cap, or the much
        smaller JSON cap for a ``json_blob``."""
        var = MAX_JSON_VAR if json_blob else MAX_OBJECT_VAR
        answer = self._get(rel, var, missing_ok)
        if answer is None:
            return None
        return b"".join(self._stream(rel, answer, var)), answer.get("ETag")

    def read_json(self, rel: str):
        """``rel`` parsed as JSON; :class:`CorruptBlob` when it is not JSON, too deep or too big."""
        return loads_json(self.read_object(rel, json_blob=True)[0], f"{self.url}/{rel}")

    def _parse_manifest(self, ref: Ref, data: bytes) -> dict:
        where = f"{self.url}/{ref.rel}/{artifacts.MANIFEST}"
        return check_manifest(loads_json(data, where), where)

    def manifest(self, ref: Ref) -> dict:
        return self._parse_manifest(ref, self.read_object(f"{ref.rel}/{artifacts.MANIFEST}", json_blob=True)[0])

    def manifest_or_none(self, ref: Ref) -> dict | None:
        """The manifest of ``ref``, None when there is none (or it is corrupt: not a complete artifact)."""
        try:
            data = self.read_blob_or_none(f"{ref.rel}/{artifacts.MANIFEST}", json_blob=True)
            return None if data is None else self._parse_manifest(ref, data)
        except CorruptBlob:
            return None

    def _fetch(self, rel: str, path: Path) -> str | None:
        """Stream ``rel`` into the file ``path`` under the object cap: its sha256, None when it is missing."""
        answer = self._get(rel, MAX_OBJECT_VAR, True)
        if answer is None:
            return None
        h = hashlib.sha256()
        with open(path, "wb") as f:
            for chunk in self._stream(rel, answer, MAX_OBJECT_VAR):
                h.update(chunk)
                f.write(chunk)
        return h.hexdigest()

    def download_blob(self, rel: str, root: str | os.PathLike) -> Path:
        """Stream the object ``rel`` to the same relative path under the folder ``root`` (a key that would
        leave ``root`` is refused before anything is written); the path."""
        path = local_path(root, rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            if self._fetch(rel, tmp) is None:
                raise StoreError(f"no object {self.url}/{rel}")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path

    def problems(self, ref: Ref) -> list[str]:
        try:
            manifest = self.manifest(ref)
        except StoreError as e:
            return [f"manifest.json: {e.message}"]
        bad = []
        for name, digest in sorted(manifest.get("files", {}).items()):
            rel = f"{ref.rel}/{name}"
            h = hashlib.sha256()
            try:
                check_rel_name(name)
                for chunk in self._stream(rel, self._get(rel, MAX_OBJECT_VAR, False), MAX_OBJECT_VAR):
                    h.update(chunk)  # streamed: parameter files reach 112 MB
            except CorruptBlob as e:
                bad.append(f"{name} ({e.message})")
                continue
            except StoreError:
                bad.append(name)
                continue
            if h.hexdigest() != digest:
                bad.append(name)
        return bad

    # -- writing: under the artifact's lease, checked before each write that counts --------------------------

    def _put(self, rel: str, body: bytes) -> None:
        extra = {"ACL": "public-read"} if self.public_read else {}
        self._call(
            f"upload of {rel}", self.client.put_object, Bucket=self.bucket, Key=self.key(rel), Body=body, **extra
        )

    def delete(self, rel: str) -> None:
        self._call(f"delete of {rel}", self.client.delete_object, Bucket=self.bucket, Key=self.key(rel))

    def _copy(self, what: str, src: str, dest: str) -> None:
        """Copy ``src`` to ``dest`` in the bucket (boto3's managed copy: multipart past 5 GB)."""
        extra = {"ACL": "public-read"} if self.public_read else None
        source = {"Bucket": self.bucket, "Key": self.key(src)}
        self._call(f"{what} of {dest}", self.client.copy, source, self.bucket, self.key(dest), ExtraArgs=extra)

    def put(self, ref: Ref, folder: Path, run_id: str | None = None) -> str:
        """Push one artifact under its lease: ``"uploaded"``, ``"unchanged"``, or ``"superseded"`` (the bucket's
        copy is newer and stays; this one, if it holds other weights, is kept under ``.versions/``)."""
        mine = json.loads((Path(folder) / artifacts.MANIFEST).read_text())
        with self.exclusive(Ref(ref.release, ref.model, ref.api).rel, run_id) as lease:
            theirs = self.manifest_or_none(ref)
            if theirs is not None and same_artifact(theirs, mine):
                return "unchanged"
            if theirs is None or newer(mine, theirs):
                if ref.version is None and theirs is not None:
                    self._keep_version(ref, theirs, lease)
                self.upload(ref, folder, lease)
                return "uploaded"
            if ref.version is None and mine.get("status") == "saved":
                kept = Ref(ref.release, ref.model, ref.api, artifacts.identity(mine))
                if artifacts.identity(mine) != artifacts.identity(theirs) and self.manifest_or_none(kept) is None:
                    self.upload(kept, folder, lease)
            return "superseded"

    def _keep_version(self, ref: Ref, manifest: dict, lease: S3Lease | None = None) -> None:
        """Copy the bucket's current ``ref`` (described by ``manifest``) to ``.versions/<identity>`` before it is
        replaced by other weights, manifest last, as a local commit does."""
        if manifest.get("status") != "saved":
            return
        kept = Ref(ref.release, ref.model, ref.api, artifacts.identity(manifest))
        there = self.manifest_or_none(kept)
        if there is not None and same_artifact(there, manifest):
            return
        names = sorted(manifest.get("files", {}))
        for name in names:
            check_rel_name(name)
        _check(lease)
        self.delete(f"{kept.rel}/{artifacts.MANIFEST}")
        for name in names + [artifacts.MANIFEST]:
            _check(lease)
            self._copy("archive", f"{ref.rel}/{name}", f"{kept.rel}/{name}")

    def upload(self, ref: Ref, folder: Path, lease: S3Lease | None = None) -> None:
        """Upload one artifact: files to staging keys, then into place, manifest last. Under ``lease``, each
        write into place is made only once the lease is confirmed still ours (else :class:`LeaseLost`)."""
        manifest = json.loads((folder / artifacts.MANIFEST).read_text())
        names = sorted(manifest.get("files", {}))
        for name in names:
            check_rel_name(name)
        staging = f"{staging_prefix(ref)}/{uuid.uuid4().hex}"
        extra = {"ACL": "public-read"} if self.public_read else {}
        staged = []
        try:
            for name in names + [artifacts.MANIFEST]:  # boto3's managed transfer: multipart for big files
                staged.append(f"{staging}/{name}")
                self._call(
                    f"upload of {staging}/{name}",
                    self.client.upload_file,
                    str(folder / name),
                    self.bucket,
                    self.key(f"{staging}/{name}"),
                    ExtraArgs=extra or None,
                )
            # an old manifest goes first: while files are replaced the artifact reads as absent, never as complete
            _check(lease)
            self.delete(f"{ref.rel}/{artifacts.MANIFEST}")
            for rel in list(self.iter_blobs(ref.rel)):  # files of the replaced artifact the new one lacks
                if rel.rsplit("/", 1)[-1] not in names and rel.count("/") == ref.rel.count("/") + 1:
                    self.delete(rel)
            for name in names + [artifacts.MANIFEST]:
                _check(lease)  # the manifest's copy is the commit: never made by a writer that lost its lease
                self._copy("commit", f"{staging}/{name}", f"{ref.rel}/{name}")
        finally:
            for rel in staged:  # best effort: what stays is swept by the next push
                try:
                    self.delete(rel)
                except StoreError:
                    break

    # -- downloading ------------------------------------------------------------------------------------------

    def download(self, ref: Ref, dest: LocalStore) -> None:
        """Download one artifact into ``dest``, verified before it is renamed into place; read again when
        another run replaced it meanwhile."""
        pause = 0.2
        for _ in range(READ_ATTEMPTS):
            try:
                return self._download_once(ref, dest)
            except _Changed:
                time.sleep(pause)
                pause *= 2
        raise StoreError(
            f"{self.url}/{ref.rel} changed or vanished each time it was read ({READ_ATTEMPTS} tries)",
            hint="another run is pushing it: pull again when that run is done",
        )

    def _download_once(self, ref: Ref, dest: LocalStore) -> None:
        manifest_key = f"{ref.rel}/{artifacts.MANIFEST}"
        manifest_bytes = self.read_blob_or_none(manifest_key, json_blob=True)
        if manifest_bytes is None:
            raise _Changed()  # listed a moment ago: being replaced
        try:
            manifest = self._parse_manifest(ref, manifest_bytes)
            for name in manifest.get("files", {}):
                check_rel_name(name)
        except StoreError as e:
            raise StoreError(f"refusing {self.url}/{ref.rel} as corrupt: {e.message}") from None
        staged = dest.staging(ref)
        try:
            bad = []
            for name, digest in sorted(manifest.get("files", {}).items()):
                # streamed into the staging folder under the size cap, hashed as it comes
                if self._fetch(f"{ref.rel}/{name}", local_path(staged, name)) != digest:
                    bad.append(name)
            if bad:
                if self.read_blob_or_none(manifest_key, json_blob=True) != manifest_bytes:
                    raise _Changed()
                raise StoreError(
                    f"refusing {self.url}/{ref.rel}: sha256 mismatch in {', '.join(bad)}",
                    hint="the object was changed after upload; nothing was written locally",
                )
            (staged / artifacts.MANIFEST).write_bytes(manifest_bytes)
            dest.commit(ref, staged)
        finally:
            shutil.rmtree(staged, ignore_errors=True)

    def sweep(self, run_id: str | None = None, on_event: Callable[[str], None] = quiet) -> list[str]:
        """Remove what uploads that died midway left (:func:`kit.store.sweep.sweep`); the keys removed."""
        return sweep(self, run_id, on_event)

    # -- other files and listings ---------------------------------------------------------------------------

    def write_blob(self, rel: str, data: bytes) -> None:
        """A file that is not an artifact (a remote step's outputs under ``.runs/``)."""
        self._put(rel, data)

    def read_blob(self, rel: str) -> bytes:
        return self.read_object(rel)[0]

    def read_blob_or_none(self, rel: str, *, json_blob: bool = False) -> bytes | None:
        """``rel``'s bytes, None when there is no such object (an artifact being replaced lacks its manifest)."""
        answer = self.read_object(rel, json_blob=json_blob, missing_ok=True)
        return None if answer is None else answer[0]

    def objects(self, prefix: str) -> Iterator[tuple[str, dict]]:
        """``(rel, listed object)`` under ``prefix``, fetched a page at a time: memory holds one page, whatever
        the bucket holds. Keys that name no path inside a folder ('a/../x', '/x', 'a//b') are left out: the kit
        writes none, and a caller may make a local path of what it lists."""
        under = prefix.strip("/")
        root = self.key("")
        pages = iter(
            self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket,
                Prefix=self.key(under + "/") if under else root,
                PaginationConfig={"PageSize": PAGE_SIZE},
            )
        )
        while True:
            page = self._call("listing", next, pages, None)
            if page is None:
                return
            for obj in page.get("Contents", []):
                key = obj.get("Key", "")
                if key.startswith(root) and is_safe_key(key[len(root) :]):
                    yield key[len(root) :], obj

    def iter_blobs(self, prefix: str) -> Iterator[str]:
        """Keys under ``prefix`` (relative to the store's prefix; "" for everything), streamed in S3's order."""
        return (rel for rel, _ in self.objects(prefix))

    def list_blobs(self, prefix: str) -> list[str]:
        """Keys under ``prefix`` (relative to the store's prefix; "" for everything), sorted; a bucket of any size
        is better walked with :meth:`iter_blobs`."""
        return sorted(self.iter_blobs(prefix))

    def write_index(self, run_id: str | None = None) -> dict:
        """Rebuild ``index.json`` from the bucket, under its lease: a concurrent push is never left out."""
        with self.exclusive(INDEX, run_id) as lease:
            index = build_index(self)
            lease.check()
            self._put(INDEX, json.dumps(index, indent=1, sort_keys=True).encode())
        return index

    def working_copy(self, home: KitHome | None = None) -> LocalStore:
        """The local folder that mirrors this store for runs on this machine."""
        return LocalStore((home or KitHome()).root / "s3cache" / self.bucket / (self.prefix or "_root"))
