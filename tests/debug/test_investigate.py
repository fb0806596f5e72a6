"""Investigating a regression: localize it, bisect it, bundle it."""

from __future__ import annotations

import json
import math
import shutil
import zipfile

import mistune
import nbformat
import pytest
from conftest import NEWEST, OLDEST, group_line, run_cli, scale_weight

from kit.common import verdicts

pytestmark = pytest.mark.envs
CELL = f"lenet/export/{OLDEST}/{NEWEST}"


@pytest.fixture(scope="module")
def regressed_run(trained_store, kit_home, tmp_path_factory):
    """A run over a copied artifact whose dense0 weight was perturbed (hash updated, so it loads)."""
    base = tmp_path_factory.mktemp("regressed")
    store, runs = base / "store", base / "runs"
    shutil.copytree(trained_store["_store"] / OLDEST / "lenet" / "export", store / OLDEST / "lenet" / "export")
    folder = store / OLDEST / "lenet" / "export"
    scale_weight(kit_home, folder / "model-0000.params", "dense0_weight", "w * 1.5")
    proc = run_cli(
        "run",
        "--runs-dir",
        str(runs),
        "--run-id",
        "regressed",
        "--save",
        OLDEST,
        "--load",
        NEWEST,
        "--models",
        "lenet",
        "--apis",
        "export",
        "--store",
        str(store),
        home=kit_home,
        timeout=900,
    )
    return {"proc": proc, "runs": runs, "store": store}


def test_the_regression_fails_the_run(regressed_run):
    assert regressed_run["proc"].returncode == 1, regressed_run["proc"].stdout[-2000:]
    fail = group_line(regressed_run["proc"].stdout, "FAIL", "outputs of lenet moved past tolerance")
    assert "lenet via " in fail and "export" in fail and f"saved with {OLDEST}, loaded with {NEWEST}" in fail


@pytest.fixture(scope="module")
def investigated(regressed_run, kit_home):
    return run_cli(
        "investigate", "regressed", "--cell", CELL, "--runs-dir", str(regressed_run["runs"]), home=kit_home, timeout=600
    )


def test_investigate_localizes_the_perturbed_layer(regressed_run, investigated):
    proc = investigated
    assert proc.returncode == 0, proc.stderr[-2000:]
    for chatter in ("Kernel is running over TCP", "Loading symbol saved by previous version"):
        assert chatter not in proc.stdout + proc.stderr  # the kernel's and MXNet's logs go to the step's log
    assert "first node past tolerance: #7 lenet_dense0_fwd (op FullyConnected" in proc.stdout
    assert "lenet_dense0_weight (values changed)" in proc.stdout
    slug = f"{OLDEST}__lenet__export__{NEWEST}"
    result = json.loads((regressed_run["runs"] / "regressed" / "investigate" / f"{slug}.json").read_text())
    rows = result["rows"]
    assert [r["op"] for r in rows[:8]] == [
        "Convolution",
        "Activation",
        "Pooling",
        "Convolution",
        "Activation",
        "Pooling",
        "Reshape",
        "FullyConnected",
    ]
    assert all(r["ok"] for r in rows[:7]) and not any(r["ok"] for r in rows[7:])
    assert result["first_divergence"]["attrs"]["num_hidden"] == "64"
    worst = result["worst_elements"][0]
    assert math.isclose(abs(worst["loaded"] - worst["saved"]), worst["abs_diff"], rel_tol=1e-6), worst
    # the weight x1.5 moves the worst element by half its weighted input: a large part of the value itself,
    # nothing like float noise (1e-7 of it); the layer's outputs have no fixed size, their ratio does
    assert worst["abs_diff"] > 0.01 * max(abs(worst["saved"]), abs(worst["loaded"])), worst
    changed = [p for p in result["parameters"] if p["status"] != verdicts.PARAM_UNCHANGED]
    assert [p["name"] for p in changed] == ["lenet_dense0_weight"]
    assert abs(changed[0]["loaded_std"] / changed[0]["saved_std"] - 1.5) < 1e-3
    nb = nbformat.read(regressed_run["runs"] / "regressed" / "investigate" / f"{slug}.ipynb", as_version=4)
    assert nb.metadata["kernelspec"]["name"] == f"mxnet-{NEWEST}"
    assert _figures(nb) == 3  # error growth, per-layer heatmap, worst elements: matplotlib PNGs
    tables = "".join(o.get("data", {}).get("text/html", "") for c in nb.cells for o in c.get("outputs", []))
    assert "<td>lenet_dense0_fwd</td>" in tables and "dataframe" in tables  # pandas DataFrames


def _figures(nb):
    return sum(
        1
        for c in nb.cells
        for o in c.get("outputs", [])
        if o.get("data", {}).get("image/png", "").startswith("iVBORw0KGgo")  # base64 of the PNG signature
    )


def test_investigate_plots_with_matplotlib_in_the_oldest_kernel(regressed_run, kit_home):
    same = f"lenet/export/{OLDEST}/{OLDEST}"
    proc = run_cli(
        "investigate", "regressed", "--cell", same, "--runs-dir", str(regressed_run["runs"]), home=kit_home, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the weights were changed after 1.0.0.post4 saved its reference: the same layer shows, in the oldest kernel
    assert "first node past tolerance: #7 lenet_dense0_fwd (op FullyConnected" in proc.stdout
    path = regressed_run["runs"] / "regressed" / "investigate" / f"{OLDEST}__lenet__export__{OLDEST}.ipynb"
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == f"mxnet-{OLDEST}"
    assert _figures(nb) == 3  # error growth, per-layer heatmap, worst elements
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]


def test_bundle_holds_what_it_promises(regressed_run, investigated, kit_home):
    proc = run_cli("bundle", "regressed", "--cell", CELL, "--runs-dir", str(regressed_run["runs"]), home=kit_home)
    assert proc.returncode == 0, proc.stderr
    path = proc.stdout.strip().splitlines()[-1]
    slug = f"{OLDEST}__lenet__export__{NEWEST}"
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        assert all(n.startswith(slug + "/") and ".." not in n for n in names)
        for member in (
            "README.md",
            "record.json",
            "fingerprints.json",
            "run.json",
            "artifact-manifest.json",
            "investigation.json",
            f"notebooks/reload-mxnet-{NEWEST}.ipynb",
            f"notebooks/reload-mxnet-{NEWEST}.html",
            f"notebooks/investigate-{slug}.ipynb",
            f"notebooks/investigate-{slug}.html",
        ):
            assert f"{slug}/{member}" in names, member
        readme = z.read(f"{slug}/README.md").decode()
        record = json.loads(z.read(f"{slug}/record.json"))
    assert record["verdict"] in ("drift", "mismatch")
    assert f"**{record['verdict']}**" in readme and f"MXNet **{OLDEST}**" in readme
    assert "`lenet_dense0_fwd` (op `FullyConnected`" in readme
    # the one cell again, on the run's own store
    assert f"mxcompat run --save {OLDEST} --load {NEWEST} --cells lenet:export " in readme
    assert f"--store {regressed_run['store']}" in readme
    html = mistune.html(readme)
    assert html.count("<table>") == 2 and "<h2>Reproduce</h2>" in html and "<pre><code" in html


def test_bad_cells_are_usage_errors(regressed_run, kit_home):
    for cell, message in (
        ("lenet/export/1.0.0.post4", "MODEL/API/SAVED/LOADED"),
        ("lenet/pickle/a/b", "unknown API"),
        ("lenet/export/../b", "invalid release name"),
        ("vgg/export/a/b", "no record"),
        (f"lenet/export/{OLDEST}/1.4.1", "no record"),
    ):
        proc = run_cli("bundle", "regressed", "--cell", cell, "--runs-dir", str(regressed_run["runs"]), home=kit_home)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_bisect_names_the_release_that_changed(trained_store, kit_home, tmp_path):
    """1.9.1's exported LeNet loads from 1.5.1 on and not before ('layout'): bisect finds 1.4.1."""
    proc = run_cli(
        "bisect",
        "--model",
        "lenet",
        "--api",
        "export",
        "--saved-with",
        NEWEST,
        "--good",
        NEWEST,
        "--bad",
        OLDEST,
        "--store",
        str(trained_store["_store"]),
        "--run-id",
        "bis",
        "--runs-dir",
        str(tmp_path),
        home=kit_home,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "first release with the changed verdict: 1.4.1 (last unchanged: 1.5.1)" in proc.stdout
    summary = json.loads((tmp_path / "bis" / "bisect.json").read_text())
    assert summary["reloads"] <= math.ceil(math.log2(10)) + 1 == summary["bound"]
    probed = dict(summary["probes"])
    assert probed[OLDEST] == "load-error" and probed.get("1.4.1", "load-error") == "load-error"
    assert all(v in ("identical", "close") for r, v in probed.items() if r in ("1.5.1", "1.6.0", "1.7.0.post2"))
