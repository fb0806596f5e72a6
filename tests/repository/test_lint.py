"""The structure `make lint` enforces: the import contracts hold, and they catch what they are for."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from conftest import REPO

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _contracts() -> list[dict]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


SIDES = ("kernel", "common")


def _host_packages() -> set[str]:
    """The host side's packages (and the few top-level modules): everything in kit/ but the kernel side."""
    kit = REPO / "kit"
    packages = {f"kit.{p.name}" for p in kit.iterdir() if (p / "__init__.py").is_file() and p.name not in SIDES}
    modules = {f"kit.{p.stem}" for p in kit.glob("*.py") if p.stem not in ("__init__", "__main__")}
    return packages | modules


def _lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def copy(tmp_path) -> Path:
    shutil.copytree(REPO / "kit", tmp_path / "kit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_contracts_name_every_host_package():
    host = _host_packages()
    assert len(host) <= 10, host  # a handful of packages, not a flat list of modules
    border = [c for c in _contracts() if c["type"] == "forbidden"]
    assert set(border[0]["source_modules"]) == host  # host never imports kit.kernel
    assert host <= set(border[1]["forbidden_modules"])  # kit.kernel imports no host package
    assert host | {"kit.kernel", "mxnet"} <= set(border[2]["forbidden_modules"])  # kit.common imports neither
    [layers] = [c for c in _contracts() if c["name"] == "host packages in layers"]
    layered = {m.strip() for layer in layers["layers"] for m in layer.split("|")}
    assert layered == host  # every host package has its layer
    [acyclic] = [c for c in _contracts() if c["type"] == "acyclic_siblings"]
    assert set(acyclic["ancestors"]) >= {p for p in host if (REPO / p.replace(".", "/")).is_dir()}


def _kernel_rooms() -> set[str]:
    return {f"kit.kernel.{p.parent.name}" for p in (REPO / "kit" / "kernel").glob("*/__init__.py")}


def test_the_kernel_side_is_in_rooms_each_saying_what_it_holds():
    rooms = _kernel_rooms()
    assert len(rooms) >= 6, rooms
    assert not [p.name for p in (REPO / "kit" / "kernel").glob("*.py") if p.name != "__init__.py"]  # no flat hall
    for package in [REPO / "kit" / p for p in ("", *(p.name for p in (REPO / "kit").iterdir() if p.is_dir()))]:
        for init in [package / "__init__.py", *package.glob("*/__init__.py")]:
            if init.is_file():
                doc = ast.get_docstring(ast.parse(init.read_text()))
                assert doc and len(doc.split()) >= 5, init  # a package says what it holds
    [layers] = [c for c in _contracts() if c["name"] == "kernel rooms in layers"]
    assert {m.strip() for layer in layers["layers"] for m in layer.split("|")} == rooms  # every room has its layer
    [acyclic] = [c for c in _contracts() if c["type"] == "acyclic_siblings"]
    assert rooms <= set(acyclic["ancestors"])


def test_a_kernel_room_importing_one_above_it_is_caught(copy):
    zoo = copy / "kit" / "kernel" / "models" / "zoo.py"
    zoo.write_text(zoo.read_text() + "\nfrom kit.kernel.entry import reload_run  # noqa\n")
    proc = _lint(copy)
    assert proc.returncode != 0
    assert "kernel rooms in layers BROKEN" in proc.stdout and "kit.kernel.models.zoo -> kit.kernel.entry" in proc.stdout


def test_no_module_is_over_500_lines_but_the_architecture_fingerprint():
    lengths = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in (REPO / "kit").rglob("*.py")}
    long = {path: n for path, n in lengths.items() if n > 500 and not path.endswith("kernel/saving/architecture.py")}
    assert not long, long


def test_the_repository_keeps_every_contract():
    proc = _lint(REPO)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "6 kept, 0 broken" in proc.stdout


def test_a_host_module_importing_the_kernel_side_is_caught(copy):
    matrix = copy / "kit" / "orchestrate" / "matrix.py"
    matrix.write_text(matrix.read_text() + "\nfrom kit.kernel.models import zoo  # noqa\n")
    proc = _lint(copy)
    assert proc.returncode != 0
    assert (
        "host packages never import kit.kernel" in proc.stdout
        and "kit.orchestrate.matrix -> kit.kernel.models.zoo" in proc.stdout
    )


def test_a_circle_is_caught(copy):
    records = copy / "kit" / "results" / "records.py"
    records.write_text(records.read_text() + "\nimport kit.results.reports  # noqa\n")
    proc = _lint(copy)
    assert proc.returncode != 0
    assert "no import circles BROKEN" in proc.stdout


def test_a_package_importing_one_above_it_is_caught(copy):
    store = copy / "kit" / "store" / "local.py"
    store.write_text(store.read_text() + "\nimport kit.results.runs  # noqa\n")
    proc = _lint(copy)
    assert proc.returncode != 0
    assert "host packages in layers BROKEN" in proc.stdout and "kit.store.local -> kit.results.runs" in proc.stdout


def test_common_importing_mxnet_is_caught(copy):
    metrics = copy / "kit" / "common" / "metrics.py"
    metrics.write_text(metrics.read_text() + "\nimport mxnet  # noqa\n")
    proc = _lint(copy)
    assert proc.returncode != 0 and "kit.common is not allowed to import mxnet" in proc.stdout


def test_the_python36_check_rejects_newer_syntax(copy):
    found = subprocess.run(["bash", str(REPO / "scripts" / "find-python.sh"), "3.6"], capture_output=True, text=True)
    if found.returncode != 0:
        pytest.skip("no Python 3.6 on this machine")
    (copy / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "check-py36.py", copy / "scripts" / "check-py36.py")
    ok = subprocess.run([found.stdout.strip(), str(copy / "scripts" / "check-py36.py")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout
    (copy / "kit" / "common" / "cases.py").write_text("if (n := 1):\n    pass\n")
    bad = subprocess.run(
        [found.stdout.strip(), str(copy / "scripts" / "check-py36.py")], capture_output=True, text=True
    )
    assert bad.returncode == 1 and "kit/common/cases.py:1" in bad.stdout


#: folders of tests that are not a package's: the repository's own files, and notebooks the tests run
NOT_PACKAGES = {"repository", "notebooks"}


def test_the_tests_mirror_the_packages_with_one_convention_for_fast_tests():
    tests = REPO / "tests"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"} - NOT_PACKAGES
    packages = {p.name for p in (REPO / "kit").iterdir() if (p / "__init__.py").is_file()}
    assert folders <= packages, folders - packages  # tests/<package>/ for kit/<package>/
    rooms = {p.name for p in (tests / "kernel").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert rooms <= {r.rsplit(".", 1)[1] for r in _kernel_rooms()}, rooms  # tests/kernel/<room>/ likewise
    assert not list(tests.glob("test_*.py"))  # no flat hall of tests
    assert not list(tests.rglob("test_fast_*.py"))  # fast is the absence of the envs marker, not a name
    makefile = (REPO / "Makefile").read_text()
    assert '-m "not envs"' in makefile
