"""Contracts as types: every executor and store kind against its type, method by method; steps across the worker
border through one schema; a request normalized apart from being checked."""

from __future__ import annotations

import inspect
import json

import pytest

from kit.common.errors import KitError, UsageError
from kit.envs.manager import EnvManager
from kit.execute.executors import EXECUTORS, Executor, executor_class
from kit.execute.steps import Step, StepResult, execute_step
from kit.home import KitHome
from kit.orchestrate.request import RunRequest, validate
from kit.store import LocalStore, RemoteStore, Store
from kit.store.s3 import S3Store


def _parameters(fn, annotated: bool) -> list[tuple]:
    return [
        (p.name, p.kind, p.default) + ((p.annotation,) if annotated else ())
        for p in inspect.signature(fn).parameters.values()
    ]


def mismatches(impl: type, base: type, annotated: bool = False) -> list[str]:
    """The methods ``base`` declares that ``impl`` lacks or spells otherwise: parameter names, kinds and defaults
    (and, ``annotated``, their annotations and the return's). Stores' annotations are left out: a kind may name
    a narrower type than the contract (``S3Store.exclusive`` returns an ``S3Lease``)."""
    out = []
    for name in sorted(base.__abstractmethods__):
        ours, theirs = getattr(impl, name, None), getattr(base, name)
        if ours is None or getattr(ours, "__isabstractmethod__", False):
            out.append(f"{name}: not implemented")
        elif _parameters(ours, annotated) != _parameters(theirs, annotated) or (
            annotated and inspect.signature(ours).return_annotation != inspect.signature(theirs).return_annotation
        ):
            out.append(f"{name}{inspect.signature(ours)} is not {name}{inspect.signature(theirs)}")
    return out


# -- executors -------------------------------------------------------------------------------------------------


def test_the_executor_type_declares_what_the_matrix_asks():
    assert Executor.__abstractmethods__ == {"holdings", "prepare", "start", "run", "close"}
    assert Executor.follows_dependencies is False and Executor.remote is False


@pytest.mark.parametrize("name", sorted(EXECUTORS))
def test_each_registered_executor_is_an_executor_by_signature(name):
    cls = executor_class(name)
    assert issubclass(cls, Executor) and not inspect.isabstract(cls)
    assert mismatches(cls, Executor, annotated=True) == []
    assert cls.name == name
    assert isinstance(cls.remote, bool) and isinstance(cls.follows_dependencies, bool)
    # the options get_executor passes by name are its own parameters, not swallowed by **options
    named = inspect.signature(cls).parameters
    assert {"jobs", "store_location", "run", "on_event"} <= set(named)


def test_the_traits_each_executor_declares():
    local, dask = executor_class("local"), executor_class("dask")
    assert (local.remote, local.follows_dependencies) == (False, True)
    assert (dask.remote, dask.follows_dependencies) == (True, False)


def test_an_executor_that_spells_a_method_otherwise_is_caught():
    class Sloppy(executor_class("local")):
        def run(self, steps, on_done):  # no prestart=
            return []

        def start(self, kernels=()):  # another name
            pass

    assert [m.split("(")[0] for m in mismatches(Sloppy, Executor, annotated=True)] == ["run", "start"]


# -- stores ----------------------------------------------------------------------------------------------------


def test_the_store_type_declares_what_callers_use():
    assert Store.__abstractmethods__ == {
        "working_copy", "refs", "manifest", "manifest_or_none", "problems", "exclusive", "write_index",
        "write_blob", "read_blob", "read_blob_or_none", "list_blobs",
    }  # fmt: skip
    assert RemoteStore.__abstractmethods__ - Store.__abstractmethods__ == {"put", "download", "sweep"}


@pytest.mark.parametrize(("cls", "base", "remote"), [(LocalStore, Store, False), (S3Store, RemoteStore, True)])
def test_each_store_kind_is_a_store_by_signature(cls, base, remote, tmp_path):
    assert issubclass(cls, base) and not inspect.isabstract(cls)
    assert mismatches(cls, base) == []
    assert cls.remote is remote
    opened = LocalStore(tmp_path) if cls is LocalStore else S3Store("s3://bucket/prefix", anonymous=True)
    assert isinstance(opened.url, str) and opened.url
    assert isinstance(opened.working_copy(KitHome(tmp_path / "home")), LocalStore)


def test_a_store_that_spells_a_method_otherwise_is_caught():
    class Sloppy(LocalStore):
        def read_blob_or_none(self, rel, json_blob=False):  # json_blob no longer keyword-only
            return None

        def write_index(self):  # no run_id
            return {}

    assert [m.split("(")[0] for m in mismatches(Sloppy, Store)] == ["read_blob_or_none", "write_index"]
    assert mismatches(LocalStore, RemoteStore) == [f"{m}: not implemented" for m in ("download", "put", "sweep")]


# -- steps across the worker border ------------------------------------------------------------------------------


def _step(**kw) -> Step:
    fields = dict(
        id="reload:1.9.1",
        kind="reload",
        release="1.9.1",
        notebook="/nb/reload.ipynb",
        output="/run/reload-1.9.1.ipynb",
        kernel="mxnet-1.9.1",
        parameters={"saved_with": ["1.4.1"], "store": "/store"},
        depends_on=["train:1.4.1"],
        limits={"step_timeout": 60},
    )
    return Step(**dict(fields, **kw))


def test_a_step_and_its_result_cross_as_json_and_come_back_equal():
    step = _step()
    assert Step.from_dict(json.loads(json.dumps(step.to_dict()))) == step
    result = StepResult("reload:1.9.1", "failed", 2.5, 2, "boom", "ValueError", deaths=1, cause="ValueError: boom")
    assert StepResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    assert StepResult.from_dict({"id": "summary", "status": "ok", "seconds": 1.0}) == StepResult("summary", "ok", 1.0)


def test_a_field_this_kit_does_not_know_or_a_missing_one_is_refused():
    with pytest.raises(KitError, match="field\\(s\\) this kit does not know: retries") as e:
        Step.from_dict(dict(_step().to_dict(), retries=3))
    assert "same mxnet-compat-kit" in e.value.hint
    with pytest.raises(KitError, match="without its field\\(s\\) seconds"):
        StepResult.from_dict({"id": "summary", "status": "ok"})


def test_a_run_json_entry_holds_its_outcome_beside_the_step():
    entry = dict(_step().to_dict(), status="ok", seconds=3.0, finished_at="2024-01-01T00:00:00Z")
    assert Step.from_manifest_entry(entry) == _step()
    with pytest.raises(KitError):
        Step.from_dict(entry)


def test_a_worker_refuses_a_step_of_another_schema_with_a_failed_result(tmp_path):
    out = execute_step(dict(_step().to_dict(), retries=3), str(tmp_path))
    result = StepResult.from_dict(out)
    assert (result.id, result.status, result.error_type) == ("reload:1.9.1", "failed", "KitError")
    assert "retries" in result.cause
    assert not list(tmp_path.iterdir())  # nothing ran


# -- a request: normalized, then checked ---------------------------------------------------------------------------


def test_normalizing_returns_a_new_request_and_leaves_the_asked_one_as_it_is():
    asked = RunRequest(save=["1.4.1"], load=["onnx", "1.9.1"], models=["core"], cells=["lenet:export"])
    before = asked.to_dict()
    req = asked.normalized()
    assert asked.to_dict() == before
    assert req.load == ["onnx-1.9.1", "1.9.1"]
    assert (req.cells, req.models, req.apis) == (["lenet:export"], ["lenet"], ["export"])
    assert req.limits and not asked.limits  # the defaults filled in
    assert req.normalized() == req  # canonical: normalizing again changes nothing


def test_checking_a_request_never_changes_it(tmp_path):
    req = RunRequest(save=["1.4.1"], load=["onnx", "1.9.1"], apis=["export"]).normalized()
    before = req.to_dict()
    validate(req, EnvManager(KitHome(tmp_path)), local_envs=False)
    assert req.to_dict() == before
    reload_only = RunRequest(save=[], load=["1.9.1"], models=["core", "mine"], reload_only=True)
    assert reload_only.normalized().models[-1] == "mine" and reload_only.models == ["core", "mine"]


def test_what_normalizing_cannot_resolve_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown model\\(s\\): nosuch"):
        RunRequest(save=["1.4.1"], load=["1.9.1"], models=["nosuch"]).normalized()
    with pytest.raises(UsageError, match="unknown API\\(s\\): nosuch"):
        RunRequest(save=["1.4.1"], load=["1.9.1"], apis=["nosuch"]).normalized()


def test_the_stored_releases_make_a_new_request():
    asked = RunRequest(save=[], load=["1.9.1"], reload_only=True)
    req = asked.with_stored_releases({("1.9.1", "mlp", "export"), ("1.4.1", "mlp", "export")}, "/store")
    assert req.save == ["1.4.1", "1.9.1"] and asked.save == []
