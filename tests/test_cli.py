"""Every usage error of the env commands: refused with a clear message and exit code 2, before any work."""

import pytest

from conftest import run_cli


@pytest.mark.parametrize(
    "args,message",
    [
        (["env", "create"], "name at least one release"),
        (["env", "create", "1.10.0"], "unknown MXNet release '1.10.0'"),
        (["env", "create", "1.9.1", "--name", "x", "--spec", "mxnet==1.9.1"], "not both"),
        (["env", "create", "--spec", "mxnet==1.9.1"], "needs --name"),
        (["env", "create", "--name", "x", "--spec", "a", "--wheel", "b"], "exactly one of"),
        (["env", "create", "1.0.0.post4", "--python", "/nonexistent/python"], "does not run"),
        (["env", "remove"], "name at least one environment"),
        (["env", "remove", "1.9.1"], "no environment '1.9.1'"),
        (["env", "doctor", "1.9.1"], "no environment '1.9.1'"),
        (["env", "create", "1.9.1", "--jobs", "0"], "Invalid value for '--jobs'"),
    ],
)
def test_usage_errors(tmp_path, args, message):
    proc = run_cli(*args, home=tmp_path / "home")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert not (tmp_path / "home" / "envs").exists() or not any((tmp_path / "home" / "envs").iterdir())


def test_explicit_python_of_the_wrong_version(tmp_path):
    import sys

    proc = run_cli("env", "create", "1.0.0.post4", "--python", sys.executable, home=tmp_path)
    assert proc.returncode == 2
    assert "is Python 3.11, but 1.0.0.post4 needs Python 3.6" in proc.stderr


def test_lab_without_kernels(tmp_path):
    proc = run_cli("lab", home=tmp_path)
    assert proc.returncode == 2 and "no kernels yet" in proc.stderr


def test_jupyter_path_and_help(tmp_path):
    proc = run_cli("env", "jupyter-path", "--export", home=tmp_path, check=True)
    assert proc.stdout.startswith(f"export JUPYTER_PATH={tmp_path.resolve() / 'jupyter'}")
    help_text = run_cli("env", "create", "--help", home=tmp_path, check=True).stdout
    assert "--allow-fallback" in help_text and "--wheel" in help_text
    assert run_cli("env", "list", home=tmp_path, check=True).stdout.startswith("no environments")


@pytest.mark.parametrize(
    "args,message",
    [
        (["run"], "--save needs at least one release"),
        (["run", "--save", "1.10.0"], "unknown MXNet release '1.10.0'"),
        (["run", "--save", "1.9.1"], "no ready environment for 1.9.1"),
        (["run", "--resume", "nope"], "no run nope"),
        (["run", "--resume", "x", "--save", "1.9.1"], "--resume takes the run's own arguments"),
        (["run", "--save", "1.9.1", "--tolerance", "{bad json"], "neither a readable file nor JSON"),
        (["run", "--save", "1.9.1", "--tolerance", '{"float32": {"rtol": -1}}'], "non-negative"),
        (["run", "--save", "1.9.1", "--jobs", "0"], "Invalid value for '--jobs'"),
    ],
)
def test_run_usage_errors(tmp_path, args, message):
    proc = run_cli(*args, "--runs-dir", str(tmp_path / "runs"), home=tmp_path / "home")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
