"""Failures no remedy answers, and why: what a record's ``remedy.why_none`` says (both sides read it)."""

import re

#: failures no remedy answers, and why: (pattern, explanation with {0} for the match)
NO_REMEDY = [
    (
        r"Operator (_npi_\w+|_npx_\w+)",
        "operator {0} is one of MXNet's numpy operators, which arrived in 1.6: the graph needs 1.6 or newer "
        "(or a re-export from the model's 1.x code)",
    ),
    (
        r"Operator (_rnn_param_concat)",
        "operator {0} (the fused RNN's parameter concatenation, from 1.3 on) does not exist here: a hybridized "
        "1.3+ RNN graph needs 1.3 or newer",
    ),
    (
        r"Operator (_image_resize)",
        "operator {0} (gluon's Resize as a graph operator, from 1.5 on) does not exist here: the graph needs 1.5 or "
        "newer, or the resize done outside the model",
    ),
    (
        r"Operator (_image_to_tensor|_image_normalize)",
        "operator {0} (gluon's image transforms as graph operators, from 1.1 on) does not exist here: the graph "
        "needs 1.1 or newer",
    ),
    (
        r"No conversion function registered for op type (_image_resize|_image_to_tensor|_image_normalize)",
        "MXNet's ONNX exporter has no converter for {0} (gluon's image transforms fused into the graph): export "
        "the network without its transforms and do them in the serving code",
    ),
    (
        r"No conversion function registered for op type (\S+?)(?: yet)?\.?(?:\s|$)",
        "MXNet's ONNX exporter has no converter for operator {0}",
    ),
    (
        r"Unrecognized attribute: spatial for operator BatchNormalization",
        "mx.contrib.onnx (1.3 to 1.8) writes BatchNormalization's spatial attribute, gone from ONNX since opset 9 "
        "(at opset 7 or 8 it exports and ONNX Runtime refuses the scale's shape): export with 1.9's exporter "
        "(--load onnx)",
    ),
    (r"raised in the exporter's (convert_\w+)", "MXNet's ONNX exporter fails in its converter {0}"),
    (r"Operator (\S+?):? is not registered", "operator {0} does not exist in the loading release"),
    (r"Cannot find argument '([^']+)'", "argument '{0}' is not known to be a no-op at its default"),
]


def no_remedy_reason(error_text):
    for pattern, why in NO_REMEDY:
        m = re.search(pattern, error_text or "")
        if m:
            return why.format(*m.groups())
    return None
