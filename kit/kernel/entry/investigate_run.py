"""What investigate.ipynb runs: where in a model a difference between two releases starts.

A cell whose artifact does not load or run in the loading release is investigated too: what failed and
where (the node the error names and its input shapes, the unknown argument or operator and the nodes that
carry it), the remedies tried (``kit.kernel.remedies.attempts``, as the run's record lists them), and the same
layer-by-layer comparison under the remedy that works.
"""

import os
import tempfile

from kit.common import artifacts, tolerance
from kit.common.capabilities import EXIT_APIS, EXIT_RUNTIMES, ONNX_SOURCES
from kit.common.errors import KitError
from kit.kernel.entry.train_run import check_kernel
from kit.kernel.investigate.failure import (
    _DIGITS,
    _STAMP,
    _compare_under_remedy,
    _explain,
    _metric,
    _record_summary,
    failed,
    read_record,
)
from kit.kernel.investigate.layer_compare import BY_NAME, TOP, InvestigatedCell, compare
from kit.kernel.models import zoo
from kit.kernel.mx import internals
from kit.kernel.saving import adapters


def investigate(
    release,
    store,
    model,
    api,
    saved_with,
    tolerance_overrides=None,
    reference=None,
    top=TOP,
    record=None,
    exit_runtimes=None,
    exports=None,
):
    """Compare every internal node of one artifact as ``release`` computes it with the saving release's.

    ``reference`` is an internals file computed on demand in the saving release;
    by default the one recorded at train time is used. ``record`` is the cell's record
    file in the run (its verdict, error and remedies), None for none. Returns a dict with one row
    per node, the first node past tolerance, its worst elements, and a parameter
    diff between what was saved and what this release loaded.

    A cell whose artifact does not load or run here (a load or infer error) is investigated too:
    ``failure`` says what failed and where (the node the error names, its input shapes, the unknown
    argument or operator and the nodes that carry it), ``remedies`` what was tried (the record's, or tried
    now when the record has none), and the layer-by-layer comparison is made under the remedy that works
    (``compared_under``). ``message`` says all of it in a few lines.

    An exit's cell (``api`` ``onnx``, ``openvino``, ``torch``; this kernel is its exporter's) compares the
    exported file, its nodes made outputs and run in the exit's runtime (``exit_runtimes``, ``{exit: Python}``),
    with the saving release's internals; its artifact is the one the record's ``source_api`` names. The files
    go to ``exports`` (None: a temporary folder), never into the store.
    """
    check_kernel(release)
    tolerance.validate(tolerance_overrides)
    rec = read_record(record)
    artifact_api = api
    if api in EXIT_APIS:
        from kit.kernel.exits import onnx_export, runtime_client

        runtime_client.configure(EXIT_RUNTIMES[api], (exit_runtimes or {}).get(api))
        onnx_export.configure(exports or tempfile.mkdtemp(prefix="mxcompat-investigate-"))
        artifact_api = (rec or {}).get("source_api") or ONNX_SOURCES[0]
        if artifact_api not in ONNX_SOURCES:  # a record's word, about to name a folder of the store
            raise KitError("the record %s names an unknown source API %r" % (record, artifact_api))
    folder = artifacts.artifact_dir(store, saved_with, model, artifact_api)
    try:
        manifest = artifacts.read_json(os.path.join(folder, artifacts.MANIFEST))
    except (IOError, OSError, ValueError) as e:
        raise KitError("no readable artifact %s/%s/%s in %s: %s" % (saved_with, model, api, store, e))
    if manifest.get("status") != "saved":
        raise KitError("artifact %s is %s: %s" % (folder, manifest.get("status"), manifest.get("reason")))
    bad = artifacts.verify(folder, manifest) or artifacts.content_problems(folder, manifest)
    if bad:
        raise KitError("artifact %s is corrupt (%s): nothing to investigate" % (folder, ", ".join(bad)))
    no_internals = None
    if not reference:
        info = manifest.get("internals") or {}
        if "file" in info:
            reference = os.path.join(folder, info["file"])
        elif failed(rec):  # what failed and what was tried still say something
            no_internals = "no internals were recorded for %s: %s (compute them: mxcompat investigate --recompute)" % (
                folder,
                info.get("unavailable", "older artifact"),
            )
        else:
            raise KitError(
                "no internals were recorded for %s: %s" % (folder, info.get("unavailable", "older artifact")),
                hint="compute them in the saving release: mxcompat investigate ... --recompute",
            )
    inputs, expected = internals.load(reference) if reference else (None, None)
    spec, adapter = zoo.MODELS.get(model), adapters.get(api)
    if spec is None and not manifest.get("foreign"):
        raise KitError("this kit does not know model %r" % model)
    result = {
        "loaded_with": release,
        "saved_with": saved_with,
        "model": model,
        "api": api,
        "artifact": folder,
        "reference": reference,
        "record": _record_summary(rec),
        "rows": [],
        "first_divergence": None,
        "worst_elements": [],
        "node_matching": None,
        "parameters": None,
        # a cell that does not load or run: what failed and where, what was tried, what the layers say under it
        "failure": None,
        "remedies": None,
        "compared_under": None,
        "not_compared": None,
        # an exit's cell: the exported file whose nodes were compared (its layered copy, its runtime)
        "exported": None,
    }
    cell = InvestigatedCell(
        release, saved_with, model, api, folder, manifest, spec, adapter, inputs, expected, tolerance_overrides
    )
    if no_internals:
        _explain(cell, result, rec, None, None, run=False)
        result["not_compared"] = no_internals
        result["message"] = message(result)
        return result
    stage = "load"
    try:
        sym, arg, aux = adapter.load_graph(spec, release, folder, manifest)
        stage = "infer"
        got, arg, aux = cell.layers(sym, arg, aux, folder, manifest)
    except adapters.GraphUnavailable as e:
        if not failed(rec):
            raise KitError(str(e))
        _explain(cell, result, rec, None, stage, run=False)
        result["not_compared"] = str(e)
    except Exception as e:  # noqa: BLE001 - the artifact's own failure here is what is investigated
        _explain(cell, result, rec, e, stage)
        if result["remedies"] and result["remedies"]["fixed"]:
            _compare_under_remedy(cell, result, top)
        else:
            result["not_compared"] = "no remedy makes the artifact load and run in MXNet %s" % release
    else:
        result.update(compare(cell, sym, arg, aux, got, top))
        if failed(rec):  # the reload failed, yet the graph evaluates node by node: both are evidence
            _explain(cell, result, rec, None, None, run=False)
    result["exported"] = cell.exported
    result["message"] = message(result)
    return result


def _cell(result):
    if result["api"] in EXIT_APIS:
        return "%s/%s saved with %s, exported by MXNet %s and run in %s" % (
            result["model"],
            result["api"],
            result["saved_with"],
            result["loaded_with"],
            EXIT_RUNTIMES[result["api"]],
        )
    return "%s/%s saved with %s, loaded with %s" % (
        result["model"],
        result["api"],
        result["saved_with"],
        result["loaded_with"],
    )


def _layers(result, matching=True):
    """Where the layer-by-layer difference starts, in words (or that no node diverges)."""
    first = result["first_divergence"]
    said = ""
    if matching and result.get("node_matching", BY_NAME) not in (BY_NAME, None):
        said = "nodes matched %s; " % result["node_matching"]
    unpaired = [r for r in result["rows"] if r["ok"] is None]
    if unpaired:  # an exit's file: nodes its exporter fused or renamed are not compared
        said += "%d of %d nodes are in the exported file; " % (len(result["rows"]) - len(unpaired), len(result["rows"]))
    if first is None:
        return "%severy one of %d nodes is within tolerance" % (said, len(result["rows"]) - len(unpaired))
    detail = "max abs error %.3g" % first["max_abs"] if first.get("max_abs") is not None else first["status"]
    return "%sthe first node past tolerance is #%d %s (op %s, %s)" % (
        said,
        first["index"],
        first["node"],
        first["op"],
        detail,
    )


def exported_line(result):
    """An exit's cell: the exported file, its copy with the nodes made outputs, and the runtime that ran it."""
    exported = result["exported"]
    runtime = exported["runtime"]
    return "exported file %s; its %d nodes made outputs in %s, run in %s" % (
        exported["file"],
        exported["exposed"],
        exported["layers"],
        ", ".join("%s %s" % kv for kv in sorted(runtime["versions"].items())),
    )


def headline(result):
    """One sentence: where the difference starts (or that no node diverges); for a cell that fails to load or
    run, what failed (the rest is in :func:`message`)."""
    failure = result.get("failure")
    if failure:
        return "%s: %s. %s" % (_cell(result), failure["verdict"], failure["headline"])
    cell = _cell(result)
    if result.get("node_matching", BY_NAME) != BY_NAME:
        cell += " (nodes matched %s)" % result["node_matching"]
    return "%s: %s." % (cell, _layers(result, matching=False))


def _input_line(i):
    made = i["node"] + (
        " (%s%s)" % (i["op"], ", shape=%s" % i["declared"] if i.get("declared") else "") if i["op"] else ""
    )
    return "%s: %s" % (made, "shape %s" % (tuple(i["shape"]),) if i.get("shape") is not None else "shape unknown")


def message(result):
    """What a user reads first: for a cell that does not load or run, what failed and where, the remedies tried
    (their errors verbatim) and what the layer-by-layer comparison under the one that works finds; for any
    other cell, :func:`headline`."""
    failure = result.get("failure")
    if not failure:
        return headline(result)
    lines = [headline(result)]
    release = result["loaded_with"]
    if failure["direction"] == "forward":
        lines.append("(Forward direction: an artifact of a newer release loaded in an older one.)")
    if failure["own"] is None and result["rows"] and not result.get("compared_under"):
        lines.append(
            "(The run's record says so; this investigation's own path, the graph bound node by node, loads and "
            "runs it: the layer table is the artifact as it is.)"
        )
    if failure.get("revealed_by"):
        lines.append("Remedy %s got further and then met this:" % failure["revealed_by"])
    node = failure.get("node")
    if node:
        said = "The error names node %s (op %s)" % (node["name"], node["op"] or "not in the saved graph")
        if node.get("inputs"):
            said += "; its inputs, shapes %s:\n" % node["shapes"]
            said += "\n".join("  %s" % _input_line(i) for i in node["inputs"])
        elif node.get("shapes"):
            said += " (its input shapes were %s)" % node["shapes"]
        lines.append(said if node.get("inputs") else said + ".")
    if failure.get("argument"):
        arg, carriers = failure["argument"], failure["argument_nodes"]
        said = ", ".join("%s (%s, %s=%s)" % (n["name"], n["op"], arg, n["value"]) for n in carriers)
        lines.append(
            "Argument '%s' is unknown to MXNet %s; the saved graph carries it on %d node(s)%s."
            % (arg, release, len(carriers), ": " + said if said else "")
        )
    if failure.get("operator"):
        users = failure["operator_nodes"]
        lines.append(
            "Operator %s is unknown to MXNet %s; %d node(s) of the saved graph use it%s."
            % (failure["operator"], release, len(users), (": " + ", ".join(users)) if users else "")
        )
    if failure.get("hint"):
        lines.append(failure["hint"] + ".")
    own = failure.get("own")
    if own and failure["source"] == "record" and _STAMP.sub("", own["headline"]) != _STAMP.sub("", failure["headline"]):
        same = _DIGITS.sub("#", _STAMP.sub("", own["headline"])) == _DIGITS.sub(
            "#", _STAMP.sub("", failure["headline"])
        )
        lines.append(
            "This investigation's own %s of the graph %s: %s"
            % (
                "loading" if own["stage"] == "load" else "evaluation",
                "fails the same way on its inputs" if same else "failed with",
                own["headline"],
            )
        )
    report = result.get("remedies")
    if report is None:
        lines.append("No remedy was tried (the run's record lists none).")
    else:
        said = "from the run's record" if report["source"] == "record" else "now, in this kernel (the record has none)"
        lines.append("Remedies tried, %s:" % said if report["tried"] else "No remedy applies (%s)." % said)
        for t in report["tried"]:
            said = "  %s: %s%s" % (t["name"], t["verdict"], _metric(t.get("summary")))
            if t.get("changed"):
                said += "; %s" % "; ".join(t["changed"])
            if t.get("error"):
                kept = [x for x in t["error"].splitlines() if x.strip() and not x.startswith(("[bt]", "Stack trace"))]
                said += "; error:\n" + "\n".join("    " + x for x in kept)  # MXNet's native stack: in the record
            elif t.get("reason"):
                said += "; %s" % t["reason"]
            lines.append(said)
        if not report["fixed"]:
            why = report.get("why_none") or "none made the artifact load and run"
            lines.append("No remedy works: %s." % why.rstrip("."))
    under = result.get("compared_under")
    if under and under.get("paired"):
        lines.append(
            "Compared layer by layer under remedy %s (%s; %s): %s."
            % (under["name"], under["title"], under.get("graph"), _layers(result))
        )
    elif result.get("not_compared"):
        lines.append("No layer-by-layer comparison: %s." % result["not_compared"].rstrip("."))
    return "\n".join(lines)


def save_json(result, path):
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    artifacts.write_json_atomic(path, result)
