"""An exit's cell layer by layer: the exported ``.onnx`` file with the tensors that carry MXNet's node names made
outputs, run by the exit's runtime (ONNX Runtime, OpenVINO, PyTorch through onnx2torch), against the saving
release's recorded internals.

MXNet's exporter names the ONNX tensor a node computes after the node (``lenet_conv0_fwd``); a node it fuses or
splits into tensors of other names is not exposed, and its row says so rather than passing or failing.
"""

import os
from collections import OrderedDict

from kit.common import artifacts
from kit.kernel.exits import onnx_export, runtime_client
from kit.kernel.mx import internals

#: what an unpaired node's row says
UNPAIRED = "not in the exported file (the exporter fused or renamed it)"
#: the layered copy beside the exported file: ``model.onnx`` -> ``model.layers.onnx``
LAYERS = ".layers"


def candidates(output):
    """The ONNX tensor names that may carry MXNet internal output ``output`` (``conv0_output`` -> ``conv0_output``,
    ``conv0``; a node's k-th output ``split0_output1`` also ``split0_1`` and ``split01``)."""
    node = internals.node_of(output)
    names = [output, node]
    index = output[len(node) + len("_output") :]
    if index:
        names += ["%s_%s" % (node, index), node + index]
    return names


def expose(path, out, wanted):
    """Write the model of ``path`` to ``out`` with the tensors named in ``wanted`` made graph outputs after its
    own; return every output's name, in order."""
    import onnx

    model = onnx.load(path)
    graph = model.graph
    try:  # typed outputs where the shapes can be inferred; a name alone serves the runtimes otherwise
        typed = dict((v.name, v) for v in onnx.shape_inference.infer_shapes(model).graph.value_info)
    except Exception:  # noqa: BLE001
        typed = {}
    names = [o.name for o in graph.output]
    for node in graph.node:
        for name in node.output:
            if name in wanted and name not in names:
                names.append(name)
                graph.output.append(typed.get(name) or onnx.helper.make_empty_tensor_value_info(name))
    onnx.save(model, out)
    return names


def layer_outputs(runtime, options, folder, manifest, opset, expected, inputs):
    """``(got, exported)``: the exit's outputs of the nodes of ``expected`` (internal output name -> array) that
    the exported file names, computed by ``runtime`` on ``inputs``, and the export's details. The files go where
    ``onnx_export.configure`` said (the investigation's folder)."""
    batch = len(inputs[manifest["inputs"][0]["name"]]) if manifest["inputs"][0].get("kind") != "pixels_single" else None
    exported = onnx_export.export(folder, manifest, opset=opset)
    if not exported["dynamic"] and batch not in (None, 1):  # a fixed-batch exporter: the file for this batch
        exported = onnx_export.export(folder, manifest, opset=opset, batch=batch)
    wanted = OrderedDict()
    for output in expected:
        for name in candidates(output):
            wanted.setdefault(name, output)
    base, ext = os.path.splitext(exported["file"])
    layered = base + LAYERS + ext
    names = expose(exported["file"], layered, wanted)
    given = [i["name"] for i in manifest["inputs"]]
    outputs = runtime_client.session(runtime, layered, given, options).run(inputs)
    got, other = OrderedDict(), {}
    for name, value in zip(names, outputs):
        output = wanted.get(name)
        if output is None or output in got or output in other:
            continue
        shape = expected[output].shape
        if value.shape == shape or value.size == expected[output].size:
            got[output] = value.reshape(shape)  # a layout the exporter chose for the same values: compared
        else:
            other[output] = "in the exported file with shape %s, not MXNet's %s: not compared" % (
                list(value.shape),
                list(shape),
            )
    exported = dict(
        exported, layers=layered, exposed=len(got), other_shapes=other, runtime=runtime_client.version(runtime)
    )
    return got, exported


def exported_parameters(path, saved):
    """The ``.onnx`` file's initializers that are MXNet's parameters (by name, or by content where the exporter
    renamed one), as MXNet arrays: the parameters as the exporter wrote them. The exporter's own constants
    (shapes, axes) are left out."""
    import mxnet as mx
    import onnx
    from onnx import numpy_helper

    hashes = set(s["sha256"] for s in (saved or {}).values())
    out = {}
    for tensor in onnx.load(path).graph.initializer:
        value = numpy_helper.to_array(tensor)
        if tensor.name in (saved or {}) or artifacts.param_stats(value)["sha256"] in hashes:
            out[tensor.name] = mx.nd.array(value, dtype=value.dtype)
    return out
