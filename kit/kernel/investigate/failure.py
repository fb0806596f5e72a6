"""An error cell explained: what failed and where (the node the error names and its input shapes, the
unknown argument or operator and the nodes that carry it), the remedies tried, and the layer-by-layer
comparison under the remedy that works."""

import json
import os
import re

from kit.common import artifacts, verdicts
from kit.common.versions import direction
from kit.kernel.investigate.layer_compare import compare
from kit.kernel.mx import mxapi
from kit.kernel.saving import adapters


def _explain(cell, result, rec, exc, stage, run=True):
    """``failure`` and ``remedies`` of ``result``; an error that a remedy's attempt met names the node,
    argument or operator where the cell's own error names none (a re-saved file that then meets an operator
    the release lacks)."""
    result["failure"] = failure = explain_failure(cell, rec, exc, stage)
    result["remedies"] = report = remedy_report(cell, rec, failure, run=run)
    if report and not (failure["node"] or failure["argument"] or failure["operator"]):
        for t in report["tried"]:
            if t.get("error") and scan(cell, failure, [t["error"]]):
                failure["revealed_by"] = t["name"]
                break


ERRORS = (verdicts.LOAD_ERROR, verdicts.INFER_ERROR)
_NODE = re.compile(r"Error in operator ([^\s:]+)|Failed loading Op (\S+) of type")
_ARGUMENT = re.compile(r"Cannot find argument '([^']+)'")
_OPERATOR = re.compile(r"Operator (\S+?):? is not registered|Cannot find operator (\S+)")
_SHAPE = re.compile(r"[Ss]hape")
#: the time stamp MXNet's C++ errors open with
_STAMP = re.compile(r"\[\d\d:\d\d:\d\d\] ")
_DIGITS = re.compile(r"\d+")
#: a shape with an axis of 0: in a 1.x graph "unknown, inferred", under numpy shape semantics "empty"
_ZERO_AXIS = re.compile(r"[(\[,]\s*0\s*[,)\]]")


def read_record(path):
    """The cell's record (a dict) from the run's records folder; None for no path or no readable file."""
    if not path:
        return None
    try:
        return artifacts.read_json(path)
    except (IOError, OSError, ValueError):
        return None


def failed(rec):
    """Whether the record says the artifact did not load or run (an API the release lacks, where a remedy
    was tried for it, counts)."""
    if not rec:
        return False
    return rec.get("verdict") in ERRORS or (rec.get("verdict") == verdicts.UNSUPPORTED and bool(rec.get("remedy")))


def _record_summary(rec):
    if not rec:
        return None
    keys = ("verdict", "direction", "error_type", "error", "reason", "load_path")
    return dict((k, rec.get(k)) for k in keys)


def _error_headline(error_type, text):
    said = verdicts.headline(text or "")
    if error_type and not said.startswith(error_type):
        said = "%s: %s" % (error_type, said)
    return said


def explain_failure(cell, rec, exc, stage):
    """What failed and where: the verdict, the error (the record's where the cell failed in the run, else
    this investigation's own), the node it names with its input shapes, the unknown argument or operator
    with the nodes of the graph that carry it."""
    own = None
    if exc is not None:
        own = {
            "stage": stage,
            "error_type": type(exc).__name__,
            "error": str(exc).strip(),
            "headline": _error_headline(type(exc).__name__, str(exc)),
        }
    if failed(rec):
        error = rec.get("error") or rec.get("reason") or ""
        out = {
            "source": "record",
            "verdict": rec["verdict"],
            "error_type": rec.get("error_type"),
            "error": error,
            "headline": _error_headline(rec.get("error_type"), error),
        }
    else:
        out = {
            "source": "investigation",
            "verdict": verdicts.LOAD_ERROR if stage == "load" else verdicts.INFER_ERROR,
            "error_type": own["error_type"],
            "error": own["error"],
            "headline": own["headline"],
        }
    out.update(
        direction=direction(cell.saved, cell.release),
        own=own,
        revealed_by=None,
        node=None,
        argument=None,
        argument_nodes=[],
        operator=None,
        operator_nodes=[],
        hint=None,
    )
    scan(cell, out, [out["error"]] + ([own["error"]] if own else []))
    return out


def scan(cell, out, texts):
    """Fill ``out`` (a failure) from what ``texts`` (error messages) name: the node with its inputs and their
    shapes (shape errors), the unknown argument or operator with the nodes of the saved graph that carry it.
    True when something was found."""
    graph = _graph_nodes(cell.folder, cell.manifest)
    by_name = dict((n["name"], n) for n in graph or [])
    found = False
    for text in texts:
        m = _NODE.search(text)
        if m and out["node"] is None:
            name = m.group(1) or m.group(2)
            node = by_name.get(name, {})
            out["node"] = {"name": name, "op": node.get("op"), "inputs": None, "shapes": None}
            if _SHAPE.search(text) and graph:
                out["node"]["inputs"], out["node"]["shapes"] = input_shapes(cell, name, by_name)
            found = True
        m = _ARGUMENT.search(text)
        if m and out["argument"] is None:
            out["argument"] = m.group(1)
            out["argument_nodes"] = [
                {"name": n["name"], "op": n["op"], "value": _attrs(n)[m.group(1)]}
                for n in graph or []
                if m.group(1) in _attrs(n)
            ]
            found = True
        m = _OPERATOR.search(text)
        if m and out["operator"] is None:
            out["operator"] = m.group(1) or m.group(2)
            out["operator_nodes"] = [n["name"] for n in graph or [] if n["op"] == out["operator"]]
            found = True
    zeros = [
        i for i in (out["node"] or {}).get("inputs") or [] if i.get("declared") and _ZERO_AXIS.search(i["declared"])
    ]
    if zeros and mxapi.gluon2(cell.release) and not mxapi.gluon2(cell.saved):
        out["hint"] = (
            "%s declares shape %s: in a 1.x graph an axis of 0 means 'unknown, inferred from the inputs'; under "
            "MXNet 2.0's numpy shape semantics it means an empty axis" % (zeros[0]["node"], zeros[0]["declared"])
        )
    return found


def _attrs(node):
    return node.get("attrs") or node.get("attr") or node.get("param") or {}


def _symbol_file(manifest):
    info = manifest.get("load") or {}
    if info.get("symbol_file"):
        return info["symbol_file"]
    if "prefix" in info:
        return "%s-symbol.json" % info["prefix"]
    return None


def _graph_nodes(folder, manifest):
    """The nodes of the artifact's graph JSON as saved (read as text: the loading release may refuse it)."""
    name = _symbol_file(manifest)
    if not name:
        return None
    try:
        with open(os.path.join(folder, name)) as f:
            return json.load(f).get("nodes")
    except (IOError, OSError, ValueError):
        return None


def input_shapes(cell, name, by_name):
    """``(inputs, how)``: node ``name``'s inputs, each with the node that makes it, its op, the shape its graph
    declares (a ``shape`` attribute) and the shape partial inference gives for the investigation's inputs
    under legacy (1.x) shape semantics; ``(None, why)`` where that cannot be had."""
    import mxnet as mx

    path = os.path.join(cell.folder, _symbol_file(cell.manifest))
    if cell.inputs:
        given = dict((k, tuple(v.shape)) for k, v in cell.inputs.items())
    else:  # no internals recorded: the manifest's inputs, a batch of one
        given = dict(
            (i["name"], tuple(([] if i["kind"] == "pixels_single" else [1]) + list(i["shape"])))
            for i in cell.manifest.get("inputs") or []
        )
    how = "by partial shape inference under legacy shape semantics, inputs %s" % ", ".join(
        "%s %s" % (k, list(v)) for k, v in sorted(given.items())
    )
    try:
        with mxapi.legacy_semantics():
            inner = mx.sym.load(path).get_internals()
            names = inner.list_outputs()
            _, shapes, _ = inner.infer_shape_partial(**given)
            known = dict((n, list(s)) for n, s in zip(names, shapes) if s)
            target = next((inner[i] for i in range(len(names)) if inner[i].name == name), None)
            if target is None:
                return None, "node %s is not in the graph as MXNet %s loads it" % (name, cell.release)
            children = target.get_children()
            rows = []
            for j, out in enumerate(children.list_outputs()):
                node = by_name.get(children[j].name, {})
                declared = _attrs(node).get("shape") if node.get("op") != "null" else None
                rows.append(
                    {
                        "input": out,
                        "node": children[j].name,
                        "op": node.get("op"),
                        "declared": declared,
                        "shape": known.get(out),
                    }
                )
    except Exception as e:  # noqa: BLE001 - shapes are a help, not the investigation
        return None, "not inferred: %s" % _error_headline(type(e).__name__, str(e))
    return rows, how


def remedy_report(cell, rec, failure, run=True):
    """What was tried: the record's ``remedy`` (as the reload tried it), or, where the record has none,
    every remedy that applies tried now, in this kernel. None when nothing says."""
    info, source = (rec or {}).get("remedy") if failed(rec) else None, "record"
    if info is None and run and failure is not None and cell.spec is not None:
        from kit.kernel.remedies import attempts

        failing = {"verdict": failure["verdict"], "error": failure["error"], "reason": failure["headline"]}
        info = attempts.retry(*cell.artifact() + (failing, cell.measure()))
        source = "now"
    if info is None:
        return None
    keys = ("name", "remedies", "title", "verdict", "reason", "error_type", "error", "changed", "summary", "user_code")
    return {
        "source": source,
        "fixed": bool(info.get("fixed")),
        "name": info.get("name"),
        "title": info.get("title"),
        "verdict": info.get("verdict"),
        "summary": info.get("summary"),
        "changed": info.get("changed") or [],
        "user_code": info.get("user_code"),
        "why_none": info.get("why_none"),
        "tried": [dict((k, t.get(k)) for k in keys) for t in info.get("tried") or []],
    }


def _first_remedy(report):
    """The remedy an attempt starts with: a chained attempt is named ``a+b`` and starts with ``a``."""
    for t in report["tried"]:
        if t["name"] == report["name"] and t.get("remedies"):
            return t["remedies"][0]
    return report["name"].split("+")[0]


def _compare_under_remedy(cell, result, top):
    """The layer-by-layer comparison of the artifact as the working remedy loads it, in the context it runs in."""
    from kit.kernel.remedies import attempts

    report, failure = result["remedies"], result["failure"]
    try:
        with attempts.remedied(
            _first_remedy(report),
            *cell.artifact() + (failure["error"], cell.measure()),
        ) as (attempt, work, mode):
            under = dict((k, attempt.get(k)) for k in ("name", "title", "changes", "changed", "verdict", "summary"))
            if attempt["verdict"] not in verdicts.PASSING:
                said = attempt.get("error") or attempt.get("reason") or attempt["verdict"]
                result["not_compared"] = "remedy %s did not fix the artifact when tried again here: %s" % (
                    attempt["name"],
                    said,
                )
                return
            with mode():
                (sym, arg, aux), under["graph"] = _remedied_graph(cell, work)
                got, arg, aux = cell.layers(sym, arg, aux, work.folder, work.manifest)
                compared = compare(cell, sym, arg, aux, got, top)
    except adapters.GraphUnavailable as e:
        result["not_compared"] = str(e)
        return
    except Exception as e:  # noqa: BLE001 - said in the investigation, which still reports
        result["not_compared"] = "under remedy %s the graph does not evaluate node by node: %s" % (
            report["name"],
            _error_headline(type(e).__name__, str(e)),
        )
        return
    if compared["node_matching"].startswith("none"):  # a Gluon 2.0 port's trace against a 1.x graph, say
        result["not_compared"] = (
            "under remedy %s the model is %s, whose nodes cannot be paired with the saved graph's (%s); the remedy's "
            "outputs against the reference: %s%s"
            % (under["name"], under["graph"], compared["node_matching"], under["verdict"], _metric(under["summary"]))
        )
        result["compared_under"] = dict(under, paired=False)
        return
    result.update(compared)
    result["compared_under"] = dict(under, paired=True)


def _remedied_graph(cell, work):
    """``((sym, arg, aux), how)`` of the remedied artifact: the loaded Gluon 2.0 model of a parameter mapping,
    traced; else the edited copy as the cell's API loads it."""
    net = getattr(work, "net", None)
    if net is None and getattr(work, "named", None) is not None:  # rnn_flat_params keeps the arrays, not the model
        from kit.kernel.remedies.params import _load_into_port

        net = _load_into_port(work, work.named)
    if net is not None:
        return adapters.traced_graph(net, work.manifest["inputs"]), "the remedied Gluon 2.0 model, traced"
    graph = cell.adapter.load_graph(cell.spec, cell.release, work.folder, work.manifest)
    return graph, "the remedied artifact, loaded through %s" % cell.api


def _metric(summary):
    if not summary or summary.get("max_abs") is None:
        return ""
    return " (max abs %.3g)" % summary["max_abs"]
