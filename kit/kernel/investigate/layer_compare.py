"""Comparing two graphs layer by layer: the saving release's recorded internals against the loading
release's, node by node (by name, or by position where names differ), and the parameters as loaded."""

import os
from collections import OrderedDict

import numpy as np

from kit.common import artifacts, metrics, tolerance, verdicts
from kit.common.capabilities import EXIT_RUNTIMES
from kit.kernel.investigate import exit_layers
from kit.kernel.mx import internals
from kit.kernel.saving.measure import measure

TOP = 5


class InvestigatedCell(object):
    """One investigated cell: the artifact, how it loads here, the reference internals, the tolerance."""

    def __init__(self, release, saved, model, api, folder, manifest, spec, adapter, inputs, expected, overrides):
        self.release, self.saved, self.model, self.api = release, saved, model, api
        self.folder, self.manifest, self.spec, self.adapter = folder, manifest, spec, adapter
        self.inputs, self.expected, self.overrides = inputs, expected, overrides
        #: an exit's cell: its runtime (the layers are the exported file's), else None (MXNet's own)
        self.runtime = EXIT_RUNTIMES.get(api)
        #: the exported file's details once :meth:`layers` ran on an exit's cell
        self.exported = None

    def layers(self, sym, arg, aux, folder, manifest):
        """``(got, arg, aux)``: every node's output as this cell computes it (MXNet's graph bound node by node;
        an exit's exported file with those nodes made outputs, run in its runtime), and the parameters it holds."""
        if self.runtime is None:
            return internals.evaluate(sym, arg, aux, self.inputs), arg, aux
        got, self.exported = exit_layers.layer_outputs(
            self.runtime,
            self.adapter.runtime_options(manifest),
            folder,
            manifest,
            manifest.get("onnx_opset"),
            self.expected,
            self.inputs,
        )
        return got, exit_layers.exported_parameters(self.exported["file"], manifest.get("parameters")), {}

    def unpaired(self, output):
        """What the row of a saved node the exit's file does not give says (None: MXNet's own graph)."""
        if self.runtime is None:
            return None
        return ((self.exported or {}).get("other_shapes") or {}).get(output) or exit_layers.UNPAIRED

    def measure(self):
        """What the reload measures a predictor with: every reference case, the run's tolerance."""
        cases = artifacts.load_reference(os.path.join(self.folder, artifacts.REFERENCE))
        return lambda predictor: measure(self.spec, self.model, cases, predictor, self.overrides)

    def artifact(self):
        """``(spec, adapter, loading release, saving release, api, folder, manifest)``: what a remedy is tried on."""
        return self.spec, self.adapter, self.release, self.saved, self.api, self.folder, self.manifest


def compare(cell, sym, arg, aux, got, top=TOP):
    """The layer-by-layer part of an investigation: rows, first divergence, worst elements, parameters.

    A saved node an exit's exported file does not expose (its exporter fused or renamed it) is neither close
    nor past tolerance; in an MXNet graph a missing node is a divergence."""
    nodes = internals.node_table(sym)
    expected = cell.expected
    got, matching, loaded_names = match_nodes(expected, got)
    rows = _node_rows(expected, got, nodes, cell.model, cell.overrides, loaded_names, cell.unpaired)
    first = next((r for r in rows if r["ok"] is False), None)
    worst = (
        _worst_elements(expected[first["output"]], got[first["output"]], top)
        if first and first["output"] in expected and first["output"] in got and first["shape_match"]
        else []
    )
    saved = cell.manifest.get("parameters")
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


def _node_rows(expected, got, nodes, model, overrides, loaded_names=None, unpaired=None):
    rows = []
    order = list(expected) + [n for n in got if n not in expected]
    for i, out in enumerate(order):
        node = internals.node_of((loaded_names or {}).get(out, out))
        info = nodes.get(node, {})
        row = {"index": i, "output": out, "node": node, "op": info.get("op"), "attrs": info.get("attrs", {})}
        said = unpaired(out) if unpaired and out not in got and out in expected else None
        if said:
            row.update(ok=None, shape_match=None, status=said)
            rows.append(row)
            continue
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
            row.update(status=verdicts.PARAM_RENAMED, saved_name=renamed[name], shape=s["shape"])
        elif s is None:
            row.update(status="not saved (new in the loaded model)", loaded_shape=got["shape"])
        elif got is None:
            row.update(status="not loaded (missing or renamed)", saved_shape=s["shape"])
        elif got["shape"] != list(s["shape"]):
            row.update(status="shape changed", saved_shape=s["shape"], loaded_shape=got["shape"])
        else:
            unchanged = got["sha256"] == s["sha256"] and got["dtype"] == s["dtype"]
            row.update(
                status=verdicts.PARAM_UNCHANGED if unchanged else "values changed",
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
