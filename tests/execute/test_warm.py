"""`mxcompat warm`: real kernels kept started by a keeper, taken by steps, replaced, and ended."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import NEWEST, REPO, read_records, run_cli
from helpers import kit_env

from kit.execute import warm_kernels
from kit.home import KitHome

pytestmark = pytest.mark.envs


def _env(**more) -> dict:
    """This process's environment without what pytest changes between a test's setup and its call: the keeper
    (started in setup) and the run (in the call) must give kernels the same environment."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}, **more}


def _wait(condition, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def _ready_pids(home: KitHome, kernel: str) -> set[int]:
    return {
        json.loads(p.read_text())["pid"]
        for p in warm_kernels.folder(home).glob(f"{kernel}.*{warm_kernels.READY}")
        if p.is_file()
    }


@pytest.fixture
def keeper(built_envs, kit_home):
    """A keeper with the newest release's kernel and the summary's; stopped after the test, whatever it did."""
    proc = run_cli("warm", "start", NEWEST, "--idle", "5m", home=kit_home, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    yield KitHome(kit_home), proc.stdout
    run_cli("warm", "stop", home=kit_home, timeout=60)


def _reload(kit_home, store, runs, run_id, env=None):
    env = env or _env()
    proc = run_cli(
        "run", "--load", NEWEST, "--models", "mlp", "--store", str(store), "--runs-dir", str(runs),
        "--run-id", run_id, "--jobs", "1", home=kit_home, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notebook = json.loads((runs / run_id / "reload" / f"mxnet-{NEWEST}.ipynb").read_text())
    return read_records(runs / run_id), notebook["metadata"].get("mxcompat", {}).get("kernel", "")


def test_a_step_takes_a_warm_kernel_and_gets_the_records_a_cold_one_gets(keeper, trained_store, kit_home, tmp_path):
    home, started = keeper
    assert f"mxnet-{NEWEST}, mxcompat-host ready in" in started
    status = run_cli("warm", "status", home=kit_home, check=True).stdout
    assert f"mxnet-{NEWEST}: 1 ready" in status and "mxcompat-host: 1 ready" in status
    before = _ready_pids(home, f"mxnet-{NEWEST}")
    assert len(before) == 1

    warm_records, warm_says = _reload(kit_home, trained_store["_store"], tmp_path, "warm")
    assert "mxcompat warm" in warm_says
    (taken,) = before
    # the taken kernel ended with its notebook, and the keeper started the next one
    assert _wait(lambda: not warm_kernels._alive(taken))
    assert _wait(lambda: len(_ready_pids(home, f"mxnet-{NEWEST}") - before) == 1)

    run_cli("warm", "stop", home=kit_home, check=True)
    cold_records, cold_says = _reload(kit_home, trained_store["_store"], tmp_path, "cold")
    assert "mxcompat warm" not in cold_says
    assert warm_records.keys() == cold_records.keys() and len(warm_records) >= 4
    for key, rec in warm_records.items():
        assert rec["verdict"] == cold_records[key]["verdict"], key
        assert rec["cases"] == cold_records[key]["cases"], key  # the same numbers, to the last bit


def test_a_process_whose_kernels_would_get_another_environment_starts_its_own(
    keeper, trained_store, kit_home, tmp_path
):
    home, _ = keeper
    ready = _ready_pids(home, f"mxnet-{NEWEST}")
    other = _env(MXNET_ENGINE_TYPE="NaiveEngine")
    _, says = _reload(kit_home, trained_store["_store"], tmp_path, "other-env", env=other)
    assert "mxcompat warm" not in says
    assert _ready_pids(home, f"mxnet-{NEWEST}") == ready  # still there, for a process like the keeper


def test_a_kernel_whose_taker_died_is_ended_by_the_keeper(keeper, kit_home):
    home, _ = keeper
    (pid,) = _ready_pids(home, f"mxnet-{NEWEST}")
    take = (
        "import os, sys; from kit.execute import warm_kernels; from kit.home import KitHome;"
        f"km = warm_kernels.take(KitHome(sys.argv[1]), 'mxnet-{NEWEST}'); print(km.provisioner.pid); os._exit(0)"
    )
    argv = [sys.executable, "-c", take, str(kit_home)]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=kit_env(kit_home, _env()))
    assert out.stdout.strip() == str(pid), out.stderr
    assert _wait(lambda: not warm_kernels._alive(pid)), "the keeper left a dead taker's kernel running"
    assert _wait(lambda: len(_ready_pids(home, f"mxnet-{NEWEST}")) == 1)


def test_a_ready_kernel_that_died_is_replaced(keeper):
    home, _ = keeper
    (dead,) = _ready_pids(home, f"mxnet-{NEWEST}")
    os.kill(dead, signal.SIGKILL)  # as the OOM killer would
    assert _wait(lambda: len(_ready_pids(home, f"mxnet-{NEWEST}") - {dead}) == 1)
    assert dead not in _ready_pids(home, f"mxnet-{NEWEST}")


def _taker_holding(kit_home, kernel: str) -> subprocess.Popen:
    """A process that takes ``kernel`` from the keeper, prints its PID and holds it until a line on its stdin,
    then ends without ending the kernel."""
    hold = (
        "import sys; from kit.execute import warm_kernels; from kit.home import KitHome;"
        "km = warm_kernels.take(KitHome(sys.argv[1]), sys.argv[2]); print(km.provisioner.pid, flush=True);"
        "sys.stdin.readline()"
    )
    return subprocess.Popen(
        [sys.executable, "-c", hold, str(kit_home), kernel], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, cwd=REPO, env=kit_env(kit_home, _env()),
    )  # fmt: skip


def test_stop_leaves_a_taken_kernel_to_its_taker_then_ends(keeper, kit_home):
    """A step that took a kernel finishes its notebook on it: stop ends the ready kernels at once, the keeper
    (whose exit would end the kernel) waits for the taken one."""
    home, _ = keeper
    (taken_pid,) = _ready_pids(home, f"mxnet-{NEWEST}")
    taker = _taker_holding(kit_home, f"mxnet-{NEWEST}")
    try:
        assert taker.stdout.readline().strip() == str(taken_pid)
        host_pids = _ready_pids(home, "mxcompat-host")
        stopped = run_cli("warm", "stop", home=kit_home, check=True).stdout
        assert "ends when the kernels steps took end" in stopped, stopped
        assert _wait(lambda: not any(warm_kernels._alive(p) for p in host_pids))
        time.sleep(1)
        assert warm_kernels._alive(taken_pid) and warm_kernels.read_keeper(home) is not None
    finally:
        taker.communicate("\n", timeout=30)  # the taker ends without ending its kernel: the keeper does
    assert _wait(lambda: not warm_kernels._alive(taken_pid))
    assert _wait(lambda: warm_kernels.read_keeper(home) is None)


def test_the_next_kernel_starts_only_once_no_taken_kernel_runs(keeper, kit_home):
    """A step on a taken kernel has the cores to itself: the keeper starts the next kernels after it."""
    home, _ = keeper
    (taken_pid,) = _ready_pids(home, f"mxnet-{NEWEST}")
    taker = _taker_holding(kit_home, f"mxnet-{NEWEST}")
    try:
        assert taker.stdout.readline().strip() == str(taken_pid)
        time.sleep(3)  # a kernel starts in about 1 s here
        assert _ready_pids(home, f"mxnet-{NEWEST}") == set(), "a kernel started beside the step"
    finally:
        taker.communicate("\n", timeout=30)  # its taker gone, the keeper ends the taken kernel
    assert _wait(lambda: not warm_kernels._alive(taken_pid))
    assert _wait(lambda: len(_ready_pids(home, f"mxnet-{NEWEST}")) == 1)
    assert taken_pid not in _ready_pids(home, f"mxnet-{NEWEST}")


def test_a_kernel_started_before_the_kit_changed_is_replaced_not_taken(keeper, kit_home):
    home, _ = keeper
    (old,) = _ready_pids(home, f"mxnet-{NEWEST}")
    source = REPO / "kit" / "execute" / "warm_kernels.py"
    later = time.time() + 5
    os.utime(source, (later, later))  # as an edit or a pull would: the warm kernel imported the older kit
    assert _wait(lambda: not warm_kernels._alive(old))
    assert _wait(lambda: len(_ready_pids(home, f"mxnet-{NEWEST}") - {old}) == 1)
    (new,) = _ready_pids(home, f"mxnet-{NEWEST}")
    record = json.loads(next(warm_kernels.folder(home).glob(f"mxnet-{NEWEST}.*{warm_kernels.READY}")).read_text())
    assert record["stamp"] == warm_kernels.stamp(home, f"mxnet-{NEWEST}") and new != old


def test_stop_ends_the_keeper_and_its_kernels_and_a_second_start_is_refused(keeper, kit_home):
    home, _ = keeper
    direct = subprocess.run(  # a second keeper started by hand leaves the first one's files alone
        [sys.executable, "-m", "kit.execute.warm_kernels", str(kit_home), "60", f"mxnet-{NEWEST}"],
        capture_output=True, text=True, cwd=REPO, env=kit_env(kit_home, _env()), timeout=60,
    )  # fmt: skip
    assert direct.returncode != 0 and "a keeper runs already" in direct.stderr, direct.stderr
    assert len(_ready_pids(home, f"mxnet-{NEWEST}")) == 1
    again = run_cli("warm", "start", NEWEST, home=kit_home)
    assert again.returncode == 2 and "a keeper runs already" in again.stderr and "warm stop" in again.stderr
    pids = _ready_pids(home, f"mxnet-{NEWEST}") | _ready_pids(home, "mxcompat-host")
    keeper_pid = warm_kernels.read_keeper(home)["pid"]
    assert len(pids) == 2
    stopped = run_cli("warm", "stop", home=kit_home, check=True)
    assert f"stopped the keeper (pid {keeper_pid}) and its ready kernels" in stopped.stdout
    assert _wait(lambda: not any(warm_kernels._alive(p) for p in pids | {keeper_pid}))
    assert "no keeper runs" in run_cli("warm", "status", home=kit_home, check=True).stdout


def test_the_keeper_ends_after_its_idle_time(built_envs, kit_home):
    proc = run_cli("warm", "start", NEWEST, "--idle", "3s", home=kit_home, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    home = KitHome(kit_home)
    pids = _ready_pids(home, f"mxnet-{NEWEST}")
    assert _wait(lambda: warm_kernels.read_keeper(home) is None, 30)
    assert _wait(lambda: not any(warm_kernels._alive(p) for p in pids))


@pytest.mark.parametrize("idle", ["0", "-5m", "soon", "5d", "nan", "inf"])
def test_an_idle_time_that_is_no_duration_is_refused(kit_home, idle):
    proc = run_cli("warm", "start", NEWEST, "--idle", idle, home=kit_home)
    assert proc.returncode == 2 and "give a duration such as 90s, 30m or 2h" in proc.stderr
