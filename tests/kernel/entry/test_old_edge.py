"""The old edge: MXNet 0.11.0 (Python 3.6, numpy 1.13.3) saves what it can and is checked like the rest."""

from __future__ import annotations

import pytest
from conftest import NEWEST, kernel_unit_tests, matrix_run, require_python

pytestmark = pytest.mark.envs

OLD_EDGE = "0.11.0"


@pytest.fixture(scope="module")
def old_edge_run(built_envs, kit_home, tmp_path_factory):
    require_python("3.6")
    return matrix_run(
        kit_home,
        tmp_path_factory,
        "old",
        save=OLD_EDGE,
        load=f"{OLD_EDGE},{NEWEST}",
        models="mlp,lenet,resnet_bn,symbolic",
        create=(OLD_EDGE,),
    )


def test_0_11_artifacts_reload_in_0_11_and_1_9(old_edge_run):
    proc = old_edge_run["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = old_edge_run["records"]
    for model in ("mlp", "lenet", "resnet_bn"):
        assert records[(OLD_EDGE, model, "save_params", OLD_EDGE)]["verdict"] == "identical"
        assert records[(OLD_EDGE, model, "module_checkpoint", OLD_EDGE)]["verdict"] == "identical"
        for api in ("save_params", "module_checkpoint"):
            rec = records[(OLD_EDGE, model, api, NEWEST)]
            assert rec["verdict"] in ("identical", "close"), (model, api, rec["reason"])
    assert records[(OLD_EDGE, "symbolic", "module_checkpoint", NEWEST)]["verdict"] in ("identical", "close")


def test_what_0_11_lacks_is_unsupported_with_its_reason(old_edge_run):
    rec = old_edge_run["records"][(OLD_EDGE, "mlp", "export", NEWEST)]
    assert rec["verdict"] == "unsupported" and "HybridBlock.export is not in MXNet 0.11" in rec["reason"]
    rec = old_edge_run["records"][(OLD_EDGE, "lenet", "save_parameters", OLD_EDGE)]
    assert rec["verdict"] == "unsupported" and "1.2" in rec["reason"]


def test_kernel_side_unit_tests_pass_inside_0_11(old_edge_run, kit_home):
    proc, result = kernel_unit_tests(kit_home, OLD_EDGE)
    assert proc.returncode == 0, result["failed"]
    assert (
        "test_mx_training.py::test_calibrated_batchnorm_holds_the_batch_statistics_and_weights_stay" in result["passed"]
    )
