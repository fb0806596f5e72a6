"""Remedies that change how a graph loads or what it says: legacy shape semantics for a 1.x graph in 2.0,
its unknown dimensions written the 2.0 way, attributes an older release does not know dropped at their
default."""

import json
import re

from kit.common.capabilities import C_PREDICT_API, FOREIGN_API, GLUON2
from kit.common.versions import at_least
from kit.kernel.mx import mxapi
from kit.kernel.remedies.base import GRAPH_EDIT, LOADING_MODE, Refused, Remedy, register  # noqa: F401


class _LegacyPredictor(object):
    def __init__(self, predictor):
        self._predictor = predictor
        self.path, self.attempts = predictor.path, []

    def __call__(self, inputs):
        with mxapi.legacy_semantics():
            return self._predictor(inputs)


@register
class LegacyShapeSemantics(Remedy):
    """A 1.x graph in MXNet 2.0 under legacy shape semantics: 0 in a 1.x shape means "unknown", not "empty"."""

    name = "legacy_shape_semantics"
    title = "load and run the 1.x graph under legacy shape semantics (mx.npx.reset_np())"
    changes = LOADING_MODE
    apis = ("export", "module_checkpoint", FOREIGN_API)
    loading = (GLUON2, None)
    user_code = """
import mxnet as mx
mx.npx.reset_np()  # legacy (1.x) shape and array semantics for this graph
net = mx.gluon.SymbolBlock.imports("{symbol}", {inputs}, "{params}")
out = net(mx.nd.array(x))
"""

    def matches(self, target, error_text, verdict):
        return Remedy.matches(self, target, error_text, verdict) and not at_least(target.saved, GLUON2)

    def apply(self, work, error_text):
        if not mxapi.numpy_semantics():
            raise Refused("numpy semantics were already off in this kernel: the naive load ran under legacy ones")
        return "loaded and ran with numpy shape and array semantics off (1.x semantics)"

    def load(self, work):
        with mxapi.legacy_semantics():
            predictor = work.adapter.load(work.spec, work.loaded, work.folder, work.manifest)
        return _LegacyPredictor(predictor)


#: operators whose ``shape`` attribute makes an array, where 1.x wrote 0 for "unknown" (numpy semantics: -1)
_SHAPED_CONSTANTS = ("_zeros", "_ones", "_full", "_empty")


@register
class UnknownDimsAsMinusOne(Remedy):
    """A 1.x graph made native to 2.0: the 0 ("unknown", e.g. an RNN's begin state batch) in a constant's
    shape written as -1, what numpy shape semantics call unknown (0 there means an empty axis)."""

    name = "np_shape_unknown_dims"
    title = "rewrite 0 (1.x: unknown) as -1 in the shapes of the graph's constant nodes (a native 2.0 graph)"
    changes = GRAPH_EDIT
    apis = ("export", "module_checkpoint", FOREIGN_API)
    loading = (GLUON2, None)
    edits_artifact = True
    user_code = """
import json, re
graph = json.load(open("{symbol}"))
for node in graph["nodes"]:  # begin states made with 1.x semantics: (1, 0, 24) -> (1, -1, 24)
    if node["op"] in ("_zeros", "_ones", "_full", "_empty") and "shape" in node.get("attrs", {{}}):
        node["attrs"]["shape"] = re.sub(r"(?<![\\d-])0(?!\\d)", "-1", node["attrs"]["shape"])
json.dump(graph, open("{symbol}", "w"))
"""

    def matches(self, target, error_text, verdict):
        return Remedy.matches(self, target, error_text, verdict) and not at_least(target.saved, GLUON2)

    def apply(self, work, error_text):
        symbol = work.path(work.files()[0])
        with open(symbol) as f:
            graph = json.load(f)
        changed = []
        for node in graph["nodes"]:
            attrs = node.get("attrs") or node.get("param") or {}
            if node["op"] in _SHAPED_CONSTANTS and "shape" in attrs:
                shape = re.sub(r"(?<![\d-])0(?!\d)", "-1", attrs["shape"])
                if shape != attrs["shape"]:
                    changed.append("%s %s -> %s" % (node["name"], attrs["shape"], shape))
                    attrs["shape"] = shape
        if not changed:
            raise Refused("no constant node of the graph has a 0 (unknown) dimension to rewrite")
        with open(symbol, "w") as f:
            json.dump(graph, f)
        return "shapes rewritten: " + "; ".join(changed[:3]) + (" ..." if len(changed) > 3 else "")


#: graph attributes newer releases write that older ones do not know: (operators, value that changes
#: nothing); a value of None means "the default by the kernel's rank" (layout)
DEFAULT_ATTRIBUTES = {
    "layout": (("Convolution", "Deconvolution", "Pooling"), None),
    "sparse_grad": (("Embedding",), ("False", "0", "false")),
    "use_sequence_length": (("RNN",), ("False", "0", "false")),
    "output_size": (("Pooling",), ("None",)),  # 2.0's adaptive pooling; None: the plain pooling 1.x does
    "p_value": (("Pooling",), ("None",)),  # LP pooling's power; None: the pool_type's own pooling
    "count_include_pad": (("Pooling",), ("None",)),  # None: the release's default
    "cudnn_off": (("Convolution", "Deconvolution", "Pooling", "RNN"), ("0", "False", "false")),  # GPU only
}
_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def _is_default(attr, node):
    ops, values = DEFAULT_ATTRIBUTES[attr]
    value = node.get("attrs", {}).get(attr)
    if values is not None:
        return value in values
    if value in (None, "None"):
        return True
    kernel = node["attrs"].get("kernel")
    rank = len(re.findall(r"\d+", kernel)) if kernel else (2 if node["attrs"].get("global_pool") else None)
    return rank is not None and value == _LAYOUTS.get(rank)


@register
class DropDefaultAttributes(Remedy):
    """Forward: drop a graph attribute the older release does not know where its value is the default."""

    name = "drop_default_attributes"
    title = "delete graph attributes the older release does not know, where their value is its default"
    changes = GRAPH_EDIT
    directions = ("forward",)
    apis = ("export", "module_checkpoint", C_PREDICT_API, FOREIGN_API)
    error = r"Cannot find argument '([^']+)'"
    edits_artifact = True
    user_code = """
import json
graph = json.load(open("{symbol}"))
for node in graph["nodes"]:  # only where the value is what the older release does anyway
    if node.get("attrs", {{}}).get("layout") == "NCHW":
        del node["attrs"]["layout"]
json.dump(graph, open("{symbol}", "w"))
"""

    def apply(self, work, error_text):
        attr = re.search(self.error, error_text).group(1)
        if attr not in DEFAULT_ATTRIBUTES:
            raise Refused(
                "attribute %r is not one the kit knows to be a no-op at its default: dropping it could change "
                "the computation" % attr
            )
        symbol = work.path(work.files()[0])
        with open(symbol) as f:
            graph = json.load(f)
        ops = DEFAULT_ATTRIBUTES[attr][0]
        dropped, kept = 0, []
        for node in graph["nodes"]:
            attrs = node.get("attrs") or node.get("param") or {}
            if attr not in attrs:
                continue
            if node["op"] in ops and _is_default(attr, dict(node, attrs=attrs)):
                del attrs[attr]
                dropped += 1
            else:
                kept.append("%s(%s=%s)" % (node["name"], attr, attrs[attr]))
        if kept:
            raise Refused(
                "%s on %s is not the older release's default: dropping it would change the computation"
                % (attr, ", ".join(kept[:3]))
            )
        with open(symbol, "w") as f:
            json.dump(graph, f)
        return "dropped %s from %d node(s) (the default value)" % (attr, dropped)
