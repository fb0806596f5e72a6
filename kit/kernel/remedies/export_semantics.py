"""Remedies of an export that runs and gives wrong numbers: attributes that tell MXNet to ignore or read a stored
value otherwise, which MXNet 1.9's exporter does not honour, written into the graph and parameters so that
the exported file computes what MXNet computes.

Measured on 1.9.1's exporter (``mx.onnx``): ``convert_batchnorm`` never reads ``fix_gamma`` (MXNet's default,
True, ignores the stored gamma); ``FullyConnected``'s ``flatten`` and ``no_bias`` and ``Deconvolution``'s
``no_bias`` left unset are read as False (MXNet: flatten True, Deconvolution no_bias True); ``LRN``'s unset
``knorm`` is read as 1 (MXNet: 2). Each remedy is tried when an exit's numbers are wrong (or a runtime then
fails on the shapes an unflattened FullyConnected gives) and chains with the other edits.
"""

import json
import re

from kit.common import verdicts
from kit.common.capabilities import EXIT_APIS
from kit.kernel.mx import mxapi
from kit.kernel.remedies.base import GRAPH_EDIT, Refused, Remedy, register

TRUE = ("True", "true", "1")


def _attrs(node):
    """A graph JSON node's attributes, the dict itself (``attrs`` in 1.x, ``attr``/``param`` before)."""
    for key in ("attrs", "attr", "param"):
        if key in node:
            return node[key]
    node["attrs"] = {}
    return node["attrs"]


class _WrongNumbers(Remedy):
    """A graph and parameter edit tried where an exit's outputs are wrong (drift, mismatch) or the runtime
    fails with :attr:`symptom`."""

    changes = GRAPH_EDIT
    directions = ("backward", "same", "forward")
    apis = EXIT_APIS
    loading = ("1.3.0", None)
    edits_artifact = True
    symptom = None

    def matches(self, target, error_text, verdict):
        if not Remedy.matches(self, target, error_text, verdict):
            return False
        if verdict in (verdicts.DRIFT, verdicts.MISMATCH):
            return True
        return bool(self.symptom) and self.symptom_found(error_text)

    def symptom_found(self, error_text):
        return re.search(self.symptom, error_text or "") is not None

    def graph(self, work):
        symbol, params = work.files()
        if symbol is None:
            raise Refused("the artifact has no graph file to edit")
        with open(work.path(symbol)) as f:
            return symbol, params, json.load(f)

    def save_graph(self, work, symbol, graph):
        with open(work.path(symbol), "w") as f:
            json.dump(graph, f)


@register
class FixGammaAsStoredOnes(_WrongNumbers):
    """``BatchNorm(fix_gamma=True)``, MXNet's default, computes with gamma = 1 whatever gamma is stored; a
    checkpoint converted from another framework, or edited, stores another. The exporter writes the stored gamma.
    Stored as ones with ``fix_gamma=False``, the graph means what MXNet computes, for every reader."""

    name = "fix_gamma_as_stored_ones"
    title = "BatchNorm's fix_gamma (MXNet ignores the stored gamma) made explicit: gamma stored as ones"
    user_code = """
import json

import mxnet as mx
sym, arg_params, aux_params = mx.model.load_checkpoint(PREFIX, EPOCH)  # the files {symbol}, {params}
graph = json.loads(sym.tojson())
for node in graph["nodes"]:
    attrs = node.setdefault("attrs", {{}})
    if node["op"] == "BatchNorm" and attrs.get("fix_gamma", "True") in ("True", "true", "1"):
        gamma = graph["nodes"][node["inputs"][1][0]]["name"]
        arg_params[gamma] = mx.nd.ones_like(arg_params[gamma])  # what MXNet computes with
        attrs["fix_gamma"] = "False"
mx.model.save_checkpoint("for-onnx", 0, mx.sym.load_json(json.dumps(graph)), arg_params, aux_params)
"""

    def apply(self, work, error_text):
        import mxnet as mx

        symbol, params, graph = self.graph(work)
        if params is None:
            raise Refused("the artifact has no parameter file")
        arrays = mxapi.load_ndarrays(work.path(params))
        by_name = dict((k.split(":", 1)[-1], k) for k in arrays)
        fixed = []
        for node in graph["nodes"]:
            attrs = _attrs(node)
            if node["op"] != "BatchNorm" or attrs.get("fix_gamma", "True") not in TRUE:
                continue
            gamma = graph["nodes"][node["inputs"][1][0]]["name"]
            key = by_name.get(gamma)
            if key is None or (arrays[key].asnumpy() == 1).all():
                continue  # nothing stored that MXNet ignores
            arrays[key] = mx.nd.ones_like(arrays[key])
            attrs["fix_gamma"] = "False"
            fixed.append(node["name"])
        if not fixed:
            raise Refused("no BatchNorm with fix_gamma stores a gamma other than 1")
        self.save_graph(work, symbol, graph)
        mx.nd.save(work.path(params), arrays)
        return "stored gamma as ones with fix_gamma=False in BatchNorm %s (MXNet ignored the stored gamma)" % (
            ", ".join(repr(n) for n in fixed)
        )


#: operator -> the attributes MXNet defaults that 1.9's exporter reads with another default, and MXNet's value
DEFAULTS = {
    "FullyConnected": (("flatten", "True"), ("no_bias", "False")),
    "Deconvolution": (("no_bias", "True"),),
    "LRN": (("knorm", "2.0"),),
}


@register
class MxnetDefaultsSpelledOut(_WrongNumbers):
    """Attributes left at MXNet's default are not in the graph file, and 1.9's exporter reads some of them with
    another default: a ``FullyConnected`` on a 4-D input (a classifier on pooled features) is not flattened,
    an ``LRN`` gets bias 1 instead of 2. Written out with MXNet's values, they export as MXNet computes."""

    name = "mxnet_defaults_spelled_out"
    title = "attributes left at MXNet's defaults written into the graph (FullyConnected flatten, LRN knorm, ...)"
    symptom = r"Gemm|MatMul|shapes cannot be multiplied|Dimension mismatch|no_bias"
    user_code = """
import json

import mxnet as mx
DEFAULTS = {defaults!r}
sym, arg_params, aux_params = mx.model.load_checkpoint(PREFIX, EPOCH)  # the files {symbol}, {params}
graph = json.loads(sym.tojson())
for node in graph["nodes"]:
    for name, value in DEFAULTS.get(node["op"], ()):
        node.setdefault("attrs", {{}}).setdefault(name, value)
mx.model.save_checkpoint("for-onnx", 0, mx.sym.load_json(json.dumps(graph)), arg_params, aux_params)
"""

    def code(self, work):
        symbol, params = work.files()
        return self.user_code.strip().format(symbol=symbol, params=params, defaults=DEFAULTS)

    def apply(self, work, error_text):
        symbol, params, graph = self.graph(work)
        written = []
        for node in graph["nodes"]:
            attrs = _attrs(node)
            for name, value in DEFAULTS.get(node["op"], ()):
                if name not in attrs:
                    attrs[name] = value
                    written.append("%s %s=%s" % (node["name"], name, value))
        if not written:
            raise Refused("no attribute the exporter misreads is left at its default")
        self.save_graph(work, symbol, graph)
        return "wrote MXNet's defaults: %s" % ", ".join(written)
