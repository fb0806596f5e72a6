"""Before an export: a graph's operators and the attributes it sets, against this release's exporter's converters
and what each exit's runtime was measured to do with them; what will block, what would give wrong numbers, and
the remedy that answers each.

The exporter's side is read from its own registry (``mx.onnx``'s converters per opset). The rest is what the kit
measured on MXNet 1.9.1's exporter with ONNX Runtime 1.32, OpenVINO 2026.4 and onnx2torch 1.5.15 (:data:`TRAPS`;
docs/leaving-mxnet.md): a graph none of them names may still fail, which the check that follows measures.
"""

import json

from kit.common.capabilities import EXIT_APIS, ONNX_API, OPENVINO_API, TORCH_API
from kit.kernel.exits import onnx_export

TRUE = ("True", "true", "1")
#: what a finding does to an exit
BLOCKS, WRONG = "blocks", "wrong numbers"


def _is(attrs, name, values, default=None):
    return attrs.get(name, default) in values


def _unset(name):
    return lambda attrs, node: name not in attrs


def _gamma_stored(attrs, node):
    """fix_gamma (default True) with a stored gamma other than 1: read from the parameters beside the graph."""
    if not _is(attrs, "fix_gamma", TRUE, "True"):
        return False
    gamma = node.get("gamma")
    return gamma is not None and not (gamma == 1).all()


class Trap(object):
    """What ``op`` (where ``when(attrs, node)`` holds) does to ``exits``: it ``effect`` (blocks, wrong numbers),
    ``says`` why, and ``remedy`` (a remedy's name, None for none in the kit) answers it."""

    def __init__(self, op, effect, says, remedy=None, exits=EXIT_APIS, when=None):
        self.op, self.effect, self.says, self.remedy, self.exits = op, effect, says, remedy, tuple(exits)
        self.when = when or (lambda attrs, node: True)


#: measured traps of MXNet 1.9.1's exporter and the exits' runtimes
TRAPS = [
    Trap(
        "SoftmaxOutput",
        BLOCKS,
        "the exporter fails on a SoftmaxOutput head (or drops multi_output/preserve_shape)",
        "softmax_output_as_softmax",
    ),
    Trap("SoftmaxActivation", BLOCKS, "the exporter has no converter", "softmax_activation_as_softmax"),
    Trap(
        "LeakyReLU",
        BLOCKS,
        "a per-channel PReLU slope is written with shape (C,), which ONNX broadcasts against the last axis",
        "prelu_slope_broadcast",
        exits=(ONNX_API,),
        when=lambda attrs, node: _is(attrs, "act_type", ("prelu",)) and (node.get("ndim") or 4) > 2,
    ),
    Trap(
        "RNN",
        BLOCKS,
        "the exporter converts one-direction RNNs only",
        "bidirectional_rnn_as_two",
        when=lambda attrs, node: _is(attrs, "bidirectional", TRUE),
    ),
    Trap("RNN", BLOCKS, "onnx2torch has no LSTM/GRU converter", "onnx2torch_kit_converters", exits=(TORCH_API,)),
    Trap(
        "RNN",
        BLOCKS,
        "its converter writes opset-13 forms into a file stamped with the onnx package's newest opset (19)",
        "onnx_opset_13",
    ),
]
for _op in ("mean", "max", "min", "prod", "LayerNorm", "SliceChannel", "split"):  # ReduceSum moved at opset 13
    TRAPS.append(
        Trap(
            _op,
            BLOCKS,
            "its converter writes opset-13 forms (Reduce*/Split) into a file stamped opset 19",
            "onnx_opset_13",
            when=lambda attrs, node, op=_op: op in ("LayerNorm", "SliceChannel", "split") or "axis" in attrs,
        )
    )
TRAPS += [
    Trap(
        "BatchNorm",
        WRONG,
        "fix_gamma (MXNet's default) ignores the stored gamma, which is not 1; the exporter writes it",
        "fix_gamma_as_stored_ones",
        when=_gamma_stored,
    ),
    Trap(
        "FullyConnected",
        WRONG,
        "flatten is unset (MXNet: True); the exporter reads False, so a >2-D input is not flattened",
        "mxnet_defaults_spelled_out",
        when=lambda attrs, node: "flatten" not in attrs and (node.get("ndim") or 3) > 2,
    ),
    Trap(
        "Deconvolution",
        BLOCKS,
        "no_bias is unset (MXNet: True); the exporter reads False and asserts a bias input",
        "mxnet_defaults_spelled_out",
        when=_unset("no_bias"),
    ),
    Trap(
        "LRN",
        WRONG,
        "knorm is unset (MXNet: 2); the exporter writes bias 1",
        "mxnet_defaults_spelled_out",
        when=_unset("knorm"),
    ),
    Trap(
        "sum", WRONG, "exclude=True is dropped: the other axes are reduced", when=lambda a, n: _is(a, "exclude", TRUE)
    ),
    Trap(
        "mean", WRONG, "exclude=True is dropped: the other axes are reduced", when=lambda a, n: _is(a, "exclude", TRUE)
    ),
    Trap(
        "max", WRONG, "exclude=True is dropped: the other axes are reduced", when=lambda a, n: _is(a, "exclude", TRUE)
    ),
    Trap(
        "Pooling",
        WRONG,
        "lp pooling with an odd p_value: ONNX LpPool takes |x|, MXNet does not",
        when=lambda attrs, node: _is(attrs, "pool_type", ("lp",)) and int(attrs.get("p_value", 2)) % 2 == 1,
    ),
    Trap("Pooling", BLOCKS, "pool_type sum has no converter", when=lambda a, n: _is(a, "pool_type", ("sum",))),
    Trap(
        "Pooling",
        WRONG,
        "avg pooling with the full convention and padding is computed otherwise by OpenVINO's CPU plugin",
        exits=(OPENVINO_API,),
        when=lambda a, n: _is(a, "pool_type", ("avg",)) and _is(a, "pooling_convention", ("full",)) and "pad" in a,
    ),
    Trap(
        "Pooling",
        BLOCKS,
        "onnx2torch has no LpPool/GlobalMaxPool converter",
        exits=(TORCH_API,),
        when=lambda a, n: (
            _is(a, "pool_type", ("lp",)) or (_is(a, "pool_type", ("max",)) and _is(a, "global_pool", TRUE))
        ),
    ),
    Trap("L2Normalization", WRONG, "eps is dropped (ONNX LpNormalization has none)", when=lambda a, n: "eps" in a),
    Trap(
        "L2Normalization",
        BLOCKS,
        "only mode channel converts",
        when=lambda a, n: not _is(a, "mode", ("channel",)),
    ),
    Trap("L2Normalization", BLOCKS, "onnx2torch has no LpNormalization converter", exits=(TORCH_API,)),
    Trap(
        "Embedding",
        WRONG,
        "indices outside [0, input_dim) are clipped by MXNet, not by the exported Gather",
    ),
    Trap("InstanceNorm", BLOCKS, "onnx2torch fails converting InstanceNormalization", exits=(TORCH_API,)),
    Trap("LeakyReLU", BLOCKS, "act_type rrelu has no converter", when=lambda a, n: _is(a, "act_type", ("rrelu",))),
    Trap("Dropout", BLOCKS, "mode always has no converter", when=lambda a, n: _is(a, "mode", ("always",))),
    Trap("Deconvolution", BLOCKS, "target_shape has no converter", when=lambda a, n: "target_shape" in a),
    Trap("log_softmax", BLOCKS, "temperature has no converter", when=lambda a, n: "temperature" in a),
    Trap("BatchNorm", BLOCKS, "an axis other than 1 has no converter", when=lambda a, n: a.get("axis", "1") != "1"),
    Trap(
        "UpSampling",
        BLOCKS,
        "bilinear upsampling has no converter",
        when=lambda a, n: not _is(a, "sample_type", ("nearest",)),
    ),
]


def converters():
    """The MXNet operators this kernel's exporter converts (every opset's registry); None where that is not known."""
    name, _ = onnx_export.exporter()
    if name is None:
        return None
    try:
        if name == "mx.onnx.export_model":
            from mxnet.onnx.mx2onnx._export_onnx import MXNetGraph

            found = set(op for table in MXNetGraph.registry_.values() for op in table)
        else:
            from mxnet.contrib.onnx.mx2onnx.export_onnx import MXNetGraph

            found = set(MXNetGraph.registry_)
    except Exception:  # noqa: BLE001 - an exporter laid out otherwise: its registry is not read
        return None
    return found or None  # converters register as their modules import (with the onnx package): none is unknown


def _nodes(sym_path, params, shapes):
    """The graph's operator nodes: name, op, the attributes it sets, its first input's rank, a BatchNorm's gamma."""
    import mxnet as mx

    sym = mx.sym.load(sym_path)
    graph = json.loads(sym.tojson())
    ranks = {}
    try:
        internals = sym.get_internals()
        ranks = dict(
            (n, len(s)) for n, s in zip(internals.list_outputs(), internals.infer_shape_partial(**shapes)[1]) if s
        )
    except Exception:  # noqa: BLE001 - ranks are a refinement: without them the rank-dependent traps assume the worst
        pass
    by_name = dict((k.split(":", 1)[-1], v) for k, v in params.items())
    out = []
    for node in graph["nodes"]:
        if node["op"] == "null":
            continue
        attrs = dict(
            (k, v)
            for k, v in (node.get("attrs") or node.get("attr") or node.get("param") or {}).items()
            if k[:2] != "__"
        )
        inputs = [graph["nodes"][e[0]] for e in node["inputs"]]
        first = inputs[0] if inputs else None
        source = None if first is None else first["name"] if first["op"] == "null" else first["name"] + "_output"
        entry = {"name": node["name"], "op": node["op"], "attrs": attrs, "ndim": ranks.get(source)}
        if node["op"] == "BatchNorm" and len(inputs) > 1 and inputs[1]["name"] in by_name:
            entry["gamma"] = by_name[inputs[1]["name"]].asnumpy()
        out.append(entry)
    return out


def check(sym_path, params_path, shapes, exits):
    """The pre-flight of the graph in ``sym_path`` (parameters in ``params_path``, data ``shapes``) for ``exits``:
    ``{"exporter", "operators": [{op, count, nodes, attrs, converted}], "findings": [...], "blocks", "remedies"}``."""
    import mxnet as mx

    params = mx.nd.load(params_path) if params_path else {}
    nodes = _nodes(sym_path, params, dict(shapes))
    known = converters()
    operators, findings = {}, []
    for node in nodes:
        row = operators.setdefault(node["op"], {"op": node["op"], "count": 0, "nodes": [], "attrs": {}})
        row["count"] += 1
        row["nodes"].append(node["name"])
        for k, v in node["attrs"].items():
            values = row["attrs"].setdefault(k, [])
            if v not in values:
                values.append(v)
        row["converted"] = None if known is None else node["op"] in known
        for trap in TRAPS:
            hit = [e for e in exits if e in trap.exits]
            if trap.op == node["op"] and hit and trap.when(node["attrs"], node):
                findings.append(
                    {
                        "node": node["name"],
                        "op": node["op"],
                        "exits": hit,
                        "effect": trap.effect,
                        "says": trap.says,
                        "remedy": trap.remedy,
                    }
                )
    for row in operators.values():
        if row["converted"] is False and not any(f["op"] == row["op"] and f["effect"] == BLOCKS for f in findings):
            findings.append(
                {
                    "node": row["nodes"][0],
                    "op": row["op"],
                    "exits": list(exits),
                    "effect": BLOCKS,
                    "says": "the exporter has no converter",
                    "remedy": None,
                }
            )
    return {
        "exporter": onnx_export.exporter()[0],
        "operators": sorted(operators.values(), key=lambda r: r["op"]),
        "findings": findings,
        "remedies": sorted(set(f["remedy"] for f in findings if f["remedy"])),
        "unanswered": [f for f in findings if not f["remedy"]],
    }
