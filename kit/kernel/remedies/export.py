"""Remedies of an export to ONNX that fails: the exporter's settings a user leaving MXNet changes."""

from kit.common.capabilities import EXIT_APIS, GLUON2
from kit.kernel.exits import onnx_export
from kit.kernel.remedies.base import EXPORT_SETTING, Remedy, register

#: the newest opset MXNet 1.9's converters are written for (mx2onnx/_op_translations/_op_translations_opset13.py)
CONVERTERS_OPSET = 13


@register
class PinExportOpset(Remedy):
    """MXNet 1.9's exporter stamps the onnx package's newest opset on the file and checks the graph against
    it, though its converters write opset-13 operators: with onnx 1.14 (opset 19) ReduceMean's ``axes``
    attribute, an input since opset 18, fails the check, and onnx2torch, which picks its converters by the
    stamp, has none for opset 19's Shape or AveragePool. Stamping the opset the converters write mends both."""

    name = "onnx_opset_13"
    title = "export with the opset the exporter's converters write (%d), not the onnx package's newest" % (
        CONVERTERS_OPSET
    )
    changes = EXPORT_SETTING
    directions = ("backward", "same", "forward")
    apis = EXIT_APIS
    loading = ("1.9.0", GLUON2)
    # onnx2torch picks each converter by the file's opset: it has none past the opsets its converters were written
    # for ("Converter is not implemented (... operation_type='Shape', version=19)")
    error = (
        r"Unrecognized attribute: \w+ for operator|is not a registered function/op|ValidationError"
        r"|Converter is not implemented .*version=(1[4-9]|[2-9]\d)\)"
    )
    user_code = """
import mxnet as mx
import numpy as np
import onnx.checker, onnx.defs
# MXNet 1.9's exporter stamps (and checks against) the onnx package's newest opset; its converters write opset 13
onnx.defs.onnx_opset_version = lambda: 13
onnx.checker.DEFAULT_CONTEXT.opset_imports = {{"": 13}}
mx.onnx.export_model("{symbol}", "{params}", {shapes}, {types}, "model.onnx",
                     dynamic=True, dynamic_input_shapes={dynamic})
"""

    edits_artifact = True  # a setting in the work copy's manifest, which the exit's adapter reads: chains

    def apply(self, work, error_text):
        work.manifest["onnx_opset"] = CONVERTERS_OPSET
        return "exported with opset %d stamped on the file and checked against it" % CONVERTERS_OPSET

    def code(self, work):
        symbol, params = work.files()
        inputs = work.manifest.get("inputs") or []
        shapes = [onnx_export.input_shape(i, work.manifest) for i in inputs]
        return self.user_code.strip().format(
            symbol=symbol,
            params=params,
            shapes=shapes,
            types="[%s]" % ", ".join("np.%s" % i.get("dtype", "float32") for i in inputs),
            dynamic=[(None,) + s[1:] for s in shapes],
        )
