"""What investigate.ipynb runs: where in a model a difference between two releases starts.

A cell whose artifact does not load or run in the loading release is investigated too: what failed and
where (the node the error names and its input shapes, the unknown argument or operator and the nodes that
carry it), the remedies tried (``kit.kernel.remedies``, as the run's record lists them), and the same
layer-by-layer comparison under the remedy that works.
"""

import json
import os
import re
from collections import OrderedDict

import numpy as np

from kit.common.errors import KitError
from kit.common import artifacts, metrics, tolerance, verdicts
from kit.common.versions import direction
from kit.kernel import adapters, internals, mxapi, zoo
from kit.kernel.train_run import check_kernel

TOP = 5


def investigate(release, store, model, api, saved_with, tolerance_overrides=None, reference=None, top=TOP, record=None):
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
    """
    check_kernel(release)
    folder = artifacts.artifact_dir(store, saved_with, model, api)
    try:
        manifest = artifacts.read_json(os.path.join(folder, artifacts.MANIFEST))
    except (IOError, OSError, ValueError) as e:
        raise KitError("no readable artifact %s/%s/%s in %s: %s" % (saved_with, model, api, store, e))
    if manifest.get("status") != "saved":
        raise KitError("artifact %s is %s: %s" % (folder, manifest.get("status"), manifest.get("reason")))
    bad = artifacts.verify(folder, manifest)
    if bad:
        raise KitError("artifact %s is corrupt (%s): nothing to investigate" % (folder, ", ".join(bad)))
    rec = read_record(record)
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
    }
    case = Case(release, saved_with, model, api, folder, manifest, spec, adapter, inputs, expected, tolerance_overrides)
    if no_internals:
        _explain(case, result, rec, None, None, run=False)
        result["not_compared"] = no_internals
        result["message"] = message(result)
        return result
    stage = "load"
    try:
        sym, arg, aux = adapter.load_graph(spec, release, folder, manifest)
        stage = "infer"
        got = internals.evaluate(sym, arg, aux, inputs)
    except adapters.GraphUnavailable as e:
        if not failed(rec):
            raise KitError(str(e))
        _explain(case, result, rec, None, stage, run=False)
        result["not_compared"] = str(e)
    except Exception as e:  # noqa: BLE001 - the artifact's own failure here is what is investigated
        _explain(case, result, rec, e, stage)
        if result["remedies"] and result["remedies"]["fixed"]:
            _compare_under_remedy(case, result, top)
        else:
            result["not_compared"] = "no remedy makes the artifact load and run in MXNet %s" % release
    else:
        result.update(compare(case, sym, arg, aux, got, top))
        if failed(rec):  # the reload failed, yet the graph evaluates node by node: both are evidence
            _explain(case, result, rec, None, None, run=False)
    result["message"] = message(result)
    return result


def _explain(case, result, rec, exc, stage, run=True):
    """``failure`` and ``remedies`` of ``result``; an error that a remedy's attempt met names the node,
    argument or operator where the cell's own error names none (a re-saved file that then meets an operator
    the release lacks)."""
    result["failure"] = failure = explain_failure(case, rec, exc, stage)
    result["remedies"] = report = remedy_report(case, rec, failure, run=run)
    if report and not (failure["node"] or failure["argument"] or failure["operator"]):
        for t in report["tried"]:
            if t.get("error") and scan(case, failure, [t["error"]]):
                failure["revealed_by"] = t["name"]
                break


class Case(object):
    """One investigated cell: the artifact, how it loads here, the reference internals, the tolerance."""

    def __init__(self, release, saved, model, api, folder, manifest, spec, adapter, inputs, expected, overrides):
        self.release, self.saved, self.model, self.api = release, saved, model, api
        self.folder, self.manifest, self.spec, self.adapter = folder, manifest, spec, adapter
        self.inputs, self.expected, self.overrides = inputs, expected, overrides

    def measure(self):
        """What the reload measures a predictor with: every reference case, the run's tolerance."""
        from kit.kernel import reload_run

        cases = artifacts.load_reference(os.path.join(self.folder, artifacts.REFERENCE))
        return lambda predictor: reload_run.measure(self.spec, self.model, cases, predictor, self.overrides)


def compare(case, sym, arg, aux, got, top=TOP):
    """The layer-by-layer part of an investigation: rows, first divergence, worst elements, parameters."""
    nodes = internals.node_table(sym)
    expected = case.expected
    got, matching, loaded_names = match_nodes(expected, got)
    rows = _node_rows(expected, got, nodes, case.model, case.overrides, loaded_names)
    first = next((r for r in rows if not r["ok"]), None)
    worst = (
        _worst_elements(expected[first["output"]], got[first["output"]], top)
        if first and first["output"] in expected and first["output"] in got and first["shape_match"]
        else []
    )
    saved = case.manifest.get("parameters")
    return {
        "rows": rows,
        "first_divergence": first,
        "worst_elements": worst,
        "node_matching": matching,
        # None: an artifact from before parameter tables were recorded
        "parameters": param_diff(saved, arg, aux) if saved else None,
    }


# ---- a cell that does not load or run: what failed, where, and what fixes it ----------------------------

#: record verdicts of an artifact that did not load or run in the loading release
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


def explain_failure(case, rec, exc, stage):
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
        direction=direction(case.saved, case.release),
        own=own,
        revealed_by=None,
        node=None,
        argument=None,
        argument_nodes=[],
        operator=None,
        operator_nodes=[],
        hint=None,
    )
    scan(case, out, [out["error"]] + ([own["error"]] if own else []))
    return out


def scan(case, out, texts):
    """Fill ``out`` (a failure) from what ``texts`` (error messages) name: the node with its inputs and their
    shapes (shape errors), the unknown argument or operator with the nodes of the saved graph that carry it.
    True when something was found."""
    graph = _graph_nodes(case.folder, case.manifest)
    by_name = dict((n["name"], n) for n in graph or [])
    found = False
    for text in texts:
        m = _NODE.search(text)
        if m and out["node"] is None:
            name = m.group(1) or m.group(2)
            node = by_name.get(name, {})
            out["node"] = {"name": name, "op": node.get("op"), "inputs": None, "shapes": None}
            if _SHAPE.search(text) and graph:
                out["node"]["inputs"], out["node"]["shapes"] = input_shapes(case, name, by_name)
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
    if zeros and mxapi.gluon2(case.release) and not mxapi.gluon2(case.saved):
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


def input_shapes(case, name, by_name):
    """``(inputs, how)``: node ``name``'s inputs, each with the node that makes it, its op, the shape its graph
    declares (a ``shape`` attribute) and the shape partial inference gives for the investigation's inputs
    under legacy (1.x) shape semantics; ``(None, why)`` where that cannot be had."""
    import mxnet as mx

    path = os.path.join(case.folder, _symbol_file(case.manifest))
    if case.inputs:
        given = dict((k, tuple(v.shape)) for k, v in case.inputs.items())
    else:  # no internals recorded: the manifest's inputs, a batch of one
        given = dict(
            (i["name"], tuple(([] if i["kind"] == "pixels_single" else [1]) + list(i["shape"])))
            for i in case.manifest.get("inputs") or []
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
                return None, "node %s is not in the graph as MXNet %s loads it" % (name, case.release)
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


def remedy_report(case, rec, failure, run=True):
    """What was tried: the record's ``remedy`` (as the reload tried it), or, where the record has none,
    every remedy that applies tried now, in this kernel. None when nothing says."""
    info, source = (rec or {}).get("remedy") if failed(rec) else None, "record"
    if info is None and run and failure is not None and case.spec is not None:
        from kit.kernel import remedies

        failing = {"verdict": failure["verdict"], "error": failure["error"], "reason": failure["headline"]}
        info = remedies.retry(
            case.spec,
            case.adapter,
            case.release,
            case.saved,
            case.api,
            case.folder,
            case.manifest,
            failing,
            case.measure(),
        )
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


def _compare_under_remedy(case, result, top):
    """The layer-by-layer comparison of the artifact as the working remedy loads it, in the context it runs in."""
    from kit.kernel import remedies

    report, failure = result["remedies"], result["failure"]
    try:
        with remedies.remedied(
            _first_remedy(report),
            case.spec,
            case.adapter,
            case.release,
            case.saved,
            case.api,
            case.folder,
            case.manifest,
            failure["error"],
            case.measure(),
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
                (sym, arg, aux), under["graph"] = _remedied_graph(case, work)
                got = internals.evaluate(sym, arg, aux, case.inputs)
                compared = compare(case, sym, arg, aux, got, top)
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


def _remedied_graph(case, work):
    """``((sym, arg, aux), how)`` of the remedied artifact: the loaded Gluon 2.0 model of a parameter mapping,
    traced; else the edited copy as the cell's API loads it."""
    net = getattr(work, "net", None)
    if net is None and getattr(work, "named", None) is not None:  # rnn_flat_params keeps the arrays, not the model
        from kit.kernel.remedies import _load_into_port

        net = _load_into_port(work, work.named)
    if net is not None:
        return adapters.traced_graph(net, work.manifest["inputs"]), "the remedied Gluon 2.0 model, traced"
    graph = case.adapter.load_graph(case.spec, case.release, work.folder, work.manifest)
    return graph, "the remedied artifact, loaded through %s" % case.api


BY_NAME = "by name"


def match_nodes(expected, got):
    """``(got, how, loaded_names)``: the loaded graph's outputs keyed like the saved ones where that can be told,
    and the loaded graph's own name of each (where it differs).

    Graphs of one lineage share node names. A 1.x graph and the Gluon 2.0 trace of its port
    share none (``lenet_conv0_fwd`` against ``node_0``): their outputs are paired by position when
    both graphs have as many, and the pairing is said; otherwise nothing is paired.
    """
    if set(expected) & set(got) or not expected or not got:
        return got, BY_NAME, {}
    if len(expected) != len(got):
        return (
            got,
            (
                "none: the saved graph has %d outputs and the loaded one %d, named differently"
                % (len(expected), len(got))
            ),
            {},
        )
    paired, names = OrderedDict(), {}
    for saved_name, (loaded_name, value) in zip(expected, got.items()):
        paired[saved_name], names[saved_name] = value, loaded_name
    return paired, "by position: the saved and loaded graphs name their nodes differently", names


def _node_rows(expected, got, nodes, model, overrides, loaded_names=None):
    rows = []
    order = list(expected) + [n for n in got if n not in expected]
    for i, out in enumerate(order):
        node = internals.node_of((loaded_names or {}).get(out, out))
        info = nodes.get(node, {})
        row = {"index": i, "output": out, "node": node, "op": info.get("op"), "attrs": info.get("attrs", {})}
        if out not in got or out not in expected:
            row.update(
                ok=False,
                shape_match=False,
                status="missing in %s" % ("loaded graph" if out not in got else "saved graph"),
            )
            rows.append(row)
            continue
        a, b = got[out], expected[out]
        m = metrics.compare(a, b, tolerance.resolve(b.dtype, model, overrides))
        row.update(
            shape=list(b.shape),
            shape_match=m["shape_match"],
            max_abs=m.get("max_abs"),
            max_rel=m.get("max_rel"),
            frac_out_of_tolerance=m.get("frac_out_of_tolerance"),
            identical=m["identical"],
            status="identical" if m["identical"] else "",
            ok=bool(m["shape_match"] and (m["identical"] or m.get("within_tolerance"))),
        )
        if not row["status"]:
            row["status"] = "close" if row["ok"] else ("shape changed" if not m["shape_match"] else "past tolerance")
        rows.append(row)
    return rows


def _worst_elements(expected, got, top):
    err = np.abs(got.astype(np.float64) - expected.astype(np.float64)).ravel()
    order = np.argsort(-np.where(np.isfinite(err), err, np.inf))[:top]
    out = []
    for flat in order:
        idx = np.unravel_index(int(flat), expected.shape)
        out.append(
            {
                "index": [int(i) for i in idx],
                "saved": float(expected[idx]),
                "loaded": float(got[idx]),
                "abs_diff": float(err[flat]),
            }
        )
    return out


def param_diff(saved, arg, aux):
    """Saved parameters (from the manifest) against what this release loaded: names, shapes, values.

    A parameter whose name is on one side only is paired by its content hash with one on the other
    side ("renamed"): 1.x's prefixed names (``lenet_conv0_weight``) against 2.0's structural ones (``0.weight``).
    """
    loaded = dict(
        (k.split(":", 1)[-1], artifacts.param_stats(v.asnumpy())) for k, v in list(arg.items()) + list(aux.items())
    )
    by_hash = dict((s["sha256"], n) for n, s in saved.items() if n not in loaded)
    renamed = {}
    for name in [n for n in loaded if n not in saved]:
        match = by_hash.get(loaded[name]["sha256"])
        if match is not None and loaded[name]["shape"] == list(saved[match]["shape"]):
            renamed[name] = match
    rows = []
    for name in sorted(set(saved) | set(loaded)):
        if name in renamed.values():
            continue
        s, got = saved.get(renamed.get(name, name)), loaded.get(name)
        row = {"name": name}
        if name in renamed:
            row.update(status="renamed, same values", saved_name=renamed[name], shape=s["shape"])
        elif s is None:
            row.update(status="not saved (new in the loaded model)", loaded_shape=got["shape"])
        elif got is None:
            row.update(status="not loaded (missing or renamed)", saved_shape=s["shape"])
        elif got["shape"] != list(s["shape"]):
            row.update(status="shape changed", saved_shape=s["shape"], loaded_shape=got["shape"])
        else:
            same = got["sha256"] == s["sha256"] and got["dtype"] == s["dtype"]
            row.update(
                status="same" if same else "values changed",
                shape=s["shape"],
                saved_mean=s["mean"],
                loaded_mean=got["mean"],
                saved_std=s["std"],
                loaded_std=got["std"],
                saved_absmax=s["absmax"],
                loaded_absmax=got["absmax"],
            )
        rows.append(row)
    return rows


def _cell(result):
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
    if first is None:
        return "%severy one of %d nodes is within tolerance" % (said, len(result["rows"]))
    detail = "max abs error %.3g" % first["max_abs"] if first.get("max_abs") is not None else first["status"]
    return "%sthe first node past tolerance is #%d %s (op %s, %s)" % (
        said,
        first["index"],
        first["node"],
        first["op"],
        detail,
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


def _metric(summary):
    if not summary or summary.get("max_abs") is None:
        return ""
    return " (max abs %.3g)" % summary["max_abs"]


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
    if parent and not os.path.isdir(parent):
        os.makedirs(parent)
    artifacts.write_json_atomic(path, result)
