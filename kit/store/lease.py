"""One writer at a time per artifact in an S3 bucket: a lease object taken with a conditional put.

``<prefix>/.leases/<rel>.json`` is created with ``If-None-Match: *``, so of two writers exactly one gets it
(S3 conditional writes: AWS S3 since 2024, MinIO, moto). The holder deletes it with ``If-Match`` its ETag.
A lease is stale when its holder ran on this host and is gone, or when it expired (``ttl`` seconds after it
was taken); a stale lease is taken over with ``If-Match`` its ETag, so two waiters cannot both take it.
"""

from __future__ import annotations

import json
import os
import socket
import time

from kit.common.errors import StoreError

LEASES = ".leases"
#: codes of a conditional write that lost: the object exists or changed (412), or a concurrent one won (409)
LOST = ("PreconditionFailed", "ConditionalRequestConflict")


def _started(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # noqa: BLE001 - gone, or no psutil: unknown
        return None


class LeaseBusy(StoreError):
    """Another writer holds the artifact's lease and did not give it up in time."""


class S3Lease:
    """``with S3Lease(store, rel, run_id=...)``: hold ``rel``'s lease in ``store``'s bucket for the block."""

    def __init__(self, store, rel: str, *, run_id: str | None = None, ttl: float = 900, wait: float = 300):
        self.store, self.rel, self.run_id, self.ttl, self.wait = store, rel, run_id, ttl, wait
        self.key = store.key(f"{LEASES}/{rel}.json")
        self.etag = None
        self.took_over: dict | None = None  # the stale holder this lease replaced

    def _body(self) -> bytes:
        now = time.time()
        pid = os.getpid()
        return json.dumps(
            {
                "host": socket.gethostname(),
                "pid": pid,
                "started": _started(pid),
                "run_id": self.run_id,
                "taken_at": now,
                "expires_at": now + self.ttl,
            }  # fmt: skip
        ).encode()

    def _put(self, **condition) -> bool:
        """Write the lease under ``condition``; False when the condition did not hold."""
        answer = self.store.call_or_code(
            f"lease of {self.rel}", LOST, self.store.client.put_object,
            Bucket=self.store.bucket, Key=self.key, Body=self._body(), **condition,
        )  # fmt: skip
        if isinstance(answer, str):
            return False
        self.etag = answer["ETag"]
        return True

    def holder(self) -> tuple[dict | None, str | None]:
        """The lease as written (None when there is none or it cannot be read) and its ETag."""
        answer = self.store.call_or_code(
            f"lease of {self.rel}", ("NoSuchKey", "404"), self.store.client.get_object,
            Bucket=self.store.bucket, Key=self.key,
        )  # fmt: skip
        if isinstance(answer, str):
            return None, None
        try:
            return json.loads(answer["Body"].read()), answer["ETag"]
        except ValueError:
            return {}, answer["ETag"]  # unreadable: stale once it is old (below)

    @staticmethod
    def stale(holder: dict, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        if holder.get("host") == socket.gethostname() and holder.get("pid"):
            started = _started(holder["pid"])
            if started is None or (holder.get("started") and abs(started - holder["started"]) > 0.5):
                return True  # its writer, on this host, is gone
        return now > float(holder.get("expires_at") or 0)

    def __enter__(self) -> S3Lease:
        deadline = time.monotonic() + self.wait
        pause = 0.05
        while True:
            if self._put(IfNoneMatch="*"):
                return self
            holder, etag = self.holder()
            if holder is not None and self.stale(holder) and self._put(IfMatch=etag):
                self.took_over = holder
                return self
            if time.monotonic() > deadline:
                who = holder or {}
                raise LeaseBusy(
                    f"{self.store.url}/{self.rel} is being written by run {who.get('run_id') or '?'} "
                    f"(pid {who.get('pid', '?')} on {who.get('host', '?')}); waited {self.wait:.0f} s",
                    hint="run again when it is done; a lease whose writer died is taken over at once on its own "
                    f"host, elsewhere when it expires ({self.ttl:.0f} s after it was taken)",
                )
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def __exit__(self, *exc) -> None:
        if not self.etag:
            return
        try:  # If-Match: a lease taken over after it expired is the new holder's, not ours to delete
            self.store.call_or_code(
                f"release of the lease of {self.rel}", LOST + ("NoSuchKey", "404"), self.store.client.delete_object,
                Bucket=self.store.bucket, Key=self.key, IfMatch=self.etag,
            )  # fmt: skip
        except StoreError:
            pass  # the server went away: the lease is stale to this host at once, to others when it expires
        self.etag = None
