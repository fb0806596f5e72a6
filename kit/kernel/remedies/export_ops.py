"""Remedies of an export that one operator blocks: the graph rewritten, before export, into operators the
exporter converts and ONNX runtimes run as MXNet computes them (PReLU's per-channel slope, SoftmaxActivation).

Each rebuilds the graph node by node (:func:`rebuild`), replacing only its operator; the parameters stay as
saved, so the remedied file computes what MXNet computes from the same stored values.
"""

import inspect
import json

from kit.common.capabilities import EXIT_APIS
from kit.kernel.exits import onnx_export
from kit.kernel.remedies.base import GRAPH_EDIT, Refused, Remedy, register

#: the lines that apply a rewrite to a checkpoint, after the helpers and the rewrite's function
APPLY_CODE = """sym, arg_params, aux_params = mx.model.load_checkpoint(PREFIX, EPOCH)  # the files {symbol}, {params}
mx.model.save_checkpoint("for-onnx", 0, rebuild(sym, {replace}, {shapes}), arg_params, aux_params)"""


def rebuild(sym, replace, shapes=None):
    """``sym`` built again node by node; ``replace(node, inputs, attrs, shape)`` returns the symbol that stands
    for a node it rewrites, or None to keep it (``shape``: the node's first input's, inferred on the original
    graph from the data ``shapes``, or None). Variables keep their names, so the saved parameters still bind."""
    import mxnet as mx

    graph, built = json.loads(sym.tojson()), []
    shape_of = input_shapes(sym, shapes or {})

    def pick(s, k):
        return s[k] if len(s.list_outputs()) > 1 else s

    for node in graph["nodes"]:
        attrs = node.get("attrs") or node.get("attr") or node.get("param") or {}
        if node["op"] == "null":
            built.append(mx.sym.var(node["name"]))
            continue
        inputs = [pick(built[e[0]], e[1]) for e in node["inputs"]]
        out = replace(node, inputs, attrs, shape_of(node))
        if out is None:
            out = _same_node(mx, node, inputs, attrs)
        built.append(out)
    heads = [pick(built[e[0]], e[1]) for e in graph["heads"]]
    return heads[0] if len(heads) == 1 else mx.sym.Group(heads)


def _same_node(mx, node, inputs, attrs):
    # internal operators (_rnn_param_concat, _plus_scalar, ...) are generated in mx.sym._internal only
    op = getattr(mx.sym, node["op"], None) or getattr(mx.sym._internal, node["op"])
    plain = dict((k, v) for k, v in attrs.items() if not k.startswith("__"))
    try:
        return op(*inputs, name=node["name"], **plain)
    except TypeError:  # an old release's generated signature takes only the data positionally: by input name
        bare = op(name=node["name"], **plain)  # its inputs as variables named <node>_<input>
        names = [n[len(node["name"]) + 1 :] for n in bare.list_arguments() + bare.list_auxiliary_states()]
        given = dict(zip(names, inputs))
        given.update(plain)
        return op(name=node["name"], **given)


def input_shapes(sym, shapes):
    """``shape_of(node)``: the shape of a node's first input in ``sym`` (a graph JSON node), inferred on the
    original graph from the data ``shapes``; None where it is not known."""
    graph = json.loads(sym.tojson())
    internals = sym.get_internals()
    try:
        known = dict(zip(internals.list_outputs(), internals.infer_shape_partial(**shapes)[1]))
    except Exception:  # noqa: BLE001 - an old release's BatchNorm refuses a partial pass: node by node instead
        known = None

    def shape_of(node):
        if not node["inputs"]:
            return None
        source = graph["nodes"][node["inputs"][0][0]]
        name = source["name"] if source["op"] == "null" else source["name"] + "_output"
        if known is not None:
            return tuple(known.get(name) or ()) or None
        try:
            return tuple(internals[name].infer_shape_partial(**shapes)[1][0] or ()) or None
        except Exception:  # noqa: BLE001 - not inferable from the data alone
            return None

    return shape_of


def prelu_on_channels(node, inputs, attrs, shape):
    """PReLU as relu(x) - slope * relu(-x), the slope reshaped onto the channel axis: (1, C, 1, 1) for images."""
    import mxnet as mx

    if node["op"] != "LeakyReLU" or attrs.get("act_type") != "prelu":
        return None
    x, gamma = inputs
    trailing = (1,) * max(0, len(shape or (1, 1, 1, 1)) - 2)
    slope = mx.sym.reshape(gamma, shape=(1, -1) + trailing, name=node["name"] + "_slope")
    return mx.sym.broadcast_sub(mx.sym.relu(x), mx.sym.broadcast_mul(slope, mx.sym.relu(-x)), name=node["name"])


def softmax_by_mode(node, inputs, attrs, shape):
    """SoftmaxActivation as softmax: over the channel axis (mode channel) or over all but the batch (instance)."""
    import mxnet as mx

    if node["op"] != "SoftmaxActivation":
        return None
    if attrs.get("mode") == "channel" or (shape is not None and len(shape) == 2):
        return mx.sym.softmax(inputs[0], axis=1 if attrs.get("mode") == "channel" else -1, name=node["name"])
    if shape is None:
        raise ValueError("the shape of SoftmaxActivation %r's input is not known" % node["name"])
    flat = mx.sym.softmax(mx.sym.reshape(inputs[0], shape=(0, -1)), axis=-1)
    return mx.sym.reshape(flat, shape=(0,) + tuple(shape[1:]), name=node["name"])


def softmax_output_by_mode(node, inputs, attrs, shape):
    """SoftmaxOutput (softmax with its training label) as the softmax it computes at inference: over axis 1 per
    position (multi_output), over the last axis (preserve_shape), else over everything but the batch."""
    import mxnet as mx

    if node["op"] != "SoftmaxOutput":
        return None
    if attrs.get("multi_output") in ("True", "true", "1"):
        return mx.sym.softmax(inputs[0], axis=1, name=node["name"])
    if attrs.get("preserve_shape") in ("True", "true", "1") or shape is None or len(shape) <= 2:
        return mx.sym.softmax(inputs[0], axis=-1, name=node["name"])
    flat = mx.sym.softmax(mx.sym.reshape(inputs[0], shape=(0, -1)), axis=-1)
    return mx.sym.reshape(flat, shape=(0,) + tuple(shape[1:]), name=node["name"])


def rnn_directions_apart(node, inputs, attrs, shape):
    """A one-layer bidirectional RNN as two forward ones: one on the sequence, one on it reversed in time (then
    reversed back), their outputs (and final states) concatenated. The fused parameter vector is sliced by
    MXNet's own layout (weights l0 i2h, h2h, r0 i2h, h2h; then the biases alike), the begin states by direction."""
    import mxnet as mx

    if node["op"] != "RNN" or attrs.get("bidirectional") not in ("True", "true", "1"):
        return None
    if int(attrs.get("num_layers", 1)) != 1 or attrs.get("use_sequence_length") in ("True", "true", "1"):
        raise ValueError("RNN %r: only one layer without sequence lengths is split by direction" % node["name"])
    if shape is None:
        raise ValueError("the shape of RNN %r's input is not known" % node["name"])
    gates = {"lstm": 4, "gru": 3}.get(attrs.get("mode"), 1)
    hidden, features = int(attrs["state_size"]), shape[2]  # data is (time, batch, features)
    w_ih, w_hh, bias = gates * hidden * features, gates * hidden * hidden, gates * hidden
    weights = 2 * (w_ih + w_hh)
    spans = {  # direction -> its (begin, end) slices of the fused vector, weights then biases
        0: [(0, w_ih + w_hh), (weights, weights + 2 * bias)],
        1: [(w_ih + w_hh, weights), (weights + 2 * bias, weights + 4 * bias)],
    }
    keep = dict((k, v) for k, v in attrs.items() if not k.startswith("__") and k != "bidirectional")
    outputs = attrs.get("state_outputs") in ("True", "true", "1")
    runs = []
    for d, suffix in ((0, "_fwd"), (1, "_bwd")):
        params = mx.sym.concat(*[mx.sym.slice_axis(inputs[1], axis=0, begin=b, end=e) for b, e in spans[d]], dim=0)
        # split, not sliced: a begin state of zeros learns its batch size back from the RNN through a split
        states = [mx.sym.split(state, num_outputs=2, axis=0)[d] for state in inputs[2:]]
        data = inputs[0] if d == 0 else mx.sym.SequenceReverse(inputs[0])
        run = mx.sym.RNN(data, params, *states, name=node["name"] + suffix, **keep)
        runs.append([run[i] for i in range(len(run.list_outputs()))] if outputs else [run])
    runs[1][0] = mx.sym.SequenceReverse(runs[1][0])
    joined = [mx.sym.concat(runs[0][i], runs[1][i], dim=2 if i == 0 else 0) for i in range(len(runs[0]))]
    return joined[0] if len(joined) == 1 else mx.sym.Group(joined)


def _input_shapes(work):
    """The artifact's input shapes as its export gives them (a kit manifest's lack the batch, a checkpoint's
    have it)."""
    return dict((i["name"], onnx_export.input_shape(i, work.manifest)) for i in work.manifest.get("inputs") or [])


class _GraphRewrite(Remedy):
    """A remedy that rewrites the nodes of one operator in the artifact's graph with :attr:`replace`, the function
    a user pastes too (with :func:`rebuild`): what the kit verified is what the user runs."""

    changes = GRAPH_EDIT
    directions = ("backward", "same", "forward")
    apis = EXIT_APIS
    loading = ("1.3.0", None)
    edits_artifact = True
    op = None
    replace = None

    @property
    def user_code(self):
        """The function a user pastes (with the helpers :meth:`code` adds)."""
        return inspect.getsource(type(self).replace)

    def apply(self, work, error_text):
        import mxnet as mx

        symbol, _ = work.files()
        if symbol is None:
            raise Refused("the artifact has no graph file to rewrite")
        rewritten = []

        def replace(node, inputs, attrs, shape):
            out = type(self).replace(node, inputs, attrs, shape)
            if out is not None:
                rewritten.append(node["name"])
            return out

        try:
            new = rebuild(mx.sym.load(work.path(symbol)), replace, _input_shapes(work))
        except ValueError as e:
            raise Refused(str(e))
        if not rewritten:
            raise Refused("the graph has no %s node to rewrite" % self.op)
        new.save(work.path(symbol))
        return "rewrote %s %s before export" % (self.op, ", ".join(repr(n) for n in rewritten))

    def code(self, work):
        """The helpers, this remedy's function and the lines that apply them to the checkpoint."""
        symbol, params = work.files()
        sources = [inspect.getsource(f) for f in (rebuild, _same_node, input_shapes, type(self).replace)]
        apply = APPLY_CODE.format(
            symbol=symbol, params=params, replace=type(self).replace.__name__, shapes=_input_shapes(work)
        )
        return "\n\n".join(["import json\n\nimport mxnet as mx"] + sources + [apply])


@register
class SoftmaxOutputAsSoftmax(_GraphRewrite):
    """A Module graph's ``SoftmaxOutput`` heads (the training loss with its label input) fail MXNet 1.9's
    exporter, or export dropping ``multi_output``/``preserve_shape``: each is replaced by the softmax it computes
    at inference, by its mode, and the label inputs go (the inference graph a user exports)."""

    name = "softmax_output_as_softmax"
    title = "export the inference graph: each SoftmaxOutput (softmax with its training label) as softmax by its mode"
    error = r"convert_softmax_output|SoftmaxOutput"  # also the exporter's label mix-up, as onnx_export says it
    op = "SoftmaxOutput"
    replace = staticmethod(softmax_output_by_mode)

    def apply(self, work, error_text):
        said = _GraphRewrite.apply(self, work, error_text)
        if (work.manifest.get("load") or {}).get("label_names"):
            work.manifest["load"]["label_names"] = []
        return said


@register
class PreluSlopeBroadcast(_GraphRewrite):
    """``LeakyReLU(act_type="prelu")`` exports as ONNX ``PRelu`` with the slope of shape (C,), which ONNX
    broadcasts against the last axis, not the channel axis: ONNX Runtime refuses it (or, where C equals the
    last axis, computes something else). Written as relu(x) - slope * relu(-x) with the slope reshaped to
    (1, C, 1, ...), it computes MXNet's PReLU from the same stored slope."""

    name = "prelu_slope_broadcast"
    title = "PReLU as relu(x) - slope * relu(-x), the slope reshaped onto the channel axis"
    error = r"PRelu|Attempting to broadcast an axis by a dimension other than 1"
    op = "LeakyReLU"
    replace = staticmethod(prelu_on_channels)


@register
class BidirectionalRnnAsTwo(_GraphRewrite):
    """MXNet 1.9's exporter converts a one-direction RNN only ("Currently RNN onnx export only supports
    bidirectional is False"), and OCR checkpoints carry a bidirectional GRU or LSTM. Two forward RNNs, the
    second on the sequence reversed in time, from the same stored parameters, compute the same."""

    name = "bidirectional_rnn_as_two"
    title = "a bidirectional RNN as two forward ones (the second on the reversed sequence), outputs concatenated"
    error = r"RNN onnx export only supports bidirectional is False"
    op = "RNN"
    replace = staticmethod(rnn_directions_apart)


@register
class SoftmaxActivationAsSoftmax(_GraphRewrite):
    """``SoftmaxActivation`` (deprecated in MXNet, common in detection checkpoints) has no ONNX converter. By its
    mode it is ``softmax`` over the channel axis (``channel``) or over everything but the batch (``instance``,
    the default), which the exporter converts."""

    name = "softmax_activation_as_softmax"
    title = "SoftmaxActivation as softmax over its mode's axes (channel: axis 1; instance: all but the batch)"
    error = r"SoftmaxActivation"
    op = "SoftmaxActivation"
    replace = staticmethod(softmax_by_mode)
