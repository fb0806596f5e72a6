"""Commands delete only what they own, names become paths only when they are plain, an artifact commit never
hides the artifact, and a file's declared sizes are checked before anything allocates them (no MXNet needed)."""

from __future__ import annotations

import json
import os
import struct
import zipfile

import hostile
import numpy as np
import pytest
from conftest import run_cli

from kit.common import artifacts, declared_sizes
from kit.common.names import is_safe_name, is_safe_relative
from kit.store import LocalStore


@pytest.fixture
def home(tmp_path):
    """A kit home with two environments (folders), a store and runs: what env remove must leave alone."""
    root = tmp_path / "home"
    for name in ("1.4.1", "1.9.1"):
        (root / "envs" / name / "bin").mkdir(parents=True)
    (root / "store" / "1.9.1" / "lenet").mkdir(parents=True)
    (root / "store" / "1.9.1" / "lenet" / "kept.txt").write_text("an artifact")
    (root / "jupyter" / "kernels" / "mxnet-1.9.1").mkdir(parents=True)
    return root


def _tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("name", ["..", "", "/tmp", ".", "1.9.1/..", "1.9.1\n", "envs", "../store"])
def test_env_remove_refuses_what_env_list_does_not_show_and_deletes_nothing(home, name):
    before = _tree(home)
    proc = run_cli("env", "remove", "1.4.1", name, home=home)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "nothing was removed" in proc.stderr and "Traceback" not in proc.stderr
    assert _tree(home) == before  # not even 1.4.1, named first: refused before anything is removed


def test_env_remove_removes_exactly_the_named_environment(home):
    proc = run_cli("env", "remove", "1.4.1", home=home)
    assert proc.returncode == 0, proc.stderr
    assert not (home / "envs" / "1.4.1").exists() and (home / "envs" / "1.9.1").is_dir()
    assert (home / "store" / "1.9.1" / "lenet" / "kept.txt").read_text() == "an artifact"


def test_plain_names_take_no_trailing_newline_and_no_traversal():
    assert is_safe_name("1.9.1") and is_safe_name("1.7.0.post2+mkl")
    for bad in ("1.9.1\n", "..", ".hidden", "a/b", "", "a b", None):
        assert not is_safe_name(bad), bad
    assert is_safe_relative("model-0000.params") and is_safe_relative("sub/file.json")
    for bad in ("../x", "/x", "a//b", "a/../b", "a\n", ""):
        assert not is_safe_relative(bad), bad


def _manifest(**changes):
    m = {
        "status": "saved",
        "files": {"model-symbol.json": "0" * 64, "model-0000.params": "1" * 64, "reference.npz": "2" * 64},
        "load": {"symbol_file": "model-symbol.json", "param_file": "model-0000.params"},
    }
    m.update(changes)
    return m


def test_manifest_names_that_leave_the_artifact_or_are_not_listed_are_refused():
    assert artifacts.name_problems(_manifest()) == []
    assert artifacts.name_problems({"status": "unsupported", "files": {}, "reason": "no API"}) == []
    cases = {
        "files": ({"../../x": "0"}, "'../../x' is not a plain relative name"),
        "load": ({"symbol_file": "model-symbol.json", "param_file": "/etc/passwd"}, "'/etc/passwd'"),
    }
    for key, (value, words) in cases.items():
        problems = artifacts.name_problems(_manifest(**{key: value}))
        assert any(words in p for p in problems), problems
    assert artifacts.name_problems(_manifest(files={})) == ["the manifest lists no files"]
    prefix = _manifest(load={"prefix": "../../model", "epoch": 0})
    assert any("'../../model-symbol.json'" in p for p in artifacts.name_problems(prefix))


def test_verify_counts_a_file_that_resolves_outside_the_artifact_as_missing(tmp_path):
    folder, outside = tmp_path / "artifact", tmp_path / "outside.params"
    folder.mkdir()
    outside.write_bytes(b"weights")
    os.symlink(outside, folder / "model.params")
    manifest = {"status": "saved", "files": {"model.params": artifacts.sha256_file(str(outside))}, "load": {}}
    assert artifacts.verify(str(folder), manifest) == ["model.params"]


def _params(path, shapes):
    """An MXNet V2 NDArray list file of float32 arrays of ``shapes`` (the layout 1.x writes)."""
    out = struct.pack("<QQQ", 0x112, 0, len(shapes))
    for shape in shapes:
        out += (
            struct.pack("<Ii", 0xF993FAC9, 0) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}q", *shape)
        )
        out += struct.pack("<iii", 1, 0, 0) + b"\x00" * (4 * int(np.prod(shape)))
    path.write_bytes(out + struct.pack("<Q", 0))
    return path


def test_a_params_file_that_declares_more_than_it_holds_is_refused(tmp_path):
    good = _params(tmp_path / "good.params", [(2, 3), (4,)])
    assert declared_sizes.params_problem(str(good)) is None
    bad = tmp_path / "bad.params"
    bad.write_bytes(good.read_bytes())
    hostile.huge_first_array(bad)
    assert "array 0 declares shape (1099511627776, 3)" in declared_sizes.params_problem(str(bad))


def test_an_npz_that_expands_past_the_limit_or_declares_more_than_it_holds_is_refused(tmp_path):
    ok = tmp_path / "ok.npz"
    np.savez_compressed(ok, **{"batch.input.data": np.zeros((64, 64), np.float32)})
    assert declared_sizes.npz_problem(str(ok)) is None
    assert "over the 1000-byte limit" in declared_sizes.npz_problem(str(ok), limit=1000)  # a deflate bomb, small
    declaring = tmp_path / "declaring.npz"
    hostile.npz_declaring(declaring)
    with pytest.raises(ValueError, match=r"declares shape \(1000000, 1000000\)"):
        artifacts.load_reference(str(declaring))
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.npy", b"\x00" * (1 << 20))
    assert "expand to 1048576 bytes" in declared_sizes.npz_problem(str(tmp_path / "bomb.npz"), limit=1 << 16)


def _staged(store, version):
    final = str(store / "1.9.1" / "lenet" / "export")
    tmp = artifacts.staging_dir(final)
    manifest = {"status": "saved", "model_version": "m", "param_version": version, "files": {}}
    artifacts.write_json_atomic(os.path.join(tmp, artifacts.MANIFEST), manifest)
    return tmp, final


def _commit(store, version):
    tmp, final = _staged(store, version)
    artifacts.commit_dir(tmp, final, archive=artifacts.archive_dir(str(store), "1.9.1", "lenet", "export"))


def test_a_commit_that_crashes_between_its_renames_never_loses_the_artifact(tmp_path, monkeypatch):
    """Where the system cannot swap two folders in one step, a crash between the two renames hid the artifact
    (its folder renamed away): the store lists it again, and the next commit keeps it as a version."""
    store = tmp_path / "store"
    _commit(store, "v1")
    monkeypatch.setattr(artifacts, "_exchange", lambda a, b: False)
    real_rename, calls = os.rename, []

    def crash_on_second(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed between the renames")
        real_rename(src, dst)

    tmp, final = _staged(store, "v2")
    monkeypatch.setattr(os, "rename", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        artifacts.commit_dir(tmp, final)
    monkeypatch.setattr(os, "rename", real_rename)
    assert not (store / "1.9.1" / "lenet" / "export").exists()  # hidden, as the crash left it
    refs = LocalStore(store).refs()
    assert [r.rel for r in refs] == ["1.9.1/lenet/export"]
    assert json.loads((store / "1.9.1/lenet/export/manifest.json").read_text())["param_version"] == "v1"


def test_a_commit_swaps_the_artifact_in_one_step(tmp_path, monkeypatch):
    store = tmp_path / "store"
    _commit(store, "v1")
    seen = []
    real_exchange = artifacts._exchange
    monkeypatch.setattr(artifacts, "_exchange", lambda a, b: seen.append(b) or real_exchange(a, b))
    _commit(store, "v2")
    assert seen == [str(store / "1.9.1" / "lenet" / "export")]
    assert json.loads((store / "1.9.1/lenet/export/manifest.json").read_text())["param_version"] == "v2"
    assert sorted(p.name for p in (store / ".versions/1.9.1/lenet/export").iterdir()) == ["m-v1"]


def test_a_run_folder_with_json_nested_too_deep_gets_a_clear_refusal(tmp_path):
    """A run folder someone else wrote: a run.json or a record nested too deep to parse is named, exit 2 or 3,
    never a RecursionError traceback."""
    runs = tmp_path / "runs"
    (runs / "r" / "records").mkdir(parents=True)
    (runs / "r" / "run.json").write_text("[" * 200000 + "]" * 200000)
    proc = run_cli("report", "r", "--runs-dir", str(runs), home=tmp_path / "home")
    assert proc.returncode == 2 and "run r has no readable run.json" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    (runs / "r" / "run.json").write_text(json.dumps({"run_id": "r", "exit_code": 0, "request": {}, "order": []}))
    (runs / "r" / "records" / "a.json").write_text("{" * 100 + '"a": ' + "[" * 200000 + "]" * 200000 + "}" * 100)
    proc = run_cli("report", "r", "--runs-dir", str(runs), home=tmp_path / "home")
    assert proc.returncode == 3 and "a.json is not readable JSON" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
