"""Shared fixtures: a kit home per test session, and real MXNet environments built once in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, kit_env
from hostile import rehash  # noqa: F401  (the tests import it from here)

from kit.envs.interpreters import InterpreterFinder

OLDEST = "1.0.0.post4"
NEWEST = "1.9.1"


def run_cli(*args, home: Path, env: dict | None = None, timeout: float = 900, check: bool = False):
    """``python -m kit ARGS`` with MXCOMPAT_HOME set; returns the CompletedProcess."""
    proc = subprocess.run(
        [sys.executable, "-m", "kit", *args],
        capture_output=True,
        text=True,
        env=kit_env(home, env),
        cwd=REPO,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"mxcompat {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def pytest_configure(config):
    """Under pytest-xdist, every kernel a worker starts gets its share of the cores as OpenMP threads.

    Two workers' kernels with an OpenMP pool of every core each spin at each other's barriers: two
    1.0.0.post4 trainings side by side took 330 s instead of 16 s."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))


#: fixtures that build MXNet environments: a test that uses one is an ``envs`` test, whether its module says so or not
ENV_FIXTURES = {"built_envs", "trained_store", "reloaded"}


def pytest_collection_modifyitems(items):
    """One convention for the tests that build no environment: they lack the ``envs`` marker (``make test-fast``
    runs them); a test that builds environments has it, through its module's ``pytestmark`` or its fixtures."""
    for item in items:
        if ENV_FIXTURES & set(item.fixturenames) and item.get_closest_marker("envs") is None:
            item.add_marker(pytest.mark.envs)


def group_line(stdout: str, prefix: str, signature: str) -> str:
    """The closing line of a run's output that reports the group ``signature`` (``FAIL``, ``allowed``, ...)."""
    found = [x for x in stdout.splitlines() if x.startswith(f"{prefix} [S-") and f": {signature}: " in x]
    assert len(found) == 1, f"no single {prefix} line for {signature!r} in:\n{stdout[-3000:]}"
    return found[0]


def require_python(minor: str) -> None:
    if InterpreterFinder().find(minor) is None:
        pytest.skip(f"Python {minor} is not installed on this machine")


@pytest.fixture(scope="session")
def kit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("kithome")


@pytest.fixture(scope="session")
def built_envs(kit_home) -> dict:
    """The oldest and newest releases, built once per session through the CLI."""
    require_python("3.6")
    proc = run_cli("env", "create", OLDEST, NEWEST, home=kit_home, check=True)
    envs = {}
    for name in (OLDEST, NEWEST):
        marker = json.loads((kit_home / "envs" / name / "mxcompat-env.json").read_text())
        envs[name] = marker
    envs["_create_output"] = proc.stdout
    return envs


def _has_mxnet() -> bool:
    import importlib.util

    return importlib.util.find_spec("mxnet") is not None


# kernel-side tests that need mxnet run inside the environments (tests/kernel/runner.py), not on the host
collect_ignore_glob = [] if _has_mxnet() else ["kernel/test_mx_*.py"]


@pytest.fixture(scope="session")
def trained_store(built_envs, kit_home, tmp_path_factory) -> dict:
    """train.ipynb executed once per built release into one store; {release: seconds, "_store": Path, ...}."""
    import time

    from kit.execute.notebooks import NOTEBOOKS, run_notebook
    from kit.home import KitHome

    store = tmp_path_factory.mktemp("store")
    runs = tmp_path_factory.mktemp("runs")
    out = {"_store": store, "_runs": runs}
    for release in (OLDEST, NEWEST):
        started = time.monotonic()
        run_notebook(
            NOTEBOOKS / "train.ipynb",
            runs / f"train-{release}.ipynb",
            f"mxnet-{release}",
            {"release": release, "store": str(store)},
            home=KitHome(kit_home),
        )
        out[release] = time.monotonic() - started
    return out


def read_records(out_dir: Path) -> dict:
    """{(saved_with, model, api, loaded_with): record} from a reload's records folder."""
    records = {}
    for path in sorted((out_dir / "records").glob("[!.]*.json")):
        rec = json.loads(path.read_text())
        records[(rec["saved_with"], rec["model"], rec["api"], rec["loaded_with"])] = rec
    return records


def matrix_run(
    kit_home: Path,
    tmp_path_factory,
    run_id: str,
    *,
    save: str,
    load: str,
    models: str | None = None,
    more=(),
    create=(),
    timeout: float = 900,
) -> dict:
    """Build the environments ``create``, then ``mxcompat run --save SAVE --load LOAD [--models MODELS] MORE`` into
    a fresh runs folder and store: {"proc", "dir", "records", "store", "runs", "created"} (``created``: what
    ``env create`` printed)."""
    created = run_cli("env", "create", *create, home=kit_home, check=True, timeout=1800).stdout if create else ""
    runs, store = tmp_path_factory.mktemp(f"{run_id}-runs"), tmp_path_factory.mktemp(f"{run_id}-store")
    proc = run_cli(
        "run",
        "--runs-dir",
        str(runs),
        "--save",
        save,
        "--load",
        load,
        *(["--models", models] if models else []),
        *more,
        "--run-id",
        run_id,
        "--store",
        str(store),
        home=kit_home,
        timeout=timeout,
    )
    return {
        "proc": proc,
        "dir": runs / run_id,
        "records": read_records(runs / run_id),
        "store": store,
        "runs": runs,
        "created": created,
    }


def reload_in_newest(kit_home: Path, store: Path, out_dir: Path) -> None:
    """reload.ipynb on the newest release over ``store``, executed into ``out_dir`` (records in its records/)."""
    from kit.execute.notebooks import NOTEBOOKS, run_notebook
    from kit.home import KitHome

    run_notebook(
        NOTEBOOKS / "reload.ipynb",
        out_dir / "reload.ipynb",
        f"mxnet-{NEWEST}",
        {"release": NEWEST, "store": str(store), "run_dir": str(out_dir)},
        home=KitHome(kit_home),
    )


def kernel_unit_tests(kit_home: Path, release: str) -> tuple[subprocess.CompletedProcess, dict]:
    """tests/kernel/runner.py in the release's environment: the process and its JSON verdict (passed, failed)."""
    python = kit_home / "envs" / release / "bin" / "python"
    proc = subprocess.run(
        [str(python), str(REPO / "tests/kernel/runner.py")], capture_output=True, text=True, cwd="/", timeout=300
    )
    return proc, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def reloaded(trained_store, kit_home, tmp_path_factory) -> dict:
    """reload.ipynb on the newest release (backward) and on the oldest (forward too): their records."""
    from kit.execute.notebooks import NOTEBOOKS, run_notebook
    from kit.home import KitHome

    out = {}
    for release, forward in ((NEWEST, False), (OLDEST, True)):
        out_dir = tmp_path_factory.mktemp(f"reload-{release}")
        run_notebook(
            NOTEBOOKS / "reload.ipynb",
            out_dir / "reload.ipynb",
            f"mxnet-{release}",
            {
                "release": release,
                "store": str(trained_store["_store"]),
                "run_dir": str(out_dir),
                "forward": forward,
            },
            home=KitHome(kit_home),
        )
        out[release] = {"dir": out_dir, "records": read_records(out_dir)}
    return out


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3 protocol server (moto in server mode) on a loopback port, with fake credentials."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")
    moto = Path(sys.executable).parent / "moto_server"
    proc = subprocess.Popen([str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = __import__("time").monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=2)
            break
        except OSError as e:
            if getattr(e, "code", None):  # an HTTP error is an answer: the server is up
                break
            assert proc.poll() is None and __import__("time").monotonic() < deadline, "moto server did not start"
            __import__("time").sleep(0.2)
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_S3": endpoint,
    }
    yield {"endpoint": endpoint, "env": env, "proc": proc}
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


@pytest.fixture
def s3env(s3_server, monkeypatch):
    """The S3 server's endpoint and fake credentials in this test's environment."""
    for k, v in s3_server["env"].items():
        monkeypatch.setenv(k, v)
    return s3_server


def scale_weight(kit_home: Path, params: Path, suffix: str, expression: str) -> None:
    """Rewrite the parameter whose name ends with ``suffix`` as ``expression`` of ``w`` (e.g. "w * 1.5"),
    with the newest release's MXNet, then rehash it: a regression injected on purpose."""
    python = kit_home / "envs" / NEWEST / "bin" / "python"
    script = (
        "import mxnet as mx, sys; d = mx.nd.load(sys.argv[1]); "
        f"k = sorted(n for n in d if n.endswith({suffix!r}))[0]; w = d[k]; d[k] = {expression}; "
        "mx.nd.save(sys.argv[1], d)"
    )
    subprocess.run([str(python), "-c", script, str(params)], check=True, capture_output=True)
    rehash(params.parent, params.name)
