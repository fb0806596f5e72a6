"""Investigating a cell that does not load or run: what failed and where, the remedies tried, and the
layer-by-layer comparison under the remedy that works (real kernels, real papermill, real records)."""

from __future__ import annotations

import json
import shutil

import nbformat
import pytest
import scales
from conftest import matrix_run, read_records, rehash, require_python, run_cli

from kit.common import verdicts

pytestmark = pytest.mark.envs

SAVED, FORWARD, GLUON2 = "1.9.1", "1.4.1", "2.0.0b1"
LSTM = f"lstm/export/{SAVED}/{GLUON2}"  # infer-error: Shape inconsistent, Provided = [1,0,24]
LENET = f"lenet/export/{SAVED}/{FORWARD}"  # load-error: Cannot find argument 'layout'
LAYOUT_NODES = ["lenet_conv0_fwd", "lenet_pool0_fwd", "lenet_conv1_fwd", "lenet_pool1_fwd"]


@pytest.fixture(scope="module")
def remedy_run(kit_home, tmp_path_factory):
    """1.9.1 saves lenet and lstm exports; 1.4.1 (forward) and 2.0.0b1 (backward) reload them."""
    require_python("3.7")
    return matrix_run(
        kit_home,
        tmp_path_factory,
        "remedy",
        save=SAVED,
        load=f"{FORWARD},{GLUON2}",
        models="lenet,lstm",
        more=("--apis", "export", "--forward"),
        create=(SAVED, FORWARD, GLUON2),
    )


def _investigate(run, run_id, cell, kit_home):
    proc = run_cli("investigate", run_id, "--cell", cell, "--runs-dir", str(run["runs"]), home=kit_home, timeout=600)
    slug = "__".join([cell.split("/")[i] for i in (2, 0, 1, 3)])
    folder = run["runs"] / run_id / "investigate"
    result = json.loads((folder / f"{slug}.json").read_text()) if (folder / f"{slug}.json").is_file() else None
    return proc, result, folder / f"{slug}.ipynb"


def _outputs(path):
    nb = nbformat.read(path, as_version=4)
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    text = "".join(
        o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "stream"
    )
    html = "".join(o.get("data", {}).get("text/html", "") for c in nb.cells for o in c.get("outputs", []))
    figures = sum(
        1 for c in nb.cells for o in c.get("outputs", []) if o.get("data", {}).get("image/png", "").startswith("iVBOR")
    )
    return nb, text, html, figures


def _moved_per_node(result):
    """``{node output: max_abs / max|saved value|}`` of an investigation's rows: how far each node moved, as a
    fraction of what the saving release computed there (its internals file, the investigation's reference)."""
    size = scales.internals_scales(result["reference"])
    return {r["output"]: scales.relative(r["max_abs"], size[r["output"]]) for r in result["rows"]}


def test_the_run_records_both_failures_with_the_remedy_that_fixes_each(remedy_run):
    lstm = remedy_run["records"][(SAVED, "lstm", "export", GLUON2)]
    lenet = remedy_run["records"][(SAVED, "lenet", "export", FORWARD)]
    assert lstm["verdict"] == "infer-error" and "Provided = [1,0,24]" in lstm["error"]
    assert lenet["verdict"] == "load-error" and "Cannot find argument 'layout'" in lenet["error"]
    assert (lstm["remedy"]["name"], lenet["remedy"]["name"]) == ("legacy_shape_semantics", "drop_default_attributes")


@pytest.fixture(scope="module")
def lstm_investigated(remedy_run, kit_home):
    return _investigate(remedy_run, "remedy", LSTM, kit_home)


def test_a_shape_error_names_its_node_and_its_inputs_and_compares_under_legacy_shape_semantics(lstm_investigated):
    proc, result, notebook = lstm_investigated
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    first = out.splitlines()[0]
    assert first.startswith(f"lstm/export saved with {SAVED}, loaded with {GLUON2}: infer-error. ")
    assert "Error in operator lstm_lstm0_rnn0: Shape inconsistent, Provided = [1,0,24]" in first
    assert "The error names node lstm_lstm0_rnn0 (op RNN)" in out
    # the begin state declares (1, 0, 24); partial inference under legacy semantics fills in the batch (2 samples)
    assert "lstm_lstm_lstm0_h0_0 (_zeros, shape=(1, 0, 24)): shape (1, 2, 24)" in out
    assert "Remedies tried, from the run's record:\n  legacy_shape_semantics: identical (max abs 0)" in out
    assert "Compared layer by layer under remedy legacy_shape_semantics" in out
    assert "no node past tolerance under remedy legacy_shape_semantics (15 nodes)" in out
    assert "0 parameter(s) not loaded as saved" in out
    assert out.rstrip().splitlines()[-1] == f"notebook: {notebook}"

    failure = result["failure"]
    assert (failure["verdict"], failure["source"], failure["node"]["name"]) == (
        "infer-error",
        "record",
        "lstm_lstm0_rnn0",
    )
    inputs = dict((i["node"], i) for i in failure["node"]["inputs"])
    assert inputs["lstm_lstm0_swapaxes0"]["shape"] == [16, 2, 16]
    assert inputs["lstm_lstm_lstm0_h0_1"]["declared"] == "(1, 0, 24)"
    assert failure["own"]["stage"] == "infer" and "Provided = [1,0,24]" in failure["own"]["error"]
    assert result["compared_under"]["name"] == "legacy_shape_semantics" and result["compared_under"]["paired"]
    rows = result["rows"]
    assert len(rows) == 15 and result["node_matching"] == "by name" and result["first_divergence"] is None
    assert all(r["ok"] and r["shape_match"] for r in rows)
    rnn = next(r for r in rows if r["node"] == "lstm_lstm0_rnn0")
    assert rnn["op"] == "RNN" and rnn["shape"] == [16, 2, 24]
    # every node, the RNN's included, as the saving release computed it to float noise: 1e-5 of that node's own
    # largest value (trained activations have no fixed size; a node that is all zeros must stay exactly zero)
    moved = _moved_per_node(result)
    assert moved[rnn["output"]] <= 1e-5 and max(moved.values()) <= 1e-5, moved
    assert result["parameters"] and all(p["status"] == verdicts.PARAM_UNCHANGED for p in result["parameters"])

    nb, text, html, figures = _outputs(notebook)
    assert nb.metadata["kernelspec"]["name"] == f"mxnet-{GLUON2}"
    assert "Shape inconsistent, Provided = [1,0,24]" in text and "legacy_shape_semantics: identical" in text
    assert "<td>legacy_shape_semantics</td>" in html  # the remedies tried, a table
    assert "<td>lstm_lstm0_rnn0</td>" in html  # the layer table under the remedy
    assert figures == 2  # error growth and heatmap under the remedy; no node past tolerance, no worst elements
    assert "no node is past tolerance" in text and "7 of 7 parameters load exactly as saved" in text


@pytest.fixture(scope="module")
def lenet_investigated(remedy_run, kit_home):
    return _investigate(remedy_run, "remedy", LENET, kit_home)


def test_an_unknown_argument_names_the_nodes_that_carry_it_and_compares_under_the_edit(lenet_investigated):
    proc, result, notebook = lenet_investigated
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert out.startswith(f"lenet/export saved with {SAVED}, loaded with {FORWARD}: load-error. ")
    assert "(Forward direction" in out
    assert (
        f"Argument 'layout' is unknown to MXNet {FORWARD}; the saved graph carries it on 4 node(s): "
        "lenet_conv0_fwd (Convolution, layout=NCHW), lenet_pool0_fwd (Pooling, layout=NCHW)" in out
    )
    assert "drop_default_attributes: close" in out and "dropped layout from 4 node(s)" in out
    assert "no node past tolerance under remedy drop_default_attributes (10 nodes)" in out

    failure = result["failure"]
    assert failure["argument"] == "layout" and failure["direction"] == "forward"
    assert [n["name"] for n in failure["argument_nodes"]] == LAYOUT_NODES
    assert {n["value"] for n in failure["argument_nodes"]} == {"NCHW"}
    assert result["compared_under"]["name"] == "drop_default_attributes"
    assert result["compared_under"]["graph"] == "the remedied artifact, loaded through export"
    rows = result["rows"]
    assert [r["op"] for r in rows[:6]] == [
        "Convolution",
        "Activation",
        "Pooling",
        "Convolution",
        "Activation",
        "Pooling",
    ]
    # the layers are compared for real: 1.4.1's convolutions differ from 1.9.1's in the last bits, within tolerance
    assert all(r["ok"] for r in rows) and result["first_divergence"] is None
    moved = _moved_per_node(result)  # last bits: 1e-4 of each node's own largest value at most
    assert max(moved.values()) <= 1e-4 and any(r["max_abs"] > 0 for r in rows), moved
    assert all(p["status"] == verdicts.PARAM_UNCHANGED for p in result["parameters"])

    _, text, html, figures = _outputs(notebook)
    assert "Argument 'layout' is unknown" in text and "<td>drop_default_attributes</td>" in html
    assert "<td>lenet_conv0_fwd</td>" in html and figures == 2


@pytest.fixture(scope="module")
def unremedied_run(remedy_run, kit_home):
    """The lenet export with one convolution's layout set to NHWC (not the default, so no remedy may drop it),
    reloaded in 1.4.1 from a copy of the store: a real record whose only remedy refuses."""
    store = remedy_run["store"].parent / "unremedied-store"
    folder = store / SAVED / "lenet" / "export"
    shutil.copytree(remedy_run["store"] / SAVED / "lenet" / "export", folder)
    graph = json.loads((folder / "model-symbol.json").read_text())
    conv = next(n for n in graph["nodes"] if n["name"] == "lenet_conv1_fwd")
    conv["attrs"]["layout"] = "NHWC"
    (folder / "model-symbol.json").write_text(json.dumps(graph))
    rehash(folder, "model-symbol.json")
    runs = remedy_run["runs"]
    proc = run_cli(
        "run",
        *("--runs-dir", str(runs), "--run-id", "unremedied", "--store", str(store)),
        *("--save", SAVED, "--load", FORWARD, "--models", "lenet", "--apis", "export", "--forward"),
        home=kit_home,
        timeout=600,
    )
    records = read_records(runs / "unremedied")
    assert (SAVED, "lenet", "export", FORWARD) in records, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"runs": runs, "records": records}


def test_no_remedy_works_the_investigation_still_explains_and_exits_0(unremedied_run, kit_home):
    rec = unremedied_run["records"][(SAVED, "lenet", "export", FORWARD)]
    assert rec["verdict"] == "load-error" and rec["remedy"]["fixed"] is False
    refused = rec["remedy"]["tried"][0]
    assert (refused["name"], refused["verdict"]) == ("drop_default_attributes", "refused")
    proc, result, notebook = _investigate(unremedied_run, "unremedied", LENET, kit_home)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "lenet_conv1_fwd (Convolution, layout=NHWC)" in out
    assert f"  drop_default_attributes: refused; {refused['reason']}" in out  # verbatim from the record
    assert "No remedy works: " in out and "No layer-by-layer comparison: no remedy makes the artifact load" in out
    assert "first node past tolerance" not in out and "no node past tolerance" not in out
    assert result["remedies"]["fixed"] is False and result["rows"] == [] and result["compared_under"] is None
    _, text, html, figures = _outputs(notebook)
    assert "No remedy works" in text and "<td>refused</td>" in html and figures == 0
    assert "no layer-by-layer comparison" in text
