"""Real environments: built with uv, started as Jupyter kernels, run through papermill."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from conftest import NEWEST, OLDEST, REPO, kernel_unit_tests, require_python, run_cli
from helpers import start_kit
from jupyter_client.manager import start_new_kernel

pytestmark = pytest.mark.envs


def kernel_env(home: Path) -> dict:
    env = dict(os.environ)
    env["JUPYTER_PATH"] = str(home / "jupyter")
    return env


def papermill_version_notebook(home: Path, out_nb: Path, kernel_release: str, expected_release: str, *extra):
    """tests/notebooks/mxnet_version.ipynb through the papermill CLI on kernel ``mxnet-<kernel_release>``,
    told to expect ``expected_release``; EXTRA are more papermill options."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "papermill",
            str(REPO / "tests/notebooks/mxnet_version.ipynb"),
            str(out_nb),
            "-k",
            f"mxnet-{kernel_release}",
            "-r",
            "expected_release",
            expected_release,
            *extra,
        ],
        capture_output=True,
        text=True,
        env=kernel_env(home),
        timeout=300,
    )


def test_create_reports_interpreters_and_markers(built_envs, kit_home):
    out = built_envs["_create_output"]
    assert f"{OLDEST}: Python 3.6" in out and f"{NEWEST}: Python 3.11" in out
    old, new = built_envs[OLDEST], built_envs[NEWEST]
    assert old["probe"]["mxnet"] == "1.0.0" and old["probe"]["numpy"] == "1.13.3"
    assert old["probe"]["python"].startswith("3.6.") and old["fallback"] is False
    assert new["probe"]["mxnet"] == "1.9.1" and new["probe"]["numpy"] == "1.23.5"
    assert "MKLDNN" in new["probe"]["mxnet_features"]
    assert old["probe"]["forward_ok"] and new["probe"]["forward_ok"]


def test_list_and_doctor(built_envs, kit_home):
    listing = run_cli("env", "list", home=kit_home, check=True).stdout
    rows = {line.split()[0]: line.split() for line in listing.splitlines()[2:]}
    assert rows[OLDEST][1:4] == ["1.0.0", rows[OLDEST][2], "1.13.3"] and rows[OLDEST][2].startswith("3.6")
    assert rows[OLDEST][4:7] == ["2.2.5", "0.25.3", f"mxnet-{OLDEST}"] and rows[OLDEST][-2:] == ["ready", "no"]
    assert rows[NEWEST][4:7] == ["3.9.4", "2.2.3", f"mxnet-{NEWEST}"]  # matplotlib and pandas, pinned per Python
    assert rows[NEWEST][1] == "1.9.1" and rows[NEWEST][-2:] == ["ready", "no"]
    doctor = run_cli("env", "doctor", OLDEST, NEWEST, home=kit_home)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert doctor.stdout.count("healthy") == 2 and "UNHEALTHY" not in doctor.stdout


def test_create_again_is_idempotent(built_envs, kit_home):
    marker = (kit_home / "envs" / NEWEST / "mxcompat-env.json").read_text()
    proc = run_cli("env", "create", NEWEST, home=kit_home, check=True)
    assert f"{NEWEST}: exists" in proc.stdout
    assert (kit_home / "envs" / NEWEST / "mxcompat-env.json").read_text() == marker


@pytest.mark.parametrize("release,reported", [(OLDEST, "1.0.0"), (NEWEST, "1.9.1")])
def test_kernel_starts_and_computes(built_envs, kit_home, monkeypatch, release, reported):
    monkeypatch.setenv("JUPYTER_PATH", str(kit_home / "jupyter"))
    km, kc = start_new_kernel(kernel_name=f"mxnet-{release}", startup_timeout=120)
    try:
        chunks = []

        def hook(msg):
            if msg["msg_type"] == "stream":
                chunks.append(msg["content"]["text"])

        code = (
            "import mxnet as mx, numpy as np, kit.kernel, sys\n"
            "w = mx.nd.array(np.arange(6, dtype=np.float32).reshape(2, 3))\n"
            "y = mx.nd.FullyConnected(mx.nd.ones((1, 3)), w, mx.nd.zeros(2), num_hidden=2)\n"
            "print(mx.__version__, y.asnumpy().tolist(), sys.version_info[:2])"
        )
        reply = kc.execute_interactive(code, output_hook=hook, timeout=120)
        assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    out = "".join(chunks).split()
    assert out[0] == reported
    assert "".join(out[1:3]) == "[[3.0,12.0]]"


@pytest.mark.parametrize("release", [OLDEST, NEWEST])
def test_papermill_runs_on_the_release_kernel(built_envs, kit_home, tmp_path, release):
    out_nb = tmp_path / f"version-{release}.ipynb"
    proc = papermill_version_notebook(kit_home, out_nb, release, release, "--cwd", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    nb = nbformat.read(out_nb, as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    reported = "1.0.0" if release == OLDEST else release
    assert f"mxnet {reported} sum 6.0" in text
    python = built_envs[release]["probe"]["python"]
    assert nb.metadata["language_info"]["version"] == python  # it ran in that env's interpreter
    assert nb.metadata["papermill"]["parameters"] == {"expected_release": release}  # a string, not a float


def test_papermill_fails_loudly_on_the_wrong_kernel(built_envs, kit_home, tmp_path):
    out_nb = tmp_path / "wrong.ipynb"
    proc = papermill_version_notebook(kit_home, out_nb, NEWEST, OLDEST)
    assert proc.returncode != 0
    assert "AssertionError" in proc.stderr and "1.9.1" in proc.stderr


@pytest.mark.parametrize("release", [OLDEST, NEWEST])
def test_kernel_side_unit_tests_pass_inside_the_env(built_envs, kit_home, release):
    proc, result = kernel_unit_tests(kit_home, release)
    assert proc.returncode == 0, result["failed"]
    assert len(result["passed"]) >= 10


def test_interrupted_build_is_never_healthy_and_is_rebuilt(kit_home):
    require_python("3.7")
    release = "1.4.1"
    env_dir = kit_home / "envs" / release
    proc = start_kit(
        ["env", "create", release],
        home=kit_home,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not (env_dir / "pyvenv.cfg").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "build finished before it could be interrupted"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (env_dir / "mxcompat-env.json").exists()
    listing = run_cli("env", "list", home=kit_home, check=True).stdout
    assert any(line.split()[0] == release and "incomplete" in line for line in listing.splitlines())
    doctor = run_cli("env", "doctor", release, home=kit_home)
    assert doctor.returncode == 3 and "UNHEALTHY" in doctor.stdout and "interrupted" in doctor.stdout
    again = run_cli("env", "create", release, home=kit_home, check=True)
    assert f"{release}: created" in again.stdout
    assert run_cli("env", "doctor", release, home=kit_home).returncode == 0
    run_cli("env", "remove", release, home=kit_home, check=True)
    assert not env_dir.exists() and not (kit_home / "jupyter" / "kernels" / f"mxnet-{release}").exists()
    assert release not in run_cli("env", "list", home=kit_home, check=True).stdout


def test_fallback_build_is_marked_everywhere(tmp_path):
    """1.4.1 without its Python 3.7: refused, then built on the host Python with --allow-fallback."""
    home = tmp_path / "home"
    no_pythons = dict(os.environ, PATH="/nonexistent", PYENV_ROOT=str(tmp_path / "nopyenv"))
    refused = run_cli("env", "create", "1.4.1", home=home, env=no_pythons)
    assert refused.returncode == 2
    assert "needs Python 3.7" in refused.stderr and "--allow-fallback" in refused.stderr
    built = run_cli("env", "create", "1.4.1", "--allow-fallback", home=home, env=no_pythons)
    assert built.returncode == 0, built.stderr
    assert "fallback" in built.stdout
    marker = json.loads((home / "envs" / "1.4.1" / "mxcompat-env.json").read_text())
    assert marker["fallback"] is True and marker["probe"]["python"].startswith("3.11")
    assert marker["probe"]["mxnet"] == "1.4.1" and marker["probe"]["numpy"] == "1.23.5"
    listing = run_cli("env", "list", home=home, check=True).stdout.splitlines()[2]
    assert listing.split()[-2:] == ["ready", "yes"]
    spec = json.loads((home / "jupyter" / "kernels" / "mxnet-1.4.1" / "kernel.json").read_text())
    assert "fallback" in spec["display_name"] and spec["metadata"]["mxcompat"]["fallback"] is True
    doctor = run_cli("env", "doctor", home=home)
    assert doctor.returncode == 0 and "yes" in doctor.stdout


def test_custom_release_from_a_spec_is_verified(tmp_path):
    home = tmp_path / "home"
    ok = run_cli("env", "create", "--name", "mine", "--spec", "mxnet==1.9.1", "--pin", "numpy==1.23.5", home=home)
    assert ok.returncode == 0, ok.stderr
    marker = json.loads((home / "envs" / "mine" / "mxcompat-env.json").read_text())
    assert marker["release"]["custom"] is True and marker["probe"]["mxnet"] == "1.9.1"
    assert (home / "jupyter" / "kernels" / "mxnet-mine" / "kernel.json").exists()
    # the version check is real: a build that reports another version is never made ready
    bad = run_cli("env", "create", "--name", "liar", "--spec", "mxnet==1.9.1", "--expect-version", "1.8.0", home=home)
    assert bad.returncode == 3
    assert "mxnet reports 1.9.1, expected 1.8.0" in bad.stderr
    assert not (home / "envs" / "liar" / "mxcompat-env.json").exists()


def test_custom_release_from_a_local_wheel(tmp_path):
    wheels = tmp_path / "wheels"
    dl = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--python-version",
            "3.11",
            "-d",
            str(wheels),
            "mxnet==1.6.0",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert dl.returncode == 0, dl.stderr[-1000:]
    wheel = next(wheels.glob("mxnet-1.6.0-*.whl"))
    home = tmp_path / "home"
    proc = run_cli("env", "create", "--name", "local-1.6", "--wheel", str(wheel), "--pin", "numpy==1.23.5", home=home)
    assert proc.returncode == 0, proc.stderr
    marker = json.loads((home / "envs" / "local-1.6" / "mxcompat-env.json").read_text())
    assert marker["release"]["source"] == "wheel" and marker["probe"]["mxnet"] == "1.6.0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_lab_shows_every_kernel(built_envs, kit_home, tmp_path):
    port = _free_port()
    proc = start_kit(
        [
            "lab",
            "--no-browser",
            f"--port={port}",
            "--IdentityProvider.token=kit-test",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.root_dir={tmp_path}",
        ],
        home=kit_home,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline, specs = time.monotonic() + 90, None
        while specs is None:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "JupyterLab did not answer"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/kernelspecs?token=kit-test", timeout=5) as r:
                    specs = json.load(r)["kernelspecs"]
            except OSError:
                time.sleep(0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
    assert {f"mxnet-{OLDEST}", f"mxnet-{NEWEST}"} <= set(specs)
    assert specs[f"mxnet-{OLDEST}"]["spec"]["display_name"].startswith(f"MXNet {OLDEST} (Python 3.6")
