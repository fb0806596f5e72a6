"""The CLI's shape (every option explained, shared options worded once, no import circle) and every usage error
of the env and run commands: refused with a clear message and exit code 2, before any work."""

import ast

import click
import pytest
from conftest import run_cli
from helpers import REPO

from kit.cli import main
from kit.cli.options import RUNS_DIR_HELP


def commands(cmd: click.Command = main, path: str = "mxcompat"):
    """(command path, command) for the group and every command under it."""
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from commands(sub, f"{path} {name}")


def test_every_command_and_option_has_help():
    missing = []
    for path, cmd in commands():
        if not (cmd.help or cmd.short_help):
            missing.append(path)
        missing += [f"{path} {p.opts[0]}" for p in cmd.params if isinstance(p, click.Option) and not p.help]
        for name, sub in getattr(cmd, "commands", {}).items():  # a group's list fits 80 columns, uncut
            if sub.get_short_help_str(limit=60).endswith("..."):
                missing.append(f"{path} {name}: a one-line help of at most 60 characters (short_help)")
    assert not missing, missing


def test_a_shared_option_says_the_same_everywhere():
    helps = {}
    for path, cmd in commands():
        for p in cmd.params:
            if isinstance(p, click.Option):
                helps.setdefault(p.opts[0], {})[path] = p.help
    runs_dir = helps["--runs-dir"]
    assert len(runs_dir) >= 7, runs_dir  # run, check-model, investigate, convert, bisect, bundle, report, compare
    assert set(runs_dir.values()) == {RUNS_DIR_HELP}, runs_dir
    for flag in ("--tolerance", "--allow-list"):
        assert len(set(helps[flag].values())) == 1, helps[flag]


def test_the_command_modules_do_not_import_the_group_back():
    """kit/cli/__init__.py imports the command modules; none of them imports kit.cli itself (an import circle)."""
    for path in sorted((REPO / "kit" / "cli").glob("*.py")):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module] if node.module != "kit" else [f"kit.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert "kit.cli" not in names, f"{path.name} imports kit.cli"
        assert len(path.read_text().splitlines()) < 500, path.name


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
