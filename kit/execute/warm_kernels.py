"""Warm kernels kept between commands (``mxcompat warm``): a keeper process holds one started kernel per
kernel it was asked for, its imports done, and a step takes it instead of starting one of its own.

A kernel is taken once: its ready file is renamed to the taker's name (the claim is one rename), the taker's
notebook ends it like any kernel it started, and the keeper starts the next ones once no taken kernel runs. The
keeper kills a taken kernel whose taker died, and ends its kernels and itself after ``idle`` seconds without a
claim, on ``mxcompat warm stop``, or on SIGTERM. A kernel is taken only by a process whose kernels would get the
same environment (:func:`fingerprint`): one started under other settings would not be the kernel asked for; and
only under the same :func:`stamp`: a kernel started before its environment was built again or the kit's sources
changed imported what is gone, so the keeper ends it and starts another.

    python -m kit.execute.warm_kernels KIT_HOME IDLE_SECONDS KERNEL [KERNEL ...]   (what ``warm start`` runs)
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from kit.common.artifacts import write_json_atomic
from kit.envs import child_env
from kit.envs.manager import MARKER
from kit.home import KitHome

WARM_DIR = "warm"
KEEPER_FILE = "keeper.json"
READY = ".ready.json"
#: variables a shell sets per folder or terminal: no kernel reads them, and a kernel taken elsewhere is the same
_VOLATILE = ("PWD", "OLDPWD", "SHLVL", "_", "TERM", "COLUMNS", "LINES", "JPY_PARENT_PID")
POLL = 0.05  # seconds between two looks of the keeper at its kernels


def folder(home: KitHome) -> Path:
    return home.root / WARM_DIR


def fingerprint(environ: dict | None = None) -> str:
    """What the kernels a process starts would see of its environment, hashed."""
    env = child_env.for_kernels(dict(os.environ if environ is None else environ))
    items = sorted((k, v) for k, v in env.items() if k not in _VOLATILE)
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]


def stamp(home: KitHome, kernel_name: str) -> str:
    """What a kernel started now would be started from: its kernelspec, its environment's marker (rewritten when
    the environment is built again) and the newest of the kit's sources. A kernel started under another stamp is
    stale: it imported what is no longer there."""
    from kit.home import REPO_ROOT

    spec = home.kernels / kernel_name / "kernel.json"
    parts = [spec.read_bytes() if spec.is_file() else b""]
    try:
        python = Path(json.loads(parts[0])["argv"][0])
        marker = python.parent.parent / MARKER  # <env>/bin/python
        parts.append(marker.read_bytes() if marker.is_file() else b"")
    except (ValueError, KeyError, IndexError, TypeError):
        pass
    newest = max((p.stat().st_mtime_ns for p in (REPO_ROOT / "kit").rglob("*.py")), default=0)
    parts.append(str(newest).encode())
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# -- taking a warm kernel (in the process that runs a step) ------------------------------------------------


def take(home: KitHome, kernel_name: str, memory: int | None = None):
    """A started kernel manager for ``kernel_name`` from the keeper, or None (no keeper, none ready, or kernels
    started under another environment). The caller ends it as it ends any kernel it started."""
    from kit.envs import kernelspecs

    where = folder(home)
    mine = fingerprint()
    for ready in sorted(where.glob(f"{kernel_name}.*{READY}")) if where.is_dir() else ():
        try:
            record = json.loads(ready.read_text())
        except (OSError, ValueError):
            continue
        if record.get("kernel") != kernel_name or record.get("fingerprint") != mine or not _alive(record["pid"]):
            continue
        if record.get("stamp") != stamp(home, kernel_name):  # the environment or the kit changed since it started
            continue
        taken = ready.with_name(ready.name[: -len(READY)] + f".taken-{os.getpid()}.json")
        try:
            os.rename(ready, taken)  # one taker: the others find the file gone
        except OSError:
            continue
        km = kernelspecs.kernel_manager(home, kernel_name, memory)
        km.load_connection_info(dict(record["connection"], key=record["connection"]["key"].encode()))
        km.provisioner = _adopted_provisioner_class()(pid=record["pid"], parent=km)
        km.mxcompat_warm = str(taken)
        return km
    return None


def _adopted_provisioner_class():
    """A provisioner for a kernel another process (the keeper) started: signals by PID, alive until it exits."""
    from jupyter_client.provisioning import KernelProvisionerBase

    class AdoptedProvisioner(KernelProvisionerBase):
        def __init__(self, pid: int, **kw):
            super().__init__(**kw)
            self.pid = pid

        @property
        def has_process(self) -> bool:
            return True

        async def poll(self):
            return None if _alive(self.pid) else 0

        async def wait(self):
            import asyncio

            while _alive(self.pid):
                await asyncio.sleep(0.005)
            return 0

        async def send_signal(self, signum: int) -> None:
            try:
                os.killpg(self.pid, signum)  # the keeper starts each kernel in a session of its own
            except OSError:
                try:
                    os.kill(self.pid, signum)
                except OSError:
                    pass  # it ended

        async def kill(self, restart: bool = False) -> None:
            await self.send_signal(signal.SIGKILL)

        async def terminate(self, restart: bool = False) -> None:
            await self.send_signal(signal.SIGTERM)

        async def launch_kernel(self, cmd, **kwargs):
            raise RuntimeError("a warm kernel is started by its keeper")

        async def cleanup(self, restart: bool = False) -> None:
            pass

    return AdoptedProvisioner


# -- the keeper -----------------------------------------------------------------------------------------------


def read_keeper(home: KitHome) -> dict | None:
    """The running keeper's record ({pid, kernels, idle, started}), or None when none runs."""
    try:
        record = json.loads((folder(home) / KEEPER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and _alive(int(record.get("pid", 0))) else None


def ready_kernels(home: KitHome) -> dict:
    """{kernel name: how many are ready} in the keeper's folder."""
    counts: dict = {}
    for ready in folder(home).glob(f"*{READY}") if folder(home).is_dir() else ():
        name = ready.name[: -len(READY)].rsplit(".", 1)[0]
        counts[name] = counts.get(name, 0) + 1
    return counts


class Keeper:
    """Keeps one ready kernel per name in ``kernels``, in this process (see the module's text)."""

    def __init__(self, home: KitHome, kernels: list[str], idle: float):
        self.home, self.kernels, self.idle = home, list(dict.fromkeys(kernels)), idle
        self.where = folder(home)
        self.held: dict = {}  # ready or taken file stem -> (kernel name, its kernel manager)
        self.count = 0
        self.last_claim = time.monotonic()
        self.stopping = False
        self.stamps = {name: stamp(home, name) for name in self.kernels}
        self.stamped = time.monotonic()

    def run(self) -> None:
        from jupyter_core.utils import run_sync

        other = read_keeper(self.home)
        if other is not None and other.get("pid") != os.getpid():  # its files would be swept from under it
            raise SystemExit(f"a keeper runs already (pid {other['pid']}); `mxcompat warm stop` first")
        self.where.mkdir(parents=True, exist_ok=True)
        self.where.chmod(0o700)  # its files hold the kernels' keys: whoever reads one can run code in a kernel
        for stale in self.where.glob("*.json"):
            stale.unlink(missing_ok=True)  # files of a keeper that died: their kernels died with it
        write_json_atomic(
            str(self.where / KEEPER_FILE),
            {"pid": os.getpid(), "kernels": self.kernels, "idle": self.idle, "started": time.time()},
        )
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        try:
            self._start(*self.kernels)
            self.last_claim = time.monotonic()  # idle from when they are ready
            while not self.stopping and time.monotonic() - self.last_claim < self.idle:
                self._end_stale(run_sync)
                # the next kernels start once no step runs on a taken one: started beside a step, their imports
                # would take the cores from the check a user waits for
                if all(self._ready(stem) for stem in self.held):
                    held = {name for name, _ in self.held.values()}
                    self._start(*[name for name in self.kernels if name not in held])
                self._reap(run_sync)
                time.sleep(POLL)
        finally:
            for stem, (_, km) in list(self.held.items()):
                if self._ready(stem):
                    self._end(run_sync, stem, km)
            # a kernel a step took runs to its notebook's end (it would shut itself down when its parent, this
            # keeper, exits), unless its taker dies first
            while self.held:
                self._reap(run_sync)
                time.sleep(POLL)
            (self.where / KEEPER_FILE).unlink(missing_ok=True)

    def _end_stale(self, run_sync) -> None:
        """End the ready kernels started before their environment or the kit changed (at most once a second)."""
        if time.monotonic() - self.stamped < 1.0:
            return
        self.stamped = time.monotonic()
        self.stamps = {name: stamp(self.home, name) for name in self.kernels}
        for path in self.where.glob(f"*{READY}"):
            stem = path.name[: -len(READY)]
            try:
                stale = json.loads(path.read_text()).get("stamp") != self.stamps.get(self.held[stem][0])
            except (OSError, ValueError, KeyError):
                continue
            if stale:
                self._end(run_sync, stem, self.held[stem][1])

    def _ready(self, stem: str) -> bool:
        return (self.where / (stem + READY)).exists()

    def _start(self, *names: str) -> None:
        """Start a kernel for each of ``names`` (side by side), and write each one's ready file once it answers."""
        from jupyter_core.utils import run_sync

        from kit.envs import kernelspecs

        started = []
        for name in names:
            km = kernelspecs.kernel_manager(self.home, name)
            run_sync(km.start_kernel)(extra_arguments=kernelspecs.prestart_arguments(name))
            started.append((name, km))
        for name, km in started:
            client = km.client()
            client.start_channels()
            try:
                run_sync(client.wait_for_ready)(timeout=180)  # its imports are done: -c runs before it answers
            finally:
                client.stop_channels()
            info = km.get_connection_info()
            info["key"] = info["key"].decode() if isinstance(info["key"], bytes) else info["key"]
            record = {
                "kernel": name,
                "pid": km.provisioner.pid,
                "connection": info,
                "fingerprint": fingerprint(),
                "stamp": self.stamps[name],
            }
            self.count += 1
            stem = f"{name}.{self.count}"
            self.held[stem] = (name, km)
            write_json_atomic(str(self.where / (stem + READY)), record)

    def _reap(self, run_sync) -> None:
        """Ready kernels that died are forgotten (the next is started); taken ones too when they ended, and killed
        when their taker died."""
        for stem, (_, km) in list(self.held.items()):
            alive = run_sync(km.is_alive)()
            if self._ready(stem):
                if not alive:
                    self._end(run_sync, stem, km)
                continue
            taken = list(self.where.glob(f"{stem}.taken-*.json"))
            if taken:
                self.last_claim = time.monotonic()
            taker = int(taken[0].name.rsplit("taken-", 1)[1][: -len(".json")]) if taken else None
            if alive and taker is not None and _alive(taker):
                continue
            self._end(run_sync, stem, km)
            for path in taken:
                path.unlink(missing_ok=True)

    def _end(self, run_sync, stem: str, km) -> None:
        self.held.pop(stem, None)
        (self.where / (stem + READY)).unlink(missing_ok=True)
        try:
            run_sync(km.shutdown_kernel)(now=True)
        except Exception:  # noqa: BLE001 - it may have ended already
            pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    home, idle, kernels = KitHome(argv[0]), float(argv[1]), argv[2:]
    child_env.scrub_for_kernels()
    Keeper(home, kernels, idle).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
