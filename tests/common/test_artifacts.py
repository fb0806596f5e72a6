import json
import os
import shutil
import tempfile
from collections import OrderedDict

import numpy as np

from kit.common import artifacts


def _tmpdir():
    return tempfile.mkdtemp(prefix="kit-artifacts-")


def test_reference_round_trip_without_pickles():
    d = _tmpdir()
    try:
        cases = OrderedDict(
            [
                ("batch", {"data": np.arange(6, dtype=np.float32).reshape(2, 3)}),
                ("zeros", {"data": np.zeros((1, 3), np.float32)}),
            ]
        )
        outputs = {"batch": [np.ones((2, 4), np.float32)], "zeros": [np.zeros((1, 4), np.float32)]}
        memory = {"batch": [np.ones((2, 4), np.float32)], "zeros": [np.zeros((1, 4), np.float32)]}
        path = os.path.join(d, artifacts.REFERENCE)
        artifacts.save_reference(path, cases, outputs, memory)
        ref = artifacts.load_reference(path)
        assert sorted(ref) == ["batch", "zeros"]
        assert np.array_equal(ref["batch"]["input"]["data"], cases["batch"]["data"])
        assert ref["batch"]["output"][0].shape == (2, 4) and ref["zeros"]["memory"][0].sum() == 0
    finally:
        shutil.rmtree(d)


def test_param_version_tracks_values_names_and_shapes():
    a = {"w": np.ones((2, 2), np.float32), "b": np.zeros(2, np.float32)}
    same = {"b": np.zeros(2, np.float32), "w": np.ones((2, 2), np.float32)}
    assert artifacts.param_version(a) == artifacts.param_version(same)
    changed = dict(a, w=np.ones((2, 2), np.float32) * 1.0001)
    assert artifacts.param_version(changed) != artifacts.param_version(a)
    renamed = {"w2": a["w"], "b": a["b"]}
    assert artifacts.param_version(renamed) != artifacts.param_version(a)
    reshaped = dict(a, w=np.ones(4, np.float32))
    assert artifacts.param_version(reshaped) != artifacts.param_version(a)


def test_verify_catches_changed_and_missing_files():
    d = _tmpdir()
    try:
        for name, body in (("a.params", b"weights"), ("b.json", b"{}")):
            with open(os.path.join(d, name), "wb") as f:
                f.write(body)
        manifest = {"files": artifacts.hash_files(d, ["a.params", "b.json"])}
        assert artifacts.verify(d, manifest) == []
        with open(os.path.join(d, "a.params"), "r+b") as f:
            f.write(b"W")
        os.remove(os.path.join(d, "b.json"))
        assert artifacts.verify(d, manifest) == ["a.params", "b.json"]
    finally:
        shutil.rmtree(d)


def test_commit_replaces_atomically_and_json_is_complete():
    d = _tmpdir()
    try:
        final = artifacts.artifact_dir(d, "1.9.1", "mlp", "export")
        for body in ("first", "second"):
            tmp = artifacts.staging_dir(final)
            artifacts.write_json_atomic(os.path.join(tmp, artifacts.MANIFEST), {"v": body})
            artifacts.commit_dir(tmp, final)
        assert artifacts.read_json(os.path.join(final, artifacts.MANIFEST)) == {"v": "second"}
        left = sorted(n for n in os.listdir(os.path.dirname(final)) if not n.endswith(".lock"))  # its lock stays
        assert left == ["export"]  # no staging or old folders left
        with open(os.path.join(final, artifacts.MANIFEST)) as f:
            json.load(f)
    finally:
        shutil.rmtree(d)


def test_retrained_weights_keep_the_old_version():
    d = _tmpdir()
    try:
        final = artifacts.artifact_dir(d, "1.9.1", "mlp", "export")
        archive = os.path.dirname(artifacts.version_dir(d, "1.9.1", "mlp", "export", "x"))
        for pv in ("aaaa", "aaaa", "bbbb"):
            tmp = artifacts.staging_dir(final)
            artifacts.write_json_atomic(
                os.path.join(tmp, artifacts.MANIFEST), {"status": "saved", "model_version": 1, "param_version": pv}
            )
            artifacts.commit_dir(tmp, final, archive=archive)
        assert artifacts.read_json(os.path.join(final, artifacts.MANIFEST))["param_version"] == "bbbb"
        assert os.listdir(archive) == ["1-aaaa"]  # same identity replaced, the other one kept
        kept = artifacts.version_dir(d, "1.9.1", "mlp", "export", "1-aaaa")
        assert artifacts.read_json(os.path.join(kept, artifacts.MANIFEST))["param_version"] == "aaaa"
    finally:
        shutil.rmtree(d)
