"""Each notebook's parameters are built in one place, held to the notebook's own ``parameters`` cell."""

from __future__ import annotations

import ast

import papermill
import pytest

from kit.execute import notebook_parameters
from kit.execute.notebooks import NOTEBOOKS
from kit.home import KitHome
from kit.orchestrate.plan import plan
from kit.orchestrate.request import RunRequest
from kit.results.runs import Run

# the arguments a builder cannot do without, given the notebook's own defaults
REQUIRED = {
    "train": ("release", "store"),
    "reload": ("release", "store", "run_dir"),
    "investigate": ("release", "store", "model", "api", "saved_with"),
    "summary": ("run_dir",),
}


def _cell(notebook: str) -> dict:
    """The notebook's parameters as papermill reads them: name -> default value."""
    found = papermill.inspect_notebook(str(NOTEBOOKS / f"{notebook}.ipynb"))
    return {name: ast.literal_eval(p["default"]) for name, p in found.items()}


@pytest.mark.parametrize("notebook", sorted(notebook_parameters.BUILDERS))
def test_a_builder_sets_every_parameter_of_its_notebook_with_the_notebooks_defaults(notebook):
    cell = _cell(notebook)
    built = notebook_parameters.BUILDERS[notebook](**{name: cell[name] for name in REQUIRED[notebook]})
    assert list(built) == list(cell)  # the same names, in the cell's order
    assert built == cell


@pytest.mark.parametrize("notebook", sorted(notebook_parameters.BUILDERS))
def test_a_builder_refuses_a_name_its_notebook_does_not_have(notebook):
    required = {name: "x" for name in REQUIRED[notebook]}
    with pytest.raises(TypeError, match="unexpected keyword argument 'epoch'"):
        notebook_parameters.BUILDERS[notebook](**required, epoch=1)


def test_every_notebook_a_step_runs_has_a_builder_and_its_path_parameters_are_its_own():
    stepped = {p.stem for p in NOTEBOOKS.glob("*.ipynb")} - {"e2e_speed"}  # a bench's notebook, no step's
    assert stepped == set(notebook_parameters.BUILDERS)
    for notebook, paths in notebook_parameters.PATH_PARAMETERS.items():
        assert set(paths) <= set(_cell(notebook))


def test_builders_pass_paths_as_strings_and_leave_empty_optional_paths_empty(tmp_path):
    built = notebook_parameters.reload(release="1.9.1", store=tmp_path / "s", run_dir=tmp_path / "r", tolerance=None)
    assert built["store"] == str(tmp_path / "s") and built["run_dir"] == str(tmp_path / "r")
    assert built["tolerance"] == {} and built["exit_runtimes"] == {}
    built = notebook_parameters.train(release="1.9.1", store="s", epochs=None, saved_by=None)
    assert built["epochs"] == 0 and built["saved_by"] == ""


def test_the_plans_steps_give_their_notebooks_every_parameter_and_nothing_else(tmp_path):
    req = RunRequest(save=["1.4.1", "1.9.1"], load=["1.9.1", "onnx-1.9.1"], apis=["export"], cells=["lenet:*"])
    steps = plan(req, Run(tmp_path / "runs", "r1"), tmp_path / "store", home=KitHome(tmp_path / "home"))
    assert [s.id for s in steps] == ["train:1.4.1", "train:1.9.1", "reload:1.9.1", "reload:onnx-1.9.1", "summary"]
    for step in steps:
        assert list(step.parameters) == list(_cell(step.kind)), step.id
    reload = steps[2].parameters
    assert reload["cells"] == ["lenet:*"] and reload["versions"] == "current" and reload["exit_runtimes"] == {}
