"""An artifact store in an S3 bucket (or any S3-compatible server), with the layout of :mod:`kit.store.local`.

Writers of one artifact go one at a time under its lease (:mod:`kit.store.lease`); under it a push decides:
the newer of the bucket's copy and this one (by the manifest's ``saved_at``) becomes or stays current and
the other, if it holds other weights, is kept under ``.versions/``, so no pushed version is ever lost and
a stale mirror never overwrites a newer retrain. Readers take no lease: a download that finds the
artifact changing under it reads it again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path

from kit.common import artifacts
from kit.common.errors import StoreError, UsageError
from kit.home import KitHome
from kit.store.lease import LEASES, S3Lease
from kit.store.api import newer, same_artifact
from kit.store.layout import INDEX, RUNS_PREFIX, Ref, build_index, check_rel_name, refs_from_manifest_paths
from kit.store.local import LocalStore

#: reads of an artifact that another run is replacing, before giving up
READ_ATTEMPTS = 5


class _Changed(Exception):
    """The artifact changed (or vanished) while it was being downloaded."""


class _Refused:
    def __init__(self, code):
        self.code = code


class S3Store:
    """A store in an S3 bucket (or any S3-compatible server), read anonymously when no credentials exist."""

    #: kernels work on a local mirror (:meth:`working_copy`), pulled before and pushed after
    remote = True

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
            index = json.loads(self.get_bytes(INDEX))
        except (StoreError, ValueError):
            raise StoreError(
                f"{self.url} can neither be listed nor has a readable {INDEX} for anonymous readers",
                hint="push with --public-read (it uploads a public index), or use credentials",
            ) from None
        return refs_from_manifest_paths(f"{e['path']}/{artifacts.MANIFEST}" for e in index.get("artifacts", []))

    def _listed_refs(self) -> list[Ref]:
        rels = self.list_blobs("")
        return refs_from_manifest_paths(
            r for r in rels if not r.startswith((".uploads/", LEASES + "/", RUNS_PREFIX + "/"))
        )

    def get_bytes(self, rel: str) -> bytes:
        body = self._call(f"download of {rel}", self.client.get_object, Bucket=self.bucket, Key=self.key(rel))["Body"]
        return body.read()

    def manifest(self, ref: Ref) -> dict:
        try:
            return json.loads(self.get_bytes(f"{ref.rel}/{artifacts.MANIFEST}"))
        except ValueError as e:
            raise StoreError(f"{self.url}/{ref.rel}/manifest.json is not JSON: {e}") from None

    def get_bytes_or_none(self, rel: str) -> bytes | None:
        """``rel``'s bytes, None when there is no such object (an artifact being replaced lacks its manifest)."""
        answer = self.call_or_code(
            f"download of {rel}", ("NoSuchKey", "404"), self.client.get_object, Bucket=self.bucket, Key=self.key(rel)
        )
        return None if isinstance(answer, str) else answer["Body"].read()

    def manifest_or_none(self, ref: Ref) -> dict | None:
        """The manifest of ``ref``, None when there is none (or it is not JSON: not a complete artifact)."""
        data = self.get_bytes_or_none(f"{ref.rel}/{artifacts.MANIFEST}")
        try:
            return None if data is None else json.loads(data)
        except ValueError:
            return None

    def problems(self, ref: Ref) -> list[str]:
        try:
            manifest = self.manifest(ref)
        except StoreError as e:
            return [f"manifest.json: {e.message}"]
        bad = []
        for name, digest in sorted(manifest.get("files", {}).items()):
            try:
                body = self._call(
                    f"download of {ref.rel}/{name}",
                    self.client.get_object,
                    Bucket=self.bucket,
                    Key=self.key(f"{ref.rel}/{name}"),
                )["Body"]
                h = hashlib.sha256()
                for chunk in body.iter_chunks(1 << 20):  # streamed: parameter files reach 112 MB
                    h.update(chunk)
            except StoreError:
                bad.append(name)
                continue
            if h.hexdigest() != digest:
                bad.append(name)
        return bad

    def _put(self, rel: str, body: bytes) -> None:
        extra = {"ACL": "public-read"} if self.public_read else {}
        self._call(
            f"upload of {rel}", self.client.put_object, Bucket=self.bucket, Key=self.key(rel), Body=body, **extra
        )

    def put(self, ref: Ref, folder: Path, run_id: str | None = None) -> str:
        """Push one artifact under its lease: ``"uploaded"``, ``"unchanged"``, or ``"superseded"`` (the bucket's
        copy is newer and stays; this one, if it holds other weights, is kept under ``.versions/``)."""
        mine = json.loads((Path(folder) / artifacts.MANIFEST).read_text())
        with self.exclusive(Ref(ref.release, ref.model, ref.api).rel, run_id):
            theirs = self.manifest_or_none(ref)
            if theirs is not None and same_artifact(theirs, mine):
                return "unchanged"
            if theirs is None or newer(mine, theirs):
                if ref.version is None and theirs is not None:
                    self._keep_version(ref, theirs)
                self.upload(ref, folder)
                return "uploaded"
            if ref.version is None and mine.get("status") == "saved":
                kept = Ref(ref.release, ref.model, ref.api, artifacts.identity(mine))
                if artifacts.identity(mine) != artifacts.identity(theirs) and self.manifest_or_none(kept) is None:
                    self.upload(kept, folder)
            return "superseded"

    def _keep_version(self, ref: Ref, manifest: dict) -> None:
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
        extra = {"ACL": "public-read"} if self.public_read else {}
        self._call(
            "delete", self.client.delete_object, Bucket=self.bucket, Key=self.key(f"{kept.rel}/{artifacts.MANIFEST}")
        )
        for name in names + [artifacts.MANIFEST]:
            self._call(
                f"archive of {ref.rel}/{name}",
                self.client.copy,
                {"Bucket": self.bucket, "Key": self.key(f"{ref.rel}/{name}")},
                self.bucket,
                self.key(f"{kept.rel}/{name}"),
                ExtraArgs=extra or None,
            )

    def upload(self, ref: Ref, folder: Path) -> None:
        """Upload one artifact: files to temporary keys, then into place, manifest last."""
        manifest = json.loads((folder / artifacts.MANIFEST).read_text())
        names = sorted(manifest.get("files", {}))
        for name in names:
            check_rel_name(name)
        staging = f".uploads/{uuid.uuid4().hex}"
        extra = {"ACL": "public-read"} if self.public_read else {}
        for name in names + [artifacts.MANIFEST]:  # boto3's managed transfer: multipart for big files
            self._call(
                f"upload of {staging}/{name}",
                self.client.upload_file,
                str(folder / name),
                self.bucket,
                self.key(f"{staging}/{name}"),
                ExtraArgs=extra or None,
            )
        # an old manifest goes first: while files are replaced the artifact reads as absent, never as complete
        self._call(
            "delete", self.client.delete_object, Bucket=self.bucket, Key=self.key(f"{ref.rel}/{artifacts.MANIFEST}")
        )
        for name in names + [artifacts.MANIFEST]:  # managed copy: multipart past 5 GB
            self._call(
                f"commit of {ref.rel}/{name}",
                self.client.copy,
                {"Bucket": self.bucket, "Key": self.key(f"{staging}/{name}")},
                self.bucket,
                self.key(f"{ref.rel}/{name}"),
                ExtraArgs=extra or None,
            )
        for name in names + [artifacts.MANIFEST]:
            self._call("cleanup", self.client.delete_object, Bucket=self.bucket, Key=self.key(f"{staging}/{name}"))

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
        manifest_bytes = self.get_bytes_or_none(manifest_key)
        if manifest_bytes is None:
            raise _Changed()  # listed a moment ago: being replaced
        try:
            manifest = json.loads(manifest_bytes)
        except ValueError as e:
            raise StoreError(f"{self.url}/{ref.rel}/manifest.json is not JSON: {e}") from None
        staged = dest.staging(ref)
        try:
            bad = []
            for name, digest in sorted(manifest.get("files", {}).items()):
                check_rel_name(name)
                # boto3's managed transfer (ranged, parallel for big files) into the staging folder, then hashed
                got = self.call_or_code(
                    f"download of {ref.rel}/{name}", ("NoSuchKey", "404"), self.client.download_file,
                    self.bucket, self.key(f"{ref.rel}/{name}"), str(staged / name),
                )  # fmt: skip
                if isinstance(got, str) or artifacts.sha256_file(str(staged / name)) != digest:
                    bad.append(name)
            if bad:
                if self.get_bytes_or_none(manifest_key) != manifest_bytes:
                    raise _Changed()
                raise StoreError(
                    f"refusing {self.url}/{ref.rel}: sha256 mismatch in {', '.join(bad)}",
                    hint="the object was changed after upload; nothing was written locally",
                )
            (staged / artifacts.MANIFEST).write_bytes(manifest_bytes)
            dest.commit(ref, staged)
        finally:
            shutil.rmtree(staged, ignore_errors=True)

    def write_blob(self, rel: str, data: bytes) -> None:
        """A file that is not an artifact (a remote step's outputs under ``.runs/``)."""
        self._put(rel, data)

    def read_blob(self, rel: str) -> bytes:
        return self.get_bytes(rel)

    def list_blobs(self, prefix: str) -> list[str]:
        """Keys under ``prefix`` (relative to the store's prefix; "" for everything), sorted."""
        under = prefix.strip("/")
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.key(under + "/") if under else self.key("")
        )
        keys = self._call("listing", lambda: [o["Key"] for page in pages for o in page.get("Contents", [])])
        return sorted(k[len(self.prefix) + 1 :] if self.prefix else k for k in keys)

    def write_index(self, run_id: str | None = None) -> dict:
        """Rebuild ``index.json`` from the bucket, under its lease: a concurrent push is never left out."""
        with self.exclusive(INDEX, run_id):
            index = build_index(self)
            self._put(INDEX, json.dumps(index, indent=1, sort_keys=True).encode())
        return index

    def working_copy(self, home: KitHome | None = None) -> LocalStore:
        """The local folder that mirrors this store for runs on this machine."""
        return LocalStore((home or KitHome()).root / "s3cache" / self.bucket / (self.prefix or "_root"))
