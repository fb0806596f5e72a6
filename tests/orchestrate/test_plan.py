"""Planning, waves, and the executor and store registries: host logic, no environments."""

from __future__ import annotations

import pytest

from kit import store as stores
from kit.common.errors import UsageError
from kit.execute.executors import EXECUTORS, executor_class, get_executor
from kit.execute.local_executor import LocalExecutor
from kit.execute.steps import Step
from kit.home import KitHome
from kit.orchestrate.plan import plan, waves
from kit.orchestrate.request import RunRequest
from kit.results.runs import Run


def _plan(tmp_path, **req):
    run = Run(tmp_path / "runs", "r1")
    return run, plan(RunRequest(**req), run, tmp_path / "store", home=KitHome(tmp_path / "home"))


def test_train_per_saving_release_reload_per_loading_release_then_the_summary(tmp_path):
    run, steps = _plan(tmp_path, save=["1.4.1", "1.9.1"], load=["1.4.1", "1.9.1"], models=["mlp"])
    assert [s.id for s in steps] == ["train:1.4.1", "train:1.9.1", "reload:1.4.1", "reload:1.9.1", "summary"]
    by_id = {s.id: s for s in steps}
    # backward only: 1.4.1 reloads what 1.4.1 saved, 1.9.1 both
    assert by_id["reload:1.4.1"].parameters["saved_with"] == ["1.4.1"]
    assert by_id["reload:1.9.1"].parameters["saved_with"] == ["1.4.1", "1.9.1"]
    assert by_id["reload:1.9.1"].depends_on == ["train:1.4.1", "train:1.9.1"]
    assert by_id["summary"].depends_on == [s.id for s in steps[:-1]]
    train = by_id["train:1.9.1"]
    assert train.kernel == "mxnet-1.9.1" and train.notebook.endswith("notebooks/train.ipynb")
    assert train.output == str(run.dir / "train" / "mxnet-1.9.1.ipynb")
    assert train.progress == str(run.dir / ".progress" / "train-1.9.1.json")
    assert train.parameters == {
        "release": "1.9.1",
        "models": ["mlp"],
        "apis": ["export", "save_parameters", "save_params", "module_checkpoint"],
        "store": str(tmp_path / "store"),
        "seed": 0,
        "epochs": 0,
        "retrain": False,
        "cells": [],
        "saved_by": f"{run.id}/train:1.9.1",  # the manifests name it: its notebook is kept with them
    }
    assert by_id["summary"].runs_on_host and not train.runs_on_host


def test_forward_adds_newer_sources_and_custom_names_compare_with_everything(tmp_path):
    _, steps = _plan(tmp_path, save=["1.4.1", "1.9.1"], load=["1.4.1"], forward=True)
    assert {s.id: s for s in steps}["reload:1.4.1"].parameters["saved_with"] == ["1.4.1", "1.9.1"]
    _, steps = _plan(tmp_path, save=["1.9.1"], load=["rc-build"])
    assert {s.id: s for s in steps}["reload:rc-build"].parameters["saved_with"] == ["1.9.1"]


def test_nothing_to_check_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="nothing to check"):
        _plan(tmp_path, save=["1.9.1"], load=["1.4.1"])


def test_waves_follow_the_declared_dependencies(tmp_path):
    _, steps = _plan(tmp_path, save=["1.4.1", "1.9.1"], load=["1.9.1"])
    assert [[s.id for s in w] for w in waves(steps)] == [["train:1.4.1", "train:1.9.1"], ["reload:1.9.1"], ["summary"]]
    # a resumed run lists finished steps too; a dependency outside the list holds nothing back
    assert [[s.id for s in w] for w in waves(steps[2:])] == [["reload:1.9.1"], ["summary"]]


def test_a_circle_of_dependencies_is_refused():
    a = Step("a", "train", "1.9.1", "n", "o", "k", {}, depends_on=["b"])
    b = Step("b", "train", "1.9.1", "n", "o", "k", {}, depends_on=["a"])
    with pytest.raises(ValueError, match="circle"):
        waves([a, b])


def test_executors_are_registered_with_their_traits():
    assert set(EXECUTORS) >= {"local", "dask"}
    assert executor_class("local").remote is False
    assert executor_class("dask").remote is True
    with pytest.raises(UsageError, match="unknown executor 'slurm'") as e:
        get_executor("slurm")
    assert "local" in e.value.hint


def test_dask_needs_a_scheduler_and_a_store(tmp_path):
    run = Run(tmp_path, "r")
    with pytest.raises(UsageError, match="--scheduler"):
        get_executor("dask", store_location="s3://b/p", run=run)
    with pytest.raises(UsageError, match="--store"):
        get_executor("dask", scheduler="tcp://127.0.0.1:1", run=run)


def test_stores_by_scheme(tmp_path):
    local = stores.open_store(tmp_path / "s")
    assert local.remote is False and local.working_copy() is local
    s3 = stores.open_store("s3://bucket/pre/fix", anonymous=True)
    assert s3.remote is True and (s3.bucket, s3.prefix) == ("bucket", "pre/fix")
    home = KitHome(tmp_path / "home")
    assert s3.working_copy(home).root == (tmp_path / "home" / "s3cache" / "bucket" / "pre/fix").resolve()
    with pytest.raises(UsageError, match="unsupported store") as e:
        stores.open_store("gs://bucket/x")
    assert "s3://" in e.value.hint


def test_the_local_executor_holds_what_its_store_holds_and_the_request_says_which_releases_are_complete(tmp_path):
    store = tmp_path / "store"
    for release, apis in (("1.4.1", ["export", "save_params"]), ("1.9.1", ["export"])):
        for api in apis:
            (store / release / "mlp" / api).mkdir(parents=True)
            (store / release / "mlp" / api / "manifest.json").write_text("{}")
    executor = LocalExecutor(store_location=str(store), home=KitHome(tmp_path / "home"))
    held = executor.holdings()
    assert held == {("1.4.1", "mlp", "export"), ("1.4.1", "mlp", "save_params"), ("1.9.1", "mlp", "export")}
    req = RunRequest(save=["1.4.1", "1.9.1", "2.0.0b1"], load=["1.9.1"], models=["mlp"], apis=["export", "save_params"])
    assert req.held_releases(held) == {"1.4.1"}
    assert [r for r in req.save if req.needs_training(r, {"1.4.1"})] == ["1.9.1", "2.0.0b1"]
    req.retrain = True
    assert req.needs_training("1.4.1", {"1.4.1"})
    asked = RunRequest(save=[], load=["1.9.1"], apis=["export"], reload_only=True)
    req = asked.with_stored_releases(held, str(store))
    assert asked.save == [] and req.save == ["1.4.1", "1.9.1"] and req.held_releases(set()) == {"1.4.1", "1.9.1"}
    assert not req.needs_training("1.4.1", set())
    with pytest.raises(UsageError, match="holds no artifacts of the models and APIs asked for"):
        RunRequest(save=[], load=["1.9.1"], models=["lenet"], reload_only=True).with_stored_releases(held, str(store))
    assert executor.run([], lambda r: None) == []


def test_a_reload_only_plan_has_no_train_steps_and_checks_every_model_in_the_store(tmp_path):
    _, steps = _plan(tmp_path, save=["1.4.1", "1.9.1"], load=["1.9.1"], reload_only=True)
    assert [s.id for s in steps] == ["reload:1.9.1", "summary"]
    reload = steps[0]
    assert reload.depends_on == [] and reload.parameters["models"] == [] and reload.parameters["apis"] == []
    assert reload.parameters["saved_with"] == ["1.4.1", "1.9.1"]
    assert [[s.id for s in w] for w in waves(steps)] == [["reload:1.9.1"], ["summary"]]


def test_environments_are_needed_only_where_steps_run(tmp_path, monkeypatch):
    from kit.envs.manager import EnvManager
    from kit.orchestrate import request as request_mod

    manager = EnvManager(KitHome(tmp_path / "home"))
    ready = {"1.9.1"}
    monkeypatch.setattr(request_mod, "_ready", lambda m, name: name in ready)
    monkeypatch.setattr(request_mod.kernelspecs, "read_kernelspec", lambda home, name: {})
    req = RunRequest(save=["1.4.1", "1.9.1"], load=["1.9.1"])
    request_mod.check_environments(req, manager, held={"1.4.1"})  # 1.4.1's artifacts are in the store
    with pytest.raises(UsageError, match=r"1.4.1 must train \(the store lacks") as e:
        request_mod.check_environments(req, manager, held=set())
    assert "mxcompat env create 1.4.1" in e.value.hint and "store pull" in e.value.hint
    with pytest.raises(UsageError, match=r"must train \(--retrain\)"):
        request_mod.check_environments(RunRequest(save=["1.4.1"], load=["1.9.1"], retrain=True), manager, {"1.4.1"})
    with pytest.raises(UsageError, match="no ready environment for 2.0.0b1"):
        request_mod.check_environments(RunRequest(save=["1.4.1"], load=["2.0.0b1"]), manager, {"1.4.1"})


def test_load_releases_older_than_every_saving_release_are_named_not_dropped(tmp_path):
    from kit.orchestrate.plan import unchecked

    req = RunRequest(save=["1.4.1", "1.9.1"], load=["1.0.0.post4", "1.2.1", "1.4.1", "1.9.1"])
    _, steps = _plan(tmp_path, save=req.save, load=req.load)
    assert [s.id for s in steps if s.kind == "reload"] == ["reload:1.4.1", "reload:1.9.1"]
    assert [(e["kind"], e["name"]) for e in unchecked(req)] == [("load", "1.0.0.post4"), ("load", "1.2.1")]
    assert unchecked(req)[0]["reason"].startswith("older than every saving release (1.4.1, 1.9.1)")
    assert "--forward" in unchecked(req)[0]["reason"]
    assert unchecked(RunRequest(save=req.save, load=req.load, forward=True)) == []
