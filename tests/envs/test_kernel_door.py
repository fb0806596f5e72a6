"""The one door to kernel-side programs and the kernels the kit starts: the scrubbed environment, one exit-code
protocol, a timeout that ends the program, an address-space limit (host-only: the host's Python plays the
kernel-side program)."""

from __future__ import annotations

import resource
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from kit.common.errors import KitError, UsageError
from kit.envs import kernel_process, kernelspecs, limits
from kit.home import KitHome

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """
import json, os, resource, sys, time
sys.path.insert(0, {repo!r})
from kit.common.errors import KitError, UsageError
from kit.common.main_protocol import serve

def handle(request):
    what = request["do"]
    if what == "usage":
        raise UsageError("bad input", hint="do this")
    if what == "fail":
        raise KitError("it broke", hint="look there")
    if what == "crash":
        print("noise on stdout")
        raise RuntimeError("native crash")
    if what == "hang":
        open(request["pidfile"], "w").write(str(os.getpid()))
        time.sleep(600)
    print("MXNet prints too")
    return {{"aws": sorted(k for k in os.environ if k.startswith("AWS_")),
             "as_limit": resource.getrlimit(resource.RLIMIT_AS)[0], "echo": request}}

sys.exit(serve(handle))
"""


@pytest.fixture
def program(tmp_path, monkeypatch):
    """A kernel-side program (``python -m probe_program``, found in its folder, as kit.kernel.X is through the
    environment's .pth), run with AWS credentials in the host's environment."""
    (tmp_path / "probe_program.py").write_text(PROGRAM.format(repo=str(REPO)))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "host-secret")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "host-key")

    def run(request, **kw):
        kw.setdefault("what", "the probe program")
        return kernel_process.run_kernel_main(sys.executable, "probe_program", request, cwd=tmp_path, **kw)

    return run


def test_answer_without_credentials_and_with_a_memory_limit(program):
    answer = program({"do": "answer", "x": [1, 2]}, memory=3 << 30)
    assert answer["echo"] == {"do": "answer", "x": [1, 2]}  # stray prints are not the answer
    assert answer["aws"] == []  # the host's credentials never reach a kernel-side program
    assert answer["as_limit"] == 3 << 30


def test_default_memory_limit_is_a_share_of_the_machine(program):
    expected = max(limits.KERNEL_MEMORY_FLOOR, int(limits.KERNEL_MEMORY_SHARE * limits.machine_memory()))
    assert program({"do": "answer"})["as_limit"] == expected


def test_exit_codes_become_the_kits_errors(program):
    with pytest.raises(UsageError) as usage:
        program({"do": "usage"})
    assert (usage.value.message, usage.value.hint, usage.value.exit_code) == ("bad input", "do this", 2)
    with pytest.raises(KitError) as failed:
        program({"do": "fail"})
    assert type(failed.value) is KitError and failed.value.message == "it broke" and failed.value.exit_code == 3
    with pytest.raises(kernel_process.KernelProgramError, match=r"(?s)failed \(exit 1\).*RuntimeError: native crash"):
        program({"do": "crash"})


def test_timeout_stops_the_program(program, tmp_path):
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    with pytest.raises(kernel_process.KernelProgramError, match=r"no answer within 2s; it was stopped"):
        program({"do": "hang", "pidfile": str(pidfile)}, timeout=2)
    assert time.monotonic() - started < 30
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def test_no_host_module_starts_a_kernel_side_program_by_itself():
    """Every ``python -m kit.kernel.X`` goes through kit.envs.kernel_process."""
    offenders = []
    for path in (REPO / "kit").rglob("*.py"):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("kit/kernel/") or rel == "kit/envs/kernel_process.py":
            continue
        text = path.read_text()
        if '"kit.kernel.' in text and ("subprocess" in text or "Popen" in text):
            offenders.append(rel)
    assert offenders == []


def test_kernel_memory_values():
    assert limits.kernel_memory("8G") == 8 << 30
    assert limits.kernel_memory("512M") == 512 << 20
    assert limits.kernel_memory("50%") == int(0.5 * limits.machine_memory())
    for bad in ("lots", "100K", "-1G"):
        with pytest.raises(UsageError):
            limits.kernel_memory(bad)
    with pytest.raises(UsageError, match="--cell-timeout must be a number of seconds above 0"):
        limits.Limits(cell_timeout=0)


def _notebook(path: Path, source: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(source))]
    nbformat.write(nb, path)
    return path


def test_kernels_the_kit_starts_are_scrubbed_and_limited(tmp_path, monkeypatch):
    """Whoever starts a kernel (a step, investigate in the CLI's own process), it gets no AWS credentials and
    its address-space limit; past the limit an allocation fails in the kernel, not on the machine."""
    from kit.execute.notebooks import run_notebook

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "host-secret")
    home = KitHome(tmp_path / "home")
    kernel = kernelspecs.ensure_host_kernel(home)
    out = tmp_path / "seen.txt"
    nb = _notebook(
        tmp_path / "probe.ipynb",
        f"""
        import os, resource
        import numpy as np
        try:
            np.ones(3 << 30, dtype=np.uint8)
            allocated = "yes"
        except MemoryError:
            allocated = "MemoryError"
        open({str(out)!r}, "w").write("%s|%s|%s" % (os.environ.get("AWS_SECRET_ACCESS_KEY"),
                                      resource.getrlimit(resource.RLIMIT_AS)[0], allocated))
        """,
    )
    pids = []
    run_notebook(nb, tmp_path / "ran.ipynb", kernel, {}, home=home, memory=2 << 30, on_kernel=pids.append)
    secret, limit, allocated = out.read_text().split("|")
    assert (secret, int(limit), allocated) == ("None", 2 << 30, "MemoryError")
    assert len(pids) == 1 and pids[0] > 0
    assert resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY  # the host itself is not limited


def test_the_runtime_worker_keeps_a_bounded_number_of_sessions(tmp_path, monkeypatch):
    """A run's cells ask for many .onnx files: the worker holds the newest MAX_SESSIONS sessions, not one per
    file (each holds its model's weights). onnxruntime itself is not needed to count them."""
    import types
    from collections import OrderedDict

    import numpy as np

    from kit.kernel.exits import runtime_worker

    opened = []

    class Session:
        def __init__(self, model, providers):
            opened.append(model)

        def get_inputs(self):
            return [types.SimpleNamespace(name="data", type="tensor(float)")]

        def run(self, names, feed):
            return [feed["data"] * 2]

    monkeypatch.setitem(sys.modules, "onnxruntime", types.SimpleNamespace(InferenceSession=Session))
    np.savez(tmp_path / "in.npz", data=np.ones((1, 2), dtype=np.float32))
    sessions = OrderedDict()
    for i in range(7):
        (tmp_path / f"m{i}.onnx").write_bytes(b"model %d" % i)
    models = [str(tmp_path / f"m{i}.onnx") for i in list(range(7)) + [6, 2]]
    for i, model in enumerate(models):
        request = {"model": model, "inputs": str(tmp_path / "in.npz"), "outputs": str(tmp_path / f"out{i}.npz")}
        assert runtime_worker._run("onnxruntime", sessions, request) == {"ok": True, "artifact": model}
        assert len(sessions) <= runtime_worker.MAX_SESSIONS
    assert [Path(key[0]).name for key in sessions] == ["m4.onnx", "m5.onnx", "m6.onnx", "m2.onnx"]  # newest last
    opened_names = [Path(m).name for m in opened]
    assert opened_names.count("m6.onnx") == 1 and opened_names.count("m2.onnx") == 2  # kept: reused; dropped: again
    (tmp_path / "m2.onnx").write_bytes(b"model 2, exported again by a remedy's next edit")
    request = {"model": models[-1], "inputs": str(tmp_path / "in.npz"), "outputs": str(tmp_path / "again.npz")}
    assert runtime_worker._run("onnxruntime", sessions, request) == {"ok": True, "artifact": models[-1]}
    assert len(opened) == 9  # a file written again is a new model: never the session of what it held before


def test_closing_a_runtime_worker_never_waits_forever(monkeypatch):
    """A worker that ignores the end of its input is killed after CLOSE_SECONDS."""
    import subprocess

    from kit.kernel.exits import runtime_client

    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        universal_newlines=True,
    )
    monkeypatch.setitem(runtime_client._state("openvino"), "proc", stubborn)
    monkeypatch.setattr(runtime_client, "CLOSE_SECONDS", 1)
    started = time.monotonic()
    runtime_client.close()
    assert time.monotonic() - started < 10 and stubborn.poll() is not None
