"""--cells: MODEL:API patterns narrow a run to exact (model, API) pairs, on the host and in the kernels."""

from __future__ import annotations

import pytest

from kit.common import cell_selection
from kit.common.errors import UsageError
from kit.home import KitHome
from kit.orchestrate.plan import plan
from kit.orchestrate.request import RunRequest, _cell_pairs
from kit.results.runs import Run

CHECKER = ["mlp:module_checkpoint", "lenet:save_params", "lenet:export", "lstm:save_parameters"]


def _narrowed(**kw) -> RunRequest:
    req = RunRequest(save=["1.4.1"], load=["1.9.1"], **kw)
    cells, models, apis = _cell_pairs(req.cells, req.models, req.apis)
    return RunRequest(save=["1.4.1"], load=["1.9.1"], cells=cells, models=models, apis=apis)


def test_the_checkers_four_cases_are_exactly_four_pairs():
    req = _narrowed(cells=list(CHECKER))
    assert req.cells == ["mlp:module_checkpoint", "lenet:export", "lenet:save_params", "lstm:save_parameters"]
    assert req.models == ["mlp", "lenet", "lstm"]
    assert req.apis == ["module_checkpoint", "export", "save_params", "save_parameters"]
    assert req.saved_cells() == [
        ("mlp", "module_checkpoint"),
        ("lenet", "export"),
        ("lenet", "save_params"),
        ("lstm", "save_parameters"),
    ]
    # the store holds 1.4.1's four artifacts but not lstm's export: 1.4.1 needs no training for these cells
    held = {("1.4.1", m, a) for m, a in req.saved_cells()}
    assert req.held_releases(held) == {"1.4.1"}
    assert req.held_releases(held - {("1.4.1", "lenet", "export")}) == set()


def test_globs_and_groups_on_either_side():
    assert _narrowed(cells=["lenet:*"]).cells == [
        "lenet:export",
        "lenet:save_parameters",
        "lenet:save_params",
        "lenet:module_checkpoint",
        "lenet:c_predict",
    ]
    assert _narrowed(cells=["*:export"], models=["mlp", "lenet"]).cells == ["mlp:export", "lenet:export"]
    vision = _narrowed(cells=["vision:save_parameters"]).models
    assert "resnet18_v1" in vision and "mlp" not in vision
    assert _narrowed(cells=["resnet18_v*:export"]).models == ["resnet18_v1", "resnet18_v2"]


def test_a_c_predict_cell_trains_its_module_checkpoint_but_checks_only_itself():
    req = _narrowed(cells=["mlp:c_predict"])
    assert req.cells == ["mlp:c_predict"] and req.saved_cells() == [("mlp", "module_checkpoint")]
    assert _narrowed(cells=["mlp:c_predict", "mlp:export"]).saved_cells() == [("mlp", "export")]


def test_patterns_that_match_nothing_or_are_malformed_are_usage_errors():
    with pytest.raises(UsageError, match=r"--cells nosuch:export match\(es\) no cell"):
        _narrowed(cells=["lenet:export", "nosuch:export"])
    with pytest.raises(UsageError, match="within --models/--apis"):
        _narrowed(cells=["lstm:*"], models=["mlp"])
    for bad in ("lenet", "lenet:", ":export", "a:b:c"):
        with pytest.raises(UsageError, match="is not MODEL:API"):
            _narrowed(cells=[bad])


def test_the_kernels_match_what_the_host_expanded():
    req = _narrowed(cells=["lenet:*", "*:module_checkpoint"], models=["mlp", "lenet"])
    for model in ("mlp", "lenet"):
        for api in ("export", "save_params", "module_checkpoint", "c_predict"):
            assert cell_selection.matches(req.cells, model, api) == cell_selection.matches(
                ["lenet:*", "*:module_checkpoint"], model, api
            )
    assert cell_selection.matches([], "anything", "at_all")
    assert cell_selection.matches(["lenet@abc12:export"], "lenet", "export")


def test_the_plan_passes_the_cells_to_train_and_reload(tmp_path):
    req = _narrowed(cells=list(CHECKER))
    run = Run(tmp_path / "runs", "r1")
    steps = {s.id: s for s in plan(req, run, tmp_path / "store", home=KitHome(tmp_path / "home"))}
    assert steps["train:1.4.1"].parameters["cells"] == [f"{m}:{a}" for m, a in req.saved_cells()]
    assert steps["reload:1.9.1"].parameters["cells"] == req.cells
    # without --cells the notebooks get their default: every cell; without --epochs, each model's own (0)
    home = KitHome(tmp_path / "home")
    plain = plan(
        RunRequest(save=["1.4.1"], load=["1.9.1"]), Run(tmp_path / "runs", "r2"), tmp_path / "store", home=home
    )
    assert [s.parameters["cells"] for s in plain[:2]] == [[], []] and plain[0].parameters["epochs"] == 0
    quick = plan(
        RunRequest(save=["1.4.1"], load=["1.9.1"], epochs=1), Run(tmp_path / "runs", "r3"), tmp_path / "s", home=home
    )
    assert quick[0].parameters["epochs"] == 1 and "epochs" not in quick[1].parameters  # reload trains nothing
