"""The kit's onnx2torch converters, for what onnx2torch 1.5 lacks or gets wrong; the torch environment's worker
puts them in onnx2torch's registry (:func:`use`) when the ``onnx2torch_kit_converters`` remedy asks.

- ONNX's LSTM and GRU as ``torch.nn.LSTM``/``torch.nn.GRU`` (onnx2torch: "Converter is not implemented ... LSTM").
- ReverseSequence (onnx2torch: "Converter is not implemented"), which MXNet's exporter writes for
  SequenceReverse: each sequence reversed up to its length, by a gather.
- Pad (opsets 11, 13) with its constant value given as a number: onnx2torch passes it to
  ``torch.nn.functional.pad`` as a tensor, which torch refuses ("argument 'value' must be float, not Tensor");
  MXNet's exporter pads a shape that way in every SwapAxis.

MXNet's exporter computes the ONNX RNN's weights in the graph (slices of the fused parameter vector, their sizes
read from the input's shape, reordered from MXNet's gate order): :func:`fold_rnn_weights` evaluates them first,
so that ``W``, ``R`` and ``B`` are stored tensors. The converters then copy them into the torch module, the gates
reordered: ONNX's LSTM is i,o,f,c and torch's i,f,g,o; ONNX's GRU z,r,h and torch's r,z,n (MXNet's own order is
i,f,c,o and r,z,n). A GRU is torch's only with ``linear_before_reset=1`` (which MXNet's exporter writes).
Anything else the ONNX node asks for (other activations, clipping, coupled gates) is refused, never dropped.
"""

import numpy as np

#: torch's gates, as positions in ONNX's order
LSTM_GATES = (0, 2, 3, 1)  # ONNX i,o,f,c -> torch i,f,g(c),o
GRU_GATES = (1, 0, 2)  # ONNX z,r,h -> torch r,z,n
_DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}
#: onnx2torch's own entries for what the kit's converters replace (None: it has none), read once
_ORIGINALS = {}
_TRACEABLE = []


def make_shapes_traceable():
    """onnx2torch's Shape and ConstantOfShape read a shape as Python numbers, which ``torch.jit.trace`` records
    as constants: the TorchScript file then runs the traced batch size only. Read as tensors (as torch's own
    ONNX export does), the shapes stay dynamic in the trace. Patched once per process; the kit always traces
    with it (it changes no value, only what the trace records)."""
    if _TRACEABLE:
        return
    import torch
    from onnx2torch.node_converters.constant_of_shape import OnnxConstantOfShape
    from onnx2torch.node_converters.shape import OnnxShape

    def shape(self, input_tensor):
        return torch._shape_as_tensor(input_tensor)[self._start : self._end].to(input_tensor.device)

    def constant_of_shape(self, shape):
        fill = self.value.reshape(())
        fill = fill.to(torch.uint8) if fill.dtype == torch.bool else fill
        return fill.expand([s for s in shape.to(torch.int64).unbind(0)]).to(self.value.dtype).clone()

    OnnxShape.forward = shape
    OnnxConstantOfShape.forward = constant_of_shape
    _TRACEABLE.append(True)


def fold_rnn_weights(model):
    """``model`` with the ``W``, ``R`` and ``B`` of every LSTM/GRU node stored as initializers, evaluated by onnx's
    reference evaluator on two probe inputs (each free dimension 1, then 2): weights that differ between them
    depend on the input and are refused."""
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator

    graph = model.graph
    stored = set(t.name for t in graph.initializer)
    rnns = [n for n in graph.node if n.op_type in ("LSTM", "GRU")]
    wanted = list(dict.fromkeys(name for n in rnns for name in n.input[1:4] if name and name not in stored))
    if not wanted:
        return model
    evaluator = ReferenceEvaluator(model)
    probes = [evaluator.run(wanted, _probe_feed(graph, stored, size)) for size in (1, 2)]
    for name, first, second in zip(wanted, *probes):
        if first.shape != second.shape or not np.array_equal(first, second):
            raise NotImplementedError("the RNN weights %s depend on the input's shape: not foldable" % name)
        graph.initializer.extend([numpy_helper.from_array(np.asarray(first), name + "_folded")])
    for node in rnns:
        node.input[1:4] = [n + "_folded" if n in wanted else n for n in node.input[1:4]]
    return model


def _probe_feed(graph, stored, size):
    from onnx import helper

    feed = {}
    for value in graph.input:
        if value.name in stored:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else size for d in tensor.shape.dim]
        feed[value.name] = np.zeros(shape, helper.tensor_dtype_to_np_dtype(tensor.elem_type))
    return feed


def _gates(array, order):
    """``array``'s gate blocks (along its first axis) in ``order``."""
    blocks = np.split(np.asarray(array), len(order), axis=0)
    return np.concatenate([blocks[i] for i in order], axis=0)


def _rnn_module(node, graph, op):
    import torch
    from torch import nn

    attrs = node.attributes
    refused = []
    activations = [a.decode() if isinstance(a, bytes) else str(a) for a in attrs.get("activations", [])]
    if [a.capitalize() for a in activations] not in ([], _DEFAULT_ACTIVATIONS[op], _DEFAULT_ACTIVATIONS[op] * 2):
        refused.append("activations %s" % attrs.get("activations"))
    if attrs.get("clip") is not None:
        refused.append("clip %s" % attrs.get("clip"))
    if op == "LSTM" and attrs.get("input_forget", 0):
        refused.append("input_forget 1")
    if op == "GRU" and not attrs.get("linear_before_reset", 0):
        refused.append("linear_before_reset 0 (torch.nn.GRU resets after the linear map)")
    if op == "LSTM" and len(node.input_values) > 7 and node.input_values[7]:
        refused.append("peephole weights P")
    missing = [n for n in node.input_values[1:3] if n not in graph.initializers]
    if missing:
        refused.append("weights computed at run time (%s)" % ", ".join(missing))
    if refused:
        raise NotImplementedError("%s as torch.nn.%s: not %s" % (op, op, "; ".join(refused)))
    order = LSTM_GATES if op == "LSTM" else GRU_GATES
    weights = [graph.initializers[n].to_torch().numpy() for n in node.input_values[1:3]]
    directions, gates_hidden, input_size = weights[0].shape
    hidden = int(attrs["hidden_size"])
    bias = node.input_values[3] if len(node.input_values) > 3 and node.input_values[3] else None
    bias = graph.initializers[bias].to_torch().numpy() if bias else np.zeros((directions, 2 * gates_hidden), "float32")
    rnn = getattr(nn, op)(input_size, hidden, bidirectional=directions == 2, batch_first=bool(attrs.get("layout", 0)))
    with torch.no_grad():
        for d in range(directions):
            suffix = "_l0" + ("_reverse" if d else "")
            getattr(rnn, "weight_ih" + suffix).copy_(torch.from_numpy(_gates(weights[0][d], order)))
            getattr(rnn, "weight_hh" + suffix).copy_(torch.from_numpy(_gates(weights[1][d], order)))
            getattr(rnn, "bias_ih" + suffix).copy_(torch.from_numpy(_gates(bias[d][:gates_hidden], order)))
            getattr(rnn, "bias_hh" + suffix).copy_(torch.from_numpy(_gates(bias[d][gates_hidden:], order)))
    return rnn, directions, hidden, bool(attrs.get("layout", 0))


def _module_class():
    from torch import nn

    class OnnxRNN(nn.Module):
        """An ONNX LSTM/GRU node around its torch.nn module: ONNX's inputs and outputs (Y with its direction
        axis, Y_h, and Y_c for an LSTM). ``sequence_lens`` is taken as every sequence's full length."""

        def __init__(self, rnn, directions, hidden, batch_first, states, outputs):
            nn.Module.__init__(self)
            self.rnn, self.directions, self.hidden, self.batch_first = rnn, directions, hidden, batch_first
            self.states = states  # which of initial_h, initial_c the node gives
            self.outputs = outputs  # how many of Y, Y_h, Y_c the node names

        def forward(self, x, *given):
            states = dict(zip(self.states, given))
            if self.batch_first:  # ONNX's layout 1: states batch-major too
                states = dict((k, v.transpose(0, 1)) for k, v in states.items())
            if isinstance(self.rnn, nn.LSTM):
                hx = None
                if states:
                    zeros = (states.get("h") if "h" in states else states["c"]) * 0
                    hx = (states.get("h", zeros).contiguous(), states.get("c", zeros).contiguous())
                y, (h, c) = self.rnn(x, hx)
                finals = (h, c)
            else:
                y, h = self.rnn(x, states["h"].contiguous() if "h" in states else None)
                finals = (h,)
            if self.batch_first:  # [batch, seq, dirs*hidden] -> [batch, seq, dirs, hidden]
                y = y.reshape(y.shape[0], y.shape[1], self.directions, self.hidden)
                finals = tuple(f.transpose(0, 1) for f in finals)
            else:  # [seq, batch, dirs*hidden] -> [seq, dirs, batch, hidden]
                y = y.reshape(y.shape[0], y.shape[1], self.directions, self.hidden).transpose(1, 2)
            outputs = ((y,) + finals)[: self.outputs]
            return outputs[0] if self.outputs == 1 else outputs

    return OnnxRNN


def _converter(op):
    def convert(node, graph):
        from onnx2torch.utils.common import OnnxMapping, OperationConverterResult

        rnn, directions, hidden, batch_first = _rnn_module(node, graph, op)
        names = list(node.input_values) + [""] * 8
        given = [(key, names[i]) for key, i in (("h", 5), ("c", 6)) if names[i] and (key == "h" or op == "LSTM")]
        outputs = list(node.output_values)
        module = _module_class()(rnn, directions, hidden, batch_first, [k for k, _ in given], len(outputs))
        return OperationConverterResult(
            torch_module=module,
            onnx_mapping=OnnxMapping(inputs=(names[0],) + tuple(n for _, n in given), outputs=tuple(outputs)),
        )

    return convert


def _pad_converter(node, graph):
    import torch
    from onnx2torch.node_converters.pad import OnnxPadDynamic
    from onnx2torch.utils.common import onnx_mapping_from_node

    class OnnxPadNumber(OnnxPadDynamic):
        """onnx2torch's Pad, its constant value given to ``torch.nn.functional.pad`` as the number it is."""

        def forward(self, input_tensor, pads, constant_value=0.0):
            if isinstance(constant_value, torch.Tensor):
                constant_value = float(constant_value)
            return OnnxPadDynamic.forward(self, input_tensor, pads, constant_value)

    from onnx2torch.utils.common import OperationConverterResult

    module = OnnxPadNumber(mode=node.attributes.get("mode", "constant"))
    return OperationConverterResult(torch_module=module, onnx_mapping=onnx_mapping_from_node(node))


def _reverse_sequence_converter(node, graph):
    import torch
    from onnx2torch.utils.common import OperationConverterResult, onnx_mapping_from_node
    from torch import nn

    class OnnxReverseSequence(nn.Module):
        """ONNX ReverseSequence: along ``time_axis``, each batch entry's first ``sequence_lens[b]`` steps reversed."""

        def __init__(self, batch_axis, time_axis):
            nn.Module.__init__(self)
            self.batch_axis, self.time_axis = batch_axis, time_axis

        def forward(self, x, sequence_lens):
            moved = x.movedim((self.time_axis, self.batch_axis), (0, 1))
            steps = torch.arange(torch._shape_as_tensor(moved)[0]).unsqueeze(1)  # (time, 1): a dynamic length
            lens = sequence_lens.to(torch.int64).unsqueeze(0)  # (1, batch)
            index = torch.where(steps < lens, lens - 1 - steps, steps)
            index = index.reshape(index.shape + (1,) * (moved.dim() - 2)).expand_as(moved)
            return torch.gather(moved, 0, index).movedim((0, 1), (self.time_axis, self.batch_axis))

    attrs = node.attributes
    module = OnnxReverseSequence(int(attrs.get("batch_axis", 1)), int(attrs.get("time_axis", 0)))
    return OperationConverterResult(torch_module=module, onnx_mapping=onnx_mapping_from_node(node))


def _kit_entries():
    from onnx2torch.node_converters import registry

    entries = {}
    for op, versions in (("LSTM", (7, 14)), ("GRU", (7, 14))):
        for version in versions:
            entries[registry.OperationDescription("", op, version)] = _converter(op)
    entries[registry.OperationDescription("", "ReverseSequence", 10)] = _reverse_sequence_converter
    for version in (11, 13):
        entries[registry.OperationDescription("", "Pad", version)] = _pad_converter
    return entries


def use(enabled):
    """Put the kit's converters in onnx2torch's registry (``enabled``), or take them out and give back what they
    replaced: LSTM, GRU, ReverseSequence added, Pad replaced. The registry is the process's, and a worker
    converts many models: each conversion sets it as its options say, so no model is converted with the
    converters another asked for."""
    from onnx2torch.node_converters import registry

    table, kit = registry._CONVERTER_REGISTRY, _kit_entries()
    if not _ORIGINALS:
        _ORIGINALS.update((key, table.get(key)) for key in kit)
    for key, converter in (kit if enabled else _ORIGINALS).items():
        if converter is None:
            table.pop(key, None)
        else:
            table[key] = converter
