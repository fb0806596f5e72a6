"""One writer at a time per artifact in an S3 bucket: a lease object taken with a conditional put.

``<prefix>/.leases/<rel>.json`` is created with ``If-None-Match: *``, so of two writers exactly one gets it
(S3 conditional writes: AWS S3 since 2024, MinIO, moto). It names its holder: a random owner token, the run,
the process (pid and start time) and the host's identity (hostname, kernel boot id, PID namespace), so
containers that share a hostname are told apart. The holder renews it every ``ttl/3`` (a heartbeat thread,
``If-Match`` its ETag), re-checks it before each write that matters (:meth:`S3Lease.check`) and deletes it with
``If-Match`` when done. A lease is stale when it expired (``ttl`` seconds after it was last renewed), or when
its host identity is ours in full and its process is gone; a stale lease is taken over with ``If-Match`` its
ETag, so two waiters cannot both take it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import uuid

from kit.common.errors import StoreError

LEASES = ".leases"
#: codes of a conditional write that lost: the object exists or changed (412), or a concurrent one won (409)
LOST = ("PreconditionFailed", "ConditionalRequestConflict")
GONE = ("NoSuchKey", "404")


def _started(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # noqa: BLE001 - gone, or no psutil: unknown
        return None


def _alive(pid: int, started: float | None) -> bool:
    """Whether process ``pid`` (started at ``started``, when known) still runs here; True when it cannot be told."""
    try:
        import psutil
    except ImportError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            pass  # EPERM: it exists
        return True
    try:
        now = psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return False
    except Exception:  # noqa: BLE001 - access denied, a zombie: it exists
        return True
    return not started or abs(now - float(started)) <= 0.5  # another start time: the PID was reused


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


def host_identity() -> dict:
    """What sets this PID space apart from every other, even one with our hostname (another container): the
    hostname, the kernel's boot id and the PID namespace's inode. A part that cannot be read is None."""
    if sys.platform.startswith("linux"):
        boot_id = _read("/proc/sys/kernel/random/boot_id")
        try:
            pid_ns = os.stat("/proc/self/ns/pid").st_ino
        except OSError:
            pid_ns = None
    else:  # no PID namespaces: one PID space per booted kernel
        try:
            import psutil

            boot_id = f"boot-time:{psutil.boot_time():.0f}"
        except Exception:  # noqa: BLE001
            boot_id = None
        pid_ns = "none"
    return {"hostname": socket.gethostname(), "boot_id": boot_id, "pid_ns": pid_ns}


def same_host(holder: dict) -> bool:
    """Whether ``holder`` ran in this very PID space: its host identity is ours in full (a lease of an older
    kit, with a hostname only, or one of ours with a part unreadable, is never taken for ours)."""
    mine = host_identity()
    return None not in mine.values() and holder.get("host_id") == mine


class LeaseBusy(StoreError):
    """Another writer holds the artifact's lease and did not give it up in time."""


class LeaseLost(StoreError):
    """This writer's lease was taken over (it expired unrenewed) or removed: it must write nothing more."""


class S3Lease:
    """``with S3Lease(store, rel, run_id=...)``: hold ``rel``'s lease in ``store``'s bucket for the block."""

    def __init__(self, store, rel: str, *, run_id: str | None = None, ttl: float = 900, wait: float = 300):
        self.store, self.rel, self.run_id, self.ttl, self.wait = store, rel, run_id, ttl, wait
        self.blob = f"{LEASES}/{rel}.json"
        self.key = store.key(self.blob)
        self.owner = uuid.uuid4().hex  # tells this holder from any other, whatever its host says
        self.etag = None
        self.took_over: dict | None = None  # the stale holder this lease replaced
        self.lost: dict | None = None  # who holds it now, once this holder lost it
        self._pid, self._host = os.getpid(), host_identity()
        self._started = _started(self._pid)
        self._taken_at = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _body(self) -> bytes:
        now = time.time()
        return json.dumps(
            {
                "owner": self.owner,
                "host": self._host["hostname"],
                "host_id": self._host,
                "pid": self._pid,
                "started": self._started,
                "run_id": self.run_id,
                "taken_at": self._taken_at or now,
                "renewed_at": now,
                "expires_at": now + self.ttl,
            }  # fmt: skip
        ).encode()

    def _put(self, codes=LOST, **condition) -> bool:
        """Write the lease under ``condition``; False when the condition did not hold."""
        answer = self.store.call_or_code(
            f"lease of {self.rel}", codes, self.store.client.put_object,
            Bucket=self.store.bucket, Key=self.key, Body=self._body(), **condition,
        )  # fmt: skip
        if isinstance(answer, str):
            return False
        self.etag = answer["ETag"]
        return True

    def holder(self) -> tuple[dict | None, str | None]:
        """The lease as written (None when there is none; {} when it is not a lease) and its ETag."""
        answer = self.store.read_object(self.blob, json_blob=True, missing_ok=True)
        if answer is None:
            return None, None
        data, etag = answer
        try:
            holder = json.loads(data)
        except (ValueError, RecursionError):
            return {}, etag  # not a lease: stale (no expiry), taken over
        return (holder if isinstance(holder, dict) else {}), etag

    @staticmethod
    def stale(holder: dict, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        if holder.get("pid") and same_host(holder):
            try:
                if not _alive(int(holder["pid"]), holder.get("started")):
                    return True  # its writer, in this very PID space, is gone
            except (TypeError, ValueError):
                pass
        try:
            return now > float(holder.get("expires_at") or 0)
        except (TypeError, ValueError):
            return True

    def __enter__(self) -> S3Lease:
        deadline = time.monotonic() + self.wait
        pause = 0.05
        while True:
            self._taken_at = time.time()
            if self._put(IfNoneMatch="*"):
                return self._held()
            holder, etag = self.holder()
            if holder is not None and self.stale(holder) and self._put(LOST + GONE, IfMatch=etag):
                self.took_over = holder
                return self._held()
            if time.monotonic() > deadline:
                who = holder or {}
                raise LeaseBusy(
                    f"{self.store.url}/{self.rel} is being written by run {who.get('run_id') or '?'} "
                    f"(pid {who.get('pid', '?')} on {who.get('host', '?')}); waited {self.wait:.0f} s",
                    hint="run again when it is done; a lease whose writer died is taken over at once in its own "
                    f"container or host, elsewhere when it expires ({self.ttl:.0f} s after it was last renewed)",
                )
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _held(self) -> S3Lease:
        self._stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, name=f"lease {self.rel}", daemon=True)
        self._beat.start()
        return self

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self.check()
            except LeaseLost:
                return  # the next check() by the writer says so
            except StoreError:
                continue  # the server is away for now: try again; it expires if it stays away

    def check(self) -> None:
        """Renew the lease (``If-Match`` its ETag): proof that this writer still holds it, for ``ttl`` more
        seconds. :class:`LeaseLost`, naming who holds it now, when it was taken over or removed."""
        with self._lock:
            if self.lost is None and self.etag and not self._put(LOST + GONE, IfMatch=self.etag):
                holder, etag = self.holder()
                if holder and holder.get("owner") == self.owner:
                    self.etag = etag  # our own renewal went through, its answer did not reach us
                    return
                self.lost = holder or {}
            if self.lost is None:
                return
        who = self.lost
        raise LeaseLost(
            f"lost the lease of {self.store.url}/{self.rel}: "
            + (
                f"it is now held by run {who.get('run_id') or '?'} (pid {who.get('pid', '?')} on "
                f"{who.get('host', '?')})"
                if who
                else "it was removed"
            )
            + "; stopped before writing anything more",
            hint=f"it expired unrenewed ({self.ttl:.0f} s): was the server unreachable or this process paused? "
            "push again once that run is done",
        )

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=60)
            self._beat = None
        with self._lock:
            if not self.etag:
                return
            try:  # If-Match: a lease taken over after it expired is the new holder's, not ours to delete
                self.store.call_or_code(
                    f"release of the lease of {self.rel}", LOST + GONE, self.store.client.delete_object,
                    Bucket=self.store.bucket, Key=self.key, IfMatch=self.etag,
                )  # fmt: skip
            except StoreError:
                pass  # the server went away: the lease is stale here at once, elsewhere when it expires
            self.etag = None
