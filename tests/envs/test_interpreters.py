import os
import stat
from pathlib import Path

import pytest

from kit.common.errors import InterpreterNotFoundError, UsageError
from kit.envs.interpreters import InterpreterFinder


def fake_python(path: Path, version: str, works: bool = True) -> Path:
    """A script that answers the finder's probe like Python ``version`` would (or fails like a bad shim)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    major, minor, micro = version.split(".")
    if works:
        body = f"#!/bin/sh\necho '[\"{path}\", [{major}, {minor}, {micro}]]'\n"
    else:
        body = "#!/bin/sh\necho 'pyenv: python3.6: command not found' >&2\nexit 127\n"
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_path_wins_over_pyenv(tmp_path):
    on_path = fake_python(tmp_path / "bin" / "python3.6", "3.6.9")
    fake_python(tmp_path / "pyenv" / "versions" / "3.6.15" / "bin" / "python3.6", "3.6.15")
    f = InterpreterFinder(path=str(tmp_path / "bin"), pyenv_root=tmp_path / "pyenv", conda_roots=[])
    found = f.find("3.6")
    assert found.path == str(on_path) and found.version == (3, 6, 9) and found.source == "PATH"


def test_broken_shim_is_skipped_for_pyenv(tmp_path):
    fake_python(tmp_path / "bin" / "python3.6", "3.6.0", works=False)
    fake_python(tmp_path / "pyenv" / "versions" / "3.6.8" / "bin" / "python3.6", "3.6.8")
    newest = fake_python(tmp_path / "pyenv" / "versions" / "3.6.15" / "bin" / "python3.6", "3.6.15")
    f = InterpreterFinder(path=str(tmp_path / "bin"), pyenv_root=tmp_path / "pyenv", conda_roots=[])
    found = f.find("3.6")
    assert found.path == str(newest) and found.source == "pyenv"


def test_conda_env_is_found_last(tmp_path):
    conda_py = fake_python(tmp_path / "conda" / "envs" / "py37" / "bin" / "python3.7", "3.7.12")
    f = InterpreterFinder(path="", pyenv_root=tmp_path / "nopyenv", conda_roots=[tmp_path / "conda"])
    found = f.find("3.7")
    assert found.path == str(conda_py) and found.source == "conda"


def test_wrong_version_behind_the_name_is_rejected(tmp_path):
    fake_python(tmp_path / "bin" / "python3.7", "3.8.1")
    f = InterpreterFinder(path=str(tmp_path / "bin"), pyenv_root=tmp_path / "nopyenv", conda_roots=[])
    assert f.find("3.7") is None


def test_missing_interpreter_error_says_what_and_how(tmp_path):
    f = InterpreterFinder(path="", pyenv_root=tmp_path / "nopyenv", conda_roots=[])
    with pytest.raises(InterpreterNotFoundError) as e:
        f.require("3.6", needed_by="1.0.0.post4")
    text = str(e.value)
    assert "MXNet 1.0.0.post4 needs Python 3.6" in text
    assert "pyenv install 3.6" in text and "--python" in text
    assert e.value.exit_code == 2


def test_explicit_python_is_checked(tmp_path):
    py = fake_python(tmp_path / "custom" / "python", "3.7.3")
    f = InterpreterFinder(path="", pyenv_root=tmp_path / "nopyenv", conda_roots=[])
    assert f.require("3.7", explicit=str(py)).source == "explicit"
    with pytest.raises(UsageError, match="is Python 3.7, but 1.0.0.post4 needs Python 3.6"):
        f.require("3.6", explicit=str(py), needed_by="1.0.0.post4")
    with pytest.raises(UsageError, match="does not run"):
        f.require("3.6", explicit=str(tmp_path / "nothing"))


def test_real_interpreters_on_this_machine():
    f = InterpreterFinder()
    host = f.find("3.11")
    assert host is not None and host.version[:2] == (3, 11) and os.path.exists(host.path)
