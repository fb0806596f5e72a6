#!/usr/bin/env python
"""Soak: the matrix run again and again with a fault injected each time, checked after each run.

Each run picks the next fault kind (a seeded shuffle, so every kind comes round), injects it during
or before the run, then --resume where the run was interrupted, and checks:

  lost records     records the uninterrupted first run had that this run lacks after resume (must be 0)
  silent passes    a damaged artifact whose cell still came out identical/close (must be 0)
  strays           a process the run started (its workers, kernels) still alive 15 s after it ended (must be 0)
  store            `mxcompat store verify` passes once the damage is undone

The S3 faults run the matrix on an S3 store (moto in server mode, seeded from the local store): the
server killed before a run and brought back after it failed (it refuses before starting anything, so the
same command is run again), paused (SIGSTOP) while the run pulls, or
killed mid-run and restarted with its objects (a durable server's restart), each then --resume.

A hostile store's faults edit one artifact as someone else's store may be (traversing names, an empty file
list, deep JSON, a .params or reference.npz declaring terabytes, hashes made to match) and also check that
nothing beside the store was touched; a hung kernel is stopped by --cell-timeout (that cell alone) or
--step-timeout (the step broken with that cause, then --resume); a webhook that redirects must not be
reported posted, nor its URL printed.

Bounded by --runs N or --minutes T, whichever comes first. Needs the --releases' environments built
(make demo builds them) and, for the tmpfs faults, root (they are counted as not tried elsewhere).

    .venv/bin/python bench/soak.py --runs 30 [--releases 1.0.0.post4,1.9.1] [--models mlp,lenet]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import s3_server  # noqa: E402  (bench/, beside this script)

sys.path.insert(0, str(REPO / "tests"))
import hostile  # noqa: E402  (tests/hostile.py: the hostile store's edits)

from kit.common import artifacts  # noqa: E402
from kit.home import KitHome  # noqa: E402

PASSING = ("identical", "close")


class Soak:
    def __init__(self, args, work: Path):
        self.args, self.work = args, work
        self.home = KitHome()
        self.store, self.runs = work / "store", work / "runs"
        self.expected: set[tuple] = set()
        self.results: list[dict] = []
        self.moto: subprocess.Popen | None = None
        self.s3_url = "s3://soak/baselines"

    # --- running the kit -------------------------------------------------------------------------
    def cli(self, *args, store=None, timeout=900, env=None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "kit", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
            env=dict(os.environ, MXCOMPAT_HOME=str(self.home.root), **(env or {})),
        )  # fmt: skip

    def run_args(self, run_id: str, store: Path | str | None = None) -> list[str]:
        return ["run", "--runs-dir", str(self.runs), "--run-id", run_id, "--save", self.args.releases,
                "--models", self.args.models, "--store", str(store or self.store)]  # fmt: skip

    def start(self, run_id: str, store: Path | str | None = None) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "kit", *self.run_args(run_id, store)], cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            env=dict(os.environ, MXCOMPAT_HOME=str(self.home.root)),
        )  # fmt: skip

    def records(self, run_id: str) -> dict[tuple, dict]:
        out = {}
        for path in (self.runs / run_id / "records").glob("[!.]*.json"):
            rec = json.loads(path.read_text())
            out[(rec["saved_with"], rec["model"], rec["api"], rec["loaded_with"], rec.get("archived"))] = rec
        return out

    # --- watching what a run starts ----------------------------------------------------------------
    @staticmethod
    def watch(proc: subprocess.Popen, seen: dict, until) -> None:
        """Collect ``proc``'s descendants into ``seen`` until ``until()`` or it ends."""
        while proc.poll() is None and not until():
            try:
                for child in psutil.Process(proc.pid).children(recursive=True):
                    seen.setdefault(child.pid, child)
            except psutil.Error:
                pass
            time.sleep(0.1)

    @staticmethod
    def strays(seen: dict) -> list[str]:
        _, alive = psutil.wait_procs(list(seen.values()), timeout=15)
        out = []
        for p in alive:
            try:
                out.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
                p.kill()  # counted; not left to the next run
            except psutil.Error:
                pass
        return out

    def interrupted(self, run_id: str, how, store=None, at_start: bool = False) -> dict:
        """Start a run, interrupt it with ``how(proc, seen)`` once it has written a record (``at_start``: at
        once), resume it."""
        proc, seen = self.start(run_id, store), {}
        deadline = time.monotonic() + 300
        if not at_start:
            self.watch(proc, seen, lambda: bool(self.records(run_id)) or time.monotonic() > deadline)
            time.sleep(random.uniform(0.0, 1.5))
        self.watch(proc, seen, lambda: True)
        hit = how(proc, seen)
        until = time.monotonic() + 120
        self.watch(proc, seen, lambda: time.monotonic() > until)  # what it starts after the fault, too
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        strays = self.strays(seen)
        resumed = self.cli("run", "--runs-dir", str(self.runs), "--resume", run_id)
        return {"hit": hit, "strays": strays, "exit": resumed.returncode, "tail": resumed.stdout[-300:]}

    # --- an S3 store -------------------------------------------------------------------------------
    def s3_up(self, objects: dict | None = None) -> None:
        """(Re)start the S3 server on its port; ``objects`` ({key: bytes}) restored into its bucket."""
        import boto3

        port = int(os.environ["AWS_ENDPOINT_URL_S3"].rsplit(":", 1)[1]) if self.moto else None  # the same one
        self.moto, aws = s3_server.start(port)
        os.environ.update(aws)
        client = boto3.client("s3")
        client.create_bucket(Bucket="soak")
        for key, body in (objects or {}).items():
            client.put_object(Bucket="soak", Key=key, Body=body)

    def s3_down(self) -> dict:
        """Stop the S3 server; what its bucket held (restored by a restart, as a durable server keeps it)."""
        import boto3

        client, objects = boto3.client("s3"), {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket="soak"):
            for o in page.get("Contents", []):
                objects[o["Key"]] = client.get_object(Bucket="soak", Key=o["Key"])["Body"].read()
        self.moto.kill()
        self.moto.wait()
        return objects

    def s3_seed(self) -> None:
        shutil.rmtree(self.home.root / "s3cache" / "soak", ignore_errors=True)  # an earlier soak's mirror
        self.s3_up()
        pushed = self.cli("store", "push", self.s3_url, "--from", str(self.store))
        if pushed.returncode != 0:
            raise SystemExit(f"seeding the S3 store failed:\n{pushed.stdout}{pushed.stderr}")

    def fault_s3_down_at_start(self, run_id):
        """The server is gone when the run starts: a clear failure, then --resume once it is back."""
        objects = self.s3_down()
        proc = self.cli(*self.run_args(run_id, store=self.s3_url))
        named = "is the endpoint up" in proc.stdout + proc.stderr
        self.s3_up(objects)
        if (self.runs / run_id).exists():
            how, resumed = "--resume", self.cli("run", "--runs-dir", str(self.runs), "--resume", run_id)
        else:  # refused before anything was started: the same command again
            how, resumed = "the same command", self.cli(*self.run_args(run_id, store=self.s3_url))
        silent = [] if proc.returncode != 0 and named else [f"the run without its S3 server exited {proc.returncode}"
                                                            " without naming the endpoint"]  # fmt: skip
        return {"hit": "S3 server down at the start", "first_exit": proc.returncode, "cause_named": named,
                "recovered_by": how, "exit": resumed.returncode, "silent": silent, "s3": True}  # fmt: skip

    def fault_s3_paused(self, run_id):
        def how(proc, seen):
            os.kill(self.moto.pid, signal.SIGSTOP)
            time.sleep(8)
            os.kill(self.moto.pid, signal.SIGCONT)
            return "S3 server paused (SIGSTOP) 8 s as the run started"

        return dict(self.interrupted(run_id, how, store=self.s3_url, at_start=True), s3=True)

    def fault_s3_restart_mid_run(self, run_id):
        def how(proc, seen):
            objects = self.s3_down()
            time.sleep(2)
            self.s3_up(objects)
            return "S3 server killed mid-run and restarted 2 s later with its objects"

        return dict(self.interrupted(run_id, how, store=self.s3_url), s3=True)

    # --- the faults --------------------------------------------------------------------------------
    def _signal_cli(self, sig):
        def how(proc, seen):
            if proc.poll() is None:
                os.killpg(proc.pid, sig) if sig == signal.SIGINT else proc.send_signal(sig)
                return f"signal {sig.name} to the CLI"
            return "the run had ended"

        return how

    @staticmethod
    def _kill_child(match: str):
        def how(proc, seen):
            for p in list(seen.values()):
                try:
                    if match in " ".join(p.cmdline()):
                        p.kill()
                        return f"SIGKILL to {match} {p.pid}"
                except psutil.Error:
                    continue
            return f"no {match} was running"

        return how

    def fault_kill_cli(self, run_id):
        return self.interrupted(run_id, self._signal_cli(signal.SIGKILL))

    def fault_sigterm_cli(self, run_id):
        return self.interrupted(run_id, self._signal_cli(signal.SIGTERM))

    def fault_ctrl_c(self, run_id):
        return self.interrupted(run_id, self._signal_cli(signal.SIGINT))

    def fault_kill_kernel(self, run_id):
        return self.interrupted(run_id, self._kill_child("kit.kernel.runtime.kernel_start"))  # how kit kernels start

    def fault_kill_worker(self, run_id):
        return self.interrupted(run_id, self._kill_child("multiprocessing.spawn"))

    def _damage(self, run_id, name: str, damage) -> dict:
        """Damage one file of one artifact, run, expect its cells not to pass, then put it back."""
        refs = sorted(p.parent for p in self.store.glob(f"*/*/*/{artifacts.MANIFEST}"))
        refs = [r for r in refs if json.loads((r / artifacts.MANIFEST).read_text()).get("status") == "saved"]
        folder = random.choice(refs)
        backup = self.work / "backup"
        shutil.rmtree(backup, ignore_errors=True)
        shutil.copytree(folder, backup)
        manifest = json.loads((folder / artifacts.MANIFEST).read_text())
        target = folder / (
            name if name in manifest["files"] or name == artifacts.MANIFEST else sorted(manifest["files"])[0]
        )
        damage(target)
        proc = self.cli(*self.run_args(run_id))
        release, model, api = folder.relative_to(self.store).parts
        hit = [r for k, r in self.records(run_id).items() if k[:3] == (release, model, api) and not k[4]]
        silent = [f"{k}" for k in [(r["saved_with"], r["model"], r["api"], r["loaded_with"]) for r in hit
                                   if r["verdict"] in PASSING]]  # fmt: skip
        shutil.rmtree(folder)
        shutil.copytree(backup, folder)
        return {"hit": f"{target.relative_to(self.store)}", "exit": proc.returncode, "silent": silent,
                "damaged_cells": len(hit), "verdicts": sorted({r["verdict"] for r in hit})}  # fmt: skip

    def fault_truncate(self, run_id):
        return self._damage(run_id, "", lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]))

    def fault_flip_bytes(self, run_id):
        def flip(p):
            data = bytearray(p.read_bytes())
            mid = len(data) // 2
            data[mid : mid + 16] = b"\x7f" * 16
            p.write_bytes(bytes(data))

        return self._damage(run_id, "", flip)

    def fault_empty_reference(self, run_id):
        return self._damage(run_id, artifacts.REFERENCE, lambda p: p.write_bytes(b""))

    def fault_bad_manifest(self, run_id):
        return self._damage(run_id, artifacts.MANIFEST, lambda p: p.write_text("{not json"))

    def _hostile(self, run_id, what: str, edit) -> dict:
        """Edit one artifact as a store someone else wrote may be (``edit(folder)``, hashes made to match where
        a hash would give it away), run, expect its cells not to pass and nothing beside the store touched."""
        outside = self.work / "outside"
        outside.mkdir(exist_ok=True)
        (outside / "outside.txt").write_text("nothing may touch this")
        before = hostile.snapshot(outside)
        outcome = self._damage(run_id, artifacts.MANIFEST, lambda manifest_path: edit(manifest_path.parent))
        if hostile.snapshot(outside) != before or any(p.name != "outside.txt" for p in outside.iterdir()):
            outcome["silent"].append(f"{what}: a file beside the store was touched")
        outcome["hit"] = f"{what}: {outcome['hit']}"
        return outcome

    def fault_hostile_names(self, run_id):
        def edit(folder):
            manifest = json.loads((folder / artifacts.MANIFEST).read_text())
            first = sorted(manifest["files"])[0]
            manifest["files"]["../../../outside/outside.txt"] = manifest["files"].pop(first)
            load = manifest.get("load") or {}
            for key in ("param_file", "symbol_file"):
                if key in load:
                    load[key] = "../../../outside/" + key
            (folder / artifacts.MANIFEST).write_text(json.dumps(manifest))

        return self._hostile(run_id, "traversing names", edit)

    def fault_no_files(self, run_id):
        def edit(folder):
            manifest = json.loads((folder / artifacts.MANIFEST).read_text())
            manifest["files"] = {}
            (folder / artifacts.MANIFEST).write_text(json.dumps(manifest))

        return self._hostile(run_id, "a manifest that lists no files", edit)

    def fault_deep_json(self, run_id):
        return self._hostile(run_id, "a manifest nested too deep", lambda f: (f / artifacts.MANIFEST).write_text(
            "[" * 200000 + "]" * 200000))  # fmt: skip

    def fault_huge_params(self, run_id):
        def edit(folder):
            params = sorted(folder.glob("*.params"))[0]
            hostile.huge_first_array(params)
            hostile.rehash(folder, params.name)

        return self._hostile(run_id, "a .params declaring 2**40 rows", edit)

    def fault_npz_bomb(self, run_id):
        def edit(folder):
            hostile.npz_declaring(folder / artifacts.REFERENCE)
            hostile.rehash(folder, artifacts.REFERENCE)

        return self._hostile(run_id, "a reference.npz declaring 4 TB", edit)

    def fault_hung_cell(self, run_id):
        """A kernel that stops answering in one cell: that cell times out, the others are checked."""
        proc = self.cli(
            *self.run_args(run_id), "--cell-timeout", "10", env={"MXCOMPAT_FAULT": "hang:lenet/export:infer"}
        )
        hung = [r for r in self.records(run_id).values() if r["model"] == "lenet" and r["api"] == "export"]
        silent = [f"{r['saved_with']}->{r['loaded_with']}" for r in hung if r.get("error_type") != "CellTimeout"]
        return {"hit": "a kernel hung inferring lenet/export (--cell-timeout 10)", "exit": proc.returncode,
                "silent": silent, "timed_out_cells": len(hung)}  # fmt: skip

    def fault_hung_step(self, run_id):
        """A step that runs past its time: broken with that cause, then --resume (no fault) completes the run."""
        first = self.cli(*self.run_args(run_id), "--step-timeout", "30",
                         env={"MXCOMPAT_FAULT": "hang:mlp/export:infer"})  # fmt: skip
        named = "ran past its time limit of 30s" in first.stdout
        resumed = self.cli("run", "--runs-dir", str(self.runs), "--resume", run_id, "--step-timeout", "3600")
        silent = [] if first.returncode == 3 and named else ["a step past its time was not named"]
        return {"hit": "a kernel hung in a step (--step-timeout 30), then --resume", "first_exit": first.returncode,
                "exit": resumed.returncode, "cause_named": named, "silent": silent}  # fmt: skip

    def fault_redirecting_webhook(self, run_id):
        """The run's webhook answers 301: the report is refused, never said to be posted."""
        import threading
        from http.server import BaseHTTPRequestHandler, HTTPServer

        class Redirect(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                self.send_response(301)
                self.send_header("Location", "/elsewhere")
                self.end_headers()

            do_GET = do_POST  # noqa: N815

            def log_message(self, *a):
                pass

        proc = self.cli(*self.run_args(run_id))
        server = HTTPServer(("127.0.0.1", 0), Redirect)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{server.server_port}/hooks/T000/SECRET"
            report = self.cli("report", run_id, "--runs-dir", str(self.runs), "--webhook", url)
        finally:
            server.shutdown()
        said = report.stdout + report.stderr
        silent = [] if report.returncode == 3 and "posted" not in report.stdout else ["a redirect was reported posted"]
        if "SECRET" in said:
            silent.append("the webhook URL was printed")
        return {"hit": "a webhook that answers 301", "exit": proc.returncode, "report_exit": report.returncode,
                "silent": silent}  # fmt: skip

    def fault_leftovers(self, run_id):
        """A crashed writer's staging folder, an old-version folder and a stale lock beside an artifact."""
        folder = sorted(p.parent for p in self.store.glob(f"*/*/*/{artifacts.MANIFEST}"))[0]
        (folder.parent / f".{folder.name}.tmp-99999").mkdir(exist_ok=True)
        (folder.parent / f".{folder.name}.old-99999").mkdir(exist_ok=True)
        (folder.parent / f".{folder.name}.lock").write_text("")
        proc = self.cli(*self.run_args(run_id))
        return {"hit": f"leftovers beside {folder.relative_to(self.store)}", "exit": proc.returncode}

    def _tmpfs(self, size: str) -> Path | None:
        mount = Path(tempfile.mkdtemp(prefix="soak-tmpfs-"))
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True).returncode != 0:  # fmt: skip
            mount.rmdir()
            return None
        return mount

    def fault_full_disk(self, run_id):
        mount = self._tmpfs("128k")
        if mount is None:
            return {"skipped": "cannot mount a tmpfs here"}
        try:
            proc = self.cli(*self.run_args(run_id, store=mount))
            said = "ENOSPC" in proc.stdout
            # a store of its own, empty and too small: the run is to break naming ENOSPC, not to hold records
            return {"hit": "store on a 128 KiB tmpfs", "exit": proc.returncode, "cause_named": said,
                    "expect_records": False,
                    "silent": [] if proc.returncode == 3 and said else ["a full store was not named"]}  # fmt: skip
        finally:
            subprocess.run(["umount", "-l", str(mount)])

    def fault_read_only_store(self, run_id):
        mount = self._tmpfs("1m")
        if mount is None:
            return {"skipped": "cannot mount a tmpfs here"}
        try:
            subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
            proc = self.cli(*self.run_args(run_id, store=mount))
            ok = proc.returncode == 2 and "EROFS" in proc.stderr and not (self.runs / run_id).exists()
            return {"hit": "read-only store", "exit": proc.returncode, "expect_records": False,
                    "silent": [] if ok else ["a read-only store was not refused up front"]}  # fmt: skip
        finally:
            subprocess.run(["umount", "-l", str(mount)])

    def fault_concurrent_retrain(self, run_id):
        """A --retrain run on the same store at the same time as this run."""
        other = subprocess.Popen(
            [sys.executable, "-m", "kit", *self.run_args(run_id + "-retrain"), "--retrain"], cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=dict(os.environ, MXCOMPAT_HOME=str(self.home.root)),
        )  # fmt: skip
        proc = self.cli(*self.run_args(run_id))
        other.wait(timeout=900)
        corrupt = [k for k, r in self.records(run_id).items() if r["verdict"] == "corrupt"]
        return {"hit": "a --retrain run beside it", "exit": proc.returncode, "other_exit": other.returncode,
                "silent": [], "corrupt_seen": len(corrupt)}  # fmt: skip

    def fault_kill_during_summary(self, run_id):
        def how(proc, seen):
            deadline = time.monotonic() + 120
            while proc.poll() is None and time.monotonic() < deadline:
                manifest = self.runs / run_id / "run.json"
                steps = json.loads(manifest.read_text())["steps"] if manifest.exists() else {}
                if steps and all(e["status"] != "pending" for i, e in steps.items() if i != "summary"):
                    proc.kill()
                    return "SIGKILL to the CLI once only the summary was left"
                time.sleep(0.05)
            return "the run had ended"

        return self.interrupted(run_id, how)

    FAULTS = [
        "kill_cli", "sigterm_cli", "ctrl_c", "kill_kernel", "kill_worker", "kill_during_summary", "truncate",
        "flip_bytes", "empty_reference", "bad_manifest", "leftovers", "full_disk", "read_only_store",
        "concurrent_retrain", "s3_down_at_start", "s3_paused", "s3_restart_mid_run",
        "hostile_names", "no_files", "deep_json", "huge_params", "npz_bomb", "hung_cell", "hung_step",
        "redirecting_webhook",
    ]  # fmt: skip

    # --- the loop ----------------------------------------------------------------------------------
    def baseline(self) -> None:
        proc = self.cli(*self.run_args("baseline"))
        if proc.returncode not in (0, 1):
            raise SystemExit(f"the first, uninterrupted run failed ({proc.returncode}):\n{proc.stdout[-2000:]}")
        self.expected = set(self.records("baseline"))
        print(f"baseline: {len(self.expected)} records", flush=True)
        self.s3_seed()

    def check(self, run_id: str, outcome: dict) -> dict:
        if outcome.get("skipped"):
            return outcome
        if outcome.get("expect_records", True):
            got = set(self.records(run_id))
            outcome["lost"] = len(self.expected - got)
        else:
            outcome["lost"] = 0
        outcome.setdefault("silent", [])
        outcome.setdefault("strays", [])
        verify = self.cli("store", "verify", str(self.store))
        if outcome.get("s3"):
            remote = self.cli("store", "verify", self.s3_url)
            verify = verify if verify.returncode else remote
        outcome["store_verifies"] = verify.returncode == 0
        if not outcome["store_verifies"]:
            outcome["verify_tail"] = verify.stdout[-500:]
        return outcome

    def go(self) -> dict:
        try:
            return self._go()
        finally:
            if self.moto is not None:
                self.moto.kill()
                self.moto.wait()

    def _go(self) -> dict:
        started = time.monotonic()
        self.baseline()
        order = []
        while len(self.results) < self.args.runs and time.monotonic() - started < self.args.minutes * 60:
            if not order:
                order = [f for f in self.FAULTS if not self.args.faults or f in self.args.faults.split(",")]
                random.shuffle(order)
            kind = order.pop()
            run_id = f"soak-{len(self.results):03d}-{kind.replace('_', '-')}"
            t = time.monotonic()
            outcome = self.check(run_id, getattr(self, f"fault_{kind}")(run_id))
            outcome.update(kind=kind, run_id=run_id, seconds=round(time.monotonic() - t, 1))
            self.results.append(outcome)
            flags = f"lost {outcome.get('lost', '-')}, silent {len(outcome.get('silent', []))}, "
            flags += f"strays {len(outcome.get('strays', []))}, store {'ok' if outcome.get('store_verifies') else '?'}"
            print(f"[{len(self.results)}] {kind}: {outcome.get('hit', outcome.get('skipped'))}; {flags} "
                  f"({outcome['seconds']} s)", flush=True)  # fmt: skip
        tried = [r for r in self.results if not r.get("skipped")]
        return {
            "kind": "soak",
            "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "releases": self.args.releases.split(","),
            "models": self.args.models.split(","),
            "seed": self.args.seed,
            "baseline_records": len(self.expected),
            "runs": len(tried),
            "fault_kinds_tried": sorted({r["kind"] for r in tried}),
            "fault_kinds_skipped": sorted({r["kind"] for r in self.results if r.get("skipped")}),
            "records_lost": sum(r["lost"] for r in tried),
            "silent_passes": sum(len(r["silent"]) for r in tried),
            "strays": sum(len(r["strays"]) for r in tried),
            "store_failed_to_verify": sum(1 for r in tried if not r["store_verifies"]),
            "wall_seconds": round(time.monotonic() - started, 1),
            "results": self.results,
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--releases", default="1.0.0.post4,1.9.1")
    parser.add_argument("--models", default="mlp,lenet")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--faults", help="only these fault kinds, comma-separated (default: all)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    random.seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        summary = Soak(args, Path(tmp)).go()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = args.out or REPO / "bench" / "results" / f"soak-{stamp}.json"
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print(
        f"{summary['runs']} runs, {len(summary['fault_kinds_tried'])} fault kinds: {summary['records_lost']} "
        f"records lost, {summary['silent_passes']} silent passes, {summary['strays']} strays, "
        f"{summary['store_failed_to_verify']} store verify failures -> {out}"
    )
    bad = summary["records_lost"] or summary["silent_passes"] or summary["strays"] or summary["store_failed_to_verify"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
